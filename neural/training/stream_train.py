"""Training the stream networks (every family of context "stream": the LSTM, the GRU, the Transformer):
lanes of the continuous stream, atomic checkpoints, exact resume. `neural.training.train.train_nplm`
hands them here with the one run configuration (`neural.config.NPLMConfig`).

Data. The training stream, preceded by PAD (`neural.networks.stream.padded_inputs`), is cut into
`batch_size` lanes, contiguous pieces of equal length, one batch row each (Zaremba et al.'s layout); an update reads the
next `steps` inputs of every lane (the LSTM's truncated back-propagation length, or the Transformer's
context L) and predicts the tokens they precede. The LSTM carries its state (h, c), detached, from one
update to the next, so within an epoch every token is read with all of its lane's history; the
Transformer starts each window afresh. Epoch e starts the lanes `offset_e` tokens into the stream,
drawn in [0, steps) from (seed, e), so the cuts between windows move from epoch to epoch.

The recipe (the family's `run_defaults`, one for every corpus; docs/networks.md gives the reasons): AdamW
(Loshchilov & Hutter 2019) at `lr`, the schedule "cosine": a linear warm-up over the first `warmup_steps` updates, then a cosine decay to
`final_lr_fraction` of it at the end of the last of `epochs` epochs (a fixed budget, the schedule of
nanoGPT), the gradient's norm clipped at `clip`, decoupled weight decay on the matrices only. After
every epoch the exact perplexity of the first `valid_tokens` tokens of valid picks the best model.
The loss is any objective of `neural.outputs.objectives` but the class one: the full softmax, or a sampled one
(k words drawn per update, shared by its B x steps positions), which keeps training fast on CPUs.

A checkpoint (checkpoint.pt, atomic, after every epoch and every `checkpoint_minutes`) holds the model,
the optimizer, the RNG states (torch, the sampler), the carried state of the lanes, the epoch, the
position within it and the running sums, so a resumed run continues as the uninterrupted one would.
A non-finite loss or validation perplexity stops the run in one line; the last good checkpoint stays.
The best model goes to best.pt, per-epoch figures to log.jsonl, the final ones to result.json, and the
best model's log-probabilities of valid and test to logprobs.npz (`lmbench mix RUN/logprobs.npz KN.npz`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch

from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text
from lmbench.memory import check_training_fits
from lmbench.model import perplexity
from mixing.saved import save as save_logprobs, scored_splits
from neural.families import family as family_entry
from neural.config import OBJECTIVES, NPLMConfig
from neural.training.loop import RunState, run_epochs, write_log
from neural.outputs.objectives import make_objective
from neural.training.recipe import resolve_device
from neural.training.team import build_network
from neural.networks.stream import StreamLanguageModel, StreamNetwork, padded_inputs
from neural.training.train import (BEST, CHECKPOINT, LOG, RESULT, SHRINK, atomic_save, check_finite, nan_error,
                                   read_checkpoint)

log = logging.getLogger(__name__)

LOGPROBS = "logprobs.npz"  # the best model's per-token log-probabilities of valid and test (mixing.saved)

def build_stream_network(family: str, vocab_size: int, shape, dropout: float = 0.0) -> StreamNetwork:
    """The network of `family` (`neural.families`; `neural.training.team.build_network`), its full softmax."""
    return build_network(family_entry(family), shape, vocab_size, dropout=dropout)


def steps_of(net: StreamNetwork, config: NPLMConfig) -> int:
    """Inputs per lane per update: --steps, else a window network's context, a recurrent one's 35."""
    if config.steps is not None:
        if net.history is None and getattr(net.shape, "length", config.steps) < config.steps:
            raise LMBenchError(f"--steps {config.steps} is longer than the network's context "
                               f"{net.shape.length}: give at most that")
        return config.steps
    return getattr(net.shape, "length", 35)  # a window network reads its context, a recurrent one 35


def learning_rate(config: NPLMConfig, step: int, total: int) -> float:
    """lr (step + 1) / warmup_steps during the warm-up, then lr (f + (1 - f)(1 + cos(pi p)) / 2), p the
    fraction of the `total` updates after the warm-up done, f = final_lr_fraction."""
    if step < config.warmup_steps:
        return config.peak_lr * (step + 1) / config.warmup_steps
    done = min(1.0, (step - config.warmup_steps) / max(1, total - config.warmup_steps))
    fraction = config.final_lr_fraction
    return config.peak_lr * (fraction + (1 - fraction) * 0.5 * (1 + math.cos(math.pi * done)))


def lane_layout(length: int, lanes: int, steps: int, offset: int) -> tuple[int, int]:
    """(lane length, updates an epoch) for a training stream of `length` tokens read from `offset`."""
    lane = (length - offset) // lanes
    if lane < 2:
        raise LMBenchError(f"the training split ({length} tokens) is too short for {lanes} lanes: give "
                           "fewer --batch-size (the lanes)")
    return lane, math.ceil(lane / steps)


def read_stream_checkpoint(path: Path, fingerprint: str, family: str | None = None,
                           shape: dict | None = None) -> dict:
    """A checkpoint or best model (`neural.training.train.read_checkpoint`: readable, of this vocabulary), refused
    (one line) when made for another network than `family` of `shape`."""
    saved = read_checkpoint(path, fingerprint)
    if family is not None and (saved.get("family"), saved.get("network")) != (family, shape):
        raise LMBenchError(f"checkpoint {path} holds a {saved.get('family')} network {saved.get('network')}, "
                           f"not the {family} {shape} asked: resume with its options or use another --out")
    return saved


def train_stream(corpus, config: NPLMConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True,
                 evaluate: bool = True, team=None) -> dict:
    """The trainer of the stream families (`neural.families`; `neural.training.train.train_nplm` hands them
    here): train a config.model network of config.shape on corpus.train, validate on corpus.valid, write
    the run into out_dir and return its figures (valid/test perplexity of the best model when `evaluate`,
    tokens/s, seconds, epochs). One process (`team` is unused)."""
    run = StreamTrainer(corpus, config, Path(out_dir), resume=resume)
    run_epochs(run, epochs=config.epochs, max_steps=config.max_steps, checkpoint_minutes=config.checkpoint_minutes,
               progress=progress, desc=f"{config.model} epoch", postfix_every=20)
    return finish(corpus, config, run.state, run.out, evaluate, progress)


class StreamTrainer:
    """The run of a stream network (`neural.training.loop.Trainer`): the network, objective and AdamW of
    `config`, resumed from out/checkpoint.pt when `resume`, and the hooks of `neural.training.loop.run_epochs`."""

    def __init__(self, corpus, config: NPLMConfig, out: Path, *, resume: bool):
        out.mkdir(parents=True, exist_ok=True)
        family, shape = config.model, config.shape
        self.family, self.config, self.out = family, config, out
        self.device = device = resolve_device(config.device, config.threads)
        self.fingerprint = corpus.vocab.fingerprint()
        self.vocab_size = vocab_size = len(corpus.vocab)
        torch.manual_seed(config.seed)
        check_training_fits(lambda: build_stream_network(family, vocab_size, shape, config.dropout), device,
                            config.samples if OBJECTIVES[config.objective].sampled else 0,
                            what=f"the {family} network of {shape} over {vocab_size:,} words", fix=SHRINK)
        self.net = net = build_stream_network(family, vocab_size, shape, config.dropout)
        self.network_args = dataclasses.asdict(net.shape)
        counts = np.bincount(corpus.train, minlength=vocab_size) + 1.0
        unigram = torch.from_numpy(counts / counts.sum())  # (V,) add-one unigram of train: q
        net.set_unigram_biases(unigram)
        net.to(device)
        self.sampler = torch.Generator(device=device)
        self.sampler.manual_seed(config.seed)
        self.objective = make_objective(config.objective, unigram.float().to(device), config.samples, self.sampler)
        self.optimizer = torch.optim.AdamW([{"params": net.decay_parameters(), "weight_decay": config.weight_decay},
                                            {"params": net.bias_parameters(), "weight_decay": 0.0}],
                                           lr=config.peak_lr, betas=(0.9, 0.99))
        self.steps = steps_of(net, config)
        self.state = RunState()
        self.carried = None  # the LSTM's (h, c) of the lanes between updates
        self.checkpoint_path = out / CHECKPOINT
        if self.checkpoint_path.exists():
            if not resume:
                raise LMBenchError(f"{out} already holds a run ({CHECKPOINT}): pass --resume to continue it or "
                                   "choose another --out directory")
            self.restore()
        self.inputs = torch.from_numpy(padded_inputs(corpus.train)).to(device)  # (T + 1,): inputs[t] -> train[t]
        self.targets = torch.from_numpy(corpus.train.astype(np.int64)).to(device)  # (T,)
        self.valid_stream, self.valid_start = corpus.stream_for("valid")
        if config.valid_tokens is not None:
            self.valid_stream = self.valid_stream[: self.valid_start + config.valid_tokens]
        self.total_updates = lane_layout(len(self.targets), config.batch, self.steps, 0)[1] * config.epochs  # schedule

    def restore(self) -> None:
        path, device = self.checkpoint_path, self.device
        saved = read_stream_checkpoint(path, self.fingerprint, self.family, self.network_args)
        if (saved["lanes"], saved["steps"]) != (self.config.batch, self.steps):
            raise LMBenchError(f"checkpoint {path} was trained with --batch-size {saved['lanes']} (lanes) "
                               f"--steps {saved['steps']}: resume with the same, or use another --out")
        self.net.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        self.sampler.set_state(saved["sampler_rng"])
        if device.type == "cuda" and saved.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(saved["cuda_rng"], device)
        self.state = RunState.restored(saved["state"], path)
        self.carried = None if saved["carried"] is None else tuple(s.to(device) for s in saved["carried"])

    def save_checkpoint(self) -> None:
        model, device, carried = self.net.state_dict(), self.device, self.carried
        if not all(torch.isfinite(t).all() for t in model.values()):
            raise nan_error(self.state.step, self.checkpoint_path)
        atomic_save({"model": model, "optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                     "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                     "sampler_rng": self.sampler.get_state(), "state": self.state.saved(),
                     "carried": None if carried is None else tuple(s.cpu() for s in carried),
                     "family": self.family, "network": self.network_args,
                     "config": dataclasses.asdict(self.config), "fingerprint": self.fingerprint,
                     "vocab_size": self.vocab_size, "lanes": self.config.batch, "steps": self.steps},
                    self.checkpoint_path)

    def begin_epoch(self) -> int:
        config = self.config
        offset = int(np.random.default_rng([config.seed, self.state.epoch]).integers(0, self.steps))
        self.lane, updates = lane_layout(len(self.targets), config.batch, self.steps, offset)
        self.starts = offset + self.lane * torch.arange(config.batch, device=self.device)  # (B,) lanes' first targets
        self.net.train()
        return updates

    def update(self) -> tuple[float, int]:
        config, net, device, optimizer = self.config, self.net, self.device, self.optimizer
        lo = self.state.position * self.steps
        width = min(self.steps, self.lane - lo)
        index = self.starts[:, None] + lo + torch.arange(width, device=device)[None, :]  # (B, width)
        rate = learning_rate(config, self.state.step, self.total_updates)
        for group in optimizer.param_groups:
            group["lr"] = rate
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
            z, carried = net.encode(self.inputs[index], self.carried)  # (B, width, K)
        loss = self.objective.loss(net, z.reshape(-1, z.shape[-1]).to(net.out.dtype),
                                   self.targets[index].reshape(-1), bf16=config.bf16)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        value = loss.item()
        if not math.isfinite(value):
            raise nan_error(self.state.step, self.checkpoint_path, value)
        torch.nn.utils.clip_grad_norm_(net.parameters(), config.clip)
        optimizer.step()
        self.carried = None if carried is None else tuple(s.detach() for s in carried)
        return value, index.numel()

    def end_epoch(self) -> None:
        """Validation perplexity, the log line and the best model."""
        config, state, net = self.config, self.state, self.net
        self.carried = None  # the next epoch's lanes start elsewhere
        valid_ppl = perplexity(net.score_stream(self.valid_stream, self.valid_start, bf16=config.bf16))
        if not math.isfinite(valid_ppl):
            raise nan_error(state.step, self.checkpoint_path, valid_ppl, "the validation perplexity")
        record = state.record(learning_rate(config, state.step, self.total_updates), valid_ppl,
                              len(self.valid_stream) - self.valid_start, not OBJECTIVES[config.objective].sampled)
        log.info("%s epoch %d: train loss %.4f, valid ppl %.2f, %.0f tokens/s, %.0f s", self.family, record["epoch"],
                 record["train_loss"], valid_ppl, record["tokens_per_s"], record["seconds"])
        write_log(self.out / LOG, state.history)
        if state.improves(valid_ppl):
            atomic_save({"model": net.state_dict(), "family": self.family, "network": self.network_args,
                         "config": dataclasses.asdict(config), "fingerprint": self.fingerprint,
                         "vocab_size": net.vocab_size, "epoch": record["epoch"], "valid_perplexity": valid_ppl},
                        self.out / BEST)
        state.next_epoch()


def finish(corpus, config, state: RunState, out, evaluate: bool, progress: bool = False) -> dict:
    """The run's figures; with `evaluate`, the exact perplexities of the best model on every split (a bar
    while they are scored when `progress`)."""
    result = {"out": str(out), "objective": config.objective, **state.figures(), "config": dataclasses.asdict(config)}
    if not state.history:
        return result
    if evaluate:
        model = load_stream(out, corpus, device=config.device, bf16=config.bf16, threads=config.threads,
                            progress=progress)
        started = time.perf_counter()
        scores = scored_splits(model, corpus)  # (train is not scored: as long as both together, and no row needs it)
        result["eval_seconds"] = time.perf_counter() - started
        for split, logprobs in scores.items():
            result[f"{split}_perplexity"] = perplexity(logprobs)
        check_finite(result, out)
        save_logprobs(out / LOGPROBS, scores, corpus)  # the input of `lmbench mix`
        result["logprobs"] = str(out / LOGPROBS)
    result["best_epoch"] = int(np.argmin([r["valid_perplexity"] for r in state.history])) + 1
    atomic_write_text(out / RESULT, json.dumps(result, indent=1))
    return result


def load_stream(out_dir: str | Path, corpus, *, device: str = "auto", bf16: bool = False,
                which: str = BEST, threads: int | None = None, progress: bool = False) -> StreamLanguageModel:
    """The best model of a run (or its last checkpoint, which=CHECKPOINT), checked against the vocabulary of
    `corpus`, the corpus it was trained on; `progress`: its scoring shows a bar (lmbench.progress)."""
    path = Path(out_dir) / which
    if not path.exists():
        raise LMBenchError(f"no {which} in {out_dir}: train there first, or let the run finish one epoch")
    saved = read_stream_checkpoint(path, corpus.vocab.fingerprint())
    net = build_stream_network(saved["family"], saved["vocab_size"], saved["network"])  # (dropout: training only)
    net.load_state_dict(saved["model"])
    return StreamLanguageModel(net.to(resolve_device(device, threads)), bf16=bf16, progress=progress)

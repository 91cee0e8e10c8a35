"""The one trainer of every family, with atomic checkpoints and exact resume.

`train_network(corpus, config, out)` trains config.model's network (`neural.families`) of config.shape on
corpus.train, validates it on corpus.valid after every epoch, keeps the best model on valid and writes
the run into `out`. Its length is the recipe's (`epochs`, or fewer where the recipe stops on valid), or
a compute budget of `budget_updates` updates: the rate schedule then decays to the budget's last update,
the epoch in which it runs out ends (and is validated) there, and early stopping still applies within it. What differs between families comes from them, not from a second trainer:
- the batches, by the network's context (`neural.training.batches`: shuffled windows, or lanes of the
  stream with a state carried between updates);
- the recipe's optimizer and rate schedule (`neural.training.recipe`: coupled-decay SGD under the paper's
  decay, the halving rule or a linear budget; AdamW under a warm-up and cosine decay), whose defaults a
  family gives in its shape's `run_defaults`;
- the training loss over the network's output layer (`neural.outputs.objectives`);
- exact scoring, for validation and the final figures (`neural.scoring`).
Every run starts the output biases b at the log of the add-one unigram frequencies of train, which is
also the proposal and noise distribution q of the sampled objectives.

Data order: epoch e visits the batches in the order drawn from seed and e, so a resumed run needs only the
epoch, the position within it and the state a recurrent network carries. A checkpoint (checkpoint.safetensors,
after every epoch and every `checkpoint_minutes`; `neural.training.checkpoint`) holds the model, the
optimizer, every random state, the run's state (`TrainState`) and the configuration. The best model on
validation is saved apart (best.safetensors). Neither holds code (safetensors). Per-epoch figures go to log.jsonl, the final ones to result.json,
and, when the run is scored, the best model's per-token log-probabilities of valid and test to
logprobs.npz (`lmbench mix RUN/logprobs.npz KN.npz`).

On several processes (config.parallel, under torchrun) the loop is the same: the hooks of
`neural.training.team.Team` (`neural.parallel.teams`'s teams) split the minibatch or the output layer,
sum the gradients, and have rank 0 write the files, in the single-process format.

`measure_pace(corpus, config)` times the same run on this machine instead of making it: a few of its
updates and the exact scoring of a slice of valid, seconds in all (`Pace`). `lmbench reproduce` measures
every network row so before any row runs, for its estimate and its compute budget (`reports.running.estimate`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from corpora.record import corpus_digest
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text
from lmbench.memory import check_training_fits
from lmbench.model import perplexity
from neural.config import OBJECTIVES, RunConfig
from neural.families import load
from neural.outputs.objectives import make_objective
from neural.precision import autocast
from neural.scoring import score_split
from neural.training.batches import batches_for
from neural.training.checkpoint import (BEST, CHECKPOINT, LOG, LOGPROBS, RESULT, Advice, atomic_save,
                                        check_finite, found, load_network, nan_error, read_checkpoint,
                                        saved_file)
from neural.training.loop import RunState, run_epochs, write_log
from neural.training.recipe import learning_rate, make_optimizer, next_epoch_rate, resolve_device
from neural.training.team import Team

log = logging.getLogger(__name__)

SHRINK = ("lower the window --n, the sizes --m and --h (--samples), or the vocabulary (--vocab-size, --min-count), "
          "or train on a larger device")

# A network's pace (`measure_pace`): at least WARMUP_UPDATES updates and WARMUP_SECONDS run before timing (its
# first updates allocate and set up its kernels), then at least TIMED_UPDATES updates and TIMED_SECONDS timed. A
# window of a count alone was too short for the paper's shapes (3-6 ms an update: 4 updates erred by -15% to
# +29% against the steady pace, bench/pace_check.py, docs/measurements.md).
WARMUP_UPDATES, WARMUP_SECONDS = 2, 0.5
TIMED_UPDATES, TIMED_SECONDS = 4, 2.0
SCORED_TOKENS = 20_000  # a network's exact scoring speed: timed on at most this many valid tokens


@dataclass
class TrainState(RunState):
    """Where a run stands (`neural.training.loop.RunState`) and its recipe's schedule."""

    bad_epochs: int = 0  # epochs since the best validation perplexity (the paper recipe's early stopping)
    rate: float = 0.0  # the halving schedule's rate of the current epoch (`neural.training.recipe.next_epoch_rate`)
    annealing: bool = False  # whether the halving schedule halves the rate every epoch now
    decay_pending: int = 0  # updates whose coupled weight decay is not applied yet (`Recipe.decay_every`)


def join(mode: str | None, vocab_size: int, *, device: str = "auto", backend: str = "auto",
         threads: int | None = None) -> Team:
    """The team of this run: one process when mode is None, else this process's place in the process
    group of --parallel `mode` (`neural.parallel.teams.connect`)."""
    if mode is None:
        return Team(device=resolve_device(device, threads))
    from neural.parallel.teams import connect
    return connect(mode, vocab_size, device=device, backend=backend, threads=threads)


def train_network(corpus, config: RunConfig, out_dir: str | Path, *, resume: bool = False,
                  progress: bool = True, evaluate: bool = True, team: Team | None = None,
                  advice: Advice = Advice()) -> dict:
    """Train on corpus.train, validate on corpus.valid, write the run into out_dir and return the figures:
    train/valid/test perplexity of the best model (when `evaluate`; a caller that scores the splits itself
    passes False), tokens/s, seconds, epochs, why it stopped. `team`: the processes of a parallel run
    (default: those config.parallel asks for, joined here); `advice`: what a stopped run's line tells its
    user to do, in the words of the command that trains it."""
    team = team or join(config.parallel, len(corpus.vocab), device=config.device, backend=config.backend,
                        threads=config.threads)
    run = Trainer(corpus, config, Path(out_dir), team, resume=resume, progress=progress and team.writer,
                  advice=advice)
    budget = config.budget_updates  # (an epoch has at least one update: as many epochs as updates are enough)
    run_epochs(run, epochs=config.epochs if budget is None else budget, max_steps=config.max_steps,
               checkpoint_minutes=config.checkpoint_minutes, progress=run.progress, desc=f"{config.model} epoch",
               together=team.any, budget=budget)
    return finish(corpus, config, run.state, run.out, team, evaluate, run.progress)


@dataclass
class Pace:
    """A network's pace on this machine (`measure_pace`): seconds per training update, training tokens per
    update, updates per epoch, seconds per exactly scored token."""
    update_seconds: float
    update_tokens: float
    epoch_updates: int
    score_seconds: float


def measure_pace(corpus, config: RunConfig, advice: Advice = Advice()) -> Pace:
    """The pace of a network of `config` on `corpus`, in one process at config.threads on config.device: the
    first updates of its first epoch in a throw-away folder (a warm-up, then the timed ones), then the exact
    scoring of the first SCORED_TOKENS tokens of valid. `advice`: what a refusal of the network's training
    tells the user to do, in the words of the command that will train it."""
    team = join(None, len(corpus.vocab), device=config.device, threads=config.threads)
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(corpus, config, Path(folder), team, resume=False, progress=False, advice=advice)
        updates = trainer.begin_epoch()

        def run(least: int, seconds: float, end: int) -> tuple[int, int, float]:
            """(updates, tokens, seconds): at least `least` updates and `seconds`, up to position `end`."""
            done, tokens, started = 0, 0, time.perf_counter()
            while trainer.state.position < end and (done < least or time.perf_counter() - started < seconds):
                tokens += trainer.update()[1]
                trainer.state.position += 1
                done += 1
            return done, tokens, time.perf_counter() - started

        run(WARMUP_UPDATES, WARMUP_SECONDS, updates - 1)  # (one update left to time at least)
        timed, tokens, seconds = run(TIMED_UPDATES, TIMED_SECONDS, updates)
        stream, start = corpus.stream_for("valid", history=trainer.net.history)
        stream = stream[:start + SCORED_TOKENS]
        started = time.perf_counter()
        team.score_stream(trainer.net, stream, start, batch_size=config.eval_batch)
        score_seconds = (time.perf_counter() - started) / (len(stream) - start)
    return Pace(seconds / timed, tokens / timed, trainer.batches.updates_per_epoch, score_seconds)


class Trainer:
    """The run of any network (`neural.training.loop.Trainer`): the network, objective, optimizer and
    batches of `config`, resumed from out/checkpoint.safetensors when `resume`, and the hooks of
    `neural.training.loop.run_epochs`."""

    def __init__(self, corpus, config: RunConfig, out: Path, team: Team, *, resume: bool, progress: bool,
                 advice: Advice = Advice()):
        out.mkdir(parents=True, exist_ok=True)
        self.config, self.out, self.team, self.progress, self.advice = config, out, team, progress, advice
        self.checkpoint_path = out / CHECKPOINT
        self.fingerprint = corpus.vocab.fingerprint()
        self.corpus_digest = corpus_digest(corpus)  # (in each file it writes: a work folder's row compares it)
        vocab_size = len(corpus.vocab)
        torch.manual_seed(config.seed)  # the same on every process: the network starts the same everywhere
        np.random.seed(config.seed)
        self.net = net = self.build(corpus, progress)
        counts = np.bincount(corpus.train, minlength=vocab_size) + 1.0
        unigram = torch.from_numpy(counts / counts.sum())  # (V,) add-one unigram of train: q
        net.set_unigram_biases(unigram)  # start from the unigram: b = log q (b_c = log q(c); energy: b = -log q)
        net.to(team.device)
        self.sampler = torch.Generator(device=team.device)
        self.sampler.manual_seed(config.seed)
        self.objective = make_objective(config.objective, unigram.float().to(team.device), config.samples,
                                        self.sampler)
        self.optimizer = make_optimizer(net, config)
        self.batches = batches_for(net, corpus.train, config, team, advice)
        self.total_updates = config.budget_updates or self.batches.updates_per_epoch * config.epochs  # the schedules' length
        self.state = TrainState(rate=config.peak_lr)
        saved = team.from_rank0(lambda: self.read_resumed(resume))  # read on rank 0, sent to every process
        if saved is not None:
            self.restore(saved)
        self.valid_stream, self.valid_start = corpus.stream_for("valid", history=net.history)
        if config.valid_tokens is not None:  # the epochs' validation: a prefix of valid, the same every epoch
            self.valid_stream = self.valid_stream[:self.valid_start + config.valid_tokens]

    def build(self, corpus, progress: bool):
        """The network of config.model and config.shape over corpus.vocab, with the output layer of
        config.objective (`neural.config.OBJECTIVES`) over the word structure it makes from train (the
        word classes, the tree); under --parallel vocab this process's block of it. Refused in one line
        when training it would not fit the device's memory."""
        config, team = self.config, self.team
        objective = OBJECTIVES[config.objective]
        structure = load(objective.structure)(corpus, config, progress=progress) if objective.structure else None

        def make():
            return team.network(config.model, config.shape, len(corpus.vocab), output=objective.output,
                                structure=structure, dropout=config.dropout)
        check_training_fits(make, team.device, config.samples if objective.sampled else 0, what=f"the {config.model} "
                            f"network of {config.shape} over {len(corpus.vocab):,} words", fix=SHRINK)
        return make()

    # -- checkpoints ----------------------------------------------------------------------------------

    def read_resumed(self, resume: bool) -> dict | None:
        """The checkpoint to resume (None: a new run), refused when it is not this run's."""
        path = self.checkpoint_path
        if found(path) is None:  # (nor one of the older format: read and converted)
            return None
        if not resume:
            raise LMBenchError(f"{self.out} already holds a run ({found(path).name}): pass --resume to continue it "
                               "or choose another --out directory")
        saved = read_checkpoint(path, self.fingerprint, self.config, fix=self.advice.other)
        other = ([f"seed {saved['config']['seed']} (this run's: {self.config.seed})"]
                 if saved["config"].get("seed", self.config.seed) != self.config.seed else [])
        if saved.get("corpus", self.corpus_digest) != self.corpus_digest:  # (an older file records none)
            other.append(f"trained on corpus {saved['corpus']} (this run's: {self.corpus_digest})")
        if other:  # (another run's or seed's checkpoint in this run's place: resumed, it would end as neither)
            raise LMBenchError(f"checkpoint {path} is another run's: {', '.join(other)}; " + (
                self.advice.other or "resume it with the corpus and --seed it was trained with, or use another --out"))
        layout = (saved.get("batch", self.batches.batch), saved.get("steps"))
        if layout != (self.batches.batch, getattr(self.batches, "steps", None)):
            raise LMBenchError(f"checkpoint {path} was trained with {layout[0]} windows or lanes per update"
                               + (f" of {layout[1]} steps" if layout[1] else "") + ": resume with the same "
                               "--batch-size (--steps; with --parallel data: --batch-size times the processes)")
        return saved

    def restore(self, saved: dict) -> None:
        self.net.load_state_dict(saved["model"])
        self.optimizer.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        if saved.get("numpy_rng") is not None:
            np.random.set_state(saved["numpy_rng"])
        self.sampler.set_state(saved["sampler_rng"])
        device = self.team.device
        if device.type == "cuda" and saved.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(saved["cuda_rng"], device)
        self.state = TrainState.restored(saved["state"], self.checkpoint_path)
        carried = saved.get("carried")
        self.batches.carried = None if carried is None else tuple(s.to(device) for s in carried)
        if saved["config"]["lr"] != self.config.lr:  # a new --lr (after a NaN, say) restarts the schedule there
            self.state.rate = self.config.peak_lr

    def save_checkpoint(self) -> None:
        model, device, carried = self.team.state_dict(self.net), self.team.device, self.batches.carried

        def write() -> None:
            if not all(torch.isfinite(t).all() for t in model.values()):
                raise nan_error(self.state.step, self.checkpoint_path, advice=self.advice)
            atomic_save(saved_file(self.net, self.config, self.fingerprint, model=model, corpus=self.corpus_digest,
                                   optimizer=self.optimizer.optimizer.state_dict(), torch_rng=torch.get_rng_state(),
                                   cuda_rng=torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                                   numpy_rng=np.random.get_state(), sampler_rng=self.sampler.get_state(),
                                   state=self.state.saved(),
                                   carried=None if carried is None else tuple(s.cpu() for s in carried),
                                   batch=self.batches.batch, steps=getattr(self.batches, "steps", None)),
                        self.checkpoint_path, self.advice)
        self.team.from_rank0(write)

    # -- the loop's hooks -----------------------------------------------------------------------------

    def begin_epoch(self) -> int:
        self.net.train()
        return self.batches.begin_epoch(self.state.epoch)

    def update(self) -> tuple[torch.Tensor, int]:
        """One update; its loss is left on the device (`neural.training.loop.PendingLosses` reads it)."""
        state, net = self.state, self.net
        rate = self.rate()
        for group in self.optimizer.optimizer.param_groups:
            group["lr"] = rate
        self.optimizer.optimizer.zero_grad(set_to_none=True)
        loss, tokens, share = self.forward_backward()
        loss = self.team.sum_gradients(net, loss, share)  # the minibatch's loss and gradients
        self.optimizer.step(state, rate)
        self.batches.detach()
        return loss, tokens

    def diverged(self, step: int, loss: float) -> LMBenchError:
        """Update `step`'s loss was NaN or inf: the run stops in one line, its last good checkpoint kept."""
        return nan_error(step, self.checkpoint_path, loss, advice=self.advice)

    def forward_backward(self) -> tuple[torch.Tensor, int, float]:
        """The next minibatch's loss, its gradients accumulated into the network's (its training FLOPs,
        `neural.training.flops`), the tokens it counts and this process's share of it."""
        config, net = self.config, self.net
        bf16 = config.precision == "bf16"  # products in bfloat16, the fp32 weights' gradients (neural.precision)
        with autocast(self.team.device.type, config.precision):
            z, targets, tokens, share = self.batches.features(net, self.state.position, bf16)
            loss = self.objective.loss(net, z, targets, bf16=bf16)
        loss.backward()
        return loss, tokens, share

    def rate(self) -> float:
        """The learning rate of the next update (`neural.training.recipe.learning_rate`)."""
        return learning_rate(self.config, self.state.step, self.state.rate, self.total_updates)

    def end_epoch(self) -> None:
        """What the epoch left to settle (the coupled decay; the carried state), then validation
        perplexity, the log line, the best model, the next rate and early stopping."""
        config, state, team, net = self.config, self.state, self.team, self.net
        self.optimizer.settle(state, self.rate())
        self.batches.end_epoch()
        team.sync_replicas(net)
        valid_ppl = perplexity(team.score_stream(net, self.valid_stream, self.valid_start,
                                                 batch_size=config.eval_batch))
        if not math.isfinite(valid_ppl) or not math.isfinite(state.loss_sum):  # diverged, not yet NaN
            raise nan_error(state.step, self.checkpoint_path, valid_ppl, "the validation perplexity",
                            advice=self.advice)
        train_tokens = state.tokens
        record = state.record(self.rate(), valid_ppl, len(self.valid_stream) - self.valid_start,
                              not OBJECTIVES[config.objective].sampled)
        log.info("%s epoch %d: train loss %.4f (running), valid ppl %.2f, %.0f tokens/s, %.0f s, lr %.3g",
                 config.model, record["epoch"], record["train_loss"], valid_ppl, record["tokens_per_s"],
                 record["seconds"], record["lr"])
        if team.writer:
            write_log(self.out / LOG, state.history)
        gain = 1.0 - valid_ppl / state.best_valid  # -inf .. 1; 1 - 0 for the first epoch
        if state.improves(valid_ppl):
            state.bad_epochs = 0
            model = team.state_dict(net)
            if team.writer:
                atomic_save(saved_file(net, config, self.fingerprint, model=model, epoch=record["epoch"],
                                       valid_perplexity=valid_ppl, corpus=self.corpus_digest),
                            self.out / BEST, self.advice)
        else:
            state.bad_epochs += 1
        if config.recipe == "paper":
            if state.bad_epochs >= config.patience:
                state.stopped = "early_stopping"
        else:
            state.rate, state.annealing, converged = next_epoch_rate(config, state.rate, state.annealing, gain,
                                                                     train_tokens)
            if converged:
                state.stopped = "converged"
        state.next_epoch()


def finish(corpus, config: RunConfig, state: TrainState, out: Path, team: Team, evaluate: bool = True,
           progress: bool = False) -> dict:
    """The run's figures, with the train, valid and test perplexities of the best model when `evaluate`
    (its per-token log-probabilities of valid and test then in logprobs.npz, the input of `lmbench mix`;
    a bar while they are scored when `progress`)."""
    from mixing.saved import save as save_logprobs
    result = {"out": str(out), "recipe": config.recipe, "objective": config.objective, **state.figures(),
              "config": dataclasses.asdict(config)}
    if not state.history:  # stopped inside the first epoch: nothing validated yet
        return result
    if evaluate:
        model = load_network(out, corpus, team=team, progress=progress)  # (fp32, whatever it trained in)
        started = time.perf_counter()
        scores = {split: score_split(model, corpus, split, team) for split in ("train", "valid", "test")}
        result["eval_seconds"] = time.perf_counter() - started
        for split, logprobs in scores.items():
            result[f"{split}_perplexity"] = perplexity(logprobs)
        check_finite(result, out)
        if team.writer:
            save_logprobs(out / LOGPROBS, {split: scores[split] for split in ("valid", "test")}, corpus)
            result["logprobs"] = str(out / LOGPROBS)
    result["best_epoch"] = int(np.argmin([r["valid_perplexity"] for r in state.history])) + 1
    if team.writer:
        atomic_write_text(out / RESULT, json.dumps(result, indent=1))
    return result

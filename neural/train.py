"""Training the NPLM: the loop, with atomic checkpoints and exact resume.

The recipes (how the learning rate moves, the batch, the weight decay) are in `neural.recipe`, the
training losses over the output layer in `neural.objectives`; this file runs them. Both recipes start
the output biases b at the log of the add-one unigram frequencies of train, which is also the proposal
and noise distribution q of the sampled objectives.

Data order: epoch e visits the training windows in the permutation drawn from seed and e, so a
resumed run needs only the epoch and the position within it. A checkpoint (checkpoint.pt, written
to a temporary file then os.replace'd, after every epoch and every `checkpoint_minutes`) holds the
model, optimizer state, the RNG states (torch, numpy and the objective's sampler), epoch, position,
update count, the running sums of the epoch, the history, the config and the vocabulary fingerprint.
The best model on validation is saved apart (best.pt). Per-epoch figures go to log.jsonl, the final
ones to result.json.

On several processes (config.parallel, under torchrun) the loop is the same: the hooks of
`neural.parallel.Team` split the minibatch or the output layer, sum the gradients, and have rank 0
write the files, in the single-process format.
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
from lmbench.files import atomic_write, atomic_write_text
from lmbench.model import perplexity
from neural.config import OBJECTIVES, RECIPES, NPLMConfig
from neural.families import NetworkShape, family, load
from neural.lm import NPLMLanguageModel, StreamWindows
from neural.objectives import make_objective
from neural.parallel import Team, connect
from neural.recipe import apply_weight_decay, learning_rate, make_optimizer, next_epoch_rate, resolve_device

log = logging.getLogger(__name__)

CHECKPOINT, BEST, LOG, RESULT = "checkpoint.pt", "best.pt", "log.jsonl", "result.json"
__all__ = ["NPLMConfig", "train_nplm", "load_nplm", "read_checkpoint", "CHECKPOINT", "BEST"]


def atomic_save(obj, path: Path) -> None:
    """torch.save, atomically: a reader never sees half a checkpoint."""
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def read_checkpoint(path: Path, fingerprint: str, config: NPLMConfig | None = None) -> dict:
    """Load a checkpoint (or best model) and refuse one made for another vocabulary or shape."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError) as err:
        raise LMBenchError(f"cannot read checkpoint {path}: {err}; train again or point at another "
                           "run directory") from err
    if state.get("fingerprint") != fingerprint:
        raise LMBenchError(f"checkpoint {path} was trained on another vocabulary (fingerprint "
                           f"{state.get('fingerprint')} vs this corpus's {fingerprint}): use the corpus "
                           "and corpus options it was trained with, or another --out directory")
    if config is not None:
        saved = state["config"]
        model, shape = saved_network(saved)
        diff = [f"model={model} (asked {config.model})"] if model != config.model else []
        diff += [f"{k}={v} (asked {getattr(config.shape, k, None)})" for k, v in dataclasses.asdict(shape).items()
                 if getattr(config.shape, k, None) != v]
        if diff:
            raise LMBenchError(f"checkpoint {path} has another network shape: {', '.join(diff)}; resume "
                               "with the same --model and shape options (--n, --h, ...) or use another --out "
                               "directory")
        for key in ("recipe", "objective"):
            if saved.get(key) != getattr(config, key):
                raise LMBenchError(f"checkpoint {path} was trained with {key} {saved.get(key)!r}, not "
                                   f"{getattr(config, key)!r}: resume with --{key} {saved.get(key)} or "
                                   "use another --out")
    return state


def saved_network(config: dict) -> tuple[str, NetworkShape]:
    """The family and shape of a saved config (`dataclasses.asdict` of an NPLMConfig). A checkpoint
    from before the families keeps the shape's fields beside the others (and one from before the energy
    network has no model: an NPLM); a field it lacks has its default."""
    entry = family(config.get("model", "nplm"))
    values = config.get("shape")
    if values is None:
        values = {k: config[k] for k in entry.shape_fields() if k in config}
    return entry.name, entry.shape_of(values)


def build_network(config: NPLMConfig, corpus, team: Team, *, progress: bool = True):
    """The network of config.model and config.shape (`neural.families`) over corpus.vocab, with the
    output layer of config.objective (`neural.config.OBJECTIVES`) over the word structure it makes from
    train (the word classes, the tree); under --parallel vocab this process's block of it."""
    objective = OBJECTIVES[config.objective]
    structure = load(objective.structure)(corpus, config, progress=progress) if objective.structure else None
    return team.network(config.model, config.shape, len(corpus.vocab), output=objective.output,
                        structure=structure, dropout=config.dropout)


def epoch_bar(progress: bool, updates: int, done: int, desc: str):
    """The progress bar of one epoch of `updates` updates, `done` of them already (a resumed epoch);
    None without progress. Both trainers' (this one, neural.stream_train's)."""
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=updates, initial=done, desc=desc, unit="upd", leave=False, mininterval=1.0)


def train_nplm(corpus, config: NPLMConfig, out_dir: str | Path, *, resume: bool = False,
               progress: bool = True, evaluate: bool = True, team: Team | None = None) -> dict:
    """Train on corpus.train, early-stop on corpus.valid, write the run into out_dir and return the
    figures: train/valid/test perplexity of the best model, tokens/s, seconds, epochs. `team`: the
    processes of a parallel run (default: those config.parallel asks for, joined here). A family of
    another context than "window" is trained by its own trainer (`neural.families`)."""
    trainer = family(config.model).trainer
    if trainer is not None:
        return load(trainer)(corpus, config, out_dir, resume=resume, progress=progress, evaluate=evaluate,
                             team=team)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = corpus.vocab.fingerprint()
    vocab_size = len(corpus.vocab)
    team = team or connect(config.parallel, vocab_size, device=config.device, backend=config.backend,
                           threads=config.threads)
    device = team.device
    progress = progress and team.writer

    torch.manual_seed(config.seed)  # the same on every process: the network starts the same everywhere
    np.random.seed(config.seed)
    net = build_network(config, corpus, team, progress=progress)
    counts = np.bincount(corpus.train, minlength=vocab_size) + 1.0
    unigram = torch.from_numpy(counts / counts.sum())  # (V,) add-one unigram of train: q
    net.set_unigram_biases(unigram)  # start from the unigram: b = log q (b_c = log q(c); energy: b = -log q)
    net.to(device)
    sampler = torch.Generator(device=device)
    sampler.manual_seed(config.seed)
    objective = make_objective(config.objective, unigram.float().to(device), config.samples, sampler)
    optimizer = make_optimizer(net, config)
    batch = team.batch(config.batch)  # windows per update, all processes together
    state = {"epoch": 0, "position": 0, "step": 0, "loss_sum": 0.0, "tokens": 0, "seconds": 0.0,
             "best_valid": math.inf, "bad_epochs": 0, "history": [], "stopped": None,
             "rate": config.peak_lr, "annealing": False, "decay_pending": 0}

    checkpoint_path = out / CHECKPOINT

    def read_resumed() -> dict | None:
        if not checkpoint_path.exists():
            return None
        if not resume:
            raise LMBenchError(f"{out} already holds a run ({CHECKPOINT}): pass --resume to continue it "
                               "or choose another --out directory")
        saved = read_checkpoint(checkpoint_path, fingerprint, config)
        saved_config = saved["config"]
        before = saved.get("batch", saved_config["batch_size"] or RECIPES[saved_config["recipe"]].batch)
        if before != batch:
            raise LMBenchError(f"checkpoint {checkpoint_path} was trained with {before} windows per update, "
                               f"not {batch}: resume with the same minibatch (with --parallel data: "
                               "--batch-size times the processes)")
        return saved

    saved = team.from_rank0(read_resumed)  # read on rank 0, sent to every process
    if saved is not None:
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        np.random.set_state(saved["numpy_rng"])
        sampler.set_state(saved["sampler_rng"])
        state = saved["state"]
        if state["stopped"] == "max_steps":  # a deliberate stop: carry on
            state["stopped"] = None
        if saved["config"]["lr"] != config.lr:  # a new --lr (after a NaN, say) restarts the schedule there
            state["rate"] = config.peak_lr
        log.info("resumed %s at epoch %d, update %d", checkpoint_path, state["epoch"] + 1, state["step"])

    def save_checkpoint() -> None:
        model = team.state_dict(net)  # the whole network on rank 0

        def write() -> None:
            if not all(torch.isfinite(t).all() for t in model.values()):
                raise nan_error(state["step"], checkpoint_path)
            atomic_save({"model": model, "optimizer": optimizer.state_dict(),
                         "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(),
                         "sampler_rng": sampler.get_state(), "state": state,
                         "config": dataclasses.asdict(config), "fingerprint": fingerprint,
                         "vocab_size": vocab_size, "batch": batch}, checkpoint_path)
        team.from_rank0(write)

    def settle_decay(rate: float) -> None:
        apply_weight_decay(net, rate, config.weight_decay, state["decay_pending"])
        state["decay_pending"] = 0

    # the (T,) targets of the training stream and their contexts (gathered per minibatch), on the device once
    contexts = StreamWindows(corpus.train, net.history, device)
    targets = torch.from_numpy(corpus.train.astype(np.int64)).to(device)
    steps_per_epoch = math.ceil(len(targets) / batch)
    valid_stream, valid_start = corpus.stream_for("valid", history=net.history)
    if config.valid_tokens is not None:  # the epochs' validation: a prefix of valid, the same every epoch
        valid_stream = valid_stream[:valid_start + config.valid_tokens]

    last_save = time.monotonic()
    while state["epoch"] < config.epochs and state["stopped"] is None:
        epoch = state["epoch"]
        permutation = np.random.default_rng([config.seed, epoch]).permutation(len(targets))
        order = torch.from_numpy(permutation).to(device)  # (T,) this epoch's visiting order
        started = time.perf_counter()
        seconds_before = state["seconds"]
        bar = epoch_bar(progress, steps_per_epoch, state["position"], f"epoch {epoch + 1}")
        net.train()
        while state["position"] < steps_per_epoch:
            if config.max_steps is not None and state["step"] >= config.max_steps:
                state["stopped"] = "max_steps"
                break
            lo = state["position"] * batch
            idx = order[lo: lo + batch]
            lr = learning_rate(config, state["step"], state["rate"])
            for group in optimizer.param_groups:
                group["lr"] = lr
            mine, share = team.shard_batch(idx)  # data-parallel: this process's windows
            loss = objective.loss(net, net.features(contexts[mine]), targets[mine], bf16=config.bf16)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            value = team.sum_gradients(net, loss, share)  # the minibatch's loss and gradients
            if not math.isfinite(value):
                raise nan_error(state["step"], checkpoint_path, value)
            state["decay_pending"] += 1  # p <- p (1 - lr lambda) - lr grad, the decay compounded
            if state["decay_pending"] >= config.decay_every:
                settle_decay(lr)
            optimizer.step()
            state["step"] += 1
            state["position"] += 1
            state["loss_sum"] += value * len(idx)
            state["tokens"] += len(idx)
            state["seconds"] = seconds_before + time.perf_counter() - started
            if bar is not None:
                bar.update(1)
                if state["position"] % 50 == 0:
                    speed = state["tokens"] / max(state["seconds"], 1e-9)
                    bar.set_postfix(loss=f"{state['loss_sum'] / state['tokens']:.3f}", tok_s=f"{speed:.0f}",
                                    refresh=False)
            if team.any(time.monotonic() - last_save > 60 * config.checkpoint_minutes):
                save_checkpoint()
                last_save = time.monotonic()
        if bar is not None:
            bar.close()
        if state["stopped"] is not None:
            break
        settle_decay(learning_rate(config, state["step"], state["rate"]))
        team.sync_replicas(net)
        end_epoch(net, config, state, valid_stream, valid_start, out, fingerprint, team)
        save_checkpoint()
        last_save = time.monotonic()

    save_checkpoint()
    return finish(corpus, config, state, out, team, evaluate)


def nan_error(step: int, checkpoint_path: Path, value: float | None = None,
              quantity: str = "the training loss") -> LMBenchError:
    what = f"{quantity} became {value}" if value is not None else "a parameter became NaN or inf"
    kept = (f"; the last good checkpoint {checkpoint_path} is kept" if checkpoint_path.exists()
            else "; no checkpoint was written yet")
    return LMBenchError(f"{what} at update {step}: lower the learning rate (--lr) and resume (--resume) "
                        f"or start again{kept}")


def end_epoch(net, config, state, valid_stream, valid_start, out, fingerprint, team) -> None:
    """Validation perplexity, the log line, the best model, the next rate and early stopping."""
    valid_ppl = perplexity(team.score_stream(net, valid_stream, valid_start, batch_size=config.eval_batch,
                                             bf16=config.bf16))
    if not math.isfinite(valid_ppl) or not math.isfinite(state["loss_sum"]):  # diverged, not yet NaN
        raise nan_error(state["step"], out / CHECKPOINT, valid_ppl, "the validation perplexity")
    train_tokens = state["tokens"]
    record = {"epoch": state["epoch"] + 1, "step": state["step"],
              "lr": learning_rate(config, state["step"], state["rate"]),
              "train_loss": state["loss_sum"] / train_tokens, "valid_perplexity": valid_ppl,
              "valid_tokens": len(valid_stream) - valid_start, "tokens_per_s": train_tokens / state["seconds"],
              "seconds": state["seconds"],
              "total_seconds": sum(r["seconds"] for r in state["history"]) + state["seconds"]}
    if not OBJECTIVES[config.objective].sampled:  # an exact log-likelihood: its exp is a perplexity
        record["train_perplexity"] = math.exp(record["train_loss"]) if record["train_loss"] < 700 else math.inf
    state["history"].append(record)
    log.info("epoch %d: train loss %.4f (running), valid ppl %.2f, %.0f tokens/s, %.0f s, lr %.3g",
             record["epoch"], record["train_loss"], valid_ppl, record["tokens_per_s"], record["seconds"],
             record["lr"])
    if team.writer:
        atomic_write_text(out / LOG, "".join(json.dumps(r) + "\n" for r in state["history"]))
    gain = 1.0 - valid_ppl / state["best_valid"]  # -inf .. 1; 1 - 0 for the first epoch
    if valid_ppl < state["best_valid"]:
        state["best_valid"], state["bad_epochs"] = valid_ppl, 0
        model = team.state_dict(net)
        if team.writer:
            atomic_save({"model": model, "config": dataclasses.asdict(config), "fingerprint": fingerprint,
                         "vocab_size": net.vocab_size, "epoch": record["epoch"],
                         "valid_perplexity": valid_ppl}, out / BEST)
    else:
        state["bad_epochs"] += 1
    if config.recipe == "paper":
        if state["bad_epochs"] >= config.patience:
            state["stopped"] = "early_stopping"
    else:
        state["rate"], state["annealing"], converged = next_epoch_rate(config, state["rate"], state["annealing"],
                                                                       gain, train_tokens)
        if converged:
            state["stopped"] = "converged"
    state.update(epoch=state["epoch"] + 1, position=0, loss_sum=0.0, tokens=0, seconds=0.0)


def finish(corpus, config, state, out, team, evaluate: bool = True) -> dict:
    """The run's figures, with the train/valid/test perplexities of the best model when `evaluate`
    (a caller that scores the splits itself passes False)."""
    history = state["history"]
    seconds = sum(r["seconds"] for r in history) + state["seconds"]  # with an unfinished epoch's part
    tokens = sum(r["tokens_per_s"] * r["seconds"] for r in history) + state["tokens"]
    result = {"out": str(out), "recipe": config.recipe, "objective": config.objective, "epochs": len(history),
              "updates": state["step"], "stopped": state["stopped"] or "epochs",
              "tokens_per_s": tokens / seconds if seconds else None, "seconds": seconds,
              "config": dataclasses.asdict(config)}
    if not history:  # stopped inside the first epoch: nothing validated yet
        return result
    if evaluate:
        net = load_nplm(out, corpus, bf16=config.bf16, team=team).net
        for split in ("train", "valid", "test"):
            stream, start = corpus.stream_for(split, history=net.history)
            logprobs = team.score_stream(net, stream, start, bf16=config.bf16)
            result[f"{split}_perplexity"] = perplexity(logprobs)
    result["best_epoch"] = int(np.argmin([r["valid_perplexity"] for r in history])) + 1
    if team.writer:
        atomic_write_text(out / RESULT, json.dumps(result, indent=1))
    return result


def load_nplm(out_dir: str | Path, corpus, *, device: str | torch.device = "auto",
              bf16: bool = False, which: str = BEST, threads: int | None = None,
              factored: bool = True, team: Team | None = None) -> NPLMLanguageModel:
    """The best model of a run (or its last checkpoint, which=CHECKPOINT), attached to `corpus`;
    factored=False scores a network with a class layer by the full softmax of y instead. With a
    `team` (which then sets the device): read on rank 0 and placed on every process (under "vocab",
    each its block; all of them then score together)."""
    path = Path(out_dir) / which

    def read() -> dict:
        if not path.exists():
            raise LMBenchError(f"no {which} in {out_dir}: train there first (lmbench nplm train --out "
                               f"{out_dir}), or let it finish one epoch")
        return read_checkpoint(path, corpus.vocab.fingerprint())

    saved = read() if team is None else team.from_rank0(read)
    loader = family(saved["family"]).loader if "config" not in saved and "family" in saved else None
    if loader is not None:  # a family with its own trainer and loader (a stream network, neural/stream_train.py)
        if (team is not None and team.mode is not None) or not factored:
            raise LMBenchError(f"{path} holds a {saved['family']} network: it is scored on one process by its "
                               "own output layer (drop --parallel)")
        return load(loader)(out_dir, corpus, device=team.device if team is not None else device, bf16=bf16,
                            which=which, threads=threads)
    if team is None:
        team = Team(device=device if isinstance(device, torch.device) else resolve_device(device, threads))
    model, shape = saved_network(saved["config"])
    output = OBJECTIVES[saved["config"].get("objective", "softmax")].output  # (no objective: before them)
    structure = family(model).network_class().saved_structure(saved["model"])
    net = team.network(model, shape, saved["vocab_size"], output=output, structure=structure)
    net.load_state_dict(saved["model"])
    return NPLMLanguageModel(net.to(team.device), bf16=bf16, factored=factored).attach(corpus)

"""Training the NPLM: the paper's recipe or a faster one, with atomic checkpoints and exact resume.

Recipes (NPLMConfig.recipe):
- "paper": stochastic gradient ascent on the log-likelihood, one example per update, learning rate
  eps_t = eps0 / (1 + r t) (eps0 = 1e-3, r = 1e-8, t = updates so far), weight decay lambda (1e-4 on
  Brown, 1e-5 on AP) added to the gradient of the weights H, U, W and of C, never of the biases b and
  d (section 4 of the paper), early stopping on validation perplexity.
- "fast" (default): minibatches of 512 shuffled windows, fused AdamW (betas 0.9/0.98, decoupled
  weight decay 1e-4 on the same parameters, none on the biases), peak learning rate 3e-3 with 200
  updates of linear warm-up then cosine decay to zero over the planned epochs, fp32, early
  stopping on validation perplexity. Measured on Brown, MLP1 (n5 h50 m60 direct), 2 CPU cores
  shared with other work: 2 epochs (about 4.3 minutes of training at the 6,300 tokens/s of free
  cores; 19 minutes when the cores were busy) give valid perplexity 340.7; the same with decay
  0.1: 344.3; peak lr 1e-3 over 3 epochs: 356.9; peak lr 6e-3 over 2 epochs: 356.6. The
  network over-fits from the second epoch on (running train perplexity 223 against valid 341):
  more epochs help little with this optimizer. The paper's recipe runs at about 7 updates/s (one example each) on these cores.
Both start the output biases b at the log of the add-one unigram frequencies of train.

Data order: epoch e visits the training windows in the permutation drawn from seed and e, so a
resumed run needs only the epoch and the position within it. A checkpoint (checkpoint.pt, written
to a temporary file then os.replace'd, after every epoch and every `checkpoint_minutes`) holds the
model, optimizer state, torch and numpy RNG states, epoch, position, update count, the running
sums of the epoch, the history, the config and the vocabulary fingerprint. The best model on
validation is saved apart (best.pt). Per-epoch figures go to log.jsonl, the final ones to
result.json.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmbench.errors import LMBenchError
from lmbench.files import atomic_write, atomic_write_text
from lmbench.model import perplexity
from neural.lm import NPLMLanguageModel, context_windows, score_stream
from neural.model import NPLM

log = logging.getLogger(__name__)

RECIPES = ("paper", "fast")
SHAPE_FIELDS = ("n", "m", "h", "direct")
CHECKPOINT, BEST, LOG, RESULT = "checkpoint.pt", "best.pt", "log.jsonl", "result.json"


@dataclass
class NPLMConfig:
    n: int = 5  # context of n-1 words
    m: int = 60  # word feature size
    h: int = 50  # hidden units (0: none)
    direct: bool = True  # direct connections W from x to the output
    recipe: str = "fast"  # "paper" or "fast"
    epochs: int = 10  # the most epochs to run; the fast schedule decays to zero over this many
    batch_size: int | None = None  # None: 1 for paper, 512 for fast
    lr: float | None = None  # None: eps0 = 1e-3 for paper, 3e-3 (peak) for fast
    lr_decay: float = 1e-8  # paper: r in eps0 / (1 + r t)
    warmup_steps: int = 200  # fast: linear warm-up updates
    weight_decay: float = 1e-4  # on the weights and C, never the biases (paper: 1e-4 Brown, 1e-5 AP)
    patience: int = 2  # stop after this many epochs without a better validation perplexity
    dropout: float = 0.0  # fast recipe option: dropout on [tanh(d + Hx), x] while training
    seed: int = 0
    device: str = "auto"  # "auto" (cuda when present, else cpu), "cpu", "cuda", "cuda:1", ...
    bf16: bool = False  # the |V|-sized GEMMs in bfloat16
    threads: int | None = None  # cpu threads; None: all cores
    checkpoint_minutes: float = 5.0  # also checkpoint mid-epoch this often
    max_steps: int | None = None  # stop (with a checkpoint) after this many updates in all
    eval_batch: int = 2048

    def __post_init__(self):
        if self.recipe not in RECIPES:
            raise LMBenchError(f"unknown recipe {self.recipe!r}: use one of {', '.join(RECIPES)}")
        if self.h == 0 and not self.direct:
            raise LMBenchError("h = 0 without direct connections has no path from the context to the "
                               "output: give --h > 0 or --direct")

    @property
    def batch(self) -> int:
        return self.batch_size or (1 if self.recipe == "paper" else 512)

    @property
    def peak_lr(self) -> float:
        return self.lr if self.lr is not None else (1e-3 if self.recipe == "paper" else 3e-3)


def learning_rate(config: NPLMConfig, step: int, total_steps: int) -> float:
    """paper: eps0 / (1 + r t). fast: peak * min(1, (t+1)/warmup) * (1 + cos(pi t / T)) / 2."""
    if config.recipe == "paper":
        return config.peak_lr / (1.0 + config.lr_decay * step)
    warm = min(1.0, (step + 1) / max(1, config.warmup_steps))
    return config.peak_lr * warm * 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))


def make_optimizer(net: NPLM, config: NPLMConfig) -> torch.optim.Optimizer:
    """Weight decay on the weights and C only; the biases b and d are never decayed."""
    groups = [{"params": net.decay_parameters(), "weight_decay": config.weight_decay},
              {"params": net.bias_parameters(), "weight_decay": 0.0}]
    if config.recipe == "paper":  # plain SGD: p -= lr * (grad + lambda p)
        return torch.optim.SGD(groups, lr=config.peak_lr, fused=True)
    # fused: one pass over the parameters instead of one per operation (6x faster on CPU)
    return torch.optim.AdamW(groups, lr=config.peak_lr, betas=(0.9, 0.98), eps=1e-8, fused=True)


def resolve_device(name: str, threads: int | None = None) -> torch.device:
    """"auto": CUDA when present, else the CPU with all its cores."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise LMBenchError(f"device {name!r} asked for but CUDA is not available: use --device cpu or auto")
    if device.type == "cpu":
        torch.set_num_threads(threads or os.cpu_count() or 1)
    return device


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
        diff = [f"{k}={saved[k]} (asked {getattr(config, k)})" for k in SHAPE_FIELDS
                if saved[k] != getattr(config, k)]
        if diff:
            raise LMBenchError(f"checkpoint {path} has another network shape: {', '.join(diff)}; resume "
                               "with the same --n/--m/--h/--direct or use another --out directory")
        if saved["recipe"] != config.recipe:
            raise LMBenchError(f"checkpoint {path} was trained with recipe {saved['recipe']!r}, not "
                               f"{config.recipe!r}: resume with --recipe {saved['recipe']} or use "
                               "another --out")
    return state


def train_nplm(corpus, config: NPLMConfig, out_dir: str | Path, *, resume: bool = False,
               progress: bool = True, evaluate: bool = True) -> dict:
    """Train on corpus.train, early-stop on corpus.valid, write the run into out_dir and return the
    figures: train/valid/test perplexity of the best model, tokens/s, seconds, epochs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(config.device, config.threads)
    fingerprint = corpus.vocab.fingerprint()
    vocab_size = len(corpus.vocab)

    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    net = NPLM(vocab_size, config.n, config.m, config.h, config.direct, dropout=config.dropout)
    with torch.no_grad():  # start from the add-one unigram: b = log P(w)
        counts = np.bincount(corpus.train, minlength=vocab_size) + 1.0
        net.b.copy_(torch.from_numpy(np.log(counts / counts.sum())))
    net.to(device)
    optimizer = make_optimizer(net, config)
    state = {"epoch": 0, "position": 0, "step": 0, "loss_sum": 0.0, "tokens": 0, "seconds": 0.0,
             "best_valid": math.inf, "bad_epochs": 0, "history": [], "stopped": None}

    checkpoint_path = out / CHECKPOINT
    if checkpoint_path.exists():
        if not resume:
            raise LMBenchError(f"{out} already holds a run ({CHECKPOINT}): pass --resume to continue it "
                               "or choose another --out directory")
        saved = read_checkpoint(checkpoint_path, fingerprint, config)
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        np.random.set_state(saved["numpy_rng"])
        state = saved["state"]
        if state["stopped"] == "max_steps":  # a deliberate stop: carry on
            state["stopped"] = None
        log.info("resumed %s at epoch %d, update %d", checkpoint_path, state["epoch"] + 1, state["step"])

    def save_checkpoint() -> None:
        if not all(torch.isfinite(p).all() for p in net.parameters()):
            raise nan_error(state["step"], checkpoint_path)
        atomic_save({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                     "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(),
                     "state": state, "config": dataclasses.asdict(config), "fingerprint": fingerprint,
                     "vocab_size": vocab_size}, checkpoint_path)

    # (T, n-1) contexts and (T,) targets of the training stream, on the device once
    contexts = torch.from_numpy(np.ascontiguousarray(context_windows(corpus.train, config.n))).to(device)
    targets = torch.from_numpy(corpus.train.astype(np.int64)).to(device)
    steps_per_epoch = math.ceil(len(targets) / config.batch)
    total_steps = steps_per_epoch * config.epochs
    valid_stream, valid_start = corpus.stream_for("valid", history=config.n - 1)

    last_save = time.monotonic()
    while state["epoch"] < config.epochs and state["stopped"] is None:
        epoch = state["epoch"]
        permutation = np.random.default_rng([config.seed, epoch]).permutation(len(targets))
        order = torch.from_numpy(permutation).to(device)  # (T,) this epoch's visiting order
        started = time.perf_counter()
        seconds_before = state["seconds"]
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=steps_per_epoch, initial=state["position"], desc=f"epoch {epoch + 1}",
                       unit="upd", leave=False, mininterval=1.0)
        net.train()
        while state["position"] < steps_per_epoch:
            if config.max_steps is not None and state["step"] >= config.max_steps:
                state["stopped"] = "max_steps"
                break
            lo = state["position"] * config.batch
            idx = order[lo: lo + config.batch]
            lr = learning_rate(config, state["step"], total_steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = net.loss(contexts[idx], targets[idx], bf16=config.bf16)
            value = loss.item()
            if not math.isfinite(value):
                raise nan_error(state["step"], checkpoint_path, value)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
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
            if time.monotonic() - last_save > 60 * config.checkpoint_minutes:
                save_checkpoint()
                last_save = time.monotonic()
        if bar is not None:
            bar.close()
        if state["stopped"] is not None:
            break
        end_epoch(net, config, state, valid_stream, valid_start, out, fingerprint, steps_per_epoch)
        save_checkpoint()
        last_save = time.monotonic()

    save_checkpoint()
    return finish(corpus, config, state, out, fingerprint, device, evaluate)


def nan_error(step: int, checkpoint_path: Path, value: float | None = None) -> LMBenchError:
    what = f"the training loss became {value}" if value is not None else "a parameter became NaN or inf"
    kept = (f"; the last good checkpoint {checkpoint_path} is kept" if checkpoint_path.exists()
            else "; no checkpoint was written yet")
    return LMBenchError(f"{what} at update {step}: lower the learning rate (--lr) and resume (--resume) "
                        f"or start again{kept}")


def end_epoch(net, config, state, valid_stream, valid_start, out, fingerprint, steps_per_epoch) -> None:
    """Validation perplexity, the log line, the best model, early stopping; then the next epoch."""
    valid_ppl = perplexity(score_stream(net, valid_stream, valid_start, batch_size=config.eval_batch,
                                        bf16=config.bf16))
    train_tokens = state["tokens"]
    record = {"epoch": state["epoch"] + 1, "step": state["step"],
              "lr": learning_rate(config, state["step"], steps_per_epoch * config.epochs),
              "train_perplexity": math.exp(state["loss_sum"] / train_tokens),
              "valid_perplexity": valid_ppl, "tokens_per_s": train_tokens / state["seconds"],
              "seconds": state["seconds"]}
    state["history"].append(record)
    log.info("epoch %d: train ppl %.2f (running), valid ppl %.2f, %.0f tokens/s, %.0f s, lr %.3g",
             record["epoch"], record["train_perplexity"], valid_ppl, record["tokens_per_s"],
             record["seconds"], record["lr"])
    atomic_write_text(out / LOG, "".join(json.dumps(r) + "\n" for r in state["history"]))
    if valid_ppl < state["best_valid"]:
        state["best_valid"], state["bad_epochs"] = valid_ppl, 0
        atomic_save({"model": net.state_dict(), "config": dataclasses.asdict(config),
                     "fingerprint": fingerprint, "vocab_size": net.vocab_size, "epoch": record["epoch"],
                     "valid_perplexity": valid_ppl}, out / BEST)
    else:
        state["bad_epochs"] += 1
        if state["bad_epochs"] >= config.patience:
            state["stopped"] = "early_stopping"
    state.update(epoch=state["epoch"] + 1, position=0, loss_sum=0.0, tokens=0, seconds=0.0)


def finish(corpus, config, state, out, fingerprint, device, evaluate: bool = True) -> dict:
    """The run's figures, with the train/valid/test perplexities of the best model when `evaluate`
    (a caller that scores the splits itself passes False)."""
    history = state["history"]
    result = {"out": str(out), "recipe": config.recipe, "epochs": len(history), "updates": state["step"],
              "stopped": state["stopped"] or "epochs", "config": dataclasses.asdict(config)}
    if not history:  # stopped inside the first epoch: nothing validated yet
        result["seconds"] = state["seconds"]
        return result
    if evaluate:
        model = load_nplm(out, corpus, device=device, bf16=config.bf16)
        for split in ("train", "valid", "test"):
            result[f"{split}_perplexity"] = model.perplexity(split)
    result.update(best_epoch=int(np.argmin([r["valid_perplexity"] for r in history])) + 1,
                  tokens_per_s=sum(r["tokens_per_s"] * r["seconds"] for r in history)
                  / sum(r["seconds"] for r in history),
                  seconds=sum(r["seconds"] for r in history))
    atomic_write_text(out / RESULT, json.dumps(result, indent=1))
    return result


def load_nplm(out_dir: str | Path, corpus, *, device: str | torch.device = "auto",
              bf16: bool = False, which: str = BEST, threads: int | None = None) -> NPLMLanguageModel:
    """The best model of a run (or its last checkpoint, which=CHECKPOINT), attached to `corpus`."""
    path = Path(out_dir) / which
    if not path.exists():
        raise LMBenchError(f"no {which} in {out_dir}: train there first (lmbench nplm train --out "
                           f"{out_dir}), or let it finish one epoch")
    saved = read_checkpoint(path, corpus.vocab.fingerprint())
    cfg = saved["config"]
    net = NPLM(saved["vocab_size"], cfg["n"], cfg["m"], cfg["h"], cfg["direct"])
    net.load_state_dict(saved["model"])
    device = device if isinstance(device, torch.device) else resolve_device(device, threads)
    return NPLMLanguageModel(net.to(device), bf16=bf16).attach(corpus)

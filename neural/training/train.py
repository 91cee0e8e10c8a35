"""Training the window networks (the NPLM, the energy network): the trainer, with atomic checkpoints
and exact resume.

The recipes (how the learning rate moves, the batch, the weight decay) are in `neural.training.recipe`, the
training losses over the output layer in `neural.outputs.objectives`, the epoch loop in `neural.training.loop`; this
file's `WindowTrainer` runs them. Both recipes start
the output biases b at the log of the add-one unigram frequencies of train, which is also the proposal
and noise distribution q of the sampled objectives.

Data order: epoch e visits the training windows in the permutation drawn from seed and e, so a
resumed run needs only the epoch and the position within it. A checkpoint (checkpoint.pt, written
to a temporary file then os.replace'd, after every epoch and every `checkpoint_minutes`) holds the
model, optimizer state, the RNG states (torch, numpy and the objective's sampler), the run's state
(`NPLMState`: epoch, position, update count, the running sums of the epoch, the history, the recipe's
schedule), the config and the vocabulary fingerprint.
The best model on validation is saved apart (best.pt). Per-epoch figures go to log.jsonl, the final
ones to result.json.

On several processes (config.parallel, under torchrun) the loop is the same: the hooks of
`neural.training.team.Team` (`neural.parallel.teams`'s teams) split the minibatch or the output layer, sum the gradients, and have rank 0
write the files, in the single-process format.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_file, atomic_write_text
from lmbench.memory import check_training_fits
from lmbench.model import perplexity
from neural.config import OBJECTIVES, RECIPES, NPLMConfig
from neural.families import NetworkShape, family, load
from neural.lm import NPLMLanguageModel, StreamWindows
from neural.training.loop import RunState, run_epochs, write_log
from neural.outputs.objectives import make_objective
from neural.training.team import Team
from neural.training.recipe import apply_weight_decay, learning_rate, make_optimizer, next_epoch_rate, resolve_device

log = logging.getLogger(__name__)

CHECKPOINT, BEST, LOG, RESULT = "checkpoint.pt", "best.pt", "log.jsonl", "result.json"
SHRINK = ("lower the window --n, the sizes --m and --h (--samples), or the vocabulary (--vocab-size, --min-count), "
          "or train on a larger device")
__all__ = ["NPLMConfig", "train_nplm", "load_nplm", "read_checkpoint", "CHECKPOINT", "BEST"]


def atomic_save(obj, path: Path) -> None:
    """torch.save, atomically: a reader never sees half a checkpoint, and a failed write (a full disk: one
    line) keeps the last good one, from which --resume continues."""
    atomic_write_file(path, lambda out: torch.save(obj, out), fix=f"free space under {Path(path).parent} and "
                      "run again with --resume (it continues from the last good checkpoint)")


def read_checkpoint(path: Path, fingerprint: str, config: NPLMConfig | None = None) -> dict:
    """Load a checkpoint (or best model) and refuse one made for another vocabulary or shape."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(state, dict):
            raise ValueError(f"it holds a {type(state).__name__}, not an lmbench checkpoint")
        weights = state.get("model")
        bad = next((name for name, value in (weights.items() if isinstance(weights, dict) else ())
                    if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all()), None)
        if bad is not None:
            raise ValueError(f"its weights {bad} hold NaN or infinity")
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as err:
        raise DamagedFile(path, str(err) or type(err).__name__, "checkpoint",
                          "delete it and train again, or point at another run directory") from None
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

    def make():
        return team.network(config.model, config.shape, len(corpus.vocab), output=objective.output,
                            structure=structure, dropout=config.dropout)
    check_training_fits(make, team.device, config.samples if objective.sampled else 0, what=f"the {config.model} "
                        f"network of {config.shape} over {len(corpus.vocab):,} words", fix=SHRINK)
    return make()


def join(mode: str | None, vocab_size: int, *, device: str = "auto", backend: str = "auto",
         threads: int | None = None) -> Team:
    """The team of this run: one process when mode is None, else this process's place in the process
    group of --parallel `mode` (`neural.parallel.teams.connect`)."""
    if mode is None:
        return Team(device=resolve_device(device, threads))
    from neural.parallel.teams import connect
    return connect(mode, vocab_size, device=device, backend=backend, threads=threads)


@dataclass
class NPLMState(RunState):
    """Where a window network's run stands (`neural.training.loop.RunState`) and its recipe's schedule."""

    bad_epochs: int = 0  # epochs since the best validation perplexity (the paper recipe's early stopping)
    rate: float = 0.0  # the sgd recipe's rate of the current epoch (`neural.training.recipe.next_epoch_rate`)
    annealing: bool = False  # whether the sgd recipe halves the rate every epoch now
    decay_pending: int = 0  # updates whose weight decay is not applied yet (`Recipe.decay_every`)


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
    team = team or join(config.parallel, len(corpus.vocab), device=config.device, backend=config.backend,
                           threads=config.threads)
    run = WindowTrainer(corpus, config, Path(out_dir), team, resume=resume, progress=progress and team.writer)
    run_epochs(run, epochs=config.epochs, max_steps=config.max_steps, checkpoint_minutes=config.checkpoint_minutes,
               progress=run.progress, together=team.any)
    return finish(corpus, config, run.state, run.out, team, evaluate, run.progress)


class WindowTrainer:
    """The run of a window network (`neural.training.loop.Trainer`): the network, objective and optimizer of
    `config`, resumed from out/checkpoint.pt when `resume`, and the hooks of `neural.training.loop.run_epochs`."""

    def __init__(self, corpus, config: NPLMConfig, out: Path, team: Team, *, resume: bool, progress: bool):
        out.mkdir(parents=True, exist_ok=True)
        self.config, self.out, self.team, self.progress = config, out, team, progress
        self.checkpoint_path = out / CHECKPOINT
        self.fingerprint = corpus.vocab.fingerprint()
        self.vocab_size = vocab_size = len(corpus.vocab)
        device = team.device
        torch.manual_seed(config.seed)  # the same on every process: the network starts the same everywhere
        np.random.seed(config.seed)
        self.net = net = build_network(config, corpus, team, progress=progress)
        counts = np.bincount(corpus.train, minlength=vocab_size) + 1.0
        unigram = torch.from_numpy(counts / counts.sum())  # (V,) add-one unigram of train: q
        net.set_unigram_biases(unigram)  # start from the unigram: b = log q (b_c = log q(c); energy: b = -log q)
        net.to(device)
        self.sampler = torch.Generator(device=device)
        self.sampler.manual_seed(config.seed)
        self.objective = make_objective(config.objective, unigram.float().to(device), config.samples, self.sampler)
        self.optimizer = make_optimizer(net, config)
        self.batch = team.batch(config.batch)  # windows per update, all processes together
        self.state = NPLMState(rate=config.peak_lr)
        saved = team.from_rank0(lambda: self.read_resumed(resume))  # read on rank 0, sent to every process
        if saved is not None:
            self.restore(saved)
        # the (T,) targets of the training stream and their contexts (gathered per minibatch), on the device once
        self.contexts = StreamWindows(corpus.train, net.history, device)
        self.targets = torch.from_numpy(corpus.train.astype(np.int64)).to(device)
        self.steps_per_epoch = math.ceil(len(self.targets) / self.batch)
        self.valid_stream, self.valid_start = corpus.stream_for("valid", history=net.history)
        if config.valid_tokens is not None:  # the epochs' validation: a prefix of valid, the same every epoch
            self.valid_stream = self.valid_stream[:self.valid_start + config.valid_tokens]

    # -- checkpoints ----------------------------------------------------------------------------------

    def read_resumed(self, resume: bool) -> dict | None:
        """The checkpoint to resume (None: a new run), refused when it is not this run's."""
        path = self.checkpoint_path
        if not path.exists():
            return None
        if not resume:
            raise LMBenchError(f"{self.out} already holds a run ({CHECKPOINT}): pass --resume to continue it "
                               "or choose another --out directory")
        saved = read_checkpoint(path, self.fingerprint, self.config)
        saved_config = saved["config"]
        before = saved.get("batch", saved_config["batch_size"] or RECIPES[saved_config["recipe"]].batch)
        if before != self.batch:
            raise LMBenchError(f"checkpoint {path} was trained with {before} windows per update, "
                               f"not {self.batch}: resume with the same minibatch (with --parallel data: "
                               "--batch-size times the processes)")
        return saved

    def restore(self, saved: dict) -> None:
        self.net.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        np.random.set_state(saved["numpy_rng"])
        self.sampler.set_state(saved["sampler_rng"])
        self.state = NPLMState.restored(saved["state"], self.checkpoint_path)
        if saved["config"]["lr"] != self.config.lr:  # a new --lr (after a NaN, say) restarts the schedule there
            self.state.rate = self.config.peak_lr

    def save_checkpoint(self) -> None:
        model = self.team.state_dict(self.net)  # the whole network on rank 0

        def write() -> None:
            if not all(torch.isfinite(t).all() for t in model.values()):
                raise nan_error(self.state.step, self.checkpoint_path)
            atomic_save({"model": model, "optimizer": self.optimizer.state_dict(),
                         "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(),
                         "sampler_rng": self.sampler.get_state(), "state": self.state.saved(),
                         "config": dataclasses.asdict(self.config), "fingerprint": self.fingerprint,
                         "vocab_size": self.vocab_size, "batch": self.batch}, self.checkpoint_path)
        self.team.from_rank0(write)

    # -- the loop's hooks -----------------------------------------------------------------------------

    def begin_epoch(self) -> int:
        permutation = np.random.default_rng([self.config.seed, self.state.epoch]).permutation(len(self.targets))
        self.order = torch.from_numpy(permutation).to(self.team.device)  # (T,) this epoch's visiting order
        self.net.train()
        return self.steps_per_epoch

    def update(self) -> tuple[float, int]:
        config, state, optimizer, net = self.config, self.state, self.optimizer, self.net
        lo = state.position * self.batch
        idx = self.order[lo: lo + self.batch]
        lr = self.rate()
        for group in optimizer.param_groups:
            group["lr"] = lr
        mine, share = self.team.shard_batch(idx)  # data-parallel: this process's windows
        loss = self.objective.loss(net, net.features(self.contexts[mine]), self.targets[mine], bf16=config.bf16)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        value = self.team.sum_gradients(net, loss, share)  # the minibatch's loss and gradients
        if not math.isfinite(value):
            raise nan_error(state.step, self.checkpoint_path, value)
        state.decay_pending += 1  # p <- p (1 - lr lambda) - lr grad, the decay compounded
        if state.decay_pending >= config.decay_every:
            self.settle_decay(lr)
        optimizer.step()
        return value, len(idx)

    def rate(self) -> float:
        """The learning rate of the next update (`neural.training.recipe.learning_rate`)."""
        return learning_rate(self.config, self.state.step, self.state.rate, self.steps_per_epoch * self.config.epochs)

    def settle_decay(self, rate: float) -> None:
        apply_weight_decay(self.net, rate, self.config.weight_decay, self.state.decay_pending)
        self.state.decay_pending = 0

    def end_epoch(self) -> None:
        """The epoch's weight decay settled, then validation perplexity, the log line, the best model,
        the next rate and early stopping."""
        config, state, team, net = self.config, self.state, self.team, self.net
        self.settle_decay(self.rate())
        team.sync_replicas(net)
        valid_ppl = perplexity(team.score_stream(net, self.valid_stream, self.valid_start,
                                                 batch_size=config.eval_batch, bf16=config.bf16))
        if not math.isfinite(valid_ppl) or not math.isfinite(state.loss_sum):  # diverged, not yet NaN
            raise nan_error(state.step, self.checkpoint_path, valid_ppl, "the validation perplexity")
        train_tokens = state.tokens
        record = state.record(self.rate(), valid_ppl,
                              len(self.valid_stream) - self.valid_start, not OBJECTIVES[config.objective].sampled)
        log.info("epoch %d: train loss %.4f (running), valid ppl %.2f, %.0f tokens/s, %.0f s, lr %.3g",
                 record["epoch"], record["train_loss"], valid_ppl, record["tokens_per_s"], record["seconds"],
                 record["lr"])
        if team.writer:
            write_log(self.out / LOG, state.history)
        gain = 1.0 - valid_ppl / state.best_valid  # -inf .. 1; 1 - 0 for the first epoch
        if state.improves(valid_ppl):
            state.bad_epochs = 0
            model = team.state_dict(net)
            if team.writer:
                atomic_save({"model": model, "config": dataclasses.asdict(config), "fingerprint": self.fingerprint,
                             "vocab_size": net.vocab_size, "epoch": record["epoch"],
                             "valid_perplexity": valid_ppl}, self.out / BEST)
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


def nan_error(step: int, checkpoint_path: Path, value: float | None = None,
              quantity: str = "the training loss") -> LMBenchError:
    what = f"{quantity} became {value}" if value is not None else "a parameter became NaN or inf"
    kept = (f"; the last good checkpoint {checkpoint_path} is kept" if checkpoint_path.exists()
            else "; no checkpoint was written yet")
    return LMBenchError(f"{what} at update {step}: lower the learning rate (--lr) and resume (--resume) "
                        f"or start again{kept}")


def check_finite(result: dict, out: Path) -> None:
    """A best model whose exact perplexity on a split overflows (its tokens given e^-709 or less on average,
    while the epochs' validation stayed finite) has diverged: stopped in one line, its files kept."""
    for key, value in result.items():
        if key.endswith("_perplexity") and not math.isfinite(value):
            raise LMBenchError(f"the best model's {key.replace('_', ' ')} is {value}: the run diverged; lower "
                               f"the learning rate (--lr) and train again (its files are kept in {out})")


def finish(corpus, config, state: NPLMState, out, team, evaluate: bool = True, progress: bool = False) -> dict:
    """The run's figures, with the train/valid/test perplexities of the best model when `evaluate`
    (a caller that scores the splits itself passes False; a bar while they are scored when `progress`)."""
    result = {"out": str(out), "recipe": config.recipe, "objective": config.objective, **state.figures(),
              "config": dataclasses.asdict(config)}
    if not state.history:  # stopped inside the first epoch: nothing validated yet
        return result
    if evaluate:
        net = load_nplm(out, corpus, bf16=config.bf16, team=team).net
        for split in ("train", "valid", "test"):
            stream, start = corpus.stream_for(split, history=net.history)
            logprobs = team.score_stream(net, stream, start, bf16=config.bf16, progress=progress)
            result[f"{split}_perplexity"] = perplexity(logprobs)
        check_finite(result, out)
    result["best_epoch"] = int(np.argmin([r["valid_perplexity"] for r in state.history])) + 1
    if team.writer:
        atomic_write_text(out / RESULT, json.dumps(result, indent=1))
    return result


def load_nplm(out_dir: str | Path, corpus, *, device: str | torch.device = "auto",
              bf16: bool = False, which: str = BEST, threads: int | None = None,
              factored: bool = True, team: Team | None = None, progress: bool = False) -> NPLMLanguageModel:
    """The best model of a run (or its last checkpoint, which=CHECKPOINT), checked against the
    vocabulary of `corpus`, the corpus it was trained on;
    factored=False scores a network with a class layer by the full softmax of y instead; `progress`: its
    scoring shows a bar (lmbench.progress). With a
    `team` (which then sets the device): read on rank 0 and placed on every process (under "vocab",
    each its block; all of them then score together)."""
    path = Path(out_dir) / which

    def read() -> dict:
        if not path.exists():
            raise LMBenchError(f"no {which} in {out_dir}: train there first (lmbench nplm train --out "
                               f"{out_dir}), or let it finish one epoch")
        return read_checkpoint(path, corpus.vocab.fingerprint())

    saved = read() if team is None else team.from_rank0(read)
    # the family: a stream run's checkpoint names it, a window run's config does (an old stream checkpoint
    # keeps its config as "train_config")
    name = saved["family"] if "family" in saved else saved_network(saved["config"])[0]
    loader = family(name).loader
    if loader is not None:  # a family with its own trainer and loader (a stream network, neural/training/stream_train.py)
        if (team is not None and team.mode is not None) or not factored:
            raise LMBenchError(f"{path} holds a {saved['family']} network: it is scored on one process by its "
                               "own output layer (drop --parallel)")
        return load(loader)(out_dir, corpus, device=team.device if team is not None else device, bf16=bf16,
                            which=which, threads=threads, progress=progress)
    if team is None:
        team = Team(device=device if isinstance(device, torch.device) else resolve_device(device, threads))
    model, shape = saved_network(saved["config"])
    output = OBJECTIVES[saved["config"].get("objective", "softmax")].output  # (no objective: before them)
    structure = family(model).network_class().saved_structure(saved["model"])
    net = team.network(model, shape, saved["vocab_size"], output=output, structure=structure)
    net.load_state_dict(saved["model"])
    return NPLMLanguageModel(net.to(team.device), bf16=bf16, factored=factored, progress=progress)

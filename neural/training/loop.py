"""The epoch loop that every trainer runs (`neural.training.trainer` for the window networks, `neural.training.trainer`
for the stream networks), and the typed state of a run that its checkpoints keep.

A trainer says how to start an epoch (its data order: a permutation of the windows, an offset of the
lanes), how to make one update, what to do after an epoch (validation, the best model, the next rate)
and how to write a checkpoint (`Trainer`); `run_epochs` does the rest alike for all of them: the
progress bar, the stop after `max_steps` updates, the running sums of the epoch, a checkpoint every
`checkpoint_minutes` and after every epoch. An update's loss stays on the device (a tensor) until the
loop reads the pending ones at once (`PendingLosses`): after every `READ_EVERY` updates, at a progress
bar's refresh, before a checkpoint and at an epoch's end; on a GPU a read per update would wait for the
device every update (issue 51). A loss that is NaN or inf stops the run there (`Trainer.diverged`), before
a checkpoint could keep the parameters it spoiled. Where the run stands is a `RunState` (a trainer adds its own
fields in a subclass): a checkpoint keeps it as the plain dict of its fields (`RunState.saved`), which
is also what the trainers wrote before the state was typed, so every checkpoint resumes
(`RunState.restored`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, TypeVar

import torch

from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text
from lmbench.progress import progress_bar

log = logging.getLogger(__name__)

S = TypeVar("S", bound="RunState")

READ_EVERY = 256  # updates whose losses wait on the device before the host reads them (and checks them)


@dataclass
class RunState:
    """Where a run stands: what a resumed run needs besides the model, optimizer and RNG states."""

    epoch: int = 0  # epochs done
    position: int = 0  # updates done within the current epoch
    step: int = 0  # updates done in all
    loss_sum: float = 0.0  # the current epoch's training loss, summed over its tokens so far
    tokens: int = 0  # the current epoch's training tokens so far
    seconds: float = 0.0  # the current epoch's training seconds so far
    best_valid: float = math.inf  # the best validation perplexity of an epoch's end
    history: list[dict] = field(default_factory=list)  # one record per finished epoch (log.jsonl)
    stopped: str | None = None  # why: "max_steps", "budget", "early_stopping", "converged"; None: running

    def saved(self) -> dict:
        """The state as a checkpoint keeps it: the dict of its fields."""
        return dataclasses.asdict(self)

    @classmethod
    def restored(cls: type[S], saved: dict, path: Path) -> S:
        """The state of checkpoint `path` from its dict (`saved`; a checkpoint written before the state
        was typed holds the same keys); a run stopped by --max-steps carries on."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not names >= set(saved):
            raise LMBenchError(f"checkpoint {path} holds a run state with unknown fields "
                               f"{sorted(set(saved) - names)}: it was written by another trainer or a newer "
                               "lmbench; resume it with that, or use another --out directory")
        state = cls(**saved)
        if state.stopped == "max_steps":  # a deliberate stop: carry on
            state.stopped = None
        log.info("resumed %s at epoch %d, update %d", path, state.epoch + 1, state.step)
        return state

    def count(self, tokens: int, seconds: float) -> None:
        """One more update, over `tokens` tokens, the epoch now `seconds` long (its loss is added when it
        is read: `add_loss`)."""
        self.step += 1
        self.position += 1
        self.tokens += tokens
        self.seconds = seconds

    def add_loss(self, loss: float, tokens: int) -> None:
        """An update's mean loss `loss` over its `tokens` tokens, read from the device."""
        self.loss_sum += loss * tokens

    def record(self, lr: float, valid_perplexity: float, valid_tokens: int, exact: bool) -> dict:
        """The finished epoch's record, added to the history: its mean training loss (`exact`: an exact
        log-likelihood, whose exp is a training perplexity), validation perplexity, speed and time."""
        record = {"epoch": self.epoch + 1, "step": self.step, "lr": lr, "train_loss": self.loss_sum / self.tokens,
                  "valid_perplexity": valid_perplexity, "valid_tokens": valid_tokens,
                  "tokens_per_s": self.tokens / self.seconds, "seconds": self.seconds,
                  "total_seconds": sum(r["seconds"] for r in self.history) + self.seconds}
        if exact:
            record["train_perplexity"] = math.exp(record["train_loss"]) if record["train_loss"] < 700 else math.inf
        self.history.append(record)
        return record

    def improves(self, valid_perplexity: float) -> bool:
        """Whether the epoch's validation perplexity is the best so far (then it is kept as the best)."""
        if valid_perplexity < self.best_valid:
            self.best_valid = valid_perplexity
            return True
        return False

    def next_epoch(self) -> None:
        self.epoch += 1
        self.position, self.loss_sum, self.tokens, self.seconds = 0, 0.0, 0, 0.0

    def figures(self) -> dict:
        """The run's figures so far: epochs, updates, why it stopped, its training speed and seconds
        (an unfinished epoch's part included)."""
        seconds = sum(r["seconds"] for r in self.history) + self.seconds
        tokens = sum(r["tokens_per_s"] * r["seconds"] for r in self.history) + self.tokens
        return {"epochs": len(self.history), "updates": self.step, "stopped": self.stopped or "epochs",
                "tokens": round(tokens), "tokens_per_s": tokens / seconds if seconds else None, "seconds": seconds}


def write_log(path: Path, history: list[dict]) -> None:
    """log.jsonl: one JSON record per finished epoch."""
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in history))


class PendingLosses:
    """The losses of the updates not yet read: 0-d tensors on the device, with the tokens and the index of
    their update. `read` brings them to the host in one transfer and adds them to the run's sum in the
    order of the updates (so the float64 sum is the one a read per update gave)."""

    def __init__(self):
        self.losses: list[torch.Tensor] = []
        self.updates: list[tuple[int, int]] = []  # (update index, tokens) of each loss

    def add(self, loss: torch.Tensor, step: int, tokens: int) -> None:
        self.losses.append(loss)
        self.updates.append((step, tokens))

    def __len__(self) -> int:
        return len(self.losses)

    def read(self, state: RunState, diverged: Callable[[int, float], Exception]) -> None:
        """Add the pending losses to `state.loss_sum`; raise `diverged(update, loss)` at the first one
        that is NaN or inf."""
        if not self.losses:
            return
        values = torch.stack(self.losses).tolist()  # the one host read of these updates
        updates, self.losses, self.updates = self.updates, [], []
        for value, (step, tokens) in zip(values, updates):
            if not math.isfinite(value):
                raise diverged(step, value)
            state.add_loss(value, tokens)


class Trainer(Protocol):
    """What `run_epochs` needs of a trainer."""

    state: RunState

    def begin_epoch(self) -> int:
        """Set up epoch state.epoch (its data order); returns its number of updates."""

    def update(self) -> tuple[torch.Tensor, int]:
        """One update at state.position of the epoch: (its mean training loss, a 0-d tensor left on the
        device, its tokens)."""

    def diverged(self, step: int, loss: float) -> Exception:
        """The error that stops the run when update `step`'s loss was read as NaN or inf."""

    def end_epoch(self) -> None:
        """After a whole epoch: validation, the best model, the next rate, `state.next_epoch()`."""

    def save_checkpoint(self) -> None:
        """Write the checkpoint (atomically)."""


def run_epochs(trainer: Trainer, *, epochs: int, max_steps: int | None, checkpoint_minutes: float,
               progress: bool, desc: str = "epoch", postfix_every: int = 50,
               together: Callable[[bool], bool] = bool, budget: int | None = None) -> None:
    """Train until `epochs` epochs are done or the trainer stops the run, with a checkpoint every
    `checkpoint_minutes`, after every epoch and at the end. `budget`: the run's number of updates in all;
    the epoch in which it runs out ends at its last update (validated as any epoch is) and the run
    stops ("budget"). `max_steps` pauses a run instead (no validation; --resume carries on).
    `together`: a decision every process of a parallel run takes alike (`neural.parallel.teams.Team.any`)."""
    state, pending = trainer.state, PendingLosses()

    def save() -> None:  # the pending losses read (and checked) first: a diverged run keeps its last good checkpoint
        pending.read(state, trainer.diverged)
        trainer.save_checkpoint()

    last_save = time.monotonic()
    while state.epoch < epochs and state.stopped is None:
        updates = trainer.begin_epoch()
        if budget is not None:  # the updates left of the budget, counted from this epoch's first
            updates = min(updates, budget - (state.step - state.position))
        started, seconds_before, position_before = time.perf_counter(), state.seconds, state.position
        bar = None
        if progress:  # a bar on a terminal, else plain lines (lmbench.progress)
            bar = progress_bar(total=updates, initial=state.position, desc=f"{desc} {state.epoch + 1}", unit="upd")
        while state.position < updates:
            if max_steps is not None and state.step >= max_steps:
                state.stopped = "max_steps"
                break
            loss, tokens = trainer.update()
            pending.add(loss, state.step, tokens)
            state.count(tokens, seconds_before + time.perf_counter() - started)
            if len(pending) >= READ_EVERY:
                pending.read(state, trainer.diverged)
            if bar is not None:
                bar.update(1)
                if state.position % postfix_every == 0:
                    pending.read(state, trainer.diverged)
                    bar.set_postfix(loss=f"{state.loss_sum / state.tokens:.3f}",
                                    tok_s=f"{state.tokens / max(state.seconds, 1e-9):.0f}", refresh=False)
            if together(time.monotonic() - last_save > 60 * checkpoint_minutes):
                save()
                last_save = time.monotonic()
        if bar is not None:
            bar.close()
        pending.read(state, trainer.diverged)
        if state.position > position_before:  # the seconds to the end of its last update's work (the read waited)
            state.seconds = seconds_before + time.perf_counter() - started
        if state.stopped is not None:
            break
        trainer.end_epoch()
        if budget is not None and state.step >= budget and state.stopped is None:
            state.stopped = "budget"
        save()
        last_save = time.monotonic()
    save()

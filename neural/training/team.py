"""The processes of one run, and the builder of its networks: `Team` is the one-process run, whose every
hook is the single-process code path itself (it returns its input, or calls the function given);
`neural.training.trainer` trains and scores through these hooks, and under --parallel data|vocab the subclasses of
`neural.parallel.teams` split the minibatch or the output layer behind the same ones (`neural.training.trainer.join`
gives a run its team: a scheme is the only way into `neural.parallel.teams`).
"""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np
import torch

from neural.families import family
from neural.scoring import score_stream
from neural.networks.nplm import NPLM

T = TypeVar("T")


def build_network(entry, shape, vocab_size: int, *, output: str = "softmax", structure=None, dropout: float = 0.0):
    """The network of family `entry` (`neural.families`) from its shape (the dataclass, or the dict a
    checkpoint keeps) over `vocab_size` words, with the output layer `output` over its word `structure`."""
    shape = entry.shape_of(shape) if isinstance(shape, dict) else shape
    return entry.network_class()(shape, vocab_size, output=output, structure=structure, dropout=dropout)


class Team:
    """The processes of one run and what crosses between them; this base class is the one-process run,
    whose every hook is the single-process code path (it returns its input or calls the function
    given). `neural.training.trainer.join` returns it, or the team of the --parallel scheme (`neural.parallel.teams`)."""

    mode: str | None = None  # the --parallel scheme
    rank, world = 0, 1

    def __init__(self, device: torch.device = torch.device("cpu")):
        self.device = device

    @property
    def writer(self) -> bool:
        """Rank 0 writes the run's files and prints its figures."""
        return self.rank == 0

    def close(self) -> None:
        """The end of a command: nothing to leave on one process."""

    def any(self, flag: bool) -> bool:
        """True on every process when `flag` is true on one (a decision all must take together)."""
        return flag

    def from_rank0(self, fn: Callable[[], T]) -> T:
        """fn() run on rank 0 and its result sent to every process."""
        return fn()

    # -- the network ----------------------------------------------------------------------------------

    def network(self, model: str, shape, vocab_size: int, *, output: str = "softmax",
                structure: torch.Tensor | None = None, dropout: float = 0.0):
        """This process's network of family `model` (`neural.families`): the whole network (under
        "vocab", the family's block of it)."""
        return self.build(family(model), shape, vocab_size, output=output, structure=structure, dropout=dropout)

    def build(self, entry, shape, vocab_size: int, *, output: str, structure: torch.Tensor | None,
              dropout: float):
        """The network of family `entry`: the whole network."""
        return build_network(entry, shape, vocab_size, output=output, structure=structure, dropout=dropout)

    def state_dict(self, net: NPLM) -> dict | None:
        """The whole network's state on rank 0, in the single-process format, None elsewhere."""
        return net.state_dict()

    def sync_replicas(self, net: NPLM) -> None:
        """Make the parameters every process holds whole equal to rank 0's (nothing to do on one)."""

    # -- training -----------------------------------------------------------------------------------

    def batch(self, per_process: int) -> int:
        """Windows per update, all processes together."""
        return per_process

    def shard_batch(self, ids: torch.Tensor) -> tuple[torch.Tensor, float]:
        """This process's windows of a minibatch ids (B,) and their share of it (the weight of their
        mean loss): all of them, weight 1, but under "data"."""
        return ids, 1.0

    def sum_gradients(self, net: NPLM, loss: torch.Tensor, weight: float) -> torch.Tensor:
        """After loss.backward(): the minibatch's loss, the same on every process (its gradients are
        whole already but under "data"), a 0-d tensor left on the device (the loop reads it later)."""
        return loss.detach()

    def score_stream(self, net: NPLM, stream: np.ndarray, start: int, **options) -> np.ndarray:
        """`neural.scoring.score_stream` on the processes of the run: the same float64 log-probabilities on
        every process."""
        return score_stream(net, stream, start, **options)

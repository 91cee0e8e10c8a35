"""The batches of a training run: what a network of each context (`neural.families`) reads in an update.

- `WindowBatches` (context "window": the NPLM, the energy network): every position of the training
  stream is one example, its `history` tokens before it (`neural.scoring.StreamWindows`, PAD_ID-padded at
  the start); epoch e visits them in the permutation drawn from (seed, e), `batch` windows an update.
  Under --parallel data each process takes its share of a minibatch (`Team.shard_batch`).
- `LaneBatches` (context "stream": recurrent and attention networks): the stream cut into `batch`
  contiguous lanes read side by side, `steps` inputs of each an update; epoch e starts the lanes at an
  offset drawn from (seed, e) in [0, steps), and a recurrent network's state is carried, detached, from
  one update to the next within an epoch (back-propagation truncated at `steps`).

Both draw their order from (seed, epoch) alone, so a resumed run needs only the epoch and the position
within it (and the carried state, which the checkpoint keeps). `features(net, position)` returns what
the objective reads: the features z (N, K) of N examples, their targets (N,), the tokens they count and
this process's share of the minibatch's loss.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lmbench.errors import LMBenchError
from neural.networks.stream import padded_inputs
from neural.precision import bf16_products
from neural.scoring import StreamWindows
from neural.training.checkpoint import Advice

STEPS = 35  # inputs per lane per update of a recurrent network that names no --steps (Zaremba et al.)


class WindowBatches:
    """Shuffled windows of the training stream, `batch` of them an update (all processes together)."""

    carried = None  # a window network carries no state

    def __init__(self, train: np.ndarray, net, batch: int, seed: int, team):
        device = team.device
        self.batch, self.seed, self.team = batch, seed, team
        self.contexts = StreamWindows(train, net.history, device)  # (T,) -> (B, history) when indexed
        self.targets = torch.from_numpy(train.astype(np.int64)).to(device)  # (T,)
        self.updates_per_epoch = math.ceil(len(self.targets) / batch)

    def begin_epoch(self, epoch: int) -> int:
        permutation = np.random.default_rng([self.seed, epoch]).permutation(len(self.targets))
        self.order = torch.from_numpy(permutation).to(self.team.device)  # (T,) this epoch's visiting order
        return self.updates_per_epoch

    def features(self, net, position: int, bf16: bool):
        """(z (N, K), targets (N,), tokens of the minibatch, this process's share of it)."""
        idx = self.order[position * self.batch: (position + 1) * self.batch]
        mine, share = self.team.shard_batch(idx)  # data-parallel: this process's windows
        return net.features(self.contexts[mine]), self.targets[mine], len(idx), share

    def detach(self) -> None:
        """Nothing carried between updates."""

    def end_epoch(self) -> None:
        """Nothing carried between epochs."""


class LaneBatches:
    """`batch` contiguous lanes of the training stream, `steps` inputs of each an update, a recurrent
    network's state carried between updates (`carried`: a tuple of tensors whose dimension 1 is the lane)."""

    def __init__(self, train: np.ndarray, net, batch: int, seed: int, team, steps: int | None,
                 advice: str = Advice.lanes):
        device = team.device
        self.batch, self.seed, self.device, self.advice = batch, seed, device, advice
        self.steps = steps_of(net.shape, steps)
        self.inputs = torch.from_numpy(padded_inputs(train)).to(device)  # (T + 1,): inputs[t] -> train[t]
        self.targets = torch.from_numpy(train.astype(np.int64)).to(device)  # (T,)
        lane_layout(len(self.targets), batch, self.steps, self.steps - 1, advice)  # (every epoch's offset fits)
        self.updates_per_epoch = lane_layout(len(self.targets), batch, self.steps, 0, advice)[1]
        self.carried = None

    def begin_epoch(self, epoch: int) -> int:
        offset = int(np.random.default_rng([self.seed, epoch]).integers(0, self.steps))
        self.lane, updates = lane_layout(len(self.targets), self.batch, self.steps, offset, self.advice)
        self.starts = offset + self.lane * torch.arange(self.batch, device=self.device)  # (B,) lanes' first targets
        return updates

    def features(self, net, position: int, bf16: bool):
        """(z (B width, K), targets (B width,), their count, share 1): `width` = `steps` inputs of every
        lane (fewer at a lane's end), read from the state carried from the update before."""
        lo = position * self.steps
        width = min(self.steps, self.lane - lo)
        index = self.starts[:, None] + lo + torch.arange(width, device=self.device)[None, :]  # (B, width)
        with bf16_products(self.device.type, bf16):
            z, self.pending = net.encode(self.inputs[index], self.carried)  # (B, width, K)
        return z.reshape(-1, z.shape[-1]).to(net.out.dtype), self.targets[index].reshape(-1), index.numel(), 1.0

    def detach(self) -> None:
        """After the update: its last state, detached, is the next update's first."""
        self.carried = None if self.pending is None else tuple(s.detach() for s in self.pending)

    def end_epoch(self) -> None:
        """The next epoch's lanes start elsewhere: no state carried into them."""
        self.carried = None


def batches_for(net, train: np.ndarray, config, team, advice: Advice = Advice()):
    """The batches of `net`'s context: windows for a network with a `history`, lanes for one without (a training
    split too short for them refused in one line ending in `advice.lanes`, the command's words)."""
    if net.history is not None:
        return WindowBatches(train, net, team.batch(config.batch), config.seed, team)
    return LaneBatches(train, net, config.batch, config.seed, team, config.steps, advice.lanes)


def steps_of(shape, steps: int | None) -> int:
    """Inputs per lane per update: `steps`, else the network's window (a Transformer's `length`), else
    STEPS; more than the window is refused."""
    length = getattr(shape, "length", None)
    if steps is None:
        return length or STEPS
    if length is not None and steps > length:
        raise LMBenchError(f"--steps {steps} is longer than the network's window --length {length}: give at most that")
    return steps


def lane_layout(length: int, lanes: int, steps: int, offset: int, advice: str = Advice.lanes) -> tuple[int, int]:
    """(lane length, updates an epoch) for a training stream of `length` tokens read from `offset`; a stream
    too short for lanes of 2 tokens from every offset an epoch may take (up to steps - 1) refused in one line
    ending in `advice`."""
    lane = (length - offset) // lanes
    if lane < 2:
        raise LMBenchError(f"the training split ({length} tokens) is too short for a stream network's {lanes} lanes "
                           f"(2 tokens each after an offset of up to {steps - 1}: {2 * lanes + steps - 1} tokens at "
                           f"least): {advice}")
    return lane, math.ceil(lane / steps)

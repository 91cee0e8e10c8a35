"""How a network is trained: the three recipes of `neural.config` carried out (the learning rate, the
weight decay, the optimizer) and the device. The trainer (`neural.training.trainer`) asks this file
for the rate of every update (`learning_rate`, every schedule's) and for the recipe's optimizer
(`make_optimizer`), whose `step` and `settle` do the rest.

"adamw" (the stream networks'): AdamW (betas 0.9, 0.99) with decoupled weight decay on the matrices
only, the gradient's norm clipped at `clip`, and the "cosine" schedule: a linear warm-up over
`warmup_steps` updates, then a cosine decay to `final_lr_fraction` of the peak at the last update.

The window networks' two recipes are plain stochastic gradient descent on the chosen objective (`neural.outputs.objectives`), with
the paper's weight decay coupled to the gradient: p <- p - eps (dL/dp + lambda p) on the weights H, U, W
and the features C, never on the biases b and d (section 4 of the paper). They differ in the batch and
in how the learning rate moves:

- "paper": one example per update, eps_t = eps0 / (1 + r t) (eps0 = 1e-3, r = 1e-8, t = updates so
  far), early stopping on validation perplexity after `patience` epochs without a better one.
- "sgd" (default): minibatches of 128 windows and one of two schedules of the rate (1.0 on the
  batch-mean loss at first). "halving" (the paper's rows): a constant rate, halved after every epoch once an epoch improves validation perplexity (relatively) by less than `min_gain`
  per GAIN_TOKENS (1M) training tokens, and never less than `min_gain`; the run stops when, halving,
  an epoch again improves it by less than `min_gain` (the schedule of Mikolov's RNNLM toolkit; USC/ISI
  nplm halves whenever validation gets worse). One rule for every corpus: an epoch's gain grows with
  its length, so the plateau is judged per token seen. Brown's and a 1M-token corpus's epochs (0.8M,
  1M tokens) halve below 0.3%, as before this rule; AP's (14M) below 4.2%, where a fixed 0.3% waited
  whole epochs on the plateau (its run needed a hand-set 3% before). `anneal_gain` overrides the
  threshold with a fixed one (an experiment's knob; no report uses it). Measured on Brown, see README.
  "linear" (NPLM (ours), `neural.ours`): a fixed budget of `epochs` epochs, every one of them run, the
  rate falling linearly from eps0 at the first update to 0 after the last (the budget schedule of
  today's networks: no epoch spent on a plateau before the halving starts, and a run whose length is
  known before it starts). Every epoch is still validated, and the best one is kept.

The decay is applied as the factor (1 - eps lambda) per update. The sgd recipe compounds it over
`Recipe.decay_every` updates ((1 - eps lambda)^N once) so that a sampled update, which touches a few hundred
rows, does not pay for a pass over all of [U, W] and C; the rate is constant within an epoch and the
decay is settled at every epoch's end, so the product is the same. The paper recipe applies it every
update, exactly SGD's coupled decay.
"""

from __future__ import annotations

import math

import torch

from lmbench.errors import LMBenchError
from lmbench.threads import default_threads
from neural.config import RunConfig


def learning_rate(config: RunConfig, step: int, epoch_rate: float, total_steps: int) -> float:
    """The rate of update `step` (0-based) of a run of `total_steps` updates in all. paper: eps0 / (1 + r t);
    sgd, halving: the epoch's rate (see `next_epoch_rate`); sgd, linear: eps0 (1 - t / total_steps);
    cosine: eps0 (t + 1) / warmup_steps during the warm-up, then eps0 (f + (1 - f)(1 + cos(pi p)) / 2),
    p the fraction of the updates after the warm-up done, f = final_lr_fraction."""
    if config.recipe == "paper":
        return config.peak_lr / (1.0 + config.lr_decay * step)
    if config.schedule == "linear":
        return config.peak_lr * max(0.0, 1.0 - step / total_steps)
    if config.schedule == "cosine":
        if step < config.warmup_steps:
            return config.peak_lr * (step + 1) / config.warmup_steps
        done = min(1.0, (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps))
        fraction = config.final_lr_fraction
        return config.peak_lr * (fraction + (1 - fraction) * 0.5 * (1 + math.cos(math.pi * done)))
    return epoch_rate


GAIN_TOKENS = 1_000_000  # the sgd schedule judges an epoch's gain per this many training tokens


def anneal_threshold(config: RunConfig, epoch_tokens: int) -> float:
    """The gain below which the sgd schedule starts halving: min_gain per GAIN_TOKENS tokens of the
    epoch, at least min_gain (or the fixed `anneal_gain` when one is set)."""
    if config.anneal_gain is not None:
        return config.anneal_gain
    return config.min_gain * max(1.0, epoch_tokens / GAIN_TOKENS)


def next_epoch_rate(config: RunConfig, rate: float, annealing: bool, gain: float,
                    epoch_tokens: int) -> tuple[float, bool, bool]:
    """The sgd schedule after an epoch of `epoch_tokens` training tokens whose validation perplexity
    improved on the best before it by `gain` (relative; negative when worse): (next rate, annealing,
    stop). The linear and cosine schedules' rates do not move by epochs, and they stop after their budget
    only."""
    if config.schedule != "halving":
        return rate, False, False
    if annealing and gain < config.min_gain:
        return rate, True, True
    annealing = annealing or gain < anneal_threshold(config, epoch_tokens)
    return (rate * 0.5 if annealing else rate), annealing, False


class CoupledSGD:
    """The paper and sgd recipes' optimizer: plain SGD (sparse gradients for C and the sampled rows of
    [U, W]), the weight decay coupled to the rate and applied by `apply_weight_decay`, compounded over
    `decay_every` updates (`TrainState.decay_pending`) and settled at every epoch's end; never on the
    biases b and d. The step is torch.optim.SGD's p <- p - rate grad, the dense gradients in one
    `torch._foreach_add_` (torch's SGD falls back to a Python loop over every parameter as soon as one
    gradient is sparse; on a GPU each of those is a kernel launch of its own), the few sparse ones (C,
    the sampled rows) each added alone. `optimizer` (torch's SGD) holds the rate and the checkpointed state."""

    def __init__(self, net, config: RunConfig):
        self.net, self.config = net, config
        self.parameters = list(net.parameters())
        self.optimizer = torch.optim.SGD(self.parameters, lr=config.peak_lr)

    def step(self, state, rate: float) -> None:
        """After backward(): the decay due (every `decay_every` updates), then the step."""
        state.decay_pending += 1  # p <- p (1 - lr lambda) - lr grad, the decay compounded
        if state.decay_pending >= self.config.decay_every:
            self.settle(state, rate)
        sgd_step(self.parameters, rate)

    def settle(self, state, rate: float) -> None:
        """The decay of the updates not yet decayed, at `rate` (the end of an epoch)."""
        apply_weight_decay(self.net, rate, self.config.weight_decay, state.decay_pending)
        state.decay_pending = 0


class ClippedAdamW:
    """The adamw recipe's optimizer: AdamW (betas 0.9, 0.99), decoupled weight decay on the network's
    `decay_parameters` only, the gradient's norm clipped at `clip` before every step."""

    def __init__(self, net, config: RunConfig):
        self.net, self.config = net, config
        self.optimizer = torch.optim.AdamW([{"params": net.decay_parameters(), "weight_decay": config.weight_decay},
                                            {"params": net.bias_parameters(), "weight_decay": 0.0}],
                                           lr=config.peak_lr, betas=(0.9, 0.99))

    def step(self, state, rate: float) -> None:
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.config.clip)
        self.optimizer.step()

    def settle(self, state, rate: float) -> None:
        """Nothing left over at an epoch's end (the decay is AdamW's own, every step)."""


OPTIMIZERS = {"sgd": CoupledSGD, "adamw": ClippedAdamW}


def make_optimizer(net, config: RunConfig):
    """The optimizer of config's recipe (`neural.config.Recipe.optimizer`): `step(state, rate)` after each
    backward(), `settle(state, rate)` at each epoch's end, `optimizer` the torch optimizer (its state
    is checkpointed, its rate set before each update)."""
    return OPTIMIZERS[config.recipe_entry.optimizer](net, config)


@torch.no_grad()
def sgd_step(parameters: list[torch.Tensor], rate: float, scatter: bool | None = None) -> None:
    """p <- p - rate p.grad for every parameter with a gradient: the dense ones in one foreach call. A
    sparse gradient (rows, values) is added as torch's SGD adds it (coalesced: its duplicate rows summed
    first), or, `scatter` (default: off the CPU), its rows scattered into p as they are (`index_add_`):
    the same sum in another order, without the coalescing, whose count of distinct rows a GPU must
    send to the host every update."""
    dense = [p for p in parameters if p.grad is not None and not p.grad.is_sparse]
    if dense:
        torch._foreach_add_(dense, [p.grad for p in dense], alpha=-rate)
    for p in parameters:
        if p.grad is not None and p.grad.is_sparse:
            if scatter if scatter is not None else p.device.type != "cpu":
                p.index_add_(0, p.grad._indices()[0], p.grad._values(), alpha=-rate)
            else:
                p.add_(p.grad, alpha=-rate)


@torch.no_grad()
def apply_weight_decay(net, rate: float, weight_decay: float, updates: int) -> None:
    """(1 - rate * lambda)^updates on the weights and C: `updates` SGD steps' worth of coupled decay."""
    if weight_decay and updates:
        torch._foreach_mul_(list(net.decay_parameters()), decay_factor(rate, weight_decay, updates))


def decay_factor(rate: float, weight_decay: float, updates: int) -> float:
    """(1 - rate lambda)^updates; +-inf where a diverging rate overflows it (the run's losses are read a
    few updates later, and their NaN stops it: `neural.training.loop.PendingLosses`)."""
    base = 1.0 - rate * weight_decay
    try:
        return base ** updates
    except OverflowError:
        return math.inf if base > 0 or updates % 2 == 0 else -math.inf


def resolve_device(name: str, threads: int | None = None) -> torch.device:
    """"auto": CUDA when present, else the CPU with `threads` threads (None: `default_threads`)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise LMBenchError(f"--device {name!r} is not a device: use auto, cpu, cuda or cuda:N") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise LMBenchError(f"device {name!r} asked for but CUDA is not available: use --device cpu or auto")
    if device.type == "cpu":
        torch.set_num_threads(threads or default_threads())
    return device



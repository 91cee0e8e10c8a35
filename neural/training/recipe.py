"""How a network is trained: the two recipes of `neural.config` carried out (the learning rate, the
weight decay, the optimizer) and the device.

Both recipes are plain stochastic gradient descent on the chosen objective (`neural.outputs.objectives`), with
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


import torch

from lmbench.errors import LMBenchError
from lmbench.threads import default_threads
from neural.config import NPLMConfig
from neural.networks.nplm import NPLM


def learning_rate(config: NPLMConfig, step: int, epoch_rate: float, total_steps: int) -> float:
    """paper: eps0 / (1 + r t); sgd, halving: the epoch's rate (see `next_epoch_rate`); sgd, linear:
    eps0 (1 - t / total_steps), `total_steps` the updates of all `epochs` epochs."""
    if config.recipe == "paper":
        return config.peak_lr / (1.0 + config.lr_decay * step)
    if config.schedule == "linear":
        return config.peak_lr * max(0.0, 1.0 - step / total_steps)
    return epoch_rate


GAIN_TOKENS = 1_000_000  # the sgd schedule judges an epoch's gain per this many training tokens


def anneal_threshold(config: NPLMConfig, epoch_tokens: int) -> float:
    """The gain below which the sgd schedule starts halving: min_gain per GAIN_TOKENS tokens of the
    epoch, at least min_gain (or the fixed `anneal_gain` when one is set)."""
    if config.anneal_gain is not None:
        return config.anneal_gain
    return config.min_gain * max(1.0, epoch_tokens / GAIN_TOKENS)


def next_epoch_rate(config: NPLMConfig, rate: float, annealing: bool, gain: float,
                    epoch_tokens: int) -> tuple[float, bool, bool]:
    """The sgd schedule after an epoch of `epoch_tokens` training tokens whose validation perplexity
    improved on the best before it by `gain` (relative; negative when worse): (next rate, annealing,
    stop). The linear schedule's rate does not move by epochs, and it stops after its budget only."""
    if config.schedule == "linear":
        return rate, False, False
    if annealing and gain < config.min_gain:
        return rate, True, True
    annealing = annealing or gain < anneal_threshold(config, epoch_tokens)
    return (rate * 0.5 if annealing else rate), annealing, False


def make_optimizer(net: NPLM, config: NPLMConfig) -> torch.optim.Optimizer:
    """Plain SGD (sparse gradients for C and the sampled rows of [U, W]); the weight decay is applied
    by `apply_weight_decay`, never to the biases b and d."""
    return torch.optim.SGD(net.parameters(), lr=config.peak_lr)


@torch.no_grad()
def apply_weight_decay(net: NPLM, rate: float, weight_decay: float, updates: int) -> None:
    """(1 - rate * lambda)^updates on the weights and C: `updates` SGD steps' worth of coupled decay."""
    if weight_decay and updates:
        factor = (1.0 - rate * weight_decay) ** updates
        for p in net.decay_parameters():
            p.mul_(factor)


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



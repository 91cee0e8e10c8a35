"""Training objectives: one small class per loss, chosen by name from the registry
`neural.config.OBJECTIVES` (`make_objective`).

Every objective maps the features z of a minibatch (B, K) (the NPLM's z = [tanh(d + Hx), x]) and its
targets (B,) to a scalar loss whose gradient trains the network. Evaluation never uses them: it is
the exact distribution of the network's output layer (`neural.scoring`).

The exact objectives ("softmax", "class", "tree") are the losses of their output layers (`ExactLoss`
calls the network's `loss`; the layers are in `neural.outputs.layers` and `neural.outputs.tree`); the sampled ones
train the full softmax layer through the network's `sampled_scores` hook:

- `softmax`: the exact negative log-likelihood, -log softmax(y)[target], y = b + [U, W] z over all |V|
  words (the paper's). Costs 2 |V| K FLOPs per token forward, twice that backward.
- `importance`: Bengio & Senecal (2003, 2008). The gradient of -log P(w | h) is
  -dy_w + sum_j P(j | h) dy_j; its negative phase (the expectation under P) is estimated with k words
  drawn from a proposal q (the unigram of train) and self-normalised importance weights
  exp(y_j) / (k q_j), which are biased (a ratio of estimates). The normaliser
  Z = sum_j exp(y_j) is estimated by exp(y_w) + (1/k) sum_{s != w} exp(y_s) / q_s: the target's own
  term exactly, the rest by the samples (a sample equal to the target is left out, so the estimate
  of the rest is unbiased). The loss log Z_hat - y_w is then a cross-entropy over 1 + k candidates,
  never negative, and its gradient is the estimator above; as k grows it tends to the exact softmax
  gradient, and with every word sampled once under a uniform q it is exact. (The form without the
  target's term is unbounded below; at the sgd recipe's rate it diverged on Brown within an epoch.)
- `nce`: noise-contrastive estimation (Gutmann & Hyvarinen 2010; Mnih & Teh 2012). The network's
  exp(y_w) is read as an already normalised probability (the normaliser fixed at 1: self-normalised;
  a learned global normaliser would be a shift of every b_w, which b already learns), and a logistic
  classifier tells data words from k noise words drawn from q:
  loss = -log sigma(y_w - log(k q_w)) - sum_j log sigma(-(y_j - log(k q_j))).
- `class`, `tree`: the class-factored softmax and the tree softmax, exact (`neural.outputs.layers.ClassLayer`,
  `neural.outputs.tree.TreeLayer`).

The sampled objectives draw k words per minibatch, shared by its B examples, and ask the network for
the scores of the targets and of the k words through its `sampled_scores` hook. The NPLM's are one
(B, K) x (K, k) GEMM over the rows of [U, W] read through `SoftmaxLayer.rows`, whose gradient is
sparse: an update touches only the rows of the targets and the samples (and the rows of C in the
contexts). The energy network (`neural.networks.energy`; "softmax", "importance" and "nce") scores a candidate
j by y_j = -E(context, j) up to the context's biases, with the same sparse updates. Draws come from
the run's own generator, whose state is checkpointed, so a resumed run draws what the uninterrupted
one would have.

"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from neural.config import OBJECTIVES
from neural.families import load


class Objective:
    """Base: `loss(net, z, target)` -> mean loss over the batch."""

    name = ""  # its name in `neural.config.OBJECTIVES` (set by `make_objective`)
    sampled = False

    def __init__(self, unigram: torch.Tensor, samples: int, generator: torch.Generator):
        self.unigram = unigram  # (V,) proposal / noise distribution q, on the device
        self.log_q = unigram.log()  # (V,)
        self.samples = samples  # k
        self.generator = generator

    def draw(self) -> torch.Tensor:
        """(k,) word ids drawn from q with replacement, from the run's generator."""
        return torch.multinomial(self.unigram, self.samples, replacement=True, generator=self.generator)

    def loss(self, net, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        raise NotImplementedError


class ExactLoss(Objective):
    """The exact -log P(target | context) of the network's own output layer (the full softmax of
    equation 1, the class-factored or the tree softmax)."""

    def loss(self, net, z, target, bf16: bool = False):
        return net.loss(z, target, bf16=bf16)


class SampledObjective(Objective):
    """Base of the sampled objectives: k words drawn per minibatch, their scores and the targets'."""

    sampled = True

    def loss(self, net, z, target, bf16: bool = False):
        return self.loss_with(net, z, target, self.draw())

    def loss_with(self, net, z, target, sample: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def scores(net, z, target, sample) -> tuple[torch.Tensor, torch.Tensor]:
        """The score y (the log of an unnormalised probability) of each example's target (B,) and of
        the k sampled words for every example (B, k): the network's `sampled_scores` hook, which
        computes only these (`NPLM`: the rows of [U, W] and b they use; `EnergyNetwork`: -E of
        each candidate, its context part shared)."""
        return net.sampled_scores(z, target, sample)


class ImportanceSampling(SampledObjective):
    """Biased self-normalised importance sampling of the softmax gradient's negative phase."""

    def loss_with(self, net, z, target, sample):
        """The loss for a given sample (k,) of word ids:
        mean_i [log(exp(y_i,w_i) + sum_{j: s_j != w_i} exp(y_i,s_j - log(k q_s_j))) - y_i,w_i]."""
        positive, negative = self.scores(net, z, target, sample)  # (B,), (B, k)
        negative = negative - (math.log(len(sample)) + self.log_q[sample])  # minus log(k q_s)
        negative = negative.masked_fill(sample[None, :] == target[:, None], -math.inf)  # the target once
        candidates = torch.cat([positive[:, None], negative], dim=1)  # (B, 1 + k)
        return (torch.logsumexp(candidates, dim=1) - positive).mean()


class NoiseContrastive(SampledObjective):
    """NCE with k noise words from q and the normaliser fixed at 1."""

    def loss_with(self, net, z, target, noise):
        """mean_i [-log sigma(y_i,w_i - log(k q_w_i)) - sum_j log sigma(-(y_i,s_j - log(k q_s_j)))]."""
        log_k = math.log(len(noise))
        positive, negative = self.scores(net, z, target, noise)  # (B,), (B, k)
        positive = positive - (log_k + self.log_q[target])
        negative = negative - (log_k + self.log_q[noise])
        return -(F.logsigmoid(positive).sum() + F.logsigmoid(-negative).sum()) / len(target)


def make_objective(name: str, unigram: torch.Tensor, samples: int, generator: torch.Generator) -> Objective:
    """The objective `name` of `neural.config.OBJECTIVES`, over the proposal q = unigram (V,) with k =
    samples draws from `generator` (the sampled ones)."""
    entry = OBJECTIVES[name]
    objective = (load(entry.loss) if entry.sampled else ExactLoss)(unigram, samples, generator)
    objective.name = name
    return objective

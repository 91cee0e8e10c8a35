"""Training objectives over the NPLM's output layer: one small class per loss.

Every objective maps the features z of a minibatch (B, K) (the NPLM's z = [tanh(d + Hx), x]) and its
targets (B,) to a scalar loss whose gradient trains the network. Evaluation never uses them: it is
the exact full softmax of `neural.lm`, or, for a network with a class layer, its exact
class-factored distribution.

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
- `class`: the class-factored softmax (Goodman 2001) of a network with a class layer (`NPLM`):
  P(w | h) = P(c(w) | h) P(w | c(w), h), s = b_c + [U_c, W_c] z over the C classes and y normalised
  over the words of c(w) only: loss = -log softmax(s)[c(w)] - y_w + log sum_{j in c(w)} exp(y_j).
  Exact (the loss is -log P of a normalised distribution); (C + |c(w)|) K multiply-adds per token
  forward instead of |V| K.

The sampled objectives draw k words per minibatch, shared by its B examples, and ask the network for
the scores of the targets and of the k words through its `sampled_scores` hook. The NPLM's are one
(B, K) x (K, k) GEMM over the rows of [U, W] read through `NPLM.output_rows`, whose gradient is
sparse: an update touches only the rows of the targets and the samples (and the rows of C in the
contexts). The energy network (`neural.energy`; "softmax", "importance" and "nce") scores a candidate
j by y_j = -E(context, j) up to the context's biases, with the same sparse updates. Draws come from
the run's own generator, whose state is checkpointed, so a resumed run draws what the uninterrupted
one would have.

The class objective scores the classes with one (B, K) x (K, C) product. For the words it lays the
batch out as runs, one per example, of the words of its class (T = sum_i |c(w_i)| entries; the CSR
layout of the (B, V) mask [j in c(w_i)]), reads their rows of [U, W] through `NPLM.output_rows` (an
update touches only the rows of the classes in the batch) and scores each entry with a sampled matrix
product: T K multiply-adds, no padding to the largest class and no loop over classes. Measured on Brown
(MLP1, frequency classes, batch 128, one thread): 4.2 ms an update, against 4.3 ms looping over the
classes of the batch and 6-8 ms gathering rows per entry through autograd; padding to the largest class
(1,292 words, against 42 a token on average) would do some 30 times the work.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.model import NPLM


class Objective:
    """Base: `loss(net, z, target)` -> mean loss over the batch."""

    name = ""
    sampled = False

    def __init__(self, unigram: torch.Tensor, samples: int, generator: torch.Generator):
        self.unigram = unigram  # (V,) proposal / noise distribution q, on the device
        self.log_q = unigram.log()  # (V,)
        self.samples = samples  # k
        self.generator = generator

    def draw(self) -> torch.Tensor:
        """(k,) word ids drawn from q with replacement, from the run's generator."""
        return torch.multinomial(self.unigram, self.samples, replacement=True, generator=self.generator)

    def loss(self, net: NPLM, z: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class FullSoftmax(Objective):
    """-log softmax(y)[target] over the whole vocabulary (equation 1 of the paper)."""

    name = "softmax"

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

    name = "importance"

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

    name = "nce"

    def loss_with(self, net, z, target, noise):
        """mean_i [-log sigma(y_i,w_i - log(k q_w_i)) - sum_j log sigma(-(y_i,s_j - log(k q_s_j)))]."""
        log_k = math.log(len(noise))
        positive, negative = self.scores(net, z, target, noise)  # (B,), (B, k)
        positive = positive - (log_k + self.log_q[target])
        negative = negative - (log_k + self.log_q[noise])
        return -(F.logsigmoid(positive).sum() + F.logsigmoid(-negative).sum()) / len(target)


class ClassFactored(Objective):
    """-log P(c(w) | h) - log P(w | c(w), h), exact, through the network's class layer."""

    name = "class"

    def loss(self, net, z, target, bf16: bool = False):
        if not net.num_classes:
            raise LMBenchError("the class objective needs a network with a class layer: build it with "
                               "output='class' (train_nplm does for objective 'class')")
        return net.loss(z, target)


OBJECTIVES = {cls.name: cls for cls in (FullSoftmax, ImportanceSampling, NoiseContrastive, ClassFactored)}

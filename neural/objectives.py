"""Training objectives over the NPLM's output layer: one small class per loss.

Every objective maps the features z = [tanh(d + Hx), x] of a minibatch (B, K) and its targets (B,)
to a scalar loss whose gradient trains the network. Evaluation never uses them: it is always the exact
full softmax of `neural.lm` (the class-factored objective has its own exact distribution besides).

- `softmax`: the exact negative log-likelihood, -log softmax(y)[target], y = b + [U, W] z over all |V|
  words (the paper's). Costs 2 |V| K FLOPs per token forward, twice that backward.
- `importance`: Bengio & Senecal (2003, 2008). The gradient of -log P(w | h) is
  -dy_w + sum_j P(j | h) dy_j; its negative phase (the expectation under P) is estimated with k words
  drawn from a proposal q (the unigram of train) and the biased, self-normalised weights
  r_j = exp(y_j - log q_j) / sum_i exp(y_i - log q_i). That gradient is the gradient of
  loss = -y_w + log sum_j exp(y_j - log q_j), which is what is computed.
- `nce`: noise-contrastive estimation (Gutmann & Hyvarinen 2010; Mnih & Teh 2012). The network's
  exp(y_w) is read as an already normalised probability (the normaliser fixed at 1: self-normalised;
  a learned global normaliser would be a shift of every b_w, which b already learns), and a logistic
  classifier tells data words from k noise words drawn from q:
  loss = -log sigma(y_w - log(k q_w)) - sum_j log sigma(-(y_j - log(k q_j))).

The sampled objectives draw k words per minibatch, shared by its B examples, so their scores are one
(B, K) x (K, k) GEMM. They read the rows of [U, W] they need through `NPLM.output_rows`, whose gradient is
sparse: an update touches only the rows of the targets and the samples (and the rows of C in the
contexts). Draws come from the run's own generator, whose state is checkpointed, so a resumed run draws
what the uninterrupted one would have.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

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
        return net.softmax_nll(z, target, bf16=bf16)


class ImportanceSampling(Objective):
    """Biased self-normalised importance sampling of the softmax gradient's negative phase."""

    name = "importance"
    sampled = True

    def loss(self, net, z, target, bf16: bool = False):
        return self.loss_with(net, z, target, self.draw())

    def loss_with(self, net, z, target, sample: torch.Tensor, log_q: torch.Tensor | None = None):
        """The loss for a given sample (k,) and its log proposal (k,) (default: log q of the sample):
        mean_i [-y_i,target_i + log sum_j exp(y_ij - log_q_j)]."""
        log_q = self.log_q[sample] if log_q is None else log_q
        rows, bias = net.output_rows(torch.cat([target, sample]))
        batch = len(target)
        positive = (z * rows[:batch]).sum(dim=1) + bias[:batch]  # (B,) y_target
        negative = torch.addmm(bias[batch:], z, rows[batch:].t())  # (B, k) y_j
        return (torch.logsumexp(negative - log_q, dim=1) - positive).mean()


class NoiseContrastive(Objective):
    """NCE with k noise words from q and the normaliser fixed at 1."""

    name = "nce"
    sampled = True

    def loss(self, net, z, target, bf16: bool = False):
        return self.loss_with(net, z, target, self.draw())

    def loss_with(self, net, z, target, noise: torch.Tensor):
        log_k = math.log(self.samples)
        rows, bias = net.output_rows(torch.cat([target, noise]))
        batch = len(target)
        positive = (z * rows[:batch]).sum(dim=1) + bias[:batch] - log_k - self.log_q[target]  # (B,)
        negative = torch.addmm(bias[batch:] - log_k - self.log_q[noise], z, rows[batch:].t())  # (B, k)
        return -(F.logsigmoid(positive).sum() + F.logsigmoid(-negative).sum()) / batch


OBJECTIVES = {cls.name: cls for cls in (FullSoftmax, ImportanceSampling, NoiseContrastive)}

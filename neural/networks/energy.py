"""The energy-minimisation network of Bengio et al. (2003), section 5.1, a sibling of `neural.networks.nplm`.

The output word is an input too. With x = (C(w_{t-n+1}), ..., C(w_{t-1}), C(w_t)) (n m,), the
context oldest first as in `NPLM`, the output word's block last:

    E(w_{t-n+1}, ..., w_t) = v . tanh(d + H x) + sum_{i=0}^{n-1} b_{w_{t-i}}         the energy
    P(w_t = j | context) = exp(-E(..., j)) / sum_{j'} exp(-E(..., j'))               normalised over V

exp(-E) is a product of experts, one per hidden unit k (exp(-v_k tanh(d_k + H_k x))), times one
factor per word of the window. The context's biases b_{w_{t-i}}, i >= 1, are the same for every
candidate j and cancel in the normalisation: only b_{w_t} remains. So a candidate j is scored by

    y_j = -(v . tanh(a + H_out C(j)) + b_j)     a = d + H_ctx x_ctx (h,)                 (*)

with H = [H_ctx, H_out] (h x (n-1)m, h x m) and x_ctx = (C(w_{t-n+1}), ..., C(w_{t-1})), and
P(. | context) = softmax(y), the `NPLM`'s form: the two networks share the sampled objectives of
`neural.outputs.objectives`, the exact scoring of `neural.scoring` and the loop of `neural.training.trainer`. The features
z of a context (`features`) hold the pre-activation a (not a tanh: the candidate part is added first).

Direct connections (optional, as in the ordinary network): W (V x (n-1)m) adds the output word's
weights on the context features to the energy, E += W_{w_t} . x_ctx, so y_j gains -W_j . x_ctx
and z carries x_ctx beside a.

The cost. Every candidate needs its own h tanh: the |V| hidden-layer evaluations per context of the
paper. The rest is shared: a once per context, the candidate part H_out C(j) once per batch for all
candidates ((V x m)(m x h), one product), and `hidden_energy` adds and squashes them in blocks of at
most BLOCK elements (contexts x candidates x h), with no Python loop over candidates; under autograd
each block is recomputed in the backward pass when there is more than one, so memory stays one block.
A sampled objective (k candidates shared by the minibatch) costs B k h tanh per update instead of
B V h. Evaluation runs in the network's dtype; every score is computed elementwise and summed along h
(not by a matrix-vector product), so it does not depend on the block or batch it falls in and
log distribution(context) equals the scores of a stream to float64 rounding. `bf16` is accepted and
ignored: there is no |V|-sized GEMM to run in bfloat16.

Training FLOPs per target token (`EnergyShape.training_flops`), for R candidates a context (V for the
full softmax, the k sampled words otherwise) and B contexts an update:
    6 h (n-1)m                         a = d + H_ctx x_ctx, a GEMM and its two gradients
  + 6 m h R / B                        the candidates' H_out C(j), once an update, shared by the B contexts
  + 7 h R                              v . tanh(a + H_out C(j)), elementwise: the multiply and the sum
                                       along h (2 h), and backward the two multiplies and the three sums
                                       that reduce the (B, R, h) gradient onto v, a and H_out C(j) (5 h)
  + 6 (n-1)m R                         with direct connections, W_j . x_ctx, a GEMM and its gradients
and, for a sampled objective, the target's own candidate: 6 m h + 5 h (+ 4 (n-1)m with direct
connections, its product computed elementwise). The tanh and the additions are not counted; a block
recomputed in the backward pass (more than BLOCK elements) recomputes only those, not the products.

Parameters: C (V x m), H (h x n m), d (h), v (h), b (V) and, with direct connections, W
(V x (n-1)m): |V|(1 + m) + h(2 + n m) without them, plus |V|(n-1)m with. (The paper notes the count
can match the ordinary network's by indexing v by the output word; this network keeps one v.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from lmbench.errors import LMBenchError
from neural.families import Family, NetworkShape, check_numbers, register
from neural.outputs.layers import log_softmax, softmax_parts


@dataclass(frozen=True)
class EnergyShape(NetworkShape):
    """The energy-minimisation network of section 5.1 (`neural.networks.energy.EnergyNetwork`)."""
    n: int = field(default=5, metadata={"help": "order: n-1 context words"})
    m: int = field(default=60, metadata={"help": "word feature size"})
    h: int = field(default=50, metadata={"help": "hidden units (the output word enters through them)"})
    direct: bool = field(default=True, metadata={"help": "direct connections W from the context to the output word"})

    def __post_init__(self):
        check_numbers([("--n", self.n, ">= 2", self.n >= 2), ("--m", self.m, ">= 1", self.m >= 1)])
        if self.h < 1:
            raise LMBenchError("--model energy needs --h >= 1: the output word enters the energy through "
                               "the hidden units only")

    def refuse(self, run) -> str | None:
        if run.dropout:
            return "--model energy has no place for dropout: drop --dropout"
        if run.precision == "bf16":
            return ("--precision bf16 runs a network's products in bfloat16; the energy network's scores are "
                    "elementwise sums, no products: drop it (or give auto, which trains it in fp32)")
        return super().refuse(run)

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """The module docstring's count."""
        sampled = run.objective != "softmax"
        candidates = run.samples if sampled else vocab_size  # R
        context = (self.n - 1) * self.m
        direct = context if self.direct else 0
        count = (6.0 * self.h * context + 6.0 * self.m * self.h * candidates / run.batch
                 + 7.0 * self.h * candidates + 6.0 * direct * candidates)
        return count + (6.0 * self.m * self.h + 5.0 * self.h + 4.0 * direct if sampled else 0.0)

BLOCK = 1 << 22  # elements of one (contexts x candidates x h) block: 16 MiB in fp32
BLOCK_ROWS = 256  # at most this many contexts a block, so that a block spans many candidates


def hidden_block(a: torch.Tensor, c: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v . tanh(a_i + c_j) (b, r) for a (b, h), c (r, h), v (h,): elementwise, then summed along h;
    in place (one (b, r, h) buffer) when no gradient is needed, with the same rounding."""
    pre = a[:, None, :] + c[None, :, :]  # (b, r, h)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (a, c, v)):
        return (torch.tanh(pre) * v).sum(dim=2)
    return pre.tanh_().mul_(v).sum(dim=2)


def hidden_energy(a: torch.Tensor, c: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_ij = v . tanh(a_i + c_j) (B, R) for contexts a (B, h) and candidates c (R, h), in blocks
    of at most BLOCK elements; each block recomputed in the backward pass when there are several."""
    batch, width = a.shape
    columns = max(1, min(len(c), BLOCK // (width * max(1, min(batch, BLOCK_ROWS)))))  # candidates a block
    rows = max(1, min(batch, BLOCK // (width * columns)))  # contexts a block
    if rows >= batch and columns >= len(c):
        return hidden_block(a, c, v)
    recompute = torch.is_grad_enabled() and any(t.requires_grad for t in (a, c, v))

    def block(i: int, j: int) -> torch.Tensor:
        parts = (a[i: i + rows], c[j: j + columns], v)
        return checkpoint(hidden_block, *parts, use_reentrant=False) if recompute else hidden_block(*parts)

    return torch.cat([torch.cat([block(i, j) for j in range(0, len(c), columns)], dim=1)
                      for i in range(0, batch, rows)], dim=0)


class EnergyNetwork(nn.Module):
    """P(w_t | w_{t-n+1} .. w_{t-1}) = exp(-E) / sum exp(-E) over a vocabulary of `vocab_size` words."""

    num_classes = 0  # no class layer
    WORD_TABLES = ("C", "b", "W")  # the parameters with one row per word (`neural.oov` grows them)

    def __init__(self, shape: EnergyShape, vocab_size: int, *, output: str = "softmax", structure=None,
                 dropout: float = 0.0):
        super().__init__()
        if output != "softmax" or structure is not None or dropout:  # EnergyShape.refuse names them
            raise ValueError("the energy network has the full softmax only, and no dropout")
        self.shape, self.vocab_size = shape, vocab_size
        n, m, h, direct = shape.n, shape.m, shape.h, shape.direct
        self.n, self.m, self.h, self.direct = n, m, h, direct
        self.history = n - 1  # the context: n-1 words
        self.width = (n - 1) * m  # size of x_ctx
        self.C = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) the word feature table
        self.H = nn.Parameter(torch.empty(h, n * m))  # (h, n m) = [H_ctx, H_out]
        self.d = nn.Parameter(torch.empty(h))  # (h,) hidden biases
        self.v = nn.Parameter(torch.empty(h))  # (h,) output weights
        self.b = nn.Parameter(torch.empty(vocab_size))  # (V,) word biases
        self.W = nn.Parameter(torch.empty(vocab_size, self.width)) if direct else None  # (V, (n-1)m)
        self.reset_parameters()

    @staticmethod
    def saved_structure(state: dict) -> None:
        return None  # one output layer, the full softmax over -E, with no word structure

    def reset_parameters(self) -> None:
        """C ~ U(-0.05, 0.05); H, v and W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); d = b = 0."""
        nn.init.uniform_(self.C, -0.05, 0.05)
        nn.init.uniform_(self.H, -self.H.shape[1] ** -0.5, self.H.shape[1] ** -0.5)
        nn.init.zeros_(self.d)
        nn.init.uniform_(self.v, -self.h ** -0.5, self.h ** -0.5)
        nn.init.zeros_(self.b)
        if self.direct:
            nn.init.uniform_(self.W, -self.width ** -0.5, self.width ** -0.5)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """Start from the unigram q (V,): b = -log q, so that P(w | h) = q_w for every h while the
        hidden energies are small."""
        self.b.copy_(-unigram.log())

    @property
    def H_ctx(self) -> torch.Tensor:
        return self.H[:, : self.width]  # (h, (n-1)m)

    @property
    def H_out(self) -> torch.Tensor:
        return self.H[:, self.width:]  # (h, m)

    def decay_parameters(self) -> list[nn.Parameter]:
        """The weights and C: what weight decay applies to (never the biases b and d)."""
        return [p for p in (self.C, self.H, self.v, self.W) if p is not None]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [self.d, self.b]

    def energy(self, window: torch.Tensor) -> torch.Tensor:
        """E(w_{t-n+1}, ..., w_t) (B,) of whole windows (B, n) int64 (oldest first, the output word
        last), context biases included: the paper's equation, term by term."""
        x = F.embedding(window, self.C).view(len(window), -1)  # (B, n m)
        energy = torch.tanh(torch.addmm(self.d, x, self.H.t())) @ self.v + self.b[window].sum(dim=1)
        if self.direct:
            energy = energy + (self.W[window[:, -1]] * x[:, : self.width]).sum(dim=1)
        return energy

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """z = [a, x_ctx] with a = d + H_ctx x_ctx (B, h) (without direct connections: a alone) for
        contexts (B, n-1) int64; a sparse gradient for C (the rows in the contexts)."""
        x = F.embedding(context, self.C, sparse=True).view(context.shape[0], -1)  # (B, (n-1)m)
        a = torch.addmm(self.d, x, self.H_ctx.t())  # (B, h)
        return torch.cat([a, x], dim=1) if self.direct else a

    def scores(self, z: torch.Tensor, words: torch.Tensor | None = None) -> torch.Tensor:
        """y_ij = -(v . tanh(a_i + H_out C(j)) + b_j [+ W_j . x_i]) (B, R) of the candidates `words`
        (R,), shared by the B contexts of z, or of the whole vocabulary when words is None. The
        rows of C and W a candidate set uses are read through sparse lookups (sparse gradients)."""
        a = z[:, : self.h]
        if words is None:
            table, bias, weights = self.C, self.b, self.W  # (V, m), (V,), (V, (n-1)m)
        else:
            table, bias = F.embedding(words, self.C, sparse=True), self.b[words]
            weights = F.embedding(words, self.W, sparse=True) if self.direct else None
        y = -(hidden_energy(a, table @ self.H_out.t(), self.v) + bias)  # (B, R); one (R, m)(m, h) product
        if self.direct:
            y = torch.addmm(y, z[:, self.h:], weights.t(), alpha=-1)  # - W_j . x_i
        return y

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor,
                       sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The hook of the sampled objectives: y of each example's target (B,) (its own candidate,
        B h tanh) and of the k words of `sample` for every example (B, k) (shared, B k h tanh)."""
        a, words = z[:, : self.h], torch.cat([target, sample])
        rows = F.embedding(words, self.C, sparse=True) @ self.H_out.t()  # (B + k, h)
        batch = len(target)
        bias = self.b[words]  # (B + k,)
        positive = -((torch.tanh(a + rows[:batch]) * self.v).sum(dim=1) + bias[:batch])  # (B,)
        negative = -(hidden_energy(a, rows[batch:], self.v) + bias[batch:])  # (B, k)
        if self.direct:
            x, weights = z[:, self.h:], F.embedding(words, self.W, sparse=True)  # (B, (n-1)m), (B + k, (n-1)m)
            positive = positive - (x * weights[:batch]).sum(dim=1)
            negative = torch.addmm(negative, x, weights[batch:].t(), alpha=-1)
        return positive, negative

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """The scores y = -E + (the context's biases), shape (B, V); softmax(y) is P(. | context)."""
        return self.scores(self.features(context))

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of -log P(target | context), normalised over the whole vocabulary
        (the objective "softmax"): B V h tanh forward, recomputed block by block backward."""
        return F.cross_entropy(self.scores(z), target)

    @torch.inference_mode()
    def log_probs(self, context: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log P(target | context) (B,), or log P(. | context) (B, V) when target is None."""
        return log_softmax(*self.log_softmax_parts(context, target), target)

    @torch.inference_mode()
    def log_softmax_parts(self, context: torch.Tensor, target: torch.Tensor | None = None,
                          bf16: bool = False):
        """As `SoftmaxLayer.parts`: y[target] (B,) (or y (B, V)), the row maxima (B,) and
        sum_j exp(y_j - max) (B,); log P(target) = y[target] - max - log(sum)."""
        return softmax_parts(self(context), target)


register(Family("energy", EnergyShape, EnergyNetwork, order=1,
                summary="the energy-minimisation network, section 5.1"))

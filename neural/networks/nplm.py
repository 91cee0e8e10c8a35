"""The network of Bengio et al. (2003), equation (1):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))          the n-1 context vectors, concatenated
    z = [tanh(d + H x), x]                                   the features
    y = b + W x + U tanh(d + H x) = b + [U, W] z             one score per word of the vocabulary
    P(w_t = i | context) = exp(y_i) / sum_j exp(y_j)         the softmax

with one shared table C (|V| x m). Options: h = 0 drops the hidden layer (y = b + W x); direct=False
drops the direct connections (W = 0, so W is not a parameter at all); bag = L > 0 widens the context
(not in the paper; NPLM (ours), `neural.ours`): x gains one more block, the mean of C over the L words
before the n-1 nearest, (1/L) sum_{j=n}^{n+L-1} C(w_{t-j}), so the network reads n-1+L words, the far
ones as a bag (what the text is about, in m numbers), the near ones in order.

Contexts are stored oldest first, so x here is C(w_{t-n+1}) ... C(w_{t-1}); the order of the blocks
is a relabelling of H and W and changes nothing. A context shorter than n-1 tokens (the start of a
stream) is left-padded with PAD_ID, the id of <unk> (0): the model sees "unknown word" before the
first token, with no extra row in C, so the parameter count stays the paper's.

The network computes the features z (K = h + (n-1)m with direct connections, else h); its output
layer (`self.output`, `neural.outputs.layers`) turns them into P(. | context): the paper's softmax, whose
[U, W] is ONE fused matrix multiplied once against z (the parameters then number
|V|(1 + nm + h) + h(1 + (n-1)m), as in section 3 of the paper), or the class-factored or tree layer
of the objectives "class" and "tree".

Training FLOPs per target token (`NPLMShape.training_flops`): 6 h w for the hidden layer, w = (n-1)m
(+ m with a bag) the width of x (a (B, w) x (w, h) GEMM, 2 h w, and the two of its gradient: x's, which
trains C, and H's), plus the output layer's over K features (`neural.outputs.flops`): 6 V K for the full
softmax, (6 k + 4) K for k sampled words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.families import Family, NetworkShape, check_numbers, register
from neural.outputs.flops import output_flops
from neural.outputs.layers import output_layer


@dataclass(frozen=True)
class NPLMShape(NetworkShape):
    """Equation (1) of the paper (`neural.networks.nplm.NPLM`)."""
    n: int = field(default=5, metadata={"help": "order: n-1 context words"})
    m: int = field(default=60, metadata={"help": "word feature size"})
    h: int = field(default=50, metadata={"help": "hidden units, 0 for none"})
    direct: bool = field(default=True, metadata={"help": "direct connections W from x to the output (MLP1: on)"})
    bag: int = field(default=0, metadata={"help": "words before the n-1 nearest read as one more block of x, "
                                                  "their mean feature vector (0: none, the paper's)"})

    outputs: ClassVar[tuple[str, ...] | None] = None  # any output layer over its features z
    parallel: ClassVar[tuple[str, ...]] = ("data", "vocab")

    def __post_init__(self):
        if self.h == 0 and not self.direct:
            raise LMBenchError("h = 0 without direct connections has no path from the context to the "
                               "output: give --h > 0 or --direct")
        check_numbers([("--n", self.n, ">= 2", self.n >= 2), ("--m", self.m, ">= 1", self.m >= 1),
                       ("--h", self.h, ">= 0", self.h >= 0), ("--bag", self.bag, ">= 0", self.bag >= 0)])

    @property
    def input_width(self) -> int:
        """The size of x: n-1 blocks of m, one more with a bag."""
        return (self.n - 1 + (1 if self.bag else 0)) * self.m

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """6 h w (the hidden layer) + the output layer's over K = h + w (h without direct connections):
        the module docstring."""
        width = self.input_width
        features = self.h + (width if self.direct else 0)
        return 6.0 * self.h * width + output_flops(features, vocab_size, run, factored_rows)

PAD_ID = 0  # <unk>: what the model sees before the first token of a stream


class NPLM(nn.Module):
    """P(w_t | w_{t-n+1} .. w_{t-1}) over a vocabulary of `vocab_size` words."""

    def __init__(self, shape: NPLMShape, vocab_size: int, *, output: str = "softmax",
                 structure: torch.Tensor | None = None, dropout: float = 0.0):
        """output: the output layer (`neural.config.OBJECTIVES`: "softmax", "class", "tree"), over the
        word structure `structure` it needs (the class map, the tree). dropout: on z while training
        (not in the paper)."""
        super().__init__()
        self.shape, self.vocab_size, self.dropout = shape, vocab_size, dropout
        n, m, h, direct = shape.n, shape.m, shape.h, shape.direct
        self.n, self.m, self.h, self.direct = n, m, h, direct
        self.bag = shape.bag
        self.history = n - 1 + self.bag  # the context: the bag's words, then the n-1 nearest
        width = shape.input_width  # size of x
        self.C = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) the word feature table
        if h:
            self.H = nn.Parameter(torch.empty(h, width))  # (h, (n-1)m) hidden weights
            self.d = nn.Parameter(torch.empty(h))  # (h,) hidden biases
        self.output = output_layer(output)(vocab_size, h + (width if direct else 0), structure)  # z (K) -> P
        self.WORD_TABLES = ("C", *(f"output.{name}" for name in self.output.WORD_TABLES))  # `neural.oov`
        self.reset_parameters()

    @staticmethod
    def saved_structure(state: dict) -> torch.Tensor | None:
        """The output layer's word structure a saved state holds (None for the softmax layer)."""
        return upgraded(state).get("output.structure")

    def reset_parameters(self) -> None:
        """C ~ U(-0.05, 0.05); H ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); d = 0; then the output layer's."""
        nn.init.uniform_(self.C, -0.05, 0.05)
        if self.h:
            bound = self.H.shape[1] ** -0.5
            nn.init.uniform_(self.H, -bound, bound)
            nn.init.zeros_(self.d)
        self.output.reset_parameters()

    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """Start from the unigram q (V,): the output layer's biases such that P(w | h) = q_w for every h
        while its weights times z are small."""
        self.output.set_unigram_biases(unigram)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """nn.Module's (a state saved before the output layers were modules upgraded), refusing a state
        made with another output layer or word structure."""
        state_dict = upgraded(state_dict)
        self.output.check_structure(state_dict.get("output.structure"))
        return super().load_state_dict(state_dict, strict, assign)

    @property
    def num_classes(self) -> int:
        return self.output.num_classes

    @property
    def U(self) -> torch.Tensor | None:
        """(V, h) hidden-to-output weights of the softmax layer."""
        return self.output.out[:, : self.h] if self.h else None

    @property
    def W(self) -> torch.Tensor | None:
        """(V, (n-1)m) direct connections of the softmax layer, None when there are none."""
        return self.output.out[:, self.h:] if self.direct else None

    def decay_parameters(self) -> list[nn.Parameter]:
        """The weights and C: what weight decay applies to (never the biases)."""
        return [p for p in (self.C, getattr(self, "H", None)) if p is not None] + self.output.decay_parameters()

    def bias_parameters(self) -> list[nn.Parameter]:
        return [p for p in (getattr(self, "d", None),) if p is not None] + self.output.bias_parameters()

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """z = [tanh(d + H x), x] (or the part of it that exists) for contexts (B, history) int64."""
        # (B, (n-1)m); a sparse gradient: an update touches only the rows of C in the contexts
        x = F.embedding(context[:, self.bag:], self.C, sparse=True).view(context.shape[0], -1)
        if self.bag:  # (B, m) the mean feature vector of the bag, after the n-1 blocks
            x = torch.cat([x, F.embedding(context[:, :self.bag], self.C, sparse=True).mean(dim=1)], dim=1)
        if self.h:
            a = torch.tanh(torch.addmm(self.d, x, self.H.t()))  # (B, h)
            x = torch.cat([a, x], dim=1) if self.direct else a  # (B, K)
        return dropout(x, self.dropout) if self.dropout and self.training else x

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """The output layer's scores (B, V) (the softmax's y = b + [U, W] z); their softmax is P(. | context)
        for the softmax and tree layers, the full softmax of y for the class layer."""
        return self.output.scores(self.features(context))

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of the exact -log P(target | context) of the output layer."""
        return self.output.loss(z, target, bf16)

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor,
                       sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The hook of the sampled objectives, the softmax layer's (`SoftmaxLayer.sampled_scores`)."""
        return self.output.sampled_scores(z, target, sample)

    @torch.inference_mode()
    def log_probs(self, context: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log P(target | context) (B,), or log P(. | context) (B, V) when target is None, of the
        output layer (full_softmax: a class layer scored by the softmax of its y)."""
        return self.output.log_probs(self.features(context), target, bf16=bf16, full_softmax=full_softmax)


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout: each element kept with probability 1 - p and scaled by 1 / (1 - p). The mask
    is drawn as uniform numbers >= p, which on the CPU costs a third of torch's Bernoulli draws (0.38
    against 1.0 ms for a 128 x 900 minibatch, 13% of an update of NPLM (ours); bench/nplm_bench.py)."""
    keep = torch.rand_like(x) >= p  # (same shape as x) bool
    return x * keep * (1.0 / (1.0 - p))


LEGACY_NAMES = {"out": "output.out", "b": "output.b", "class_out": "output.class_out",
                "class_b": "output.class_b", "word_class": "output.structure"}


def upgraded(state: dict) -> dict:
    """A state saved before the output layer was a module (its tables at the top) in today's names."""
    if not any(name in state for name in LEGACY_NAMES):
        return state
    return {LEGACY_NAMES.get(name, name): value for name, value in state.items()}


def parameter_count(vocab_size: int, n: int, m: int, h: int, direct: bool) -> int:
    """|V|(1 + nm + h) + h(1 + (n-1)m) with direct connections; |V|(1 + m + h) + h(1 + (n-1)m)
    without (W's |V|(n-1)m weights gone)."""
    with_direct = vocab_size * (1 + n * m + h) + h * (1 + (n - 1) * m)
    return with_direct if direct else with_direct - vocab_size * (n - 1) * m


register(Family("nplm", NPLMShape, NPLM, vocab_slice="neural.parallel.teams:VocabSlice", order=0,
                summary="equation 1 of the paper (default)"))

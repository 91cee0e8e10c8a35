"""A log-bilinear window family (Mnih & Hinton 2007): a contributor's family in one file, as
`neural/networks/NAME.py` holds one. Not a family of the suite: tests/test_hostile_round4_contributor.py
copies this file among the family files for one test and lets the registry find it.

    r = sum_{i=1}^{n-1} C_i R(w_{t-i})       the predicted feature vector (m,), C_i (m x m), or diagonal
    y_j = R(j) . r + b_j                     one score per word
    P(w_t = j | context) = softmax(y)_j

ONE word table R (V x m) both reads the context and scores the candidates (where the NPLM has C and
[U, W]); its rows are read through sparse lookups, so a sampled update touches only the rows of its
contexts, targets and samples. `--diagonal` makes each C_i a vector (m numbers, not m x m).

Training FLOPs per target token (`LogBilinearShape.training_flops`): 6 (n-1) m^2 for the context (a
(B, m) x (m, m) product per position and its two gradients; 6 (n-1) m when diagonal, elementwise),
plus the output layer's over K = m features (`neural.outputs.flops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from neural.families import Family, NetworkShape, check_numbers, register
from neural.outputs.flops import output_flops
from neural.outputs.layers import log_softmax, softmax_parts


@dataclass(frozen=True)
class LogBilinearShape(NetworkShape):
    """The log-bilinear model (`LogBilinear`)."""
    n: int = field(default=5, metadata={"help": "order: n-1 context words"})
    m: int = field(default=60, metadata={"help": "word feature size"})
    diagonal: bool = field(default=False, metadata={"help": "log-bilinear: diagonal context matrices C_i"})

    def __post_init__(self):
        check_numbers([("--n", self.n, ">= 2", self.n >= 2), ("--m", self.m, ">= 1", self.m >= 1)])

    def refuse(self, run) -> str | None:
        if run.dropout:
            return "--model lbl has no place for dropout: drop --dropout"
        if run.precision == "bf16":
            return "--model lbl trains in fp32: drop --precision bf16"
        return super().refuse(run)

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """The module docstring's count."""
        context = 6.0 * (self.n - 1) * self.m * (1 if self.diagonal else self.m)
        return context + output_flops(self.m, vocab_size, run, factored_rows)


class LogBilinear(nn.Module):
    """P(w_t | w_{t-n+1} .. w_{t-1}) = softmax(R r + b) over a vocabulary of `vocab_size` words."""

    num_classes = 0  # the full softmax only
    WORD_TABLES = ("R", "b")  # the one table of word features, and the word biases

    def __init__(self, shape: LogBilinearShape, vocab_size: int, *, output: str = "softmax", structure=None,
                 dropout: float = 0.0):
        super().__init__()
        if output != "softmax" or structure is not None or dropout:  # LogBilinearShape.refuse names them
            raise ValueError("the log-bilinear network has the full softmax only, and no dropout")
        self.shape, self.vocab_size = shape, vocab_size
        self.history = shape.n - 1
        self.R = nn.Parameter(torch.empty(vocab_size, shape.m))  # (V, m)
        self.C = nn.Parameter(torch.empty(self.history, shape.m) if shape.diagonal
                              else torch.empty(self.history, shape.m, shape.m))  # (n-1, m) or (n-1, m, m)
        self.b = nn.Parameter(torch.empty(vocab_size))  # (V,)
        self.reset_parameters()

    @staticmethod
    def saved_structure(state: dict) -> None:
        return None  # no word structure

    def reset_parameters(self) -> None:
        """R ~ U(-0.05, 0.05); C ~ U(-1/sqrt(m), 1/sqrt(m)); b = 0."""
        nn.init.uniform_(self.R, -0.05, 0.05)
        nn.init.uniform_(self.C, -self.shape.m ** -0.5, self.shape.m ** -0.5)
        nn.init.zeros_(self.b)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """b = log q: P(w | h) = q_w while R r is small."""
        self.b.copy_(unigram.log())

    def decay_parameters(self) -> list[nn.Parameter]:
        return [self.R, self.C]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [self.b]

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """r (B, m) for contexts (B, n-1) int64, oldest first."""
        x = F.embedding(context, self.R, sparse=True)  # (B, n-1, m)
        if self.shape.diagonal:
            return (x * self.C).sum(dim=1)
        return torch.einsum("bij,ikj->bk", x, self.C)

    def scores(self, z: torch.Tensor) -> torch.Tensor:
        """y = R r + b (B, V)."""
        return torch.addmm(self.b, z, self.R.t())

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        return self.scores(self.features(context))

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of the exact -log P(target | context)."""
        return F.cross_entropy(self.scores(z), target)

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor,
                       sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """y of each example's target (B,) and of the k words of `sample` for every example (B, k),
        through the rows of R and b they use only."""
        words = torch.cat([target, sample])
        rows, bias = F.embedding(words, self.R, sparse=True), self.b[words]
        batch = len(target)
        positive = (z * rows[:batch]).sum(dim=1) + bias[:batch]
        return positive, torch.addmm(bias[batch:], z, rows[batch:].t())

    @torch.inference_mode()
    def log_probs(self, context: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log P(target | context) (B,), or log P(. | context) (B, V) when target is None."""
        return log_softmax(*softmax_parts(self(context), target), target)


register(Family("lbl", LogBilinearShape, LogBilinear, context="window", label="log-bilinear model",
                beyond_2003=True, summary="a log-bilinear model (Mnih & Hinton 2007), one word table"))

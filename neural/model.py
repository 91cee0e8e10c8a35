"""The network of Bengio et al. (2003), equation (1):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))          the n-1 context vectors, concatenated
    y = b + W x + U tanh(d + H x)                            one score per word of the vocabulary
    P(w_t = i | context) = exp(y_i) / sum_j exp(y_j)         the softmax

with one shared table C (|V| x m). Options: h = 0 drops the hidden layer (y = b + W x); direct=False
drops the direct connections (W = 0, so W is not a parameter at all).

Contexts are stored oldest first, so x here is C(w_{t-n+1}) ... C(w_{t-1}); the order of the blocks
is a relabelling of H and W and changes nothing. A context shorter than n-1 tokens (the start of a
stream) is left-padded with PAD_ID, the id of <unk> (0): the model sees "unknown word" before the
first token, with no extra row in C, so the parameter count stays the paper's.

The output layer is fused: U and W are the two column blocks of ONE matrix `out` = [U, W]
(|V| x (h + (n-1)m)), multiplied once against z = [tanh(d + H x), x]. With direct connections the
parameters number |V|(1 + nm + h) + h(1 + (n-1)m), as in section 3 of the paper.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

PAD_ID = 0  # <unk>: what the model sees before the first token of a stream


class NPLM(nn.Module):
    """P(w_t | w_{t-n+1} .. w_{t-1}) over a vocabulary of `vocab_size` words."""

    def __init__(self, vocab_size: int, n: int, m: int, h: int, direct: bool, dropout: float = 0.0):
        super().__init__()
        self.dropout = dropout  # training only: dropout on z = [tanh(d + Hx), x] (not in the paper)
        if n < 2 or m < 1 or h < 0:
            raise ValueError(f"need n >= 2, m >= 1, h >= 0 (got n={n}, m={m}, h={h})")
        if h == 0 and not direct:
            raise ValueError("h = 0 without direct connections leaves no path from the context")
        self.vocab_size, self.n, self.m, self.h, self.direct = vocab_size, n, m, h, direct
        width = (n - 1) * m  # size of x
        self.C = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) the word feature table
        if h:
            self.H = nn.Parameter(torch.empty(h, width))  # (h, (n-1)m) hidden weights
            self.d = nn.Parameter(torch.empty(h))  # (h,) hidden biases
        self.out = nn.Parameter(torch.empty(vocab_size, h + (width if direct else 0)))  # (V, K) = [U, W]
        self.b = nn.Parameter(torch.empty(vocab_size))  # (V,) output biases
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """C ~ U(-0.05, 0.05); H and [U, W] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); d = b = 0."""
        nn.init.uniform_(self.C, -0.05, 0.05)
        if self.h:
            bound = self.H.shape[1] ** -0.5
            nn.init.uniform_(self.H, -bound, bound)
            nn.init.zeros_(self.d)
        bound = self.out.shape[1] ** -0.5
        nn.init.uniform_(self.out, -bound, bound)
        nn.init.zeros_(self.b)

    @property
    def U(self) -> torch.Tensor | None:
        """(V, h) hidden-to-output weights."""
        return self.out[:, : self.h] if self.h else None

    @property
    def W(self) -> torch.Tensor | None:
        """(V, (n-1)m) direct connections, None when there are none."""
        return self.out[:, self.h:] if self.direct else None

    def decay_parameters(self) -> list[nn.Parameter]:
        """The weights and C: what weight decay applies to (never the biases b and d)."""
        return [p for p in (self.C, getattr(self, "H", None), self.out) if p is not None]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [p for p in (getattr(self, "d", None), self.b) if p is not None]

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """z = [tanh(d + H x), x] (or the part of it that exists) for contexts (B, n-1) int64."""
        # (B, (n-1)m); a sparse gradient: an update touches only the rows of C in the contexts
        x = F.embedding(context, self.C, sparse=True).view(context.shape[0], -1)
        if self.h:
            a = torch.tanh(torch.addmm(self.d, x, self.H.t()))  # (B, h)
            x = torch.cat([a, x], dim=1) if self.direct else a  # (B, K)
        return F.dropout(x, self.dropout, self.training) if self.dropout else x

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """The scores y = b + [U, W] z, shape (B, V); softmax(y) is P(. | context)."""
        return torch.addmm(self.b, self.features(context), self.out.t())

    def softmax_nll(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of -log P(target | context) for features z (B, K), through the fused
        output layer. bf16: the two |V|-sized GEMMs (almost all the FLOPs) run in bfloat16, the
        softmax in fp32."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return SoftmaxNLL.apply(z, self.out, self.b, target, dtype)

    def output_rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of [U, W] (R, K) and of b (R,) for word ids (R,), for the sampled objectives:
        the gradient of [U, W] is sparse (only these rows), b's is dense but |V| numbers only."""
        return F.embedding(words, self.out, sparse=True), self.b[words]

    @torch.inference_mode()
    def log_softmax_parts(self, context: torch.Tensor, target: torch.Tensor | None = None,
                          bf16: bool = False):
        """For evaluation without materialising anything but the (B, V) scores:
        y[target] (B,) (or the whole y (B, V) when target is None), the row maxima (B,) and
        sum_j exp(y_j - max) (B,), in fp32 (fp64 for a double network);
        log P(target) = y[target] - max - log(sum)."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        z = self.features(context)
        scores = at_least_fp32(torch.addmm(self.b.to(dtype), z.to(dtype), self.out.to(dtype).t()))  # (B, V)
        picked = scores if target is None else scores.gather(1, target[:, None])[:, 0].clone()
        peak = scores.amax(dim=1, keepdim=True)  # (B, 1)
        if target is None:
            total = torch.exp(scores - peak).sum(dim=1)
        else:
            total = scores.sub_(peak).exp_().sum(dim=1)  # (B,) in place: no second (B, V) tensor
        return picked, peak[:, 0], total


def at_least_fp32(scores: torch.Tensor) -> torch.Tensor:
    """bf16 scores become fp32 for the softmax; fp32 and fp64 stay as they are."""
    return scores.float() if scores.dtype in (torch.bfloat16, torch.float16) else scores


class SoftmaxNLL(torch.autograd.Function):
    """loss = mean_i [log sum_j exp(y_ij) - y_i,target_i] with y = b + z out^T, fused.

    dloss/dy = (softmax(y) - onehot(target)) / B = s (e - total * onehot) with e = exp(y - max y)
    (B, V), total = sum_j e_j (B,) and s = 1 / (B total) (B,). The forward pass turns its one
    (B, V) score buffer into e - total * onehot in place; the backward pass folds the row scale s
    into the small operands: dloss/dz = s * (g out) (B, K), dloss/dout = g^T (s * z) (V, K),
    dloss/db = g^T s (V,), with g = e - total * onehot. No other |V|-sized tensor is made and no
    extra pass over the (B, V) buffer. The backward pass may run only once per forward."""

    @staticmethod
    def forward(ctx, z, out, b, target, dtype):
        zc, oc = z.to(dtype), out.to(dtype)
        scores = at_least_fp32(torch.addmm(b.to(dtype), zc, oc.t()))  # (B, V) y
        rows = torch.arange(len(target), device=scores.device)
        picked = scores[rows, target]  # (B,) y[target]
        peak = scores.amax(dim=1)  # (B,)
        total = scores.sub_(peak[:, None]).exp_().sum(dim=1)  # (B,); scores now holds e
        scores[rows, target] -= total  # g = e - total * onehot
        ctx.save_for_backward(zc, oc, scores, total)
        ctx.dtypes = (z.dtype, out.dtype, b.dtype)
        return (peak + total.log() - picked).mean()

    @staticmethod
    def backward(ctx, grad_loss):
        zc, oc, g, total = ctx.saved_tensors
        scale = grad_loss / (len(total) * total)  # (B,) s
        gc = g.to(oc.dtype)  # (B, V)
        grad_z = (gc @ oc).mul_(scale.to(oc.dtype)[:, None]).to(ctx.dtypes[0])  # (B, K)
        grad_out = (gc.t() @ (zc * scale.to(zc.dtype)[:, None])).to(ctx.dtypes[1])  # (V, K)
        grad_b = (g.t() @ scale.to(g.dtype)).to(ctx.dtypes[2])  # (V,)
        return grad_z, grad_out, grad_b, None, None


def parameter_count(vocab_size: int, n: int, m: int, h: int, direct: bool) -> int:
    """|V|(1 + nm + h) + h(1 + (n-1)m) with direct connections; |V|(1 + m + h) + h(1 + (n-1)m)
    without (W's |V|(n-1)m weights gone)."""
    with_direct = vocab_size * (1 + n * m + h) + h * (1 + (n - 1) * m)
    return with_direct if direct else with_direct - vocab_size * (n - 1) * m

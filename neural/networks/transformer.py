"""The `transformer` family: a small causal decoder over windows of the stream (Vaswani et al. 2017, in
the pre-norm form of GPT-2 / nanoGPT).

    x^0_i = E[w_{i-1}] (+ P[i] with learned positions)          (d,) for the i-th input of a window
    x^l = x^{l-1} + Attn(LN(x^{l-1}));  x^l = x^l + MLP(LN(x^l))  for each of the `layers` blocks
    z_i = LN(x^L_i)                                               (d,)
    P(w_i | the window's w_<i) = softmax(b + O z_i)                O = E when tied

Attention is causal multi-head attention through torch's `scaled_dot_product_attention` (fused kernels
on CUDA, the same numbers' definition on the CPU); with rotary positions (Su et al. 2021) the queries and
keys of each head are rotated by their position instead of adding P, so attention depends on relative
offsets. MLP = W_2 GELU(W_1 .), 4d wide by default. Dropout on the attention weights, after the
attention and MLP projections, and on the embeddings.

A window holds `context` = L inputs. Training reads the stream in lanes of windows of L tokens
(`neural.training.trainer`), nothing carried between them. Exact scoring (`score_stream`) slides the window
with stride S = L / 2, aligned on the stream's start: target t is scored in the window that ends at
the end of its block of S, v = S (floor(t / S) + 1), and starts at u = max(0, v - L), so it sees the
t - u >= L - S = L / 2 tokens before it (all of them near the stream's start). Every token is scored
once; the network reads each token twice (L / S windows). Where a window ends past the stream's end it
is cut there: the causal mask makes a target's score independent of what follows it, so scoring the
stream equals scoring each target's window alone (`log_distribution`).

Training FLOPs per target token (`TransformerShape.training_flops`), for windows of T inputs (--steps,
else L): each block's products, 2 (3 d^2 + d^2 + 2 d ff) forward (the queries, keys and values, the
projection, the MLP), and attention's 4 T d (the scores q . k over the whole T x T square of a window,
the causal half masked as the kernels compute it, then the weighted sum of the values); three times
that with the backward pass: 6 layers (4 d^2 + 2 d ff + 2 T d), plus the output layer's over K = d
(`neural.outputs.flops`). LayerNorm, GELU, the softmax of attention and the rotations are not counted,
nor the scores a fused attention kernel recomputes in its backward pass (2 T d a block).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.networks.nplm import PAD_ID
from neural.families import Family, check_numbers, register
from neural.networks.stream import STREAM, StreamNetwork, StreamReader, StreamShape, padded_inputs
from neural.outputs.flops import output_flops
from neural.precision import bf16_products


@dataclass(frozen=True)
class TransformerShape(StreamShape):
    """A causal pre-norm decoder over windows of the stream (`neural.networks.transformer.TransformerNetwork`);
    trained by `neural.training.trainer` (--dropout on attention, residual branches and embeddings)."""
    layers: int = field(default=4, metadata={"help": "stacked layers (recurrent: 1 or 2; transformer: blocks)"})
    d: int = field(default=256, metadata={"help": "transformer: model width"})
    heads: int = field(default=4, metadata={"help": "transformer: attention heads"})
    ff: int = field(default=1024, metadata={"help": "transformer: MLP width"})
    length: int = field(default=128, metadata={"help": "transformer: L, inputs per window (scored with stride L/2)"})
    positions: str = field(default="rotary", metadata={"help": "transformer: rotary or learned"})
    tied: bool = field(default=True, metadata={"help": "the output word table is the input one (tied weights)"})

    run_defaults: ClassVar[dict] = {**StreamShape.run_defaults, "dropout": 0.2}
    renamed: ClassVar[dict] = {"context": "length"}  # (its name until 2026-12-03: checkpoints and results keep it)

    def __post_init__(self):
        if self.positions not in ("rotary", "learned"):
            raise LMBenchError(f"unknown positions {self.positions!r}: use rotary or learned")
        check_numbers([
            ("--layers", self.layers, ">= 1", self.layers >= 1), ("--d", self.d, ">= 1", self.d >= 1),
            ("--heads", self.heads, f"a divisor of --d {self.d}", self.heads >= 1 and self.d % self.heads == 0),
            ("--ff", self.ff, ">= 1", self.ff >= 1),
            ("--length", self.length, "even and >= 2", self.length >= 2 and self.length % 2 == 0)])
        if self.positions == "rotary" and (self.d // self.heads) % 2:
            raise LMBenchError(f"rotary positions rotate pairs of a head's {self.d // self.heads} dimensions: "
                               "give --d / --heads even, or --positions learned")

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """The module docstring's count, for windows of run.steps inputs (None: `length`)."""
        window, d = run.steps or self.length, self.d
        return (6.0 * self.layers * (4 * d * d + 2 * d * self.ff + 2 * window * d)
                + output_flops(d, vocab_size, run))


EVAL_WINDOWS = 32  # windows per forward pass when scoring (on CUDA 8 times as many)


def rotary_tables(length: int, dims: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (length, dims / 2) of the angles i * base^(-2k / dims) (Su et al. 2021, eq. 34)."""
    frequency = base ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)  # (dims / 2,)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * frequency[None, :]
    return angle.cos(), angle.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the pairs (x_2k, x_2k+1) of x (B, H, T, dh) by the angles of positions 0 .. T-1."""
    pairs = x.unflatten(-1, (-1, 2))  # (B, H, T, dh / 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[: x.shape[2]].to(x.dtype), sin[: x.shape[2]].to(x.dtype)  # (T, dh / 2)
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


class Block(nn.Module):
    """x + Attn(LN(x)), then + MLP(LN(.)), for x (B, T, d)."""

    def __init__(self, shape: TransformerShape, dropout: float):
        super().__init__()
        self.heads, self.dropout = shape.heads, dropout
        self.rotary = shape.positions == "rotary"
        self.ln_attention, self.ln_mlp = nn.LayerNorm(shape.d), nn.LayerNorm(shape.d)
        self.qkv = nn.Linear(shape.d, 3 * shape.d)
        self.projection = nn.Linear(shape.d, shape.d)
        self.mlp = nn.Sequential(nn.Linear(shape.d, shape.ff), nn.GELU(), nn.Linear(shape.ff, shape.d))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln_attention(x)).split(width, dim=2)  # (B, T, d) each
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, T, dh)
        if self.rotary:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                  dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.projection(attended.transpose(1, 2).reshape(batch, length, width)))
        return x + self.drop(self.mlp(self.ln_mlp(x)))


class TransformerNetwork(StreamNetwork):
    """P(w_i | the window's inputs up to i) through `layers` pre-norm causal blocks."""

    family = "transformer"

    def __init__(self, shape: TransformerShape, vocab_size: int, *, output: str = "softmax", structure=None,
                 dropout: float = 0.0):
        super().__init__(shape, vocab_size, shape.d, shape.d, output, dropout)
        self.stride = shape.length // 2  # S: targets scored per window, each seeing >= L - S = L/2 tokens
        self.position = nn.Parameter(torch.empty(shape.length, shape.d)) if shape.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(shape, dropout) for _ in range(shape.layers))
        self.ln_final = nn.LayerNorm(shape.d)
        cos, sin = rotary_tables(shape.length, shape.d // shape.heads)
        self.register_buffer("cos", cos.float(), persistent=False)  # (L, dh / 2)
        self.register_buffer("sin", sin.float(), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's: weights ~ N(0, 0.02), the residual projections' scaled by 1 / sqrt(2 layers); biases 0,
        LayerNorm gains 1."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, 0.02)
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for projection in (block.projection, block.mlp[2]):
                nn.init.normal_(projection.weight, 0.0, 0.02 / math.sqrt(2 * self.shape.layers))
        for table in (self.embedding, self.output, self.position):
            if table is not None:
                nn.init.normal_(table, 0.0, 0.02)

    def encode(self, inputs: torch.Tensor, state=None):
        """z (B, T, d) for windows of inputs (B, T <= L); no state is carried (None)."""
        if inputs.shape[1] > self.shape.length:
            raise LMBenchError(f"a window of {inputs.shape[1]} inputs is longer than the context "
                               f"{self.shape.length}: cut the stream into windows of at most that many")
        x = self.embed(inputs)  # (B, T, d)
        if self.position is not None:
            x = x + self.position[: inputs.shape[1]]
        x = self.drop(x)
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.ln_final(x), None

    def window_of(self, target: int) -> tuple[int, int]:
        """(u, v): the inputs [u, v) of the window that scores target t (v the end of t's block)."""
        stride = self.stride
        end = stride * (target // stride + 1)
        return max(0, end - self.shape.length), end

    def stream_scores(self, stream: np.ndarray, start: int, *, bf16: bool = False,
                      progress: bool = False) -> np.ndarray:
        """log P(stream[t] | stream[:t]) for t >= start (float64): one window per block of S targets
        (see the module docstring), EVAL_WINDOWS windows a forward pass (8 times as many on CUDA)."""
        inputs = padded_inputs(stream)
        stride, length = self.stride, self.shape.length
        first, last = start // stride, (len(stream) - 1) // stride  # the blocks holding targets
        blocks = np.arange(first, last + 1)
        device = self.embedding.device
        result = torch.empty(len(stream) - start, dtype=torch.float64, device=device)
        per_pass = EVAL_WINDOWS * (8 if device.type == "cuda" else 1)
        groups = range(0, len(blocks), per_pass)
        if progress:
            from lmbench.progress import progress_bar
            groups = progress_bar(groups, desc="eval transformer", unit="batch")
        targets_all = np.asarray(stream, dtype=np.int64)
        for lo in groups:
            group = blocks[lo: lo + per_pass]
            ends = stride * (group + 1)  # (W,) v
            begins = np.maximum(0, ends - length)  # (W,) u
            rows = np.full((len(group), length), PAD_ID, dtype=np.int64)
            position = begins[:, None] + np.arange(length)[None, :]  # (W, L) target index of each column
            for i, (u, v) in enumerate(zip(begins, np.minimum(ends, len(stream)))):
                rows[i, : v - u] = inputs[u:v]
            scored = ((position >= np.maximum(ends - stride, start)[:, None]) & (position < ends[:, None])
                      & (position < len(stream)))
            with bf16_products(device.type, bf16):
                z, _ = self.encode(torch.from_numpy(rows).to(device))  # (W, L, d)
            mask = torch.from_numpy(scored).to(device)
            picked = torch.from_numpy(targets_all[position[scored]]).to(device)
            result[torch.from_numpy(position[scored] - start).to(device)] = self.score_positions(z[mask], picked, bf16)
        return result.cpu().numpy()

    def history_log_probs(self, context: list[int]) -> torch.Tensor:
        """log P(. | context) (V,) from the window that `score_stream` gives target len(context)."""
        return self.window_log_probs(padded_inputs(np.asarray(context, dtype=np.int64)), len(context))

    def window_log_probs(self, inputs: Sequence[int], target: int) -> torch.Tensor:
        """log P(. | stream[:target]) (V,) from the window that `score_stream` gives target t = `target`: its
        inputs [u, t] (`window_of`, at most L) are the last t + 1 - u of `inputs`, the stream's inputs up to t
        ([PAD, w_0 .. w_{t-1}], or at least their last L)."""
        u, _ = self.window_of(target)
        width = target + 1 - u
        row = torch.full((1, self.shape.length), PAD_ID, dtype=torch.int64, device=self.embedding.device)
        row[0, :width] = torch.as_tensor(np.asarray(inputs[len(inputs) - width:], dtype=np.int64))
        z, _ = self.encode(row)  # (1, L, d)
        return self.log_probs(z[0, width - 1: width])[0]

    def reader(self, context: Sequence[int]) -> "TransformerReader":
        """The window slid along the tokens read (`TransformerReader`): at most L inputs read a step."""
        return TransformerReader(self, context)


class TransformerReader(StreamReader):
    """`TransformerNetwork.reader`: the last L inputs of the tokens read and the position of the next target;
    each distribution reads its window of them (`window_log_probs`), as `history_log_probs` of all the tokens
    read does, so that a step costs one window of L however many tokens were read."""

    def __init__(self, net: TransformerNetwork, context: Sequence[int]):
        super().__init__(net, context)
        self.target = len(self.inputs) - 1  # t: the tokens read
        del self.inputs[:-net.shape.length]

    def read(self, token: int) -> None:
        self.inputs.append(int(token))
        self.target += 1
        if len(self.inputs) > self.net.shape.length:
            del self.inputs[0]

    def log_probs(self) -> torch.Tensor:
        return self.net.window_log_probs(self.inputs, self.target)


register(Family("transformer", TransformerShape, TransformerNetwork, label="Transformer", order=3, mixed_precision=True,
                quick={"layers": 2, "d": 64, "heads": 2, "ff": 256, "length": 32},
                summary="a small causal Transformer, sliding-window scoring", **STREAM))

"""Networks that read the continuous stream (`neural.lstm`, `neural.transformer`): their shared word
tables and output layer, and their scoring behind the suite's interface.

The paper's network sees a window of n-1 words; these see the stream. Both are built the same way:

    x_t = E[w_{t-1}]                       the input table E (V x m), w_{-1} = PAD_ID (<unk>, as the NPLM)
    z_t = encoder(x_0 .. x_t)              features (K,): an LSTM's last layer, a Transformer's last block
    y_t = b + O z_t                        one score per word, O (V x K); P(w_t | w_<t) = softmax(y_t)

With `tied` (Press & Wolf 2017; Inan et al. 2017) O is E itself (m = K): the one table both reads and
predicts words, which halves the word parameters and, on corpora of about a million tokens, lowers
perplexity. `b` starts at the log unigram of train, as the NPLM's.

The output layer answers the hooks of `neural.objectives` as the NPLM does: `softmax_nll` (the fused
exact softmax of `neural.output.SoftmaxNLL`) and `sampled_scores` (the scores of the targets and of k
sampled words only), so the same objectives train every family. The features of a batch of lanes
(B, T, K) are flattened to (B T, K) for them.

Exact scoring (`StreamLanguageModel`): every token of a split is scored once, given the stream
train | valid | test before it (`LanguageModel.logprobs` hands over the whole stream). Each family says
how in its `score_stream`: the LSTM carries its state from the start of the stream (in lanes, each
warmed on the tokens before its start), the Transformer slides a window of its context. The log-softmax
is finished in float64 from the network's scores (`neural.model.softmax_parts`), as `neural.lm` does.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel
from neural.model import PAD_ID
from neural.output import SoftmaxNLL, at_least_fp32, softmax_parts

EVAL_ROWS = 4096  # positions per output GEMM when scoring


def padded_inputs(stream: np.ndarray) -> np.ndarray:
    """(len + 1,) int64: PAD_ID then the stream; entry t is the input that predicts stream[t]."""
    return np.concatenate([[PAD_ID], np.asarray(stream, dtype=np.int64)])


class StreamNetwork(nn.Module):
    """Base of the stream networks: the input table E (V x m), the output layer y = b + O z over V words
    (O = E when tied), and the hooks of the objectives. A subclass sets `family`, builds its encoder and
    implements `encode`, `score_stream` and `log_distribution`."""

    family = ""
    history = None  # the whole stream, not a window (`neural.families`)
    num_classes = 0
    WORD_TABLES = ("embedding", "output", "b")

    def __init__(self, shape, vocab_size: int, m: int, width: int, output: str = "softmax", dropout: float = 0.0):
        """Word tables for vectors of m and features of `width`; `dropout` the rate the encoder uses
        (`self.drop`, training only)."""
        super().__init__()
        self.dropout, self.drop = dropout, nn.Dropout(dropout)
        if output != "softmax":
            raise LMBenchError(f"--model {self.family} has the full softmax output layer only: train it with "
                               "--objective softmax, importance or nce")
        tied = shape.tied
        self.shape, self.vocab_size, self.tied = shape, vocab_size, tied
        self.embedding = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) E
        self.output = None if tied else nn.Parameter(torch.empty(vocab_size, width))  # (V, K) O
        self.b = nn.Parameter(torch.zeros(vocab_size))  # (V,)

    @property
    def out(self) -> torch.Tensor:
        """(V, K) O, the output table (E itself when tied)."""
        return self.embedding if self.output is None else self.output

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        """E[inputs]: (B, T) int64 -> (B, T, m)."""
        return F.embedding(inputs, self.embedding)

    def encode(self, inputs: torch.Tensor, state=None):
        """Features z (B, T, K) of inputs (B, T) and the state to carry to the next chunk (None for a
        network without one)."""
        raise NotImplementedError

    @staticmethod
    def saved_structure(state: dict) -> None:
        """The word structure of a saved state's output layer: none (always the full softmax)."""
        return None

    def features(self, context):
        raise LMBenchError(f"a {self.family} network reads the stream, not windows: it is trained by "
                           "neural.stream_train and scored by its score_stream")

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """The exact objective of the output layer: the full softmax's mean -log P."""
        return self.softmax_nll(z, target, bf16)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """b = log q for the unigram q (V,): P(w | h) = q_w while O z is small."""
        self.b.copy_(unigram.log())

    def decay_parameters(self) -> list[nn.Parameter]:
        """The matrices (weight decay applies to them), never biases, gains or b."""
        return [p for p in self.parameters() if p.dim() >= 2]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.dim() < 2]

    # the hooks of neural.objectives, over flattened features z (N, K) and targets (N,)
    def softmax_nll(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean of -log softmax(y)[target], fused (`neural.output.SoftmaxNLL`)."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return SoftmaxNLL.apply(z, self.out, self.b, target, dtype)

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor, sample: torch.Tensor):
        """y of each target (N,) and of the k sampled words for every position (N, k), from their rows
        of O and b only."""
        rows = torch.cat([target, sample])
        weights, bias = self.out.index_select(0, rows), self.b.index_select(0, rows)
        count = len(target)
        positive = (z * weights[:count]).sum(dim=1) + bias[:count]  # (N,)
        return positive, torch.addmm(bias[count:], z, weights[count:].t())  # (N, k)

    @torch.inference_mode()
    def log_probs(self, z: torch.Tensor, target: torch.Tensor | None = None, bf16: bool = False) -> torch.Tensor:
        """float64 log P(target | history) (N,) for features z (N, K), or log P(. | history) (N, V)
        when target is None: y from an fp32 (or bf16) GEMM, the log-softmax finished in float64."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        scores = at_least_fp32(torch.addmm(self.b.to(dtype), z.to(dtype), self.out.to(dtype).t()))  # (N, V)
        picked, peak, total = softmax_parts(scores, target)
        if target is None:
            return picked.double() - peak.double()[:, None] - total.double().log()[:, None]
        return picked.double() - peak.double() - total.double().log()

    def score_positions(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """`log_probs` of many positions (N, K), in GEMMs of EVAL_ROWS rows."""
        return torch.cat([self.log_probs(z[lo: lo + EVAL_ROWS], target[lo: lo + EVAL_ROWS], bf16)
                          for lo in range(0, len(z), EVAL_ROWS)]) if len(z) else z.new_zeros(0, dtype=torch.float64)

    @torch.inference_mode()
    def score_stream(self, stream: np.ndarray, start: int, *, bf16: bool = False, progress: bool = False,
                     **options) -> np.ndarray:
        """Natural-log P(stream[t] | stream[:t]) for t = start .. len - 1, float64, in eval mode (the
        family's `stream_scores`, with its own options)."""
        was_training = self.training
        self.eval()
        try:
            return self.stream_scores(stream, start, bf16=bf16, progress=progress, **options)
        finally:
            self.train(was_training)

    @torch.inference_mode()
    def log_distribution(self, context: Sequence[int]) -> torch.Tensor:
        """float64 log P(. | context) (V,), the history read as `score_stream` reads it, in eval mode."""
        was_training = self.training
        self.eval()
        try:
            return self.history_log_probs(list(context))
        finally:
            self.train(was_training)

    def stream_scores(self, stream: np.ndarray, start: int, *, bf16: bool, progress: bool) -> np.ndarray:
        raise NotImplementedError

    def history_log_probs(self, context: list[int]) -> torch.Tensor:
        raise NotImplementedError


def score_family(net: StreamNetwork, stream: np.ndarray, start: int, *, batch_size: int | None = None,
                 bf16: bool = False, progress: bool = False, factored: bool = True) -> np.ndarray:
    """The scorer of the stream families (`neural.families`): `net.score_stream` (its batches are its
    own: batch_size and factored, the window networks' options, do not apply)."""
    return net.score_stream(stream, start, bf16=bf16, progress=progress)


class StreamLanguageModel(LanguageModel):
    """A trained stream network behind the suite's interface (order None: the whole history). It is
    made by `neural.stream_train.train_stream` and loaded by `neural.stream_train.load_stream`."""

    order = None

    def __init__(self, net: StreamNetwork, bf16: bool = False):
        self.net = net.eval()
        self.vocab_size = net.vocab_size
        self.bf16 = bf16

    def _fit(self, corpus) -> None:
        raise LMBenchError(f"a {self.net.family} network is trained with neural.stream_train.train_stream "
                           f"(or `lmbench nplm train --model {self.net.family}`), not fit(): train it, then "
                           "load it with neural.stream_train.load_stream")

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        return self.net.score_stream(stream, start, bf16=self.bf16)

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        return torch.exp(self.net.log_distribution(list(context))).cpu().numpy()

"""The one exact scorer of every network: per-token log-probabilities of a stream, each token given the
stream before it, for the trainer's validation, the final figures, the rows of `reproduce` and
`lmbench eval` alike (`score_stream`, and `score_split` for a split of a corpus).

A window network (`neural.families`: the NPLM, the energy network) is scored here, in large batches of
windows: every log-probability is the network's `log_probs`, its output layer's exact distribution,
finished in float64 (the full softmax: log P(w_t | context) = y[w_t] - max(y) - log(sum_j exp(y_j -
max(y))) with y, max and the sum from fp32 (or bf16) GEMMs; the class-factored and tree layers from the
scores of the classes and words, or nodes, they need only). factored=False scores a class layer by the
full softmax of its y instead. A stream network scores itself (`StreamingNetwork.score_stream`: its
lanes warmed, or a window sliding by half its length). `WindowLanguageModel` puts a window network
behind the suite's interface (`distribution` runs the same code on the same kind of batch, so log
distribution(context)[w] equals score to float64 rounding); `language_model` picks the interface of
either context.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from lmbench.model import LanguageModel, split_logprobs
from lmbench.progress import progress_bar
from neural.networks.nplm import PAD_ID

EVAL_BATCH = 2048  # contexts per GEMM when scoring
MIN_ROWS = 64  # distribution() pads its one context to this many rows so the GEMM is the batched kind
# (a one-row product goes through a matrix-vector kernel whose rounding differs in the last bit)


def context_windows(stream: np.ndarray, history: int, start: int = 0) -> np.ndarray:
    """(len(stream) - start, history) int64: row i holds the `history` ids (n - 1) before
    stream[start + i], oldest first, left-padded with PAD_ID where the stream has fewer."""
    padded = np.concatenate([np.full(history, PAD_ID, dtype=np.int64), np.asarray(stream, dtype=np.int64)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, history)  # (len + 1, history)
    return windows[start: len(stream)]


class StreamWindows:
    """The `history` ids before each position of a stream, oldest first and left-padded with PAD_ID
    like `context_windows`, gathered when asked for: windows[positions] is (B, history) int64 for
    positions (B,) int64, with no (T, history) table (a wide context, `NPLM.bag`, would make it
    history times the stream)."""

    def __init__(self, stream: np.ndarray, history: int, device: torch.device | str = "cpu"):
        padded = np.concatenate([np.full(history, PAD_ID, dtype=np.int64), np.asarray(stream, dtype=np.int64)])
        self.padded = torch.from_numpy(padded).to(device)  # (history + T,)
        self.offsets = torch.arange(history, device=device)  # (history,)

    def __getitem__(self, positions: torch.Tensor) -> torch.Tensor:
        return self.padded[positions[:, None] + self.offsets]  # padded[p + j] = stream[p + j - history]


def log_probs(net, context: torch.Tensor, target: torch.Tensor | None, *, bf16: bool = False,
              factored: bool = True) -> torch.Tensor:
    """float64 log P(target | context) (B,), or log P(. | context) (B, V) when target is None: the
    class-factored distribution of a network with a class layer when `factored`, else the full
    softmax of y (bf16: its GEMM in bfloat16; the factored form has no |V|-sized GEMM and ignores it)."""
    return net.log_probs(context, target, bf16=bf16, full_softmax=not factored)


def score_stream(net, stream: np.ndarray, start: int, *, batch_size: int = EVAL_BATCH,
                 bf16: bool = False, progress: bool = False, factored: bool = True) -> np.ndarray:
    """Natural-log P(stream[t] | stream[:t]) for t >= start, float64, shape (len - start,): a window
    network's by `log_probs` over the n-1 (or `history`) tokens before each, in batches of `batch_size`."""
    if net.history is None:  # a stream network scores itself (its batches are its own)
        return net.score_stream(stream, start, bf16=bf16, progress=progress)
    device = next(net.parameters()).device
    contexts = StreamWindows(stream, net.history, device)
    targets = torch.from_numpy(np.asarray(stream[start:], dtype=np.int64)).to(device)
    result = torch.empty(len(targets), dtype=torch.float64, device=device)
    chunks = range(0, len(targets), batch_size)
    if progress:
        chunks = progress_bar(chunks, desc="eval", unit="batch")
    was_training = net.training
    net.eval()
    for lo in chunks:
        hi = min(lo + batch_size, len(targets))
        positions = torch.arange(start + lo, start + hi, device=device)
        result[lo:hi] = log_probs(net, contexts[positions], targets[lo:hi], bf16=bf16, factored=factored)
    net.train(was_training)
    return result.cpu().numpy()


def score_split(model, corpus, split: str, team=None) -> np.ndarray:
    """The log-probabilities of every token of `split` of `corpus` by a loaded network `model` (a
    `language_model`): the suite's `split_logprobs`, or under a --parallel team every process's block of
    the output scoring together (the same float64 figures on every process)."""
    if team is None or team.mode is None:
        return split_logprobs(model, corpus, split)
    stream, start = corpus.stream_for(split, history=model.net.history)
    return team.score_stream(model.net, stream, start, bf16=model.bf16, progress=model.progress)


def language_model(net, *, bf16: bool = False, factored: bool = True, progress: bool = False) -> LanguageModel:
    """A trained network behind the suite's interface: a window network's `WindowLanguageModel`, a stream
    network's `neural.networks.stream.StreamLanguageModel`."""
    if net.history is None:
        from neural.networks.stream import StreamLanguageModel
        return StreamLanguageModel(net, bf16=bf16, progress=progress)
    return WindowLanguageModel(net, bf16=bf16, factored=factored, progress=progress)


class WindowLanguageModel(LanguageModel):
    """A trained window network behind the suite's interface. `fit` is not how it is made: use
    `neural.training.trainer.train_network`, then `neural.training.checkpoint.load_network` (which checks it
    against the corpus). A network with a class layer is its class-factored distribution;
    factored=False makes it the full softmax of its y."""

    def __init__(self, net, bf16: bool = False, factored: bool = True, progress: bool = False):
        self.net = net.eval()
        self.progress = progress  # a bar (or plain lines) while `score` runs
        self.order = net.history + 1
        self.vocab_size = net.vocab_size
        self.bf16 = bf16
        self.factored = factored

    def _fit(self, corpus) -> None:
        from lmbench.errors import LMBenchError
        raise LMBenchError("a network is trained with neural.training.trainer.train_network (or `lmbench train`), "
                           "not fit(): train it, then load it with neural.training.checkpoint.load_network")

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        return score_stream(self.net, stream, start, bf16=self.bf16, factored=self.factored, progress=self.progress)

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        width = self.net.history
        recent = list(context)[-width:]
        row = [PAD_ID] * (width - len(recent)) + recent  # left-padded like context_windows
        device = next(self.net.parameters()).device
        batch = torch.full((MIN_ROWS, width), PAD_ID, dtype=torch.int64, device=device)
        batch[0] = torch.tensor(row, dtype=torch.int64)
        log_p = log_probs(self.net, batch, None, bf16=self.bf16, factored=self.factored)[0]  # (V,)
        return torch.exp(log_p).cpu().numpy()

    def word_features(self) -> np.ndarray:
        """The learned feature table C, (V, m) float64."""
        return self.net.C.detach().double().cpu().numpy()

    def neighbors(self, word_id: int, k: int) -> list[tuple[int, float]]:
        """The k words nearest to `word_id` by cosine similarity in C, nearest first."""
        table = self.word_features()
        return nearest_rows(table, table[word_id], k, skip=word_id)


def nearest_rows(table: np.ndarray, query: np.ndarray, k: int, skip: int | None = None) -> list[tuple[int, float]]:
    """The k rows of table (R, m) nearest to query (m,) by cosine similarity, nearest first, as
    (row, similarity), leaving out row `skip`."""
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)  # (R, m)
    similarity = unit @ (query / max(np.linalg.norm(query), 1e-12))  # (R,)
    if skip is not None:
        similarity[skip] = -np.inf
    nearest = np.argsort(-similarity, kind="stable")[:k]
    return [(int(j), float(similarity[j])) for j in nearest]

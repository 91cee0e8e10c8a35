"""Linear interpolation of language models on the same token stream.

    P(w_t | h_t) = sum_k lambda_k(q_t) P_k(w_t | h_t),   sum_k lambda_k(q) = 1

The paper mixes each NPLM with the deleted-interpolation trigram, three ways (section 4):
(a) fixed weights (Table 1 uses 0.5 / 0.5), (b) one weight vector fitted by EM on the validation split,
(c) weights conditional on the frequency bucket q_t of the context (the deleted-interpolation buckets
l(x) = ceil(-ln((1 + x) / T))), fitted by EM on valid.

Everything works on saved per-token log-probabilities, arrays of shape (K, T) for K models and T tokens,
so mixing retrains nothing (the interpolation and its EM: lmbench/interpolation.py). `Mixture` wraps
fitted models as a LanguageModel of the shared interface.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.interpolation import fit_weights, mix_logprobs
from lmbench.model import LanguageModel, split_logprobs


class ContextBuckets(Protocol):
    """A model whose contexts fall in `num_buckets` buckets (the deleted-interpolation trigram):
    `buckets(stream, start)` gives the bucket of every token of the stream from `start`."""

    num_buckets: int

    def buckets(self, stream: np.ndarray, start: int) -> np.ndarray: ...


class Mixture(LanguageModel):
    """Interpolation of fitted models. method: 'fixed' (given weights), 'em' (one weight vector
    fitted on valid), 'bucketed' (one weight vector per context bucket of `bucketer`, fitted on valid).
    Fitting the mixture fits only its weights: the components must already be fitted."""

    def __init__(self, components: Sequence[LanguageModel], method: str = "em",
                 weights: Sequence[float] | None = None, bucketer: ContextBuckets | None = None):
        if method not in ("fixed", "em", "bucketed"):
            raise LMBenchError(f"unknown mixing method {method!r}: use fixed, em or bucketed")
        if method == "fixed" and (weights is None or len(weights) != len(components)
                                  or abs(sum(weights) - 1) > 1e-9 or min(weights) < 0):
            raise LMBenchError("fixed mixing needs one non-negative weight per model, summing to 1")
        if method == "bucketed" and bucketer is None:
            raise LMBenchError("bucketed mixing needs a model that gives context buckets (deleted interpolation)")
        self.components = list(components)
        self.method = method
        self.bucketer = bucketer
        self.weights = None if weights is None else np.asarray([weights], dtype=np.float64)  # (B, K)
        orders = [c.order for c in self.components]
        self.order = None if None in orders else max(orders)

    def _n_buckets(self) -> int:
        return self.bucketer.num_buckets if self.method == "bucketed" else 1

    def _buckets(self, stream: np.ndarray, start: int) -> np.ndarray:
        if self.method == "bucketed":
            return self.bucketer.buckets(stream, start)
        return np.zeros(len(stream) - start, dtype=np.int64)

    def _fit(self, corpus) -> None:
        if self.method == "fixed":
            return
        logprobs = np.stack([split_logprobs(c, corpus, "valid") for c in self.components])
        stream, start = corpus.stream_for("valid", history=None if self.order is None else self.order - 1)
        self.weights = fit_weights(logprobs, self._buckets(stream, start), self._n_buckets())

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        logprobs = np.stack([c.score(stream, start) for c in self.components])  # (K, T)
        weights = self.weights[self._buckets(stream, start)].T                   # (K, T)
        return mix_logprobs(logprobs, weights)

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        with_next = np.append(np.asarray(context, dtype=np.int64), 0)  # any next token: buckets read the context
        bucket = self._buckets(with_next, len(with_next) - 1)[0]
        return sum(w * c.distribution(context) for w, c in zip(self.weights[bucket], self.components))

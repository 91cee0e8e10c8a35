"""Linear interpolation of language models on the same token stream.

    P(w_t | h_t) = sum_k lambda_k(q_t) P_k(w_t | h_t),   sum_k lambda_k(q) = 1

The paper mixes each NPLM with the deleted-interpolation trigram, three ways (section 4):
(a) fixed weights (Table 1 uses 0.5 / 0.5), (b) one weight vector fitted by EM on the validation split,
(c) weights conditional on the frequency bucket q_t of the context (the deleted-interpolation buckets
l(x) = ceil(-ln((1 + x) / T))), fitted by EM on valid.

Everything works on saved per-token log-probabilities, arrays of shape (K, T) for K models and T tokens,
so mixing retrains nothing. `Mixture` wraps fitted models as a LanguageModel of the shared interface.
"""

from __future__ import annotations

import logging
from typing import Protocol, Sequence

import numpy as np
from scipy.special import logsumexp

from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel

log = logging.getLogger(__name__)


def _check(logprobs: np.ndarray) -> np.ndarray:
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if logprobs.ndim != 2 or logprobs.shape[0] < 1:
        raise LMBenchError(f"mixing needs a (models, tokens) array of log-probabilities, got shape "
                           f"{logprobs.shape}: give every model's scores on the same split")
    if np.isnan(logprobs).any() or np.isposinf(logprobs).any():
        raise LMBenchError("a model gave a NaN or +inf log-probability: check the model's scores")
    if logprobs.shape[1] and not np.isfinite(logprobs.max(axis=0)).all():
        raise LMBenchError("every model gave some token a log-probability of -inf: at least one "
                           "component must give every token a probability > 0 (use a smoothed model)")
    return logprobs


def mix_logprobs(logprobs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """log sum_k w_k P_k(w_t): logprobs (K, T), weights (K,) or (K, T) -> (T,)."""
    logprobs = _check(logprobs)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim == 1:
        weights = weights[:, None]
    with np.errstate(divide="ignore"):
        return logsumexp(logprobs + np.log(weights), axis=0)


def fit_weights(logprobs: np.ndarray, buckets: np.ndarray | None = None, n_buckets: int = 1, *,
                tol: float = 1e-7, max_iterations: int = 500, history: list[float] | None = None) -> np.ndarray:
    """EM for interpolation weights maximising the likelihood of the tokens scored in `logprobs`.

    logprobs (K, T) (a component may give a token -inf, not all of them); buckets (T,) ints in
    [0, n_buckets), or None for one bucket. Returns (n_buckets, K) weights, each row summing to 1.
    E-step: responsibilities r_kt = w_k(q_t) P_kt / sum_j w_j(q_t) P_jt; M-step: w_k(q) = mean of r_kt
    over the tokens of bucket q. A bucket without tokens keeps its uniform start. Stops when the
    log-likelihood gains less than `tol` relative; `history`, when given, receives the
    log-likelihood of the start and after every M-step (the last: that of the returned weights).
    """
    logprobs = _check(logprobs)
    k, t = logprobs.shape
    if buckets is None:
        buckets = np.zeros(t, dtype=np.int64)
    buckets = np.asarray(buckets, dtype=np.int64)
    if buckets.shape != (t,) or (t and (buckets.min() < 0 or buckets.max() >= n_buckets)):
        raise LMBenchError(f"buckets must be {t} integers in [0, {n_buckets}): recompute them on the same split")
    tokens_per_bucket = np.bincount(buckets, minlength=n_buckets)
    filled = tokens_per_bucket > 0
    weights = np.full((n_buckets, k), 1.0 / k)
    history = [] if history is None else history
    for iteration in range(max_iterations + 1):
        with np.errstate(divide="ignore"):
            joint = logprobs + np.log(weights[buckets].T)        # (K, T)
        total = logsumexp(joint, axis=0)                         # (T,)
        history.append(float(total.sum()))
        if len(history) > 1 and history[-1] - history[-2] < tol * abs(history[-2]) or iteration == max_iterations:
            break
        responsibilities = np.exp(joint - total)                 # (K, T)
        sums = np.stack([np.bincount(buckets, r, minlength=n_buckets) for r in responsibilities], axis=1)
        weights[filled] = sums[filled] / tokens_per_bucket[filled, None]
    log.debug("mixture EM: %d iterations, log-likelihood %.6f", iteration, history[-1])
    return weights


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
        for component in self.components:
            if component.corpus is None:
                component.attach(corpus)
        logprobs = np.stack([c.logprobs("valid") for c in self.components])
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

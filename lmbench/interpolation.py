"""Linear interpolation of distributions and the EM that fits its weights, on per-token log-probabilities.

    P(w_t) = sum_k lambda_k(q_t) P_k(w_t),   sum_k lambda_k(q) = 1

Two parts of the suite fit such weights on the validation split: the deleted-interpolation trigram
(baselines/deleted_interpolation.py: its four components, one weight vector per context-frequency
bucket) and the mixtures of models (mixing/: fixed, EM or bucketed weights over saved scores). Both
use this module, which depends on neither.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.special import logsumexp

from lmbench.errors import LMBenchError

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


def shrunk(weights: np.ndarray, tokens: np.ndarray, toward: np.ndarray | None = None) -> np.ndarray:
    """EM's weights (n_buckets, K) shrunk by one pseudo-token per part, spread as `toward` (K,) weights
    (uniform by default: Laplace's rule): (T_q lambda_qk + K mu_k) / (T_q + K) for the T_q tokens of bucket
    q they were fitted on. Each row still sums to 1, every weight is > 0 where `toward`'s are (a part that
    predicted all of a bucket's few tokens leaves the others some weight for the tokens it gives
    probability 0), and a bucket of thousands of tokens barely moves."""
    k = weights.shape[1]
    toward = np.full(k, 1.0 / k) if toward is None else np.asarray(toward, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.float64)[:, None]
    return (weights * tokens + k * toward) / (tokens + k)

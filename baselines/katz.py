"""Katz back-off (Katz 1987) with Good-Turing discounts, orders 2 to 5.

Public API
----------
`Katz(order, k=5, min_count=1)`: a BackoffModel (baselines/backoff.py), ARPA-exportable;
    `min_count=2` leaves out the n-grams of order >= 3 seen once (SRILM's default cutoffs), their
    mass going to the back-off weight; discounts still come from all counts.
`good_turing_ratios(counts, k, n)`: the discount ratios d_0 .. d_{k+1} (d_r = 1 for r > k)
    (`ratios_from_counts_of_counts(nr, k, n)` from n_0 .. n_{k+1}).
`Katz(order, memory=M, tmp_dir=D)`: in bounded memory when the in-memory path would need more than M
    bytes, as kneser_ney.KneserNey (the same model).

Discounts (Katz 1987, eq. 13, as SRILM applies them), per order from the counts-of-counts n_r of
the raw counts: with r* = (r + 1) n_{r+1} / n_r and A = (k + 1) n_{k+1} / n_1,
    d_r = (r* / r - A) / (1 - A)    for 1 <= r <= k,      d_r = 1 for r > k.
When some d_r is not in (0, 1] (or an n_r is 0), k is lowered until all are valid, as SRILM does;
when no k >= 1 works the order uses an absolute discount of 0.5 (d_r = (r - 0.5) / r for r <= 5)
and a warning is logged, so tiny data does not crash.

Probabilities, with c(h.) = sum_w c(hw):
    P(w | h) = d_c(hw) c(hw) / c(h.)                    if c(hw) > 0,
             = alpha(h) P(w | h')                      otherwise,
    alpha(h) = (1 - sum_{w: c(hw)>0} P(w | h)) / (1 - sum_{w: c(hw)>0} P(w | h')),
so every P(. | h) sums to 1.

Unigram level (our choice): Good-Turing-discounted unigram counts d_c c(w) / N; the mass this
frees goes, in equal shares, to the vocabulary words with zero count in train (<unk> included if
unseen), or to every word of V when train holds them all. Every word of V gets P > 0 and the
unigram sums to 1.

A context whose continuations all have undiscounted counts (above k) would keep no mass for unseen words (alpha = 0,
P = 0 for every other word: "proved to" followed only by "be", 6 times, on Brown). Such a context
discounts those counts with the mildest Good-Turing ratio of the order (the largest d_r < 1) instead,
so every word of V keeps P > 0 after every history. The unigram level does the same when every
word's count is above k.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from baselines.backoff import BackoffModel, Listing
from baselines.counts import count_ngrams, count_of_counts
from baselines.disk_counts import bounded, estimate_bounded

log = logging.getLogger(__name__)

FALLBACK_ABSOLUTE_DISCOUNT = 0.5
MASS_EPSILON = 1e-12  # a context whose discounted probabilities sum above 1 - this keeps no mass


def good_turing_ratios(counts: np.ndarray, k: int, n: int) -> np.ndarray:
    """d_r for r = 0 .. k+1 (d_0 unused, d_{k+1} = 1); index with np.minimum(count, k + 1)."""
    return ratios_from_counts_of_counts(count_of_counts(counts, k + 1), k, n)


def ratios_from_counts_of_counts(nr: np.ndarray, k: int, n: int) -> np.ndarray:
    """good_turing_ratios from n_0 .. n_{k+1}."""
    nr = nr.astype(np.float64)
    for kk in range(k, 0, -1):
        if np.all(nr[1:kk + 2] > 0):
            r = np.arange(1, kk + 1)
            A = (kk + 1) * nr[kk + 1] / nr[1]
            d = ((r + 1) * nr[r + 1] / nr[r] / r - A) / (1 - A) if A != 1 else np.zeros(kk)
            if np.all((d > 0) & (d <= 1)):
                if kk < k:
                    log.warning("order %d: Good-Turing discounts invalid for k = %d; using k = %d", n, k, kk)
                return np.concatenate([[1.0], d, np.ones(k + 1 - kk)])
    log.warning("order %d: no valid Good-Turing discounts (counts-of-counts %s); using an absolute "
                "discount of %s for counts <= %d", n, nr[1:].astype(int).tolist(), FALLBACK_ABSOLUTE_DISCOUNT, k)
    r = np.arange(1, k + 1)
    return np.concatenate([[1.0], (r - FALLBACK_ABSOLUTE_DISCOUNT) / r, [1.0]])


class Katz(BackoffModel):
    """Katz back-off with Good-Turing discounts for counts <= k."""

    min_order, max_order = 2, 5

    def __init__(self, order: int, k: int = 5, min_count: int = 1, *, memory: int | None = None,
                 tmp_dir: str | Path | None = None):
        """`memory`, `tmp_dir`: as for kneser_ney.KneserNey (bounded-memory estimation)."""
        super().__init__(order)
        self.k, self.min_count = k, min_count
        self.memory, self.tmp_dir = memory, tmp_dir

    def _fit(self, corpus) -> None:
        if bounded(self.memory, corpus.train):
            return self._fit_bounded(corpus)
        N, k = self.order, self.k
        counts = count_ngrams(corpus.train, N, self.vocab_size)
        c = counts.counts
        listing = Listing(counts, self.min_count)
        self.ratios = {n: good_turing_ratios(c[n], k, n) for n in range(1, N + 1)}
        self.set_parameters(*self._estimate_in_memory(counts, listing, c, self._unigram(c[1])))

    def _fit_bounded(self, corpus) -> None:
        def statistics(counts):
            c = counts.raw_counts()
            self.ratios = {n: ratios_from_counts_of_counts(counts.counts_of_counts(c[n], self.k + 1), self.k, n)
                           for n in range(1, self.order + 1)}
            return c, self._unigram(c[1])

        self.set_parameters(*estimate_bounded(self, corpus.train, statistics))

    def _unigram(self, c1: np.ndarray) -> np.ndarray:
        """log P(w), (V,): Good-Turing discounted, the freed mass shared by the zero-count words."""
        k = self.k
        ratio = self.ratios[1][np.minimum(c1, k + 1)]                    # (V,) d_c
        discounted = ratio * c1 / c1.sum()                                # (V,), 0 where unseen
        if discounted.sum() >= 1.0 - MASS_EPSILON:                        # no count discounted
            discounted[ratio >= 1] *= self._mildest(1)
        receivers = c1 == 0 if np.any(c1 == 0) else np.ones(self.vocab_size, dtype=bool)
        return np.log(discounted + receivers * (1.0 - discounted.sum()) / receivers.sum())

    def _conditional(self, n: int, c: np.ndarray, context: np.ndarray, size: int, lower: np.ndarray,
                     kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One order, over rows of whole contexts: (m,) raw counts `c`, (m,) `context` rows in
        [0, size), (listed,) `lower` = P(w | h') of the listed rows, (m,) bool `kept`. Returns log P of
        the listed rows and the log back-off weight of each of the `size` contexts (0 for no context)."""
        context_total = np.bincount(context, weights=c, minlength=size)  # c(h.)
        ratio = self.ratios[n][np.minimum(c, self.k + 1)]                # (m,) d_c
        prob = ratio * c / context_total[context]                         # (m,)
        full = np.bincount(context, weights=prob, minlength=size) >= 1.0 - MASS_EPSILON  # no mass left
        prob[full[context] & (ratio >= 1)] *= self._mildest(n)
        has = np.bincount(context[kept], minlength=size) > 0              # h has listed continuations
        left = np.maximum(1.0 - np.bincount(context[kept], weights=prob[kept], minlength=size), 0.0)
        lower_mass = np.bincount(context[kept], weights=lower, minlength=size)
        alpha = left / np.maximum(1.0 - lower_mass, np.finfo(float).tiny)
        with np.errstate(divide="ignore"):
            return np.log(prob[kept]), np.where(has, np.log(np.where(has, alpha, 1.0)), 0.0)

    def _mildest(self, n: int) -> float:
        """The largest Good-Turing ratio below 1 of order n (for contexts with no mass left)."""
        ratios = self.ratios[n][1:self.k + 1]
        below = ratios[ratios < 1]
        return float(below.max()) if below.size else 1.0 - FALLBACK_ABSOLUTE_DISCOUNT / (self.k + 1)

"""Modified Kneser-Ney (Chen & Goodman 1998), interpolated and back-off, orders 2 to 6.

Public API
----------
`KneserNey(order)`: interpolated modified KN, as KenLM lmplz and MITLM estimate it.
`KneserNeyBackoff(order)`: the back-off variant (SRILM's `-kndiscount` without `-interpolate`;
    the paper's "Kneser-Ney back-off").
`adjusted_counts(counts)`: the KN counts a[n] of every row of an NgramCounts.
`kn_discounts(a, n)`: D_0 = 0, D_1, D_2, D_3+ of one order, with the documented fallback
    (`discounts_from_counts_of_counts(nk, n)` from its n_0 .. n_4).
`KneserNey(order, memory=M, tmp_dir=D)` (either class): when the in-memory estimation would need more
    than M bytes, counted and estimated in bounded memory through files under D
    (baselines/disk_counts.py), every order through the same `_conditional`: the same model, bit for bit.
Both models are BackoffModels (baselines/backoff.py): they score through the back-off rule and
export to ARPA as they are.

Counts. At the highest order N, a(hw) = c(hw), the raw count. Below it, a(hw) = N1+(. hw), the
number of distinct words seen just before hw (the continuation count), KenLM lmplz's convention.
Our streams have no sentence markers, so the start of the stream counts as one more distinct left
context of the n-grams that begin it: exactly what lmplz computes for the stream preceded by one <s>.

Discounts (Chen & Goodman eq. 26), per order, from the counts-of-counts n_k of a at that order:
    Y = n1 / (n1 + 2 n2),  D_k = k - (k + 1) Y n_{k+1} / n_k  for k = 1, 2, 3,
and D(a) = D_min(a,3). If some n_k (k = 1..4) is 0 or a D_k falls outside (0, k), the order takes
KenLM's `--discount_fallback` defaults D = (0.5, 1.0, 1.5) and a warning is logged.

Interpolated (eq. 25): with a(h.) = sum_w a(hw) and N_k(h.) = #{w : a(hw) = k} (3 meaning 3+),
    P(w | h) = (a(hw) - D(a(hw))) / a(h.) + gamma(h) P(w | h'),
    gamma(h) = (D_1 N_1(h.) + D_2 N_2(h.) + D_3 N_3+(h.)) / a(h.),
P(w | h) = P(w | h') when h has no continuation, and the unigram level interpolates with the
uniform distribution over V: P(w) = (a(w) - D(a(w))) / a(.) + gamma(.) / |V|, so <unk> and words
never seen in train get P > 0. In back-off form a listed hw gets that full P(w | h) and a context h
gets the back-off weight gamma(h): for an unlisted hw the back-off rule then gives gamma(h) P(w | h'),
the interpolated value, because every suffix of a listed n-gram is listed.

Back-off: a listed hw gets (a(hw) - D(a(hw))) / a(h.), an unlisted one alpha(h) P(w | h') with
    alpha(h) = gamma(h) / (1 - sum_{w: hw listed} P(w | h')),
the weight that makes P(. | h) sum to 1. The unigram level is the interpolated one above.
`KneserNeyBackoff(order, min_count=2)` leaves out the n-grams of order >= 3 seen fewer than 2
times in train (SRILM's default cutoffs, -gt3min 2 ...); their discounted mass joins alpha's
numerator (a(h.) keeps their counts). Discounts and KN counts still come from all n-grams.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from baselines.backoff import BackoffModel, Listing
from baselines.counts import NgramCounts, count_ngrams, count_of_counts, weighted_sums
from baselines.disk_counts import bounded, estimate_bounded
from lmbench.errors import LMBenchError

log = logging.getLogger(__name__)

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # KenLM lmplz --discount_fallback defaults for D1, D2, D3+


def adjusted_counts(counts: NgramCounts) -> list[np.ndarray]:
    """a[n] for every row of every order: raw counts at the top order, else continuation counts
    N1+(. g) (the stream start counting as one left context); a[1] has shape (V,)."""
    table, N = counts.table, counts.order
    a: list[np.ndarray] = [np.zeros(0, np.int64)] * (N + 1)
    a[N] = counts.counts[N]
    for n in range(1, N):
        suffix = counts.suffix[n + 1]                         # row of each distinct (n+1)-gram's last n words
        a[n] = np.bincount(suffix, minlength=table.size(n)).astype(np.int64)
        a[n][counts.at[n][0]] += 1                            # the n-gram that begins the stream
    return a


def kn_discounts(a: np.ndarray, n: int) -> np.ndarray:
    """[0, D1, D2, D3+] of order n from the counts-of-counts of its KN counts `a` (eq. 26)."""
    return discounts_from_counts_of_counts(count_of_counts(a, 4), n)


def discounts_from_counts_of_counts(nk: np.ndarray, n: int) -> np.ndarray:
    """[0, D1, D2, D3+] of order n from n_0 .. n_4 (eq. 26), or the fallback with a warning."""
    if np.all(nk[1:5] > 0):
        Y = nk[1] / (nk[1] + 2 * nk[2])
        D = np.array([k - (k + 1) * Y * nk[k + 1] / nk[k] for k in (1, 2, 3)])
        if np.all((D > 0) & (D < np.array([1, 2, 3]))):
            return np.concatenate([[0.0], D])
        problem = f"discounts {np.round(D, 4).tolist()} fall outside (0, k)"
    else:
        problem = f"counts-of-counts n1..n4 = {nk[1:5].tolist()} include a zero"
    log.warning("order %d: %s; using the fallback discounts %s (KenLM's --discount_fallback)",
                n, problem, FALLBACK_DISCOUNTS)
    return np.array([0.0, *FALLBACK_DISCOUNTS])


class _ModifiedKneserNey(BackoffModel):
    min_order, max_order = 2, 6
    interpolate = True

    def __init__(self, order: int, min_count: int = 1, *, memory: int | None = None,
                 tmp_dir: str | Path | None = None):
        """`memory` (bytes): estimate in bounded memory (baselines/disk_counts.py), in files under
        `tmp_dir`, when the in-memory path would need more; None: always in memory."""
        super().__init__(order)
        if min_count > 1 and self.interpolate:
            raise LMBenchError("count cutoffs apply to back-off models: use kneser-ney-backoff or katz "
                               "with a minimum n-gram count, or a minimum count of 1")
        self.min_count = min_count
        self.memory, self.tmp_dir = memory, tmp_dir

    def _fit(self, corpus) -> None:
        if bounded(self.memory, corpus.train):
            return self._fit_bounded(corpus)
        N = self.order
        counts = count_ngrams(corpus.train, N, self.vocab_size)
        listing = Listing(counts, self.min_count)
        a = adjusted_counts(counts)
        self.discounts = {n: kn_discounts(a[n], n) for n in range(1, N + 1)}
        self.set_parameters(*self._estimate_in_memory(counts, listing, a, self._unigram(a[1])))

    def _fit_bounded(self, corpus) -> None:
        def statistics(counts):
            a = counts.continuation_counts()
            self.discounts = {n: discounts_from_counts_of_counts(counts.counts_of_counts(a[n], 4), n)
                              for n in range(1, self.order + 1)}
            return a, self._unigram(a[1])

        self.set_parameters(*estimate_bounded(self, corpus.train, statistics))

    def _unigram(self, a1: np.ndarray) -> np.ndarray:
        """log P(w), (V,): interpolated with the uniform distribution over V."""
        D = self.discounts[1][np.minimum(a1, 3)]                        # (V,) D(a(w)), 0 where a = 0
        total = a1.sum()
        return np.log((a1 - D) / total + D.sum() / total / self.vocab_size)

    def _conditional(self, n: int, a: np.ndarray, context: np.ndarray, size: int, lower: np.ndarray,
                     keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One order, over rows of whole contexts: (m,) KN counts `a`, (m,) `context` rows in
        [0, size), (listed,) `lower` = P(w | h') of the listed rows, (m,) bool `keep`. Returns log P of
        the listed rows and the log back-off weight of each of the `size` contexts (0 for no context)."""
        D = self.discounts[n][np.minimum(a, 3)]                         # (m,)
        context_total = weighted_sums(context, a, size)                 # a(h.)
        discounted = (a - D) / context_total[context]                   # (m,)
        has = np.bincount(context[keep], minlength=size) > 0            # h has listed continuations
        left = weighted_sums(context, D, size)                          # gamma(h) a(h.), plus the
        left += weighted_sums(context[~keep], (a - D)[~keep], size)     # unlisted mass
        left[has] /= context_total[has]
        if self.interpolate:
            logp = np.log(discounted + left[context] * lower)
            weight = left
        else:
            logp = np.log(discounted[keep])
            lower_mass = weighted_sums(context[keep], lower, size)
            weight = left / np.maximum(1.0 - lower_mass, np.finfo(float).tiny)
        return logp, np.where(has, np.log(np.where(has, weight, 1.0)), 0.0)


class KneserNey(_ModifiedKneserNey):
    """Interpolated modified Kneser-Ney (KenLM lmplz, MITLM)."""
    interpolate = True


class KneserNeyBackoff(_ModifiedKneserNey):
    """Back-off modified Kneser-Ney (SRILM without -interpolate; the paper's KN back-off)."""
    interpolate = False

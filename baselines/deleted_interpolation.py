"""Deleted-interpolation (Jelinek-Mercer) trigram, Bengio et al. (2003) section 4.1.

    P(w_t | w_{t-2}, w_{t-1}) = a0(q_t) / |V| + a1(q_t) p1(w_t) + a2(q_t) p2(w_t | w_{t-1})
                                + a3(q_t) p3(w_t | w_{t-2}, w_{t-1})

p1, p2, p3 are relative frequencies from train: p1(w) = c(w) / T, p2(w | v) = c(v, w) / c(v, .),
p3(w | u, v) = c(u, v, w) / c(u, v, .), where c(x, .) counts the n-grams of train that start with
the context x. A relative frequency whose context count is 0 (an unseen context, or no context at
the very start of a stream) is replaced by the next lower order: p2(w | v) = p1(w) when c(v, .) = 0
and p3(w | u, v) = p2(w | v) when c(u, v, .) = 0. Taking such a frequency as 0 instead would leave
P(. | h) summing to a3 + a2 < 1 short of 1 for those contexts (an unnormalised model whose
perplexity means nothing); with the substitution every component is a distribution over V for
every context, so P sums to 1 and EM is unchanged.

The weights depend on the frequency bucket of the context,

    q_t = l(c(w_{t-2}, w_{t-1}, .)),   l(x) = ceil(-ln((1 + x) / T)),   T = training tokens,

so unseen contexts (x = 0) fall in the highest bucket ceil(ln T) and frequent ones in low buckets.
Since 0 <= x <= T - 1, l(x) lies in [0, ceil(ln T)]; bucket 0 is reached only by a context that
fills the whole training set, and on Brown (T = 800,000) the most frequent pair lands in bucket 5,
so the low buckets are empty. Counts are clipped into [0, T - 1] before l is applied (the
splits of another corpus cannot produce a bucket outside the table). There is one weight vector
(a0..a3) per bucket, fitted by EM on the valid split; a bucket with no valid token keeps its
uniform starting weights (1/4 each).

Everything is array code: n-grams are int64 keys (u * V + v) * V + w, counted with np.unique and
looked up with np.searchsorted; the four component probabilities of every token of a split are
computed in one batched pass, and EM works on the (tokens, 4) matrix of components.

`DeletedInterpolationTrigram(memory=M, tmp_dir=D)`: when the in-memory counting would need more than M
bytes, the bigram and trigram counts come from the bounded-memory counts of the back-off models
(baselines/disk_counts.py: sorted runs on disk, merged), whose sorted distinct n-grams are the rows of
these tables in the same order, re-keyed in base V and memory-mapped: the same tables, hence the same
weights and probabilities. c(u, v, .) is the bigram count less the one bigram that ends the stream
(it starts no trigram).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from baselines.counts import searchsorted_many
from baselines.disk_counts import bounded, counted
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel, in_chunks
from lmbench.interpolation import fit_weights

log = logging.getLogger(__name__)

MAX_VOCAB = 2_097_151  # largest V with V**3 < 2**63: trigram keys fit int64


class CountTable:
    """Sorted distinct int64 keys (at least one) with their counts; `get(query)` is a vectorised
    lookup giving 0 for absent keys."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray | None = None):
        """`keys`: one key per occurrence, counted here; with `counts`: already the sorted distinct
        keys and their counts."""
        if counts is None:
            keys, counts = np.unique(keys, return_counts=True)
        self.keys, self.counts = keys, counts  # (K,), (K,)

    def get(self, query: np.ndarray) -> np.ndarray:
        pos = np.minimum(searchsorted_many(self.keys, query), len(self.keys) - 1)  # (n,)
        return np.where(self.keys[pos] == query, self.counts[pos], 0)

    def row(self, prefix: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Last-position values and counts of the keys prefix * width + w, w in [0, width)."""
        lo, hi = np.searchsorted(self.keys, [prefix * width, (prefix + 1) * width])
        return self.keys[lo:hi] - prefix * width, self.counts[lo:hi]


class DeletedInterpolationTrigram(LanguageModel):
    """Jelinek-Mercer trigram with bucketed weights fitted by EM on valid (see the module doc)."""

    order = 3
    min_count = 1  # every n-gram counted (what a bounded-memory build's folder is named after)

    def __init__(self, *, tol: float = 1e-6, max_iters: int = 100, memory: int | None = None,
                 tmp_dir: str | Path | None = None):
        """`memory`, `tmp_dir`: as for kneser_ney.KneserNey (bounded-memory counting)."""
        self.tol = tol
        self.max_iters = max_iters
        self.memory, self.tmp_dir = memory, tmp_dir

    def _fit(self, corpus) -> None:
        V = self.vocab_size
        if V > MAX_VOCAB:
            raise LMBenchError(f"the vocabulary has {V} words; trigram keys need V**3 < 2**63 "
                               f"(V <= {MAX_VOCAB}): use a smaller vocabulary (raise --min-count)")
        started = time.perf_counter()
        self.T = len(corpus.train)
        self.unigram = np.bincount(corpus.train, minlength=V).astype(np.float64)  # (V,)
        self.bigram_context = np.bincount(corpus.train[:-1], minlength=V).astype(np.float64)  # c(v, .)
        if bounded(self.memory, corpus.train):
            self._count_bounded(corpus.train)
        else:
            train = corpus.train.astype(np.int64)  # (T,)
            self.bigram = CountTable(train[:-1] * V + train[1:])
            trigram_context = train[:-2] * V + train[1:-1]
            self.trigram = CountTable(trigram_context * V + train[2:])
            self.trigram_context = CountTable(trigram_context)  # c(u, v, .)
        self.num_buckets = math.ceil(math.log(self.T)) + 1  # buckets 0 .. ceil(ln T)
        self.timings = {"count_seconds": time.perf_counter() - started}
        started = time.perf_counter()
        stream, start = corpus.stream_for("valid", history=2)
        components = self.components(stream, start)  # (n_valid, 4)
        buckets = self.buckets(stream, start)  # (n_valid,)
        self.em_history: list[float] = []  # valid log-likelihood at the start and after each M-step
        with np.errstate(divide="ignore"):  # a component may give a token 0 (log -inf), never all four
            self.weights = fit_weights(np.log(components).T, buckets, self.num_buckets, tol=self.tol,
                                       max_iterations=self.max_iters, history=self.em_history)  # (B, 4)
        log.info("deleted interpolation: EM converged in %d iterations, valid perplexity %.3f",
                 len(self.em_history) - 1, math.exp(-self.em_history[-1] / len(buckets)))
        self.timings["em_seconds"] = time.perf_counter() - started  # valid components + EM

    def _count_bounded(self, train: np.ndarray) -> None:
        """The three count tables from the counts on disk (module docstring)."""
        with counted(self, train) as counts:
            bigram_keys, bigram_counts = counts.base_keys(2), counts.col("counts", 2).map()
            self.bigram = CountTable(bigram_keys, bigram_counts)
            self.trigram = CountTable(counts.base_keys(3), counts.col("counts", 3).map())
            last = np.searchsorted(bigram_keys, int(train[-2]) * self.vocab_size + int(train[-1]))
            context_counts = counts.col("contextcounts", 2)  # (K2,) in the build folder, mapped
            context_counts.write([bigram_counts[:last], bigram_counts[last:last + 1] - 1, bigram_counts[last + 1:]])
            self.trigram_context = CountTable(bigram_keys, context_counts.map())  # c(u, v, .)

    def bucket_of_count(self, count: np.ndarray) -> np.ndarray:
        """l(x) = ceil(-ln((1 + x) / T)) with x clipped to [0, T - 1], as int64."""
        x = np.clip(np.asarray(count, dtype=np.float64), 0, self.T - 1)
        return np.ceil(-np.log((1.0 + x) / self.T)).astype(np.int64)

    def _contexts(self, stream: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For t = start .. len-1: (u, v) context ids (-1 where the stream has no such token) and w."""
        stream = np.asarray(stream, dtype=np.int64)
        t = np.arange(start, len(stream))  # (n,)
        u = np.where(t >= 2, stream[np.maximum(t - 2, 0)], -1)
        v = np.where(t >= 1, stream[np.maximum(t - 1, 0)], -1)
        return u, v, stream[start:]

    def _trigram_context_counts(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        has = u >= 0
        counts = np.zeros(len(u), dtype=np.float64)
        counts[has] = self.trigram_context.get(u[has] * self.vocab_size + v[has])
        return counts

    def buckets(self, stream: np.ndarray, start: int) -> np.ndarray:
        """q_t for t = start .. len(stream) - 1: the bucket of the count of (w_{t-2}, w_{t-1})."""
        return in_chunks(self._buckets, stream, start, 2)

    def _buckets(self, stream: np.ndarray, start: int) -> np.ndarray:
        u, v, _ = self._contexts(stream, start)
        return self.bucket_of_count(self._trigram_context_counts(u, v))

    def split_buckets(self, corpus, split: str) -> np.ndarray:
        """q_t of every token of a split of `corpus` (for context-conditional mixing)."""
        stream, start = corpus.stream_for(split, history=2)
        return self.buckets(stream, start)

    def components(self, stream: np.ndarray, start: int) -> np.ndarray:
        """(n, 4) matrix [1/|V|, p1(w), p2(w | v), p3(w | u, v)] for t = start .. len(stream) - 1,
        unseen contexts taking the lower order's value (module doc)."""
        V = self.vocab_size
        u, v, w = self._contexts(stream, start)
        out = np.zeros((len(w), 4))
        out[:, 0] = 1.0 / V
        out[:, 1] = self.unigram[w] / self.T
        context2 = np.zeros(len(w))
        context2[v >= 0] = self.bigram_context[v[v >= 0]]
        seen2 = context2 > 0
        out[:, 2] = out[:, 1]
        out[seen2, 2] = self.bigram.get(v[seen2] * V + w[seen2]) / context2[seen2]
        context3 = self._trigram_context_counts(u, v)
        seen3 = context3 > 0
        out[:, 3] = out[:, 2]
        out[seen3, 3] = self.trigram.get((u[seen3] * V + v[seen3]) * V + w[seen3]) / context3[seen3]
        return out

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        return in_chunks(self._score, stream, start, 2)  # (n, 4) temporaries per chunk

    def _score(self, stream: np.ndarray, start: int) -> np.ndarray:
        weights = self.weights[self._buckets(stream, start)]  # (n, 4)
        return np.log((weights * self.components(stream, start)).sum(axis=1))

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        V = self.vocab_size
        context = [int(c) for c in context][-2:]
        u = context[-2] if len(context) >= 2 else -1
        v = context[-1] if len(context) >= 1 else -1
        components = np.zeros((V, 4))  # (V, 4), columns as in `components`
        components[:, 0] = 1.0 / V
        components[:, 1] = self.unigram / self.T
        components[:, 2] = components[:, 1]
        if v >= 0 and self.bigram_context[v] > 0:
            components[:, 2] = 0.0
            words, counts = self.bigram.row(v, V)
            components[words, 2] = counts / self.bigram_context[v]
        components[:, 3] = components[:, 2]
        context3 = self._trigram_context_counts(np.array([u]), np.array([v]))[0]
        if context3 > 0:
            components[:, 3] = 0.0
            words, counts = self.trigram.row(u * V + v, V)
            components[words, 3] = counts / context3
        weights = self.weights[self.bucket_of_count(context3)]  # (4,)
        return components @ weights

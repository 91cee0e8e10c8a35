"""Back-off n-gram models in ARPA form, and their vectorised scoring.

Public API
----------
`BackoffModel(order)`: a LanguageModel whose parameters are
    - `table`: an NgramTable (baselines/counts.py) of the n-grams the model lists, orders 1..N,
      order 1 being the whole vocabulary;
    - `logp[n]`: natural-log P(w | h) of each row hw of order n (logp[1] has shape (V,));
    - `logbow[n]`: natural-log back-off weight of each row h of order n < N used as a context
      (0.0, i.e. weight 1, for rows that are no context).
  Subclasses (Katz, Kneser-Ney) fill them in `_fit` through `set_parameters`, from their per-order
  `_conditional` (over all rows: `_estimate_in_memory`; block by block:
  disk_counts.estimate_bounded); `arpa_reader.read_arpa` fills them from a file. `score` and
  `distribution` are shared.
`Listing(counts, min_count)`: which counted n-grams a back-off model lists under a count cutoff
  (SRILM's -gt3min, -gt4min, ...: n-grams of order >= 3 seen fewer than `min_count` times are left
  out and their probability mass goes to the back-off weight), with the row renumbering.

The back-off rule (the ARPA semantics, Katz 1987):

    log P(w | w_1 .. w_k) = logp(w_1 .. w_k w)                        if that n-gram is listed,
                          = logbow(w_1 .. w_k) + log P(w | w_2 .. w_k)  otherwise,

with logbow = 0 for a context that is not listed. Unrolled: if n* is the highest order at which
the n-gram ending in w is listed, log P = logp at n* plus the back-off weights of the contexts of
length n* .. N-1 (those listed). `score` evaluates that for every position of a stream at once:
one searchsorted per order (NgramTable.index_stream), then gathers and a masked sum, SCORE_CHUNK
positions at a time (lmbench.model.in_chunks) (so the temporaries stay bounded on a long stream; the tables may be memory-mapped
files, baselines/disk_counts.py).
"""

from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from baselines.counts import NgramCounts, NgramTable
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel, in_chunks


CUTOFF_MIN_ORDER = 3  # SRILM applies its default cutoff (2) from trigrams up


class Listing:
    """The rows of a counted NgramCounts that a model lists: at orders >= 3, those whose raw count
    is at least `min_count` (1 keeps all). A sub-n-gram is seen at least as often as the n-gram,
    so every prefix and suffix of a listed n-gram is listed: the table stays closed.

    `keep[n]`: (m_n,) bool over the counted rows; `row[n]`: (m_n,) the listed row number of each
    kept counted row; `table`: the NgramTable of the listed rows."""

    def __init__(self, counts: NgramCounts, min_count: int = 1):
        N, table = counts.order, counts.table
        self.keep = [np.zeros(0, bool)] + [
            (counts.counts[n] >= min_count) if n >= CUTOFF_MIN_ORDER else np.ones(table.size(n), bool)
            for n in range(1, N + 1)]
        self.row = [np.zeros(0, np.int64)] + [np.cumsum(k) - 1 for k in self.keep[1:]]
        self.pruned = not all(k.all() for k in self.keep[1:])
        self.table = (NgramTable(table.vocab_size, {n: table.grams[n][self.keep[n]] for n in range(2, N + 1)})
                      if self.pruned else table)


class BackoffModel(LanguageModel):
    """A back-off model over an NgramTable (see the module docstring)."""

    min_order, max_order = 1, 6
    scale = 1.0  # the natural log of the base of logp and logbow: 1 (natural logs), or LN10 (log10, a binary file's)

    def __init__(self, order: int):
        if not self.min_order <= order <= self.max_order:
            raise LMBenchError(f"{type(self).__name__} supports orders {self.min_order} to "
                               f"{self.max_order}, not {order}: choose an order in that range")
        self.order = order
        self.table: NgramTable | None = None
        self.logp: list[np.ndarray] = []
        self.logbow: list[np.ndarray] = []
        self._walked: tuple | None = None  # (table, `_walk`'s arrays of it)

    def set_parameters(self, table: NgramTable, logp: list[np.ndarray], logbow: list[np.ndarray]) -> None:
        """Install the parameters: lists indexed by order (entry 0 unused); logbow has orders < N."""
        self.table, self.vocab_size = table, table.vocab_size
        self.logp = [np.zeros(0)] + [_values(logp[n]) for n in range(1, self.order + 1)]
        self.logbow = [np.zeros(0)] + [_values(logbow[n]) for n in range(1, self.order)]

    def _estimate_in_memory(self, counts: NgramCounts, listing: Listing, values: list[np.ndarray],
                            logp1: np.ndarray) -> tuple[NgramTable, list[np.ndarray], list[np.ndarray]]:
        """The parameters of an estimating subclass (Katz, KN) from all rows at once: order by order,
        its `_conditional(n, values[n], context, contexts, lower, keep)` (the per-order function the
        bounded-memory path, baselines/disk_counts.py, applies block by block) with lower = P(w | h')."""
        keep, row = listing.keep, listing.row
        logp, logbow = [np.zeros(0), logp1], [np.zeros(0)]
        for n in range(2, self.order + 1):
            lower = np.exp(logp[n - 1][row[n - 1][counts.suffix[n][keep[n]]]])  # (listed,) P(w | h')
            p, bow = self._conditional(n, values[n], counts.prefix[n], counts.table.size(n - 1), lower, keep[n])
            logp.append(p)
            logbow.append(bow[keep[n - 1]])
        return listing.table, logp, logbow

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        """Natural-log P(stream[t] | up to N-1 previous tokens) for t >= start: the compiled walk
        (`walk`), or for a table of the bounded-memory path (memory-mapped columns) one pass per order
        over each SCORE_CHUNK positions (with the N-1 tokens before them)."""
        if self.table.walkable():
            return self.walk(stream, start)[0]
        return in_chunks(self._score, stream, start, self.order - 1)

    def score_segments(self, stream: np.ndarray, segments: np.ndarray) -> np.ndarray:
        """LanguageModel.score_segments: every segment in one compiled pass (`walk`)."""
        return self.walk(stream, segments=segments)[0]

    def walk(self, stream: np.ndarray, start: int = 0, segments: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """(natural-log P, n-gram length) of every position t >= start, or of each segment's (`segments`: rows
        (first, start, end), LanguageModel.score_segments): the back-off rule in one compiled pass over the
        stream (`_walk`), the length being the highest order listed that ends at t (KenLM's `ngram_length`)."""
        if type(stream) is not np.ndarray or stream.dtype != np.int32 or not stream.flags.c_contiguous:
            stream = np.ascontiguousarray(stream, dtype=np.int32)
        segments = (np.array(((0, start, len(stream)),), dtype=np.int64) if segments is None
                    else np.ascontiguousarray(segments, dtype=np.int64))
        logprobs, lengths, outside = _walk(stream, segments, *self._walk_parameters())
        if outside >= 0:
            raise LMBenchError(f"the stream holds id {int(stream[outside])}, outside 0 .. {self.vocab_size - 1}: encode "
                               "it with the model's vocabulary")
        return logprobs, lengths

    def _walk_parameters(self) -> tuple:
        """`_walk`'s arrays (read-only views, one numba type whatever made them), kept while the table is."""
        if self._walked is None or self._walked[0] is not self.table:
            def fixed(values, dtype) -> np.ndarray:
                view = np.ascontiguousarray(np.asarray(values), dtype=dtype).view()
                view.flags.writeable = False
                return view
            N, table, kind = self.order, self.table, np.asarray(self.logp[1]).dtype
            none = (fixed(np.zeros(0), np.int64),)  # (order N has no children nor weights: a placeholder)
            parameters = (tuple(fixed(table.keys[n], np.int64) for n in range(1, N + 1)),
                          tuple(fixed(table.child_starts(n), np.int64) for n in range(1, N)) + none,
                          tuple(fixed(self.logp[n], kind) for n in range(1, N + 1)),
                          tuple(fixed(self.logbow[n], kind) for n in range(1, N)) + (fixed(np.zeros(0), kind),),
                          table.vocab_size, table.bits, max(n for n in range(1, N + 1) if n == 1 or table.packed[n]),
                          float(self.scale))
            self._walked = (table, parameters)
        return self._walked[1]

    def _score(self, stream: np.ndarray, start: int) -> np.ndarray:
        idx = self.table.index_stream(stream, self.order)   # idx[n]: (T,) row of the n-gram ending at t
        result = self.logp[1][stream].astype(np.float64)    # (T,) order 1 always listed
        best = np.ones(len(stream), dtype=np.int64)         # (T,) highest listed order n*
        for n in range(2, self.order + 1):
            hit = idx[n] >= 0
            result[hit] = self.logp[n][idx[n][hit]]
            best[hit] = n
        for m in range(1, self.order):                      # the context of length m ends at t - 1
            context = np.full(len(stream), -1, dtype=np.int64)
            context[1:] = idx[m][:-1]
            use = (context >= 0) & (best <= m)
            result[use] += self.logbow[m][context[use]]
        return result[start:] * self.scale

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        """P(w | context) for every id w, shape (V,): the back-off rule applied to all V words."""
        V = self.vocab_size
        context = [int(c) for c in context][len(context) - min(len(context), self.order - 1):]
        L = len(context)
        words = np.arange(V, dtype=np.int64)
        result = self.logp[1].astype(np.float64)            # (V,)
        best = np.ones(V, dtype=np.int64)
        for n in range(2, L + 2):
            history = np.asarray(context[L - (n - 1):], dtype=np.int64)
            rows = self.table.index(n, np.column_stack([np.broadcast_to(history, (V, n - 1)), words]))
            hit = rows >= 0
            result[hit] = self.logp[n][rows[hit]]
            best[hit] = n
        for m in range(1, L + 1):
            row = int(self.table.index(m, np.asarray(context[L - m:])[None, :])[0])
            if row >= 0:
                result[best <= m] += self.logbow[m][row]
        return np.exp(result * self.scale)


def _values(values: np.ndarray) -> np.ndarray:
    """Parameters as float64, or float32 as they are (a binary file's, memory-mapped: not copied)."""
    values = np.asarray(values)
    return values if values.dtype == np.float32 else values.astype(np.float64, copy=False)


@numba.njit(cache=True, inline="always")
def _find(keys, key, lo, hi) -> int:
    """The row of `key` in keys[lo:hi] (sorted), -1 where absent."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < end and keys[lo] == key else -1


@numba.njit(cache=True)
def _walk(stream, segments, keys, children, logp, logbow, vocab_size, bits, packed, scale):
    """(log P * scale, n-gram length, -1) of each scored token of each segment (first, start, end) of the stream:
    of stream[t] for start <= t < end, from up to N-1 tokens before it from `first` on (a segment is read
    alone), the segments' one after the other; (empty, empty, t) where stream[t] is no id of the vocabulary.

    Per order n (tuples indexed n - 1): `keys` the table's sorted keys, `children` its child starts
    (NgramTable.child_starts: the rows of order n + 1 after row i of order n are children[i] ..
    children[i + 1]), `logp`, `logbow` the parameters. Walking the stream, `row[n]` is the row of the
    n-gram ending at t (-1: not listed); it is searched only where its first n - 1 words are listed
    (the row at t - 1), among that row's children, by its key (packed up to order `packed`, else
    the prefix's row times V plus the word): one short binary search per order and token."""
    N = len(keys)
    scored = 0
    for s in range(segments.shape[0]):
        scored += max(segments[s, 2] - segments[s, 1], 0)
        for t in range(segments[s, 0], segments[s, 2]):
            if not 0 <= stream[t] < vocab_size:
                return np.empty(0, np.float64), np.empty(0, np.int64), t
    out = np.empty(scored, np.float64)
    length = np.empty(scored, np.int64)
    prev_row, prev_key = np.empty(N + 1, np.int64), np.empty(N + 1, np.int64)
    row, key = np.full(N + 1, -1, np.int64), np.full(N + 1, -1, np.int64)
    at = 0
    for s in range(segments.shape[0]):
        first, start, end = segments[s, 0], segments[s, 1], segments[s, 2]
        prev_row[:] = -1
        prev_key[:] = -1
        for t in range(max(first, start - (N - 1)), end):
            w = np.int64(stream[t])
            row[1], key[1] = w, w
            best = 1
            for n in range(2, N + 1):
                p = prev_row[n - 1]
                if p < 0:
                    row[n] = -1
                    continue
                k = (prev_key[n - 1] << bits) | w if n <= packed else p * vocab_size + w
                r = _find(keys[n - 1], k, children[n - 2][p], children[n - 2][p + 1])
                row[n], key[n] = r, k
                if r >= 0:
                    best = n
            if t >= start:
                value = np.float64(logp[best - 1][row[best]])
                for m in range(best, N):
                    if prev_row[m] >= 0:
                        value += logbow[m - 1][prev_row[m]]
                out[at] = value * scale
                length[at] = best
                at += 1
            for n in range(1, N + 1):
                prev_row[n], prev_key[n] = row[n], key[n]
    return out, length, -1

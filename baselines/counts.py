"""N-gram counting and lookup over int32 id streams, all numpy.

Public API
----------
`NgramTable(vocab_size, grams)`: the sorted distinct n-grams of orders 1..N of a model, with int64
    keys for `np.searchsorted` lookup. Order 1 is always dense: entry w is word id w, for every id
    of the vocabulary (so a unigram level covers all of V).
    - `table.order`, `table.vocab_size`, `table.grams[n]` ((m_n, n) int32, lexicographic order; None
      in a table read from a binary file, whose `table.gram_rows(n)` decodes them from the keys),
      `table.keys[n]` ((m_n,) int64, increasing), `table.packed[n]` (bool), `table.size(n)`.
    - `table.index(n, grams)`: row index at order n of each query n-gram ((m, n) ids), -1 if absent.
    - `table.index_stream(stream, max_order)`: list `idx` with `idx[n][t]` the row index of the
      n-gram ending at position t (stream[t-n+1 .. t]), -1 if absent or t < n - 1. Batch scoring.
    - `table.children(n, context_index)`: the rows [lo, hi) at order n whose first n-1 words are
      the (n-1)-gram `context_index` (contiguous because rows are sorted); `table.child_starts(n)`
      the same for every row of order n at once (what BackoffModel.walk searches in).
`count_ngrams(stream, order, vocab_size, packed=None)` -> `NgramCounts`:
    `.table` (an NgramTable), `.counts[n]` (int64 per row; order 1 is bincount over V),
    `.at[n]` (row index of the n-gram starting at each position t = 0 .. len - n),
    `.prefix[n]`, `.suffix[n]` (n >= 2: row at order n-1 of each row's first / last n-1 words;
    gathers through `at`, no search).
`count_of_counts(counts, k)`: n_1 .. n_k, how many entries have count exactly r.

Keys
----
An order-n key is the n ids packed into one int64, `sum_i id_i << bits * (n - 1 - i)` with
bits = ceil(log2 V), whenever bits * n <= 63. Otherwise (a 5-gram of 18k-word ids needs 75 bits)
it is the *prefix-rank* key `index_{n-1}(w_1 .. w_{n-1}) * V + w_n`: the row of the n-gram's
first n-1 words at order n-1 (< stream length) times V plus the last word, which stays below
2^63 for any stream and vocabulary that fit in memory. Both keys sort n-grams lexicographically,
so rows are in the same order whichever key an order uses, and an n-gram's children form one
contiguous block. Every prefix of a counted n-gram is itself counted, which prefix-rank keys need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lmbench.errors import LMBenchError

MAX_KEY_BITS = 63
SORTED_SEARCH_MIN = 4096  # sort the queries of bigger lookups (see NgramTable._locate)


def key_bits(vocab_size: int) -> int:
    """Bits of one packed id: ceil(log2 V), at least 1."""
    return max(1, math.ceil(math.log2(max(vocab_size, 2))))


def packs(vocab_size: int, n: int) -> bool:
    """Whether an n-gram over V ids packs into one int64 key: ceil(log2 V) * n <= 63."""
    return key_bits(vocab_size) * n <= MAX_KEY_BITS


class NgramTable:
    """Sorted distinct n-grams of orders 1..N with searchsorted lookup (see the module docstring)."""

    def __init__(self, vocab_size: int, grams: dict[int, np.ndarray], *, packed: bool | None = None,
                 order: int | None = None):
        """`grams[n]` for n = 2..N: (m_n, n) distinct n-grams whose (n-1)-prefixes are all in
        grams[n-1] (any row order; they are sorted here). Order 1 is the whole vocabulary.
        `packed`: False forces prefix-rank keys; None packs whenever the keys fit. `order`: the
        order N when orders 2..N are to be appended by the caller (count_ngrams)."""
        self.vocab_size = int(vocab_size)
        self.order = order or max([1, *grams])
        self.bits = key_bits(self.vocab_size)
        self._child_starts: dict[int, np.ndarray] = {}
        self.packed = [False] + [packs(self.vocab_size, n) and packed is not False
                                 for n in range(1, self.order + 1)]
        self.grams: list[np.ndarray | None] = [None, np.arange(self.vocab_size, dtype=np.int32)[:, None]]
        self.keys: list[np.ndarray | None] = [None, np.arange(self.vocab_size, dtype=np.int64)]
        for n in range(2, max([1, *grams]) + 1):
            rows = np.asarray(grams[n], dtype=np.int32).reshape(-1, n)
            prefix = self.index(n - 1, rows[:, :-1])
            if np.any(prefix < 0):
                raise LMBenchError(f"{int(np.sum(prefix < 0))} {n}-grams have a first {n - 1} words that "
                                   f"are not an {n - 1}-gram of the model: add the missing lower-order "
                                   "n-grams (every context must be an n-gram)")
            keys = self._extend(n, self._pack(rows[:, :-1]) if self.packed[n] else None, prefix, rows[:, -1])
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            if keys.size > 1 and np.any(keys[1:] == keys[:-1]):
                raise LMBenchError(f"the {n}-grams hold duplicates: give each n-gram once")
            self.grams.append(rows[order])
            self.keys.append(keys)

    def size(self, n: int) -> int:
        return len(self.keys[n])

    # ---- keys --------------------------------------------------------------------------------

    def _pack(self, rows: np.ndarray) -> np.ndarray:
        """Packed int64 key of each row of ids, shape (m, n) -> (m,)."""
        key = np.zeros(len(rows), dtype=np.int64)
        for j in range(rows.shape[1]):
            key = (key << self.bits) | rows[:, j].astype(np.int64)
        return key

    def _extend(self, n: int, prefix_key: np.ndarray | None, prefix_index: np.ndarray,
                words: np.ndarray) -> np.ndarray:
        """Order-n key from the order-(n-1) key (packed orders) or row index (prefix-rank orders)
        of the first n-1 words and the last word; -1 where a prefix-rank key has no prefix row."""
        words = words.astype(np.int64)
        if self.packed[n]:
            return (prefix_key << self.bits) | words
        return np.where(prefix_index >= 0, prefix_index.astype(np.int64) * self.vocab_size + words, -1)

    def _locate(self, n: int, keys: np.ndarray) -> np.ndarray:
        """Row index of each key at order n, -1 where absent (or key == -1). Many keys are searched
        in increasing order (argsort first): a binary search whose probes stay in cache is several
        times faster on tables of ~1M keys than one that jumps around at random."""
        table = self.keys[n]
        if table.size == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        pos_c = np.minimum(searchsorted_many(table, keys), table.size - 1)
        return np.where((table[pos_c] == keys) & (keys >= 0), pos_c, -1).astype(np.int64)

    # ---- lookup ------------------------------------------------------------------------------

    def index(self, n: int, grams: np.ndarray) -> np.ndarray:
        """Row at order n of each query n-gram, shape (m, n) -> (m,) int64, -1 if absent."""
        grams = np.asarray(grams).reshape(-1, n)
        if n == 1:
            ids = grams[:, 0].astype(np.int64)
            return np.where((ids >= 0) & (ids < self.vocab_size), ids, -1)
        if self.packed[n]:
            return self._locate(n, self._pack(grams))
        start = max(j for j in range(1, n) if j == 1 or self.packed[j])  # highest packed order below n
        index = self.index(start, grams[:, :start])
        for j in range(start + 1, n + 1):
            index = self._locate(j, self._extend(j, None, index, grams[:, j - 1]))
        return index

    def index_stream(self, stream: np.ndarray, max_order: int | None = None) -> list[np.ndarray]:
        """idx[n][t] = row of stream[t-n+1 .. t] at order n (-1 if absent or t < n-1), n = 1..max_order;
        idx[0] is unused. An n-gram can only be listed if its first n-1 words are, so order n
        searches only the positions whose prefix was found at order n-1."""
        max_order = min(max_order or self.order, self.order)
        stream = np.asarray(stream, dtype=np.int64)
        T = len(stream)
        idx: list[np.ndarray] = [np.zeros(0, np.int64), stream.copy()]
        key = stream.copy()  # packed key of the n-gram ending at t (while orders pack)
        for n in range(2, max_order + 1):
            ends = np.flatnonzero(idx[n - 1][:-1] >= 0) + 1      # (k,) positions t with a listed prefix
            prefix_key = key[ends - 1] if self.packed[n] else None
            candidate = self._extend(n, prefix_key, idx[n - 1][ends - 1], stream[ends])
            found = np.full(T, -1, dtype=np.int64)
            found[ends] = self._locate(n, candidate)
            if self.packed[n]:
                key = np.full(T, -1, dtype=np.int64)
                key[ends] = candidate
            idx.append(found)
        return idx

    def gram_rows(self, n: int) -> np.ndarray:
        """grams[n], decoded from the keys where the table holds none (a binary file's, baselines.binary)."""
        if self.grams[n] is not None:
            return self.grams[n]
        keys = np.asarray(self.keys[n])
        if self.packed[n]:
            mask = (1 << self.bits) - 1
            return np.column_stack([(keys >> (self.bits * (n - 1 - j))) & mask for j in range(n)]).astype(np.int32)
        return np.column_stack([self.gram_rows(n - 1)[keys // self.vocab_size], keys % self.vocab_size]).astype(np.int32)

    def child_starts(self, n: int) -> np.ndarray:
        """(m_n + 1,) int64, for n < N: the rows of order n + 1 whose first n words are row i of order n
        are child_starts(n)[i] .. [i + 1] - 1 (rows are sorted, so they are contiguous); computed once
        (one sorted search), or given (a binary file's, baselines.binary)."""
        starts = self._child_starts.get(n)
        if starts is None:
            keys, above = self.keys[n], self.keys[n + 1]
            bounds = keys << self.bits if self.packed[n + 1] else np.arange(len(keys), dtype=np.int64) * self.vocab_size
            starts = np.append(np.searchsorted(above, bounds), len(above)).astype(np.int64)
            self._child_starts[n] = starts
        return starts

    def walkable(self) -> bool:
        """Whether BackoffModel.walk scores over this table: its child starts given (a binary file's), or its
        keys in memory (not the memory-mapped columns of the bounded path, baselines.disk_counts, whose
        child starts would take memory in proportion to the model: scored by sorted searches instead)."""
        return (len(self._child_starts) >= self.order - 1
                or not any(isinstance(keys, np.memmap) for keys in self.keys[2:]))

    def children(self, n: int, context_index: int) -> tuple[int, int]:
        """Rows [lo, hi) at order n whose first n-1 words are row `context_index` of order n-1."""
        if self.packed[n]:
            lo_key = int(self.keys[n - 1][context_index]) << self.bits
            hi_key = lo_key + (1 << self.bits)
        else:
            lo_key = context_index * self.vocab_size
            hi_key = lo_key + self.vocab_size
        lo, hi = np.searchsorted(self.keys[n], [lo_key, hi_key])
        return int(lo), int(hi)


@dataclass
class NgramCounts:
    """Counts of every n-gram of a stream, orders 1..N (see the module docstring)."""

    table: NgramTable
    counts: list[np.ndarray]  # counts[n][i]: occurrences of row i of order n; counts[1] is over V
    at: list[np.ndarray]      # at[n][t]: row of the n-gram starting at t, t = 0 .. len - n
    prefix: list[np.ndarray]  # prefix[n][i]: row at order n-1 of the first n-1 words of row i
    suffix: list[np.ndarray]  # suffix[n][i]: row at order n-1 of the last n-1 words of row i

    @property
    def order(self) -> int:
        return self.table.order


def count_ngrams(stream: np.ndarray, order: int, vocab_size: int, *,
                 packed: bool | None = None) -> NgramCounts:
    """Count the n-grams of orders 1..order of an id stream with one sort per order.

    Order n's key for the n-gram starting at t is built from order n-1's at the same t (packed:
    shift and or; prefix-rank: row index times V plus the last word), so no order re-reads n
    columns. `packed=False` forces prefix-rank keys everywhere (for tests of that path)."""
    stream = np.asarray(stream)
    if order < 1:
        raise LMBenchError(f"order {order} is not an n-gram order: use 1 or more")
    if len(stream) < order:
        raise LMBenchError(f"a stream of {len(stream)} tokens has no {order}-grams: use a longer stream")
    if stream.size and (stream.min() < 0 or stream.max() >= vocab_size):
        raise LMBenchError(f"the stream holds ids outside 0 .. {vocab_size - 1}: encode it with the "
                           "vocabulary the model is built for")
    table = NgramTable(vocab_size, {}, packed=packed, order=order)       # order 1; 2..N appended below
    ids = stream.astype(np.int64)
    counts = [np.zeros(0, np.int64), np.bincount(ids, minlength=vocab_size).astype(np.int64)]
    at = [np.zeros(0, np.int64), ids]
    prefix, suffix = [np.zeros(0, np.int64)] * 2, [np.zeros(0, np.int64)] * 2
    key = ids  # packed key of the n-gram starting at t, while orders pack
    for n in range(2, order + 1):
        m = len(ids) - n + 1  # n-grams in the stream
        key = table._extend(n, key[:m] if table.packed[n] else None, at[n - 1][:m], ids[n - 1:])
        keys, first, inverse, count = _unique(key)
        windows = np.lib.stride_tricks.sliding_window_view(stream, n)
        table.grams.append(np.ascontiguousarray(windows[first], dtype=np.int32))
        table.keys.append(keys)
        counts.append(count.astype(np.int64))
        at.append(inverse.reshape(-1).astype(np.int64))
        prefix.append(at[n - 1][first])      # the n-gram at position p starts with the (n-1)-gram at p
        suffix.append(at[n - 1][first + 1])  # and ends with the one at p + 1
    return NgramCounts(table, counts, at, prefix, suffix)


def _unique(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(key, return_index, return_inverse, return_counts) through an unstable argsort
    (several times faster than the stable one np.unique needs); `first` is *an* occurrence of
    each distinct key, not necessarily the first, which is all the counting needs."""
    order = np.argsort(key)                                  # (m,)
    ordered = key[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))  # (d,)
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[order] = np.cumsum(np.concatenate([[0], ordered[1:] != ordered[:-1]]))
    count = np.diff(np.append(starts, len(key)))
    return ordered[starts], order[starts], inverse, count


def searchsorted_many(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """np.searchsorted(table, keys), the keys searched in increasing order when there are many (see
    NgramTable._locate): the probes then walk the table, a memory-mapped one included, in order."""
    if len(keys) <= SORTED_SEARCH_MIN:
        return np.searchsorted(table, keys)
    by_key = np.argsort(keys)
    pos = np.empty(len(keys), dtype=np.int64)
    pos[by_key] = np.searchsorted(table, keys[by_key])
    return pos


def weighted_sums(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """(size,) float64 sums of `weights` per value of `index` (np.bincount with weights, which gives
    int64 zeros when `index` is empty: a block of contexts without continuations on the bounded path)."""
    return np.bincount(index, weights=weights, minlength=size).astype(np.float64, copy=False)


def count_of_counts(counts: np.ndarray, k: int) -> np.ndarray:
    """n_r for r = 0 .. k (n_0 set to 0, unused): how many entries have count exactly r."""
    nr = np.bincount(np.clip(counts, 0, k + 1), minlength=k + 2)[: k + 1].astype(np.int64)
    nr[0] = 0
    return nr

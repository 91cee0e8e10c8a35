"""The infini-gram: an n-gram of unbounded order over a suffix array (Liu et al. 2024), interpolated with KN.

For every position t of a stream, the ∞-gram conditions on the longest suffix s of the context that
occurs in train followed by a token, and estimates

    P∞(w | context) = c(s w) / c(s .),   c(s .) = sum_w c(s w) > 0,                               (1)

with its effective n = len(s) + 1 (Liu et al.'s: 1 for the empty suffix, the unigram relative
frequency). Counts are of occurrences in the training ids. The issue's rule takes s as the longest
suffix with c(s) > 0 and divides by c(s); the two differ only where s is a suffix of train (its last
occurrence then has no next token): there c(s .) = c(s) - 1, and when s occurs only there c(s w) / c(s)
would be 0 for every w. Counting occurrences followed by a token makes (1) a distribution over V for
every context, so s is the longest suffix with c(s .) > 0. s is chosen from the context alone: a rule
"longest suffix with c(s w) > 0" would read the token being predicted, and P would not be a distribution.

P∞ is sparse (0 for a continuation never seen after s). The model of the suite, `InfiniGram`, is (1)
interpolated with interpolated modified Kneser-Ney (baselines/kneser_ney.py, order 5 by default), with
one pair of weights per effective-n bucket (n = 1 .. 15, and 16 or more together), fitted by EM on
valid (lmbench/interpolation.py) and shrunk by one pseudo-token per part ((T_q lambda + 1) / (T_q + 2)
for the T_q valid tokens of bucket q: nothing on AP's buckets of thousands of tokens, but a bucket of a
few tokens that P∞ all predicted keeps weight on KN), as Liu et al. give their sparse and dense
estimates weights of their own:

    P(w | context) = lambda_q P∞(w | context) + (1 - lambda_q) P_KN(w | last N-1 words),  q = bucket(n). (2)

Both parts are distributions over V for every context, so (2) is one too.

The index. A suffix array over the training ids, built by libdivsufsort through pydivsufsort (a
well-kept C implementation, O(N log N) worst case): ids are stored in the smallest unsigned type that
holds V (2 bytes for V <= 65,536), pydivsufsort sorts the suffixes of their big-endian bytes and keeps
those at whole-token offsets, which are in the order of the token suffixes (the byte order of
big-endian ids is their numeric order; infini-gram's own index does the same). A numpy suffix sort
(prefix doubling) would take log N full sorts of the array: pydivsufsort is one C pass, and installs
from PyPI as a wheel. Beside the array, the key of every suffix in its order: its first `group` ids
(+ 1, 0 past the end of train) packed into one int64 (4 ids of 15 bits for AP), so that the block of
any pattern's first 4 tokens is one np.searchsorted, in C. Ids (2 bytes a token), array (int32, 4
bytes, while the ids' bytes number < 2^31, else int64) and keys (8 bytes) are .npy files, memory-mapped: 14 bytes
a token for AP, where infini-gram's index takes 7 (2-byte ids, 5-byte pointers): the keys are a
speed table (scoring is about 6 times slower through the array alone). The build's peak is
libdivsufsort's int32 array over the 2N id bytes (8 bytes a token) with its filtered copies (8 + 2)
and the 2N bytes, then the array, ids and keys with the keying's bounded temporaries: about 22 bytes a
token, 2.2 GB at 100M tokens (bench/infinigram_bench.py measures it); the bound is RAM for that, not a
chunked suffix sort.

Counting (all positions of a stream at once, numpy): a pattern's occurrences are a block of the suffix
array. The keys give the block of its first 4 tokens; a longer pattern is found within that block by
two binary searches, every step comparing each pattern with one suffix a few tokens at a time (the
widths doubling while they agree), from the prefix both ends of the search range are known to share
with the pattern (Manber & Myers' lcp bound). The longest suffix s of each context comes from the
matching statistics M(i) (the longest prefix of stream[i:] occurring in train: the longer match with
the two suffixes beside the insertion point of stream[i:]): E(i) = i + M(i) never decreases, so the
longest suffix of stream[:t] occurring in train starts at the first i with E(i) >= t, one searchsorted
for all t. Where that suffix occurs only at the end of train (c(s .) = 0) a binary search on its length
finds the longest shorter one with c(s .) > 0. c(s w) is the block of w among the tokens that follow s
(sorted within the block of s). A context is read back at most `max_context` tokens (default 1,000):
the effective n is at most max_context + 1.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from baselines.kneser_ney import KneserNey
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write
from lmbench.interpolation import fit_weights, mix_logprobs, shrunk
from lmbench.model import SCORE_CHUNK, LanguageModel, split_logprobs

MAX_CONTEXT = 1000   # tokens of context read back
BUCKETS = 16         # effective n 1 .. 15 one bucket each, 16 and more the last
FIRST_WIDTH = 4      # tokens compared at once in the first round of a comparison (doubling up to MAX_WIDTH)
MAX_WIDTH = 256
BUILD_CHUNK = 1 << 22  # suffixes keyed at once while building
DISTINCT_FROM = 1024   # patterns searched at once from which repeated ones are searched once (SuffixIndex.search)


def key_layout(vocab_size: int) -> tuple[int, int]:
    """(bits of one id + 1, ids per int64 key): ids + 1 lie in [1, V], 0 marks the end of train."""
    bits = max(1, int(vocab_size).bit_length())
    return bits, max(1, 63 // bits)


def sorted_search(table: np.ndarray, queries: np.ndarray, side: str) -> np.ndarray:
    """np.searchsorted(table, queries, side) with the queries taken in increasing order, so that the
    probes walk the (memory-mapped) table in order: several times faster for many random queries."""
    order = np.argsort(queries, kind="stable")
    found = np.empty(len(queries), dtype=np.int64)
    found[order] = np.searchsorted(table, queries[order], side=side)
    return found


def effective_n_bucket(n: np.ndarray) -> np.ndarray:
    """The weight bucket of each effective n: n - 1 for n < 16, 15 for n >= 16."""
    return np.minimum(np.asarray(n, dtype=np.int64), BUCKETS) - 1


def bucket_means(bucket: np.ndarray, values: np.ndarray) -> list[float]:
    """The mean of `values` over the tokens of each effective-n bucket (0 for a bucket without tokens),
    to 4 decimals: the per-bucket figures of the report (`InfiniGram.profile`, the mixtures with counts)."""
    sums = np.bincount(bucket, weights=values, minlength=BUCKETS)
    return np.round(sums / np.maximum(np.bincount(bucket, minlength=BUCKETS), 1), 4).tolist()


def distinct_patterns(query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse): pattern k = query[qpos[k] : qpos[k] + qlen[k]] is the pattern first[inverse[k]],
    and the patterns at `first` differ from each other. Exact, from the suffix array and LCP array of the
    query itself (libdivsufsort, Kasai): two patterns of one length are equal when the suffixes they
    start are at least that long alike, the least LCP between their ranks."""
    rank, lcp = _suffix_ranks(query)
    ranks = rank[qpos]
    order = np.lexsort((ranks, qlen))                            # by length, then rank
    at, length = ranks[order], qlen[order]
    least = np.minimum.reduceat(lcp, at)[:-1] if len(at) > 1 else np.zeros(0, np.int64)  # ranks at[k] .. at[k+1]
    same = (length[1:] == length[:-1]) & ((at[1:] == at[:-1]) | (least >= length[1:]))
    group = np.concatenate([[0], np.cumsum(~same)])
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = group
    first = order[np.concatenate([[True], ~same])]
    return first, inverse


_RANKED: list = []  # [(query, (rank, lcp))] of the last query ranked: one stream piece is searched several times


def _suffix_ranks(query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rank of every suffix of `query` and the LCP array (lcp[r]: of the suffixes of ranks r and r + 1),
    kept for the next search of the same array (streams are never changed in place)."""
    if _RANKED and _RANKED[0][0] is query:
        return _RANKED[0][1]
    from pydivsufsort import divsufsort, kasai
    text = np.ascontiguousarray(query, dtype=np.uint32 if query.max(initial=0) >= 1 << 16 else np.uint16)
    sa = divsufsort(text)
    rank = np.empty(len(sa), dtype=np.int64)
    rank[sa] = np.arange(len(sa))
    _RANKED[:] = [(query, (rank, np.asarray(kasai(text, sa), dtype=np.int64)))]
    return _RANKED[0][1]


class SuffixIndex:
    """The training ids, their suffix array and the prefix key of every suffix, memory-mapped from
    `directory` (module docstring)."""

    def __init__(self, directory: Path, vocab_size: int):
        directory = Path(directory)
        self._open(*(np.asarray(np.load(directory / f"{name}.npy", mmap_mode="r")) for name in ("tokens", "sa", "keys")),
                   vocab_size)

    @classmethod
    def from_arrays(cls, tokens: np.ndarray, sa: np.ndarray, keys: np.ndarray, vocab_size: int) -> "SuffixIndex":
        """The index of these arrays (a binary file's, baselines.binary), as they are."""
        if not len(tokens) == len(sa) == len(keys):
            raise ValueError(f"its index arrays differ in length ({len(tokens)}, {len(sa)}, {len(keys)})")
        index = cls.__new__(cls)
        index._open(tokens, sa, keys, vocab_size)
        return index

    def _open(self, tokens: np.ndarray, sa: np.ndarray, keys: np.ndarray, vocab_size: int) -> None:
        self.tokens, self.sa, self.keys = tokens, sa, keys
        self.size = len(self.tokens)
        self.nbytes = self.tokens.nbytes + self.sa.nbytes + self.keys.nbytes
        self.bits, self.group = key_layout(vocab_size)
        self.shifts = self.bits * np.arange(self.group - 1, -1, -1, dtype=np.int64)

    @classmethod
    def build(cls, train: np.ndarray, vocab_size: int, directory: Path) -> "SuffixIndex":
        """Write the index of `train` (ids in [0, vocab_size)) into `directory` and open it."""
        from pydivsufsort import divsufsort
        train = np.asarray(train)
        if len(train) == 0:
            raise LMBenchError("the infini-gram needs a training split of at least one token: use a longer corpus")
        if train.min() < 0 or train.max() >= vocab_size:
            raise LMBenchError(f"training ids must lie in [0, {vocab_size}): prepare the corpus with its vocabulary")
        tokens = train.astype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)
        sa = divsufsort(tokens)  # suffixes of the big-endian bytes at whole-token offsets; int64 past 2^31 bytes
        bits, group = key_layout(vocab_size)
        keys = np.zeros(len(sa), dtype=np.int64)
        for lo in range(0, len(sa), BUILD_CHUNK):  # id + 1 of each suffix's k-th token, 0 past the end of train
            at = sa[lo:lo + BUILD_CHUNK].astype(np.int64)
            for k in range(group):
                keys[lo:lo + BUILD_CHUNK] |= np.where(
                    at + k < len(tokens), tokens[np.minimum(at + k, len(tokens) - 1)].astype(np.int64) + 1, 0
                ) << bits * (group - 1 - k)
        for name, array in (("tokens.npy", tokens), ("sa.npy", sa), ("keys.npy", keys)):
            atomic_write(Path(directory) / name, lambda tmp, a=array: np.save(tmp, a))
        return cls(directory, vocab_size)

    def pack(self, query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray, fill: int) -> np.ndarray:
        """The key of each pattern query[qpos : qpos + qlen]'s first `group` tokens, `fill` in the
        places past its length (0: the least key of the suffixes starting with it; all ones: the most)."""
        k = np.arange(self.group)
        inside = k < qlen[:, None]
        values = np.where(inside, query[np.minimum(qpos[:, None] + k, len(query) - 1)] + 1, fill)
        return np.bitwise_or.reduce(values.astype(np.int64) << self.shifts, axis=1)

    def key_lcp(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How many leading tokens two keys share (0 .. group)."""
        equal = ((a[:, None] ^ b[:, None]) >> self.shifts) == 0     # (m, group): the first k + 1 agree
        return equal.sum(axis=1)

    def tokens_at(self, positions: np.ndarray) -> np.ndarray:
        """The training id at each position (int64), -1 at or past the end of train (below every id)."""
        inside = positions < self.size
        return np.where(inside, self.tokens[np.minimum(positions, self.size - 1)].astype(np.int64), -1)

    def compare(self, query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray, spos: np.ndarray,
                lcp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Compare each pattern query[qpos : qpos + qlen] with the train suffix at spos, both known to
        agree on their first `lcp` tokens. Returns their longest common prefix (at most qlen) and
        whether the pattern is greater at the first difference (False where the suffix starts with it)."""
        lcp, greater = lcp.copy(), np.zeros(len(lcp), dtype=bool)
        todo, width = np.arange(len(lcp)), FIRST_WIDTH
        while todo.size:
            offset = lcp[todo, None] + np.arange(width)                       # (m, width)
            ended = offset >= qlen[todo, None]
            q = query[np.minimum(qpos[todo, None] + offset, len(query) - 1)]
            s = self.tokens_at(spos[todo, None] + offset)
            differ = ended | (q != s)
            found = differ.any(axis=1)
            rows = np.flatnonzero(found)
            column = differ[rows].argmax(axis=1)
            done = todo[rows]
            lcp[done] = offset[rows, column]
            greater[done] = ~ended[rows, column] & (q[rows, column] > s[rows, column])
            lcp[todo[~found]] += width
            todo, width = todo[~found], min(2 * width, MAX_WIDTH)
        return lcp, greater

    def search(self, query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray, bounds: tuple, *,
               upper: bool) -> tuple:
        """Binary search of each pattern in the suffix array between exclusive bounds (lo, hi), with
        the prefix each bound shares with the pattern (llo, lhi). Lower (upper=False): ends with hi the
        first suffix >= the pattern (a suffix starting with it counts as equal); upper: the first
        suffix > it. Returns the final (lo, hi, llo, lhi); hi = lo + 1.

        Each distinct pattern is searched once (`distinct_patterns`; identical patterns have identical
        bounds, found from their keys): in a stream that repeats itself (one word over and over, a
        paragraph copied) every position's context matches up to max_context tokens, and each step of
        the search re-reads them (the bound min(llo, lhi) stays at the key's tokens while one end of the
        range is a short suffix), so one long pattern searched at every position cost O(max_context
        log N) a token (2.4 ms on one repeated word, issue 46)."""
        if len(qpos) >= DISTINCT_FROM:
            first, inverse = distinct_patterns(query, qpos, qlen)
            if len(first) <= len(qpos) // 2:  # (hardly any repeated: searched as they are)
                found = self._search(query, qpos[first], qlen[first], tuple(np.asarray(b)[first] for b in bounds),
                                     upper=upper)
                return tuple(part[inverse] for part in found)
        return self._search(query, qpos, qlen, bounds, upper=upper)

    def _search(self, query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray, bounds: tuple, *,
                upper: bool) -> tuple:
        lo, hi, llo, lhi = (np.array(b, dtype=np.int64) for b in bounds)
        active = np.arange(len(lo))
        while active.size:
            common = np.minimum(llo[active], lhi[active])        # every suffix between shares it
            settled = common >= qlen[active]                      # ... so all of them start with the pattern
            if upper:
                lo[active[settled]] = hi[active[settled]] - 1
            else:
                hi[active[settled]] = lo[active[settled]] + 1
            active = active[~settled & (hi[active] - lo[active] > 1)]
            if not active.size:
                break
            mid = (lo[active] + hi[active]) // 2
            lcp, greater = self.compare(query, qpos[active], qlen[active], self.sa[mid].astype(np.int64),
                                        np.minimum(llo[active], lhi[active]))
            right = greater | (lcp == qlen[active]) if upper else greater
            lo[active[right]], llo[active[right]] = mid[right], lcp[right]
            hi[active[~right]], lhi[active[~right]] = mid[~right], lcp[~right]
            active = active[hi[active] - lo[active] > 1]
        return lo, hi, llo, lhi

    def intervals(self, query: np.ndarray, qpos: np.ndarray, qlen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[b, e): the suffixes starting with each pattern query[qpos : qpos + qlen]; e - b is its count
        c(pattern) (the whole array for an empty pattern). The keys give the block of the first `group`
        tokens (np.searchsorted); a longer pattern is searched for within it."""
        top = (1 << self.bits) - 1
        b = sorted_search(self.keys, self.pack(query, qpos, qlen, 0), "left")
        e = sorted_search(self.keys, self.pack(query, qpos, qlen, top), "right")
        rows = np.flatnonzero((qlen > self.group) & (e > b))
        if rows.size:
            query_pos, query_len = qpos[rows], qlen[rows]
            shared = np.full(rows.size, self.group, dtype=np.int64)   # the whole block shares `group` tokens
            _, first, _, lfirst = self.search(query, query_pos, query_len, (b[rows] - 1, e[rows], shared, shared),
                                              upper=False)
            found = lfirst >= query_len                                # the suffix at `first` starts with it
            start = (np.where(found, first, e[rows] - 1), e[rows], np.where(found, query_len, 0), shared)
            _, end, _, _ = self.search(query, query_pos, query_len, start, upper=True)
            b[rows], e[rows] = first, np.where(found, end, first)
        return b, e

    def count(self, pattern: Sequence[int]) -> int:
        """c(pattern): its occurrences in train."""
        pattern = np.asarray(pattern, dtype=np.int64)
        b, e = self.intervals(np.append(pattern, 0), np.zeros(1, np.int64), np.array([len(pattern)]))
        return int(e[0] - b[0])

    def matching_statistics(self, stream: np.ndarray, begin: int, end: int, max_length: int) -> np.ndarray:
        """M(i) for i in [begin, end): the longest prefix of stream[i:end], at most max_length tokens,
        that occurs in train: the longer common prefix with the two suffixes beside its insertion point
        (from the keys, then, where the first `group` tokens occur, by a search within their block)."""
        qpos = np.arange(begin, end, dtype=np.int64)
        qlen = np.minimum(end - qpos, max_length)
        key = self.pack(stream, qpos, qlen, 0)
        at = sorted_search(self.keys, key, "left")
        before = np.where(at > 0, self.key_lcp(key, self.keys[np.maximum(at - 1, 0)]), 0)
        after = np.where(at < self.size, self.key_lcp(key, self.keys[np.minimum(at, self.size - 1)]), 0)
        matched = np.minimum(np.maximum(before, after), qlen)
        rows = np.flatnonzero((qlen > self.group) & (matched == self.group))
        if rows.size:
            end_of_block = sorted_search(self.keys, key[rows], "right")
            shared = np.full(rows.size, self.group, dtype=np.int64)
            _, _, llo, lhi = self.search(stream, qpos[rows], qlen[rows], (at[rows] - 1, end_of_block, shared, shared),
                                         upper=False)
            matched[rows] = np.maximum(llo, lhi)
        return matched

    def next_counts(self, b: np.ndarray, e: np.ndarray, length: np.ndarray, w: np.ndarray) -> np.ndarray:
        """c(s w) for each block [b, e) of a pattern s of `length` tokens: the sub-block of the suffixes
        whose token after s is w (the block is sorted by it; -1 where the suffix ends after s)."""
        ends = []
        for strict in (False, True):                     # first key >= w, then first key > w
            lo, hi = b - 1, e.copy()
            active = np.flatnonzero(hi - lo > 1)
            while active.size:
                mid = (lo[active] + hi[active]) // 2
                key = self.tokens_at(self.sa[mid].astype(np.int64) + length[active])
                right = key <= w[active] if strict else key < w[active]
                lo[active[right]], hi[active[~right]] = mid[right], mid[~right]
                active = active[hi[active] - lo[active] > 1]
            ends.append(hi)
        return ends[1] - ends[0]


class UnboundedNgram:
    """The ∞-gram (1) alone over an index: effective n and P∞ of a stream's tokens, and the P∞
    distribution of a context, reading contexts back at most `max_context` tokens."""

    def __init__(self, index: SuffixIndex, vocab_size: int, max_context: int = MAX_CONTEXT):
        if max_context < 1:
            raise LMBenchError(f"max_context must be at least 1, got {max_context}: give a positive length")
        self.index, self.vocab_size, self.max_context = index, vocab_size, max_context

    def _longest_suffix(self, stream: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For t = start .. len(stream) - 1: len(s) of the longest suffix s of stream[:t] (at most
        max_context tokens) with c(s .) > 0, and the block [b, e) of s in the suffix array."""
        index, size = self.index, self.index.size
        t = np.arange(start, len(stream), dtype=np.int64)
        begin = max(0, start - self.max_context)
        reach = np.arange(begin, len(stream) - 1) + index.matching_statistics(
            stream, begin, len(stream) - 1, self.max_context)     # E(i), non-decreasing
        length = t - (begin + np.searchsorted(reach, t, side="left"))
        b, e = index.intervals(stream, t - length, length)
        # s occurring only as the end of train: the longest shorter suffix seen twice (once with a next token).
        alone = np.flatnonzero((length > 0) & (e - b == 1) & (index.sa[np.minimum(b, size - 1)] == size - length))
        if alone.size:
            low, high = np.zeros(alone.size, np.int64), length[alone].copy()
            while np.any(high - low > 1):
                mid = (low + high) // 2
                mb, me = index.intervals(stream, t[alone] - mid, mid)
                twice = me - mb >= 2
                low, high = np.where(twice, mid, low), np.where(twice, high, mid)
            length[alone] = low
            b[alone], e[alone] = index.intervals(stream, t[alone] - low, low)
        return length, b, e

    def _continued(self, length: np.ndarray, b: np.ndarray, e: np.ndarray) -> np.ndarray:
        """c(s .) = c(s) less the occurrence at the end of train, if s (non-empty) is one."""
        at_end = (length > 0) & (self.index.sa[np.minimum(b, self.index.size - 1)] == self.index.size - length)
        return e - b - at_end

    def score(self, stream: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        """(effective n, log P∞) of every token of the stream from `start`, SCORE_CHUNK positions at a
        time; log P∞ is -inf where c(s w) = 0."""
        stream = np.asarray(stream, dtype=np.int64)
        n, logp = [np.zeros(0, np.int64)], [np.zeros(0)]
        for chunk in range(start, len(stream), SCORE_CHUNK):
            piece = stream[max(0, chunk - self.max_context):chunk + SCORE_CHUNK]
            offset = chunk - max(0, chunk - self.max_context)
            length, b, e = self._longest_suffix(piece, offset)
            together = self.index.next_counts(b, e, length, piece[offset:])
            with np.errstate(divide="ignore"):
                logp.append(np.log(together / self._continued(length, b, e)))       # (1)
            n.append(length + 1)
        return np.concatenate(n), np.concatenate(logp)

    def distribution(self, context: Sequence[int]) -> tuple[int, np.ndarray]:
        """(effective n, P∞(. | context)) over the vocabulary."""
        context = np.asarray(context, dtype=np.int64)[len(context) - min(len(context), self.max_context):]
        length, b, e = self._longest_suffix(np.append(context, 0), len(context))   # any next token
        positions = self.index.sa[b[0]:e[0]].astype(np.int64) + length[0]
        following = self.index.tokens[positions[positions < self.index.size]]
        return int(length[0]) + 1, np.bincount(following, minlength=self.vocab_size) / self._continued(length, b, e)[0]


class InfiniGram(LanguageModel):
    """The ∞-gram (1) interpolated with interpolated modified KN of `kn_order` by weights per
    effective-n bucket fitted on valid (2). The index lives in a temporary folder under `tmp_dir`
    (the system's by default), memory-mapped, removed with the model; `memory` and `tmp_dir` are
    also the KN model's bounded-memory options."""

    order = None  # unbounded: the context read back is at most max_context tokens

    def __init__(self, kn_order: int = 5, *, max_context: int = MAX_CONTEXT, memory: int | None = None,
                 tmp_dir: str | Path | None = None):
        if max_context < 1:
            raise LMBenchError(f"max_context must be at least 1, got {max_context}: give a positive length")
        self.kn = KneserNey(kn_order, memory=memory, tmp_dir=tmp_dir)
        self.max_context, self.tmp_dir = max_context, tmp_dir

    def _fit(self, corpus) -> None:
        started = time.perf_counter()
        folder = Path(tempfile.mkdtemp(prefix="infinigram-", dir=self.tmp_dir))
        self._cleanup = weakref.finalize(self, shutil.rmtree, folder, True)
        self.index = SuffixIndex.build(corpus.train, self.vocab_size, folder)
        self.sparse = UnboundedNgram(self.index, self.vocab_size, self.max_context)
        self.timings = {"index_seconds": time.perf_counter() - started}
        self.kn.fit(corpus)
        valid_n, valid_inf = self.split_infinigram(corpus, "valid")
        logprobs = np.stack([valid_inf, split_logprobs(self.kn, corpus, "valid")])
        buckets = effective_n_bucket(valid_n)
        tokens = np.bincount(buckets, minlength=BUCKETS)
        # EM's weights, each bucket's shrunk by one pseudo-token per part: a bucket whose few valid tokens
        # the ∞-gram all predicted would otherwise leave KN no weight at all.
        self.weights = shrunk(fit_weights(logprobs, buckets, BUCKETS), tokens)   # (BUCKETS, 2)

    def split_infinigram(self, corpus, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(effective n, log P∞) of every token of a split of `corpus`."""
        return self.sparse.score(*corpus.stream_for(split, history=self.max_context))

    @staticmethod
    def bucket_of(effective_n: np.ndarray) -> np.ndarray:
        return effective_n_bucket(effective_n)

    def profile(self, corpus, split: str = "test") -> dict:
        """Where the counts still win: per effective-n bucket (n = 1 .. 15, 16 for 16 and more) the
        split's tokens, the share with P∞(w) > 0, and the mean natural-log probability of KN alone and of
        the interpolated model (2)."""
        n, logp = self.split_infinigram(corpus, split)
        kn = split_logprobs(self.kn, corpus, split)
        mixed = mix_logprobs(np.stack([logp, kn]), self.weights[effective_n_bucket(n)].T)
        bucket = effective_n_bucket(n)
        return {"n": list(range(1, BUCKETS + 1)), "tokens": np.bincount(bucket, minlength=BUCKETS).tolist(),
                "p_inf_nonzero": bucket_means(bucket, np.isfinite(logp)),
                "kn_mean_logprob": bucket_means(bucket, kn), "mixed_mean_logprob": bucket_means(bucket, mixed)}

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        n, logp = self.sparse.score(stream, start)
        weights = self.weights[effective_n_bucket(n)].T                              # (2, T)
        return mix_logprobs(np.stack([logp, self.kn.score(stream, start)]), weights)  # (2)

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        n, p_inf = self.sparse.distribution(context)
        weight = self.weights[effective_n_bucket(n)]
        return weight[0] * p_inf + weight[1] * self.kn.distribution(context)          # (2)

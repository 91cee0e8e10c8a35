"""Word clustering by the exchange algorithm (Kneser & Ney 1993; Martin, Liermann & Ney 1998).

Each word w of the vocabulary gets one class c(w) of C. With N(c, d) the number of training bigrams
whose first word is in class c and second in class d, N_L(c) = sum_d N(c, d) and
N_R(d) = sum_c N(c, d), the class-bigram log-likelihood of train is, up to terms that do not depend
on the clustering,

    F = sum_{c,d} f(N(c, d)) - sum_c f(N_L(c)) - sum_d f(N_R(d)),   f(x) = x ln x, f(0) = 0.

Start: the C - 1 most frequent words of train each in their own class, all the others in the last
class. Then, repeatedly, for every word with a training count (most frequent first): take it out of
its class and put it into the class that maximises F, staying if no class beats its own. Iterate
until a pass moves no word or after `max_iters` passes. The procedure has no randomness, so the
result depends only on the training stream and C.

One move costs O(C * (successor classes + predecessor classes)): the word's bigram neighbours come
from a scipy.sparse CSR matrix of word-bigram counts (and its transpose) and are summed per class,
and the gain of inserting the word into EVERY class is summed over the rows of the dense (C, C)
class-bigram matrix N at its predecessor classes and over the rows of N's transpose (kept beside N)
at its successor classes, so every class is read in memory order. The moves are sequential, each
changing N for the next, so a pass is one compiled loop (numba: `_exchange_pass`); on Brown it gives
the classes that one numpy call per word gave, bit for bit, 12-16 times faster (C = 150 to 2000).
F never decreases: the word returns to its own class unless another one is strictly better.

Classes are finally relabelled in order of first appearance by word id, with empty classes dropped,
so `<unk>` (id 0) is always in class 0 and every class id has at least one word.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp
from scipy.special import xlogy

from corpora.vocab import Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, WriteFailed, locked, read_checked, set_aside, write_checked
from lmbench.progress import progress_bar

log = logging.getLogger(__name__)


def f(x: np.ndarray) -> np.ndarray:
    """x ln x with 0 ln 0 = 0."""
    return xlogy(x, x)


def bigram_matrix(train: np.ndarray, vocab_size: int) -> sp.csr_matrix:
    """(V, V) CSR matrix of word-bigram counts of the stream: M[v, w] = c(v, w)."""
    train = np.asarray(train, dtype=np.int64)
    ones = np.ones(len(train) - 1, dtype=np.float64)
    return sp.csr_matrix((ones, (train[:-1], train[1:])), shape=(vocab_size, vocab_size))  # sums dups


def class_bigram_counts(train: np.ndarray, word_class: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, C) dense N(c, d) of the class stream of train."""
    classes = np.asarray(word_class, dtype=np.int64)[np.asarray(train, dtype=np.int64)]
    flat = np.bincount(classes[:-1] * num_classes + classes[1:], minlength=num_classes * num_classes)
    return flat.reshape(num_classes, num_classes).astype(np.float64)


def objective(train: np.ndarray, word_class: np.ndarray, num_classes: int) -> float:
    """F computed from scratch (the module doc's formula)."""
    N = class_bigram_counts(train, word_class, num_classes)  # (C, C)
    return class_objective(N, N.sum(axis=1), N.sum(axis=0))


def class_objective(N: np.ndarray, NL: np.ndarray, NR: np.ndarray) -> float:
    """F of class-bigram counts N (C, C) with their margins NL = N.sum(1), NR = N.sum(0)."""
    return float(f(N).sum() - f(NL).sum() - f(NR).sum())


@dataclass
class Clustering:
    """A word -> class map for one vocabulary (identified by its fingerprint)."""

    word_class: np.ndarray  # (V,) int32, values in [0, num_classes)
    num_classes: int
    fingerprint: str
    info: dict = field(default_factory=dict)  # requested C, objective per pass, seconds, moves

    def save(self, path: str | Path) -> None:
        """Write atomically, with a record of the content that `load` checks (lmbench.files)."""
        text = json.dumps({"fingerprint": self.fingerprint, "num_classes": self.num_classes,
                           "word_class": self.word_class.tolist(), "info": self.info})
        write_checked(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))

    @classmethod
    def load(cls, path: str | Path, vocab: Vocabulary) -> "Clustering":
        """Read a clustering saved for `vocab`; refuses one made for another vocabulary, and raises
        DamagedFile for one that does not read back as written."""
        def read(path: Path) -> "Clustering":
            data = json.loads(path.read_text(encoding="utf-8"))
            word_class = np.asarray(data["word_class"], dtype=np.int32)
            clustering = cls(word_class, int(data["num_classes"]), str(data["fingerprint"]), dict(data.get("info", {})))
            if word_class.ndim != 1 or (len(word_class) and not 0 <= word_class.min() <= word_class.max()
                                        < clustering.num_classes):
                raise ValueError(f"its word classes are not in [0, {clustering.num_classes})")
            return clustering

        clustering = read_checked(Path(path), read, what="clustering file", fix="delete it and cluster again")
        if clustering.fingerprint != vocab.fingerprint() or len(clustering.word_class) != len(vocab):
            raise LMBenchError(
                f"the clustering in {path} was made for another vocabulary (fingerprint "
                f"{clustering.fingerprint}, this corpus has {vocab.fingerprint()}): cluster this "
                "corpus again, or load the corpus with the options the clustering was made with")
        return clustering


def relabel(word_class: np.ndarray) -> tuple[np.ndarray, int]:
    """Class ids in order of first appearance by word id (so word 0 is in class 0), empty classes
    dropped. Returns the (V,) int32 map and the number of classes used."""
    _, first, inverse = np.unique(word_class, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
    return rank[inverse.reshape(-1)], len(first)


def exchange(train: np.ndarray, vocab_size: int, num_classes: int, *, max_iters: int = 20,
             progress: bool = True) -> tuple[np.ndarray, dict]:
    """The exchange algorithm on a training id stream. Returns the raw (V,) class of each word
    (labels as used internally) and info: objective after each pass, moves per pass, seconds."""
    if num_classes < 2:
        raise LMBenchError(f"clustering needs at least 2 classes, not {num_classes}: raise --classes")
    if num_classes > vocab_size:
        raise LMBenchError(f"cannot make {num_classes} classes from {vocab_size} words: "
                           f"use at most {vocab_size} classes")
    started = time.perf_counter()
    train = np.asarray(train, dtype=np.int64)
    C = num_classes
    counts = np.bincount(train, minlength=vocab_size)  # (V,)
    by_frequency = np.argsort(-counts, kind="stable")  # most frequent first, ties by id
    word_class = np.full(vocab_size, C - 1, dtype=np.int64)  # (V,)
    word_class[by_frequency[: C - 1]] = np.arange(C - 1)
    successors = bigram_matrix(train, vocab_size)  # (V, V) CSR: row w = c(w, .)
    predecessors = successors.T.tocsr()  # (V, V) CSR: row w = c(., w)
    self_loops = np.ascontiguousarray(successors.diagonal())  # (V,) c(w, w)
    N = class_bigram_counts(train, word_class, C)  # (C, C)
    NL, NR = N.sum(axis=1), N.sum(axis=0)  # (C,), (C,)
    NT = np.ascontiguousarray(N.T)  # (C, C) N transposed, kept alike by the pass: N(., d) as a row
    F = class_objective(N, NL, NR)
    history, moves_per_pass = [F], []
    movable = by_frequency[counts[by_frequency] > 0]  # words without bigrams never gain by moving
    drift = 0.0  # largest |incremental F - F recomputed| at the end of a pass
    passes = progress_bar(range(max_iters), desc=f"exchange, {C} classes", unit="pass", disable=not progress)
    for iteration in passes:
        moves, F = _exchange_pass(movable, successors.indptr, successors.indices, successors.data,
                                  predecessors.indptr, predecessors.indices, predecessors.data,
                                  self_loops, word_class, N, NT, NL, NR, F, F_TABLE)
        exact = class_objective(N, NL, NR)  # free of accumulated rounding
        drift = max(drift, abs(exact - F))
        F = exact
        history.append(F)
        moves_per_pass.append(int(moves))
        passes.set_postfix(moved=moves)
        log.info("exchange pass %d: %d words moved, objective %.3f", iteration + 1, moves, F)
        if moves == 0:
            break
    return word_class, {"objective": history, "moves": moves_per_pass, "drift": float(drift),
                        "seconds": round(time.perf_counter() - started, 3)}


F_TABLE = f(np.arange(1 << 16, dtype=np.float64))  # f of the counts 0 .. 65535: a look-up beats a log


@numba.njit(cache=True, inline="always")
def _f(x: float, table) -> float:
    """f(x) of a count x (a whole number): from `table` when it holds it."""
    if x < table.shape[0]:
        return table[int(x)]
    return x * math.log(x)


@numba.njit(cache=True)
def _exchange_pass(order, s_ptr, s_idx, s_val, p_ptr, p_idx, p_val, self_loops, word_class,
                   N, NT, NL, NR, F, table):
    """One pass of the exchange over the words in `order`, in place on word_class, N, its transpose
    NT and the margins NL, NR. Returns the number of words moved and the objective F carried along.

    For word w of class g, with r[d] = c(w, d) and l[c] = c(c, w) summed over the classes of its
    neighbours (the (w, w) bigram apart, s of them): w is taken out of g, the gain of putting it
    into class k is, for every k at once,
        sum_d f(N(k, d) + r[d]) - f(N(k, d))  +  sum_c f(N(c, k) + l[c]) - f(N(c, k))
        + the true change of N(k, k), which gains r[k] + l[k] + s (each sum counted r[k] or l[k] alone)
        - the change of f at the margins NL(k) + c(w, .), NR(k) + c(., w),
    and w goes where the gain is largest unless that is not strictly better than g. The sums run
    over rows of NT (d fixed) and of N (c fixed), so every k is read in memory order."""
    C = N.shape[0]
    r, l = np.zeros(C), np.zeros(C)  # (C,) w's successor / predecessor counts by class
    rd, lc = np.empty(C, np.int64), np.empty(C, np.int64)  # the classes where r / l are non-zero
    gain = np.empty(C)
    moves = 0
    for w in order:
        g = word_class[w]
        s = self_loops[w]
        nr = _by_class(s_idx[s_ptr[w]: s_ptr[w + 1]], s_val[s_ptr[w]: s_ptr[w + 1]], word_class, r, rd)
        nl = _by_class(p_idx[p_ptr[w]: p_ptr[w + 1]], p_val[p_ptr[w]: p_ptr[w + 1]], word_class, l, lc)
        r[g] -= s
        l[g] -= s
        n_left, n_right = s, s  # c(w, .), c(., w)
        for t in range(nr):
            n_left += r[rd[t]]
        for t in range(nl):
            n_right += l[lc[t]]
        _move(g, -1.0, r, l, s, n_left, n_right, rd, nr, lc, nl, N, NT, NL, NR)
        gain[:] = 0.0
        for t in range(nr):
            d = rd[t]
            add, column = r[d], NT[d]  # N(., d)
            for k in range(C):
                gain[k] += _f(column[k] + add, table) - _f(column[k], table)
        for t in range(nl):
            c = lc[t]
            add, row = l[c], N[c]  # N(c, .)
            for k in range(C):
                gain[k] += _f(row[k] + add, table) - _f(row[k], table)
        for k in range(C):
            nkk = N[k, k]
            gain[k] += (_f(nkk + r[k] + l[k] + s, table) - _f(nkk + r[k], table) - _f(nkk + l[k], table)
                        + _f(nkk, table))
            gain[k] -= (_f(NL[k] + n_left, table) - _f(NL[k], table)
                        + _f(NR[k] + n_right, table) - _f(NR[k], table))
        best = 0
        for k in range(1, C):
            if gain[k] > gain[best]:
                best = k
        k = best if gain[best] > gain[g] + 1e-9 * max(1.0, abs(gain[g])) else g
        if k != g:
            moves += 1
        _move(k, 1.0, r, l, s, n_left, n_right, rd, nr, lc, nl, N, NT, NL, NR)
        word_class[w] = k
        F += gain[k] - gain[g]  # putting w back into g would restore F
        for t in range(nr):
            r[rd[t]] = 0.0
        for t in range(nl):
            l[lc[t]] = 0.0
    return moves, F


@numba.njit(cache=True, inline="always")
def _by_class(words, counts, word_class, into, touched) -> int:
    """Add the bigram counts of `words` into `into` (C,) by their class; the classes first touched are
    written to `touched`, and their number returned (`into` is zero outside them)."""
    n = 0
    for j in range(len(words)):
        c = word_class[words[j]]
        if into[c] == 0.0:
            touched[n] = c
            n += 1
        into[c] += counts[j]
    return n


@numba.njit(cache=True, inline="always")
def _move(k, sign, r, l, s, n_left, n_right, rd, nr, lc, nl, N, NT, NL, NR):
    """Put the word into class k (sign 1) or take it out of k (sign -1): row k of N gains r, column
    k gains l, N(k, k) gains s, and NT alike."""
    for t in range(nr):
        d = rd[t]
        N[k, d] += sign * r[d]
        NT[d, k] = N[k, d]
    for t in range(nl):
        c = lc[t]
        N[c, k] += sign * l[c]
        NT[k, c] = N[c, k]
    N[k, k] += sign * s
    NT[k, k] = N[k, k]
    NL[k] += sign * n_left
    NR[k] += sign * n_right


def cluster(vocab: Vocabulary, train: np.ndarray, num_classes: int, *, max_iters: int = 20,
            progress: bool = True) -> Clustering:
    """Cluster `vocab` on the training ids; classes relabelled as in `relabel`."""
    raw, info = exchange(train, len(vocab), num_classes, max_iters=max_iters, progress=progress)
    word_class, used = relabel(raw)
    info.update(requested_classes=num_classes, iterations=len(info["moves"]))
    return Clustering(word_class, used, vocab.fingerprint(), info)


def cache_path(corpus, num_classes: int, max_iters: int, directory: Path | None = None) -> Path:
    """Where the clustering of corpus.train is cached: `cache_root()/clusters`, keyed by vocabulary
    fingerprint, a hash of the train ids, C and the pass limit."""
    from corpora.corpus import cache_root

    train = np.ascontiguousarray(corpus.train, dtype=np.int32)
    train_hash = hashlib.sha256(train.tobytes()).hexdigest()[:12]
    directory = directory or cache_root() / "clusters"
    name = f"{corpus.name}-{corpus.vocab.fingerprint()}-{train_hash}-C{num_classes}-i{max_iters}.json"
    return directory / name


def cached_clustering(corpus, num_classes: int, max_iters: int, directory: Path | None = None) -> Clustering | None:
    """The clustering cached at `cache_path`, or None when there is none; a damaged one is set aside
    with a warning (and None returned)."""
    path = cache_path(corpus, num_classes, max_iters, directory)
    if not path.exists():
        return None
    log.info("loading the clustering %s", path)
    try:
        return Clustering.load(path, corpus.vocab)
    except DamagedFile as damage:
        set_aside(path, damage)
        return None


def cached_cluster(corpus, num_classes: int, *, max_iters: int = 20, progress: bool = True,
                   directory: Path | None = None) -> Clustering:
    """The clustering of corpus.train into num_classes from the cache (`cache_path`) when there and
    intact, else computed and saved there; a second process clustering the same corpus at once waits
    for the first one's result."""
    path = cache_path(corpus, num_classes, max_iters, directory)
    with locked(path):
        clustering = cached_clustering(corpus, num_classes, max_iters, directory)
        if clustering is not None:
            return clustering
        clustering = cluster(corpus.vocab, corpus.train, num_classes, max_iters=max_iters, progress=progress)
        try:
            clustering.save(path)
        except (OSError, WriteFailed) as err:  # a full or read-only cache: the clustering is used uncached
            log.warning("could not write the clustering cache %s (%s); set LMBENCH_CACHE to a writable "
                        "folder to reuse it", path, err)
    return clustering

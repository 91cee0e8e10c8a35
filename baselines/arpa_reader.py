"""Reading an ARPA file as a model (the format, and what reading refuses: baselines.arpa): `read_arpa(path, vocab)`
-> `ArpaModel`, a BackoffModel over a vocabulary; `read_arpa_own(path)`, over the file's own words;
`read_arpa_header(path)` and `read_arpa_words(path)`. The sections that baselines.arpa_parser parses are sorted
into the model's table one order at a time and checked as they are (`_Build`, with its compiled walks of the
table), then, over a vocabulary that is not the file's own words, relabelled into it (`_over`)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import numba
import numpy as np

from baselines.arpa_parser import _header_counts, _Reader, _Section
from baselines.backoff import BackoffModel, _find
from baselines.counts import NgramTable
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import read_checked

log = logging.getLogger(__name__)

ARPA_FIX = "write it again (`lmbench ngram --arpa`, KenLM's lmplz or SRILM's ngram-count)"


def read_arpa_header(path: str | Path) -> dict[int, int]:
    """{order: count} from the \\data\\ section."""
    def read(path: Path) -> dict[int, int]:
        with open(path, encoding="utf-8") as f:
            return _header_counts(f)

    return read_checked(Path(path), read, what="ARPA file", fix=ARPA_FIX)


class ArpaModel(BackoffModel):
    """A back-off model read from an ARPA file (see read_arpa)."""

    def _fit(self, corpus) -> None:
        raise LMBenchError("an ARPA model is read, not fitted: use read_arpa(path, vocab) and score it with "
                           "lmbench.model.split_logprobs(model, corpus, split)")


def read_arpa(path: str | Path, vocab: Vocabulary) -> ArpaModel:
    """Read an ARPA file as a BackoffModel over `vocab` (ids from the vocabulary's words)."""
    return _read(path, vocab)[0]


def read_arpa_own(path: str | Path) -> tuple[ArpaModel, Vocabulary]:
    """An ARPA file over the vocabulary it holds: the words of its unigrams, `<unk>` first, then the others in the
    file's order (`reports.api.load`); read once."""
    return _read(path, None)


def _read(path: str | Path, vocab: Vocabulary | None) -> tuple[ArpaModel, Vocabulary]:
    path = Path(path)
    if not path.is_file():
        raise LMBenchError(f"ARPA file {path} does not exist: give the path of a file written by "
                           "`lmbench ngram --arpa`, KenLM or SRILM")
    return read_checked(path, lambda p: _parse(p, vocab), what="ARPA file", fix=ARPA_FIX)


def read_arpa_words(path: str | Path) -> list[str]:
    """The words of the file's \\1-grams: section, in the file's order: the vocabulary an ARPA file holds."""
    def read(path: Path) -> list[str]:
        with contextlib.closing(_Reader(path)) as reader:
            reader.section(1)
            return reader.words.tolist()

    return read_checked(Path(path), read, what="ARPA file", fix=ARPA_FIX)


def _parse(path: Path, vocab: Vocabulary | None) -> tuple[ArpaModel, Vocabulary]:
    """The file's model over `vocab` (None: over its own words, `<unk>` first), checked as baselines.arpa's
    docstring says. Where `vocab` holds the file's words and no other (a file read over its own words), each section
    is parsed, relabelled, sorted into the table and checked before the next is read."""
    with contextlib.closing(_Reader(path)) as reader:
        return _parsed(reader, path, vocab)


def _parsed(reader: _Reader, path: Path, vocab: Vocabulary | None) -> tuple[ArpaModel, Vocabulary]:
    unigrams = reader.section(1)
    own_words = reader.words
    if vocab is None:
        vocab = Vocabulary([UNK] + [word for word in own_words.tolist() if word != UNK])
    index = vocab._index
    to_vocab = np.fromiter((index.get(word, -1) for word in own_words.tolist()), dtype=np.int64, count=len(own_words))
    if len(own_words) == len(vocab) and (to_vocab >= 0).all():  # the vocabulary's words, in some order
        to_vocab = to_vocab.astype(np.int32)
        build = _Build(len(vocab), reader.order, np.array(vocab.words, dtype=object))
        unigrams.ids = to_vocab[unigrams.ids]
        reader.relabel = to_vocab                                      # (the other sections in the vocabulary's ids)
        for n in range(1, reader.order + 1):
            build.add(unigrams if n == 1 else reader.section(n))
        return build.model(), vocab
    sections = [unigrams] + [reader.section(n) for n in range(2, reader.order + 1)]
    build = _Build(len(own_words), reader.order, own_words)            # (checked over its own words)
    for section in sections:
        build.add(_Section(section.n, section.ids, section.logp, section.logbow))
    return _over(vocab, path, to_vocab, sections), vocab


class _Build:
    """The model of order N over V words, one order at a time (`add`: the order-n entries, ids in any order;
    order 1 every id once), each checked as it is added (`check`): no n-gram twice, every n-gram's first n - 1
    words an (n-1)-gram of the file, every distribution summing to 1 (SUM_TOLERANCE). Each order's (m, n) ids
    are let go once its keys, context rows and the check's P(w | h') are made from them, before the sort: the
    table keeps keys only (it decodes n-grams from them where asked: NgramTable.gram_rows), so that the memory an
    order takes while it is added is a few columns of its own beside the model so far (the peak of reading a
    file is the top order's)."""

    def __init__(self, V: int, N: int, words: np.ndarray, check: bool = True):
        self.table, self.words, self.check = NgramTable(V, {}, order=N), words, check
        self.logp, self.logbow = [np.zeros(0)], [np.zeros(0)]
        self.suffix = np.zeros(0, np.int32)  # the row of each row's last n - 1 words, of the last order n checked

    def add(self, section: _Section) -> None:
        n, ids, table, words = section.n, section.ids, self.table, self.words
        section.ids = None                                                # (let go below, once read)
        if n == 1:
            self.logp.append(_scatter(ids[:, 0], section.logp))
            self.logbow.append(_scatter(ids[:, 0], section.logbow))
            if self.check:
                _refuse_sum(np.array([np.exp(self.logp[1]).sum()]), lambda bad: "of its unigrams")
            return
        if n == table.order:
            section.logbow = None                                         # (order N: no weights)
        prefix, keys = _prefixes(ids, *self._walked(n - 1))              # (m,) row of each first n - 1 words, key
        if (prefix < 0).any():
            entry = int(np.flatnonzero(prefix < 0)[0])
            raise ValueError(f"its \\{n}-grams: section lists {' '.join(words[ids[entry]])!r}, whose first {n - 1} "
                             f"words are no {n - 1}-gram of the file")
        if self.check:
            lower, below = self._lower(n, ids, prefix)                    # (m,) ln P(w | h'), row of h' w
        del ids
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        repeated = np.flatnonzero(keys[1:] == keys[:-1])
        if len(repeated):
            twice = _gram(table, n, int(keys[repeated[0]]))
            raise ValueError(f"its \\{n}-grams: section lists {' '.join(words[twice])!r} twice")
        if self.check:
            self._check(n, prefix, section.logp, lower)
            self.suffix = below[order] if n < table.order else None      # (order n + 1's h' rows: `_lowers`)
            del lower, below
        size = table.size(n - 1)
        starts = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(prefix, minlength=size), out=starts[1:])
        del prefix
        table._child_starts[n - 1] = starts
        table.grams.append(None)
        table.keys.append(keys)
        self.logp.append(section.logp[order])
        section.logp = None
        self.logbow.append(section.logbow[order] if n < table.order else np.zeros(0))
        section.logbow = None

    def _walked(self, top: int) -> tuple:
        """The table's sorted keys of orders 1 .. top and child starts of orders 1 .. top - 1 (and a placeholder),
        its vocabulary's size, key bits and highest packed order: what `_prefixes` walks."""
        table = self.table
        keys = tuple(np.ascontiguousarray(table.keys[k], dtype=np.int64) for k in range(1, top + 1))
        children = tuple(table._child_starts[k] for k in range(1, top)) + (np.zeros(0, np.int64),)
        packed = max(k for k in range(1, table.order + 1) if k == 1 or table.packed[k])
        return keys, children, table.vocab_size, table.bits, packed

    def _lower(self, n: int, ids: np.ndarray, prefix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ln P(w | h'), the row of h' w at order n - 1, -1 where absent) of each entry h w (`prefix`: the row of
        h), h' being h without its first word: the file's P(w | h') where it lists h' w (`_lowers`, from the rows of
        order n - 1's own h', `suffix`; every word is a unigram), else the whole back-off rule's."""
        if n == 2:
            below = np.ascontiguousarray(ids[:, 1])
            return self.logp[1][below], below
        table = self.table
        lower, below = _lowers(prefix, ids[:, -1], self.suffix, table.keys[n - 2], table.keys[n - 1],
                               table._child_starts[n - 2], table.vocab_size, table.bits, table.packed[n - 1],
                               self.logp[n - 1])
        rest = np.flatnonzero(below < 0)
        if len(rest):
            lower[rest] = _conditional(self.table, self.logp, self.logbow, ids[rest, 1:-1], ids[rest, -1])
        return lower, below

    def _check(self, n: int, context: np.ndarray, logp: np.ndarray, lower: np.ndarray) -> None:
        """Refuse a file whose distributions after the contexts of order n - 1 are not distributions: P(. | h)
        over the file's words must sum to 1 within SUM_TOLERANCE for every h, computed for all of them at once:
        the n-grams listed after h (`context`: the row of h of each entry, `logp` its ln P(w | h)), plus bow(h)
        times the mass that the lower order gives the words not listed after h (`lower`: ln P(w | h') of the
        listed ones) (probabilities above their rounding, back-off weights inflated)."""
        table = self.table
        total = _sums(context, logp, lower, self.logbow[n - 1])
        _refuse_sum(total, lambda bad: f"after {' '.join(self.words[table.gram_rows(n - 1)[bad]])!r}")

    def model(self) -> ArpaModel:
        model = ArpaModel(self.table.order)
        model.set_parameters(self.table, self.logp, self.logbow)
        return model


@numba.njit(cache=True, inline="always")
def _step(row, key, w, j, keys, children, vocab_size, bits, packed, search):
    """(row, key) at order j of the n-gram whose first j - 1 words are row `row` (-1: absent) of key `key` at order
    j - 1 and whose last word is w, in a table of sorted keys per order (`keys`, from order 1) and child starts
    (`children`, from order 1; NgramTable.child_starts): its key as NgramTable makes it (the ids packed up to order
    `packed`, else the row of its first words times V plus the last; -1 where that row is absent) and, where
    `search`, its row, by a binary search among the children of `row` (as BackoffModel.walk); else `row`."""
    key = (key << bits) | w if j <= packed else (row * vocab_size + w if row >= 0 else -1)
    if search and row >= 0:
        row = _find(keys[j - 1], key, children[j - 2][row], children[j - 2][row + 1])
    return row, key


@numba.njit(cache=True, inline="always")
def _context(ids, e, row, key, keys, children, vocab_size, bits, packed):
    """(row, key) of the words ids[e, :-1] at their order (`_step`, walked down from the first), or `row`, `key` as
    they are where they are the entry before's: a file's entries are sorted, so that those words are walked once
    for all the entries after one context."""
    n = ids.shape[1]
    if e > 0:
        same = True
        for j in range(n - 1):
            if ids[e, j] != ids[e - 1, j]:
                same = False
                break
        if same:
            return row, key
    row = key = np.int64(ids[e, 0])
    for j in range(2, n):
        row, key = _step(row, key, np.int64(ids[e, j - 1]), j, keys, children, vocab_size, bits, packed, True)
    return row, key


@numba.njit(cache=True)
def _prefixes(ids, keys, children, vocab_size, bits, packed):
    """(the row at order n - 1 of each entry's first n - 1 words, -1 where absent; the entry's key at order n) of
    the entries ids (m, n) (`keys` of orders 1 .. n - 1); rows as int32 (ROWS_MAX)."""
    m, n = ids.shape
    rows, out = np.empty(m, np.int32), np.empty(m, np.int64)
    row = key = np.int64(-1)
    for e in range(m):
        row, key = _context(ids, e, row, key, keys, children, vocab_size, bits, packed)
        rows[e] = row
        out[e] = _step(row, key, np.int64(ids[e, n - 1]), n, keys, children, vocab_size, bits, packed, False)[1]
    return rows, out


@numba.njit(cache=True)
def _lowers(prefix, words, suffix, context_keys, keys, children, vocab_size, bits, packed, logp):
    """(logp[row], NaN where absent; row) of the row at order n - 1 of h' w for each entry h w of order n > 2, h'
    being h without its first word: the row of h at order n - 1 (`prefix`) gives that of h' at order n - 2
    (`suffix`, per row of order n - 1; -1 where absent), among whose children (`children`: order n - 2's child
    starts) h' w is one binary search of its key (order n - 1's `keys`; from the key of h', `context_keys`, where
    order n - 1 packs, `packed`)."""
    m = prefix.shape[0]
    out, rows = np.empty(m), np.empty(m, np.int32)
    for e in range(m):
        shorter = np.int64(suffix[prefix[e]])
        row = -1
        if shorter >= 0:
            w = np.int64(words[e])
            key = (context_keys[shorter] << bits) | w if packed else shorter * vocab_size + w
            row = _find(keys, key, children[shorter], children[shorter + 1])
        rows[e] = row
        out[e] = logp[row] if row >= 0 else np.nan
    return out, rows


@numba.njit(cache=True)
def _sums(context, logp, lower, logbow):
    """P(. | h) summed over the words for each context h of a section (`_Build._check`): bow(h) plus, for each
    entry after h (`context`: each entry's row of h), its P(w | h) (exp logp) less bow(h) times its P(w | h')
    (exp lower), that is the entries' P(w | h) plus bow(h) times the mass the lower order gives the others; one
    column of the contexts' size, where numpy's expression would make one per operation."""
    total = np.exp(logbow)
    for e in range(context.shape[0]):
        h = context[e]
        total[h] += np.exp(logp[e]) - np.exp(logbow[h] + lower[e])
    return total


SUM_TOLERANCE = 1e-3  # |sum - 1| of a context's distribution beyond this: not a model (8 printed decimals: 1e-7)


def _refuse_sum(total: np.ndarray, context) -> None:
    bad = np.flatnonzero(~((total >= 1 - SUM_TOLERANCE) & (total <= 1 + SUM_TOLERANCE)))  # (nan too)
    if len(bad):
        raise ValueError(f"the distribution {context(int(bad[0]))} sums to {total[bad[0]]:.6g}, not 1 (within "
                         f"{SUM_TOLERANCE:g}): its probabilities or back-off weights are not a model's")


def _conditional(table: NgramTable, logp: list, logbow: list, contexts: np.ndarray, words: np.ndarray) -> np.ndarray:
    """ln P(words[i] | contexts[i]) by the back-off rule, for (m, k) contexts and (m,) words at once."""
    k = contexts.shape[1]
    result, best = logp[1][words].copy(), np.ones(len(words), dtype=np.int64)
    for n in range(2, k + 2):
        rows = table.index(n, np.column_stack([contexts[:, k - (n - 1):], words]))
        hit = rows >= 0
        result[hit], best[hit] = logp[n][rows[hit]], n
    for m in range(1, k + 1):
        rows = table.index(m, contexts[:, k - m:])
        use = (rows >= 0) & (best <= m)
        result[use] += logbow[m][rows[use]]
    return result


def _over(vocab: Vocabulary, path: Path, to_vocab: np.ndarray, sections: list[_Section]) -> ArpaModel:
    """The file's model (over its own words) as a model over `vocab` (baselines.arpa's docstring: words outside V
    dropped, V's unlisted words <unk>'s unigram)."""
    V = len(vocab)
    dropped = 0
    for section in sections:
        ids = to_vocab[section.ids]                                   # (m, n)
        keep = (ids >= 0).all(axis=1)
        dropped += int((~keep).sum())
        section.ids, section.logp, section.logbow = ids[keep], section.logp[keep], section.logbow[keep]
    if dropped:
        log.info("%s: dropped %d n-grams holding words outside the vocabulary", path, dropped)
    unigrams = sections[0]
    unlisted = np.ones(V, dtype=bool)
    unlisted[unigrams.ids[:, 0]] = False
    if unlisted[vocab.unk_id]:
        others = int(unlisted.sum()) - 1  # (the vocabulary's words it lacks besides <unk>)
        lacks = f" and {others:,} other word{'' if others == 1 else 's'} of the vocabulary" if others else ""
        raise LMBenchError(f"{path} lacks {UNK}{lacks}: build the ARPA file over this vocabulary with <unk> included")
    unk = unigrams.logp[np.flatnonzero(unigrams.ids[:, 0] == vocab.unk_id)[0]]
    extra = np.flatnonzero(unlisted)                                  # KenLM: unlisted words are <unk>
    unigrams.ids = np.concatenate([unigrams.ids, extra[:, None]]).astype(np.int64)
    unigrams.logp = np.concatenate([unigrams.logp, np.full(len(extra), unk)])
    unigrams.logbow = np.concatenate([unigrams.logbow, np.zeros(len(extra))])
    build = _Build(V, len(sections), np.array(vocab.words, dtype=object), check=False)
    for section in sections:
        build.add(section)
    return build.model()


def _gram(table: NgramTable, n: int, key: int) -> list[int]:
    """The ids of the n-gram whose key at order n is `key` (NgramTable's keys; its orders below n in the table)."""
    if table.packed[n]:
        return [(key >> (table.bits * (n - 1 - j))) & ((1 << table.bits) - 1) for j in range(n)]
    return _gram(table, n - 1, int(table.keys[n - 1][key // table.vocab_size])) + [key % table.vocab_size]


def _scatter(row: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.empty(len(row))
    out[row] = values
    return out

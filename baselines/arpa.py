"""ARPA back-off files: write a BackoffModel, read one back as a LanguageModel over a Vocabulary.

Public API
----------
`write_arpa(model, vocab, path)`: any BackoffModel (the fitted model of every method registered `arpa`,
    baselines.methods) to a standard ARPA file; returns the n-gram counts per order written in the header.
`read_arpa(path, vocab)` -> `ArpaModel`: the file as a BackoffModel over `vocab`, scored like any
    model (`lmbench.model.split_logprobs(model, corpus, split)`); it scores exactly as the model that wrote it (up to the printed digits).
`read_arpa_header(path)`: {order: count} of the `\\data\\` section.
`read_arpa_words(path)`: the words of its unigrams, the vocabulary it holds (`reports.api.load` reads
    a file over them).

Format (SRILM / KenLM conventions):

    \\data\\
    ngram 1=17907
    ngram 2=...
                                         (blank line)
    \\1-grams:
    log10 P(w) <TAB> w <TAB> log10 bow(w)
    ...
    \\N-grams:
    log10 P(w_N | w_1 .. w_N-1) <TAB> w_1 ... w_N
    \\end\\

Words are the vocabulary strings; every word of V, <unk> included, is a unigram. Our streams have
no sentence markers, but KenLM refuses a file without <s>: <s> and </s> (unless V holds them) are
listed as unigrams of probability 0 (-99), no n-gram holds them, and reading drops them. Back-off weights
are written for every n-gram of order < N (0 where the n-gram is no context). A zero probability or
weight is written as -99, ARPA's log10(0). Values carry 8 decimals (a relative error of at most
1.2e-8 per probability, far inside the 1e-4 perplexity tolerance of a round trip).

Reading: words of V missing from the file take <unk>'s unigram probability (KenLM's rule); n-grams
holding a word outside V (e.g. lmplz's <s> and </s>) are dropped, with a log line. A damaged file
(not UTF-8, a section shorter than its header announces, a malformed number, a number that is not
finite as read or as converted to a natural log (|log10| above LOG10_RANGE, about 7.8e307), a log10
probability above 0, no closing `\\end\\`, an order of ROWS_MAX n-grams or more) is refused in one line naming the file
(lmbench.files.DamagedFile), and so is one that is no model, read over its own words before V's: an
n-gram listed twice at any order, an n-gram of a word that is none of its unigrams, or a context whose
distribution does not sum to 1 (within SUM_TOLERANCE; every context of every order, in one compiled pass an order).
A section begins at a line of its own: a word such as
`\\2-grams:` (a token of a corpus) inside an entry is written and read as the word it is. Writing is atomic.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from pathlib import Path
from typing import Iterable

import numba
import numpy as np

from baselines.backoff import BackoffModel, _find
from baselines.counts import NgramTable
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write, read_checked

log = logging.getLogger(__name__)

LN10 = np.log(10.0)
LOG10_ZERO = -99.0
LOG10_ABOVE_ONE = 1e-6  # a log10 probability above this is no rounding of log10 1: P > 1
LOG10_RANGE = float(np.finfo(np.float64).max / LN10)  # |log10| beyond this: its natural log overflows a float
SENTENCE_MARKERS = ("<s>", "</s>")  # listed with log10 P = -99 for tools that require them (KenLM)
ARPA_FIX = "write it again (`lmbench ngram --arpa`, KenLM's lmplz or SRILM's ngram-count)"


def _log10(values: np.ndarray, scale: float = 1.0) -> list[float]:
    """Logs of base e^scale (natural logs; a binary file's log10, scale LN10) as log10 floats, -99 for log 0."""
    values = np.asarray(values, dtype=np.float64) * (scale / LN10)
    return np.where(np.isfinite(values), values, LOG10_ZERO).tolist()


def write_arpa(model: BackoffModel, vocab: Vocabulary, path: str | Path) -> dict[int, int]:
    """Write `model` (a fitted BackoffModel over `vocab`) as an ARPA file; returns {order: entries}.

    The words of an order-n row are its context's text (order n-1, already built) plus one word,
    so each order costs one string concatenation per row; lines are %-formatted."""
    if not isinstance(model, BackoffModel) or model.table is None:
        from baselines.methods import listed, methods_where
        raise LMBenchError(f"{type(model).__name__} is not a fitted back-off model: ARPA export needs "
                           f"{listed(methods_where(lambda m: m.arpa))}, fitted first")
    if len(vocab) != model.vocab_size:
        raise LMBenchError(f"the vocabulary has {len(vocab)} words but the model {model.vocab_size}: "
                           "pass the vocabulary of the corpus the model was fitted on")
    table, N = model.table, model.order
    markers = [m for m in SENTENCE_MARKERS if m not in vocab]
    sizes = {n: table.size(n) + (len(markers) if n == 1 else 0) for n in range(1, N + 1)}
    atomic_write(Path(path), lambda tmp: _write_sections(tmp, model, vocab, sizes, markers))
    return sizes


def _write_sections(path: Path, model: BackoffModel, vocab: Vocabulary, sizes: dict[int, int],
                    markers: list[str]) -> None:
    table, N = model.table, model.order
    words = np.array(vocab.words, dtype=object)                    # (V,)
    text = words                                                   # (m_n,) words of each row
    with open(path, "w", encoding="utf-8") as out:
        out.write("\\data\\\n" + "".join(f"ngram {n}={sizes[n]}\n" for n in sizes) + "\n")
        for n in range(1, N + 1):
            out.write(f"\\{n}-grams:\n")
            if n == 1:
                bow = "\t0.00000000" if N > 1 else ""
                out.write("".join(f"{LOG10_ZERO:.8f}\t{m}{bow}\n" for m in markers))
            else:
                grams = table.gram_rows(n)                          # (m, n)
                prefix = table.index(n - 1, grams[:, :-1])          # (m,) row of the context
                text = text[prefix] + (" " + words[grams[:, -1]])
            if n < N:
                rows = zip(_log10(model.logp[n], model.scale), text.tolist(), _log10(model.logbow[n], model.scale))
                out.write("".join(["%.8f\t%s\t%.8f\n" % row for row in rows]))
            else:
                rows = zip(_log10(model.logp[n], model.scale), text.tolist())
                out.write("".join(["%.8f\t%s\n" % row for row in rows]))
            out.write("\n")
        out.write("\\end\\\n")


def _header_counts(lines: Iterable[str]) -> dict[int, int]:
    """{order: count} from the lines of the \\data\\ section (read up to the \\1-grams: line)."""
    counts = {}
    for line in lines:
        line = line.strip()
        match = re.fullmatch(r"ngram\s+(\d+)\s*=\s*(\d+)", line)
        if match:
            counts[int(match.group(1))] = int(match.group(2))
        elif line.startswith("\\1-grams:"):
            break
    if not counts:
        raise ValueError("it has no \\data\\ section with 'ngram N=count' lines (is it an ARPA file?)")
    if sorted(counts) != list(range(1, max(counts) + 1)):
        raise ValueError(f"its \\data\\ section lists the orders {sorted(counts)}, not 1 to {max(counts)}")
    return counts


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


# ---- parsing: one compiled pass over the file's bytes per section ------------------------------------------
#
# A line is split at ASCII whitespace (space, tab, CR, VT, FF); a line of whitespace alone is blank (skipped).
# A number is read by the fast path of decimal conversion where it is exact (at most 19 significant digits
# whose value is below 2^53, a power of ten up to 22: one correctly rounded product or quotient, what
# strtod gives); any other (more digits, an exponent beyond, inf, nan) is read by Python's float, so every
# value is the correctly rounded one, as a text reader gives it. A word of an n-gram is looked up among the
# unigrams' bytes (a hash table, FNV-1a), so only the unigrams are decoded.

POW10 = np.array([10.0 ** k for k in range(23)])
FNV_OFFSET, FNV_PRIME = np.uint64(14695981039346656037), np.uint64(1099511628211)
FIELDS, UNKNOWN_WORD, MORE = 1, 2, 3  # _scan's refusals
ROWS_MAX = 1 << 31  # n-grams of one order: the reader's rows (an entry's context, its suffix) are int32
BLOCK = 1 << 21  # bytes read at once (whole lines: a longer line doubles it), held while the file is read


@numba.njit(cache=True, inline="always")
def _space(c) -> bool:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True)
def _backslash_lines(data, length, previous):
    """The start of every line of data[:length] that begins with a backslash (a section's line: an entry starts with
    its number), `previous` the byte before the block (a newline at the file's start)."""
    starts = []
    if length and data[0] == 92 and previous == 10:
        starts.append(0)
    for i in range(length - 1):
        if data[i] == 10 and data[i + 1] == 92:
            starts.append(i + 1)
    return np.array(starts, dtype=np.int64)


@numba.njit(cache=True)
def _last_line_end(data, length) -> int:
    """The position after the last newline of data[:length] (0: none)."""
    for i in range(length - 1, -1, -1):
        if data[i] == 10:
            return i + 1
    return 0


@numba.njit(cache=True)
def _entries(data, start, end) -> int:
    """The lines of data[start:end] that hold something besides whitespace."""
    count, blank = 0, True
    for i in range(start, end):
        c = data[i]
        if c == 10:
            count += 0 if blank else 1
            blank = True
        elif not _space(c):
            blank = False
    return count + (0 if blank else 1)


@numba.njit(cache=True, inline="always")
def _number(data, i, j):
    """(the decimal data[i:j] as a float, True) where the fast path reads it exactly, else (0.0, False)."""
    k, negative = i, False
    if k < j and (data[k] == 45 or data[k] == 43):
        negative = data[k] == 45
        k += 1
    mantissa, significant, exponent, digits = np.int64(0), 0, 0, 0
    fraction = False
    while k < j:
        c = data[k]
        if 48 <= c <= 57:
            digits += 1
            if mantissa or c != 48:
                significant += 1
                if significant > 18:
                    return 0.0, False
                mantissa = mantissa * 10 + (c - 48)
            if fraction:
                exponent -= 1
        elif c == 46 and not fraction:
            fraction = True
        else:
            break
        k += 1
    if digits == 0:
        return 0.0, False
    if k < j and (data[k] == 101 or data[k] == 69):
        k += 1
        sign, value, seen = 1, 0, 0
        if k < j and (data[k] == 45 or data[k] == 43):
            sign = -1 if data[k] == 45 else 1
            k += 1
        while k < j and 48 <= data[k] <= 57 and value < 100000:
            value = value * 10 + (data[k] - 48)
            seen += 1
            k += 1
        if not seen:
            return 0.0, False
        exponent += sign * value
    if k != j or mantissa > (1 << 53):
        return 0.0, False
    if exponent == 0:
        value = np.float64(mantissa)
    elif 0 < exponent <= 22:
        value = np.float64(mantissa) * POW10[exponent]
    elif -22 <= exponent < 0:
        value = np.float64(mantissa) / POW10[-exponent]
    else:
        return 0.0, False
    return (-value if negative else value), True


@numba.njit(cache=True, inline="always")
def _hash(data, i, j):
    h = FNV_OFFSET
    for k in range(i, j):
        h = (h ^ np.uint64(data[k])) * FNV_PRIME
    return h


@numba.njit(cache=True, inline="always")
def _same(data, i, j, words, k, l) -> bool:
    """Whether data[i:j] and words[k:l] are the same bytes."""
    if j - i != l - k:
        return False
    for x in range(j - i):
        if data[i + x] != words[k + x]:
            return False
    return True


@numba.njit(cache=True)
def _word_table(data, starts, ends):
    """(open-addressing table of the unigrams' rows by their bytes, the first row repeated or -1, its twin)."""
    size = 1
    while size < 2 * starts.shape[0] + 2:
        size *= 2
    table = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for row in range(starts.shape[0]):
        slot = _hash(data, starts[row], ends[row]) & mask
        while table[slot] >= 0:
            other = table[slot]
            if _same(data, starts[row], ends[row], data, starts[other], ends[other]):
                return table, row, other
            slot = (slot + np.uint64(1)) & mask
        table[slot] = row
    return table, -1, -1


@numba.njit(cache=True, inline="always")
def _word(data, i, j, table, words, starts, ends) -> int:
    """The unigram row of the word data[i:j] (the unigrams' words are words[starts[row]:ends[row]]), -1: none."""
    mask = np.uint64(table.shape[0] - 1)
    slot = _hash(data, i, j) & mask
    while table[slot] >= 0:
        row = table[slot]
        if _same(data, i, j, words, starts[row], ends[row]):
            return row
        slot = (slot + np.uint64(1)) & mask
    return -1


@numba.njit(cache=True)
def _scan(data, length, n, table, words, starts, ends, relabel, ids, logp, logbow, slow, entry):
    """The entries of an order-n section in data[:length] (whole lines), from entry number `entry` on, into ids
    (m, n) (the ids `relabel` gives the unigrams' rows; order 1: each word's span, into starts / ends), log10 p,
    log10 bow (0 where absent) and slow (bit 1: a probability, bit 2: a weight the fast path did not read);
    returns (refusal, the entry after the last, its detail)."""
    m, i = logp.shape[0], 0
    while i < length:
        fields, k = 0, i
        while True:
            while k < length and _space(data[k]):
                k += 1
            if k >= length or data[k] == 10:
                break
            f = k
            while k < length and data[k] != 10 and not _space(data[k]):
                k += 1
            fields += 1
            if entry >= m:
                return MORE, entry, 0
            if fields > n + 2:
                return FIELDS, entry, fields
            if fields == 1:
                value, fast = _number(data, f, k)
                logp[entry] = value
                slow[entry] = 0 if fast else 1
                logbow[entry] = 0.0
            elif fields <= n + 1 and n == 1:
                starts[entry], ends[entry] = f, k
            elif fields <= n + 1:
                row = _word(data, f, k, table, words, starts, ends)
                if row < 0:
                    return UNKNOWN_WORD, entry, fields - 1
                ids[entry, fields - 2] = relabel[row]
            else:
                value, fast = _number(data, f, k)
                logbow[entry] = value
                slow[entry] |= 0 if fast else 2
        if 0 < fields < n + 1:
            return FIELDS, entry, fields
        if fields:
            entry += 1
        i = k + 1
    return 0, entry, 0


@numba.njit(cache=True)
def _joined(data, starts, ends):
    """The words of the spans, each followed by a newline (decoded at once)."""
    out = np.empty(int(np.sum(ends - starts)) + starts.shape[0], np.uint8)
    at = 0
    for row in range(starts.shape[0]):
        for k in range(starts[row], ends[row]):
            out[at] = data[k]
            at += 1
        out[at] = 10
        at += 1
    return out


def _lines(data: np.ndarray, length: int, entries: list[int]) -> list[str]:
    """The text of some entries of a block of whole lines (numbered from its first, 0)."""
    lines = [line for line in bytes(data[:length]).split(b"\n") if line.strip()]
    return [lines[e].decode("utf-8", "replace") for e in entries]


class _Section:
    """The parsed entries of the \\n-grams: section: ids (m, n) (order 1: the file's own word of each entry),
    natural-log probabilities and back-off weights (`_Reader.section`)."""

    def __init__(self, n: int, ids: np.ndarray, logp: np.ndarray, logbow: np.ndarray):
        self.n, self.ids, self.logp, self.logbow = n, ids, logp, logbow


class _Reader:
    """An ARPA file read a block at a time (BLOCK bytes: the whole file is never in memory): its header, where
    each section lies, and `section(n)`, each parsed (order 1 first: its words, kept, are what the others' are
    looked up among; `relabel`, set after it, gives the ids the other sections' words are written as). A file that
    is none is a ValueError."""

    def __init__(self, path: Path):
        self.file = open(path, "rb")
        self.size = path.stat().st_size
        self.buffer = np.empty(BLOCK, dtype=np.uint8)
        marks, previous = [], 10
        for offset, length in self.blocks(0, self.size, whole_lines=False):
            marks += (offset + _backslash_lines(self.buffer, length, previous)).tolist()
            previous = int(self.buffer[length - 1])
        self.found = {}  # order: (start, end) of its section's entries
        for at, mark in enumerate(marks):
            line = self.read(mark, 64).split(b"\n", 1)[0]
            match = re.fullmatch(rb"\\(\d+)-grams:", line.rstrip(b" \t\r"))
            if match and int(match[1]) not in self.found:
                end = marks[at + 1] if at + 1 < len(marks) else self.size
                self.found[int(match[1])] = (min(mark + len(line) + 1, end), end)
        header_end = self.found[1][0] if 1 in self.found else min(self.size, 1 << 20)
        self.header = _header_counts(io.StringIO(self.read(0, header_end).decode("utf-8")))
        if not self.read(max(self.size - 64, 0), 64).rstrip().endswith(b"\\end\\"):
            raise ValueError("it does not end with \\end\\ (cut short?)")
        self.order = max(self.header)
        if max(self.header.values()) >= ROWS_MAX:
            raise ValueError(f"its \\data\\ section announces {max(self.header.values()):,} n-grams of one order, where "
                             f"the reader numbers at most {ROWS_MAX - 1:,} (its rows are int32)")
        self.table = self.starts = self.ends = np.zeros(0, np.int64)  # the unigrams' words (`section(1)`)
        self.words_data = np.zeros(0, np.uint8)
        self.words = np.zeros(0, dtype=object)
        self.relabel = np.zeros(0, np.int32)  # the sections' id of each unigram's row (`section(1)`: the row)

    def close(self) -> None:
        self.file.close()

    def read(self, offset: int, length: int) -> bytes:
        self.file.seek(offset)
        return self.file.read(length)

    def blocks(self, start: int, end: int, whole_lines: bool = True):
        """(offset, length) of each block of file[start:end] read into self.buffer, cut after its last newline
        (`whole_lines`; the buffer grows for a line longer than it)."""
        offset = start
        while offset < end:
            self.file.seek(offset)
            length = self.file.readinto(memoryview(self.buffer)[:min(len(self.buffer), end - offset)])
            if length == 0:
                raise ValueError("it is shorter than its sections (cut short?)")
            if whole_lines and offset + length < end:
                cut = _last_line_end(self.buffer, length)
                if cut == 0:  # a line longer than the buffer: read it again into one twice as long
                    self.buffer = np.empty(2 * len(self.buffer), dtype=np.uint8)
                    continue
                length = cut
            yield offset, length
            offset += length

    def entry_lines(self, n: int, entries: list[int]) -> list[str]:
        """The text of some entries of the \\n-grams: section (what a refusal quotes), read again."""
        wanted, found, first = sorted(set(entries)), {}, 0
        for offset, length in self.blocks(*self.found[n]):
            count = _entries(self.buffer, 0, length)
            inside = [e for e in wanted if first <= e < first + count]
            found.update(zip(inside, _lines(self.buffer, length, [e - first for e in inside])))
            first += count
        return [found[e] for e in entries]

    def section(self, n: int) -> _Section:
        if n not in self.found:
            raise ValueError(f"it lacks its \\{n}-grams: section (cut short?)")
        (start, end), m = self.found[n], self.header[n]
        ids, logp, logbow, slow = (np.empty((m, n), np.int32), np.empty(m), np.empty(m), np.empty(m, np.int8))
        if n == 1:  # the unigrams' bytes, kept: every other section's words are looked up among them
            self.words_data = np.frombuffer(self.read(start, end - start), dtype=np.uint8)
            self.starts, self.ends = np.zeros(m, np.int64), np.zeros(m, np.int64)
            parts = [(self.words_data, 0, len(self.words_data))]
        else:
            parts = ((self.buffer, offset, length) for offset, length in self.blocks(start, end))
        entry = refusal = detail = 0
        for data, offset, length in parts:
            first = entry
            refusal, entry, detail = _scan(data, length, n, self.table, self.words_data, self.starts, self.ends,
                                           self.relabel, ids, logp, logbow, slow, entry)
            if refusal:
                break
            slowly = np.flatnonzero(slow[first:entry]).tolist()
            for e, line in zip(slowly, _lines(data, length, slowly) if slowly else ()):
                fields = line.split()
                for bit, column, values in ((1, 0, logp), (2, n + 1, logbow)):
                    if slow[first + e] & bit:
                        try:
                            values[first + e] = float(fields[column])
                        except ValueError:
                            raise ValueError(f"entry {first + e + 1} of its \\{n}-grams: section holds a malformed "
                                             f"number {fields[column]!r}") from None
        if refusal == MORE or (not refusal and entry != m):
            held = sum(_entries(self.buffer, 0, length) for _, length in self.blocks(start, end))
            raise ValueError(f"the header announces {m} {n}-grams but the section holds {held} (cut short?)")
        if refusal == FIELDS:
            raise ValueError(f"entry {entry + 1} of its \\{n}-grams: section has {detail}{'+' if detail > n + 2 else ''} "
                             f"fields, where an entry has {n + 1} or {n + 2}: its log10 probability, {n} "
                             f"word{'s' if n > 1 else ''} and its log10 back-off weight (or none)")
        if refusal == UNKNOWN_WORD:
            raise ValueError(f"entry {entry + 1} of its \\{n}-grams: section holds a word that is none of its unigrams")
        if n == 1:
            self.table, twin, _ = _word_table(self.words_data, self.starts, self.ends)
            if twin >= 0:
                word = bytes(self.words_data[self.starts[twin]:self.ends[twin]]).decode("utf-8", "replace")
                raise ValueError(f"its \\1-grams: section lists {word!r} twice")
            self.words = np.array(bytes(_joined(self.words_data, self.starts, self.ends)).decode("utf-8").split("\n")[:-1],
                                  dtype=object)
            ids = np.arange(m, dtype=np.int32)[:, None]
            self.relabel = ids[:, 0]
        return _Section(n, ids, *(_natural(values, n, what, self) for values, what in ((logp, "probability"),
                                                                                         (logbow, "back-off weight"))))


def _natural(log10s: np.ndarray, n: int, what: str, reader: _Reader) -> np.ndarray:
    """A column of log10 values as natural logs; a value whose natural log is not finite (nan, -inf: ARPA's zero
    is -99; a log10 beyond LOG10_RANGE, whose conversion overflows), or a probability's above 0 (P > 1), is
    refused naming its entry of the section."""
    above = (log10s > LOG10_ABOVE_ONE) if what == "probability" else False
    with np.errstate(over="ignore", invalid="ignore"):  # (an overflow is refused below, on the value as converted)
        logs = np.multiply(log10s, LN10, out=log10s)    # (in place: the column is the section's own)
    bad = np.flatnonzero(~np.isfinite(logs) | above)
    if len(bad):
        column = 0 if what == "probability" else n + 1
        value = reader.entry_lines(n, [int(bad[0])])[0].split()[column]
        raise ValueError(f"entry {int(bad[0]) + 1} of its \\{n}-grams: section has log10 {what} {value}, where "
                         f"every one is finite, between -{LOG10_RANGE:.3g} and {LOG10_RANGE:.3g} (a float once "
                         f"converted to a natural log){' and <= 0 (a probability <= 1; -99 for 0)' if what == 'probability' else ''}")
    return logs


def read_arpa_words(path: str | Path) -> list[str]:
    """The words of the file's \\1-grams: section, in the file's order: the vocabulary an ARPA file holds."""
    def read(path: Path) -> list[str]:
        with contextlib.closing(_Reader(path)) as reader:
            reader.section(1)
            return reader.words.tolist()

    return read_checked(Path(path), read, what="ARPA file", fix=ARPA_FIX)


def _parse(path: Path, vocab: Vocabulary | None) -> tuple[ArpaModel, Vocabulary]:
    """The file's model over `vocab` (None: over its own words, `<unk>` first), checked as the module docstring
    says. Where `vocab` holds the file's words and no other (a file read over its own words), each section is
    parsed, relabelled, sorted into the table and checked before the next is read."""
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
    """The file's model (over its own words) as a model over `vocab` (module docstring: words outside V dropped,
    V's unlisted words <unk>'s unigram)."""
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

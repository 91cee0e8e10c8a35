"""Parsing an ARPA file's bytes, for the reader (baselines.arpa_reader): its header, where each section lies, and
each section's entries as word ids, natural-log probabilities and back-off weights (`_Reader.section`), read a
block at a time by compiled (numba) scanning, so that the whole file is never in memory and only the unigrams'
words are decoded. A file that is no ARPA file, or a damaged one (baselines.arpa: what is refused), is a
ValueError naming what is wrong."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Iterable

import numba
import numpy as np

from baselines.arpa import LN10

LOG10_ABOVE_ONE = 1e-6  # a log10 probability above this is no rounding of log10 1: P > 1
LOG10_RANGE = float(np.finfo(np.float64).max / LN10)  # |log10| beyond this: its natural log overflows a float


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

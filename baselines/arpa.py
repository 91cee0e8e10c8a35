"""ARPA back-off files: write a BackoffModel, read one back as a LanguageModel over a Vocabulary.

Public API
----------
`write_arpa(model, vocab, path)`: any BackoffModel (Katz, KN back-off, interpolated KN in back-off
    form) to a standard ARPA file; returns the n-gram counts per order written in the header.
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
finite, a log10 probability above 0, no closing `\\end\\`) is refused in one line naming the file
(lmbench.files.DamagedFile). Writing is atomic.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from baselines.backoff import BackoffModel
from baselines.counts import NgramTable
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write, read_checked

log = logging.getLogger(__name__)

LN10 = np.log(10.0)
LOG10_ZERO = -99.0
LOG10_ABOVE_ONE = 1e-6  # a log10 probability above this is no rounding of log10 1: P > 1
SENTENCE_MARKERS = ("<s>", "</s>")  # listed with log10 P = -99 for tools that require them (KenLM)
ARPA_FIX = "write it again (`lmbench ngram --arpa`, KenLM's lmplz or SRILM's ngram-count)"


def _log10(values: np.ndarray) -> list[float]:
    """Natural logs as log10 floats, -99 for log 0."""
    return np.where(np.isfinite(values), values / LN10, LOG10_ZERO).tolist()


def write_arpa(model: BackoffModel, vocab: Vocabulary, path: str | Path) -> dict[int, int]:
    """Write `model` (a fitted BackoffModel over `vocab`) as an ARPA file; returns {order: entries}.

    The words of an order-n row are its context's text (order n-1, already built) plus one word,
    so each order costs one string concatenation per row; lines are %-formatted."""
    if not isinstance(model, BackoffModel) or model.table is None:
        raise LMBenchError(f"{type(model).__name__} is not a fitted back-off model: ARPA export needs "
                           "katz, kneser-ney or kneser-ney-backoff, fitted first")
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
                grams = table.grams[n]                              # (m, n)
                prefix = table.index(n - 1, grams[:, :-1])          # (m,) row of the context
                text = text[prefix] + (" " + words[grams[:, -1]])
            if n < N:
                rows = zip(_log10(model.logp[n]), text.tolist(), _log10(model.logbow[n]))
                out.write("".join(["%.8f\t%s\t%.8f\n" % row for row in rows]))
            else:
                rows = zip(_log10(model.logp[n]), text.tolist())
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


def _section(text: str, n: int, expected: int) -> pd.DataFrame:
    """The rows of the \\n-grams: section as columns 0 (log10 p), 1..n (words), n+1 (log10 bow)."""
    start = text.find(f"\\{n}-grams:")
    if start < 0:
        raise ValueError(f"it lacks its \\{n}-grams: section (cut short?)")
    start = text.index("\n", start) + 1
    end = text.find("\n\\", start)
    body = text[start:end if end >= 0 else len(text)]
    frame = pd.read_csv(io.StringIO(body), sep=r"\s+", header=None, names=list(range(n + 2)),
                        dtype=str, na_filter=False, quoting=3, engine="c")
    if len(frame) != expected:
        raise ValueError(f"the header announces {expected} {n}-grams but the section holds {len(frame)} "
                         "(cut short?)")
    return frame


def _log10_column(frame: pd.DataFrame, column: int, keep: np.ndarray, n: int, what: str) -> np.ndarray:
    """A column of log10 values (empty: 0) as natural logs; a value that is not finite (nan, -inf: ARPA's
    zero is -99), or a probability's above 0 (P > 1), is refused naming its line of the section."""
    values = frame[column].to_numpy()[keep]
    try:
        logs = np.where(values == "", 0.0, values).astype(np.float64)
    except ValueError:
        raise ValueError(f"a line of its \\{n}-grams: section holds a malformed number") from None
    bad = np.flatnonzero(~np.isfinite(logs) | ((logs > LOG10_ABOVE_ONE) if what == "probability" else False))
    if len(bad):
        line = int(np.flatnonzero(keep)[bad[0]]) + 1
        raise ValueError(f"entry {line} of its \\{n}-grams: section has log10 {what} {values[bad[0]]}, where "
                         f"every one is finite{' and <= 0 (a probability <= 1; -99 for 0)' if what == 'probability' else ''}")
    return logs * LN10


def read_arpa(path: str | Path, vocab: Vocabulary) -> ArpaModel:
    """Read an ARPA file as a BackoffModel over `vocab` (ids from the vocabulary's words)."""
    path = Path(path)
    if not path.is_file():
        raise LMBenchError(f"ARPA file {path} does not exist: give the path of a file written by "
                           "`lmbench ngram --arpa`, KenLM or SRILM")
    return read_checked(path, lambda p: _parse(p, vocab), what="ARPA file", fix=ARPA_FIX)


def read_arpa_words(path: str | Path) -> list[str]:
    """The words of the file's \\1-grams: section, in the file's order: the vocabulary an ARPA file holds."""
    def read(path: Path) -> list[str]:
        text = path.read_text(encoding="utf-8")
        return _section(text, 1, _header_counts(io.StringIO(text))[1])[1].tolist()

    return read_checked(Path(path), read, what="ARPA file", fix=ARPA_FIX)


def _parse(path: Path, vocab: Vocabulary) -> ArpaModel:
    text = path.read_text(encoding="utf-8")
    header = _header_counts(io.StringIO(text))
    if not text.rstrip().endswith("\\end\\"):
        raise ValueError("it does not end with \\end\\ (cut short?)")
    N = max(header)
    index = pd.Index(vocab.words)                                  # word -> id by hashing
    V = len(vocab)
    grams, logp, logbow = {}, [np.zeros(0)], [np.zeros(0)]
    dropped = 0
    for n in range(1, N + 1):
        frame = _section(text, n, header[n])
        ids = np.column_stack([index.get_indexer(frame[j].to_numpy()) for j in range(1, n + 1)])  # (m, n)
        keep = (ids >= 0).all(axis=1)                               # n-grams of words in V, -1 others
        dropped += int((~keep).sum())
        p = _log10_column(frame, 0, keep, n, "probability")
        bow = _log10_column(frame, n + 1, keep, n, "back-off weight")
        rows = ids[keep].astype(np.int32)
        if n == 1:
            dense_p, dense_bow = np.full(V, np.nan), np.zeros(V)   # (V,)
            dense_p[rows[:, 0]], dense_bow[rows[:, 0]] = p, bow
            unlisted = np.isnan(dense_p)
            if unlisted.any() and unlisted[vocab.unk_id]:
                raise LMBenchError(f"{path} lacks {UNK} and {int(unlisted.sum())} words of the vocabulary: "
                                   "build the ARPA file over this vocabulary with <unk> included")
            dense_p[unlisted] = dense_p[vocab.unk_id]                # KenLM: unlisted words are <unk>
            logp.append(dense_p)
            logbow.append(dense_bow)
        else:
            grams[n] = rows
            logp.append(p)
            logbow.append(bow)
    if dropped:
        log.info("%s: dropped %d n-grams holding words outside the vocabulary", path, dropped)
    table = NgramTable(V, grams)
    for n in range(2, N + 1):                                         # the table sorts each order:
        row = table.index(n, grams[n])                                # (m,) row of each line read
        logp[n] = _scatter(row, logp[n])
        logbow[n] = _scatter(row, logbow[n])
    model = ArpaModel(N)
    model.set_parameters(table, logp, logbow)
    return model


def _scatter(row: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.empty(len(row))
    out[row] = values
    return out

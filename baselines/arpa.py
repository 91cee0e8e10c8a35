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
finite as read or as converted to a natural log (|log10| above LOG10_RANGE, about 7.8e307), a log10
probability above 0, no closing `\\end\\`) is refused in one line naming the file
(lmbench.files.DamagedFile), and so is one that is no model, read over its own words before V's: an
n-gram listed twice at any order, an n-gram of a word that is none of its unigrams, or a context whose
distribution does not sum to 1 (within SUM_TOLERANCE; every context of every order, vectorized).
A section begins at a line of its own: a word such as
`\\2-grams:` (a token of a corpus) inside an entry is written and read as the word it is. Writing is atomic.
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
LOG10_RANGE = float(np.finfo(np.float64).max / LN10)  # |log10| beyond this: its natural log overflows a float
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
    """The rows of the \\n-grams: section as columns 0 (log10 p), 1..n (words), n+1 (log10 bow). A section
    starts and ends at a line of its own that starts with a backslash (an entry's line starts with its number),
    so a word such as `\\2-grams:` in an entry is a word."""
    header = re.search(rf"^\\{n}-grams:[ \t]*$", text, flags=re.MULTILINE)
    if header is None:
        raise ValueError(f"it lacks its \\{n}-grams: section (cut short?)")
    start = header.end() + 1
    following = re.compile(r"^\\", flags=re.MULTILINE).search(text, start)
    body = text[start:following.start() if following else len(text)]
    frame = pd.read_csv(io.StringIO(body), sep=r"\s+", header=None, names=list(range(n + 2)),
                        dtype=str, na_filter=False, quoting=3, engine="c")
    if len(frame) != expected:
        raise ValueError(f"the header announces {expected} {n}-grams but the section holds {len(frame)} "
                         "(cut short?)")
    return frame


def _log10_column(frame: pd.DataFrame, column: int, keep: np.ndarray, n: int, what: str) -> np.ndarray:
    """A column of log10 values (empty: 0) as natural logs; a value whose natural log is not finite (nan,
    -inf: ARPA's zero is -99; a log10 beyond LOG10_RANGE, whose conversion overflows), or a probability's
    above 0 (P > 1), is refused naming its line of the section."""
    values = frame[column].to_numpy()[keep]
    try:
        log10s = np.where(values == "", 0.0, values).astype(np.float64)
    except ValueError:
        raise ValueError(f"a line of its \\{n}-grams: section holds a malformed number") from None
    with np.errstate(over="ignore"):  # (an overflow is refused below, on the value as converted)
        logs = log10s * LN10
    bad = np.flatnonzero(~np.isfinite(logs) | ((log10s > LOG10_ABOVE_ONE) if what == "probability" else False))
    if len(bad):
        line = int(np.flatnonzero(keep)[bad[0]]) + 1
        raise ValueError(f"entry {line} of its \\{n}-grams: section has log10 {what} {values[bad[0]]}, where "
                         f"every one is finite, between -{LOG10_RANGE:.3g} and {LOG10_RANGE:.3g} (a float once "
                         f"converted to a natural log){' and <= 0 (a probability <= 1; -99 for 0)' if what == 'probability' else ''}")
    return logs


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
    frames = {n: _section(text, n, header[n]) for n in range(1, N + 1)}
    own_words = frames[1][1].to_numpy()                                # the file's own vocabulary
    distinct, word_ids = np.unique(own_words, return_inverse=True)
    _refuse_repeats(word_ids[:, None], distinct, 1)                     # (before words are looked up)
    own = pd.Index(own_words)
    grams, logp, logbow = {}, [np.zeros(0)], [np.zeros(0)]            # over the file's words
    for n in range(1, N + 1):
        frame, every = frames[n], np.ones(len(frames[n]), dtype=bool)
        rows = np.column_stack([own.get_indexer(frame[j].to_numpy()) for j in range(1, n + 1)])  # (m, n)
        if n > 1 and (rows < 0).any():
            line = int(np.flatnonzero((rows < 0).any(axis=1))[0]) + 1
            raise ValueError(f"entry {line} of its \\{n}-grams: section holds a word that is none of its unigrams")
        if n > 1:
            _refuse_repeats(rows, own_words, n)
        grams[n] = rows
        logp.append(_log10_column(frame, 0, every, n, "probability"))
        logbow.append(_log10_column(frame, n + 1, every, n, "back-off weight"))
    _refuse_unnormalised(_model(len(own_words), N, grams, logp, logbow), own_words)
    return _over(vocab, path, own_words, grams, logp, logbow)


def _model(V: int, N: int, grams: dict[int, np.ndarray], logp: list[np.ndarray], logbow: list[np.ndarray]) -> ArpaModel:
    """The model of order N over V words whose order-n entries are the rows `grams[n]` (ids, any order; order 1
    the ids 0..V-1 in any order) with those log probabilities and back-off weights."""
    table = NgramTable(V, {n: grams[n] for n in range(2, N + 1)})
    unigram = grams[1][:, 0]
    logp, logbow = list(logp), list(logbow)
    logp[1], logbow[1] = _scatter(unigram, logp[1]), _scatter(unigram, logbow[1])
    for n in range(2, N + 1):                                         # the table sorts each order:
        row = table.index(n, grams[n])                                # (m,) row of each line read
        logp[n] = _scatter(row, logp[n])
        logbow[n] = _scatter(row, logbow[n])
    model = ArpaModel(N)
    model.set_parameters(table, logp, logbow)
    return model


def _refuse_repeats(rows: np.ndarray, words: np.ndarray, n: int) -> None:
    """Refuse an order whose entries list one n-gram twice (two probabilities of one event)."""
    ordered = rows[np.lexsort(rows.T[::-1])]
    repeated = np.flatnonzero((ordered[1:] == ordered[:-1]).all(axis=1))
    if len(repeated):
        raise ValueError(f"its \\{n}-grams: section lists {' '.join(words[ordered[repeated[0]]])!r} twice")


SUM_TOLERANCE = 1e-3  # |sum - 1| of a context's distribution beyond this: not a model (8 printed decimals: 1e-7)


def _conditional(model: ArpaModel, contexts: np.ndarray, words: np.ndarray) -> np.ndarray:
    """ln P(words[i] | contexts[i]) by the back-off rule, for (m, k) contexts and (m,) words at once."""
    k = contexts.shape[1]
    result, best = model.logp[1][words].copy(), np.ones(len(words), dtype=np.int64)
    for n in range(2, k + 2):
        rows = model.table.index(n, np.column_stack([contexts[:, k - (n - 1):], words]))
        hit = rows >= 0
        result[hit], best[hit] = model.logp[n][rows[hit]], n
    for m in range(1, k + 1):
        rows = model.table.index(m, contexts[:, k - m:])
        use = (rows >= 0) & (best <= m)
        result[use] += model.logbow[m][rows[use]]
    return result


def _refuse_unnormalised(model: ArpaModel, words: np.ndarray) -> None:
    """Refuse a file whose distributions are not distributions: P(. | h) over the file's words must sum to 1
    within SUM_TOLERANCE for the empty context and every context h of order < N, computed for all of them at
    once, order by order: the n-grams listed after h, plus bow(h) times the mass that the lower order gives
    the words not listed after h (probabilities above their rounding, back-off weights inflated)."""
    totals = [np.array([np.exp(model.logp[1]).sum()])]
    contexts = [np.zeros((1, 0), dtype=np.int64)]
    for n in range(2, model.order + 1):
        grams = model.table.grams[n]                                  # (m, n) in the table's order
        context = model.table.index(n - 1, grams[:, :-1])             # (m,) row of each one's context
        size = model.table.size(n - 1)
        listed = np.bincount(context, np.exp(model.logp[n]), minlength=size)
        lower = np.bincount(context, np.exp(_conditional(model, grams[:, 1:-1], grams[:, -1])), minlength=size)
        totals.append(listed + np.exp(model.logbow[n - 1]) * (1 - lower))
        contexts.append(model.table.grams[n - 1])
    for total, context in zip(totals, contexts):
        bad = np.flatnonzero(~(np.abs(total - 1) <= SUM_TOLERANCE))
        if len(bad):
            after = f"after {' '.join(words[context[bad[0]]])!r}" if context.shape[1] else "of its unigrams"
            raise ValueError(f"the distribution {after} sums to {total[bad[0]]:.6g}, not 1 (within "
                             f"{SUM_TOLERANCE:g}): its probabilities or back-off weights are not a model's")


def _over(vocab: Vocabulary, path: Path, own_words: np.ndarray, grams: dict[int, np.ndarray],
          logp: list[np.ndarray], logbow: list[np.ndarray]) -> ArpaModel:
    """The file's model (over its own words) as a model over `vocab` (module docstring: words outside V dropped,
    V's unlisted words <unk>'s unigram)."""
    to_vocab = pd.Index(vocab.words).get_indexer(own_words)          # file word -> id of V, -1 outside
    V, N = len(vocab), len(grams)
    dropped = 0
    for n in range(1, N + 1):
        ids = to_vocab[grams[n]]                                      # (m, n)
        keep = (ids >= 0).all(axis=1)
        dropped += int((~keep).sum())
        grams[n], logp[n], logbow[n] = ids[keep], logp[n][keep], logbow[n][keep]
    if dropped:
        log.info("%s: dropped %d n-grams holding words outside the vocabulary", path, dropped)
    unlisted = np.ones(V, dtype=bool)
    unlisted[grams[1][:, 0]] = False
    if unlisted[vocab.unk_id]:
        raise LMBenchError(f"{path} lacks {UNK} and {int(unlisted.sum())} words of the vocabulary: "
                           "build the ARPA file over this vocabulary with <unk> included")
    unk = logp[1][np.flatnonzero(grams[1][:, 0] == vocab.unk_id)[0]]
    extra = np.flatnonzero(unlisted)                                  # KenLM: unlisted words are <unk>
    grams[1] = np.concatenate([grams[1], extra[:, None]]).astype(np.int64)
    logp[1] = np.concatenate([logp[1], np.full(len(extra), unk)])
    logbow[1] = np.concatenate([logbow[1], np.zeros(len(extra))])
    return _model(V, N, grams, logp, logbow)


def _scatter(row: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.empty(len(row))
    out[row] = values
    return out

"""Writing an ARPA file (the format and its conventions: baselines.arpa): `write_arpa(model, vocab, path)` writes
any fitted BackoffModel (the fitted model of every method registered `arpa`, baselines.methods) as a standard ARPA
file, atomically, one string concatenation per row and order; it returns the n-gram counts per order written in
the header."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from baselines.arpa import LN10, LOG10_ZERO
from baselines.backoff import BackoffModel
from corpora.vocab import Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write

SENTENCE_MARKERS = ("<s>", "</s>")  # listed with log10 P = -99 for tools that require them (KenLM)


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

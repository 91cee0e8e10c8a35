"""The ARPA reader's tables where orders do not pack (issue 67's memory of loading): over more than 4,096 words an
order-5 key needs 65 bits, so orders 5 and 6 are keyed by the row of their first words (baselines.counts), and the
reader finds each entry's rows by walking the table's children (baselines.arpa_reader._prefixes) rather than by sorted
searches of whole columns. The table it builds must be the one the model was fitted with, and its refusals must
still name the n-gram, decoded from its key."""

import re

import numpy as np
import pytest

from baselines.arpa_parser import ROWS_MAX
from baselines.arpa_reader import read_arpa, read_arpa_own
from baselines.arpa_writer import write_arpa
from baselines.counts import packs
from baselines.kneser_ney import KneserNey
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs
from tests.helpers import markov_text
from tests.lm_checks import make_corpus

ORDER = 6


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(corpus, fitted KN 6, its ARPA file) over 5,000+ words (4,200 seen once): orders 5 and 6 do not pack."""
    train = markov_text(20000, 300, 1) + " " + " ".join(f"x{i}" for i in range(4200))
    corpus = make_corpus(train, markov_text(2000, 300, 2), markov_text(2000, 300, 3))
    assert [packs(len(corpus.vocab), n) for n in (4, 5)] == [True, False]
    model = KneserNey(ORDER).fit(corpus)
    path = tmp_path_factory.mktemp("prefix-rank") / "kn6.arpa"
    write_arpa(model, corpus.vocab, path)
    return corpus, model, path


def test_the_table_read_is_the_one_fitted(written):
    corpus, model, path = written
    loaded = read_arpa(path, corpus.vocab)
    for n in range(2, ORDER + 1):
        assert np.array_equal(loaded.table.keys[n], model.table.keys[n]), n
    for n in range(1, ORDER):  # (the reader's child starts, counted; the fitted table's, searched)
        assert np.array_equal(loaded.table.child_starts(n), model.table.child_starts(n)), n
    assert np.allclose(split_logprobs(loaded, corpus, "test"), split_logprobs(model, corpus, "test"), atol=1e-6)
    own, vocab = read_arpa_own(path)  # (lmbench.load's path: the file's words, its own ids)
    stream = vocab.encode(corpus.vocab.decode(corpus.test))
    assert np.array_equal(own.walk(stream)[0], loaded.walk(corpus.test)[0])


def _lines(path):
    lines = path.read_text(encoding="utf-8").split("\n")
    top = lines.index(f"\\{ORDER}-grams:")
    return lines, top + 1  # (the first entry of the top order)


@pytest.mark.parametrize("lie", ("twice", "no prefix", "sum"))
def test_a_refusal_at_an_order_that_does_not_pack_names_its_ngram(written, tmp_path, lie):
    _, _, path = written
    lines, first = _lines(path)
    words = lines[first].split("\t")[1].split(" ")
    if lie == "twice":
        lines.insert(first + 1, lines[first])
        at = lines.index(next(line for line in lines if line.startswith(f"ngram {ORDER}=")))
        lines[at] = f"ngram {ORDER}={int(lines[at].split('=')[1]) + 1}"
        expected = f"lists {' '.join(words)!r} twice"
    elif lie == "no prefix":
        listed = {tuple(line.split("\t")[1].split(" ")) for line in lines
                  if line.count("\t") >= 1 and len(line.split("\t")[1].split(" ")) == ORDER - 1}
        stranger = next(f"x{i}" for i in range(4200) if (f"x{i}", *words[1:ORDER - 1]) not in listed)
        words = [stranger] + words[1:]
        lines[first] = "\t".join([lines[first].split("\t")[0], " ".join(words)])
        expected = f"lists {' '.join(words)!r}, whose first {ORDER - 1} words are no {ORDER - 1}-gram"
    else:
        lines[first] = "\t".join(["-0.00010000", " ".join(words)])
        expected = f"after {' '.join(words[:-1])!r}"
    bad = tmp_path / "bad.arpa"
    bad.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(LMBenchError, match=re.escape(expected)):
        read_arpa_own(bad)


def test_an_order_beyond_the_readers_int32_rows_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.arpa"
    path.write_text(f"\\data\\\nngram 1={ROWS_MAX}\n\n\\1-grams:\n-1.0\t<unk>\n\n\\end\\\n", encoding="utf-8")
    with pytest.raises(LMBenchError, match=f"announces {ROWS_MAX:,} n-grams of one order, where the reader numbers"):
        read_arpa_own(path)

"""ARPA files: round trips score the same, headers match sections, foreign files read by the rules."""

import math
import re

import numpy as np
import pytest

from baselines.arpa_reader import read_arpa, read_arpa_header
from baselines.arpa_writer import write_arpa
from baselines.katz import Katz
from baselines.kneser_ney import KneserNey, KneserNeyBackoff
from baselines.unigram import AddOneUnigram
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs, split_perplexity
from tests.helpers import markov_text
from tests.lm_checks import assert_normalised, make_corpus


def section_lines(path):
    """{order: number of entry lines} counted from the file's sections."""
    counts, order = {}, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        match = re.fullmatch(r"\\(\d+)-grams:", line)
        if match:
            order = int(match.group(1))
            counts[order] = 0
        elif line.startswith("\\"):
            order = None
        elif order is not None and line:
            counts[order] += 1
    return counts


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(markov_text(5000, 150, 10), markov_text(800, 160, 11), markov_text(800, 160, 12))


@pytest.mark.parametrize("cls, order", [(KneserNey, 4), (KneserNeyBackoff, 3), (Katz, 5), (KneserNey, 2)])
def test_round_trip_scores_the_same(cls, order, corpus, tmp_path):
    model = cls(order).fit(corpus)
    path = tmp_path / "model.arpa"
    sizes = write_arpa(model, corpus.vocab, path)
    assert read_arpa_header(path) == sizes == section_lines(path)
    assert sizes[1] == len(corpus.vocab) + 2                        # V, <s> and </s>
    text = path.read_text()
    assert "\n-99.00000000\t<s>\t0.00000000\n" in text
    assert text.startswith("\\data\\\n") and text.rstrip().endswith("\\end\\")
    assert re.search(r"\n-?\d+\.\d+\t<unk>\t", text), "<unk> is a unigram"
    loaded = read_arpa(path, corpus.vocab)
    assert loaded.order == order
    for split in ("valid", "test"):
        assert abs(split_perplexity(loaded, corpus, split) - split_perplexity(model, corpus, split)) <= 1e-4
    assert np.allclose(split_logprobs(loaded, corpus, "test"), split_logprobs(model, corpus, "test"), atol=1e-6)
    assert_normalised(loaded, corpus, tol=1e-5)


def test_round_trip_on_brown(brown, tmp_path):
    model = KneserNey(3).fit(brown)
    path = tmp_path / "brown3.arpa"
    sizes = write_arpa(model, brown.vocab, path)
    assert section_lines(path) == sizes
    loaded = read_arpa(path, brown.vocab)
    for split in ("valid", "test"):
        assert abs(split_perplexity(loaded, brown, split) - split_perplexity(model, brown, split)) <= 1e-4


FOREIGN = """\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-0.6\t<unk>\t0
-99\t<s>\t0.0554
-1.0\t</s>
-0.4\ta\t-0.3
-0.6\tzzz\t0

\\2-grams:
-0.5\t<s> a
-0.2\ta a
-0.7144\ta zzz

\\end\\
"""


def test_foreign_file_rules(tmp_path):
    """lmplz-style: <s> and </s> and words outside V dropped; V's unlisted words (b) are <unk>."""
    corpus = make_corpus("a b a", "a b", "b a")      # V = <unk>, a, b
    path = tmp_path / "foreign.arpa"
    path.write_text(FOREIGN)
    model = read_arpa(path, corpus.vocab)
    ln10 = math.log(10)
    unigram = np.array([-0.6, -0.4, -0.6]) * ln10
    assert np.allclose(np.log(model.distribution([])), unigram)
    # After a: "a a" listed; <unk> and b back off with bow(a) = -0.3.
    expected = np.array([-0.6 - 0.3, -0.2, -0.6 - 0.3]) * ln10
    assert np.allclose(np.log(model.distribution([1])), expected)
    # Test "b a" follows valid's last "b", which is no context (no back-off weight): P(b), P(a).
    assert np.allclose(split_logprobs(model, corpus, "test"), [-0.6 * ln10, -0.4 * ln10])


def test_bad_files(tmp_path, corpus):
    path = tmp_path / "bad.arpa"
    path.write_text(FOREIGN.replace("ngram 2=3", "ngram 2=4"))
    with pytest.raises(LMBenchError, match="announces 4 2-grams"):
        read_arpa(path, corpus.vocab)
    path.write_text("hello\n")
    with pytest.raises(LMBenchError, match="data"):
        read_arpa(path, corpus.vocab)
    with pytest.raises(LMBenchError, match="does not exist"):
        read_arpa(tmp_path / "missing.arpa", corpus.vocab)
    with pytest.raises(LMBenchError, match="not a fitted back-off model"):
        write_arpa(AddOneUnigram().fit(corpus), corpus.vocab, tmp_path / "x.arpa")

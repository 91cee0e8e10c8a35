import math

import numpy as np
import pytest

from baselines.class_ngram import ClassNgram, class_corpus
from baselines.clustering import Clustering
from baselines.deleted_interpolation import DeletedInterpolationTrigram
from baselines.unigram import AddOneUnigram
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel, split_logprobs, split_perplexity
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus


class AddOneBigram(LanguageModel):
    """P(w | v) = (c(v, w) + 1) / (c(v, .) + V); at the start of a stream, the add-one unigram."""

    order = 2

    def _fit(self, corpus) -> None:
        V = self.vocab_size
        train = corpus.train.astype(np.int64)
        pairs = np.bincount(train[:-1] * V + train[1:], minlength=V * V).reshape(V, V)
        self.table = (pairs + 1.0) / (pairs.sum(axis=1, keepdims=True) + V)  # (V, V)
        self.unigram = (np.bincount(train, minlength=V) + 1.0) / (len(train) + V)  # (V,)

    def score(self, stream, start):
        stream = np.asarray(stream, dtype=np.int64)
        t = np.arange(start, len(stream))
        p = np.where(t > 0, self.table[stream[np.maximum(t - 1, 0)], stream[t]], self.unigram[stream[t]])
        return np.log(p)

    def distribution(self, context):
        return self.table[context[-1]] if len(context) else self.unigram


def tiny():
    # V: <unk>=0, a=1 (3), b=2 (2), c=3 (1), d=4 (1); classes {<unk>, a, c} = 0, {b, d} = 1
    corpus = make_corpus("a b a c a d b", "a b e", "d a")
    clustering = Clustering(np.array([0, 0, 1, 0, 1], dtype=np.int32), 2, corpus.vocab.fingerprint())
    return corpus, clustering


def test_hand_computed_class_bigram():
    corpus, clustering = tiny()
    model = ClassNgram(AddOneBigram, 2, clustering=clustering).fit(corpus)
    assert model.order == 2
    # class train stream: a b a c a d b -> 0 1 0 0 0 1 1; class bigrams from 0: 0->1 x2, 0->0 x2;
    # from 1: 1->0 x1, 1->1 x1. Add-one with C = 2: P(1|0) = 3/6, P(0|0) = 3/6, P(0|1) = 2/4, P(1|1) = 2/4
    # word given class, add-one: class 0 = {<unk>:0, a:3, c:1} -> (n + 1) / 7; class 1 = {b:2, d:1} -> /5
    # valid "a b e" after train's last word b: a|b = P(0|1) P(a|0), b|a = P(1|0) P(b|1), e=<unk>|b
    expected = [2 / 4 * 4 / 7, 3 / 6 * 3 / 5, 2 / 4 * 1 / 7]
    assert np.allclose(np.exp(split_logprobs(model, corpus, "valid")), expected)
    # test "d a" after valid's last word e (<unk>, class 0)
    assert np.allclose(np.exp(split_logprobs(model, corpus, "test")), [3 / 6 * 2 / 5, 2 / 4 * 4 / 7])
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus, "valid")
    assert_scores_match_distribution(model, corpus, "test")


def test_hand_computed_class_unigram():
    corpus, clustering = tiny()
    model = ClassNgram(AddOneUnigram, 2, clustering=clustering).fit(corpus)
    assert model.order == 1
    # class counts: 0 -> 4, 1 -> 3 of 7; add-one over C = 2: P(0) = 5/9, P(1) = 4/9
    assert math.isclose(split_perplexity(model, corpus, "test"), 1 / math.sqrt(4 / 9 * 2 / 5 * 5 / 9 * 4 / 7))
    assert_normalised(model, corpus)


def test_class_corpus_keeps_unk_as_class_zero():
    corpus, clustering = tiny()
    classes = class_corpus(corpus, clustering)
    assert classes.vocab.words == ["<unk>", "C1"]
    assert classes.train.tolist() == [0, 1, 0, 0, 0, 1, 1] and classes.valid.tolist() == [0, 1, 0]


def test_with_exchange_clustering_and_a_trigram_class_model(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path))
    rng = np.random.default_rng(0)
    words = np.array(list("abcdefghijkl"))
    text = lambda n: " ".join(words[rng.integers(0, 12, size=n)])  # noqa: E731
    corpus = make_corpus(text(500), text(200), text(100))
    model = ClassNgram(DeletedInterpolationTrigram, 4, progress=False).fit(corpus)
    assert model.order == 3 and len(list((tmp_path / "clusters").glob("*.json"))) == 1
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus, "valid")
    assert np.all(np.isfinite(split_logprobs(model, corpus, "test")))


def test_refuses_a_clustering_of_another_vocabulary():
    corpus, clustering = tiny()
    other = make_corpus("x y z w v", "x", "y")
    with pytest.raises(LMBenchError, match="another vocabulary"):
        ClassNgram(AddOneUnigram, 2, clustering=clustering).fit(other)

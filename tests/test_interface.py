import math
import warnings

import numpy as np
import pytest

from baselines.unigram import AddOneUnigram
from lmbench.errors import LMBenchError
from lmbench.model import perplexity, split_logprobs, split_perplexity
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus


def test_stream_for_gives_each_split_its_history():
    corpus = make_corpus("a b c d", "e f", "g")
    stream, start = corpus.stream_for("test", history=2)
    assert start == 2 and corpus.vocab.decode(stream.tolist())[:2] == ["<unk>", "<unk>"]
    assert len(stream) == 3
    stream, start = corpus.stream_for("valid")
    assert start == 4 and len(stream) == 6
    stream, start = corpus.stream_for("train", history=3)
    assert start == 0 and len(stream) == 4


def test_add_one_unigram_matches_hand_computation():
    corpus = make_corpus("a a b", "a c", "b")
    model = AddOneUnigram().fit(corpus)  # V = {<unk>, a, b}, N = 3
    assert np.allclose(np.exp(split_logprobs(model, corpus, "valid")), [3 / 6, 1 / 6])  # c is <unk>
    assert math.isclose(split_perplexity(model, corpus, "test"), 6 / 2)
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus)


def test_perplexity_counts_every_token():
    assert math.isclose(perplexity(np.log([0.5, 0.25])), math.sqrt(8))
    with warnings.catch_warnings():  # a diverged network's perplexity is inf, quietly
        warnings.simplefilter("error")
        assert perplexity(np.array([-800.0, -900.0])) == math.inf
    with pytest.raises(LMBenchError):
        perplexity(np.array([]))


def test_a_split_of_another_vocabulary_is_refused():
    model = AddOneUnigram().fit(make_corpus("a b", "a", "b"))
    with pytest.raises(LMBenchError, match="vocabulary"):
        split_logprobs(model, make_corpus("a b c d", "a", "b"), "valid")


def test_slice_corpus_remaps_to_a_smaller_vocabulary():
    from corpora.corpus import slice_corpus
    corpus = make_corpus("a b a c a b d d e", "a e b", "c d")
    small = slice_corpus(corpus, train=6, valid=2, test=2, min_count=2)
    assert small.vocab.words == ["<unk>", "a", "b"]
    assert small.vocab.decode(small.train.tolist()) == ["a", "b", "a", "<unk>", "a", "b"]
    assert small.vocab.decode(small.valid.tolist()) == ["a", "<unk>"]
    assert len(small.test) == 2


def test_a_training_split_shorter_than_the_order_is_refused():
    from baselines.kneser_ney import KneserNey
    with pytest.raises(LMBenchError, match="fewer than the model order 5: use a longer corpus"):
        KneserNey(5).fit(make_corpus("a b c", "a", "b"))


def test_long_streams_are_scored_in_chunks_to_the_same_values(monkeypatch):
    """lmbench.model.in_chunks: chunks of a few positions, each with its history, give every model that
    scores through it (back-off, deleted interpolation) the values of one pass, buckets included."""
    import lmbench.model
    from baselines.deleted_interpolation import DeletedInterpolationTrigram
    from baselines.kneser_ney import KneserNey
    from tests.test_kneser_ney import markov_text
    corpus = make_corpus(markov_text(3000, 40, 0), markov_text(500, 40, 1), markov_text(500, 40, 2))
    for model in (DeletedInterpolationTrigram().fit(corpus), KneserNey(4).fit(corpus)):
        whole = {split: split_logprobs(model, corpus, split) for split in ("train", "valid", "test")}
        buckets = hasattr(model, "split_buckets") and model.split_buckets(corpus, "valid")
        monkeypatch.setattr(lmbench.model, "SCORE_CHUNK", 7)
        for split in whole:
            assert np.array_equal(split_logprobs(model, corpus, split), whole[split]), (type(model).__name__, split)
            assert len(whole[split]) == len(corpus.split(split))
        if buckets is not False:
            assert np.array_equal(model.split_buckets(corpus, "valid"), buckets)
        monkeypatch.undo()

import math

import numpy as np
import pytest

from lmbench.model import split_logprobs
from baselines.deleted_interpolation import DeletedInterpolationTrigram
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus


def test_components_and_buckets_match_hand_computation():
    # V: <unk>=0, a=1, b=2, c=3; T = 4; l(x) = ceil(-ln((1 + x) / 4)); buckets 0..ceil(ln 4) = 0..2
    corpus = make_corpus("a b a c", "a b", "c")
    model = DeletedInterpolationTrigram().fit(corpus)
    assert model.num_buckets == 3
    a, b, c = 1, 2, 3
    # train itself: t=2 (a b -> a): p1 = 2/4, p2(a|b) = 1/1, p3(a|a b) = 1/1, c(a b .) = 1 -> bucket 1
    train = np.array([a, b, a, c])
    assert np.allclose(model.components(train, 2), [[1 / 4, 2 / 4, 1, 1], [1 / 4, 1 / 4, 1 / 2, 1]])
    assert model.buckets(train, 2).tolist() == [1, 1]
    # valid stream [a c | a b]: (a c) and (c a) are unseen pairs (bucket l(0) = 2), so p3 takes p2's
    # value; c is never a context in train, so p2(a | c) takes p1(a)
    stream, start = corpus.stream_for("valid", history=2)
    assert np.allclose(model.components(stream, start),
                       [[1 / 4, 2 / 4, 2 / 4, 2 / 4], [1 / 4, 1 / 4, 1 / 2, 1 / 2]])
    assert model.split_buckets(corpus, "valid").tolist() == [2, 2]
    # test stream [a b | c]: p2(c|b) = 0/1, p3(c|a b) = 0/1, c(a b .) = 1 -> bucket 1
    assert np.allclose(model.components(*corpus.stream_for("test", history=2)), [[1 / 4, 1 / 4, 0, 0]])
    assert model.split_buckets(corpus, "test").tolist() == [1]
    # the start of train has short contexts: p2 = p1 at t=0, p3 = p2 at t<2, bucket l(0)
    assert np.allclose(model.components(train, 0)[:2],
                       [[1 / 4, 2 / 4, 2 / 4, 2 / 4], [1 / 4, 1 / 4, 1 / 2, 1 / 2]])
    assert model.buckets(train, 0)[:2].tolist() == [2, 2]
    # test perplexity with the fitted bucket-1 weights (no valid token there: uniform 1/4)
    assert np.allclose(model.weights[1], 0.25)
    assert math.isclose(split_logprobs(model, corpus, "test")[0], math.log(0.25 * (1 / 4 + 1 / 4)))


def _text(seed: int, n: int) -> str:
    rng = np.random.default_rng(seed)
    words = np.array(list("abcdefgh"))
    # a Markov chain with a strong bigram structure so that all four components matter
    ids = [0]
    for _ in range(n - 1):
        ids.append((ids[-1] + rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1])) % 8 if rng.random() < 0.8
                   else rng.integers(8))
    return " ".join(words[ids])


def test_em_increases_valid_likelihood_and_weights_sum_to_one():
    corpus = make_corpus(_text(0, 400), _text(1, 300), _text(2, 100))
    model = DeletedInterpolationTrigram(tol=1e-12, max_iters=50).fit(corpus)
    history = np.array(model.em_history)
    assert len(history) > 3
    assert np.all(np.diff(history) >= -1e-9)
    assert history[-1] > history[0] + 1.0
    assert np.allclose(model.weights.sum(axis=1), 1.0)
    assert np.all(model.weights >= 0)
    # the last recorded likelihood is the valid log-likelihood of the fitted model
    assert math.isclose(split_logprobs(model, corpus, "valid").sum(), history[-1], rel_tol=1e-6)
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus, "valid")
    assert_scores_match_distribution(model, corpus, "test")


def test_refuses_a_vocabulary_too_large_for_int64_keys(monkeypatch):
    import baselines.deleted_interpolation as di
    from lmbench.errors import LMBenchError
    monkeypatch.setattr(di, "MAX_VOCAB", 3)
    with pytest.raises(LMBenchError, match="min-count"):
        DeletedInterpolationTrigram().fit(make_corpus("a b a c", "a b", "c"))


@pytest.mark.parametrize("unique_end", [False, True])
def test_bounded_memory_counts_give_the_same_model(tmp_path, unique_end):
    """--memory: the counts from disk (baselines/disk_counts.py) under a cap that forces many runs give
    the same count tables, c(u, v, .) at the stream's last bigram included, hence the same weights and
    every probability, and leave nothing on disk."""
    train = _text(0, 12000) + (" z" if unique_end else "")  # the last bigram seen once: c(u, v, .) = 0
    corpus = make_corpus(train, _text(1, 3000), _text(2, 1000))
    in_memory = DeletedInterpolationTrigram().fit(corpus)
    bounded = DeletedInterpolationTrigram(memory=100_000, tmp_dir=tmp_path).fit(corpus)
    assert isinstance(bounded.trigram.keys, np.memmap)               # it did count on disk
    for name in ("bigram", "trigram", "trigram_context"):
        a, b = getattr(in_memory, name), getattr(bounded, name)
        keys = np.union1d(a.keys, b.keys)
        assert np.array_equal(a.get(keys), b.get(keys)), name
    assert np.array_equal(in_memory.weights, bounded.weights)
    for split in ("train", "valid", "test"):
        assert np.array_equal(split_logprobs(in_memory, corpus, split), split_logprobs(bounded, corpus, split))
    assert np.array_equal(in_memory.distribution([1, 2]), bounded.distribution([1, 2]))
    assert list(tmp_path.iterdir()) == []

import math
from collections import Counter

import numpy as np
import pytest

from baselines.clustering import Clustering, cached_cluster, cluster, exchange, f, objective, relabel
from lmbench.errors import LMBenchError
from tests.helpers import random_text
from tests.lm_checks import make_corpus


def brute_force_objective(train, word_class) -> float:
    """F from the definition, by counting class bigrams one by one (tiny inputs only)."""
    classes = [int(word_class[w]) for w in train]
    pairs = Counter(zip(classes[:-1], classes[1:]))
    left = Counter(classes[:-1])
    right = Counter(classes[1:])
    xlx = lambda x: x * math.log(x)  # noqa: E731
    return (sum(xlx(n) for n in pairs.values()) - sum(xlx(n) for n in left.values())
            - sum(xlx(n) for n in right.values()))


def test_objective_matches_brute_force():
    corpus = make_corpus(random_text(0, 300), "a", "b")
    rng = np.random.default_rng(1)
    word_class = rng.integers(0, 4, size=len(corpus.vocab))
    assert math.isclose(objective(corpus.train, word_class, 4),
                        brute_force_objective(corpus.train, word_class), rel_tol=1e-12)


def test_objective_never_decreases_and_ends_locally_optimal():
    corpus = make_corpus(random_text(2, 600), "a", "b")
    word_class, info = exchange(corpus.train, len(corpus.vocab), 4, max_iters=50, progress=False)
    history = np.array(info["objective"])
    assert info["moves"][-1] == 0 and len(history) >= 2
    assert np.all(np.diff(history) >= -1e-9)
    assert history[-1] > history[0]
    assert math.isclose(history[-1], brute_force_objective(corpus.train, word_class), rel_tol=1e-12)
    assert info["drift"] < 1e-6
    # converged: moving any one word to any other class cannot raise the objective
    best = history[-1]
    for w in np.unique(corpus.train):
        for k in range(4):
            moved = word_class.copy()
            moved[w] = k
            assert brute_force_objective(corpus.train, moved) <= best + 1e-9


def test_two_obvious_groups_are_found():
    # words of {a b c} are always followed by one of {x y z} and vice versa
    rng = np.random.default_rng(0)
    left, right = np.array(list("abc")), np.array(list("xyz"))
    tokens = [w for _ in range(200) for w in (rng.choice(left), rng.choice(right))]
    corpus = make_corpus(" ".join(tokens), "a", "x")
    # two classes: the start puts the most frequent word alone, everything else in the other class
    clustering = cluster(corpus.vocab, corpus.train, 2, progress=False)
    ids = lambda ws: {int(clustering.word_class[corpus.vocab.id(w)]) for w in ws}  # noqa: E731
    assert len(ids("abc")) == 1 and len(ids("xyz")) == 1 and ids("abc") != ids("xyz")


def test_relabel_puts_unk_in_class_zero_and_drops_empty_classes():
    word_class, used = relabel(np.array([4, 2, 4, 7, 2]))
    assert word_class.tolist() == [0, 1, 0, 2, 1] and used == 3


def test_exchange_is_deterministic():
    corpus = make_corpus(random_text(3, 400), "a", "b")
    first = cluster(corpus.vocab, corpus.train, 3, progress=False)
    second = cluster(corpus.vocab, corpus.train, 3, progress=False)
    assert np.array_equal(first.word_class, second.word_class)


def test_save_load_roundtrip_and_refusal_of_another_vocabulary(tmp_path):
    corpus = make_corpus(random_text(4, 300), "a", "b")
    clustering = cluster(corpus.vocab, corpus.train, 3, progress=False)
    path = tmp_path / "clusters.json"
    clustering.save(path)
    loaded = Clustering.load(path, corpus.vocab)
    assert np.array_equal(loaded.word_class, clustering.word_class)
    assert loaded.num_classes == clustering.num_classes and loaded.info == clustering.info
    other = make_corpus("a b c d e f g h i j k", "a", "b")
    with pytest.raises(LMBenchError, match="another vocabulary"):
        Clustering.load(path, other.vocab)
    path.write_text("{not json")
    with pytest.raises(LMBenchError, match="cluster again"):
        Clustering.load(path, corpus.vocab)


def test_cached_cluster_reuses_the_saved_clustering(tmp_path):
    corpus = make_corpus(random_text(5, 300), "a", "b")
    first = cached_cluster(corpus, 3, progress=False, directory=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1
    second = cached_cluster(corpus, 3, progress=False, directory=tmp_path)
    assert np.array_equal(first.word_class, second.word_class) and second.info == first.info


def test_refuses_impossible_class_counts():
    corpus = make_corpus("a b c", "a", "b")
    with pytest.raises(LMBenchError, match="at most"):
        cluster(corpus.vocab, corpus.train, 10)
    with pytest.raises(LMBenchError, match="at least 2"):
        cluster(corpus.vocab, corpus.train, 1)


def test_the_compiled_f_of_a_count_equals_x_log_x_below_and_above_its_table():
    """The exchange's f of a count reads a table of the counts below 65,536 and computes x ln x above."""
    from baselines.clustering import F_TABLE, _f

    counts = np.array([0, 1, 2, 65_534, 65_535, 65_536, 65_537, 10**6, 123_456_789], dtype=np.float64)
    assert [_f(x, F_TABLE) for x in counts] == list(f(counts))

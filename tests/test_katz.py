"""Katz back-off: Good-Turing ratios by hand, a hand-worked bigram, a loop-based reference,
normalisation, the no-mass-left context, and degenerate data."""

import functools
import logging
from collections import Counter, defaultdict

import numpy as np
import pytest

from baselines.katz import Katz, good_turing_ratios
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs, split_perplexity
from tests.helpers import markov_text
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus
from tests.test_kneser_ney import TEN


def test_good_turing_ratios_by_hand():
    nr = [100, 40, 20, 12, 8, 5]                     # n_1 .. n_6
    counts = np.concatenate([np.full(n, r) for r, n in enumerate(nr, start=1)] + [np.full(7, 30)])
    # A = 6 n6 / n1 = 0.3; d_r = (r*/r - A) / (1 - A) with r* = (r + 1) n_{r+1} / n_r
    expected = [(0.8 - 0.3) / 0.7, (0.75 - 0.3) / 0.7, (0.8 - 0.3) / 0.7,
                (40 / 48 - 0.3) / 0.7, (0.75 - 0.3) / 0.7]
    ratios = good_turing_ratios(counts, 5, 2)
    assert np.allclose(ratios, [1.0, *expected, 1.0])
    assert np.allclose(expected, [0.7142857, 0.6428571, 0.7142857, 0.7619048, 0.6428571])


def test_good_turing_lowers_k_then_falls_back(caplog):
    with caplog.at_level(logging.WARNING):
        # n1 = 100, n2 = 40, n3 = 20, n4 = 0: k = 5 and 3 impossible, k = 2 valid.
        ratios = good_turing_ratios(np.array([1] * 100 + [2] * 40 + [3] * 20), 5, 2)
        assert np.allclose(ratios, [1, (0.8 - 0.6) / 0.4, (0.75 - 0.6) / 0.4, 1, 1, 1, 1])
        ratios = good_turing_ratios(np.array([2, 2, 3]), 5, 3)   # no singletons: absolute 0.5
        assert np.allclose(ratios, [1, 0.5, 0.75, 2.5 / 3, 3.5 / 4, 4.5 / 5, 1])
    assert "using k = 2" in caplog.text and "absolute" in caplog.text


def test_hand_worked_bigram():
    corpus = make_corpus(TEN, "a b c a", "c b a")
    model = Katz(2).fit(corpus)
    # Bigrams ab 3, ba 2, ca 2, bc 1, ac 1: n3 > 0 but every GT k fails -> d_r = (r - 0.5) / r.
    # Unigrams a 5, b 3, c 2, <unk> 0 (n1 = 0) -> the same fallback: a 4.5/10, b 2.5/10, c 1.5/10,
    # and the freed 0.15 goes to the only zero-count word, <unk>.
    p1 = [0.15, 0.45, 0.25, 0.15]
    assert np.allclose(model.distribution([]), p1, atol=1e-12)
    # Context a: ab 3 -> 2.5/4, ac 1 -> 0.5/4; alpha = (1 - 0.75) / (1 - P(b) - P(c)) = 0.25 / 0.6.
    alpha = 0.25 / 0.6
    assert np.allclose(model.distribution([1]), [alpha * 0.15, alpha * 0.45, 2.5 / 4, 0.5 / 4], atol=1e-12)
    assert np.allclose(split_logprobs(model, corpus, "test")[0], np.log(0.5 / 4))  # P(c | a), a ending valid


def reference_katz(train, V, N, k, min_count=1):
    """Katz back-off over Python dicts, straight from the formulas (slow), lowering k where the
    ratios are invalid; the counts must give some valid k at every order and leave mass in every
    context."""
    train = [int(x) for x in train]
    raw = {n: Counter(tuple(train[t:t + n]) for t in range(len(train) - n + 1)) for n in range(1, N + 1)}
    d = {}
    for n in range(1, N + 1):
        nr = Counter(raw[n].values())
        for kk in range(k, 0, -1):
            if all(nr[r] > 0 for r in range(1, kk + 2)):
                A = (kk + 1) * nr[kk + 1] / nr[1]
                d[n] = {r: ((r + 1) * nr[r + 1] / nr[r] / r - A) / (1 - A) for r in range(1, kk + 1)}
                if all(0 < x <= 1 for x in d[n].values()):
                    break
        assert all(0 < x <= 1 for x in d[n].values())
    children = {n: defaultdict(dict) for n in range(2, N + 1)}
    for n in range(2, N + 1):
        for gram, c in raw[n].items():
            children[n][gram[:-1]][gram[-1]] = c
    total = len(train)
    unseen = [w for w in range(V) if (w,) not in raw[1]]
    freed = 1 - sum(d[1].get(c, 1) * c / total for c in raw[1].values())

    @functools.cache  # the back-off weight asks the lower order of every seen word again
    def prob(w, h):
        if not h:
            c = raw[1].get((w,), 0)
            return d[1].get(c, 1) * c / total if c else freed / len(unseen)
        kids = children[len(h) + 1].get(h)
        if not kids:
            return prob(w, h[1:])
        total_h = sum(kids.values())
        seen = {v: d[len(h) + 1].get(c, 1) * c / total_h for v, c in kids.items()
                if len(h) < 2 or c >= min_count}   # listed: from trigrams up, seen min_count times
        if w in seen:
            return seen[w]
        alpha = (1 - sum(seen.values())) / (1 - sum(prob(v, h[1:]) for v in seen))
        return alpha * prob(w, h[1:])

    return prob


@pytest.mark.parametrize("min_count", [1, 2])
def test_matches_loop_reference(min_count):
    corpus = make_corpus(markov_text(20000, 400, 0), markov_text(300, 400, 1), markov_text(300, 400, 2))
    V, N = len(corpus.vocab), 3
    model = Katz(N, min_count=min_count).fit(corpus)
    prob = reference_katz(corpus.train, V, N, 5, min_count)
    rng = np.random.default_rng(3)
    for context in [[], corpus.train[5:7].tolist(), corpus.train[900:901].tolist(),
                    rng.integers(0, V, 2).tolist(), [0, 0]]:
        expected = [prob(w, tuple(context)) for w in range(V)]
        assert np.allclose(model.distribution(context), expected, rtol=1e-10, atol=0), context


@pytest.mark.parametrize("order, min_count", [(2, 1), (3, 1), (5, 1), (5, 2)])
def test_normalised_and_scores_match(order, min_count):
    corpus = make_corpus(markov_text(3000, 80, 4), markov_text(300, 90, 5), markov_text(300, 90, 6))
    model = Katz(order, min_count=min_count).fit(corpus)
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus)


def test_context_with_only_large_counts_keeps_mass():
    # "x" is always followed by "y", 7 times (> k = 5): Good-Turing alone would leave no mass.
    corpus = make_corpus("x y " * 7 + "z q z r q r z x y", "x z", "x q")
    model = Katz(2).fit(corpus)
    x = corpus.vocab.id("x")
    p = model.distribution([x])
    assert np.all(p > 0) and abs(p.sum() - 1) < 1e-12
    assert np.isfinite(split_perplexity(model, corpus, "valid")) and np.isfinite(split_perplexity(model, corpus, "test"))


def test_degenerate_data_and_order_range(caplog):
    corpus = make_corpus("a a a a a a a a", "a b", "b a")
    with caplog.at_level(logging.WARNING):
        model = Katz(5).fit(corpus)
    assert caplog.records
    assert_normalised(model, corpus)
    assert np.isfinite(split_perplexity(model, corpus, "test"))
    with pytest.raises(LMBenchError, match="orders 2 to 5"):
        Katz(6)

"""Modified Kneser-Ney: a hand-worked bigram, discounts, a loop-based reference, normalisation,
degenerate data, and the CLI."""

import functools
import json
import logging
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from baselines.kneser_ney import FALLBACK_DISCOUNTS, KneserNey, KneserNeyBackoff, adjusted_counts, kn_discounts
from baselines.counts import count_ngrams
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs, split_perplexity
from tests.helpers import markov_text, run_cli, write_splits, zipf_text
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus

# Vocabulary from counts: <unk>=0, a=1 (5), b=2 (3), c=3 (2).
TEN = "a b a b c a b a c a"


def test_hand_worked_bigram(caplog):
    corpus = make_corpus(TEN, "a b c a", "c b a")
    with caplog.at_level(logging.WARNING):
        model = KneserNey(2).fit(corpus)
    # Bigram counts ab 3, ba 2, ca 2, bc 1, ac 1: n1 = 2, n2 = 2, n3 = 1, n4 = 0 -> fallback.
    # Unigram continuation counts: a <- {b, c, stream start} = 3, b <- {a} = 1, c <- {b, a} = 2,
    # so n1 = n2 = n3 = 1, n4 = 0 -> fallback too: two warnings.
    assert sum("fallback" in r.message for r in caplog.records) == 2
    assert model.discounts[2].tolist() == [0.0, *FALLBACK_DISCOUNTS]
    # Unigrams: total 6, D = 1.5 (a), 0.5 (b), 1.0 (c), gamma = 3 / 6, uniform 1/4.
    p1 = {"<unk>": 0.5 / 4, "a": 1.5 / 6 + 0.125, "b": 0.5 / 6 + 0.125, "c": 1.0 / 6 + 0.125}
    assert np.allclose(model.distribution([]), [p1["<unk>"], p1["a"], p1["b"], p1["c"]], atol=1e-12)
    # Context a: ab 3, ac 1, total 4, gamma(a) = (1.5 + 0.5) / 4 = 0.5.
    p_a = [0.5 * p1["<unk>"], 0.5 * p1["a"], 1.5 / 4 + 0.5 * p1["b"], 0.5 / 4 + 0.5 * p1["c"]]
    assert np.allclose(model.distribution([1]), p_a, atol=1e-12)
    assert np.isclose(p_a[2], 0.4791666666666667)
    # Context b: ba 2, bc 1, total 3, gamma(b) = (1.0 + 0.5) / 3 = 0.5.
    p_b = [0.5 * p1["<unk>"], 1.0 / 3 + 0.5 * p1["a"], 0.5 * p1["b"], 0.5 / 3 + 0.5 * p1["c"]]
    assert np.allclose(model.distribution([2]), p_b, atol=1e-12)
    # Test "c b a" follows valid's last "a": P(c|a) P(b|c) P(a|b); context c: ca 2 only, gamma 0.5.
    p_c = [0.5 * p1["<unk>"], 1.0 / 2 + 0.5 * p1["a"], 0.5 * p1["b"], 0.5 * p1["c"]]
    expected = [math.log(p_a[3]), math.log(p_c[2]), math.log(p_b[1])]
    assert np.allclose(split_logprobs(model, corpus, "test"), expected, atol=1e-12)


def test_hand_worked_bigram_backoff():
    corpus = make_corpus(TEN, "a b c a", "c b a")
    model = KneserNeyBackoff(2).fit(corpus)
    p1 = [0.125, 0.375, 0.5 / 6 + 0.125, 1.0 / 6 + 0.125]
    # Context a: discounted b 1.5/4, c 0.5/4; alpha = 0.5 / (1 - P(b) - P(c)) = 0.5 / 0.5 = 1.
    alpha = 0.5 / (1 - p1[2] - p1[3])
    assert np.allclose(model.distribution([1]), [alpha * p1[0], alpha * p1[1], 1.5 / 4, 0.5 / 4], atol=1e-12)
    # Context b: discounted a 1/3, c 0.5/3; alpha = 0.5 / (1 - P(a) - P(c)).
    alpha = 0.5 / (1 - p1[1] - p1[3])
    assert np.allclose(model.distribution([2]), [alpha * p1[0], 1 / 3, alpha * p1[2], 0.5 / 3], atol=1e-12)


def test_discounts_from_counts_of_counts():
    a = np.array([1] * 10 + [2] * 4 + [3] * 2 + [4] * 1 + [7] * 3)
    # n1 = 10, n2 = 4, n3 = 2, n4 = 1: Y = 10 / 18
    Y = 10 / 18
    expected = [0.0, 1 - 2 * Y * 4 / 10, 2 - 3 * Y * 2 / 4, 3 - 4 * Y * 1 / 2]
    assert np.allclose(kn_discounts(a, 3), expected)
    assert np.allclose(expected, [0, 0.5555556, 1.1666667, 1.8888889])


def test_adjusted_counts_are_continuation_counts():
    stream = np.array([1, 2, 1, 2, 3, 1, 2, 1, 3, 1])       # the ten-token corpus
    counts = count_ngrams(stream, 3, 4)
    a = adjusted_counts(counts)
    assert a[1].tolist() == [0, 3, 1, 2]                    # <unk>, a, b, c
    bigram = {tuple(g): int(c) for g, c in zip(counts.table.grams[2].tolist(), a[2])}
    # ab <- {start, b, c}; ba <- {a}; bc <- {a}; ca <- {b, a}; ac <- {b}
    assert bigram == {(1, 2): 3, (2, 1): 1, (2, 3): 1, (3, 1): 2, (1, 3): 1}
    assert np.array_equal(a[3], counts.counts[3])          # raw counts at the top order


def reference_kn(train, V, N, interpolate, min_count=1):
    """Straightforward modified KN over Python dicts, straight from the formulas (slow); with
    min_count, the back-off variant lists only n-grams of order >= 3 seen min_count times."""
    train = [int(x) for x in train]
    raw = {n: Counter(tuple(train[t:t + n]) for t in range(len(train) - n + 1)) for n in range(1, N + 1)}
    adj = {N: raw[N]}
    for n in range(N - 1, 0, -1):
        adj[n] = Counter()
        for gram in raw[n + 1]:
            adj[n][gram[1:]] += 1
        adj[n][tuple(train[:n])] += 1
    D = {}
    for n in range(1, N + 1):
        nk = Counter(adj[n].values())
        D[n] = [0, *FALLBACK_DISCOUNTS]
        if all(nk[k] > 0 for k in (1, 2, 3, 4)):
            Y = nk[1] / (nk[1] + 2 * nk[2])
            computed = [k - (k + 1) * Y * nk[k + 1] / nk[k] for k in (1, 2, 3)]
            if all(0 < d < k for d, k in zip(computed, (1, 2, 3))):
                D[n] = [0] + computed
    children = {n: defaultdict(dict) for n in range(1, N + 1)}
    for n in range(1, N + 1):
        for gram, c in adj[n].items():
            children[n][gram[:-1]][gram[-1]] = c

    def disc(n, c):
        return D[n][min(c, 3)]

    @functools.cache  # the back-off weight asks the lower order of every listed word again
    def prob(w, h):
        n = len(h) + 1
        kids = children[n].get(h, {})
        if n == 1:
            total = sum(kids.values())
            gamma = sum(disc(1, c) for c in kids.values()) / total
            c = kids.get(w, 0)
            return (c - disc(1, c)) / total + gamma / V
        if not kids:
            return prob(w, h[1:])
        total = sum(kids.values())
        gamma = sum(disc(n, c) for c in kids.values()) / total
        c = kids.get(w, 0)
        if interpolate:
            return (c - disc(n, c)) / total + gamma * prob(w, h[1:])
        listed = {v: kc for v, kc in kids.items() if n < 3 or raw[n][h + (v,)] >= min_count}
        if w in listed:
            return (c - disc(n, c)) / total
        left = 1 - sum((kc - disc(n, kc)) / total for kc in listed.values())
        return left / (1 - sum(prob(v, h[1:]) for v in listed)) * prob(w, h[1:])

    return prob


@pytest.mark.parametrize("cls, interpolate", [(KneserNey, True), (KneserNeyBackoff, False)])
def test_matches_loop_reference(cls, interpolate):
    corpus = make_corpus(markov_text(4000, 150, 0), markov_text(200, 170, 1), markov_text(200, 170, 2))
    V, N = len(corpus.vocab), 4
    model = cls(N).fit(corpus)
    for n in (2, 3, 4):  # these orders use discounts computed from their counts-of-counts
        assert model.discounts[n][1:].tolist() != list(FALLBACK_DISCOUNTS)
    prob = reference_kn(corpus.train, V, N, interpolate)
    rng = np.random.default_rng(3)
    contexts = [[], corpus.train[5:8].tolist(), corpus.train[100:101].tolist(),
                rng.integers(0, V, 3).tolist(), [0, 0, 0]]
    for context in contexts:
        expected = [prob(w, tuple(context)) for w in range(V)]
        assert np.allclose(model.distribution(context), expected, rtol=1e-10, atol=0), context


def test_backoff_with_cutoffs_matches_loop_reference():
    corpus = make_corpus(markov_text(4000, 150, 0), markov_text(200, 170, 1), markov_text(200, 170, 2))
    V = len(corpus.vocab)
    full, model = KneserNeyBackoff(4).fit(corpus), KneserNeyBackoff(4, min_count=2).fit(corpus)
    for n in (3, 4):   # only the n-grams seen twice or more are listed from trigrams up
        counts = Counter(tuple(corpus.train[t:t + n].tolist()) for t in range(len(corpus.train) - n + 1))
        assert model.table.size(n) == sum(c >= 2 for c in counts.values()) < full.table.size(n)
    assert model.table.size(2) == full.table.size(2)
    prob = reference_kn(corpus.train, V, 4, False, min_count=2)
    for context in [[], corpus.train[5:8].tolist(), corpus.train[100:103].tolist(), [0, 0, 0]]:
        expected = [prob(w, tuple(context)) for w in range(V)]
        assert np.allclose(model.distribution(context), expected, rtol=1e-10, atol=0), context
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus)
    with pytest.raises(LMBenchError, match="back-off models"):
        KneserNey(3, min_count=2)


@pytest.mark.parametrize("cls", [KneserNey, KneserNeyBackoff])
@pytest.mark.parametrize("order", [2, 3, 6])
def test_normalised_and_scores_match(cls, order):
    corpus = make_corpus(zipf_text(2000, 40, 4), zipf_text(300, 50, 5), zipf_text(300, 50, 6))
    model = cls(order).fit(corpus)
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus)
    assert np.all(model.distribution([0] * (order - 1)) > 0)   # <unk> and unseen words get mass


@pytest.mark.parametrize("cls", [KneserNey, KneserNeyBackoff])
def test_degenerate_data_falls_back_with_warning(cls, caplog):
    corpus = make_corpus("a a a a a a a a", "a b", "b a")
    with caplog.at_level(logging.WARNING):
        model = cls(6).fit(corpus)
    assert any("fallback" in r.message for r in caplog.records)
    assert_normalised(model, corpus)
    assert np.isfinite(split_perplexity(model, corpus, "test"))


def test_order_range():
    from lmbench.errors import LMBenchError
    with pytest.raises(LMBenchError, match="orders 2 to 6"):
        KneserNey(7)


@pytest.fixture
def text_files(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    return write_splits(tmp_path, train=zipf_text(1500, 30, 7), valid=zipf_text(300, 30, 8),
                        test=zipf_text(300, 30, 9))


def test_cli_kneser_ney_with_arpa(capsys, text_files, tmp_path):
    files = [f"--{s}={text_files[s]}" for s in ("train", "valid", "test")]
    arpa = tmp_path / "kn.arpa"
    code, out, _ = run_cli(capsys, "ngram", "--method", "kneser-ney", "--order", "3", "--corpus", "text",
                           *files, "--arpa", str(arpa), "--json")
    assert code == 0
    result = json.loads(out)
    corpus = make_corpus(*(text_files[s].read_text() for s in ("train", "valid", "test")))
    model = KneserNey(3).fit(corpus)
    for split in ("train", "valid", "test"):
        assert math.isclose(result[f"{split}_perplexity"], split_perplexity(model, corpus, split), rel_tol=1e-12)
    assert result["vocab_size"] == len(corpus.vocab) and arpa.is_file()
    assert result["arpa"]["ngrams"]["3"] == model.table.size(3)


def test_cli_order_out_of_range_and_arpa_for_unigram(capsys, text_files):
    files = [f"--{s}={text_files[s]}" for s in ("train", "valid", "test")]
    code, out, err = run_cli(capsys, "ngram", "--method", "katz", "--order", "6", "--corpus", "text", *files)
    assert code == 2 and "orders 2 to 5" in err and err.count("\n") == 1
    code, out, err = run_cli(capsys, "ngram", "--method", "add-one-unigram", "--corpus", "text", *files,
                             "--arpa", "x.arpa")
    assert code == 2 and "--arpa needs a back-off model" in err


@pytest.mark.parametrize("cls", [KneserNey, KneserNeyBackoff])
def test_prefix_rank_keys_give_the_same_model(cls, monkeypatch):
    """Keys that do not fit int64 (big V, high order) use prefix-rank keys: force them everywhere."""
    import baselines.counts
    corpus = make_corpus(markov_text(3000, 100, 20), markov_text(300, 110, 21), markov_text(300, 110, 22))
    packed = cls(5).fit(corpus)
    monkeypatch.setattr(baselines.counts, "packs", lambda vocab_size, n: False)
    ranked = cls(5).fit(corpus)
    assert ranked.table.packed == [False] * 6 and packed.table.packed[4]
    assert np.array_equal(split_logprobs(ranked, corpus, "test"), split_logprobs(packed, corpus, "test"))
    for context in ([], corpus.train[:4].tolist(), [0, 1, 2, 3]):
        assert np.array_equal(ranked.distribution(context), packed.distribution(context))
    assert_normalised(ranked, corpus)


def test_cli_cutoffs(capsys, text_files):
    files = [f"--{s}={text_files[s]}" for s in ("train", "valid", "test")]
    code, out, _ = run_cli(capsys, "ngram", "--method", "kneser-ney-backoff", "--order", "4",
                           "--min-ngram-count", "2", "--corpus", "text", *files, "--json")
    assert code == 0
    corpus = make_corpus(*(text_files[s].read_text() for s in ("train", "valid", "test")))
    expected = split_perplexity(KneserNeyBackoff(4, min_count=2).fit(corpus), corpus, "test")
    assert json.loads(out)["test_perplexity"] == pytest.approx(expected, rel=1e-12)
    assert expected != pytest.approx(split_perplexity(KneserNeyBackoff(4).fit(corpus), corpus, "test"), rel=1e-6)
    code, _, err = run_cli(capsys, "ngram", "--method", "kneser-ney", "--min-ngram-count", "2",
                           "--corpus", "text", *files)
    assert code == 2 and "--min-ngram-count: only for --method kneser-ney-backoff" in err

"""The infini-gram: counts, longest suffixes and P∞ against brute-force counting, the interpolated model's
contract, and its command line (lmbench ngram --method infini-gram, lmbench mix --buckets-from)."""

import json

import numpy as np
import pytest

from baselines.infinigram import BUCKETS, InfiniGram, SuffixIndex, UnboundedNgram, effective_n_bucket
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs
from mixing import saved
from tests.helpers import corpus_args, run_cli, write_splits
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus

# "f" ends train and occurs nowhere else, "a b c e f" too: contexts ending so fall back to shorter
# suffixes seen with a next token; "g" and "h" are not in train (<unk>, absent from train too).
TRAIN = "a b c a b d a b c e a b c d a b d d c a e b c e f"
VALID = "a b c e f a b d g a b c"
TEST = "c e f a b c d a b h e b c e a"


def brute_force(train: list[int], stream: list[int], start: int, max_context: int) -> tuple[list, list]:
    """Effective n and P∞ of every token from `start`, by counting in lists: s is the longest suffix
    of the context (at most max_context tokens) occurring in train followed by a token."""
    size = len(train)

    def followed(s):   # occurrences of s with a next token
        return sum(train[p:p + len(s)] == s for p in range(size - len(s)))

    def occurrences(g):
        return sum(train[p:p + len(g)] == g for p in range(size - len(g) + 1))

    ns, probabilities = [], []
    for t in range(start, len(stream)):
        context = stream[max(0, t - max_context):t]
        s = next(context[len(context) - k:] for k in range(len(context), -1, -1)
                 if followed(context[len(context) - k:]) > 0)
        ns.append(len(s) + 1)
        probabilities.append(occurrences(s + [stream[t]]) / followed(s))
    return ns, probabilities


def fitted(corpus, **options):
    return InfiniGram(**options).fit(corpus)


def test_counts_equal_brute_force_for_every_ngram(tmp_path):
    rng = np.random.default_rng(1)
    train = rng.integers(0, 4, size=300)
    index = SuffixIndex.build(train, 5, tmp_path)
    suffixes = sorted(range(len(train)), key=lambda p: train[p:].tolist())
    assert index.sa.tolist() == suffixes
    text = train.tolist()
    for n in (1, 2, 3, 5, 8):
        for p in rng.integers(0, len(train) - n, size=20):
            gram = text[p:p + n]
            assert index.count(gram) == sum(text[q:q + n] == gram for q in range(len(text) - n + 1))
    assert index.count([4]) == 0 and index.count([0, 4, 1]) == 0 and index.count([]) == len(train)


@pytest.mark.parametrize("max_context", [1000, 3])
def test_effective_n_and_p_inf_equal_brute_force(max_context):
    corpus = make_corpus(TRAIN, VALID, TEST)
    model = fitted(corpus, max_context=max_context)
    for split in ("valid", "test"):
        stream, start = corpus.stream_for(split)
        n, logp = model.sparse.score(stream, start)
        want_n, want_p = brute_force(corpus.train.tolist(), stream.tolist(), start, max_context)
        assert n.tolist() == want_n
        assert np.allclose(np.exp(logp), want_p, rtol=0, atol=1e-12)
    # The first valid token: its context is all of train, which occurs only as train's end.
    n, _ = model.split_infinigram(corpus, "valid")
    assert n[0] < min(len(corpus.train), max_context) + 1


def test_random_streams_equal_brute_force():
    rng = np.random.default_rng(7)
    words = " ".join(f"w{i}" for i in range(5))
    for _ in range(3):
        train, valid, test = (" ".join(f"w{i}" for i in rng.integers(0, 5, size=size)) for size in (200, 60, 60))
        corpus = make_corpus(f"{words} {train}", valid, test)
        model = fitted(corpus)
        stream, start = corpus.stream_for("test")
        n, logp = model.sparse.score(stream, start)
        want_n, want_p = brute_force(corpus.train.tolist(), stream.tolist(), start, 1000)
        assert n.tolist() == want_n and max(want_n) > 4
        assert np.allclose(np.exp(logp), want_p, rtol=0, atol=1e-12)


def test_distinct_patterns_are_the_distinct_ones():
    from baselines.infinigram import distinct_patterns
    rng = np.random.default_rng(3)
    for alphabet, size in ((2, 300), (3, 500), (70000, 200)):  # (the last: ids past 2 bytes)
        query = rng.integers(0, alphabet, size=size) if alphabet > 3 else np.tile(rng.integers(0, alphabet, 7), size // 7)
        qpos = rng.integers(0, len(query), size=400)
        qlen = np.minimum(rng.integers(0, 12, size=400), len(query) - qpos)
        first, inverse = distinct_patterns(query, qpos, qlen)
        patterns = [tuple(query[a:a + n]) for a, n in zip(qpos, qlen)]
        assert [patterns[first[i]] for i in inverse] == patterns
        assert len({patterns[k] for k in first}) == len(first)


@pytest.mark.parametrize("stream_of", ["one word", "a repeated phrase", "random"])
def test_repeated_patterns_searched_once_score_as_each_searched(stream_of, monkeypatch):
    """A held-out stream that repeats itself (one word over and over: 2.4 ms a token when every position's
    1,000-token context was searched on its own) scores as when every pattern is searched on its own."""
    import baselines.infinigram as infinigram
    rng = np.random.default_rng(5)
    phrase = " ".join(f"w{i}" for i in rng.integers(0, 6, size=9))
    held = {"one word": "w1 " * 3000, "a repeated phrase": (phrase + " ") * 300,
            "random": " ".join(f"w{i}" for i in rng.integers(0, 6, size=3000))}[stream_of]
    train = " ".join(["w1"] * 2000 + [phrase] * 50 + [f"w{i}" for i in rng.integers(0, 6, size=2000)])
    corpus = make_corpus(train, held, held)
    model = fitted(corpus)
    stream, start = corpus.stream_for("test")
    n, logp = model.sparse.score(stream, start)
    monkeypatch.setattr(infinigram, "DISTINCT_FROM", len(stream) + 1)   # every pattern searched on its own
    each_n, each_logp = model.sparse.score(stream, start)
    assert n.tolist() == each_n.tolist() and np.array_equal(logp, each_logp)
    assert n.max() > (400 if stream_of != "random" else 4)   # long contexts matched


def test_contract_distributions_and_scores():
    corpus = make_corpus(" ".join([TRAIN] * 3), VALID, TEST)
    model = fitted(corpus)
    assert model.weights.shape == (BUCKETS, 2) and np.allclose(model.weights.sum(axis=1), 1)
    assert_normalised(model, corpus)
    assert_scores_match_distribution(model, corpus, "valid")
    assert_scores_match_distribution(model, corpus, "test")
    assert np.isfinite(split_logprobs(model, corpus, "test")).all()


def test_buckets_and_bad_options(tmp_path):
    assert effective_n_bucket(np.array([1, 2, 15, 16, 400])).tolist() == [0, 1, 14, 15, 15]
    with pytest.raises(LMBenchError, match="max_context"):
        InfiniGram(max_context=0)
    with pytest.raises(LMBenchError, match="max_context"):
        UnboundedNgram(None, 3, max_context=-1)
    with pytest.raises(LMBenchError, match="training ids"):
        SuffixIndex.build(np.array([0, 3]), 3, tmp_path)
    with pytest.raises(LMBenchError, match="at least one token"):
        SuffixIndex.build(np.array([], dtype=np.int32), 3, tmp_path)


def test_cli_infini_gram_and_bucketed_mix(tmp_path, capsys):
    paths = write_splits(tmp_path, train=" ".join([TRAIN] * 4), valid=" ".join([VALID] * 2),
                         test=" ".join([TEST] * 2))
    out = tmp_path / "infini.npz"
    code, stdout, stderr = run_cli(capsys, "ngram", "--method", "infini-gram", *corpus_args(paths),
                                   "--save-logprobs", out, "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["method"] == "infini-gram" and result["kn_order"] == 5
    profile = result["test_by_effective_n"]
    assert sum(profile["tokens"]) == len(TEST.split()) * 2 and len(profile["kn_mean_logprob"]) == BUCKETS
    arrays = saved.load(out)
    for split in ("valid", "test"):
        assert arrays[f"effective_n_{split}"].shape == arrays[split].shape
        assert np.array_equal(arrays[f"buckets_{split}"], effective_n_bucket(arrays[f"effective_n_{split}"]))
    assert result["test_perplexity"] == pytest.approx(np.exp(-arrays["test"].mean()))
    kn = tmp_path / "kn.npz"
    assert run_cli(capsys, "ngram", "--method", "kneser-ney", *corpus_args(paths), "--save-logprobs", kn)[0] == 0
    code, stdout, stderr = run_cli(capsys, "mix", kn, out, "--buckets-from", out, "--json")
    assert code == 0, stderr
    mixed = json.loads(stdout)
    assert mixed["method"] == "bucketed" and len(mixed["weights"]) == 1 + max(
        int(arrays["buckets_valid"].max()), int(arrays["buckets_test"].max()))


def test_report_figure_of_test_tokens_by_effective_n(tmp_path):
    from reports.building.figures import effective_n
    corpus = make_corpus(" ".join([TRAIN] * 3), VALID, TEST)
    profile = fitted(corpus).profile(corpus, "test")
    assert sum(profile["tokens"]) == len(TEST.split()) and profile["n"] == list(range(1, BUCKETS + 1))
    assert effective_n({"rows": [{"id": "infini-gram-kn-5", "effective_n": profile}]}, tmp_path).exists()
    assert effective_n({"rows": [{"id": "kn-interp-5"}]}, tmp_path) is None  # a report without the row

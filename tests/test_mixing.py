import math

import numpy as np
import pytest

from baselines.unigram import AddOneUnigram
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel, perplexity, split_logprobs, split_perplexity
from lmbench.interpolation import fit_weights, mix_logprobs
from mixing.mixture import Mixture
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus


def test_fixed_half_half_by_hand():
    logprobs = np.log([[0.5, 0.1], [0.1, 0.3]])
    mixed = mix_logprobs(logprobs, np.array([0.5, 0.5]))
    assert np.allclose(np.exp(mixed), [0.3, 0.2])


def test_em_finds_the_dominant_model_and_never_loses_likelihood():
    rng = np.random.default_rng(0)
    good = np.log(rng.uniform(0.2, 0.9, size=2000))
    bad = np.log(rng.uniform(0.001, 0.01, size=2000))
    logprobs = np.stack([good, bad])
    weights = fit_weights(logprobs)[0]
    assert weights.sum() == pytest.approx(1) and weights[0] > 0.95
    fitted = mix_logprobs(logprobs, weights).mean()
    for w in np.linspace(0.01, 0.99, 25):
        assert fitted >= mix_logprobs(logprobs, np.array([w, 1 - w])).mean() - 1e-9


def test_two_point_em_matches_the_closed_form():
    # tokens: model A gives 1 / 0, model B gives 0 / 1 (nearly): the best weights are the token shares
    eps = 1e-12
    logprobs = np.log([[1 - eps, 1 - eps, 1 - eps, eps], [eps, eps, eps, 1 - eps]])
    assert np.allclose(fit_weights(logprobs, tol=1e-12)[0], [0.75, 0.25], atol=1e-6)


def test_bucketed_weights_follow_each_bucket():
    logprobs = np.log([[0.9, 0.9, 0.01, 0.01], [0.01, 0.01, 0.9, 0.9]])
    history = []
    weights = fit_weights(logprobs, np.array([0, 0, 1, 1]), n_buckets=3, history=history)
    assert np.all(np.diff(history) >= -1e-9) and len(history) > 2
    assert weights.shape == (3, 2)
    assert weights[0, 0] > 0.98 and weights[1, 1] > 0.98
    assert np.allclose(weights[2], [0.5, 0.5])  # an empty bucket keeps its uniform start
    assert np.allclose(weights.sum(axis=1), 1)


def test_bad_inputs_are_refused():
    with pytest.raises(LMBenchError, match="-inf"):
        fit_weights(np.array([[0.0, -np.inf], [-1.0, -np.inf]]))
    assert np.isfinite(mix_logprobs(np.array([[0.0, -np.inf], [-1.0, -2.0]]), np.array([0.5, 0.5]))).all()
    with pytest.raises(LMBenchError, match="buckets"):
        fit_weights(np.zeros((2, 3)), np.array([0, 1, 5]), n_buckets=2)
    with pytest.raises(LMBenchError, match="summing to 1"):
        Mixture([AddOneUnigram()], method="fixed", weights=[0.3])


class AddOneBigram(LanguageModel):
    """A tiny second component: P(w | v) = (c(v w) + 1) / (c(v) + V)."""
    order = 2

    def _fit(self, corpus):
        v = self.vocab_size
        self.counts = np.ones((v, v))
        np.add.at(self.counts, (corpus.train[:-1], corpus.train[1:]), 1)

    def _row(self, previous):
        return self.counts[previous] / self.counts[previous].sum(axis=-1, keepdims=True)

    def score(self, stream, start):
        positions = np.arange(start, len(stream))
        previous = np.where(positions > 0, stream[np.maximum(positions - 1, 0)], 0)
        return np.log(self._row(previous)[np.arange(len(positions)), stream[positions]])

    def distribution(self, context):
        return self._row(context[-1] if len(context) else 0)


class FirstTokenBuckets:
    """Bucket = whether the previous token is id 1."""
    num_buckets = 2

    def buckets(self, stream, start):
        positions = np.arange(start, len(stream))
        return (stream[np.maximum(positions - 1, 0)] == 1).astype(np.int64) * (positions > 0)


@pytest.mark.parametrize("method", ["fixed", "em", "bucketed"])
def test_mixture_is_a_normalised_language_model(method):
    corpus = make_corpus("a b a c a b b a c c a", "a b c a a b", "c a b")
    parts = [AddOneUnigram().fit(corpus), AddOneBigram().fit(corpus)]
    mixture = Mixture(parts, method=method, weights=[0.5, 0.5] if method == "fixed" else None,
                      bucketer=FirstTokenBuckets()).fit(corpus)
    assert_normalised(mixture, corpus)
    assert_scores_match_distribution(mixture, corpus)
    assert_scores_match_distribution(mixture, corpus, "test")
    if method != "fixed":  # EM on valid cannot do worse on valid than either component alone
        assert split_perplexity(mixture, corpus, "valid") <= min(split_perplexity(p, corpus, "valid") for p in parts) * (1 + 1e-5)


def test_fixed_mixture_by_hand():
    corpus = make_corpus("a a b", "a b", "b")
    unigram = AddOneUnigram().fit(corpus)
    mixture = Mixture([unigram, unigram], method="fixed", weights=[0.25, 0.75]).fit(corpus)
    assert math.isclose(split_perplexity(mixture, corpus, "test"), split_perplexity(unigram, corpus, "test"))
    assert math.isclose(perplexity(split_logprobs(mixture, corpus, "valid")), 1 / math.sqrt(3 / 6 * 2 / 6))


def test_mix_command_on_saved_logprobs(tmp_path, capsys):
    import json

    from lmbench_cli import main
    np.savez(tmp_path / "a.npz", valid=np.log([0.5, 0.1]), test=np.log([0.5]))
    np.savez(tmp_path / "b.npz", valid=np.log([0.1, 0.3]), test=np.log([0.3]),
             buckets_valid=np.array([0, 1]), buckets_test=np.array([1]))
    assert main(["mix", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--method", "fixed",
                 "--weights", "0.5", "0.5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert math.isclose(result["valid_perplexity"], 1 / math.sqrt(0.3 * 0.2))
    assert math.isclose(result["test_perplexity"], 1 / 0.4)
    assert main(["mix", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--method", "bucketed",
                 "--buckets-from", str(tmp_path / "b.npz"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weights"][0][0] > 0.99 and result["weights"][1][1] > 0.99  # each bucket picks its best
    assert main(["mix", str(tmp_path / "a.npz"), str(tmp_path / "missing.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_bucketed_mixture_with_the_deleted_interpolation_buckets():
    from baselines.deleted_interpolation import DeletedInterpolationTrigram
    corpus = make_corpus("a b a c a b b a c c a b a", "a b c a a b c", "c a b")
    trigram = DeletedInterpolationTrigram().fit(corpus)
    mixture = Mixture([trigram, AddOneBigram().fit(corpus)], method="bucketed", bucketer=trigram).fit(corpus)
    assert mixture.weights.shape == (trigram.num_buckets, 2)
    assert_normalised(mixture, corpus)
    assert_scores_match_distribution(mixture, corpus, "test")

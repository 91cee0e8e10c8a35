"""Words outside the vocabulary initialised from their context (section 5.1): the initialisation
equals the formula, the grown distribution sums to 1 and is what the scores are the log of, the
NPLM's closed form, the raw words kept by the corpora, the refusals and the command line."""

import json

import numpy as np
import pytest
import torch

from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs
from lmbench_cli import main
from neural import oov
from neural.networks.energy import EnergyNetwork
from neural.networks.energy import EnergyShape
from neural.networks.nplm import NPLMShape
from neural.scoring import WindowLanguageModel, context_windows
from neural.networks.nplm import NPLM
from neural.training.trainer import train_network
from tests.helpers import corpus_args, write_splits
from tests.lm_checks import make_corpus
from tests.test_nplm_train import TEXT, tiny

# valid meets "zebra" twice, "yak" once and a literal <unk>: all three are <unk> ids
CORPUS = make_corpus(TEXT, "the zebra sat on the mat . a yak saw the zebra . <unk> sat .", "a dog sat on a zebra .")
V = len(CORPUS.vocab)


def random_net(kind, seed=0):
    torch.manual_seed(seed)
    net = (NPLM(NPLMShape(n=3, m=4, h=5, direct=True), V) if kind == "nplm" else EnergyNetwork(EnergyShape(n=3, m=4, h=5, direct=True), V)).double()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()
    return net.eval()


def test_the_corpus_keeps_the_raw_words_behind_unk():
    assert CORPUS.unk_words["valid"].tolist() == ["zebra", "yak", "zebra", "<unk>"]
    assert CORPUS.unk_words["train"].tolist() == []


@pytest.mark.parametrize("kind", ["nplm", "energy"])
def test_initialisation_is_the_expectation_under_the_context_distribution(kind):
    net = random_net(kind)
    grown = oov.grow(net, CORPUS, "valid")
    assert grown.words == ["zebra", "yak"] and grown.base_size == V
    stream = grown.stream[grown.start:]
    assert stream.tolist().count(V) == 2 and stream.tolist().count(V + 1) == 1  # zebra reused
    assert stream.tolist().count(CORPUS.vocab.unk_id) == 1  # the literal <unk> stays <unk>
    contexts = torch.from_numpy(context_windows(grown.stream, 2)[grown.first].copy())
    tables = [name for name, _ in net.named_parameters() if name in net.WORD_TABLES]
    # zebra: P over V from the original network; yak: over V + zebra, from the grown one
    for i, (model, size) in enumerate([(net, V), (grown.net, V + 1)]):
        p = torch.softmax(model(contexts[i: i + 1])[0, :size], dim=0)  # (size,) P(. | h)
        for name in tables:
            table = grown.net.get_parameter(name).detach()
            torch.testing.assert_close(table[V + i], p @ table[:size], rtol=1e-12, atol=1e-12)
    for name, value in net.state_dict().items():  # the rest of the network is unchanged
        grown_value = grown.net.state_dict()[name]
        assert torch.equal(grown_value[:V] if name in tables else grown_value, value)


@pytest.mark.parametrize("kind", ["nplm", "energy"])
def test_grown_distribution_sums_to_one_and_scores_are_its_log(kind):
    net = random_net(kind, seed=1)
    grown = oov.grow(net, CORPUS, "valid")
    scores = oov.score(grown)
    assert scores.shape == (len(CORPUS.valid),)
    for position in range(grown.start, len(grown.stream)):
        p = oov.distribution(grown, position)
        met = int((grown.first <= position).sum())
        assert abs(p.sum() - 1.0) <= 1e-12 and np.all(p[:V + met] > 0) and np.all(p[V + met:] == 0)
        assert scores[position - grown.start] == pytest.approx(np.log(p[grown.stream[position]]), abs=1e-12)
    # before the first new word the vocabulary is V: the scores are the <unk> convention's
    before = grown.first[0] - grown.start
    unk = split_logprobs(WindowLanguageModel(net), CORPUS, "valid")
    np.testing.assert_allclose(scores[:before], unk[:before], rtol=0, atol=1e-12)


def test_nplm_new_word_gets_one_over_the_perplexity_of_its_context():
    """y_zebra = sum_i P(i | h) y_i, so before renormalisation P(zebra | h) = exp(-entropy of P(. | h))."""
    net = random_net("nplm", seed=2)
    grown = oov.grow(net, CORPUS, "valid")
    first = grown.first[0]
    p = torch.softmax(net(torch.from_numpy(context_windows(grown.stream, 2)[first: first + 1].copy()))[0], 0)
    unnormalised = torch.exp((p * p.log()).sum()).item()  # exp(-H)
    expected = np.log(unnormalised / (1 + unnormalised))
    assert oov.score(grown)[first - grown.start] == pytest.approx(expected, rel=1e-10)


def test_splits_grow_apart_and_neighbours_come_from_the_vocabulary():
    grown = oov.grow(random_net("energy"), CORPUS, "test")
    assert grown.words == ["zebra"]  # test starts again from V
    near = oov.neighbors(grown, "zebra", 3)
    assert len(near) == 3 and all(i < V for i, _ in near)
    assert oov.summary(grown) == {"oov_words": 1, "oov_tokens": 1, "oov_frequent": {"zebra": 1}}


def test_class_networks_and_corpora_without_raw_words_are_refused():
    classes = torch.from_numpy(np.arange(V) % 3)
    with pytest.raises(LMBenchError, match="has no place for a new word"):
        oov.grow(NPLM(NPLMShape(n=3, m=4, h=5, direct=True), V, output="class", structure=classes), CORPUS, "valid")
    bare = make_corpus(TEXT, "a zebra", "a yak")
    bare.unk_words = None
    with pytest.raises(LMBenchError, match="keeps no raw words"):
        oov.grow(random_net("nplm"), bare, "valid")


def test_cli_reports_both_conventions_and_the_neighbours_of_a_new_word(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    args = corpus_args(write_splits(tmp_path, train=TEXT, valid="the zebra sat on the mat . a yak saw the zebra .",
                                    test="a dog sat on a zebra ."))
    out = tmp_path / "run"
    train_network(make_corpus(TEXT, "x", "y"), tiny(model="energy", epochs=1), out, progress=False, evaluate=False)
    assert main(["nplm", "eval", str(out), "--split", "valid", "--oov", "init", *args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["oov_words"] == 2 and result["oov_tokens"] == 3 and result["oov_frequent"]["zebra"] == 2
    assert np.isfinite(result["perplexity"]) and np.isfinite(result["perplexity_oov_init"])
    assert result["perplexity_oov_init"] != result["perplexity"]
    assert main(["nplm", "neighbors", str(out), "zebra", "cat", "--oov-from", "valid", "--k", "2", *args,
                 "--json"]) == 0
    assert set(map(len, json.loads(capsys.readouterr().out).values())) == {2}
    assert main(["nplm", "neighbors", str(out), "zebra", *args]) == 2
    assert "--oov-from" in capsys.readouterr().err

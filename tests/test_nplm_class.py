"""The class-factored NPLM: the word -> class maps, the distribution against its definition, the
objective's loss and gradient against a dense reference, sparse updates, training, and the refusals
(normalisation, scores, the unigram start, save, load and resume: tests/test_nplm_families.py)."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from baselines.clustering import cluster
from lmbench_cli import main
from lmbench.errors import LMBenchError
from lmbench.model import split_perplexity
from neural.outputs.classes import frequency_classes, word_classes
from neural.networks.nplm import NPLMShape
from neural.scoring import WindowLanguageModel
from neural.networks.nplm import NPLM
from neural.outputs.objectives import make_objective
from neural.training.checkpoint import BEST, CHECKPOINT, load_network, read_state
from neural.training.trainer import train_network
from tests.lm_checks import assert_normalised, assert_scores_match_distribution
from tests.test_nplm_train import CORPUS, text_corpus_args, tiny

V = len(CORPUS.vocab)
CLASSES = torch.from_numpy(frequency_classes(np.bincount(CORPUS.train, minlength=V), 4))


def class_net(seed=0, dtype=torch.float64) -> NPLM:
    """A tiny class network with every parameter random (a peaked distribution, far from uniform)."""
    torch.manual_seed(seed)
    net = NPLM(NPLMShape(n=3, m=4, h=5, direct=True), V, output="class", structure=CLASSES).to(dtype)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()
    return net


def reference_log_probs(net: NPLM, context: torch.Tensor) -> torch.Tensor:
    """log P(. | context) (B, V) from the definition, densely, with autograd: log softmax(s)[c(w)]
    + log softmax of y restricted to the words of c(w)."""
    z = net.features(context)
    log_class = torch.log_softmax(z @ net.output.class_out.t() + net.output.class_b, dim=1)  # (B, C)
    y = net(context)  # (B, V)
    same = net.output.word_class[None, :] == net.output.word_class[:, None]  # (V, V): w and j in one class
    within = y - torch.logsumexp(y[:, None, :].masked_fill(~same, -torch.inf), dim=2)  # (B, V)
    return log_class[:, net.output.word_class] + within


def batch(seed=1, size=9):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (size, 2), generator=generator), torch.randint(0, V, (size,), generator=generator)


def test_frequency_classes_bin_sqrt_counts():
    # sqrt counts, most frequent first: w5 4, w0 3, w1 2, w2 1, w3 1, w4 0 (total 11); C = 3 bins:
    # floor(3 * before / 11) = 0, 1 (4), 1 (7), 2 (9), 2 (10), 2 (11, the last bin)
    assert frequency_classes(np.array([9, 4, 1, 1, 0, 16]), 3).tolist() == [1, 1, 2, 2, 2, 0]
    # a word heavier than a bin: bins 1 and 2 stay empty and are dropped
    assert frequency_classes(np.array([100, 1, 1]), 4).tolist() == [0, 1, 1]


def test_default_number_of_classes_and_exchange_source(tmp_path, monkeypatch):
    classes = word_classes(CORPUS, tiny(objective="class"))
    assert int(classes.max()) + 1 == round(V ** 0.5) and classes.dtype == torch.int64
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path))
    exchange = word_classes(CORPUS, tiny(objective="class", classes=3, class_source="exchange"), progress=False)
    expected = cluster(CORPUS.vocab, CORPUS.train, 3, progress=False).word_class
    assert exchange.tolist() == expected.tolist()
    with pytest.raises(LMBenchError, match="cannot make 40 classes"):
        word_classes(CORPUS, tiny(objective="class", classes=40))


def test_factored_distribution_is_the_definition():
    net = class_net().eval()
    with torch.no_grad():  # the words of class 0 far below the others: exp underflows without per-class maxima
        net.output.b[net.output.word_class == 0] -= 1000.0
    context, target = batch()
    expected = reference_log_probs(net, context).detach()
    torch.testing.assert_close(net.log_probs(context), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(net.log_probs(context, target), expected[torch.arange(len(target)), target],
                               rtol=0, atol=1e-12)


def test_loss_and_gradient_are_those_of_the_factored_distribution():
    net = class_net(2)
    context, target = batch(3)
    objective = make_objective("class", torch.full((V,), 1.0 / V), 1, torch.Generator())
    loss = objective.loss(net, net.features(context), target)
    model = WindowLanguageModel(net)  # -log of distribution()[target], one context at a time
    expected = -np.mean([np.log(model.distribution(c.tolist())[w]) for c, w in zip(context, target.tolist())])
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    net.train()
    reference = -reference_log_probs(net, context)[torch.arange(len(target)), target].mean()
    params = list(net.parameters())
    for got, want in zip(torch.autograd.grad(loss, params), torch.autograd.grad(reference, params)):
        torch.testing.assert_close(got.to_dense(), want.to_dense(), rtol=1e-9, atol=1e-12)


def test_update_touches_only_the_rows_of_the_classes_in_the_batch():
    net = class_net(4, torch.float32)
    context, target = batch(5, size=3)
    objective = make_objective("class", torch.full((V,), 1.0 / V), 1, torch.Generator())
    objective.loss(net, net.features(context), target).backward()
    assert net.output.out.grad.is_sparse and net.C.grad.is_sparse
    batch_classes = set(net.output.word_class[target].tolist())
    in_classes = {w for w in range(V) if int(net.output.word_class[w]) in batch_classes}
    assert len(in_classes) < V  # some class is not in the batch
    assert set(net.output.out.grad.coalesce().indices()[0].tolist()) == in_classes
    assert set(torch.nonzero(net.output.b.grad)[:, 0].tolist()) <= in_classes
    assert net.output.class_out.grad.shape == (net.num_classes, net.output.out.shape[1])


def test_weight_decay_takes_the_class_weights_not_the_class_biases():
    net = class_net()
    decay, biases = net.decay_parameters(), net.bias_parameters()
    assert any(p is net.output.class_out for p in decay) and not any(p is net.output.class_b for p in decay)
    assert any(p is net.output.class_b for p in biases)
    assert {id(p) for p in decay} | {id(p) for p in biases} == {id(p) for p in net.parameters()}


def test_training_lowers_valid_perplexity_and_the_saved_network_scores_alike(tmp_path):
    config = tiny(objective="class", classes=3, epochs=4)
    train_network(CORPUS, dataclasses.replace(config, max_steps=0), tmp_path / "start", progress=False)
    start = load_network(tmp_path / "start", CORPUS, device="cpu", which=CHECKPOINT)  # the unigram start
    result = train_network(CORPUS, config, tmp_path / "run", progress=False)
    assert result["valid_perplexity"] < 0.8 * split_perplexity(start, CORPUS, "valid")
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert result["valid_perplexity"] == min(r["valid_perplexity"] for r in log)  # loaded == in memory
    model = load_network(tmp_path / "run", CORPUS, device="cpu")
    assert model.net.num_classes == 3
    assert_normalised(model, CORPUS)
    assert_scores_match_distribution(model, CORPUS)
    full = load_network(tmp_path / "run", CORPUS, device="cpu", factored=False)
    assert split_perplexity(full, CORPUS, "valid") != pytest.approx(result["valid_perplexity"])


def test_another_class_map_is_refused(tmp_path):
    state = class_net().state_dict()
    other = CLASSES.clone()  # two words of two classes swapped: the same class sizes, another map
    first, second = 0, int(torch.nonzero(CLASSES != CLASSES[0])[0])
    other[[first, second]] = CLASSES[[second, first]]
    for classes, message in ((other, "another output layer"), (None, r"\(4 classes\).*\(no class layer\)")):
        with pytest.raises(LMBenchError, match=message):
            NPLM(NPLMShape(n=3, m=4, h=5, direct=True), V, output="softmax" if classes is None else "class",
                 structure=classes).double().load_state_dict(state)
    train_network(CORPUS, tiny(objective="class", classes=3, epochs=1), tmp_path, progress=False)
    with pytest.raises(LMBenchError, match=r"--classes"):
        train_network(CORPUS, tiny(objective="class", classes=4, epochs=2), tmp_path, resume=True, progress=False)


def test_class_options_need_the_class_objective():
    with pytest.raises(LMBenchError, match="--objective class"):
        tiny(objective="nce", classes=10)
    with pytest.raises(LMBenchError, match="class source"):
        tiny(objective="class", class_source="brown")
    with pytest.raises(LMBenchError, match="at least 2 classes"):
        tiny(objective="class", classes=1)


def test_cli_trains_a_class_network(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    corpus_args = text_corpus_args(tmp_path)
    out = tmp_path / "run"
    assert main(["nplm", "train", *corpus_args, "--n", "3", "--m", "4", "--h", "5", "--objective", "class",
                 "--classes", "3", "--class-source", "exchange", "--epochs", "1", "--out", str(out),
                 "--device", "cpu", "--threads", "1", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["objective"] == "class" and np.isfinite(trained["test_perplexity"])
    assert int(read_state(out / BEST)["model"]["output.structure"].max()) + 1 == 3

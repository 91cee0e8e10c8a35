"""The contract every network family (neural/families.py) and output layer (neural.config.OBJECTIVES)
meets, tested once over the registries: a distribution over V for seen and unseen contexts whose log is
the score; the unigram start; the exact gradient of importance sampling with every word drawn; sampled
updates touching only the rows they use; save, load and resume giving identical scores."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from neural.config import OBJECTIVES
from neural.families import FAMILIES, load
from neural.lm import NPLMLanguageModel
from neural.objectives import make_objective
from neural.train import load_nplm, train_nplm
from tests.lm_checks import assert_normalised, assert_scores_match_distribution
from tests.test_nplm_train import CORPUS, tiny

V = len(CORPUS.vocab)
TINY_SHAPE = dict(n=3, m=4, h=5)  # the small shape of every family that has these fields


def supports(family: str, objective: str) -> bool:
    outputs = FAMILIES[family].shape.outputs
    return outputs is None or OBJECTIVES[objective].output in outputs


def cases(sampled: bool | None = None) -> list[tuple[str, str]]:
    """(family, objective) pairs of every registered family with every objective it trains with; the
    exact objectives are the output layers."""
    return [(family, name) for family in FAMILIES for name, objective in OBJECTIVES.items()
            if supports(family, name) and (sampled is None or objective.sampled == sampled)]


LAYERS = cases(sampled=False)  # every family with every output layer it has
SAMPLED = cases(sampled=True)


def config(family: str, objective: str, **overrides):
    entry = FAMILIES[family]
    shape = {k: v for k, v in TINY_SHAPE.items() if k in entry.shape_fields()}
    return tiny(model=family, objective=objective, **shape, **overrides)


def network(family: str, objective: str, *, seed: int = 0, dtype=torch.float32, scale: float = 0.5):
    """A network of the family with the objective's output layer over CORPUS, its parameters random."""
    run = config(family, objective)
    entry = OBJECTIVES[objective]
    structure = load(entry.structure)(CORPUS, run, progress=False) if entry.structure else None
    torch.manual_seed(seed)
    net = FAMILIES[family].network_class()(run.shape, V, output=entry.output, structure=structure).to(dtype)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, scale)
    return net


@pytest.mark.parametrize("family,objective", LAYERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_distribution_sums_to_one_and_its_log_is_the_score(family, objective, dtype):
    model = NPLMLanguageModel(network(family, objective, dtype=dtype)).attach(CORPUS)
    assert_normalised(model, CORPUS)
    assert_scores_match_distribution(model, CORPUS)
    assert_scores_match_distribution(model, CORPUS, split="train")


@pytest.mark.parametrize("family,objective", LAYERS)
def test_unigram_start_gives_the_unigram_in_every_context(family, objective):
    net = network(family, objective, dtype=torch.float64)
    with torch.no_grad():
        for p in net.decay_parameters():  # the weights and C: what multiplies the context
            p.zero_()
    unigram = torch.arange(1, V + 1, dtype=torch.float64)
    unigram /= unigram.sum()
    net.set_unigram_biases(unigram)
    log_p = net.log_probs(torch.randint(0, V, (3, 2)))
    torch.testing.assert_close(log_p, unigram.log().expand(3, V), rtol=0, atol=1e-12)


@pytest.mark.parametrize("family", [f for f in FAMILIES if supports(f, "importance")])
def test_importance_sampling_with_every_word_is_the_exact_gradient(family):
    """With a uniform proposal and every word drawn once, the importance-sampling loss is the exact
    log-likelihood: the hook scores what the full softmax scores."""
    net = network(family, "softmax", dtype=torch.float64, seed=5)
    context, target = torch.randint(0, V, (6, 2)), torch.randint(0, V, (6,))
    uniform = torch.full((V,), 1.0 / V, dtype=torch.float64)
    sampled = make_objective("importance", uniform, V, torch.Generator()).loss_with(
        net, net.features(context), target, torch.arange(V))
    exact = net.loss(net.features(context), target)
    assert sampled.item() == pytest.approx(exact.item(), rel=1e-12)
    params = list(net.parameters())
    for got, want in zip(torch.autograd.grad(sampled, params), torch.autograd.grad(exact, params)):
        torch.testing.assert_close(got.to_dense(), want.to_dense(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("family,objective", SAMPLED)
def test_sampled_update_touches_only_the_rows_it_uses(family, objective):
    """Every gradient of a parameter with one row per word is zero outside the contexts, the targets
    and the sample, and those of the output rows are sparse."""
    net = network(family, objective, dtype=torch.float64, seed=6)
    context, target = torch.randint(0, V, (6, 2)), torch.randint(0, V, (6,))
    unigram = torch.full((V,), 1.0 / V, dtype=torch.float64)
    make_objective(objective, unigram, 3, torch.Generator().manual_seed(5)).loss(
        net, net.features(context), target).backward()
    sample = torch.multinomial(unigram, 3, replacement=True, generator=torch.Generator().manual_seed(5))
    used = set(context.flatten().tolist()) | set(target.tolist()) | set(sample.tolist())
    tables = {name: p for name, p in net.named_parameters() if name in net.WORD_TABLES}
    assert len(tables) >= 2
    for name, p in tables.items():
        grad = p.grad.coalesce() if p.grad.is_sparse else p.grad.to_sparse(1).coalesce()
        rows = set(grad.indices()[0].tolist())
        assert rows <= used and rows, name
    assert sum(p.grad.is_sparse for p in tables.values()) >= 2  # C and the output rows


@pytest.mark.parametrize("family,objective", cases())
def test_saved_loaded_and_resumed_networks_score_identically(tmp_path, family, objective):
    run = config(family, objective, epochs=2, batch_size=16, min_gain=-1.0)
    whole = train_nplm(CORPUS, run, tmp_path / "whole", progress=False)
    steps_per_epoch = math.ceil(len(CORPUS.train) / run.batch)
    killed = train_nplm(CORPUS, dataclasses.replace(run, max_steps=steps_per_epoch + 2), tmp_path / "split",
                        progress=False)
    assert killed["stopped"] == "max_steps"
    resumed = train_nplm(CORPUS, run, tmp_path / "split", resume=True, progress=False)
    assert resumed["updates"] == whole["updates"]
    one, other = (load_nplm(tmp_path / d, CORPUS, device="cpu") for d in ("whole", "split"))
    assert type(one.net) is FAMILIES[family].network_class()
    for split in ("valid", "test"):
        np.testing.assert_array_equal(one.logprobs(split), other.logprobs(split))
    assert whole["test_perplexity"] == pytest.approx(one.perplexity("test"), rel=1e-12)
    assert whole["valid_perplexity"] < V  # it learned something

"""The contract every network family (neural/families.py) and output layer (neural.config.OBJECTIVES)
meets, tested once over the registries: a distribution over V for seen and unseen contexts whose log is
the score; the unigram start; the exact gradient of importance sampling with every word drawn; sampled
updates touching only the rows they use; save, load and resume giving identical scores. Then the tree
softmax's own properties (neural/outputs/tree.py)."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from lmbench.model import split_logprobs, split_perplexity
from neural.config import OBJECTIVES
from neural.families import FAMILIES, load
from neural.scoring import WindowLanguageModel
from neural.outputs.objectives import make_objective
from neural.training.checkpoint import load_network
from neural.training.trainer import train_network
from neural.outputs.tree import huffman_tree, tree_paths
from tests.lm_checks import assert_normalised, assert_scores_match_distribution
from tests.test_nplm_train import CORPUS, tiny

V = len(CORPUS.vocab)


def window_families() -> list[str]:
    """The registered families that read windows, as the registry has them now; the stream families
    (LSTM, Transformer) pass the same checks through their own trainer and scorer in
    tests/test_stream_networks.py."""
    return [name for name, entry in FAMILIES.items() if entry.context == "window"]


def supports(family: str, objective: str) -> bool:
    outputs = FAMILIES[family].shape.outputs
    return outputs is None or OBJECTIVES[objective].output in outputs


def cases(sampled: bool | None = None) -> list[tuple[str, str]]:
    """(family, objective) pairs of every registered family with every objective it trains with; the
    exact objectives are the output layers."""
    return [(family, name) for family in window_families() for name, objective in OBJECTIVES.items()
            if supports(family, name) and (sampled is None or objective.sampled == sampled)]


LAYERS = cases(sampled=False)  # every family with every output layer it has
SAMPLED = cases(sampled=True)


def config(family: str, objective: str, **overrides):
    return tiny(model=family, objective=objective, **overrides)  # (its small shape: the family's fields)


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
    model = WindowLanguageModel(network(family, objective, dtype=dtype))
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


@pytest.mark.parametrize("family", [f for f in window_families() if supports(f, "importance")])
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
    """Every gradient of a parameter with one row per word (the network's WORD_TABLES) is zero outside the
    contexts, the targets and the sample, and that of each table with a row of features per word (a
    matrix, not a bias vector: the NPLM's C and [U, W], a log-bilinear model's one shared table) is sparse."""
    net = network(family, objective, dtype=torch.float64, seed=6)
    context, target = torch.randint(0, V, (6, 2)), torch.randint(0, V, (6,))
    unigram = torch.full((V,), 1.0 / V, dtype=torch.float64)
    make_objective(objective, unigram, 3, torch.Generator().manual_seed(5)).loss(
        net, net.features(context), target).backward()
    sample = torch.multinomial(unigram, 3, replacement=True, generator=torch.Generator().manual_seed(5))
    used = set(context.flatten().tolist()) | set(target.tolist()) | set(sample.tolist())
    tables = {name: p for name, p in net.named_parameters() if name in net.WORD_TABLES}
    assert tables
    for name, p in tables.items():
        grad = p.grad.coalesce() if p.grad.is_sparse else p.grad.to_sparse(1).coalesce()
        rows = set(grad.indices()[0].tolist())
        assert rows <= used and rows, name
        assert p.grad.is_sparse or p.dim() == 1, name


@pytest.mark.parametrize("family,objective", cases())
def test_saved_loaded_and_resumed_networks_score_identically(tmp_path, family, objective):
    run = config(family, objective, epochs=2, batch_size=16, min_gain=-1.0)
    whole = train_network(CORPUS, run, tmp_path / "whole", progress=False)
    steps_per_epoch = math.ceil(len(CORPUS.train) / run.batch)
    killed = train_network(CORPUS, dataclasses.replace(run, max_steps=steps_per_epoch + 2), tmp_path / "split",
                        progress=False)
    assert killed["stopped"] == "max_steps"
    resumed = train_network(CORPUS, run, tmp_path / "split", resume=True, progress=False)
    assert resumed["updates"] == whole["updates"]
    one, other = (load_network(tmp_path / d, CORPUS, device="cpu") for d in ("whole", "split"))
    assert type(one.net) is FAMILIES[family].network_class()
    for split in ("valid", "test"):
        np.testing.assert_array_equal(split_logprobs(one, CORPUS, split), split_logprobs(other, CORPUS, split))
    assert whole["test_perplexity"] == pytest.approx(split_perplexity(one, CORPUS, "test"), rel=1e-12)
    assert whole["valid_perplexity"] < V  # it learned something


# -- the tree softmax -------------------------------------------------------------------------------

COUNTS = np.array([7.0, 1.0, 3.0, 3.0, 12.0])  # five words


def tree_network(groups=None, seed=1):
    torch.manual_seed(seed)
    from neural.networks.nplm import NPLMShape
    from neural.networks.nplm import NPLM
    tree = torch.from_numpy(huffman_tree(COUNTS, groups))
    net = NPLM(NPLMShape(n=3, m=2, h=3, direct=True), len(COUNTS), output="tree", structure=tree).double()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()
    return net


def test_huffman_tree_puts_the_frequent_words_near_the_root():
    paths = tree_paths(huffman_tree(COUNTS), len(COUNTS))
    # Huffman: 1+3 -> 4, 3+4 -> 7, 7+7 -> 14, 12+14: depths 1 (12), 2 (7), 3 (3), 4 (1, 3)
    assert paths["depth"].tolist() == [2, 4, 4, 3, 1]
    assert (paths["depth"] * COUNTS).sum() == 1 * 12 + 2 * 7 + 3 * 3 + 4 * 4


@pytest.mark.parametrize("groups", [None, np.array([0, 1, 1, 1, 0])])
def test_tree_path_probabilities_multiply_to_the_distribution(groups):
    net = tree_network(groups)
    layer = net.output
    context = torch.tensor([[1, 2], [4, 4], [0, 3]])
    z = net.features(context)
    scores = z @ layer.node_out.t() + layer.node_b  # (B, V - 1) every node's a_n . z + c_n
    by_hand = torch.ones(len(context), len(COUNTS), dtype=torch.float64)
    for w in range(len(COUNTS)):  # walk each word's path: the product of its decisions
        at = slice(int(layer.path_start[w]), int(layer.path_start[w] + layer.depth[w]))
        for node, sign in zip(layer.path_nodes[at].tolist(), layer.path_signs[at].tolist()):
            by_hand[:, w] *= torch.sigmoid(sign * scores[:, node])
    torch.testing.assert_close(net.log_probs(context).exp(), by_hand, rtol=1e-12, atol=0)
    torch.testing.assert_close(by_hand.sum(dim=1), torch.ones(3, dtype=torch.float64), rtol=1e-12, atol=0)
    if groups is not None:  # the words of one class share the decisions above their subtree, not another's
        second = [int(layer.path_nodes[int(layer.path_start[w]) + 1]) for w in (1, 2, 3, 0)]
        assert second[0] == second[1] == second[2] != second[3]


def test_tree_loss_and_gradient_are_those_of_the_exact_log_likelihood():
    net = tree_network()
    context, target = torch.tensor([[1, 2], [4, 4], [0, 3], [2, 2]]), torch.tensor([1, 4, 3, 0])
    loss = make_objective("tree", torch.full((5,), 0.2), 1, torch.Generator()).loss(
        net, net.features(context), target)
    layer = net.output  # the definition: -log of the product along the path, through autograd
    scores = net.features(context) @ layer.node_out.t() + layer.node_b  # (B, V - 1)
    reference = 0.0
    for i, w in enumerate(target.tolist()):
        at = slice(int(layer.path_start[w]), int(layer.path_start[w] + layer.depth[w]))
        for node, sign in zip(layer.path_nodes[at].tolist(), layer.path_signs[at].tolist()):
            reference = reference - torch.log(torch.sigmoid(sign * scores[i, node]))
    reference = reference / len(target)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    params = list(net.parameters())
    for got, want in zip(torch.autograd.grad(loss, params), torch.autograd.grad(reference, params)):
        torch.testing.assert_close(got.to_dense(), want.to_dense(), rtol=1e-9, atol=1e-12)


def test_tree_update_touches_only_the_nodes_on_the_batch_paths():
    net = tree_network()
    context, target = torch.tensor([[1, 2], [0, 3]]), torch.tensor([1, 4])
    make_objective("tree", torch.full((5,), 0.2), 1, torch.Generator()).loss(
        net, net.features(context), target).backward()
    layer = net.output
    on_paths = {int(n) for w in target.tolist()
                for n in layer.path_nodes[int(layer.path_start[w]): int(layer.path_start[w] + layer.depth[w])]}
    assert layer.node_out.grad.is_sparse
    assert set(layer.node_out.grad.coalesce().indices()[0].tolist()) == on_paths


def test_a_tree_network_resumes_exactly_and_refuses_another_tree(tmp_path):
    run = tiny(objective="tree", epochs=2, min_gain=-1.0)
    whole = train_network(CORPUS, run, tmp_path / "whole", progress=False)
    train_network(CORPUS, dataclasses.replace(run, max_steps=5), tmp_path / "split", progress=False)
    resumed = train_network(CORPUS, run, tmp_path / "split", resume=True, progress=False)
    assert resumed["valid_perplexity"] == whole["valid_perplexity"]
    assert resumed["test_perplexity"] == whole["test_perplexity"]
    from lmbench.errors import LMBenchError
    with pytest.raises(LMBenchError, match="another output layer"):  # the exchange tree is another tree
        train_network(CORPUS, dataclasses.replace(run, class_source="exchange", classes=3, epochs=3),
                   tmp_path / "whole", resume=True, progress=False)

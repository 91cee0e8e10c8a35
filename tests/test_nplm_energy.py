"""The energy-minimisation network (section 5.1): its equations on a hand-set tiny network, the
cancellation of the context biases, the batched candidate computation against a loop over
candidates, the exact loss in blocks, refused checkpoints, and the refusals (normalisation, scores,
the sampled objectives' rows, the unigram start, save, load and resume: tests/test_nplm_families.py)."""

import json

import numpy as np
import pytest
import torch

import neural.networks.energy
from lmbench.errors import LMBenchError
from lmbench_cli import main
from neural.networks.energy import EnergyNetwork
from neural.networks.energy import EnergyShape
from neural.training import weights_file
from neural.training.checkpoint import BEST, load_network
from neural.config import RunConfig
from neural.training.trainer import train_network
from tests.test_nplm_train import CORPUS, text_corpus_args, tiny

V = len(CORPUS.vocab)


def hand_net(direct: bool) -> EnergyNetwork:
    """V = 4, n = 3, m = 2, h = 2, with every weight set explicitly."""
    net = EnergyNetwork(EnergyShape(n=3, m=2, h=2, direct=direct), 4)
    with torch.no_grad():
        net.C.copy_(torch.tensor([[0.1, -0.2], [0.5, 0.3], [-0.4, 0.8], [1.0, 0.0]]))
        net.H.copy_(torch.tensor([[0.2, -0.1, 0.4, 0.3, -0.6, 0.5], [-0.5, 0.6, 0.1, -0.2, 0.7, 0.9]]))
        net.d.copy_(torch.tensor([0.05, -0.1]))
        net.v.copy_(torch.tensor([1.5, -0.8]))
        net.b.copy_(torch.tensor([0.3, -0.3, 0.0, 0.1]))
        if direct:
            net.W.copy_(torch.arange(16, dtype=torch.float32).reshape(4, 4).sin())
    return net.double()


def random_net(seed=0, direct=True, dtype=torch.float64, vocab=V) -> EnergyNetwork:
    torch.manual_seed(seed)
    net = EnergyNetwork(EnergyShape(n=3, m=4, h=5, direct=direct), vocab).to(dtype)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()
    return net


@pytest.mark.parametrize("direct", [True, False])
def test_energy_and_distribution_by_hand(direct):
    net = hand_net(direct)
    C, H, d, v, b = (t.detach().numpy() for t in (net.C, net.H, net.d, net.v, net.b))
    context = [2, 1]  # w_{t-2}, w_{t-1}
    energies = []
    for j in range(4):  # E(w_{t-2}, w_{t-1}, j) = v . tanh(d + H x) + b_2 + b_1 + b_j (+ W_j . x_ctx)
        x = np.concatenate([C[2], C[1], C[j]])
        energy = v @ np.tanh(d + H @ x) + b[2] + b[1] + b[j]
        if direct:
            energy += net.W.detach().numpy()[j] @ x[:4]
        energies.append(energy)
    energies = np.array(energies)
    windows = torch.tensor([context + [j] for j in range(4)])
    np.testing.assert_allclose(net.energy(windows).detach().numpy(), energies, rtol=1e-12)
    expected = np.exp(-energies) / np.exp(-energies).sum()  # P(w_t = j | context)
    scores = net(torch.tensor([context]))[0].detach().numpy()
    np.testing.assert_allclose(np.exp(scores) / np.exp(scores).sum(), expected, rtol=1e-12)
    # only b_{w_t} survives: the scores are -E plus the context's biases b_2 + b_1, the same for every j
    np.testing.assert_allclose(scores + energies, np.full(4, b[2] + b[1]), rtol=1e-12)


def test_context_biases_cancel():
    """Changing the bias of a word changes P(. | a context holding it) only through its own
    candidate term: the distribution with b_2 shifted equals the old one reweighted at word 2."""
    net = hand_net(direct=True)
    context = torch.tensor([[2, 1]])
    before = torch.softmax(net(context), dim=1)[0]
    with torch.no_grad():
        net.b[2] += 0.7
    after = torch.softmax(net(context), dim=1)[0]
    reweighted = before * torch.tensor([1.0, 1.0, np.exp(-0.7), 1.0], dtype=torch.float64)
    torch.testing.assert_close(after, reweighted / reweighted.sum(), rtol=1e-12, atol=0)


def small_blocks(monkeypatch, size):
    """Blocks of at most `size` elements."""
    monkeypatch.setattr(neural.networks.energy, "BLOCK", size)


@pytest.mark.parametrize("block", [None, 37])
@pytest.mark.parametrize("direct", [True, False])
def test_batched_candidates_equal_a_loop_over_candidates(monkeypatch, block, direct):
    if block:
        small_blocks(monkeypatch, block)  # 37: blocks of a few contexts and candidates
    net = random_net(1, direct)
    context = torch.randint(0, V, (9, 2), generator=torch.Generator().manual_seed(2))
    batched = net(context)  # (9, V), under autograd
    with torch.no_grad():
        torch.testing.assert_close(net(context), batched, rtol=0, atol=0)  # in place, the same rounding
    context_bias = net.b[context].sum(dim=1)  # (9,)
    for j in range(V):  # -E(context, j) + the context's biases, one candidate at a time
        window = torch.cat([context, torch.full((9, 1), j)], dim=1)
        torch.testing.assert_close(batched[:, j], context_bias - net.energy(window), rtol=1e-12, atol=1e-12)
    sample = torch.tensor([4, 0, 4, V - 1])
    target = torch.randint(0, V, (9,), generator=torch.Generator().manual_seed(3))
    positive, negative = net.sampled_scores(net.features(context), target, sample)
    torch.testing.assert_close(positive, batched.gather(1, target[:, None])[:, 0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(negative, batched[:, sample], rtol=1e-12, atol=1e-12)


def gradients(net, loss):
    return [g.to_dense() for g in torch.autograd.grad(loss, list(net.parameters()))]


def test_exact_softmax_in_blocks_has_the_dense_gradient(monkeypatch):
    net = random_net(4)
    context, target = torch.randint(0, V, (11, 2)), torch.randint(0, V, (11,))
    reference_loss = torch.nn.functional.cross_entropy(net(context), target)
    reference = gradients(net, reference_loss)
    small_blocks(monkeypatch, 23)  # many blocks, each recomputed backward
    loss = net.loss(net.features(context), target)
    assert loss.item() == pytest.approx(reference_loss.item(), rel=1e-12)
    for g, r in zip(gradients(net, loss), reference):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_parameter_count():
    for direct in (True, False):
        net = EnergyNetwork(EnergyShape(n=5, m=60, h=50, direct=direct), 1000)
        count = sum(p.numel() for p in net.parameters())
        assert count == 1000 * (1 + 60) + 50 * (2 + 5 * 60) + (1000 * 4 * 60 if direct else 0)


def test_resume_and_load_refuse_another_model_or_vocabulary(tmp_path):
    train_network(CORPUS, tiny(model="energy", epochs=1), tmp_path, progress=False)
    with pytest.raises(LMBenchError, match="another network: model=energy"):
        train_network(CORPUS, tiny(epochs=2), tmp_path, resume=True, progress=False)
    from tests.lm_checks import make_corpus
    other = make_corpus("the zebra sat on the mat . " * 5, "the zebra", "a zebra")
    with pytest.raises(LMBenchError, match="another vocabulary"):
        load_network(tmp_path, other, device="cpu")
    resumed = train_network(CORPUS, tiny(model="energy", epochs=2), tmp_path, resume=True, progress=False)
    assert resumed["epochs"] == 2


def test_checkpoint_without_a_model_field_is_an_nplm(tmp_path):
    """A run saved before the energy network existed loads as the NPLM it is."""
    train_network(CORPUS, tiny(epochs=1), tmp_path, progress=False)
    saved = weights_file.read(tmp_path / BEST)
    del saved["config"]["model"]
    weights_file.write(saved, tmp_path / BEST)
    assert type(load_network(tmp_path, CORPUS, device="cpu").net).__name__ == "NPLM"


@pytest.mark.parametrize("overrides,message", [
    (dict(objective="class"), "--objective class"), (dict(dropout=0.1), "--dropout"),
    (dict(precision="bf16"), "--precision bf16"), (dict(h=0), "--h >= 1"), (dict(model="rbm"), "unknown model 'rbm'")])
def test_options_the_energy_network_has_no_use_for_are_refused(overrides, message):
    with pytest.raises(LMBenchError, match=message):
        RunConfig(**{"model": "energy", **overrides})


def test_cli_trains_scores_and_mixes_an_energy_network(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    corpus_args = text_corpus_args(tmp_path)
    out = str(tmp_path / "run")
    assert main(["nplm", "train", "--model", "energy", *corpus_args, "--n", "3", "--m", "4", "--h", "5",
                 "--epochs", "2", "--samples", "8", "--out", out, "--device", "cpu", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    saved = tmp_path / "energy.npz"
    assert main(["nplm", "eval", out, "--split", "valid", *corpus_args, "--save-logprobs", str(saved),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["perplexity"] == pytest.approx(trained["valid_perplexity"])
    assert main(["ngram", "--method", "deleted-interpolation", "--order", "3", *corpus_args,
                 "--save-logprobs", str(tmp_path / "di.npz"), "--json"]) == 0
    capsys.readouterr()
    assert main(["mix", str(saved), str(tmp_path / "di.npz"), "--method", "fixed", "--weights", "0.5", "0.5",
                 "--json"]) == 0
    mixed = json.loads(capsys.readouterr().out)
    assert mixed["energy.npz"]["test_perplexity"] == pytest.approx(trained["test_perplexity"])
    assert np.isfinite(mixed["test_perplexity"])

"""The NPLM network: equation (1) on a hand-set tiny case, the parameter count, the fused
output layer, and the LanguageModel adapter's exact scoring (normalisation and score == log
distribution for every family and output layer: tests/test_nplm_families.py)."""

import numpy as np
import pytest
import torch

from lmbench.errors import LMBenchError
from neural.networks.nplm import NPLMShape
from neural.scoring import WindowLanguageModel, StreamWindows, context_windows
from neural.networks.nplm import dropout, NPLM, PAD_ID, parameter_count
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus

TEXT = "the cat sat on the mat . the dog sat on the log . a cat and a dog ."
CORPUS = make_corpus(TEXT * 3, "the cat sat on a log .", "a dog sat on the mat .")


def hand_net(h: int, direct: bool) -> NPLM:
    """V = 4, n = 3, m = 2, with every weight set explicitly."""
    net = NPLM(NPLMShape(n=3, m=2, h=h, direct=direct), 4)
    with torch.no_grad():
        net.C.copy_(torch.tensor([[0.1, -0.2], [0.5, 0.3], [-0.4, 0.8], [1.0, 0.0]]))
        if h:
            net.H.copy_(torch.tensor([[0.2, -0.1, 0.4, 0.3], [-0.5, 0.6, 0.1, -0.2]])[:h])
            net.d.copy_(torch.tensor([0.05, -0.1])[:h])
        width = 4 if direct else 0
        net.output.out.copy_(torch.arange(4 * (h + width), dtype=torch.float32).reshape(4, h + width).sin())
        net.output.b.copy_(torch.tensor([0.3, -0.3, 0.0, 0.1]))
    return net.double()


@pytest.mark.parametrize("h,direct", [(2, True), (2, False), (0, True)])
def test_equation_one_by_hand(h, direct):
    net = hand_net(h, direct)
    C, b = net.C.detach().numpy(), net.output.b.detach().numpy()
    context = [2, 1]  # w_{t-2}, w_{t-1}
    x = np.concatenate([C[2], C[1]])
    y = b.copy()
    if h:
        U = net.output.out.detach().numpy()[:, :h]
        y += U @ np.tanh(net.d.detach().numpy() + net.H.detach().numpy() @ x)
    if direct:
        W = net.output.out.detach().numpy()[:, h:]
        y += W @ x
    expected = np.exp(y) / np.exp(y).sum()
    got = torch.softmax(net(torch.tensor([context])), dim=1)[0].detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert (net.W is None) == (not direct) and (net.U is None) == (h == 0)


@pytest.mark.parametrize("V,n,m,h,direct", [(17907, 5, 60, 50, True), (17907, 5, 30, 100, False),
                                             (100, 3, 7, 0, True), (50, 2, 4, 9, True)])
def test_parameter_count(V, n, m, h, direct):
    net = NPLM(NPLMShape(n=n, m=m, h=h, direct=direct), V)
    count = sum(p.numel() for p in net.parameters())
    assert count == parameter_count(V, n, m, h, direct)
    if direct:
        assert count == V * (1 + n * m + h) + h * (1 + (n - 1) * m)


def test_no_path_refused():
    with pytest.raises(LMBenchError, match="no path from the context"):
        NPLMShape(n=3, m=2, h=0, direct=False)


@pytest.mark.parametrize("direct", [True, False])
def test_fused_loss_matches_autograd_cross_entropy(direct):
    torch.manual_seed(1)
    net = NPLM(NPLMShape(n=4, m=3, h=6, direct=direct), 50).double()
    context, target = torch.randint(0, 50, (17, 3)), torch.randint(0, 50, (17,))
    reference = torch.nn.functional.cross_entropy(net(context), target)
    fused = net.loss(net.features(context), target)
    grads_ref = torch.autograd.grad(reference, list(net.parameters()))
    grads = torch.autograd.grad(fused * 1.0, list(net.parameters()))
    assert fused.item() == pytest.approx(reference.item(), rel=1e-12)
    for g, r in zip(grads, grads_ref):  # C's gradient is sparse: only the rows in the contexts
        torch.testing.assert_close(g.to_dense(), r.to_dense(), rtol=1e-10, atol=1e-12)


def test_fused_loss_bf16_close_to_fp32():
    torch.manual_seed(2)
    net = NPLM(NPLMShape(n=3, m=8, h=16, direct=True), 300)
    context, target = torch.randint(0, 300, (64, 2)), torch.randint(0, 300, (64,))
    z = net.features(context)
    assert net.loss(z, target, bf16=True).item() == pytest.approx(net.loss(z, target).item(),
                                                                         rel=2e-2)


def test_context_windows_left_pad():
    windows = context_windows(np.array([7, 8, 9, 10]), 2, start=0)
    np.testing.assert_array_equal(windows, [[PAD_ID, PAD_ID], [PAD_ID, 7], [7, 8], [8, 9]])
    np.testing.assert_array_equal(context_windows(np.array([7, 8, 9, 10]), 2, start=2), [[7, 8], [8, 9]])


def test_score_is_exact_log_softmax():
    torch.manual_seed(4)
    net = NPLM(NPLMShape(n=4, m=3, h=5, direct=True), len(CORPUS.vocab))
    model = WindowLanguageModel(net)
    stream, start = CORPUS.stream_for("test", history=3)
    got = model.score(stream, start)
    assert got.dtype == np.float64
    contexts = torch.from_numpy(context_windows(stream, 3, start).copy())
    expected = torch.log_softmax(net.double()(contexts), dim=1)
    expected = expected[torch.arange(len(contexts)), torch.from_numpy(stream[start:].astype(np.int64))]
    np.testing.assert_allclose(got, expected.detach().numpy(), atol=2e-6)


def test_dropout_acts_only_while_training():
    torch.manual_seed(0)
    plain = NPLM(NPLMShape(n=3, m=4, h=5, direct=True), len(CORPUS.vocab))
    dropped = NPLM(NPLMShape(n=3, m=4, h=5, direct=True), len(CORPUS.vocab), dropout=0.5)
    dropped.load_state_dict(plain.state_dict())  # dropout adds no parameter
    contexts = torch.from_numpy(context_windows(CORPUS.train, 2)[:32].copy())
    plain.eval(), dropped.eval()
    assert torch.equal(plain(contexts), dropped(contexts))
    dropped.train()
    assert not torch.equal(dropped.features(contexts), dropped.features(contexts))


def test_dropout_keeps_each_element_with_probability_one_minus_p_scaled_to_keep_the_mean():
    torch.manual_seed(0)
    x = torch.full((400, 500), 2.0, requires_grad=True)
    dropped = dropout(x, 0.3)
    kept = dropped != 0
    assert abs(kept.double().mean().item() - 0.7) < 0.005  # 200,000 draws: the standard error is 0.001
    assert torch.allclose(dropped[kept], torch.tensor(2.0 / 0.7))
    dropped.sum().backward()  # the gradient flows through the kept elements only, with the same scale
    assert torch.equal(x.grad, kept * (1.0 / 0.7))


def test_bag_is_the_mean_feature_vector_of_the_words_before_the_nearest():
    """NPLM (ours)'s wider context: x = [C(w_{t-2}), C(w_{t-1}), mean(C(w_{t-5}), C(w_{t-4}), C(w_{t-3}))]."""
    torch.manual_seed(0)
    net = NPLM(NPLMShape(n=3, m=2, h=2, direct=True, bag=3), 4).double()
    assert net.history == 5 and net.H.shape == (2, 6)
    context = torch.tensor([[3, 1, 2, 0, 1]])  # oldest first: the bag 3, 1, 2, then w_{t-2} = 0, w_{t-1} = 1
    C = net.C.detach()
    x = torch.cat([C[0], C[1], (C[3] + C[1] + C[2]) / 3])
    a = torch.tanh(net.d.detach() + net.H.detach() @ x)
    y = net.output.b.detach() + net.output.out.detach() @ torch.cat([a, x])
    torch.testing.assert_close(net(context)[0].detach(), y, rtol=1e-12, atol=1e-12)
    shuffled = torch.tensor([[2, 3, 1, 0, 1]])  # the bag's order does not matter, the near words' does
    torch.testing.assert_close(net(shuffled), net(context), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(net(torch.tensor([[3, 1, 2, 1, 0]])), net(context))


def test_a_network_with_a_bag_is_normalised_and_scores_its_distributions():
    torch.manual_seed(1)
    model = WindowLanguageModel(NPLM(NPLMShape(n=3, m=4, h=5, direct=True, bag=4), len(CORPUS.vocab)).double())
    assert_normalised(model, CORPUS)  # seen contexts and unseen ones, short ones (the stream's start) too
    assert_scores_match_distribution(model, CORPUS)


def test_stream_windows_gather_the_context_windows():
    stream = np.array([5, 1, 4, 2, 2, 3, 0, 6])
    for history in (1, 3, 10):
        windows = StreamWindows(stream, history)
        positions = torch.tensor([0, 7, 3, 3, 1])
        np.testing.assert_array_equal(windows[positions].numpy(), context_windows(stream, history)[positions.numpy()])

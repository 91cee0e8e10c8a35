"""The NPLM network: equation (1) on a hand-set tiny case, the parameter count, the fused
output layer, and the LanguageModel adapter's normalisation and scoring."""

import numpy as np
import pytest
import torch

from lmbench.errors import LMBenchError
from neural.families import NPLMShape

from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus
from neural.lm import NPLMLanguageModel, context_windows
from neural.model import NPLM, PAD_ID, parameter_count

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
        net.out.copy_(torch.arange(4 * (h + width), dtype=torch.float32).reshape(4, h + width).sin())
        net.b.copy_(torch.tensor([0.3, -0.3, 0.0, 0.1]))
    return net.double()


@pytest.mark.parametrize("h,direct", [(2, True), (2, False), (0, True)])
def test_equation_one_by_hand(h, direct):
    net = hand_net(h, direct)
    C, b = net.C.detach().numpy(), net.b.detach().numpy()
    context = [2, 1]  # w_{t-2}, w_{t-1}
    x = np.concatenate([C[2], C[1]])
    y = b.copy()
    if h:
        U = net.out.detach().numpy()[:, :h]
        y += U @ np.tanh(net.d.detach().numpy() + net.H.detach().numpy() @ x)
    if direct:
        W = net.out.detach().numpy()[:, h:]
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
    fused = net.softmax_nll(net.features(context), target)
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
    assert net.softmax_nll(z, target, bf16=True).item() == pytest.approx(net.softmax_nll(z, target).item(),
                                                                         rel=2e-2)


def test_context_windows_left_pad():
    windows = context_windows(np.array([7, 8, 9, 10]), 2, start=0)
    np.testing.assert_array_equal(windows, [[PAD_ID, PAD_ID], [PAD_ID, 7], [7, 8], [8, 9]])
    np.testing.assert_array_equal(context_windows(np.array([7, 8, 9, 10]), 2, start=2), [[7, 8], [8, 9]])


@pytest.mark.parametrize("h,direct", [(5, True), (5, False), (0, True)])
def test_adapter_normalised_and_scores_match_distribution(h, direct):
    torch.manual_seed(3)
    model = NPLMLanguageModel(NPLM(NPLMShape(n=3, m=4, h=h, direct=direct), len(CORPUS.vocab))).attach(CORPUS)
    assert_normalised(model, CORPUS)
    assert_scores_match_distribution(model, CORPUS)
    assert_scores_match_distribution(model, CORPUS, split="train")


def test_score_is_exact_log_softmax():
    torch.manual_seed(4)
    net = NPLM(NPLMShape(n=4, m=3, h=5, direct=True), len(CORPUS.vocab))
    model = NPLMLanguageModel(net).attach(CORPUS)
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

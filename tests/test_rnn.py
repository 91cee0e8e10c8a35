"""The Elman RNN family (`neural.networks.rnn`): the contract of every stream family is tested over the
registry (tests/test_stream_networks.py, tests/test_contract.py, tests/test_pinned_scores.py); here what
is the RNN's own: its equation against a hand-written step, its exact scoring in one lane, and its place
in a comparison (a row only when named)."""

import numpy as np
import torch

from neural.networks.rnn import RNNNetwork, RNNShape
from reports.experiments import text_rows


def test_one_step_is_the_elman_equation():
    """h_t = tanh(W x_t + b + U h_{t-1} + b'): one layer, one step, from a random state."""
    torch.manual_seed(0)
    net = RNNNetwork(RNNShape(layers=1, m=4, h=4), vocab_size=7).double()
    for p in net.rnn.parameters():
        torch.nn.init.normal_(p, std=0.5)
    h0 = torch.randn(1, 1, 4, dtype=torch.float64)
    z, (h1,) = net.encode(torch.tensor([[3]]), (h0,))
    x, h = net.embedding[3], h0[0, 0]
    expected = torch.tanh(net.rnn.weight_ih_l0 @ x + net.rnn.bias_ih_l0 + net.rnn.weight_hh_l0 @ h + net.rnn.bias_hh_l0)
    torch.testing.assert_close(h1[0, 0], expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(z[0, 0], expected, rtol=1e-12, atol=1e-12)


def test_it_is_scored_in_one_lane_exactly_as_by_one_pass_over_the_stream():
    """`forgets = False`: the default exact scoring reads the split in one lane from the stream's start, so
    a state that never forgets (a recurrent matrix of spectral radius 3) is scored as one pass over the
    whole stream scores it, whatever the split's length."""
    torch.manual_seed(2)
    net = RNNNetwork(RNNShape(layers=1, m=8, h=8, tied=True), vocab_size=11).double().eval()
    with torch.no_grad():
        net.rnn.weight_hh_l0.copy_(3.0 * torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))[0])
    stream = np.random.default_rng(3).integers(0, 11, size=9000)
    scores = net.score_stream(stream, 4000)
    with torch.no_grad():
        z, _ = net.encode(torch.from_numpy(np.concatenate([[0], stream[:-1]]))[None, :])
        whole = torch.log_softmax(net.b + z[0, 4000:] @ net.out.T, dim=-1)
    expected = whole.gather(1, torch.from_numpy(stream[4000:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-9)


def test_a_comparison_trains_it_only_when_named():
    """Not one of every comparison's rows (`compared=False`), but a row, alone and + KN 5, when named."""
    assert not any(row.family == "rnn" for row in text_rows(1000))
    named = [row.id for row in text_rows(1000, networks=("mlp1", "rnn")) if row.id.startswith("rnn")]
    assert named == ["rnn", "rnn-kn-interp-5-em", "rnn-kn-interp-5-infini-gram"]

"""The GRU family (`neural.networks.gru`): the contract of every stream family is tested over the registry
(tests/test_stream_networks.py); here what is the GRU's own: its equations, checked against a hand-written
cell (the state carried across chunks: tests/test_stream_networks.py, every recurrent family)."""

import torch

from neural.networks.gru import GRUShape
from neural.networks.gru import GRUNetwork


def test_one_step_is_the_gru_equations():
    """h_t = (1 - u) n + u h_{t-1}, u and r sigmoid gates, n = tanh(W_n x + b_n + r (U_n h + b'_n)): one
    layer, one step, from a random state, against the weights written out."""
    torch.manual_seed(0)
    net = GRUNetwork(GRUShape(layers=1, m=4, h=4), vocab_size=7).double()
    for p in net.gru.parameters():
        torch.nn.init.normal_(p, std=0.5)
    h0 = torch.randn(1, 1, 4, dtype=torch.float64)
    word = torch.tensor([[3]])
    z, (h1,) = net.encode(word, (h0,))
    x, h = net.embedding[3], h0[0, 0]
    w_r, w_u, w_n = net.gru.weight_ih_l0.chunk(3)
    u_r, u_u, u_n = net.gru.weight_hh_l0.chunk(3)
    b_r, b_u, b_n = net.gru.bias_ih_l0.chunk(3)
    c_r, c_u, c_n = net.gru.bias_hh_l0.chunk(3)
    r = torch.sigmoid(w_r @ x + b_r + u_r @ h + c_r)
    u = torch.sigmoid(w_u @ x + b_u + u_u @ h + c_u)
    n = torch.tanh(w_n @ x + b_n + r * (u_n @ h + c_n))
    expected = (1 - u) * n + u * h
    torch.testing.assert_close(h1[0, 0], expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(z[0, 0], expected, rtol=1e-12, atol=1e-12)

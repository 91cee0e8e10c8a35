"""The `gru` family: a gated recurrent network over the continuous stream (Cho et al. 2014).

    x_t = dropout(E[w_{t-1}])                                   (m,), E the input table (V x m)
    r_t = sigma(W_r x_t + U_r h_{t-1} + b_r)                    reset gate (h,)
    u_t = sigma(W_u x_t + U_u h_{t-1} + b_u)                    update gate (h,)
    n_t = tanh(W_n x_t + b_n + r_t * (U_n h_{t-1} + b'_n))      candidate (h,)
    h_t = (1 - u_t) * n_t + u_t * h_{t-1}                       layers 2.. read dropout(h^{l-1}_t)
    z_t = dropout(h^L_t);  P(w_t | w_<t) = softmax(b + O z_t)   O = E when tied (m = h)

One state vector where the LSTM keeps two (no separate cell), and a third fewer recurrent weights at
the same width. Dropout on the non-recurrent connections only, as the LSTM's (Zaremba et al. 2014).
The state ((layers, B, h),) is carried along the stream in training and scoring as every recurrent
family's (`neural.networks.stream.RecurrentNetwork`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from neural.families import Family, register
from neural.networks.stream import HALF_THE_EPOCHS, STREAM, RecurrentNetwork, RecurrentShape


@dataclass(frozen=True)
class GRUShape(RecurrentShape):
    """A stacked GRU over the whole stream (`neural.networks.gru.GRUNetwork`), in the LSTM's recipe."""

    run_defaults: ClassVar[dict] = {**RecurrentShape.run_defaults, **HALF_THE_EPOCHS}  # (issue 66)
    gates: ClassVar[int] = 3  # G (`RecurrentShape.training_flops`): the reset and update gates, the candidate


class GRUNetwork(RecurrentNetwork):
    """P(w_t | all of w_<t) through a stacked GRU; state: ((layers, B, h),). Its start is every recurrent
    family's (`RecurrentNetwork.reset_parameters`): biases 0, the gates half open."""

    family = "gru"
    cell = nn.GRU


register(Family("gru", GRUShape, GRUNetwork, label="GRU", quick={"m": 64, "h": 64}, order=4, mixed_precision=True,
                summary="a GRU over the whole stream (Cho et al. 2014)", **STREAM))

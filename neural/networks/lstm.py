"""The `lstm` family: a recurrent network over the continuous stream (Zaremba et al. 2014).

    x_t = dropout(E[w_{t-1}])                                   (m,), E the input table (V x m)
    h^1_t, c^1_t = LSTM_1(x_t, h^1_{t-1}, c^1_{t-1})             (h,) each; layers 2.. read dropout(h^{l-1}_t)
    z_t = dropout(h^L_t)                                         (h,)
    P(w_t | w_<t) = softmax(b + O z_t)                           O = E when tied (m = h)

Dropout acts on the non-recurrent connections only (the embeddings, between layers, before the output),
never on h_{t-1} -> h_t: Zaremba et al.'s regularisation, which lets a large LSTM train on a small
corpus without losing what it carries across time steps.

The history is the whole stream: the state (h, c) of every layer is carried from the first token on.
Training and exact scoring carry it as every recurrent family does (`neural.networks.stream.RecurrentNetwork`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from neural.families import Family, register
from neural.networks.stream import HALF_THE_EPOCHS, STREAM, RecurrentNetwork, RecurrentShape


@dataclass(frozen=True)
class LSTMShape(RecurrentShape):
    """A stacked LSTM over the whole stream (`neural.networks.lstm.LSTMNetwork`)."""

    run_defaults: ClassVar[dict] = {**RecurrentShape.run_defaults, **HALF_THE_EPOCHS}  # (issue 66)
    gates: ClassVar[int] = 4  # G (`RecurrentShape.training_flops`): the input, forget, output gates, the candidate


class LSTMNetwork(RecurrentNetwork):
    """P(w_t | all of w_<t) through a stacked LSTM; state: ((layers, B, h), (layers, B, h))."""

    family = "lstm"
    cell = nn.LSTM
    states = 2  # (h, c)

    def reset_parameters(self) -> None:
        """The recurrent families' uniform start (`RecurrentNetwork.reset_parameters`), but the forget
        gates' biases 1 (Jozefowicz et al. 2015), so the cell keeps its memory from the start."""
        super().reset_parameters()
        for name, p in self.recurrent.named_parameters():
            if name.startswith("bias_ih"):
                p.data[self.shape.h: 2 * self.shape.h] = 1.0  # gate order i, f, g, o


register(Family("lstm", LSTMShape, LSTMNetwork, label="LSTM", quick={"m": 64, "h": 64}, order=2, mixed_precision=True,
                summary="an LSTM over the whole stream (Zaremba et al. 2014)", **STREAM))

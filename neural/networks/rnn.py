"""The `rnn` family: the plain recurrent network of Elman (1990) over the continuous stream, the recurrent
language model of Mikolov et al. (2010), the generation between the NPLM and the LSTM.

    x_t = dropout(E[w_{t-1}])                                   (m,), E the input table (V x m)
    h^1_t = tanh(W x_t + U h^1_{t-1} + b_h)                     (h,); layers 2.. read dropout(h^{l-1}_t)
    z_t = dropout(h^L_t);  P(w_t | w_<t) = softmax(b + O z_t)   O = E when tied (m = h)

No gates: the state is rewritten at every step, so what it carries fades (or, when U's spectral radius
grows past 1 in training, as it does, stays chaotic) over tens of steps; the gated families were built
to mend that. Its tables start as every recurrent family's (`RecurrentNetwork.reset_parameters`).
Training carries the state along the stream as every recurrent family does; exact scoring reads the
split in one lane from the stream's start (`forgets = False`): warmed lanes would assume a state that
forgets, which a trained RNN's need not. Not a row of every comparison (`compared=False`):
`reproduce text --networks ...,rnn` or `--extra rnn` adds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from neural.families import Family, register
from neural.networks.stream import STREAM, RecurrentNetwork, RecurrentShape


@dataclass(frozen=True)
class RNNShape(RecurrentShape):
    """A stacked Elman network over the whole stream (`RNNNetwork`), in the LSTM's recipe."""

    gates: ClassVar[int] = 1  # G (`RecurrentShape.training_flops`): the one tanh layer


class RNNNetwork(RecurrentNetwork):
    """P(w_t | all of w_<t) through stacked tanh recurrences; state: ((layers, B, h),)."""

    family = "rnn"
    cell = nn.RNN  # (its default nonlinearity: tanh)
    forgets = False  # its state need not forget (spectral radius 3-5 after a tiny run): one lane from the start


register(Family("rnn", RNNShape, RNNNetwork, label="RNN", quick={"m": 64, "h": 64}, compared=False, mixed_precision=True,
                summary="a plain recurrent network over the whole stream (Elman 1990; Mikolov et al. 2010)", **STREAM))

"""Networks that read the continuous stream (`neural.networks.lstm`, `neural.networks.transformer`): their shared word
tables and output layer, and their scoring behind the suite's interface.

The paper's network sees a window of n-1 words; these see the stream. Both are built the same way:

    x_t = E[w_{t-1}]                       the input table E (V x m), w_{-1} = PAD_ID (<unk>, as the NPLM)
    z_t = encoder(x_0 .. x_t)              features (K,): an LSTM's last layer, a Transformer's last block
    y_t = b + O z_t                        one score per word, O (V x K); P(w_t | w_<t) = softmax(y_t)

With `tied` (Press & Wolf 2017; Inan et al. 2017) O is E itself (m = K): the one table both reads and
predicts words, which halves the word parameters and, on corpora of about a million tokens, lowers
perplexity. `b` starts at the log unigram of train, as the NPLM's.

The output layer answers the hooks of `neural.outputs.objectives` as the NPLM does: `softmax_nll` (the fused
exact softmax of `neural.outputs.layers.SoftmaxNLL`) and `sampled_scores` (the scores of the targets and of k
sampled words only), so the same objectives train every family. The features of a batch of lanes
(B, T, K) are flattened to (B T, K) for them.

Exact scoring (`StreamLanguageModel`): every token of a split is scored once, given the stream
train | valid | test before it (`LanguageModel.logprobs` hands over the whole stream). Each family says
how in its `score_stream`: the LSTM carries its state from the start of the stream (in lanes, each
warmed on the tokens before its start), the Transformer slides a window of its context. The log-softmax
is finished in float64 from the network's scores (`neural.networks.nplm.softmax_parts`), as `neural.scoring` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel
from lmbench.progress import progress_bar
from neural.families import NetworkShape, check_numbers, option_name
from neural.networks.nplm import PAD_ID
from neural.outputs.flops import output_flops
from neural.outputs.layers import SoftmaxNLL, at_least_fp32, softmax_parts
from neural.precision import bf16_products


# The registration keywords of a stream family: its context, and a row of ours in comparisons.
STREAM = dict(context="stream", beyond_2003=True)


@dataclass(frozen=True)
class StreamShape(NetworkShape):
    """The base of every stream family's shape: the stream networks' recipe as its run defaults
    (docs/networks.md, "Beyond 2003": 6 epochs of AdamW at 2e-3 under the cosine schedule, 32 lanes,
    k = 1,000 sampled words per update, decoupled weight decay 0.01 on the matrices, validated on the
    first 50,000 tokens of valid, dropout 0.4; a family may change any: the Transformer its dropout, the
    LSTM and the GRU their epochs, rate and dropout, `HALF_THE_EPOCHS`),
    and the window recipes' options it refuses in one line (`neural.families.register` refuses a stream
    family whose shape is not one)."""

    run_defaults: ClassVar[dict] = {"recipe": "adamw", "epochs": 6, "samples": 1000, "weight_decay": 0.01,
                                    "schedule": "cosine", "lr": 2e-3, "batch_size": 32, "valid_tokens": 50_000,
                                    "dropout": 0.4}
    unused_options: ClassVar[tuple[str, ...]] = ("recipe", "min_gain", "anneal_gain", "patience", "lr_decay",
                                                 "classes", "class_source", "eval_batch")

    def refuse_unused(self, name: str, given: list[str]) -> str:
        return (f"--model {name} trains with the adamw recipe (AdamW, a linear warm-up then a cosine rate over all "
                f"--epochs), which has no use for {', '.join('--' + option_name(k) for k in given)}: "
                f"drop {'it' if len(given) == 1 else 'them'}")


# The LSTM's and the GRU's time-to-quality recipe (issue 66): half the epochs of the stream recipe, at three
# times its peak rate and with less dropout, which fewer passes over the corpus need less of. Chosen on valid
# (ap89-1m, the first 50,000 valid tokens each epoch, the whole of valid at the end), against the stream
# recipe's 6 epochs at 2e-3 and dropout 0.4 (docs/measurements.md, 2026-12-07, "half the epochs"): the
# LSTM's valid 76.08 against 78.90, the GRU's 76.10 against 78.35; at dropout 0.4 the same 3 epochs gave
# 80.57 and 81.05. The Transformer (3 epochs at best +6.2%) and the RNN (far behind its own third epoch) keep
# the stream recipe.
HALF_THE_EPOCHS = {"epochs": 3, "lr": 6e-3, "dropout": 0.3}


@dataclass(frozen=True)
class RecurrentShape(StreamShape):
    """The shape of a recurrent family (`neural.networks.stream.RecurrentNetwork`): stacked layers of h units over
    word vectors of m; trained in lanes, --dropout as Zaremba et al.'s (embeddings, between layers,
    output). Each recurrent family subclasses it (its own dataclass) and declares its cell's `gates`.

    Training FLOPs per target token (`training_flops`): each layer computes G gates of h units from its
    input (m for the first, h above) and its state, 2 G h (in + h) forward and twice that backward (the
    gradients of the input and state, and of the weights): 6 G h (m + h) + 6 G h (2 h) (layers - 1),
    plus the output layer's over K = h (`neural.outputs.flops`). (The state carried into an update gets
    no gradient, a G h h product less per lane an update: 1 / steps of a layer's, not counted.)"""

    gates: ClassVar[int]  # G: the gate products of one cell (the LSTM's 4, the GRU's 3, the RNN's 1)
    layers: int = field(default=2, metadata={"help": "stacked layers (recurrent: 1 or 2; transformer: blocks)"})
    m: int = field(default=256, metadata={"help": "word feature size"})
    h: int = field(default=256, metadata={"help": "hidden units"})
    tied: bool = field(default=True, metadata={"help": "the output word table is the input one (tied weights)"})

    def __post_init__(self):
        check_numbers([("--layers", self.layers, "1 or 2", self.layers in (1, 2)), ("--m", self.m, ">= 1", self.m >= 1),
                       ("--h", self.h, ">= 1", self.h >= 1)])
        if self.tied and self.m != self.h:
            raise LMBenchError(f"tied input and output tables need --m {self.m} = --h {self.h}: give the same "
                               "size or --no-tied")

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """The count of the class docstring."""
        inputs = self.m + self.h * (self.layers - 1)  # the layers' inputs, summed
        return 6.0 * self.gates * self.h * (inputs + self.h * self.layers) + output_flops(self.h, vocab_size, run)


EVAL_ROWS = 4096  # positions per output GEMM when scoring


def padded_inputs(stream: np.ndarray) -> np.ndarray:
    """(len + 1,) int64: PAD_ID then the stream; entry t is the input that predicts stream[t]."""
    return np.concatenate([[PAD_ID], np.asarray(stream, dtype=np.int64)])


class StreamNetwork(nn.Module):
    """Base of the stream networks: the input table E (V x m), the output layer y = b + O z over V words
    (O = E when tied), and the hooks of the objectives. A subclass sets `family`, builds its encoder and
    implements `encode`, `score_stream` and `log_distribution`."""

    family = ""
    history = None  # the whole stream, not a window (`neural.families`)
    num_classes = 0
    WORD_TABLES = ("embedding", "output", "b")

    def __init__(self, shape, vocab_size: int, m: int, width: int, output: str = "softmax", dropout: float = 0.0):
        """Word tables for vectors of m and features of `width`; `dropout` the rate the encoder uses
        (`self.drop`, training only)."""
        super().__init__()
        self.dropout, self.drop = dropout, nn.Dropout(dropout)
        if output != "softmax":
            raise LMBenchError(f"--model {self.family} has the full softmax output layer only: train it with "
                               "--objective softmax, importance or nce")
        tied = shape.tied
        self.shape, self.vocab_size, self.tied = shape, vocab_size, tied
        self.embedding = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) E
        self.output = None if tied else nn.Parameter(torch.empty(vocab_size, width))  # (V, K) O
        self.b = nn.Parameter(torch.zeros(vocab_size))  # (V,)

    @property
    def out(self) -> torch.Tensor:
        """(V, K) O, the output table (E itself when tied)."""
        return self.embedding if self.output is None else self.output

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        """E[inputs]: (B, T) int64 -> (B, T, m)."""
        return F.embedding(inputs, self.embedding)

    def encode(self, inputs: torch.Tensor, state=None):
        """Features z (B, T, K) of inputs (B, T) and the state to carry to the next chunk (None for a
        network without one)."""
        raise NotImplementedError

    @staticmethod
    def saved_structure(state: dict) -> None:
        """The word structure of a saved state's output layer: none (always the full softmax)."""
        return None

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """The exact objective of the output layer: the full softmax's mean -log P."""
        return self.softmax_nll(z, target, bf16)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """b = log q for the unigram q (V,): P(w | h) = q_w while O z is small."""
        self.b.copy_(unigram.log())

    def decay_parameters(self) -> list[nn.Parameter]:
        """The matrices (weight decay applies to them), never biases, gains or b."""
        return [p for p in self.parameters() if p.dim() >= 2]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.dim() < 2]

    # the hooks of neural.outputs.objectives, over flattened features z (N, K) and targets (N,)
    def softmax_nll(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean of -log softmax(y)[target], fused (`neural.outputs.layers.SoftmaxNLL`)."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return SoftmaxNLL.apply(z, self.out, self.b, target, dtype)

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor, sample: torch.Tensor):
        """y of each target (N,) and of the k sampled words for every position (N, k), from their rows
        of O and b only."""
        rows = torch.cat([target, sample])
        weights, bias = self.out.index_select(0, rows), self.b.index_select(0, rows)
        count = len(target)
        positive = (z * weights[:count]).sum(dim=1) + bias[:count]  # (N,)
        return positive, torch.addmm(bias[count:], z, weights[count:].t())  # (N, k)

    @torch.inference_mode()
    def log_probs(self, z: torch.Tensor, target: torch.Tensor | None = None, bf16: bool = False) -> torch.Tensor:
        """float64 log P(target | history) (N,) for features z (N, K), or log P(. | history) (N, V)
        when target is None: y from an fp32 (or bf16) GEMM, the log-softmax finished in float64."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        scores = at_least_fp32(torch.addmm(self.b.to(dtype), z.to(dtype), self.out.to(dtype).t()))  # (N, V)
        picked, peak, total = softmax_parts(scores, target)
        if target is None:
            return picked.double() - peak.double()[:, None] - total.double().log()[:, None]
        return picked.double() - peak.double() - total.double().log()

    def score_positions(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """`log_probs` of many positions (N, K), in GEMMs of EVAL_ROWS rows."""
        return torch.cat([self.log_probs(z[lo: lo + EVAL_ROWS], target[lo: lo + EVAL_ROWS], bf16)
                          for lo in range(0, len(z), EVAL_ROWS)]) if len(z) else z.new_zeros(0, dtype=torch.float64)

    @torch.inference_mode()
    def score_stream(self, stream: np.ndarray, start: int, *, bf16: bool = False, progress: bool = False,
                     **options) -> np.ndarray:
        """Natural-log P(stream[t] | stream[:t]) for t = start .. len - 1, float64, in eval mode (the
        family's `stream_scores`, with its own options)."""
        was_training = self.training
        self.eval()
        try:
            return self.stream_scores(stream, start, bf16=bf16, progress=progress, **options)
        finally:
            self.train(was_training)

    @torch.inference_mode()
    def log_distribution(self, context: Sequence[int]) -> torch.Tensor:
        """float64 log P(. | context) (V,), the history read as `score_stream` reads it, in eval mode."""
        was_training = self.training
        self.eval()
        try:
            return self.history_log_probs(list(context))
        finally:
            self.train(was_training)

    def stream_scores(self, stream: np.ndarray, start: int, *, bf16: bool, progress: bool) -> np.ndarray:
        raise NotImplementedError

    def history_log_probs(self, context: list[int]) -> torch.Tensor:
        raise NotImplementedError

    def reader(self, context: Sequence[int]) -> "StreamReader":
        """The network reading a stream a token at a time from `context` (`lmbench.model.LanguageModel.reader`):
        a family's own carries its state (`RecurrentNetwork`: the hidden state; the Transformer: the window
        it reads); this one reads the whole history at each step, as `log_distribution` does."""
        return StreamReader(self, context)


class StreamReader:
    """`StreamNetwork.reader`: the tokens read, held as the inputs that predict the next ([PAD, w_0, ...]);
    `distribution()` is P(. | them), as `StreamLanguageModel.distribution` of the same tokens (the history read
    as `score_stream` reads it, in eval mode, fp32), `read(token)` adds one. This base reads them all at each
    step (`history_log_probs`); a family's reader reads each token a bounded number of times."""

    def __init__(self, net: StreamNetwork, context: Sequence[int]):
        self.net, self.inputs = net, [PAD_ID, *(int(token) for token in context)]

    def read(self, token: int) -> None:
        self.inputs.append(int(token))

    @torch.inference_mode()
    def distribution(self) -> np.ndarray:
        was_training = self.net.training
        self.net.eval()
        try:
            return torch.exp(self.log_probs()).cpu().numpy()
        finally:
            self.net.train(was_training)

    def log_probs(self) -> torch.Tensor:
        """float64 log P(. | the tokens read) (V,)."""
        return self.net.history_log_probs(self.inputs[1:])


class RecurrentReader(StreamReader):
    """`RecurrentNetwork.reader`: the state after the tokens fed so far, and the features of the last; the
    tokens read since are fed when the next distribution is asked, each once (one `encode` of [PAD, context]
    first, from the zero state, as `history_log_probs` reads it, then one of the tokens read since)."""

    def __init__(self, net: "RecurrentNetwork", context: Sequence[int]):
        super().__init__(net, context)
        self.state, self.z = None, None  # (the state carried; z (1, h) of the last input fed)

    def log_probs(self) -> torch.Tensor:
        if self.inputs:
            inputs = torch.tensor([self.inputs], dtype=torch.int64, device=self.net.embedding.device)  # (1, T)
            z, self.state = self.net.encode(inputs, self.state)
            self.z, self.inputs = z[0, -1:], []
        return self.net.log_probs(self.z)[0]


EVAL_LANES = 32  # pieces of a split a recurrent network scores side by side (on CUDA 8 times as many)
EVAL_WARMUP = 2000  # tokens each piece reads before its first scored token
EVAL_CHUNK = 256  # time steps per call of the recurrent encoder when scoring


class RecurrentNetwork(StreamNetwork):
    """Base of the recurrent families (`neural.networks.lstm`, `neural.networks.gru`, `neural.networks.rnn`):
    a state carried along the stream.

    A family names its torch module, `cell` (nn.LSTM, nn.GRU, nn.RNN), and how many tensors its state
    holds, `states`; the base builds the cell (batch first, `layers` stacked layers of h units over the
    word vectors of m, --dropout between the layers), registered under the family's name (a saved state's
    keys: `lstm.weight_ih_l0`, ...), starts it (`reset_parameters`) and runs it (`encode`): the cell reads
    the dropped-out embeddings with the state carried, and its outputs, dropped out, are the features.
    The state is a tuple of `states` tensors of (layers, B, h), dimension 1 the batch (the trainer
    detaches, saves and restores every tensor of it).

    Training reads the stream in lanes (`neural.training.trainer`), truncating back-propagation at `steps`
    and carrying the state, detached, from one update to the next. Exact scoring (`score_stream`)
    carries it too: a split is cut into `lanes` contiguous pieces scored side by side (one batch row
    each) for speed, and each piece is first warmed on the `warmup` tokens before its start (all of them
    when warmup is None), so its first token is scored from a state that has read its history. With
    every lane warmed from the stream's start the scores are one lane's (to rounding). That the warmed
    lanes score as one lane rests on the state forgetting what it read `warmup` tokens before; a family
    whose state may not (an ungated recurrence whose matrix grows past a spectral radius of 1 in
    training) sets `forgets` False, and is scored in one lane read from the stream's start."""

    cell: ClassVar[type[nn.RNNBase]]  # the family's torch recurrent module
    states: ClassVar[int] = 1  # tensors of (layers, B, h) in the state: the LSTM's (h, c) 2, the GRU's and RNN's h 1
    forgets = True  # its state forgets within EVAL_WARMUP tokens, so lanes warmed on them score exactly

    def __init__(self, shape: RecurrentShape, vocab_size: int, *, output: str = "softmax", structure=None,
                 dropout: float = 0.0):
        """The word tables and the cell (class docstring); `structure` unused: the full softmax only."""
        super().__init__(shape, vocab_size, shape.m, shape.h, output, dropout)
        self.add_module(self.family, self.cell(shape.m, shape.h, shape.layers, batch_first=True,
                                               dropout=dropout if shape.layers > 1 else 0.0))
        self.reset_parameters()

    @property
    def recurrent(self) -> nn.RNNBase:
        """The family's stacked recurrent layers (its `cell`)."""
        return getattr(self, self.family)

    def reset_parameters(self) -> None:
        """E, O and the recurrent layers' weights ~ U(-0.1, 0.1) (Zaremba et al.'s medium network: 0.05),
        their biases 0: the start every recurrent family shares (the LSTM then opens its forget gates)."""
        nn.init.uniform_(self.embedding, -0.1, 0.1)
        if self.output is not None:
            nn.init.uniform_(self.output, -0.1, 0.1)
        for name, p in self.recurrent.named_parameters():
            if name.startswith("weight"):
                nn.init.uniform_(p, -0.1, 0.1)
            else:
                nn.init.zeros_(p)

    def initial_state(self, batch: int, device=None) -> tuple[torch.Tensor, ...]:
        """`states` tensors of zeros, each (layers, B, h)."""
        shape = (self.shape.layers, batch, self.shape.h)
        device = device or self.embedding.device
        return tuple(torch.zeros(shape, device=device, dtype=self.embedding.dtype) for _ in range(self.states))

    def encode(self, inputs: torch.Tensor, state=None):
        """z (B, T, h) for inputs (B, T), and the state after the last step."""
        if state is None:
            state = self.initial_state(inputs.shape[0], inputs.device)
        z, last = self.recurrent(self.drop(self.embed(inputs)), state if self.states > 1 else state[0])
        return self.drop(z), last if self.states > 1 else (last,)  # (nn.LSTM's (h, c) a tuple already)

    def stream_scores(self, stream: np.ndarray, start: int, *, bf16: bool = False, progress: bool = False,
                     lanes: int | None = None, warmup: int | None | str = "default") -> np.ndarray:
        """log P(stream[t] | stream[:t]) for t >= start (float64): the targets cut into `lanes`
        contiguous pieces, piece j = targets [a_j, a_{j+1}) read from s_j = a_j - warmup (or from the
        stream's start, when that is nearer or warmup is None) with a fresh state, and scored side by
        side in chunks of EVAL_CHUNK steps, the state carried. lanes None: EVAL_LANES (on CUDA 8 times
        as many, to fill the device), but no more than there are `warmup`-long pieces in the targets, so
        that warming the lanes never reads more tokens than are scored (a split of 800 tokens is one
        lane: 32 lanes would read 64,000 tokens of warm-up for it). warmup "default": EVAL_WARMUP, or None
        for a network whose state does not forget (`forgets` False: one lane, from the stream's start)."""
        if warmup == "default":
            warmup = EVAL_WARMUP if self.forgets else None
        inputs = padded_inputs(stream)  # (N + 1,) inputs[t] predicts stream[t]
        device = self.embedding.device
        count = len(stream) - start
        if lanes is None:
            lanes = EVAL_LANES * (8 if device.type == "cuda" else 1) if self.forgets else 1
            if warmup:
                lanes = min(lanes, count // warmup)
        lanes = max(1, min(lanes, count))
        bounds = start + (count * np.arange(lanes + 1)) // lanes  # (lanes + 1,) a_j
        begins = np.zeros(lanes, dtype=np.int64) if warmup is None else np.maximum(0, bounds[:-1] - warmup)  # s_j
        width = int((bounds[1:] - begins).max())
        rows = np.full((lanes, width), PAD_ID, dtype=np.int64)  # (lanes, R) inputs, padded at the end
        for j in range(lanes):
            rows[j, : bounds[j + 1] - begins[j]] = inputs[begins[j]: bounds[j + 1]]
        position = begins[:, None] + np.arange(width)[None, :]  # (lanes, R) the target's index in the stream
        scored = (position >= bounds[:-1, None]) & (position < bounds[1:, None])  # (lanes, R)
        targets = np.asarray(stream, dtype=np.int64)[np.minimum(position, len(stream) - 1)]
        rows_t, targets_t = torch.from_numpy(rows).to(device), torch.from_numpy(targets).to(device)
        scored_t = torch.from_numpy(scored).to(device)
        result = torch.empty(count, dtype=torch.float64, device=device)
        where = torch.from_numpy(position - start).to(device)  # (lanes, R) index into result
        chunks = range(0, width, EVAL_CHUNK)
        if progress:
            chunks = progress_bar(chunks, desc=f"eval {self.family}", unit="chunk")
        state = None
        for lo in chunks:
            hi = min(lo + EVAL_CHUNK, width)
            with bf16_products(device.type, bf16):
                z, state = self.encode(rows_t[:, lo:hi], state)  # (lanes, c, h)
            mask = scored_t[:, lo:hi]
            if mask.any():
                result[where[:, lo:hi][mask]] = self.score_positions(z[mask], targets_t[:, lo:hi][mask], bf16)
        return result.cpu().numpy()

    def history_log_probs(self, context: list[int]) -> torch.Tensor:
        """log P(. | context) (V,) from the state after reading PAD and all of context."""
        inputs = torch.from_numpy(padded_inputs(np.asarray(context, dtype=np.int64))).to(self.embedding.device)
        z, _ = self.encode(inputs[None, :], None)  # (1, len + 1, h)
        return self.log_probs(z[0, -1:])[0]

    def reader(self, context: Sequence[int]) -> RecurrentReader:
        """The state carried from token to token (`RecurrentReader`): each token read is fed once."""
        return RecurrentReader(self, context)


class StreamLanguageModel(LanguageModel):
    """A trained stream network behind the suite's interface (order None: the whole history). It is
    made by `neural.training.trainer.train_network` and loaded by `neural.training.checkpoint.load_network`."""

    order = None

    def __init__(self, net: StreamNetwork, bf16: bool = False, progress: bool = False):
        self.net = net.eval()
        self.progress = progress  # a bar (or plain lines) while `score` runs
        self.vocab_size = net.vocab_size
        self.bf16 = bf16

    def _fit(self, corpus) -> None:
        raise LMBenchError(f"a {self.net.family} network is trained with neural.training.trainer.train_network "
                           f"(or `lmbench train --model {self.net.family}`), not fit(): train it, then "
                           "load it with neural.training.checkpoint.load_network")

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        return self.net.score_stream(stream, start, bf16=self.bf16, progress=self.progress)

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        return torch.exp(self.net.log_distribution(list(context))).cpu().numpy()

    def reader(self, context: Sequence[int]) -> StreamReader:
        """The network's own reader (`StreamNetwork.reader`): its state carried, not the stream read again."""
        return self.net.reader(context)

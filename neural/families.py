"""The network families: a name, the dataclass of a network's shape, and the class that builds it, plus
the protocol (`Network`) every network implements. No torch here: the command line reads this file to
offer the families and their options, and imports a network only to train or load one.

A family is

    Family(name, Shape, "module:Class", context=..., summary=...)

- `Shape`, a frozen dataclass (`NetworkShape`): everything that fixes the network's parameters (its n, m,
  h, ... and nothing about training). A checkpoint keeps it (`dataclasses.asdict`, as nanoGPT keeps its
  `model_args`) and the network is rebuilt from it (`neural.training.train.load_nplm`). Its fields are the command line's
  options of that family (`lmbench nplm train --model NAME --FIELD ...`): the default and the help text
  live once, in the field (`field(default=..., metadata={"help": ...})`). Its class variables
  `outputs` and `parallel` list the output layers it can have (`neural.config.OBJECTIVES` names each
  objective's; None: any) and the --parallel schemes it runs under; `run_defaults` gives the defaults
  of the training run's options that differ for this family (e.g. the stream networks' epochs, k and
  weight decay; an option given explicitly wins); `refuse` names, in one line, an
  option of the training run it cannot take (the base refuses a scheme outside `parallel`; a family
  adds its own). An objective whose output layer is not in `outputs` is refused before that.
- "module:Class", the network (torch), imported on first use (`network_class`). It implements `Network`.
- `context`, what a network reads to predict a token, which picks the loop that trains it and the code
  that scores it:
    "window" (the NPLM, the energy network): the `history` tokens just before it (n-1 words,
      left-padded with PAD_ID at the start of a stream). Trained by `neural.training.train` on shuffled windows,
      scored by `neural.lm.score_stream`; every call they make on the network is in `Network`.
    "stream" (for recurrent and attention networks): contiguous sequences of the stream, a state carried
      from one to the next. Such a family names its own `trainer`, `scorer` and `loader`
      ("module:function", with the signatures of `neural.training.train.train_nplm`, `neural.lm.score_stream` and
      `neural.training.train.load_nplm`), and implements the
      parts of `Network` that do not read windows (building, checkpoint shape, output layer, weight
      decay, vocabulary widening); `history` is None.
- `vocab_slice`, "module:Class" of one process's block of the network under --parallel vocab, None
  when the family has none (its shape's `parallel` then leaves "vocab" out).

A new family is one file and one registration here: write the network in `neural/networks/NAME.py`
against `Network`, then add its shape dataclass below (subclassing `NetworkShape`, or `RecurrentShape`)
and the line

    register(Family("NAME", NAMEShape, "neural.networks.NAME:NAMENetwork", label="...", summary="..."))

with `quick=` (the shape of a quick run) and, for a stream network, `**STREAM`. The shape stays here,
not in the network's file, because the command line reads every family's options without importing
torch. Nothing else names a family: the builder (`neural.training.team.build_network`), `load_nplm`,
resume, `neural.oov` and `neural.parallel.teams` go through `family(name)` and the protocol; the command
line, the rows of `reproduce`, the summary's columns, the claims and the contract tests iterate the
registry (`label`, `beyond_2003`, `quick`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from lmbench.errors import LMBenchError

if TYPE_CHECKING:  # for the protocol's annotations only
    import torch

CONTEXTS = ("window", "stream")


@dataclass(frozen=True)
class NetworkShape:
    """Base of a family's shape dataclass. Subclasses add their fields (each with metadata["help"], the
    command line's help text) and check their values in __post_init__ (an LMBenchError naming the
    option, `check_numbers`)."""

    outputs: ClassVar[tuple[str, ...] | None] = ("softmax",)  # its output layers; None: any of them
    parallel: ClassVar[tuple[str, ...]] = ()  # the --parallel schemes it runs under
    run_defaults: ClassVar[dict] = {}  # the training run's options whose default is the family's own
    # the run's options its trainer has no use for, refused when given: a window network's, the stream trainer's own
    unused_options: ClassVar[tuple[str, ...]] = ("steps", "warmup_steps", "clip", "final_lr_fraction")

    def refuse(self, run) -> str | None:
        """One line naming an option of the training run `run` (a `neural.config.NPLMConfig`) that this
        network cannot take, and what to do instead; None when it takes them all. (An objective whose
        output layer is not in `outputs` is refused by the run itself.) The base refuses a scheme
        outside `parallel`."""
        if run.parallel is not None and run.parallel not in self.parallel:
            return self.refuse_parallel(run.model, run.parallel)
        return None

    def refuse_unused(self, name: str, given: list[str]) -> str:
        """The line refusing the run options `given` (of `unused_options`) for family `name`."""
        return (f"--model {name} has no use for {', '.join('--' + option_name(k) for k in given)}: drop "
                + ("it" if len(given) == 1 else "them"))

    def refuse_parallel(self, name: str, scheme: str) -> str:
        """The line refusing --parallel `scheme` (not in `parallel`) for family `name`."""
        return (f"--model {name} does not run under --parallel {scheme}: "
                + (f"use --parallel {' or '.join(self.parallel)}" if self.parallel
                   else "it trains and scores on one process, drop --parallel"))


def check_numbers(checks) -> None:
    """Raise the LMBenchError of the first failed (option, value, allowed, ok) check."""
    for option, value, allowed, ok in checks:
        if not ok:
            raise LMBenchError(f"{option} {value}: must be {allowed}")


@dataclass(frozen=True)
class Family:
    """One registered family (the module docstring)."""
    name: str
    shape: type  # a NetworkShape subclass
    network: str  # "module:Class"
    context: str = "window"  # "window" or "stream"
    summary: str = ""  # one line for --help
    vocab_slice: str | None = None  # "module:Class" under --parallel vocab
    trainer: str | None = None  # "stream": "module:function" that trains it (None: neural.training.train's windows)
    scorer: str | None = None  # "stream": "module:function" that scores a stream (None: neural.lm's windows)
    loader: str | None = None  # "stream": "module:function" that loads a trained run (None: neural.training.train's)
    label: str = ""  # its name in reports ("LSTM": rows "LSTM (ours)", claims "The LSTM (ours) ...")
    beyond_2003: bool = False  # one of our networks beyond 2003: its row (alone and + KN 5) in every
    #   `reproduce text`, an --extra group of brown and ap, a column of the summary, its claims
    quick: dict = field(default_factory=dict)  # the shape options a quick run narrows it to (a slice's width)

    def network_class(self) -> type:
        return load(self.network)

    def shape_of(self, values: dict) -> NetworkShape:
        """The shape from a saved dict (`asdict`); a field missing from an older checkpoint takes its
        default, a field this family does not have is refused."""
        unknown = sorted(set(values) - set(self.shape_fields()))
        if unknown:
            raise LMBenchError(f"--model {self.name} has no option {', '.join('--' + option_name(k) for k in unknown)}"
                               f" (its options: {', '.join('--' + option_name(k) for k in self.shape_fields())})")
        return self.shape(**values)

    def shape_fields(self) -> list[str]:
        return [f.name for f in fields(self.shape)]


FAMILIES: dict[str, Family] = {}


def register(entry: Family) -> Family:
    if entry.name in FAMILIES:
        raise ValueError(f"family {entry.name!r} is registered twice")
    if entry.context not in CONTEXTS or not issubclass(entry.shape, NetworkShape):
        raise ValueError(f"family {entry.name!r}: context must be one of {CONTEXTS} and shape a NetworkShape")
    if any(entry.shape is other.shape for other in FAMILIES.values()):
        raise ValueError(f"family {entry.name!r}: its shape dataclass must be its own")
    if entry.context == "stream" and not (entry.trainer and entry.scorer and entry.loader):
        raise ValueError(f"family {entry.name!r}: a stream family names its trainer, scorer and loader")
    FAMILIES[entry.name] = entry
    return entry


def family_of(shape: NetworkShape) -> Family:
    """The family whose shape dataclass `shape` is (each family has its own)."""
    return next(entry for entry in FAMILIES.values() if type(shape) is entry.shape)


def family(name: str) -> Family:
    """The family called `name`, or one line naming those there are."""
    if name not in FAMILIES:
        raise LMBenchError(f"unknown model {name!r}: use one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


def load(target: str) -> Any:
    """The object "module:attribute" names, imported."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def option_name(field_name: str) -> str:
    return field_name.replace("_", "-")


class Network(Protocol):
    """What every network is, window or stream (written down once, here; `neural.training`, `neural.lm`,
    `neural.outputs.objectives`, `neural.oov` and `neural.parallel.teams` call nothing else; each context
    adds its own part below: `WindowNetwork`, `StreamingNetwork`). A network is a torch.nn.Module;
    tests/test_contract.py checks that every registered family's class has every member of its
    context's protocol, and the behavioural contract (distributions, exact scores, resume) is tested
    over the registry in tests/test_nplm_families.py and tests/test_stream_networks.py.

    Building and the checkpoint
      __init__(shape, vocab_size, *, output="softmax", structure=None, dropout=0.0): built from its
        family's shape dataclass over `vocab_size` words, with the output layer `output` (the `output`
        of the run's objective in `neural.config.OBJECTIVES`: "softmax", "class", "tree"; one of its
        shape's `outputs`) over the word structure it needs (`structure`: the word -> class map, the
        tree; None for the softmax), and dropout on its features while training where it has a place
        for it (its shape's `refuse` refuses what it cannot take, in one line, before anything is built).
      shape, vocab_size: what it was built from. The checkpoint keeps the family name, the run's
        configuration (`neural.config.NPLMConfig`, with `dataclasses.asdict(shape)` and the objective),
        |V| and the state_dict.
      saved_structure(state) (staticmethod): the output layer's word structure a saved state holds
        (None without), so that family + shape + objective + |V| + state rebuild the network.
      load_state_dict(state): torch's, refusing (LMBenchError, one line) a state of another output
        layer or structure.

    Training (`neural.training`, `neural.outputs.objectives`), over features z (N, K)
      history: how many tokens before the target a window network reads (n - 1); None for a stream
        network (the whole stream).
      loss(z, target, bf16=False) -> the mean exact -log P(target | context) of its output layer (the
        objectives "softmax", "class", "tree").
      sampled_scores(z, target, sample (k,)) -> (y of each target (N,), y of the k words for every
        example (N, k)): the hook of the sampled objectives ("importance", "nce"), computing these only,
        with sparse gradients on the rows of the word tables they read.
      set_unigram_biases(q (V,)): start from P(w | h) = q_w for every h.
      decay_parameters() / bias_parameters(): those weight decay applies to (the weights and C) and
        those it spares (the biases); together every parameter.

    The vocabulary (`neural.oov`)
      WORD_TABLES: names (as in named_parameters) of the parameters with one row per word; a network
        whose output layer has a word structure has no place for a new word. `neural.oov.widen` builds the same
        family and shape over V + N words and loads the state with these tables grown (the new rows
        the expectation of the old under P(. | h)); num_classes: C of a class-factored output layer, else 0.
    """

    shape: NetworkShape
    vocab_size: int
    history: int | None
    num_classes: int
    WORD_TABLES: ClassVar[tuple[str, ...]]

    @staticmethod
    def saved_structure(state: dict) -> Any: ...
    def loss(self, z: "torch.Tensor", target: "torch.Tensor", bf16: bool = False) -> "torch.Tensor": ...
    def sampled_scores(self, z: "torch.Tensor", target: "torch.Tensor",
                       sample: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]: ...
    def set_unigram_biases(self, unigram: "torch.Tensor") -> None: ...
    def decay_parameters(self) -> list: ...
    def bias_parameters(self) -> list: ...


class WindowNetwork(Network, Protocol):
    """A network of context "window" (the NPLM, the energy network): it reads the `history` tokens before
    the target, (B, history) int64, oldest first, PAD_ID-padded; trained on shuffled windows by
    `neural.training.train`, scored by `neural.lm` (the contract of `lmbench.model.LanguageModel`).

      features(context) -> z (B, K): what the output layer and the objectives take.
      log_probs(context, target=None, *, bf16=False, full_softmax=False) -> float64 log P(target |
        context) (B,), or log P(. | context) (B, V) when target is None; normalised over V exactly for
        every context, and a target's value the same whatever else is in the batch (to float64
        rounding). full_softmax: a factored output layer scored by the plain softmax of its word
        scores y instead (only where it has them).
      forward(context) -> y (B, V): scores whose softmax is the full-softmax distribution (`neural.oov`
        reads them); C is the (V, m) feature table (nearest neighbours).
    """

    def features(self, context: "torch.Tensor") -> "torch.Tensor": ...
    def forward(self, context: "torch.Tensor") -> "torch.Tensor": ...
    def log_probs(self, context: "torch.Tensor", target: "torch.Tensor | None" = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> "torch.Tensor": ...


class StreamingNetwork(Network, Protocol):
    """A network of context "stream" (`neural.networks.stream.StreamNetwork`: the LSTM, the GRU, the
    Transformer): it reads the stream from its start; trained in lanes by `neural.training.stream_train`,
    scored by its own `score_stream`. Its output layer is the full softmax over features z.

      encode(inputs (B, T), state=None) -> (z (B, T, K), state): the features of every position and
        the state to carry to the next chunk of the same lanes: a tuple of tensors whose dimension 1 is
        the batch (the trainer detaches, saves and restores every tensor of it), or None for a network
        that carries none (the Transformer reads each window afresh).
      log_probs(z (N, K), target=None, bf16=False) -> float64 log P(target | history) (N,), or (N, V).
      score_stream(stream, start, *, bf16=False, progress=False) -> float64 log P(stream[t] |
        stream[:t]) for t >= start, in eval mode: each token once, with all of its history the family
        can read (its lanes warmed, or a window sliding by half its context).
      log_distribution(context) -> float64 log P(. | context) (V,), the history read as score_stream
        reads it (so log distribution(context)[w] is the score of w after context).
    """

    def encode(self, inputs: "torch.Tensor", state: Any = None) -> tuple["torch.Tensor", Any]: ...
    def log_probs(self, z: "torch.Tensor", target: "torch.Tensor | None" = None,
                  bf16: bool = False) -> "torch.Tensor": ...
    def score_stream(self, stream: Any, start: int, *, bf16: bool = False, progress: bool = False) -> Any: ...
    def log_distribution(self, context: Any) -> "torch.Tensor": ...


PROTOCOLS = {"window": WindowNetwork, "stream": StreamingNetwork}  # a family's context: what its network is


# -- the families ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NPLMShape(NetworkShape):
    """Equation (1) of the paper (`neural.networks.nplm.NPLM`)."""
    n: int = field(default=5, metadata={"help": "order: n-1 context words"})
    m: int = field(default=60, metadata={"help": "word feature size"})
    h: int = field(default=50, metadata={"help": "hidden units, 0 for none"})
    direct: bool = field(default=True, metadata={"help": "direct connections W from x to the output (MLP1: on)"})
    bag: int = field(default=0, metadata={"help": "words before the n-1 nearest read as one more block of x, "
                                                  "their mean feature vector (0: none, the paper's)"})

    outputs: ClassVar[tuple[str, ...] | None] = None  # any output layer over its features z
    parallel: ClassVar[tuple[str, ...]] = ("data", "vocab")

    def __post_init__(self):
        if self.h == 0 and not self.direct:
            raise LMBenchError("h = 0 without direct connections has no path from the context to the "
                               "output: give --h > 0 or --direct")
        check_numbers([("--n", self.n, ">= 2", self.n >= 2), ("--m", self.m, ">= 1", self.m >= 1),
                       ("--h", self.h, ">= 0", self.h >= 0), ("--bag", self.bag, ">= 0", self.bag >= 0)])


@dataclass(frozen=True)
class EnergyShape(NetworkShape):
    """The energy-minimisation network of section 5.1 (`neural.networks.energy.EnergyNetwork`)."""
    n: int = field(default=5, metadata={"help": "order: n-1 context words"})
    m: int = field(default=60, metadata={"help": "word feature size"})
    h: int = field(default=50, metadata={"help": "hidden units (the output word enters through them)"})
    direct: bool = field(default=True, metadata={"help": "direct connections W from the context to the output word"})

    def __post_init__(self):
        check_numbers([("--n", self.n, ">= 2", self.n >= 2), ("--m", self.m, ">= 1", self.m >= 1)])
        if self.h < 1:
            raise LMBenchError("--model energy needs --h >= 1: the output word enters the energy through "
                               "the hidden units only")

    def refuse(self, run) -> str | None:
        if run.dropout:
            return "--dropout acts on the NPLM's [tanh(d + Hx), x]: drop it for --model energy"
        if run.bf16:
            return ("--bf16 runs the NPLM's |V|-sized GEMMs in bfloat16; the energy network has none: drop "
                    "it for --model energy")
        return super().refuse(run)


register(Family("nplm", NPLMShape, "neural.networks.nplm:NPLM", vocab_slice="neural.parallel.teams:VocabSlice",
                summary="equation 1 of the paper (default)"))
register(Family("energy", EnergyShape, "neural.networks.energy:EnergyNetwork",
                summary="the energy-minimisation network, section 5.1"))


# The stream networks' recipe (docs/networks.md, "Beyond 2003"): 6 epochs of AdamW at 2e-3 under the cosine
# schedule, 32 lanes, k = 1,000 sampled words per update, decoupled weight decay 0.01 on the matrices,
# validated on the first 50,000 tokens of valid; each family adds its dropout.
STREAM_RUN_DEFAULTS = {"epochs": 6, "samples": 1000, "weight_decay": 0.01, "schedule": "cosine", "lr": 2e-3,
                       "batch_size": 32, "valid_tokens": 50_000}
# The options of the window networks' recipes that the stream networks' trainer (AdamW, a linear
# warm-up then a cosine rate over all its epochs, neural/training/stream_train.py) has no use for.
STREAM_UNUSED = ("recipe", "min_gain", "anneal_gain", "patience", "lr_decay", "classes", "class_source",
                 "eval_batch")
# The registration keywords of a stream family: its context, trainer, scorer and loader.
STREAM = dict(context="stream", trainer="neural.training.stream_train:train_stream",
              scorer="neural.networks.stream:score_family", loader="neural.training.stream_train:load_stream",
              beyond_2003=True)


@dataclass(frozen=True)
class RecurrentShape(NetworkShape):
    """The shape of a recurrent family (`neural.networks.stream.RecurrentNetwork`): stacked layers of h units over
    word vectors of m; trained by `neural.training.stream_train`, which takes --dropout as Zaremba et al.'s
    (embeddings, between layers, output). Each recurrent family subclasses it (its own dataclass)."""
    layers: int = field(default=2, metadata={"help": "stacked layers (recurrent: 1 or 2; transformer: blocks)"})
    m: int = field(default=256, metadata={"help": "word feature size"})
    h: int = field(default=256, metadata={"help": "hidden units"})
    tied: bool = field(default=True, metadata={"help": "stream networks: the output table is the input one"})

    def __post_init__(self):
        check_numbers([("--layers", self.layers, "1 or 2", self.layers in (1, 2)), ("--m", self.m, ">= 1", self.m >= 1),
                       ("--h", self.h, ">= 1", self.h >= 1)])
        if self.tied and self.m != self.h:
            raise LMBenchError(f"tied input and output tables need --m {self.m} = --h {self.h}: give the same "
                               "size or --no-tied")

    unused_options: ClassVar[tuple[str, ...]] = STREAM_UNUSED

    def refuse_unused(self, name: str, given: list[str]) -> str:
        return stream_refusal(name, given)


@dataclass(frozen=True)
class LSTMShape(RecurrentShape):
    """A stacked LSTM over the whole stream (`neural.networks.lstm.LSTMNetwork`)."""
    run_defaults: ClassVar[dict] = {**STREAM_RUN_DEFAULTS, "dropout": 0.4}


@dataclass(frozen=True)
class TransformerShape(NetworkShape):
    """A causal pre-norm decoder over windows of the stream (`neural.networks.transformer.TransformerNetwork`);
    trained by `neural.training.stream_train` (--dropout on attention, residual branches and embeddings)."""
    layers: int = field(default=4, metadata={"help": "stacked layers (recurrent: 1 or 2; transformer: blocks)"})
    d: int = field(default=256, metadata={"help": "transformer: model width"})
    heads: int = field(default=4, metadata={"help": "transformer: attention heads"})
    ff: int = field(default=1024, metadata={"help": "transformer: MLP width"})
    context: int = field(default=128, metadata={"help": "transformer: L, inputs per window (scored with stride L/2)"})
    positions: str = field(default="rotary", metadata={"help": "transformer: rotary or learned"})
    tied: bool = field(default=True, metadata={"help": "stream networks: the output table is the input one"})

    run_defaults: ClassVar[dict] = {**STREAM_RUN_DEFAULTS, "dropout": 0.2}
    unused_options: ClassVar[tuple[str, ...]] = STREAM_UNUSED

    def __post_init__(self):
        if self.positions not in ("rotary", "learned"):
            raise LMBenchError(f"unknown positions {self.positions!r}: use rotary or learned")
        check_numbers([
            ("--layers", self.layers, ">= 1", self.layers >= 1), ("--d", self.d, ">= 1", self.d >= 1),
            ("--heads", self.heads, f"a divisor of --d {self.d}", self.heads >= 1 and self.d % self.heads == 0),
            ("--ff", self.ff, ">= 1", self.ff >= 1),
            ("--context", self.context, "even and >= 2", self.context >= 2 and self.context % 2 == 0)])
        if self.positions == "rotary" and (self.d // self.heads) % 2:
            raise LMBenchError(f"rotary positions rotate pairs of a head's {self.d // self.heads} dimensions: "
                               "give --d / --heads even, or --positions learned")

    def refuse_unused(self, name: str, given: list[str]) -> str:
        return stream_refusal(name, given)


def stream_refusal(name: str, given: list[str]) -> str:
    """The line refusing window-recipe options for a stream family."""
    return (f"--model {name} trains with its own recipe (neural/training/stream_train.py: AdamW, a linear warm-up then "
            f"a cosine rate over all --epochs), which has no use for {', '.join('--' + option_name(k) for k in given)}: "
            f"drop {'it' if len(given) == 1 else 'them'}")


register(Family("lstm", LSTMShape, "neural.networks.lstm:LSTMNetwork", label="LSTM", quick={"m": 64, "h": 64},
                summary="an LSTM over the whole stream (Zaremba et al. 2014)", **STREAM))
register(Family("transformer", TransformerShape, "neural.networks.transformer:TransformerNetwork", label="Transformer",
                quick={"layers": 2, "d": 64, "heads": 2, "ff": 256, "context": 32},
                summary="a small causal Transformer, sliding-window scoring", **STREAM))


@dataclass(frozen=True)
class GRUShape(RecurrentShape):
    """A stacked GRU over the whole stream (`neural.networks.gru.GRUNetwork`), in the LSTM's recipe."""
    run_defaults: ClassVar[dict] = {**STREAM_RUN_DEFAULTS, "dropout": 0.4}


register(Family("gru", GRUShape, "neural.networks.gru:GRUNetwork", label="GRU", quick={"m": 64, "h": 64},
                summary="a GRU over the whole stream (Cho et al. 2014)", **STREAM))

"""The registry of network families, and the protocol (`Network`) every network implements.

A family is one file, `neural/networks/NAME.py`, holding (as nanoGPT keeps GPTConfig beside GPT):
- its shape, a frozen dataclass subclassing `NetworkShape`: everything that fixes the network's
  parameters (its n, m, h, ... and nothing about training). A checkpoint keeps it
  (`dataclasses.asdict`) and the network is rebuilt from it. Its fields are the command line's options
  of that family (`lmbench train --model NAME --FIELD ...`): the default and the help text live once,
  in the field (`field(default=..., metadata={"help": ...})`). Its class variables `outputs` and
  `parallel` list the output layers it can have (`neural.config.OBJECTIVES` names each objective's;
  None: any) and the --parallel schemes it runs under; `run_defaults` the defaults of the training
  run's options that are the family's own (an option given explicitly wins); `refuse` names, in one
  line, an option of the run it cannot take;
- its network (torch), implementing `Network` and its context's part of it (`PROTOCOLS`);
- its registration, the file's last line:

      register(Family("NAME", NAMEShape, NAMENetwork, context=..., label="...", summary="..."))

`context` is what a network reads to predict a token, and so how the one trainer
(`neural.training.trainer`) batches it and the one scorer (`neural.scoring`) scores it: "window" (the
NPLM, the energy network: the `history` tokens just before it, left-padded with PAD_ID at the start
of a stream, trained on shuffled windows) or "stream" (recurrent and attention networks: contiguous
lanes of the stream, a state carried from one update to the next).

Nothing else names a family: the registry finds the family files itself (every module of
`neural.networks` is imported the first time the registry is read; a module that registers nothing,
like `neural.networks.stream`, only lends its bases), and the command line, the rows of `reproduce`,
the summary's columns, the claims, the pinned scores and the contract tests iterate it. This file
imports no torch; reading the registry imports the networks, and with them torch, so the commands
that need no network (`corpus`, `ngram`, `mix`) never read it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
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
    renamed: ClassVar[dict] = {}  # a field's former name -> its name: a saved shape under the old name still loads
    # the run's options its trainer has no use for, refused when given: a window network's, the stream trainer's own
    unused_options: ClassVar[tuple[str, ...]] = ("steps", "warmup_steps", "clip", "final_lr_fraction")

    def refuse(self, run) -> str | None:
        """One line naming an option of the training run `run` (a `neural.config.RunConfig`) that this
        network cannot take, and what to do instead; None when it takes them all. (An objective whose
        output layer is not in `outputs` is refused by the run itself.) The base refuses a scheme
        outside `parallel`."""
        if run.parallel is not None and run.parallel not in self.parallel:
            return self.refuse_parallel(run.model, run.parallel)
        return None

    def training_flops(self, vocab_size: int, run, factored_rows: float | None = None) -> float:
        """FLOPs of one training update's forward and backward passes PER TARGET TOKEN of the run `run` (a
        `neural.config.RunConfig`: its objective, samples, batch and steps) over `vocab_size` words: 2 per
        multiply-add of the network's products, a GEMM's forward pass and the two of its backward pass
        (the gradients of both operands, each as large), the products computed elementwise as autograd
        runs them; not the optimizer's step, the activations or the sums of the biases' gradients. Each
        family counts its own (its file's docstring gives the formula), its output layer by
        `neural.outputs.flops.output_flops` (`factored_rows`: the rows of a class or tree layer a target
        reads, when known); checked within 5% against torch's count of one update
        (`neural.training.measured_flops`, tests/test_flops.py)."""
        raise NotImplementedError(f"{type(self).__name__} must define training_flops(vocab_size, run, factored_rows): "
                                  "its training FLOPs per token (tests/test_flops.py checks it against a measured count)")

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
    network: type  # the network's class (torch), beside its shape in the family's file
    context: str = "window"  # "window" or "stream"
    summary: str = ""  # one line for --help
    vocab_slice: str | None = None  # "module:Class" under --parallel vocab
    label: str = ""  # its name in reports ("LSTM": rows "LSTM (ours)", claims "The LSTM (ours) ...")
    beyond_2003: bool = False  # one of our networks beyond 2003: its row (alone and + KN 5) in
    #   `reproduce text`, an --extra group of brown and ap, a column of the summary, its claims
    compared: bool = True  # beyond 2003: a row of every `reproduce text` (False: only when --networks names it)
    quick: dict = field(default_factory=dict)  # the shape options a quick run narrows it to (a slice's width)
    order: int = 100  # where its rows and columns sit among the families' (lower first; a new family last)
    mixed_precision: bool = False  # measured faster in bf16 products where they are native: --precision auto
    #   picks bf16 for it there (neural.precision; bench/train_speed.py --precision)

    def network_class(self) -> type:
        return self.network

    def shape_of(self, values: dict) -> NetworkShape:
        """The shape from a saved dict (`asdict`); a field missing from an older checkpoint takes its
        default, a field under a former name (`renamed`) takes its new one, a field this family does not
        have is refused."""
        values = {self.shape.renamed.get(key, key): value for key, value in values.items()}
        unknown = sorted(set(values) - set(self.shape_fields()))
        if unknown:
            raise LMBenchError(f"--model {self.name} has no option {', '.join('--' + option_name(k) for k in unknown)}"
                               f" (its options: {', '.join('--' + option_name(k) for k in self.shape_fields())})")
        return self.shape(**values)

    def shape_fields(self) -> list[str]:
        return [f.name for f in fields(self.shape)]


_REGISTERED: dict[str, Family] = {}


class Registry(Mapping):
    """The registered families by name, in their `order`: reading it first imports every module of
    `neural.networks`, where each family registers itself."""

    def _families(self) -> dict[str, Family]:
        discover()
        return dict(sorted(_REGISTERED.items(), key=lambda item: (item[1].order, item[0])))

    def __getitem__(self, name: str) -> Family:
        discover()
        return _REGISTERED[name]

    def __iter__(self):
        return iter(self._families())

    def __len__(self) -> int:
        return len(self._families())


FAMILIES = Registry()
_discovered = False


def discover() -> None:
    """Import every module of the package `neural.networks` once (each family file registers itself)."""
    global _discovered
    if not _discovered:
        _discovered = True
        import neural.networks
        for module in pkgutil.iter_modules(neural.networks.__path__):
            importlib.import_module(f"neural.networks.{module.name}")


def register(entry: Family) -> Family:
    if entry.name in _REGISTERED:
        raise ValueError(f"family {entry.name!r} is registered twice")
    if entry.context not in CONTEXTS or not issubclass(entry.shape, NetworkShape):
        raise ValueError(f"family {entry.name!r}: context must be one of {CONTEXTS} and shape a NetworkShape")
    if entry.context == "stream" and entry.shape.run_defaults.get("recipe") != "adamw":
        raise ValueError(f"family {entry.name!r}: a stream family's shape subclasses neural.networks.stream.StreamShape "
                         "(the stream networks' recipe: its run defaults)")
    if any(entry.shape is other.shape for other in _REGISTERED.values()):
        raise ValueError(f"family {entry.name!r}: its shape dataclass must be its own")
    _REGISTERED[entry.name] = entry
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


def families_markdown() -> str:
    """The table of the registered families that docs/networks.md keeps between its `families` markers
    (tests/test_docs.py checks it; the one list of the families in the docs, the rest link to it)."""
    lines = ["| `--model` | what it is | context | shape options (defaults) |", "|---|---|---|---|"]
    for name, entry in FAMILIES.items():
        options = ", ".join(f"`--{option_name(f.name)}` {f.default}" for f in fields(entry.shape))
        lines.append(f"| `{name}` | {entry.summary} | {entry.context} | {options} |")
    return "\n".join(lines) + "\n"


def option_name(field_name: str) -> str:
    return field_name.replace("_", "-")


class Network(Protocol):
    """What every network is, window or stream (written down once, here; `neural.training`, `neural.scoring`,
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
        configuration (`neural.config.RunConfig`, with `dataclasses.asdict(shape)` and the objective),
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
    `neural.training.trainer`, scored by `neural.scoring` (the contract of `lmbench.model.LanguageModel`).

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
    Transformer): it reads the stream from its start; trained in lanes by `neural.training.trainer`,
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

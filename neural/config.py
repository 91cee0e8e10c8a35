"""What a training run is, for every family: one configuration (`RunConfig`), the objectives and the
window networks' two recipes (no torch here, so that the command line can offer the choices without
importing it). `neural.training.recipe` carries the recipes out; the stream networks' trainer
(`neural.training.trainer`) reads the same configuration, with its family's defaults (its shape's
`run_defaults`: AdamW under the cosine schedule) and the options only it takes (`steps`,
`warmup_steps`, `clip`, `final_lr_fraction`), which a window network refuses in one line."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from lmbench.errors import LMBenchError
from neural.families import NetworkShape, check_numbers, family
from neural.precision import CHOICES, resolve as resolve_precision

CLASS_SOURCES = ("frequency", "exchange")  # neural/outputs/classes.py makes each
PARALLEL = ("data", "vocab")  # neural/parallel/teams.py: minibatch shards, or blocks of output rows
# the rate schedules: the sgd recipe's (neural/training/recipe.py), and the stream networks' linear warm-up
# then cosine decay (neural/training/trainer.py)
SCHEDULES = ("halving", "linear", "cosine")
BACKENDS = ("auto", "gloo", "nccl")  # torch.distributed's; auto: nccl on CUDA, gloo on the CPU


@dataclass(frozen=True)
class Objective:
    """One training objective (`neural.outputs.objectives`) and the output layer it trains (`neural.outputs.layers`)."""
    name: str
    output: str  # the output layer the network gets: the name of the exact objective that trains it
    layer: str | None = None  # an exact objective: "module:Class" of its output layer, whose loss it is
    loss: str | None = None  # a sampled objective: "module:Class" of its loss over the softmax layer
    structure: str | None = None  # "module:function"(corpus, config, progress=) -> the layer's word structure
    options: tuple[str, ...] = ()  # the run's options it reads besides the common ones
    summary: str = ""  # for --help

    @property
    def sampled(self) -> bool:
        """A sampled objective's loss is not a log-likelihood (no train perplexity)."""
        return self.loss is not None


OBJECTIVES = {o.name: o for o in (
    Objective("softmax", "softmax", layer="neural.outputs.layers:SoftmaxLayer", summary="the full softmax (exact)"),
    Objective("importance", "softmax", loss="neural.outputs.objectives:ImportanceSampling",
              summary="importance sampling of the softmax gradient"),
    Objective("nce", "softmax", loss="neural.outputs.objectives:NoiseContrastive", summary="noise-contrastive estimation"),
    Objective("class", "class", layer="neural.outputs.layers:ClassLayer", structure="neural.outputs.classes:word_classes",
              options=("classes", "class_source"), summary="the class-factored softmax (exact)"),
    Objective("tree", "tree", layer="neural.outputs.tree:TreeLayer", structure="neural.outputs.tree:word_tree",
              options=("classes", "class_source"), summary="the tree softmax over a Huffman tree (exact)"),
)}


@dataclass(frozen=True)
class Recipe:
    batch: int  # windows (or lanes) per update
    lr: float  # eps0
    decay_every: int  # updates over which the weight decay is compounded (sgd's coupled decay)
    optimizer: str  # `neural.training.recipe.OPTIMIZERS`: "sgd" (coupled decay) or "adamw" (clipped)
    schedules: tuple[str, ...]  # the rate schedules it runs (`neural.training.recipe.learning_rate`)


RECIPES = {"paper": Recipe(batch=1, lr=1e-3, decay_every=1, optimizer="sgd", schedules=("halving",)),
           "sgd": Recipe(batch=128, lr=1.0, decay_every=16, optimizer="sgd", schedules=("halving", "linear")),
           "adamw": Recipe(batch=32, lr=2e-3, decay_every=1, optimizer="adamw", schedules=("cosine",))}

# The sgd recipe's settings for time to quality (issue 66), which a comparison on a user's corpus gives its
# window networks (the paper's shapes; NPLM (ours) keeps its own epochs): 4 times the windows of an update at
# 4 times the rate, the rate falling linearly to 0 over a known number of epochs instead of the halving rule's
# plateau, each epoch validated on the first 50,000 valid tokens (the final figures score all of valid). An
# update of 128 windows waits on latency more than it computes: 512 cost about half as much a window on one
# core, and at the linearly scaled rate an epoch of them gains as much as one of 128 (MLP1 on ap89-1m, 8
# linear epochs: valid 111.7 at 512 windows and rate 4, 111.4 at 128 and rate 1). 16 epochs reach the halving
# rule's valid perplexity there (107.16 against 107.09 in 14 epochs; 12 epochs: 108.61). The coupled weight
# decay per epoch is the same: (1 - 4 lambda)^(T/512) = (1 - lambda)^(T/128) to first order. Measured
# against the halving rule on ap89-1m and brown-vocab-train: docs/measurements.md (issue 66).
TIME_TO_QUALITY = {"batch_size": 512, "lr": 4.0, "schedule": "linear", "epochs": 16, "valid_tokens": 50_000}


@dataclass(init=False)
class RunConfig:
    """A training run: the network (its family `model` and its `shape`, `neural.families`) and how it is
    trained. Built as RunConfig(model="energy", n=3, h=20, objective="nce", ...): the keywords that are
    fields of the family's shape dataclass go into `shape` (the others keep its defaults), the rest are
    the run's own fields below (those not given: the family's `run_defaults`, else the defaults below)."""

    model: str = "nplm"  # the family (neural/families.py): "nplm" (equation 1), "energy" (section 5.1)
    shape: NetworkShape | None = None  # the family's shape dataclass (n, m, h, ...); None: its defaults
    recipe: str = "sgd"  # "paper" or "sgd"
    objective: str = "importance"  # "softmax", "importance", "nce" or "class" (neural/outputs/objectives.py)
    samples: int = 400  # k: words drawn per minibatch by a sampled objective (Brown: 400 vs 100, see README)
    classes: int = 0  # objective "class": C, the number of word classes; 0: round(sqrt(|V|))
    class_source: str = "frequency"  # objective "class": "frequency" bins or "exchange" clustering
    epochs: int = 40  # the most epochs to run
    batch_size: int | None = None  # None: the recipe's (paper 1, sgd 128)
    lr: float | None = None  # None: the recipe's eps0 (paper 1e-3, sgd 1.0)
    lr_decay: float = 1e-8  # paper: r in eps0 / (1 + r t)
    min_gain: float = 0.003  # sgd: halve once an epoch gains less than this per 1M train tokens (neural.training.recipe)
    anneal_gain: float | None = None  # sgd: start halving below this fixed gain instead (None: the rule)
    schedule: str = "halving"  # sgd: "halving" (the rule above) or "linear" (lr to 0 over all `epochs`, neural.training.recipe)
    weight_decay: float = 1e-4  # on the weights and C, never the biases (paper: 1e-4 Brown, 1e-5 AP)
    patience: int = 2  # paper: stop after this many epochs without a better validation perplexity
    dropout: float = 0.0  # dropout on the features while training (not in the paper; NPLM: [tanh(d + Hx), x])
    seed: int = 0
    device: str = "auto"  # "auto" (cuda when present, else cpu), "cpu", "cuda", "cuda:1", ...
    precision: str = "auto"  # the training products: "auto" (bf16 where native and faster, else fp32), "fp32" or "bf16" (mixed), resolved (neural.precision)
    threads: int | None = None  # cpu threads; None: OMP_NUM_THREADS when set, else the free cores (lmbench.threads)
    checkpoint_minutes: float = 5.0  # also checkpoint mid-epoch this often
    max_steps: int | None = None  # pause (with a checkpoint; --resume carries on) after this many updates in all
    budget_updates: int | None = None  # train exactly this many updates, the schedule decaying to the last (None: epochs)
    eval_batch: int = 2048
    valid_tokens: int | None = None  # validate each epoch on the first this many valid tokens (None: all)
    steps: int | None = None  # stream networks: inputs per lane per update (None: 35, or a Transformer's context)
    warmup_steps: int = 100  # stream networks: updates of the cosine schedule's linear warm-up
    clip: float = 1.0  # stream networks: the gradient's norm is clipped at this
    final_lr_fraction: float = 0.05  # stream networks: the cosine schedule's last rate, as a fraction of --lr
    parallel: str | None = None  # None (one process), "data" or "vocab", under torchrun (neural/parallel/teams.py)
    backend: str = "auto"  # --parallel: "auto", "gloo" or "nccl"

    def __init__(self, model: str = "nplm", shape: NetworkShape | dict | None = None, **options):
        entry = family(model)
        given = {k: options.pop(k) for k in entry.shape_fields() if k in options}
        if shape is None:
            shape = entry.shape(**given)
        else:
            shape = entry.shape_of(shape) if isinstance(shape, dict) else shape
            if type(shape) is not entry.shape:
                raise LMBenchError(f"the shape of a --model {model} network is a {entry.shape.__name__}, "
                                   f"not a {type(shape).__name__}")
            shape = replace(shape, **given)
        self.model, self.shape = model, shape
        defaults = {f.name: shape.run_defaults.get(f.name, f.default) for f in fields(self)[2:]}
        unused = [k for k in options if k in shape.unused_options and options[k] != defaults[k]]
        if unused:  # (an option at its default changes nothing: `dataclasses.replace` passes every field)
            raise LMBenchError(shape.refuse_unused(model, unused))
        for f in fields(self)[2:]:
            setattr(self, f.name, options.pop(f.name, shape.run_defaults.get(f.name, f.default)))
        if options:
            raise LMBenchError(f"--model {model} has no option "
                               f"{', '.join('--' + k.replace('_', '-') for k in options)}")
        if self.precision not in CHOICES:
            raise LMBenchError(f"--precision {self.precision}: give one of {', '.join(CHOICES)}")
        self.precision = resolve_precision(self.precision, entry, self.device)  # what the run records: fp32 or bf16
        self.check()

    @classmethod
    def from_saved(cls, saved: dict) -> "RunConfig":
        """The configuration a run saved (`dataclasses.asdict`: a checkpoint's, a results.json row's), of this
        or an earlier version (`saved_options`)."""
        values = cls.saved_options(saved)
        model, shape = values.pop("model", "nplm"), values.pop("shape", None)
        return cls(model=model, shape=shape, **values)

    @classmethod
    def saved_options(cls, saved: dict) -> dict:
        """The options of a saved configuration (`from_saved`), as RunConfig takes them, of this or an earlier
        version: a field since removed is dropped, a stream family's recipe, which its trainer never read
        before the one trainer (saved as "sgd"), is the adamw it trained with; what a resumed run takes of
        its run (`neural.cli`)."""
        values = {f.name: saved[f.name] for f in fields(cls) if f.name in saved}
        if "precision" not in saved:  # (saved before --precision: fp32, or --bf16's products in bfloat16)
            values["precision"] = "bf16" if saved.get("bf16") else "fp32"
        if family(values.get("model", "nplm")).context == "stream":
            values["recipe"] = "adamw"
        return values

    def check(self) -> None:
        if self.recipe not in RECIPES:
            raise LMBenchError(f"unknown recipe {self.recipe!r}: use one of {', '.join(RECIPES)}")
        if self.objective not in OBJECTIVES:
            raise LMBenchError(f"unknown objective {self.objective!r}: use one of {', '.join(OBJECTIVES)}")
        if self.schedule not in SCHEDULES:
            raise LMBenchError(f"unknown schedule {self.schedule!r}: use one of {', '.join(SCHEDULES)}")
        stream = family(self.model).context == "stream"
        if stream != (self.recipe == "adamw"):  # (a window network's sparse gradients are plain SGD's)
            raise LMBenchError(f"--model {self.model} trains with the {'adamw' if stream else 'paper or sgd'} "
                               f"recipe: drop --recipe {self.recipe}")
        if self.budget_updates is not None and self.schedule == "halving" and self.recipe == "sgd":
            raise LMBenchError("--budget-updates needs a rate that decays to the budget's end: give --schedule linear "
                               "(the halving rule halves on plateaus of its own, which a budget would cut)")
        if self.schedule not in self.recipe_entry.schedules:
            raise LMBenchError(f"--schedule {self.schedule} is not a schedule of the {self.recipe} recipe: give "
                               f"{' or '.join(self.recipe_entry.schedules)}")
        if self.class_source not in CLASS_SOURCES:
            raise LMBenchError(f"unknown class source {self.class_source!r}: use one of "
                               f"{', '.join(CLASS_SOURCES)}")
        if self.parallel not in (None, *PARALLEL):
            raise LMBenchError(f"unknown parallel scheme {self.parallel!r}: use one of {', '.join(PARALLEL)}")
        if self.backend not in BACKENDS:
            raise LMBenchError(f"unknown backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        objective = OBJECTIVES[self.objective]
        outputs = self.shape.outputs
        if outputs is not None and objective.output not in outputs:
            usable = [o.name for o in OBJECTIVES.values() if o.output in outputs]
            raise LMBenchError(f"--model {self.model} has no {objective.output} output layer (--objective "
                               f"{self.objective}): train it with --objective {', '.join(usable)}")
        if self.parallel == "vocab" and objective.output != "softmax":
            raise LMBenchError(f"--objective {self.objective} does not compose with --parallel vocab (its "
                               "output layer cuts across the blocks of output rows): train it with --parallel "
                               "data, or --parallel vocab with --objective "
                               f"{', '.join(o.name for o in OBJECTIVES.values() if o.output == 'softmax')}")
        if self.classes < 0 or self.classes == 1:
            raise LMBenchError(f"--classes {self.classes}: give at least 2 classes, or 0 for "
                               "round(sqrt(|V|))")
        readers = [o.name for o in OBJECTIVES.values() if "classes" in o.options]
        if "classes" not in objective.options and (self.classes or self.class_source != "frequency"):
            raise LMBenchError(f"--classes and --class-source set the classes of --objective {' or '.join(readers)}: "
                               f"drop them or train with --objective {' or '.join(readers)} (not {self.objective})")
        check_numbers([
                ("--samples", self.samples, ">= 1", self.samples >= 1),
                ("--epochs", self.epochs, ">= 1", self.epochs >= 1),
                ("--batch-size", self.batch_size, ">= 1", self.batch_size is None or self.batch_size >= 1),
                ("--lr", self.lr, "finite and > 0", self.lr is None or 0 < self.lr < math.inf),
                ("--min-gain", self.min_gain, "< 1", self.min_gain < 1),
                ("--anneal-gain", self.anneal_gain, ">= --min-gain and < 1",
                 self.anneal_gain is None or self.min_gain <= self.anneal_gain < 1),
                ("--weight-decay", self.weight_decay, "finite and >= 0", 0 <= self.weight_decay < math.inf),
                ("--patience", self.patience, ">= 1", self.patience >= 1),
                ("--dropout", self.dropout, "in [0, 1)", 0 <= self.dropout < 1),
                ("--threads", self.threads, ">= 1", self.threads is None or self.threads >= 1),
                ("--max-steps", self.max_steps, ">= 0", self.max_steps is None or self.max_steps >= 0),
                ("--budget-updates", self.budget_updates, ">= 1", self.budget_updates is None or self.budget_updates >= 1),
                ("--valid-tokens", self.valid_tokens, ">= 1", self.valid_tokens is None or self.valid_tokens >= 1),
                ("--checkpoint-minutes", self.checkpoint_minutes, "> 0", self.checkpoint_minutes > 0),
                ("--steps", self.steps, ">= 1", self.steps is None or self.steps >= 1),
                ("--warmup-steps", self.warmup_steps, ">= 0", self.warmup_steps >= 0),
                ("--clip", self.clip, "finite and > 0", 0 < self.clip < math.inf),
                ("--final-lr-fraction", self.final_lr_fraction, "in [0, 1]", 0 <= self.final_lr_fraction <= 1)])
        refusal = self.shape.refuse(self)
        if refusal:
            raise LMBenchError(refusal)

    @property
    def recipe_entry(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def batch(self) -> int:
        return self.batch_size or RECIPES[self.recipe].batch

    @property
    def peak_lr(self) -> float:
        return self.lr if self.lr is not None else RECIPES[self.recipe].lr

    @property
    def decay_every(self) -> int:
        return RECIPES[self.recipe].decay_every

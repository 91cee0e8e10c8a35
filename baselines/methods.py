"""The registry of n-gram methods by name (`METHODS`), and `make_ngram`, which builds the unfitted model
of a method from its options (`NGramOptions`): what `lmbench ngram` and the reproduction's n-gram rows
both call.

A method is registered by one line, `register(Method("NAME", build, ...))`: the suite's below, a
contributor's at the end of its own file in `baselines/` (every module of the package `baselines` but
its command line is imported the first time the registry is read, as `neural.families` finds the
network families). The registration says everything the rest asks of a method: its orders, the options
of `lmbench ngram` it takes (`options`), whether it estimates in bounded memory (`bounded`, `--memory`)
and is written as an ARPA file (`arpa`), and the rows it is in a user's comparison (`compared`, the
orders; `label`, `row_id`, `row_options`). Nothing else names a method: the command line's choices,
help and refusals, the check of results.json's rows (`reports.records`), the rows of `reproduce text`
(`reports.experiments.text_rows`), the methods table of docs/ngram.md (`methods_markdown`), the
contract test (tests/test_ngram_contract.py) and the bench read the registry. The paper's tables
(`reports.experiments.brown_rows`, `ap_rows`) are the paper's rows, listed there.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Callable

from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel

CLUSTER_PASSES = 20  # exchange-clustering passes of the class n-gram
SRILM_CUTOFF = 2  # SRILM's ngram-count keeps trigrams and longer seen at least twice (-gt3min 2 ...)
TABLE_CLUSTER_PASSES = 10  # exchange passes for the reports' clusterings (the objective has all but settled)


@dataclass(frozen=True)
class NGramOptions:
    """What builds an n-gram model: its method and order (None: the method's default), the classes of
    the class n-gram, the count cut-off of the back-off models, and the memory cap (bytes) and temporary
    folder of the bounded-memory path (`baselines.disk_counts`)."""
    method: str
    order: int | None = None
    classes: int | None = None
    min_ngram_count: int = 1
    cluster_passes: int = CLUSTER_PASSES
    memory: int | None = None
    tmp_dir: str | Path | None = None


OPTIONS = {"classes": "--classes", "cluster_passes": "--cluster-passes",
           "min_ngram_count": "--min-ngram-count"}  # NGramOptions' fields a method takes only if `options` names them


def one_row(vocab_size: int) -> list[dict]:
    """A method's rows at each of its compared orders: one, with no other option."""
    return [{}]


@dataclass(frozen=True)
class Method:
    """One registered n-gram method (the module docstring)."""
    name: str  # its `lmbench ngram --method`
    build: Callable[[NGramOptions], LanguageModel]  # the options (checked against the registration) -> an unfitted model
    min_order: int
    max_order: int
    default_order: int
    summary: str = ""  # one line: the methods table of docs/ngram.md
    options: tuple[str, ...] = ()  # the fields of OPTIONS it takes (any other given is refused)
    bounded: bool = False  # --memory: estimates through sorted files on disk past the cap (the same model)
    arpa: bool = False  # --arpa: its fitted model is a baselines.backoff.BackoffModel, written as an ARPA file
    compared: tuple[int, ...] = ()  # the orders at which it is a row of every user's comparison (reproduce text)
    label: str = ""  # its rows' label in a report ("{n}": the order)
    row_id: str = ""  # its rows' id ("{n}": the order, "{classes}": the classes); default "NAME-{n}"
    row_options: Callable[[int], list[dict]] = field(default=one_row)  # |V| -> its rows' other options, one row each
    #   at each compared order (NGramOptions' fields: SRILM's cutoffs, the classes of a class n-gram)

    def rows(self, vocab_size: int) -> list[dict]:
        """Its rows in a user's comparison over `vocab_size` words: each one's id, label and options."""
        return [{"id": (self.row_id or f"{self.name}-{{n}}").format(n=n, **options),
                 "label": self.label.format(n=n), "n": n, **options}
                for n in self.compared for options in self.row_options(vocab_size)]


_REGISTERED: dict[str, Method] = {}
_discovered = False


def register(entry: Method) -> Method:
    if entry.name in _REGISTERED:
        raise ValueError(f"n-gram method {entry.name!r} is registered twice")
    unknown = sorted(set(entry.options) - set(OPTIONS))
    if unknown or not entry.min_order <= entry.default_order <= entry.max_order or not all(
            entry.min_order <= n <= entry.max_order for n in entry.compared) or (entry.compared and not entry.label):
        raise ValueError(f"n-gram method {entry.name!r}: options among {', '.join(OPTIONS)} (not {unknown}), its "
                         "default and compared orders within its orders, and a label for its compared rows")
    _REGISTERED[entry.name] = entry
    return entry


def discover() -> None:
    """Import every module of the package `baselines` once but its command line (a method's own file
    registers it)."""
    global _discovered
    if not _discovered:
        _discovered = True
        import baselines
        for module in pkgutil.iter_modules(baselines.__path__):
            if module.name not in ("cli", "methods"):
                importlib.import_module(f"baselines.{module.name}")


class Registry(Mapping):
    """The registered methods by name, in the order they registered (the suite's first): reading it
    first imports the modules of `baselines`, where a method's own file registers it."""

    def __getitem__(self, name: str) -> Method:
        discover()
        return _REGISTERED[name]

    def __iter__(self):
        discover()
        return iter(dict(_REGISTERED))

    def __len__(self) -> int:
        discover()
        return len(_REGISTERED)


METHODS = Registry()


def methods_where(test: Callable[[Method], bool]) -> list[str]:
    """The names of the registered methods `test` holds for, e.g. `methods_where(lambda m: m.bounded)`."""
    return [name for name, method in METHODS.items() if test(method)]


def listed(names: list[str], word: str = "or") -> str:
    """Names as a sentence lists them: "a", "a or b", "a, b or c" ("(none)": none)."""
    if not names:
        return "(none)"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def methods_markdown() -> str:
    """The table of the registered methods that docs/ngram.md keeps between its `methods` markers
    (tests/test_docs.py checks it, `python -m tests.test_docs` writes it)."""
    lines = ["| `--method` | what it is | orders (default) | options | `--memory` | `--arpa` | rows of `reproduce text` |",
             "|---|---|---|---|---|---|---|"]
    for name, method in METHODS.items():
        orders = (f"{method.min_order}" if method.min_order == method.max_order
                  else f"{method.min_order}-{method.max_order}") + f" ({method.default_order})"
        options = ", ".join(f"`{OPTIONS[option]}`" for option in method.options) or "-"
        rows = ", ".join(dict.fromkeys(f"`{(method.row_id or row['id']).format(n=row['n'], classes='C')}`"
                                       for row in method.rows(1000)))
        lines.append(f"| `{name}` | {method.summary} | {orders} | {options} | {'yes' if method.bounded else '-'} | "
                     f"{'yes' if method.arpa else '-'} | {rows or '-'} |")
    return "\n".join(lines) + "\n"


def _add_one_unigram(options):
    from baselines.unigram import AddOneUnigram
    return AddOneUnigram()


def _katz(options):
    from baselines.katz import Katz
    return Katz(options.order, min_count=options.min_ngram_count, memory=options.memory, tmp_dir=options.tmp_dir)


def _kneser_ney(options):
    from baselines.kneser_ney import KneserNey
    return KneserNey(options.order, memory=options.memory, tmp_dir=options.tmp_dir)


def _kneser_ney_backoff(options):
    from baselines.kneser_ney import KneserNeyBackoff
    return KneserNeyBackoff(options.order, min_count=options.min_ngram_count, memory=options.memory,
                            tmp_dir=options.tmp_dir)


def _deleted_interpolation(options):
    from baselines.deleted_interpolation import DeletedInterpolationTrigram
    return DeletedInterpolationTrigram(memory=options.memory, tmp_dir=options.tmp_dir)


def _class(options):
    """Class n-gram whose class sequence is modelled by modified-KN back-off (Table 1's rows), in
    bounded memory under a memory cap."""
    from baselines.class_ngram import ClassNgram
    from baselines.kneser_ney import KneserNeyBackoff
    if not options.classes or options.classes < 2:
        raise LMBenchError("--method class needs --classes C with C >= 2 (the paper: 150 to 2000)")
    return ClassNgram(lambda: KneserNeyBackoff(options.order, min_count=options.min_ngram_count,
                                               memory=options.memory, tmp_dir=options.tmp_dir),
                      options.classes, max_iters=options.cluster_passes)


def _infini_gram(options):
    from baselines.infinigram import InfiniGram
    return InfiniGram(options.order, memory=options.memory, tmp_dir=options.tmp_dir)


def class_counts(vocab_size: int) -> list[int]:
    """Class counts for the class-based trigrams of a user's corpus: about 1%, 3% and 10% of |V| (on
    Brown's 16k words: 160, 480, 1600, near the paper's 150, 500, 2000)."""
    return sorted({max(2, round(vocab_size * share)) for share in (0.01, 0.03, 0.1)})


# The suite's methods, in the order of their rows in a user's comparison (a contributor's file registers after them).
register(Method("add-one-unigram", _add_one_unigram, 1, 1, 1, summary="add-one unigram (a floor)"))
register(Method("deleted-interpolation", _deleted_interpolation, 3, 3, 3, bounded=True, compared=(3,),
                label="Del. Int.", row_id="del-int",
                summary="the paper's trigram (Jelinek-Mercer), weights per context-frequency bucket by EM on valid"))
register(Method("kneser-ney-backoff", _kneser_ney_backoff, 2, 6, 3, options=("min_ngram_count",), bounded=True,
                arpa=True, compared=(3, 4, 5), label="Kneser-Ney back-off", row_id="kn-backoff-{n}",
                row_options=lambda vocab_size: [{"min_ngram_count": SRILM_CUTOFF}],
                summary="modified Kneser-Ney, back-off (SRILM's)"))
register(Method("kneser-ney", _kneser_ney, 2, 6, 5, bounded=True, arpa=True, compared=(3, 4, 5),
                label="Kneser-Ney interpolated", row_id="kn-interp-{n}",
                summary="modified Kneser-Ney, interpolated (KenLM's lmplz)"))
register(Method("infini-gram", _infini_gram, 2, 6, 5, bounded=True, compared=(5,),
                label="∞-gram + KN interpolated {n}", row_id="infini-gram-kn-{n}",
                summary="the ∞-gram interpolated with interpolated KN of the order, weights per effective n "
                        "(`--memory`: its KN part)"))
register(Method("katz", _katz, 2, 5, 3, options=("min_ngram_count",), bounded=True, arpa=True, compared=(3,),
                label="Katz back-off", summary="Katz back-off, Good-Turing discounts"))
register(Method("class", _class, 2, 5, 3, options=("classes", "cluster_passes", "min_ngram_count"), bounded=True,
                compared=(3,), label="class-based back-off", row_id="class-{n}-{classes}",
                row_options=lambda vocab_size: [{"classes": c, "min_ngram_count": SRILM_CUTOFF,
                                                 "cluster_passes": TABLE_CLUSTER_PASSES} for c in class_counts(vocab_size)],
                summary="exchange clustering, then a KN back-off class n-gram (`--memory`: its class sequence)"))


def make_ngram(options: NGramOptions) -> LanguageModel:
    """The unfitted model of `options.method` at `options.order` (the method's default when None), the
    options its registration does not take refused in one line."""
    if options.method not in METHODS:
        raise LMBenchError(f"unknown n-gram method {options.method!r}: use one of {', '.join(METHODS)}")
    method = METHODS[options.method]
    if options.memory is not None and not method.bounded:
        raise LMBenchError(f"--memory applies to {', '.join(methods_where(lambda m: m.bounded))}, not --method "
                           f"{options.method}: drop --memory")
    if options.tmp_dir is not None and options.memory is None:
        raise LMBenchError("--tmp-dir holds the temporary files of the bounded path of --memory: give --memory SIZE "
                           "too, or drop --tmp-dir")
    defaults = {f.name: f.default for f in fields(NGramOptions)}
    refused = [name for name in OPTIONS if getattr(options, name) != defaults[name] and name not in method.options]
    if refused:
        takers = methods_where(lambda m: all(name in m.options for name in refused))
        raise LMBenchError(f"{', '.join(OPTIONS[name] for name in refused)}: only for --method "
                           f"{listed(takers)}, not --method {options.method}: drop "
                           + ("it" if len(refused) == 1 else "them"))
    if options.order is None:
        options = replace(options, order=method.default_order)
    if not method.min_order <= options.order <= method.max_order:
        valid = (f"order {method.min_order}" if method.min_order == method.max_order
                 else f"orders {method.min_order} to {method.max_order}")
        raise LMBenchError(f"--method {options.method} does not support --order {options.order}: "
                           f"use {valid}")
    return method.build(options)

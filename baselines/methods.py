"""The n-gram methods of the suite by name: each one's constructor, the orders it supports and its
default order (`METHODS`), and `make_ngram`, which builds the unfitted model of a method from its
options (`NGramOptions`): what `lmbench ngram` and the reproduction's n-gram rows both call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel

CLUSTER_PASSES = 20  # exchange-clustering passes of the class n-gram
BOUNDED_METHODS = ("deleted-interpolation", "katz", "kneser-ney", "kneser-ney-backoff", "class",
                   "infini-gram")  # take --memory (infini-gram: its KN part; the index is memory-mapped)


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


@dataclass(frozen=True)
class Method:
    build: Callable[[NGramOptions], LanguageModel]  # the options -> an unfitted model
    min_order: int
    max_order: int
    default_order: int


def _add_one_unigram(options):
    from baselines.unigram import AddOneUnigram
    return AddOneUnigram()


def _katz(options):
    from baselines.katz import Katz
    return Katz(options.order, min_count=options.min_ngram_count, memory=options.memory, tmp_dir=options.tmp_dir)


def _kneser_ney(options):
    from baselines.kneser_ney import KneserNey
    if options.min_ngram_count > 1:
        raise LMBenchError("--min-ngram-count applies to back-off models: use --method "
                           "kneser-ney-backoff or katz, or drop --min-ngram-count")
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
    if options.min_ngram_count > 1:
        raise LMBenchError("--min-ngram-count applies to back-off models, and infini-gram interpolates "
                           "interpolated KN: drop --min-ngram-count")
    return InfiniGram(options.order, memory=options.memory, tmp_dir=options.tmp_dir)


METHODS: dict[str, Method] = {
    "add-one-unigram": Method(_add_one_unigram, 1, 1, 1),
    "deleted-interpolation": Method(_deleted_interpolation, 3, 3, 3),
    "katz": Method(_katz, 2, 5, 3),
    "kneser-ney": Method(_kneser_ney, 2, 6, 5),
    "kneser-ney-backoff": Method(_kneser_ney_backoff, 2, 6, 3),
    "class": Method(_class, 2, 5, 3),
    "infini-gram": Method(_infini_gram, 2, 6, 5),
}


def make_ngram(options: NGramOptions) -> LanguageModel:
    """The unfitted model of `options.method` at `options.order` (the method's default when None)."""
    if options.method not in METHODS:
        raise LMBenchError(f"unknown n-gram method {options.method!r}: use one of {', '.join(METHODS)}")
    if options.memory is not None and options.method not in BOUNDED_METHODS:
        raise LMBenchError(f"--memory applies to {', '.join(BOUNDED_METHODS)}, not --method {options.method}: "
                           "drop --memory")
    if options.tmp_dir is not None and options.memory is None:
        raise LMBenchError("--tmp-dir holds the temporary files of the bounded path of --memory: give --memory SIZE "
                           "too, or drop --tmp-dir")
    class_only = [name for name, given in (("--classes", options.classes is not None),
                                           ("--cluster-passes", options.cluster_passes != CLUSTER_PASSES)) if given]
    if class_only and options.method != "class":
        raise LMBenchError(f"{', '.join(class_only)}: only for --method class, not --method {options.method}: drop "
                           + ("it" if len(class_only) == 1 else "them"))
    method = METHODS[options.method]
    if options.order is None:
        options = replace(options, order=method.default_order)
    if not method.min_order <= options.order <= method.max_order:
        valid = (f"order {method.min_order}" if method.min_order == method.max_order
                 else f"orders {method.min_order} to {method.max_order}")
        raise LMBenchError(f"--method {options.method} does not support --order {options.order}: "
                           f"use {valid}")
    return method.build(options)

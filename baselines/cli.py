"""`lmbench ngram`: fit an n-gram baseline and print its train/valid/test perplexity.

    lmbench ngram --method {add-one-unigram,deleted-interpolation,katz,kneser-ney,kneser-ney-backoff,class}
                  --order N [--classes C] [--min-ngram-count C] [--memory SIZE [--tmp-dir DIR]]
                  [--arpa OUT] [--save-logprobs OUT.npz] [corpus options] [--json]

A method is one entry of METHODS: its constructor (taking the parsed arguments), the orders it
supports and its default order. `make_ngram` builds one from Python.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Callable

from corpora.cli import add_corpus_options, load_corpus
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel, split_perplexity
from lmbench.options import integer, output_directory, output_file, refuse_overwriting


CLUSTER_PASSES = 20
BOUNDED_METHODS = ("deleted-interpolation", "katz", "kneser-ney", "kneser-ney-backoff", "class")  # take --memory


@dataclass(frozen=True)
class Method:
    build: Callable[[argparse.Namespace], LanguageModel]  # the parsed arguments -> an unfitted model
    min_order: int
    max_order: int
    default_order: int


def _add_one_unigram(args):
    from baselines.unigram import AddOneUnigram
    return AddOneUnigram()


def _katz(args):
    from baselines.katz import Katz
    return Katz(args.order, min_count=args.min_ngram_count, memory=args.memory, tmp_dir=args.tmp_dir)


def _kneser_ney(args):
    from baselines.kneser_ney import KneserNey
    if args.min_ngram_count > 1:
        raise LMBenchError("--min-ngram-count applies to back-off models: use --method "
                           "kneser-ney-backoff or katz, or drop --min-ngram-count")
    return KneserNey(args.order, memory=args.memory, tmp_dir=args.tmp_dir)


def _kneser_ney_backoff(args):
    from baselines.kneser_ney import KneserNeyBackoff
    return KneserNeyBackoff(args.order, min_count=args.min_ngram_count, memory=args.memory, tmp_dir=args.tmp_dir)


def _deleted_interpolation(args):
    from baselines.deleted_interpolation import DeletedInterpolationTrigram
    return DeletedInterpolationTrigram(memory=args.memory, tmp_dir=args.tmp_dir)


def _class(args):
    """Class n-gram whose class sequence is modelled by modified-KN back-off (Table 1's rows), in
    bounded memory under --memory."""
    from baselines.class_ngram import ClassNgram
    from baselines.kneser_ney import KneserNeyBackoff
    if not args.classes or args.classes < 2:
        raise LMBenchError("--method class needs --classes C with C >= 2 (the paper: 150 to 2000)")
    return ClassNgram(lambda: KneserNeyBackoff(args.order, min_count=args.min_ngram_count, memory=args.memory,
                                               tmp_dir=args.tmp_dir), args.classes, max_iters=args.cluster_passes)


METHODS: dict[str, Method] = {
    "add-one-unigram": Method(_add_one_unigram, 1, 1, 1),
    "deleted-interpolation": Method(_deleted_interpolation, 3, 3, 3),
    "katz": Method(_katz, 2, 5, 3),
    "kneser-ney": Method(_kneser_ney, 2, 6, 5),
    "kneser-ney-backoff": Method(_kneser_ney_backoff, 2, 6, 3),
    "class": Method(_class, 2, 5, 3),
}


def make_model(args: argparse.Namespace) -> LanguageModel:
    """The unfitted model of `args.method` at `args.order` (the method's default when None)."""
    method = METHODS[args.method]
    if args.order is None:
        args.order = method.default_order
    if not method.min_order <= args.order <= method.max_order:
        valid = (f"order {method.min_order}" if method.min_order == method.max_order
                 else f"orders {method.min_order} to {method.max_order}")
        raise LMBenchError(f"--method {args.method} does not support --order {args.order}: "
                           f"use {valid}")
    return method.build(args)


def make_ngram(method: str, order: int | None = None, classes: int | None = None,
               min_ngram_count: int = 1, cluster_passes: int = CLUSTER_PASSES, memory: int | None = None,
               tmp_dir: str | None = None) -> LanguageModel:
    """The unfitted model of a method, as the command line would build it."""
    if method not in METHODS:
        raise LMBenchError(f"unknown n-gram method {method!r}: use one of {', '.join(METHODS)}")
    return make_model(argparse.Namespace(method=method, order=order, classes=classes,
                                         min_ngram_count=min_ngram_count, cluster_passes=cluster_passes,
                                         memory=memory, tmp_dir=tmp_dir))


def byte_size(text: str) -> int:
    """A --memory value: bytes, or a number with K, M, G or T (powers of 1024)."""
    from baselines.disk_counts import parse_size
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}: give a size such as 4G, 800M or 500000") from None


def add_memory_options(parser, applies_to: str) -> None:
    """--memory SIZE and --tmp-dir DIR: bounded-memory estimation of `applies_to` (baselines/disk_counts.py)."""
    parser.add_argument("--memory", type=byte_size, default=None, metavar="SIZE",
                        help=f"{applies_to}: when the in-memory estimation would need more than SIZE (e.g. 4G), "
                             "count and estimate in bounded memory through sorted files on disk, as KenLM's "
                             "lmplz -S does (the same model); default: in memory")
    parser.add_argument("--tmp-dir", type=output_directory, default=None, metavar="DIR",
                        help="with --memory: the folder of the temporary files (default: the system's)")


def register(subparsers) -> None:
    parser = subparsers.add_parser("ngram", help="fit an n-gram model and report perplexities")
    parser.add_argument("--method", choices=list(METHODS), required=True)
    lowest, highest = min(m.min_order for m in METHODS.values()), max(m.max_order for m in METHODS.values())
    parser.add_argument("--order", type=integer(lowest, highest), default=None,
                        help="n of the n-gram; default: " + ", ".join(
                            f"{name} {m.default_order}" for name, m in METHODS.items()))
    parser.add_argument("--classes", type=integer(2), default=None,
                        help="number of word classes (class-based methods)")
    parser.add_argument("--cluster-passes", type=integer(1), default=CLUSTER_PASSES, metavar="P",
                        help=f"class: at most P passes of the exchange algorithm (default {CLUSTER_PASSES})")
    parser.add_argument("--min-ngram-count", type=integer(1), default=1, metavar="C",
                        help="katz, kneser-ney-backoff, class: leave out the n-grams of order >= 3 seen fewer "
                             "than C times in train (SRILM's default cutoffs are C = 2; default 1: "
                             "keep all)")
    add_memory_options(parser, ", ".join(BOUNDED_METHODS))
    parser.add_argument("--arpa", metavar="OUT", type=output_file, default=None,
                        help="also write the model as an ARPA file (back-off methods)")
    parser.add_argument("--save-logprobs", metavar="OUT.npz", type=output_file, default=None,
                        help="save the per-token log-probabilities of valid and test (for lmbench mix)")
    add_corpus_options(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> dict:
    if args.memory is not None and args.method not in BOUNDED_METHODS:
        raise LMBenchError(f"--memory applies to {', '.join(BOUNDED_METHODS)}, not --method {args.method}: "
                           "drop --memory")
    refuse_overwriting(args, {"--arpa": args.arpa, "--save-logprobs": args.save_logprobs})
    model = make_model(args)
    if args.arpa:
        from baselines.backoff import BackoffModel
        if not isinstance(model, BackoffModel):
            raise LMBenchError(f"--arpa needs a back-off model and --method {args.method} is not one: "
                               "use katz, kneser-ney or kneser-ney-backoff, or drop --arpa")
    corpus = load_corpus(args)
    started = time.perf_counter()
    model.fit(corpus)
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    result = {"method": args.method, "order": model.order, "corpus": corpus.name,
              "vocab_size": len(corpus.vocab)}
    if args.min_ngram_count > 1:
        result["min_ngram_count"] = args.min_ngram_count
    for split in ("train", "valid", "test"):
        result[f"{split}_perplexity"] = split_perplexity(model, corpus, split)
    result.update(build_seconds=round(build_seconds, 3),
                  score_seconds=round(time.perf_counter() - started, 3))
    if args.save_logprobs:
        from mixing import saved
        saved.save(args.save_logprobs, saved.scored_splits(model, corpus), corpus)
        result["logprobs"] = str(args.save_logprobs)
    if args.arpa:
        from baselines.arpa import write_arpa
        started = time.perf_counter()
        result["arpa"] = {"path": str(args.arpa), "ngrams": write_arpa(model, corpus.vocab, args.arpa),
                          "seconds": round(time.perf_counter() - started, 3)}
    return result


"""`lmbench mix A.npz B.npz ...`: interpolate saved per-token log-probabilities, retraining nothing.

The files are those of `mixing.saved` (written by `lmbench ngram --save-logprobs` or the reproduce
pipeline). Weights are fitted on valid and applied to test. `--buckets-from` a deleted-interpolation or
infini-gram file fits one weight vector per bucket of its contexts (frequency, or effective n), and
makes bucketed the default method. `--with-counts` an infini-gram file adds its P∞ as one more part,
with one weight vector per effective n (the reports' "X + KN interpolated 5 + ∞-gram":
`lmbench mix X.npz KN5.npz --with-counts INF.npz`).
"""

from __future__ import annotations

import argparse

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.model import perplexity
from lmbench.options import existing_file, number
from mixing import saved


def register(subparsers) -> None:
    parser = subparsers.add_parser("mix", help="interpolate models from their saved per-token log-probabilities")
    parser.add_argument("logprobs", nargs="+", type=existing_file, help=".npz files with `valid` and `test` arrays")
    parser.add_argument("--method", choices=("fixed", "em", "bucketed"), default=None,
                        help="fixed weights, one EM-fitted weight vector, or one per context bucket (default: "
                             "bucketed with --buckets-from, else em)")
    parser.add_argument("--weights", type=number(0, 1), nargs="+", help="fixed: one weight per file, summing to 1")
    parser.add_argument("--buckets-from", type=existing_file,
                        help="bucketed: the .npz holding buckets_valid / buckets_test (deleted interpolation: "
                             "context frequency; infini-gram: effective n)")
    parser.add_argument("--with-counts", type=existing_file,
                        help="an infini-gram .npz: mix in its P∞ as one more part, one weight vector per "
                             "effective n, each shrunk toward the weights of all valid")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> dict:
    if args.with_counts and (args.method or args.buckets_from or args.weights):
        raise LMBenchError("--with-counts fits its own weights per effective n: give it without --method, "
                           "--weights and --buckets-from")
    if args.with_counts:
        args.method = "with counts"
    elif args.method is None:
        args.method = "bucketed" if args.buckets_from else "em"
    if args.method == "fixed" and not args.weights:
        raise LMBenchError("--method fixed needs --weights with one weight per file, summing to 1")
    if args.method == "bucketed" and args.buckets_from is None:
        raise LMBenchError("--method bucketed needs --buckets-from FILE.npz (a deleted-interpolation or "
                           "infini-gram file)")
    parts = [saved.load(path) for path in args.logprobs]
    buckets = saved.load(args.buckets_from) if args.buckets_from else None
    if args.weights and args.method != "fixed":
        raise LMBenchError(f"--weights are the fixed mixture's, and --method {args.method} fits its own: add "
                           "--method fixed, or drop --weights")
    if args.buckets_from and args.method != "bucketed":
        raise LMBenchError(f"--buckets-from gives the buckets of --method bucketed, not --method {args.method}: "
                           "drop --method (bucketed is then the default) or --buckets-from")
    names = [str(path) for path in args.logprobs]
    if args.with_counts:
        mixed, weights = saved.mix_with_counts(parts, saved.load(args.with_counts), names, str(args.with_counts))
    else:
        mixed, weights = saved.mix_saved(parts, args.method, args.weights, buckets, names, str(args.buckets_from))
    result = {"method": args.method, "weights": np.round(weights, 6).tolist()}
    for label, part in zip(part_labels(args.logprobs), parts):
        result[label] = {"valid_perplexity": perplexity(part["valid"]), "test_perplexity": perplexity(part["test"])}
    result.update(valid_perplexity=perplexity(mixed["valid"]), test_perplexity=perplexity(mixed["test"]))
    return result


def part_labels(paths) -> list[str]:
    """The key of each file's figures, in the order of the weights: its name where the names differ, else
    its path as given, numbered where the same path is given twice (no file's figures are dropped)."""
    names = [path.name for path in paths]
    labels = names if len(set(names)) == len(names) else [str(path) for path in paths]
    return [label if labels.count(label) == 1 else f"{label} (#{labels[:i + 1].count(label)})"
            for i, label in enumerate(labels)]

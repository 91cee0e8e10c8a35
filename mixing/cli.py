"""`lmbench mix A.npz B.npz ...`: interpolate saved per-token log-probabilities, retraining nothing.

Each .npz holds the arrays `valid` and `test` (natural-log probabilities of every token of the
split, as written by `lmbench ngram --save-logprobs` or the reproduce pipeline); a
deleted-interpolation file also holds `buckets_valid` and `buckets_test`, the frequency buckets of
the contexts, for --method bucketed. Weights are fitted on valid and applied to test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.model import perplexity
from mixing.mixture import fit_weights, mix_logprobs


def register(subparsers) -> None:
    parser = subparsers.add_parser("mix", help="interpolate models from their saved per-token log-probabilities")
    parser.add_argument("logprobs", nargs="+", type=Path, help=".npz files with `valid` and `test` arrays")
    parser.add_argument("--method", choices=("fixed", "em", "bucketed"), default="em",
                        help="fixed weights, one EM-fitted weight vector, or one per context bucket")
    parser.add_argument("--weights", type=float, nargs="+", help="fixed: one weight per file, summing to 1")
    parser.add_argument("--buckets-from", type=Path,
                        help="bucketed: the .npz holding buckets_valid / buckets_test (deleted interpolation)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def _load(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise LMBenchError(f"{path} does not exist: write it with `lmbench ngram ... --save-logprobs {path}`")
    with np.load(path) as data:
        missing = {"valid", "test"} - set(data.files)
        if missing:
            raise LMBenchError(f"{path} lacks the arrays {sorted(missing)}: save per-token log-probabilities "
                               "of valid and test")
        return {key: data[key] for key in data.files}


def run(args: argparse.Namespace) -> dict:
    parts = [_load(path) for path in args.logprobs]
    lengths = {(len(p["valid"]), len(p["test"])) for p in parts}
    if len(lengths) != 1:
        raise LMBenchError("the files score splits of different lengths: score every model on the same corpus")
    valid = np.stack([p["valid"] for p in parts])
    test = np.stack([p["test"] for p in parts])
    if args.method == "fixed":
        if not args.weights or len(args.weights) != len(parts) or abs(sum(args.weights) - 1) > 1e-9:
            raise LMBenchError("--method fixed needs --weights with one weight per file, summing to 1")
        weights = np.asarray(args.weights)
        mixed = {"valid": mix_logprobs(valid, weights), "test": mix_logprobs(test, weights)}
    elif args.method == "em":
        weights = fit_weights(valid)[0]
        mixed = {"valid": mix_logprobs(valid, weights), "test": mix_logprobs(test, weights)}
    else:
        if args.buckets_from is None:
            raise LMBenchError("--method bucketed needs --buckets-from DI.npz (a deleted-interpolation file)")
        buckets = _load(args.buckets_from)
        if "buckets_valid" not in buckets:
            raise LMBenchError(f"{args.buckets_from} holds no buckets: save a deleted-interpolation model's "
                               "log-probabilities")
        n_buckets = int(max(buckets["buckets_valid"].max(), buckets["buckets_test"].max())) + 1
        weights = fit_weights(valid, buckets["buckets_valid"], n_buckets)
        mixed = {"valid": mix_logprobs(valid, weights[buckets["buckets_valid"]].T),
                 "test": mix_logprobs(test, weights[buckets["buckets_test"]].T)}
    result = {"method": args.method, "weights": np.round(weights, 6).tolist()}
    for path, v, t in zip(args.logprobs, valid, test):
        result[path.name] = {"valid_perplexity": perplexity(v), "test_perplexity": perplexity(t)}
    result.update(valid_perplexity=perplexity(mixed["valid"]), test_perplexity=perplexity(mixed["test"]))
    return result

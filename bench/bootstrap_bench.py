"""Benchmark of the block bootstrap (lmbench.bootstrap) on a split of AP's size: seconds per step.

    PYTHONPATH=. python bench/bootstrap_bench.py [--tokens 1000000] [--document 480]

A synthetic split of --tokens tokens, `</d>` after every --document tokens on average (AP 1989's
test split: 962,593 tokens in 1,917 documents), two models' per-token log-probabilities; prints the
wall-clock seconds of cutting the blocks, summing them, one perplexity interval and one paired
difference (RESAMPLES resamples each), and the whole of what a row and a claim cost. Timings are
wall-clock on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from lmbench.bootstrap import RESAMPLES, block_ends, block_sums, paired_difference, perplexity_interval

END = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--document", type=int, default=480, help="mean document length, tokens")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 10_000, size=args.tokens).astype(np.int32)
    ids[rng.random(args.tokens) < 1 / args.document] = END
    model_a = -rng.gamma(2.0, 2.3, size=args.tokens)
    model_b = model_a + rng.normal(0.0, 0.5, size=args.tokens)
    seconds = {}
    started = time.perf_counter()
    ends, rule = block_ends(ids, END)
    seconds["cut blocks"] = time.perf_counter() - started
    started = time.perf_counter()
    sums_a, counts = block_sums(model_a, ends)
    sums_b, _ = block_sums(model_b, ends)
    seconds["sum blocks (2 models)"] = time.perf_counter() - started
    started = time.perf_counter()
    interval = perplexity_interval(sums_a, counts)
    seconds[f"perplexity interval ({RESAMPLES} resamples)"] = time.perf_counter() - started
    started = time.perf_counter()
    difference = paired_difference(sums_a, sums_b, counts)
    seconds[f"paired difference ({RESAMPLES} resamples)"] = time.perf_counter() - started
    seconds["total"] = sum(seconds.values())
    for step, value in seconds.items():
        print(f"{step:<40} {value:8.3f} s")
    print(json.dumps({"tokens": args.tokens, "blocks": rule, "interval": interval, "difference": difference,
                      "seconds": {k: round(v, 4) for k, v in seconds.items()}}))


if __name__ == "__main__":
    main()

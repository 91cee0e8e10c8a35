"""Benchmark of the cached paths a user waits on: Brown read back from the corpus cache (no
re-tokenisation), and `lmbench reproduce brown --quick` run once into an empty work folder, then again
with every row cached. These figures were once wall-clock asserts in the tests, which fail on a
loaded machine and prove nothing about speed; here they are printed.

    NLTK_DATA=... PYTHONPATH=. python bench/pipeline_bench.py [--json]

The corpus cache and the work folders are temporary (LMBENCH_CACHE is set to one for this run), so the
first Brown load prepares it from the NLTK files. Timings are wall-clock on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def seconds(run) -> tuple[float, object]:
    started = time.perf_counter()
    value = run()
    return round(time.perf_counter() - started, 2), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lmbench-bench-") as scratch:
        os.environ["LMBENCH_CACHE"] = str(Path(scratch) / "cache")
        from corpora.brown import load_brown
        from reports.pipeline import reproduce

        prepare, _ = seconds(load_brown)
        cached, corpus = seconds(load_brown)
        assert corpus.info["from_cache"], "the second load did not come from the cache"
        work, report = Path(scratch) / "work", Path(scratch) / "report"
        first, _ = seconds(lambda: reproduce("brown", True, work, report))
        again, _ = seconds(lambda: reproduce("brown", True, work, report))
    figures = {"brown_prepare_s": prepare, "brown_from_cache_s": cached,
               "quick_reproduction_s": first, "quick_reproduction_cached_s": again}
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(f"Brown: prepared in {prepare} s, read back from the cache in {cached} s")
        print(f"reproduce brown --quick: {first} s into an empty work folder, {again} s with every row cached")


if __name__ == "__main__":
    main()

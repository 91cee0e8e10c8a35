"""Benchmark of the cached paths a user waits on: Brown read back from the corpus cache (no
re-tokenisation), and `lmbench reproduce brown --quick` run once into an empty work folder, then again
with every row cached. These figures were once wall-clock asserts in the tests, which fail on a
loaded machine and prove nothing about speed; here they are printed.

    NLTK_DATA=... PYTHONPATH=. python bench/pipeline_bench.py [--json]
    PYTHONPATH=. python bench/pipeline_bench.py --tiny      # the tiny text corpus instead (the test suite's run)

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
    parser.add_argument("--tiny", action="store_true", help="the tiny corpus of bench/tiny_corpus.py as the text "
                        "corpus instead of Brown (`reproduce text --quick`): the test suite's run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lmbench-bench-") as scratch:
        os.environ["LMBENCH_CACHE"] = str(Path(scratch) / "cache")
        from reports.running.pipeline import reproduce
        from reports.running.settings import TextCorpus
        if args.tiny:
            from corpora.text import load_text
            from tiny_corpus import tiny_files
            files = tiny_files(Path(scratch) / "tiny")
            corpus_name, text, load = "text", TextCorpus(*files, name="tiny"), lambda: load_text(*files)
        else:
            from corpora.brown import load_brown
            corpus_name, text, load = "brown", None, load_brown

        prepare, _ = seconds(load)
        cached, corpus = seconds(load)
        assert corpus.info["from_cache"], "the second load did not come from the cache"
        work, report = Path(scratch) / "work", Path(scratch) / "report"
        first, _ = seconds(lambda: reproduce(corpus_name, True, work, report, text=text))
        again, _ = seconds(lambda: reproduce(corpus_name, True, work, report, text=text))
    figures = {f"{corpus_name}_prepare_s": prepare, f"{corpus_name}_from_cache_s": cached,
               "quick_reproduction_s": first, "quick_reproduction_cached_s": again}
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(f"{corpus.name}: prepared in {prepare} s, read back from the cache in {cached} s")
        print(f"reproduce {corpus_name} --quick: {first} s into an empty work folder, {again} s with every row cached")


if __name__ == "__main__":
    main()

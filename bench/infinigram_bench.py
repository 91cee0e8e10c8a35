"""Infini-gram benchmark: index build time and peak memory, bytes per token, scoring speed, 1M to ~100M tokens.

    make bench-infinigram [TOKENS="1000000 14000000 100000000"] [TMP_DIR=DIR]
    PYTHONPATH=. python bench/infinigram_bench.py --tokens 1000000 14000000 100000000 [--full-max T] [--tmp-dir DIR]
    PYTHONPATH=. python bench/infinigram_bench.py --tiny      # the test suite's seconds-long run

The training stream is bench/scale_bench.py's, cached in $LMBENCH_CACHE/scale-bench/: AP 1989's train
split, then permuted copies of it (`--permuted` there: each copy through its own permutation of the ids,
so every n-gram of a copy is new). A size of T tokens indexes the stream's first T tokens; each size runs
in a fresh process: the index build (baselines/infinigram.py: pydivsufsort's suffix array, the keys,
written and memory-mapped) with its peak RSS measured alone (the high-water mark reset through
/proc/self/clear_refs), the bytes of the index per token (infini-gram's published index: 7), then the ∞-gram
alone (effective n and P∞) on AP's test split (962,593 tokens, after the last 1,000 of valid), and, up to
--full-max tokens (default 14M), the interpolated model (∞-gram + KN 5: the KN fit, EM on valid, test
scoring, whose speed includes KN 5's). Wall-clock timings on a shared machine are noisy: the CPU seconds
are printed beside them; numpy runs on one thread (OMP_NUM_THREADS=1 unless set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale_bench import _cpu_seconds, _peak_gb, _reset_peak, base_corpus, build_stream, print_figures  # noqa: E402

PUBLISHED_BYTES_PER_TOKEN = 7  # Liu et al. (2024): 2-byte ids and 5-byte pointers


def one(tokens: int, stream: Path, full: bool, tmp_dir: str | None, tiny: bool = False) -> dict:
    """Index the first `tokens` tokens of the stream and score AP's test split, in this process."""
    from baselines.infinigram import InfiniGram, SuffixIndex, UnboundedNgram
    from corpora.corpus import Corpus
    from lmbench.model import perplexity, split_logprobs

    ap = base_corpus(tiny)
    corpus = Corpus(f"infinigram-{tokens}", ap.vocab, np.load(stream, mmap_mode="r")[:tokens].astype(np.int32),
                    ap.valid, ap.test)
    row = {"tokens": tokens, "start_gb": round(_peak_gb(), 3)}
    with tempfile.TemporaryDirectory(prefix="infinigram-bench-", dir=tmp_dir) as folder:
        _reset_peak()
        started, cpu = time.perf_counter(), _cpu_seconds()
        index = SuffixIndex.build(corpus.train, len(corpus.vocab), Path(folder))
        row.update(build_seconds=round(time.perf_counter() - started, 1),
                   build_cpu_seconds=round(_cpu_seconds() - cpu, 1), build_peak_gb=round(_peak_gb(), 3),
                   index_bytes_per_token=round(index.nbytes / tokens, 2),
                   index_files_gb=round(sum(f.stat().st_size for f in Path(folder).iterdir()) / 2**30, 3))
        sparse = UnboundedNgram(index, len(corpus.vocab))
        stream_, start = corpus.stream_for("test", history=sparse.max_context)
        _reset_peak()
        started, cpu = time.perf_counter(), _cpu_seconds()
        n, logp = sparse.score(stream_, start)
        seconds = time.perf_counter() - started
        row.update(infinigram_tokens_per_second=round(len(n) / seconds), infinigram_cpu_seconds=round(_cpu_seconds() - cpu, 1),
                   score_peak_gb=round(_peak_gb(), 3), test_tokens=len(n),
                   test_effective_n={"mean": round(float(n.mean()), 3),
                                     **{f"share_{k}_or_more": round(float((n >= k).mean()), 4) for k in (5, 10, 20)}},
                   test_p_inf_zero_share=round(float(np.isneginf(logp).mean()), 4))
    if full:
        model = InfiniGram(5, tmp_dir=tmp_dir)
        started = time.perf_counter()
        model.fit(corpus)
        row["full_fit_seconds"] = round(time.perf_counter() - started, 1)
        started, cpu = time.perf_counter(), _cpu_seconds()
        logprobs = split_logprobs(model, corpus, "test")
        seconds = time.perf_counter() - started
        row.update(full_tokens_per_second=round(len(logprobs) / seconds), full_cpu_seconds=round(_cpu_seconds() - cpu, 1),
                   full_test_perplexity=round(perplexity(logprobs), 3))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1_000_000, 14_000_000, 100_000_000])
    parser.add_argument("--full-max", type=int, default=14_000_000,
                        help="also fit and score the interpolated model (∞-gram + KN 5) up to this many tokens")
    parser.add_argument("--tmp-dir", default=None, help="the folder of the index files (default: the system's)")
    parser.add_argument("--out", help="also write the JSON figures to this file")
    parser.add_argument("--tiny", action="store_true", help="the tiny corpus of bench/tiny_corpus.py in AP's "
                        "place, 20,000 tokens: the test suite's seconds-long run")
    parser.add_argument("--one", nargs=4, metavar=("TOKENS", "STREAM", "FULL", "TMP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        tokens, stream, full, tmp = args.one
        print(json.dumps(one(int(tokens), Path(stream), full == "1", tmp if tmp != "-" else None, args.tiny)))
        return
    if args.tiny:
        args.tokens = [20_000]

    figures = {"stream": build_stream(max(args.tokens), permuted=True, tiny=args.tiny), "runs": [],
               "published_bytes_per_token": PUBLISHED_BYTES_PER_TOKEN}
    env = {"OMP_NUM_THREADS": "1", **os.environ, "PYTHONPATH": str(ROOT)}
    for tokens in sorted(args.tokens):
        command = [sys.executable, __file__, "--one", str(tokens), figures["stream"]["path"],
                   "1" if tokens <= args.full_max else "0", args.tmp_dir or "-", *(["--tiny"] if args.tiny else [])]
        row = json.loads(subprocess.run(command, capture_output=True, text=True, env=env, check=True)
                         .stdout.strip().splitlines()[-1])
        figures["runs"].append(row)
        print(json.dumps(row), file=sys.stderr)
    print(f"{'tokens':>12} {'build s':>8} {'cpu s':>7} {'build GB':>9} {'B/token':>8} {'∞-gram tok/s':>13} "
          f"{'+ KN 5 tok/s':>13} {'test ppl':>9}")
    for r in figures["runs"]:
        full = (f"{r['full_tokens_per_second']:13,} {r['full_test_perplexity']:9.2f}" if "full_tokens_per_second" in r
                else f"{'not run':>13} {'-':>9}")
        print(f"{r['tokens']:>12,} {r['build_seconds']:8.1f} {r['build_cpu_seconds']:7.1f} {r['build_peak_gb']:9.2f} "
              f"{r['index_bytes_per_token']:8.1f} {r['infinigram_tokens_per_second']:13,} {full}")
    print(f"infini-gram's published index: {PUBLISHED_BYTES_PER_TOKEN} bytes a token")
    print_figures(figures, args.out)


if __name__ == "__main__":
    main()

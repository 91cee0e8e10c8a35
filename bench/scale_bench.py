"""Scale benchmark: interpolated KN 5 from 1M to ~100M training tokens, peak memory and time per stage.

    make bench-scale [TOKENS="1000000 14000000 100000000"] [MEMORY=600M] [PERMUTED=1]
    PYTHONPATH=. python bench/scale_bench.py --tokens 1000000 14000000 100000000 --memory 600M [--tmp-dir DIR]
        [--repeat R] [--in-memory-max T]
    PYTHONPATH=. python bench/scale_bench.py --tiny      # the test suite's seconds-long run

The training stream (built once, cached in $LMBENCH_CACHE/scale-bench/): AP 1989's train split, then
text sampled from the interpolated KN 4-gram estimated on that split, up to the largest --tokens.
Copies of AP would not test memory (their distinct n-grams stop growing); sampled text keeps making
new 3-, 4- and 5-grams as real text does (faster, in fact: the sampler knows no 5-grams). Sampling
costs about 0.1 CPU second per 100k tokens; `--permuted` appends instead copies of AP's train, each
through its own random permutation of the word ids: seconds to build, and every n-gram of a copy is
new, so distinct n-grams grow linearly, faster than in any real text (an upper bound on the memory
a real corpus of that size needs). A size of T tokens trains on the stream's first T tokens; valid and
test are AP's valid and test splits.

Sampling (`sample`) is exact for the interpolated model in back-off form: at a context h of length L
listed as a context, with probability gamma(h) = bow(h) back off to h'; otherwise draw a child w
of h with probability (P(w | h) - gamma(h) P(w | h')) / (1 - gamma(h)), the discounted part; at
the empty context draw from P(w). B streams are drawn at once (one numpy step per token), each a
"document" of the stream.

Each size runs in a fresh process per path (bounded with --memory, lowered where need be below the
in-memory path's need so that the bounded path is taken; in memory too while the size is at most
--in-memory-max), each stage's peak RSS measured alone (the kernel's high-water mark is
reset before it through /proc/self/clear_refs): build (fit), then valid + test scoring.
Prints a table (B/token: the larger stage peak per training token; us/token: build wall time per
token), then JSON (also to --out). Wall-clock timings on a shared machine are noisy: the CPU seconds
(user + system) of the build are printed beside them. `--repeat R` builds each size R times, the two
paths interleaved (in memory, bounded, in memory, bounded, ...) so that both see the same load, and
prints the ratio bounded / in memory of the summed build wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLER_ORDER = 4
BATCH = 100_000           # streams sampled at once
KENLM_AP = {"peak_gb": 0.87, "seconds": 15.6}  # lmplz -o 5 on the AP 1989 train stream, this machine


def sample(model, prefix: np.ndarray, lengths: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """`lengths[0]` streams of `lengths[1]` tokens each, concatenated, from an interpolated KN model
    (baselines.kneser_ney.KneserNey), each started from N-1 tokens of `prefix` (module docstring)."""
    table, N = model.table, model.order
    batch, steps = lengths
    prefix_rows = {n: table.index(n - 1, table.grams[n][:, :-1]) for n in range(2, N + 1)}   # (m_n,)
    cum = {}
    for n in range(2, N + 1):  # cumulative discounted mass of the rows, order n: (m_n + 1,)
        lower = np.exp(model.logp[n - 1][table.index(n - 1, table.grams[n][:, 1:])])
        gamma = np.exp(model.logbow[n - 1][prefix_rows[n]])
        cum[n] = np.concatenate([[0.0], np.cumsum(np.maximum(np.exp(model.logp[n]) - gamma * lower, 0.0))])
    unigram = np.cumsum(np.exp(model.logp[1]))
    start = rng.integers(0, len(prefix) - N, batch)
    context = np.stack([prefix[start + j] for j in range(N - 1)], axis=1).astype(np.int64)  # (B, N-1)
    out = np.empty((batch, steps), dtype=np.int32)
    for t in tqdm(range(steps), desc="sampling", unit="token", leave=False):
        word = np.full(batch, -1, dtype=np.int64)
        for L in range(N - 1, 0, -1):                       # longest context first
            open_ = np.flatnonzero(word < 0)
            row = table.index(L, context[open_, N - 1 - L:])
            listed = row >= 0
            open_, row = open_[listed], row[listed]
            gamma = np.exp(model.logbow[L][row])
            stay = rng.random(len(row)) >= gamma             # else back off to the shorter context
            open_, row = open_[stay], row[stay]
            lo = np.searchsorted(prefix_rows[L + 1], row, "left")
            hi = np.searchsorted(prefix_rows[L + 1], row, "right")
            target = cum[L + 1][lo] + rng.random(len(row)) * (cum[L + 1][hi] - cum[L + 1][lo])
            child = np.clip(np.searchsorted(cum[L + 1], target, "right") - 1, lo, hi - 1)
            word[open_] = table.grams[L + 1][child, -1]
        rest = word < 0
        word[rest] = np.minimum(np.searchsorted(unigram, rng.random(int(rest.sum())) * unigram[-1]),
                                model.vocab_size - 1)
        out[:, t] = word
        context = np.concatenate([context[:, 1:], word[:, None]], axis=1)
    return out.reshape(-1)


def base_corpus(tiny: bool):
    """AP (its train starts the stream; its valid and test are scored), or under --tiny the bench scripts'
    tiny corpus (bench/tiny_corpus.py)."""
    if tiny:
        from tiny_corpus import tiny_corpus
        return tiny_corpus()
    from corpora.named import load_named
    return load_named("ap")


def stream_path(tokens: int, permuted: bool, tiny: bool = False) -> Path:
    from corpora.corpus import cache_root
    return cache_root() / "scale-bench" / f"train-{tokens}{'-permuted' if permuted else ''}{'-tiny' if tiny else ''}.npy"


def permuted_copies(train: np.ndarray, tokens: int, vocab_size: int, rng: np.random.Generator) -> np.ndarray:
    """`tokens` tokens of copies of `train`, each through its own random permutation of the ids."""
    copies = -(-tokens // len(train))
    return np.concatenate([rng.permutation(vocab_size).astype(np.int32)[train] for _ in range(copies)])[:tokens]


def build_stream(tokens: int, permuted: bool, tiny: bool = False) -> dict:
    """The training stream of `tokens` tokens (AP train, then sampled text or permuted copies), cached."""
    from baselines.kneser_ney import KneserNey
    from lmbench.files import atomic_write

    path = stream_path(tokens, permuted, tiny)
    corpus = base_corpus(tiny)
    if path.exists():
        return {"path": str(path), "cached": True}
    started = time.perf_counter()
    train = corpus.train
    extra = max(tokens - len(train), 0)
    parts = [train]
    if extra and permuted:
        parts.append(permuted_copies(train, extra, len(corpus.vocab), np.random.default_rng(0)))
    elif extra:
        model = KneserNey(SAMPLER_ORDER).fit(corpus)
        steps = -(-extra // BATCH)
        parts.append(sample(model, train, (BATCH, steps), np.random.default_rng(0))[:extra])
    stream = np.concatenate(parts)[:tokens].astype(np.int32)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            np.save(out, stream)

    atomic_write(path, write)
    return {"path": str(path), "cached": False, "seconds": round(time.perf_counter() - started, 1)}


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
        f.write("5")


def _peak_gb() -> float:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one(tokens: int, stream: Path, memory: str | None, tmp_dir: str | None, tiny: bool = False) -> dict:
    """Build KN 5 on the first `tokens` tokens of the stream and score valid and test, in this process."""
    from baselines.disk_counts import IN_MEMORY_BYTES_PER_TOKEN, parse_size
    from baselines.kneser_ney import KneserNey
    from corpora.corpus import Corpus
    from lmbench.model import split_perplexity

    ap = base_corpus(tiny)
    train = np.load(stream, mmap_mode="r")[:tokens].astype(np.int32)
    corpus = Corpus(f"scale-{tokens}", ap.vocab, train, ap.valid, ap.test)
    del ap
    cap = None
    if memory:  # below the in-memory need, so that the bounded path is measured at every size
        cap = min(parse_size(memory), len(train) * IN_MEMORY_BYTES_PER_TOKEN // 2)
    model = KneserNey(5, memory=cap, tmp_dir=tmp_dir)
    row = {"tokens": tokens, "memory_cap_mb": cap and round(cap / 2**20), "start_gb": round(_peak_gb(), 3)}
    _reset_peak()
    started, cpu = time.perf_counter(), _cpu_seconds()
    model.fit(corpus)
    row["path"] = "bounded" if isinstance(model.table.keys[5], np.memmap) else "in memory"
    row.update(build_seconds=round(time.perf_counter() - started, 1), build_cpu_seconds=round(_cpu_seconds() - cpu, 1),
               build_peak_gb=round(_peak_gb(), 3),
               ngrams={n: model.table.size(n) for n in range(1, 6)})
    _reset_peak()
    started, cpu = time.perf_counter(), _cpu_seconds()
    for split in ("valid", "test"):
        row[f"{split}_perplexity"] = round(split_perplexity(model, corpus, split), 4)
    row.update(score_seconds=round(time.perf_counter() - started, 1), score_cpu_seconds=round(_cpu_seconds() - cpu, 1),
               score_peak_gb=round(_peak_gb(), 3),
               peak_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3))
    return row


def in_subprocess(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1_000_000, 14_000_000, 100_000_000])
    parser.add_argument("--memory", default="600M", help="the --memory cap of the bounded path (default 600M)")
    parser.add_argument("--tmp-dir", default=None, help="the folder of the temporary files")
    parser.add_argument("--in-memory-max", type=int, default=20_000_000,
                        help="also build in memory the sizes up to this many tokens (default 20M)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="build each size this many times, the paths interleaved (default 1)")
    parser.add_argument("--out", help="also write the JSON figures to this file")
    parser.add_argument("--permuted", action="store_true",
                        help="extend AP's train by permuted copies of it rather than sampled text (fast)")
    parser.add_argument("--tiny", action="store_true", help="the tiny corpus of bench/tiny_corpus.py in AP's "
                        "place, 20,000 tokens (its train and sampled text): the test suite's seconds-long run")
    parser.add_argument("--one", nargs=4, metavar=("TOKENS", "STREAM", "MEMORY", "TMP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        tokens, stream, memory, tmp = args.one
        print(json.dumps(one(int(tokens), Path(stream), memory if memory != "-" else None,
                             tmp if tmp != "-" else None, args.tiny)))
        return
    if args.tiny:
        args.tokens = [20_000]

    figures = {"stream": build_stream(max(args.tokens), args.permuted, args.tiny), "kenlm_ap_lmplz_o5": KENLM_AP,
               "runs": []}
    for tokens in sorted(args.tokens):
        for memory in (([None] if tokens <= args.in_memory_max else []) + [args.memory]) * args.repeat:
            started = time.perf_counter()
            row = in_subprocess(["--one", str(tokens), figures["stream"]["path"], memory or "-", args.tmp_dir or "-",
                                 *(["--tiny"] if args.tiny else [])])
            row["process_seconds"] = round(time.perf_counter() - started, 1)
            figures["runs"].append(row)
            print(json.dumps(row), file=sys.stderr)
    print(f"{'tokens':>12} {'path':>10} {'build s':>8} {'cpu s':>7} {'build GB':>9} {'score s':>8} {'score GB':>9} "
          f"{'B/token':>8} {'us/token':>9} {'valid':>8} {'test':>8}")
    for r in figures["runs"]:
        peak = max(r["build_peak_gb"], r["score_peak_gb"])
        print(f"{r['tokens']:>12,} {r['path']:>10} {r['build_seconds']:8.1f} {r['build_cpu_seconds']:7.1f} {r['build_peak_gb']:9.2f} "
              f"{r['score_seconds']:8.1f} {r['score_peak_gb']:9.2f} {peak * 2**30 / r['tokens']:8.0f} "
              f"{r['build_seconds'] * 1e6 / r['tokens']:9.2f} {r['valid_perplexity']:8.2f} {r['test_perplexity']:8.2f}")
    for tokens in sorted(args.tokens):  # the interleaved builds' ratio, where both paths ran
        runs = {path: [r for r in figures["runs"] if r["tokens"] == tokens and r["path"] == path]
                for path in ("in memory", "bounded")}
        if all(runs.values()) and all(r["build_seconds"] and r["build_cpu_seconds"]
                                            for r in runs["in memory"]):  # (a tiny build rounds to 0 s)
            ratio = {what: round(sum(r[what] for r in runs["bounded"]) / sum(r[what] for r in runs["in memory"]), 3)
                     for what in ("build_seconds", "build_cpu_seconds")}
            figures.setdefault("bounded_over_in_memory", {})[tokens] = ratio
            print(f"{tokens:,} tokens, bounded / in memory over {len(runs['bounded'])} interleaved builds each: "
                  f"wall {ratio['build_seconds']:.3f}, CPU {ratio['build_cpu_seconds']:.3f}")
    ap = KENLM_AP
    print(f"KenLM lmplz -o 5 on AP 1989's train (14M tokens): {ap['peak_gb']} GB, {ap['seconds']} s")
    print_figures(figures, args.out)


def print_figures(figures: dict, out: str | None) -> None:
    """A bench's figures as JSON, printed last and written to `out` (its --out) where given."""
    text = json.dumps(figures, indent=1)
    print(text)
    if out:
        Path(out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""Benchmark of the n-gram baselines on Brown: perplexities, build and scoring seconds, memory.

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python bench/ngram_bench.py [--lmplz PATH] [--out FILE]
    PYTHONPATH=. python bench/ngram_bench.py --tiny        # the test suite's seconds-long run

For every back-off method of the registry (`baselines.methods.METHODS`, those registered `arpa`) at
orders 3, 4 and 5, then again with SRILM's default cutoffs (n-grams of order >= 3 seen once left out)
where it takes --min-ngram-count, each in a fresh process so its peak RSS is its own: valid/test
perplexity, build seconds, valid+test scoring seconds and tokens/s. Then the wall time and peak RSS
of the whole command `lmbench ngram --method kneser-ney --order 5 --corpus brown`. With --lmplz (KenLM's lmplz binary),
also interpolated KN 3 and 5 estimated by lmplz on the same train stream, read back from its ARPA
file and scored by our code on our streams (see `compare_lmplz` for how conventions are matched).
Prints a table, then the figures as JSON (also written to --out). Timings are wall-clock on a
shared machine: noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ORDERS = (3, 4, 5)
PAPER_KN_BACKOFF = {3: (334, 323), 4: (332, 321), 5: (332, 321)}  # Bengio et al. 2003, Table 1


def configs(tiny: bool = False) -> list[tuple[str, int, int]]:
    """(method, order, minimum n-gram count from trigrams up) of every back-off method (registered `arpa`)
    at each of ORDERS it takes, without cutoffs, then with SRILM's where it takes them; --tiny's: each
    method once, at order 3, with SRILM's cutoffs where it takes them."""
    from baselines.methods import METHODS, SRILM_CUTOFF
    backoff = {name: method for name, method in METHODS.items() if method.arpa}
    cuts = {name: SRILM_CUTOFF for name, method in backoff.items() if "min_ngram_count" in method.options}
    if tiny:
        return [(name, 3, cuts.get(name, 1)) for name in backoff]
    plain = [(name, n, 1) for name, method in backoff.items() for n in ORDERS
             if method.min_order <= n <= method.max_order]
    return plain + [(name, n, cuts[name]) for name, n, _ in plain if name in cuts]


def load_corpus(tiny: bool):
    """Brown, or under --tiny the bench scripts' tiny corpus (bench/tiny_corpus.py)."""
    if tiny:
        from tiny_corpus import tiny_corpus
        return tiny_corpus()
    from corpora.brown import load_brown
    return load_brown()


def one(method: str, order: int, min_count: int, tiny: bool = False) -> dict:
    """Fit one model on Brown (the tiny corpus) in this process and time it."""
    from baselines.methods import NGramOptions, make_ngram
    from lmbench.model import split_logprobs

    corpus = load_corpus(tiny)
    model = make_ngram(NGramOptions(method, order, min_ngram_count=min_count))
    started = time.perf_counter()
    model.fit(corpus)
    build = time.perf_counter() - started
    started = time.perf_counter()
    valid, test = (split_logprobs(model, corpus, split) for split in ("valid", "test"))
    score = time.perf_counter() - started
    tokens = len(valid) + len(test)
    return {"method": method, "order": order, "min_ngram_count": min_count,
            "valid_perplexity": float(np.exp(-valid.mean())), "test_perplexity": float(np.exp(-test.mean())),
            "build_seconds": round(build, 3), "score_seconds": round(score, 3),
            "score_tokens_per_second": round(tokens / score),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def in_subprocess(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    return json.loads(out)


def cli_run(tiny: bool) -> dict:
    """Wall time and peak RSS of the whole `lmbench ngram --method kneser-ney --order 5` command."""
    if tiny:
        from tiny_corpus import tiny_files
        corpus = ["--corpus", "text", *[arg for split, path in zip(("train", "valid", "test"), tiny_files())
                                        for arg in (f"--{split}", str(path))]]
    else:
        corpus = ["--corpus", "brown"]
    command = [sys.executable, "-m", "lmbench_cli", "ngram", "--method", "kneser-ney", "--order", "5",
               *corpus, "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"command": " ".join(command[1:]), "wall_seconds": round(wall, 3),
            "peak_rss_mb": round(max(peak, before) / 1024, 1), "result": json.loads(out)}


def compare_lmplz(lmplz: str, orders=(3, 5)) -> list[dict]:
    """Interpolated modified KN by KenLM lmplz vs ours, both scored by our code on our streams.

    Conventions: lmplz refuses `<unk>` in its input, so train is written as one line with `<unk>`
    renamed to a plain word (renamed back when reading). lmplz adds <s> and </s> around the line:
    one extra left context for the stream's first n-grams (our convention counts the stream start
    as a left context, so these agree) and a few n-grams ending in </s> (dropped on reading, as
    words outside V). `--vocab_pad |V|` makes lmplz interpolate the unigrams with the uniform
    distribution over our whole vocabulary (words of V absent from train included) rather than
    over the words of train; V's words absent from train then get lmplz's <unk> probability,
    which is exactly that uniform share."""
    from baselines.arpa_reader import read_arpa
    from baselines.kneser_ney import KneserNey
    from corpora.brown import load_brown
    from lmbench.model import split_perplexity

    corpus = load_brown()
    placeholder = "UNKNOWN_WORD_PLACEHOLDER"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        train = Path(tmp) / "train.txt"
        words = corpus.vocab.decode(corpus.train)
        train.write_text(" ".join(placeholder if w == "<unk>" else w for w in words) + "\n", encoding="utf-8")
        for order in orders:
            arpa = Path(tmp) / f"lmplz{order}.arpa"
            started = time.perf_counter()
            with open(train, encoding="utf-8") as stdin:
                log = subprocess.run([lmplz, "-o", str(order), "--vocab_pad", str(len(corpus.vocab)),
                                      "-S", "1G", "-T", tmp, "--arpa", str(arpa)], stdin=stdin,
                                     capture_output=True, text=True, check=True).stderr
            lmplz_seconds = time.perf_counter() - started
            text = arpa.read_text(encoding="utf-8")
            text = text.replace("\t<unk>\t", "\t<lmplz-unk>\t").replace(placeholder, "<unk>")
            unk_log10 = float(re.search(r"\n(\S+)\t<lmplz-unk>\t", text).group(1))
            listed = set(re.search(r"\\1-grams:\n(.*?)\n\n", text, re.S).group(1).split("\n"))
            listed = {line.split("\t")[1] for line in listed}
            arpa.write_text(text, encoding="utf-8")
            theirs = read_arpa(arpa, corpus.vocab)
            absent = np.array([w not in listed for w in corpus.vocab.words])
            theirs.logp[1][absent] = unk_log10 * np.log(10)
            ours = KneserNey(order).fit(corpus)
            row = {"order": order, "lmplz_seconds": round(lmplz_seconds, 2),
                   "lmplz_discounts": re.findall(r"\n(\d) \d+ (D1=\S+ D2=\S+ D3\+=\S+)", log),
                   "our_discounts": {n: np.round(d[1:], 6).tolist() for n, d in ours.discounts.items()}}
            for split in ("valid", "test"):
                a, b = split_perplexity(ours, corpus, split), split_perplexity(theirs, corpus, split)
                row[split] = {"ours": round(a, 3), "lmplz": round(b, 3),
                              "relative_difference_percent": round(100 * (a - b) / b, 4)}
            results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmplz", help="path of KenLM's lmplz binary: also compare with it")
    parser.add_argument("--out", help="also write the JSON figures to this file")
    parser.add_argument("--tiny", action="store_true", help="each method once, at order 3, on the tiny corpus of "
                        "bench/tiny_corpus.py instead of Brown: a seconds-long run (the test suite's)")
    parser.add_argument("--one", nargs=3, metavar=("METHOD", "ORDER", "MIN_COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]), args.tiny)))
        return

    tiny = ["--tiny"] if args.tiny else []
    rows = [in_subprocess(["--one", m, str(n), str(c), *tiny])
            for m, n, c in tqdm(configs(args.tiny), desc="models", file=sys.stderr)]
    print(f"{'method':<20}{'n':>2}{'cut':>4} {'valid':>8} {'test':>8} {'build s':>8} {'score s':>8} "
          f"{'tokens/s':>10} {'RSS MB':>7}  paper KN back-off (valid/test)")
    for r in rows:
        paper = PAPER_KN_BACKOFF[r["order"]] if r["method"] == "kneser-ney-backoff" else ""
        print(f"{r['method']:<20}{r['order']:>2}{r['min_ngram_count']:>4} {r['valid_perplexity']:8.2f} {r['test_perplexity']:8.2f} "
              f"{r['build_seconds']:8.2f} {r['score_seconds']:8.3f} {r['score_tokens_per_second']:10,d} "
              f"{r['peak_rss_mb']:7.0f}  {paper}")
    figures = {"models": rows, "cli": cli_run(args.tiny)}
    cli = figures["cli"]
    print(f"\nwhole command `lmbench {' '.join(cli['command'].split()[2:])}`: {cli['wall_seconds']:.2f} s wall, "
          f"peak RSS {cli['peak_rss_mb']:.0f} MB")
    if args.lmplz:
        figures["lmplz"] = compare_lmplz(args.lmplz)
        for r in figures["lmplz"]:
            for split in ("valid", "test"):
                s = r[split]
                print(f"KN {r['order']}-gram {split}: ours {s['ours']:.3f}, lmplz {s['lmplz']:.3f} "
                      f"({s['relative_difference_percent']:+.4f}%)")
    print(json.dumps(figures, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

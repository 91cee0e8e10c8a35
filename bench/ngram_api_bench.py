"""An n-gram model through lmbench's API beside KenLM's (issue 67, item 2): load time and peak memory of the ARPA
file and of its binary form, and scoring speed one sentence at a time, many sentences at once and a whole text.

    PYTHONPATH=. python bench/ngram_api_bench.py --arpa kn5.arpa --text test.txt \
        [--kenlm-python /tmp/kenlm-venv/bin/python] [--repeats 3] [--out figures.json]
    PYTHONPATH=. python bench/ngram_api_bench.py --tiny     # the test suite's seconds-long run

The ARPA file is made by `lmbench ngram ... --arpa` (docs/api.md gives the commands of the published table);
its binary form is written here by `lmbench build-binary`. Every figure comes from a fresh process (the median
of --repeats): the seconds `lmbench.load` (or `kenlm.Model`) takes, the process's peak resident memory after
loading and after scoring, and beside it the same process's before loading (Python, numpy and numba with
its compiled code's runtime for lmbench; Python and the module for KenLM): the model's own memory is the
difference. The sentences are the text's tokens cut after each "." (at most 100 tokens), scored without
markers by both (bos=False, eos=False); their log10 probabilities are compared (KenLM's within 1e-4 of ours,
its float32 values). `lmbench score FILE` of a one-line file is timed whole (the command's start included),
beside a Python command that loads the model with KenLM and scores the line. KenLM runs from the Python given
by --kenlm-python (`python -m venv /tmp/kenlm-venv && /tmp/kenlm-venv/bin/pip install kenlm`); without it,
its columns are left empty. Timings are wall-clock, on whatever else the machine runs: compare the ratios of
one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SENTENCE_MAX = 100

# a child process: argv = model, sentences file (one a line), text file, which; prints its figures as JSON
CHILD = r"""
import json, resource, sys, time
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
model_path, sentences_path, text_path, which = sys.argv[1:5]
sentences = open(sentences_path, encoding="utf-8").read().split("\n")[:-1]
text = open(text_path, encoding="utf-8").read()
if which == "lmbench":
    import numpy as np
    import lmbench, reports.api
    reports.api.load  # (the suite imported)
    from baselines.backoff import BackoffModel, _walk
    def fixed(a):
        a.flags.writeable = False
        return a
    _walk(np.zeros(1, np.int32), np.zeros((1, 3), np.int64), (fixed(np.arange(1)),), (fixed(np.zeros(0, np.int64)),),
          (fixed(np.zeros(1, np.float32)),), (fixed(np.zeros(0, np.float32)),), 1, 1, 1, 1.0)  # the compiled
    # code's runtime, before the model
    before = peak()
    started = time.perf_counter()
    model = lmbench.load(model_path)
    load = time.perf_counter() - started
    score = lambda s: model.score(s, bos=False, eos=False)
    many = lambda: model.score_many(sentences, bos=False, eos=False)
    whole = lambda: model.score(text, bos=False, eos=False)
else:
    import kenlm
    before = peak()
    started = time.perf_counter()
    model = kenlm.Model(model_path)
    load = time.perf_counter() - started
    score = lambda s: model.score(s, bos=False, eos=False)
    many = None
    whole = lambda: model.score(text, bos=False, eos=False)
loaded = peak()
score(sentences[0])
started = time.perf_counter()
values = [score(s) for s in sentences]
one = time.perf_counter() - started
batch = None
if many is not None:
    started = time.perf_counter()
    batched = many()
    batch = time.perf_counter() - started
    assert max(abs(a - b) for a, b in zip(values, batched)) < 1e-9
started = time.perf_counter()
total = whole()
text_seconds = time.perf_counter() - started
print(json.dumps({"load_seconds": load, "before_bytes": before, "loaded_bytes": loaded, "peak_bytes": peak(),
                  "one_seconds": one, "batch_seconds": batch, "text_seconds": text_seconds, "values": values,
                  "text_log10": total}))
"""

KENLM_LINE = "import sys, kenlm; print(kenlm.Model(sys.argv[1]).score(open(sys.argv[2]).readline(), bos=True, eos=True))"


def sentences_of(tokens: list[str]) -> list[str]:
    """The tokens cut after each "." (and every SENTENCE_MAX tokens)."""
    out, current = [], []
    for token in tokens:
        current.append(token)
        if token == "." or len(current) == SENTENCE_MAX:
            out.append(" ".join(current))
            current = []
    return out + ([" ".join(current)] if current else [])


def child(python: str, which: str, model: Path, sentences: Path, text: Path, repeats: int) -> dict:
    """The median figures of `repeats` fresh processes (the values of the first)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    runs = []
    for _ in range(repeats):
        done = subprocess.run([python, "-c", CHILD, str(model), str(sentences), str(text), which], capture_output=True,
                              text=True, env=env, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(f"{which} on {model} failed: {done.stderr[-2000:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    figures = {key: statistics.median(run[key] for run in runs) for key in runs[0]
               if key not in ("values", "text_log10") and runs[0][key] is not None}
    return {**figures, "values": runs[0]["values"], "text_log10": runs[0]["text_log10"]}


def wall(command: list[str], repeats: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=env, cwd=ROOT)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arpa", type=Path, help="the ARPA file (lmbench ngram --arpa)")
    parser.add_argument("--text", type=Path, help="the text whose sentences and whole are scored (test.txt)")
    parser.add_argument("--kenlm-python", default=None, help="a Python with KenLM's module (else KenLM is skipped)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per figure (their median)")
    parser.add_argument("--sentences", type=int, default=5000, help="sentences scored one at a time")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    parser.add_argument("--tiny", action="store_true", help="a KN 3 of the tiny corpus, once each (seconds)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.tiny:
            from tiny_corpus import tiny_files
            train, valid, test = tiny_files(tmp / "tiny")
            args.arpa, args.text, args.repeats, args.sentences = tmp / "kn3.arpa", test, 1, 100
            subprocess.run([sys.executable, "-m", "lmbench_cli", "ngram", "--method", "kneser-ney", "--order", "3",
                            "--corpus", "text", "--train", str(train), "--valid", str(valid), "--test", str(test),
                            "--arpa", str(args.arpa)], check=True, capture_output=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        if args.arpa is None or args.text is None:
            parser.error("give --arpa and --text (or --tiny)")
        tokens = args.text.read_text(encoding="utf-8").split()
        sentences = tmp / "sentences.txt"
        sentences.write_text("\n".join(sentences_of(tokens)[:args.sentences]) + "\n", encoding="utf-8")
        text = tmp / "text.txt"
        text.write_text(" ".join(tokens) + "\n", encoding="utf-8")
        one_line = tmp / "one.txt"
        one_line.write_text(sentences.read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8")
        binary = tmp / "model.lmb"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lmbench_cli", "build-binary", str(args.arpa), str(binary)], check=True,
                       capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        build = time.perf_counter() - started
        count = len(sentences.read_text(encoding="utf-8").split("\n")) - 1
        scored = sum(len(s.split()) for s in sentences.read_text(encoding="utf-8").split("\n"))
        rows = {"lmbench ARPA": child(sys.executable, "lmbench", args.arpa, sentences, text, args.repeats),
                "lmbench binary": child(sys.executable, "lmbench", binary, sentences, text, args.repeats)}
        cli = {"lmbench ARPA": wall([sys.executable, "-m", "lmbench_cli", "score", str(args.arpa), str(one_line)],
                                    args.repeats),
               "lmbench binary": wall([sys.executable, "-m", "lmbench_cli", "score", str(binary), str(one_line)],
                                      args.repeats)}
        if args.kenlm_python:
            rows["KenLM ARPA"] = child(args.kenlm_python, "kenlm", args.arpa, sentences, text, args.repeats)
            cli["KenLM ARPA"] = wall([args.kenlm_python, "-c", KENLM_LINE, str(args.arpa), str(one_line)], args.repeats)
            agree = max(abs(a - b) for a, b in zip(rows["KenLM ARPA"]["values"], rows["lmbench ARPA"]["values"]))
        figures = {"arpa": str(args.arpa), "arpa_bytes": args.arpa.stat().st_size, "binary_bytes": binary.stat().st_size,
                   "build_binary_seconds": round(build, 2), "sentences": count, "sentence_tokens": scored,
                   "text_tokens": len(tokens), "repeats": args.repeats, **(
                       {"kenlm_agrees_to": agree} if args.kenlm_python else {}), "rows": {}}
    MB = 1e6
    print(f"{'':16} {'load s':>7} {'MB before':>9} {'MB loaded':>9} {'MB peak':>8} {'one at a time':>14} "
          f"{'all at once':>12} {'whole text':>11} {'score FILE s':>12}")
    for name, row in rows.items():
        one = scored / row["one_seconds"]
        batch = scored / row["batch_seconds"] if row.get("batch_seconds") else None
        whole = len(tokens) / row["text_seconds"]
        figures["rows"][name] = {"load_seconds": round(row["load_seconds"], 3),
                                 "before_mb": round(row["before_bytes"] / MB), "loaded_mb": round(row["loaded_bytes"] / MB),
                                 "peak_mb": round(row["peak_bytes"] / MB), "one_tokens_per_s": round(one),
                                 "one_us_per_sentence": round(row["one_seconds"] / count * 1e6, 1),
                                 "batch_tokens_per_s": round(batch) if batch else None, "text_tokens_per_s": round(whole),
                                 "score_file_seconds": round(cli[name], 2)}
        shown = figures["rows"][name]
        print(f"{name:16} {shown['load_seconds']:7.2f} {shown['before_mb']:9} {shown['loaded_mb']:9} {shown['peak_mb']:8} "
              f"{one:10.0f} t/s {(f'{batch:8.0f} t/s' if batch else ''):>12} {whole:7.0f} t/s {cli[name]:12.2f}")
    print(f"(tokens/s; one at a time: {count} sentences of {scored / max(count, 1):.1f} tokens on average, "
          f"{figures['rows']['lmbench binary']['one_us_per_sentence']} us each for lmbench's binary model)")
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()

"""Training speed of NPLM (ours) and the LSTM under each way of choosing the CPU threads, on idle cores
and beside a second busy process.

Each measurement is a fresh process (OpenMP reads OMP_WAIT_POLICY once, when torch loads it) that
trains `--updates` updates of the network on Brown through `neural.training.trainer.train_network` (NPLM
(ours): its shape and recipe on Brown, `neural.ours`; the LSTM: its family's defaults) and prints the
run's tokens/s. The variants:

- all-cores: the threads of every core, OpenMP's own waiting (active: its threads spin between
  parallel regions; lmbench's default before issue 34);
- one: 1 thread;
- passive: every core's threads, OMP_WAIT_POLICY=PASSIVE (a thread sleeps when it has nothing to do);
- spin: every core's threads, GOMP_SPINCOUNT=`--spincount` (a waiting thread spins that many times, then
  sleeps; torch's CPU build uses GNU OpenMP, whose own default is 300,000, about 3 ms);
- free: the cores of this process's affinity less the 1-minute load average (at least 1), active waiting;
- default: what `lmbench` does today, run through the `lmbench_cli` entry (`python -m lmbench_cli nplm
  train`), whichever policy and count that is;
- before: the default of another checkout (`--before DIR`, e.g. `git archive ba505a7 | tar -x -C DIR`,
  the commit before issue 34), run the same way from DIR.

The conditions: `idle` (nothing started here; a shared machine's other work shows in the load average,
printed with each figure) and `busy` (a second process spinning on one core, `while True: pass`,
started before the round and killed after it). The variants run interleaved, round after round, so
that a change of the machine's load falls on all of them alike; compare ratios within a round.

    python bench/threads_bench.py --family ours --condition busy --rounds 2 --updates 150
    python bench/threads_bench.py --family lstm --variants before default one --before /tmp/before
    python bench/threads_bench.py --tiny        # the test suite's seconds-long run
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

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("all-cores", "one", "passive", "spin", "free", "default", "before")


def cores() -> int:
    return len(os.sched_getaffinity(0))


def environment(variant: str, checkout: Path, spincount: int) -> tuple[dict, int | None]:
    """The environment and --threads of a variant (None: the command's own default)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    env["PYTHONPATH"] = str(checkout)
    if variant == "all-cores":
        return {**env, "OMP_WAIT_POLICY": "ACTIVE"}, cores()
    if variant == "one":
        return env, 1
    if variant == "passive":
        return {**env, "OMP_WAIT_POLICY": "PASSIVE"}, cores()
    if variant == "spin":
        return {**env, "GOMP_SPINCOUNT": str(spincount)}, cores()
    if variant == "free":
        return {**env, "OMP_WAIT_POLICY": "ACTIVE"}, max(1, cores() - round(os.getloadavg()[0]))
    return env, None


def command(family: str, updates: int, threads: int | None, out: str, corpus: list[str]) -> list[str]:
    """`lmbench train` of the family on `corpus` (its options: Brown's, or the tiny corpus's), stopped after
    `updates` updates, not scored."""
    if family == "ours":
        shape = ["--model", "nplm", "--n", "6", "--m", "100", "--h", "300", "--direct", "--bag", "50",
                 "--weight-decay", "1e-5", "--schedule", "linear", "--dropout", "0.3", "--epochs", "6"]
    else:
        shape = ["--model", "lstm"]
    return [sys.executable, "-m", "lmbench_cli", "nplm", "train", *corpus, *shape,
            "--max-steps", str(updates), "--device", "cpu", "--out", out, "--json",
            *(["--threads", str(threads)] if threads else [])]


def measure(family: str, variant: str, updates: int, before: Path | None, spincount: int,
            corpus: list[str]) -> dict:
    checkout = before if variant == "before" else ROOT
    env, threads = environment(variant, checkout, spincount)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(command(family, updates, threads, out, corpus), env=env, capture_output=True, text=True,
                              cwd=checkout)
    if done.returncode:
        raise SystemExit(f"{family} {variant} failed: {done.stderr.strip().splitlines()[-1]}")
    result = json.loads(done.stdout)
    return {"family": family, "variant": variant, "threads": threads or "default",
            "wait": env.get("OMP_WAIT_POLICY", "default"), "spincount": env.get("GOMP_SPINCOUNT", "default"), "load_1min": round(load, 2),
            "tokens_per_s": round(result["tokens_per_s"]), "updates": result["updates"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("ours", "lstm"), default="ours")
    parser.add_argument("--condition", choices=("idle", "busy"), default="idle")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=150)
    parser.add_argument("--spincount", type=int, default=300_000, help="GOMP_SPINCOUNT of the variant spin")
    parser.add_argument("--before", type=Path, default=None, help="the checkout whose default `before` runs")
    parser.add_argument("--tiny", action="store_true", help="the tiny corpus of bench/tiny_corpus.py instead of "
                        "Brown, the variants one and default, 1 round of 5 updates: the test suite's run")
    args = parser.parse_args()
    corpus = ["--corpus", "brown"]
    if args.tiny:
        from tiny_corpus import tiny_files
        corpus = ["--corpus", "text", *[arg for split, path in zip(("train", "valid", "test"), tiny_files())
                                        for arg in (f"--{split}", str(path))]]
        args.variants, args.rounds, args.updates = ["one", "default"], 1, 5
    if "before" in args.variants and args.before is None:
        parser.error("the variant before needs --before DIR, a checkout of the commit to compare with")
    print(f"# {args.family}, {args.condition}, {cores()} cores, {args.updates} updates per measurement", flush=True)
    for round_ in range(args.rounds):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.condition == "busy" else None
        try:
            if busy is not None:
                time.sleep(1.0)
            for variant in args.variants:
                print(json.dumps({"round": round_ + 1, "condition": args.condition,
                                  **measure(args.family, variant, args.updates, args.before, args.spincount, corpus)}), flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()


if __name__ == "__main__":
    main()

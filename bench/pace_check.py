"""How true the pace a run measures at its start is: for each network row of a text corpus's default
comparison, `neural.training.trainer.measure_pace` (what `lmbench reproduce` times before any row, and its
estimate rests on) against the row's steady pace, the same updates timed after a long warm-up over
`--seconds` of work.
Prints, per row, the seconds of one update by each, their ratio (the start's / the steady one's - 1: the
share by which the start's estimate of its updates errs), and the seconds each measurement took.

    PYTHONPATH=. python bench/pace_check.py --train T --valid V --test T [--vocab-size 10000]
                                            [--networks mlp1,lstm] [--threads 2] [--seconds 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from neural.training.trainer import Trainer, join, measure_pace  # noqa: E402
from reports.running.pipeline import Reproduction  # noqa: E402
from reports.running.settings import TextCorpus, default_settings  # noqa: E402

STEADY_WARMUP = 10  # updates run before the steady pace is timed


def steady_update_seconds(corpus, config, seconds: float) -> tuple[float, int]:
    """(seconds of one update, updates timed): the mean over at least `seconds` of updates, after STEADY_WARMUP."""
    team = join(None, len(corpus.vocab), device=config.device, threads=config.threads)
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(corpus, config, Path(folder), team, resume=False, progress=False)
        updates = trainer.begin_epoch()
        for _ in range(min(STEADY_WARMUP, updates // 2)):
            trainer.update()
            trainer.state.position += 1
        timed, started = 0, time.perf_counter()
        while (time.perf_counter() - started < seconds or timed < 10) and trainer.state.position < updates:
            trainer.update()
            trainer.state.position += 1
            timed += 1
        return (time.perf_counter() - started) / timed, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--valid", type=Path, required=True)
    parser.add_argument("--test", type=Path, required=True)
    parser.add_argument("--vocab-size", type=int, default=None)
    parser.add_argument("--networks", default=None, help="row ids, comma-separated (default: every network row)")
    parser.add_argument("--threads", type=int, default=None, help="default: the run's own (neural.training.recipe)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of updates in the steady pace")
    args = parser.parse_args()
    text = TextCorpus(train=args.train, valid=args.valid, test=args.test, vocab_size=args.vocab_size, name="pace")
    with tempfile.TemporaryDirectory() as work:
        run = Reproduction(default_settings("text", False), Path(work), Path(work) / "report", text,
                           threads=args.threads, precision=args.precision, code={"commit": "bench"})
        run.corpus = run.load_corpus()
        rows = [row for row in run.table_rows() if row.family]
        wanted = args.networks.split(",") if args.networks else [row.id for row in rows]
        print(f"{'row':<12} {'start s/update':>15} {'steady s/update':>16} {'start/steady-1':>15} "
              f"{'start took':>11} {'steady updates':>15}")
        for row in rows:
            if row.id not in wanted:
                continue
            config = run.training_config(row, budgeted=False)
            started = time.perf_counter()
            speed = measure_pace(run.corpus, config)
            took = time.perf_counter() - started
            steady, timed = steady_update_seconds(run.corpus, config, args.seconds)
            print(f"{row.id:<12} {speed.update_seconds:>15.5f} {steady:>16.5f} "
                  f"{speed.update_seconds / steady - 1:>+15.1%} {took:>10.1f}s {timed:>15}", flush=True)


if __name__ == "__main__":
    main()

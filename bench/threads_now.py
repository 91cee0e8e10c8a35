"""What the default thread count would be before, during and right after a busy loop: lmbench.threads'
choice (the cores less what /proc/stat shows busy over a fraction of a second) beside the rule it
replaced (the cores less the 1-minute load average, which lags a finished job by minutes).

A round: one reading on the machine as found, `--busy` processes spinning (`while True: pass`) for
`--seconds`, a reading while they spin, then readings at 0, 15, 30 and 60 seconds after they stop (`--after`). On a
machine shared with other work, that work shows in both rules alike.

    python bench/threads_now.py --busy 2 --seconds 30
    python bench/threads_now.py --busy 1 --seconds 0.5 --after 0      # the test suite's seconds-long run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmbench import threads  # noqa: E402


def reading(when: str) -> None:
    threads.machine_now.cache_clear()
    now = threads.machine_now()
    load = os.getloadavg()[0]
    by_load = max(1, threads.cores() - round(load))
    print(f"{when:>26}: chosen {now['free']} thread(s) ({now['busy']:.2f} cores busy over "
          f"{threads.SAMPLE_SECONDS} s); by the 1-minute load average ({load:.2f}) {by_load}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="spinning processes (default 2)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long they spin (default 30)")
    parser.add_argument("--after", type=float, nargs="+", default=[0, 15, 30, 60],
                        help="seconds after they stop of the readings (default 0 15 30 60; the tests: 0)")
    args = parser.parse_args()
    print(f"{threads.cores()} cores in this process's affinity")
    reading("before")
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        time.sleep(args.seconds)
        reading(f"{args.busy} spinning")
    finally:
        for process in spinning:
            process.kill()
            process.wait()
    stopped = time.monotonic()
    for after in args.after:
        time.sleep(max(0.0, stopped + after - time.monotonic()))
        reading(f"{after} s after they stopped")


if __name__ == "__main__":
    main()

"""What `reproduce --jobs K` pays for Ray before and after its rows: importing it, starting the embedded
Ray as reports.running.cluster starts it (its CPUs, a 100 MiB object store, no dashboard), the first task's
round trip, and the shutdown; `--runs` times each (the first start also fills the file caches).

    python bench/ray_start.py --runs 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    import ray
    print(f"import ray: {time.perf_counter() - start:.2f} s")
    from reports.running.cluster import OBJECT_STORE_BYTES, start_embedded

    @ray.remote
    def answer() -> int:
        return 1

    for run in range(args.runs):
        start = time.perf_counter()
        start_embedded(args.cpus, OBJECT_STORE_BYTES)
        started = time.perf_counter()
        ray.get(answer.remote())
        answered = time.perf_counter()
        ray.shutdown()
        print(f"run {run + 1}: ray.init {started - start:.2f} s, first task {answered - started:.2f} s, "
              f"shutdown {time.perf_counter() - answered:.2f} s")


if __name__ == "__main__":
    main()

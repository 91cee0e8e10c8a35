"""How many CPU threads a run uses when it names none, and how they wait: chosen by bench/threads_bench.py
(docs/parallel.md, "Threads").

- `passive_waiting`: OMP_WAIT_POLICY=PASSIVE unless the environment sets a policy. OpenMP's threads
  otherwise spin between parallel regions; beside another busy process a spinning thread holds the
  core the thread it waits for needs, and a 2-thread run fell to a fraction of a 1-thread run. OpenMP
  reads the variable once, when torch loads it, so the `lmbench` command sets it first thing.
- `free_cores`: the cores this process may run on (its affinity) less the 1-minute load average, at
  least 1, measured once, at the first call (the command calls it at its start, before its own work
  raises the load).
"""

from __future__ import annotations

import functools
import os


def passive_waiting() -> None:
    """OMP_WAIT_POLICY=PASSIVE when no policy is set; a no-op once OpenMP is loaded (call it before torch)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@functools.cache
def free_cores() -> int:
    """The cores of this process's affinity less round(1-minute load average), at least 1 (all of them
    where the system gives no load average)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(1, cores - round(load))

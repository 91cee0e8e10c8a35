"""How many CPU threads a run uses when it names none, and how they wait: chosen by bench/threads_bench.py
(docs/parallel.md, "Threads").

- `choose_waiting`: OMP_WAIT_POLICY=PASSIVE where the machine is busy when the command starts (fewer
  free cores than cores), unless the environment sets a policy; on idle cores OpenMP's own waiting.
  A waiting OpenMP thread otherwise spins a while before it sleeps: beside another busy process it
  holds the core the thread it waits for needs (2 threads ran at 0.4x of passive ones), while on idle
  cores spinning is what makes 2 threads pay (passive ones ran at 0.6x of spinning ones, slower than
  1 thread). OpenMP reads the variable once, when torch loads it, so the `lmbench` command sets it
  first thing.
- `free_cores`: the cores this process may run on (its affinity) less the 1-minute load average, at
  least 1, measured once, at the first call (the command's first thing, before its own work raises
  the load).
"""

from __future__ import annotations

import functools
import os


def choose_waiting() -> None:
    """OMP_WAIT_POLICY=PASSIVE when no policy is set and some cores are busy; a no-op once OpenMP is
    loaded (call it before torch)."""
    if free_cores() < cores():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def free_cores() -> int:
    """The cores of this process's affinity less round(1-minute load average), at least 1 (all of them
    where the system gives no load average)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(1, cores() - round(load))

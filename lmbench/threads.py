"""How many CPU threads a run uses when it names none, and how they wait: chosen by bench/threads_bench.py
(docs/parallel.md, "Threads"), from what the cores do when the command starts.

- `machine_now`: how busy the cores of this process's affinity are now: the busy time of each (all
  but idle and iowait, /proc/stat) over SAMPLE_SECONDS, summed; the free cores are the cores less that
  busy sum rounded, at least 1. Measured once, at the first call (the command's start, before its own
  work), and never from the 1-minute load average where /proc/stat is there: that average lags a
  finished job by minutes, so that a command started right after a training run took 1 thread on idle
  cores. Without /proc/stat (not Linux) the load average stands in, and the choice says so.
- `choose_waiting`: OMP_WAIT_POLICY=PASSIVE where the machine is busy (fewer free cores than cores),
  unless the environment sets a policy; on idle cores OpenMP's own waiting. A waiting OpenMP thread
  otherwise spins a while before it sleeps: beside another busy process it holds the core the thread it
  waits for needs (2 threads ran at 0.4x of passive ones), while on idle cores spinning is what makes 2
  threads pay (passive ones ran at 0.6x of spinning ones, slower than 1 thread). OpenMP reads the
  variable once, when torch loads it: the `lmbench` command calls this before a command that may run
  torch does (commands without --threads never measure, and start no slower).
- `bound_thread_variables`: a thread count of the environment (OMP_NUM_THREADS and the BLAS libraries')
  variables) that is no whole number from 1 to 1024 refused before torch loads: OpenMP crashed on 100000.
- `described`: the choice in words, for the run's first log lines and its results' `meta`.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from lmbench.errors import LMBenchError

SAMPLE_SECONDS = 0.3  # the window over which the cores' busy time is measured
STAT = Path("/proc/stat")


def read_stat() -> str:
    """The kernel's CPU time counters (the one place the machine is read: tests fake it)."""
    return STAT.read_text(encoding="utf-8")


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """Per CPU of /proc/stat's text: (busy, total) jiffies since boot, busy being all but idle and iowait."""
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            values = [int(value) for value in fields[:8]]  # user nice system idle iowait irq softirq steal
            values += [0] * (8 - len(values))  # (an older kernel gives fewer)
            times[int(name[3:])] = (sum(values) - values[3] - values[4], sum(values))
    return times


def choose_waiting() -> None:
    """OMP_WAIT_POLICY=PASSIVE when no policy is set and some cores are busy; a no-op once OpenMP is
    loaded (call it before torch)."""
    if free_cores() < cores():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _affinity() -> set[int]:
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(cores()))


@functools.cache
def machine_now() -> dict:
    """The cores of this process's affinity, how many of them other work keeps busy now (`busy`, in
    cores), the free ones (at least 1) and how that was measured (`source`)."""
    mine = _affinity()
    try:
        before = cpu_times(read_stat())
        time.sleep(SAMPLE_SECONDS)
        after = cpu_times(read_stat())
        busy = sum((after[cpu][0] - before[cpu][0]) / max(after[cpu][1] - before[cpu][1], 1)
                   for cpu in mine if cpu in before and cpu in after)
        source = f"/proc/stat over {SAMPLE_SECONDS} s"
    except (OSError, ValueError, IndexError):
        try:
            busy, source = os.getloadavg()[0], "the 1-minute load average (no /proc/stat)"
        except OSError:
            busy, source = 0.0, "nothing (no /proc/stat, no load average): every core taken as free"
    count = len(mine)
    return {"cores": count, "busy": round(busy, 2), "free": max(1, count - int(busy + 0.5)), "source": source}


def free_cores() -> int:
    """The cores of this process's affinity not busy with other work when first asked, at least 1."""
    return machine_now()["free"]


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS")  # the thread counts torch's libraries read when they load
THREADS_BOUND = 1024  # as --threads (lmbench.options.THREADS_MAX): OMP_NUM_THREADS=100000 crashed OpenMP (issue 59)


def bound_thread_variables(environ=os.environ) -> None:
    """Refuse a thread count of the environment that torch's libraries would crash on or misread (not a
    whole number from 1 to THREADS_BOUND): call it before torch loads, as `choose_waiting`."""
    for name in THREAD_VARIABLES:
        value = environ.get(name, "").strip()
        first = value.split(",")[0]  # OpenMP takes a nested list, "4,2": its first count is the pool's
        if value and not (first.isdigit() and 1 <= int(first) <= THREADS_BOUND):
            raise LMBenchError(f"{name}={value[:40]!r}: a thread count is a whole number from 1 to {THREADS_BOUND}: "
                               f"set it so, or unset it (--threads N sets the run's count)")


def default_threads() -> int:
    """The CPU threads of a run that names none: OMP_NUM_THREADS when it is set (as torch itself reads it:
    a machine shared by several jobs, the test processes), else the free cores (docs/parallel.md)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else free_cores()


def described(threads: int) -> str:
    """The thread count a run took, and why, in one line."""
    seen = machine_now()
    return (f"{threads} thread{'s' if threads != 1 else ''}; the machine at the start: {seen['cores']} cores, "
            f"{seen['busy']:.2f} of them busy ({seen['source']}), {seen['free']} free")

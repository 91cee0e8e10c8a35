"""The CPU threads of a run that names none (lmbench.threads): the cores free NOW, measured from the
cores' busy time over a fraction of a second (/proc/stat), never from the 1-minute load average that
lags a finished job by minutes; passive OpenMP waiting set by the command before torch loads; the
choice in the run's first log line."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmbench import threads
from neural.training.recipe import default_threads


def stat(busy: list[float], idle_total: int = 100) -> str:
    """/proc/stat's text after a window in which each CPU was busy `busy[cpu]` of the time (counters
    from a common start: user time the busy jiffies, idle the rest)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{cpu} {round(share * idle_total)} 0 0 {idle_total - round(share * idle_total)} 0 0 0 0 0 0"
              for cpu, share in enumerate(busy)]
    return "\n".join(lines + ["intr 1 2 3", "ctxt 4"]) + "\n"


@pytest.fixture
def machine(monkeypatch):
    """A machine of 4 cores whose cores' busy shares over the sampled window the test sets (None: no
    /proc/stat), with a 1-minute load average of 3.5 left over from a job that has finished."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 3.0, 2.0))
    monkeypatch.setattr(threads.time, "sleep", lambda seconds: None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)

    def busy(shares):
        snapshots = iter([stat([0.0] * 4, 0), stat(shares)] if shares is not None else [])

        def read():
            if shares is None:
                raise FileNotFoundError("/proc/stat")
            return next(snapshots)
        monkeypatch.setattr(threads, "read_stat", read)
        threads.machine_now.cache_clear()
    yield busy
    threads.machine_now.cache_clear()


@pytest.mark.parametrize("shares,expected", [([0.0, 0.02, 0.0, 0.01], 4), ([1.0, 0.0, 0.0, 0.0], 3),
                                             ([1.0, 1.0, 0.3, 0.0], 2), ([0.6, 0.6, 0.0, 0.0], 3),
                                             ([1.0, 1.0, 1.0, 1.0], 1)])
def test_the_free_cores_are_the_cores_less_what_is_busy_now(machine, shares, expected):
    """Whatever the load average says (3.5 here, a finished job's): idle cores now are free cores."""
    machine(shares)
    assert threads.free_cores() == expected
    assert default_threads() == expected
    assert threads.machine_now()["busy"] == pytest.approx(sum(shares), abs=0.01)


def test_without_proc_stat_the_load_average_stands_in_and_says_so(machine):
    machine(None)
    assert threads.free_cores() == 1  # 4 cores less round(3.5)
    assert "load average" in threads.machine_now()["source"] and "load average" in threads.described(1)


def test_only_this_process_cores_count(machine, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3})  # CPUs 0 and 1 busy, but not ours
    machine([1.0, 1.0, 0.0, 0.0])
    assert threads.machine_now()["cores"] == 2 and threads.free_cores() == 2


def test_the_free_cores_are_measured_once(machine):
    machine([0.0] * 4)
    assert threads.free_cores() == 4
    assert threads.free_cores() == 4  # a second read of /proc/stat would find no snapshot left


def test_omp_num_threads_still_wins(machine, monkeypatch):
    machine([1.0] * 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3


def test_the_real_machine_is_read():
    """On this machine (Linux): /proc/stat is there and read, within the cores of the affinity."""
    threads.machine_now.cache_clear()
    try:
        seen = threads.machine_now()
    finally:
        threads.machine_now.cache_clear()
    assert seen["source"].startswith("/proc/stat") and 1 <= seen["free"] <= seen["cores"] == threads.cores()


@pytest.mark.parametrize("busy,policy,expected", [(1.5, None, "PASSIVE"), (0.2, None, "unset"),
                                                  (1.5, "ACTIVE", "ACTIVE"), (0.2, "PASSIVE", "PASSIVE")])
def test_the_command_asks_for_passive_waiting_on_busy_cores_unless_a_policy_is_set(busy, policy, expected):
    """2 cores: with 1.5 of them busy at the start, waiting threads sleep; on idle cores OpenMP's own
    waiting (it spins, then sleeps), 1.6x faster there (docs/parallel.md). Set before torch loads (the
    command's package reads the families' registry, whose files import it: the policy as it stood then is
    what OpenMP took), and the first log line gives the threads and why."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    code = ("import os, sys; from lmbench import threads; os.sched_getaffinity = lambda pid: {0, 1}; "
            "threads.time.sleep = lambda s: None; "
            f"snapshots = iter(['cpu0 0 0 0 0\\ncpu1 0 0 0 0\\n', 'cpu0 {busy / 2 * 100:.0f} 0 0 {100 - busy / 2 * 100:.0f}"
            f"\\ncpu1 {busy / 2 * 100:.0f} 0 0 {100 - busy / 2 * 100:.0f}\\n']); "
            "threads.read_stat = lambda: next(snapshots); "
            "import atexit, importlib.abc; seen = []; "
            "Watch = type('Watch', (importlib.abc.MetaPathFinder,), {'find_spec': lambda self, name, path=None, "
            "target=None: seen.append(os.environ.get('OMP_WAIT_POLICY', 'unset')) if name == 'torch' and not seen "
            "else None}); sys.meta_path.insert(0, Watch()); "
            "atexit.register(lambda: print(seen[0] if seen else 'no torch', 'torch' in sys.modules)); "
            "import lmbench_cli; "  # (no Brown here: the run stops at its corpus, after the threads' choice)
            "lmbench_cli.main(['reproduce', 'brown', '--report-dir', sys.argv[1], '--work-dir', sys.argv[1] + '-work'])")
    env["NLTK_DATA"] = str(Path(env.get("TMPDIR", "/tmp")) / "no-nltk-data-here")
    done = subprocess.run([sys.executable, "-c", code, str(Path(env.get("TMPDIR", "/tmp")) / "threads-test")],
                          env=env, capture_output=True, text=True)
    assert done.stdout.split() == [expected, "True"]  # the policy torch found when it loaded
    assert f"threads: {1 if busy > 1 else 2} thread" in done.stderr and "/proc/stat" in done.stderr

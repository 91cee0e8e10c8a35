"""The CPU threads of a run that names none (lmbench.threads, neural.training.recipe.default_threads):
the free cores, and passive OpenMP waiting set by the command before torch loads."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmbench import threads
from neural.training.recipe import default_threads


@pytest.fixture
def machine(monkeypatch):
    """A machine of 4 cores whose 1-minute load average the test sets."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)

    def loaded(load):
        def getloadavg():
            if load is None:
                raise OSError("no load average")
            return (load, load, load)
        monkeypatch.setattr(os, "getloadavg", getloadavg)
        threads.free_cores.cache_clear()
    yield loaded
    threads.free_cores.cache_clear()


@pytest.mark.parametrize("load,expected", [(0.0, 4), (0.4, 4), (1.6, 2), (3.0, 1), (9.0, 1), (None, 4)])
def test_the_free_cores_are_the_cores_less_the_load(machine, load, expected):
    machine(load)
    assert threads.free_cores() == expected
    assert default_threads() == expected


def test_the_free_cores_are_measured_once(machine):
    machine(0.0)
    assert threads.free_cores() == 4
    os.getloadavg = lambda: (3.0, 3.0, 3.0)  # the command's own work raises the load later (restored by
    assert threads.free_cores() == 4  # the fixture's monkeypatch): the count it started with stays


def test_omp_num_threads_still_wins(machine, monkeypatch):
    machine(3.0)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3


@pytest.mark.parametrize("load,policy,expected", [(1.5, None, "PASSIVE"), (0.2, None, "unset"),
                                                  (1.5, "ACTIVE", "ACTIVE"), (0.2, "PASSIVE", "PASSIVE")])
def test_the_command_asks_for_passive_waiting_on_busy_cores_unless_a_policy_is_set(load, policy, expected):
    """2 cores: with 1.5 of them busy at the start, waiting threads sleep; on idle cores OpenMP's own
    waiting (it spins, then sleeps), 1.6x faster there (docs/parallel.md)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    code = (f"import os; os.sched_getaffinity = lambda pid: {{0, 1}}; os.getloadavg = lambda: ({load}, 0, 0); "
            "import lmbench_cli; print(os.environ.get('OMP_WAIT_POLICY', 'unset'))")
    printed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert printed.split()[0] == expected

"""Signals under Ray (issue 69, item 5): `ray.init` replaced the command's SIGTERM handler with its own, so
a `--jobs` run sent SIGTERM ended through Ray's stack dump (exit 134) instead of the suite's one line and 143.
The handlers a command sets are set back once Ray has started: checked on the handlers themselves, and on a
quick comparison under --jobs 2 terminated while its rows run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import chain_text, write_splits

pytestmark = pytest.mark.xdist_group("ray_cluster")  # (one Ray at a time on this machine: tests/test_cluster.py)
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_an_embedded_ray_keeps_the_commands_signal_handlers():
    import ray
    from reports.running.cluster import KEPT_SIGNALS, start_embedded

    def handler(signum, frame):
        """(a command's own)"""
    before = {signum: signal.signal(signum, handler) for signum in KEPT_SIGNALS}
    try:
        start_embedded(1, 100 * 2 ** 20)
        assert {signal.Signals(s).name: signal.getsignal(s) is handler for s in KEPT_SIGNALS} == {
            signal.Signals(s).name: True for s in KEPT_SIGNALS}
    finally:
        ray.shutdown()
        for signum, previous in before.items():
            signal.signal(signum, previous)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_jobs_run_terminated_while_its_rows_run_says_one_line_and_exits_128_plus_the_signal(tmp_path, sig, code):
    files = write_splits(tmp_path, train=chain_text(20_000, 1), valid=chain_text(2_000, 2), test=chain_text(2_000, 3))
    argv = [sys.executable, "-m", "lmbench_cli", "reproduce", "text", "--quick", "--name", "signalled",
            "--networks", "mlp1,lstm", "--jobs", "2", "--threads", "1", "--work-dir", str(tmp_path / "work"),
            "--report-dir", str(tmp_path / "report"), *[w for s in ("train", "valid", "test") for w in (f"--{s}", str(files[s]))]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LMBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, deadline = [], time.time() + 240
    for line in child.stderr:  # (the run's log lines)
        seen.append(line)
        if "started on" in line:  # a row runs as a Ray task
            break
        assert time.time() < deadline and child.poll() is None, "".join(seen)
    child.send_signal(sig)
    _, rest = child.communicate(timeout=120)
    err = "".join(seen) + rest
    assert child.returncode == code, err[-3000:]
    assert f"lmbench: terminated ({signal.Signals(sig).name})" in err and "Traceback" not in err

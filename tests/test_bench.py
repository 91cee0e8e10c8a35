"""Every script in bench/ runs at a tiny size on the CPU (issue 51): nothing else runs them, and a library
change that broke one went unseen until a GPU machine ran it (`bench/gpu_check.sh` failed at its first
update, `'CoupledSGD' object has no attribute 'zero_grad'`). Each entry of `TINY` is a script's seconds-long
command (its --tiny flag, or the size options it has, on the CPU: the same script and code path as its
full run, its CUDA path chosen by the same --device or DEVICE); a script with no entry fails the test,
so a new script comes with its tiny run. A script whose tiny run still takes tens of seconds on a
shared machine (processes it spawns, a whole quick reproduction) is marked slow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
HELPERS = {"tiny_corpus.py"}  # imported by the scripts, not run
# tens of seconds (gpu_check.sh: nplm_bench.py --tiny in a shell, which the fast set runs)
SLOW = {"gpu_answer.sh", "gpu_check.sh", "parallel_bench.py", "pipeline_bench.py", "ray_start.py", "threads_bench.py"}


def tiny_files(folder: Path) -> list[str]:
    sys.path.insert(0, str(BENCH))
    try:
        from tiny_corpus import tiny_files as write
    finally:
        sys.path.remove(str(BENCH))
    return [str(path) for path in write(folder)]


TINY = {  # script: (its tiny command's arguments, extra environment); "{tiny}": the tiny corpus's folder
    "bootstrap_bench.py": (["--tokens", "20000", "--document", "200"], {}),
    "cluster_bench.py": (["--tiny"], {}),
    "flops_check.py": (["--vocab", "300", "--tokens", "3000"], {}),
    "gpu_check.sh": (["2"], {"DEVICE": "cpu", "TINY": "1", "OUT": "{tmp}"}),
    "gpu_answer.sh": (["{tiny}/train.txt", "{tiny}/valid.txt", "{tiny}/test.txt"],
                      {"DEVICE": "cpu", "QUICK": "1", "OUT": "{tmp}/answer", "WORK": "{tmp}/work"}),
    "infinigram_bench.py": (["--tiny"], {}),
    "infinigram_weights.py": (["{tiny}"], {}),
    "lstm_lanes.py": (["--tiny"], {}),
    "ngram_api_bench.py": (["--tiny"], {}),
    "ngram_bench.py": (["--tiny"], {}),
    "nplm_bench.py": (["--tiny", "--device", "cpu"], {}),
    "parallel_bench.py": (["--vocab", "300", "--batch", "16", "--seconds", "0.2", "--processes", "2",
                           "--schemes", "data"], {}),
    "pace_check.py": (["--train", "{tiny}/train.txt", "--valid", "{tiny}/valid.txt", "--test", "{tiny}/test.txt",
                       "--networks", "mlp9,gru", "--threads", "1", "--seconds", "0.2"], {}),
    "pipeline_bench.py": (["--tiny"], {}),
    "ray_start.py": (["--runs", "1", "--cpus", "1"], {}),
    "recipe_curves.py": (["--old", "results/ap89-1m-seq/results.json", "--new", "results/ap89-1m-jobs2/results.json",
                          "--out", "{tmp}/curves.svg"], {}),
    "scale_bench.py": (["--tiny"], {}),
    "threads_bench.py": (["--tiny"], {}),
    "threads_now.py": (["--busy", "1", "--seconds", "0.5", "--after", "0"], {}),
    "train_speed.py": (["--tiny", "--device", "cpu"], {}),
}
SCRIPTS = sorted(p.name for p in [*BENCH.glob("*.py"), *BENCH.glob("*.sh")] if p.name not in HELPERS)


def test_every_bench_script_has_a_tiny_run():
    assert set(TINY) == set(SCRIPTS), "give each bench script a tiny run in TINY (and only those)"


@pytest.mark.parametrize("script", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name
                                    for name in SCRIPTS])
def test_the_bench_script_runs_at_a_tiny_size(script, tmp_path):
    arguments, environment = TINY[script]
    tiny = tmp_path / "tiny"
    tiny_files(tiny)

    def filled(text: str) -> str:
        return text.replace("{tiny}", str(tiny)).replace("{tmp}", str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LMBENCH_CACHE": str(tmp_path / "cache"),
           "PY": sys.executable, **{key: filled(value) for key, value in environment.items()}}
    runner = ["bash"] if script.endswith(".sh") else [sys.executable]
    done = subprocess.run([*runner, str(BENCH / script), *map(filled, arguments)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{script}: exit {done.returncode}\n{done.stderr[-3000:]}"
    if script == "gpu_answer.sh":  # its one folder: the comparison's files, nothing deeper
        answer = tmp_path / "answer"
        assert sorted(p.name for p in answer.iterdir()) == sorted(
            ["results.json", "report.md", "perplexity_against_compute.png", "row_seconds.tsv", "run.log",
             "gpu_answer.txt"])
        assert "status: finished" in (answer / "gpu_answer.txt").read_text()
        rows = (answer / "row_seconds.tsv").read_text().splitlines()
        assert rows[0].startswith("row\tkind\tseconds") and any(r.startswith("mlp1\tnetwork\t") for r in rows[1:])


def test_gpu_answer_leaves_its_files_behind_on_a_timeout(tmp_path):
    """Stopped by its TIMEOUT, the script still leaves the log, the rows finished so far and why it stopped."""
    tiny = tiny_files(tmp_path / "tiny")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LMBENCH_CACHE": str(tmp_path / "cache"),
           "PY": sys.executable, "DEVICE": "cpu", "QUICK": "1", "TIMEOUT": "1", "OUT": str(tmp_path / "answer"),
           "WORK": str(tmp_path / "work")}
    done = subprocess.run(["bash", str(BENCH / "gpu_answer.sh"), *tiny], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 124
    answer = tmp_path / "answer"
    assert {"run.log", "row_seconds.tsv", "gpu_answer.txt"} <= {p.name for p in answer.iterdir()}
    assert "status: timed out after 1 s" in (answer / "gpu_answer.txt").read_text()


def test_gpu_answer_leaves_its_files_behind_when_stopped_by_a_signal(tmp_path):
    """A TERM to the script (a machine's time running out) stops the comparison and still collects its files."""
    tiny = tiny_files(tmp_path / "tiny")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LMBENCH_CACHE": str(tmp_path / "cache"),
           "PY": sys.executable, "DEVICE": "cpu", "QUICK": "1", "OUT": str(tmp_path / "answer"),
           "WORK": str(tmp_path / "work")}
    script = subprocess.Popen(["bash", str(BENCH / "gpu_answer.sh"), *tiny], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "answer" / "run.log"
    deadline = time.monotonic() + 60
    while not (log.is_file() and log.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.2)  # the comparison has started
    script.send_signal(signal.SIGTERM)
    assert script.wait(timeout=60) == 143
    answer = tmp_path / "answer"
    assert {"run.log", "row_seconds.tsv", "gpu_answer.txt"} <= {p.name for p in answer.iterdir()}
    assert "status: stopped by a signal" in (answer / "gpu_answer.txt").read_text()

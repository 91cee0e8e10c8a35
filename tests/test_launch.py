"""`lmbench nplm train ... --nproc-per-node P`: torchrun started with the `--` that keeps torchrun from
reading lmbench's --n, --m, --h as its own options (neural/parallel/launch.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neural.parallel.launch import torchrun_command
from tests.helpers import corpus_args, run_cli, write_splits
from tests.test_nplm_parallel import TEXT

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def test_the_launch_options_go_before_the_separator():
    argv = ["-v", "nplm", "train", "--n", "4", "--nproc-per-node", "2", "--parallel", "data", "--nnodes=1"]
    assert torchrun_command(argv, 2) == [*TORCHRUN, "--nproc-per-node", "2", "--standalone", "-m", "lmbench_cli",
                                         "--", "-v", "nplm", "train", "--n", "4", "--parallel", "data"]
    two = torchrun_command(argv + ["--rdzv-endpoint", "host0:29500"], 8, 2, "host0:29500")
    assert two[3:12] == ["--nproc-per-node", "8", "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                         "host0:29500", "--rdzv-id"]
    assert two[13:] == ["-m", "lmbench_cli", "--", "-v", "nplm", "train", "--n", "4", "--parallel", "data"]
    # the rendezvous id follows the command, so every machine running it computes the same one
    assert torchrun_command(argv + ["--rdzv-endpoint=host0:29500"], 8, 2, "host0:29500") == two
    assert torchrun_command(argv + ["--m", "9"], 8, 2, "host0:29500")[12] != two[12]


@pytest.mark.parametrize("argv, message", [
    (["nplm", "train", "--nproc-per-node", "2"], "add --parallel data or --parallel vocab"),
    (["nplm", "train", "--nproc-per-node", "2", "--parallel", "data", "--nnodes", "2"], "needs --rdzv-endpoint"),
    (["nplm", "train", "--nproc-per-node", "0"], "--nproc-per-node: got 0"),
])
def test_bad_launches_are_one_line(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.slow
def test_nproc_per_node_trains_on_two_processes_and_one_process_evaluates(tmp_path, capsys):
    """The trap of the bare form: `--n 3` first, which torchrun would take for its own option. The launch
    runs the bare form itself (`torchrun ... -m lmbench_cli -- nplm train ...`, the command above), so
    this is the bare form's run too; its model then scores on one process as it did on two."""
    files = corpus_args(write_splits(tmp_path, train=TEXT, valid="the cat sat on the log .", test="a dog sat ."))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = tmp_path / "run"
    command = [sys.executable, "-m", "lmbench_cli", "nplm", "train", "--n", "3", "--m", "4", "--h", "5", *files,
               "--epochs", "1", "--objective", "softmax", "--device", "cpu", "--threads", "1",
               "--nproc-per-node", "2", "--parallel", "vocab", "--out", str(out), "--json"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    trained = json.loads(done.stdout)  # rank 0 alone prints its figures
    assert trained["epochs"] == 1 and 1 < trained["test_perplexity"]
    code, printed, _ = run_cli(capsys, "nplm", "eval", str(out), "--split", "test", *files, "--device", "cpu",
                               "--json")
    assert code == 0 and json.loads(printed)["perplexity"] == pytest.approx(trained["test_perplexity"], rel=1e-6)

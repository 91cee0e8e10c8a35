"""The tests keep out of the user's home: a run of every stage (corpus, n-gram, network, mixture,
reproduction and its report with figures) under a fake, empty HOME leaves it empty, because
tests/conftest.py points every folder that defaults under ~ at the session's temporary folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HOME_DEFAULTS
from tests.helpers import chain_text, corpus_args, run_cli, write_splits


pytestmark = pytest.mark.slow  # many runs of the command line, a pytest run
REPO = Path(__file__).resolve().parents[1]


def test_a_run_leaves_a_fake_home_untouched(tmp_path, monkeypatch, capsys, session_home):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable in HOME_DEFAULTS:
        assert os.environ[variable].startswith(str(session_home)), variable
    files = write_splits(tmp_path, train=chain_text(1500, 1, words=20), valid=chain_text(300, 2, words=20),
                         test=chain_text(300, 3, words=20))
    corpus = corpus_args(files)
    saved = {name: str(tmp_path / f"{name}.npz") for name in ("di", "nplm")}
    for argv in (["corpus", "text", *(word for word in corpus if word not in ("--corpus", "text"))],
                 ["ngram", "--method", "deleted-interpolation", *corpus, "--save-logprobs", saved["di"]],
                 ["nplm", "train", *corpus, "--n", "3", "--m", "4", "--h", "5", "--epochs", "1", "--device", "cpu",
                  "--threads", "1", "--out", str(tmp_path / "run")],
                 ["nplm", "eval", str(tmp_path / "run"), *corpus, "--save-logprobs", saved["nplm"]],
                 ["mix", saved["di"], saved["nplm"], "--method", "em"],
                 ["reproduce", "text", "--quick", "--only", "ngram", *corpus[2:], "--work-dir", str(tmp_path / "w"),
                  "--report-dir", str(tmp_path / "report")]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, (argv, err)
    assert (tmp_path / "report" / "figures").is_dir()
    assert sorted(home.rglob("*")) == []


GROUPED = '''
import pytest

from tests.conftest import pytest_collection_modifyitems  # the grouping under test


@pytest.fixture(scope="session")
def brown():
    return None
'''


def test_the_brown_tests_share_one_test_process(tmp_path):
    """Under `make test` (pytest-xdist, --dist loadgroup) every test on Brown runs in one process, which
    prepares Brown once; a pytest that drops the groups silently (pytest 9.2 with xdist 3.8) spreads them."""
    (tmp_path / "conftest.py").write_text(GROUPED)
    log = tmp_path / "workers"
    log.mkdir()
    for module in range(3):
        (tmp_path / f"test_m{module}.py").write_text("".join(
            f"def test_{kind}{i}({'brown' if kind == 'brown' else ''}):\n"
            f"    (__import__('pathlib').Path({str(log)!r}) / '{module}-{kind}{i}')"
            f".write_text(__import__('os').environ['PYTEST_XDIST_WORKER'])\n\n"
            for i in range(3) for kind in ("brown", "other")))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
               "-n", "2", "--dist", "loadgroup", str(tmp_path)]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = {path.name: path.read_text() for path in log.iterdir()}
    assert len(workers) == 18
    assert len({worker for name, worker in workers.items() if "brown" in name}) == 1, workers

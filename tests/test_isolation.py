"""The tests keep out of the user's home: a run of every stage (corpus, n-gram, network, mixture,
reproduction and its report with figures) under a fake, empty HOME leaves it empty, because
tests/conftest.py points every folder that defaults under ~ at the session's temporary folder."""

import os

import pytest

from tests.conftest import HOME_DEFAULTS
from tests.helpers import chain_text, corpus_args, run_cli, write_splits


pytestmark = pytest.mark.slow  # many runs of the command line


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

"""Honest progress: plain log lines when stderr is no terminal (no escape codes, no carriage returns),
a bar for the exact scoring, and the whole reproduction's estimate from each row's expected cost
(reports.running.estimate, calibrated on the committed results)."""

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from lmbench.progress import PlainProgress, progress_bar
from reports.running.estimate import CostModel, RunProgress, committed_results, cost_key
from tests.helpers import chain_text, write_splits

ROOT = Path(__file__).resolve().parents[1]


def progress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lmbench.progress"]


def assert_plain(lines: list[str]) -> None:
    assert lines and not any(c in line for line in lines for c in "\r\x1b\n")


def test_without_a_terminal_progress_is_a_plain_line_every_tenth(caplog):
    with caplog.at_level(logging.INFO):
        bar = progress_bar(range(50), desc="count", unit="it")
        assert isinstance(bar, PlainProgress)  # (pytest's stderr is no terminal)
        assert list(bar) == list(range(50))
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert [line.split(":")[1].split("%")[0].strip() for line in lines] == [str(p) for p in range(10, 101, 10)]
    assert lines[-1].startswith("count: 100% (50/50 it), ")


def test_the_exact_scoring_shows_its_progress(caplog):
    from neural.scoring import score_stream
    from neural.networks.nplm import NPLM
    from neural.networks.nplm import NPLMShape
    net = NPLM(NPLMShape(n=3, m=4, h=5, direct=True), 20)
    stream = np.random.default_rng(0).integers(0, 20, 1000)
    with caplog.at_level(logging.INFO):
        scores = score_stream(net, stream, 2, batch_size=100, progress=True)
    assert np.allclose(scores, score_stream(net, stream, 2, batch_size=100))
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert lines[-1].startswith("eval: 100% (10/10 batch)")


def test_a_stream_network_shows_its_scoring_progress(caplog):
    from neural.families import FAMILIES
    from neural.training.team import build_network
    torch.manual_seed(0)
    net = build_network(FAMILIES["lstm"], FAMILIES["lstm"].shape(m=4, h=4), 20)
    stream = np.random.default_rng(0).integers(0, 20, 3000)
    with caplog.at_level(logging.INFO):
        net.score_stream(stream, 100, progress=True)
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert lines[-1].startswith("eval lstm: 100%")


def results(rows: list[dict], tokens: dict) -> dict:
    return {"corpus_summary": {"tokens": tokens}, "rows": rows, "settings": {"quick": False}}


TOKENS = {"train": 1000, "valid": 100, "test": 100}


class Config:
    def __init__(self, epochs, schedule="halving", objective="importance"):
        self.epochs, self.schedule, self.objective = epochs, schedule, objective


def test_the_cost_model_is_the_committed_pace_times_the_work():
    network = {"kind": "network", "family": "nplm", "config": {"objective": "importance", "schedule": "halving"},
               "paper_model": "MLP1", "epochs": 10, "seconds": (10 * 1000 + 1200) * 1e-3}
    ngram = {"kind": "ngram", "method": "katz", "seconds": (2 * 1000 + 200) * 1e-5}
    model = CostModel([results([network, ngram], TOKENS)])
    assert model.pace["nplm:importance"] == pytest.approx(1e-3) and model.pace["ngram:katz"] == pytest.approx(1e-5)
    assert model.halving_epochs == 10
    row = {"kind": "network", "family": "nplm", "paper_model": "MLP1"}
    # the halving schedule: the committed runs' median epochs (at most the budget); a linear one runs its budget
    assert model.seconds(row, Config(40), TOKENS) == pytest.approx(1e-3 * (10 * 1000 + 1200))
    assert model.seconds(row, Config(4), TOKENS) == pytest.approx(1e-3 * (4 * 1000 + 1200))
    assert model.seconds(row, Config(40, "linear"), TOKENS) == pytest.approx(1e-3 * (40 * 1000 + 1200))
    # a kind of work no committed row has: its kind's pace, pooled
    assert model.seconds({"kind": "ngram", "method": "kneser-ney"}, None, TOKENS) == pytest.approx(2200 * 1e-5)
    assert model.seconds({"kind": "mix"}, None, TOKENS) is None
    assert cost_key({"kind": "network", "family": "lstm", "ours": True, "config": {}}) == "lstm:importance:ours"


def test_every_row_of_the_committed_tables_has_an_estimate():
    from corpora.corpus import SPLITS
    model = CostModel(committed_results())
    for result in committed_results():
        for row in result["rows"]:
            assert (row["kind"] != "mix" or "mix" in model.pace) and cost_key(row) in model.pace
    assert set(SPLITS) == set(committed_results()[0]["corpus_summary"]["tokens"])


def test_the_calibration_shipped_with_the_package_is_what_the_committed_results_make():
    """The estimate was calibrated on results/ found beside the source files: installed from a wheel, it had
    nothing to go by. reports/running/calibration.json, package data, holds what the cost model reads of the
    committed runs; it must be what `python -m reports.running.calibration` makes of results/ now."""
    from reports.running.calibration import SHIPPED, calibration_text
    assert SHIPPED.read_text(encoding="utf-8") == calibration_text(committed_results(ROOT / "results")), (
        "reports/running/calibration.json differs from the committed results: run python -m reports.running.calibration")
    assert committed_results() == committed_results(ROOT / "results")


def test_the_calibration_is_package_data():
    tomllib = pytest.importorskip("tomllib")
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "calibration.json" in package_data["reports.running"]


def test_the_run_bar_takes_cached_rows_off_its_total(caplog):
    with caplog.at_level(logging.INFO):
        progress = RunProgress({"a": 10.0, "b": 30.0, "c": 60.0}, "reproduce x")
        assert "about 2 min in all" in progress.summary(3)
        progress.passed("a")
        progress.running("b")
        progress.ran("b")
        progress.ran("c")
        progress.close()
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert progress.bar.total == 90.0 and lines[-1].startswith("reproduce x: 100%")
    unknown = RunProgress({"a": None, "b": 5.0}, "reproduce y")
    assert unknown.bar.total == 2 and "no committed results" in unknown.summary(2)


def test_the_run_bar_moves_while_rows_run_elsewhere_each_up_to_its_share_of_its_estimate(monkeypatch):
    """Rows run as Ray tasks (no bar of theirs here): each started row adds its seconds so far, at most 95% of
    its expected ones, until it has run; one run again counts from its new start. A clock of the test's own:
    a at 0 (100 s expected), b at 10 (50 s)."""
    from reports.running import estimate
    now = [0.0]
    monkeypatch.setattr(estimate.time, "monotonic", lambda: now[0])
    progress = RunProgress({"a": 100.0, "b": 50.0}, "reproduce x")
    progress.started("a")
    now[0] = 10.0
    progress.tick()
    assert progress.bar.n == pytest.approx(10.0)
    progress.started("b")
    now[0] = 70.0
    progress.tick()
    assert progress.bar.n == pytest.approx(70.0 + 47.5)  # b held at 95% of its 50 s
    progress.ran("b")
    assert progress.bar.n == pytest.approx(50.0 + 70.0)
    progress.started("a")  # (its task lost, run again)
    now[0] = 80.0
    progress.tick()
    assert progress.bar.n == pytest.approx(50.0 + 10.0)
    now[0] = 500.0
    progress.tick()
    assert progress.bar.n == pytest.approx(50.0 + 95.0)
    progress.ran("a")
    assert progress.bar.n == pytest.approx(progress.bar.total) == 150.0
    progress.close()


def test_a_reproduction_says_its_estimate_and_its_progress_in_plain_lines(tmp_path, monkeypatch, caplog):
    from reports.running import pipeline, settings
    from reports.experiments import Row
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=chain_text(3000, 1), valid=chain_text(400, 2), test=chain_text(400, 3))
    rows = [Row("kn-interp-3", "ngram", "Kneser-Ney interpolated", n=3, method="kneser-ney"),
            Row("katz-3", "ngram", "Katz back-off", n=3, method="katz"),
            Row("kn-katz", "mix", "KN + Katz", mix="EM", parts=("kn-interp-3", "katz-3"))]
    monkeypatch.setattr(pipeline.Reproduction, "table_rows", lambda self: rows)
    text = settings.TextCorpus(**files, name="plain")
    with caplog.at_level(logging.INFO):
        pipeline.Reproduction(pipeline.default_settings("text", False), tmp_path / "w", tmp_path / "r", text).run()
    said = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("reproduce text: 3 rows, about ") for line in said)
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert lines[-1].startswith("reproduce text: 100%")


def test_train_and_eval_show_the_exact_scoring(tmp_path, caplog, capsys):
    from tests.helpers import corpus_args, run_cli
    paths = write_splits(tmp_path, train=chain_text(3000, 1), valid=chain_text(400, 2), test=chain_text(400, 3))
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        code, _, err = run_cli(capsys, "nplm", "train", *corpus_args(paths), "--n", "3", "--m", "4", "--h", "5",
                               "--epochs", "1", "--device", "cpu", "--out", out)
        assert code == 0, err
        assert sum(line.startswith("eval: 100%") for line in progress_lines(caplog)) == 3  # train, valid, test
        caplog.clear()
        code, _, err = run_cli(capsys, "nplm", "eval", out, "--device", "cpu")
        assert code == 0, err
    lines = progress_lines(caplog)
    assert_plain(lines)
    assert [line.split(" (")[0] for line in lines if "100%" in line] == ["eval: 100%"]

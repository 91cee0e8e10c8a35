"""The whole run's estimate takes each network row's seconds from its pace measured on this machine at the
run's start (neural.training.trainer.measure_pace), not from the committed runs' (other machines, other work
beside them); the rows with no network keep the committed runs' cost model; the estimate said is the one
results.json records; the pace is the steady one, and the trainer's to measure."""

from __future__ import annotations

import copy
import logging

import pytest

from neural.training import trainer as trainers
from reports.running.estimate import (REPORT_SECONDS, CostModel, committed_results, duration, network_seconds_apart,
                              recipe_updates)

FAKE = trainers.Pace(update_seconds=0.5, update_tokens=128.0, epoch_updates=10, score_seconds=1e-4)


def small_reproduction(tmp_path, monkeypatch, epochs=40):
    """Brown's table made of KN 3 and two small networks on a small corpus, the recipes' own lengths."""
    from reports.running import pipeline
    from reports.experiments import Row
    from tests.test_faults import TINY_CORPUS
    rows = [Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
            Row("small", "network", "small NPLM", family="nplm", config=dict(n=3, h=8, m=4, direct=True, epochs=epochs)),
            Row("wide", "network", "wide NPLM", family="nplm", config=dict(n=3, h=32, m=16, direct=True, epochs=epochs))]
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: list(rows))
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: TINY_CORPUS)
    return pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work", tmp_path / "report",
                                 threads=1)


def prepared(reproduction):
    from reports.running.pipeline import corpus_digest
    reproduction.corpus = reproduction.load_corpus()
    reproduction.rows = reproduction.table_rows()
    reproduction.digest = corpus_digest(reproduction.corpus)
    return reproduction


def slower_committed(factor: float) -> list[dict]:
    """The committed results with every row's seconds times `factor` (runs on a machine that much slower)."""
    results = copy.deepcopy(committed_results())
    for result in results:
        for row in result["rows"]:
            if row.get("seconds"):
                row["seconds"] *= factor
    return results


def test_a_network_rows_estimate_is_its_measured_pace_and_the_committed_runs_pace_only_the_other_rows(
        tmp_path, monkeypatch):
    from reports.running import pipeline
    measured = []
    monkeypatch.setattr(trainers, "measure_pace",
                        lambda corpus, config, advice=None: measured.append(config.shape.h) or FAKE)
    reproduction = prepared(small_reproduction(tmp_path, monkeypatch))
    tokens = {split: len(reproduction.corpus.split(split)) for split in ("train", "valid", "test")}
    estimates = {}
    for factor in (1.0, 1000.0):
        monkeypatch.setattr(pipeline, "committed_results", lambda: slower_committed(factor))
        model = CostModel(slower_committed(factor))
        estimates[factor] = {row.id: reproduction.expected_seconds(row, model) for row in reproduction.rows}
    assert sorted(measured) == [8, 32]  # each network measured once a run, whatever asks for its pace
    for row in reproduction.rows:
        if row.family:  # the network's seconds: this machine's pace, whatever the committed runs took
            assert estimates[1.0][row.id] == estimates[1000.0][row.id]
            config = reproduction.training_config(row)
            updates = recipe_updates(config, FAKE.epoch_updates)
            assert estimates[1.0][row.id] == pytest.approx(
                updates * FAKE.update_seconds + network_seconds_apart(config, FAKE, updates, tokens, False))
        else:  # the n-gram row's: the committed runs' pace
            assert estimates[1000.0][row.id] == pytest.approx(1000 * estimates[1.0][row.id])


@pytest.mark.slow
def test_the_estimate_said_at_the_start_is_recorded_and_a_rerun_of_cached_rows_keeps_it(
        tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.INFO):
        results = small_reproduction(tmp_path, monkeypatch, epochs=2).run()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reproduce brown: 3 rows")]
    assert len(said) == 1 and said[0].startswith("reproduce brown: 3 rows, about ")
    assert "the networks at their pace measured here" in said[0]
    estimate = results["meta"]["trained"]["estimate"]
    assert set(estimate["rows"]) == {"kn3", "small", "wide"} and estimate["networks"] == "pace measured here"
    assert estimate["seconds"] >= sum(estimate["rows"].values()) + REPORT_SECONDS
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = small_reproduction(tmp_path, monkeypatch, epochs=2).run()  # every row cached
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reproduce brown: 3 rows")]
    assert said[0].startswith(f"reproduce brown: 3 rows (3 cached), about {duration(REPORT_SECONDS)} in all")  # (the report)
    assert not any("measuring" in r.getMessage() for r in caplog.records)  # nothing to train: nothing measured
    assert again["meta"]["rebuilt"] and again["meta"]["trained"]["estimate"] == estimate


def test_rows_the_run_leaves_out_are_not_in_its_estimate(tmp_path, monkeypatch):
    monkeypatch.setattr(trainers, "measure_pace", lambda corpus, config, advice=None: FAKE)
    reproduction = prepared(small_reproduction(tmp_path, monkeypatch))
    reproduction.left_out = {"wide"}  # (--networks small)
    progress = reproduction.progress(frozenset({"ngram"}))
    assert set(reproduction.estimate["rows"]) == {"small"}
    assert progress.bar.total == pytest.approx(reproduction.estimate["rows"]["small"], abs=0.05)  # (rounded)
    assert "3 rows (2 not run), about " in progress.summary(3)
    progress.close()


def test_rows_run_k_at_a_time_take_the_longest_first_to_the_lane_that_frees_soonest():
    from reports.running.estimate import wall_seconds
    assert wall_seconds([3, 5, 3, 4, 3], 1) == 18  # one after the other: their sum
    # by hand: 5 -> A, 4 -> B, 3 -> B (7), 3 -> A (8), 3 -> B (10)
    assert wall_seconds([3, 5, 3, 4, 3], 2) == 10
    assert wall_seconds([3, 5, 3, 4, 3], 8) == 5  # more lanes than rows: the longest row
    assert wall_seconds([], 2) == 0


def test_under_jobs_k_the_pace_is_timed_at_each_rows_threads_and_the_estimate_counts_k_rows_at_once(
        tmp_path, monkeypatch):
    from lmbench import threads
    timed = []
    monkeypatch.setattr(trainers, "measure_pace",
                        lambda corpus, config, advice=None: timed.append(config.threads) or FAKE)
    monkeypatch.setattr(threads, "cores", lambda: 2)
    # the seconds spent before the rows (the corpus's loading) on a clock of the test's own: the two runs'
    # estimates differ by their lanes alone, however slowly this machine loads the corpus
    from types import SimpleNamespace

    from reports.running import pipeline
    monkeypatch.setattr(pipeline, "time", SimpleNamespace(time=lambda: 1000.0, perf_counter=lambda: 1000.0))
    alone = prepared(small_reproduction(tmp_path, monkeypatch))
    alone.started = 993.0
    alone.progress(frozenset({"ngram"})).close()
    both = prepared(small_reproduction(tmp_path, monkeypatch))
    both.started = 993.0
    both.threads, both.jobs = None, 2  # (reproduce --jobs 2: each row a core of the two)
    progress = both.progress(frozenset({"ngram"}))
    assert timed == [1, 1, 1, 1]  # (--threads 1, then the two cores shared by two rows)
    rows = both.estimate["rows"]
    assert rows == alone.estimate["rows"] and both.estimate["rows_at_once"] == 2
    assert "rows_at_once" not in alone.estimate
    apart = 7.0 + REPORT_SECONDS  # the corpus's loading and the report
    assert alone.estimate["seconds"] == pytest.approx(sum(rows.values()) + apart, abs=0.05)  # one lane
    assert both.estimate["seconds"] == pytest.approx(max(rows.values()) + apart, abs=0.05)  # two rows, two lanes
    assert f"about {duration(max(rows.values()) + apart)} in all (2 rows at once; the networks" in progress.summary(3)
    progress.close()


@pytest.mark.parametrize("threads_asked, jobs, lanes", [(None, 2, 2), (None, 4, 2), (2, 2, 1), (1, 3, 2), (None, 1, 1)])
def test_rows_beyond_what_the_cores_hold_at_their_threads_are_not_counted_as_more_lanes(
        tmp_path, monkeypatch, threads_asked, jobs, lanes):
    """On 2 cores, --jobs 4 runs four rows at once at half their pace each: the estimate (and a budget) count
    two lanes at the pace timed alone, not four; --threads 2 --jobs 2 is one lane; --jobs 1 one."""
    from lmbench import threads
    monkeypatch.setattr(threads, "cores", lambda: 2)
    reproduction = small_reproduction(tmp_path, monkeypatch)
    reproduction.threads, reproduction.jobs = threads_asked, jobs
    assert reproduction.lanes() == lanes


def test_the_pace_is_the_steady_one_past_the_cold_first_updates_over_a_window_of_seconds(monkeypatch):
    # a network whose first two updates are cold (0.1 s) and whose steady updates alternate 2 and 6 ms: the
    # pace measured is 4 ms (a window of 4 updates after 1 gave 28 ms); a fake clock, nothing timed for real
    import numpy as np

    clock = [0.0]
    monkeypatch.setattr(trainers.time, "perf_counter", lambda: clock[0])

    class Network:
        history = 0

    class Batches:
        updates_per_epoch = 10_000

    class Trainer:
        def __init__(self, corpus, config, folder, team, resume, progress, advice=None):
            self.state, self.net, self.batches, self.done = type("State", (), {"position": 0})(), Network(), Batches(), 0

        def begin_epoch(self):
            return self.batches.updates_per_epoch

        def update(self):
            clock[0] += 0.1 if self.done < 2 else (0.002, 0.006)[self.done % 2]
            self.done += 1
            return None, 128

    class Team:
        def score_stream(self, net, stream, start, batch_size):
            clock[0] += 1e-5 * (len(stream) - start)

    class Corpus:
        vocab = range(10)

        def stream_for(self, split, history):
            return np.zeros(50_000, dtype=np.int64), 0

    monkeypatch.setattr(trainers, "Trainer", Trainer)
    monkeypatch.setattr(trainers, "join", lambda *args, **kwargs: Team())
    config = type("Config", (), {"device": "cpu", "threads": 1, "eval_batch": 64})()
    speed = trainers.measure_pace(Corpus(), config)
    assert speed.update_seconds == pytest.approx(0.004, rel=0.01)
    assert speed.update_tokens == 128 and speed.epoch_updates == 10_000
    assert speed.score_seconds == pytest.approx(1e-5)


def test_reports_times_a_network_through_the_trainers_measure_pace_not_by_driving_its_updates():
    """The pace is the trainer's to measure (neural.training.trainer.measure_pace): no module of reports/
    imports a Trainer (without which it makes no update), starts an epoch, moves a run's position or scores
    with a team."""
    import ast
    from pathlib import Path
    entry_points = {"train_network", "measure_pace", "Pace"}  # what reports/ may take of the trainer
    internals = {"begin_epoch", "score_stream"}
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neural.training.trainer"):
                found += [f"{path.name}: imports {a.name}" for a in node.names if a.name not in entry_points]
            elif isinstance(node, ast.Attribute) and node.attr in internals:
                found.append(f"{path.name}: .{node.attr}")
            elif (isinstance(node, ast.Attribute) and node.attr == "position"
                  and isinstance(node.value, ast.Attribute) and node.value.attr == "state"):
                found.append(f"{path.name}: .state.position")
    assert found == [], found

"""A compute budget of N training updates (`RunConfig.budget_updates`): the run stops at N, its last
epoch cut there and validated, its schedule's rate reaching its end at N; it is deterministic in N; a
schedule that cannot end with it is refused in one line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from lmbench.errors import LMBenchError
from neural.config import RunConfig
from neural.training.checkpoint import load_network
from neural.training.recipe import learning_rate
from neural.training.trainer import train_network
from tests.test_pinned_scores import corpus

RUNS = {"nplm": dict(model="nplm", objective="importance", n=3, m=6, h=5, samples=5, schedule="linear", batch_size=64),
        "lstm": dict(model="lstm", objective="softmax", layers=1, m=6, h=6, batch_size=4, warmup_steps=2)}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_budget_stops_at_its_last_update_with_the_schedule_at_its_end(name, tmp_path):
    data = corpus()
    budget = 11  # more than one epoch of either, and not a whole number of epochs
    config = RunConfig(**RUNS[name], budget_updates=budget, seed=1, device="cpu", threads=1)
    result = train_network(data, config, tmp_path, progress=False, evaluate=False)
    assert (result["updates"], result["stopped"]) == (budget, "budget")
    history = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert history[-1]["step"] == budget and len(history) == result["epochs"] >= 2  # the cut epoch validated
    final = config.peak_lr * (config.final_lr_fraction if config.schedule == "cosine" else 0.0)
    assert learning_rate(config, budget, 0.0, budget) == pytest.approx(final)  # the schedule ends at the budget
    assert learning_rate(config, budget - 1, 0.0, budget) > final


def test_the_same_budget_gives_the_same_network(tmp_path):
    data = corpus()
    config = RunConfig(**RUNS["lstm"], budget_updates=7, seed=2, device="cpu", threads=1)
    scores = []
    for run in ("a", "b"):
        train_network(data, config, tmp_path / run, progress=False, evaluate=False)
        scores.append(load_network(tmp_path / run, data, device="cpu").score(*data.stream_for("test")))
    assert np.array_equal(*scores)


def test_a_budget_under_the_halving_rule_is_refused():
    with pytest.raises(LMBenchError, match="--budget-updates needs a rate that decays.*--schedule linear"):
        RunConfig(model="nplm", budget_updates=100)


# -- a comparison's budget (reports.budget) -------------------------------------------------------------

def budgeted_reproduction(tmp_path, monkeypatch, budget=None, flops=None):
    """Brown's table made of two small networks and KN 3 on a small corpus, under a budget."""
    from reports import pipeline
    from reports.experiments import Row
    from tests.test_faults import TINY_CORPUS
    rows = [Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
            Row("small", "network", "small NPLM", family="nplm", config=dict(n=3, h=8, m=4, direct=True, epochs=40)),
            Row("wide", "network", "wide NPLM", family="nplm", config=dict(n=3, h=32, m=16, direct=True, epochs=40))]
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: list(rows))
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: TINY_CORPUS)
    return pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work", tmp_path / "report",
                                 threads=1, budget=budget, budget_flops=flops)


@pytest.mark.slow
def test_a_flops_budget_gives_every_network_row_the_same_flops_and_the_cache_key_follows_it(tmp_path, monkeypatch):
    from reports.budget import FILE
    from reports.pipeline import corpus_digest
    results = budgeted_reproduction(tmp_path / "a", monkeypatch, flops=5e7).run()
    budget, rows = results["budget"], {row["id"]: row for row in results["rows"]}
    for row_id in ("small", "wide"):
        planned = budget["rows"][row_id]
        assert rows[row_id]["updates"] == planned["updates"] >= 1 and rows[row_id]["stopped"] == "budget"
        assert planned["flops"] <= 5e7 < planned["flops"] + planned["flops_per_update"]  # as many as fit
        assert rows[row_id]["config"]["budget_updates"] == planned["updates"]
    assert budget["rows"]["small"]["updates"] > budget["rows"]["wide"]["updates"]  # cheaper updates: more of them
    assert (tmp_path / "a" / "work" / FILE).exists()
    other = budgeted_reproduction(tmp_path / "b", monkeypatch, flops=1e8)
    other.corpus, other.rows = other.load_corpus(), other.table_rows()
    other.digest = corpus_digest(other.corpus)
    other.budget = {"rows": {"small": {"updates": 2 * budget["rows"]["small"]["updates"]}}}
    small = next(row for row in other.rows if row.id == "small")
    assert other.fingerprint(small) != rows["small"]["fingerprint"]  # another budget: another cache entry
    other.budget = {"rows": {"small": {"updates": budget["rows"]["small"]["updates"]}}}
    assert other.fingerprint(small) == rows["small"]["fingerprint"]  # the same budget: the same one


def test_a_wall_budget_too_small_for_one_update_is_refused_naming_the_smallest(tmp_path, monkeypatch):
    from reports.budget import resolve
    reproduction = budgeted_reproduction(tmp_path, monkeypatch, budget="1s")
    reproduction.corpus, reproduction.rows = reproduction.load_corpus(), reproduction.table_rows()
    monkeypatch.setattr(type(reproduction), "seconds_without_networks", lambda self: 90.0)
    with pytest.raises(LMBenchError, match=r"--budget 1s leaves .* less than one update .* give at least \d+m"):
        resolve(reproduction, "1s", None)


@pytest.mark.parametrize("text, seconds", [("20m", 1200), ("2h", 7200), ("1h30m", 5400), ("90s", 90), ("none", None)])
def test_budget_values(text, seconds):
    from reports.budget import parse_budget
    assert parse_budget(text) == seconds


def test_a_bad_budget_value_is_one_line():
    from reports.budget import parse_budget
    with pytest.raises(LMBenchError, match="give a wall time such as 20m"):
        parse_budget("fast")


def test_a_learning_curve_in_flops_is_the_analytic_count_times_the_tokens_read():
    """The perplexity-against-compute figure's x: each epoch's tokens (tokens/s times seconds) summed, times
    the family's FLOPs per token (an NPLM n3 m2 h3 over 10 words, softmax: 492 a token, a hand count)."""
    from neural.config import RunConfig
    from reports.figures import curve_flops
    config = RunConfig(model="nplm", n=3, m=2, h=3, objective="softmax")
    assert config.shape.training_flops(10, config) == 492
    row = {"config": dataclasses.asdict(config), "curve": [{"tokens_per_s": 100.0, "seconds": 2.0},
                                                           {"tokens_per_s": 50.0, "seconds": 2.0}]}
    assert curve_flops(row, 10).tolist() == [492 * 200.0, 492 * 300.0]


def test_the_rows_share_a_wall_budget_by_their_weights_at_most_once_each_recipe():
    """updates_r = floor(x w_r), x filling the seconds left after the rest: the flops rule's weights are
    1 / FLOPs per update (x: the FLOPs of each row), the recipe rule's each recipe's updates (x: the share
    of it, at most all of it); the validation an epoch costs comes off before x is fixed."""
    from reports.budget import allocate
    x, updates = allocate({"a": 10.0, "b": 20.0}, {"a": 1.0, "b": 0.5}, 100.0, 20.0, lambda r, u: 0.0)
    assert (x, updates) == (4.0, {"a": 40, "b": 80})  # 40 s and 40 s: the 80 left
    x, updates = allocate({"a": 10.0, "b": 20.0}, {"a": 1.0, "b": 0.5}, 100.0, 20.0, lambda r, u: 0.0, most=1.0)
    assert (x, updates) == (1.0, {"a": 10, "b": 20})  # never more than the whole recipe
    x, updates = allocate({"a": 10.0}, {"a": 1.0}, 100.0, 20.0, lambda r, u: u / 10)  # 0.1 s of validation an update
    assert updates["a"] == 72  # x = (80 - 8.0) / 10 once the first guess's validation is counted

"""A compute budget of N training updates (`RunConfig.budget_updates`): the run stops at N, its last
epoch cut there and validated, its schedule's rate reaching its end at N; it is deterministic in N; a
schedule that cannot end with it is refused in one line."""

from __future__ import annotations

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

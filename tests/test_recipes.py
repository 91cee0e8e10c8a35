"""The recipes each comparison gives its window networks (issue 66): a user's corpus trains the paper's shapes
with the sgd recipe's time-to-quality settings (neural.config.TIME_TO_QUALITY: 512 windows an update at rate 4,
falling linearly to 0 over a known number of epochs), the paper's tables keep the halving rule their committed
figures were made with, and NPLM (ours) keeps its own epochs. The rates are checked against values worked out
by hand from a run's own log. Only the rows whose recipe changed have new configurations (so new cache keys)."""

from __future__ import annotations

import json

import pytest

from reports.running import pipeline, settings
from reports.experiments import TABLE1_NETWORKS, network, ours_rows
from tests.helpers import chain_text, write_splits


def reproduction(tmp_path, corpus: str) -> pipeline.Reproduction:
    text = None
    if corpus == "text":
        files = write_splits(tmp_path, train=chain_text(3000, 1), valid=chain_text(400, 2), test=chain_text(400, 3))
        text = settings.TextCorpus(**files, name="plain")
    return pipeline.Reproduction(pipeline.default_settings(corpus, False), tmp_path / "work", tmp_path / "report", text)


def mlp1():
    return network("mlp1", "MLP1", TABLE1_NETWORKS["MLP1"], paper_model="MLP1")


def test_a_users_corpus_trains_the_paper_shapes_at_512_windows_rate_4_linear_over_16_epochs(tmp_path):
    config = reproduction(tmp_path, "text").training_config(mlp1())
    assert (config.recipe, config.batch_size, config.lr, config.schedule, config.epochs, config.valid_tokens) == (
        "sgd", 512, 4.0, "linear", 16, 50_000)
    shape = config.shape
    assert (shape.n, shape.h, shape.m, shape.direct) == (5, 50, 60, True)  # the paper's shape itself is untouched


@pytest.mark.parametrize("corpus, epochs, decay", [("brown", 40, 1e-4), ("ap", 8, 1e-5)])
def test_the_paper_tables_keep_the_halving_rule_at_128_windows_and_rate_1(tmp_path, corpus, epochs, decay):
    config = reproduction(tmp_path, corpus).training_config(mlp1())
    assert (config.schedule, config.batch_size, config.peak_lr, config.epochs, config.weight_decay,
            config.valid_tokens) == ("halving", None, 1.0, epochs, decay, None)
    assert config.recipe_entry.batch == 128


def test_nplm_ours_and_the_stream_families_keep_their_recipes_on_a_users_corpus(tmp_path):
    from reports.experiments import rows_beyond_2003
    repro = reproduction(tmp_path, "text")

    class Train:  # ours_rows reads the training split's length alone: 3000 tokens, so ours runs its 6 epochs
        train = range(3000)
    config = repro.training_config(ours_rows(Train)[0])
    assert (config.schedule, config.epochs, config.valid_tokens, config.dropout) == ("linear", 6, 50_000, 0.3)
    assert (config.batch_size, config.peak_lr, config.recipe_entry.batch) == (None, 1.0, 128)
    transformer = repro.training_config(rows_beyond_2003(("transformer",))[0])
    assert (transformer.recipe, transformer.schedule, transformer.batch_size, transformer.lr, transformer.epochs,
            transformer.dropout) == ("adamw", "cosine", 32, 2e-3, 6, 0.2)


@pytest.mark.parametrize("family", ("lstm", "gru"))
def test_the_lstm_and_gru_train_half_the_epochs_at_three_times_the_rate_with_less_dropout(tmp_path, family):
    """Their time-to-quality recipe (issue 66): 3 epochs of the cosine schedule at 6e-3 and dropout 0.3, where
    the stream recipe (the Transformer's, the RNN's) runs 6 at 2e-3 and dropout 0.4 (0.2 the Transformer's)."""
    from neural.config import RunConfig
    from reports.experiments import rows_beyond_2003
    config = reproduction(tmp_path, "text").training_config(rows_beyond_2003((family,))[0])
    assert (config.recipe, config.schedule, config.batch_size, config.lr, config.epochs, config.dropout,
            config.warmup_steps, config.final_lr_fraction) == ("adamw", "cosine", 32, 6e-3, 3, 0.3, 100, 0.05)
    assert (RunConfig(model=family).epochs, RunConfig(model="rnn").epochs, RunConfig(model="rnn").lr) == (3, 6, 2e-3)


@pytest.mark.slow
def test_the_recurrent_rates_are_the_hand_computed_ones_at_every_epochs_end(tmp_path):
    """11,200 training tokens are 10 updates of 32 lanes x 35 steps an epoch, 30 in the LSTM's 3 epochs; with 5
    warm-up updates the rate after update t > 5 is 6e-3 (0.05 + 0.95 (1 + cos(pi (t - 5) / 25)) / 2): after
    epochs 1, 2, 3 (t = 10, 20, 30) 6e-3 (0.05 + 0.475 (1 + cos(0.2 pi))) = 5.45570e-3,
    6e-3 (0.05 + 0.475 (1 + cos(0.6 pi))) = 2.26930e-3, and 6e-3 x 0.05 = 3e-4."""
    from dataclasses import replace

    from corpora.text import load_text
    from neural.networks.lstm import LSTMShape
    from neural.training.trainer import train_network
    from reports.experiments import rows_beyond_2003
    files = write_splits(tmp_path, train=chain_text(11_200, 1), valid=chain_text(600, 2), test=chain_text(600, 3))
    corpus = load_text(files["train"], files["valid"], files["test"])
    assert len(corpus.train) == 11_200
    config = replace(reproduction(tmp_path, "text").training_config(rows_beyond_2003(("lstm",))[0]),
                     shape=LSTMShape(layers=1, m=8, h=8), samples=20, warmup_steps=5, valid_tokens=None,
                     device="cpu", threads=1, precision="fp32")
    train_network(corpus, config, tmp_path / "run", progress=False, evaluate=False)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in log] == [10, 20, 30]
    assert [entry["lr"] for entry in log] == pytest.approx([5.455699e-3, 2.269303e-3, 3e-4], rel=1e-6)


def test_a_quick_run_keeps_its_own_small_recipe(tmp_path):
    text = reproduction(tmp_path, "text")
    text.settings = pipeline.default_settings("text", True)
    config = text.training_config(mlp1())
    assert (config.batch_size, config.epochs, config.schedule) == (128, 1, "halving")


@pytest.mark.slow
def test_the_time_to_quality_rates_are_the_hand_computed_ones_at_every_epochs_end(tmp_path):
    """10,240 training tokens are 20 updates of 512 windows an epoch, 320 in 16 epochs; the rate of update t is
    4 (1 - t / 320), and an epoch's log line gives the rate after its last update: 4 (1 - 20 e / 320)."""
    from dataclasses import replace

    from corpora.text import load_text
    from neural.training.trainer import train_network
    files = write_splits(tmp_path, train=chain_text(10_240, 1), valid=chain_text(600, 2), test=chain_text(600, 3))
    corpus = load_text(files["train"], files["valid"], files["test"])
    assert len(corpus.train) == 10_240
    row = network("tiny", "a small paper-shape network", (3, 8, 6, True), samples=20)
    config = replace(reproduction(tmp_path, "text").training_config(row), valid_tokens=None, device="cpu", threads=1,
                     precision="fp32")
    train_network(corpus, config, tmp_path / "run", progress=False, evaluate=False)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in log] == [20 * e for e in range(1, 17)]
    hand = [3.75, 3.5, 3.25, 3.0, 2.75, 2.5, 2.25, 2.0, 1.75, 1.5, 1.25, 1.0, 0.75, 0.5, 0.25, 0.0]
    assert [entry["lr"] for entry in log] == pytest.approx(hand, abs=1e-12)

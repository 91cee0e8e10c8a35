"""Files written by the two trainers before the one format (FORMAT 1, made at e38826e by
`neural.training.train.train_nplm` on the pinned-score corpus, tests/data/format1/): a best model still
loads and scores as the same run trained now, and a checkpoint taken after 3 updates resumes to the
same network as one run trained now without a stop: to float32 training's round-off (relative 1e-5), not
bit for bit, since the saved files came from another machine, whose vector units round differently (the
exact resume within one machine is tests/test_nplm_train.py's). The runs: epochs=2, seed=3, one
thread; the window network's checkpoint keeps its shape inside its config, the stream networks' name
their lanes `lanes` and were saved under the recipe their trainer never read ("sgd"). They are torch
pickles, read by torch's weights_only reader and converted to this format beside themselves as they load
(tests/test_model_files.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from neural.config import RunConfig
from neural.training.checkpoint import BEST, CHECKPOINT, FORMAT, load_network, read_checkpoint
from neural.training.trainer import train_network
from tests.test_pinned_scores import corpus

SAVED = Path(__file__).with_name("data") / "format1"
RUNS = {"nplm": dict(model="nplm", objective="softmax", n=3, m=6, h=5),
        "lstm": dict(model="lstm", objective="softmax", layers=1, m=6, h=6, batch_size=4,
                     lr=2e-3, dropout=0.4),  # (the stream recipe's then: the LSTM's default since is HALF_THE_EPOCHS)
        "transformer": dict(model="transformer", objective="nce", layers=1, d=8, heads=2, ff=12, length=8, samples=5,
                            batch_size=4)}


def test_saved_files_are_of_the_older_format():
    """(So that the tests below read what they claim to; torch's weights_only reader, numpy's random
    state allowed, as `neural.training.checkpoint` reads them.)"""
    import torch
    from neural.training.checkpoint import NUMPY_DATA
    for name in RUNS:
        for file in ("best.pt", "checkpoint.pt"):
            with torch.serialization.safe_globals(NUMPY_DATA):
                assert "format" not in torch.load(SAVED / name / file, weights_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_an_older_best_model_loads_and_an_older_checkpoint_resumes_to_the_same_network(name, tmp_path):
    data = corpus()
    config = RunConfig(**RUNS[name], epochs=2, seed=3, device="cpu", threads=1, precision="fp32")  # (as they were saved)
    train_network(data, config, tmp_path / "now", progress=False, evaluate=False)
    now = load_network(tmp_path / "now", data, device="cpu").score(*data.stream_for("test"))
    shutil.copytree(SAVED / name, tmp_path / "old")
    best = load_network(tmp_path / "old", data, device="cpu").score(*data.stream_for("test"))
    np.testing.assert_allclose(best, now, rtol=1e-5)
    for file in ("best.pt", BEST):  # (the one converted as it loaded) the checkpoint's run makes its own
        (tmp_path / "old" / file).unlink()
    assert read_checkpoint(tmp_path / "old" / CHECKPOINT, data.vocab.fingerprint(), config)["format"] == FORMAT
    train_network(data, config, tmp_path / "old", resume=True, progress=False, evaluate=False)
    resumed = load_network(tmp_path / "old", data, device="cpu").score(*data.stream_for("test"))
    np.testing.assert_allclose(resumed, now, rtol=1e-5)

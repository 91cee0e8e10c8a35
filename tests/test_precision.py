"""The precision a network trains in (neural.precision): bf16 products with fp32 weights and optimizer state;
`auto` resolves, when the configuration is made, to bf16 only where the device computes it natively and the
family gains from it, else fp32; the resolved precision is in the run's configuration, so in its record, its
checkpoint and a comparison row's cache key; a bf16 run resumes to the uninterrupted run's figures; its exact
scoring is fp32."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from neural import precision as precisions
from neural.config import RunConfig
from neural.families import FAMILIES
from neural.training.checkpoint import load_network
from neural.training.trainer import train_network
from tests.test_nplm_train import CORPUS, tiny



def small(model: str, **overrides) -> RunConfig:
    """A few quick epochs of a small network of `model` (nplm or lstm)."""
    if model == "nplm":
        return tiny(**overrides)
    return RunConfig(**{"model": "lstm", "layers": 1, "m": 6, "h": 6, "epochs": 3, "batch_size": 4, "warmup_steps": 2,
                        "threads": 1, "device": "cpu", **overrides})


@pytest.mark.parametrize("native", [False, True])
def test_auto_is_bf16_only_where_it_is_native_and_the_family_gains(monkeypatch, native):
    monkeypatch.setattr(precisions, "native_bf16", lambda device: native)  # the hardware forced either way
    for name, entry in FAMILIES.items():
        expected = "bf16" if native and entry.mixed_precision else "fp32"
        assert RunConfig(model=name, precision="auto").precision == expected, name
    assert any(entry.mixed_precision for entry in FAMILIES.values())  # some family gains where it is native
    assert not FAMILIES["energy"].mixed_precision  # (elementwise scores: nothing for autocast to speed)
    assert RunConfig(model="lstm", precision="fp32").precision == "fp32"  # asked: kept, whatever the hardware


def test_the_precision_is_checked_and_a_run_saved_before_it_reads_back_as_it_trained():
    from lmbench.errors import LMBenchError
    with pytest.raises(LMBenchError, match="--precision fp16: give one of fp32, bf16, auto"):
        RunConfig(model="lstm", precision="fp16")
    saved = dataclasses.asdict(RunConfig(model="lstm"))
    del saved["precision"]
    assert RunConfig.from_saved({**saved, "bf16": True}).precision == "bf16"  # the former --bf16
    assert RunConfig.from_saved(saved).precision == "fp32"


@pytest.mark.parametrize("model", ["nplm", "lstm"])
def test_a_bf16_run_keeps_fp32_weights_resumes_exactly_and_differs_from_fp32_only_a_little(tmp_path, model):
    config = small(model, precision="bf16", epochs=2)
    whole = train_network(CORPUS, config, tmp_path / "whole", progress=False)
    assert whole["config"]["precision"] == "bf16"
    steps = math.ceil(whole["updates"] / 2) + 1  # paused inside the second epoch
    paused = train_network(CORPUS, dataclasses.replace(config, max_steps=steps), tmp_path / "split", progress=False)
    assert paused["stopped"] == "max_steps"
    resumed = train_network(CORPUS, config, tmp_path / "split", resume=True, progress=False)
    assert resumed["updates"] == whole["updates"]
    for split in ("valid", "test"):
        assert resumed[f"{split}_perplexity"] == pytest.approx(whole[f"{split}_perplexity"], rel=1e-6)
    net = load_network(tmp_path / "whole", CORPUS, device="cpu").net
    assert {p.dtype for p in net.parameters()} == {torch.float32}  # the weights stay fp32
    fp32 = train_network(CORPUS, dataclasses.replace(config, precision="fp32"), tmp_path / "fp32", progress=False)
    assert fp32["test_perplexity"] != whole["test_perplexity"]  # bf16 products did run ...
    assert fp32["test_perplexity"] == pytest.approx(whole["test_perplexity"], rel=0.05)  # ... and changed little


def test_the_exact_scoring_of_a_bf16_run_is_fp32(tmp_path):
    """The figures of a bf16-trained network are its weights' fp32 log-probabilities: the scores saved by
    the run equal a plain fp32 scoring of its best model."""
    result = train_network(CORPUS, small("lstm", precision="bf16", epochs=1), tmp_path, progress=False)
    model = load_network(tmp_path, CORPUS, device="cpu")
    saved = np.load(tmp_path / "logprobs.npz")
    assert np.array_equal(saved["test"], model.score(*CORPUS.stream_for("test")))
    assert result["test_perplexity"] == pytest.approx(math.exp(-float(np.mean(saved["test"]))), rel=1e-9)


def test_a_comparison_records_the_precision_in_each_network_row_and_its_cache_key(tmp_path, monkeypatch):
    from tests.test_pace import prepared, small_reproduction
    keys = {}
    for name in ("fp32", "bf16"):
        reproduction = prepared(small_reproduction(tmp_path / name, monkeypatch))
        reproduction.precision = name
        row = next(row for row in reproduction.rows if row.family)
        assert reproduction.training_config(row).precision == name
        keys[name] = {r.id: reproduction.fingerprint(r) for r in reproduction.rows}
    assert keys["fp32"]["small"] != keys["bf16"]["small"]  # another precision: another cache entry
    assert keys["fp32"]["kn3"] == keys["bf16"]["kn3"]  # a row with no network: the same


def test_train_says_and_records_its_precision(tmp_path, capsys):
    from lmbench_cli import main
    from tests.helpers import corpus_args, write_splits
    files = write_splits(tmp_path, train="a b c d a b c d a b " * 30, valid="a b c d " * 5, test="a c b d " * 5)
    out = tmp_path / "run"
    assert main(["train", *corpus_args(files), "--model", "lstm", "--m", "4", "--h", "4", "--layers", "1",
                 "--epochs", "1", "--threads", "1", "--precision", "bf16", "--out", str(out), "--json"]) == 0
    assert json.loads((out / "result.json").read_text())["config"]["precision"] == "bf16"


@pytest.mark.parametrize("model", ["lstm", "gru", "transformer"])
def test_bf16_asked_where_the_cpu_computes_none_natively_trains_and_scores(tmp_path, monkeypatch, model):
    # --precision bf16 on a CPU without AVX512_BF16 or AMX: oneDNN creates no bf16 LSTM primitive there (a
    # RuntimeError on such a machine); it trains with bfloat16 emulated, and oneDNN is back on afterwards
    monkeypatch.setattr(precisions, "native_bf16", lambda device: False)
    shape = dict(layers=1, d=8, heads=2, ff=16, length=8) if model == "transformer" else dict(layers=1, m=6, h=6)
    config = RunConfig(model=model, **shape, precision="bf16", epochs=1, batch_size=4, warmup_steps=2, threads=1,
                       device="cpu")
    result = train_network(CORPUS, config, tmp_path / model, progress=False)
    assert result["config"]["precision"] == "bf16" and math.isfinite(result["test_perplexity"])
    assert torch.backends.mkldnn.enabled
    with precisions.bf16_products("cpu"):  # (inside: torch's own kernels, autocast on)
        assert not torch.backends.mkldnn.enabled and torch.is_autocast_enabled('cpu')
    assert torch.backends.mkldnn.enabled and not torch.is_autocast_enabled('cpu')

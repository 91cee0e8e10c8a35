"""Seeded runs of every family and objective score the test split as they did when these figures were
pinned (tests/data/pinned_scores.json, written by `python -m tests.test_pinned_scores` at commit
2eb1c68, before the trainers and families were reorganised; the GRU, added after, at its own later
commit): a refactoring that moves code must not move a number. Every registered family has a case: the
hand-made ones below, and for a family none of them names, the softmax run of its tiny shape (`TINY`),
pinned once by `python -m tests.test_pinned_scores --add` at the commit that adds the family. Each case
trains a tiny network for two epochs on the tests' corpus through the one entry
point (`neural.training.trainer.train_network`), then scores test through the one loader (`neural.training.checkpoint.load_network`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.lm_checks import make_corpus

PINNED = Path(__file__).with_name("data") / "pinned_scores.json"
TOKENS = 8  # the first test tokens pinned per case
# the stream recipe's rate and dropout when the LSTM and GRU cases were pinned (their defaults since: HALF_THE_EPOCHS)
STREAM_RECIPE = dict(lr=2e-3, dropout=0.4)
HAND_CASES = {  # case: the options of RunConfig
    "nplm-softmax": dict(model="nplm", objective="softmax", n=3, m=6, h=5),
    "nplm-importance": dict(model="nplm", objective="importance", n=3, m=6, h=5, samples=5),
    "nplm-nce": dict(model="nplm", objective="nce", n=3, m=6, h=5, samples=5),
    "nplm-class": dict(model="nplm", objective="class", n=3, m=6, h=5, classes=3),
    "nplm-tree": dict(model="nplm", objective="tree", n=3, m=6, h=5),
    "nplm-paper": dict(model="nplm", objective="softmax", recipe="paper", n=3, m=6, h=0, direct=True),
    "energy-nce": dict(model="energy", objective="nce", n=3, m=6, h=5, samples=5),
    "lstm-softmax": dict(model="lstm", objective="softmax", layers=1, m=6, h=6, batch_size=4, **STREAM_RECIPE),
    "lstm-importance": dict(model="lstm", objective="importance", layers=2, m=6, h=6, samples=5, batch_size=4,
                            **{**STREAM_RECIPE, "dropout": 0.1}),
    "transformer-nce": dict(model="transformer", objective="nce", layers=1, d=8, heads=2, ff=12, length=8,
                            samples=5, batch_size=4),
    "gru-nce": dict(model="gru", objective="nce", layers=2, m=6, h=6, samples=5, batch_size=4,  # pinned at 4b90fb4
                    **STREAM_RECIPE),
}
TINY = {"n": 3, "m": 6, "h": 6, "layers": 1, "d": 8, "heads": 2, "ff": 12, "length": 8}  # a new family's fields of these


def family_case(name: str) -> dict:
    """The case of a family no hand-made case names: the full softmax over its shape's fields in TINY (its
    defaults for the rest), 4 lanes for a stream network."""
    from neural.families import FAMILIES
    entry = FAMILIES[name]
    lanes = {"batch_size": 4} if entry.context == "stream" else {}
    return dict(model=name, objective="softmax", **{k: v for k, v in TINY.items() if k in entry.shape_fields()}, **lanes)


def all_cases() -> dict[str, dict]:
    from neural.families import FAMILIES
    named = {case["model"] for case in HAND_CASES.values()}
    return {**HAND_CASES, **{f"{name}-softmax": family_case(name) for name in FAMILIES if name not in named}}


CASES = all_cases()


def corpus():
    rng = np.random.default_rng(7)
    sentences = ["the cat sat on a mat .", "a dog ran to the cat .", "the dog sat .", "a cat ran ."]

    def text(count):
        return " ".join(sentences[i] for i in rng.integers(0, len(sentences), size=count))

    return make_corpus(text(60), text(10), text(10))


def scores(case: str, out: Path) -> list[float]:
    from neural.config import RunConfig
    from neural.training.checkpoint import load_network
    from neural.training.trainer import train_network

    data = corpus()
    config = RunConfig(**CASES[case], epochs=2, seed=3, device="cpu", threads=1, precision="fp32")  # (pinned in fp32)
    train_network(data, config, out, progress=False, evaluate=False)
    model = load_network(out, data, device="cpu")
    return [float(x) for x in model.score(*data.stream_for("test"))[:TOKENS]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_seeded_run_scores_as_pinned(case, tmp_path):
    pinned = json.loads(PINNED.read_text())
    assert case in pinned, (f"no pinned score for {case}: pin it once, at the commit that adds its family, with "
                            "`python -m tests.test_pinned_scores --add`")
    np.testing.assert_allclose(scores(case, tmp_path / case), pinned[case], rtol=1e-6, atol=1e-9)


if __name__ == "__main__":  # --add: pin the cases not yet pinned; no option: re-pin every case (a change of numbers)
    import tempfile
    adding = "--add" in sys.argv[1:]
    figures = json.loads(PINNED.read_text()) if adding else {}
    with tempfile.TemporaryDirectory() as folder:
        figures.update({case: scores(case, Path(folder) / case) for case in sorted(CASES) if case not in figures})
    PINNED.write_text(json.dumps(dict(sorted(figures.items())), indent=1) + "\n")
    print(json.dumps(figures, indent=1), file=sys.stderr)

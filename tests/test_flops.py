"""Each family's analytic count of training FLOPs (`NetworkShape.training_flops`, in the family's file)
against torch's count of one update's forward and backward passes (`neural.training.measured_flops`), for
every registered family and every objective its output layer takes, in shapes where the products
dominate (|V| about 2,000, h = 64): within 5%. And the count of a tiny shape against a hand count."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from neural.config import OBJECTIVES, RunConfig
from neural.families import FAMILIES, NetworkShape
from neural.training.measured_flops import factored_rows, measured_training_flops
from neural.training.team import Team
from neural.training.trainer import Trainer
from tests.helpers import zipf_text
from tests.lm_checks import make_corpus

# the shape fields a family has among these (the rest: its defaults); tied tables need m = h
FIELDS = {"n": 4, "bag": 3, "m": 64, "h": 64, "layers": 2, "d": 64, "heads": 2, "ff": 256, "length": 32}
RUN = {"window": dict(samples=100), "stream": dict(samples=100, batch_size=8, dropout=0.0)}


def objectives(entry) -> list[str]:
    """The objectives whose output layer the family's networks have."""
    outputs = entry.shape.outputs
    return [name for name, objective in OBJECTIVES.items() if outputs is None or objective.output in outputs]


CASES = [(name, objective) for name, entry in FAMILIES.items() for objective in objectives(entry)]


@pytest.fixture(scope="module")
def corpus():
    """About 2,000 word types of a Zipf law."""
    return make_corpus(zipf_text(30_000, 2000, 1), zipf_text(1000, 2000, 2), zipf_text(1000, 2000, 3))


def first_update(corpus, config: RunConfig, out: Path) -> Trainer:
    torch.set_num_threads(1)
    trainer = Trainer(corpus, config, out, Team(device=torch.device("cpu")), resume=False, progress=False)
    trainer.begin_epoch()
    return trainer


@pytest.mark.parametrize("family,objective", CASES)
def test_the_analytic_count_is_within_5_percent_of_the_measured_one(corpus, family, objective, tmp_path):
    entry = FAMILIES[family]
    fields = {k: v for k, v in FIELDS.items() if k in entry.shape_fields()}
    config = RunConfig(model=family, objective=objective, device="cpu", threads=1, **fields, **RUN[entry.context])
    trainer = first_update(corpus, config, tmp_path)
    if objective == "class":  # the classes frequency binning kept
        config = dataclasses.replace(config, classes=trainer.net.num_classes)
    analytic = config.shape.training_flops(len(corpus.vocab), config, factored_rows(trainer))
    measured, by_op = measured_training_flops(trainer)
    assert analytic == pytest.approx(measured, rel=0.05), f"{family} {objective}: {analytic:,.0f} FLOPs a token " \
        f"counted, {measured:,.0f} measured ({by_op})"


def test_the_count_of_a_tiny_shape_is_the_hand_count():
    """NPLM n = 3, m = 2, h = 3 over 10 words: x has (n-1)m = 4 numbers, z = [tanh(d + Hx), x] has
    K = 3 + 4 = 7. Forward, per token: H x, 3 x 4 multiply-adds; y = b + [U, W] z, 10 x 7; that is 12 + 70
    = 82 multiply-adds, 164 FLOPs, and twice that backward: 492. With 5 sampled words instead of the
    softmax: 5 x 7 multiply-adds for the samples (x 3 with the backward pass: 210), the target's own
    score 7 multiply-adds (2 x 7 FLOPs) and the two multiplies of its gradient (2 x 7): 72 + 210 + 28 = 310.
    The Transformer of 1 block, d = 8, ff = 12, windows of 8 over 10 words, per token: q, k, v and the
    projection 4 x 64 = 256 multiply-adds, the MLP 2 x 8 x 12 = 192, attention 2 x 8 x 8 = 128 (scores
    and the sum of values over the 8 positions of a window), the output 10 x 8 = 80: 656, so 3 x 2 x 656
    = 3936 FLOPs."""
    nplm = FAMILIES["nplm"].shape(n=3, m=2, h=3)
    assert nplm.training_flops(10, RunConfig(model="nplm", shape=nplm, objective="softmax")) == 492
    assert nplm.training_flops(10, RunConfig(model="nplm", shape=nplm, objective="importance", samples=5)) == 310
    transformer = FAMILIES["transformer"].shape(layers=1, d=8, heads=2, ff=12, length=8)
    assert transformer.training_flops(10, RunConfig(model="transformer", shape=transformer, objective="softmax")) == 3936


def test_a_shape_without_a_count_names_what_to_add():
    @dataclasses.dataclass(frozen=True)
    class NewShape(NetworkShape):
        pass

    with pytest.raises(NotImplementedError, match="NewShape must define training_flops"):
        NewShape().training_flops(10, RunConfig(model="nplm"))

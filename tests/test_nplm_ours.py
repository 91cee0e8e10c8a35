"""NPLM (ours): its shape and regularisation come from the training split alone."""

import numpy as np
import pytest

from neural.networks.nplm import NPLMShape
from neural.ours import ours_options


class TrainOnly:
    """A corpus whose valid and test splits raise when read: the rule may look at train only."""

    def __init__(self, train_tokens: int, vocab_size: int):
        self.train = np.zeros(train_tokens, dtype=np.int32)
        self.vocab = list(range(vocab_size))

    @property
    def valid(self):
        raise AssertionError("the rule read the validation split")

    @property
    def test(self):
        raise AssertionError("the rule read the test split")

    def split(self, name):
        return getattr(self, name)


@pytest.mark.parametrize("train_tokens, dropout, epochs", [
    (800_000, 0.3, 6), (1_000_000, 0.3, 6), (2_000_000, 0.3, 6), (4_000_000, 0.21, 6), (10_000_000, 0.13, 4),
    (14_000_000, 0.11, 3), (25_000_000, 0.08, 2), (100_000_000, 0.04, 1)])
def test_the_documented_shape_for_each_corpus_size(train_tokens, dropout, epochs):
    options = ours_options(TrainOnly(train_tokens, 10_000))
    assert options == {"n": 6, "bag": 50, "m": 100, "h": 300, "direct": True, "weight_decay": 1e-5,
                       "dropout": dropout, "schedule": "linear", "epochs": epochs, "valid_tokens": 50_000}
    assert options == ours_options(TrainOnly(train_tokens, 10_000))  # deterministic
    NPLMShape(**{k: options[k] for k in ("n", "m", "h", "direct", "bag")})  # a valid shape of the family

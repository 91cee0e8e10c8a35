"""NPLM (ours): the network of equation 1 with what a corpus of today's size needs, its shape and
regularisation chosen from the training split alone.

The paper's rows keep the paper's shapes (MLP1 ... MLP9, Table 2's network) and recipe. This row is
the same network, y = b + [U, W] [tanh(d + H x), x], with two changes and two rules:

- a wider context (as in the modernised NPLM of Sun & Iyyer 2021): beside the n-1 nearest words, x
  holds one more block, the mean of C over the `bag` words before them (`neural.networks.nplm.NPLM`, `bag`):
  what the story is about, which an n-gram cannot see;
- regularisation by dropout on z = [tanh(d + Hx), x] (before the output layer) instead of a strong
  weight decay: the paper's coupled decay of 1e-4 per update at the sgd rate of 1 shrinks every
  parameter an update does not move to 0.46 of itself per epoch of a 1M-token corpus (0.9999^7813),
  which starves the rare words' features; ours keeps 1e-5 (the paper's value for AP);
- the shape is a rule of the number of training tokens T (`ours_options`), never of valid or test:
  n = 6 (5 words in order), bag = 50, m = 100, h = 300, direct connections; dropout 0.3 up to 2M
  training tokens, then 0.3 sqrt(2M / T) (more data needs less of it: 0.21 at 4M, 0.11 at AP's 14M);
- a budget known before the run starts: the sgd recipe's linear schedule (`neural.training.recipe`: the rate
  falls from 1 to 0 over the whole run) over E = round(40M / T) epochs, at least 1 and at most 6 (Brown
  and a 1M-token corpus 6, AP's 14M 3: about 40M windows at most, which 2 cores train in about 35
  minutes), each epoch validated on the first 50,000 tokens of valid (as the
  stream networks are; the final figures score all of it).

How each choice was measured (the design on the AP 1989 1M-token corpus, the schedule on Brown, the
budget's size on AP): docs/measurements.md.
"""

from __future__ import annotations

import math

DROPOUT = 0.3  # on corpora of up to DROPOUT_TOKENS training tokens
DROPOUT_TOKENS = 2_000_000
SHAPE = {"n": 6, "m": 100, "h": 300, "direct": True, "bag": 50}
TRAINING = {"weight_decay": 1e-5, "schedule": "linear", "valid_tokens": 50_000}
BUDGET_TOKENS = 40_000_000  # training windows over the whole run, at most ...
MAX_EPOCHS = 6  # ... and at most this many epochs of a small corpus


def ours_dropout(train_tokens: int) -> float:
    """0.3 up to 2M training tokens, then 0.3 sqrt(2M / T), rounded to 2 decimals."""
    return round(DROPOUT * math.sqrt(min(1.0, DROPOUT_TOKENS / max(train_tokens, 1))), 2)


def ours_epochs(train_tokens: int) -> int:
    """round(40M / T) epochs, at least 1 and at most 6."""
    return min(MAX_EPOCHS, max(1, round(BUDGET_TOKENS / max(train_tokens, 1))))


def ours_options(corpus) -> dict:
    """The shape and training options of NPLM (ours) on `corpus`, from its training split's length
    alone (valid and test are never read)."""
    tokens = len(corpus.train)
    return {**SHAPE, **TRAINING, "dropout": ours_dropout(tokens), "epochs": ours_epochs(tokens)}

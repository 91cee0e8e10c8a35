"""The word -> class map of the class-factored output layer (`NPLM` with classes, objective "class").

Two sources, both from the training split only:

- "frequency" (default): frequency binning as in Mikolov et al. (2011) and the RNNLM toolkit. Words
  sorted by train count (most frequent first, ties by id) are cut into C bins of equal mass of
  sqrt(count): word w goes to bin floor(C * S_before(w) / S), S_before(w) the sqrt-mass of the words
  before it and S the total. Frequent words get small classes, rare ones large classes; with sqrt
  rather than raw counts the classes of the rare words stay smaller (Brown, C = 134: at most 1,292
  words a class and 42 a token on average, against 3,581 and 134 with equal unigram mass, which
  also leaves 33 bins empty). A word heavier than a bin leaves the bins it covers empty; empty bins
  are dropped, so C can come out lower than asked.
- "exchange": the exchange clustering of the class-based n-gram (`baselines.clustering`, Kneser &
  Ney 1993), taken from its cache or computed and cached.

Class ids run 0 .. C-1, each with at least one word.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from baselines.clustering import cached_cluster
from lmbench.errors import LMBenchError
from neural.config import RunConfig


def frequency_classes(counts: np.ndarray, num_classes: int) -> np.ndarray:
    """(V,) int64 class ids from train counts (V,): bins of equal sqrt-count mass, most frequent words
    in class 0, empty bins dropped."""
    by_frequency = np.argsort(-counts, kind="stable")  # (V,) most frequent first, ties by id
    mass = np.sqrt(counts[by_frequency].astype(np.float64))  # (V,)
    before = np.cumsum(mass) - mass  # (V,) S_before
    bins = np.minimum(np.floor(num_classes * before / mass.sum()), num_classes - 1).astype(np.int64)
    word_class = np.empty(len(counts), dtype=np.int64)
    word_class[by_frequency] = bins  # non-decreasing along by_frequency
    _, dense = np.unique(word_class, return_inverse=True)  # drop the empty bins, keep the order
    return dense.reshape(-1)


def word_classes(corpus, config: RunConfig, *, progress: bool = True) -> torch.Tensor:
    """The (V,) int64 class of every word of corpus.vocab for `config` (classes, class_source)."""
    vocab_size = len(corpus.vocab)
    num_classes = config.classes or round(math.sqrt(vocab_size))
    if not 2 <= num_classes <= vocab_size:
        raise LMBenchError(f"cannot make {num_classes} classes of {vocab_size} words: give "
                           f"2 <= --classes <= {vocab_size}")
    if config.class_source == "frequency":
        counts = np.bincount(corpus.train, minlength=vocab_size)  # (V,)
        return torch.from_numpy(frequency_classes(counts, num_classes))
    return torch.from_numpy(cached_cluster(corpus, num_classes, progress=progress).word_class.astype(np.int64))

"""Add-one (Laplace) unigram: P(w) = (c(w) + 1) / (N + |V|), the same for every context."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lmbench.model import LanguageModel


class AddOneUnigram(LanguageModel):
    order = 1

    def _fit(self, corpus) -> None:
        counts = np.bincount(corpus.train, minlength=self.vocab_size).astype(np.float64)
        self.log_p = np.log((counts + 1.0) / (counts.sum() + self.vocab_size))  # (V,)

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        return self.log_p[stream[start:]]

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        return np.exp(self.log_p)

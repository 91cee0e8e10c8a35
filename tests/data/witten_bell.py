"""Interpolated Witten-Bell: a contributor's n-gram method in one file, as `baselines/NAME.py` holds one.
Not a method of the suite: tests/test_ngram_contract.py puts this file among the files of `baselines` for
its tests and lets the registry find it.

    P(w | h) = (c(h w) + T(h) P(w | h')) / (c(h .) + T(h))     T(h): the distinct words seen after h
    P(w)     = (c(w) + T / |V|) / (N + T)                        T: the distinct words of train

A back-off model (`BackoffModel`, its listed rows and back-off weights T(h) / (c(h .) + T(h))): scored
by the suite's compiled walk, written as an ARPA file and as a binary model file.
"""

from __future__ import annotations

import numpy as np

from baselines.backoff import BackoffModel, Listing
from baselines.counts import count_ngrams, weighted_sums
from baselines.methods import Method, register


class WittenBell(BackoffModel):
    min_order, max_order = 2, 6

    def _fit(self, corpus) -> None:
        counts = count_ngrams(corpus.train, self.order, self.vocab_size)
        seen = counts.counts[1]
        types = np.count_nonzero(seen)
        unigram = np.log((seen + types / self.vocab_size) / (seen.sum() + types))
        self.set_parameters(*self._estimate_in_memory(counts, Listing(counts), counts.counts, unigram))

    def _conditional(self, n, a, context, size, lower, keep):
        total = weighted_sums(context, a, size)                  # c(h .)
        types = np.bincount(context, minlength=size)             # T(h)
        logp = np.log((a + types[context] * lower) / (total[context] + types[context]))
        has = types > 0
        return logp, np.where(has, np.log(np.where(has, types, 1) / np.where(has, total + types, 1)), 0.0)


register(Method("witten-bell", lambda options: WittenBell(options.order), 2, 6, 3, arpa=True, compared=(3,),
                label="Witten-Bell interpolated", row_id="wb-interp-{n}",
                summary="interpolated Witten-Bell (a contributor's)"))

"""One interface for every language model in the suite.

Every model answers the same question the same way: the natural-log probability of each token
of a split given all the tokens before it in the continuous stream train | valid | test. Valid's
first tokens take their context from the end of train, test's from the end of valid. Perplexity is
exp(-mean log-probability) over every token, markers and <unk> included, with no special
end-of-sentence status (Bengio et al. 2003, section 4).

A model is fitted on a Corpus (train ids; valid may be used for tuning) and keeps none of it: it
scores a stream (`score(stream, start)`) and gives the full distribution over the vocabulary for one
context (`distribution(context)`). Scoring a split of a corpus is a function of the two,
`split_logprobs(model, corpus, split)` (and `split_perplexity`), whichever way the model was made
(fitted, read from an ARPA file, loaded from a checkpoint). This module, the ground floor, imports
nothing of the suite's upper packages: a corpus is whatever has `vocab` and `stream_for`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Protocol, Sequence, Sized

import numpy as np

from lmbench.errors import LMBenchError

SCORE_CHUNK = 1 << 20  # positions scored at once by `in_chunks`
SAMPLE_MAX = 10_000  # words one sample draws at most (reports.api.TextModel.sample, `lmbench generate --words`):
# a word is a step of `LanguageModel.reader`, on one CPU core 6 ms for an LSTM of 256 units over 10,000 words and
# 20 ms for a Transformer (its window of 128), so a sample takes at most minutes


class Corpus(Protocol):
    """What a model reads of a corpus (corpora.corpus.Corpus is one): its vocabulary, its splits of
    ids, and a split's stream with the tokens before it."""

    name: str
    vocab: Sized
    train: np.ndarray

    def stream_for(self, split: str, history: int | None = None) -> tuple[np.ndarray, int]:
        """(stream, start): the split's ids from `start` on, after up to `history` tokens before it
        (None: all of them) from the splits before it in train | valid | test."""


def in_chunks(score: Callable[[np.ndarray, int], np.ndarray], stream: np.ndarray, start: int, history: int,
              chunk: int | None = None) -> np.ndarray:
    """score(stream, start), one value per position t >= start, computed `chunk` positions at a time,
    each piece with the `history` tokens before it: the temporaries of a model whose score holds a
    few arrays per position stay bounded on a 100M-token stream."""
    stream, chunk = np.asarray(stream), chunk or SCORE_CHUNK
    parts = [score(stream[max(s - history, 0):s + chunk], s - max(s - history, 0))
             for s in range(start, len(stream), chunk)]
    return np.concatenate(parts) if parts else score(stream, start)


def perplexity(logprobs: np.ndarray) -> float:
    """exp(-mean natural-log probability) over every token; inf beyond float64's range (a mean log
    probability below -709: a diverged network), which is the answer, not a warning."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if logprobs.size == 0:
        raise LMBenchError("cannot compute perplexity of an empty split: give it at least one token")
    with np.errstate(over="ignore"):
        return float(np.exp(-logprobs.mean()))


class LanguageModel(ABC):
    """A model over a fixed vocabulary of `vocab_size` ids.

    Subclasses set `order` (tokens of context used, plus one; None for unbounded) and implement
    `_fit`, `score` and `distribution`.
    """

    order: int | None = None
    vocab_size: int

    def fit(self, corpus: Corpus) -> "LanguageModel":
        """Estimate the model from corpus.train (and corpus.valid where the method tunes on it)."""
        if self.order is not None and len(corpus.train) < self.order:
            raise LMBenchError(
                f"the training split has {len(corpus.train)} tokens, fewer than the model order "
                f"{self.order}: use a longer corpus or a lower order")
        self.vocab_size = len(corpus.vocab)
        self._fit(corpus)
        return self

    @abstractmethod
    def _fit(self, corpus: Corpus) -> None:
        """Estimate the parameters."""

    @abstractmethod
    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        """Natural-log P(stream[t] | stream[:t]) for t = start .. len(stream) - 1, as float64."""

    def score_segments(self, stream: np.ndarray, segments: np.ndarray) -> np.ndarray:
        """`score` of several texts at once: each row (first, start, end) of `segments` is the text
        stream[first:end] read alone, scored from `start`; their scores one after the other. A model that
        scores many short texts faster together (a back-off model's compiled walk) overrides it."""
        parts = [self.score(stream[first:end], start - first) for first, start, end in np.asarray(segments).tolist()]
        return np.concatenate(parts) if parts else np.zeros(0)

    @abstractmethod
    def distribution(self, context: Sequence[int]) -> np.ndarray:
        """P(w | context) for every id w, shape (vocab_size,); context is a sequence of ids,
        oldest first, possibly shorter than order - 1 (the start of a stream)."""

    def reader(self, context: Sequence[int]) -> "Reader":
        """The model reading a stream a token at a time from `context` (ids, oldest first), as a sample is
        drawn: `Reader.distribution()` is distribution(the tokens read), `Reader.read(token)` reads one more.
        Each step costs what one `distribution` of the tokens the model reads costs, not the whole stream's
        length: the base keeps the last order - 1 tokens; a stream network carries its state instead
        (`neural.networks.stream.StreamLanguageModel`)."""
        return Reader(self, context)


class Reader:
    """`LanguageModel.reader`'s base: the tokens read, of which the last order - 1 are kept (all of them for
    a model of order None), each distribution asked of the model. `read` trims the tokens once they are
    twice as many as kept, so that a step costs O(order) on average however long the stream."""

    def __init__(self, model: LanguageModel, context: Sequence[int]):
        self.model, self.context = model, [int(token) for token in context]
        self.keep = None if model.order is None else model.order - 1

    def distribution(self) -> np.ndarray:
        """P(. | the tokens read), shape (vocab_size,)."""
        return self.model.distribution(self.context)

    def read(self, token: int) -> None:
        """Read one more token."""
        self.context.append(int(token))
        if self.keep is not None and len(self.context) > 2 * self.keep + 16:
            del self.context[:len(self.context) - self.keep]


def split_logprobs(model: LanguageModel, corpus: Corpus, split: str) -> np.ndarray:
    """Natural-log probability of every token of `split` ('train', 'valid' or 'test') of `corpus`,
    each given the tokens before it in train | valid | test (as many as the model's order reads)."""
    if len(corpus.vocab) != model.vocab_size:
        raise LMBenchError(
            f"the model has a vocabulary of {model.vocab_size} words but corpus {corpus.name!r} "
            f"has {len(corpus.vocab)}: score it on the corpus it was trained on")
    history = None if model.order is None else model.order - 1
    stream, start = corpus.stream_for(split, history=history)
    return model.score(stream, start)


def split_perplexity(model: LanguageModel, corpus: Corpus, split: str) -> float:
    """Perplexity of `model` on `split` of `corpus`, every token counted."""
    return perplexity(split_logprobs(model, corpus, split))

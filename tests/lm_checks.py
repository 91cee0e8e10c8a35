"""Checks every language model of the suite must pass; each model's tests call them."""

from __future__ import annotations

import numpy as np

from corpora.corpus import Corpus
from corpora.vocab import Vocabulary, count_types
from lmbench.model import split_logprobs


def make_corpus(train: str, valid: str, test: str, *, min_count: int = 1) -> Corpus:
    """A Corpus from three whitespace-separated strings, vocabulary from train."""
    splits = {"train": train.split(), "valid": valid.split(), "test": test.split()}
    vocab = Vocabulary.from_counts(*count_types(splits["train"]), min_count=min_count)
    ids = {s: vocab.encode(t) for s, t in splits.items()}
    unk_words = {s: np.asarray(t, dtype=str)[ids[s] == vocab.unk_id] for s, t in splits.items()}
    return Corpus("tiny", vocab, unk_words=unk_words, **ids)


def sample_contexts(model, corpus: Corpus, *, count: int = 20, seed: int = 0) -> list[list[int]]:
    """Seen contexts (windows of train), unseen ones (random ids), and short and empty ones."""
    rng = np.random.default_rng(seed)
    width = max(1, (model.order or 6) - 1)
    train = corpus.train
    contexts = [[]]
    for _ in range(count):
        end = int(rng.integers(width, len(train) + 1))
        contexts.append(train[max(0, end - width):end].tolist())
        contexts.append(rng.integers(0, len(corpus.vocab), size=width).tolist())
    contexts.append(train[:1].tolist())
    return contexts


def assert_normalised(model, corpus: Corpus, *, count: int = 20, seed: int = 0, tol: float = 1e-6) -> None:
    """P(. | h) sums to 1 over the whole vocabulary for seen and unseen histories h."""
    for context in sample_contexts(model, corpus, count=count, seed=seed):
        p = np.asarray(model.distribution(context), dtype=np.float64)
        assert p.shape == (len(corpus.vocab),), f"distribution has shape {p.shape}"
        assert np.all(p >= 0), f"negative probability for context {context}"
        assert abs(p.sum() - 1.0) <= tol, f"sums to {p.sum()!r} for context {context}"


def assert_scores_match_distribution(model, corpus: Corpus, split: str = "valid", *,
                                     tokens: int = 30, tol: float = 1e-9) -> None:
    """logprobs(split)[i] is log distribution(context of token i)[token i]."""
    logprobs = split_logprobs(model, corpus, split)
    stream, start = corpus.stream_for(split)
    width = (model.order or len(stream)) - 1
    for t in range(start, min(len(stream), start + tokens)):
        context = stream[max(0, t - width):t].tolist()
        expected = np.log(model.distribution(context)[stream[t]])
        assert abs(logprobs[t - start] - expected) <= tol, (t, logprobs[t - start], expected)

"""Corpus pipelines: each corpus becomes a Vocabulary and three int32 id streams (train, valid, test)."""

from corpora.corpus import Corpus
from corpora.vocab import Vocabulary

__all__ = ["Corpus", "Vocabulary"]

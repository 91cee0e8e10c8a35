"""Class-based n-gram (Brown et al. 1992), as in Bengio et al. (2003) table 1.

    P(w_t | h_t) = P(c(w_t) | c(h_t)) * P(w_t | c(w_t))

c maps each word to one of C classes (the exchange clustering of `baselines.clustering`), c(h) maps
every word of the history. The class-sequence model P(c | c(h)) is ANY LanguageModel, made by a
factory (a callable returning an unfitted model; after merging, Kneser-Ney back-off) and fitted on a
Corpus whose streams are the word streams mapped to class ids; the class model's order is the
model's order.

Class vocabulary: class ids come from `relabel`, which puts `<unk>` (word id 0) in class 0, so the
class Vocabulary is ["<unk>", "C1", ..., "C{C-1}"]: the name "<unk>" stands for the class holding
the unknown word (together with the other words clustered with it), and every class has at least
one word.

Word given class, add-one within the class, so every word of V has P > 0 (including words with no
training count):

    P(w | c) = (count(w) + 1) / (count(c) + |c|),   count(c) = sum of the train counts of c's words,

which sums to 1 over the |c| words of each class; hence P(. | h) sums to sum_c P(c | c(h)) = 1.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from baselines.clustering import Clustering, cached_cluster
from corpora.corpus import Corpus
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.model import LanguageModel


def class_vocabulary(num_classes: int) -> Vocabulary:
    """["<unk>", "C1", ..., "C{num_classes - 1}"]: id i is class i."""
    return Vocabulary([UNK] + [f"C{i}" for i in range(1, num_classes)])


def class_corpus(corpus: Corpus, clustering: Clustering) -> Corpus:
    """The corpus with every token replaced by its class id (same split lengths)."""
    word_class = clustering.word_class
    C = clustering.num_classes
    return Corpus(f"{corpus.name}-classes{C}", class_vocabulary(C),
                  train=word_class[corpus.train], valid=word_class[corpus.valid],
                  test=word_class[corpus.test], info={"clustering": clustering.info})


class ClassNgram(LanguageModel):
    """P(w | h) = P(c(w) | c(h)) P(w | c(w)) with a pluggable class-sequence model."""

    def __init__(self, class_model_factory: Callable[[], LanguageModel], num_classes: int, *,
                 clustering: Clustering | None = None, max_iters: int = 20, progress: bool = True):
        """`clustering`: use this word -> class map; else the exchange clustering of train into
        `num_classes` classes, from the cache (`cache_root()/clusters`) or computed and cached."""
        self.class_model = class_model_factory()
        self.order = self.class_model.order
        self.num_classes = num_classes
        self.clustering = clustering
        self.max_iters = max_iters
        self.progress = progress

    def _fit(self, corpus: Corpus) -> None:
        if self.clustering is None:
            self.clustering = cached_cluster(corpus, self.num_classes, max_iters=self.max_iters,
                                             progress=self.progress)
        elif self.clustering.fingerprint != corpus.vocab.fingerprint():
            raise LMBenchError("the clustering was made for another vocabulary: cluster this corpus "
                               "again or pass no clustering to compute one")
        word_class = self.clustering.word_class.astype(np.int64)  # (V,)
        self.word_class = word_class
        counts = np.bincount(corpus.train, minlength=self.vocab_size).astype(np.float64)  # (V,)
        class_count = np.bincount(word_class, weights=counts, minlength=self.clustering.num_classes)
        class_size = np.bincount(word_class, minlength=self.clustering.num_classes)  # (C,)
        denominator = (class_count + class_size)[word_class]  # count(c(w)) + |c(w)|, (V,)
        self.log_word_given_class = np.log((counts + 1.0) / denominator)  # (V,)
        self.class_model.fit(class_corpus(corpus, self.clustering))

    def score(self, stream: np.ndarray, start: int) -> np.ndarray:
        stream = np.asarray(stream)
        classes = self.word_class[stream].astype(np.int32)  # (len,)
        return self.class_model.score(classes, start) + self.log_word_given_class[stream[start:]]

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        classes = self.word_class[np.asarray(context, dtype=np.int64)].tolist()
        p_class = self.class_model.distribution(classes)  # (C,)
        return p_class[self.word_class] * np.exp(self.log_word_given_class)  # (V,)

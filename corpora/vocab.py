"""Vocabulary: id <-> word, with an explicit unknown symbol at id 0.

Words are counted and encoded through dictionaries of Python strings, never through a numpy unicode
array: such an array is as wide as its longest string in every row, so one 10 MB token among a few
thousand short ones would need tens of GB. Memory here grows with the corpus's characters, not with
its longest token.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from collections import Counter
from itertools import repeat
from typing import Iterable, Iterator, Sequence

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.files import read_checked

UNK = "<unk>"


def _strings(tokens: Sequence[str] | np.ndarray) -> Sequence[str]:
    """The tokens as Python strings (a numpy array's as a list, whose items hash as the words)."""
    return tokens.tolist() if isinstance(tokens, np.ndarray) else tokens


def count_types(tokens: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct token strings (sorted; an object array) and their counts, counted with a Counter."""
    counts = Counter(_strings(tokens))
    types = sorted(counts)
    return np.array(types, dtype=object), np.array([counts[t] for t in types], dtype=np.int64)


class Vocabulary:
    """Words in id order; id 0 is always the unknown symbol `<unk>`.

    Built by `from_counts`: the unknown symbol, then any reserved symbols, then the kept words by
    decreasing count (ties in alphabetical order), so ids are deterministic.
    """

    unk_id = 0

    def __init__(self, words: Sequence[str]):
        words = list(words)
        if not words or words[0] != UNK:
            raise ValueError(f"a vocabulary's first word must be {UNK!r}")
        self._words = words
        self._index = {w: i for i, w in enumerate(words)}
        if len(self._index) != len(words):
            raise ValueError("a vocabulary cannot hold the same word twice")

    @classmethod
    def from_counts(cls, types: Sequence[str], counts: Sequence[int], *, min_count: int = 1,
                    max_size: int | None = None, reserved: Iterable[str] = ()) -> "Vocabulary":
        """Keep the types with count >= min_count (and at most max_size words in all, specials
        included); `<unk>` and the reserved symbols always come first."""
        reserved = [w for w in reserved if w != UNK]
        specials = [UNK] + reserved
        special = set(specials)
        candidates = [(-int(count), word) for word, count in zip(_strings(types), np.asarray(counts).tolist())
                      if count >= min_count and word not in special]
        kept = [word for _, word in sorted(candidates)]  # count descending, then alphabetical
        if max_size is not None:
            kept = kept[: max(0, max_size - len(specials))]
        return cls(specials + kept)

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: str) -> bool:
        """Whether `word` is one of the vocabulary's, `<unk>` included (nltk.lm's Vocabulary: its unknown label
        is in it)."""
        return word in self._index

    def __iter__(self) -> Iterator[str]:
        """The words in id order, `<unk>` first (nltk.lm's Vocabulary iterates over the same words)."""
        return iter(self._words)

    @property
    def unk_label(self) -> str:
        """The word every word outside the vocabulary is read as (nltk.lm's `Vocabulary.unk_label`)."""
        return UNK

    def lookup(self, words: str | Iterable) -> str | tuple:
        """nltk.lm's `Vocabulary.lookup`: a word (a str) as itself when the vocabulary holds it, else `<unk>`; a
        sequence of words (or of sequences) as a tuple of theirs. Anything else is refused in one line."""
        if isinstance(words, str):
            return words if words in self._index else UNK
        if isinstance(words, (bytes, bytearray)) or not isinstance(words, Iterable):
            raise LMBenchError(f"cannot look up {words!r:.60} ({type(words).__name__}) in the vocabulary: give a word "
                               "(a str) or a sequence of words")
        return tuple(self.lookup(word) for word in words)

    @property
    def words(self) -> list[str]:
        return list(self._words)

    def id(self, word: str) -> int:
        return self._index.get(word, self.unk_id)

    def word(self, i: int) -> str:
        return self._words[i]

    def encode(self, tokens: Sequence[str] | np.ndarray) -> np.ndarray:
        """int32 ids of a token sequence; unknown words map to `<unk>`. One dictionary lookup per token."""
        tokens = _strings(tokens)
        return np.fromiter(map(self._index.get, tokens, repeat(self.unk_id, len(tokens))), dtype=np.int32,
                           count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self._words[i] for i in ids]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"unk": UNK, "words": self._words}, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """A saved vocabulary, checked against its record when it has one (lmbench.files)."""
        return read_checked(Path(path), lambda p: cls(json.loads(p.read_text(encoding="utf-8"))["words"]),
                            what="vocabulary file", fix="delete it and prepare the corpus again")

    def fingerprint(self) -> str:
        """A short hash of the word list: two models agree on ids only if these match."""
        return hashlib.sha256("\n".join(self._words).encode()).hexdigest()[:16]

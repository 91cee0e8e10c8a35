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
from typing import Iterable, Sequence

import numpy as np

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
        return word in self._index

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

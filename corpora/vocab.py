"""Vocabulary: id <-> word, with an explicit unknown symbol at id 0."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from lmbench.files import read_checked

UNK = "<unk>"


def count_types(tokens: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct token strings (sorted) and their counts, computed with np.unique."""
    if len(tokens) == 0:
        return np.array([], dtype=str), np.array([], dtype=np.int64)
    return np.unique(np.asarray(tokens), return_counts=True)


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
        types = np.asarray(types)
        counts = np.asarray(counts)
        candidates = ~np.isin(types, specials) & (counts >= min_count)
        types, counts = types[candidates], counts[candidates]
        order = np.lexsort((types, -counts))  # count descending, then alphabetical
        kept = types[order].tolist()
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
        """int32 ids of a token sequence; unknown words map to `<unk>`. One dictionary lookup per
        distinct type, then a vectorised gather."""
        if len(tokens) == 0:
            return np.zeros(0, dtype=np.int32)
        types, inverse = np.unique(np.asarray(tokens), return_inverse=True)
        type_ids = np.fromiter((self.id(t) for t in types.tolist()), dtype=np.int32, count=len(types))
        return type_ids[inverse.reshape(-1)]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self._words[i] for i in ids]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"unk": UNK, "words": self._words}, ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """A saved vocabulary, checked against its record when it has one (lmbench.files)."""
        return read_checked(Path(path), lambda p: cls(json.loads(p.read_text())["words"]),
                            what="vocabulary file", fix="delete it and prepare the corpus again")

    def fingerprint(self) -> str:
        """A short hash of the word list: two models agree on ids only if these match."""
        return hashlib.sha256("\n".join(self._words).encode()).hexdigest()[:16]

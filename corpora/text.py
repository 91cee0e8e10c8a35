"""Bring your own corpus: train/valid/test files of whitespace-separated tokens.

Line breaks are whitespace; each file is one continuous stream. The vocabulary comes from train
(types counted >= min_count times, and at most the max_vocab most frequent of them, specials included);
a literal `<unk>` in the files is the unknown symbol. A file that is missing, empty, not UTF-8 or holds
NUL bytes (a binary or damaged file) is refused in one line naming it. The cache is keyed by the files'
content, so an edited or cut file is prepared anew.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from corpora.corpus import SPLITS, Corpus, cached
from corpora.vocab import Vocabulary, count_types
from lmbench.errors import LMBenchError


def read_tokens(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise LMBenchError(f"corpus file {path} does not exist: give the path of a text file "
                           "of whitespace-separated tokens")
    data = path.read_bytes()
    nul = data.find(b"\0")
    if nul >= 0:
        raise LMBenchError(f"corpus file {path} holds a NUL byte at offset {nul} (a binary or damaged file?): "
                           "give a text file of whitespace-separated tokens")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LMBenchError(f"{path} is not UTF-8 (undecodable byte at offset {err.start}): convert it, "
                           f"e.g. iconv -f latin1 -t utf-8 {path} > {path}.utf8") from None
    tokens = text.split()
    if not tokens:
        raise LMBenchError(f"corpus file {path} holds no tokens: give a non-empty file")
    return tokens


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "missing"


def load_text(train: str | Path, valid: str | Path, test: str | Path, *, min_count: int = 1,
              max_vocab: int | None = None, use_cache: bool = True) -> Corpus:
    if min_count < 1:
        raise LMBenchError(f"--min-count must be at least 1, not {min_count}")
    if max_vocab is not None and max_vocab < 2:
        raise LMBenchError(f"--vocab-size must be at least 2 (<unk> and one word), not {max_vocab}")
    paths = dict(zip(SPLITS, (Path(train), Path(valid), Path(test))))
    key = {"corpus": "text", "min_count": min_count, "max_vocab": max_vocab,
           "source": {s: f"{p.resolve()}:{_file_digest(p)}" for s, p in paths.items()}}

    def build() -> Corpus:
        tokens = {s: read_tokens(p) for s, p in paths.items()}
        vocab = Vocabulary.from_counts(*count_types(tokens["train"]), min_count=min_count, max_size=max_vocab)
        ids = {s: vocab.encode(t) for s, t in tokens.items()}
        unk_words = {s: np.asarray(tokens[s])[ids[s] == vocab.unk_id] for s in SPLITS}
        return Corpus("text", vocab, info={"source": {s: str(p) for s, p in paths.items()}},
                      unk_words=unk_words, **ids)

    return cached(key, build, use_cache=use_cache)


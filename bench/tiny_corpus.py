"""The corpus of the bench scripts' --tiny runs (tests/test_bench.py runs each script at that size, so
that a library change that breaks one fails a test): a Markov chain over a few hundred words, with a
Zipf tail of rare ones, written as train.txt, valid.txt and test.txt and loaded as the text corpus. A
script that reads Brown or AP at full size reads this instead under --tiny; its code path is the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIZES = {"train": 6000, "valid": 1000, "test": 1000}  # tokens


def tiny_text(tokens: int, seed: int, words: int = 200) -> str:
    """A walk over `words` words w0, w1, ..., each with 4 likely successors (the same chain for every
    seed), one token in 8 drawn instead from a Zipf law over 4 times as many words."""
    table = np.random.default_rng(0).integers(0, words, size=(words, 4))
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, 4 * words + 1)
    rare = rng.choice(4 * words, size=tokens, p=zipf / zipf.sum())
    jump, pick = rng.random(tokens) < 0.125, rng.integers(0, 4, size=tokens)
    stream = np.zeros(tokens, dtype=np.int64)
    for t in range(1, tokens):
        stream[t] = rare[t] if jump[t] else table[stream[t - 1] % words, pick[t]]
    return " ".join(f"w{i}" for i in stream) + "\n"


def tiny_files(folder: str | Path | None = None) -> tuple[Path, Path, Path]:
    """train.txt, valid.txt and test.txt of the tiny corpus, written into `folder` (default: bench-tiny/ in
    lmbench's cache, $LMBENCH_CACHE) when absent."""
    from corpora.corpus import cache_root
    from lmbench.files import atomic_write_text
    folder = Path(folder or cache_root() / "bench-tiny")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed, (split, tokens) in enumerate(SIZES.items(), start=1):
        path = folder / f"{split}.txt"
        if not path.exists():
            atomic_write_text(path, tiny_text(tokens, seed))
        paths.append(path)
    return tuple(paths)


def tiny_corpus(folder: str | Path | None = None):
    """The tiny corpus loaded as `lmbench`'s text corpus (its default vocabulary)."""
    from corpora.text import load_text
    return load_text(*tiny_files(folder))

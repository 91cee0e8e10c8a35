"""The corpora by name, each prepared by its own pipeline with the options it takes: Brown (the paper's
protocol), AP Newswire (from a folder of TREC SGML files) and a user's three text files. What
`lmbench corpus`, every command's corpus options and the reproduction load.
"""

from __future__ import annotations

import os
from pathlib import Path

from corpora.corpus import Corpus
from lmbench.errors import LMBenchError

CORPORA = ("brown", "ap", "text")


def load_named(name: str, *, min_count: int | None = None, vocab_from: str = "all", ap_dir: str | Path | None = None,
               vocab_size: int | None = None, skip_bad_files: bool = False, use_cache: bool = True,
               files: tuple[Path | None, Path | None, Path | None] = (None, None, None)) -> Corpus:
    """Corpus `name` ("brown", "ap" or "text"); an option left at None takes the corpus's default (Brown:
    min count 4, the paper's; AP: the paper's 17,964 words from $AP_DIR; text: `corpora.text`'s default
    vocabulary of `files`, train, valid and test)."""
    if name == "brown":
        from corpora.brown import load_brown
        return load_brown(min_count=min_count or 4, vocab_from=vocab_from, use_cache=use_cache)
    if name == "text":
        from corpora.text import load_text
        return load_text(*files, min_count=min_count, max_vocab=vocab_size, use_cache=use_cache)
    if name != "ap":
        raise LMBenchError(f"unknown corpus {name!r}: use one of {', '.join(CORPORA)}")
    from corpora.ap import DEFAULT_VOCAB_SIZE, load_ap
    directory = ap_dir or os.environ.get("AP_DIR")
    if not directory:
        raise LMBenchError("no AP directory: pass --ap-dir DIR or set AP_DIR to the folder of "
                           "TREC/Tipster AP SGML files (e.g. ../shared/corpora/ap89)")
    return load_ap(directory, vocab_size=vocab_size or DEFAULT_VOCAB_SIZE, use_cache=use_cache,
                   skip_bad_files=skip_bad_files)

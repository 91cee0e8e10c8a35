"""Brown corpus, the paper's protocol (Bengio et al. 2003, section 4.1).

Token stream: for each file of nltk's Brown corpus in fileids() order, for each paragraph, its
words in order then `</p>`; after the file's last paragraph, `</d>`. Case and punctuation as NLTK
gives them: 1,177,359 tokens. Split: the first 800,000 tokens train, the next 200,000 valid, the
remaining 177,359 test. Vocabulary: the paper merged words with frequency <= 3 into one symbol, so
every type counted >= 4 times over the whole stream is kept (|V| = 17,907 with `<unk>`);
`vocab_from="train"` counts on train only instead. The raw word behind every `<unk>` token is kept
(`Corpus.unk_words`).
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

import numpy as np

from corpora.corpus import SPLITS, Corpus, cached, refuse_wordless
from corpora.vocab import Vocabulary, count_types
from lmbench.errors import LMBenchError

log = logging.getLogger(__name__)

PARAGRAPH_END = "</p>"
DOCUMENT_END = "</d>"
TRAIN_TOKENS = 800_000
VALID_TOKENS = 200_000


def _pointer_path(pointer) -> Path:
    """The file behind an NLTK path pointer (a zip file or a plain folder)."""
    zipfile = getattr(pointer, "zipfile", None)
    return Path(zipfile.filename if zipfile is not None else pointer.path)


def brown_location() -> Path:
    """Where NLTK finds the Brown corpus (zip or folder); downloaded if missing, NLTK_DATA unset and the
    machine online; else a clear error."""
    for root in os.environ.get("NLTK_DATA", "").split(os.pathsep):  # fast path: no nltk import
        for name in ("brown.zip", "brown"):
            if root and (Path(root) / "corpora" / name).exists():
                return Path(root) / "corpora" / name
    import nltk

    for resource in ("corpora/brown.zip", "corpora/brown"):
        try:
            return _pointer_path(nltk.data.find(resource))
        except LookupError:
            pass
    if os.environ.get("NLTK_DATA"):  # the user named where Brown is: no download to somewhere else
        raise LMBenchError(f"NLTK_DATA={os.environ['NLTK_DATA']} holds no corpora/brown.zip (nor corpora/brown): "
                           "set NLTK_DATA to the folder that holds it, or unset it to download Brown "
                           "(python -c \"import nltk; nltk.download('brown')\")")
    log.info("Brown corpus not found; trying nltk.download('brown')")
    said = io.StringIO()  # nltk prints its failure over several [nltk_data] lines: kept for the one line
    fetched = nltk.download("brown", quiet=True, print_error_to=said)
    if fetched:
        return _pointer_path(nltk.data.find("corpora/brown.zip"))
    reason = " ".join(said.getvalue().replace("[nltk_data]", " ").split())
    raise LMBenchError(
        f"the Brown corpus is missing and could not be downloaded{f' ({reason})' if reason else ''}: run "
        "python -c \"import nltk; nltk.download('brown')\" on a machine with internet, "
        "or set NLTK_DATA to a folder holding corpora/brown.zip")


def brown_tokens() -> list[str]:
    """The paper's token stream: words, then `</p>` after each paragraph, `</d>` after each file."""
    brown_location()
    from nltk.corpus import brown

    tokens: list[str] = []
    for fileid in brown.fileids():
        for paragraph in paragraphs(brown.raw(fileid)):
            tokens.extend(paragraph)
            tokens.append(PARAGRAPH_END)
        tokens.append(DOCUMENT_END)
    return tokens


def paragraphs(text: str) -> list[list[str]]:
    """A Brown file's paragraphs as nltk's reader gives them (`brown.paras`, its sentences joined), in a
    tenth of its time: a paragraph is a run of non-blank lines, a token is whitespace-separated
    `word/tag`, and its word is everything before the last `/` (nltk.tag.str2tuple)."""
    found, current = [], []
    for line in text.split("\n"):
        if line.strip():
            current.extend(token[:token.rfind("/")] if "/" in token else token for token in line.split())
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


def _source_fingerprint() -> str:
    path = brown_location()
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{int(stat.st_mtime)}"


def load_brown(*, min_count: int = 4, vocab_from: str = "all", use_cache: bool = True) -> Corpus:
    """Brown as a Corpus (cached). `vocab_from`: 'all' (the paper) or 'train'."""
    if vocab_from not in ("all", "train"):
        raise LMBenchError(f"vocab_from must be 'all' or 'train', not {vocab_from!r}")
    if min_count < 1:
        raise LMBenchError(f"--min-count must be at least 1, not {min_count}")
    key = {"corpus": "brown", "source": _source_fingerprint(), "min_count": min_count,
           "vocab_from": vocab_from}

    def build() -> Corpus:
        tokens = np.asarray(brown_tokens())
        counted = tokens if vocab_from == "all" else tokens[:TRAIN_TOKENS]
        vocab = Vocabulary.from_counts(*count_types(counted), min_count=min_count,
                                       reserved=[PARAGRAPH_END, DOCUMENT_END])
        ids = vocab.encode(tokens)
        bounds = (0, TRAIN_TOKENS, TRAIN_TOKENS + VALID_TOKENS, len(ids))
        splits = {s: slice(lo, hi) for s, lo, hi in zip(SPLITS, bounds[:-1], bounds[1:])}
        return Corpus("brown", vocab, **{s: ids[part] for s, part in splits.items()},
                      info={"source": "nltk.corpus.brown"},
                      unk_words={s: tokens[part][ids[part] == vocab.unk_id].astype(object)
                                 for s, part in splits.items()})

    return refuse_wordless(cached(key, build, use_cache=use_cache), (PARAGRAPH_END, DOCUMENT_END),
                           f"--min-count {min_count} keeps no word of Brown (counted over "
                           f"{'the whole stream' if vocab_from == 'all' else 'train'})",
                           "give a lower --min-count (4, the paper's)")

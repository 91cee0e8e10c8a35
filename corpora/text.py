"""Bring your own corpus: train/valid/test files of whitespace-separated tokens, or one file cut into
the three by lines.

Line breaks are whitespace; each file is one continuous stream. One file (`load_text_file`) is cut by
lines into three contiguous parts, train first (80/10/10 by default): the cut keeps documents whole as
far as lines are documents, and keeps valid and test text the model never saw in train. The vocabulary comes from train
(types counted >= min_count times, and at most the max_vocab most frequent of them, specials included);
a literal `<unk>` in the files is the unknown symbol. A file that is missing, empty, not UTF-8 or holds
NUL bytes (a binary or damaged file) is refused in one line naming it (UTF-16 text by its encoding, with
the `iconv` line that converts it), a binary one at its first block (never read whole); so is a
vocabulary that keeps no word (every perplexity would be 1.0); one file (or one content) given for two splits is refused too. Lines end at "\n"
only (`file_lines`: a form feed, U+2028 or NEL is whitespace inside a line), and a leading UTF-8
byte-order mark is dropped. The cache is keyed by the files'
content, so an edited or cut file is prepared anew.

The default min_count leaves `<unk>` a word of train (`default_min_count`): 2, so that the words seen
once in train are `<unk>` there as the words train never saw are in valid and test (train's `<unk>`
rate is then the share of its tokens that are singletons, the Good-Turing estimate of the share of
held-out tokens that are new words: every model learns `<unk>` at about the rate it meets it); 1 when
train holds a literal `<unk>` of its own (a corpus that brings its vocabulary, Penn Treebank style,
kept as it is). With every train word kept (min_count 1 on a train without `<unk>`) no training token
is `<unk>` while held-out ones are: each model then prices `<unk>` by accident, and rankings flip
(`corpora.corpus.unk_warning` says so in one line).

Memory: a file's text is split, counted and encoded CHUNK_CHARS characters at a time (cut at
whitespace), so the token strings of only one chunk exist at once. Preparing AP 1989 text (1M and 4M
training tokens, `lmbench corpus text`) grows by 12 bytes per training token this way (the text and
the ids), by 340 when every token was a Python string and a numpy copy at once (35 GB at 100M tokens).
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import re
import stat
import sys
from collections import Counter
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import numpy as np

from corpora.corpus import SPLITS, Corpus, cached, refuse_wordless
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text


READ_BYTES = 1 << 24  # bytes read and checked at once: a binary file is refused at its first NUL, not read whole


def utf16(block: bytes) -> str | None:
    """The encoding, UTF-16LE or UTF-16BE, when a file's first block is UTF-16 text (a byte-order mark, or
    a NUL in nearly every other byte, as each ASCII character's high byte is), else None."""
    if block[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "UTF-16LE" if block[:2] == codecs.BOM_UTF16_LE else "UTF-16BE"
    sample = block[:4096 - 4096 % 2]
    if len(sample) < 4:
        return None
    high, low = sample[1::2].count(0) / (len(sample) // 2), sample[0::2].count(0) / (len(sample) // 2)
    return "UTF-16LE" if high > 0.9 > 0.1 > low else "UTF-16BE" if low > 0.9 > 0.1 > high else None


def _refusal(path: Path | None, problem: str, offset: int, first_block: bytes = b"") -> LMBenchError:
    """The one line refusing a text that is not UTF-8 text: a file's, or standard input's (`path` None)."""
    encoding = utf16(first_block)
    if path is None:
        return LMBenchError(f"standard input is {encoding} text, not UTF-8: convert it on the way, e.g. ... | iconv "
                            f"-f {encoding} -t UTF-8 | lmbench ..." if encoding else
                            f"standard input holds a NUL byte at offset {offset} (binary data?): give it text, or "
                            "the path of a text file" if problem == "nul" else
                            f"standard input is not UTF-8 (undecodable byte at offset {offset}): convert it on the way, "
                            "e.g. ... | iconv -f latin1 -t utf-8 | lmbench ...")
    if encoding:
        return LMBenchError(f"corpus file {path} is {encoding} text, not UTF-8: convert it, e.g. "
                            f"iconv -f {encoding} -t UTF-8 {path} > {path}.utf8")
    if problem == "nul":
        return LMBenchError(f"corpus file {path} holds a NUL byte at offset {offset} (a binary or damaged file?): "
                            "give a text file of whitespace-separated tokens")
    return LMBenchError(f"{path} is not UTF-8 (undecodable byte at offset {offset}): convert it, "
                        f"e.g. iconv -f latin1 -t utf-8 {path} > {path}.utf8")


@contextlib.contextmanager
def reading(path: Path) -> Iterator[BinaryIO]:
    """open(path, "rb"), where an error of the system in the reading (EIO: a failing disk) names the file,
    which the command line's one line then gives (lmbench.errors.system_refusal)."""
    try:
        with open(path, "rb") as f:
            yield f
    except OSError as err:
        if err.filename is None:
            err.filename = str(path)
        raise


def read_text(path: str | Path) -> str:
    """The file's text, without a leading UTF-8 byte-order mark; a missing, binary (NUL bytes) or
    non-UTF-8 file is refused in one line, at the first block of READ_BYTES that shows it."""
    path = Path(path)
    if not path.is_file():
        raise LMBenchError(f"corpus file {path} does not exist: give the path of a text file "
                           "of whitespace-separated tokens")
    with reading(path) as f:
        return "".join(text_blocks(f, path))


def text_blocks(f: BinaryIO, path: Path | None) -> Iterator[str]:
    """The text of a binary stream, a block at a time (what one read returns, at most READ_BYTES: a pipe's
    lines as they come), without a leading UTF-8 byte-order mark; a NUL byte (a binary or damaged file) or
    one that is not UTF-8 refused in one line (`_refusal`; `path` None: standard input) at the block that
    shows it, before any later block is read."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a byte-order mark (some editors write one) is no
    offset = 0                                             # part of the first token
    while True:
        block = f.read1(READ_BYTES)
        nul = block.find(b"\0")
        first = block if offset == 0 else b""
        if nul >= 0:
            raise _refusal(path, "nul", offset + nul, first)
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as err:
            raise _refusal(path, "utf-8", offset + err.start, first) from None
        if not block:
            return
        yield text
        offset += len(block)


def standard_input() -> BinaryIO:
    """The bytes of standard input, refused in one line where it is closed (`<&-`) or a device that is no
    terminal (`< /dev/zero`, endless): as a FILE argument must be a file (lmbench.options.existing_file),
    standard input must be a file, a pipe or a terminal."""
    if sys.stdin is None:
        raise LMBenchError("standard input is closed (<&-), and - reads the text from it: pipe the text in "
                           "(... | lmbench ...) or give the path of its file")
    descriptor = sys.stdin.fileno()
    mode = os.fstat(descriptor).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()):
        try:
            named = f"{os.readlink(f'/proc/self/fd/{descriptor}')}, a device"  # (Linux names it)
        except OSError:
            named = "a device"
        raise LMBenchError(f"standard input is {named}, not a file, a pipe or a terminal, and - reads the text "
                           "from it: give it a text file (< sentences.txt) or pipe the text in")
    return sys.stdin.buffer


def read_lines(path: str | Path) -> Iterator[str]:
    """The lines of a text file, or of standard input for "-", as `file_lines` cuts them, read a block at a
    time (`text_blocks`: a refusal at the block that shows it, and a pipe's lines as they come)."""
    if str(path) == "-":
        yield from stream_lines(text_blocks(standard_input(), None))
        return
    if not Path(path).is_file():
        raise LMBenchError(f"{path} does not exist: give the path of a text file")
    with reading(Path(path)) as f:
        yield from stream_lines(text_blocks(f, Path(path)))


def check_text_start(path: Path) -> None:
    """Refuse in one line a corpus file whose first block is not text (read_text's refusals), before
    anything reads it whole (its digest, its preparation)."""
    if not path.is_file():
        return  # named by whoever reads it
    with reading(path) as f:
        block = f.read(1 << 16)
    nul = block.find(b"\0")
    if nul >= 0:
        raise _refusal(path, "nul", nul, block)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(block, final=False)  # a character cut at the end: later
    except UnicodeDecodeError as err:
        raise _refusal(path, "utf-8", err.start, block) from None


CHUNK_CHARS = 1 << 20  # characters of text tokenised at once (about 180k tokens of English)
WHITESPACE = re.compile(r"\s")  # what str.split() splits at (str.isspace), found in C however long the token


def read_tokens_text(path: str | Path) -> str:
    """The file's text, refused in one line when it holds no token."""
    text = read_text(path)
    if not text or text.isspace():
        raise LMBenchError(f"corpus file {path} holds no tokens: give a non-empty file")
    return text


def token_chunks(text: str, size: int | None = None) -> Iterator[list[str]]:
    """text.split(), in consecutive lists of the tokens of about `size` characters (cut at whitespace)."""
    size = size or CHUNK_CHARS
    start = 0
    while start < len(text):
        space = WHITESPACE.search(text, min(start + size, len(text)))  # the token across the cut stays whole
        end = space.start() if space else len(text)
        yield text[start:end].split()
        start = end


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256 ("missing" for no file): what the cache keys and a
    run folder's corpus record (`corpora.cli`) hold of a text corpus's content."""
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    with reading(path) as f:
        for block in iter(lambda: f.read(READ_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def load_text(train: str | Path, valid: str | Path, test: str | Path, *, min_count: int | None = None,
              max_vocab: int | None = None, use_cache: bool = True) -> Corpus:
    _check_vocab_options(min_count, max_vocab)
    paths = dict(zip(SPLITS, (Path(train), Path(valid), Path(test))))
    for path in paths.values():
        check_text_start(path)
    digests = _refuse_same_files(paths)
    key = {"corpus": "text", "min_count": min_count, "max_vocab": max_vocab,
           "source": {s: f"{p.resolve()}:{digests[s]}" for s, p in paths.items()}}

    def build() -> Corpus:
        return _corpus({s: read_tokens_text(p) for s, p in paths.items()}, min_count, max_vocab,
                       {"source": {s: str(p) for s, p in paths.items()}})

    return _with_words(cached(key, build, use_cache=use_cache), paths["train"], min_count)


def _refuse_same_files(paths: dict[str, Path]) -> dict[str, str]:
    """One line when two of the splits are one file (a path, a link, a hard link) or files of the same
    content: a model scored on the text it was fitted on (or chosen on its test) measures nothing.
    Returns each split's `file_digest`."""
    digests = {split: file_digest(path) for split, path in paths.items()}
    for i, first in enumerate(SPLITS):
        for second in SPLITS[i + 1:]:
            a, b = paths[first], paths[second]
            if not (a.is_file() and b.is_file()):
                continue
            if os.path.samefile(a, b) or digests[first] == digests[second]:
                how = "is the same file as" if os.path.samefile(a, b) else "has the same content as"
                raise LMBenchError(f"--{second} {b} {how} --{first} {a}: a model would be "
                                   f"{'scored on the text it was fitted on' if first == 'train' else 'chosen on its own test'}; "
                                   "give three different files (or one file to cut by lines, --corpus-file F)")
    return digests


def _check_vocab_options(min_count: int | None, max_vocab: int | None) -> None:
    if min_count is not None and min_count < 1:
        raise LMBenchError(f"--min-count must be at least 1, not {min_count}")
    if max_vocab is not None and max_vocab < 2:
        raise LMBenchError(f"--vocab-size must be at least 2 (<unk> and one word), not {max_vocab}")


def _with_words(corpus: Corpus, train: str | Path, min_count: int | None) -> Corpus:
    """The corpus, refused in one line when its vocabulary keeps no word (`corpora.corpus.refuse_wordless`)."""
    count = corpus.info.get("min_count", min_count)
    return refuse_wordless(corpus, (), f"no word of {train} is seen {count} times or more (--min-count {count}"
                           f"{'' if min_count is not None else ', the default'})",
                           "give --min-count 1 (every train word), or a train file whose words recur")


def default_min_count(train_counts: Counter) -> int:
    """The min_count of a vocabulary not given one (module docstring): 1 when train holds its own
    `<unk>`, else 2."""
    return 1 if train_counts[UNK] else 2


def _corpus(texts: dict[str, str], min_count: int | None, max_vocab: int | None, info: dict) -> Corpus:
    """The corpus of three texts, vocabulary from train (min_count None: `default_min_count`, recorded
    in info), the raw word behind every <unk> kept; chunk by chunk (module docstring)."""
    counts = Counter()
    for tokens in token_chunks(texts["train"]):
        counts.update(tokens)
    min_count = info["min_count"] = default_min_count(counts) if min_count is None else min_count
    types = sorted(counts)
    vocab = Vocabulary.from_counts(types, [counts[t] for t in types], min_count=min_count, max_size=max_vocab)
    del counts, types
    ids, unk_words = {}, {}
    for s in SPLITS:
        parts = []
        for tokens in token_chunks(texts[s]):
            encoded = vocab.encode(tokens)
            unknown = np.empty(np.count_nonzero(encoded == vocab.unk_id), dtype=object)  # (a str array would be as
            unknown[:] = [tokens[i] for i in np.flatnonzero(encoded == vocab.unk_id)]  # wide as its longest word)
            parts.append((encoded, unknown))
        ids[s] = np.concatenate([np.zeros(0, np.int32)] + [e for e, _ in parts])
        unk_words[s] = np.concatenate([np.zeros(0, object)] + [u for _, u in parts])
    return Corpus("text", vocab, info=info, unk_words=unk_words, **ids)


def write_text(corpus: Corpus, directory: str | Path, first: tuple[int, int, int] | None = None) -> dict[str, Path]:
    """The first `first` tokens (None: all) of train, valid and test of a prepared corpus (all of a shorter split)
    as DIRECTORY/{train,valid,test}.txt: its words separated by spaces, <unk> literal, one line; what
    `load_text` reads back to the same streams (how results/ap89-1m's corpus is cut from AP 1989)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    words = np.asarray(corpus.vocab.words, dtype=object)
    paths = {}
    for split, count in zip(SPLITS, first or (None,) * len(SPLITS)):
        paths[split] = directory / f"{split}.txt"
        atomic_write_text(paths[split], " ".join(words[corpus.split(split)[:count]]) + "\n")
    return paths


def file_lines(text: str) -> list[str]:
    """The lines of a file's text as `wc -l`, `sed -n` and editors count them: cut at "\n" only (not at
    the form feeds, U+2028 or NEL that str.splitlines also cuts at), a last line without "\n" one too."""
    return list(stream_lines([text]))


def stream_lines(blocks: Iterable[str]) -> Iterator[str]:
    """The lines of a text given a block at a time (`file_lines`), each as soon as its block ends it."""
    pending: list[str] = []  # the line the blocks so far leave open, in pieces
    for block in blocks:
        *ended, rest = block.split("\n")
        if ended:
            yield "".join(pending) + ended[0]
            yield from ended[1:]
            pending = []
        pending.append(rest)
    if "".join(pending):
        yield "".join(pending)


def line_cut(lines: int, split: tuple[float, float, float]) -> dict[str, list[int]]:
    """The lines [start, stop) of train, valid and test: contiguous, in that order, the boundaries at
    round(cumulative fraction * lines)."""
    first = round(split[0] * lines)
    second = round((split[0] + split[1]) * lines)
    return {"train": [0, first], "valid": [first, second], "test": [second, lines]}


def load_text_file(path: str | Path, split: tuple[float, float, float] = (0.8, 0.1, 0.1), *, min_count: int | None = None,
                   max_vocab: int | None = None, use_cache: bool = True) -> Corpus:
    """One file cut by lines into train, valid and test (`line_cut`); the cut is in `info["cut"]`."""
    _check_vocab_options(min_count, max_vocab)
    path = Path(path)
    check_text_start(path)
    key = {"corpus": "text-file", "min_count": min_count, "max_vocab": max_vocab, "split": list(split),
           "source": f"{path.resolve()}:{file_digest(path)}"}

    def build() -> Corpus:
        lines = file_lines(read_text(path))
        cut = line_cut(len(lines), split)
        texts = {s: "\n".join(lines[start:stop]) for s, (start, stop) in cut.items()}
        count, lines = len(lines), None  # the texts hold them
        empty = [s for s in SPLITS if not texts[s] or texts[s].isspace()]
        if empty:
            raise LMBenchError(f"{path}: cut {'/'.join(f'{100 * f:g}' for f in split)} by lines ({count} "
                               f"lines), {' and '.join(empty)} {'hold' if len(empty) > 1 else 'holds'} no tokens: give a file of more lines (each "
                               f"part needs text), another --split, or three files (--train, --valid, --test)")
        return _corpus(texts, min_count, max_vocab,
                       {"source": str(path), "cut": {"split": list(split), "lines": cut}})

    return _with_words(cached(key, build, use_cache=use_cache), f"the train part of {path}", min_count)


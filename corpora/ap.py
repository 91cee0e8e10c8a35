"""AP News, the paper's second corpus (Bengio et al. 2003, section 4.1), from TREC/Tipster SGML.

The paper used AP News 1995-96: 13,994,528 training, 963,138 validation and 963,071 test words,
148,721 distinct words reduced to |V| = 17,964 by lower-casing, mapping numbers and proper nouns to
special symbols and merging rare words. We apply the same recipe to whatever AP files we are given
(here AP 1989, TREC disk 1). The rules, in the order they are applied:

Reading. Every plain file directly in the folder, in file-name order (TREC names files `apYYMMDD`,
so name order is DOCNO order; a file whose DOCNOs start before the previous file's end is logged
as a warning and still taken in name order); gzip files are recognised by their magic bytes,
whatever their name. A file without a `<DOC>` element (a `readme`) is skipped with a log line. A
damaged file (empty, a gzip stream cut short or failing its CRC, a `<DOC>` without its `</DOC>` or
its `<DOCNO>`) stops the preparation with one line naming it, since leaving it out would change the
splits silently; with `skip_bad_files` (`--skip-bad-files`) it is left out with a warning instead,
and the cache entry is kept apart from the one of the full folder.
Bytes are decoded as latin-1 (AP is ASCII; latin-1 never fails) and SGML entities (`&amp;`) are
unescaped. Within a file, documents are sorted by `<DOCNO>`; only the `<TEXT>` elements of a
document are read (headlines, bylines, datelines and notes are not), all of them in order; a
document without `<TEXT>` is dropped.

Sentences. NLTK's TreebankWordTokenizer expects one sentence at a time, so the text is cut first:
a paragraph starts at a line that begins with whitespace (AP indents paragraphs); inside a
paragraph a sentence ends after `.`, `?` or `!` (and any closing quotes or bracket) followed by
whitespace and then an upper-case letter, a digit or an opening quote or bracket; a `.` also ends
one before closing quotes and whitespace whatever follows (`valid.'' _ British`), and before
whitespace and an ellipsis or a quote (`baby. ... All`, `council. `` (But`), since the Treebank
tokenizer splits only a string's final period off its word and would leave `valid.` and `baby.` as
words (PIPELINE_VERSION 2; version 1 left 0.015% of AP's tokens so glued). All this unless the word
ending in `.` is an abbreviation: a single letter (`J.`), a dotted acronym (`U.S.`, `a.m.`) or one
of ABBREVIATIONS (`Mr.`, `Gen.`, `Calif.`, `Jan.`, ...). Such a sentence ending is then missed (a
sentence ending in `U.S.` runs into the next); that only costs the next word its sentence-initial
flag. The sentence-initial word is the first token of a sentence that holds a letter (so after an
opening quote: "``The" makes "The" initial).

Tokens, in this order (each token becomes exactly one symbol):
  1. `<num>`: a token holding a digit that, once digits and `.,:/-'%+` are removed, is empty or one
     of the suffixes s, st, nd, rd, th: `1,000`, `3.5`, `1966-67`, `10:30`, `'60s`, `1960s`, `21st`.
     (`B-52` holds letters: it is not a number.)
  2. `<proper>`: proper nouns are found before lower-casing, from TRAIN statistics only. A word
     (its lower-case form) is a proper noun when it is capitalised (first character upper case) in
     >= PROPER_THRESHOLD = 90% of its non-sentence-initial occurrences in train. Every occurrence of
     such a word, sentence-initial or not, capitalised or not, becomes `<proper>`. A word never seen
     in a non-initial train position has no statistics: a token of it becomes `<proper>` when it is
     capitalised and not sentence-initial. The pronoun "I" is never a proper noun.
  3. everything else is lower-cased. Punctuation is kept as Treebank gives it (`,`, `.`, ``` `` ```,
     `''`, `$`, `%`, `'s`, `n't`, ...).
  4. after each document's last token, the document-end marker `</d>` (as Brown has): it tells a
     model that the next words start a new story; it counts as a token, like every marker.

Vocabulary. `<unk>`, `<num>`, `<proper>`, `</d>`, then the most frequent train symbols (ties in
alphabetical order) up to `vocab_size` symbols in all (DEFAULT_VOCAB_SIZE = 17,964, the paper's
|V|); every other symbol becomes `<unk>`.

Splits. Whole documents in order: train until it holds at least PAPER_SPLIT[0] tokens, then valid
until train + valid holds at least PAPER_SPLIT[0] + PAPER_SPLIT[1], then test likewise; files past
the last one needed are not read, documents past the test split are unused. A folder too small for
these sizes gets them scaled down in proportion (each split keeps at least one document); fewer
than three documents is an error.

Preparation tokenises files in worker processes (`workers`, default min(2, CPUs); one, this process,
for a folder of fewer than POOL_MIN_FILES files, since a worker spends about 2 s importing nltk) streamed
in file order, keeps only int32 type ids, a sentence-initial flag per token and document lengths, and is
cached (corpora.corpus.cached) under the folder's fingerprint (file names, sizes, mtimes), the
options and PIPELINE_VERSION.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import logging
import multiprocessing
import os
import re
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from corpora.corpus import Corpus, cached
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile
from lmbench.progress import progress_bar

log = logging.getLogger(__name__)

NUMBER = "<num>"
PROPER = "<proper>"
DOCUMENT_END = "</d>"
SPECIALS = (UNK, NUMBER, PROPER, DOCUMENT_END)
DEFAULT_VOCAB_SIZE = 17_964
PAPER_SPLIT = (13_994_528, 963_138, 963_071)  # train, valid, test tokens (Bengio et al. 2003, 4.1)
PROPER_THRESHOLD = 0.9
PIPELINE_VERSION = 2  # bump when a rule changes: the cache key includes it
POOL_MIN_FILES = 8  # fewer files are tokenised in this process (a worker process takes seconds to start)

FIX = "pass --ap-dir or set AP_DIR to the folder of TREC/Tipster AP SGML files (plain or .gz)"
DAMAGE_FIX = ("replace it with a good copy, move it out of the folder, or pass --skip-bad-files to leave it "
              "out (the splits then change)")

ABBREVIATIONS = frozenset("""
mr mrs ms dr st jr sr gen sen rep gov lt col maj capt sgt adm cmdr rev prof pres supt
inc corp co ltd bros no nos mt ft vs etc
jan feb mar apr jun jul aug sep sept oct nov dec
ala ariz ark calif colo conn del fla ga ill ind kan kans ky la md mass mich minn miss mo mont
neb nev okla ore pa tenn tex va vt wash wis wyo
""".split())

_DOC = re.compile(r"<DOC>(.*?)</DOC>", re.S)
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S)
_TEXT = re.compile(r"<TEXT>(.*?)</TEXT>", re.S)
_PARAGRAPH = re.compile(r"\n[ \t]+")
# a candidate sentence end: the punctuation, closing quotes/bracket, whitespace, then what opens
# the next sentence (looked ahead, not consumed)
_SENTENCE_END = re.compile(r"[.?!](?:''|'|\"|\))*\s+(?=(?:``|`|\"|\()?[A-Z0-9])"  # then a capital or digit
                           r"|\.(?:''|'|\"|\))+\s+"  # a period inside closing quotes: whatever follows
                           r"|\.\s+(?=\.\.\.|``|')")  # a period, then an ellipsis or a quote
_LAST_WORD = re.compile(r"(\S+)$")
_INITIAL_OR_ACRONYM = re.compile(r"[A-Za-z](?:\.[A-Za-z])*\.")
_NUMBER_JUNK = re.compile(r"[\d.,:/'%+-]")
_NUMBER_SUFFIXES = frozenset(("", "s", "st", "nd", "rd", "th"))
_LETTER = re.compile(r"[A-Za-z]")

_tokenizer = None


def _tokenize(sentence: str) -> list[str]:
    global _tokenizer
    if _tokenizer is None:
        from nltk.tokenize import TreebankWordTokenizer
        _tokenizer = TreebankWordTokenizer()
    return _tokenizer.tokenize(sentence)


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (whitespace already collapsed), by the rule of the docstring."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        if paragraph[match.start()] == ".":
            word = _LAST_WORD.search(paragraph, start, match.start() + 1).group(1).lstrip("`'\"(")
            if _INITIAL_OR_ACRONYM.fullmatch(word) or word[:-1].lower() in ABBREVIATIONS:
                continue
        sentences.append(paragraph[start:match.end()].rstrip())
        start = match.end()
    if paragraph[start:].strip():
        sentences.append(paragraph[start:].strip())
    return sentences


def is_number(token: str) -> bool:
    """Rule 1 of the docstring: digits with number punctuation, maybe an s/st/nd/rd/th suffix."""
    return any(c.isdigit() for c in token) and _NUMBER_JUNK.sub("", token).lower() in _NUMBER_SUFFIXES


def tokenize_text(text: str) -> tuple[list[str], list[bool]]:
    """Case-preserved Treebank tokens of one <TEXT> body and their sentence-initial flags."""
    tokens: list[str] = []
    initial: list[bool] = []
    for paragraph in _PARAGRAPH.split(html.unescape(text)):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        for sentence in split_sentences(paragraph):
            words = _tokenize(sentence)
            first = next((i for i, w in enumerate(words) if _LETTER.search(w)), -1)
            tokens.extend(words)
            initial.extend(i == first for i in range(len(words)))
    return tokens, initial


@dataclass
class FileTokens:
    """One file's documents, tokenised: `types[ids]` is the token stream (documents in DOCNO
    order, each ended by `</d>`), `initial` flags sentence-initial tokens, `doc_lengths` counts
    each document's tokens with its `</d>`."""
    name: str
    types: list[str]
    ids: np.ndarray          # (tokens,) int32 index into types
    initial: np.ndarray      # (tokens,) bool
    doc_lengths: np.ndarray  # (documents,) int64
    docnos: list[str]
    without_text: int        # documents dropped for having no <TEXT>


def _damaged(path: Path, problem: str) -> DamagedFile:
    return DamagedFile(path, problem, "AP file", DAMAGE_FIX)


def read_sgml(path: Path) -> str | None:
    """The file's text, or None when it holds no <DOC> element; a damaged file raises DamagedFile."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise _damaged(path, f"{err} (a gzip file cut short or altered?)") from None
    if not raw:
        raise _damaged(path, "it is empty")
    text = raw.decode("latin-1")
    opened, closed = text.count("<DOC>"), text.count("</DOC>")
    if opened != closed:
        raise _damaged(path, f"it holds {opened} <DOC> but {closed} </DOC> tags (cut short?)")
    return text if opened else None


def tokenize_file(path: str | Path) -> FileTokens | None:
    """Read and tokenise one file (the work of one worker process); None if it is not SGML."""
    path = Path(path)
    text = read_sgml(path)
    if text is None:
        return None
    documents = []
    without_text = 0
    for number, doc in enumerate(_DOC.findall(text), 1):
        docno = _DOCNO.search(doc)
        if docno is None:
            raise _damaged(path, f"its document {number} has no <DOCNO> (documents are ordered by DOCNO)")
        bodies = _TEXT.findall(doc)
        if not bodies:
            without_text += 1
            continue
        documents.append((docno.group(1), bodies))
    documents.sort(key=lambda d: d[0])
    tokens: list[str] = []
    initial: list[bool] = []
    lengths = []
    for _, bodies in documents:
        before = len(tokens)
        for body in bodies:
            words, flags = tokenize_text(body)
            tokens.extend(words)
            initial.extend(flags)
        tokens.append(DOCUMENT_END)
        initial.append(False)
        lengths.append(len(tokens) - before)
    codes, uniques = pd.factorize(pd.Series(tokens, dtype=object), sort=False)
    return FileTokens(path.name, uniques.tolist(), codes.astype(np.int32), np.array(initial, dtype=bool),
                      np.array(lengths, dtype=np.int64), [d[0] for d in documents], without_text)


def _tokenize_or_damage(path: str | Path) -> FileTokens | DamagedFile | None:
    """tokenize_file, with a damaged file returned rather than raised (so that the caller decides,
    after the files before it, whether to stop or skip it)."""
    try:
        return tokenize_file(path)
    except DamagedFile as damage:
        return damage


def source_files(directory: str | Path) -> list[Path]:
    """The candidate files of the folder in name order; a missing or empty folder is an error."""
    directory = Path(directory)
    if not directory.is_dir():
        what = "is not a folder" if directory.exists() else "does not exist"
        raise LMBenchError(f"AP directory {directory} {what}: {FIX}")
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise LMBenchError(f"AP directory {directory} holds no files: {FIX}")
    return files


def fingerprint(files: list[Path]) -> str:
    """A short hash of the files' names, sizes and modification times."""
    stats = [f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in files]
    return hashlib.sha256("\n".join(stats).encode()).hexdigest()[:16]


@dataclass
class RawStream:
    """Documents of the files read, as global type ids: what the splits are cut from."""
    types: list[str]         # case-preserved token strings
    ids: np.ndarray          # (tokens,) int32
    initial: np.ndarray      # (tokens,) bool
    doc_lengths: np.ndarray  # (documents,) int64
    docnos: list[str]
    files_read: int
    bad_files: list[str]     # damaged files left out (skip_bad_files)


def read_stream(files: list[Path], sizes: tuple[int, int, int], workers: int,
                skip_bad_files: bool = False) -> RawStream:
    """Tokenise files in order until their documents fill the splits (or the files run out); a damaged
    file stops the reading, or is left out with a warning when `skip_bad_files`."""
    index: dict[str, int] = {}
    ids, initial, lengths, docnos = [], [], [], []
    total, files_read, skipped, bad, without_text = 0, 0, [], [], 0
    pool = None
    if workers > 1:
        # fork where there is one: no re-import of the caller's main module, as spawn needs. An executor,
        # not multiprocessing.Pool: a worker that dies raises BrokenProcessPool, and stopping early
        # cancels the files not started (Pool.terminate could hang, seen once in the test suite).
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
        results = pool.map(_tokenize_or_damage, [str(f) for f in files])
    else:
        results = map(_tokenize_or_damage, files)
    try:
        with progress_bar(total=len(files), desc="AP files", unit="file") as progress:
            for path, result in zip(files, results):
                progress.update()
                files_read += 1
                if result is None:
                    skipped.append(path.name)
                    continue
                if isinstance(result, DamagedFile):
                    if not skip_bad_files:
                        raise result
                    log.warning("skipping the damaged AP file %s (--skip-bad-files): %s", path, result.problem)
                    bad.append(path.name)
                    continue
                if docnos and result.docnos and result.docnos[0] < docnos[-1]:
                    log.warning("%s starts at DOCNO %s, before the previous file's last (%s): documents "
                                "are taken file by file, in file-name order", path.name,
                                result.docnos[0], docnos[-1])
                # global ids: one dictionary lookup per distinct type of the file, then a gather
                to_global = np.fromiter((index.setdefault(t, len(index)) for t in result.types),
                                        dtype=np.int32, count=len(result.types))
                ids.append(to_global[result.ids])
                initial.append(result.initial)
                lengths.append(result.doc_lengths)
                docnos.extend(result.docnos)
                without_text += result.without_text
                total += len(result.ids)
                progress.set_postfix(tokens=f"{total:,}")
                if total >= sum(sizes) and documents_suffice(np.concatenate(lengths), sizes):
                    break
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    if skipped:
        log.info("skipped %d file(s) without <DOC> elements: %s", len(skipped), ", ".join(skipped[:5]))
    if without_text:
        log.info("dropped %d document(s) without <TEXT>", without_text)
    if not docnos:
        raise LMBenchError(f"no SGML documents with <TEXT> in {files[0].parent}: {FIX}")
    log.info("read %d files: %d documents, %d tokens", files_read, len(docnos), total)
    return RawStream(list(index), np.concatenate(ids), np.concatenate(initial), np.concatenate(lengths),
                     docnos, files_read, bad)


def _document_counts(ends: np.ndarray, targets: np.ndarray) -> tuple[int, int, int]:
    """Documents ending train, valid, test: the first document end >= each cumulative target,
    each split at least one document more than the one before."""
    counts = np.searchsorted(ends, targets, side="left") + 1
    train = max(int(counts[0]), 1)
    valid = max(int(counts[1]), train + 1)
    return train, valid, max(int(counts[2]), valid + 1)


def documents_suffice(doc_lengths: np.ndarray, sizes: tuple[int, int, int]) -> bool:
    """Whether these documents fill the three splits, so that no further file need be read."""
    ends = np.cumsum(doc_lengths)
    return len(ends) >= 3 and ends[-1] >= sum(sizes) and \
        _document_counts(ends, np.cumsum(sizes))[2] <= len(ends)


def split_documents(doc_lengths: np.ndarray, sizes: tuple[int, int, int]) -> tuple[int, int, int]:
    """How many documents end train, valid and test: each split takes whole documents until the
    cumulative token count reaches its cumulative target; targets are scaled down in proportion
    when the documents hold fewer tokens than asked, and each split keeps at least one document."""
    n = len(doc_lengths)
    if n < 3:
        raise LMBenchError(f"only {n} document(s) with text: at least 3 are needed (one per split); "
                           f"{FIX} holding more documents")
    ends = np.cumsum(doc_lengths)
    targets = np.cumsum(sizes).astype(np.float64)
    if ends[-1] < targets[-1]:
        log.warning("the documents hold %d tokens, fewer than the %d asked: split sizes scaled down "
                    "in proportion", ends[-1], int(targets[-1]))
        targets *= ends[-1] / targets[-1]
    train, valid, test = _document_counts(ends, targets)
    if test > n:  # the documents ran out: give the last ones back, one per split at least
        test = n
        valid = min(valid, n - 1)
        train = min(train, valid - 1)
    return train, valid, test


def proper_noun_symbols(types: list[str], train_ids: np.ndarray, train_initial: np.ndarray):
    """Rules 1-3 of the docstring as two lookup tables over case-preserved types, plus the symbol
    strings they index: symbol of a token = (initial_table if sentence-initial else other_table)[type].
    """
    lower_index: dict[str, int] = {}
    lower_of = np.fromiter((lower_index.setdefault(t.lower(), len(lower_index)) for t in types),
                           dtype=np.int64, count=len(types))  # (types,)
    symbols = list(lower_index) + [NUMBER, PROPER]
    number_id, proper_id = len(lower_index), len(lower_index) + 1
    capitalised = np.fromiter((t[:1].isupper() for t in types), dtype=bool, count=len(types))
    numeric = np.fromiter((is_number(t) for t in types), dtype=bool, count=len(types))

    # train statistics: non-initial occurrences of each lower-case form, and how many capitalised
    other = train_ids[~train_initial]
    seen = np.bincount(lower_of[other], minlength=len(symbols))
    upper = np.bincount(lower_of[other], weights=capitalised[other], minlength=len(symbols))
    proper = (seen > 0) & (upper >= PROPER_THRESHOLD * seen)
    pronoun = lower_of == lower_index.get("i", -1)  # (types,) the pronoun I is never proper
    proper_type = proper[lower_of] & ~pronoun  # (types,) by the train statistics
    guessed = (seen == 0)[lower_of] & capitalised & ~pronoun  # (types,) no statistics: by the token

    initial_table = np.where(proper_type, proper_id, lower_of)  # (types,) symbol when initial
    other_table = np.where(proper_type | guessed, proper_id, lower_of)  # (types,) symbol otherwise
    initial_table[numeric] = number_id
    other_table[numeric] = number_id
    log.info("proper nouns: %d of the %d lower-case forms seen in train", int(proper.sum()),
             int((seen > 0).sum()))
    return symbols, initial_table, other_table


def build_ap(files: list[Path], *, vocab_size: int, sizes: tuple[int, int, int], workers: int,
             skip_bad_files: bool = False) -> Corpus:
    """Read, tokenise, map and split: the pipeline of the module docstring."""
    raw = read_stream(files, sizes, workers, skip_bad_files)
    n_train, n_valid, n_test = split_documents(raw.doc_lengths, sizes)
    ends = np.concatenate([[0], np.cumsum(raw.doc_lengths)])
    train_end, valid_end, test_end = (int(ends[n]) for n in (n_train, n_valid, n_test))

    symbols, initial_table, other_table = proper_noun_symbols(
        raw.types, raw.ids[:train_end], raw.initial[:train_end])
    used = raw.ids[:test_end]
    stream = np.where(raw.initial[:test_end], initial_table[used], other_table[used])  # (tokens,) symbol ids
    counts = np.bincount(stream[:train_end], minlength=len(symbols))
    vocab = Vocabulary.from_counts(np.array(symbols, dtype=object), counts, max_size=vocab_size,
                                   reserved=SPECIALS[1:])
    to_vocab = np.fromiter((vocab.id(s) for s in symbols), dtype=np.int32, count=len(symbols))
    ids = to_vocab[stream]
    if len(vocab) < vocab_size:
        log.warning("train has only %d distinct symbols: |V| = %d < %d", len(vocab) - 1, len(vocab),
                    vocab_size)
    info = {
        "source": str(files[0].parent.resolve()),
        "files_read": raw.files_read,
        "documents": {"train": n_train, "valid": n_valid - n_train, "test": n_test - n_valid,
                      "unused": len(raw.docnos) - n_test},
        "docnos": {"train": [raw.docnos[0], raw.docnos[n_train - 1]],
                   "valid": [raw.docnos[n_train], raw.docnos[n_valid - 1]],
                   "test": [raw.docnos[n_valid], raw.docnos[n_test - 1]]},
        "train_symbol_types": int(np.count_nonzero(counts)),
    }
    if raw.bad_files:
        info["skipped_bad_files"] = raw.bad_files
    return Corpus("ap", vocab, ids[:train_end], ids[train_end:valid_end], ids[valid_end:test_end], info=info)


def load_ap(directory: str | Path, *, vocab_size: int = DEFAULT_VOCAB_SIZE,
            split_sizes: tuple[int, int, int] = PAPER_SPLIT, use_cache: bool = True,
            workers: int | None = None, skip_bad_files: bool = False) -> Corpus:
    """AP News from a folder of TREC/Tipster SGML files, as a cached Corpus named "ap".
    `split_sizes`: train, valid, test tokens (default the paper's). `workers` (processes that
    tokenise; default min(2, CPUs), one below POOL_MIN_FILES files) does not change the result.
    `skip_bad_files`: leave a damaged file out with a warning rather than stop."""
    if vocab_size <= len(SPECIALS):
        raise LMBenchError(f"--vocab-size must exceed {len(SPECIALS)} (the symbols "
                           f"{', '.join(SPECIALS)} are always in), not {vocab_size}")
    sizes = tuple(int(s) for s in split_sizes)
    if len(sizes) != 3 or min(sizes) < 1:
        raise LMBenchError(f"split sizes must be three positive token counts, not {split_sizes}")
    files = source_files(directory)
    workers = workers or (min(2, os.cpu_count() or 1) if len(files) >= POOL_MIN_FILES else 1)
    key = {"corpus": "ap", "source": fingerprint(files), "files": len(files),
           "directory": str(Path(directory).resolve()), "vocab_size": vocab_size, "split_sizes": sizes,
           "pipeline": PIPELINE_VERSION}
    if skip_bad_files:  # what it reads may differ from the full folder's: another cache entry
        key["skip_bad_files"] = True
    return cached(key, lambda: build_ap(files, vocab_size=vocab_size, sizes=sizes, workers=workers,
                                        skip_bad_files=skip_bad_files), use_cache=use_cache)

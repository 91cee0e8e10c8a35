"""Corpus: a Vocabulary and three int32 id streams, cached on disk keyed by source and options.

A cache entry proves it belongs to what asked for it: its meta.json holds the key's parts (the source
files' names, sizes or digests, and the options) and the length and SHA-256 of each file written with it;
an entry whose meta.json names other parts (another entry copied under this key), or whose files are not
the ones it names (one swapped in from another entry), is damaged: set aside and built again.

Brown and text corpora also keep the raw word behind every <unk> token (`unk_words`), for the
out-of-vocabulary initialisation of `neural.oov`."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from corpora.vocab import Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, WriteFailed, file_record, locked, read_checked, set_aside, write_checked

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
CACHE_FORMAT = 4  # bump when the on-disk layout or a pipeline's output changes (2: unk_words.npz; 3: its words
# packed as UTF-8 bytes and end offsets, `pack_words`; 4: meta.json names the key and the entry's files)


@dataclass
class Corpus:
    name: str
    vocab: Vocabulary
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    info: dict = field(default_factory=dict)  # source, options, preparation seconds, cache path
    # per split, the raw word of each <unk> token in stream order (object arrays of str); None: not kept
    unk_words: dict[str, np.ndarray] | None = None

    def split(self, name: str) -> np.ndarray:
        if name not in SPLITS:
            raise LMBenchError(f"unknown split {name!r}: use one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def stream_for(self, split: str, history: int | None = None) -> tuple[np.ndarray, int]:
        """The split preceded by the stream before it (all of it, or its last `history` tokens),
        and the index where the split starts: the input of LanguageModel.score."""
        target = self.split(split)
        before = [self.split(s) for s in SPLITS[: SPLITS.index(split)]]
        previous = np.concatenate(before) if before else np.zeros(0, dtype=np.int32)
        if history is not None:
            previous = previous[len(previous) - min(history, len(previous)):]
        return np.concatenate([previous, target]).astype(np.int32, copy=False), len(previous)

    def summary(self) -> dict:
        """Tokens and <unk> tokens per split, |V|, and the preparation facts."""
        unk = self.vocab.unk_id
        return {
            "corpus": self.name,
            "vocab_size": len(self.vocab),
            "tokens": {s: int(len(self.split(s))) for s in SPLITS},
            "unk_tokens": {s: int(np.count_nonzero(self.split(s) == unk)) for s in SPLITS},
            **self.info,
        }


def unk_rates(summary: dict) -> dict[str, float]:
    """The share of each split's tokens that are <unk>, from `Corpus.summary`'s counts."""
    return {s: summary["unk_tokens"][s] / summary["tokens"][s] for s in SPLITS}


UNK_RATIO = 2.0  # a held-out split's <unk> rate more than this times train's: text unlike train


def unk_warning(summary: dict) -> str | None:
    """One line when the held-out splits' <unk> does not stand for what train's does, else None:
    - no train token is <unk> but some held-out tokens are (a vocabulary of every train word,
      corpora.text): every model then prices <unk> by accident;
    - a held-out split's <unk> rate is more than UNK_RATIO times train's (held-out text unlike train,
      such as a file of mixed texts cut by lines): the minimum count makes train's rare words <unk> on
      the argument that held-out text is like train, which fails here, so <unk> weighs in the held-out
      perplexities far more than train taught the models."""
    rates = unk_rates(summary)
    if rates["train"] == 0:
        if not (rates["valid"] or rates["test"]):
            return None
        return (f"no train token is <unk> while {100 * rates['valid']:.1f}% of valid and {100 * rates['test']:.1f}% "
                "of test are: each model prices <unk> by accident (compare the perplexities without <unk>), or "
                "make the rare train words <unk> (--min-count 2 or more, or --vocab-size)")
    unlike = [split for split in ("valid", "test") if rates[split] > UNK_RATIO * rates["train"]]
    if not unlike:
        return None
    return (" and ".join(f"{split}'s <unk> rate {100 * rates[split]:.1f}%" for split in unlike)
            + f" {'is' if len(unlike) == 1 else 'are'} more than {UNK_RATIO:g} times train's "
            f"({100 * rates['train']:.1f}%): the held-out text is unlike train, so its perplexities weigh <unk> "
            "far more than train taught the models; compare the perplexities without <unk>, or cut the "
            "splits so that they are alike (e.g. shuffle the lines before --corpus-file)")


def refuse_wordless(corpus: Corpus, markers: tuple[str, ...], cause: str, fix: str) -> Corpus:
    """The corpus, unless its vocabulary keeps no word (<unk> and the corpus's `markers` alone): every word
    of every split is then <unk>, each model predicts the one symbol it always sees, and every perplexity
    is about 1.0, measuring nothing. Refused in one line: `cause`, the options that left no word, and `fix`."""
    if len(corpus.vocab) > 1 + len(markers):
        return corpus
    kept = ", ".join(corpus.vocab.words)
    raise LMBenchError(f"{cause}: the vocabulary would be {kept} alone, every word <unk> and every perplexity about "
                       f"1.0, measuring nothing; {fix}")


def cache_root() -> Path:
    """$LMBENCH_CACHE, else ~/.cache/lmbench."""
    return Path(os.environ.get("LMBENCH_CACHE") or Path.home() / ".cache" / "lmbench")


def cache_key(parts: dict) -> str:
    blob = json.dumps({"format": CACHE_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


CACHE_FIX = "it is prepared again when set aside (delete it to force that)"


def _key_text(key_parts: dict) -> dict:
    """The key's parts as meta.json keeps them (through JSON: tuples become lists, paths text)."""
    return json.loads(json.dumps(key_parts, sort_keys=True, default=str))


def save_corpus(corpus: Corpus, directory: Path, key_parts: dict) -> None:
    """Write the files, each with its record (lmbench.files.write_checked), into a temporary sibling folder,
    meta.json last, naming `key_parts` and the others' records; then rename it: a reader sees the whole
    entry or none."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=directory.name + ".tmp"))
    try:
        def write_ids(path: Path) -> None:
            with open(path, "wb") as out:
                np.savez(out, **{s: corpus.split(s).astype(np.int32) for s in SPLITS})

        write_checked(tmp / "ids.npz", write_ids)
        write_checked(tmp / "vocab.json", corpus.vocab.save)
        if corpus.unk_words is not None:
            def write_unk_words(path: Path) -> None:
                with open(path, "wb") as out:
                    np.savez(out, **{f"{s}_{part}": array for s, words in corpus.unk_words.items()
                                     for part, array in zip(("bytes", "ends"), pack_words(words))})

            write_checked(tmp / "unk_words.npz", write_unk_words)
        files = {name: file_record(tmp / name) for name in ENTRY_FILES if (tmp / name).exists()}
        meta = json.dumps({"name": corpus.name, "info": corpus.info, "key": _key_text(key_parts), "files": files},
                          indent=1)
        write_checked(tmp / "meta.json", lambda path: path.write_text(meta, encoding="utf-8"))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_ids(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as ids:
        splits = {s: ids[s] for s in SPLITS}
    if any(a.ndim != 1 or a.dtype != np.int32 for a in splits.values()):
        raise ValueError("its splits are not one-dimensional int32 id streams")
    return splits


def pack_words(words) -> tuple[np.ndarray, np.ndarray]:
    """Words as one uint8 array of their UTF-8 bytes and the int64 end offset of each: an .npz member
    as long as their text (a numpy str array is as wide as its longest word in every row)."""
    encoded = [word.encode() for word in words]
    return (np.frombuffer(b"".join(encoded), dtype=np.uint8),
            np.cumsum([len(word) for word in encoded], dtype=np.int64))


def unpack_words(data: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The object array of str of `pack_words`'s two arrays."""
    text, starts = data.tobytes(), np.concatenate([[0], ends[:-1]]).astype(np.int64)
    if ends.ndim != 1 or (len(ends) and (ends[-1] != len(text) or np.any(np.diff(ends) < 0) or ends[0] < 0)):
        raise ValueError("its word offsets do not cut its bytes")
    words = np.empty(len(ends), dtype=object)
    words[:] = [text[start:end].decode() for start, end in zip(starts.tolist(), ends.tolist())]
    return words


def _read_unk_words(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as words:
        return {s: unpack_words(words[f"{s}_bytes"], words[f"{s}_ends"]) for s in SPLITS}


ENTRY_FILES = ("ids.npz", "vocab.json", "unk_words.npz")  # what meta.json names by length and SHA-256


def _read_meta(path: Path) -> dict:
    meta = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not isinstance(meta.get("info"), dict):
        raise ValueError("it holds no corpus name and info")
    if not isinstance(meta.get("key"), dict) or not isinstance(meta.get("files"), dict):
        raise ValueError("it names no key and no files of its entry")
    return meta


def load_corpus(directory: Path, key_parts: dict) -> Corpus:
    """The corpus saved in `directory` for `key_parts`; a DamagedFile names the first file that does not read
    back, or that is not of this entry (module docstring)."""
    meta = read_checked(directory / "meta.json", _read_meta, what="corpus cache file", fix=CACHE_FIX)
    if meta["key"] != _key_text(key_parts):
        differs = sorted(key for key in {*meta["key"], *key_parts} if meta["key"].get(key) != _key_text(key_parts).get(key))
        raise DamagedFile(directory / "meta.json", f"it is the entry of other files or options ({', '.join(differs)} "
                          "differ from those asked for: an entry copied under another's name)", "corpus cache file",
                          CACHE_FIX)
    splits = read_checked(directory / "ids.npz", _read_ids, what="corpus cache file", fix=CACHE_FIX)
    vocab = Vocabulary.load(directory / "vocab.json")
    unk_words = None
    if (directory / "unk_words.npz").exists():
        unk_words = read_checked(directory / "unk_words.npz", _read_unk_words, what="corpus cache file",
                                 fix=CACHE_FIX)
    found = {name: file_record(directory / name) for name in ENTRY_FILES if (directory / name).exists()}
    if found != meta["files"]:  # (each file read as its record says: the records are not those of this entry)
        other = [name for name in ENTRY_FILES if found.get(name) != meta["files"].get(name)]
        raise DamagedFile(directory / other[0], "it is not the file its entry's meta.json names (a file of another "
                          "entry, one missing, or its record deleted)", "corpus cache file", CACHE_FIX)
    return Corpus(meta["name"], vocab, info=meta["info"], unk_words=unk_words, **splits)


def cached(key_parts: dict, build: Callable[[], Corpus], *, use_cache: bool = True) -> Corpus:
    """Load the corpus cached under a hash of `key_parts`, or build, cache and return it. A damaged
    entry is set aside with a warning and built again; a process that finds another one preparing
    the same entry waits for it, then loads its result."""
    if not use_cache:
        return _prepare(key_parts, build, None)
    directory = cache_root() / f"{key_parts['corpus']}-{cache_key(key_parts)}"
    with locked(directory):
        if directory.exists():
            started = time.perf_counter()
            try:
                corpus = load_corpus(directory, key_parts)
            except DamagedFile as damage:
                set_aside(directory, damage)
            else:
                corpus.info.update(load_seconds=round(time.perf_counter() - started, 3), cache=str(directory),
                                   from_cache=True)
                return corpus
        return _prepare(key_parts, build, directory)


def _prepare(key_parts: dict, build: Callable[[], Corpus], directory: Path | None) -> Corpus:
    """Build the corpus and save it in `directory` (None: nowhere)."""
    started = time.perf_counter()
    corpus = build()
    corpus.info.update(prepare_seconds=round(time.perf_counter() - started, 3), options=key_parts)
    if directory is not None:
        try:
            save_corpus(corpus, directory, key_parts)
            corpus.info["cache"] = str(directory)
        except (OSError, WriteFailed) as err:  # a full or read-only cache: the corpus is used uncached
            log.warning("could not write the corpus cache %s (%s); set LMBENCH_CACHE to a writable "
                        "folder to make the next load fast", directory, err)
    corpus.info["from_cache"] = False
    return corpus


def slice_corpus(corpus: Corpus, train: int, valid: int, test: int, *, min_count: int = 2) -> Corpus:
    """The first `train`, `valid`, `test` tokens of each split, over a smaller vocabulary: the words
    of the sliced train seen >= min_count times (the rest become <unk>). For quick runs and tests."""
    sliced = {"train": corpus.train[:train], "valid": corpus.valid[:valid], "test": corpus.test[:test]}
    counts = np.bincount(sliced["train"], minlength=len(corpus.vocab))
    counts[corpus.vocab.unk_id] = 0
    kept = np.flatnonzero(counts >= min_count)
    if not len(kept):  # (refuse_wordless: every perplexity of the slice would be 1.0)
        raise LMBenchError(f"the slice of the first {train} train tokens keeps no word seen {min_count} times or more: "
                           "its vocabulary would be <unk> alone, every perplexity about 1.0; run without --quick, "
                           "or give a corpus whose words recur within its first lines")
    kept = kept[np.lexsort((kept, -counts[kept]))]  # count descending, then old id
    new_id = np.zeros(len(corpus.vocab), dtype=np.int32)  # everything else -> <unk> (id 0)
    new_id[kept] = np.arange(1, len(kept) + 1, dtype=np.int32)
    vocab = Vocabulary([corpus.vocab.word(corpus.vocab.unk_id)] + corpus.vocab.decode(kept.tolist()))
    info = {"source": f"slice of {corpus.name}", "slice": {"train": train, "valid": valid, "test": test,
                                                           "min_count": min_count}}
    return Corpus(f"{corpus.name}-slice", vocab, info=info, **{s: new_id[ids] for s, ids in sliced.items()})

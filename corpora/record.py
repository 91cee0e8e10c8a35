"""A folder's record of its corpus (corpus.json): the options that name the corpus, each text file by its
path and content digest, AP's folder by its path. A run folder of `lmbench train --out` holds one (`lmbench
eval`, `neighbors` and `train --resume` read it when no corpus is named), and so does a reproduction's work
folder (`reports.running.pipeline`), with the slice of a quick run: what `reports.api.load` loads a saved model's
corpus and vocabulary from. `load_options` loads the corpus such options name, refusing in one line an
option its corpus does not take."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from corpora.corpus import SPLITS, Corpus, slice_corpus, unk_warning
from corpora.named import CORPORA, load_named
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_text, read_checked

log = logging.getLogger(__name__)

RECORD = "corpus.json"  # a run folder's record of its corpus (`write_record`)
OPTIONS = ("corpus", "train", "valid", "test", "corpus_file", "corpus_split", "min_count", "vocab_from", "ap_dir",
           "vocab_size", "skip_bad_files")  # what names a corpus (--no-cache only says how it is prepared)
FILES = ("train", "valid", "test", "corpus_file")  # a text corpus's files, recorded with their digests
# the options each corpus's pipeline takes (`corpora.named.load_named`); any other is refused, never ignored
TAKES = {"brown": ("min_count", "vocab_from"), "ap": ("ap_dir", "vocab_size", "skip_bad_files"),
         "text": (*FILES, "corpus_split", "min_count", "vocab_size")}


def load_options(options: dict, use_cache: bool = True) -> Corpus:
    """The corpus of `corpus_options`'s options, the text corpus's checked for conflicts first; the
    one-line warning of a vocabulary that leaves no train token <unk> (`unk_warning`), whatever the
    command."""
    corpus = _load_options(options, use_cache)
    warning = unk_warning(corpus.summary())
    if warning:
        log.warning(warning)
    return corpus


def _load_options(options: dict, use_cache: bool) -> Corpus:
    name, files = options["corpus"], [options.get(split) for split in SPLITS]
    if name != "text":
        stray = [f"--{key.replace('_', '-')}" for key in (*FILES, "corpus_split") if key in options]
        if stray:
            raise LMBenchError(f"{', '.join(stray)}: the files of a text corpus, not of {name}: add --corpus text "
                               "or drop them")
    ignored = [f"--{key.replace('_', '-')}" for key in OPTIONS[1:] if key in options and key not in TAKES[name]]
    if ignored:
        takes = ", ".join(f"--{key.replace('_', '-')}" for key in TAKES[name] if key not in (*FILES, "corpus_split"))
        raise LMBenchError(f"{', '.join(ignored)}: not {'an option' if len(ignored) == 1 else 'options'} of the {name} "
                           f"corpus, which takes {takes}: drop {'it' if len(ignored) == 1 else 'them'}")
    if name == "text":
        refuse_text_conflicts(options, "--corpus text")
    if name == "text" and options.get("corpus_file") is not None:
        from corpora.text import load_text_file
        return load_text_file(options["corpus_file"], tuple(options["corpus_split"]),
                              min_count=options.get("min_count"), max_vocab=options.get("vocab_size"),
                              use_cache=use_cache)
    return load_named(name, min_count=options.get("min_count"), vocab_from=options.get("vocab_from", "all"),
                      ap_dir=options.get("ap_dir"), vocab_size=options.get("vocab_size"),
                      skip_bad_files=options.get("skip_bad_files", False), use_cache=use_cache, files=tuple(files))


def refuse_text_conflicts(options: dict, command: str) -> None:
    """One line, before a text corpus is read, where the options naming its files (`FILES` and
    corpus_split, absent or None where not given) contradict each other or leave one out: --corpus-file
    beside any of the three files, --corpus-split without --corpus-file, fewer than the three; `command`
    names what needs them ("--corpus text", "reproduce text"). Every command's text corpus is checked here."""
    given = [f"--{split}" for split in SPLITS if options.get(split) is not None]
    if options.get("corpus_file") is not None:
        if given:
            raise LMBenchError(f"--corpus-file is cut into train, valid and test: drop {', '.join(given)} (or give "
                               "the three files without --corpus-file)")
    elif options.get("corpus_split") is not None:
        raise LMBenchError("--corpus-split cuts the one file of --corpus-file: drop it, or give --corpus-file F "
                           "instead of --train, --valid and --test")
    elif len(given) < len(SPLITS):
        missing = [f"--{split}" for split in SPLITS if options.get(split) is None]
        raise LMBenchError(f"{command} needs {', '.join(missing)}: give the three files of whitespace-separated "
                           "tokens, or one file to cut by lines, --corpus-file F")


def write_record(run: str | Path, options: dict) -> None:
    """run/corpus.json: how to load the corpus of `options` (`corpus_options`) again, each file by its
    absolute path and content digest (`corpora.text.file_digest`), AP's folder by its absolute path."""
    from corpora.text import file_digest
    record = {}
    for name, value in options.items():
        if name in FILES:
            record[name] = {"path": str(Path(value).resolve()), "sha256": file_digest(Path(value))}
        elif name == "ap_dir":
            record[name] = str(Path(value).resolve())
        else:
            record[name] = list(value) if name == "corpus_split" else value
    files = {name: record.pop(name) for name in SPLITS if name in record}  # the three files, together
    atomic_write_text(Path(run) / RECORD, json.dumps({**record, **({"files": files} if files else {})}, indent=1))


def corpus_digest(corpus: Corpus) -> str:
    """A hash of the token streams and the vocabulary: what every row of a work folder depends on (its corpus.json
    records it, `load_recorded` compares it)."""
    digest = hashlib.sha256(corpus.vocab.fingerprint().encode())
    for split in SPLITS:
        digest.update(np.ascontiguousarray(corpus.split(split), dtype=np.int32).tobytes())
    return digest.hexdigest()[:16]


def read_record(run: str | Path) -> dict | None:
    """The corpus record of run folder `run` (None: it has none, a run trained before records)."""
    path = Path(run) / RECORD
    if not path.exists():
        return None
    fix = ("restore the corpus.json `lmbench reproduce` wrote, or run that command again (its rows are cached), "
           "which writes it" if (Path(run) / "rows").is_dir() else
           "give the corpus options (--corpus ...) and delete it, or train the run again")
    record = read_checked(path, lambda p: json.loads(p.read_text(encoding="utf-8")), what="corpus record", fix=fix)
    problem = _record_problem(record)
    if problem:
        raise DamagedFile(path, problem, "corpus record", fix)
    return record


def _whole(value, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


# Each recorded option, what `write_record` writes of it: the values its command-line option takes
RECORDED_VALUES = {
    "min_count": ("a whole number >= 1", lambda v: _whole(v, 1)),
    "vocab_size": ("a whole number >= 1", lambda v: _whole(v, 1)),
    "corpus_split": ("three fractions", lambda v: isinstance(v, list) and len(v) == 3 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1 for x in v)),
    "vocab_from": ("all or train", lambda v: v in ("all", "train")),
    "ap_dir": ("a folder's path", lambda v: isinstance(v, str)),  # (a folder moved since: named where it is read)
    "skip_bad_files": ("true or false", lambda v: isinstance(v, bool)),
}
# A work folder's record also holds the slice of a quick run and the digest of the corpus its rows ran on
SLICE = ("train", "valid", "test", "min_count")
WORK_VALUES = {
    "slice": ("an object of " + ", ".join(SLICE) + ", each a whole number >= 1", lambda v: isinstance(v, dict) and
              set(v) == set(SLICE) and all(_whole(x, 1) for x in v.values())),
    "digest": ("16 hexadecimal digits, corpora.record.corpus_digest", lambda v: isinstance(v, str) and len(v) == 16
               and all(c in "0123456789abcdef" for c in v)),
}


def _record_problem(record) -> str | None:
    """What in a corpus record (as read) is not what `write_record` writes, or None: a corpus of CORPORA, its
    files' entries each a path and a digest, every other option a value its command-line option takes (a
    min_count of "abc" refused as --min-count refuses it)."""
    if not isinstance(record, dict) or record.get("corpus") not in CORPORA:
        return "it names no corpus"
    files = record.get("files", {})
    if not (isinstance(files, dict) and set(files) <= set(SPLITS)):
        return f"its files {files!r} are not an object of {', '.join(SPLITS)}"
    if not all(isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("sha256"), str)
               for entry in [*files.values(), *(record[name] for name in FILES if name in record)]):
        return "a file's entry lacks its path or digest"
    stray = sorted(set(record) - {*OPTIONS, "files", *WORK_VALUES})
    if stray:
        return f"its field {stray[0]!r:.40} is none of a corpus record's ({', '.join((*OPTIONS, 'files', *WORK_VALUES))})"
    for key, (takes, fine) in RECORDED_VALUES.items():
        if key in record and not fine(record[key]):
            return f"its {key} {record[key]!r:.60} is no value of --{key.replace('_', '-')} ({takes})"
    for key, (takes, fine) in WORK_VALUES.items():
        if key in record and not fine(record[key]):
            return f"its {key} {record[key]!r:.80} is not {takes}"
    return None


def recorded_options(record: dict, run: Path) -> dict:
    """The options of a corpus record, each file checked: there, and of the content it was trained on."""
    from corpora.text import file_digest
    entries = {**record.get("files", {}), **{name: record[name] for name in FILES if name in record}}
    options = {name: value for name, value in record.items() if name not in (*FILES, "files")}
    for name, entry in entries.items():
        path = Path(entry["path"])
        if not path.is_file():
            raise LMBenchError(f"the corpus file {path} that {run / RECORD} records is missing: put it back, or give "
                               "the corpus options (--corpus text --train A --valid B --test C, or --corpus-file F)")
        digest = file_digest(path)
        if digest != entry["sha256"]:
            raise LMBenchError(f"the corpus file {path} changed since the run in {run} was trained (SHA-256 "
                               f"{digest}, recorded {entry['sha256']}): restore it, or give the corpus options "
                               "explicitly")
        options[name] = path
    if "ap_dir" in options:
        options["ap_dir"] = Path(options["ap_dir"])
    return options


def _no_record(folder: Path) -> str:
    """The line of a folder without a corpus record, by what the folder is: a work folder (`lmbench reproduce`
    writes its record), the training folder of a work folder's network row (`nplm/ID-FINGERPRINT`, which has
    none: its work folder's record is its corpus's), or a run folder (`lmbench train --out` writes one beside
    its model; a run trained before the records has none)."""
    work, row = folder.resolve().parent.parent, folder.name.rsplit("-", 1)[0]
    if (folder / "rows").is_dir():
        return (f"{folder} holds no {RECORD}, the record of its corpus (it was made before work folders kept one): "
                "run its `lmbench reproduce` command again (its rows are cached), which writes it there")
    if folder.resolve().parent.name == "nplm" and (work / "rows" / f"{row}.json").is_file():
        return (f"{folder} is the training folder of row {row} of the work folder {work}, whose {RECORD} records "
                f"the corpus (`lmbench reproduce` writes it in the work folder, never in a row's training folder): "
                f"load the row from the work folder (lmbench.load({str(work)!r}, row={row!r}); lmbench score or "
                f"generate {work} --row {row})")
    return (f"{folder} holds no {RECORD}, the record of its corpus, which `lmbench train --out` writes beside a "
            "run's model (a run trained before the records has none): give its corpus options (lmbench eval "
            "--corpus ...), or train it again with `lmbench train --out`")


def load_recorded(folder: str | Path) -> Corpus:
    """The corpus the record of `folder` names (its files checked: there, of the content recorded), cut to
    the record's `slice` when it has one (a quick reproduction's: `corpora.corpus.slice_corpus`)."""
    record = read_record(folder)
    if record is None:
        raise LMBenchError(_no_record(Path(folder)))
    cut, digest = record.pop("slice", None), record.pop("digest", None)
    corpus = load_options(recorded_options(record, Path(folder)))
    if cut is not None:
        info = corpus.info.get("cut")
        corpus = slice_corpus(corpus, cut["train"], cut["valid"], cut["test"], min_count=cut["min_count"])
        if info:
            corpus.info["cut"] = info
    if digest is not None and corpus_digest(corpus) != digest:
        raise DamagedFile(Path(folder) / RECORD, f"it loads another corpus than the rows ran on (digest "
                          f"{corpus_digest(corpus)}, recorded {digest}: its slice or options were edited)",
                          "corpus record", "restore the corpus.json `lmbench reproduce` wrote, or run that command "
                          "again (its rows are cached), which writes it")
    return corpus

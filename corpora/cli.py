"""`lmbench corpus brown|ap|text`, and the corpus options every other subcommand shares; a run folder's
record of its corpus (corpus.json: the options that name it, each text file by its path and content
digest), which `lmbench eval`, `neighbors` and `train --resume` read when no corpus is named."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from corpora.corpus import SPLITS, Corpus, unk_warning
from corpora.named import CORPORA, load_named
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_text, read_checked
from lmbench.options import (COUNT_MAX, bounded, existing_directory, existing_file, integer, output_directory,
                             refuse_overwriting, split_fractions)

log = logging.getLogger(__name__)

AP_MIN_VOCAB = 5  # more than the four symbols of corpora.ap.SPECIALS (imported only to prepare AP)


RECORD = "corpus.json"  # a run folder's record of its corpus (`write_record`)
OPTIONS = ("corpus", "train", "valid", "test", "corpus_file", "corpus_split", "min_count", "vocab_from", "ap_dir",
           "vocab_size", "skip_bad_files")  # what names a corpus (--no-cache only says how it is prepared)
FILES = ("train", "valid", "test", "corpus_file")  # a text corpus's files, recorded with their digests
# the options each corpus's pipeline takes (`corpora.named.load_named`); any other is refused, never ignored
TAKES = {"brown": ("min_count", "vocab_from"), "ap": ("ap_dir", "vocab_size", "skip_bad_files"),
         "text": (*FILES, "corpus_split", "min_count", "vocab_size")}


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False, recorded: bool = False) -> None:
    """--corpus (or a positional name), plus each pipeline's options. `recorded`: a command given a run
    folder, whose corpus.json says which corpus the options left out name (`corpus_options`)."""
    if positional:
        parser.add_argument("corpus", choices=CORPORA, help="which corpus to prepare")
    else:
        parser.add_argument("--corpus", choices=CORPORA, default=None,
                            help="default: the run folder's (its corpus.json), else brown" if recorded else
                            "default: brown (text when --train or --corpus-file is given)")
    group = parser.add_argument_group("corpus options" + (" (left out: those the run folder's corpus.json "
                                                          "records)" if recorded else ""))
    group.add_argument("--train", type=existing_file,
                       help="text corpus: training file of whitespace-separated tokens")
    group.add_argument("--valid", type=existing_file, help="text corpus: validation file")
    group.add_argument("--test", type=existing_file, help="text corpus: test file")
    group.add_argument("--corpus-file", type=existing_file,
                       help="text corpus: instead of the three, one file cut by lines into train, valid and test "
                            "(contiguous, in that order; as `lmbench reproduce text --corpus-file`)")
    group.add_argument("--corpus-split", type=split_fractions, default=None,
                       help="with --corpus-file: the fractions of its lines for train, valid and test "
                            "(default 0.8,0.1,0.1)")
    group.add_argument("--min-count", type=integer(1), default=None,
                       help="keep words seen at least this often (brown: 4, the paper's rule; text: 2, or 1 where "
                            "train holds a literal <unk> of its own, corpora.text)")
    group.add_argument("--vocab-from", choices=("all", "train"), default=None,
                       help="brown: count the vocabulary threshold over the whole stream (the paper; default) "
                            "or over train only")
    group.add_argument("--ap-dir", type=existing_directory, default=None,
                       help="ap: folder of TREC/Tipster AP SGML files (plain or .gz); default $AP_DIR")
    group.add_argument("--vocab-size", type=integer(AP_MIN_VOCAB), default=None,
                       help="ap: vocabulary size, specials included (default 17964, the paper's); text: keep "
                            "at most this many of the most frequent words (default: every word of --min-count)")
    group.add_argument("--skip-bad-files", action="store_true",
                       help="ap: leave a damaged file of the folder out, with a warning, instead of stopping "
                            "(the splits then differ from the full folder's)")
    group.add_argument("--no-cache", action="store_true", help="prepare again, ignoring the cache")


def corpus_options(args: argparse.Namespace, run: str | Path | None = None) -> dict:
    """The options naming the corpus to load: those given on the command line, over what the record of
    the run folder `run` holds when it has one and the command names no other corpus (files given
    replace the record's files). The corpus's name is always there, AP's folder, and one file's cut."""
    given = {name: getattr(args, name) for name in OPTIONS if getattr(args, name, None) not in (None, False)}
    record = read_record(run) if run is not None else None
    options = given
    if record is not None and given.get("corpus", record["corpus"]) == record["corpus"]:
        recorded = recorded_options(record, Path(run))  # (an option its corpus ignored, recorded before it
        recorded = {k: v for k, v in recorded.items() if k == "corpus" or k in TAKES[record["corpus"]]}  # was refused)
        if any(name in given for name in FILES):
            recorded = {k: v for k, v in recorded.items() if k not in (*FILES, "corpus_split")}
        options = {**recorded, **given}
    if "corpus" not in options:
        options["corpus"] = "text" if any(name in options for name in FILES) else "brown"
    if "corpus_file" in options:
        options.setdefault("corpus_split", (0.8, 0.1, 0.1))
    if options["corpus"] == "ap" and "ap_dir" not in options and os.environ.get("AP_DIR"):
        options["ap_dir"] = Path(os.environ["AP_DIR"])
    return options


def load_corpus(args: argparse.Namespace, run: str | Path | None = None) -> Corpus:
    """The corpus the options name (`corpus_options`; `corpora.named.load_named`, or one file cut by lines)."""
    return load_options(corpus_options(args, run), use_cache=not getattr(args, "no_cache", False))


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
    if name == "text" and options.get("corpus_file") is not None:
        given = [f"--{split}" for split, path in zip(SPLITS, files) if path is not None]
        if given:
            raise LMBenchError(f"--corpus-file is cut into train, valid and test: drop {', '.join(given)} (or give "
                               "the three files without --corpus-file)")
        from corpora.text import load_text_file
        return load_text_file(options["corpus_file"], tuple(options["corpus_split"]),
                              min_count=options.get("min_count"), max_vocab=options.get("vocab_size"),
                              use_cache=use_cache)
    elif name == "text" and "corpus_split" in options:
        raise LMBenchError("--corpus-split cuts the one file of --corpus-file: drop it, or give --corpus-file F "
                           "instead of --train, --valid and --test")
    elif name == "text":
        missing = [f"--{split}" for split, path in zip(SPLITS, files) if path is None]
        if missing:
            raise LMBenchError(f"--corpus text needs {', '.join(missing)}: give the three files of "
                               "whitespace-separated tokens, or one file to cut by lines, --corpus-file F")
    return load_named(name, min_count=options.get("min_count"), vocab_from=options.get("vocab_from", "all"),
                      ap_dir=options.get("ap_dir"), vocab_size=options.get("vocab_size"),
                      skip_bad_files=options.get("skip_bad_files", False), use_cache=use_cache, files=tuple(files))


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


def read_record(run: str | Path) -> dict | None:
    """The corpus record of run folder `run` (None: it has none, a run trained before records)."""
    path = Path(run) / RECORD
    if not path.exists():
        return None
    fix = "give the corpus options (--corpus ...) and delete it, or train the run again"
    record = read_checked(path, lambda p: json.loads(p.read_text()), what="corpus record", fix=fix)
    problem = _record_problem(record)
    if problem:
        raise DamagedFile(path, problem, "corpus record", fix)
    return record


def _record_problem(record) -> str | None:
    """What in a corpus record (as read) is not what `write_record` writes, or None: a corpus of CORPORA, its
    files entries of a path and a digest, every other option a value its command-line option takes (checked by
    that option's own type: a min_count of "abc" is refused as --min-count would refuse it)."""
    if not isinstance(record, dict) or record.get("corpus") not in CORPORA:
        return "it names no corpus"
    files = record.get("files", {})
    if not (isinstance(files, dict) and set(files) <= set(SPLITS)):
        return f"its files {files!r} are not an object of {', '.join(SPLITS)}"
    if not all(isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("sha256"), str)
               for entry in [*files.values(), *(record[name] for name in FILES if name in record)]):
        return "a file's entry lacks its path or digest"
    parser = argparse.ArgumentParser()
    add_corpus_options(parser)
    for action in parser._actions:  # (each option's own type and choices)
        value = record.get(action.dest)
        if action.dest in (*FILES, "corpus", "help") or action.dest not in record:
            continue
        if action.dest == "ap_dir":  # (a folder moved since is named missing where it is read)
            fine = isinstance(value, str)
        elif action.type is None and action.choices is None:  # a flag
            fine = isinstance(value, bool)
        else:
            text = ",".join(map(str, value)) if action.dest == "corpus_split" and isinstance(value, list) else value
            try:
                fine = isinstance(text, str if action.dest == "corpus_split" else (str, int)) and not isinstance(
                    text, bool) and (action.choices is None or text in action.choices) and (
                    action.type is None or action.type(str(text)) is not None)
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                fine = False
        if not fine:
            return f"its {action.dest} {value!r} is no value of {action.option_strings[0]}"
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


def register(subparsers) -> None:
    parser = subparsers.add_parser("corpus", help="prepare a corpus and print its statistics")
    add_corpus_options(parser, positional=True)
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument("--write-text", type=output_directory, metavar="DIR",
                        help="also write the prepared splits as DIR/train.txt, valid.txt, test.txt (words, "
                             "<unk> literal), a corpus for --corpus text")
    parser.add_argument("--first", type=token_counts, metavar="TRAIN,VALID,TEST",
                        help="with --write-text: only the first tokens of each split, e.g. "
                             "1000000,100000,100000 (results/ap89-1m from ap)")
    parser.set_defaults(run=run)


def token_counts(text: str) -> tuple[int, int, int]:
    """--first: three positive token counts, comma-separated, each at most COUNT_MAX."""
    counts = text.split(",")
    if len(counts) != 3 or not all(c.strip().isdigit() and 0 < int(c) <= COUNT_MAX for c in counts):
        raise argparse.ArgumentTypeError(f"--first takes three token counts (train,valid,test), "
                                         f"e.g. 1000000,100000,100000, not {text!r}")
    return tuple(int(c) for c in counts)


bounded(token_counts, f"three counts from 1 to {COUNT_MAX}")


def run(args: argparse.Namespace) -> dict:
    if args.first and not args.write_text:  # refused before the corpus is prepared
        raise LMBenchError("--first cuts the files of --write-text: give --write-text DIR too")
    refuse_overwriting(args, {f"--write-text ({split}.txt)": args.write_text / f"{split}.txt"
                              for split in ("train", "valid", "test")} if args.write_text else {})
    corpus = load_corpus(args)
    if args.write_text:
        from corpora.text import write_text
        paths = write_text(corpus, args.write_text, args.first)
        return {**corpus.summary(), "written": {s: str(p) for s, p in paths.items()}}
    return corpus.summary()

"""`lmbench corpus brown|ap|text`, and the corpus options every other subcommand shares (`add_corpus_group`:
`lmbench reproduce text` takes the text corpus's), over a run folder's record of its corpus (corpus.json,
`corpora.record`), which `lmbench eval`, `neighbors` and `train --resume` read when no corpus is named."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from corpora.corpus import Corpus
from corpora.named import CORPORA
from corpora.record import (FILES, OPTIONS, RECORD, TAKES, load_options, read_record,  # (their home; named here
                            recorded_options, write_record)                  # for the commands)
from lmbench.errors import LMBenchError
from lmbench.options import (COUNT_MAX, bounded, existing_directory, existing_file, integer, output_directory,
                             refuse_overwriting, split_fractions)

AP_MIN_VOCAB = 5  # more than the four symbols of corpora.ap.SPECIALS (imported only to prepare AP)
MIN_VOCAB = {"ap": AP_MIN_VOCAB, "text": 2}  # the smallest --vocab-size of each corpus taking one (text: a word, <unk>)


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False, recorded: bool = False) -> None:
    """--corpus (or a positional name), plus each pipeline's options (`add_corpus_group`) and --no-cache.
    `recorded`: a command given a run folder, whose corpus.json says which corpus the options left out name
    (`corpus_options`)."""
    if positional:
        parser.add_argument("corpus", choices=CORPORA, help="which corpus to prepare")
    else:
        parser.add_argument("--corpus", choices=CORPORA, default=None,
                            help="default: the run folder's (its corpus.json), else brown" if recorded else
                            "default: brown (text when --train or --corpus-file is given)")
    group = parser.add_argument_group("corpus options" + (" (left out: those the run folder's corpus.json "
                                                          "records)" if recorded else ""))
    add_corpus_group(group)
    group.add_argument("--no-cache", action="store_true", help="prepare again, ignoring the cache")


def add_corpus_group(group, corpora: tuple[str, ...] = CORPORA) -> None:
    """The options of the corpora `corpora` added to `group` (an argparse parser or group): the one
    definition of every command's corpus options, `add_corpus_options`' (every corpus) and `lmbench
    reproduce text`'s (the text corpus alone). An option is added where one of `corpora` takes it
    (`corpora.record.TAKES`); one that several take says what it does for each of them."""
    takes = {name for corpus in corpora for name in TAKES[corpus]}

    def each(said: dict[str, str]) -> str:
        return "; ".join(f"{corpus}: {text}" for corpus, text in said.items() if corpus in corpora)

    if "train" in takes:
        group.add_argument("--train", type=existing_file,
                           help="text corpus: training file of whitespace-separated tokens")
        group.add_argument("--valid", type=existing_file, help="text corpus: validation file")
        group.add_argument("--test", type=existing_file, help="text corpus: test file")
        group.add_argument("--corpus-file", type=existing_file,
                           help="text corpus: instead of the three, one file cut by lines into train, valid and "
                                "test (contiguous, in that order; the cut is recorded with the corpus)")
        group.add_argument("--corpus-split", type=split_fractions, default=None,
                           help="with --corpus-file: the fractions of its lines for train, valid and test "
                                "(default 0.8,0.1,0.1)")
    if "min_count" in takes:
        group.add_argument("--min-count", type=integer(1), default=None, help=(
            "keep words seen at least this often (" + each({
                "brown": "default 4, the paper's rule",
                "text": "in train, default 2 so that <unk> is a train word, or 1 where train holds a literal <unk> "
                        "of its own"}) + ")"))
    if "vocab_from" in takes:
        group.add_argument("--vocab-from", choices=("all", "train"), default=None,
                           help="brown: count the vocabulary threshold over the whole stream (the paper; default) "
                                "or over train only")
    if "ap_dir" in takes:
        group.add_argument("--ap-dir", type=existing_directory, default=None,
                           help="ap: folder of TREC/Tipster AP SGML files (plain or .gz); default $AP_DIR")
    if "vocab_size" in takes:
        group.add_argument("--vocab-size", type=integer(max(MIN_VOCAB[corpus] for corpus in corpora
                                                            if "vocab_size" in TAKES[corpus])), default=None,
                           help="keep at most this many of the most frequent words, the specials included (" + each({
                               "ap": "default 17964, the paper's",
                               "text": "default every word of --min-count"}) + ")")
    if "skip_bad_files" in takes:
        group.add_argument("--skip-bad-files", action="store_true",
                           help="ap: leave a damaged file of the folder out, with a warning, instead of stopping "
                                "(the splits then differ from the full folder's)")


def corpus_options(args: argparse.Namespace, run: str | Path | None = None) -> dict:
    """The options naming the corpus to load: those given on the command line, over what the record of
    the run folder `run` holds when it has one and the command names no other corpus (files given
    replace the record's files). The corpus's name is always there, AP's folder, and one file's cut."""
    given = {name: getattr(args, name) for name in OPTIONS if getattr(args, name, None) not in (None, False)}
    record = read_record(run) if run is not None else None
    options = given
    if record is not None and given.get("corpus", record["corpus"]) == record["corpus"]:
        if any(name in given for name in FILES):  # the files given replace the record's, which are not checked
            record = {k: v for k, v in record.items() if k not in (*FILES, "files", "corpus_split")}  # (a moved corpus)
        recorded = recorded_options(record, Path(run))  # (an option its corpus ignored, recorded before it
        recorded = {k: v for k, v in recorded.items() if k == "corpus" or k in TAKES[record["corpus"]]}  # was refused)
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

"""`lmbench corpus brown|ap|text`, and the corpus options every other subcommand shares."""

from __future__ import annotations

import argparse
import logging

from corpora.corpus import Corpus, unk_warning
from corpora.named import CORPORA, load_named
from lmbench.errors import LMBenchError
from lmbench.options import existing_directory, existing_file, integer, output_directory, refuse_overwriting

log = logging.getLogger(__name__)

AP_MIN_VOCAB = 5  # more than the four symbols of corpora.ap.SPECIALS (imported only to prepare AP)


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """--corpus (or a positional name), plus each pipeline's options."""
    if positional:
        parser.add_argument("corpus", choices=CORPORA, help="which corpus to prepare")
    else:
        parser.add_argument("--corpus", choices=CORPORA, default="brown", help="default: brown")
    group = parser.add_argument_group("corpus options")
    group.add_argument("--train", type=existing_file,
                       help="text corpus: training file of whitespace-separated tokens")
    group.add_argument("--valid", type=existing_file, help="text corpus: validation file")
    group.add_argument("--test", type=existing_file, help="text corpus: test file")
    group.add_argument("--min-count", type=integer(1), default=None,
                       help="keep words seen at least this often (brown: 4, the paper's rule; text: 2, or 1 where "
                            "train holds a literal <unk> of its own, corpora.text)")
    group.add_argument("--vocab-from", choices=("all", "train"), default="all",
                       help="brown: count the vocabulary threshold over the whole stream (the paper) "
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


def load_corpus(args: argparse.Namespace) -> Corpus:
    """The corpus the options name (`corpora.named.load_named`)."""
    if args.corpus == "text":
        missing = [f"--{s}" for s in ("train", "valid", "test") if not getattr(args, s)]
        if missing:
            raise LMBenchError(f"--corpus text needs {', '.join(missing)}: give the three files "
                               "of whitespace-separated tokens")
    return load_named(args.corpus, min_count=args.min_count, vocab_from=args.vocab_from, ap_dir=args.ap_dir,
                      vocab_size=args.vocab_size, skip_bad_files=args.skip_bad_files, use_cache=not args.no_cache,
                      files=(args.train, args.valid, args.test))


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
    """--first: three positive token counts, comma-separated."""
    counts = text.split(",")
    if len(counts) != 3 or not all(c.strip().isdigit() and int(c) > 0 for c in counts):
        raise argparse.ArgumentTypeError(f"--first takes three token counts (train,valid,test), "
                                         f"e.g. 1000000,100000,100000, not {text!r}")
    return tuple(int(c) for c in counts)


def run(args: argparse.Namespace) -> dict:
    if args.first and not args.write_text:  # refused before the corpus is prepared
        raise LMBenchError("--first cuts the files of --write-text: give --write-text DIR too")
    if args.write_text:
        refuse_overwriting(args, {f"--write-text ({split}.txt)": args.write_text / f"{split}.txt"
                                  for split in ("train", "valid", "test")})
    corpus = load_corpus(args)
    warning = unk_warning(corpus.summary())
    if warning:
        log.warning(warning)
    if args.write_text:
        from corpora.text import write_text
        paths = write_text(corpus, args.write_text, args.first)
        return {**corpus.summary(), "written": {s: str(p) for s, p in paths.items()}}
    return corpus.summary()

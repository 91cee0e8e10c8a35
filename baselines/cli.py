"""`lmbench ngram`: fit an n-gram baseline and print its train/valid/test perplexity; `lmbench build-binary`.

    lmbench ngram --method NAME (baselines.methods.METHODS)
                  --order N [--classes C] [--min-ngram-count C] [--memory SIZE [--tmp-dir DIR]]
                  [--arpa OUT] [--binary OUT [--float64]] [--save-logprobs OUT.npz] [corpus options] [--json]
    lmbench build-binary MODEL.arpa OUT [--float64] [--json]

`--binary` and `build-binary` write a model as a binary file (baselines.binary), which `lmbench.load` opens
memory-mapped without parsing: the ARPA file's KenLM counterpart is its build_binary.

The methods are the registry `baselines.methods.METHODS` (its choices, the help and the refusals here come from
each method's registration); this file reads the options and runs one. For infini-gram
(the ∞-gram interpolated with interpolated KN, baselines/infinigram.py) --order is the KN model's order,
train is not scored (its contexts occur in train itself), and the figures add the index and the test
tokens' effective n.
"""

from __future__ import annotations

import argparse
import time
from baselines.methods import CLUSTER_PASSES, METHODS, NGramOptions, listed, make_ngram, methods_where
from corpora.cli import add_corpus_options, load_corpus
from lmbench.errors import LMBenchError
from lmbench.model import split_perplexity
from lmbench.options import bounded, existing_file, integer, output_directory, output_file, refuse_overwriting


def infini_gram_figures(model, corpus) -> dict:
    """The index's size and build time, and the test tokens by effective n (InfiniGram.profile)."""
    return {"kn_order": model.kn.order, "index_bytes": model.index.nbytes,
            "index_bytes_per_token": round(model.index.nbytes / len(corpus.train), 3),
            "index_seconds": round(model.timings["index_seconds"], 3),
            "test_by_effective_n": model.profile(corpus, "test")}


MAX_MEMORY = 1 << 50  # 1 PiB: a --memory above it is a typo, not a machine


def byte_size(text: str) -> int:
    """A --memory value: bytes, or a number with K, M, G or T (powers of 1024), from 1 byte to MAX_MEMORY."""
    from baselines.disk_counts import parse_size
    try:
        size = parse_size(text)
    except ValueError:
        size = 0
    if not 1 <= size <= MAX_MEMORY:
        raise argparse.ArgumentTypeError(f"got {text!r}: give a size such as 4G, 800M or 500000 (from 1 byte "
                                         "to 1024T)") from None
    return size


bounded(byte_size, "a size from 1 byte to 1024T")


def add_memory_options(parser, applies_to: str) -> None:
    """--memory SIZE and --tmp-dir DIR: bounded-memory estimation of `applies_to` (baselines/disk_counts.py)."""
    parser.add_argument("--memory", type=byte_size, default=None, metavar="SIZE",
                        help=f"{applies_to}: when the in-memory estimation would need more than SIZE (e.g. 4G), "
                             "count and estimate in bounded memory through sorted files on disk, as KenLM's "
                             "lmplz -S does (the same model); default: in memory")
    parser.add_argument("--tmp-dir", type=output_directory, default=None, metavar="DIR",
                        help="with --memory: the folder of the temporary files (default: the system's)")


def register(subparsers) -> None:
    parser = subparsers.add_parser("ngram", help="fit an n-gram model and report perplexities")
    parser.add_argument("--method", choices=list(METHODS), required=True)
    lowest, highest = min(m.min_order for m in METHODS.values()), max(m.max_order for m in METHODS.values())
    parser.add_argument("--order", type=integer(lowest, highest), default=None,
                        help="n of the n-gram; default: " + ", ".join(
                            f"{name} {m.default_order}" for name, m in METHODS.items()))
    parser.add_argument("--classes", type=integer(2), default=None,
                        help=f"{listed(methods_where(lambda m: 'classes' in m.options))}: number of word classes")
    parser.add_argument("--cluster-passes", type=integer(1), default=CLUSTER_PASSES, metavar="P",
                        help=f"{listed(methods_where(lambda m: 'cluster_passes' in m.options))}: at most P passes of "
                             f"the exchange algorithm (default {CLUSTER_PASSES})")
    parser.add_argument("--min-ngram-count", type=integer(1), default=1, metavar="C",
                        help=f"{', '.join(methods_where(lambda m: 'min_ngram_count' in m.options))}: leave out the "
                             "n-grams of order >= 3 seen fewer "
                             "than C times in train (SRILM's default cutoffs are C = 2; default 1: "
                             "keep all)")
    add_memory_options(parser, ", ".join(methods_where(lambda m: m.bounded)))
    parser.add_argument("--arpa", metavar="OUT", type=output_file, default=None,
                        help=f"also write the model as an ARPA file ({listed(methods_where(lambda m: m.arpa))})")
    parser.add_argument("--binary", metavar="OUT", type=output_file, default=None,
                        help="also write the fitted model as a binary file, which `lmbench.load` and `lmbench score` "
                             "open at once, memory-mapped (every method; docs/api.md)")
    add_float64(parser)
    parser.add_argument("--save-logprobs", metavar="OUT.npz", type=output_file, default=None,
                        help="save the per-token log-probabilities of valid and test (for lmbench mix)")
    add_corpus_options(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)

    parser = subparsers.add_parser("build-binary", help="convert an ARPA file into a binary model file, which opens "
                                   "at once, memory-mapped (as KenLM's build_binary)")
    parser.add_argument("arpa", type=existing_file, metavar="MODEL.arpa",
                        help="an ARPA file (`lmbench ngram --arpa`, KenLM's lmplz, SRILM), checked as it is read")
    parser.add_argument("out", type=output_file, help="the binary file to write (e.g. kn5.lmb)")
    add_float64(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run_build_binary)


def add_float64(parser) -> None:
    parser.add_argument("--float64", action="store_true",
                        help="with a binary file: keep its log10 probabilities and back-off weights as float64 "
                             "(default float32, as KenLM's binary files: half the bytes, scores to 1e-7)")


def run_build_binary(args: argparse.Namespace) -> dict:
    """Read the ARPA file over its own words (checked, baselines.arpa_reader) and write it as a binary file
    (baselines.binary)."""
    from baselines.arpa_reader import read_arpa_own
    from baselines.binary import write_binary
    refuse_overwriting(args, {"out": args.out}, {"MODEL.arpa": args.arpa})
    started = time.perf_counter()
    model, vocab = read_arpa_own(args.arpa)
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    ngrams = write_binary(model, vocab, args.out, "float64" if args.float64 else "float32")
    return {"arpa": str(args.arpa), "binary": str(args.out), "order": model.order, "vocab_size": len(vocab),
            "ngrams": ngrams, "values": "float64" if args.float64 else "float32",
            "bytes": args.out.stat().st_size if args.out.is_file() else None,
            "read_seconds": round(read_seconds, 3), "write_seconds": round(time.perf_counter() - started, 3)}


def run(args: argparse.Namespace) -> dict:
    refuse_overwriting(args, {"--arpa": args.arpa, "--save-logprobs": args.save_logprobs, "--binary": args.binary})
    if args.float64 and not args.binary:
        raise LMBenchError("--float64 sets the values of a binary file: give --binary OUT too, or drop --float64")
    model = make_ngram(NGramOptions(args.method, args.order, args.classes, args.min_ngram_count, args.cluster_passes,
                                    args.memory, args.tmp_dir))
    if args.arpa and not METHODS[args.method].arpa:
        raise LMBenchError(f"--arpa needs a back-off model and --method {args.method} is not one: "
                           f"use {listed(methods_where(lambda m: m.arpa))}, or drop --arpa")
    corpus = load_corpus(args)
    started = time.perf_counter()
    model.fit(corpus)
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    result = {"method": args.method, "order": model.order, "corpus": corpus.name,
              "vocab_size": len(corpus.vocab)}
    if args.min_ngram_count > 1:
        result["min_ngram_count"] = args.min_ngram_count
    # The infini-gram on train would read every context back from train itself: not scored.
    for split in ("valid", "test") if args.method == "infini-gram" else ("train", "valid", "test"):
        result[f"{split}_perplexity"] = split_perplexity(model, corpus, split)
    result.update(build_seconds=round(build_seconds, 3),
                  score_seconds=round(time.perf_counter() - started, 3))
    if args.method == "infini-gram":
        result.update(infini_gram_figures(model, corpus))
    if args.save_logprobs:
        from mixing import saved
        saved.save(args.save_logprobs, saved.scored_splits(model, corpus), corpus)
        result["logprobs"] = str(args.save_logprobs)
    if args.arpa:
        from baselines.arpa_writer import write_arpa
        started = time.perf_counter()
        result["arpa"] = {"path": str(args.arpa), "ngrams": write_arpa(model, corpus.vocab, args.arpa),
                          "seconds": round(time.perf_counter() - started, 3)}
    if args.binary:
        from baselines.binary import write_binary
        started = time.perf_counter()
        values = "float64" if args.float64 else "float32"
        ngrams = write_binary(model, corpus.vocab, args.binary, values)
        result["binary"] = {"path": str(args.binary), "values": values, **({"ngrams": ngrams} if ngrams else {}),
                            "seconds": round(time.perf_counter() - started, 3)}
    return result


"""`lmbench ngram`: fit an n-gram baseline and print its train/valid/test perplexity."""

from __future__ import annotations

import argparse
import time

from corpora.cli import add_corpus_options, load_corpus
from lmbench.model import LanguageModel


def make_model(args: argparse.Namespace) -> LanguageModel:
    from baselines.unigram import AddOneUnigram
    return AddOneUnigram()


METHODS = ("add-one-unigram",)


def register(subparsers) -> None:
    parser = subparsers.add_parser("ngram", help="fit an n-gram model and report perplexities")
    parser.add_argument("--method", choices=METHODS, required=True)
    parser.add_argument("--order", type=int, default=1, help="n of the n-gram")
    add_corpus_options(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> dict:
    corpus = load_corpus(args)
    model = make_model(args)
    started = time.perf_counter()
    model.fit(corpus)
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    result = {"method": args.method, "order": model.order, "corpus": corpus.name,
              "vocab_size": len(corpus.vocab)}
    for split in ("train", "valid", "test"):
        result[f"{split}_perplexity"] = model.perplexity(split)
    result.update(build_seconds=round(build_seconds, 3),
                  score_seconds=round(time.perf_counter() - started, 3))
    return result

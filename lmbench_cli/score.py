"""`lmbench score` and `lmbench generate`: a saved model (reports.api.load) scores a text's lines or draws a sample.

They live apart from reports.cli (`reproduce`, `report`), which reads the networks' registry, and with it
torch, as it loads: an n-gram model (an ARPA file, a binary model file, a work folder's n-gram row) is
scored without torch, and without the measure of the free cores and the line about threads that a network
takes (`runs_network`).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Iterator

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.model import SAMPLE_MAX
from lmbench.options import THREADS_MAX, examined_path, existing_file, integer, number

BATCH = 512  # lines of a file scored together (TextModel.score_lines); standard input's are scored as they come


def register(subparsers) -> None:
    parser = subparsers.add_parser("score", help="score a file of raw text with a saved model: each line's log10 "
                                   "probability and perplexity, then the file's (reports.api)")
    _add_model(parser)
    parser.add_argument("file", type=text_file, help="a UTF-8 text file, one sentence a line (blank lines "
                        "skipped), or - for standard input")
    parser.add_argument("--no-bos", action="store_true", help="read each line from an empty context, not after "
                        "the begin marker")
    parser.add_argument("--no-eos", action="store_true", help="do not score the end marker after each line")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of TSV")
    parser.set_defaults(run=run_score, runs_network=runs_network)

    parser = subparsers.add_parser("generate", help="sample text from a saved model (reproducible with --seed)")
    _add_model(parser)
    parser.add_argument("--words", type=integer(1, SAMPLE_MAX), default=20,
                        help=f"how many words to draw (default 20; at most {SAMPLE_MAX:,}: each word is a step of the "
                             "model, up to tens of milliseconds for a network on a CPU)")
    parser.add_argument("--seed-text", default=None, help="the text the sample continues (default: the start of a "
                        "sentence, after the corpus's marker)")
    parser.add_argument("--seed", type=integer(0, 2 ** 32 - 1), default=0,
                        help="the random seed: the same seed, the same words (default 0)")
    parser.add_argument("--temperature", type=number(1e-3, 1e3), default=1.0,
                        help="divides the log-probabilities: below 1 likelier words, above 1 flatter (default 1)")
    parser.add_argument("--json", action="store_true", help="print the words as JSON")
    parser.set_defaults(run=run_generate, runs_network=runs_network)


def text_file(text: str) -> Path | str:
    """`lmbench score`'s text: - (standard input) or an existing file."""
    return text if text == "-" else existing_file(text)


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=examined_path, help="an ARPA file, a binary model file (lmbench build-binary), "
                        "a network run folder (lmbench train --out), or a work folder (runs/NAME) with --row")
    parser.add_argument("--row", default=None, help="with a work folder: the id of the row to load, e.g. "
                        "kn-interp-5, lstm")
    parser.add_argument("--threads", type=integer(1, THREADS_MAX), default=None,
                        help="CPU threads of a network (default: the free cores)")


def runs_network(args: argparse.Namespace) -> bool:
    """Whether the model named runs a network (torch, threads): lmbench_cli measures the free cores and says the
    threads only then."""
    from reports.api import holds_network
    return holds_network(args.model, args.row)


def _loaded(args: argparse.Namespace):
    from reports.api import load
    return load(args.model, args.row, threads=args.threads)


def run_score(args: argparse.Namespace) -> Iterator[dict | str]:
    """Each non-blank line's log10 probability, tokens scored, out-of-vocabulary words and perplexity (TSV
    under a header, or one JSON object a line), then the file's (`total`): every token of every line. The
    text is read a block at a time (corpora.text.read_lines: standard input's lines scored as they come, a
    file's BATCH lines together); the first line is read, and a text without one refused, before the model
    loads."""
    from corpora.text import read_lines
    lines = ((number, line) for number, line in enumerate(read_lines(args.file), 1) if line.strip())
    first = next(lines, None)
    if first is None:
        source = "standard input" if args.file == "-" else args.file
        raise LMBenchError(f"{source} holds no text to score: give a file of sentences, one a line")
    return _scores(_loaded(args), itertools.chain([first], lines), args)


def _scores(model, lines: Iterator[tuple[int, str]], args: argparse.Namespace) -> Iterator[dict | str]:
    """run_score's rows, each batch's made as its lines are read."""
    def shown(entry: dict) -> dict | str:
        with np.errstate(over="ignore"):  # beyond a float's range (a line far below ARPA's zero): inf, null in JSON
            entry = {**entry, "perplexity": float(np.power(10.0, -entry["log10_prob"] / entry["tokens"]))}
        return entry if args.json else "\t".join(str(value) for value in entry.values())

    if not args.json:
        yield "line\tlog10_prob\ttokens\toov\tperplexity"
    whole = {"line": "total", "log10_prob": 0.0, "tokens": 0, "oov": 0}
    size = 1 if args.file == "-" else BATCH
    while batch := list(itertools.islice(lines, size)):
        logprobs, tokens, oov = model.score_lines([line for _, line in batch], bos=not args.no_bos, eos=not args.no_eos)
        for (line_number, _), logprob, count, unknown in zip(batch, logprobs.tolist(), tokens.tolist(), oov.tolist()):
            entry = {"line": line_number, "log10_prob": logprob, "tokens": count, "oov": unknown}
            whole = {**whole, **{key: whole[key] + entry[key] for key in ("log10_prob", "tokens", "oov")}}
            yield shown(entry)  # (a sum beyond a float's range is -inf: null in JSON)
    yield shown(whole)


def run_generate(args: argparse.Namespace) -> dict | list[str]:
    """The sample's words on one line (with --json: the words, the seed text and the options)."""
    from reports.api import check_sampling
    check_sampling(args.words, args.temperature)  # before the model loads
    words = _loaded(args).sample(args.words, args.seed_text, args.seed, args.temperature)
    if args.json:
        return {"model": args.model, "row": args.row, "seed_text": args.seed_text, "seed": args.seed,
                "temperature": args.temperature, "words": words}
    return [" ".join(words)]

"""The `lmbench` command: one subcommand per stage of the suite.

This is the top of the layers: it imports the packages' command lines, and nothing imports it
(`lmbench` itself is the ground floor: errors, files, the model interface, option types). It imports
only the command line of the subcommand named (`COMMANDS`; all of them for --help or a word it does not
know), so that `corpus`, `ngram` and `mix` start without the networks' registry, whose family files load
torch (`neural.families`). Before a command that trains or scores a network (`THREADED`: those with
--threads) loads it, the free cores are measured and OpenMP asked for passive waiting where some are busy
(`lmbench.threads`, read by torch when it loads), and the first log line says how many threads the run
takes and why; `score` and `generate` (`WHEN_A_NETWORK`, lmbench_cli.score) do so only for a model that is
a network, an n-gram model being scored without torch, the measure or the line.

Each package registers its subcommands through a `register(subparsers)` function whose `run(args)`
returns a dict of figures: printed as JSON with --json, else as indented `key: value` lines; or the
command's own lines, printed as it makes them (`score`'s rows: a line of text, or a dict as a line of JSON).
JSON is valid JSON: a float beyond its numbers (inf, nan) is null (`json_text`). Where the reader of
standard output goes away (`| head -1`) the command stops quietly, exit 141, as `cat` does.
Options are checked as they are parsed (`lmbench.options`); a refused option, like any expected error
(LMBenchError), prints one line and exits with code 2. SIGTERM, SIGHUP and SIGQUIT are turned into an
interruption, as Ctrl-C is, so that what a command cleans up on the way out (temporary files and
folders, `*.new*`) is cleaned up either way: exit 130 after Ctrl-C, 128 + the signal's number after the
others (143 after SIGTERM, 129 after SIGHUP).
"""

from __future__ import annotations

import codecs
import importlib
import json
import logging
import math
import os
import signal
import sys
from typing import Iterator

from lmbench import __version__, threads
from lmbench.errors import LMBenchError, system_refusal
from lmbench.options import OptionParser

log = logging.getLogger("lmbench")

# Each package's command line and the subcommands its `register` adds (tests/test_cli.py checks them), and
# the commands that take --threads (their package loads torch: the cores are measured before).
COMMANDS = {"corpora.cli": ("corpus",), "baselines.cli": ("ngram", "build-binary"), "neural.cli": ("train", "eval", "nplm"),
            "mixing.cli": ("mix",), "reports.cli": ("reproduce", "report"), "lmbench_cli.score": ("score", "generate")}
THREADED = ("train", "eval", "nplm", "reproduce", "score", "generate")
# of those, the commands whose parser loads no torch and that run a network only for some models (`runs_network`,
# lmbench_cli.score): the cores are measured, and the threads said, once the parsed model is known to be one
WHEN_A_NETWORK = ("score", "generate")


def build_parser(argv: list[str] | None = None) -> OptionParser:
    """The `lmbench` parser with the subcommands of the package that owns the command in `argv` (its
    first word that is no option), or with every package's (None, --help, an unknown word)."""
    parser = OptionParser(prog="lmbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"lmbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail")
    subparsers = parser.add_subparsers(dest="command", required=True)
    command = next((word for word in argv or () if not word.startswith("-")), None)
    owners = [module for module, commands in COMMANDS.items() if command in commands] or list(COMMANDS)
    for module in owners:
        importlib.import_module(module).register(subparsers)
    return parser


def human_lines(value, indent: int = 0) -> Iterator[str]:
    """A dict of figures as `key: value` lines, nested dicts indented."""
    pad = "  " * indent
    for key, item in value.items():
        if isinstance(item, dict):
            yield f"{pad}{key}:"
            yield from human_lines(item, indent + 1)
        else:
            yield f"{pad}{key}: {item}"


def json_text(value, indent: int | None = None) -> str:
    """`value` as JSON that every parser reads: a float beyond JSON's numbers (inf, -inf, nan: a perplexity
    beyond a float's range, the log-probability of a token of probability 0) written as null."""
    def finite(item):
        if isinstance(item, float):
            return item if math.isfinite(item) else None
        if isinstance(item, dict):
            return {key: finite(inner) for key, inner in item.items()}
        return [finite(inner) for inner in item] if isinstance(item, (list, tuple)) else item
    return json.dumps(finite(value), indent=indent, default=str, allow_nan=False)


def output_lines(result, as_json: bool) -> Iterator[str]:
    """The lines a command's result prints: a dict of figures as JSON (--json) or `key: value` lines; any
    other result is the command's own lines as it makes them (`score`'s rows), each a line of text or a
    dict written as one line of JSON."""
    if isinstance(result, dict):
        yield from [json_text(result, indent=1)] if as_json else human_lines(result)
    else:
        yield from (item if isinstance(item, str) else json_text(item) for item in result or ())


def write_output(result, as_json: bool) -> int:
    """Print the result's lines (`output_lines`; an error of the command while it makes them goes up to the
    command's handlers); the exit code: 0, or where standard output fails, 141 (128 + SIGPIPE) after its
    reader went away (`| head`: a quiet stop, as `cat` makes) and 2 with one line for another failure."""
    for line in output_lines(result, as_json):
        try:
            print(line)
        except OSError as err:
            return _unwritable(err)
    try:
        sys.stdout.flush()
    except OSError as err:
        return _unwritable(err)
    return 0


def _unwritable(err: OSError) -> int:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (Python's last flush would fail again)
    if isinstance(err, BrokenPipeError):  # the reader went away (`| head`, `--arpa /dev/stdout | head`)
        return 141
    print(f"lmbench: error: standard output cannot be written ({err.strerror or err}): the figures are "
          "lost; send it to a file or terminal that takes them", file=sys.stderr)
    return 2


# The signals that end a process by default and that a command outlives to clean up: SIGTERM (kill), SIGHUP
# (its terminal closed), SIGQUIT (Ctrl-\\); SIGINT is Python's KeyboardInterrupt already.
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """A terminating signal (TERMINATING), raised where the command is, as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (0, 2 for an expected error, 130 when interrupted,
    128 + the signal's number when terminated: 143 after SIGTERM, 129 after SIGHUP, 131 after SIGQUIT)."""
    previous = {signum: signal.signal(signum, _terminate) for signum in TERMINATING}
    try:
        return _main(argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _main(argv: list[str] | None) -> int:
    if sys.stdout is None:  # (`>&-`) the figures would be lost at the end of the work: refused before it
        print("lmbench: error: standard output is closed, and the figures go there: give it a file or a "
              "terminal (> figures.txt)", file=sys.stderr)
        return 2
    try:  # (a folder deleted under the shell: relative paths mean nothing, and torch's libraries fail to load
        os.getcwd()  # with "Intel oneMKL FATAL ERROR")
    except FileNotFoundError:
        print("lmbench: error: the working directory was deleted: cd to a folder that exists and run it again",
              file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):  # the C locale without Python's UTF-8 coercion: words as UTF-8, as
        if stream is not None and codecs.lookup(stream.encoding or "ascii").name == "ascii":  # coerced Pythons
            stream.reconfigure(encoding="utf-8")                                               # write them
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        command = next((word for word in argv if not word.startswith("-")), None)
        if command in THREADED and command not in WHEN_A_NETWORK:
            threads.bound_thread_variables()  # a thread count torch's OpenMP would crash on, refused first
            threads.choose_waiting()  # the free cores now, before the command's package loads torch
        args = build_parser(argv).parse_args(argv)
        args.argv = argv  # the words, for a command that relaunches itself
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                            format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
        threaded = hasattr(args, "threads") and (command not in WHEN_A_NETWORK or args.runs_network(args))
        if threaded and command in WHEN_A_NETWORK:  # (its parser loaded no torch)
            threads.bound_thread_variables()
            threads.choose_waiting()
        if threaded:  # a command that may run torch: its threads and why
            given = "--threads" if args.threads else "OMP_NUM_THREADS" if os.environ.get("OMP_NUM_THREADS") else ""
            log.info("threads: %s%s", threads.described(args.threads or threads.default_threads()),
                     f"; {given} sets the count" if given else "; the count: the free cores")
        return write_output(args.run(args), getattr(args, "json", False))
    except LMBenchError as err:  # one line, whatever it quotes (a path with a newline in its name)
        print(f"lmbench: error: {str(err).replace(chr(10), chr(92) + 'n')}", file=sys.stderr)
        return 2
    except Terminated as stop:
        print(f"lmbench: terminated ({signal.Signals(stop.signum).name})", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("lmbench: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # a file operation the system refused, that no stage turned into its own line
        if isinstance(err, BrokenPipeError):
            raise
        log.debug("the system's refusal", exc_info=True)
        print(f"lmbench: error: {system_refusal(err)}", file=sys.stderr)
        return 2

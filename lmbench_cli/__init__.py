"""The `lmbench` command: one subcommand per stage of the suite.

This is the top of the layers: it imports every package's command line, and nothing imports it
(`lmbench` itself is the ground floor: errors, files, the model interface, option types). Every one of
them is torch-free until a command runs: before a command with --threads runs, the free cores are
measured and OpenMP asked for passive waiting where some are busy (`lmbench.threads`, read by torch
when it loads), and the first log line says how many threads the run takes and why.

Each package registers its subcommand through a `register(subparsers)` function whose `run(args)`
returns a dict of figures: printed as JSON with --json, else as indented `key: value` lines.
Options are checked as they are parsed (`lmbench.options`); a refused option, like any expected error
(LMBenchError), prints one line and exits with code 2. SIGTERM is turned into an interruption, as
Ctrl-C is, so that what a command cleans up on the way out (temporary files and folders) is cleaned
up either way: exit 130 after Ctrl-C, 143 after SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys

from baselines import cli as baselines_cli
from corpora import cli as corpora_cli
from lmbench import __version__, threads
from lmbench.errors import LMBenchError
from lmbench.options import OptionParser
from mixing import cli as mixing_cli
from neural import cli as neural_cli
from reports import cli as reports_cli

log = logging.getLogger("lmbench")


def build_parser() -> OptionParser:
    """The `lmbench` parser with every package's subcommand."""
    parser = OptionParser(prog="lmbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"lmbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (corpora_cli, baselines_cli, neural_cli, mixing_cli, reports_cli):
        module.register(subparsers)
    return parser


def print_human(value, indent: int = 0) -> None:
    """Print a dict of figures as `key: value` lines, nested dicts indented."""
    pad = "  " * indent
    for key, item in value.items():
        if isinstance(item, dict):
            print(f"{pad}{key}:")
            print_human(item, indent + 1)
        else:
            print(f"{pad}{key}: {item}")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, as Ctrl-C raises KeyboardInterrupt."""


def _terminate(signum, frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (0, 2 for an expected error, 130 when interrupted,
    143 when terminated)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # the words, for a command that relaunches itself
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                            format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
        if hasattr(args, "threads"):  # a command that may run torch: the free cores now, before torch loads
            threads.choose_waiting()
            given = "--threads" if args.threads else "OMP_NUM_THREADS" if os.environ.get("OMP_NUM_THREADS") else ""
            log.info("threads: %s%s", threads.described(args.threads or threads.default_threads()),
                     f"; {given} sets the count" if given else "; the count: the free cores")
        result = args.run(args)
    except LMBenchError as err:  # one line, whatever it quotes (a path with a newline in its name)
        print(f"lmbench: error: {str(err).replace(chr(10), chr(92) + 'n')}", file=sys.stderr)
        return 2
    except Terminated:
        print("lmbench: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("lmbench: interrupted", file=sys.stderr)
        return 130
    if result is not None:
        if getattr(args, "json", False):
            print(json.dumps(result, indent=1, default=str))
        else:
            print_human(result)
    return 0


"""Command-line options checked at parse time, before any corpus is loaded.

Each factory returns an argparse `type` that converts the text of an option or refuses it with the
value and what is allowed; `OptionParser` turns every parse error (a refused value, a bad choice, a
missing or unknown argument) into an LMBenchError, which the command prints on one line and exits 2.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable, NoReturn

from lmbench.errors import LMBenchError


class OptionParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are LMBenchErrors naming the subcommand's help; the parsers of
    its subcommands are of the same class, so theirs are too. --help and --version still exit 0.
    Options are never abbreviated (`--corpus` is not taken for `--corpus-file`): a prefix is refused
    as an unknown option."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise LMBenchError(f"{message} (`{self.prog} --help` lists the options)")


def _show(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"  # an integer bound in full


def _bounds(kind: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} from {_show(minimum)} to {_show(maximum)}"
    if minimum is not None:
        return f"{kind} >= {_show(minimum)}"
    if maximum is not None:
        return f"{kind} <= {_show(maximum)}"
    return kind


def _ranged(kind: str, convert: Callable[[str], float], name: str, minimum, maximum) -> Callable[[str], float]:
    """An option converted by `convert` (refusing what it cannot read or a non-finite number) and
    kept within [minimum, maximum] (either bound may be None)."""
    allowed = _bounds(kind, minimum, maximum)

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}: give {allowed}") from None
        if (not math.isfinite(value) or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum)):
            raise argparse.ArgumentTypeError(f"got {text}: give {allowed}")
        return value

    parse.__name__ = name
    return parse


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An integer option within [minimum, maximum] (either bound may be None)."""
    return _ranged("an integer", int, "integer", minimum, maximum)


def number(minimum: float | None = None, maximum: float | None = None) -> Callable[[str], float]:
    """A finite real option within [minimum, maximum] (either bound may be None)."""
    return _ranged("a finite number", float, "number", minimum, maximum)


def existing_file(text: str) -> Path:
    """A file to read: it must exist and be a file."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist: give the path of an existing file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file: give the path of an existing file")
    return path


def existing_directory(text: str) -> Path:
    """A folder to read: it must exist and be a folder."""
    path = Path(text)
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {what}: give the path of an existing folder")
    return path


def _writable_place(text: str, path: Path, kind: str) -> None:
    """Refuse `path` when its nearest existing ancestor is not a folder we may write into (the missing
    folders in between are created when the file or folder is written)."""
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} lies under {str(parent)!r}, which is not a folder: "
                                         f"give a {kind} path under a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: the folder {str(parent)!r} is not writable: give a "
                                         f"{kind} path where you may write")


INPUT_OPTIONS = ("train", "valid", "test", "corpus_file")  # the corpus files a command reads


def refuse_overwriting(args, outputs: dict[str, Path | None], inputs: dict[str, Path] | None = None) -> None:
    """Refuse, before anything is read or written, an output (option -> path; None: not asked for) that
    is one of the command's input files (INPUT_OPTIONS, and `inputs`: what -> path), or that another
    output writes too."""
    inputs = {f"--{name.replace('_', '-')}": Path(getattr(args, name)).resolve()
              for name in INPUT_OPTIONS if getattr(args, name, None) is not None} | {
              what: Path(path).resolve() for what, path in (inputs or {}).items()}
    written: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        where = Path(path).resolve()
        for name, source in inputs.items():
            if where == source:
                raise LMBenchError(f"{option} {path} is the file of {name}: writing it would overwrite that "
                                   "input; give another path")
        if where in written:
            raise LMBenchError(f"{option} and {written[where]} both write {path}: one would overwrite the "
                               "other; give each its own path")
        written[where] = option


def output_file(text: str) -> Path:
    """A file to write: not an existing folder, device or pipe, under a folder we may write into."""
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder: give the path of a file to write")
    if path.exists() and not path.is_file():  # a device or a pipe: the atomic writer would replace it
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular file (a device, a pipe or a socket): give "
                                         "the path of a file to write")
    _writable_place(text, path, "file")
    return path


def output_directory(text: str) -> Path:
    """A folder to write into (created when missing): not an existing file, under a writable folder."""
    path = Path(text)
    if not text or (path.exists() and not path.is_dir()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder: give the path of a folder "
                                         "(it is created when missing)")
    if not path.exists():
        _writable_place(text, path, "folder")
    elif not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable: give a folder where you may write")
    return path


def split_fractions(text: str) -> tuple[float, float, float]:
    """--split (reproduce text), --corpus-split: 0.8,0.1,0.1, the fractions of the lines for train, valid
    and test."""
    try:
        parts = tuple(float(part) for part in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or not all(0 < part < 1 for part in parts) or abs(sum(parts) - 1) > 1e-6:
        raise argparse.ArgumentTypeError(f"{text!r}: give three fractions above 0 that sum to 1, for train, "
                                         "valid and test, e.g. 0.8,0.1,0.1")
    return parts

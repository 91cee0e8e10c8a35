"""Command-line options checked at parse time, before any corpus is loaded.

Each factory returns an argparse `type` that converts the text of an option or refuses it with the
value and what is allowed; `OptionParser` turns every parse error (a refused value, a bad choice, a
missing or unknown argument) into an LMBenchError, which the command prints on one line and exits 2.

Every numeric option is bounded from both sides (`integer`, `number`: the type records its `bounds`,
which tests/test_hostile_classes.py requires of every option of every command): a count at most
COUNT_MAX unless the option says less (a C int, what the kernels below take as a size), threads at most
THREADS_MAX. Every path option is looked at without following it blindly (`_examined`): a loop of
symbolic links or a name the system refuses as too long is one line naming it. `refuse_overwriting`
keeps every output off every input: an output file is no input file, no input file lies in an output
folder, no output lies in an input folder.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, NoReturn

from lmbench.errors import LMBenchError
from lmbench.files import descriptor

COUNT_MAX = 2**31 - 1  # the largest count an option takes unless it says less: a C int, what kernels take as a size
THREADS_MAX = 1024     # CPU threads: more than any machine this runs on has; 100,000 crashed OpenMP (issue 46)


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
    parse.bounds = (minimum, maximum)
    return parse


def integer(minimum: int = 0, maximum: int = COUNT_MAX) -> Callable[[str], int]:
    """An integer option within [minimum, maximum]."""
    return _ranged("an integer", int, "integer", minimum, maximum)


def number(minimum: float, maximum: float) -> Callable[[str], float]:
    """A finite real option within [minimum, maximum]."""
    return _ranged("a finite number", float, "number", minimum, maximum)


def _examined(text: str, path: Path) -> os.stat_result | None:
    """The path's status (following links), None where nothing is there; a loop of symbolic links, a
    name too long for the system or any other refusal to look is an ArgumentTypeError naming it."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            why = "is a loop of symbolic links"
        elif err.errno == errno.ENAMETOOLONG:
            why = "has a name too long for the system (a part over 255 bytes, or the whole over 4096)"
        elif err.errno == errno.ENOTDIR:
            return None  # under a file: named by the caller
        else:
            why = f"cannot be looked at ({err.strerror or err})"
        raise argparse.ArgumentTypeError(f"{text!r} {why}: give another path") from None


def existing_file(text: str) -> Path:
    """A file to read: it must exist and be a file."""
    path = Path(text)
    if not text or _examined(text, path) is None:
        raise argparse.ArgumentTypeError(f"{text!r} does not exist: give the path of an existing file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file: give the path of an existing file")
    return path


def examined_path(text: str) -> Path:
    """A path looked at but not required to be there (a run folder that only one machine holds)."""
    if text:
        _examined(text, Path(text))
    return Path(text)


def existing_directory(text: str) -> Path:
    """A folder to read: it must exist and be a folder."""
    path = Path(text)
    if not text or _examined(text, path) is None or not path.is_dir():
        what = "is not a folder" if text and path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {what}: give the path of an existing folder")
    return path


def write_refusal(folder: Path) -> str | None:
    """Why no folder can be made in the existing folder `folder` (None: one can), tried by making and
    removing one: os.access answers yes to root, and knows nothing of a read-only file system or one
    that takes no new entries (/sys), where the run would fail once done."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".lmbench-probe", dir=folder))
    except OSError as err:
        return err.strerror or str(err)
    return None


def _writable_place(text: str, path: Path, kind: str) -> None:
    """Refuse `path` when its nearest existing ancestor is not a folder we may write into (the missing
    folders in between are created when the file or folder is written)."""
    _examined(text, path)
    parent = path.absolute().parent
    while _examined(text, parent) is None:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} lies under {str(parent)!r}, which is not a folder: "
                                         f"give a {kind} path under a folder")
    refusal = write_refusal(parent)
    if refusal:
        raise argparse.ArgumentTypeError(f"{text!r}: the folder {str(parent)!r} is not writable ({refusal}): give a "
                                         f"{kind} path where you may write")


INPUT_OPTIONS = ("train", "valid", "test", "corpus_file")  # the corpus files a command reads
INPUT_FOLDERS = ("ap_dir",)  # the folders it reads every file of


def _resolved(name: str, path: Path) -> Path:
    """`path` with every link followed; a loop, or a name too long, is one line naming `name`."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError) as err:  # Python raises RuntimeError for a loop of links
        raise LMBenchError(f"{name} {path} cannot be resolved ({' '.join(str(err).split())}): give another "
                           "path") from None


def _option(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refuse_overwriting(args, outputs: dict[str, Path | None], inputs: dict[str, Path] | None = None, *,
                       folders: dict[str, Path | None] | None = None) -> None:
    """Refuse, before anything is read or written, an output that would overwrite an input or another
    output, each path with its links followed: an output file (`outputs`: option -> path; None: not
    asked for) that is an input file (INPUT_OPTIONS, and `inputs`: what -> path) or another output; two
    of --train, --valid and --test that are one file (a link, a hard link: a model scored on what it
    was fitted on); an input file inside an output folder (`folders`: option -> folder the command
    writes files of its own into); an output inside a folder the command reads (INPUT_FOLDERS)."""
    inputs = {_option(name): _resolved(_option(name), getattr(args, name))
              for name in INPUT_OPTIONS if getattr(args, name, None) is not None} | {
              what: _resolved(what, path) for what, path in (inputs or {}).items()}
    read_folders = {_option(name): _resolved(_option(name), getattr(args, name))
                    for name in INPUT_FOLDERS if getattr(args, name, None) is not None}
    corpus_files = [(name, path) for name, path in inputs.items() if name in ("--train", "--valid", "--test")]
    for i, (name, path) in enumerate(corpus_files):
        for other, other_path in corpus_files[i + 1:]:
            if path == other_path or (path.is_file() and other_path.is_file() and os.path.samefile(path, other_path)):
                raise LMBenchError(f"{other} {other_path} is the same file as {name} {path}: a model would be scored "
                                   "on the text it was fitted on (or chosen on its own test); give three different "
                                   "files (or one file to cut by lines, --corpus-file F)")
    written: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        where = _resolved(option, path)
        for name, source in inputs.items():
            if where == source:
                raise LMBenchError(f"{option} {path} is the file of {name}{'' if source == Path(path) else f' ({source})'}: "
                                   "writing it would overwrite that input; give another path")
        if where in written:
            raise LMBenchError(f"{option} and {written[where]} both write {path}: one would overwrite the "
                               "other; give each its own path")
        written[where] = option
    for option, folder in (folders or {}).items():
        if folder is None:
            continue
        where = _resolved(option, folder)
        for name, source in inputs.items():
            if _within(source, where):
                raise LMBenchError(f"{name} {source} lies in the folder of {option} {folder}, which the command "
                                   "writes its own files into (it could overwrite that input): move the input "
                                   f"out of it, or give {option} another folder")
        written[where] = option
    for where, option in written.items():
        for name, source in read_folders.items():
            if _within(where, source):
                raise LMBenchError(f"{option} {where} lies in the folder of {name} {source}, which is read file "
                                   f"by file: give {option} a path outside it")


NAME_BYTES = 240  # the longest name of an output: the system's 255 less the room of the names made from it
# (NAME.sha256, NAME.lock, NAME.damaged, a report's NAME-quick), which would fail only once the run is done


def _short_name(text: str, path: Path, kind: str) -> None:
    """Refuse an output whose name leaves no room for the names the suite makes from it."""
    size = len(os.fsencode(path.name))
    if size > NAME_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}... has a name of {size} bytes, and the names made from it "
                                         f"(NAME.sha256, NAME.lock, ...) would pass the system's 255: give a {kind} "
                                         f"name of at most {NAME_BYTES} bytes")


def output_file(text: str) -> Path:
    """A file to write: not an existing folder, device or pipe, under a folder we may write into; or a
    descriptor of this process (/dev/stdout: written through it, `lmbench.files.atomic_write`)."""
    path = Path(text)
    if text:
        _examined(text, path)
        if descriptor(path) is not None:
            return path
        _short_name(text, path, "file")
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
    if text:
        _examined(text, path)
        _short_name(text, path, "folder")
    if not text or (path.exists() and not path.is_dir()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder: give the path of a folder "
                                         "(it is created when missing)")
    if not path.exists() and not path.is_symlink():
        _writable_place(text, path, "folder")
    elif not path.exists():  # a link to nothing: the folder would be made through it, somewhere else
        raise argparse.ArgumentTypeError(f"{text!r} is a symbolic link to nothing: give a folder, or a path "
                                         "where one may be made")
    elif write_refusal(path):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable ({write_refusal(path)}): give a folder where "
                                         "you may write")
    return path


def bounded(parse: Callable[[str], object], description: str) -> Callable[[str], object]:
    """Mark an option type that bounds its values itself (a size, counts, fractions) as such, for the
    test that requires a bound of every numeric option; `description` says what the bounds are."""
    parse.bounds = description
    return parse


def split_fractions(text: str) -> tuple[float, float, float]:
    """--corpus-split: 0.8,0.1,0.1, the fractions of the lines for train, valid and test."""
    try:
        parts = tuple(float(part) for part in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or not all(0 < part < 1 for part in parts) or abs(sum(parts) - 1) > 1e-6:
        raise argparse.ArgumentTypeError(f"{text!r}: give three fractions above 0 that sum to 1, for train, "
                                         "valid and test, e.g. 0.8,0.1,0.1")
    return parts


bounded(split_fractions, "three fractions in (0, 1) summing to 1")


class FormerName(argparse.Action):
    """An option's former spelling, still taken for one release: its value goes where the option's does
    (`dest`), with one line on standard error naming the option now (`name`); --help leaves it out."""

    def __init__(self, option_strings, dest, *, name: str, **kwargs):
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.name = name

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"lmbench: warning: {option_string} is now {self.name}, as in every command: the old name goes in "
              "the next release", file=sys.stderr)
        setattr(namespace, self.dest, values)

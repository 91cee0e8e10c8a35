"""Files the suite writes for itself and reads back: written atomically, checked when read, prepared once.

- `atomic_write`: into a temporary sibling, then os.replace, so a reader never sees half a file.
- `write_checked`: an atomic write that also records the file's length and SHA-256 beside it, in
  `<name>.sha256`; `read_checked` compares the file with that record (when there is one: a file written
  before records existed, or handed in by the user, is checked by reading it alone), then reads it. A
  mismatch or a failing read (truncated, altered, not of its kind) is a `DamagedFile`: one line naming
  the file, what is wrong with it and the fix.
- `set_aside`: a damaged cache entry is moved to `<name>.damaged`, with one warning line, and rebuilt
  by its caller.
- `locked`: an exclusive lock (fcntl.flock on `<name>.lock`) held while a cache entry is looked up and,
  if need be, built, so that two processes preparing the same entry at once build it once: the second
  waits, then reads the first one's result.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from lmbench.errors import LMBenchError

log = logging.getLogger(__name__)

T = TypeVar("T")

# What parsing a damaged file raises: a short read, bad bytes or a structure that is not there.
READ_ERRORS = (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile, zlib.error)


class DamagedFile(LMBenchError):
    """A file that does not read back as written: truncated, altered, or not of its kind."""

    def __init__(self, path: Path, problem: str, what: str, fix: str):
        self.path, self.what, self.fix = Path(path), what, fix
        self.problem = " ".join(problem.split()) or "it cannot be parsed"  # one line, whatever the parser said
        super().__init__(f"cannot read {what} {path}: {self.problem}; {fix}")

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary
        return type(self), (self.path, self.problem, self.what, self.fix)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(temporary path), then move the result onto `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}{path.suffix}")  # keeps .npz / .pt suffixes
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checked(path: Path, write: Callable[[Path], None]) -> None:
    """atomic_write, then record the file's length and SHA-256 in `<name>.sha256` for read_checked."""
    path = Path(path)
    atomic_write(path, write)
    atomic_write_text(_record_path(path), json.dumps({"bytes": path.stat().st_size, "sha256": _sha256(path)}))


def _mismatch(path: Path) -> str | None:
    """What differs between the file and its record; None when they agree or there is no record."""
    record = _record_path(path)
    if not record.exists():
        return None
    try:
        expected = json.loads(record.read_text())
        size, digest = int(expected["bytes"]), str(expected["sha256"])
    except READ_ERRORS:
        return f"its record {record.name} is unreadable"
    if not path.exists():
        return "it is missing"
    actual = path.stat().st_size
    if actual != size:
        return f"it holds {actual} bytes where {size} were written (cut short or overwritten)"
    if _sha256(path) != digest:
        return "its content differs from what was written (SHA-256 mismatch)"
    return None


def read_checked(path: Path, read: Callable[[Path], T], *, what: str, fix: str) -> T:
    """read(path), after comparing the file with its record (when it has one); a mismatch, or an error
    of READ_ERRORS from read, raises DamagedFile naming `what` the file is and the `fix`."""
    path = Path(path)
    problem = _mismatch(path)
    if problem is None:
        try:
            return read(path)
        except READ_ERRORS as err:
            problem = str(err) or type(err).__name__
    raise DamagedFile(path, problem, what, fix)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def set_aside(entry: Path, damage: DamagedFile) -> None:
    """Move a damaged cache entry (a file with its record, or a folder) to `<name>.damaged`, replacing
    an older one, and say so in one warning line; the caller then builds the entry again."""
    entry = Path(entry)
    aside = entry.with_name(entry.name + ".damaged")
    _remove(aside)
    os.replace(entry, aside)
    _remove(_record_path(entry))
    log.warning("%s %s is damaged (%s): set aside as %s, rebuilding it", damage.what, damage.path,
                damage.problem, aside.name)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<name>.lock` beside `path` (created if missing, never deleted, so
    that every process locks the same file). Where the lock cannot be created (a read-only cache)
    nothing will be written either, and the block runs unlocked."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a")
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    with handle:  # closing the file releases the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process preparing %s", path)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield

"""Files the suite writes for itself and reads back: written atomically, checked when read, prepared once.

- `atomic_write`: into a temporary sibling, flushed to disk (fsync), then os.replace, so a reader never
  sees half a file and a failed write leaves the file as it was (an earlier checkpoint stays good).
  A path that is a symbolic link is written where the link points (the link is kept: renaming onto it
  would replace it), and one that names a descriptor of this process (/dev/stdout, /dev/fd/N,
  /proc/self/fd/N, through links or not) is written through that descriptor, after the streams above it
  are flushed (renaming onto /dev/stdout would replace the system's link with a file). The temporary
  name is short whatever the file's (a name of 250 bytes plus a suffix would pass the system's 255).
  Every file the suite writes goes through it (`atomic_write_file` hands the writer an open binary
  file instead of a path: torch.save, matplotlib). A write that cannot finish ends in one
  `WriteFailed` line naming the file, and its temporary file is removed: a full disk or quota (ENOSPC,
  EDQUOT, EFBIG, or a short write without an errno, as numpy's tofile reports it: "2198 requested
  and 512 written", also when a library wraps it, as torch.save's `[enforce fail at
  inline_container.cc]` does) names the space it needed; any other OSError (a read-only folder) its
  reason. `write_failure(path, err)` makes that line for writers that stream into files of their own
  (baselines/disk_counts.py).
- `write_checked`: an atomic write that also records the file's length and SHA-256 beside it, in
  `<name>.sha256`; `read_checked` compares the file with that record (when there is one: a file written
  before records existed, or handed in by the user, is checked by reading it alone), then reads it. A
  mismatch or a failing read (truncated, altered, not of its kind) is a `DamagedFile`: one line naming
  the file, what is wrong with it and the fix. `file_record` gives that record, for a file that names
  the files written with it (a corpus cache entry's meta.json).
- `set_aside`: a damaged cache entry is moved to `<name>.damaged`, with one warning line, and rebuilt
  by its caller.
- `locked`: an exclusive lock (fcntl.flock on `<name>.lock`) held while a cache entry is looked up and,
  if need be, built, so that two processes preparing the same entry at once build it once: the second
  waits, then reads the first one's result.
- `folder_held`: an exclusive lock on a folder itself (no file left), refused in one line when another
  process holds it (two runs writing one folder at once), or waited for (two processes building one
  n-gram workspace). It and `locked` take their lock alike (`_lock`).
- `replaced_folder`: a folder of several files written together (a report) is built in a temporary
  sibling, a copy of it, and takes its place in one exchange of names when all is written: a reader, a
  full disk or a crash finds the old folder or the new one, never a mix of the two.
"""

from __future__ import annotations

import errno
import fcntl
import ctypes
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, TypeVar

from lmbench.errors import LMBenchError

log = logging.getLogger(__name__)

T = TypeVar("T")

# What parsing a damaged file raises: a short read, bad bytes, a structure that is not there (or nested past
# what the parser follows).
READ_ERRORS = (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, RecursionError, zipfile.BadZipFile,
               zlib.error)


class DamagedFile(LMBenchError):
    """A file that does not read back as written: truncated, altered, or not of its kind."""

    def __init__(self, path: Path, problem: str, what: str, fix: str):
        self.path, self.what, self.fix = Path(path), what, fix
        self.problem = " ".join(problem.split()) or "it cannot be parsed"  # one line, whatever the parser said
        super().__init__(f"cannot read {what} {path}: {self.problem}; {fix}")

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary
        return type(self), (self.path, self.problem, self.what, self.fix)


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, a full quota, a file-size limit
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")  # numpy's tofile, without an errno


class WriteFailed(LMBenchError):
    """A file that could not be written (nothing of it is left): the path, the cause and the fix."""


def _causes(err: BaseException) -> Iterator[BaseException]:
    """err and the exceptions it was raised from or during (torch.save wraps the OSError of its file)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def missing_bytes(err: BaseException) -> tuple[int, str] | None:
    """When `err` is a write that found no room: the bytes it could not write (0: unknown) and the
    system's words for it; else None."""
    for cause in _causes(err):
        if isinstance(cause, OSError) and cause.errno in NO_ROOM:
            return 0, cause.strerror or os.strerror(cause.errno)
        short = _SHORT_WRITE.search(str(cause)) if isinstance(cause, (OSError, RuntimeError)) else None
        if short:
            return max(int(short[1]) - int(short[2]), 0), "short write: the disk is full"
    return None


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def write_failure(path: Path, err: BaseException, written: int = 0, fix: str = "") -> WriteFailed | None:
    """The one line for a failed write of `path` (`written` bytes of it were on disk), or None when `err`
    is not a failed write (a bug, an interruption: raised as it is). `fix`: what to do, when the
    caller knows better than "free space there or write elsewhere"."""
    path = Path(path)
    no_room = missing_bytes(err)
    if no_room is not None:
        missing, reason = no_room
        folder = next((p for p in [path.parent, *path.parents] if p.exists()), path.parent)
        need = f"at least {_size(written + missing)}" if missing else f"more than the {_size(written)} written"
        try:
            room = shutil.disk_usage(folder).free
        except OSError:
            room = None
        if room is None:
            free = ""
        elif room > 100 * max(written + missing, 2**20):  # (room for a hundred such files: not its free space)
            free = (f"; the disk there shows {_size(room)} free, so a quota, a limit on a file's size or a "
                    "filesystem out of inodes may be what refused it")
        else:
            free = f", {_size(room)} free there"
        return WriteFailed(f"no room to write {path} ({reason}, after {_size(written)}): it needs {need}"
                           f"{free}; nothing of it was kept: "
                           f"{fix or 'free space there or write to another folder'}")
    for cause in _causes(err):
        if isinstance(cause, OSError):
            reason = cause.strerror or str(cause) or type(cause).__name__
            return WriteFailed(f"cannot write {path}: {' '.join(reason.split())}; nothing of it was kept: "
                               f"{fix or 'write to a folder where you may write'}")
    return None


SHORT_NAME = 100  # bytes of a file's name kept in the temporary names made from it (the system allows 255)
_DESCRIPTOR = re.compile(r"/proc/(?P<pid>\d+|self|thread-self)(?:/task/\d+)?/fd/(?P<fd>\d+)")
MAX_LINKS = 40  # links followed at most (the system's own limit)


def _shortened(name: str, size: int = SHORT_NAME) -> str:
    """The first `size` bytes of a file name (a cut inside a character kept as the system's bytes)."""
    return os.fsdecode(os.fsencode(name)[:size])


def _temporary(path: Path) -> Path:
    """A temporary sibling of `path`, named after it within SHORT_NAME bytes and keeping a short suffix
    (.npz, .pt: numpy adds .npz to a name without it)."""
    suffix = path.suffix if len(os.fsencode(path.suffix)) <= 16 else ""
    return path.with_name(f"{_shortened(path.stem)}.tmp{os.getpid()}{suffix}")


def descriptor(path: Path) -> int | None:
    """The open descriptor of this process that `path` names, following links (/dev/stdout ->
    /proc/self/fd/1), or None: a path of the file system."""
    here = Path(os.path.abspath(path))
    for _ in range(MAX_LINKS):
        here = Path(os.path.realpath(here.parent)) / here.name  # (/dev/fd -> /proc/self/fd -> /proc/PID/fd)
        named = _DESCRIPTOR.fullmatch(str(here))
        if named and named["pid"] in ("self", "thread-self", str(os.getpid())):
            return int(named["fd"])
        if not here.is_symlink():
            return None
        here = Path(os.path.abspath(here.parent / os.readlink(here)))
    return None


def written_path(path: Path) -> Path:
    """Where a write of `path` lands: the file its links point to (the path itself when it is none)."""
    return Path(os.path.realpath(path))


def _fsync(path: Path, flags: int = os.O_RDONLY) -> None:
    handle = os.open(path, flags)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def atomic_write(path: Path, write: Callable[[Path], None], *, fix: str = "") -> None:
    """Call write(temporary path), flush it to disk, then move it onto `path`; on any failure the
    temporary file is removed and `path` left as it was; a failed write (full disk, read-only folder)
    raises WriteFailed (one line, with `fix` when given). A link is written where it points, a
    descriptor (/dev/stdout) through itself (module docstring)."""
    given = Path(path)  # (named in a failure's line, as the user gave it)
    handle = descriptor(given)
    if handle is not None:
        return _write_through(given, handle, write, fix)
    path = written_path(given)
    tmp = _temporary(path)
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write(tmp)
            _fsync(tmp)
            os.replace(tmp, path)
        except (OSError, RuntimeError) as err:
            written = tmp.stat().st_size if tmp.exists() else 0
            tmp.unlink(missing_ok=True)  # before the free space is measured
            failure = write_failure(given, err, written, fix)
            if failure is None:
                raise
            raise failure from None
        try:
            _fsync(path.parent)  # the rename itself, on the folder
        except OSError:
            pass  # a folder that cannot be opened for syncing (some network file systems): the data is
    finally:   # synced, only the rename may be lost in a crash
        tmp.unlink(missing_ok=True)


def _write_through(path: Path, handle: int, write: Callable[[Path], None], fix: str) -> None:
    """write() into a temporary file, then its bytes through descriptor `handle` (named by `path`), after
    what Python holds for stdout and stderr: the file lands where the descriptor writes, in order."""
    made, tmp = tempfile.mkstemp(suffix=path.suffix if len(os.fsencode(path.suffix)) <= 16 else "")
    os.close(made)
    tmp = Path(tmp)
    written = 0
    try:
        write(tmp)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        with open(tmp, "rb") as source, os.fdopen(os.dup(handle), "wb") as target:
            for block in iter(lambda: source.read(1 << 20), b""):
                target.write(block)
                written += len(block)
    except (OSError, RuntimeError) as err:  # (a reader gone: Broken pipe)
        failure = write_failure(path, err, written, fix or "keep what reads it open, or give the path of a file")
        if failure is None:
            raise
        raise WriteFailed(str(failure).replace("nothing of it was kept", f"{_size(written)} of it went through")) \
            from None
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_file(path: Path, write: Callable[[BinaryIO], None], *, fix: str = "") -> None:
    """atomic_write, handing `write` an open binary file (so a library writing through Python, as
    torch.save and matplotlib do, reports a full disk as an OSError that WriteFailed can name)."""
    def into(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            write(out)
    atomic_write(path, into, fix=fix)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


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


def file_record(path: Path) -> dict | None:
    """The length and SHA-256 that write_checked recorded for `path` ({"bytes", "sha256"}), None where there is
    no readable record: what a file written with others can name them by (a cache entry's meta.json)."""
    try:
        return json.loads(_record_path(Path(path)).read_text(encoding="utf-8"))
    except READ_ERRORS:
        return None


def _mismatch(path: Path) -> str | None:
    """What differs between the file and its record; None when they agree or there is no record."""
    record = _record_path(path)
    if not record.exists():
        return None
    try:
        expected = json.loads(record.read_text(encoding="utf-8"))
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


def _lock(handle, wait: bool, doing: str) -> bool:
    """Take an exclusive flock on `handle` (an open file or a descriptor: closing it releases the lock);
    True once held. Where another process holds it: False at once when not `wait`, else one line
    ("waiting for another process `doing`") and True when that process lets it go."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if not wait:
            return False
        log.info("waiting for another process %s", doing)
        fcntl.flock(handle, fcntl.LOCK_EX)
    return True


@contextmanager
def folder_held(folder: Path, busy: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `folder` itself (created if missing; no lock file left) while the block
    runs. Where another process holds it: with `busy`, raise LMBenchError(busy) at once (two runs writing
    one folder); without, wait for it, and lock anew a folder that process removed and made again
    meanwhile (two processes building one n-gram workspace: baselines.disk_counts)."""
    folder = Path(folder)
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        handle = os.open(folder, os.O_RDONLY)
        try:
            if not _lock(handle, busy is None, f"building in {folder}"):
                raise LMBenchError(busy)
            if folder.exists() and os.stat(folder).st_ino == os.fstat(handle).st_ino:
                yield
                return
        finally:
            os.close(handle)


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on `<name>.lock` beside `path` (created if missing, never deleted, so
    that every process locks the same file); yields True once held. `wait=False`: where another
    process holds it, yield False at once instead of waiting (the block then must not touch `path`).
    Where the lock cannot be created (a read-only cache) nothing will be written either, and the
    block runs unlocked."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a", encoding="utf-8")
    except OSError:
        handle = None
    if handle is None:
        yield True
        return
    with handle:  # closing the file releases the lock
        yield _lock(handle, wait, f"preparing {path}")


RENAME_EXCHANGE = 2  # renameat2's flag (Linux 3.15): swap two names at once


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names of a and b in one step (renameat2 RENAME_EXCHANGE); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_cwd = -100  # AT_FDCWD
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system without exchange
        return False
    raise OSError(code, os.strerror(code), str(a))


@contextmanager
def replaced_folder(folder: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `folder` holding its files (hard links; empty when there is none yet);
    when the block ends, the sibling takes the folder's place whole: in one exchange of the two names
    where the system has it (else two renames, between which only the old folder is under a name of
    its own), and the old one is removed. When the block fails (a full disk), the sibling is removed and
    `folder` is as it was; an error line naming a file of the sibling names the file of `folder`. The
    block must write each file by replacing it (as `atomic_write` does): one opened for writing in place
    would write through its hard link into the old folder."""
    folder = Path(folder).resolve()  # (a link to a folder: the folder is replaced, the link kept)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{_shortened(folder.name)}.new", dir=folder.parent))
    old = stage.with_name(stage.name.replace(".new", ".old", 1))
    try:
        try:
            if folder.is_dir():  # hard links: no byte copied, and a file rewritten in the stage is a new one
                shutil.copytree(folder, stage, symlinks=True, dirs_exist_ok=True, copy_function=_linked)
            os.chmod(stage, folder.stat().st_mode & 0o7777 if folder.is_dir() else 0o777 & ~_umask())
        except OSError as err:
            failure = write_failure(stage, err)
            if failure is None:
                raise
            raise WriteFailed(str(failure).replace(str(stage), str(folder))) from None
        try:
            yield stage
        except LMBenchError as failure:  # named as the file of `folder` it stands for
            if str(stage) not in str(failure):
                raise
            kind = WriteFailed if isinstance(failure, WriteFailed) else LMBenchError
            raise kind(str(failure).replace(str(stage), str(folder))) from None
        if folder.is_dir() and _exchange(stage, folder):
            shutil.rmtree(stage)  # (now the old folder)
        else:
            if folder.is_dir():
                os.replace(folder, old)
            os.replace(stage, folder)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _linked(source: str, target: str) -> None:
    """A hard link of `source` at `target`, a copy where the file system has no hard links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

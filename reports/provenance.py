"""Which code made a report: the commit of the checkout and whether its tree was clean.

A committed report is only worth its numbers if anyone can check out the code that made it, so
`lmbench reproduce` and `lmbench report` refuse to write into a report folder that git would commit (one
under the checkout's results/ that .gitignore does not exclude, such as results/brown) while tracked
files differ from the commit, unless --allow-dirty is given; the report's first line then says so.
An untracked .py file in a package folder the process imported code from counts as a change too: a
family is one file that the registry imports by itself (`neural.families`), so a report made with a
family file not yet committed ran code no commit holds. Changes inside the report folder itself (its own previous outputs) and inside results/ (the committed
reports: data the code made, not code) do not count. Outside a git checkout
(an installed package) the commit is "unknown" and nothing is refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lmbench.errors import LMBenchError

CHECKOUT = Path(__file__).resolve().parents[1]  # the code's own checkout, wherever the command runs


def _git(root: Path, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, cwd=root)
    except (OSError, subprocess.SubprocessError):
        return None


def _top(root: Path | None) -> Path | None:
    """The top of the git checkout holding `root` (default: this code's), or None outside one."""
    done = _git(root or CHECKOUT, "rev-parse", "--show-toplevel")
    return Path(done.stdout.strip()) if done is not None and done.returncode == 0 else None


def committed_folder(report_dir: Path, root: Path | None = None) -> bool:
    """Whether git would commit the files of `report_dir`: under the checkout's results/, not ignored."""
    top = _top(root)
    if top is None:
        return False
    folder = Path(report_dir).resolve()
    if not folder.is_relative_to(top / "results") or folder == top / "results":
        return False
    done = _git(top, "check-ignore", "-q", str(folder / "report.md"))
    return done is not None and done.returncode == 1  # 0: ignored, 1: not ignored


def imported_folders(top: Path) -> list[str]:
    """The top-level folders of the checkout at `top` that this process imported modules from (its
    packages: the code that runs)."""
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().is_relative_to(top) and len(Path(path).resolve().relative_to(top).parts) > 1:
            found.add(Path(path).resolve().relative_to(top).parts[0])
    return sorted(found)


def untracked_code(top: Path) -> list[str]:
    """The untracked (and not ignored) .py files in the package folders this process imported code from."""
    folders = imported_folders(top)
    if not folders:
        return []
    done = _git(top, "ls-files", "--others", "--exclude-standard", "--", *folders)
    return [] if done is None else [name for name in done.stdout.splitlines() if name.endswith(".py")]


def code_state(report_dir: Path | None = None, root: Path | None = None) -> dict:
    """{"commit": short hash or "unknown", "dirty": tracked files differ from it, or code the process
    imported from is untracked (`untracked_code`)}; the changes inside `report_dir` (the report's own
    outputs) and results/ (the committed reports) left out."""
    top = _top(root)
    if top is None:
        return {"commit": "unknown", "dirty": False}
    commit = _git(top, "rev-parse", "--short", "HEAD")
    status = ["status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"]
    if report_dir is not None and Path(report_dir).resolve().is_relative_to(top):
        status.append(f":(exclude){Path(report_dir).resolve().relative_to(top)}")
    changed = _git(top, *status)
    return {"commit": commit.stdout.strip() if commit is not None and commit.returncode == 0 else "unknown",
            "dirty": bool(changed is not None and changed.stdout.strip()) or bool(untracked_code(top))}


def checked_state(report_dir: Path, allow_dirty: bool, root: Path | None = None) -> dict:
    """The code's state, refused (LMBenchError) when it is dirty and `report_dir` is a committed report
    folder, unless `allow_dirty`; the state records `allow_dirty` when it let a dirty tree through."""
    state = code_state(report_dir, root)
    if state["dirty"] and committed_folder(report_dir, root):
        if not allow_dirty:
            raise LMBenchError(f"{report_dir} is a committed report folder and the checkout has uncommitted "
                               f"changes (git status; an untracked .py file of its packages counts): commit them first, so that the report names a commit "
                               f"anyone can check out, or give --allow-dirty (the report then says so)")
        state["allow_dirty"] = True
    return state


def stamp(state: dict) -> str:
    """The report's first words: the commit, and how far it is from the code that ran."""
    if not state.get("dirty"):
        return f"commit {state.get('commit', 'unknown')} (clean tree)"
    how = "--allow-dirty: " if state.get("allow_dirty") else ""
    return f"commit {state.get('commit', 'unknown')} WITH UNCOMMITTED CHANGES ({how}not reproducible from it)"

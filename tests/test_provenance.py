"""Reports traced to a commit (reports.provenance): the commit and a clean tree are recorded, and a
committed report folder is not written from a dirty tree unless --allow-dirty, which the report's first
line then states. Run in a scratch git checkout holding a results/ folder, as the project's does."""

import json
import shutil
import subprocess

import pytest

from reports import provenance
from tests.helpers import run_cli
from tests.test_reports import fake_results


def git(root, *args) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git checkout with code, a committed results/brown (its results.json) and ignored quick reports;
    the commands treat it as their own."""
    root = tmp_path / "checkout"
    (root / "results" / "brown").mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("/results/*-quick/\n")
    (root / "results" / "brown" / "results.json").write_text(json.dumps(fake_results({"mlp1": 270.0})))
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    monkeypatch.setattr(provenance, "CHECKOUT", root)
    return root


def test_committed_folders_are_those_git_would_commit(checkout):
    assert provenance.committed_folder(checkout / "results" / "brown")
    assert provenance.committed_folder(checkout / "results" / "mine")  # new, but would be committed
    assert not provenance.committed_folder(checkout / "results" / "brown-quick")  # ignored
    assert not provenance.committed_folder(checkout / "results")
    assert not provenance.committed_folder(checkout.parent / "elsewhere")


def test_the_state_names_the_commit_and_a_dirty_tree(checkout):
    commit = git(checkout, "rev-parse", "--short", "HEAD")
    brown = checkout / "results" / "brown"
    assert provenance.code_state(brown) == {"commit": commit, "dirty": False}
    (brown / "results.json").write_text("{}")  # the report's own outputs: not a change of the code
    assert provenance.code_state(brown)["dirty"] is False
    # another committed report's outputs are data, not code: rebuilding the reports one after another
    assert provenance.code_state(checkout / "results" / "mine")["dirty"] is False
    (checkout / "code.py").write_text("x = 2\n")
    assert provenance.code_state(brown) == {"commit": commit, "dirty": True}
    assert provenance.code_state(checkout.parent, root=checkout.parent) == {"commit": "unknown", "dirty": False}


def test_untracked_code_of_an_imported_package_makes_the_tree_dirty(checkout, monkeypatch):
    """A family is one file the registry imports by itself: a report made with one not yet committed
    (issue 53: "commit 53fe6d2 (clean tree)" with neural/networks/lbl.py untracked) ran code no commit
    holds. An untracked .py file of a package the process imported from is a change; one of a folder it
    never imported from, or a file that is not code, is not."""
    import importlib
    import sys
    (checkout / "lbpkg" / "networks").mkdir(parents=True)
    (checkout / "lbpkg" / "__init__.py").write_text("")
    git(checkout, "add", "lbpkg")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a package")
    brown = checkout / "results" / "brown"
    monkeypatch.syspath_prepend(str(checkout))
    try:
        importlib.import_module("lbpkg")
        (checkout / "lbpkg" / "networks" / "notes.txt").write_text("not code\n")
        (checkout / "scratch").mkdir()
        (checkout / "scratch" / "tried.py").write_text("x = 1\n")  # a folder nothing was imported from
        assert provenance.code_state(brown)["dirty"] is False
        (checkout / "lbpkg" / "networks" / "lbl.py").write_text("FAMILY = 'lbl'\n")
        assert provenance.code_state(brown)["dirty"] is True
        assert provenance.stamp(provenance.code_state(brown)).endswith("WITH UNCOMMITTED CHANGES (not reproducible from it)")
    finally:
        sys.modules.pop("lbpkg", None)


@pytest.mark.slow
def test_report_into_a_committed_folder_needs_a_clean_tree_or_allow_dirty(checkout, capsys):
    brown = checkout / "results" / "brown"
    commit = git(checkout, "rev-parse", "--short", "HEAD")
    code, out, err = run_cli(capsys, "report", "brown", "--report-dir", brown, "--json")
    assert code == 0, err
    assert json.loads(out)["commit"] == f"commit {commit} (clean tree)"
    first = (brown / "report.md").read_text().splitlines()[0]
    assert first.startswith(f"Built from commit {commit} (clean tree); rows run at commit abc (clean tree)")

    (checkout / "code.py").write_text("x = 2\n")
    code, out, err = run_cli(capsys, "report", "brown", "--report-dir", brown)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "is a committed report folder and the checkout has uncommitted changes" in err and "--allow-dirty" in err
    code, _, err = run_cli(capsys, "report", "brown", "--report-dir", brown, "--allow-dirty")
    assert code == 0, err
    first = (brown / "report.md").read_text().splitlines()[0]
    assert first.startswith(f"Built from commit {commit} WITH UNCOMMITTED CHANGES (--allow-dirty: ")
    assert "WITH UNCOMMITTED CHANGES (--allow-dirty" in (brown / "report.html").read_text()
    quick = checkout / "results" / "brown-quick"  # an ignored folder is written from a dirty tree
    shutil.copytree(brown, quick)  # (its figures too: drawn from the same results, they are not drawn again)
    assert run_cli(capsys, "report", "brown", "--report-dir", quick)[0] == 0


def test_reproduce_is_refused_before_any_row_runs(checkout, tmp_path, capsys):
    (checkout / "code.py").write_text("x = 2\n")
    for split in ("train", "valid", "test"):
        (checkout / f"{split}.txt").write_text(f"{split} x = 2\n")
    files = [word for split in ("train", "valid", "test") for word in (f"--{split}", str(checkout / f"{split}.txt"))]
    code, _, err = run_cli(capsys, "reproduce", "text", *files, "--work-dir", tmp_path / "work",
                           "--report-dir", checkout / "results" / "mine")
    assert code == 2 and "--allow-dirty" in err
    assert not (tmp_path / "work").exists() and not (checkout / "results" / "mine").exists()

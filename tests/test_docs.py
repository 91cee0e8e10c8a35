"""The documentation: README.md stays short, and the MkDocs site builds with --strict, so a broken link
or anchor in docs/ fails here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_short():
    assert (ROOT / "README.md").stat().st_size <= 10_000  # the rest lives in docs/


@pytest.mark.slow  # mkdocs renders every page (a few seconds)
def test_docs_build_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()

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


FAMILIES_TABLE = r"<!-- families -->\n(.*?)<!-- /families -->"  # where docs/networks.md keeps it


def test_the_docs_list_the_families_the_registry_has():
    """docs/networks.md's table of families is the registry's (`neural.families.families_markdown`): a family
    added, renamed or given another option fails here until the table is written again (`python -m
    tests.test_docs`)."""
    import re
    from neural.families import families_markdown
    page = (ROOT / "docs" / "networks.md").read_text()
    found = re.search(FAMILIES_TABLE, page, flags=re.S)
    assert found is not None and found.group(1) == families_markdown(), (
        "docs/networks.md's families table is stale: write it again with `python -m tests.test_docs`")


METHODS_TABLE = r"<!-- methods -->\n(.*?)<!-- /methods -->"  # where docs/ngram.md keeps it


def test_the_docs_list_the_ngram_methods_the_registry_has():
    """docs/ngram.md's table of n-gram methods is the registry's (`baselines.methods.methods_markdown`): a
    method added, or registered with other orders, options or rows, fails here until the table is written
    again (`python -m tests.test_docs`)."""
    import re
    from baselines.methods import methods_markdown
    page = (ROOT / "docs" / "ngram.md").read_text()
    found = re.search(METHODS_TABLE, page, flags=re.S)
    assert found is not None and found.group(1) == methods_markdown(), (
        "docs/ngram.md's methods table is stale: write it again with `python -m tests.test_docs`")


if __name__ == "__main__":  # docs/networks.md's families table and docs/ngram.md's methods table written again
    import re
    from baselines.methods import methods_markdown
    from neural.families import families_markdown
    for name, pattern, marker, table in (("networks.md", FAMILIES_TABLE, "families", families_markdown()),
                                         ("ngram.md", METHODS_TABLE, "methods", methods_markdown())):
        page = ROOT / "docs" / name
        page.write_text(re.sub(pattern, lambda _: f"<!-- {marker} -->\n{table}<!-- /{marker} -->",
                               page.read_text(), count=1, flags=re.S))

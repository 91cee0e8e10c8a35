"""Issue 69, item 10: what the reports write unescaped. A results.json whose corpus name, row labels, row id,
machine, neighbour words and samples carry markup (`<img src=x onerror=alert(1)>`, `[x](javascript:alert(1))`,
`a|b|c`) and LaTeX's specials went raw into report.md (its title, headings, tables, prose), table.md,
summary.md, the README's blocks and table.tex: a live tag and link where the Markdown is rendered, columns
added to its tables, `<` `>` `|` drawn as other glyphs in LaTeX. Walked over every page of both kinds (5
files): each holds every string, as text (reports.building.markup). The committed reports, which hold no such text
but `<unk>` in two neighbours tables (a raw tag, shown as nothing), rebuild to the same bytes otherwise.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from reports.building.build import build_report
from reports.experiments import network
from reports.building.summary import block_markers, write_summary
from tests.test_summary import KN5, record, results

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ["<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "a|b|c", "\\ { } $ & # ^ _ % ~"]
NAME = " ".join(HOSTILE)
MARKDOWN_PAGES = ["r/report.md", "r/table.md", "summary.md", "../README.md"]
LATEX_PAGES = ["r/table.tex"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    """The results folder of one hostile report, its summary and the README's blocks beside it."""
    root = tmp_path_factory.mktemp("hostile") / "results"
    mlp = network(f"mlp1 {NAME}", f"MLP {NAME}", (5, 50, 60, True))
    hostile = results(NAME, [{**record(KN5, 210, 200), "model": f"KN {NAME}"}, record(mlp, 190, 180)])
    hostile["meta"]["machine"] = NAME
    hostile["neighbors"] = {"row": mlp.id, "words": {word: [[near, 0.5] for near in HOSTILE] for word in HOSTILE}}
    hostile["samples"] = {"seed_text": NAME, "words": 3, "seed": 0, "rows": [
        {"model": NAME, "row": "kn-interp-5", "test_ppl": 200.0, "continuations": HOSTILE}]}
    (root / "r").mkdir(parents=True)
    (root / "r" / "results.json").write_text(json.dumps(hostile))
    (root / "index.txt").write_text("r\n")
    (root.parent / "README.md").write_text("\n".join(line for name in ("answer", "cost") for line in block_markers(name)))
    build_report(root / "r", {"commit": "abc", "dirty": False}, results_dir=root)
    write_summary(root)
    return root


def unescaped(text: str) -> str:
    """The text with every backslash-escaped character taken out (`\\|`, `\\]`, `\\\\`): what is left is markup."""
    return re.sub(r"\\.", "", text)


def markdown_problems(text: str) -> dict[str, list[str]]:
    """What in a Markdown page is markup the page did not write: raw HTML tags, link targets other than its
    figures and pages, table rows of another number of columns than their table's first."""
    markers = {marker for name in ("answer", "cost") for marker in block_markers(name)}  # (the README's comments)
    prose = "\n".join(line for line in text.splitlines() if line not in markers)
    tables = re.findall(r"(?:^\|.*\n?)+", text, flags=re.MULTILINE)
    return {"raw HTML tags": re.findall(r"<[A-Za-z/!?][^>]*>?", re.sub(r"`[^`\n]*`", "", prose)),  # (its own code
            "live links": [target for target in re.findall(r"\]\(([^)]*)\)", unescaped(text))     # spans: `<unk>`)
                           if not re.fullmatch(r"[\w/.-]+\.(png|md)", target)],
            "rows of another width": [line for table in tables for line in table.splitlines()
                                      if unescaped(line).count("|") != unescaped(table).split("\n")[0].count("|")]}


@pytest.mark.parametrize("page", MARKDOWN_PAGES)
def test_a_markdown_page_holds_the_results_text_as_text(pages, page):
    text = (pages / page).read_text(encoding="utf-8")
    assert markdown_problems(text) == {"raw HTML tags": [], "live links": [], "rows of another width": []}
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and re.search(r"^\|", text, flags=re.MULTILINE)


# A special character written as LaTeX prints it: a command (its {} or space after it: ours or pandas' form) or
# a backslash before it; and < > |, which OT1 fonts draw as other glyphs (an inverted !, ?, a dash).
LATEX_ESCAPES = r"\\(?:textbackslash|textasciicircum|textasciitilde|textless|textgreater|textbar|space)\b(?:\{\}| )?|\\[{}$&#_%]"


@pytest.mark.parametrize("page", LATEX_PAGES)
def test_a_latex_table_holds_the_results_text_as_text(pages, page):
    lines = (pages / page).read_text(encoding="utf-8").splitlines()
    rows = [line.removesuffix(r" \\") for line in lines if line.endswith(r" \\")]  # the header and every row
    assert len(rows) == 3 and any("MLP " in row for row in rows)
    left = [re.sub(LATEX_ESCAPES, "", row) for row in rows]  # what is not an escape is text, or a column's &
    assert [re.findall(r"[\\{}$#^_%~<>|]", row) for row in left] == [[]] * len(rows), "a special not escaped"
    assert len({row.count("&") for row in left}) == 1, "a row with another number of columns"


def neighbours_apart(text: str) -> tuple[list[str], str]:
    """(the report's lines but its neighbours section and stamp, that section)."""
    lines = text.splitlines()[1:]  # (the stamp names the commit that built it)
    start = next((i for i, line in enumerate(lines) if line.startswith("## Nearest neighbours")), len(lines))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[:start] + lines[end:], "\n".join(lines[start:end])


@pytest.mark.slow  # a committed report's claims and figures, rebuilt
def test_a_committed_report_rebuilds_to_its_bytes_but_for_its_raw_tags(tmp_path):
    """results/ap: its report.md held `<unk>` raw in its neighbours table (a tag, shown as nothing) until it was
    rebuilt with the summary at 960e25c: that table is built with `&lt;unk&gt;`, every line of every page to the
    committed bytes."""
    shutil.copytree(ROOT / "results", tmp_path / "results")
    build_report(tmp_path / "results" / "ap", {"commit": "abc", "dirty": False}, results_dir=tmp_path / "results")
    committed, rebuilt = ROOT / "results" / "ap", tmp_path / "results" / "ap"
    for page in ("table.md", "table.tex", "table.csv"):
        assert (rebuilt / page).read_bytes() == (committed / page).read_bytes(), page
    (kept, was), (now_kept, now) = (neighbours_apart((folder / "report.md").read_text(encoding="utf-8"))
                                    for folder in (committed, rebuilt))
    assert now_kept == kept
    assert now == was and "<unk>" not in now and "| &lt;unk&gt; |" in now

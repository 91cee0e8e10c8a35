"""Figures that cannot go stale: every perplexity, percentage and time quoted in README.md and the docs'
guide pages matches a committed results.json (or claims.json) at the precision quoted, and the
README's generated answer is what `lmbench report summary` writes now. The measurement log
(docs/measurements.md) is exempt: each of its entries is dated and names its commit.

A figure is checked against the committed reports its paragraph names (`results/ap89-1m`, "Brown",
...; every report where it names none): a perplexity (a decimal number from 10 up) against every
perplexity of their rows, intervals, seeds and learning curves; a percentage against the differences
between their rows (each row against KN 5, KN back-off 5, the trigram, its parts and its mixture
without the ∞-gram), their claims' figures, <unk> rates and the relative spreads of seeds and
intervals; a time (s, min, minutes, h, hours) against their runs' wall and row times, each row's, and
the networks' sum. A figure from elsewhere (the paper's own tables) is quoted as an integer; a benchmark's, or a
run's that no committed report holds, lives in the measurement log, and a paragraph that quotes it
links the log. A figure inside `code` (a command, a line a command prints) and a bound ("under 2
minutes", ">= 90%") are no quotes of a result."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reports.building.summary import listed_reports

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
GUIDE_PAGES = sorted(path for path in (ROOT / "docs").glob("*.md") if path.name != "measurements.md")
PAGES = [ROOT / "README.md", *GUIDE_PAGES]
NAMED = {"ap89-1m": r"ap89-1m|AP 1989(?:'s first)? 1M", "ap89-4m": r"ap89-4m|AP 1989(?:'s first)? 4M",
         "brown-vocab-train": r"brown-vocab-train|Brown with (?:its|the)\s+vocabulary",
         "brown": r"\b[Bb]rown\b(?!-)", "ap": r"\b(?:AP|ap)\b(?![-\d])"}  # a report: how a paragraph names it
PERCENT = re.compile(r"(?<![\w.])([+-]?\d+(?:\.\d+)?) ?%")
TIME = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?) ?(s|min|minutes|h|hours)\b(?! ?=)")
PERPLEXITY = re.compile(r"(?<![\w.,/-])(\d{2,4}\.\d{1,2})(?![\w.%]| ?(?:s|min|minutes|h|hours|GiB|GB|MB)\b)")
LOG = re.compile(r"\]\((?:docs/)?measurements\.md")  # a paragraph that quotes the measurement log, linked
COMMITTED = re.compile(r"results/[\w-]+|committed report")  # a paragraph that quotes a committed report
BOUND = re.compile(r"(?:>=|<=|<|>|under|less than|at most|at least|within|every|each) $")  # a threshold, not a figure
UNITS = {"s": 1, "min": 60, "minutes": 60, "h": 3600, "hours": 3600}


def _numbers(value):
    """Every finite number in a JSON value, and in its strings."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, str):
        yield from (float(found) for found in re.findall(r"[+-]?\d+(?:\.\d+)?", value))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def _perplexities(row: dict):
    for key, value in row.items():
        if key.endswith("_ppl") or key.endswith("_ppl_ci95"):
            yield from _numbers(value)
    for seed in row.get("seeds") or []:
        yield from (value for key, value in seed.items() if key.endswith("_ppl") and value is not None)
    for point in row.get("curve") or []:
        yield from (value for key, value in point.items() if "perplexity" in key and value is not None)


def committed(name: str) -> dict:
    """The figures of one committed report, by kind: perplexities, percentages, seconds."""
    results = json.loads((RESULTS / name / "results.json").read_text())
    claims = json.loads((RESULTS / name / "claims.json").read_text())
    rows = {row["id"]: row for row in results["rows"]}
    figures = {"ppl": set(), "percent": set(_numbers(claims)), "seconds": set()}
    for row in rows.values():
        figures["ppl"].update(_perplexities(row))
    references = [rows.get(found) for found in ("kn-interp-5", "kn-backoff-5", "del-int", "infini-gram-kn-5")]
    for row in rows.values():
        compared = [*references, *(rows.get(part) for part in row.get("parts") or ()),
                    rows.get(row["id"].removesuffix("-infini-gram") + "-em")]
        for other in compared:
            for split in ("valid_ppl", "test_ppl"):
                if other and row.get(split) and other.get(split):
                    figures["percent"].add(100 * (row[split] / other[split] - 1))
        for split in ("valid_ppl", "test_ppl"):
            if row.get(f"{split}_sd") and row.get(split):
                figures["percent"].add(100 * row[f"{split}_sd"] / row[split])
            if row.get(f"{split}_ci95") and row.get(split):
                low, high = row[f"{split}_ci95"]
                figures["percent"].update({100 * (high - low) / 2 / row[split], 100 * (high / row[split] - 1),
                                           100 * (1 - low / row[split])})
        figures["seconds"].update(value for key in ("seconds", "train_seconds") if (value := row.get(key)))
        figures["seconds"].update(seed["seconds"] for seed in row.get("seeds") or [] if seed.get("seconds"))
    summary = results["corpus_summary"]
    figures["percent"].update(100 * summary["unk_tokens"][split] / summary["tokens"][split]
                              for split in summary["tokens"] if summary["tokens"][split])
    figures["seconds"].update(value for key in ("wall_seconds", "rows_seconds") if (value := results["meta"].get(key)))
    figures["seconds"].add(sum(row.get("seconds") or 0 for row in rows.values() if row["kind"] == "network"))
    return figures


REPORTS = [folder.name for folders in listed_reports(RESULTS) for folder in folders]  # siblings too
FIGURES = {name: committed(name) for name in REPORTS}


def _matches(quoted: str, pool, scale: float = 1.0, signless: bool = False) -> bool:
    """Whether `quoted` (as written) is some figure of `pool` (divided by `scale`), rounded as quoted."""
    text = quoted.replace(",", "")
    decimals = len(text.split(".")[1]) if "." in text else 0
    value = float(text)
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs((abs(figure) if signless else figure) / scale - (abs(value) if signless else value)) <= tolerance
               for figure in pool)


def stale_figures(page: str) -> list[str]:
    """The figures quoted in `page` (Markdown) that match no committed report the paragraph names."""
    stale = []
    page = re.sub(r"<!-- (\w+): written by .*?<!-- /\1 -->", "", page, flags=re.S)  # generated, checked whole
    page = re.sub(r"```.*?```", "", page, flags=re.S)  # commands, not figures
    for block in re.split(r"\n\s*\n", page):
        if LOG.search(block) and not COMMITTED.search(block):
            continue  # its figures are the measurement log's, dated and commit-stamped there
        named = _names(block)
        for part in re.split(r"\n(?=\|)", block):  # each table row names its own report, if any
            pools = [FIGURES[name] for name in _names(part) or named or FIGURES]
            text = re.sub(r"`[^`]*`", "``", part)  # a command, or a line a command prints, quoted
            for pattern, kind, scale in ((PERCENT, "percent", None), (TIME, "seconds", UNITS),
                                         (PERPLEXITY, "ppl", None)):
                for found in pattern.finditer(text):
                    if BOUND.search(text[:found.start()]):
                        continue
                    if not any(_matches(found[1], pool[kind], scale[found[2]] if scale else 1.0, kind == "percent")
                               for pool in pools):
                        stale.append(f"{found[0]!r} in: {_context(text, found)}")
    return stale


def _names(text: str) -> list[str]:
    return [name for name, pattern in NAMED.items() if name in FIGURES and re.search(pattern, text)]


def _context(text: str, found: re.Match) -> str:
    return " ".join(text[max(0, found.start() - 60):found.end() + 20].split())


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_every_quoted_figure_is_a_committed_one(page):
    assert stale_figures(page.read_text()) == []


def test_a_stale_figure_is_caught():
    """The Transformer of results/ap89-1m as docs/your-corpus.md quoted it before its report was re-run
    (73.1, -32.7%, 914 s of training) beside the figures its results.json holds now."""
    now = "On `results/ap89-1m` the Transformer reached 73.5 (-32.3%) in 6,300 s of its 12,525 s."
    assert stale_figures(now) == []
    stale = [found.split("'")[1] for found in stale_figures(now.replace("6,300 s", "914 s"))]
    assert stale == ["914 s"]
    stale = [found.split("'")[1] for found in stale_figures(now.replace("73.5 (-32.3%)", "73.1 (-32.7%)"))]
    assert stale == ["-32.7%"]  # (73.1 is a figure of the run: its first seed's, 73.13)
    assert stale_figures(now.replace("ap89-1m", "brown")) != []  # another report's figures are not these


def test_readme_blocks_are_generated():
    """README's answer and cost blocks are what `lmbench report summary` writes from the committed
    results now (a hand edit, or a report rebuilt without the summary, fails here)."""
    from reports.building.summary import block_markers, corpus_line, listed_results, page_blocks, with_blocks
    readme = (ROOT / "README.md").read_text()
    corpora, reports = listed_results(RESULTS)
    blocks = page_blocks([corpus_line(name, corpora[name]) for name in sorted(corpora)], reports)
    assert all(block_markers(name)[0] in readme for name in blocks)
    assert with_blocks(readme, blocks) == readme

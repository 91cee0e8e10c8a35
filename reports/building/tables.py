"""The paper's tables beside ours: one DataFrame, written as Markdown, CSV, LaTeX and HTML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lmbench.files import atomic_write_text
from reports.building.markup import latex_table, markdown_table
from reports.records import by_id, family_shape, network_of, shape, training_cost

PAPER_CSV = Path(__file__).with_name("paper_tables.csv")
PAPER_TABLE = {"brown": 1, "ap": 2}


def paper_rows(corpus: str) -> pd.DataFrame:
    """The published rows of the corpus's table (Bengio et al. 2003, Tables 1 and 2)."""
    table = pd.read_csv(PAPER_CSV)
    return table[table["corpus"] == corpus].reset_index(drop=True)


def _paper_lookup(corpus: str) -> dict:
    lookup = {}
    for rec in paper_rows(corpus).to_dict("records"):
        classes = None if pd.isna(rec["classes"]) else int(rec["classes"])
        lookup[(rec["model"], int(rec["n"]), classes)] = rec
    return lookup


def _blank(value):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


def comparison(results: dict) -> pd.DataFrame:
    """One line per row of ours, in order: the configuration, then train / valid / test perplexity as
    the paper's, ours and the relative difference (ours / paper - 1, in %). Our extra rows have no
    paper numbers and come after the paper's rows (column `extra`). A user's corpus (no paper table):
    our perplexities only, as columns `train`, `valid`, `test`. Where rows have 95% bootstrap intervals
    (`valid_ppl_ci95`, `test_ppl_ci95`), a column `valid 95% CI` / `test 95% CI` after our perplexity
    ("[186.8, 191.0]"); results without them give the table they always gave. Then `test w/o unk`, the
    perplexity of the test tokens that are not <unk> (`without_unk`). Column `id` (the row's, for the
    figures) is not shown."""
    if results["corpus"] not in PAPER_TABLE:
        return _ours_only(results)
    lookup = _paper_lookup(results["corpus"])
    rows = by_id(results)
    intervals = _with_intervals(results)
    lines = []
    for row in results["rows"]:
        line = {**_configuration(row, rows), "extra": not row["paper_model"]}
        paper = lookup.get((row["paper_model"], line["n"], row["classes"]), {}) if row["paper_model"] else {}
        for split in ("train", "valid", "test"):
            ours, published = row.get(f"{split}_ppl"), _blank(paper.get(f"{split}_ppl"))
            line[f"{split} paper"] = published
            line[f"{split} ours"] = figure(row, f"{split}_ppl")
            if split in intervals:
                line[f"{split} 95% CI"] = _interval(row, split)
            line[f"{split} diff %"] = (None if ours is None or published is None
                                       else round(100 * (ours / published - 1), 1))
        line[NO_UNK["test"]] = without_unk(row, "test")
        line["seconds"] = _seconds(row)
        line.update(training_cost(row, results["corpus_summary"]["vocab_size"]))
        lines.append(line)
    frame = pd.DataFrame(lines)
    return pd.concat([frame[~frame["extra"]], frame[frame["extra"]]], ignore_index=True)


def _configuration(row: dict, rows: dict[str, dict]) -> dict:
    """The row's id (hidden), label, shape (n, c, h, m, direct, and the fields of its family's own shape the
    columns before do not show: `family_shape`) and how it is mixed ("no" for a network alone)."""
    found = shape(row, rows)
    return {"id": row["id"], "model": row["model"], "n": found["n"], "c": row["classes"], "h": found["h"],
            "m": found["m"], "direct": None if found["direct"] is None else ("yes" if found["direct"] else "no"),
            "shape": family_shape(row, rows), "mix": row["mix"] or ("no" if network_of(row, rows) is row else None)}


def _with_intervals(results: dict) -> set[str]:
    """The splits for which some row has a 95% interval."""
    return {split for split in ("valid", "test") if any(row.get(f"{split}_ppl_ci95") for row in results["rows"])}


def _interval(row: dict, split: str) -> str | None:
    """The row's 95% interval of `split`'s perplexity, "[low, high]" to one decimal."""
    interval = row.get(f"{split}_ppl_ci95")
    return None if interval is None else f"[{interval[0]:.1f}, {interval[1]:.1f}]"


def _seconds(row: dict) -> float | None:
    return None if row.get("seconds") is None else round(row["seconds"], 1)


NO_UNK = {"valid": "valid w/o unk", "test": "test w/o unk"}  # the columns of reports.running.row_runner.unk_figures
NOT_RECORDED = "not recorded"  # a row that ran in a results.json written before rows kept their w/o-unk figures


def without_unk(row: dict, split: str) -> float | str | None:
    """The row's perplexity of `split`'s tokens that are not <unk>, as a table shows it; NOT_RECORDED where
    the row ran but its results.json keeps no such figure (written before rows kept it: not retrained)."""
    if row.get(f"{split}_ppl") is None:
        return None
    return figure(row, f"{split}_ppl_no_unk") if f"{split}_ppl_no_unk" in row else NOT_RECORDED


def _ours_only(results: dict) -> pd.DataFrame:
    """Our perplexities, and those of the tokens that are not <unk> (`without_unk`)."""
    rows = by_id(results)
    intervals = _with_intervals(results)
    lines = []
    for row in results["rows"]:
        line = {**_configuration(row, rows), "extra": False}
        for split in ("train", "valid", "test"):
            line[split] = figure(row, f"{split}_ppl")
            if split in intervals:
                line[f"{split} 95% CI"] = _interval(row, split)
        line.update({label: without_unk(row, split) for split, label in NO_UNK.items()})
        lines.append({**line, "seconds": _seconds(row), **training_cost(row, results["corpus_summary"]["vocab_size"])})
    return pd.DataFrame(lines)


def figure(row: dict, key: str) -> float | str | None:
    """A perplexity of the row as a table shows it: to one decimal, or for a row run under several seeds
    (reports.running.seeds.over_seeds) the seeds' geometric mean (the centre of its interval and claims) ±
    the sample standard deviation of the seeds' perplexities, '95.08 ± 0.04', to the decimals (1 or 2)
    that show the deviation as non-zero."""
    if row.get(key) is None:
        return None
    spread = row.get(f"{key}_sd")
    if spread is None:
        return round(row[key], 1)
    places = 1 if round(spread, 1) != 0 or spread == 0 else 2
    return f"{row[key]:.{places}f} ± {spread:.{places}f}"


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """The shown columns: blank cells for missing values; integers without decimals."""
    shown = frame.drop(columns=["id", "extra"]).astype(object)
    return shown.where(pd.notna(shown), "").map(
        lambda v: int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 1e6 else v)


def to_markdown(frame: pd.DataFrame) -> str:
    """The table with a rule line (a row of dashes) before our extra rows."""
    shown = _display(frame)
    paper_part = shown[~frame["extra"].to_numpy()]
    extra_part = shown[frame["extra"].to_numpy()]
    text = markdown_table(paper_part)
    if len(extra_part):
        rule = "| " + " | ".join("--" for _ in shown.columns) + " |"
        extra_lines = markdown_table(extra_part).splitlines()[2:]
        text += "\n" + rule + "\n" + "\n".join(extra_lines)
    return text


def write_tables(frame: pd.DataFrame, directory: Path) -> dict[str, Path]:
    """table.md, table.csv, table.tex; returns the paths."""
    paths = {"md": directory / "table.md", "csv": directory / "table.csv", "tex": directory / "table.tex"}
    atomic_write_text(paths["md"], to_markdown(frame) + "\n")
    atomic_write_text(paths["csv"], frame.drop(columns=["id"]).to_csv(index=False))
    atomic_write_text(paths["tex"], latex_table(_display(frame)))
    return paths

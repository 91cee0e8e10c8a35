"""Across corpora: how much the network buys over interpolated Kneser-Ney, the suite's short answer.

For every corpus with a report (the results.json of each folder beside this report's, and this
report's own), four numbers against interpolated modified KN 5 (the strongest n-gram model): the
best network of the paper's shapes alone, and mixed with KN 5 (EM weights fitted on valid); then each
of our own networks (rows marked `ours`: NPLM (ours), the LSTM and the Transformer, where the run has
them), alone and mixed with KN 5. Test perplexity, and its
ratio to KN 5's. "Best" is chosen on valid perplexity, never on test. A row missing from a
results.json (not in that run, or left out by --skip) is shown as not run.

Nothing here trains or scores a model: the table and the figure (one group of bars per corpus,
perplexity relative to KN 5) are rebuilt from the results.json files alone, at the top of every
report (`lmbench report NAME`) and as reports/summary.md and reports/summary.png
(`lmbench report summary`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text

from reports.records import by_id, paper_network

log = logging.getLogger(__name__)

HEADING = "Across corpora: the network against interpolated KN 5"
NOT_RUN = "not run"
OURS = {"ours": ("nplm", "NPLM (ours)"), "lstm": ("lstm", "LSTM (ours)"),
        "transformer": ("transformer", "Transformer (ours)")}  # entry: (the family of our row, its label)
ENTRIES = {"paper": "best paper-shape network", "paper + KN 5": "best paper-shape network + KN 5",
           **{key: value for entry, (_, label) in OURS.items()
              for key, value in ((entry, label), (f"{entry} + KN 5", f"{label} + KN 5"))}}  # entry: its label
NOTE = ("Test perplexity, and in brackets its difference from interpolated KN 5 on the same corpus "
        "(ours / KN 5 - 1); the best paper-shape network is the paper's network (equation 1, a shape of "
        "its tables) with the lowest valid perplexity; NPLM (ours), LSTM (ours), Transformer (ours): our own "
        "networks; + KN 5: mixed with interpolated KN 5 by EM weights fitted on valid.")


def _ran(row: dict | None) -> bool:
    return row is not None and row.get("test_ppl") is not None


def _best_on_valid(rows: dict, chosen) -> dict | None:
    candidates = [row for row in rows.values() if chosen(row) and _ran(row) and row.get("valid_ppl") is not None]
    return min(candidates, key=lambda row: (row["valid_ppl"], row["id"])) if candidates else None


def _mixed_with(rows: dict, network: dict | None, partner: dict | None) -> dict | None:
    """The EM mixture of exactly these two rows, when the run has it."""
    if network is None or partner is None:
        return None
    return next((row for row in rows.values() if row["mix"] == "EM" and _ran(row)
                 and sorted(row["parts"]) == sorted([network["id"], partner["id"]])), None)


def corpus_line(name: str, results: dict) -> dict:
    """One corpus's entries: for KN 5 and each of ENTRIES, the row's id, label and test perplexity
    (None: not run) and its ratio to KN 5's."""
    rows = by_id(results)
    kn5 = next((row for row in rows.values() if row["method"] == "kneser-ney" and row["n"] == 5 and _ran(row)), None)
    paper = _best_on_valid(rows, lambda row: paper_network(row, rows) and not row["mix"])
    found = {"KN 5": kn5, "paper": paper, "paper + KN 5": _mixed_with(rows, paper, kn5)}
    for entry, (family, _) in OURS.items():
        ours = _best_on_valid(rows, lambda row: row["ours"] and row["family"] == family and not row["mix"])
        found.update({entry: ours, f"{entry} + KN 5": _mixed_with(rows, ours, kn5)})
    line = {"corpus": name}
    for entry, row in found.items():
        ppl = row["test_ppl"] if _ran(row) else None
        line[entry] = {"id": row and row["id"], "model": row and row["model"], "test_ppl": ppl,
                       "ratio": None if ppl is None or kn5 is None else ppl / kn5["test_ppl"]}
    return line


def corpus_name(results: dict) -> str:
    return results.get("name", results["corpus"]) + (" (quick)" if results.get("settings", {}).get("quick") else "")


def gather(root: Path, report_dir: Path | None = None, current: dict | None = None) -> list[dict]:
    """The lines of every report under `root` (its */results.json, quick runs left out) and of
    `current`, the results of the report at `report_dir` (quick or not), sorted by corpus name."""
    from reports.build import load_results

    found = {}
    for path in sorted(root.glob("*/results.json")):
        if report_dir is not None and path.parent.resolve() == report_dir.resolve():
            continue
        try:
            results = load_results(path.parent)
        except LMBenchError as err:  # another corpus's report: left out of this summary, not fatal to it
            log.warning("summary: %s is left out (%s)", path, err)
            continue
        if not results.get("settings", {}).get("quick"):
            found[corpus_name(results)] = results
    if current is not None:
        found[corpus_name(current)] = current
    return [corpus_line(name, found[name]) for name in sorted(found)]


def _cell(entry: dict) -> str:
    if entry["test_ppl"] is None:
        return NOT_RUN
    ratio = "" if entry["ratio"] is None else f" ({100 * (entry['ratio'] - 1):+.1f}%)"
    return f"{entry['test_ppl']:.1f}{ratio}"


def summary_frame(lines: list[dict]) -> pd.DataFrame:
    """The table: a line per corpus, KN 5's test perplexity, the paper-shape network's label and its
    test perplexity alone and mixed with KN 5, then each of ours alone and mixed with KN 5."""
    columns = ["corpus", "interpolated KN 5", ENTRIES["paper"], "alone", "+ KN 5",
               *(column for entry in OURS for column in (ENTRIES[entry], "+ KN 5"))]
    return pd.DataFrame([[line["corpus"], _cell(line["KN 5"]), line["paper"]["model"] or NOT_RUN, _cell(line["paper"]),
                          _cell(line["paper + KN 5"]),
                          *(_cell(line[key]) for entry in OURS for key in (entry, f"{entry} + KN 5"))]
                         for line in lines], columns=columns)


def summary_figure(lines: list[dict], path: Path) -> Path | None:
    """Bars of test perplexity / KN 5's, one group per corpus, a line at 1 (KN 5 itself)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from reports.figures import _save

    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(lines) + 2), 4.2))
    width = 0.8 / len(ENTRIES)
    for i, entry in enumerate(ENTRIES):
        x = np.arange(len(lines)) + (i - (len(ENTRIES) - 1) / 2) * width
        ratios = [line[entry]["ratio"] for line in lines]
        ax.bar(x, [r if r is not None else 0 for r in ratios], width, label=ENTRIES[entry], color=f"C{i}",
               hatch="//" if entry.endswith("KN 5") else None, edgecolor="white")
        for position, ratio in zip(x, ratios):
            ax.annotate(NOT_RUN if ratio is None else f"{ratio:.2f}", (position, ratio or 0), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        rotation=90 if ratio is None else 0, color="dimgrey" if ratio is None else "black")
    ax.axhline(1.0, color="black", lw=1, ls="--", label="interpolated KN 5")
    ax.set_xticks(np.arange(len(lines)), [line["corpus"] for line in lines])
    ax.set(ylabel="test perplexity / interpolated KN 5's", title="How much the network buys over interpolated KN 5",
           ylim=(0, 1.45))
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    return _save(fig, path.parent, path.stem)


def write_summary(reports_root: Path) -> dict:
    """`lmbench report summary`: reports_root/summary.md and summary.png (.svg) from every full run's
    results.json under reports_root."""
    lines = gather(reports_root)
    if not lines:
        from lmbench.errors import LMBenchError
        raise LMBenchError(f"no results.json under {reports_root}/*/: run `lmbench reproduce ...` first")
    figure = summary_figure(lines, reports_root / "summary.png")
    text = [f"# {HEADING}", "", NOTE, "",
            summary_frame(lines).to_markdown(index=False), "", f"![summary]({figure.name})", ""]
    atomic_write_text(reports_root / "summary.md", "\n".join(text))
    return {"summary": str(reports_root / "summary.md"), "figure": str(figure), "lines": lines}

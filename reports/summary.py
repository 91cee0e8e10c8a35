"""Across corpora: how much the network buys over interpolated Kneser-Ney, the suite's short answer.

For every corpus with a committed report (the folders of results/ that results/index.txt lists, read
from their results.json) and this report's own, four numbers against interpolated modified KN 5 (the strongest n-gram model): the
best network of the paper's shapes alone, and mixed with KN 5 (EM weights fitted on valid); then each
of our own networks (rows marked `ours`: NPLM (ours) and each family beyond 2003, `neural.families`,
where the run has them), alone and mixed with KN 5. Test perplexity, and its
ratio to KN 5's. "Best" is chosen on valid perplexity, never on test. A row missing from a
results.json (not in that run, or left out by --skip) is shown as not run.

Where the rows keep their bootstrap blocks (lmbench.bootstrap), the table gives each test perplexity's
95% interval, "188.9 [186.8, 191.0]", and the figure each ratio's, by the paired test against KN 5 on
the same blocks, as error bars.

Nothing here trains or scores a model: the table and the figure (one group of bars per corpus,
perplexity relative to KN 5) are rebuilt from the results.json files alone, at the top of every
report (`lmbench report NAME`) and as results/summary.md and results/summary.png
(`lmbench report summary`). Only the listed reports are gathered, never whatever folder lies there: a
user's own run shows itself beside them, and never enters another's summary. A quick run (a slice of
its corpus, one epoch a network) is never gathered, not even into its own report's summary: its
perplexities measure nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from lmbench.bootstrap import paired_splits
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text

from reports.experiments import STREAM_NETWORKS
from reports.records import by_id, load_results, paper_network

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parents[1] / "results"  # the committed reports, beside the code
INDEX = "index.txt"  # in a folder of reports: the names of those the summary gathers

HEADING = "Across corpora: the network against interpolated KN 5"
NOT_RUN = "not run"
OURS = {"ours": ("nplm", "NPLM (ours)"),
        **{name: (name, label) for name, label in STREAM_NETWORKS.items()}}  # entry: (the family of our row, its label)
ENTRIES = {"paper": "best paper-shape network", "paper + KN 5": "best paper-shape network + KN 5",
           **{key: value for entry, (_, label) in OURS.items()
              for key, value in ((entry, label), (f"{entry} + KN 5", f"{label} + KN 5"))}}  # entry: its label
NOTE = ("Test perplexity (in square brackets its 95% bootstrap interval, where the run kept the rows' blocks), "
        "and in round brackets its difference from interpolated KN 5 on the same corpus (ours / KN 5 - 1); the "
        "best paper-shape network is the paper's network (equation 1, a shape of its tables) with the lowest "
        "valid perplexity; the networks marked (ours): our own designs, shown where a corpus has their row; "
        "+ KN 5: mixed with interpolated KN 5 by EM weights fitted on valid; the figure's lines: each ratio's "
        "95% interval by the paired test against KN 5.")


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


def _ratio_interval(row: dict, kn5: dict) -> list[float] | None:
    """The 95% interval of the row's test perplexity / KN 5's, by the paired test on their test blocks."""
    blocks = [found.get("blocks", {}).get("test") for found in (row, kn5)]
    interval = None if row is kn5 or not all(blocks) else paired_splits(*blocks)[1]
    return None if interval is None else [1 + bound for bound in interval]  # (None: too few blocks)


def corpus_line(name: str, results: dict) -> dict:
    """One corpus's entries: for KN 5 and each of ENTRIES, the row's id, label and test perplexity
    (None: not run) and its ratio to KN 5's, and their 95% intervals `ci95` and `ratio_ci95` (None:
    the rows keep no blocks)."""
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
                       "ratio": None if ppl is None or kn5 is None else ppl / kn5["test_ppl"],
                       "ci95": row.get("test_ppl_ci95") if ppl is not None else None,
                       "ratio_ci95": None if ppl is None or kn5 is None else _ratio_interval(row, kn5)}
    return line


def corpus_name(results: dict) -> str:
    return results.get("name", results["corpus"])


def is_quick(results: dict) -> bool:
    """Whether results.json is of a quick run (`--quick`): a slice of the corpus, one epoch a network."""
    return bool(results.get("settings", {}).get("quick"))


def listed_reports(root: Path) -> list[Path]:
    """The report folders `root`/index.txt names (one a line, # comments), in its order; none without it."""
    index = root / INDEX
    if not index.exists():
        return []
    names = [line.strip() for line in index.read_text().splitlines()]
    return [root / name for name in names if name and not name.startswith("#")]


def gather(report_dir: Path | None = None, current: dict | None = None, root: Path = RESULTS) -> list[dict]:
    """The lines of every report `root`/index.txt lists and of `current`, the results of the report at
    `report_dir`, quick runs left out, sorted by corpus name."""
    found = {}
    for folder in listed_reports(root):
        if report_dir is not None and folder.resolve() == Path(report_dir).resolve():
            continue
        try:
            results = load_results(folder)
        except LMBenchError as err:  # another corpus's report: left out of this summary, not fatal to it
            log.warning("summary: %s is left out (%s)", folder, err)
            continue
        if not is_quick(results):
            found[corpus_name(results)] = results
    if current is not None and not is_quick(current):
        found[corpus_name(current)] = current
    return [corpus_line(name, found[name]) for name in sorted(found)]


def _cell(entry: dict) -> str:
    if entry["test_ppl"] is None:
        return NOT_RUN
    ratio = "" if entry["ratio"] is None else f" ({100 * (entry['ratio'] - 1):+.1f}%)"
    interval = "" if entry["ci95"] is None else f" [{entry['ci95'][0]:.1f}, {entry['ci95'][1]:.1f}]"
    return f"{entry['test_ppl']:.1f}{interval}{ratio}"


def shown_ours(lines: list[dict]) -> list[str]:
    """The entries of OURS that some corpus has run (a family no report has is no column of all "not run")."""
    return [entry for entry in OURS if any(line[key]["test_ppl"] is not None for line in lines
                                           for key in (entry, f"{entry} + KN 5"))]


def summary_frame(lines: list[dict]) -> pd.DataFrame:
    """The table: a line per corpus, KN 5's test perplexity, the paper-shape network's label and its
    test perplexity alone and mixed with KN 5, then each of ours that some corpus has, alone and mixed
    with KN 5."""
    ours = shown_ours(lines)
    columns = ["corpus", "interpolated KN 5", ENTRIES["paper"], "alone", "+ KN 5",
               *(column for entry in ours for column in (ENTRIES[entry], "+ KN 5"))]
    return pd.DataFrame([[line["corpus"], _cell(line["KN 5"]), line["paper"]["model"] or NOT_RUN, _cell(line["paper"]),
                          _cell(line["paper + KN 5"]),
                          *(_cell(line[key]) for entry in ours for key in (entry, f"{entry} + KN 5"))]
                         for line in lines], columns=columns)


def summary_figure(lines: list[dict], path: Path) -> Path | None:
    """Bars of test perplexity / KN 5's, one group per corpus, a line at 1 (KN 5 itself), and the ratios'
    95% intervals as error bars where the rows have them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from reports.figures import save_figure

    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(lines) + 2), 4.2))
    entries = ["paper", "paper + KN 5", *(key for entry in shown_ours(lines) for key in (entry, f"{entry} + KN 5"))]
    width = 0.8 / len(entries)
    shown = [line[entry]["ratio"] for line in lines for entry in entries if line[entry]["ratio"] is not None]
    top = max([1.0, *shown]) * 1.1  # room for the tallest bar's label (and KN 5's line at 1)
    for i, entry in enumerate(entries):
        x = np.arange(len(lines)) + (i - (len(entries) - 1) / 2) * width
        ratios = [line[entry]["ratio"] for line in lines]
        intervals = [line[entry].get("ratio_ci95") for line in lines]
        ax.bar(x, [r if r is not None else 0 for r in ratios], width, label=ENTRIES[entry], color=f"C{i}",
               hatch="//" if entry.endswith("KN 5") else None, edgecolor="white")
        drawn = [(position, found) for position, found in zip(x, intervals) if found]
        if drawn:  # each interval as drawn, low to high (a percentile interval need not straddle the ratio)
            ax.vlines([position for position, _ in drawn], [found[0] for _, found in drawn],
                      [found[1] for _, found in drawn], color="black", lw=0.9)
        for position, ratio, found in zip(x, ratios, intervals):  # above the bar, or its error bar
            ax.annotate(NOT_RUN if ratio is None else f"{ratio:.2f}", (position, found[1] if found else ratio or 0),
                        xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        rotation=90 if ratio is None else 0, color="dimgrey" if ratio is None else "black")
    ax.axhline(1.0, color="black", lw=1, ls="--", label="interpolated KN 5")
    ax.set_xticks(np.arange(len(lines)), [line["corpus"] for line in lines])
    ax.set(ylabel="test perplexity / interpolated KN 5's", title="How much the network buys over interpolated KN 5",
           ylim=(0, top))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: no bar behind it
    return save_figure(fig, path.parent, path.stem)


def write_summary(reports_root: Path = RESULTS) -> dict:
    """`lmbench report summary`: reports_root/summary.md and summary.png (.svg) from the results.json of
    every full run reports_root/index.txt lists."""
    lines = gather(root=reports_root)
    if not lines:
        raise LMBenchError(f"no report listed in {reports_root / INDEX} has a results.json: list the report "
                           "folders there, one a line, after `lmbench reproduce ... --report-dir` made them")
    figure = summary_figure(lines, reports_root / "summary.png")
    text = [f"# {HEADING}", "", NOTE, "",
            summary_frame(lines).to_markdown(index=False), "", f"![summary]({figure.name})", ""]
    atomic_write_text(reports_root / "summary.md", "\n".join(text))
    return {"summary": str(reports_root / "summary.md"), "figure": str(figure), "lines": lines}

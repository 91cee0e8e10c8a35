"""Across corpora: how much the networks buy over interpolated Kneser-Ney, the suite's short answer.

For every corpus with a committed report (the folders of a results folder that its index.txt lists,
read from their results.json) and this report's own, the rows against interpolated modified KN 5 (the
strongest single n-gram model), test perplexity and its ratio to KN 5's. "Best" is chosen on valid
perplexity, never on test, and always named:

- the best n-gram mixture (n-gram models mixed with each other: the ∞-gram + KN 5);
- the best paper-shape network: the paper's network (equation 1) in a shape of its tables, alone and
  mixed with KN 5 (EM weights fitted on valid);
- each of our own networks (`ours`: NPLM (ours) and each family beyond 2003, `neural.families`), alone
  and mixed with KN 5;
- the best network (any family) and the best mixture (any mixture of the run).

Three views of the same lines: the answer table (a row per corpus, five entries and their differences
from KN 5, narrow enough to read at a glance: README.md and the top of summary.md), every family's
rows with their 95% bootstrap intervals (summary.md and the top of every report), and the figure (one
group of bars per corpus: each network and, hatched in its colour, its mixture with KN 5, hanging
from KN 5's line; rows a corpus does not have are left out).

Nothing here trains or scores a model: all of it is rebuilt from the results.json files alone, at the
top of every report (`lmbench report NAME`) and as summary.md, summary.png and the README's answer
(`lmbench report summary`, in the results folder of the working directory or --results-dir). Only the
listed reports are gathered, never whatever folder lies there: a user's own run shows itself beside
them, and never enters another's summary. A quick run (a slice of its corpus, one epoch a network) is
never gathered, not even into its own report's summary: its perplexities measure nothing.
"""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path

import pandas as pd

from lmbench.bootstrap import paired_splits
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text, read_checked

from reports.running.budget import budget_asked, terms
from reports.running.estimate import duration

from reports.experiments import NETWORKS_BEYOND_2003
from reports.building.markup import markdown_cell, markdown_table, markdown_text
from reports.records import by_id, load_results, network_of, paper_network

log = logging.getLogger(__name__)

RESULTS = Path("results")  # the committed reports: the results folder of the working directory by default
INDEX = "index.txt"  # in a folder of reports: the names of those the summary gathers
README = "README.md"  # beside a results folder: the page whose answer block `lmbench report summary` writes
WRAP = 105  # the width of the README blocks' prose lines

HEADING = "Across corpora: the networks against interpolated KN 5"
OURS = {"ours": ("nplm", "NPLM (ours)"),
        **{name: (name, label) for name, label in NETWORKS_BEYOND_2003.items()}}  # entry: (the family of our row, its label)
PAIRED = ["paper", *OURS]  # the entries shown alone and mixed with KN 5, in this order
LABELS = {"KN 5": "interpolated KN 5", "n-gram mixture": "best n-gram mixture",
          "paper": "best paper-shape network", "network": "best network (any family)", "mixture": "best mixture",
          **{entry: label for entry, (_, label) in OURS.items()}}
NOTE = ("Test perplexity, in square brackets its 95% bootstrap interval (where the run kept the rows' blocks), "
        "in round brackets its difference from interpolated KN 5 on the same corpus (row / KN 5 - 1). Every "
        "\"best\" row is picked on valid perplexity and named: the best paper-shape network is the paper's "
        "network (equation 1) in a shape of its tables; the best network (any family) and the best mixture "
        "are picked among every network and every mixture of the corpus's reports; + KN 5: mixed with interpolated KN 5 by "
        "EM weights fitted on valid. The figure's bars hang from KN 5's line; its error bars: each ratio's 95% "
        "interval by the paired test against KN 5.")
ANSWER_NOTE = ("KN 5: the test perplexity of interpolated Kneser-Ney 5-gram; every other column: the test perplexity "
               "of the row it names, as its difference from KN 5's on the same corpus (row / KN 5 - 1), picked on "
               "valid perplexity, never test; + KN 5 + ∞: mixed with KN 5 and the ∞-gram.")


def _ran(row: dict | None) -> bool:
    return row is not None and row.get("test_ppl") is not None


def _best_on_valid(rows: dict, chosen) -> dict | None:
    candidates = [row for row in rows.values() if chosen(row) and _ran(row) and row.get("valid_ppl") is not None]
    return min(candidates, key=lambda row: (row["valid_ppl"], row["id"])) if candidates else None


def _budgeted(row: dict | None, rows: dict) -> bool:
    """Whether the row rests on a network a compute budget cut short of its recipe's end (the row itself,
    or the network of a mixture)."""
    behind = network_of(row, rows) if row else None
    return bool(behind) and behind.get("stopped") == "budget"


def _best_converged(rows: dict, chosen) -> tuple[dict | None, bool]:
    """(the best row on valid among those `chosen` that rest on no budgeted network, False); where every
    chosen row does, (the best of them, True): a family with only a budgeted row, shown as such."""
    best = _best_on_valid(rows, lambda row: chosen(row) and not _budgeted(row, rows))
    if best is not None:
        return best, False
    best = _best_on_valid(rows, chosen)
    return best, best is not None


def _mixed_with(rows: dict, network: dict | None, partner: dict | None) -> dict | None:
    """The EM mixture of exactly these two rows, when the run has it."""
    if network is None or partner is None:
        return None
    return next((row for row in rows.values() if row["mix"] == "EM" and _ran(row)
                 and sorted(row["parts"]) == sorted([network["id"], partner["id"]])), None)


def _ngram_mixture(row: dict, rows: dict) -> bool:
    """n-gram models mixed with each other: the ∞-gram row (interpolated with KN 5 by construction), or a
    mixture whose every part is an n-gram model."""
    if row["kind"] == "ngram":
        return row["method"] == "infini-gram"
    return bool(row["mix"]) and all(rows.get(part, {}).get("kind") == "ngram" for part in row["parts"])


def _kn5(rows: dict) -> dict | None:
    """Interpolated KN 5's row, the reference of every ratio."""
    return next((row for row in rows.values() if row["method"] == "kneser-ney" and row["n"] == 5 and _ran(row)), None)


def _ratio_interval(row: dict, kn5: dict) -> list[float] | None:
    """The 95% interval of the row's test perplexity / KN 5's, by the paired test on their test blocks."""
    blocks = [found.get("blocks", {}).get("test") for found in (row, kn5)]
    interval = None if row is kn5 or not all(blocks) else paired_splits(*blocks)[1]
    return None if interval is None else [1 + bound for bound in interval]  # (None: too few blocks)


def corpus_line(name: str, results: dict) -> dict:
    """One corpus's entries: for KN 5, the best n-gram mixture, the best paper-shape network, each of
    ours (and each of those + KN 5), the best network (any family) and the best mixture: the row's id,
    label and test perplexity (None: not run), its ratio to KN 5's, and their 95% intervals `ci95` and
    `ratio_ci95` (None: the rows keep no blocks)."""
    rows = by_id(results)
    kn5 = _kn5(rows)
    found = {"KN 5": kn5, "n-gram mixture": _best_on_valid(rows, lambda row: _ngram_mixture(row, rows))}
    # every other best among the rows trained to their recipes' end; a budgeted row only where there is no other
    only = {}  # entry: whether its row is budgeted only
    found["paper"], only["paper"] = _best_converged(rows, lambda row: paper_network(row, rows) and not row["mix"])
    for entry, (family, _) in OURS.items():
        found[entry], only[entry] = _best_converged(rows, lambda row: row["ours"] and row["family"] == family
                                                    and not row["mix"])
    for entry in PAIRED:
        found[f"{entry} + KN 5"] = _mixed_with(rows, found[entry], kn5)
        only[f"{entry} + KN 5"] = only[entry]
    found["network"], only["network"] = _best_converged(rows, lambda row: row["kind"] == "network" and not row["mix"])
    found["mixture"], only["mixture"] = _best_converged(rows, lambda row: bool(row["mix"])
                                                        and not _ngram_mixture(row, rows))
    line = {"corpus": name}
    for entry, row in found.items():
        ppl = row["test_ppl"] if _ran(row) else None
        behind = network_of(row, rows) if row else None  # the network of a mixture, whose training is the row's
        report = (behind or {}).get("report", (row or {}).get("report"))
        budget = results.get("budgets", {}).get(report) if report else results.get("budget")
        line[entry] = {"id": row and row["id"], "model": row and row["model"], "test_ppl": ppl,
                       "report": report, "network": behind and behind["model"],
                       "budget": budget if _budgeted(row, rows) else None,
                       "budgeted_only": only.get(entry, False),
                       "ratio": None if ppl is None or kn5 is None else ppl / kn5["test_ppl"],
                       "ci95": row.get("test_ppl_ci95") if ppl is not None else None,
                       "ratio_ci95": None if ppl is None or kn5 is None else _ratio_interval(row, kn5)}
    return line


def corpus_name(results: dict) -> str:
    return results.get("name", results["corpus"])


def is_quick(results: dict) -> bool:
    """Whether results.json is of a quick run (`--quick`): a slice of the corpus, one epoch a network."""
    return bool(results.get("settings", {}).get("quick"))


def listed_reports(root: Path) -> list[list[Path]]:
    """The report folders `root`/index.txt names, a corpus a line (# comments), in its order: the corpus's
    report, then any reports on the same token streams that add rows it lacks (`with_siblings`)."""
    index = root / INDEX
    if not index.exists():
        return []
    fix = f"write it as a list of report folders of {root}, one corpus a line, or delete it"
    if not index.is_file():  # (a folder, a device: /dev/zero would be read forever)
        raise LMBenchError(f"{index} is not a file: {fix}")
    text = read_checked(index, lambda path: path.read_bytes().decode("utf-8"), what="list of reports", fix=fix)
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if "\0" in text:
        raise LMBenchError(f"{index} holds a NUL byte, which no folder's name holds: {fix}")
    return [[root / name for name in names] for names in lines]


def same_streams(first: dict, other: dict) -> str | None:
    """Why `other` is not a report on `first`'s token streams (None: it is): the same token counts and
    vocabulary, and interpolated KN 5 (deterministic) at the same valid and test perplexities."""
    summaries = [results["corpus_summary"] for results in (first, other)]
    if any(summary.get(key) != summaries[0].get(key) for summary in summaries for key in ("tokens", "vocab_size")):
        return "other token counts or another vocabulary"
    kn5 = [_kn5(by_id(results)) for results in (first, other)]
    if None in kn5 or any(abs(kn5[1][key] / kn5[0][key] - 1) > 1e-9 for key in ("valid_ppl", "test_ppl")):
        return "interpolated KN 5 scores them differently"
    return None


def with_siblings(first: dict, siblings: list[tuple[str, dict]]) -> dict:
    """A corpus's results with the rows its sibling reports add: each sibling (a report folder's name and
    its results, on the same token streams) adds the rows that ran there and that no report before it
    has, each naming the `report` it comes from; a sibling on other streams is left out, with a warning."""
    rows, have = list(first["rows"]), {row["id"] for row in first["rows"] if _ran(row)}
    budgets = {}  # a sibling's folder: its budget record (None: its networks trained to convergence)
    for folder, results in siblings:
        differs = same_streams(first, results)
        if differs:
            log.warning("summary: %s is left out of %s's line (%s)", folder, corpus_name(first), differs)
            continue
        added = [{**row, "report": folder} for row in results["rows"] if _ran(row) and row["id"] not in have]
        have |= {row["id"] for row in added}
        rows = [row for row in rows if _ran(row) or row["id"] not in have] + added  # a "not run" row replaced
        budgets[folder] = results.get("budget")
    return {**first, "rows": rows, "budgets": budgets}


def _load(folder: Path) -> dict | None:
    """A listed report's results; None for a quick run or one that does not load (with a warning)."""
    try:
        results = load_results(folder)
    except LMBenchError as err:  # another corpus's report: left out of this summary, not fatal to it
        log.warning("summary: %s is left out (%s)", folder, err)
        return None
    return None if is_quick(results) else results


def _quick_run(folder: Path) -> bool:
    """Whether a listed report's results.json is there, loads, and is a quick run's."""
    try:
        return is_quick(load_results(folder))
    except LMBenchError:
        return False


def listed_results(root: Path = RESULTS, report_dir: Path | None = None,
                   current: dict | None = None) -> tuple[dict[str, dict], dict[str, dict]]:
    """(the results of each corpus `root`/index.txt lists, its siblings' rows added, by corpus name; the
    results of every listed report, by folder name); `current`, the results of the report at
    `report_dir`, stands for that folder (a report not listed: its own corpus); quick runs left out."""
    corpora, reports = {}, {}
    placed = False
    for folders in listed_reports(root):
        found = []
        for folder in folders:
            if report_dir is not None and folder.resolve() == Path(report_dir).resolve():
                results, placed = current, True
            else:
                results = _load(folder)
            if results is not None and not is_quick(results):
                found.append((folder.name, results))
                reports[folder.name] = results
        if found:
            corpora[corpus_name(found[0][1])] = with_siblings(found[0][1], found[1:])
    if current is not None and not placed and not is_quick(current):
        corpora[corpus_name(current)] = current
    return corpora, reports


def gather(report_dir: Path | None = None, current: dict | None = None, root: Path = RESULTS) -> list[dict]:
    """The lines of every corpus `root`/index.txt lists and of `current`, the results of the report at
    `report_dir`, quick runs left out, sorted by corpus name."""
    found = listed_results(root, report_dir, current)[0]
    return [corpus_line(name, found[name]) for name in sorted(found)]


def _difference(entry: dict) -> str:
    return "" if entry["ratio"] is None else f"{100 * (entry['ratio'] - 1):+.1f}%"


def _cell(entry: dict) -> str:
    """Test perplexity [its 95% interval] (its difference from KN 5)."""
    interval = "" if entry["ci95"] is None else f" [{entry['ci95'][0]:.1f}, {entry['ci95'][1]:.1f}]"
    difference = _difference(entry)
    return f"{entry['test_ppl']:.1f}{interval}" + (f" ({difference})" if difference else "")


def short_name(model: str, narrow: bool = False) -> str:
    """A row's label as the summary names it: "NPLM, MLP1 shape" -> "MLP1", "KN interpolated 5" -> "KN 5";
    `narrow` (the answer table): "∞-gram" -> "∞", and our networks beyond 2003 without "(ours)" (every one is
    ours; NPLM (ours) keeps it, beside the paper's NPLM)."""
    name = re.sub(r"NPLM, (\w+) shape", r"\1", model).replace("KN interpolated 5", "KN 5")
    return re.sub(r"(?<!NPLM) \(ours\)", "", name.replace("∞-gram", "∞")) if narrow else name


BUDGETED = "†"  # beside a row whose network trained under a compute budget; `budget_note` says which and how


def _mark(entry: dict) -> str:
    return BUDGETED if entry.get("budget") else ""


def budget_note(lines: list[dict]) -> str | None:
    """Which networks of the lines trained under a compute budget (not to their recipes' end), in which
    report, under which budget (reports.running.budget.terms), and why no converged row stands for them: the time
    their recipes' ends take on that report's machine; None: every network trained to convergence."""
    found: dict[tuple, list[str]] = {}
    for line in lines:
        for entry in line.values():
            if isinstance(entry, dict) and entry.get("budget"):
                budget = entry["budget"]
                needs = (f"; to their recipes' end about {duration(budget['seconds'] / budget['share'])} there"
                         if budget.get("seconds") and budget.get("share") else "")
                key = (line["corpus"], entry["report"] or line["corpus"], terms(budget) + needs)
                found.setdefault(key, []).append(short_name(entry["network"]))
    if not found:
        return None
    return (f"{BUDGETED} budgeted only: trained under a compute budget, not to its recipe's end, and never "
            "picked as a corpus's best: " + "; ".join(
                f"{corpus}'s {', '.join(dict.fromkeys(networks))} (results/{report}, {budget})"
                for (corpus, report, budget), networks in found.items()) + ".")


def _short_cell(entry: dict, named: bool = True) -> str:
    """The answer table's cell: the row's short name and its difference from KN 5 (its perplexity, with
    its interval, is in every family's table)."""
    if entry["ratio"] is None:
        return "not run"
    if entry.get("budgeted_only"):  # (its figure, marked, is in every family's table)
        return f"budgeted only{BUDGETED}"
    return (f"{short_name(entry['model'], narrow=True)}{_mark(entry)} " if named else "") + _difference(entry)


def answer_frame(lines: list[dict]) -> pd.DataFrame:
    """The answer at a glance: a row per corpus; KN 5's test perplexity, then the best n-gram mixture's,
    the best paper-shape network's, the best network's (any family) and the best mixture's difference
    from it, the last three named."""
    return pd.DataFrame([[line["corpus"], f"{line['KN 5']['test_ppl']:.1f}" if _ran(line["KN 5"]) else "not run",
                          _short_cell(line["n-gram mixture"], named=False),
                          *(_short_cell(line[entry]) for entry in ("paper", "network", "mixture"))] for line in lines],
                        columns=["corpus", "KN 5", LABELS["n-gram mixture"], LABELS["paper"], LABELS["network"],
                                 LABELS["mixture"]])


def narrow_markdown(frame: pd.DataFrame) -> str:
    """A Markdown table without padding: each line as long as its own cells (the answer table's lines
    stay under 110 characters, where aligned columns would take the widest cell of each)."""
    lines = ["| " + " | ".join(map(markdown_cell, frame.columns)) + " |", "|" + "|".join(":--" for _ in frame.columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(markdown_cell(str(value)) for value in row) + " |" for row in frame.values])


def families_frame(lines: list[dict]) -> pd.DataFrame:
    """Every family's rows: a line per corpus and entry it has (KN 5, the best n-gram mixture, the best
    paper-shape network, each of ours), test perplexity with its interval and difference alone and
    mixed with KN 5; rows a corpus has not run are left out."""
    found = []
    for line in lines:
        if _ran(line["KN 5"]):
            found.append([line["corpus"], LABELS["KN 5"], _cell(line["KN 5"]), ""])
        if _ran(line["n-gram mixture"]):
            found.append([line["corpus"], f"{LABELS['n-gram mixture']}: {short_name(line['n-gram mixture']['model'])}",
                          _cell(line["n-gram mixture"]), ""])
        for entry in PAIRED:
            alone, mixed = line[entry], line[f"{entry} + KN 5"]
            if alone["test_ppl"] is None and mixed["test_ppl"] is None:
                continue
            label = f"{LABELS['paper']}: {short_name(alone['model'])}" if entry == "paper" else LABELS[entry]
            if entry == "paper" and alone.get("budgeted_only"):  # (never picked: the only rows were budgeted)
                label = f"{LABELS['paper']}: budgeted only{BUDGETED} ({short_name(alone['model'])})"
            else:
                label += _mark(alone if alone["test_ppl"] is not None else mixed)
            found.append([line["corpus"], label, "" if alone["test_ppl"] is None else _cell(alone),
                          "" if mixed["test_ppl"] is None else _cell(mixed)])
    return pd.DataFrame(found, columns=["corpus", "row", "alone", "+ KN 5"])


def answer_sentence(lines: list[dict]) -> str:
    """The one sentence the answer opens with: the range of the best network's and the best mixture's
    differences from KN 5 over the corpora, and the best paper-shape network's."""
    def spread(entry: str) -> str:
        found = sorted((line[entry]["ratio"], line["corpus"]) for line in lines
                       if line[entry]["ratio"] is not None and not line[entry].get("budgeted_only"))
        if not found:
            return "not run"
        (low, low_corpus), (high, high_corpus) = found[0], found[-1]
        if len(found) == 1:
            return f"{100 * (low - 1):+.1f}% ({low_corpus})"
        return f"{100 * (high - 1):+.1f}% ({high_corpus}) to {100 * (low - 1):+.1f}% ({low_corpus})"
    counted = sum(line["network"]["ratio"] is not None and not line["network"].get("budgeted_only") for line in lines)
    return (f"On the {counted} committed corpora the best network (any family) differs from interpolated KN 5 by "
            f"{spread('network')} in test perplexity, the best mixture by {spread('mixture')}, and the best "
            f"paper-shape network by {spread('paper')}.")


def answer_block(lines: list[dict], link: str = "results/summary.md") -> str:
    """The README's answer: its sentence, the table, where the rest is."""
    budgeted = budget_note(lines) and (f"Every best is picked among networks trained to their recipes' end; "
                                       f"{BUDGETED} budgeted only: a corpus's only row of that kind trained under a "
                                       "compute budget (which rows, in which report, under which budget: the "
                                       "summary).")
    return "\n".join([textwrap.fill(markdown_text(answer_sentence(lines)), WRAP, break_on_hyphens=False), "",
                      narrow_markdown(answer_frame(lines)), "",
                      textwrap.fill(f"{ANSWER_NOTE}{' ' + budgeted if budgeted else ''} Every family's row with its 95% interval: [{link}]({link}); "
                                    "every row of a corpus: its report, `results/NAME/report.md`.", WRAP, break_on_hyphens=False)])


def cost_block(reports: dict[str, dict]) -> str:
    """What each committed report cost, as its results.json's `meta` gives it: the sum of its rows' own
    times (each as first computed, a row from the cache included), the wall time of the run that wrote
    it (rows from the cache take none), its peak memory (where the run recorded it), the networks'
    compute budget (reports.running.budget.terms; none: every recipe to its end), its commit and machine."""
    def budget(results: dict) -> str:
        spent = results.get("budget")
        if not spent:
            return "none"
        if spent.get("rule_name") == "complete":
            ends = sum(bool(row.get("complete")) for row in spent["rows"].values())
            return (f"{budget_asked(spent)}, {ends} of {len(spent['rows'])} to their recipe's end"
                    + (f", the others {100 * spent['share']:.0f}%" if ends < len(spent["rows"]) else ""))
        if spent.get("share") is not None:
            return f"{budget_asked(spent)}, {100 * spent['share']:.0f}% of each recipe"
        return f"{budget_asked(spent)}, {spent['flops_per_row']:.2g} FLOPs each"

    def training_run(meta: dict) -> list[str]:  # its wall time, the estimate its start said, its peak memory
        trained = meta.get("trained")
        if trained is None and (meta.get("rebuilt") or meta["wall_seconds"] < 0.1 * (meta.get("rows_seconds") or 0)):
            return ["rebuilt from the row cache", "", ""]  # (a run that computed its rows takes at least their time)
        trained = trained or meta
        said = (trained.get("estimate") or {}).get("seconds")
        at_once = (trained.get("estimate") or {}).get("rows_at_once", 1)
        return [duration(trained["wall_seconds"]) + (f", {at_once} rows at once" if at_once > 1 else ""),
                duration(said) if said is not None else "",
                f"{trained['peak_memory_gb']:.1f} GB" if trained.get("peak_memory_gb") is not None else ""]
    frame = pd.DataFrame([[name, duration(meta["rows_seconds"]) if meta.get("rows_seconds") is not None else "",
                           *training_run(meta), budget(results), meta["commit"], meta["machine"]]
                          for name, results, meta in ((name, results, results["meta"])
                                                      for name, results in sorted(reports.items()))],
                         columns=["report", "its rows' time", "the training run's wall time", "estimate",
                                  "peak memory",
                                  "networks' budget", "commit", "machine"])
    return "\n".join([narrow_markdown(frame), "", textwrap.fill(
        "Its rows' time: the sum of every row's own time as it was first computed (a row the last run took from "
        "the row cache counts its first run's; a run beside other work stretches it); the training run's wall "
        "time: the run that computed the rows, and its peak memory (blank: not recorded before 2026-12-04; a "
        "report whose every row came from the row cache keeps the figures of the run it replaced, or says it was "
        "rebuilt); estimate: what its start said (blank: before 2026-12-06); the networks' budget: each one's "
        "share of its recipe (none: to its end).", WRAP,
        break_on_hyphens=False)])


def block_markers(name: str) -> tuple[str, str]:
    """The lines between which a page holds a block `lmbench report summary` writes."""
    return f"<!-- {name}: written by `lmbench report summary` from results/*/results.json; edit there -->", f"<!-- /{name} -->"


def with_block(page: str, name: str, block: str) -> str:
    """`page` with the text between its `name` markers replaced by `block`."""
    begin, end = block_markers(name)
    first, last = page.find(begin), page.find(end)
    if first < 0 or last < first:
        raise LMBenchError(f"the page has no {name} block: put the lines {begin} and {end} where it goes")
    return page[:first] + begin + "\n" + block + "\n" + page[last:]


def page_blocks(lines: list[dict], reports: dict[str, dict], link: str = "results/summary.md") -> dict[str, str]:
    """The blocks of README.md: the answer and what each report cost."""
    return {"answer": answer_block(lines, link), "cost": cost_block(reports)}


def with_blocks(page: str, blocks: dict[str, str]) -> str:
    """`page` with each block it has markers for rewritten."""
    for name, block in blocks.items():
        if block_markers(name)[0] in page:
            page = with_block(page, name, block)
    return page


FAMILY_COLOURS = {entry: f"C{i}" for i, entry in enumerate(PAIRED)}  # a network and its mixture: one colour


def summary_figure(lines: list[dict], path: Path) -> Path | None:
    """A group of bars per corpus: each network its corpus has (the best paper-shape network, each of
    ours) and, hatched in the same colour, its mixture with KN 5, hanging from KN 5's line at 1 (faded: a
    network trained under a compute budget); the
    axis spans the data; error bars: the ratios' 95% intervals where the rows have them; each bar's
    difference from KN 5 written vertically on the far side of KN 5's line (or above the error bar of a
    bar above it), clear of the error bars."""
    from matplotlib.patches import Patch

    from reports.building.figures import plt, save_figure

    groups = [[(entry, mixed) for entry in PAIRED for mixed in (False, True)
               if line[f"{entry} + KN 5" if mixed else entry]["ratio"] is not None] for line in lines]
    if not any(groups):
        return None
    width = 0.8 / max(len(group) for group in groups)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(lines) + 2.5), 4.4))
    low, high = 1.0, 1.0
    for position, (line, group) in enumerate(zip(lines, groups)):
        for i, (entry, mixed) in enumerate(group):
            found = line[f"{entry} + KN 5" if mixed else entry]
            x = position + (i - (len(group) - 1) / 2) * width
            ratio, interval = found["ratio"], found.get("ratio_ci95")
            ax.bar(x, ratio - 1, width, bottom=1, color=FAMILY_COLOURS[entry], hatch="///" if mixed else None,
                   edgecolor="white", linewidth=0.5, alpha=0.45 if found.get("budget") else 1.0)
            if interval:  # as drawn, low to high (a percentile interval need not straddle the ratio)
                ax.vlines(x, interval[0], interval[1], color="black", lw=0.9)
            ends = [ratio, *(interval or [])]
            low, high = min(low, *ends), max(high, *ends)
            above = max(1.0, *ends)  # the label on the far side of KN 5's line, clear of the bar's error bar
            ax.annotate(f"{100 * (ratio - 1):+.1f}%", (x, above), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, rotation=90)
    span = high - low
    ax.set_ylim(low - 0.05 * span, high + 0.2 * span)  # room above for the labels
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_xticks(range(len(lines)), [line["corpus"] for line in lines])
    ax.set_xlim(-0.6, len(lines) - 0.4)
    ax.set(ylabel="test perplexity / interpolated KN 5's",
           title="How much each network buys over interpolated KN 5 (bars from KN 5's line)")
    shown = [entry for entry in PAIRED if any(entry == e for group in groups for e, _ in group)]
    handles = [Patch(color=FAMILY_COLOURS[entry], label=LABELS[entry]) for entry in shown]
    if any(line[f"{entry} + KN 5" if mixed else entry].get("budget") for line, group in zip(lines, groups)
           for entry, mixed in group):
        handles.append(Patch(facecolor="grey", alpha=0.45, label=f"faded: under a compute budget ({BUDGETED})"))
    handles += [Patch(facecolor="lightgrey", edgecolor="white", hatch="///", label="hatched: + KN 5 (mixed)"),
                plt.Line2D([], [], color="black", ls="--", label="interpolated KN 5 (1)")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes
    return save_figure(fig, path.parent, path.stem)


def summary_markdown(lines: list[dict], figure: Path | None, figure_link: str | None = None) -> list[str]:
    """The summary's Markdown: the answer, every family's rows, the figure."""
    budgeted = budget_note(lines)
    return [ANSWER_NOTE, "", narrow_markdown(answer_frame(lines)), "", *([markdown_text(budgeted), ""] if budgeted else []),
            "Every family's rows:", "", NOTE, "", markdown_table(families_frame(lines)), "",
            *([f"![summary]({figure_link or figure.name})", ""] if figure else [])]


def write_summary(reports_root: Path = RESULTS) -> dict:
    """`lmbench report summary`: reports_root/summary.md and summary.png (.svg) from the results.json of
    every full run reports_root/index.txt lists, and the answer block of the README.md beside
    reports_root (where there is one)."""
    corpora, reports = listed_results(reports_root)
    lines = [corpus_line(name, corpora[name]) for name in sorted(corpora)]
    if not lines:
        quick = [folder.name for folders in listed_reports(reports_root) for folder in folders if _quick_run(folder)]
        if quick:
            raise LMBenchError(f"every report {reports_root / INDEX} lists with a results.json is a quick run "
                               f"({', '.join(quick)}), whose numbers measure nothing and are never summarised: "
                               "list the folders of full runs (`lmbench reproduce CORPUS` without --quick)")
        raise LMBenchError(f"no report listed in {reports_root / INDEX} has a results.json: list the report "
                           "folders there, one a line, after `lmbench reproduce ... --report-dir` made them")
    figure = summary_figure(lines, reports_root / "summary.png")
    atomic_write_text(reports_root / "summary.md", "\n".join([f"# {HEADING}", "", markdown_text(answer_sentence(lines)), "",
                                                              *summary_markdown(lines, figure)]))
    written = {"summary": str(reports_root / "summary.md"), "figure": str(figure), "lines": lines}
    readme = reports_root.parent / README
    if readme.exists():
        page = readme.read_text(encoding="utf-8")
        rewritten = with_blocks(page, page_blocks(lines, reports, f"{reports_root.name}/summary.md"))
        if rewritten != page:
            atomic_write_text(readme, rewritten)
            written["readme"] = str(readme)
    return written

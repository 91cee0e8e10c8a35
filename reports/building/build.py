"""From results.json to the report: tables (md, csv, tex), claims, figures, report.md and report.html.

Nothing here trains or scores a model: `lmbench report brown` rebuilds everything from results.json.
"""

from __future__ import annotations

import base64
import html
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from corpora.corpus import unk_rates, unk_warning
from lmbench.bootstrap import RESAMPLES, TOO_FEW
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text, replaced_folder
from lmbench.schema import check
from reports.building import summary
from reports.building.claims import check_claims
from reports.building.figures import DRAWING_CODE, draw_all, drawn_once
from reports.building.markup import markdown_table, markdown_text
from reports.provenance import code_state, stamp
from reports.records import current_format, read_results, upgrade
from reports.building.significance import NO_INTERVAL, TOO_FEW_NOTE, decimals, seeds_advice
from reports.building.tables import PAPER_TABLE, _display, comparison, figure, to_markdown, write_tables

log = logging.getLogger(__name__)

def training_note(results: dict) -> str:
    """What the table of how the networks were trained shows: each family of the run by its registered
    summary (`neural.families`), then the columns."""
    from neural.families import FAMILIES
    present = dict.fromkeys(row["family"] for row in results["rows"] if row.get("family") and not row.get("mix"))
    families = "; ".join(f"{name}: {FAMILIES[name].summary}" if name in FAMILIES else name for name in present)
    return (f"The network ({families}), training objective, epochs run and the best one (on valid; a network "
            "validated on the first tokens of valid has its perplexities on all of it), training seconds "
            "(validation not counted) and tokens/s; valid and test are exact perplexities of the network's own "
            "normalised distribution (for a class-factored one, with the full softmax over the same network's "
            "word scores beside it).")


CLAIM_COLUMNS = ("claim", "paper", "ours", "paper_pair", "verdict", "p_text", "holm", "grouping", "training")
CLAIM_HEADERS = {"paper_pair": "the paper's pair, ours", "p_text": "p", "holm": "after Holm",  # the claims
                 "grouping": "with the grouping", "training": "training randomness"}  # table's; claims.json: all
TABLE_NOTE = "Rows below the rule line are ours only. diff % = ours / paper - 1."
QUICK_NOTE = ("QUICK run: a slice of the corpus and one epoch a network, to check that the pipeline runs; "
              "its perplexities measure nothing, so the differences from the paper are not coloured and the "
              "run is left out of the cross-corpus summary.")
OURS_NOTE = ("Test perplexity of every row on this corpus (the networks are not scored on train); "
             "seconds: the row's whole run (training and scoring).")
NO_UNK_NOTE = (" w/o unk: the perplexity of the tokens that are not <unk> (each in the context it was scored in), "
               "which no model's accidental price of <unk> moves.")

# The report page's look: a readable width, numbers right-aligned in a monospace font, a diff % cell green
# where ours is below the paper's perplexity and red where above, figures no wider than the page.
STYLESHEET = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;line-height:1.45;color:#222;
 max-width:1200px;margin:0 auto;padding:0 1.5rem 4rem}
p,nav{max-width:80ch}
h2{margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
nav ol{margin:.3rem 0;padding-left:1.5rem}
.stamp{color:#555;font-size:.9em}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:13px;margin:.6rem 0 1rem}
th,td{border:1px solid #ccc;padding:2px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
td.num{text-align:right;font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;white-space:nowrap}
td.below{background:#e3f4e5;color:#14612a}
td.above{background:#fbe6e6;color:#9b1c1c}
tr.first-extra td{border-top:3px double #888}
figure{margin:1.5rem 0}
figure img{display:block;max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}
"""


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _first_extra(table: pd.DataFrame) -> int | None:
    """The position of the first of our extra rows, or None when there is none."""
    extra = np.flatnonzero(table["extra"].to_numpy())
    return int(extra[0]) if len(extra) else None


def html_table(frame: pd.DataFrame, first_extra: int | None = None, coloured: bool = True) -> str:
    """The frame as an HTML table: numbers (and means ± sd) in cells of class `num`, each "diff %" cell
    also `below` (ours below the paper) or `above` when `coloured`, missing values blank, a double rule
    before row `first_extra` (our extra rows)."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in frame.columns)
    lines = []
    for position, record in enumerate(frame.itertuples(index=False)):
        cells = []
        for column, value in zip(frame.columns, record):
            classes = []
            if value is None or (_is_number(value) and np.isnan(value)):
                value = ""
            elif _is_number(value):
                classes.append("num")
                if coloured and str(column).endswith("diff %") and value != 0:
                    classes.append("below" if value < 0 else "above")
            elif isinstance(value, str) and " ± " in value:  # a mean ± sd over seeds (reports.building.tables.figure)
                classes.append("num")
            attribute = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{attribute}>{html.escape(str(value))}</td>")
        row_class = ' class="first-extra"' if position == first_extra else ""
        lines.append(f"<tr{row_class}>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table></div>'


def _headings(results: dict) -> dict:
    """The page's title and section headings: the paper's table beside ours, or a user's corpus; a quick
    run's title starts with QUICK and its table's note says what that means."""
    corpus = results["corpus"]
    if corpus in PAPER_TABLE:
        number = PAPER_TABLE[corpus]
        headings = {"title": f"Bengio et al. (2003), Table {number} ({corpus}): the paper's perplexities and ours",
                    "table": f"Table {number}: the paper's perplexities and ours",
                    "claims": "The paper's claims on our data", "note": TABLE_NOTE + NO_UNK_NOTE}
    else:
        name = results.get("name", corpus)
        headings = {"title": f"n-gram models and neural networks on {name}: perplexities",
                    "table": f"Perplexities on {name}", "note": OURS_NOTE + NO_UNK_NOTE,
                    "claims": f"The paper's questions asked of {name}"}
    if summary.is_quick(results):
        headings.update(title=f"QUICK: {headings['title']}", note=f"{QUICK_NOTE} {headings['note']}")
    return headings


def _stamp(meta: dict, built: dict) -> str:
    """The report's first line: the code that built it and the run of its rows (reports.provenance)."""
    run = stamp(meta)
    made = f"built from {stamp(built)}" + ("" if stamp(built) == run else f"; rows run at {run}")
    return (f"{made[0].upper()}{made[1:]}; {meta.get('machine', '?')}, wall time of this run {meta.get('wall_seconds', 0) / 60:.1f} min "
            f"(all rows, cached ones included: {meta.get('rows_seconds', 0) / 60:.1f} min), "
            f"finished {meta.get('finished', '?')}")


def _tokens(summary: dict) -> str:
    """Tokens and the share of them that are <unk>, per split."""
    rates = unk_rates(summary)
    return (" / ".join(f"{split} {count:,}" for split, count in summary["tokens"].items()) + " tokens, <unk> "
            + " / ".join(f"{100 * rates[split]:.1f}%" for split in summary["tokens"]))


def _corpus_line(results: dict) -> str:
    """The corpus's tokens, <unk> rates and |V|, and the one-line warning when no train token is <unk>
    or a held-out split's <unk> rate is more than twice train's (corpora.corpus.unk_warning)."""
    summary = results["corpus_summary"]
    warning = unk_warning(summary)
    return (f"Corpus: {_tokens(summary)}, |V| = {summary['vocab_size']:,}."
            + (f" Warning: {warning}." if warning else ""))


def _neighbors_frame(results: dict) -> pd.DataFrame | None:
    neighbors = results.get("neighbors")
    if not neighbors:
        return None
    return pd.DataFrame([{"word": word, "nearest (cosine)": ", ".join(f"{w} {s:.2f}" for w, s in near)}
                         for word, near in neighbors["words"].items()])


NEIGHBOURS_HEADING = "Nearest neighbours in the word features C of "  # the row's id after it
MARKERS = ("<unk>", "</d>")  # the corpora's words that report.md's prose sets as code, as they are
SAMPLES_HEADING = "Samples: the same text continued by each kind of model"


def _samples(results: dict) -> tuple[str, pd.DataFrame] | None:
    """The note and the table of results.json's `samples` (reports.running.results_file.samples): each
    continuation a row, under its model's label and test perplexity."""
    samples = results.get("samples")
    if not samples:
        return None
    count = max(len(row["continuations"]) for row in samples["rows"])
    note = (f"Each model continues the first tokens of test, \u201c{samples['seed_text']}\u201d, with "
            f"{samples['words']} words drawn from its own distribution (random seeds {samples['seed']} to "
            f"{samples['seed'] + count - 1}): the best n-gram model and the best network of each family, on valid. "
            "Drawn again, as `lmbench generate --seed-text ... --seed S` on the work folder's row, they are the same.")
    frame = pd.DataFrame([{"model": f"{row['model']} ({row['row']})",
                           "test perplexity": "" if row.get("test_ppl") is None else f"{row['test_ppl']:.1f}",
                           "continuation": text}
                          for row in samples["rows"] for text in row["continuations"]])
    return note, frame


def _training_frame(results: dict) -> pd.DataFrame | None:
    """How each network was trained: objective, precision (neural.precision), epochs, training time and
    speed, perplexities (and, for
    a class-factored network, the full softmax of the same network's scores)."""
    records = []
    for row in results["rows"]:
        if not row["family"] or row.get("status") == "not run" or not row.get("config"):
            continue
        plain = row.get("full_softmax_ppl") or {}
        objective = row["config"].get("objective", "softmax")  # results from before the objectives: softmax
        precision = row["config"].get("precision", "bf16" if row["config"].get("bf16") else "fp32")
        records.append({"row": row["id"], "network": row["family"], "objective": objective,
                        "precision": precision, "epochs": row.get("epochs"),
                        "best epoch": row.get("best_epoch"),
                        "training s": round(row["train_seconds"]) if row.get("train_seconds") else None,
                        "tokens/s": round(row["tokens_per_s"]) if row.get("tokens_per_s") else None,
                        "valid": figure(row, "valid_ppl"), "test": figure(row, "test_ppl"),
                        "full softmax valid / test": (f"{plain['valid']:.1f} / {plain['test']:.1f}"
                                                      if plain else "")})
    return pd.DataFrame(records) if records else None


def _budget_note(results: dict) -> str | None:
    """Whether the claims between networks are made at equal compute: the run's budget and its rule
    (reports.running.budget), or none (every recipe to its end: each network trained as long as its recipe took)."""
    budget = results.get("budget")
    if not budget:
        return None
    from reports.running.budget import terms
    equal = "not made at equal compute" if budget.get("share") is not None else "made at equal training compute"
    return f"The networks trained under a compute budget ({terms(budget)}): claims between networks are {equal}."


def _claims_note(claims: list[dict]) -> str | None:
    """`NO_INTERVAL` when the claims compare rows without intervals (results without blocks); else how
    many claims the report tests, what "after Holm" and "training randomness" say, and where a claim
    rests on a network of one seed, the run that would cover it (reports.building.significance.seeds_advice)."""
    compared = [claim for claim in claims if "difference_ci95" in claim]
    if any(claim["verdict"].startswith(TOO_FEW) for claim in compared):
        return TOO_FEW_NOTE
    if compared and all(claim["difference_ci95"] is None for claim in compared):
        return NO_INTERVAL
    tested = sum(1 for claim in claims if claim.get("p") is not None)
    if not tested:
        return None
    advice = seeds_advice(claims)
    return (f"This report tests {tested} claims, each by its 95% interval (the verdict); after Holm: the verdict "
            f"once the {tested} claims' p-values are adjusted by Holm's step-down, so that the chance of any false "
            "\"holds\" or \"fails\" among them is at most 5%. Training randomness: where a compared row ran "
            "under several seeds, the claim's interval covers it too (each seed's difference: the paired "
            "interval widened by their spread, claims.json `difference_ci95_test` without it); \"one seed\": "
            "the networks named ran once, so the claim says nothing of another training run."
            + (f" {advice[0].upper()}{advice[1:]}." if advice else ""))


def _intervals_note(results: dict) -> str:
    """What the table's intervals and its ± are, and the blocks the intervals resample (the grouping
    chosen on valid, reports.records.grouped, with the reference row's half-widths at each tried)."""
    note = (" [low, high]: the 95% block-bootstrap interval of the perplexity over the sampling of the test "
            "documents, the model fixed (not another training run).")
    if any(row.get("test_ppl_sd") is not None for row in results["rows"]):
        note += (" A row run under several seeds shows the geometric mean of the seeds' perplexities (the "
                 "perplexity of their mean log-probability: the centre of its interval, of the claims on it and "
                 "of the summary) ± the sample standard deviation of the seeds' perplexities (training randomness).")
    grouping = results.get("bootstrap", {}).get("grouping")
    if grouping:
        cut = results["bootstrap"].get("blocks", {}).get("test", "")
        def widths(split: str) -> str:
            return ", ".join(f"±{100 * width:.1f}% at {count}" for count, width in grouping[f"{split}_half_width"].items())

        note += (f" Blocks: test {cut}; consecutive ones grouped into {grouping['blocks']} blocks, chosen on valid "
                 if grouping["grouped"] else f" Blocks: test {cut}, kept as cut, chosen on valid ")
        note += (f"as the widest interval of {grouping['row']} (valid {widths('valid')} blocks; test "
                 f"{widths('test')}), since consecutive documents are correlated.")
        if grouping.get("still_widening"):
            note += (f" The half-width still grows at {grouping['blocks']} blocks, the fewest an interval rests on: "
                     "the documents are correlated over longer runs than these blocks show, so the intervals may "
                     "be too narrow.")
        note += (" A claim whose verdict another grouping tried would change says so (with the grouping); p: the "
                 f"paired bootstrap's, \"< 1/{RESAMPLES}\" where none of its {RESAMPLES} draws lies beyond the claim's bound.")
    return note


def _pair_text(pair: dict | None) -> str | None:
    """The paper's own pair of rows compared on ours (reports.building.claims `paper_pair`), with its interval."""
    if not pair:
        return None
    if pair["difference_ci95"] is None:
        return pair["ours"]
    low, high = pair["difference_ci95"]
    places = decimals(pair["difference"], low, high)
    return f"{pair['ours']} (95% CI {low:+.{places}f}% to {high:+.{places}f}%)"


def _figure_html(path: Path) -> str:
    """The PNG inlined, so that report.html is one file."""
    return (f'<figure id="{path.stem}"><img alt="{path.stem}" src="data:image/png;base64,'
            f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{path.stem.replace("_", " ")}'
            f'</figcaption></figure>')


def _summary_figure(across: list[dict], directory: Path) -> Path | None:
    """The cross-corpus figure of the report's summary lines, drawn once (`reports.building.figures.drawn_once`)."""
    drawn = drawn_once(directory, "summary", across, (Path(summary.__file__), DRAWING_CODE),
                       lambda: [p for p in [summary.summary_figure(across, directory / "summary.png")] if p])
    return drawn[0] if drawn else None


def build_report(report_dir: Path, code: dict | None = None, results_text: str | None = None,
                 results_dir: Path = summary.RESULTS, corpus: str | None = None) -> dict:
    """Write table.*, claims.json, figures/*, report.md and report.html (and results.json: `results_text`,
    from a run) into the report folder, all of it or nothing (lmbench.files.replaced_folder: the folder
    is built in a copy that then takes its place); return what was written, under `report_dir`.
    `code`: the state of the checkout building it (reports.provenance; default: as found now);
    `results_dir`: the committed reports its cross-corpus summary gathers (reports.building.summary); `corpus`: the
    corpus the report must be of (`lmbench report CORPUS`), refused in one line when its results are another's."""
    report_dir = Path(report_dir)
    code = code or code_state(report_dir)
    with replaced_folder(report_dir) as stage:
        if results_text is not None:
            atomic_write_text(stage / "results.json", results_text)
        return _build(stage, report_dir, code, results_dir, corpus)


def _build(stage: Path, report_dir: Path, code: dict, results_dir: Path, corpus: str | None) -> dict:
    """build_report's files, written into `stage` (the new report folder, to be moved to `report_dir`)."""
    read = read_results(stage)
    if corpus is not None and read["corpus"] != corpus:
        raise LMBenchError(f"report {corpus}: {report_dir} holds the results of a {read['corpus']} report (its rows "
                           f"are of that table): run `lmbench report {read['corpus']} --report-dir {report_dir}`")
    rewritten = json.dumps(current_format(read), indent=1, default=str)  # today's format, from
    current = json.loads(rewritten)                                                     # its own blocks
    check("results", current, fix="nothing was written: a bug of reports.records.current_format, report it")
    atomic_write_text(stage / "results.json", rewritten)
    results = upgrade(current)  # as the next rebuild reads it (the same figures' inputs: nothing drawn again)
    table = comparison(results)
    written = write_tables(table, stage)
    claims = check_claims(results)
    check("claims", claims, fix="nothing was written to claims.json: a bug of reports.building.claims, report it")
    atomic_write_text(stage / "claims.json", json.dumps(claims, indent=1))
    figures = draw_all(results, table, stage / "figures")
    across = summary.gather(report_dir, results, results_dir)
    answer_frame, families_frame = summary.answer_frame(across), summary.families_frame(across)
    across_figure = _summary_figure(across, stage / "figures")
    shown = [{**claim, "paper_pair": _pair_text(claim.get("paper_pair"))} for claim in claims]
    claims_frame = pd.DataFrame(shown)[[column for column in CLAIM_COLUMNS if any(claim.get(column) for claim in shown)]]
    claims_frame = claims_frame.where(pd.notna(claims_frame), "").rename(columns=CLAIM_HEADERS)
    claims_note = " ".join(note for note in (_claims_note(claims), _budget_note(results)) if note) or None
    if claims_note == TOO_FEW_NOTE:
        log.warning(TOO_FEW_NOTE)
    neighbors = _neighbors_frame(results)
    training = _training_frame(results)
    headings = _headings(results)
    title = headings["title"]

    md = [markdown_text(_stamp(results["meta"], code)), "", f"# {markdown_text(title)}", "", f"## {summary.HEADING}", "",
          *summary.summary_markdown(across, across_figure, across_figure and f"figures/{across_figure.name}"),
          markdown_text(f"{_corpus_line(results)} {headings['note']}{_intervals_note(results)}", code=MARKERS), "",
          to_markdown(table), "", f"## {markdown_text(headings['claims'])}", "",
          *([markdown_text(claims_note), ""] if claims_note else []), markdown_table(claims_frame)]
    if training is not None:
        md += ["", "## How the networks were trained", "", markdown_text(training_note(results)), "",
               markdown_table(training)]
    if neighbors is not None:
        md += ["", f"## {markdown_text(NEIGHBOURS_HEADING + results['neighbors']['row'])}", "", markdown_table(neighbors)]
    samples = _samples(results)
    if samples is not None:
        md += ["", f"## {SAMPLES_HEADING}", "", markdown_text(samples[0]), "", markdown_table(samples[1])]
    md += ["", "## Figures", ""] + [f"![{p.stem}](figures/{p.name})" for p in figures]
    atomic_write_text(stage / "report.md", "\n".join(md) + "\n")

    sections = [("summary", summary.HEADING, f"<p>{html.escape(summary.ANSWER_NOTE)}</p>" + html_table(answer_frame)
                 + f"<p>Every family's rows: {html.escape(summary.NOTE)}</p>" + html_table(families_frame)
                 + (_figure_html(across_figure) if across_figure else "")),
                ("table", headings["table"], f"<p>{html.escape(headings['note'] + _intervals_note(results))}</p>"
                 + html_table(_display(table), first_extra=_first_extra(table),
                              coloured=not summary.is_quick(results))),
                ("claims", headings["claims"], (f"<p>{html.escape(claims_note)}</p>" if claims_note else "")
                 + html_table(claims_frame))]
    if training is not None:
        sections.append(("training", "How the networks were trained",
                         f"<p>{html.escape(training_note(results))}</p>" + html_table(training)))
    if neighbors is not None:
        sections.append(("neighbours", NEIGHBOURS_HEADING + results["neighbors"]["row"],
                         html_table(neighbors)))
    if samples is not None:
        sections.append(("samples", SAMPLES_HEADING, f"<p>{html.escape(samples[0])}</p>" + html_table(samples[1])))
    sections.append(("figures", "Figures", "".join(_figure_html(p) for p in figures)))
    figure_links = "".join(f'<li><a href="#{p.stem}">{p.stem.replace("_", " ")}</a></li>' for p in figures)
    contents = "".join(f'<li><a href="#{anchor}">{html.escape(heading)}</a>'
                       + (f"<ol>{figure_links}</ol>" if anchor == "figures" else "") + "</li>"
                       for anchor, heading, _ in sections)
    body = "".join(f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>{content}</section>'
                   for anchor, heading, content in sections)
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<style>{STYLESHEET}</style></head><body><p class="stamp">{html.escape(_stamp(results["meta"], code))}'
            f"</p><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(_corpus_line(results))}</p>"
            f'<nav><h2>Contents</h2><ol>{contents}</ol></nav>{body}</body></html>\n')
    atomic_write_text(stage / "report.html", page)
    def moved(path: Path) -> str:  # where a file written into the stage will be
        return str(report_dir / Path(path).relative_to(stage))

    return {"commit": stamp(code), "tables": {k: moved(v) for k, v in written.items()},
            "figures": [moved(p) for p in [across_figure, *figures] if p],
            "report": str(report_dir / "report.md"), "html": str(report_dir / "report.html"),
            "claims": claims, "quick": summary.is_quick(results)}


def _summary_lines(report_md: str) -> list[str]:
    """The lines of a report.md after its cross-corpus heading, the summary figure's line left out (the
    figure is drawn from the same lines); [] where it has no such heading."""
    lines = report_md.splitlines()
    heading = f"## {summary.HEADING}"
    after = lines[lines.index(heading) + 1:] if heading in lines else []
    return [line for line in after if not line.startswith("![summary](")]


def stale_tops(results_dir: Path = summary.RESULTS) -> list[Path]:
    """The reports of `results_dir` (each folder holding a report.md and its results.json, listed in its
    index.txt or not) whose cross-corpus section is not the summary of the listed reports as they are now:
    a report listed, added or re-run since it was built. A folder whose results.json is refused is
    passed over with a warning when it is not listed (the summary never reads it), and refused when it is."""
    listed = {folder for folders in summary.listed_reports(results_dir) for folder in folders}
    found = sorted(folder for folder in Path(results_dir).iterdir() if (folder / "report.md").is_file())
    stale = []
    for folder in [folder for folder in found if (folder / "results.json").exists()]:
        try:
            results = upgrade(current_format(read_results(folder)))
        except LMBenchError as err:
            if folder in listed:
                raise
            log.warning("the report at %s is left as it is: %s", folder, err)
            continue
        across = summary.gather(folder, results, results_dir)
        wanted = "\n".join(["", *summary.summary_markdown(across, None)]).splitlines()
        if _summary_lines((folder / "report.md").read_text(encoding="utf-8"))[: len(wanted)] != wanted:
            stale.append(folder)
    return stale


"""From results.json to the report: tables (md, csv, tex), claims, figures, report.md and report.html.

Nothing here trains or scores a model: `lmbench report brown` rebuilds everything from results.json.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import pandas as pd

from lmbench.errors import LMBenchError
from reports.claims import check_claims
from reports.figures import draw_all
from reports.tables import PAPER_TABLE, _display, comparison, to_markdown, write_tables


TRAINING_NOTE = ("Training objective, epochs run and the best one (early stopping on valid), training "
                 "seconds (validation not counted) and tokens/s; valid and test are exact full-softmax "
                 "perplexities, or for a class-factored network its own normalised distribution's, with "
                 "the full softmax over the same network's word scores beside it.")


def load_results(report_dir: Path) -> dict:
    path = report_dir / "results.json"
    if not path.exists():
        raise LMBenchError(f"no results at {path}: run `make reproduce-{report_dir.name}` (or "
                           f"`lmbench reproduce {report_dir.name}`) first")
    return json.loads(path.read_text())


def _stamp(meta: dict) -> str:
    return (f"commit {meta.get('commit', '?')}{' (with uncommitted changes)' if meta.get('dirty') else ''}, "
            f"{meta.get('machine', '?')}, wall time of this run {meta.get('wall_seconds', 0) / 60:.1f} min "
            f"(all rows, cached ones included: {meta.get('rows_seconds', 0) / 60:.1f} min), "
            f"finished {meta.get('finished', '?')}")


def _tokens(summary: dict) -> str:
    return " / ".join(f"{split} {count:,}" for split, count in summary["tokens"].items()) + " tokens"


def _neighbors_frame(results: dict) -> pd.DataFrame | None:
    neighbors = results.get("neighbors")
    if not neighbors:
        return None
    return pd.DataFrame([{"word": word, "nearest (cosine)": ", ".join(f"{w} {s:.2f}" for w, s in near)}
                         for word, near in neighbors["words"].items()])


def _training_frame(results: dict) -> pd.DataFrame | None:
    """How each network was trained: objective, epochs, training time and speed, perplexities (and, for
    a class-factored network, the full softmax of the same network's scores)."""
    records = []
    for row in results["rows"]:
        if row["kind"] != "nplm" or row.get("status") == "not run" or not row.get("config"):
            continue
        plain = row.get("full_softmax_ppl") or {}
        records.append({"row": row["id"], "objective": row["config"]["objective"], "epochs": row.get("epochs"),
                        "best epoch": row.get("best_epoch"),
                        "training s": round(row["train_seconds"]) if row.get("train_seconds") else None,
                        "tokens/s": round(row["tokens_per_s"]) if row.get("tokens_per_s") else None,
                        "valid": round(row["valid_ppl"], 1), "test": round(row["test_ppl"], 1),
                        "full softmax valid / test": (f"{plain['valid']:.1f} / {plain['test']:.1f}"
                                                      if plain else "")})
    return pd.DataFrame(records) if records else None


def build_report(report_dir: Path) -> dict:
    """Write table.*, claims.json, figures/*, report.md and report.html; return what was written."""
    results = load_results(report_dir)
    table = comparison(results)
    written = write_tables(table, report_dir)
    claims = check_claims(results)
    (report_dir / "claims.json").write_text(json.dumps(claims, indent=1))
    figures = draw_all(results, table, report_dir / "figures")
    claims_frame = pd.DataFrame(claims)
    neighbors = _neighbors_frame(results)
    training = _training_frame(results)
    number = PAPER_TABLE[results["corpus"]]
    title = f"Bengio et al. (2003), Table {number} ({results['corpus']}): the paper's perplexities and ours"

    md = [f"# {title}", "", _stamp(results["meta"]), "",
          f"Corpus: {_tokens(results['corpus_summary'])}, |V| = {results['corpus_summary']['vocab_size']:,}."
          f" Rows below the rule line are ours only. diff % = ours / paper - 1.", "",
          to_markdown(table), "", "## The paper's claims on our data", "",
          claims_frame.to_markdown(index=False)]
    if training is not None:
        md += ["", "## How the networks were trained", "", TRAINING_NOTE, "", training.to_markdown(index=False)]
    if neighbors is not None:
        md += ["", f"## Nearest neighbours in the word features C of {results['neighbors']['row']}", "",
               neighbors.to_markdown(index=False)]
    md += ["", "## Figures", ""] + [f"![{p.stem}](figures/{p.name})" for p in figures]
    (report_dir / "report.md").write_text("\n".join(md) + "\n")

    images = "".join(
        f'<figure><img alt="{p.stem}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"<figcaption>{p.stem.replace('_', ' ')}</figcaption></figure>" for p in figures)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:auto}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}img{{max-width:100%}}</style></head><body>
<h1>{html.escape(title)}</h1><p>{html.escape(_stamp(results['meta']))}</p>
{_display(table).to_html(index=False)}
<h2>The paper's claims on our data</h2>{claims_frame.to_html(index=False)}
{'' if training is None else '<h2>How the networks were trained</h2><p>' + html.escape(TRAINING_NOTE)
 + '</p>' + training.to_html(index=False)}
{'' if neighbors is None else '<h2>Nearest neighbours</h2>' + neighbors.to_html(index=False)}
<h2>Figures</h2>{images}</body></html>"""
    (report_dir / "report.html").write_text(page)
    return {"tables": {k: str(v) for k, v in written.items()}, "figures": [str(p) for p in figures],
            "report": str(report_dir / "report.md"), "html": str(report_dir / "report.html"),
            "claims": claims}

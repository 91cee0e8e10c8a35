"""`lmbench reproduce brown|ap` runs the table end to end; `lmbench report brown|ap` rebuilds the report
from results.json without retraining."""

from __future__ import annotations

import argparse
from pathlib import Path

from lmbench.options import output_directory
from reports.experiments import ROWS


def register(subparsers) -> None:
    parser = subparsers.add_parser("reproduce", help="run every row of the paper's table and build the report")
    parser.add_argument("corpus", choices=sorted(ROWS))
    parser.add_argument("--quick", action="store_true", help="the same pipeline on a small slice (minutes)")
    parser.add_argument("--work-dir", type=output_directory, help="row cache and checkpoints (default runs/CORPUS)")
    parser.add_argument("--report-dir", type=output_directory, help="results and report (default reports/CORPUS)")
    parser.add_argument("--skip", nargs="+", choices=("ngram", "nplm", "mix"), default=[],
                        help="leave out the rows of these kinds (listed as not run), e.g. --skip nplm")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run_reproduce)

    parser = subparsers.add_parser("report", help="rebuild tables, claims and figures from results.json")
    parser.add_argument("corpus", choices=sorted(ROWS))
    parser.add_argument("--quick", action="store_true", help="the report of the quick run")
    parser.add_argument("--report-dir", type=output_directory, help="default reports/CORPUS")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run_report)


def _report_dir(args: argparse.Namespace) -> Path:
    return args.report_dir or Path("reports") / (f"{args.corpus}-quick" if args.quick else args.corpus)


def run_reproduce(args: argparse.Namespace) -> dict:
    from reports.pipeline import reproduce
    summary = reproduce(args.corpus, args.quick, args.work_dir, _report_dir(args), frozenset(args.skip))
    return {key: summary[key] for key in ("report_dir", "wall_seconds", "report", "html")} | {
        "claims": {c["claim"]: f"{c['verdict']}: {c['ours']}" for c in summary["claims"]}}


def run_report(args: argparse.Namespace) -> dict:
    from reports.build import build_report
    built = build_report(_report_dir(args))
    return {"report": built["report"], "html": built["html"], "figures": built["figures"],
            "claims": {c["claim"]: f"{c['verdict']}: {c['ours']}" for c in built["claims"]}}

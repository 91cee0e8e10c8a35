"""`python -m reports.running.calibration`: reports/running/calibration.json written again from the committed reports,
after a report is committed or rebuilt.

The whole run's estimate (reports.running.estimate) is calibrated on the committed full runs: their rows' seconds
and work. An installed lmbench has no results/ folder, so what the cost model reads of those runs ships
with the package, as this file (`reports.running.estimate.committed_results`); tests/test_progress.py fails while
it differs from what this command makes of results/.

    python -m reports.running.calibration [--results-dir results]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lmbench.files import atomic_write_text
from reports.running.estimate import CALIBRATION, committed_results

SHIPPED = Path(__file__).with_name(CALIBRATION)  # in the checkout, beside this module: the package's file


def calibration_text(results: list[dict]) -> str:
    """The JSON of `committed_results`' runs, one row a line (a new report's rows show as added lines)."""
    runs = []
    for result in results:
        head = json.dumps({key: value for key, value in result.items() if key != "rows"})[:-1]
        rows = ",\n  ".join(json.dumps(row) for row in result["rows"])
        runs.append(f'{head}, "rows": [\n  {rows}]}}')
    return '{"results": [\n' + ",\n".join(runs) + "\n]}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.running.calibration", description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="the committed reports, one folder a report (default: results)")
    args = parser.parse_args(argv)
    results = committed_results(args.results_dir)
    if not results:
        print(f"calibration: no full run's results.json under {args.results_dir}/*/: nothing written", file=sys.stderr)
        return 1
    atomic_write_text(SHIPPED, calibration_text(results))
    rows = sum(len(result["rows"]) for result in results)
    print(f"calibration: {SHIPPED} holds the {rows} rows of {len(results)} committed runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Learning curves of two recipes side by side (issue 66): for each network family, validation perplexity
against training seconds under today's recipe and a new one, from the runs' own records (nothing is
trained here). A curve comes from a report's results.json (each network row's `curve`) or from a run
folder of `lmbench train --out DIR` (its log.jsonl; the folder's name is the row it stands for unless
given as ROW=DIR). Its seconds are the training seconds of each epoch's end (`total_seconds`); the
validation passes and the final scoring are not in them. A curve's perplexities are on the part of valid its recipe
validates each epoch on (`valid_tokens`: the time-to-quality recipe's first 50,000 tokens); the table's are
the rows' own, on all of valid.

    python bench/recipe_curves.py --old results/ap89-1m-seq/results.json --new runs/reports/NAME/results.json \\
        --out docs/figures/recipe-curves-ap89-1m.svg
    python bench/recipe_curves.py --old results/ap89-1m-seq/results.json --new mlp1=/tmp/run-mlp1 lstm=/tmp/run-lstm

`--by-epochs` puts epochs on the x axis: where the two runs' seconds cannot be compared (other jobs shared
the cores during one of them), the cost of an epoch under each recipe comes from a benchmark of both in one
run (bench/train_speed.py --batch-size 128 512).

Prints, for each row in both, the old and new end: epochs, training seconds, valid perplexity, and the new
over the old (seconds and perplexity); draws one panel a row.
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
from pathlib import Path


def curves_of(source: str) -> dict[str, dict]:
    """row id -> {"curve": [(training seconds, valid perplexity), ...], "valid": the row's valid perplexity
    (all of valid) or None} of a results.json, or of run folders given as DIR or ROW=DIR."""
    row, _, path = source.rpartition("=") if "=" in source else ("", "", source)
    path = Path(path)
    if path.suffix == ".json":
        rows = json.loads(path.read_text())["rows"]
        return {r["id"]: {"curve": [(e["total_seconds"], e["valid_perplexity"]) for e in r["curve"]],
                          "epochs": [e["epoch"] for e in r["curve"]], "valid": r.get("valid_ppl")}
                for r in rows if r.get("kind") == "network" and r.get("curve")}
    log = [json.loads(line) for line in (path / "log.jsonl").read_text().splitlines() if line.strip()]
    result = json.loads((path / "result.json").read_text()) if (path / "result.json").exists() else {}
    return {row or path.name: {"curve": [(e["total_seconds"], e["valid_perplexity"]) for e in log],
                               "epochs": [e["epoch"] for e in log], "valid": result.get("valid_perplexity")}}


def gathered(sources: list[str]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for source in sources:
        found.update(curves_of(source))
    return found


def table(old: dict, new: dict) -> list[str]:
    """Each row in both: epochs, training seconds and the row's valid perplexity (all of valid, where the
    record has it; else the curve's best, whose epochs may have validated on a part of valid only)."""
    lines = ["| row | old: epochs, train s, valid | new: epochs, train s, valid | new / old train s | "
             "new / old valid |", "|:--|--:|--:|--:|--:|"]
    for row in sorted(set(old) & set(new)):
        ends = []
        for run in (old[row], new[row]):
            seconds, ppl = run["curve"][-1][0], run["valid"] or min(p for _, p in run["curve"])
            ends.append((len(run["curve"]), seconds, ppl))
        (e0, s0, p0), (e1, s1, p1) = ends
        lines.append(f"| {row} | {e0}, {s0:,.0f}, {p0:.2f} | {e1}, {s1:,.0f}, {p1:.2f} | {s1 / s0:.2f} | "
                     f"{p1 / p0 - 1:+.2%} |")
    return lines


def draw(old: dict, new: dict, out: Path, title: str, by_epochs: bool = False) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = out.name  # (the same bytes each time it is drawn, with the date left out below)
    rows = sorted(set(old) & set(new))
    if not rows:
        raise SystemExit("no row in both --old and --new: nothing to draw")
    columns = min(3, len(rows))
    lines = math.ceil(len(rows) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.2 * lines), squeeze=False)
    for ax, row in zip(axes.flat, rows):
        for run, label, style in ((old[row], "today's recipe", "o-"), (new[row], "new recipe", "s-")):
            seconds, ppl = zip(*run["curve"])
            ax.plot(run["epochs"] if by_epochs else seconds, ppl, style, markersize=3, label=label)
        best = min(p for _, p in old[row]["curve"])
        ax.axhline(best * 1.01, color="grey", linewidth=0.7, linestyle=":", label="today's best + 1%")
        top = max(max(p for _, p in run["curve"][1:] or run["curve"]) for run in (old[row], new[row]))
        lowest = min(p for run in (old[row], new[row]) for _, p in run["curve"])  # (a new recipe may end below)
        ax.set_ylim(min(best * 0.97, lowest * 0.98), min(top, best * 1.6))
        ax.set_title(row)
        ax.set_xlabel("epochs" if by_epochs else "training seconds")
        ax.set_ylabel("valid perplexity")
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.suptitle(textwrap.fill(title, 11 * columns + 40), fontsize=10)  # (wrapped to the figure's width)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    print(f"drawn: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs="+", required=True, help="results.json or run folders (ROW=DIR) of today's recipe")
    parser.add_argument("--new", nargs="+", required=True, help="results.json or run folders (ROW=DIR) of the new one")
    parser.add_argument("--out", type=Path, help="the figure to draw (.svg or .png); none: the table only")
    parser.add_argument("--title", default="valid perplexity against training seconds, today's recipe and the new one")
    parser.add_argument("--by-epochs", action="store_true", help="epochs on the x axis instead of seconds: where the "
                        "two runs' seconds are not comparable (another machine, or other jobs beside one of them), "
                        "an epoch's cost then comes from bench/train_speed.py --batch-size")
    args = parser.parse_args()
    old, new = gathered(args.old), gathered(args.new)
    print("\n".join(table(old, new)))
    if args.out:
        draw(old, new, args.out, args.title, args.by_epochs)


if __name__ == "__main__":
    main()

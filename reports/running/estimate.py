"""The whole run's estimate of `lmbench reproduce`: each row's expected cost in seconds, said at its start
(its first line, its progress bar: `RunProgress`) and shared by the compute budget (`reports.running.budget`).

A comparison's time is mostly its networks', and their pace depends on the machine (its cores, its
instruction set, the threads the run takes, a GPU) far more than anything the committed results can
tell: so every full run measures, on this machine at its own thread count, each network row it is
about to train, before any row runs (`neural.training.trainer.measure_pace`: half a second of updates to
warm up, two seconds of them timed, then the exact scoring of a slice of valid: seconds in all). A network
row's seconds (`expected_seconds`): its updates times the seconds of one, plus the exact scoring of valid
and test (train too for the paper's rows) and the validation after each epoch, at the measured seconds per
token.

The rows with no network, which take seconds to minutes, and every row of a quick run, take a cost model
calibrated on the committed results (results/*/results.json, their rows' `seconds`), as they ship with
the package: reports/running/calibration.json (`committed_results`), what the cost model reads of each committed
full run (its corpus's tokens, its rows' kind of work, seconds and epochs), so that an installed lmbench,
which has no results/ folder, estimates as a checkout does. `python -m reports.running.calibration` writes it
again from results/ after a report is committed (tests/test_progress.py fails while it differs).

The cost model: a row's work in tokens (`row_tokens`), times the seconds per token that the committed
rows of the same kind of work took (`CostModel`):

- a network: its training tokens times its epochs, plus the tokens it scores exactly (valid and
  test; train too for the paper's rows). The epochs: the budget (`epochs`) of a schedule that runs
  all of them (NPLM (ours)'s linear schedule, the stream networks), else the median epochs the
  committed rows of the halving schedule ran (they stop on a plateau), at most the budget;
- an n-gram model: its training tokens plus the tokens it scores (train, valid, test);
- a mixture: the tokens it mixes (valid and test).

The kinds of work (`cost_key`): a network by its family and objective (and NPLM (ours) apart: its
wider shape), an n-gram model by its method, every mixture alike; a key no committed row has takes
the pace of its kind (all networks, all n-gram models) pooled. The committed runs (other machines, other
work beside them) tell a network's work, not how fast this machine does it: a full run's network rows
keep only the halving schedule's usual epochs from them (`recipe_updates`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from lmbench.files import READ_ERRORS

if TYPE_CHECKING:  # for the annotations only: the trainer loads torch, which the estimate's readers need not
    from neural.training.trainer import Pace

CALIBRATION = "calibration.json"  # the committed full runs as the cost model reads them, package data of reports.running
ROW_FIELDS = ("id", "kind", "family", "method", "ours", "paper_model", "seconds", "epochs")  # what it reads of a row
CONFIG_FIELDS = ("objective", "schedule")  # ... and of a network row's configuration
# the report built after the rows (tables, claims' 10,000 resamples, figures), on 2 cores: 21-28 s for 18-67 rows
# (`lmbench report` of results/ap89-1m-stream, ap89-1m-seq and brown, figures drawn afresh, less 3 s of imports;
# the measurement log, 2026-12-08); 60 s before, which put a 8-minute run's estimate 12-20% over its wall time
REPORT_SECONDS = 30


def cost_key(row: dict) -> str:
    """The kind of work of a row (a Row's or a results row's dict)."""
    if row["kind"] == "network":
        objective = (row.get("config") or {}).get("objective", "importance")
        return f"{row['family']}:{objective}" + (":ours" if row.get("ours") else "")
    if row["kind"] == "ngram":
        return f"ngram:{row['method']}"
    return "mix"


def row_tokens(row: dict, tokens: dict, epochs: float) -> float:
    """The tokens of work of a row (module docstring) on a corpus of `tokens` per split, the network's
    `epochs`."""
    held_out = tokens["valid"] + tokens["test"]
    if row["kind"] == "network":
        return tokens["train"] * epochs + held_out + (tokens["train"] if row.get("paper_model") else 0)
    if row["kind"] == "ngram":
        return 2 * tokens["train"] + held_out
    return held_out


class CostModel:
    """Seconds per token of work by `cost_key` (and by kind, pooled), and the halving schedule's median
    epochs, from the committed full (not quick) results."""

    def __init__(self, results: list[dict]):
        seconds: dict[str, float] = {}
        work: dict[str, float] = {}
        halving = []
        for result in results:
            tokens = result["corpus_summary"]["tokens"]
            for row in result["rows"]:
                if not row.get("seconds"):
                    continue
                if row["kind"] == "network" and (row.get("config") or {}).get("schedule") == "halving":
                    halving.append(row["epochs"])
                done = row_tokens(row, tokens, row.get("epochs") or 0)
                for key in (cost_key(row), row["kind"]):
                    seconds[key] = seconds.get(key, 0.0) + row["seconds"]
                    work[key] = work.get(key, 0.0) + done
        self.pace = {key: seconds[key] / work[key] for key in seconds if work[key]}
        self.halving_epochs = statistics.median(halving) if halving else None

    def epochs(self, config) -> float:
        """The epochs a network row is expected to run (module docstring)."""
        if config.schedule == "halving" and self.halving_epochs is not None:
            return min(config.epochs, self.halving_epochs)
        return config.epochs

    def seconds(self, row: dict, config, tokens: dict) -> float | None:
        """The expected seconds of a row (its dict, with the objective of its training `config`, a
        `neural.config.RunConfig`, for a network; None otherwise); None: no committed row of its kind
        to go by."""
        if config is not None:
            row = {**row, "config": {"objective": config.objective}}
        pace = self.pace.get(cost_key(row), self.pace.get(row["kind"]))
        if pace is None:
            return None
        return pace * row_tokens(row, tokens, self.epochs(config) if config is not None else 0)


def calibration_row(row: dict) -> dict:
    """What the cost model reads of a results row (`ROW_FIELDS`, `CONFIG_FIELDS`; a field it lacks, or
    None, left out)."""
    kept = {key: row[key] for key in ROW_FIELDS if row.get(key) is not None}
    config = {key: value for key, value in (row.get("config") or {}).items() if key in CONFIG_FIELDS}
    return {**kept, **({"config": config} if config else {})}


def committed_results(folder: Path | None = None) -> list[dict]:
    """The committed full (not quick) runs, each as the cost model reads it: its report's folder name,
    its corpus, its tokens per split (`corpus_summary`), its rows (`calibration_row`). Those shipped with
    the package (reports/running/calibration.json, module docstring), or, given a `folder` of reports, those of
    its */results.json (a damaged one passed over)."""
    if folder is None:
        return json.loads(resources.files("reports.running").joinpath(CALIBRATION).read_text(encoding="utf-8"))["results"]
    found = []
    for path in sorted(Path(folder).glob("*/results.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except READ_ERRORS:
            continue  # (a damaged committed report is `lmbench report`'s to refuse, not the estimate's)
        if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
            continue
        settings, summary = result.get("settings"), result.get("corpus_summary")
        if isinstance(settings, dict) and settings.get("quick") or not isinstance(summary, dict):
            continue
        found.append({"report": path.parent.name, "corpus": result.get("corpus"),
                      "corpus_summary": {"tokens": summary.get("tokens")},
                      "rows": [calibration_row(row) for row in result["rows"]]})
    return found


def network_seconds_apart(config, pace: Pace, updates: int, tokens: dict, paper_model: bool) -> float:
    """The seconds a network row spends besides its updates: the exact scoring of valid and test (and
    train for the paper's rows) and the validation after each epoch of its `updates`."""
    scored = tokens["valid"] + tokens["test"] + (tokens["train"] if paper_model else 0)
    validated = min(tokens["valid"], config.valid_tokens or tokens["valid"])
    return pace.score_seconds * (scored + math.ceil(updates / pace.epoch_updates) * validated)


def expected_seconds(config, pace: Pace, updates: int, tokens: dict, paper_model: bool) -> float:
    """One run of a network row of `updates` updates at `pace` (module docstring)."""
    return updates * pace.update_seconds + network_seconds_apart(config, pace, updates, tokens, paper_model)


def recipe_updates(config, epoch_updates: int) -> int:
    """The updates of a network's recipe run to its end: its epochs, or for the halving rule (which stops on
    a plateau of its own) the median epochs the committed runs of that rule took (`CostModel.epochs`)."""
    return math.ceil(CostModel(committed_results()).epochs(config) * epoch_updates)


def wall_seconds(costs: list[float], lanes: int = 1) -> float:
    """The seconds `costs` (each row's) take run `lanes` at a time, the longest first, each to the lane
    that frees soonest (as `reproduce --jobs K` sends them: reports.running.cluster); one lane: their sum."""
    if lanes <= 1:
        return float(sum(costs))
    ends = [0.0] * min(lanes, len(costs) or 1)
    for cost in sorted(costs, reverse=True):
        ends[ends.index(min(ends))] += cost
    return max(ends)


def duration(seconds: float) -> str:
    """Seconds as a reader takes them in: "12.6 s", "44 min", "3 h 29 min" (the run's estimate said at
    its start, the summary's table of what the committed runs cost)."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class RunProgress:
    """The bar of a whole run (`lmbench.progress`): its total the expected seconds of the rows to run, each
    row advancing it by its own when it has run, and taking its own off the total when it is found cached
    or not run; where a row's seconds cannot be told (no committed result of its kind), the rows are
    counted instead. `cached`: the rows the row cache holds at the start; `not_run`: those the run lists as
    not run; `measured`: whether the networks' seconds come from their pace measured here (module docstring)
    rather than the committed runs'; `overhead`: the run's seconds besides its rows', in the line said at
    the start (`summary`) but not in the bar; `wall`: the rows' seconds of wall time where they run several at
    once (`wall_seconds`; None: one after the other, the bar's total), `at_once` of them. Rows run elsewhere (Ray's tasks,
    whose own bars this process does not see) are `started` and the bar `tick`s: each running row adds its
    seconds so far, at most `RUNNING_SHARE` of its expected ones, until it has run."""

    RUNNING_SHARE = 0.95  # of a running row's expected seconds the bar shows before the row is in

    def __init__(self, costs: dict[str, float | None], desc: str, cached: set[str] = frozenset(),
                 measured: bool = False, not_run: set[str] = frozenset(), overhead: float = 0.0,
                 wall: float | None = None, at_once: int = 1):
        from lmbench.progress import progress_bar
        estimated = all(cost is not None for cost in costs.values())
        self.costs = costs if estimated else {row_id: 0.0 if row_id in cached | not_run else 1.0 for row_id in costs}
        self.estimated, self.cached, self.measured, self.not_run = estimated, cached, measured, not_run
        self.overhead = overhead  # seconds of the run besides its rows' (spent before the bar, the report after)
        self.wall, self.at_once = wall, at_once
        self.done = 0.0  # the expected seconds of the rows that have run
        self.since: dict[str, float] = {}  # a row started elsewhere and not yet in: when (time.monotonic)
        self.bar = progress_bar(total=sum(self.costs.values()), desc=desc, unit="s" if estimated else "row",
                                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]{postfix}"
                                if estimated else None)

    def summary(self, rows: int) -> str:
        """The line said at the start."""
        cached = ", ".join(([f"{len(self.cached)} cached"] if self.cached else [])
                           + ([f"{len(self.not_run)} not run"] if self.not_run else []))
        cached = f" ({cached})" if cached else ""
        if not self.estimated:
            return f"{rows} rows{cached}; no committed results (reports/running/calibration.json) to estimate their time from"
        pace = ("the networks at their pace measured here, the other rows at the committed results'"
                if self.measured else "at the pace of the committed results, 2 cores")
        at_once = f"{self.at_once} rows at once; " if self.at_once > 1 else ""
        return (f"{rows} rows{cached}, about {duration((self.bar.total if self.wall is None else self.wall) + self.overhead)} in all ({at_once}{pace}: "
                "reports/running/estimate.py)")

    def running(self, row_id: str) -> None:
        self.bar.set_postfix(row=row_id)

    def ran(self, row_id: str) -> None:
        self.since.pop(row_id, None)
        self.done += self.costs[row_id]
        self.tick()

    def started(self, row_id: str) -> None:
        """A row that began to run elsewhere (again, where its task was retried: counted from now)."""
        self.since[row_id] = time.monotonic()
        self.bar.set_postfix(running=len(self.since))

    def tick(self) -> None:
        """The bar at the rows that have run and the running rows' seconds so far."""
        now = time.monotonic()
        running = sum(min(now - since, self.RUNNING_SHARE * self.costs[row_id]) for row_id, since in self.since.items())
        self.bar.update(self.done + running - self.bar.n)

    def passed(self, row_id: str) -> None:
        """A row cached or not run: its work is off the total."""
        self.bar.total -= self.costs[row_id]
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()

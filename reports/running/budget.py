"""The compute budget of a comparison's network rows (`lmbench reproduce --budget`, `make compare BUDGET=`).

A budget is declared in wall time for the whole run (`20m`, `2h`, `1h30m`) or in training FLOPs per
network row (`--budget-flops 1e15`). Either way it becomes, once, a number of training updates per network
row (`neural.config.RunConfig.budget_updates`): the row then trains exactly that many, its rate schedule
decaying to the last (`neural.training.trainer`), so that it is deterministic in that number. The numbers
are recorded in results.json (`budget`) and in each row's cache key, and kept in the work folder
(budget.json), so that a re-run of the same budget trains nothing again; `--budget RESULTS.json` re-runs
the numbers another run recorded, on any machine.

No budget is the default: every network trains to its recipe's end, the only answer a reader can take
as the converged one. A budget is for a quick look or a compute-matched question, and every verdict that
rests on a budgeted row says at what budget it was reached (`row_terms`).

The rules that share a wall-time budget among the rows (`RULES`, `--budget-rule`):
- complete (the default): as many networks as fit trained to their recipe's end, the quickest first (the
  most rows of the converged answer the time can buy; such a row trains exactly as the converged row does,
  and shares its cache entry), the others the same share of their recipes in what is left;
- flops: equal training FLOPs per network row, the comparison of architectures at equal compute ("the
  Transformer beats the LSTM" then says that its architecture does more with the same arithmetic; FLOPs,
  unlike seconds, are the same on every machine). Each row's FLOPs per update f_r come from its family's
  analytic count (`NetworkShape.training_flops`, checked against torch's FLOP counter in tests/test_flops.py);
- recipe: the same share of every network's recipe.
Under each, no row trains beyond its recipe (its epochs, or the halving rule's usual length), and what a row
that reaches its end does not need goes to the others until the time is spent or every recipe is complete
(`fill`).

A wall-time budget T is turned into updates by each network's pace on this machine at the run's thread
count, measured at the start of every run (`neural.training.trainer.measure_pace`): its seconds per update
s_r and its exact scoring's seconds per token; and by the cost model of the committed results for the rows with no network (`reports.running.estimate`):
R, the seconds of everything but the networks' updates (the time already spent loading the corpus and
measuring, those rows, every network's exact scoring of its splits and the validation after each of its
epochs, and the report), comes off T first. A budget that leaves a row less than one update is refused,
naming the smallest that works. Under `--jobs K` the rows train K at once: T is then their wall time in K
lanes, each row sent, the longest first, to the lane that frees soonest (`reports.running.estimate.wall_seconds`, the
estimate's own count), so that K rows at once get about K times the updates of one after the other; the
budget says so wherever it is named (`budget_asked`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lmbench.errors import LMBenchError
from lmbench.files import READ_ERRORS, atomic_write_text
from reports.running.estimate import REPORT_SECONDS, expected_seconds, network_seconds_apart, recipe_updates, wall_seconds

if TYPE_CHECKING:  # for the annotations only: the trainer loads torch
    from neural.training.trainer import Pace

log = logging.getLogger(__name__)

# How the rows share a budget (`--budget-rule`): each row's updates are x times its weight, x as large as fits
RULES = {"complete": "as many networks as fit trained to their recipe's end, the quickest first",  # complete_first
         "flops": "equal training FLOPs per network row",  # weight 1 / FLOPs per update: x = the FLOPs of each
         "recipe": "the same share of every network's recipe"}  # weight: its recipe's updates; x = the share (<= 1)


def parse_budget(text: str) -> float | str | None:
    """"none": None; "20m", "2h", "90s", "1h30m": seconds; a path ending in .json: that path (a results.json
    whose recorded budget a run repeats). Anything else: one line naming the forms."""
    text = text.strip()
    if text.lower() == "none":
        return None
    if text.endswith(".json"):
        return text
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or parts is None or not any(parts.groups()):
        raise LMBenchError(f"--budget {text!r}: give a wall time such as 20m, 2h or 1h30m, none (train to "
                           "convergence), or a results.json whose recorded budget to repeat")
    hours, minutes, seconds = (float(value or 0) for value in parts.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise LMBenchError(f"--budget {text!r}: give a time above 0")
    return total


def flops_per_update(config, vocab_size: int, pace: Pace) -> float:
    """The training FLOPs of one update of a network of `config` over `vocab_size` words: its family's
    analytic count per token (`NetworkShape.training_flops`) times the tokens of an update."""
    return config.shape.training_flops(vocab_size, config) * pace.update_tokens


def budget_asked(budget: dict) -> str:
    """The budget as it was asked, and the rows at once it was shared among: "20m", "20m, 2 rows at once"."""
    at_once = budget.get("rows_at_once", 1)
    return budget["asked"] + (f", {at_once} rows at once" if at_once > 1 else "")


def terms(budget: dict) -> str:
    """A recorded budget as a reader takes it in: "20m: the same share of every network's recipe, 21% of
    each"; "10m: as many networks as fit trained to their recipe's end, the quickest first (4 of 9, the
    others 15% of theirs)"; the flops rule: the FLOPs each."""
    rows = budget.get("rows", {})
    complete = [r for r, row in rows.items() if row.get("complete")]
    if budget.get("rule_name") == "complete":
        others = len(rows) - len(complete)
        return (f"{budget_asked(budget)}: {budget['rule']} ({len(complete)} of {len(rows)}"
                + (f", the others {100 * budget['share']:.0f}% of theirs)" if others else ")"))
    if budget.get("share") is not None:
        return f"{budget_asked(budget)}: {budget['rule']}, {100 * budget['share']:.0f}% of each"
    return f"{budget_asked(budget)}: {budget['rule']}, {budget['flops_per_row']:.2g} each, or all its recipe where that is less"


def still_falling(row: dict) -> bool | None:
    """Whether a network row's validation perplexity was still falling when its training stopped: its last
    epoch's below the one before (None: fewer than two validations, nothing to tell)."""
    curve = [point.get("valid_perplexity") for point in row.get("curve") or []]
    curve = [value for value in curve if value is not None]
    return None if len(curve) < 2 else curve[-1] < curve[-2]


def row_terms(budget: dict, row: dict) -> str | None:
    """At what budget a network row trained, for the verdicts that rest on it: "at 20m, 21% of its recipe,
    valid still falling"; None where it trained to its recipe's end."""
    if row.get("stopped") != "budget":
        return None
    planned = budget.get("rows", {}).get(row["id"], {})
    share = (planned["updates"] / planned["recipe_updates"] if planned.get("recipe_updates")
             else budget.get("share"))
    falling = {True: ", valid still falling", False: ", valid no longer falling",
               None: ", one validation (whether it still fell: not known)"}[still_falling(row)]
    return f"at {budget_asked(budget)}" + (f", {100 * share:.0f}% of its recipe" if share is not None else "") + falling


def fill(weights: dict[str, float], update_seconds: dict[str, float], full: dict[str, int], seconds: float,
         apart, lanes: int = 1, beside: tuple[float, ...] = ()) -> tuple[float, dict[str, int]]:
    """(x, updates per row) for `seconds` of training and scoring: row r trains min(full_r, floor(x w_r))
    updates (`weights` w_r, `update_seconds` s_r, `full` its recipe's updates), x as large as fits. A row that
    x brings to its recipe's end takes no more, and what it leaves goes to the others (x grows until the time
    is spent or every recipe is complete); `apart(row, updates)`: a row's seconds besides its updates (its
    scoring and the validation of its epochs), counted from the updates of the previous guess of x.
    `beside`: the seconds of rows that run too (complete_first's complete rows); `lanes` > 1: the rows run
    that many at once (`in_lanes`)."""
    if lanes > 1:
        return in_lanes(weights, update_seconds, full, seconds, apart, lanes, beside)
    seconds -= sum(beside)
    updates = {r: 1 for r in weights}
    x = 0.0
    for _ in range(2):  # the second pass counts the validation of the epochs the first gives
        complete: set[str] = set()
        while True:  # raise x past each row's end in turn: a complete row's time is fixed
            open_rows = [r for r in weights if r not in complete]
            if not open_rows:
                x = max((full[r] / weights[r] for r in weights), default=0.0)
                break
            fixed = sum(full[r] * update_seconds[r] for r in complete)
            left = seconds - fixed - sum(apart(r, updates[r]) for r in weights)
            x = left / sum(weights[r] * update_seconds[r] for r in open_rows)
            reached = {r for r in open_rows if x * weights[r] >= full[r]}
            if not reached:
                break
            complete |= reached
        updates = {r: max(0, min(full[r], math.floor(x * weights[r]))) for r in weights}
    return x, updates


def in_lanes(weights: dict[str, float], update_seconds: dict[str, float], full: dict[str, int], seconds: float,
             apart, lanes: int, beside: tuple[float, ...] = ()) -> tuple[float, dict[str, int]]:
    """`fill` for rows run `lanes` at once: x the largest (to a part in 2**-60 of the x that completes every
    recipe, by bisection) whose rows, with those `beside`, take at most `seconds` of wall time in the lanes,
    the longest first (`wall_seconds`); each row's seconds its updates' and `apart`'s at that x."""
    def at(x: float) -> tuple[dict[str, int], float]:
        updates = {r: max(0, min(full[r], math.floor(x * weights[r]))) for r in weights}
        taken = [updates[r] * update_seconds[r] + apart(r, updates[r]) for r in weights]
        return updates, wall_seconds(taken + list(beside), lanes)
    low, high = 0.0, max((full[r] / weights[r] for r in weights), default=0.0)
    updates, wall = at(high)
    if wall <= seconds:
        return high, updates
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if at(middle)[1] <= seconds else (low, middle)
    return low, at(low)[0]


def complete_first(costs: dict[str, float], update_seconds: dict[str, float], full: dict[str, int],
                   seconds: float, apart, lanes: int = 1) -> tuple[list[str], float, dict[str, int]]:
    """The `complete` rule: as many rows as fit in `seconds` trained to their recipe's end, the cheapest
    first (`costs`: a row's seconds to its end, scoring included), which gives the most rows of the
    converged answer a budget can buy; the other rows the same share x < 1 of their recipes in what is
    left (`fill`). Where that share leaves one of them less than an update, the dearest complete row gives
    its time back. `lanes`: the rows run at once (their wall time `wall_seconds`). Returns (the complete
    rows, x, updates per row)."""
    order = sorted(costs, key=lambda r: (costs[r], r))
    complete: list[str] = []
    for r in order:
        if wall_seconds([costs[c] for c in complete] + [costs[r]], lanes) > seconds:
            break
        complete.append(r)
    while True:
        rest = [r for r in order if r not in complete]
        x, updates = (fill({r: float(full[r]) for r in rest}, update_seconds, full, seconds, apart, lanes,
                           tuple(costs[c] for c in complete))
                      if rest else (1.0, {}))
        if not complete or all(updates[r] >= 1 for r in rest):
            return complete, x, {**{r: full[r] for r in complete}, **updates}
        complete.pop()


@dataclass
class NetworkPlan:
    """What a budget is shared over, as the pipeline hands it (reports.running.pipeline.Reproduction.budget_plan): the
    network rows (no seed copy, none left out), each one's runs (1 + its seed copies), its training configuration
    at its recipe's length (`config`) and its pace here (`pace`, measured once a run), the corpus, the work
    folder's budget.json (`kept`), the rows at once (`lanes`), when the run started (time.time()), and the
    expected seconds of the rows with no network (`other_seconds`)."""
    rows: list
    copies: dict[str, int]
    config: Callable
    pace: Callable
    corpus: object
    kept: Path
    lanes: int
    started: float
    other_seconds: float


def resolve(plan: NetworkPlan, asked: str | None, flops_budget: float | None, rule: str = "complete") -> dict | None:
    """The run's budget record (None: no budget, the recipes' own lengths): {"asked", "rule", "flops_per_row"
    (the flops rule's) or "share" (the recipe rule's), "seconds", "rows": {row id: {"updates", "flops",
    "update_seconds", ...}}}, from `asked` (a wall time, or a results.json recorded budget) or
    `flops_budget` (FLOPs per row) shared by `rule` (RULES); a re-run of the same budget reads the record
    its first run kept in the work folder."""
    spec = parse_budget(asked) if asked is not None else None
    if spec is None and flops_budget is None:
        return None
    networks = plan.rows
    if not networks:  # (--only ngram: nothing to budget)
        return None
    if isinstance(spec, str):  # a recorded budget: the same updates per row, wherever it runs
        return recorded_budget(Path(spec), plan)
    kept = plan.kept  # read again by a re-run of the same budget
    lanes = plan.lanes  # (a flops budget is the same however the rows are placed)
    key = {"asked": asked, "flops_per_row": flops_budget, "rule": rule, "rows": sorted(row.id for row in networks),
           **({"rows_at_once": lanes} if lanes > 1 and flops_budget is None else {})}
    record = _kept(kept, networks)
    if record is not None and record["key"] == key:
        log.info("budget: the updates per row of %s (%s)", kept, asked or f"{flops_budget:g} FLOPs")
        return record["budget"]
    corpus = plan.corpus
    tokens = {split: len(corpus.split(split)) for split in ("train", "valid", "test")}
    configs = {row.id: plan.config(row) for row in networks}
    speeds = {row.id: plan.pace(row) for row in networks}  # (measured once a run)
    flops = {r: flops_per_update(configs[r], len(corpus.vocab), speeds[r]) for r in configs}
    paper = {row.id: bool(row.paper_model) for row in networks}
    copies = plan.copies  # the seeds train a row again

    def single(r: str, updates: int) -> float:  # one run of row r: its updates and the rest
        return expected_seconds(configs[r], speeds[r], updates, tokens, paper[r])

    def apart(r: str, updates: int) -> float:
        return copies[r] * network_seconds_apart(configs[r], speeds[r], updates, tokens, paper[r])

    full = {r: recipe_updates(configs[r], speeds[r].epoch_updates) for r in flops}
    if flops_budget is not None:
        each, updates = flops_budget, {r: min(full[r], math.floor(flops_budget / flops[r])) for r in flops}
        seconds = None
    else:
        seconds = spec
        spent = time.time() - plan.started  # the corpus loaded and the networks' paces measured
        left = seconds - plan.other_seconds - spent - REPORT_SECONDS
        paces = {r: speeds[r].update_seconds * copies[r] for r in flops}
        if rule == "complete":
            costs = {r: full[r] * paces[r] + apart(r, full[r]) for r in flops}
            _, each, updates = complete_first(costs, paces, full, left, apart, lanes)
        else:
            weights = {r: 1 / flops[r] for r in flops} if rule == "flops" else {r: float(full[r]) for r in flops}
            each, updates = fill(weights, paces, full, left, apart, lanes)
    short = [r for r, u in updates.items() if u < 1]
    if short:
        need = max(flops[r] for r in flops)
        if seconds is None:
            raise LMBenchError(f"--budget-flops {flops_budget:g} is less than one update of {', '.join(short)}: "
                               f"give at least {need:.2g}")
        smallest = (plan.other_seconds + sum(apart(r, 1) for r in flops)
                    + sum(copies[r] * speeds[r].update_seconds * need / flops[r] for r in flops))
        raise LMBenchError(f"--budget {asked} leaves {', '.join(short)} less than one update after the rest of the "
                           f"run (about {plan.other_seconds / 60:.0f} min here): give at least "
                           f"{math.ceil(smallest / 60)}m")
    rule = rule if flops_budget is None else "flops"
    budget = {"asked": asked if asked is not None else f"{flops_budget:g} FLOPs per network row",
              "rule": RULES[rule], "rule_name": rule,
              "flops_per_row": each if rule == "flops" else None,
              "share": min(1.0, each) if rule != "flops" else None, "seconds": seconds,
              **({"rows_at_once": lanes} if lanes > 1 and seconds is not None else {}),
              "rows": {r: {"updates": updates[r], "recipe_updates": full[r], "complete": updates[r] >= full[r],
                           "flops": updates[r] * flops[r], "flops_per_update": flops[r],
                           **{k: v for k, v in asdict(speeds[r]).items()},
                           "expected_seconds": single(r, updates[r])}
                       for r in flops}}
    atomic_write_text(kept, json.dumps({"key": key, "budget": budget}, indent=1))
    log.info("budget %s: %s", terms(budget), ", ".join(
        f"{r} {u:,} updates ({'its recipe' if u >= full[r] else f'{100 * u / full[r]:.0f}%'})" for r, u in updates.items()))
    return budget


def _kept(kept: Path, networks: list) -> dict | None:
    """The budget record a first run kept in the work folder ({"key", "budget"}), or None: none there, or one
    that is not such a record (damaged, edited: said in one warning line, and the paces measured again)."""
    if not kept.exists():
        return None
    try:
        record = json.loads(kept.read_bytes().decode("utf-8"))
        rows = record["budget"]["rows"]
        problems = [_planned_problem(rows.get(row.id)) for row in networks] if isinstance(record["key"], dict) \
            else ["it has no key"]
        problem = next((found for found in problems if found), None)
    except (*READ_ERRORS, AttributeError) as err:  # (an object where another was: a list's .get)
        problem = str(err) or type(err).__name__
    if problem is None:
        return record
    log.warning("budget: %s is damaged (%s): measuring the paces again", kept, " ".join(problem.split()))
    return None


def _planned_problem(planned) -> str | None:
    """What in a row's budget record is not what a run reads of it (its whole updates >= 1 and PLANNED), or None."""
    numbers = {key: planned.get(key) for key in PLANNED} if isinstance(planned, dict) else {}
    if not numbers or not all(_number(value) and value >= 0 for value in numbers.values()):
        return f"{planned!r} is not an object of updates, {', '.join(PLANNED)} (numbers >= 0)"
    updates = planned.get("updates")
    if not (isinstance(updates, int) and not isinstance(updates, bool) and updates >= 1):
        return f"its updates {updates!r} are not a whole number >= 1"
    return None


PLANNED = ("flops", "flops_per_update", "expected_seconds")  # what a run reads of a row's budget (and its updates)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def recorded_budget(path: Path, plan: NetworkPlan) -> dict:
    """The budget another run recorded in its results.json, for the same network rows of the same corpus:
    refused in one line where that run's corpus is another (its token counts, `<unk>` counts or |V|), or a
    row's updates are no whole number from 1 to its recipe's length on this corpus (a file edited by hand)."""
    networks = plan.rows
    rows = [row.id for row in networks]
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        budget = recorded.get("budget")
    except (OSError, ValueError, AttributeError) as err:
        raise LMBenchError(f"--budget {path}: not a readable results.json ({err}): give a wall time or the "
                           "results.json of a budgeted run") from None
    if not budget:
        raise LMBenchError(f"--budget {path}: that run recorded no budget (it trained to convergence): give a "
                           "wall time, or none")
    if not isinstance(budget, dict) or not isinstance(budget.get("rows"), dict):
        raise LMBenchError(f"--budget {path}: its budget record is damaged (no rows): give a wall time or the "
                           "results.json of a budgeted run")
    here = plan.corpus.summary()
    there = recorded.get("corpus_summary") or {}
    if not isinstance(there, dict):
        there = {}  # (refused below as another corpus's)
    keys = ("tokens", "unk_tokens", "vocab_size")
    if any(there.get(key) != here.get(key) for key in keys):
        def said(summary: dict) -> str:
            tokens = summary.get("tokens") or {}
            return (f"{'/'.join(f'{tokens.get(split, 0):,}' for split in ('train', 'valid', 'test'))} tokens, "
                    f"|V| {summary.get('vocab_size')}")
        raise LMBenchError(f"--budget {path}: that run's corpus is not this one ({said(there)} against "
                           f"{said(here)}): a recorded budget repeats a run's updates on its own corpus; give "
                           "a wall time")
    missing = sorted(set(rows) - set(budget["rows"]))
    if missing:
        raise LMBenchError(f"--budget {path}: it recorded no updates for {', '.join(missing)}: run the same "
                           "--networks it ran, or give a wall time")
    for row in networks:
        planned = budget["rows"][row.id]
        if not isinstance(planned, dict) or not all(_number(planned.get(key)) and planned[key] >= 0 for key in PLANNED):
            raise LMBenchError(f"--budget {path}: its record of {row.id} ({planned!r}) is not an object of "
                               f"{', '.join(PLANNED)} (numbers >= 0): the file was edited or damaged; give a wall "
                               "time, or the results.json of a budgeted run")
        updates, per_epoch = planned.get("updates"), planned.get("epoch_updates")
        whole = isinstance(updates, int) and not isinstance(updates, bool)
        full = planned.get("recipe_updates")  # (the recording run's; a record from before it kept one: today's)
        if not (isinstance(full, int) and full >= 1):
            full = (recipe_updates(plan.config(row), per_epoch)
                    if isinstance(per_epoch, int) and not isinstance(per_epoch, bool) and per_epoch >= 1 else None)
        if not whole or updates < 1 or full is None or updates > full:
            raise LMBenchError(f"--budget {path}: its updates for {row.id} ({updates!r}) are not a whole number "
                               f"from 1 to its recipe's {full if full is not None else '?'} on this corpus: the "
                               "file was edited or damaged; give a wall time, or the results.json of a budgeted run")
    return {**budget, "asked": str(path)}

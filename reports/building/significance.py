"""Whether a claim holds: the statistics behind every claim's verdict (the claims themselves: reports.building.claims).

Every claim that compares rows is made of checks (`Check`: one row below or above another by more than
a threshold, 0 for "A beats B"; or, for "gains little", within a margin of it on both sides), each with
a paired bootstrap test on the rows' test blocks (lmbench.bootstrap.difference_draws): the claim
records the relative perplexity `difference` (%), its 95% interval `difference_ci95` and whether it is
`significant`, and its verdict reads "holds (-4.1%, 95% CI -5.0% to -3.2%)", "fails (...)" or "not
significant (...)"; `comparisons` keeps every check's rows, difference, interval and p-value.

Training randomness: where a compared row was run under several seeds (reports.running.seeds.over_seeds),
the check's interval also covers it (bootstrap.difference_draws: the paired interval widened by the
seeds' spread of the difference, `difference_ci95_test` the interval without it); where a network
behind a compared row has one seed, the claim says "one seed: training randomness not covered"
(`training`) and `seeds_advice` names the rows a run under `--seeds 3` would cover.

Many claims at once: each report tests every claim with an interval at 95%; `holm` adjusts their
p-values (Holm's step-down, family-wise error 5% over the report's claims) and each claim gives its
verdict after the adjustment (`holm`) beside its own.

Results whose rows keep no blocks (written before rows kept them) keep the verdicts of the
perplexities alone, "holds" or "does not hold", and no interval (`NO_INTERVAL`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from lmbench.bootstrap import (MIN_BLOCKS, RESAMPLES, TOO_FEW, difference_draws, enough_blocks, p_text,
                              percentile_interval, two_sided_p)

TOO_FEW_NOTE = (f"No interval: the test split holds fewer than {MIN_BLOCKS} bootstrap blocks, too few for one, so "
                "no claim gets a verdict (\"too few blocks\"); score a longer test split.")
NO_INTERVAL = ("No interval: these results keep no per-block sums of log-probabilities (written before rows "
               "kept them), so the verdicts compare the perplexities alone; running the reproduction again "
               "adds them (finished rows come from the row cache).")
ALPHA = 0.05  # each claim's test, and the family-wise error of the Holm adjustment over a report's claims
ONE_SEED = "one seed: training randomness not covered"


class Check(NamedTuple):
    """One comparison a claim makes: row `a`'s test perplexity lies below (`below`) or above row `b`'s,
    by more than `threshold` % of b's: 100 (ppl_a / ppl_b - 1) < threshold (below) or > threshold; or,
    with `within`, a two-sided equivalence: -within < 100 (ppl_a / ppl_b - 1) < within."""
    a: str
    b: str
    threshold: float = 0.0
    below: bool = True
    within: float | None = None

    def reach(self, low: float, high: float) -> float:
        """How far an interval (low, high) of the difference (a point: low = high) reaches past the
        claim's bound on the wrong side (negative: it stops short, all of it on the claim's side)."""
        if self.within is not None:
            return max(high - self.within, -self.within - low)
        return high - self.threshold if self.below else self.threshold - low

    def side(self, low: float, high: float) -> str:
        """Where an interval lies: "holds" (all of it on the claim's side), "fails" (all on the other
        side; for an equivalence: all beyond one of the margins) or "not significant"."""
        if self.reach(low, high) < 0:
            return "holds"
        if self.within is not None:
            beyond = low > self.within or high < -self.within
        else:
            beyond = low > self.threshold if self.below else high < self.threshold
        return "fails" if beyond else "not significant"

    def p_value(self, draws: np.ndarray, low: float, high: float) -> float:
        """The bootstrap p-value of the check's verdict from the draws of the difference (%): twice the
        share of the draws on the wrong side of the bound (at most 0.05 where the interval is on one
        side of it); for an equivalence that holds, of the margin each draw is nearer to breaking."""
        if self.within is None:
            return two_sided_p(draws, self.threshold)
        if self.side(low, high) == "fails":
            return two_sided_p(draws, self.within if low > self.within else -self.within)
        return float(min(1.0, 2 * max(np.mean(draws <= -self.within), np.mean(draws >= self.within))))

    def claimed(self) -> str:
        """What the claim asks, shown after a verdict where it is not "A beats B"."""
        if self.within is not None:
            return f"; claimed: within ±{self.within:g}%"
        return "" if self.threshold == 0 else f"; claimed: {'below' if self.below else 'above'} {self.threshold:+.0f}%"


def networks_behind(rows: dict, row_id: str) -> list[str]:
    """The network rows behind a row: itself, or a mixture's network parts (none: an n-gram model)."""
    row = rows[row_id]
    if row.get("family"):
        return [row_id]
    return [part for part in row.get("parts") or () if rows.get(part, {}).get("family")]


def _seeded(row: dict) -> list[float] | None:
    """A row run under several seeds: its seeds' test perplexities in the order they ran (the run's seed
    first, `seeds`); None for one run."""
    found = [seed.get("test_ppl") for seed in row.get("seeds") or []]
    return found if len(found) >= 2 and None not in found else None


def _training(rows: dict, check: Check) -> dict | None:
    """The training randomness of a check: None where no network is behind either row; else the seeds'
    log(ppl_a / ppl_b) (`gaps`; a row of one run, an n-gram model or a network of one seed, the same in
    every gap), and the networks of one seed (`one_seed`), whose randomness they leave out.

    The seeds are paired by their index, a rule fixed before any figure is seen: the k-th seed of a with
    the k-th seed of b, in the order each row ran them (`seeds`, the run's seed first), as many as the row
    of fewer seeds has. For a mixture against its own network, the k-th seed of the mixture mixes the
    k-th of the network, so the index is the one pairing that makes sense; between two networks trained
    apart any pairing is as good as another, and choosing one after seeing the intervals (the narrowest
    of the 6 pairings of 3 seeds) would be choosing the answer."""
    networks = {side: networks_behind(rows, side) for side in (check.a, check.b)}
    if not any(networks.values()):
        return None
    seeded = {side: _seeded(rows[side]) for side in (check.a, check.b)}
    one_seed = sorted({net for side in (check.a, check.b) if seeded[side] is None for net in networks[side]})

    def ppl(side: str, index: int) -> float:
        return seeded[side][index] if seeded[side] else rows[side]["test_ppl"]

    pairs = min((len(found) for found in seeded.values() if found), default=0)
    gaps = [math.log(ppl(check.a, index)) - math.log(ppl(check.b, index)) for index in range(pairs)]
    return {"gaps": gaps if len(gaps) >= 2 else None, "one_seed": one_seed}


def _percent(log_ratio: np.ndarray) -> np.ndarray:
    """log(ppl_a / ppl_b) as the relative difference ppl_a / ppl_b - 1, in %."""
    return 100 * np.expm1(log_ratio)


def gap(ours: float, other: float) -> float:
    """How far `ours` lies above `other`, in % of `other` (negative: below; the paper's "24% lower"
    is 1 - nplm / ngram)."""
    return 100 * (ours / other - 1)


def decimals(*percents: float) -> int:
    """The decimal places (1 to 3) that show every non-zero one of `percents` as non-zero, so that a
    difference of 0.04% with its interval reads "-0.04%, 95% CI -0.05% to -0.03%", not "-0.0%"."""
    return next((places for places in (1, 2) if all(round(p, places) != 0 for p in percents if p != 0)), 3)


def compare(rows: dict, check: Check) -> dict:
    """A check's comparison: its rows, difference (%) and, when both rows keep their test blocks, the
    paired bootstrap's 95% interval of it (with the training term where a row has seeds, and
    `difference_ci95_test` without it), its p-value and where it lies (`Check.side`)."""
    a, b = rows[check.a], rows[check.b]
    found = {"a": check.a, "b": check.b,
             **({"within": check.within} if check.within is not None else
                {"relation": "below" if check.below else "above", "threshold": check.threshold}),
             "difference": gap(a["test_ppl"], b["test_ppl"]), "difference_ci95": None, "p": None, "side": None}
    training = _training(rows, check)
    if training is not None:
        found["one_seed"] = training["one_seed"]
    blocks = [row.get("blocks", {}).get("test") for row in (a, b)]
    if not all(blocks):
        return found
    if not enough_blocks(blocks[0]):  # no interval nor verdict (lmbench.bootstrap.enough_blocks)
        found["side"] = TOO_FEW
        return found
    _, draws = difference_draws(*blocks)
    interval = [float(bound) for bound in _percent(np.array(percentile_interval(draws)))]
    if training is not None and training["gaps"]:
        gaps = training["gaps"]
        found.update(difference_ci95_test=interval, seeds=len(gaps), seed_differences=_percent(np.array(gaps)).tolist(),
                     seed_sd=float(np.std(_percent(np.array(gaps)), ddof=1)))
        _, draws = difference_draws(*blocks, gaps)
        interval = [float(bound) for bound in _percent(np.array(percentile_interval(draws)))]
    low, high = interval
    p = check.p_value(_percent(draws), low, high)
    found.update(difference_ci95=interval, side=check.side(low, high), p=max(p, 1 / RESAMPLES), p_text=p_text(p))
    return found


def judge(rows: dict, checks: list[Check]) -> dict:
    """The verdict of a claim made of `checks`, all of which must hold, and the numbers of the check that
    decides it. With intervals: "holds" when every check's interval lies on the claim's side of its
    bound, "fails" when one lies on the other side, else "not significant" (so a claim that a model
    beats another is never "holds" while the interval crosses 0), with the difference, interval and
    p-value of the deciding check (of the checks with that verdict, the one reaching furthest to the
    wrong side); every check's in `comparisons`. Without intervals (a row keeps no blocks): "holds" or
    "does not hold" on the perplexities alone."""
    tested = [(check, compare(rows, check)) for check in checks]
    comparisons = [found for _, found in tested]
    record = {"rows": list(dict.fromkeys(row for check in checks for row in (check.a, check.b))),
              "comparisons": comparisons}
    one_seed = sorted({net for found in comparisons for net in found.get("one_seed", [])})
    trained = any("one_seed" in found for found in comparisons)
    if trained:
        seeds = [found["seeds"] for found in comparisons if "seeds" in found]
        record["training"] = (f"{ONE_SEED} ({', '.join(one_seed)})" if one_seed else
                              f"{min(seeds)} seeds: covered" if seeds else ONE_SEED)
        record["one_seed"] = one_seed
    few = [(check, found) for check, found in tested if found["side"] == TOO_FEW]
    if few:  # no verdict: fewer test blocks than an interval needs
        check, found = few[0]
        return {**record, "verdict": f"{TOO_FEW} ({found['difference']:+.1f}%; fewer than {MIN_BLOCKS} test blocks)",
                "difference": found["difference"], "difference_ci95": None, "significant": None,
                "threshold": check.threshold, "p": None}
    if any(found["side"] is None for found in comparisons):
        check, found = max(tested, key=lambda cf: cf[0].reach(cf[1]["difference"], cf[1]["difference"]))
        return {**record, "verdict": "holds" if check.reach(found["difference"], found["difference"]) < 0
                else "does not hold", "difference": found["difference"], "difference_ci95": None,
                "significant": None, "threshold": check.threshold, "p": None}
    verdict = next((side for side in ("fails", "not significant") if any(f["side"] == side for f in comparisons)),
                   "holds")
    check, found = max(((c, f) for c, f in tested if f["side"] == verdict),
                       key=lambda cf: cf[0].reach(*cf[1]["difference_ci95"]))
    low, high = found["difference_ci95"]
    places = decimals(found["difference"], low, high)
    p_values = [f["p"] for f in comparisons if f["side"] == verdict]
    return {**record,
            "verdict": f"{verdict} ({found['difference']:+.{places}f}%, 95% CI {low:+.{places}f}% to "
                       f"{high:+.{places}f}%{check.claimed()})",
            "difference": found["difference"], "difference_ci95": found["difference_ci95"],
            "significant": verdict != "not significant", "threshold": check.threshold,
            **({"within": check.within} if check.within is not None else {}),
            "p": min(p_values) if verdict == "fails" else max(p_values),
            "p_text": next(f["p_text"] for f in comparisons if f["side"] == verdict and f["p"] == (
                min(p_values) if verdict == "fails" else max(p_values)))}


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of `p_values` (in their order): the i-th smallest of m becomes
    max over j <= i of min(1, (m - j + 1) p_(j)); a claim is significant at family-wise error ALPHA
    over all of them when its adjusted p-value is at most ALPHA."""
    order = np.argsort(p_values, kind="stable")
    m = len(p_values)
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted.tolist()


def with_holm(claims: list[dict]) -> list[dict]:
    """The claims with `p_holm` and `holm` (the verdict after Holm's adjustment over every claim with an
    interval: its own where its adjusted p-value is at most ALPHA, else "not significant") on each of
    those; `tested` on each of those: how many claims the report tests."""
    tested = [claim for claim in claims if claim.get("p") is not None]
    adjusted = iter(holm([claim["p"] for claim in tested]))
    judged = []
    for claim in claims:
        if claim.get("p") is not None:
            p_holm = next(adjusted)
            word = verdict_word(claim["verdict"])
            claim = {**claim, "p_holm": p_holm, "tested": len(tested),
                     "holm": word if claim["significant"] and p_holm <= ALPHA else "not significant"}
        judged.append(claim)
    return judged


def seeds_advice(claims: list[dict]) -> str | None:
    """One line naming the networks of one seed that the claims rest on, and the run that covers their
    training randomness (None: every claim's networks ran under seeds, or none has a network)."""
    networks = sorted({net for claim in claims for net in claim.get("one_seed", [])})
    if not networks:
        return None
    resting = sum(1 for claim in claims if claim.get("one_seed"))
    return (f"{resting} claims rest on networks trained under one seed (training randomness not covered): run "
            f"again with --seeds 3 --seeds-for {','.join(networks)} (make ... SEEDS=3 "
            f"SEEDS_FOR={','.join(networks)}; the finished rows come from the row cache)")


def verdict_word(verdict: str) -> str:
    """A verdict's word, its numbers left out: "holds (-4.1%, 95% CI ...)" is "holds"."""
    return verdict.split(" (")[0]

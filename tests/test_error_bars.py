"""Error bars a reviewer accepts: a claim between networks run under seeds covers training randomness,
the Holm adjustment over a report's claims, blocks grouped so that correlated documents widen the
interval as they should, one centre for a seeded row, bests chosen on valid, a two-sided "gains
little", and the <unk> warning of held-out text unlike train."""

import math

import numpy as np
import pytest

from corpora.corpus import unk_warning
from lmbench.bootstrap import (choose_grouping, difference_draws, group, half_width, percentile_interval)
from reports.building.claims import check_claims
from reports.running.seeds import over_seeds
from reports.records import grouped, upgrade_row
from reports.building.significance import ONE_SEED, holm, seeds_advice
from reports.building.tables import figure
from tests.test_intervals import with_blocks
from tests.test_reports import fake_results

TOKENS = 500  # a block's tokens in the synthetic streams


def seeded_pair(rng, seeds: int = 3, blocks: int = 60, true_gain: float = 0.02, seed_sd: float = 0.02):
    """Two "models" scored on the same `blocks` documents, each run under `seeds` seeds: model b gives
    each token `true_gain` nats more than a on average over documents and training runs. Each document
    has its difficulty (shared) and a gain of its own (sd 0.05 nats: the test set's sampling); each
    training run of either model shifts all its tokens by a draw of sd `seed_sd` nats (training
    randomness, the same on every document). Returns each seed's blocks of a and b."""
    difficulty = rng.normal(-4.0, 0.3, size=blocks)
    own_gain = rng.normal(0.0, 0.05, size=blocks)
    tokens = [TOKENS] * blocks
    runs_a = [{"logprob": (TOKENS * (difficulty + rng.normal(0, seed_sd))).tolist(), "tokens": tokens}
              for _ in range(seeds)]
    runs_b = [{"logprob": (TOKENS * (difficulty + true_gain + own_gain + rng.normal(0, seed_sd))).tolist(),
               "tokens": tokens} for _ in range(seeds)]
    return runs_a, runs_b


def mean_of(runs: list[dict]) -> dict:
    return {"logprob": np.mean([run["logprob"] for run in runs], axis=0).tolist(), "tokens": runs[0]["tokens"]}


def log_ratio(a: dict, b: dict) -> float:
    """log(ppl_a / ppl_b) of one seed's blocks."""
    return (np.sum(b["logprob"]) - np.sum(a["logprob"])) / np.sum(a["tokens"])


def test_the_interval_with_the_seed_term_covers_the_true_difference_about_95_times_in_100():
    """The truth is the difference expected over documents and training runs, ppl_a / ppl_b - 1 =
    expm1(0.02) = +2.0%.
    The paired interval of the seeds' mean (the test set's sampling alone) misses it far more often
    than 5 times in 100; with each seed's difference added (bootstrap.difference_draws) it covers it
    about 95 times in 100."""
    rng = np.random.default_rng(2003)
    truth = math.expm1(0.02)
    covered = {"test only": 0, "with seeds": 0}
    for repetition in range(200):
        runs_a, runs_b = seeded_pair(rng)
        a, b = mean_of(runs_a), mean_of(runs_b)
        gaps = [log_ratio(run_a, run_b) for run_a, run_b in zip(runs_a, runs_b)]
        for name, seed_gaps in (("test only", None), ("with seeds", gaps)):
            _, draws = difference_draws(a, b, seed_gaps, resamples=2000, seed=repetition)
            low, high = np.expm1(percentile_interval(draws))
            covered[name] += low <= truth <= high
    assert 0.90 <= covered["with seeds"] / 200 <= 0.99
    assert covered["test only"] / 200 < 0.80


def test_holm_adjusts_a_hand_example():
    """Four p-values 0.01, 0.04, 0.03, 0.005: sorted 0.005, 0.01, 0.03, 0.04, times 4, 3, 2, 1 = 0.02,
    0.03, 0.06, 0.04, each at least the one before: 0.02, 0.03, 0.06, 0.06. Three, 0.02, 0.0125, 0.5:
    0.0375, then 2 x 0.02 = 0.04, then 0.5; at 5% Holm keeps 0.02, which Bonferroni (3 x 0.02 = 0.06)
    would lose."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.02, 0.0125, 0.5]) == pytest.approx([0.04, 0.0375, 0.5])
    assert holm([]) == []


def correlated_split(rng, documents: int = 500, run: int = 10) -> dict:
    """The blocks of a split of `documents` documents of TOKENS tokens whose difficulty moves with a topic
    that runs over `run` consecutive documents (sd 0.15 nats a token), plus each document's own (0.05):
    consecutive documents are strongly correlated, as consecutive newswire stories are."""
    topics = np.repeat(rng.normal(0.0, 0.15, size=documents // run), run)
    difficulty = -4.0 + topics + rng.normal(0.0, 0.05, size=documents)
    return {"logprob": (TOKENS * difficulty).tolist(), "tokens": [TOKENS] * documents}


def test_grouping_correlated_documents_widens_the_interval_toward_the_true_one():
    """The true half-width: 1.96 times the spread of the perplexity over independent test splits (relative
    to it). Documents as blocks see only each document's own spread and give a fraction of it; the
    grouping chosen on a valid split (bootstrap.choose_grouping) comes within a quarter of it."""
    rng = np.random.default_rng(1989)
    log_ppls = [-np.sum(split["logprob"]) / np.sum(split["tokens"]) for split in
                (correlated_split(rng) for _ in range(400))]
    true_half_width = 1.96 * np.std(log_ppls)
    valid, test = correlated_split(rng), correlated_split(rng)
    groups, widths, _ = choose_grouping(valid)
    assert groups < 500 and widths[groups] == max(widths.values()) and list(widths) == [500, 100, 50, 40, 30, 20]
    documents, chosen = half_width(test), half_width(group(test, groups))
    assert documents < 0.6 * true_half_width
    assert abs(chosen - true_half_width) < 0.25 * true_half_width


def test_uncorrelated_documents_keep_their_blocks_as_cut_and_grouping_keeps_every_token():
    rng = np.random.default_rng(7)
    blocks = {"logprob": (TOKENS * rng.normal(-4.0, 0.3, size=500)).tolist(), "tokens": [TOKENS] * 500}
    fifty = group(blocks, 50)
    assert len(fifty["tokens"]) == 50 and sum(fifty["tokens"]) == 500 * TOKENS
    assert sum(fifty["logprob"]) == pytest.approx(sum(blocks["logprob"]), abs=0.05)
    assert group(blocks, 600) is blocks


def seeded_row(row_id: str, test: list[float], **extra) -> dict:
    return {"id": row_id, "seeds": [{"seed": s, "test_ppl": ppl, "valid_ppl": ppl} for s, ppl in enumerate(test)],
            "test_ppl": float(np.mean(test)), "test_ppl_sd": float(np.std(test, ddof=1)), **extra}


def test_a_seeded_row_has_one_centre_the_geometric_mean_of_its_seeds():
    """Written before (the arithmetic mean beside intervals and claims of the geometric one) or now, a
    seeded row gives the geometric mean, the centre of its blocks; the table shows ± to the decimals
    that keep the seeds' spread non-zero."""
    seeds = [73.13, 74.16, 73.23]
    geometric = math.exp(np.mean(np.log(seeds)))
    old = upgrade_row({**seeded_row("transformer", seeds), "kind": "network", "family": "transformer"})
    assert old["test_ppl"] == pytest.approx(geometric, rel=1e-12) and old["test_ppl"] != np.mean(seeds)
    runs = [{"id": "lstm", "test_ppl": ppl, "seconds": 1.0} for ppl in (79.09, 79.18, 79.15)]
    row = over_seeds([0, 1, 2], *runs)
    assert row["test_ppl"] == pytest.approx(math.exp(np.mean(np.log([79.09, 79.18, 79.15]))), rel=1e-12)
    assert figure(row, "test_ppl") == "79.14 ± 0.05" and figure(old, "test_ppl") == "73.5 ± 0.6"


def claims_of(numbers: dict, seeds: dict | None = None) -> dict:
    """The claims of fake text results with blocks (tests.test_intervals.with_blocks), the rows of
    `seeds` run under those seeds' test perplexities."""
    results = with_blocks(fake_results(numbers, "text", streams=True))
    for row in results["rows"]:
        if seeds and row["id"] in seeds:
            row["seeds"] = [{"seed": s, "test_ppl": ppl} for s, ppl in enumerate(seeds[row["id"]])]
    return {claim["claim"]: claim for claim in check_claims(results)}


CLAIM = "The Transformer (ours) beats the LSTM (ours)"


def test_a_claim_between_seeded_networks_widens_by_their_seeds_and_keeps_both_intervals():
    """The Transformer 2% below the LSTM, every seed of it: held without the seeds; seeds that scatter
    by a few percent make it not significant, and claims.json keeps both intervals, the rows and each
    seed's difference."""
    numbers = {"lstm": 188.9, "transformer": 185.1}
    plain = claims_of(numbers)[CLAIM]
    assert plain["verdict"].startswith("holds") and plain["training"] == f"{ONE_SEED} (lstm, transformer)"
    scattered = claims_of(numbers, {"lstm": [180.0, 188.9, 198.0], "transformer": [185.1, 176.0, 195.0]})[CLAIM]
    assert scattered["verdict"].startswith("not significant") and scattered["training"] == "3 seeds: covered"
    (comparison,) = scattered["comparisons"]
    assert comparison["difference_ci95_test"] == pytest.approx(plain["difference_ci95"])
    low, high = comparison["difference_ci95"]
    assert low < comparison["difference_ci95_test"][0] and high > comparison["difference_ci95_test"][1]
    assert comparison["seeds"] == 3 and len(comparison["seed_differences"]) == 3
    assert comparison["seed_differences"][0] == pytest.approx(100 * (185.1 / 180.0 - 1))
    assert scattered["rows"] == ["transformer", "lstm"] and "one_seed" not in comparison or not comparison["one_seed"]


def test_claims_on_networks_of_one_seed_say_so_and_the_run_names_the_rows_to_seed():
    claims = claims_of({"lstm": 188.9, "transformer": 185.1})
    assert "training" not in claims["A longer context helps interpolated Kneser-Ney"]  # n-gram models only
    advice = seeds_advice(list(claims.values()))
    assert "--seeds 3 --seeds-for" in advice and "SEEDS=3" in advice and "lstm" in advice
    assert "-kn-interp-5" not in advice.split("--seeds-for ")[1].split(" ")[0]  # network rows, not mixtures


def test_every_claim_has_its_holm_verdict_beside_its_own_and_the_count_of_claims():
    claims = list(claims_of({"lstm": 188.9, "transformer": 185.1}).values())
    tested = [claim for claim in claims if claim.get("p") is not None]
    assert tested and all(claim["tested"] == len(tested) for claim in tested)
    for claim in tested:
        assert claim["p_holm"] >= claim["p"]
        assert claim["holm"] in ("not significant", claim["verdict"].split(" (")[0])
        if claim["holm"] != "not significant":
            assert claim["p_holm"] <= 0.05


def test_the_best_rows_are_chosen_on_valid_and_named():
    """mlp3 has the lowest test perplexity, mlp5 the lowest valid: the claim compares mlp5 and says so."""
    results = with_blocks(fake_results({"mlp3": 180.0, "mlp5": 190.0, "kn-interp-5": 250.0}, "text"))
    for row in results["rows"]:
        row["valid_ppl"] = {"mlp3": 300.0, "mlp5": 200.0}.get(row["id"], row["valid_ppl"])
    claim = {c["claim"]: c for c in check_claims(results)}[
        "The best paper-shape network alone beats the best n-gram model"]
    assert claim["ours"].startswith("mlp5 (best on valid) 190.0 vs ") and "mlp5" in claim["best_on_valid"]


def test_gains_little_is_a_two_sided_equivalence():
    """KN 5 0.8% above KN 3 (the Brown case) is within ±3%; 5% above, or 5% below, is not."""
    base = {"kn-backoff-3": 300.0}
    text = "Kneser-Ney gains little from n = 3 to n = 5 (within ±3%)"
    for kn5, verdict in ((302.4, "holds"), (315.0, "fails"), (285.0, "fails")):
        claim = {c["claim"]: c for c in check_claims(with_blocks(fake_results({**base, "kn-backoff-5": kn5})))}[text]
        assert claim["verdict"].startswith(f"{verdict} (") and claim["verdict"].endswith("claimed: within ±3%)")
        assert claim["comparisons"][0]["within"] == 3.0


def summary_of(rates: dict) -> dict:
    tokens = {"train": 10_000, "valid": 1_000, "test": 1_000}
    return {"tokens": tokens, "unk_tokens": {split: round(rate * tokens[split]) for split, rate in rates.items()}}


def test_held_out_unk_more_than_twice_trains_is_warned_in_one_line():
    """The licence texts cut by lines: 6.7% / 23.7% / 33.3%."""
    warning = unk_warning(summary_of({"train": 0.067, "valid": 0.237, "test": 0.333}))
    assert warning.startswith("valid's <unk> rate 23.7% and test's <unk> rate 33.3% are more than 2 times "
                              "train's (6.7%)") and "\n" not in warning
    assert unk_warning(summary_of({"train": 0.05, "valid": 0.09, "test": 0.1})) is None  # Brown with train's vocabulary
    assert unk_warning(summary_of({"train": 0.0, "valid": 0.1, "test": 0.0})).startswith("no train token is <unk>")


def test_a_report_groups_every_rows_blocks_alike_and_records_the_choice():
    rng = np.random.default_rng(3)
    results = fake_results({"kn-interp-5": 250.0}, "text")
    valid, test = correlated_split(rng), correlated_split(rng)
    for row in results["rows"]:
        row["blocks"] = {"valid": valid, "test": test}
    regrouped = grouped(results)
    choice = regrouped["bootstrap"]["grouping"]
    assert choice["row"] == "kn-interp-5" and choice["grouped"] and set(choice["valid_half_width"]) == {"500", "100", "50", "40", "30", "20"}
    assert all(len(row["blocks"]["test"]["tokens"]) == choice["blocks"] for row in regrouped["rows"])
    kn5 = next(row for row in regrouped["rows"] if row["id"] == "kn-interp-5")
    low, high = kn5["test_ppl_ci95"]
    assert (high - low) / 2 / math.exp(4.0) == pytest.approx(choice["test_half_width"][str(choice["blocks"])], rel=0.02)

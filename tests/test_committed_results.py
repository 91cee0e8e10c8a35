"""Committed results that hold what their reports say (issue 52), and a results.json altered by hand
refused (issue 53, "tampered results believed").

- Every committed results.json is in today's format (`lmbench report NAME --report-dir results/NAME`
  rewrites it from its blocks): it validates against the schema of this version, keeps the resample
  count and the grouping the report uses now, and every interval in it is what its blocks give at that
  grouping (float64 sums: relative 1e-12), every seeded row's perplexity its seeds' geometric mean.
- The paper's "best NPLM beats the best n-gram model" compares the network alone or mixed with the
  trigram, never a mixture holding its own opponent, and states the paper's pair beside ours.
- The grouping of the blocks goes as far as the half-width grows, says when it grew to the floor, and
  a verdict that another grouping would change says so.
- Seeds are paired by their index; a p-value below the bootstrap's resolution reads "< 1/N".
- A row's blocks deleted (its perplexity then unchecked), an `n`, `method` or mixture other than
  the table's row of that id, a perplexity of 1e300, a vocabulary of -3: one line, exit 2, nothing written.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from lmbench import bootstrap
from lmbench.schema import SCHEMA_VERSION, problems
from reports.building.claims import check_claims
from reports.records import upgrade
from tests.test_error_bars import correlated_split
from tests.test_faults import error_line
from tests.test_intervals import with_blocks
from tests.test_reports import fake_results

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(ROOT.glob("results/*/results.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.parent.name)
def test_every_committed_results_json_is_in_todays_format_and_gives_its_intervals_back(path):
    results = json.loads(path.read_text())
    assert results.get("schema_version") == SCHEMA_VERSION and problems("results", results) == []
    assert results["bootstrap"]["resamples"] == bootstrap.RESAMPLES
    now = upgrade(results)["bootstrap"]["grouping"]  # the grouping the report uses today
    written = results["bootstrap"]["grouping"]
    assert (written["blocks"], written["still_widening"]) == (now["blocks"], now["still_widening"])
    for key in ("valid_half_width", "test_half_width"):
        assert written[key] == pytest.approx(now[key], rel=1e-12)
    cut = len(next(r for r in results["rows"] if r["id"] == written["row"])["blocks"]["valid"]["tokens"])
    for row in results["rows"]:
        for split in ("valid", "test") if row.get("blocks") else ():
            blocks = row["blocks"][split]
            again = bootstrap.split_interval(blocks if written["blocks"] == cut else bootstrap.group(blocks, written["blocks"]))
            assert row[f"{split}_ppl_ci95"] == pytest.approx(list(again), rel=1e-12), (row["id"], split)
        if row.get("seeds"):
            for key in ("valid_ppl", "test_ppl"):
                geometric = math.exp(np.mean([math.log(seed[key]) for seed in row["seeds"]]))
                assert row[key] == pytest.approx(geometric, rel=1e-12), (row["id"], key)


def test_the_best_nplm_is_the_network_or_its_trigram_mixture_never_a_mixture_holding_its_opponent():
    """MLP9 + KN 5 + ∞-gram lowest on valid: it holds the best n-gram model (∞-gram + KN 5) it would be
    compared with, so the claim takes MLP10 (MLP9 + trigram), and gives the paper's pair (MLP10 against
    the class-based trigram) beside it with the paper's figures."""
    results = fake_results({"infini-gram-kn-5": 300.0, "kn-interp-5": 305.0, "mlp9-kn-interp-5-infini-gram": 220.0,
                            "mlp10": 240.0, "class-3-500": 310.0})
    claims = {claim["claim"].split(" (")[0]: claim for claim in check_claims(results)}
    best = claims["The best NPLM"]
    assert best["rows"] == ["mlp10", "infini-gram-kn-5"] and best["difference"] == pytest.approx(-20.0)
    assert best["paper"].startswith("MLP10 252 vs class-based 3-gram (500 classes) 312: 19.2% lower")
    assert best["paper_pair"]["ours"] == "mlp10 240.0 vs class-3-500 310.0: 22.6% lower"
    assert claims["The deleted-interpolation trigram is far above the best NPLM"]["rows"] == ["del-int", "mlp10"]
    rows = {row["id"]: row for row in results["rows"]}
    for claim in claims.values():  # no row compared with the best n-gram model mixes it
        if claim["claim"].endswith("the best n-gram model") and claim.get("rows"):
            network, ngram = claim["rows"]
            assert ngram not in (rows[network].get("parts") or ()), claim["claim"]


def test_the_grouping_goes_down_to_the_floor_while_the_half_width_grows_and_says_so():
    """Documents whose topic runs over 50 consecutive ones: the half-width grows at every grouping down to
    20 blocks, the fewest an interval rests on, so the report's intervals may be too narrow."""
    rng = np.random.default_rng(5)
    valid = correlated_split(rng, run=50)
    choice = bootstrap.choose_grouping(valid)
    assert list(choice.widths) == [500, 100, 50, 40, 30, 20]
    assert choice.blocks == 20 and choice.still_widening
    independent = {"logprob": (200 * rng.normal(-4.0, 0.3, size=500)).tolist(), "tokens": [200] * 500}
    assert not bootstrap.choose_grouping(independent).still_widening


def test_a_verdict_that_changes_with_the_grouping_says_so():
    """KN 5 below KN 3 by a margin the interval at the documents resolves and the one at 20 blocks does not:
    the claim gives its verdict at the report's grouping and names the groupings where it differs."""
    rng = np.random.default_rng(11)
    results = fake_results({"kn-interp-5": 250.0}, "text")
    valid, test = correlated_split(rng), correlated_split(rng)
    for row in results["rows"]:
        row["blocks"] = {"valid": valid, "test": test}
    kn3 = next(row for row in results["rows"] if row["id"] == "kn-interp-3")
    topic = np.repeat(rng.normal(0.0, 1.0, size=50), 10)  # kn-interp-5 better by 0.002 nats a token, moving with
    gain = 0.002 + 0.01 * topic                              # the topic: more noise over fewer, coarser blocks
    kn3["blocks"] = {"valid": valid, "test": {"logprob": (np.array(test["logprob"]) - np.array(test["tokens"]) * gain).tolist(),
                                              "tokens": test["tokens"]}}
    for row in results["rows"]:  # each row's perplexities those of its blocks
        for split in ("valid", "test"):
            row[f"{split}_ppl"] = math.exp(-sum(row["blocks"][split]["logprob"]) / sum(row["blocks"][split]["tokens"]))
    view = upgrade(results)
    claim = next(c for c in check_claims(view) if c["claim"] == "A longer context helps interpolated Kneser-Ney")
    chosen = view["bootstrap"]["grouping"]["blocks"]
    assert claim["by_grouping"]["500"] == "holds" and "not significant" in claim["by_grouping"].values()
    assert claim["grouping"].startswith(f"changes with the grouping: {claim['by_grouping'][str(chosen)]} at {chosen} blocks")


def seeded(row: dict, seeds: list[int], test: list[float]) -> None:
    row.update(seeds=[{"seed": seed, "test_ppl": ppl, "valid_ppl": ppl * 1.05} for seed, ppl in zip(seeds, test)],
               test_ppl=math.exp(np.mean(np.log(test))), valid_ppl=1.05 * math.exp(np.mean(np.log(test))))


def test_seeds_are_paired_by_index_and_a_p_below_the_resolution_reads_below_one_over_n():
    """The LSTM's seeds 0, 1, 2 against the Transformer's 3, 4, 5 (run apart): paired by index, the k-th
    with the k-th, whatever their numbers; a difference no draw crosses has p "< 1/10000", not 0."""
    results = with_blocks(fake_results({"lstm": 188.9, "transformer": 170.0}, streams=True))
    rows = {row["id"]: row for row in results["rows"]}
    seeded(rows["lstm"], [0, 1, 2], [188.0, 189.0, 189.7])
    seeded(rows["transformer"], [3, 4, 5], [169.0, 171.0, 170.0])
    claim = next(c for c in check_claims(results) if c["claim"] == "The Transformer (ours) beats the LSTM (ours)")
    [comparison] = claim["comparisons"]
    assert comparison["seeds"] == 3 and claim["training"] == "3 seeds: covered"
    assert comparison["seed_differences"] == pytest.approx([100 * (169 / 188 - 1), 100 * (171 / 189 - 1),
                                                           100 * (170 / 189.7 - 1)], rel=1e-12)
    unseeded = with_blocks(fake_results({"lstm": 188.9, "transformer": 170.0}, streams=True))
    claim = next(c for c in check_claims(unseeded) if c["claim"] == "The Transformer (ours) beats the LSTM (ours)")
    assert claim["p_text"] == "< 1/10000" and claim["p"] == 1 / bootstrap.RESAMPLES and claim["p_holm"] > 0
    assert bootstrap.p_text(0.0123) == "0.012" and bootstrap.p_text(None) == ""


def brown_results() -> dict:
    return json.loads((ROOT / "results" / "brown" / "results.json").read_text())


def _delete_blocks(results):
    row = next(r for r in results["rows"] if r["id"] == "mlp1")
    del row["blocks"]
    row["test_ppl"] = 50.0
    return "mlp1"


def _n(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["n"] = 9
    return "kn-interp-5"


def _n_of_another_row(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["n"] = 4  # an order KN takes: the table says 5
    return "kn-interp-5"


def _method_of_another_row(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["method"] = "katz"
    return "kn-interp-5"


def _parts(results):
    next(r for r in results["rows"] if r["id"] == "mlp10")["parts"] = ["mlp1", "del-int"]
    return "mlp10"


def _n_text(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["n"] = "five"
    return "rows/"


def _method(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["method"] = "magic"
    return "method"


def _train_ppl(results):
    next(r for r in results["rows"] if r["id"] == "kn-interp-5")["train_ppl"] = 1e300
    return "kn-interp-5"


def _vocabulary(results):
    results["corpus_summary"]["vocab_size"] = -3
    return "vocab_size"


def _newer(results):
    results["schema_version"] = SCHEMA_VERSION + 1
    return "update lmbench"


@pytest.mark.parametrize("tamper", [_delete_blocks, _n, _n_of_another_row, _method_of_another_row, _parts,
                                    _n_text, _method, _train_ppl, _vocabulary, _newer],
                         ids=lambda tamper: tamper.__name__.strip("_"))
def test_a_results_json_altered_by_hand_is_refused_in_one_line(tmp_path, capsys, tamper):
    results = brown_results()
    named = tamper(results)
    (tmp_path / "results.json").write_text(json.dumps(results))
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path), "--allow-dirty"])
    assert named in line and "results.json" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # nothing written

"""Every row a reproduction writes keeps the bootstrap blocks of valid and test and their 95%
intervals (mixtures too, and rows cached before blocks were kept), from which anyone recomputes the
intervals of the written results.json; the claims judge their comparisons by the paired test on the
same blocks, and results without blocks keep the verdicts they had."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from lmbench import bootstrap
from lmbench.files import write_checked
from lmbench.schema import problems
from reports.running import pipeline
from reports.building import summary
from reports.building.claims import check_claims
from reports.experiments import Row
from reports.records import load_results
from reports.building.tables import comparison, to_markdown
from tests.helpers import close, markov_text
from tests.lm_checks import make_corpus
from tests.test_reports import fake_results

RESULTS = Path(__file__).resolve().parent.parent / "results"

ROWS = [Row("kn3", "ngram", "KN", n=3, method="kneser-ney"), Row("katz3", "ngram", "Katz", n=3, method="katz"),
        Row("kn3-katz3", "mix", "KN + Katz", mix="EM", parts=("kn3", "katz3"))]


def with_documents(text: str, length: int) -> str:
    """The words of `text` with `</d>` after every `length` of them."""
    words = text.split()
    return " ".join(word + (" </d>" if (i + 1) % length == 0 else "") for i, word in enumerate(words))


def run(tmp_path, monkeypatch) -> dict:
    corpus = make_corpus(*(with_documents(markov_text(size, 60, seed), 25)
                           for size, seed in ((3000, 1), (800, 2), (800, 3))))
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: list(ROWS))
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: corpus)
    return pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work",
                                 tmp_path / "report").run()


def test_every_row_keeps_its_blocks_and_the_intervals_they_give(tmp_path, monkeypatch):
    results = run(tmp_path, monkeypatch)
    written = json.loads((tmp_path / "report" / "results.json").read_text())
    assert "documents" in written["bootstrap"]["blocks"]["test"]
    assert written["bootstrap"]["resamples"] == bootstrap.RESAMPLES >= 1000
    tokens = results["corpus_summary"]["tokens"]
    for row in written["rows"]:  # the mixture's too
        for split in ("valid", "test"):
            blocks = row["blocks"][split]
            assert len(blocks["tokens"]) >= bootstrap.MIN_BLOCKS and sum(blocks["tokens"]) == tokens[split]
            rounding = 0.5 * 10 ** -bootstrap.DECIMALS * len(blocks["tokens"]) / tokens[split]  # of the log
            assert -sum(blocks["logprob"]) / tokens[split] == pytest.approx(math.log(row[f"{split}_ppl"]), abs=rounding)
            low, high = row[f"{split}_ppl_ci95"]
            assert low < row[f"{split}_ppl"] < high
            grouping = written["bootstrap"]["grouping"]  # recomputed from the file alone, as grouped
            assert [low, high] == list(bootstrap.split_interval(
                bootstrap.group(blocks, grouping["blocks"]) if grouping["grouped"] else blocks))


def test_a_row_cached_before_blocks_were_kept_gets_them_from_its_saved_logprobs(tmp_path, monkeypatch):
    first = {row["id"]: row for row in run(tmp_path, monkeypatch)["rows"]}
    cached = tmp_path / "work" / "rows" / "kn3.json"
    old = json.loads(cached.read_text())
    for key in ("blocks", "valid_ppl_ci95", "test_ppl_ci95"):
        del old[key]
    write_checked(cached, lambda path: path.write_text(json.dumps(old)))  # as the pipeline writes it
    again = {row["id"]: row for row in run(tmp_path, monkeypatch)["rows"]}
    assert again["kn3"]["seconds"] == first["kn3"]["seconds"]  # not run again
    assert again["kn3"]["blocks"] == first["kn3"]["blocks"]
    assert again["kn3"]["test_ppl_ci95"] == first["kn3"]["test_ppl_ci95"]


def with_blocks(results: dict, noise: float = 0.02) -> dict:
    """`results` with test blocks for every row: 100 documents of 200 tokens, whose difficulty (the
    mean log-probability of a document, spread 0.3 nats) every row shares, plus `noise` nats of the
    row's own per document; each row's sums give its test perplexity exactly."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.3, size=100)
    for row in results["rows"]:
        own = shared + rng.normal(0, noise, size=100)
        mean_logprob = -math.log(row["test_ppl"]) + own - own.mean()
        row["blocks"] = {"test": {"logprob": (200 * mean_logprob).tolist(), "tokens": [200] * 100}}
    return results


CLAIM = "The Transformer (ours) beats the LSTM (ours)"


@pytest.mark.parametrize("transformer, verdict", [
    (180.0, r"holds \(-4\.7%, 95% CI -5\.\d% to -4\.\d%\)"),
    (196.5, r"fails \(\+4\.0%, 95% CI \+3\.\d% to \+4\.\d%\)"),
    (188.85, r"not significant \(-0\.03%, 95% CI -0\.\d\d% to \+0\.\d\d%\)")])
def test_a_claim_holds_fails_or_is_not_significant_by_its_paired_interval(transformer, verdict):
    """The LSTM at 188.9: each row's own interval is about 12% wide, but both rows see the same
    documents, so the paired interval of their difference is a fraction of a percent; a difference
    under 0.05% shows its second decimal (never "-0.0%")."""
    results = with_blocks(fake_results({"lstm": 188.9, "transformer": transformer}, streams=True))
    claim = {c["claim"]: c for c in check_claims(results)}[CLAIM]
    assert re.fullmatch(verdict, claim["verdict"])
    low, high = claim["difference_ci95"]
    assert claim["difference"] == pytest.approx(100 * (transformer / 188.9 - 1))
    assert claim["significant"] == (not low < 0 < high) and (low < 0 < high) == verdict.startswith("not")
    assert problems("claims", check_claims(results)) == []


def test_a_row_against_its_own_copy_is_not_significant_and_never_holds():
    results = with_blocks(fake_results({"lstm": 188.9, "transformer": 188.9}, streams=True))
    lstm = next(row for row in results["rows"] if row["id"] == "lstm")
    next(row for row in results["rows"] if row["id"] == "transformer")["blocks"] = lstm["blocks"]
    claim = {c["claim"]: c for c in check_claims(results)}[CLAIM]
    assert claim["difference"] == 0 and claim["difference_ci95"] == [0, 0] and claim["significant"] is False
    assert claim["verdict"] == "not significant (+0.0%, 95% CI +0.0% to +0.0%)"


def test_a_claim_of_many_checks_holds_only_when_every_check_does():
    """Mixing the NPLM with the trigram always helps: five pairs; one mixture 0.02% below its network
    (within the noise) makes the claim not significant, one 3% above makes it fail."""
    base = {"mlp1": 280.0, "mlp2": 260.0, "mlp3": 300.0, "mlp4": 280.0, "mlp5": 290.0, "mlp6": 270.0,
            "mlp7": 300.0, "mlp8": 280.0, "mlp9": 270.0, "mlp10": 250.0}
    text = "Mixing the NPLM with the trigram always helps"
    for mlp10, verdict in ((250.0, "holds"), (269.95, "not significant"), (278.1, "fails")):
        claim = {c["claim"]: c for c in check_claims(with_blocks(fake_results({**base, "mlp10": mlp10})))}[text]
        assert claim["verdict"].startswith(f"{verdict} (")
        if verdict != "holds":  # the deciding check is mlp10's against mlp9
            assert claim["difference"] == pytest.approx(100 * (mlp10 / 270 - 1))


@pytest.mark.parametrize("name", ["brown", "ap", "ap89-1m", "ap89-4m", "brown-vocab-train"])
def test_committed_claims_are_what_their_results_give(name):
    """Every committed claims.json is what its results.json gives again, and every committed report keeps
    its rows' blocks (each re-run for them), so every claim it could ask has its paired interval."""
    results = load_results(RESULTS / name)
    claims = check_claims(results)
    committed = json.loads((RESULTS / name / "claims.json").read_text())
    keys = ("claim", "ours", "verdict", "significant", "rows", "comparisons", "holm", "training", "difference_ci95")
    # strings and verdicts exactly, floats to float64 round-off: numpy's summation order (its SIMD kernels)
    # moves the last bit from one machine's vector units to another's
    assert close([{k: c.get(k) for k in keys} for c in claims], [{k: c.get(k) for k in keys} for c in committed],
                 rel=1e-12)
    assert all("blocks" in row for row in results["rows"] if row.get("status") != "not run")
    for claim in claims:
        if claim["verdict"] != "not run":
            assert claim.get("difference_ci95") is not None, claim


@pytest.mark.parametrize("corpus", ["brown", "text"])
def test_the_table_shows_each_interval_beside_its_perplexity(corpus):
    results = fake_results({"kn-interp-5": 188.94}, corpus)
    for row in results["rows"]:
        row["test_ppl_ci95"] = [row["test_ppl"] - 2.14, row["test_ppl"] + 2.06]
    frame = comparison(results)
    ours = "test ours" if corpus == "brown" else "test"
    columns = list(frame.columns)
    assert columns[columns.index(ours) + 1] == "test 95% CI" and "valid 95% CI" not in columns
    kn5 = frame[frame["id"] == "kn-interp-5"].iloc[0]
    assert (kn5[ours], kn5["test 95% CI"]) == (188.9, "[186.8, 191.0]")
    assert re.search(r"\|\s*188\.9\s*\|\s*\[186\.8, 191\.0\]\s*\|", to_markdown(frame))


def test_the_summary_gives_each_perplexitys_interval_and_each_ratios_paired_one(tmp_path, monkeypatch):
    """KN 5 at 200 and the best paper-shape network at 190 with blocks: the cell gives the interval of
    the perplexity, the line the paired interval of the ratio (0.95, within a percent), and the
    figure draws it as an error bar; a corpus without blocks keeps its cell as it was."""
    results = with_blocks(fake_results({"kn-interp-5": 200.0, "mlp9": 190.0}))
    for row in results["rows"]:
        row["test_ppl_ci95"] = list(bootstrap.split_interval(row["blocks"]["test"]))
    line = summary.corpus_line("first", results)
    low, high = line["paper"]["ratio_ci95"]
    assert line["paper"]["id"] == "mlp9" and 0.94 < low < 0.95 < high < 0.96
    assert line["KN 5"]["ratio_ci95"] is None  # KN 5 against itself: no bar
    kn5_low, kn5_high = line["KN 5"]["ci95"]
    assert high - low < (kn5_high - kn5_low) / 200 / 4  # the pairing removes the documents' shared spread
    cell = summary.families_frame([line])["alone"][0]  # KN 5's line
    assert cell == f"200.0 [{kn5_low:.1f}, {kn5_high:.1f}] (+0.0%)"
    without = summary.corpus_line("old", fake_results({"kn-interp-5": 200.0, "mlp9": 190.0}))
    assert summary.families_frame([without])["alone"][0] == "200.0 (+0.0%)"
    drawn = []
    monkeypatch.setattr("matplotlib.axes.Axes.vlines", lambda self, x, low, high, **kwargs: drawn.append((low, high)))
    summary.summary_figure([line], tmp_path / "summary.png")
    assert (low, high) in drawn and len(drawn) == sum(line[key]["ratio_ci95"] is not None for entry in summary.PAIRED
                                                      for key in (entry, f"{entry} + KN 5"))


def test_the_summary_figure_draws_an_interval_that_misses_its_ratio(tmp_path):
    """A percentile interval need not straddle its point estimate (a small test split, a skewed
    spread): the figure draws it as it is."""
    results = with_blocks(fake_results({"kn-interp-5": 200.0, "mlp9": 190.0}))
    line = summary.corpus_line("first", results)
    line["paper"]["ratio_ci95"] = [0.96, 0.97]  # the ratio is 0.95
    assert summary.summary_figure([line], tmp_path / "summary.png").exists()

"""End to end: `lmbench reproduce brown --quick` runs every row of Table 1 on a slice of Brown, caches
the rows, and builds the report; a second run takes every row from the cache (the optional groups'
rows, `--extra`, run through the same pipeline: tests/test_rows.py). What is checked is what a reader of the report relies on: every row is there with a finite
perplexity, no mixture is above both of its parts, and each claim's verdict follows from the rows."""

import json
import math

import pytest

from lmbench_cli import main
from reports.cli import EXTRA_GROUPS
from reports.experiments import brown_rows


def assert_mixtures_not_above_their_parts(rows: dict) -> None:
    """p = sum_i w_i p_i per token, and -log is convex: a mixture's log-perplexity is at most the
    weighted mean of its parts' (at most the larger of them), on valid and test alike."""
    for row in rows.values():
        if row["kind"] != "mix":
            continue
        for split in ("valid", "test"):
            parts = [rows[part][f"{split}_ppl"] for part in row["parts"]]
            assert row[f"{split}_ppl"] <= max(parts) * (1 + 1e-9), (row["id"], split, parts)
            if row["mix"] == "0.5/0.5":
                bound = math.exp(sum(math.log(ppl) for ppl in parts) / len(parts))
                assert row[f"{split}_ppl"] <= bound * (1 + 1e-9), (row["id"], split, parts)


@pytest.mark.slow
@pytest.mark.usefixtures("brown")
def test_quick_reproduction_end_to_end(tmp_path, capsys):
    work, report = tmp_path / "work", tmp_path / "report"
    argv = ["reproduce", "brown", "--quick", "--work-dir", str(work), "--report-dir", str(report), "--json"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed)
    results = json.loads((report / "results.json").read_text())
    vocab_size = results["corpus_summary"]["vocab_size"]
    rows = {row["id"]: row for row in results["rows"]}
    ours = ["nplm-ours", "nplm-ours-kn-interp-5-em",  # NPLM (ours), shaped by the training split, and its mixtures
            "nplm-ours-kn-interp-5-infini-gram"]
    assert list(rows) == [row.id for row in brown_rows()] + ours  # every row
    trained = rows["nplm-ours"]["config"]  # the whole training configuration, the shape within it
    assert trained["shape"]["bag"] == 50 and trained["dropout"] == 0.3 and trained["weight_decay"] == 1e-5
    for row in rows.values():
        splits = ("valid", "test") + (("train",) if row["train_ppl"] is not None else ())
        for split in splits:
            assert math.isfinite(row[f"{split}_ppl"]) and 1 < row[f"{split}_ppl"] <= vocab_size, (row["id"], split)
    assert rows["del-int"]["train_ppl"] < rows["del-int"]["valid_ppl"]
    assert_mixtures_not_above_their_parts(rows)
    # EM-fitted weights are fitted on valid: there the mixture cannot lose to either part (beyond where EM
    # stops: an optimum at a weight of 0 or 1 is approached slowly, as in tests/test_compare.py)
    best_part = min(rows["mlp1"]["valid_ppl"], rows["del-int"]["valid_ppl"])
    assert rows["mlp1-del-int-em"]["valid_ppl"] <= best_part * (1 + 1e-4)
    assert rows["mlp1"]["curve"] and results["embedding"]["words"]
    assert rows["mlp1"]["config"]["model"] == "nplm" and rows["mlp1"]["family"] == "nplm"
    assert (report / "report.html").exists() and (report / "figures" / "learning_curves.png").exists()
    page = (report / "report.html").read_text()  # a quick run says so, and its differences are not coloured
    assert "<h1>QUICK: " in page and "QUICK run: a slice" in page and "num below" not in page and "num above" not in page
    assert {"commit", "dirty", "threads"} <= set(results["meta"])  # threads: the count taken and the machine seen
    assert 0.05 < results["meta"]["peak_memory_gb"] < 24  # the run's high-water mark, in GB (not kB, not bytes)
    assert {"threads", "cores", "busy", "free", "source"} <= set(results["meta"]["threads"])

    # the verdicts follow from the rows: two claims recomputed here
    # the terminal gets no verdict of a quick run (numbers that measure nothing); its report keeps them
    claims = {c["claim"]: c for c in json.loads((report / "claims.json").read_text())}
    assert summary["claims"].startswith("not judged on a quick run")
    assert not any(c["verdict"].split(" (")[0] in printed for c in claims.values() if c["verdict"] != "not run")
    mlp1, kn5 = rows["mlp1"]["test_ppl"], rows["kn-interp-5"]["test_ppl"]
    claim = claims["MLP1 is at least 15% below the interpolated modified-KN 5-gram"]
    low, high = claim["difference_ci95"]  # the paired test's, judged against the claim's -15%
    assert claim["difference"] == pytest.approx(100 * (mlp1 / kn5 - 1)) and claim["threshold"] == -15
    assert claim["verdict"].startswith(("holds" if high < -15 else "fails" if low > -15 else "not significant") + " (")
    assert claim["ours"].startswith(f"mlp1 {mlp1:.1f} vs kn-interp-5 {kn5:.1f}: ")
    pairs = [(f"mlp{i}", f"mlp{i + 1}") for i in (1, 3, 5, 7, 9)]
    helped = all(rows[mixed]["test_ppl"] < rows[alone]["test_ppl"] for alone, mixed in pairs)
    assert helped or not claims["Mixing the NPLM with the trigram always helps"]["verdict"].startswith("holds")
    assert all(c["difference_ci95"] is not None for c in claims.values())  # no row is missing, every one has blocks

    # a second run re-uses every finished row (the same fingerprints and the same recorded seconds)
    assert main(argv) == 0
    capsys.readouterr()
    again = json.loads((report / "results.json").read_text())
    for field in ("test_ppl", "fingerprint", "seconds"):
        assert [r[field] for r in again["rows"]] == [r[field] for r in results["rows"]], field


def test_energy_rows_are_brown_only(tmp_path, capsys):
    assert main(["reproduce", "ap", "--extra", "energy", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--extra energy: the ap table has no such row group (it is brown's)" in err and len(err.splitlines()) == 1
    assert main(["reproduce", "brown", "--extra", "cnn"]) == 2
    assert f"'cnn': give a comma-separated list of {', '.join(EXTRA_GROUPS)}" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("brown")
def test_networks_on_a_papers_table_trains_only_those_and_lists_the_rest_not_run(tmp_path, capsys):
    """`reproduce brown --networks gru`: one more network beside a committed report of the same corpus;
    the table's n-gram rows run, its other networks (and their mixtures) are listed as not run."""
    work, report = tmp_path / "work", tmp_path / "report"
    argv = ["reproduce", "brown", "--quick", "--networks", "gru", "--work-dir", str(work), "--report-dir", str(report)]
    assert main(argv) == 0
    rows = {row["id"]: row for row in json.loads((report / "results.json").read_text())["rows"]}
    ran = {row_id for row_id, row in rows.items() if row.get("status") != "not run"}
    networks = {row_id for row_id in ran if rows[row_id]["kind"] == "network"}
    assert networks == {"gru"}  # its row group added by naming it
    assert {"gru-kn-interp-5-em", "kn-interp-5", "del-int", "infini-gram-kn-5"} <= ran
    assert {"mlp1", "mlp2", "nplm-ours", "nplm-ours-kn-interp-5-em", "mlp1-nce"} <= set(rows) - ran


def test_networks_a_papers_table_lacks_are_refused_before_any_row_runs(tmp_path, brown):
    from lmbench.errors import LMBenchError
    from reports.running.pipeline import Reproduction, default_settings
    reproduction = Reproduction(default_settings("ap", True), tmp_path / "work", tmp_path / "report", networks=("mlp1",))
    reproduction.load_corpus = lambda: brown  # (AP's table over any corpus: its rows, not its text, are checked)
    with pytest.raises(LMBenchError, match=r"--networks mlp1: no network row of that id in the ap table; its "
                                           r"networks: mlp-ap,nplm-ours"):
        reproduction.run()
    assert not (tmp_path / "work" / "rows").exists()

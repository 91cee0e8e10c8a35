"""End to end: `lmbench reproduce brown --quick --extra energy` runs every row of Table 1 and the energy
network's on a slice of Brown, caches the rows, and builds the report; a second run takes every row from
the cache."""

import json

import pytest

from lmbench_cli import main
from reports.experiments import brown_rows, energy_rows


@pytest.mark.usefixtures("brown")
def test_quick_reproduction_end_to_end(tmp_path, capsys):
    work, report = tmp_path / "work", tmp_path / "report"
    argv = ["reproduce", "brown", "--quick", "--work-dir", str(work), "--report-dir", str(report), "--json",
            "--extra", "energy"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    results = json.loads((report / "results.json").read_text())
    rows = {row["id"]: row for row in results["rows"]}
    assert list(rows) == [row.id for row in brown_rows() + energy_rows()]
    for row in rows.values():
        assert 1 < row["test_ppl"] < results["corpus_summary"]["vocab_size"], row["id"]
    assert rows["del-int"]["train_ppl"] < rows["del-int"]["valid_ppl"]
    # mixing with the trigram: EM-fitted weights cannot lose to either part on valid
    assert rows["mlp1-del-int-em"]["valid_ppl"] <= min(rows["mlp1"]["valid_ppl"], rows["del-int"]["valid_ppl"]) + 1e-6
    assert rows["mlp1"]["curve"] and results["embedding"]["words"]
    assert rows["energy1"]["config"]["model"] == "energy" and rows["mlp1"]["config"]["model"] == "nplm"
    assert rows["energy1"]["family"] == "energy" and rows["mlp1"]["family"] == "nplm"
    assert rows["energy1"]["config"]["objective"] == rows["mlp1"]["config"]["objective"]
    assert (report / "report.html").exists() and (report / "figures" / "learning_curves.png").exists()
    assert len(summary["claims"]) >= 6

    # a second run re-uses every finished row
    assert main(argv) == 0
    capsys.readouterr()
    again = json.loads((report / "results.json").read_text())
    assert [r["test_ppl"] for r in again["rows"]] == [r["test_ppl"] for r in results["rows"]]
    assert again["meta"]["wall_seconds"] < 60


def test_energy_rows_are_brown_only(tmp_path, capsys):
    assert main(["reproduce", "ap", "--extra", "energy", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--extra energy: the ap table has no such row group (it is brown's)" in err and len(err.splitlines()) == 1
    assert main(["reproduce", "brown", "--extra", "lstm"]) == 2
    assert "'lstm': give a comma-separated list of energy" in capsys.readouterr().err

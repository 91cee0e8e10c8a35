"""The cross-corpus summary: KN 5, the best paper-shape network (chosen on valid), NPLM (ours), each
mixed with KN 5, as ratios to KN 5, rebuilt from results.json files alone; missing rows shown as not run."""

import json
import pytest

from lmbench_cli import main
from reports.experiments import AP_NETWORK, TABLE1_NETWORKS, Row, kn5_mixtures, mixture, network, stream_rows
from reports.summary import corpus_line, gather, summary_frame

KN5 = Row("kn-interp-5", "ngram", "Kneser-Ney interpolated", n=5, method="kneser-ney")


def record(row: Row, valid: float, test: float) -> dict:
    return {**row.to_dict(), "train_ppl": None, "valid_ppl": valid, "test_ppl": test, "seconds": 1.0}


def results(name: str, records: list[dict], quick: bool = False) -> dict:
    return {"corpus": "text", "name": name, "settings": {"quick": quick}, "rows": records,
            "corpus_summary": {"tokens": {"train": 1, "valid": 1, "test": 1}, "vocab_size": 3,
                               "unk_tokens": {"train": 0, "valid": 0, "test": 0}},
            "meta": {"commit": "abc", "machine": "test", "wall_seconds": 1, "finished": "now"}}


def first_corpus() -> dict:
    """KN 5 at 200; MLP9 best on valid (205 < 210) though MLP1 is better on test; an energy network
    lower still (another family: not the paper's); ours at 160, not mixed; our LSTM at 150, mixed 140
    (it is not NPLM (ours), though it is ours too)."""
    mlp1 = network("mlp1", "NPLM, MLP1 shape", TABLE1_NETWORKS["MLP1"])
    mlp9 = network("mlp9", "NPLM, MLP9 shape", TABLE1_NETWORKS["MLP9"])
    ours = network("ours", "NPLM (ours)", (6, 200, 120, True), ours=True, dropout=0.3)
    energy = network("energy1", "Energy network", TABLE1_NETWORKS["MLP1"], "energy")
    lstm, lstm_kn5, _ = stream_rows(("lstm",))  # (and the LSTM + KN 5 + ∞-gram)
    mixes = kn5_mixtures([mlp1, mlp9, energy])[::2]  # each + KN 5 (not + KN 5 + ∞-gram)
    return results("first", [record(KN5, 210, 200), record(mlp1, 210, 180), record(mlp9, 205, 190),
                             record(ours, 190, 160), record(energy, 100, 100), record(lstm, 155, 150),
                             record(lstm_kn5, 145, 140),
                             record(mixes[0], 180, 150), record(mixes[1], 185, 170), record(mixes[2], 90, 90)])


def second_corpus() -> dict:
    """KN 5 at 100, the paper's network at 104, its KN 5 mixture at 85; no network of ours."""
    mlp = network("mlp-ap", "MLP", AP_NETWORK)
    return results("second", [record(KN5, 105, 100), record(mlp, 110, 104),
                              record(mixture("mlp-ap-kn-interp-5-em", "MLP + KN 5", "EM", ("mlp-ap", "kn-interp-5")),
                                     90, 85)])


def test_a_corpus_line_picks_on_valid_and_gives_ratios_to_kn5():
    line = corpus_line("first", first_corpus())
    assert line["KN 5"]["test_ppl"] == 200 and line["KN 5"]["ratio"] == 1
    assert line["paper"]["id"] == "mlp9" and line["paper"]["ratio"] == pytest.approx(190 / 200)
    assert line["paper + KN 5"]["id"] == "mlp9-kn-interp-5-em" and line["paper + KN 5"]["ratio"] == pytest.approx(0.85)
    assert line["ours"]["id"] == "ours" and line["ours"]["ratio"] == pytest.approx(0.8)
    assert line["ours + KN 5"]["test_ppl"] is None and line["ours + KN 5"]["ratio"] is None
    assert line["lstm"]["id"] == "lstm" and line["lstm + KN 5"]["ratio"] == pytest.approx(0.7)
    assert line["transformer"]["test_ppl"] is None


def test_summary_table_from_the_listed_results_files(tmp_path):
    for corpus in (first_corpus(), second_corpus(), results("first-quick", [record(KN5, 1, 1)], quick=True),
                   results("unlisted", [record(KN5, 1, 1)])):
        (tmp_path / corpus["name"]).mkdir()
        (tmp_path / corpus["name"] / "results.json").write_text(json.dumps(corpus))
    (tmp_path / "index.txt").write_text("# the committed reports\nfirst\nsecond\nfirst-quick\n")
    lines = gather(root=tmp_path)  # the quick run is not a corpus of the summary, an unlisted folder is not read
    assert [line["corpus"] for line in lines] == ["first", "second"]
    table = summary_frame(lines).values.tolist()
    # the columns of ours that some corpus has (no corpus has a Transformer: no column of all "not run")
    assert list(summary_frame(lines).columns[5:]) == ["NPLM (ours)", "+ KN 5", "LSTM (ours)", "+ KN 5"]
    assert table == [["first", "200.0 (+0.0%)", "NPLM, MLP9 shape", "190.0 (-5.0%)", "170.0 (-15.0%)",
                      "160.0 (-20.0%)", "not run", "150.0 (-25.0%)", "140.0 (-30.0%)"],
                     ["second", "100.0 (+0.0%)", "MLP", "104.0 (+4.0%)", "85.0 (-15.0%)",
                      *["not run"] * 4]]
    # the report of a quick run is not gathered either, not even into its own summary; a full one is
    quick = results("first", [record(KN5, 1, 1)], quick=True)
    assert [line["corpus"] for line in gather(tmp_path / "first-quick", quick, tmp_path)] == ["first", "second"]
    mine = results("mine", [record(KN5, 1, 1)])
    assert [line["corpus"] for line in gather(tmp_path / "mine", mine, tmp_path)] == ["first", "mine", "second"]

    assert main(["report", "summary", "--report-dir", str(tmp_path)]) == 0
    written = (tmp_path / "summary.md").read_text()
    assert "| first    | 200.0 (+0.0%)" in written and "85.0 (-15.0%)" in written
    assert (tmp_path / "summary.png").exists() and (tmp_path / "summary.svg").exists()


def test_summary_without_reports_names_the_run(tmp_path, capsys):
    assert main(["report", "summary", "--report-dir", str(tmp_path)]) == 2
    assert "index.txt" in capsys.readouterr().err


def test_summary_figure_shows_every_bar_whole(tmp_path, monkeypatch):
    import reports.figures
    from reports.summary import ENTRIES, summary_figure
    line = {"corpus": "worse", **{entry: {"ratio": None, "test_ppl": None} for entry in ENTRIES}}
    line["paper"] = {"ratio": 1.8, "test_ppl": 180.0}  # a network far above KN 5: its bar must not be clipped
    shown, save = {}, reports.figures.save_figure

    def keep(fig, directory, name, tight=True):
        ax = fig.axes[0]
        shown.update(top=ax.get_ylim()[1], legend=ax.get_legend().get_bbox_to_anchor().transformed(
            ax.transAxes.inverted()).x0)
        return save(fig, directory, name, tight)
    monkeypatch.setattr(reports.figures, "save_figure", keep)
    assert summary_figure([line], tmp_path / "summary.png").exists()
    assert shown["top"] > 1.8 and shown["legend"] > 1  # the legend right of the axes, behind no bar

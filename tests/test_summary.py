"""The cross-corpus summary: KN 5, the best n-gram mixture, the best paper-shape network, each of ours
(alone and mixed with KN 5), the best network (any family) and the best mixture, all chosen on valid,
as ratios to KN 5, rebuilt from results.json files alone; the answer table narrow, absent rows left out
of every family's table and of the figure; written where the working directory (or --results-dir) says."""

import json
import re
from pathlib import Path

import pytest

from lmbench_cli import main
from reports.experiments import (AP_NETWORK, INFINI_GRAM, TABLE1_NETWORKS, Row, infini_gram_row, kn5_mixtures,
                                 mixture, network, rows_beyond_2003)
from reports.building.summary import (LABELS, answer_frame, answer_sentence, block_markers, budget_note, corpus_line, families_frame,
                             gather, listed_reports, narrow_markdown, short_name)

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
    lstm, lstm_kn5, _ = rows_beyond_2003(("lstm",))  # (and the LSTM + KN 5 + ∞-gram)
    mixes = kn5_mixtures([mlp1, mlp9, energy])[::2]  # each + KN 5 (not + KN 5 + ∞-gram)
    return results("first", [record(KN5, 210, 200), record(mlp1, 210, 180), record(mlp9, 205, 190),
                             record(ours, 190, 160), record(energy, 100, 100), record(lstm, 155, 150),
                             record(lstm_kn5, 145, 140), record(infini_gram_row(), 209, 201),
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
    # the named bests of any family: the energy network (valid 100) and its mixture (90), the ∞-gram + KN 5
    assert line["network"]["id"] == "energy1" and line["mixture"]["id"] == "energy1-kn-interp-5-em"
    assert line["n-gram mixture"]["id"] == INFINI_GRAM and line["n-gram mixture"]["ratio"] == pytest.approx(1.005)


def test_summary_table_from_the_listed_results_files(tmp_path):
    for corpus in (first_corpus(), second_corpus(), results("first-quick", [record(KN5, 1, 1)], quick=True),
                   results("unlisted", [record(KN5, 1, 1)])):
        (tmp_path / corpus["name"]).mkdir()
        (tmp_path / corpus["name"] / "results.json").write_text(json.dumps(corpus))
    (tmp_path / "index.txt").write_text("# the committed reports\nfirst\nsecond\nfirst-quick\n")
    lines = gather(root=tmp_path)  # the quick run is not a corpus of the summary, an unlisted folder is not read
    assert [line["corpus"] for line in lines] == ["first", "second"]
    assert answer_frame(lines).values.tolist() == [
        ["first", "200.0", "+0.5%", "MLP9 -5.0%", "Energy network -50.0%", "Energy network + KN 5 -55.0%"],
        ["second", "100.0", "not run", "MLP +4.0%", "MLP +4.0%", "MLP + KN 5 -15.0%"]]
    # every family's rows: those a corpus has, alone and mixed (no transformer: no line of all "not run")
    assert families_frame(lines).values.tolist() == [
        ["first", "interpolated KN 5", "200.0 (+0.0%)", ""],
        ["first", "best n-gram mixture: ∞-gram + KN 5", "201.0 (+0.5%)", ""],
        ["first", "best paper-shape network: MLP9", "190.0 (-5.0%)", "170.0 (-15.0%)"],
        ["first", "NPLM (ours)", "160.0 (-20.0%)", ""],
        ["first", "LSTM (ours)", "150.0 (-25.0%)", "140.0 (-30.0%)"],
        ["second", "interpolated KN 5", "100.0 (+0.0%)", ""],
        ["second", "best paper-shape network: MLP", "104.0 (+4.0%)", "85.0 (-15.0%)"]]
    # the report of a quick run is not gathered either, not even into its own summary; a full one is
    quick = results("first", [record(KN5, 1, 1)], quick=True)
    assert [line["corpus"] for line in gather(tmp_path / "first-quick", quick, tmp_path)] == ["first", "second"]
    mine = results("mine", [record(KN5, 1, 1)])
    assert [line["corpus"] for line in gather(tmp_path / "mine", mine, tmp_path)] == ["first", "mine", "second"]

    assert main(["report", "summary", "--results-dir", str(tmp_path)]) == 0
    written = (tmp_path / "summary.md").read_text()
    assert re.search(r"\| first +\| best paper-shape network: MLP9 +\| 190.0 \(-5.0%\)", written)
    assert (tmp_path / "summary.png").exists() and (tmp_path / "summary.svg").exists()


def test_a_sibling_report_adds_the_rows_its_corpus_lacks_and_says_they_trained_under_a_budget(tmp_path):
    """An index line "first first-more": the second report (the same token streams: KN 5 the same) adds
    the rows the first lacks (a GRU trained under a budget, marked † with its report and budget), never
    one the first has; a report on other streams is left out of the line."""
    gru, gru_kn5, _ = rows_beyond_2003(("gru",))
    lstm, _, _ = rows_beyond_2003(("lstm",))
    more = results("first-more", [record(KN5, 210, 200), {**record(gru, 120, 110), "stopped": "budget"},
                                  record(gru_kn5, 115, 105), {**record(lstm, 10, 10), "stopped": "budget"}])
    more["budget"] = {"asked": "80m", "rule": "the same share of every network's recipe", "share": 0.04,
                      "flops_per_row": None, "rows": {}}
    other = results("first-other", [record(KN5, 210, 201), record(rows_beyond_2003(("transformer",))[0], 50, 50)])
    for corpus in (first_corpus(), more, other):
        (tmp_path / corpus["name"]).mkdir()
        (tmp_path / corpus["name"] / "results.json").write_text(json.dumps(corpus))
    (tmp_path / "index.txt").write_text("first first-more first-other\n")
    [line] = gather(root=tmp_path)
    assert line["lstm"]["test_ppl"] == 150 and line["lstm"]["budget"] is None  # the first report's, not the sibling's
    assert line["gru"]["test_ppl"] == 110 and line["gru"]["report"] == "first-more" and line["gru"]["budget"]["asked"] == "80m"
    assert line["gru + KN 5"]["budget"]["asked"] == "80m"  # a mixture of a budgeted network is budgeted too
    assert line["transformer"]["test_ppl"] is None  # first-other's KN 5 scores other streams
    assert line["network"]["id"] == "energy1" and line["mixture"]["id"] == "energy1-kn-interp-5-em"
    assert ["first", "GRU (ours)†", "110.0 (-45.0%)", "105.0 (-47.5%)"] in families_frame([line]).values.tolist()
    assert line["gru"]["budgeted_only"] and not line["lstm"]["budgeted_only"]
    assert budget_note([line]) == ("† budgeted only: trained under a compute budget, not to its recipe's end, and "
                                   "never picked as a corpus's best: first's GRU (ours) (results/first-more, 80m: the "
                                   "same share of every network's recipe, 4% of each).")
    assert budget_note(gather(root=tmp_path / "nowhere", current=first_corpus())) is None
    only = {**line, "network": line["gru"], "mixture": line["gru + KN 5"]}  # (as if the GRU were all there is)
    assert "by not run in test perplexity" in answer_sentence([only])  # a budgeted row is never a corpus's figure
    assert answer_frame([only]).iloc[0]["best network (any family)"] == "budgeted only†"


def test_no_best_is_picked_from_a_budgeted_row():
    """A network trained under a compute budget, planted with the lowest valid and test perplexity of its
    corpus, is never picked: not as the best network, the best mixture, the best paper-shape network or
    its family's row, where a row trained to its recipe's end is there."""
    corpus = first_corpus()
    mlp5 = network("mlp5", "NPLM, MLP5 shape", TABLE1_NETWORKS["MLP5"])
    lstm_cut = {**record(rows_beyond_2003(("lstm",))[0], 5, 5), "id": "lstm-cut", "stopped": "budget"}
    [mixed] = kn5_mixtures([mlp5])[::2]
    corpus["rows"] += [{**record(mlp5, 4, 4), "stopped": "budget"}, lstm_cut, record(mixed, 3, 3)]
    corpus["budget"] = {"asked": "20m", "rule": "the same share of every network's recipe", "share": 0.2,
                        "flops_per_row": None, "seconds": 1200.0, "rows": {}}
    line = corpus_line("first", corpus)
    assert line["paper"]["id"] == "mlp9" and line["lstm"]["id"] == "lstm"
    assert line["network"]["id"] == "energy1" and line["mixture"]["id"] == "energy1-kn-interp-5-em"
    assert not any(line[entry]["budgeted_only"] for entry in ("paper", "lstm", "network", "mixture"))
    assert "first" in answer_sentence([line]) and "†" not in answer_sentence([line])


def test_summary_goes_to_the_working_directory_and_its_readme(tmp_path, monkeypatch):
    """`lmbench report summary` reads and writes results/ in the working directory (never the results/
    beside the installed code), and rewrites the answer block of the README.md beside it, the rest of
    the page untouched."""
    (tmp_path / "results" / "first").mkdir(parents=True)
    (tmp_path / "results" / "first" / "results.json").write_text(json.dumps(first_corpus()))
    (tmp_path / "results" / "index.txt").write_text("first\n")
    begin, end = block_markers("answer")
    (tmp_path / "README.md").write_text(f"# Mine\n\n{begin}\nold, typed by hand\n{end}\n\nThe rest.\n")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "summary"]) == 0
    assert (tmp_path / "results" / "summary.md").exists() and (tmp_path / "results" / "summary.png").exists()
    readme = (tmp_path / "README.md").read_text()
    assert "old, typed by hand" not in readme and readme.startswith(f"# Mine\n\n{begin}\n")
    assert readme.endswith(f"{end}\n\nThe rest.\n")
    assert "| first | 200.0 | +0.5% | MLP9 -5.0% |" in readme and "[results/summary.md](results/summary.md)" in readme


def test_the_answer_table_reads_at_a_glance():
    """The README's table: at most 110 characters a line, on the committed reports."""
    results = Path(__file__).resolve().parents[1] / "results"
    table = narrow_markdown(answer_frame(gather(root=results)))
    assert len(table.splitlines()) == 2 + len(listed_reports(results))  # a line per corpus (its siblings in it)
    assert max(len(line) for line in table.splitlines()) <= 110


def test_summary_without_reports_names_the_run(tmp_path, capsys):
    assert main(["report", "summary", "--results-dir", str(tmp_path)]) == 2
    assert "index.txt" in capsys.readouterr().err
    assert main(["report", "summary", "--report-dir", str(tmp_path)]) == 2  # one report's folder: refused
    assert "--results-dir" in capsys.readouterr().err


def test_summary_figure_pairs_each_network_with_its_mixture(tmp_path, monkeypatch):
    """One colour a network and its mixture with KN 5 (hatched), bars only for the rows a corpus has, the
    axis from where the data are (not 0), every bar whole, each label above its error bar, the legend
    outside the axes."""
    import matplotlib.colors
    import reports.building.figures
    from reports.building.summary import summary_figure
    lines = [corpus_line("first", first_corpus()), corpus_line("second", second_corpus())]
    lines[1]["paper"]["ratio_ci95"] = [0.98, 1.12]  # an interval reaching above KN 5's line
    shown, save = {}, reports.building.figures.save_figure

    def keep(fig, directory, name, tight=True):
        ax = fig.axes[0]
        fig.canvas.draw()
        bars = [patch for patch in ax.patches]
        shown.update(bottom=ax.get_ylim()[0], top=ax.get_ylim()[1],
                     bars=[(matplotlib.colors.to_hex(bar.get_facecolor()), bar.get_hatch(), bar.get_x(),
                            bar.get_y() + bar.get_height(), bar.get_y()) for bar in bars],
                     labels=[(text.get_text(), text.xy[1]) for text in ax.texts],  # where each is anchored
                     legend=ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).x0)
        return save(fig, directory, name, tight)
    monkeypatch.setattr(reports.building.figures, "save_figure", keep)
    assert summary_figure(lines, tmp_path / "summary.png").exists()
    # first: paper, paper + KN 5, ours (no mixture: left out), lstm, lstm + KN 5; second: paper, paper + KN 5
    bars = shown["bars"]
    assert len(bars) == 7
    assert bars[0][0] == bars[1][0] and not bars[0][1] and bars[1][1]  # the paper's shape: one colour, mixed hatched
    assert bars[3][0] == bars[4][0] != bars[0][0] and bars[4][1]  # the LSTM's: another colour
    assert 0.6 < shown["bottom"] < 0.7 and shown["top"] > 1.12  # from the data (lowest ratio 0.7), not 0
    assert all(shown["bottom"] <= min(end, start) and max(end, start) <= shown["top"] for *_, end, start in bars)
    labels = dict(shown["labels"])  # above KN 5's line, or above the error bar that reaches over it
    assert labels["+4.0%"] == 1.12 and labels["-30.0%"] == 1.0
    assert shown["legend"] > 1


def test_summary_figure_shows_every_bar_whole(tmp_path, monkeypatch):
    import reports.building.figures
    from reports.building.summary import summary_figure
    line = corpus_line("worse", second_corpus())
    line["paper"] = {**line["paper"], "ratio": 1.8, "ratio_ci95": None}  # far above KN 5: its bar must not be clipped
    shown, save = {}, reports.building.figures.save_figure

    def keep(fig, directory, name, tight=True):
        ax = fig.axes[0]
        shown.update(top=ax.get_ylim()[1], legend=ax.get_legend().get_bbox_to_anchor().transformed(
            ax.transAxes.inverted()).x0)
        return save(fig, directory, name, tight)
    monkeypatch.setattr(reports.building.figures, "save_figure", keep)
    assert summary_figure([line], tmp_path / "summary.png").exists()
    assert shown["top"] > 1.8 and shown["legend"] > 1  # the legend right of the axes, behind no bar


def test_a_budgeted_only_best_is_labelled_so_in_every_table():
    """ap89-4m's paper-shape networks all trained under a budget: its family table called MLP1 "best
    paper-shape network: MLP1†" though budgeted rows are never picked (issue 59, item 14); every table says
    "budgeted only†", as the answer table does."""
    lines = gather()
    budgeted = [line for line in lines if line["paper"].get("budgeted_only")]
    assert budgeted, "no committed corpus has a budgeted-only paper-shape network: plant one"
    families = families_frame(lines)
    for line in budgeted:
        [label] = families[(families["corpus"] == line["corpus"])
                           & families["row"].str.startswith(LABELS["paper"])]["row"]
        assert "budgeted only†" in label and short_name(line["paper"]["model"]) in label, label
        assert "budgeted only†" in answer_frame([line])[LABELS["paper"]].iloc[0]


def test_the_cost_table_says_when_a_run_trained_its_rows_k_at_once():
    """A run under --jobs 2 (its estimate's rows_at_once) and its budget shared in two lanes: the cost table's
    wall time and budget say so; a run one row after the other says nothing of it."""
    from reports.building.summary import cost_block
    meta = {"rows_seconds": 9862.0, "wall_seconds": 5156.1, "commit": "3d41ab0", "machine": "x86_64, 2 CPUs",
            "trained": {"wall_seconds": 5156.1, "peak_memory_gb": 1.26, "commit": "3d41ab0",
                        "estimate": {"seconds": 5050.6, "rows": {}, "rows_at_once": 2}}}
    budget = {"asked": "20m", "rule_name": "recipe", "share": 0.43, "rows_at_once": 2, "rows": {}}
    table = cost_block({"two": {"meta": meta}, "cut": {"meta": meta, "budget": budget},
                        "alone": {"meta": {**meta, "trained": {**meta["trained"], "estimate": {"seconds": 1.0}}}}})
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "| 1 h 26 min, 2 rows at once | 1 h 24 min | 1.3 GB | none |" in lines["two"]
    assert "| 20m, 2 rows at once, 43% of each recipe |" in lines["cut"]
    assert "rows at once" not in lines["alone"]


@pytest.mark.slow  # two reports draw their figures
def test_report_summary_rebuilds_the_top_of_every_report_that_a_newly_listed_one_made_stale(tmp_path):
    """A report's top is the cross-corpus summary of the reports listed when it was built. Listing another
    left it saying the old summary (results/ap89-1m's said its GRU was budgeted only after
    results/ap89-1m-jobs2 gave the converged row); `lmbench report summary` now rebuilds such a report from
    its results.json, and leaves a report whose top is current as it is."""
    from reports.building.build import build_report, stale_tops
    from tests.test_reports import fake_results
    root = tmp_path / "results"
    for name, kn5 in (("first", 200.0), ("second", 100.0)):
        (root / name).mkdir(parents=True)
        (root / name / "results.json").write_text(json.dumps({**fake_results({"kn-interp-5": kn5}, "text"),
                                                              "name": name}))
    (root / "index.txt").write_text("first\n")
    for name in ("first", "second"):  # second not listed: its top shows it as a corpus of its own
        build_report(root / name, {"commit": "abc", "dirty": False}, results_dir=root)
    assert stale_tops(root) == []
    second = (root / "second" / "report.md").read_bytes()
    assert "| second |" not in (root / "first" / "report.md").read_text()

    (root / "index.txt").write_text("first\nsecond\n")
    assert stale_tops(root) == [root / "first"]
    assert main(["report", "summary", "--results-dir", str(root)]) == 0
    assert stale_tops(root) == []
    assert "| second |" in (root / "first" / "report.md").read_text()
    assert "<td>second</td>" in (root / "first" / "report.html").read_text()
    assert (root / "second" / "report.md").read_bytes() == second


def test_the_top_of_every_committed_report_is_the_summary_of_the_listed_reports_now():
    """results/index.txt lists the reports the summary gathers, and the top of every committed report
    says that summary: a report listed or re-run since one was built is a `lmbench report summary` away."""
    from reports.building.build import stale_tops
    stale = [folder.name for folder in stale_tops(Path(__file__).resolve().parents[1] / "results")]
    assert stale == [], f"run `lmbench report summary` on a clean checkout and commit the rebuilt {stale}"

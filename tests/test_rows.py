"""Rows: each kind runs through its entry of the runner table; the paper's claims consider only the
paper's network, whatever other families a run adds; results.json written before rows named their
family still loads, and rebuilds the committed tables unchanged."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from lmbench.errors import LMBenchError
from neural.families import FAMILIES
from reports.running import pipeline, row_runner, seeds
from reports.records import load_results
from reports.building.claims import check_claims
from reports.experiments import KINDS, Row, brown_rows, energy_rows, network
from reports.records import upgrade_row
from reports.building.tables import comparison
from tests.lm_checks import make_corpus
from tests.test_kneser_ney import markov_text
from tests.test_reports import fake_results
from tests.test_reproduce import assert_mixtures_not_above_their_parts

RESULTS = Path(__file__).resolve().parent.parent / "results"


def reproduce(tmp_path, monkeypatch, rows: list[Row]) -> dict:
    corpus = make_corpus(markov_text(2000, 60, 1), markov_text(300, 60, 2), markov_text(300, 60, 3))
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: list(rows))
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: corpus)
    return pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work",
                                 tmp_path / "report").run()


def test_every_kind_has_a_runner():
    assert tuple(row_runner.RUNNERS) == KINDS
    assert {row.kind for row in brown_rows() + energy_rows()} == set(KINDS)


def test_a_kind_runs_through_its_entry_of_the_runner_table(tmp_path, monkeypatch):
    """A kind planted in the table runs its own runner, at its stage, and mixes like any other row."""
    def uniform(runner, job):
        size = len(runner.corpus.vocab)
        return row_runner.RowRun({split: np.full(len(runner.corpus.split(split)), -np.log(size))
                                for split in ("valid", "test")}, {"planted": True})

    monkeypatch.setitem(row_runner.RUNNERS, "uniform", row_runner.Runner(1, uniform))
    rows = [Row("flat", "uniform", "uniform"), Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
            Row("kn3-flat", "mix", "KN + uniform", mix="EM", parts=("kn3", "flat"))]
    run = reproduce(tmp_path, monkeypatch, rows)
    results = {row["id"]: row for row in run["rows"]}
    assert results["flat"]["planted"] and results["flat"]["test_ppl"] == pytest.approx(run["corpus_summary"]["vocab_size"])
    assert results["kn3-flat"]["valid_ppl"] <= results["kn3"]["valid_ppl"] * (1 + 1e-9)


@pytest.mark.slow
def test_the_energy_rows_train_in_mlp1s_shape_with_its_objective(tmp_path, monkeypatch):
    """`--extra energy` (energy_rows) with the n-gram models its mixtures take: the energy network is a
    row of its own family, trained in MLP1's shape with the objective MLP1 trains with, and no mixture
    of it is above both of its parts."""
    energy_row = energy_rows()[0]
    briefly = dataclasses.replace(energy_row, config={**energy_row.config, "epochs": 2})  # (its rows are tested,
    table = [row for row in brown_rows() if row.id in ("del-int", "kn-interp-5", "infini-gram-kn-5")] + [briefly] + energy_rows()[1:]
    rows = {row["id"]: row for row in reproduce(tmp_path, monkeypatch, table)["rows"]}  # not its 12 epochs)
    assert list(rows) == [row.id for row in table]
    energy = rows["energy1"]
    mlp1 = dataclasses.asdict(pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "w",
                                                    tmp_path / "r").training_config(brown_rows()[0]))
    assert brown_rows()[0].id == "mlp1" and energy["family"] == energy["config"]["model"] == "energy"
    assert energy["config"]["objective"] == mlp1["objective"] == "importance"
    assert {key: energy["config"]["shape"][key] for key in ("n", "m", "h", "direct")} == {
        key: mlp1["shape"][key] for key in ("n", "m", "h", "direct")}
    assert_mixtures_not_above_their_parts(rows)


def test_a_network_found_trained_at_its_path_counts_its_training_seconds(tmp_path, monkeypatch):
    """A row whose run finished before (trained apart, or by an earlier reproduction) and is found at
    its path: the row's seconds are its run's training and its scoring, not the scoring alone."""
    tiny = Row("tiny", "network", "tiny NPLM", family="nplm", config=dict(n=3, h=8, m=4, direct=True, epochs=1))
    first = reproduce(tmp_path, monkeypatch, [tiny])["rows"][0]
    (tmp_path / "work" / "rows" / "tiny.json").unlink()  # the row runs again and finds its finished run
    again = reproduce(tmp_path, monkeypatch, [tiny])["rows"][0]
    assert again["train_seconds"] == first["train_seconds"] > 0
    assert again["seconds"] >= again["train_seconds"] and first["seconds"] >= first["train_seconds"]


def test_a_row_of_an_unknown_kind_fails_in_one_line(tmp_path, monkeypatch):
    with pytest.raises(LMBenchError) as caught:
        reproduce(tmp_path, monkeypatch, [Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
                                          Row("holo", "hologram", "a planted kind")])
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert "'holo'" in message and "'hologram'" in message and "ngram, network, mix" in message


PAPER_NUMBERS = {"mlp1": 260, "mlp2": 250, "mlp3": 300, "mlp4": 290, "mlp5": 270, "mlp6": 260, "mlp7": 290,
                 "mlp8": 280, "mlp9": 265, "mlp10": 255, "del-int": 340, "kn-backoff-3": 330, "kn-backoff-5": 325,
                 "kn-interp-5": 320}


def _with_numbers(record: dict, test: float) -> dict:
    return {**record, "train_ppl": None, "valid_ppl": test * 1.05, "test_ppl": test, "seconds": 1.0}


def another_family() -> list[dict]:
    """A network of a family other than the paper's, far below every paper row, alone and mixed."""
    lstm = network("lstm1", "LSTM", (5, 50, 60, True), "lstm")
    return [_with_numbers(lstm.to_dict(), 120.0),
            _with_numbers(Row("lstm1-del-int", "mix", "LSTM + Del. Int.", mix="0.5/0.5",
                              parts=("lstm1", "del-int")).to_dict(), 110.0),
            _with_numbers(Row("lstm1-kn-interp-5-em", "mix", "LSTM + KN 5", mix="EM",
                              parts=("lstm1", "kn-interp-5")).to_dict(), 100.0)]


@pytest.mark.parametrize("corpus", ["brown", "ap"])
def test_the_paper_claims_ignore_rows_of_another_family(corpus):
    results = fake_results(PAPER_NUMBERS if corpus == "brown" else {"mlp-ap": 80, "mlp10": 72, "del-int": 92,
                                                                      "kn-interp-5": 73.5}, corpus)
    claims = check_claims(results)
    results["rows"] += another_family()
    again = check_claims(results)
    assert paper_only(again) == paper_only(claims)
    best = {claim["claim"]: claim for claim in again}["The best network of any family alone beats the best n-gram model"]
    networks = [row for row in results["rows"] if row.get("family") and not row["mix"]]
    assert best["rows"][0] == min(networks, key=lambda row: row["valid_ppl"])["id"]  # any family's best on valid


def paper_only(claims: list[dict]) -> list[dict]:
    """The claims of the paper's network (not ours: "not in the paper (2003)")."""
    return [claim for claim in claims if claim.get("paper") != "not in the paper (2003)"]


def test_the_paper_claims_ignore_an_old_energy_row(tmp_path):
    """An energy row in the fields of results.json before rows named their family (kind "nplm",
    network "energy"), far below every paper row: the claims built from the file do not see it."""
    results = fake_results(PAPER_NUMBERS)
    (tmp_path / "results.json").write_text(json.dumps(results))
    claims = check_claims(load_results(tmp_path))
    energy = {"id": "energy1", "kind": "nplm", "model": "Energy network", "n": 5, "classes": None, "h": 50, "m": 60,
              "direct": True, "mix": None, "method": None, "min_ngram_count": 1, "cluster_passes": 20,
              "epochs": 9, "objective": None, "network": "energy", "valid_tokens": 20000, "parts": [],
              "paper_model": None, "config": {"model": "energy", "n": 5, "h": 50, "m": 60, "direct": True}}
    results["rows"].append(_with_numbers(energy, 120.0))
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert paper_only(check_claims(load_results(tmp_path))) == paper_only(claims)


def test_an_old_row_is_upgraded_to_its_family_and_config():
    old = {"id": "mlp1-nce", "kind": "nplm", "model": "MLP1, nce objective", "n": 5, "classes": None, "h": 50,
           "m": 60, "direct": True, "mix": None, "method": None, "min_ngram_count": 1, "cluster_passes": 20,
           "epochs": 12, "objective": "nce", "parts": [], "paper_model": None, "status": "not run"}
    row = upgrade_row(old)
    assert row["kind"] == "network" and row["family"] == "nplm" and row["n"] is None
    assert row["config"] == {"n": 5, "h": 50, "m": 60, "direct": True, "objective": "nce"}
    assert not {"h", "m", "direct", "objective", "network"} & set(row) and row["ours"] is False
    mix = upgrade_row({**old, "id": "mlp2", "kind": "mix", "mix": "0.5/0.5", "parts": ["mlp1", "del-int"]})
    assert mix["n"] is None and mix["family"] is None and mix["parts"] == ["mlp1", "del-int"]
    assert upgrade_row(row) is row  # today's rows pass as they are


@pytest.mark.parametrize("name", ["brown", "ap", "ap89-1m"])
def test_committed_results_load_and_rebuild_their_committed_tables(name):
    """The committed results.json files predate the family field: they load, every network row gets its
    family, and the table built from them is the committed table.csv, number for number."""
    results = load_results(RESULTS / name)
    networks = {row["id"]: row["family"] for row in results["rows"] if row["kind"] == "network"}
    assert networks and all(row["kind"] in KINDS for row in results["rows"])
    assert set(networks.values()) <= set(FAMILIES)  # each a registered family
    if name == "brown":
        assert networks["mlp1"] == "nplm" and networks["lstm"] == "lstm" and networks["transformer"] == "transformer"
    rebuilt = comparison(results).drop(columns=["id"]).to_csv(index=False)
    assert rebuilt == (RESULTS / name / "table.csv").read_text()


def test_the_thread_count_is_how_fast_not_what(tmp_path):
    """`lmbench reproduce --threads 1` trains the network rows on one thread, and finds the rows
    another thread count ran (a row's fingerprint leaves the count out)."""
    settings = pipeline.default_settings("brown", False)
    one, every = (pipeline.Reproduction(settings, tmp_path, tmp_path, threads=threads) for threads in (1, None))
    [row] = [row for row in brown_rows() if row.id == "mlp1"]
    assert one.training_config(row).threads == 1 and every.training_config(row).threads is None
    assert one.fingerprint(row) == every.fingerprint(row)
    assert one.fingerprint(row) != one.fingerprint(Row(**{**row.to_dict(), "config": {**row.config, "h": 51}}))


def test_seed_copies_are_rows_of_their_own_and_one_seed_keeps_every_fingerprint(tmp_path):
    """--seeds K: each row with a network in it gets a copy per further seed, a network's naming its seed
    (its own fingerprint, so its own cache entry and training folder), a mixture's mixing the copies of
    the same seed; the n-gram rows get none. The rows themselves keep the fingerprints of one seed."""
    settings = pipeline.default_settings("brown", False)
    rows = brown_rows()
    copies = seeds.seed_copies(rows, [1, 2])
    assert set(copies) == {row.id for row in rows if row.family or any(
        part in {r.id for r in rows if r.family} for part in row.parts)}
    assert "del-int" not in copies and "kn-interp-5" not in copies
    mlp2 = {row.id: row for row in rows}["mlp2"]
    assert [copy.parts for copy in copies["mlp2"]] == [("mlp1-seed1", "del-int"), ("mlp1-seed2", "del-int")]
    assert [copy.id for copy in copies["mlp2"]] == ["mlp2-seed1", "mlp2-seed2"] and mlp2.parts == ("mlp1", "del-int")
    one, three = (pipeline.Reproduction(settings, tmp_path, tmp_path, seeds=seeds) for seeds in (1, 3))
    assert three.seeds == [0, 1, 2]
    for reproduction in (one, three):
        reproduction.rows = rows + [copy for group in copies.values() for copy in group]
    mlp1, [mlp1_seed1, _] = rows[0], copies["mlp1"]
    assert all(one.fingerprint(row) == three.fingerprint(row) for row in rows)
    assert three.training_config(mlp1).seed == 0 and three.training_config(mlp1_seed1).seed == 1
    assert not mlp1_seed1.word_vectors and mlp1.word_vectors  # the word features figure: the first seed's
    assert len({three.fingerprint(row) for row in (mlp1, *copies["mlp1"])}) == 3
    assert len({three.fingerprint(row) for row in (mlp2, *copies["mlp2"])}) == 3


def test_seeds_for_copies_only_the_named_networks_and_the_mixtures_of_them(tmp_path):
    """--seeds-for: only the named network rows get seed copies, with the mixtures whose network part is
    one of them; a mixture of a network not named keeps its one run, and an id that is no network row of
    the table is refused in one line naming the table's network rows."""
    rows = brown_rows()
    copies = seeds.seed_copies(rows, [1, 2], ("mlp1",))
    networks = {row.id for row in rows if row.family}
    assert set(copies) & networks == {"mlp1"}
    assert {"mlp2", "mlp1-kn-interp-5-em"} <= set(copies) and "mlp3" not in copies and "mlp4" not in copies
    assert all("mlp1" in row.parts for row in rows if row.id in copies and not row.family)
    with pytest.raises(LMBenchError, match=r"--seeds-for nplm: no network row of that id .*: mlp1,mlp3,"):
        seeds.seed_copies(rows, [1, 2], ("mlp1", "nplm"))
    with pytest.raises(LMBenchError, match="--seeds is 1"):
        pipeline.reproduce("brown", True, tmp_path, tmp_path, seeds=1, seeds_for=("mlp1",))

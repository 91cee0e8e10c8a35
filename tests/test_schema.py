"""The JSON Schemas of results.json and claims.json (lmbench/schemas/): every committed file matches
them, a row without test_ppl or with a NaN does not, and the writer refuses to write such results."""

import copy
import json
from pathlib import Path

import pytest

from lmbench.errors import LMBenchError
from lmbench.schema import check, problems
from reports.running import pipeline
from tests.helpers import markov_text
from tests.lm_checks import make_corpus

RESULTS = Path(__file__).resolve().parent.parent / "results"
COMMITTED = sorted(RESULTS.glob("*/results.json")) + sorted(RESULTS.glob("*/claims.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_committed_file_matches_its_schema(path):
    assert COMMITTED and problems(path.stem, json.loads(path.read_text())) == []


@pytest.fixture(scope="module")
def results():
    return json.loads((RESULTS / "ap89-4m" / "results.json").read_text())


@pytest.mark.parametrize("field", ["test_ppl", "valid_ppl"])
def test_a_row_without_a_perplexity_or_with_a_nan_is_refused(results, field):
    without, nan, text = (copy.deepcopy(results) for _ in range(3))
    del without["rows"][2][field]
    nan["rows"][2][field] = float("nan")
    text["rows"][2][field] = "117.7"
    for broken in (without, nan, text):
        assert problems("results", broken)
    with pytest.raises(LMBenchError, match=rf"rows/2/{field}.*NaN"):
        check("results", json.loads(json.dumps(nan)), fix="fix it")  # as Python's json writes and reads it


def test_a_row_not_run_has_no_perplexities_and_a_nan_interval_is_refused(results):
    fine, broken = copy.deepcopy(results), copy.deepcopy(results)
    fine["rows"][0].update(status="not run", train_ppl=None, valid_ppl=None, test_ppl=None, seconds=None)
    assert problems("results", fine) == []
    broken["rows"][0]["test_ppl_ci95"] = [float("nan"), 120.0]
    assert problems("results", broken)


def test_a_claim_without_a_verdict_or_with_a_nan_difference_is_refused():
    claim = {"claim": "KN 5 beats KN 3", "ours": "kn5 100 vs kn3 110: 9.1% lower", "verdict": "holds",
             "difference": -9.1, "difference_ci95": [-10.0, -8.0], "significant": True}
    assert problems("claims", [claim]) == []
    assert problems("claims", [{k: v for k, v in claim.items() if k != "verdict"}])
    assert problems("claims", [{**claim, "difference": float("nan")}])


def test_the_writer_refuses_results_with_a_nan_and_writes_nothing(tmp_path):
    corpus = make_corpus(markov_text(500, 20, 1), markov_text(100, 20, 2), markov_text(100, 20, 3))
    reproduction = pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work",
                                         tmp_path / "report", code={"commit": "abc", "dirty": False})
    reproduction.corpus = corpus
    row = {"id": "kn3", "kind": "ngram", "model": "KN", "train_ppl": 10.0, "valid_ppl": 20.0, "test_ppl": float("nan"),
           "seconds": 1.0}
    with pytest.raises(LMBenchError, match="rows/0/test_ppl"):
        reproduction.write_results([row], 1.0)
    assert not (tmp_path / "report" / "results.json").exists()
    reproduction.write_results([{**row, "test_ppl": 21.0}], 1.0)
    assert json.loads((tmp_path / "report" / "results.json").read_text())["rows"][0]["test_ppl"] == 21.0

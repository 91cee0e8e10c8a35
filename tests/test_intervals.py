"""Every row a reproduction writes keeps the bootstrap blocks of valid and test and their 95%
intervals (mixtures too, and rows cached before blocks were kept), from which anyone recomputes the
intervals of the written results.json."""

import json
import math

import numpy as np
import pytest

from lmbench import bootstrap
from lmbench.files import write_checked
from reports import pipeline
from reports.experiments import Row
from tests.helpers import markov_text
from tests.lm_checks import make_corpus

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
            assert [low, high] == list(bootstrap.split_interval(blocks))  # recomputed from the file alone


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

"""The contract of every registered n-gram method (`baselines.methods.METHODS`), read from its registration:
its distribution sums to 1 over the vocabulary and its scores are its distribution's, its ARPA file reads
back as the same model where it registers `arpa` (else `--arpa` is refused), its bounded path gives the
model in memory where it registers `bounded` (else `--memory` is refused), and `lmbench ngram` takes the
options it registers and refuses the others. A contributor's method of one file outside baselines/
(tests/data/witten_bell.py, put among the files of `baselines` as a file of baselines/ is) passes the
same contract and reaches a row of a user's comparison, no other file touched. The default rows of each
corpus stay those of the committed reports."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from baselines.methods import METHODS, OPTIONS, NGramOptions, make_ngram
from lmbench.errors import LMBenchError
from lmbench.model import split_logprobs
from lmbench_cli import main
from tests.helpers import chain_text, corpus_args, write_splits
from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus

ROOT = Path(__file__).resolve().parents[1]
METHOD_FILE = ROOT / "tests" / "data" / "witten_bell.py"
MODULE = "baselines.witten_bell"
GIVEN = {"classes": 20, "cluster_passes": 2, "min_ngram_count": 2}  # a value other than its default, per option
TEXTS = {"train": chain_text(2000, 1, words=30), "valid": chain_text(300, 2, words=30),
         "test": chain_text(300, 3, words=30)}


@pytest.fixture
def contributed(tmp_path, monkeypatch):
    """The Witten-Bell file put among the files of `baselines` (a folder added to the package's path) and
    found by the registry's own discovery, as a file of baselines/ is; the registry as it was afterwards.
    Yields the method's name."""
    import baselines
    from baselines import methods
    folder = tmp_path / "contributed"
    folder.mkdir()
    shutil.copy(METHOD_FILE, folder / "witten_bell.py")
    methods.discover()  # the suite's methods, as any earlier test found them
    monkeypatch.setattr(methods, "_REGISTERED", dict(methods._REGISTERED))
    monkeypatch.setattr(baselines, "__path__", [*baselines.__path__, str(folder)])
    monkeypatch.setattr(methods, "_discovered", False)
    methods.discover()
    assert METHODS["witten-bell"].build.__module__ == MODULE
    yield "witten-bell"
    sys.modules.pop(MODULE, None)


def options(name: str, **more) -> NGramOptions:
    """The options that build method `name` at its default order (the classes of one that takes them)."""
    return NGramOptions(name, **{"classes": GIVEN["classes"] if "classes" in METHODS[name].options else None, **more})


def check_contract(name: str, tmp_path: Path, capsys) -> None:
    method = METHODS[name]
    corpus = make_corpus(*(TEXTS[split] for split in ("train", "valid", "test")))
    model = make_ngram(options(name)).fit(corpus)
    assert_normalised(model, corpus, count=5)
    assert_scores_match_distribution(model, corpus, tokens=10)
    valid = split_logprobs(model, corpus, "valid")
    (tmp_path / name).mkdir()
    files = corpus_args(write_splits(tmp_path / name, **TEXTS))
    command = ["ngram", "--method", name, *files, *(["--classes", "20"] if "classes" in method.options else [])]
    if method.arpa:
        from baselines.arpa_reader import read_arpa
        from baselines.arpa_writer import write_arpa
        write_arpa(model, corpus.vocab, tmp_path / f"{name}.arpa")
        read = read_arpa(tmp_path / f"{name}.arpa", corpus.vocab)
        np.testing.assert_allclose(split_logprobs(read, corpus, "valid"), valid, rtol=1e-5)
    else:
        assert main([*command, "--arpa", str(tmp_path / f"{name}.arpa")]) == 2
        assert f"--arpa needs a back-off model and --method {name}" in capsys.readouterr().err
    if method.bounded:
        bounded = make_ngram(options(name, memory=1, tmp_dir=tmp_path)).fit(corpus)
        np.testing.assert_allclose(split_logprobs(bounded, corpus, "valid"), valid, rtol=1e-12)
    else:
        with pytest.raises(LMBenchError, match=f"--memory applies to .*not --method {name}"):
            make_ngram(options(name, memory=1 << 30))
    for field, flag in OPTIONS.items():
        if field in method.options:
            make_ngram(options(name, **{field: GIVEN[field]}))
        else:
            assert main([*command, flag, str(GIVEN[field])]) == 2
            assert f"{flag}: only for --method" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(METHODS))
def test_every_registered_method_keeps_its_contract(name, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))  # (the class n-gram's clusterings)
    check_contract(name, tmp_path, capsys)


def test_a_method_of_one_file_keeps_the_contract_and_is_a_row_of_a_users_comparison(contributed, tmp_path, capsys,
                                                                                      monkeypatch):
    """Witten-Bell, registered by its own file with `compared=(3,)`, is checked as every method is, and a quick
    `reproduce text --only ngram` gives its row after the others (whose rows stay the same), which
    `lmbench.load` reads from the work folder alone."""
    import lmbench
    from reports.experiments import text_rows
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    check_contract(contributed, tmp_path, capsys)
    assert [row.id for row in text_rows(1000, only="ngram")] == [*TEXT_NGRAM_IDS, "wb-interp-3"]
    (tmp_path / "corpus").mkdir()
    files = write_splits(tmp_path / "corpus", **TEXTS)
    argv = ["reproduce", "text", "--quick", "--only", "ngram", "--name", "wb", "--work-dir", str(tmp_path / "work"),
            "--report-dir", str(tmp_path / "report"), *corpus_args(files)[2:]]
    assert main(argv) == 0, capsys.readouterr().err
    rows = {row["id"]: row for row in json.loads((tmp_path / "report" / "results.json").read_text())["rows"]}
    row = rows["wb-interp-3"]
    assert (row["method"], row["n"], row["model"]) == ("witten-bell", 3, "Witten-Bell interpolated")
    assert math.isfinite(row["test_ppl"]) and row["test_ppl"] < rows["del-int"]["test_ppl"] * 2
    assert "Witten-Bell interpolated" in (tmp_path / "report" / "report.md").read_text()
    loaded = lmbench.load(tmp_path / "work", row="wb-interp-3")
    assert loaded is not None


TEXT_NGRAM_IDS = ["del-int", "kn-backoff-3", "kn-backoff-4", "kn-backoff-5", "kn-interp-3", "kn-interp-4",
                  "kn-interp-5", "infini-gram-kn-5", "katz-3", "class-3-10", "class-3-30", "class-3-100"]


def test_the_default_rows_of_each_corpus_are_todays():
    """The n-gram rows of brown, ap and a user's comparison (|V| 1000), as the committed reports have them
    before the registry said which methods are rows: the registry moves none."""
    from reports.experiments import ap_rows, brown_rows, text_rows
    assert [row.id for row in brown_rows() if row.kind == "ngram"] == [
        "del-int", "kn-backoff-3", "kn-backoff-4", "kn-backoff-5", "class-3-150", "class-3-200", "class-3-500",
        "class-3-1000", "class-3-2000", "class-4-500", "class-5-500", "kn-interp-3", "kn-interp-4", "kn-interp-5",
        "infini-gram-kn-5", "kn-backoff-nocut-3", "kn-backoff-nocut-5", "katz-3", "katz-4", "katz-5"]
    assert [row.id for row in ap_rows() if row.kind == "ngram"] == [
        "del-int", "kn-backoff-3", "kn-backoff-4", "kn-backoff-5", "kn-interp-3", "kn-interp-4", "kn-interp-5",
        "infini-gram-kn-5"]
    assert [(row.id, row.model, row.method, row.n, row.classes, row.min_ngram_count, row.cluster_passes)
            for row in text_rows(1000) if row.kind == "ngram"] == [
        ("del-int", "Del. Int.", "deleted-interpolation", 3, None, 1, 20),
        *((f"kn-backoff-{n}", "Kneser-Ney back-off", "kneser-ney-backoff", n, None, 2, 20) for n in (3, 4, 5)),
        *((f"kn-interp-{n}", "Kneser-Ney interpolated", "kneser-ney", n, None, 1, 20) for n in (3, 4, 5)),
        ("infini-gram-kn-5", "∞-gram + KN interpolated 5", "infini-gram", 5, None, 1, 20),
        ("katz-3", "Katz back-off", "katz", 3, None, 1, 20),
        *((f"class-3-{c}", "class-based back-off", "class", 3, c, 2, 10) for c in (10, 30, 100))]
    assert [row.id for row in text_rows(1000, only="ngram")] == TEXT_NGRAM_IDS
    assert [row.id for row in text_rows(1000, only="nplm") if row.kind == "ngram"] == [
        "del-int", "kn-interp-5", "infini-gram-kn-5"]

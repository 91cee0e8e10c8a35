"""Hostile inputs, fourth round (issue 59): files that lie about what they hold, and damaged files of the
suite's own kinds. Each class is walked over every file kind and every command that reads it.

- A results.json whose rows' figures disagree with what the file says of them (their blocks deleted, their
  intervals, the bootstrap section): refused in one line by every reader (`report`, the summary).
- A report whose `corpus` field names a table its rows are not of, and `report CORPUS` on another corpus's
  folder: refused.
- A corpus cache entry (or any of its files) of other files copied under another entry's key: set aside and
  rebuilt, never read as the corpus that asked for it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from lmbench.errors import LMBenchError
from reports.records import read_results
from tests.helpers import write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile_round3_outputs import TINY, trained  # noqa: F401 (trained: a fixture, a finished tiny run)
from lmbench_cli import main

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ("brown", "ap", "ap89-1m")  # a paper's corpus of each table and a user's


def report_copy(tmp_path: Path, name: str) -> tuple[Path, dict]:
    folder = tmp_path / name
    folder.mkdir()
    return folder, json.loads((ROOT / "results" / name / "results.json").read_text())


def written(folder: Path, results: dict) -> Path:
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def _kn5(results: dict) -> dict:
    return next(row for row in results["rows"] if row["id"] == "kn-interp-5")


def no_blocks(results: dict) -> None:
    for row in results["rows"]:
        row.pop("blocks", None)


# Each lie: what is done to a committed results.json so that a row's figure says other than the file does.
def figure_without_blocks(results):      # the case: every row's blocks gone, KN 5 set to 20
    no_blocks(results)
    _kn5(results)["test_ppl"] = 20.0


def valid_figure_without_blocks(results):
    no_blocks(results)
    _kn5(results)["valid_ppl"] *= 1.5


def figure_and_interval_without_blocks(results):  # the interval moved with it: the bootstrap section still says
    no_blocks(results)                             # blocks were kept
    row = _kn5(results)
    row["test_ppl"], row["test_ppl_ci95"] = 20.0, [19.0, 21.0]


def everything_of_blocks_deleted_but_interval(results):
    no_blocks(results)
    results.pop("bootstrap", None)
    _kn5(results)["test_ppl"] = 20.0


def interval_without_figure(results):  # the interval edited away from its figure, blocks gone
    no_blocks(results)
    _kn5(results)["valid_ppl_ci95"] = [1000.0, 1100.0]


REFUSED = "row 'kn-interp-5'.* interval|blocks that no row keeps"  # the row named, or the section
LIES = (figure_without_blocks, valid_figure_without_blocks, figure_and_interval_without_blocks,
        everything_of_blocks_deleted_but_interval, interval_without_figure)


@pytest.mark.parametrize("name", COMMITTED)
@pytest.mark.parametrize("lie", LIES, ids=lambda lie: lie.__name__)
def test_a_row_figure_that_disagrees_with_the_file_is_refused_by_every_reader(tmp_path, capsys, name, lie):
    folder, results = report_copy(tmp_path, name)
    lie(results)
    written(folder, results)
    with pytest.raises(LMBenchError, match=REFUSED):
        read_results(folder)
    before = (folder / "results.json").read_bytes()
    line = error_line(capsys, ["report", results["corpus"], "--report-dir", str(folder), "--allow-dirty"])
    assert re.search(REFUSED, line), line
    assert sorted(p.name for p in folder.iterdir()) == ["results.json"]
    assert (folder / "results.json").read_bytes() == before
    # the summary leaves such a report out (here its only one: refused, nothing written), never prints its figure
    root = tmp_path / "root"
    root.mkdir()
    shutil.copytree(folder, root / name)
    (root / "index.txt").write_text(f"{name}\n")
    assert "no report listed" in error_line(capsys, ["report", "summary", "--results-dir", str(root)])
    assert sorted(p.name for p in root.iterdir()) == sorted(["index.txt", name])


@pytest.mark.parametrize("name", COMMITTED)
def test_the_committed_reports_hold_their_figures_inside_their_intervals(name):
    read_results(ROOT / "results" / name)  # (every committed one: tests/test_committed_results.py)


# --- the report's kind follows its rows ---------------------------------------------------------------------
CORPUS_EDITS = [(source, to) for source in COMMITTED for to in ("brown", "ap", "text")
                if to != json.loads((ROOT / "results" / source / "results.json").read_text())["corpus"]]


@pytest.mark.parametrize("source,to", CORPUS_EDITS)
def test_a_corpus_field_edited_to_another_table_is_refused(tmp_path, source, to):
    folder, results = report_copy(tmp_path, source)
    results["corpus"] = to
    written(folder, results)
    with pytest.raises(LMBenchError, match="corpus"):
        read_results(folder)


@pytest.mark.parametrize("source,asked", CORPUS_EDITS)
def test_report_of_one_corpus_on_another_corpus_folder_is_refused(tmp_path, capsys, source, asked):
    folder, results = report_copy(tmp_path, source)
    written(folder, results)
    line = error_line(capsys, ["report", asked, "--report-dir", str(folder), "--allow-dirty"])
    assert results["corpus"] in line and f"report {asked}" in line
    assert sorted(p.name for p in folder.iterdir()) == ["results.json"]


# --- a corpus cache entry proves it belongs to the files that asked for it ----------------------------------
def _text_corpora(folder: Path) -> dict:
    """Two corpora of each kind of text corpus (three files; one file cut by lines): their loaders."""
    from corpora.text import load_text, load_text_file
    loaders = {}
    for name, seed, types in (("a", 1, 300), ("b", 2, 400)):
        (folder / name).mkdir(parents=True)
        files = write_splits(folder / name, train=zipf_text(3000, types, seed), valid=zipf_text(400, types, seed + 10),
                             test=zipf_text(400, types, seed + 20))
        whole = folder / name / "whole.txt"
        whole.write_text("\n".join(zipf_text(30, types, seed + line) for line in range(100)))
        loaders[("three files", name)] = lambda files=files: load_text(files["train"], files["valid"], files["test"], min_count=3)
        loaders[("one file", name)] = lambda whole=whole: load_text_file(whole, min_count=3)
    return loaders


def _entry(corpus) -> Path:
    return Path(corpus.info["cache"])


SWAPS = {  # what of entry a is put in entry b's place: the whole folder, or one of its files (with its record)
    "the whole entry": None, "ids.npz": "ids.npz", "vocab.json": "vocab.json", "meta.json": "meta.json",
    "unk_words.npz": "unk_words.npz"}


@pytest.mark.parametrize("kind", ("three files", "one file"))
@pytest.mark.parametrize("swap", SWAPS)
def test_a_cache_entry_of_other_files_is_set_aside_and_rebuilt(tmp_path, monkeypatch, caplog, kind, swap):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    loaders = _text_corpora(tmp_path)
    first, second = loaders[(kind, "a")](), loaders[(kind, "b")]()
    truth = {split: second.split(split).copy() for split in ("train", "valid", "test")}
    source, target = _entry(first), _entry(second)
    assert source != target and all((source / name).read_bytes() != (target / name).read_bytes() for name in SWAPS
                                    if SWAPS[name])  # (each file of a differs from b's: a swap is a lie)
    if SWAPS[swap] is None:
        shutil.rmtree(target)
        shutil.copytree(source, target)
    else:
        for name in (SWAPS[swap], SWAPS[swap] + ".sha256"):
            shutil.copyfile(source / name, target / name)
    again = loaders[(kind, "b")]()
    assert again.info["from_cache"] is False, "an entry of other files was believed"
    assert len(again.vocab) == len(second.vocab)
    assert all(np.array_equal(again.split(split), truth[split]) for split in truth)
    assert "set aside" in caplog.text and (target.parent / (target.name + ".damaged")).is_dir()
    assert loaders[(kind, "b")]().info["from_cache"] is True  # (the rebuilt entry is believed)


# --- ARPA files: what they say is checked on reading; `ngram --arpa` writes what its reader reads ------------
def _arpa_models():
    from baselines.katz import Katz
    from baselines.kneser_ney import KneserNey, KneserNeyBackoff
    from tests.helpers import markov_text
    from tests.lm_checks import make_corpus
    corpus = make_corpus(markov_text(3000, 60, 4), markov_text(500, 60, 5), markov_text(500, 60, 6))
    return corpus, {"kneser-ney 3": KneserNey(3), "kneser-ney-backoff 2": KneserNeyBackoff(2), "katz 4": Katz(4)}


def _entries(lines: list[str], n: int) -> list[int]:
    start = lines.index(f"\\{n}-grams:") + 1
    return list(range(start, lines.index("", start)))


def _set(line: str, column: int, value: str) -> str:
    fields = line.split("\t")
    fields[column] = value
    return "\t".join(fields)


def unigram_above_one(lines):
    lines[_entries(lines, 1)[-1]] = _set(lines[_entries(lines, 1)[-1]], 0, "0.3")


def backoff_weight_of_30(lines):
    at = _entries(lines, 1)[-1]
    lines[at] = _set(lines[at], 2, "1.47712125")


def top_order_probability_of_1(lines):
    top = max(int(line[1]) for line in lines if line.endswith("-grams:"))
    at = _entries(lines, top)[0]
    lines[at] = _set(lines[at], 0, "0.00000000")


def every_unigram_doubled(lines):  # a distribution summing to 2 (log10 2 added to each)
    for at in _entries(lines, 1):
        value = float(lines[at].split("\t")[0])
        lines[at] = _set(lines[at], 0, f"{min(value + 0.30103, 0.0):.8f}")


def duplicated_unigram(lines):
    at = _entries(lines, 1)[-1]
    lines[at + 1:at + 1] = [_set(lines[at], 0, "-3.00000000")]
    _recount(lines, 1)


def duplicated_bigram(lines):
    at = _entries(lines, 2)[-1]
    lines[at + 1:at + 1] = [lines[at]]
    _recount(lines, 2)


def bigram_of_no_unigram(lines):
    at = _entries(lines, 2)[-1]
    word = lines[at].split("\t")[1].split(" ")
    lines[at] = _set(lines[at], 1, f"{word[0]} nowhere")


def _recount(lines, n):
    at = next(i for i, line in enumerate(lines) if line.startswith(f"ngram {n}="))
    lines[at] = f"ngram {n}={len(_entries(lines, n))}"


ARPA_LIES = (unigram_above_one, backoff_weight_of_30, top_order_probability_of_1, every_unigram_doubled,
             duplicated_unigram, duplicated_bigram, bigram_of_no_unigram)
ARPA_REFUSALS = r"log10 probability|sums to|twice|none of its unigrams"


@pytest.mark.parametrize("model", ("kneser-ney 3", "kneser-ney-backoff 2", "katz 4"))
@pytest.mark.parametrize("lie", ARPA_LIES, ids=lambda lie: lie.__name__)
def test_an_arpa_file_that_is_no_model_is_refused(tmp_path, model, lie):
    from baselines.arpa_reader import read_arpa
    from baselines.arpa_writer import write_arpa
    corpus, models = _arpa_models()
    fitted = models[model].fit(corpus)
    path = tmp_path / "model.arpa"
    write_arpa(fitted, corpus.vocab, path)
    read_arpa(path, corpus.vocab)  # (as written: read)
    lines = path.read_text().split("\n")
    lie(lines)
    path.write_text("\n".join(lines))
    with pytest.raises(LMBenchError, match=ARPA_REFUSALS):
        read_arpa(path, corpus.vocab)


SECTION_WORDS = ("\\2-grams:", "\\1-grams:", "\\end\\", "\\data\\", "\\3-grams:")


@pytest.mark.parametrize("word", SECTION_WORDS)
def test_ngram_arpa_writes_what_its_reader_reads_whatever_the_words(tmp_path, capsys, word):
    from baselines.arpa_reader import read_arpa
    from corpora.text import load_text
    from lmbench.model import split_perplexity
    from tests.helpers import markov_text
    texts = {split: markov_text(length, 40, seed).replace("w3 ", f"{word} ")
             for split, length, seed in (("train", 2000, 7), ("valid", 300, 8), ("test", 300, 9))}
    files = write_splits(tmp_path, **texts)
    path = tmp_path / "model.arpa"
    assert main(["ngram", "--method", "kneser-ney", "--order", "3", "--corpus", "text", "--train", str(files["train"]),
                 "--valid", str(files["valid"]), "--test", str(files["test"]), "--arpa", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    corpus = load_text(files["train"], files["valid"], files["test"])
    assert word in corpus.vocab.words
    loaded = read_arpa(path, corpus.vocab)
    assert split_perplexity(loaded, corpus, "test") == pytest.approx(printed["test_perplexity"], rel=1e-6)


# --- damaged files of the suite's own kinds: one line, exit 2, no row lost ----------------------------------
INDEX_DAMAGES = {
    "random bytes": lambda index: index.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8))),
    "a folder": lambda index: index.mkdir(),
    "a NUL byte": lambda index: index.write_bytes(b"brown\x00\n"),
    "a link to /dev/zero": lambda index: index.symlink_to("/dev/zero"),
}


def _damaged_results_dir(tmp_path: Path, damage: str) -> Path:
    root = tmp_path / "committed"
    root.mkdir()
    INDEX_DAMAGES[damage](root / "index.txt")
    return root


@pytest.mark.parametrize("damage", INDEX_DAMAGES)
@pytest.mark.parametrize("command", ("report summary", "report brown", "reproduce text"))
def test_a_damaged_index_is_one_line_and_refused_before_any_row_runs(tmp_path, capsys, damage, command):
    root = _damaged_results_dir(tmp_path, damage)
    if command == "report summary":
        argv = ["report", "summary", "--results-dir", str(root)]
    elif command == "report brown":
        folder = tmp_path / "brown"
        folder.mkdir()
        shutil.copyfile(ROOT / "results" / "brown" / "results.json", folder / "results.json")
        argv = ["report", "brown", "--report-dir", str(folder), "--results-dir", str(root), "--allow-dirty"]
    else:
        files = write_splits(tmp_path, train=zipf_text(2000, 40, 1), valid=zipf_text(300, 40, 2),
                             test=zipf_text(300, 40, 3))
        argv = ["reproduce", "text", "--train", str(files["train"]), "--valid", str(files["valid"]), "--test",
                str(files["test"]), "--only", "ngram", "--work-dir", str(tmp_path / "work"), "--report-dir",
                str(tmp_path / "report"), "--results-dir", str(root)]
    line = error_line(capsys, argv)
    assert "index.txt" in line
    assert not (tmp_path / "work").exists() and not (tmp_path / "report").exists()  # (refused before the rows)
    if command == "report brown":
        assert sorted(p.name for p in (tmp_path / "brown").iterdir()) == ["results.json"]


BUDGET_DAMAGES = {
    "a row's record a bare number": lambda record: record["budget"]["rows"].update(small=7),
    "a row's record a list": lambda record: record["budget"]["rows"].update(small=[7]),
    "a field missing": lambda record: record["budget"]["rows"]["small"].pop("expected_seconds"),
    "a field a string": lambda record: record["budget"]["rows"]["small"].update(flops="many"),
    "the corpus summary a string": lambda record: record.update(corpus_summary="brown"),
    "the rows a list": lambda record: record["budget"].update(rows=["small", "wide"]),
    "the file a list": lambda record: record.clear() or record.update(rows=[1]),
}


@pytest.mark.parametrize("damage", BUDGET_DAMAGES)
def test_a_hand_edited_budget_file_is_one_line(tmp_path, monkeypatch, damage):
    from reports.running.budget import resolve
    from tests.test_budget import budgeted_reproduction
    reproduction = budgeted_reproduction(tmp_path, monkeypatch)
    reproduction.corpus, reproduction.rows = reproduction.load_corpus(), reproduction.table_rows()
    rows = {r: {"updates": 7, "recipe_updates": 400, "epoch_updates": 10, "flops": 1.0, "flops_per_update": 1.0,
                "expected_seconds": 1.0} for r in ("small", "wide")}
    record = {"corpus_summary": reproduction.corpus.summary(),
              "budget": {"asked": "20m", "rule": "x", "flops_per_row": None, "rows": rows}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(record))
    assert resolve(reproduction.budget_plan(), str(path), None)["rows"]["small"]["updates"] == 7  # (as written: taken)
    BUDGET_DAMAGES[damage](record)
    path.write_text(json.dumps(record))
    with pytest.raises(LMBenchError, match=rf"^--budget {re.escape(str(path))}: "):
        resolve(reproduction.budget_plan(), str(path), None)


RECORD_EDITS = {
    "files a list": {"files": [1, 2, 3]},
    "a file's entry a number": {"files": {"train": 1}},
    "a file's path a number": {"files": {"train": {"path": 1, "sha256": "x"}}},
    "min_count a word": {"min_count": "abc"},
    "min_count 0": {"min_count": 0},
    "min_count a fraction": {"min_count": 2.5},
    "min_count true": {"min_count": True},
    "vocab_size a list": {"vocab_size": [5]},
    "corpus_split two numbers": {"corpus_split": [0.5, 0.5]},
    "vocab_from unknown": {"vocab_from": "everything"},
    "skip_bad_files a word": {"skip_bad_files": "yes"},
    "ap_dir a number": {"ap_dir": 3},
}


@pytest.mark.parametrize("edit", RECORD_EDITS)
def test_an_edited_run_corpus_record_is_one_line_in_every_command_that_reads_it(tmp_path, capsys, trained, edit):
    from corpora.cli import read_record
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    assert read_record(run)["corpus"] == "text"
    record = json.loads((run / "corpus.json").read_text())
    record.update(RECORD_EDITS[edit])
    (run / "corpus.json").write_text(json.dumps(record))
    for argv in (["eval", str(run)], ["nplm", "neighbors", str(run), "w1"],
                 ["train", "--out", str(run), "--resume", *TINY]):
        line = error_line(capsys, argv)
        assert "corpus.json" in line, line


@pytest.fixture(scope="module")
def saved_logprobs(tmp_path_factory):
    """Two models' saved log-probabilities of one tiny corpus, one with its context buckets."""
    folder = tmp_path_factory.mktemp("saved")
    files = write_splits(folder, train=zipf_text(3000, 40, 1), valid=zipf_text(400, 40, 2), test=zipf_text(400, 40, 3))
    corpus = ["--corpus", "text", "--train", str(files["train"]), "--valid", str(files["valid"]), "--test",
              str(files["test"])]
    paths = {"kn": folder / "kn.npz", "di": folder / "di.npz"}
    assert main(["ngram", "--method", "kneser-ney", "--order", "3", *corpus, "--save-logprobs", str(paths["kn"])]) == 0
    assert main(["ngram", "--method", "deleted-interpolation", "--order", "3", *corpus, "--save-logprobs",
                 str(paths["di"])]) == 0
    return paths


NPZ_EDITS = {
    "no vocabulary": lambda arrays: arrays.pop("vocabulary"),
    "no stream": lambda arrays: arrays.pop("stream"),
    "a bucket of 2**40": lambda arrays: arrays["buckets_valid"].__setitem__(0, 2 ** 40),
    "a test bucket of 2**40": lambda arrays: arrays["buckets_test"].__setitem__(-1, 2 ** 40),
    "a fingerprint of numbers": lambda arrays: arrays.update(vocabulary=np.arange(3)),
}


@pytest.mark.parametrize("edit", NPZ_EDITS)
@pytest.mark.parametrize("place", ("a part", "the buckets' file"))
def test_mix_on_an_edited_npz_is_one_line(tmp_path, capsys, saved_logprobs, edit, place):
    with np.load(saved_logprobs["di"]) as data:
        arrays = {key: data[key].astype(np.int64) if key.startswith("buckets") else data[key] for key in data.files}
    NPZ_EDITS[edit](arrays)
    edited = tmp_path / "edited.npz"
    np.savez(edited, **arrays)
    parts = [str(edited), str(saved_logprobs["kn"])] if place == "a part" else \
        [str(saved_logprobs["di"]), str(saved_logprobs["kn"])]
    buckets = str(saved_logprobs["di"]) if place == "a part" else str(edited)
    line = error_line(capsys, ["mix", *parts, "--method", "bucketed", "--buckets-from", buckets])
    assert "edited.npz" in line


# --- a fresh round: the files the suite writes for itself and reads again (caches of its own) ----------------
OWN_FILE_DAMAGES = {
    "random bytes": lambda path: path.write_bytes(bytes(np.random.default_rng(1).integers(0, 256, 512, dtype=np.uint8))),
    "a JSON list": lambda path: path.write_text("[1, 2, 3]"),
    "an object of other fields": lambda path: path.write_text('{"key": [], "budget": {"rows": [1]}, "x": {"files": 3}}'),
}


@pytest.mark.parametrize("damage", OWN_FILE_DAMAGES)
def test_a_damaged_kept_budget_is_measured_again(tmp_path, monkeypatch, caplog, damage):
    from reports.running.budget import resolve
    from tests.test_budget import budgeted_reproduction
    reproduction = budgeted_reproduction(tmp_path, monkeypatch)
    reproduction.corpus, reproduction.rows = reproduction.load_corpus(), reproduction.table_rows()
    first = resolve(reproduction.budget_plan(), None, 5e7)
    kept = reproduction.work.budget_path
    OWN_FILE_DAMAGES[damage](kept)
    again = resolve(reproduction.budget_plan(), None, 5e7)
    assert {r: row["updates"] for r, row in again["rows"].items()} == {r: row["updates"] for r, row in first["rows"].items()}
    assert "damaged" in caplog.text
    kept_rows = json.loads(kept.read_text())["budget"]["rows"]
    kept_rows["small"]["updates"] = "many"  # (an edited record whose key still matches: measured again too)
    kept.write_text(json.dumps({"key": json.loads(kept.read_text())["key"], "budget": {**again, "rows": kept_rows}}))
    assert resolve(reproduction.budget_plan(), None, 5e7)["rows"]["small"]["updates"] == first["rows"]["small"]["updates"]


@pytest.mark.parametrize("damage", OWN_FILE_DAMAGES)
def test_a_damaged_drawn_record_draws_again(tmp_path, damage):
    from reports.building.figures import DRAWN, drawn_once
    drawn = []

    def draw():
        (tmp_path / "a.png").write_bytes(b"png")
        drawn.append(1)
        return [tmp_path / "a.png"]

    code = (Path(__file__),)
    drawn_once(tmp_path, "set", {"x": 1}, code, draw)
    OWN_FILE_DAMAGES[damage](tmp_path / DRAWN)
    assert drawn_once(tmp_path, "set", {"x": 1}, code, draw) == [tmp_path / "a.png"] and len(drawn) == 2


@pytest.mark.parametrize("damage", OWN_FILE_DAMAGES)
def test_the_estimate_passes_over_a_damaged_committed_results_file(tmp_path, damage):
    from reports.running.estimate import committed_results
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
    shutil.copyfile(ROOT / "results" / "brown" / "results.json", tmp_path / "good" / "results.json")
    OWN_FILE_DAMAGES[damage](tmp_path / "bad" / "results.json")
    assert [result["corpus"] for result in committed_results(tmp_path)] == ["brown"]

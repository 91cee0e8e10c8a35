"""Fault injection for every file the suite writes or reads.

Each file is written, then cut to 0 bytes, to half, to one byte short, or has the byte in its middle
flipped (and, for the files the suite writes for itself, one bit flipped, which leaves JSON valid and
only the recorded SHA-256 can tell). A damaged cache entry is set aside with one warning line and
rebuilt, giving the same numbers as a clean cache; a damaged input of the user ends in one line naming
the file (exit 2 from the command line); never a traceback.
"""

import gzip
import json
import logging
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from baselines.arpa_reader import read_arpa
from baselines.arpa_writer import write_arpa
from baselines.clustering import cached_cluster
from baselines.kneser_ney import KneserNeyBackoff
from corpora.ap import load_ap
from corpora.text import load_text
from lmbench.errors import LMBenchError
from lmbench.model import split_perplexity
from lmbench_cli import main
from mixing import saved
from reports.running import pipeline, settings
from reports.experiments import Row
from tests.helpers import markov_text, random_text, write_splits
from tests.lm_checks import make_corpus
from tests.test_ap import sgml
from tests.test_reports import fake_results

ROOT = Path(__file__).resolve().parents[1]


def flip(data: bytes, mask: int) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ mask]) + data[middle + 1:]


DAMAGES = {
    "empty": lambda data: b"",
    "half": lambda data: data[: len(data) // 2],
    "one byte short": lambda data: data[:-1],
    "flipped byte": lambda data: flip(data, 0xFF),
}
CACHE_DAMAGES = {**DAMAGES, "flipped bit": lambda data: flip(data, 0x01)}


def damage(path: Path, how: str) -> None:
    path.write_bytes(CACHE_DAMAGES[how](path.read_bytes()))


def warnings(caplog, logger: str = "lmbench.files") -> list[str]:
    """The warning lines of one logger (lmbench.files: a cache entry set aside)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == logger]


def error_line(capsys, argv) -> str:
    """Run the command, expect exit 2 with one error line and no traceback; return that line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    return lines[0]


# --- the corpus cache: ids.npz, vocab.json, meta.json -------------------------------------------

@pytest.fixture
def text_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    return write_splits(tmp_path, **{split: random_text(seed, 3000 if split == "train" else 500, "abcdefghijklmnop")
                                     + "\n" for seed, split in enumerate(("train", "valid", "test"))})


def prepare(files):
    return load_text(files["train"], files["valid"], files["test"])


def same_corpus(a, b) -> bool:
    return a.vocab.words == b.vocab.words and all(np.array_equal(a.split(s), b.split(s))
                                                  for s in ("train", "valid", "test"))


@pytest.mark.parametrize("how", CACHE_DAMAGES)
@pytest.mark.parametrize("name", ["ids.npz", "vocab.json", "meta.json"])
def test_damaged_corpus_cache_is_rebuilt(text_corpus, name, how, caplog):
    clean = prepare(text_corpus)
    entry = Path(clean.info["cache"])
    damage(entry / name, how)
    rebuilt = prepare(text_corpus)
    assert rebuilt.info["from_cache"] is False and same_corpus(rebuilt, clean)
    [warning] = warnings(caplog)
    assert str(entry / name) in warning and "set aside" in warning
    assert (entry.parent / (entry.name + ".damaged") / name).exists()
    again = prepare(text_corpus)  # the rebuilt entry is whole again
    assert again.info["from_cache"] is True and same_corpus(again, clean)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", ["ids.npz", "vocab.json", "meta.json"])
def test_damaged_corpus_cache_without_records_is_rebuilt(text_corpus, name, how, caplog, capsys):
    """An entry written before records existed is checked by reading it, through the command."""
    argv = ["corpus", "text", "--json"] + [f"--{s}={p}" for s, p in text_corpus.items()]
    assert main(argv) == 0
    clean = json.loads(capsys.readouterr().out)
    entry = Path(clean["cache"])
    for record in entry.glob("*.sha256"):
        record.unlink()
    damage(entry / name, how)
    assert main(argv) == 0
    rebuilt = json.loads(capsys.readouterr().out)
    assert rebuilt["from_cache"] is False
    for key in ("vocab_size", "tokens", "unk_tokens"):
        assert rebuilt[key] == clean[key]
    [warning] = warnings(caplog)
    assert name in warning


@pytest.mark.slow
def test_two_processes_preparing_one_corpus_build_it_once(text_corpus, tmp_path):
    """Both start together; the build is slowed so that they overlap: one builds, the other waits
    for the lock and loads its entry."""
    child = textwrap.dedent("""
        import json, sys, time
        from pathlib import Path
        import corpora.text as text
        me, ready, files = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
        read = text.read_tokens_text
        text.read_tokens_text = lambda path: (time.sleep(0.5), read(path))[1]
        (ready / me).touch()
        while len(list(ready.iterdir())) < 2:
            time.sleep(0.01)
        corpus = text.load_text(*files)
        print(json.dumps({"from_cache": corpus.info["from_cache"], "train": corpus.train.tolist(),
                          "words": corpus.vocab.words}))
    """)
    ready = tmp_path / "ready"
    ready.mkdir()
    files = [str(text_corpus[s]) for s in ("train", "valid", "test")]
    children = [subprocess.Popen([sys.executable, "-c", child, str(i), str(ready), *files], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = []
    for process in children:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["from_cache"] for r in results) == [False, True]
    assert results[0]["train"] == results[1]["train"] and results[0]["words"] == results[1]["words"]
    cache = tmp_path / "cache"
    [entry] = [p for p in cache.iterdir() if p.is_dir()]  # one entry, no temporary folder left
    assert not entry.name.endswith(".damaged")
    loaded = prepare(text_corpus)
    assert loaded.info["from_cache"] is True and loaded.train.tolist() == results[0]["train"]


# --- the exchange-clustering cache ------------------------------------------------------------------

@pytest.mark.parametrize("how", CACHE_DAMAGES)
def test_damaged_clustering_cache_is_rebuilt(tmp_path, how, caplog):
    corpus = make_corpus(random_text(5, 400), "a b", "b a")
    clean = cached_cluster(corpus, 3, progress=False, directory=tmp_path)
    [path] = tmp_path.glob("*.json")
    damage(path, how)
    rebuilt = cached_cluster(corpus, 3, progress=False, directory=tmp_path)
    assert np.array_equal(rebuilt.word_class, clean.word_class) and rebuilt.num_classes == clean.num_classes
    [warning] = warnings(caplog)
    assert path.name in warning
    assert path.with_name(path.name + ".damaged").exists()
    caplog.clear()
    again = cached_cluster(corpus, 3, progress=False, directory=tmp_path)  # read back, nothing set aside
    assert np.array_equal(again.word_class, clean.word_class) and not warnings(caplog)


# --- the reproduction's row cache, saved log-probabilities and results.json ----------------------------

ROWS = [Row("add1", "ngram", "add-one", n=1, method="add-one-unigram"),
        Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
        Row("kn3-add1", "mix", "KN + add-one", mix="EM", parts=("kn3", "add1"))]


@pytest.fixture
def reproduction(tmp_path, monkeypatch):
    corpus = make_corpus(markov_text(2000, 60, 1), markov_text(300, 60, 2), markov_text(300, 60, 3))
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: list(ROWS))
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: corpus)

    def run() -> dict:
        return pipeline.Reproduction(pipeline.default_settings("brown", False), tmp_path / "work",
                                     tmp_path / "report").run()
    return run


def numbers(results: dict) -> list:
    return [(r["id"], r["train_ppl"], r["valid_ppl"], r["test_ppl"], r.get("weights")) for r in results["rows"]]


@pytest.mark.parametrize("how", CACHE_DAMAGES)
@pytest.mark.parametrize("name", ["rows/kn3.json", "logprobs/kn3.npz", "results.json"])
def test_damaged_row_cache_runs_the_row_again(reproduction, tmp_path, name, how, caplog):
    clean = reproduction()
    path = (tmp_path / "report" if name == "results.json" else tmp_path / "work") / name
    damage(path, how)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="reports.running.schedule")  # (where a row is said to run or be read)
    again = reproduction()
    assert numbers(again) == numbers(clean)
    messages = [r.getMessage() for r in caplog.records]
    if name == "results.json":  # written, never read, by the pipeline
        assert not warnings(caplog)
    else:
        [warning] = warnings(caplog)
        assert str(path) in warning
        assert "row kn3: running" in messages and "row add1: running" not in messages
    assert numbers(json.loads((tmp_path / "report" / "results.json").read_text())) == numbers(clean)


TINY_CORPUS = make_corpus(markov_text(2000, 60, 1), markov_text(300, 60, 2), markov_text(300, 60, 3))
TINY_NETWORK = Row("tiny", "network", "tiny NPLM", family="nplm", config=dict(n=3, h=8, m=4, direct=True, epochs=1))


def use_tiny_table(monkeypatch) -> settings.Settings:
    """Brown's table made of one small network, run on a small corpus: its settings."""
    monkeypatch.setitem(pipeline.ROWS, "brown", lambda corpus: [TINY_NETWORK])
    monkeypatch.setattr(pipeline.Reproduction, "load_corpus", lambda self: TINY_CORPUS)
    return pipeline.default_settings("brown", False)


@pytest.fixture
def tiny_table(monkeypatch):
    return use_tiny_table(monkeypatch)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished reproduction of the tiny table, run once for the module (each test damages a copy)."""
    folder = tmp_path_factory.mktemp("tiny-run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        pipeline.Reproduction(use_tiny_table(monkeypatch), folder / "work", folder / "report").run()
    return folder


@pytest.mark.xdist_group("tiny_run")  # one test process runs the module's tiny reproduction
@pytest.mark.parametrize("how", ["empty", "half", "flipped byte"])
def test_damaged_training_log_is_named_with_the_fix(tmp_path, tiny_run, tiny_table, how):
    """A network's log.jsonl (its learning curve in the report) read back damaged: one error naming the
    file and how to train the network again, never a JSON traceback."""
    shutil.copytree(tiny_run, tmp_path, dirs_exist_ok=True)
    [log_file] = (tmp_path / "work" / "nplm").glob("tiny-*/log.jsonl")
    (tmp_path / "work" / "rows" / "tiny.json").unlink()  # the row runs again and reads its finished run
    damage(log_file, how)
    with pytest.raises(LMBenchError, match="training log") as caught:
        pipeline.Reproduction(tiny_table, tmp_path / "work", tmp_path / "report").run()
    assert str(log_file) in str(caught.value) and "train this network again" in str(caught.value)


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_results_json_names_the_rerun(tmp_path, how, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(fake_results({}), indent=1))
    damage(path, how)
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert str(path) in line and "reproduce" in line


# --- the user's inputs: text corpus files, ARPA files, .npz for lmbench mix, AP files --------------------

@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_text_corpus_file(text_corpus, how, capsys):
    """A cut text file is still text: it is prepared anew (the cache is keyed by content) and gives
    what a fresh preparation gives; an empty or non-UTF-8 file is refused in one line."""
    argv = ["corpus", "text", "--json"] + [f"--{s}={p}" for s, p in text_corpus.items()]
    assert main(argv) == 0
    capsys.readouterr()
    damage(text_corpus["train"], how)
    if how in ("empty", "flipped byte"):
        line = error_line(capsys, argv)
        assert str(text_corpus["train"]) in line
        assert ("no tokens" if how == "empty" else "not UTF-8") in line
    else:
        assert main(argv) == 0
        stats = json.loads(capsys.readouterr().out)
        fresh = load_text(text_corpus["train"], text_corpus["valid"], text_corpus["test"], use_cache=False)
        assert stats["tokens"]["train"] == len(fresh.train) and stats["vocab_size"] == len(fresh.vocab)


def test_text_corpus_file_with_nul_bytes(text_corpus, capsys):
    text_corpus["valid"].write_bytes(b"a b\0\0\0\0 c")
    line = error_line(capsys, ["corpus", "text"] + [f"--{s}={p}" for s, p in text_corpus.items()])
    assert str(text_corpus["valid"]) in line and "NUL" in line


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_arpa_file(tmp_path, how):
    corpus = make_corpus(markov_text(2000, 60, 1), markov_text(300, 60, 2), markov_text(300, 60, 3))
    path = tmp_path / "kn3.arpa"
    write_arpa(KneserNeyBackoff(3).fit(corpus), corpus.vocab, path)
    clean = split_perplexity(read_arpa(path, corpus.vocab), corpus, "test")
    damage(path, how)
    if how == "one byte short":  # only the final newline is gone: the file is whole
        assert split_perplexity(read_arpa(path, corpus.vocab), corpus, "test") == clean
        return
    with pytest.raises(LMBenchError) as refused:
        read_arpa(path, corpus.vocab)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "write it again" in message


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_logprobs_for_mix(tmp_path, how, capsys):
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        saved.save(tmp_path / f"{name}.npz", {"valid": np.log(rng.uniform(0.01, 1, 500)),
                                              "test": np.log(rng.uniform(0.01, 1, 400))}, TINY_CORPUS)
    argv = ["mix", str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]
    assert main(argv) == 0
    capsys.readouterr()
    damage(tmp_path / "b.npz", how)
    line = error_line(capsys, argv)
    assert str(tmp_path / "b.npz") in line and "--save-logprobs" in line


DOCS = [[(f"AP890101-000{i}", f"   Story {i} tells of the cat.\n   It sat on the mat.\n")] for i in range(1, 5)]


def ap_folder(directory: Path, gz: bool = True) -> Path:
    directory.mkdir()
    for number, docs in enumerate(DOCS, 1):
        data = sgml(docs).encode("latin-1")
        (directory / f"ap89010{number}").write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return directory


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_ap_file_stops_unless_skipped(tmp_path, how, monkeypatch, capsys, caplog):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    folder = ap_folder(tmp_path / "ap")
    bad = folder / "ap890102"
    damage(bad, how)
    argv = ["corpus", "ap", "--ap-dir", str(folder), "--json"]
    line = error_line(capsys, argv)
    assert str(bad) in line and "--skip-bad-files" in line

    caplog.clear()
    assert main(argv + ["--skip-bad-files"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped_bad_files"] == ["ap890102"]
    [warning] = [w for w in warnings(caplog, "corpora.ap") if "skipping" in w]
    assert str(bad) in warning
    bad.rename(tmp_path / "moved-out")  # the same corpus as the folder without the damaged file
    without = load_ap(folder, use_cache=False, workers=1)
    assert stats["tokens"] == {s: len(without.split(s)) for s in ("train", "valid", "test")}
    (tmp_path / "moved-out").rename(bad)
    error_line(capsys, argv)  # the skipping run's cache entry is not the full folder's


@pytest.mark.parametrize("how", ["empty", "half"])
def test_damaged_plain_ap_file(tmp_path, how, capsys):
    folder = ap_folder(tmp_path / "ap", gz=False)
    damage(folder / "ap890103", how)
    line = error_line(capsys, ["corpus", "ap", "--ap-dir", str(folder), "--no-cache"])
    assert str(folder / "ap890103") in line and ("empty" if how == "empty" else "</DOC>") in line

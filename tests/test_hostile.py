"""Hostile inputs, full disks and mismatched files (issue 35): each ends in one line naming the cause and
the fix (exit 2 from the command line), leaves nothing partial, leaves its inputs as they were, and a
later run succeeds.

A full disk is a writer that fails after N bytes: RLIMIT_FSIZE makes the kernel refuse every write
past N bytes of a file, whoever writes it (numpy's tofile then reports a short write without an
errno, torch.save an `[enforce fail at inline_container.cc]`, Python EFBIG), as a full disk refuses
them (ENOSPC).
"""

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from baselines.disk_counts import DiskCounts
from baselines.katz import Katz
from baselines.kneser_ney import KneserNey, KneserNeyBackoff
from lmbench.files import WriteFailed, atomic_write_file, atomic_write_text
from tests.helpers import corpus_args, write_splits, zipf_text
from tests.lm_checks import make_corpus
from tests.test_disk_counts import assert_same_model
from tests.test_faults import error_line

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def files_fail_after(nbytes: int):
    """Every file written meanwhile fails past `nbytes` bytes (SIGXFSZ ignored: the write then
    returns EFBIG or a short count, as on a full disk)."""
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def one_line(err: BaseException) -> str:
    message = str(err)
    assert "\n" not in message and "Traceback" not in message
    return message


# --- the atomic writer ------------------------------------------------------------------------------

WRITERS = {
    "text": lambda path: atomic_write_text(path, "x" * 50_000),
    "numpy tofile": lambda path: atomic_write_file(path, lambda f: np.zeros(10_000).tofile(f)),
    "numpy savez": lambda path: atomic_write_file(path, lambda f: np.savez(f, x=np.zeros(10_000))),
    "torch.save": lambda path: atomic_write_file(path, lambda f: __import__("torch").save(
        {"w": __import__("torch").zeros(10_000)}, f)),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_full_disk_keeps_the_old_file_and_names_the_space(tmp_path, writer):
    path = tmp_path / "out.bin"
    path.write_bytes(b"the last good one")
    with files_fail_after(4096), pytest.raises(WriteFailed) as failed:
        WRITERS[writer](path)
    line = one_line(failed.value)
    assert str(path) in line and "no room" in line and "needs" in line and "free space" in line
    assert path.read_bytes() == b"the last good one"          # the last good file is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]  # no temporary file left
    WRITERS[writer](path)                                      # room again: it is written whole
    assert path.stat().st_size > 4096


def test_a_read_only_folder_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who may write anywhere")
        with pytest.raises(WriteFailed, match="cannot write") as failed:
            atomic_write_text(folder / "a.txt", "x")
        assert str(folder / "a.txt") in one_line(failed.value)
    finally:
        folder.chmod(0o755)


# --- the bounded-memory n-gram path ----------------------------------------------------------------

@pytest.fixture(scope="module")
def small_corpus():
    """6,000 tokens of 200 words: blocks of contexts without any continuation occur under a small cap."""
    return make_corpus(zipf_text(6000, 200, 7), zipf_text(600, 200, 107), zipf_text(600, 200, 207))


@pytest.mark.parametrize("cls", [KneserNey, KneserNeyBackoff, Katz])
@pytest.mark.parametrize("memory", [1, 4096, 16384, 65536, 6000 * 220 - 1])  # the last: one chunk
def test_any_cap_gives_the_in_memory_model(tmp_path, small_corpus, cls, memory):
    bounded = cls(3, memory=memory, tmp_dir=tmp_path).fit(small_corpus)
    assert_same_model(cls(3).fit(small_corpus), bounded, small_corpus)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_build_removes_its_folder(tmp_path, small_corpus, monkeypatch):
    def fails(self, *args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(DiskCounts, "_merge", fails)
    with pytest.raises(RuntimeError, match="a bug"):
        KneserNey(3, memory=4096, tmp_dir=tmp_path).fit(small_corpus)
    assert list(tmp_path.iterdir()) == []


def test_a_full_tmp_dir_is_one_line_and_removes_the_build(tmp_path, small_corpus, capsys, monkeypatch):
    """numpy's tofile on a full disk raises OSError('... requested and ... written') without an errno."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, **{s: " ".join(small_corpus.vocab.decode(small_corpus.split(s)))
                                      for s in ("train", "valid", "test")})
    work = tmp_path / "work"
    work.mkdir()
    argv = ["ngram", "--method", "kneser-ney", "--order", "3", "--memory", "64K", "--tmp-dir", str(work),
            *corpus_args(files), "--json"]
    main_corpus = {s: files[s].read_bytes() for s in files}
    from lmbench_cli import main
    assert main(argv[:5] + argv[9:]) == 0  # the corpus cached, before the disk fills
    capsys.readouterr()
    with files_fail_after(2048):
        line = error_line(capsys, argv)
    assert "ran out of disk space" in line and str(work) in line and "--tmp-dir" in line and "MiB" in line
    assert list(work.iterdir()) == []
    assert {s: files[s].read_bytes() for s in files} == main_corpus
    assert main(argv) == 0 and list(work.iterdir()) == []    # a later run succeeds


SLOW_BUILD = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from baselines.disk_counts import DiskCounts
    # Ctrl-C as in a terminal: a child of a test worker may inherit SIGINT ignored, and Python then leaves it so
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ready, how = Path(sys.argv[1]), sys.argv[2]
    count_chunk = DiskCounts._count_chunk
    def slow(self, n, c, s, at_prev):
        count_chunk(self, n, c, s, at_prev)
        if n == 3 and c == 2:
            if how == "kill":
                os.kill(os.getpid(), 9)
            ready.touch()
            time.sleep(60)
    DiskCounts._count_chunk = slow
    from lmbench_cli import main
    sys.exit(main(sys.argv[3:]))
""")


def start_slow_build(tmp_path, files, how: str) -> tuple[subprocess.Popen, list[str], Path]:
    work, ready = tmp_path / "work", tmp_path / "ready"
    work.mkdir(exist_ok=True)
    argv = ["ngram", "--method", "kneser-ney", "--order", "3", "--memory", "16K", "--tmp-dir", str(work),
            *corpus_args(files), "--json"]
    env = dict(os.environ, LMBENCH_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", SLOW_BUILD, str(ready), how, *argv], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return child, argv, work


@pytest.fixture
def text_files(tmp_path, small_corpus, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    return write_splits(tmp_path, **{s: " ".join(small_corpus.vocab.decode(small_corpus.split(s)))
                                     for s in ("train", "valid", "test")})


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_build_removes_its_folder(tmp_path, text_files, sig, code, capsys):
    returncode, err, work = signalled_build(tmp_path, text_files, sig)
    assert returncode == code, err
    assert "Traceback" not in err and list(work.iterdir()) == []


def signalled_build(tmp_path, text_files, sig) -> tuple[int, str, Path]:
    """A slow corpus build sent `sig` mid-build: its exit code, its standard error and its work folder."""
    child, argv, work = start_slow_build(tmp_path, text_files, "wait")
    deadline = time.time() + 120
    while not (tmp_path / "ready").exists():
        assert child.poll() is None and time.time() < deadline, child.communicate()
        time.sleep(0.05)
    assert len(list(work.iterdir())) == 1          # the build folder, mid-build
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    return child.returncode, err, work
    from lmbench_cli import main
    assert main(argv) == 0 and list(work.iterdir()) == []


@pytest.mark.slow
def test_a_build_killed_outright_resumes_to_the_same_model(tmp_path, text_files, capsys):
    child, argv, work = start_slow_build(tmp_path, text_files, "kill")
    child.communicate(timeout=120)
    assert child.returncode == -9
    [folder] = work.iterdir()                      # left, to resume from
    assert (folder / "manifest.json").exists()
    from lmbench_cli import main
    import json
    assert main(argv) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert list(work.iterdir()) == []
    assert main(argv[:5] + argv[9:]) == 0         # in memory
    fresh = json.loads(capsys.readouterr().out)
    assert all(resumed[f"{s}_perplexity"] == fresh[f"{s}_perplexity"] for s in ("train", "valid", "test"))


# --- checkpoints ---------------------------------------------------------------------------------------

def test_a_full_disk_under_out_keeps_the_last_good_checkpoint(tmp_path):
    """torch.save on a full disk raises `[enforce fail at inline_container.cc]`: one line naming the
    checkpoint; the last good one stays, and --resume continues into the uninterrupted run."""
    from neural.training.checkpoint import CHECKPOINT
    from neural.training.trainer import train_network
    from tests.test_nplm_train import CORPUS, tiny
    config = tiny(min_gain=0.05)
    whole = train_network(CORPUS, config, tmp_path / "whole", progress=False)
    out = tmp_path / "split"
    train_network(CORPUS, tiny(min_gain=0.05, epochs=1), out, progress=False)
    good = (out / CHECKPOINT).read_bytes()
    with files_fail_after(len(good) // 2), pytest.raises(WriteFailed) as failed:
        train_network(CORPUS, config, out, resume=True, progress=False)
    line = one_line(failed.value)
    assert "no room" in line and str(out) in line and "--resume" in line
    assert (out / CHECKPOINT).read_bytes() == good
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
    resumed = train_network(CORPUS, config, out, resume=True, progress=False)
    assert resumed["updates"] == whole["updates"]
    assert resumed["valid_perplexity"] == pytest.approx(whole["valid_perplexity"], rel=1e-6)


RANDOM = np.random.default_rng(0).bytes(3000)


@pytest.mark.parametrize("content", [b"", RANDOM, b"PK\x03\x04" + RANDOM, b"not a checkpoint\n"],
                         ids=["empty", "random", "zip header", "text"])
def test_a_checkpoint_of_random_bytes_is_named_with_the_fix(tmp_path, capsys, monkeypatch, content):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train="a b c a b c a b " * 20, valid="a b c a", test="b c a b")
    out = tmp_path / "run"
    args = ["--n", "3", "--m", "4", "--h", "5", "--epochs", "1", "--device", "cpu", "--threads", "1"]
    from lmbench_cli import main
    assert main(["nplm", "train", *corpus_args(files), *args, "--out", str(out)]) == 0
    capsys.readouterr()
    from neural.training.checkpoint import BEST, CHECKPOINT
    for name in (CHECKPOINT, BEST):
        (out / name).write_bytes(content)
    line = error_line(capsys, ["nplm", "train", *corpus_args(files), *args, "--epochs", "2", "--out", str(out),
                               "--resume"])
    assert str(out / CHECKPOINT) in line and "delete it and train again" in line
    line = error_line(capsys, ["nplm", "eval", str(out), *corpus_args(files), "--device", "cpu"])
    assert str(out / BEST) in line and "delete it and train again" in line
    assert (out / CHECKPOINT).read_bytes() == content          # the input is left as it was


# --- results.json and the report ------------------------------------------------------------------------

def _results_with(change) -> dict:
    from tests.test_reports import fake_results
    results = fake_results({})
    change(results["rows"])
    return results


BAD_RESULTS = {
    "test_ppl NaN": (lambda rows: rows[0].update(test_ppl=float("nan")), "test_ppl nan"),
    "test_ppl Infinity": (lambda rows: rows[0].update(test_ppl=float("inf")), "test_ppl inf"),
    "test_ppl 'abc'": (lambda rows: rows[0].update(test_ppl="abc"), "test_ppl 'abc'"),
    "test_ppl 0.5": (lambda rows: rows[0].update(test_ppl=0.5), "test_ppl 0.5"),
    "a row without id": (lambda rows: rows[1].pop("id"), "row 2 has no id"),
    "a repeated id": (lambda rows: rows[1].update(id=rows[0]["id"]), "repeats the id"),
    "a row that is a number": (lambda rows: rows.__setitem__(0, 7), "row 1 is a int"),
    "weights ['x']": (lambda rows: [r.update(weights=["x"]) for r in rows if r["kind"] == "mix"][:1],
                      "weights ['x']"),
    "a mixture of an unknown row": (lambda rows: [r.update(parts=["nope"]) for r in rows if r["kind"] == "mix"][:1],
                                    "['nope']"),
    "no rows": (lambda rows: rows.clear(), "no list of rows"),
}


BAD_TOPS = {"no meta": (lambda results: results.pop("meta"), "no meta"),
            "no corpus_summary": (lambda results: results.pop("corpus_summary"), "corpus_summary"),
            "vocab_size 'x'": (lambda results: results["corpus_summary"].update(vocab_size="x"), "corpus_summary")}


@pytest.mark.parametrize("case", [*BAD_RESULTS, *BAD_TOPS])
def test_a_results_file_the_report_cannot_read_is_one_line(tmp_path, capsys, case):
    import json
    from tests.test_reports import fake_results
    path = tmp_path / "results.json"
    if case in BAD_TOPS:
        change, named = BAD_TOPS[case]
        results = fake_results({})
        change(results)
    else:
        change, named = BAD_RESULTS[case]
        results = _results_with(change)
    path.write_text(json.dumps(results, indent=1))
    before = path.read_bytes()
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert str(path) in line and named in line and "reproduce" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # nothing written
    assert path.read_bytes() == before


def test_a_full_report_dir_leaves_no_truncated_figure(tmp_path, capsys):
    import json
    from lmbench_cli import main
    from tests.test_reports import fake_results
    (tmp_path / "results.json").write_text(json.dumps(fake_results({}), indent=1))
    with files_fail_after(20_000):
        line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert "no room to write" in line and str(tmp_path) in line and "needs" in line
    left = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not [p for p in left if ".tmp" in p.name] and not (tmp_path / "report.md").exists()
    for png in tmp_path.rglob("*.png"):  # whatever figure was written is whole
        assert png.read_bytes().endswith(b"IEND\xaeB`\x82"), png
    assert main(["report", "brown", "--report-dir", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").exists()


# --- options and output paths, before any corpus is prepared ---------------------------------------------

def _no_corpus(monkeypatch):
    """Preparing a corpus fails the test: what is refused must be refused before."""
    import corpora.cli

    def prepared(args):
        raise AssertionError("the corpus was prepared")
    monkeypatch.setattr(corpora.cli, "load_corpus", prepared)
    import neural.cli
    monkeypatch.setattr(neural.cli, "load_corpus", prepared)


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_nplm_out_that_cannot_be_a_folder_is_refused_first(tmp_path, capsys, monkeypatch, where):
    _no_corpus(monkeypatch)
    blocker = tmp_path / "blocker"
    blocker.write_text("keep me")
    out = blocker if where == "a file" else blocker / "run"
    line = error_line(capsys, ["nplm", "train", "--corpus", "brown", "--out", str(out)])
    assert "--out" in line and str(out) in line and "folder" in line
    assert blocker.read_text() == "keep me"


def test_options_are_never_abbreviated(tmp_path, capsys, monkeypatch):
    """`--corpus` is not `--corpus-file` (reproduce text has no --corpus: its corpus is positional)."""
    _no_corpus(monkeypatch)
    text = tmp_path / "text"
    text.write_text("a b c\n")
    line = error_line(capsys, ["reproduce", "text", "--corpus", str(text)])
    assert "unrecognized arguments: --corpus" in line and "does not exist" not in line
    line = error_line(capsys, ["ngram", "--meth", "katz", "--corpus", "brown"])
    assert "--meth" in line


@pytest.mark.parametrize("option", [["--n", "100000000"], ["--h", "100000000"], ["--m", "1000000000"],
                                    ["--samples", "1000000000000"]])
def test_a_network_that_cannot_fit_is_refused_before_it_is_allocated(tmp_path, capsys, monkeypatch, option):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train="a b c a b c a b " * 20, valid="a b c a", test="b c a b")
    line = error_line(capsys, ["nplm", "train", *corpus_args(files), *option, "--epochs", "1", "--device", "cpu",
                               "--threads", "1", "--out", str(tmp_path / "run")])
    assert "needs at least" in line and "GiB" in line and option[0] in line and "more than" in line
    assert not (tmp_path / "run" / "checkpoint.safetensors").exists()


# --- two reproductions on one work folder -------------------------------------------------------------

TWO_RUNS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from reports.running import pipeline
    from reports.experiments import Row
    from tests.helpers import markov_text
    from tests.lm_checks import make_corpus
    me, ready, work, report = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    rows = [Row("add1", "ngram", "add-one", n=1, method="add-one-unigram"),
            Row("kn3", "ngram", "KN", n=3, method="kneser-ney"),
            Row("kn3-add1", "mix", "KN + add-one", mix="EM", parts=("kn3", "add1"))]
    corpus = make_corpus(markov_text(2000, 60, 1), markov_text(300, 60, 2), markov_text(300, 60, 3))
    pipeline.ROWS["brown"] = lambda corpus: list(rows)
    pipeline.Reproduction.load_corpus = lambda self: corpus
    from reports.running.row_runner import RowRunner
    run_row = RowRunner.run
    def slow(self, job):  # overlapping: each row takes a while, and says who ran it
        (work.parent / f"ran-{job.row.id}-by-{me}").touch()
        time.sleep(0.4)
        return run_row(self, job)
    RowRunner.run = slow
    (ready / me).touch()
    while len(list(ready.iterdir())) < 2:
        time.sleep(0.01)
    results = pipeline.Reproduction(pipeline.default_settings("brown", False), work, report).run()
    print([(r["id"], r["test_ppl"]) for r in results["rows"]])
""")


@pytest.mark.slow
def test_two_reproductions_on_one_work_folder_run_each_row_once_and_share_the_rows(tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    children = [subprocess.Popen([sys.executable, "-c", TWO_RUNS, str(i), str(ready), str(tmp_path / "work"),
                                  str(tmp_path / f"report{i}")], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
                for i in range(2)]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1]
    ran = sorted(p.name.split("-by-")[0] for p in tmp_path.glob("ran-*"))
    assert ran == ["ran-add1", "ran-kn3", "ran-kn3-add1"]    # each row once, by one of the two
    by = {p.name.split("-by-")[0]: p.name.split("-by-")[1] for p in tmp_path.glob("ran-*")}
    assert {by["ran-add1"], by["ran-kn3"]} == {"0", "1"}     # and they share the work: one row each


# --- outputs that would overwrite inputs or each other ----------------------------------------------------

def test_an_output_onto_an_input_or_another_output_is_refused(tmp_path, capsys, monkeypatch):
    _no_corpus(monkeypatch)
    files = write_splits(tmp_path, train="a b c a b\n", valid="a b\n", test="b a\n")
    before = {s: p.read_bytes() for s, p in files.items()}
    line = error_line(capsys, ["ngram", "--method", "kneser-ney", *corpus_args(files), "--save-logprobs",
                               str(files["train"])])
    assert "--save-logprobs" in line and "overwrite that input" in line and "--train" in line
    out = tmp_path / "model.out"
    line = error_line(capsys, ["ngram", "--method", "kneser-ney", *corpus_args(files), "--arpa", str(out),
                               "--save-logprobs", str(out)])
    assert "--arpa" in line and "--save-logprobs" in line and "own path" in line
    line = error_line(capsys, ["corpus", "text", *corpus_args(files)[2:], "--write-text", str(tmp_path)])
    assert "--write-text" in line and "overwrite that input" in line
    assert {s: p.read_bytes() for s, p in files.items()} == before and not out.exists()


def test_a_seed_numpy_cannot_take_is_refused_first(capsys, monkeypatch):
    _no_corpus(monkeypatch)
    line = error_line(capsys, ["nplm", "train", "--corpus", "brown", "--seed", "-1"])
    assert "--seed" in line and "from 0 to 4294967295" in line


@pytest.mark.slow
def test_a_second_training_into_a_busy_out_is_refused(tmp_path, capsys, monkeypatch):
    """While a run trains into --out (its process holds the folder), a second one there is one line."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=zipf_text(3000, 50, 1), valid=zipf_text(300, 50, 2),
                         test=zipf_text(300, 50, 3))
    out = tmp_path / "run"
    argv = ["nplm", "train", *corpus_args(files), "--n", "3", "--m", "4", "--h", "5", "--device", "cpu",
            "--threads", "1", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), LMBENCH_CACHE=str(tmp_path / "cache"))
    first = subprocess.Popen([sys.executable, "-m", "lmbench_cli", *argv, "--epochs", "1000", "--schedule", "linear",
                              "--checkpoint-minutes", "0.001"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (out / "checkpoint.safetensors").exists():
            assert first.poll() is None and time.time() < deadline, first.communicate()
            time.sleep(0.1)
        line = error_line(capsys, [*argv, "--epochs", "2", "--resume"])
        assert "another process is training in" in line and str(out) in line
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 143
    from lmbench_cli import main
    from neural.training.checkpoint import read_state
    step = read_state(out / "checkpoint.safetensors")["state"]["step"]
    assert main([*argv, "--epochs", "1000", "--schedule", "linear", "--max-steps", str(step + 3),  # once it is gone,
                 "--resume"]) == 0                                  # the run continues (with its own options)


def test_a_full_corpus_cache_warns_and_uses_the_corpus_uncached(tmp_path, capsys, monkeypatch, caplog):
    import json
    from lmbench_cli import main
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=zipf_text(20000, 300, 1), valid=zipf_text(2000, 300, 2),
                         test=zipf_text(2000, 300, 3))
    argv = ["corpus", "text", *corpus_args(files)[2:], "--json"]
    with files_fail_after(4096):
        assert main(argv) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["from_cache"] is False and "cache" not in stats
    assert any("could not write the corpus cache" in r.getMessage() for r in caplog.records)
    assert [p.name for p in (tmp_path / "cache").rglob("*") if ".tmp" in p.name] == []
    assert main(argv) == 0                                         # room again: cached
    capsys.readouterr()
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["from_cache"] is True


def test_a_full_clustering_cache_warns_and_uses_the_clustering(tmp_path, caplog):
    from baselines.clustering import cached_cluster
    corpus = make_corpus(zipf_text(3000, 300, 1), zipf_text(300, 300, 2), zipf_text(300, 300, 3))
    clean = cached_cluster(corpus, 3, progress=False, directory=tmp_path / "clean")
    with files_fail_after(100):
        full = cached_cluster(corpus, 3, progress=False, directory=tmp_path / "full")
    assert np.array_equal(full.word_class, clean.word_class)
    assert any("could not write the clustering cache" in r.getMessage() for r in caplog.records)
    assert [p.name for p in (tmp_path / "full").iterdir() if not p.name.endswith(".lock")] == []


@pytest.mark.parametrize("what", ["a link to /dev/zero", "a folder"])
def test_a_results_json_that_is_no_file_is_one_line(tmp_path, capsys, what):
    path = tmp_path / "results.json"
    if what == "a folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert str(path) in line and "not a file" in line


def test_eval_cannot_save_over_the_model_it_scores(tmp_path, capsys, monkeypatch):
    _no_corpus(monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.safetensors").write_bytes(b"the model")
    line = error_line(capsys, ["nplm", "eval", str(run), "--corpus", "brown", "--save-logprobs",
                               str(run / "best.safetensors")])
    assert "best.safetensors" in line and "overwrite that input" in line
    assert (run / "best.safetensors").read_bytes() == b"the model"


def test_an_error_quoting_a_newline_stays_one_line(tmp_path, capsys, monkeypatch):
    """A results folder whose name holds a newline: the error names it on one line, the newline as \\n."""
    folder = tmp_path / "odd\nname"
    folder.mkdir()
    line = error_line(capsys, ["report", "brown", "--report-dir", str(folder)])
    assert "odd\\nname" in line


def test_an_output_that_is_a_pipe_or_device_is_refused(tmp_path, capsys, monkeypatch):
    """The atomic writer renames onto its path: onto /dev/full it would replace the device."""
    _no_corpus(monkeypatch)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/full")):
        line = error_line(capsys, ["ngram", "--method", "kneser-ney", "--corpus", "brown", "--arpa", str(path)])
        assert str(path) in line and "not a regular file" in line
    assert fifo.is_fifo() and Path("/dev/full").is_char_device()


# --- a real full disk: a small tmpfs in a mount namespace of its own (where unshare may make one) ---------

def run_on_small_disk(tmp_path, size: str, argv: list[str]) -> tuple[int, str, list[str]]:
    """`lmbench ARGV` with tmp_path/small a tmpfs of `size`: its exit code, stderr and what it left there."""
    small = tmp_path / "small"
    small.mkdir(exist_ok=True)
    script = (f"mount -t tmpfs -o size={size} tmpfs {small} || exit 99; {sys.executable} -m lmbench_cli \"$@\"; "
              f"code=$?; ls -A {small} >&2; echo \"left: $(find {small} -type f | wc -l)\" >&2; exit $code")
    env = dict(os.environ, PYTHONPATH=str(ROOT), LMBENCH_CACHE=str(tmp_path / "cache"))
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if done.returncode == 99 or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    return done.returncode, done.stderr, [line for line in done.stderr.splitlines() if line.startswith("left: ")]


@pytest.mark.slow
def test_a_small_tmpfs_is_one_line_and_left_empty(tmp_path):
    files = write_splits(tmp_path, train=zipf_text(40000, 2000, 1), valid=zipf_text(3000, 2000, 2),
                         test=zipf_text(3000, 2000, 3))
    small = tmp_path / "small"
    code, err, left = run_on_small_disk(tmp_path, "256k", ["ngram", "--method", "kneser-ney", "--order", "3",
                                                           "--memory", "4K", "--tmp-dir", str(small),
                                                           *corpus_args(files)])
    errors = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "ran out of disk space" in errors[0] and left == ["left: 0"]
    code, err, left = run_on_small_disk(tmp_path, "256k", ["nplm", "train", *corpus_args(files), "--m", "60",
                                                           "--h", "50", "--epochs", "1", "--device", "cpu",
                                                           "--threads", "1", "--out", str(small / "run")])
    errors = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "no room to write" in errors[0] and "--resume" in errors[0] and ".tmp" not in err.split(errors[0])[1]


def test_a_results_json_nested_past_the_parser_is_one_line(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert str(path) in line and "reproduce" in line

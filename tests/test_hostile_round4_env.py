"""Hostile inputs, fourth round (issue 59), the environment and contradictory options: each class walked
over every value and option it concerns.

- Thread counts of the environment (item 5): every thread variable torch's libraries read
  (`lmbench.threads.THREAD_VARIABLES`), each with a count OpenMP crashes on or misreads, is refused in
  one line before torch loads; torchrun's launcher variables out of range are refused in one line.
- Contradictory options of `reproduce` (items 9, 12): every pair of row selections that leaves out what
  the other asks for, and --quick with each budget option, refused in one line with nothing written.
- Terminating signals (item 6): SIGHUP and SIGQUIT clean up as SIGTERM does, and say which ended the run.
- The process's surroundings (item 7): standard output unwritable (`> /dev/full`) or closed (`>&-`), an
  input the system cannot read (EIO, in every command that reads a corpus file: 6 cases), a cache path
  longer than the system allows (ENAMETOOLONG), the C locale without Python's UTF-8 coercion and a corpus
  of non-ASCII words (its cache's vocab.json, the report): each one line naming the cause, or a run that
  keeps every word (every text file the suite writes or reads is UTF-8, whatever the locale).
"""

from __future__ import annotations

import signal

import pytest

from lmbench import threads
from lmbench_cli import main
from tests.helpers import corpus_args, write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile import signalled_build, small_corpus, text_files  # noqa: F401 (fixtures)

BAD_COUNTS = ("100000", "abc", "0", "-1", "1.5")


@pytest.mark.parametrize("variable", threads.THREAD_VARIABLES)
@pytest.mark.parametrize("value", BAD_COUNTS)
def test_a_thread_count_of_the_environment_out_of_range_is_refused_in_one_line(capsys, monkeypatch, tmp_path,
                                                                               variable, value):
    """5 variables x 5 values: 25 cases; `train` refuses before anything is written (OMP_NUM_THREADS=100000
    ended in a segfault, exit 139, with a run folder holding only corpus.json)."""
    monkeypatch.setenv(variable, value)
    files = write_splits(tmp_path, train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    line = error_line(capsys, ["train", *corpus_args(files), "--out", str(tmp_path / "run"), "--threads", "1"])
    assert variable in line and repr(value) in line and "1 to 1024" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ("1", "4", "1024", "4,2"))
def test_a_thread_count_in_range_is_taken(monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    threads.bound_thread_variables()


LAUNCHER_CASES = [  # (the variables, the one named in the refusal)
    ({"RANK": "abc", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK"),
    ({"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"}, "WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "-2", "LOCAL_RANK": "0"}, "WORLD_SIZE"),
    ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "x"}, "LOCAL_RANK"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "2"}, "LOCAL_RANK"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE"),
]


@pytest.mark.parametrize("variables,named", LAUNCHER_CASES)
def test_a_launcher_variable_out_of_range_is_refused_in_one_line(monkeypatch, variables, named):
    """8 cases: RANK=abc and WORLD_SIZE=0 ended in tracebacks."""
    from lmbench.errors import LMBenchError
    from neural.parallel.teams import launch_environment
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(LMBenchError) as refused:
        launch_environment("data")
    assert str(refused.value).startswith(f"{named}=") and "\n" not in str(refused.value)


CONTRADICTIONS = [  # the words beside `reproduce text`, and what the refusal names
    (["--only", "ngram", "--skip", "ngram"], "--skip ngram"),
    (["--only", "nplm", "--skip", "network"], "--skip network"),
    (["--only", "ngram", "--networks", "gru"], "--networks"),
    (["--only", "ngram", "--extra", "gru"], "--extra"),
    (["--skip", "network", "--networks", "gru"], "--networks"),
    (["--skip", "network", "--extra", "gru"], "--extra"),
    (["--skip", "ngram", "network", "mix"], "every kind"),
    (["--quick", "--budget", "20m"], "--budget"),
    (["--quick", "--budget-flops", "1e12"], "--budget-flops"),
    (["--quick", "--budget", "20m", "--budget-rule", "flops"], "--budget-rule"),
]


@pytest.mark.parametrize("words,named", CONTRADICTIONS)
def test_contradictory_options_are_refused_before_anything_is_written(capsys, tmp_path, words, named):
    """10 cases: `--only ngram --skip ngram` over a finished report rewrote it with nothing (exit 0), and
    --quick silently ignored every budget option."""
    (tmp_path / "corpus").mkdir()
    files = write_splits(tmp_path / "corpus", train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2),
                         test=zipf_text(60, 20, 3))
    report, work = tmp_path / "report", tmp_path / "work"
    line = error_line(capsys, ["reproduce", "text", *corpus_args(files)[2:], "--report-dir", str(report),
                               "--work-dir", str(work), "--threads", "1", *words])
    assert "contradictory options" in line and named in line
    assert not report.exists() and not work.exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGHUP, 129), (signal.SIGQUIT, 131), (signal.SIGTERM, 143)])
def test_every_terminating_signal_cleans_up_as_sigterm_does(tmp_path, text_files, sig, code):
    """3 signals (SIGINT is tests/test_hostile.py's): SIGHUP, a closed terminal, exited 129 with no message
    and left the build's folder behind; each now ends in one line naming it, the folder removed."""
    returncode, err, work = signalled_build(tmp_path, text_files, sig)
    assert returncode == code, err
    assert "Traceback" not in err and f"terminated ({signal.Signals(sig).name})" in err
    assert list(work.iterdir()) == []


def test_an_unwritable_standard_output_ends_in_one_line(tmp_path):
    """`> /dev/full` ended in a traceback (1 case; a closed pipe is tests/test_hostile.py's exit 141)."""
    import subprocess
    import sys
    files = write_splits(tmp_path, train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "lmbench_cli", "ngram", *corpus_args(files), "--method", "kneser-ney", "--order", "2"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("lmbench: error: standard output cannot be written")


# --- the process's surroundings: a closed output, files the system cannot read, names it refuses, the C locale ---

def _lmbench(*words: str, env: dict | None = None, shell_tail: str = "", cwd=None):
    """`python -m lmbench_cli WORDS` in a child process (its redirections `shell_tail`, as a shell gives them)."""
    import os
    import shlex
    import subprocess
    import sys
    command = " ".join(shlex.quote(word) for word in (sys.executable, "-m", "lmbench_cli", *map(str, words)))
    return subprocess.run(["bash", "-c", f"exec {command} {shell_tail}"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def _one_line(done, *expected: str) -> None:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("lmbench: error: ") and all(part in line for part in expected), line


def test_a_closed_standard_output_is_refused_before_any_work(tmp_path):
    """`>&-` ended in a traceback at the last flush (1 case): refused in one line before anything runs."""
    files = write_splits(tmp_path, train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    done = _lmbench("ngram", *corpus_args(files), "--method", "kneser-ney", "--order", "2", shell_tail=">&-")
    _one_line(done, "standard output is closed")


UNREADABLE = "/proc/self/mem"  # whose first page cannot be read: the kernel answers EIO, as a failing disk does


@pytest.mark.parametrize("command, place", [
    ("ngram", "train"), ("ngram", "valid"), ("ngram", "test"), ("train", "train"), ("eval-corpus", "test"),
    ("reproduce", "corpus-file")])
def test_an_input_that_cannot_be_read_is_one_line_naming_it(tmp_path, command, place):
    """6 cases: an input file whose reading fails (EIO) ended in a traceback in every command."""
    files = write_splits(tmp_path, train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    files = {split: (UNREADABLE if split == place else path) for split, path in files.items()}
    if command == "reproduce":
        words = ["reproduce", "text", "--corpus-file", UNREADABLE, "--quick", "--only", "ngram",
                 "--report-dir", tmp_path / "report"]
    elif command == "train":
        words = ["train", *corpus_args(files), "--out", tmp_path / "run", "--max-steps", "1", "--threads", "1"]
    elif command == "eval-corpus":
        words = ["ngram", *corpus_args(files), "--method", "katz", "--order", "2"]
    else:
        words = ["ngram", *corpus_args(files), "--method", "kneser-ney", "--order", "2"]
    _one_line(_lmbench(*words), UNREADABLE, "Input/output error")


def test_a_cache_path_longer_than_the_system_allows_is_one_line(tmp_path):
    """LMBENCH_CACHE with a 300-byte name ended in a traceback (ENAMETOOLONG; 1 case)."""
    files = write_splits(tmp_path, train=zipf_text(300, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    done = _lmbench("reproduce", "text", *corpus_args(files)[2:], "--quick", "--only", "ngram", "--report-dir",
                    tmp_path / "report", env={"LMBENCH_CACHE": str(tmp_path / ("x" * 300))})
    _one_line(done, "File name too long", "LMBENCH_CACHE")


def test_the_c_locale_keeps_every_word_of_the_corpus(tmp_path):
    """LC_ALL=C without Python's UTF-8 coercion, a corpus of non-ASCII words: the cache's vocab.json could not
    be written (UnicodeEncodeError; 1 case). The run finishes, its files are UTF-8, the words are kept."""
    import json
    words = {"w1": "wörd", "w2": "日本", "w3": "naïve"}
    texts = {split: zipf_text(size, 20, seed) for split, size, seed in (("train", 400, 1), ("valid", 80, 2), ("test", 80, 3))}
    for plain, word in words.items():
        texts = {split: " ".join(word if token == plain else token for token in text.split()) for split, text in texts.items()}
    files = write_splits(tmp_path, **texts)
    cache = tmp_path / "cache"
    done = _lmbench("reproduce", "text", *corpus_args(files)[2:], "--quick", "--only", "ngram", "--report-dir",
                    tmp_path / "report", env={"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                                              "LMBENCH_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr[-2000:]
    [vocab] = cache.glob("*/vocab.json")
    assert set(words.values()) <= set(json.loads(vocab.read_text(encoding="utf-8"))["words"])
    assert "∞-gram" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")

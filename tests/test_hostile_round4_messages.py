"""Issue 59, item 10: messages that must be true and whose advice must work. Cases, by class:

- a moved corpus (3): the documented fix, the corpus options naming the files' new place, was refused by
  `eval`, `neighbors` and `train --resume` because the record's old paths were checked before the given files
  replaced them;
- the advice of a failed write under `reproduce` (2): a full disk while a network row saves its checkpoint
  advised `--resume`, an option `reproduce` does not have; and a full disk said "73 GiB free there";
- `--name` (2): `données` and `a b` were refused as not "letters, digits", which they are;
- a deleted working directory (4 commands): "Intel oneMKL FATAL ERROR" as torch loaded.
(`train --resume` of a run of `--n 3` no longer names "--n 5": tests/test_hostile_round4_contributor.py.)"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from lmbench_cli import build_parser, main
from tests.helpers import corpus_args, run_cli, write_splits

TEXT = "the cat sat on the mat . the dog sat on the log . a cat and a dog saw the mat . " * 12
NETWORK = ["--n", "3", "--m", "4", "--h", "5", "--device", "cpu", "--threads", "1", "--json"]


@pytest.fixture
def moved(tmp_path, capsys):
    """A run trained on three files, its train file then moved: (the run, the files' new places)."""
    (tmp_path / "old").mkdir()
    paths = write_splits(tmp_path / "old", train=TEXT, valid="the cat sat on the log .", test="a dog sat .")
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "nplm", "train", *corpus_args(paths), *NETWORK, "--epochs", "1", "--out", run)
    assert code == 0, err
    (tmp_path / "new").mkdir()
    now = {split: tmp_path / "new" / path.name for split, path in paths.items()}
    for split, path in paths.items():
        shutil.move(path, now[split])
    return run, now


@pytest.mark.parametrize("command", (
    ["nplm", "eval", "RUN", "--device", "cpu", "--json"],
    ["nplm", "neighbors", "RUN", "cat", "--k", "2", "--json"],
    ["nplm", "train", *NETWORK, "--epochs", "2", "--out", "RUN", "--resume"],
))
def test_a_moved_corpus_is_read_from_the_files_given(moved, capsys, command):
    run, now = moved
    argv = [str(run) if word == "RUN" else word for word in command]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "is missing" in err  # (the folder alone: its record's files are gone)
    code, printed, err = run_cli(capsys, *argv, *corpus_args(now))
    assert code == 0, err
    assert json.loads(printed)


def test_a_moved_corpus_of_other_content_is_still_refused_on_resume(moved, capsys):
    run, now = moved
    now["train"].write_text(TEXT + "the end .")
    code, _, err = run_cli(capsys, "nplm", "train", *NETWORK, "--epochs", "2", "--out", run, "--resume",
                           *corpus_args(now))
    assert code == 2 and "--train" in err and "keeps its corpus" in err


def options_of(command: str) -> set[str]:
    """Every option the subcommand `command` of lmbench takes."""
    parser = build_parser([command])
    sub = next(action for action in parser._actions if action.dest == "command").choices[command]
    return {flag for action in sub._actions for flag in action.option_strings}


def full_disk(monkeypatch):
    from neural.training import weights_file

    def full(obj, out):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(weights_file, "write_into", full)  # (the model files' writer)
    return "no room to write", "the same command again"


def diverged(monkeypatch):
    from neural.training import trainer
    monkeypatch.setattr(trainer.torch, "isfinite", lambda t: trainer.torch.zeros_like(t, dtype=trainer.torch.bool))
    return "a parameter became NaN or inf", "diverged on this corpus"


@pytest.mark.parametrize("failure", (full_disk, diverged))
def test_a_network_row_stopped_under_reproduce_advises_what_reproduce_takes(tmp_path, capsys, monkeypatch, failure):
    """A network row stops (its checkpoint cannot be written for want of room; its parameters became NaN):
    the line's advice names only options of `reproduce` (they said "run again with --resume", "lower the
    learning rate (--lr)", options of `train`), and says what to do in reproduce's words; `train`'s line
    names train's options."""
    cause, advice = failure(monkeypatch)
    paths = write_splits(tmp_path, train=TEXT, valid="the cat sat on the log .", test="a dog sat .")
    code = main(["reproduce", "text", "--quick", "--only", "nplm", "--networks", "ours", "--name", "tiny",
                 "--threads", "1", "--work-dir", str(tmp_path / "work"), "--report-dir", str(tmp_path / "report"),
                 *[arg for split, path in paths.items() for arg in (f"--{split}", str(path))]])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and cause in err and advice in err, err
    advised = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", err))
    assert advised <= options_of("reproduce"), advised - options_of("reproduce")
    code, _, err = run_cli(capsys, "nplm", "train", *corpus_args(paths), *NETWORK, "--epochs", "1",
                           "--out", tmp_path / "run")
    advised = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", err))
    assert code == 2 and cause in err and advised and advised <= options_of("train"), err


def test_a_full_disk_with_room_to_spare_does_not_say_it_has_room(tmp_path, monkeypatch):
    """The system says "no space left" where the disk shows plenty free (a quota, a file-size limit, a
    filesystem full of inodes): the line does not claim "73 GiB free there" as if it were the room needed."""
    from lmbench import files
    monkeypatch.setattr(files.shutil, "disk_usage", lambda folder: shutil._ntuple_diskusage(2**40, 2**39, 2**39))
    failure = files.write_failure(tmp_path / "x.pt", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), written=10)
    line = str(failure)
    assert "free there" not in line and "512.0 GiB" in line and "quota" in line, line
    monkeypatch.setattr(files.shutil, "disk_usage", lambda folder: shutil._ntuple_diskusage(2**40, 2**40 - 5, 5))
    assert "5 bytes free there" in str(files.write_failure(tmp_path / "x.pt", OSError(errno.ENOSPC, "full"),
                                                           written=10))


@pytest.mark.parametrize("name", ("données", "a b"))
def test_a_name_outside_ascii_is_refused_as_what_it_is(capsys, name):
    code, _, err = run_cli(capsys, "reproduce", "text", "--name", name)
    assert code == 2 and "ASCII letters" in err


@pytest.mark.parametrize("command", (["eval", "RUN"], ["train", "--epochs", "1"], ["reproduce", "brown", "--quick"],
                                     ["report", "brown"]))
def test_a_deleted_working_directory_is_one_line(tmp_path, command):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from lmbench_cli import main; " \
             f"sys.exit(main({command!r}))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("lmbench: error: the working directory was deleted: cd to a folder that exists "
                                   "and run it again")

"""A work folder stands on its own (issue 67, item 4): `lmbench reproduce` keeps each n-gram row's model (a binary
model file of float64 values) and the corpus's vocabulary in the work folder, so that `lmbench.load(work, row=ID)`
of every row kind reads no corpus file and gives the row's own figures; a folder made before models were kept
is refitted where its corpus files are, refused in one line naming the missing file and the command that makes
it stand alone where they are not, and made to keep its models by running its command again. `lmbench score`
of an n-gram model loads no torch and says nothing about threads."""

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import quick_work_folder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A quick `reproduce text` of every n-gram row, MLP1 and the LSTM, its corpus files in corpus/."""
    return quick_work_folder(tmp_path_factory.mktemp("work"))


@contextlib.contextmanager
def corpus_moved(folder):
    """The corpus files gone from where corpus.json records them, for the block."""
    corpus = folder["root"] / "corpus"
    corpus.rename(folder["root"] / "corpus-moved")
    try:
        yield
    finally:
        (folder["root"] / "corpus-moved").rename(corpus)


def test_the_quick_run_holds_every_row_kind(folder):
    """(what the next tests load: a row of each n-gram method, networks, mixtures)"""
    kinds = {row["method"] if row["kind"] == "ngram" else row["kind"] for row in folder["rows"].values()
             if row.get("status") != "not run"}
    assert {"deleted-interpolation", "kneser-ney", "kneser-ney-backoff", "katz", "class", "infini-gram", "network",
            "mix"} <= kinds


def test_every_row_kind_loads_without_its_corpus_files(folder):
    """Each n-gram method's row and each network row (a window network, a stream network) gives the report's
    test perplexity with the corpus files moved away; a mixture is still refused in one line."""
    history = folder["texts"]["train"] + folder["texts"]["valid"]
    with corpus_moved(folder):
        for row_id, row in folder["rows"].items():
            if row.get("status") == "not run" or row["kind"] == "mix":
                continue
            model = lmbench.load(folder["work"], row=row_id)
            found = model.perplexity(folder["texts"]["test"], bos=False, eos=False, history=history)
            assert found == pytest.approx(row["test_ppl"], rel=1e-9), row_id
        mixture = next(row_id for row_id, row in folder["rows"].items() if row["kind"] == "mix")
        with pytest.raises(LMBenchError, match="no one saved model"):
            lmbench.load(folder["work"], row=mixture)


@pytest.fixture
def older(folder, tmp_path):
    """A copy of the work folder as a release before this one left it: no kept model, no vocabulary."""
    work = tmp_path / "older"
    shutil.copytree(folder["work"], work)
    shutil.rmtree(work / "ngram")
    (work / "vocab.json").unlink()
    return work


@pytest.mark.parametrize("row", ["kn-interp-5", "class-3-5", "mlp1"])
def test_an_older_folder_is_refitted_or_refused_in_one_line(folder, older, row):
    """With its corpus files: refitted (an n-gram row) or read over the corpus's vocabulary (a network), the
    row's figure. Without: one line naming the missing file and the command that makes the folder stand alone,
    not --train (which neither `load` nor `lmbench score` takes)."""
    if row not in folder["rows"]:
        row = next(r for r in folder["rows"] if r.startswith(row.split("-")[0] + "-"))
    history = folder["texts"]["train"] + folder["texts"]["valid"]
    model = lmbench.load(older, row=row)
    found = model.perplexity(folder["texts"]["test"], bos=False, eos=False, history=history)
    assert found == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-9)
    with corpus_moved(folder):
        with pytest.raises(LMBenchError) as refused:
            lmbench.load(older, row=row)
    message = str(refused.value)
    assert "\n" not in message and "train.txt" in message and "is missing" in message, message
    assert "lmbench reproduce" in message and "--train" not in message, message


def test_running_its_command_again_keeps_an_older_folders_models(folder, older):
    """The rows stay cached (their records untouched); each n-gram row is fitted again to keep its model, and the
    vocabulary is kept: then it loads without its corpus files."""
    records = {path.name: path.read_bytes() for path in (older / "rows").glob("*.json")}
    command = [*folder["command"]]
    command[command.index("--work-dir") + 1] = str(older)
    command[command.index("--report-dir") + 1] = str(older.parent / "report")
    assert main(command) == 0
    assert {path.name: path.read_bytes() for path in (older / "rows").glob("*.json")} == records
    ngram_rows = [row_id for row_id, row in folder["rows"].items() if row["kind"] == "ngram"]
    assert len(list((older / "ngram").glob("*.lmb"))) == len(ngram_rows) and (older / "vocab.json").is_file()
    with corpus_moved(folder):
        lmbench.load(older, row="kn-interp-5")
        lmbench.load(older, row="lstm")


CLI = ("import atexit, sys; from lmbench_cli import main; atexit.register(lambda: print('torch', 'torch' in "
       "sys.modules)); sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("row, network", [("kn-interp-5", False), ("mlp1", True)])
def test_score_says_threads_and_loads_torch_only_for_a_network(folder, tmp_path, row, network):
    text = tmp_path / "lines.txt"
    text.write_text("w1 w2 w3\n")
    done = subprocess.run([sys.executable, "-c", CLI, "score", str(folder["work"]), "--row", row, str(text)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert ("threads:" in done.stderr) == network, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"torch {network}", done.stdout

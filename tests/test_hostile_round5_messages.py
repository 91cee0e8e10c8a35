"""Issue 69, item 11: what a resume takes, and lines that advised what the command does not have.

`train --resume` compared the run with every option's default, given or not: a run trained with --seed 3, bf16
products or another objective was refused ("--seed 0: ... resume with --seed 3") unless each was given again,
and a 1-epoch run resumed without --epochs trained to the default 40 (the halving rule's "at most"). A
resumed run now takes the run's own options, those given excepted (`neural.cli._run_config`), the line of one
given that differs unchanged. A comparison's stream network on a training text too short for its lanes was
refused with `--batch-size`, an option `reproduce` does not have; `lmbench.load` of a row's training folder
advised running reproduce again "which writes" a corpus.json it never writes there; an ARPA file of <unk>
alone said "(1 words, e.g. )"; one starting with a UTF-8 byte order mark was "no ARPA file".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import corpus_args, write_splits
from tests.test_faults import error_line
from tests.test_hostile_round3_outputs import TINY, tiny_corpus

NETWORK = TINY[:6]  # --n 3 --m 4 --h 5
MACHINE = ["--device", "cpu", "--threads", "1"]
# Runs whose every option a resume compares differs from its default: resumed with none of them given, each
# must go on as it was started (how it goes on, RESUMED_AS_GIVEN, is the command's).
RUNS = {
    "sgd": [*NETWORK, "--seed", "3", "--precision", "bf16", "--objective", "nce", "--samples", "7", "--lr", "0.5",
            "--min-gain", "0.01", "--anneal-gain", "0.5", "--weight-decay", "0.01", "--dropout", "0.1",
            "--valid-tokens", "50", "--epochs", "1", "--batch-size", "7"],
    "paper": [*NETWORK, "--recipe", "paper", "--patience", "3", "--objective", "class", "--classes", "4",
              "--class-source", "exchange", "--epochs", "1", "--seed", "5"],
    "linear": [*NETWORK, "--schedule", "linear", "--budget-updates", "6", "--epochs", "2", "--objective", "softmax"],
    "lstm": ["--model", "lstm", "--layers", "1", "--m", "4", "--h", "4", "--steps", "5", "--warmup-steps", "5",
             "--clip", "0.5", "--final-lr-fraction", "0.5", "--epochs", "1", "--batch-size", "4", "--seed", "2"],
}
GOES_ON = ("device", "threads", "backend", "parallel", "checkpoint_minutes", "max_steps")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tiny_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_resume_takes_the_runs_own_options_when_none_is_given(files, tmp_path, run, capsys):
    """Before: refused ("--seed 0: the run ... was trained with --seed 3", "--precision fp32", "--objective
    importance", ...), or (a 1-epoch run) trained to the default 40 epochs."""
    from neural.training.checkpoint import CHECKPOINT, saved_config
    out = tmp_path / "run"
    assert main(["train", *corpus_args(files), *RUNS[run], *MACHINE, "--max-steps", "1", "--out", str(out)]) == 0
    started = saved_config(out / CHECKPOINT)
    capsys.readouterr()
    code = main(["train", *MACHINE, "--out", str(out), "--resume"])
    err = capsys.readouterr().err
    assert code == 0, err.splitlines()[-1:]
    finished = json.loads((out / "result.json").read_text())
    config = finished["config"]
    assert {key: value for key, value in config.items() if key not in GOES_ON} == \
        {key: value for key, value in started.items() if key not in GOES_ON}
    assert finished["epochs"] <= started["epochs"]


def test_a_resume_by_the_default_folder_takes_the_runs_options(files, tmp_path, monkeypatch, capsys):
    """The run found by its default folder's name (runs/MODEL-CORPUS-SHAPE-RECIPE-OBJECTIVE-sSEED): its options
    that the name does not hold (bf16 products, here) were compared with their defaults, and refused."""
    monkeypatch.chdir(tmp_path)
    given = ["train", *corpus_args(files), *NETWORK, *MACHINE, "--seed", "3"]
    assert main([*given, "--precision", "bf16", "--epochs", "1", "--max-steps", "1"]) == 0
    capsys.readouterr()
    code = main([*given, "--resume"])
    err = capsys.readouterr().err
    assert code == 0, err.splitlines()[-1:]
    (result,) = Path("runs").glob("*/result.json")
    assert json.loads(result.read_text())["config"]["precision"] == "bf16" and "-s3" in result.parent.name


def test_an_option_given_on_resume_is_still_compared(files, tmp_path, capsys):
    """What the run cannot change, given otherwise, is refused as before, naming the option given (every option:
    tests/test_hostile_round3_outputs.py)."""
    out = tmp_path / "run"
    assert main(["train", *corpus_args(files), *RUNS["sgd"], *MACHINE, "--max-steps", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    for option, value, was in (("--seed", "0", "--seed 3"), ("--precision", "fp32", "--precision bf16"),
                               ("--objective", "importance", "--objective nce")):
        line = error_line(capsys, ["train", *MACHINE, "--out", str(out), "--resume", option, value])
        assert f"{option} {value}:" in line and f"trained with {was}" in line, line


SHORT = {"train": "a b c d e " * 8, "valid": "a b c d e " * 6, "test": "e d c b a " * 6}  # 40 training tokens


def reproduce_options() -> set[str]:
    from lmbench_cli import build_parser
    parser = build_parser(["reproduce"])
    reproduce = next(action for action in parser._actions if hasattr(action, "choices") and isinstance(
        action.choices, dict) and "reproduce" in action.choices).choices["reproduce"]
    return {option for action in reproduce._actions for option in action.option_strings}


@pytest.mark.parametrize("quick", [False, True])
def test_a_training_text_too_short_for_a_stream_networks_lanes_is_refused_in_reproduces_words(tmp_path, capsys,
                                                                                              quick):
    """`reproduce text` on 40 training tokens with the LSTM: "give fewer --batch-size (the lanes)", an option
    of `lmbench train`, not of reproduce; the line now names reproduce's own options only (its pace measured
    first in a full run; trained at once in a quick one), and how long the text must be."""
    (tmp_path / "corpus").mkdir()
    paths = write_splits(tmp_path / "corpus", **SHORT)
    line = error_line(capsys, ["reproduce", "text", *corpus_args(paths)[2:], "--networks", "lstm", "--threads", "1",
                               *(["--quick"] if quick else []), "--work-dir", str(tmp_path / "w"),
                               "--report-dir", str(tmp_path / "r")])
    named = set(re.findall(r"--[a-z][a-z-]*", line))
    assert re.search(r"\d+ lanes .*: \d+ tokens at least\)", line) and "--networks" in named, line
    assert named <= reproduce_options(), (named - reproduce_options(), line)


def test_train_on_a_text_too_short_for_its_lanes_names_its_own_option(tmp_path, capsys):
    paths = write_splits(tmp_path, **SHORT)
    line = error_line(capsys, ["train", *corpus_args(paths), "--model", "lstm", "--m", "4", "--h", "4", *MACHINE,
                               "--epochs", "1", "--out", str(tmp_path / "run")])
    assert "--batch-size" in line and "98 tokens" in line, line


def work_folder(root: Path) -> Path:
    """A work folder's shape: rows/mlp1.json and the row's training folder (its model file's name)."""
    (root / "rows").mkdir(parents=True)
    (root / "rows" / "mlp1.json").write_text(json.dumps({"id": "mlp1", "kind": "network", "fingerprint": "0a1b"}))
    (root / "nplm" / "mlp1-0a1b").mkdir(parents=True)
    (root / "nplm" / "mlp1-0a1b" / "best.safetensors").write_bytes(b"")
    return root


def test_a_folder_without_its_corpus_record_says_what_writes_one(tmp_path):
    """A row's training folder advised "run its lmbench reproduce command again ..., which writes it": reproduce
    writes corpus.json in the work folder, never there; the line now sends to the work folder's row. A work
    folder (reproduce writes it) and a train run folder (lmbench train --out writes it) each get their own."""
    work = work_folder(tmp_path / "work")
    lines = {}
    for name, folder, row in (("training", work / "nplm" / "mlp1-0a1b", None), ("work", work, "mlp1"),
                              ("run", work / "nplm" / "mlp1-0a1b", None)):
        if name == "run":
            (work / "rows" / "mlp1.json").unlink()  # (no longer a row of a work folder: a run folder alone)
        with pytest.raises(LMBenchError) as err:
            lmbench.load(folder, row=row)
        lines[name] = str(err.value)
        assert "\n" not in lines[name]
    assert f"row='mlp1'" in lines["training"] and str(work) in lines["training"], lines["training"]
    assert "which writes it" not in lines["training"], lines["training"]
    assert "lmbench reproduce" in lines["work"] and "lmbench train" not in lines["work"], lines["work"]
    assert "lmbench train --out" in lines["run"] and "reproduce" not in lines["run"], lines["run"]


ARPA = "\\data\\\nngram 1={count}\n\n\\1-grams:\n{unigrams}\n\\end\\\n"


def test_an_arpa_file_of_few_words_is_named_as_it_is(tmp_path):
    """A model of <unk> alone: "(1 words, e.g. )"; of one word: "(2 words, e.g. a)"; an ARPA file without <unk>
    over one word: "lacks <unk> and 1 words" (the one lacked was <unk> itself)."""
    alone, one, without = tmp_path / "alone.arpa", tmp_path / "one.arpa", tmp_path / "without.arpa"
    alone.write_text(ARPA.format(count=1, unigrams="0\t<unk>\n"))
    one.write_text(ARPA.format(count=2, unigrams="-0.30103\t<unk>\n-0.30103\ta\n"))
    without.write_text(ARPA.format(count=1, unigrams="0\ta\n"))
    lines = []
    for path in (alone, one):
        model = lmbench.load(path)
        for call in (lambda: model.generate(3, text_seed="zz"), lambda: model.next_words("zz")):
            with pytest.raises(LMBenchError) as err:
                call()
            lines.append(str(err.value))
    assert all("e.g. )" not in line and "1 words" not in line for line in lines), lines
    assert "none but <unk>" in lines[0] and "1 word besides <unk>, e.g. a" in lines[2], lines
    assert repr(lmbench.load(alone)).count("1 word,") == 1
    with pytest.raises(LMBenchError) as err:
        lmbench.load(without)
    assert "lacks <unk>:" in str(err.value) and "1 words" not in str(err.value), str(err.value)


def test_an_arpa_file_with_a_utf8_byte_order_mark_reads_as_without(tmp_path, capsys):
    """Written by an editor that puts a byte order mark first (Notepad): "no ARPA file (its first line is not
    \\data\\)". Now the same model, by the API and by `lmbench score`."""
    text = ARPA.format(count=3, unigrams="-0.30103\t<unk>\n-0.60206\ta\n-0.60206\tb\n")
    plain, marked = tmp_path / "plain.arpa", tmp_path / "marked.arpa"
    plain.write_text(text, encoding="utf-8")
    marked.write_text(text, encoding="utf-8-sig")
    assert marked.read_bytes()[:3] == b"\xef\xbb\xbf"
    models = [lmbench.load(path) for path in (plain, marked)]
    assert models[0].vocab.words == models[1].vocab.words == ["<unk>", "a", "b"]
    assert models[0].score("a b a") == models[1].score("a b a") < 0
    sentences = tmp_path / "s.txt"
    sentences.write_text("a b a\nb b\n")
    printed = []
    for path in (plain, marked):
        assert main(["score", str(path), str(sentences)]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and printed[0].count("\n") == 4

"""Hostile inputs, third round (issue 53): outputs through links and onto a run's files, a run's record
made false, and the second round's leftovers; each class walked over every command and option it
concerns, as tests/test_hostile_classes.py walks the second round's.

- Leftovers: a test split of five tokens through the whole pipeline (`reproduce text`, what `make
  compare` runs); an output name with no room for the names made from it (refused as it is parsed) and
  the temporary names of the atomic writers (short whatever the file's); a count of a run's length of 0;
  progress bars (no module draws one of its own, and none writes a carriage return into a log).
- Outputs through links: every output file option given a link writes the link's target (the link
  kept), and given a descriptor of the process (/dev/stdout, /dev/fd/N, a link to /proc/self/fd/N)
  writes through it; every output of a command given a run folder is refused on every file of the run
  and every corpus file its corpus.json names, the file as it was.
- A run's record: a train refused because another process trains in --out leaves the run's corpus.json
  as it was; --resume with an option or a corpus option other than the run's is refused naming it;
  --resume on a folder without a run is refused, nothing made there.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from lmbench.files import atomic_write_text, folder_held, replaced_folder
from tests.helpers import corpus_args, write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile_classes import (ALL, OUTPUTS, kind, of_kind, options, place,  # noqa: F401 (place: a fixture)
                                        with_value)
from lmbench_cli import main

ROOT = Path(__file__).resolve().parents[1]
TRAIN_COMMANDS = ("train", "nplm train")
EVAL_COMMANDS = ("eval", "nplm eval")
TINY = ["--n", "3", "--m", "4", "--h", "5", "--device", "cpu", "--threads", "1"]


def tiny_corpus(folder: Path, test: str | None = None) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return write_splits(folder, train=zipf_text(2000, 40, 1), valid=zipf_text(300, 40, 2),
                        test=zipf_text(300, 40, 3) if test is None else test)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny run (best.safetensors, checkpoint.safetensors, corpus.json, log.jsonl, result.json, logprobs.npz)
    and its corpus files."""
    root = tmp_path_factory.mktemp("trained")
    files = tiny_corpus(root / "corpus")
    run = root / "run"
    assert main(["train", *corpus_args(files), *TINY, "--epochs", "1", "--out", str(run)]) == 0
    return run, files


def snapshot(*folders: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for folder in folders for p in sorted(Path(folder).rglob("*")) if p.is_file()}


# --- the second round's leftovers ------------------------------------------------------------------------

def test_a_five_token_test_set_gives_a_report_without_intervals(tmp_path, capsys, monkeypatch):
    """`split_interval` gave None to the test half-widths of the grouping: a traceback after every row ran."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = tiny_corpus(tmp_path / "corpus", test="w0 w1 w2 w0 w1")
    code = main(["reproduce", "text", *corpus_args(files)[2:], "--only", "ngram", "--work-dir", str(tmp_path / "w"),
                 "--report-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    scored = [row for row in results["rows"] if row.get("test_ppl") is not None]
    assert scored and all(row["test_ppl_ci95"] is None for row in scored)


LONG = "n" * 250  # with NAME.sha256 or NAME-quick past the system's 255 bytes
NAMES = [*(p for p in OUTPUTS), *(pytest.param(command, name, action, id=f"{command} {name}")
                                   for command, name, action in ALL if name == "--name")]


@pytest.mark.parametrize("command, name, action", NAMES)
def test_every_output_name_leaves_room_for_the_names_made_from_it(place, capsys, command, name, action):
    value = LONG if name == "--name" else str(place["root"] / LONG)
    line = error_line(capsys, with_value(command, name, action, value, place))
    assert name in line and "250" in line, line
    assert not (place["root"] / LONG).exists()


@pytest.mark.parametrize("name", ["x" * 255, "x" * 250 + ".json", "y" * 251 + ".npz", "z" * 200 + "." + "s" * 54])
def test_an_atomic_write_takes_any_name_the_system_takes(tmp_path, name):
    """The temporary name was the name plus `.tmpPID`: past 255 bytes for a name the system takes."""
    atomic_write_text(tmp_path / name, "kept")
    assert (tmp_path / name).read_text() == "kept" and [p.name for p in tmp_path.iterdir()] == [name]
    with replaced_folder(tmp_path / ("d" * 255)) as stage:
        atomic_write_text(stage / "table.md", "a table")
    assert (tmp_path / ("d" * 255) / "table.md").read_text() == "a table"


RUN_LENGTHS = ("--epochs", "--max-steps", "--budget-updates", "--patience", "--valid-tokens", "--steps")


@pytest.mark.parametrize("command, name, action", [p for p in of_kind("numeric") if p.values[0] in TRAIN_COMMANDS
                                                   and p.values[1] in RUN_LENGTHS])
def test_no_count_of_a_runs_length_takes_zero(place, capsys, command, name, action):
    """`--max-steps 0` was taken where `--epochs 0` is refused."""
    line = error_line(capsys, with_value(command, name, action, "0", place))
    assert name in line and "got 0" in line


def test_no_module_draws_a_progress_bar_of_its_own():
    """A tqdm bar of its own (the n-grams on disk, the exchange clustering, AP's files, the Transformer's
    scoring) wrote carriage returns into a log that is no terminal: every bar goes through
    lmbench.progress, which writes plain lines there."""
    drawn = [f"{path.relative_to(ROOT)}:{number}" for package in ("lmbench", "corpora", "baselines", "neural", "mixing",
                                                                  "reports", "lmbench_cli")
             for path in sorted((ROOT / package).rglob("*.py")) if path != ROOT / "lmbench" / "progress.py"
             for number, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\btqdm\b", line)]
    assert not drawn, f"draw these bars with lmbench.progress.progress_bar: {drawn}"


@pytest.mark.parametrize("method", [["--method", "class", "--classes", "3"],
                                    ["--method", "kneser-ney", "--order", "3", "--memory", "1"]])
def test_a_bar_writes_no_carriage_return_into_a_log(tmp_path, capsys, monkeypatch, method):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = tiny_corpus(tmp_path)
    assert main(["ngram", *method, *corpus_args(files)]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err


# --- outputs through links, onto a run's files ---------------------------------------------------------------

def output_command(command: str, name: str, trained, files: dict, target: Path) -> list[str]:
    """A command that writes its output file option `name` to `target` (a command without one here fails)."""
    run, _ = trained
    ngram = ["ngram", "--method", "kneser-ney", "--order", "2", *corpus_args(files)]
    if command == "build-binary":  # its output is its second positional, after an ARPA file of the corpus
        arpa = Path(files["train"]).parent / "model.arpa"
        assert main([*ngram, "--arpa", str(arpa)]) == 0
        return ["build-binary", str(arpa), str(target)]
    commands = {"ngram": ngram, "eval": ["eval", str(run), "--device", "cpu", "--threads", "1"],
                "nplm eval": ["nplm", "eval", str(run), "--device", "cpu", "--threads", "1"]}
    return [*commands[command], name, str(target)]


FILE_OUTPUTS = of_kind("output")


@pytest.mark.parametrize("command, name, action", FILE_OUTPUTS)
def test_an_output_through_a_link_writes_where_the_link_points(trained, tmp_path, capsys, monkeypatch, command, name,
                                                               action):
    """`--arpa link.arpa` replaced the link with a file and left its target unwritten."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = tiny_corpus(tmp_path / "corpus")
    (tmp_path / "elsewhere").mkdir()
    for existing in (False, True):
        target = tmp_path / "elsewhere" / f"target{int(existing)}.npz"
        if existing:
            target.write_bytes(b"old")
        link = tmp_path / f"link{int(existing)}.npz"
        link.symlink_to(target)
        assert main(output_command(command, name, trained, files, link)) == 0, capsys.readouterr().err
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert target.is_file() and target.stat().st_size > 3
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["target0.npz", "target1.npz"]


@pytest.mark.parametrize("command, words", [(["corpus", "text"], ["--write-text"]),
                                           (["train"], [*TINY, "--epochs", "1", "--out"])])
def test_an_output_folder_through_a_link_is_filled_where_the_link_points(tmp_path, capsys, command, words):
    files = tiny_corpus(tmp_path / "corpus")
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    corpus = corpus_args(files)
    assert main([*command, *(corpus[2:] if command[0] == "corpus" else corpus), *words, str(link)]) == 0
    assert link.is_symlink() and sorted(p.name for p in link.iterdir()) == sorted(
        p.name for p in (tmp_path / "elsewhere").iterdir()) and any((tmp_path / "elsewhere").iterdir())


@pytest.mark.parametrize("command, name, action", FILE_OUTPUTS)
def test_an_output_onto_a_descriptor_is_written_through_it(trained, tmp_path, capsys, monkeypatch, command, name,
                                                           action):
    """`--arpa /dev/stdout` replaced the system's /dev/stdout link with a regular file: a descriptor of the
    process (/dev/fd/N, a link to /proc/self/fd/N) is written through, after what was written before."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = tiny_corpus(tmp_path / "corpus")
    for how in ("/dev/fd", "a link"):
        real = tmp_path / f"real-{how[-2:]}"
        handle = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(handle, b"before\n")
            path = Path(f"/dev/fd/{handle}")
            if how == "a link":
                path = tmp_path / "to-the-descriptor"
                path.symlink_to(f"/proc/self/fd/{handle}")
            assert main(output_command(command, name, trained, files, path)) == 0, capsys.readouterr().err
        finally:
            os.close(handle)
        assert real.read_bytes().startswith(b"before\n") and real.stat().st_size > 100
        assert how != "a link" or path.is_symlink()
    assert os.path.islink("/dev/stdout")


def run_files(trained) -> dict[str, Path]:
    run, files = trained
    found = {p.name: p for p in sorted(run.iterdir()) if p.is_file()}
    assert {"best.safetensors", "checkpoint.safetensors", "corpus.json", "log.jsonl", "result.json"} <= set(found)
    return {**found, "its train file": files["train"].resolve(), "its test file": files["test"].resolve()}


@pytest.mark.parametrize("command, name, action", [p for p in FILE_OUTPUTS if p.values[0] in EVAL_COMMANDS])
def test_no_output_of_a_command_given_a_run_lands_on_a_file_of_the_run(trained, tmp_path, capsys, command, name,
                                                                       action):
    """`eval RUN --save-logprobs` over the test file the run's corpus.json names, or over RUN/corpus.json,
    result.json, log.jsonl, overwrote them (only best.pt and checkpoint.pt, now best.safetensors and checkpoint.safetensors, were kept off): refused, named,
    directly or through a link, every file as it was."""
    run, files = trained
    before = snapshot(run, files["train"].parent)
    for what, path in run_files(trained).items():
        link = tmp_path / f"link-{path.name}"
        link.symlink_to(path)
        for target in (path, link):
            words = [*command.split(), str(run), "--device", "cpu", "--threads", "1", name, str(target)]
            line = error_line(capsys, words)
            assert name in line and path.name in line and "overwrite" in line, (what, line)
    assert snapshot(run, files["train"].parent) == before


# --- a run's record ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", TRAIN_COMMANDS)
def test_a_train_refused_as_another_is_training_leaves_the_runs_record(trained, tmp_path, capsys, command):
    """A second `train --out X` refused as "another process is training" had already rewritten
    X/corpus.json: `eval X` then scored another test file."""
    trained_run, _ = trained
    other = write_splits(tmp_path, train=zipf_text(2000, 30, 7), valid=zipf_text(300, 30, 8), test=zipf_text(300, 30, 9))
    run = tmp_path / "busy"  # a run in its first minutes: its record written, no checkpoint yet
    run.mkdir()
    (run / "corpus.json").write_bytes((trained_run / "corpus.json").read_bytes())
    before = snapshot(run)
    with folder_held(run, "held by the test"):
        line = error_line(capsys, [*command.split(), *corpus_args(other), *TINY, "--epochs", "1", "--out", str(run)])
    assert "another process is training" in line, line
    assert snapshot(run) == before


@pytest.fixture(scope="module")
def paused(tmp_path_factory):
    """A tiny run paused after 2 updates (a checkpoint, its corpus.json), its corpus, and other corpus
    files (other content) for every file option."""
    root = tmp_path_factory.mktemp("paused")
    files = tiny_corpus(root / "corpus")
    other = tiny_corpus(root / "other", test=zipf_text(300, 40, 11))
    (root / "other" / "valid.txt").write_text(zipf_text(300, 40, 12))
    (root / "other" / "train.txt").write_text(zipf_text(2000, 40, 13))
    whole = root / "all.txt"
    whole.write_text("\n".join(zipf_text(20, 40, i) for i in range(50)))
    run = root / "run"
    assert main(["train", *corpus_args(files), *TINY, "--epochs", "1", "--max-steps", "2", "--out", str(run)]) == 0
    return run, files, other, whole, root


# Each run option of `train` (neural.config.RunConfig's) with a value other than the paused run's (nplm, sgd,
# importance, halving); "trained with": refused by the check of a resume; else refused before it, naming the
# option (one the run's recipe or objective has no use for). The families' options: `shape_options`.
OTHER_VALUES = {"--model": ["energy"], "--recipe": ["paper"], "--objective": ["softmax"], "--samples": ["7"],
                "--lr": ["0.5"], "--min-gain": ["0.01"], "--anneal-gain": ["0.5"], "--schedule": ["linear"],
                "--weight-decay": ["0.01"], "--dropout": ["0.1"], "--patience": ["3"], "--valid-tokens": ["5"],
                "--seed": ["1"], "--precision": ["bf16"], "--budget-updates": ["3"], "--batch-size": ["7"],
                "--classes": ["4"], "--class-source": ["exchange"], "--steps": ["5"], "--warmup-steps": ["5"],
                "--clip": ["0.5"], "--final-lr-fraction": ["0.5"]}
CHECKED = {"--model", "--recipe", "--objective", "--samples", "--lr", "--min-gain", "--anneal-gain", "--schedule",
           "--weight-decay", "--dropout", "--patience", "--valid-tokens", "--seed", "--precision"}


def shape_options(*names: str) -> dict[str, list[str]]:
    """The options of the registered families `names` (default: every one), the fields of their shapes (what
    the network is: a resume compares the shape whole), each under the name `train` gives it (a flag's last
    spelling, --no-NAME) with the words that give it a value other than the paused run's (an NPLM in TINY's
    shape); an option of another family is refused whatever its value."""
    from dataclasses import fields
    from neural.config import RunConfig
    from neural.families import FAMILIES, option_name
    run = RunConfig(n=3, m=4, h=5).shape
    given = {}
    for entry in (FAMILIES[name] for name in names or FAMILIES):
        for f in fields(entry.shape):
            value, flag = getattr(run, f.name, f.default), "--" + option_name(f.name)
            if isinstance(value, bool):
                given[f"--no-{flag[2:]}"] = [f"--no-{flag[2:]}" if value else flag]
            else:
                given[flag] = [flag, str(value + 1 if isinstance(value, int) else value)]
    return given


# How a resumed run goes on, not what it trains: may differ (--epochs: "at most", under the halving rule)
MAY_DIFFER = {"--epochs", "--max-steps", "--checkpoint-minutes", "--device", "--threads", "--parallel", "--backend",
              "--nproc-per-node", "--nnodes", "--rdzv-endpoint", "--json", "--no-cache", "--out", "--resume"}


def corpus_other_values(files, other, whole) -> dict[str, list[str]]:
    return {"--corpus": ["brown"], "--train": [str(other["train"])], "--valid": [str(other["valid"])],
            "--test": [str(other["test"])], "--corpus-file": [str(whole)], "--corpus-split": ["0.7,0.2,0.1"],
            "--min-count": ["1"], "--vocab-from": ["train"], "--ap-dir": [str(files["train"].parent)],
            "--vocab-size": ["20"], "--skip-bad-files": []}


def test_every_option_of_train_is_classified_for_resume(paused):
    corpus = corpus_other_values(*paused[1:4])
    unknown = [name for command, name, _ in options() if command == "train"
               and name not in {*OTHER_VALUES, *shape_options(), *MAY_DIFFER, *corpus}]
    assert not unknown, f"classify these options of train for --resume (tests/test_hostile_round3_outputs.py): {unknown}"


@pytest.mark.parametrize("command", TRAIN_COMMANDS)
def test_a_resume_with_another_option_than_the_runs_is_refused(paused, capsys, command):
    """`--resume` with another --seed, --lr or --valid was accepted and recorded as if the run had used them
    from the start."""
    run, files, other, whole, _ = paused
    before = snapshot(run)
    base = [*command.split(), "--n", "3", "--m", "4", "--h", "5", "--device", "cpu", "--threads", "1", "--epochs", "1",
            "--out", str(run), "--resume"]
    checked = CHECKED | set(shape_options("nplm"))  # the run's family's options: "trained with"
    for option, value in {**{option: [option, *value] for option, value in OTHER_VALUES.items()},
                          **shape_options()}.items():
        words = list(base)
        if value[0] in words:  # (TINY's --n 3: the other value instead)
            at = words.index(value[0])
            del words[at: at + 2]
        line = error_line(capsys, [*words, *corpus_args(files), *value])
        assert option.replace("--no-", "--") in line, (option, line)  # (--no-tied: --tied)
        assert option not in checked or "trained with" in line, (option, line)
    for option, value in corpus_other_values(files, other, whole).items():
        if option in ("--train", "--valid", "--test"):
            words = [*base, *corpus_args({**files, option[2:]: value[0]})]
        elif option in ("--min-count", "--vocab-size"):
            words = [*base, *corpus_args(files), option, *value]
        else:
            words = [*base, option, *value]
        line = error_line(capsys, words)
        assert option in line and "trained with" in line, (option, line)
    assert snapshot(run) == before


@pytest.mark.parametrize("command", TRAIN_COMMANDS)
def test_a_resume_of_a_folder_without_a_run_is_refused(tmp_path, capsys, command):
    """`--resume` on a mistyped folder, no corpus option given, silently started a new Brown run there."""
    for folder in (tmp_path / "mistyped", tmp_path):
        line = error_line(capsys, [*command.split(), *TINY, "--out", str(folder), "--resume"])
        assert "--resume" in line and str(folder) in line and "no run" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output", [[], ["--arpa", "/dev/stdout"]])
def test_a_reader_gone_from_stdout_ends_in_one_line_or_quietly(tmp_path, output):
    """`--arpa /dev/stdout | head`: the reader gone, the summary's print ended in a BrokenPipeError
    traceback; an output written through the pipe is one line, the summary stops quietly (141, as cat)."""
    import subprocess
    import sys
    files = tiny_corpus(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), LMBENCH_CACHE=str(tmp_path / "cache"))
    read, write = os.pipe()
    os.close(read)  # a reader gone before the first byte
    try:
        done = subprocess.run([sys.executable, "-m", "lmbench_cli", "ngram", "--method", "kneser-ney", "--order", "2",
                               *corpus_args(files), *output], stdout=write, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=ROOT, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr, done.stderr
    if output:
        errors = [line for line in done.stderr.splitlines() if line.startswith("lmbench: error:")]
        assert done.returncode == 2 and len(errors) == 1 and "/dev/stdout" in errors[0], done.stderr
    else:
        assert done.returncode == 141


@pytest.mark.parametrize("command", TRAIN_COMMANDS)
def test_a_refused_train_writes_no_record_into_a_run_without_one(trained, tmp_path, capsys, command):
    """A run from before the records (a checkpoint, no corpus.json): a train there without --resume (refused:
    the folder holds a run), or resumed on another vocabulary (refused), wrote a corpus.json of the other
    corpus first, which `eval` would then believe."""
    trained_run, _ = trained
    other = write_splits(tmp_path, train=zipf_text(2000, 30, 7), valid=zipf_text(300, 30, 8), test=zipf_text(300, 30, 9))
    run = tmp_path / "old-run"
    run.mkdir()
    for name in ("checkpoint.safetensors", "best.safetensors"):
        (run / name).write_bytes((trained_run / name).read_bytes())
    for resume, refused in (([], "already holds a run"), (["--resume"], "another vocabulary")):
        line = error_line(capsys, [*command.split(), *corpus_args(other), *TINY, "--epochs", "1", "--out", str(run),
                                   *resume])
        assert refused in line, line
        assert sorted(p.name for p in run.iterdir()) == ["best.safetensors", "checkpoint.safetensors"]

"""Hostile inputs, second round (issue 46): each class of hostile input closed for every option of every
command, each case ending in one `lmbench: error:` line (exit 2) with nothing written and every input as
it was.

The table-driven tests walk the `lmbench` parser itself (`options()`): every option of every subcommand
is classified by its type (`kind`), and an option of a type this file does not know fails
`test_every_option_is_classified`, so that an option added later is covered by the tests of its kind:
- numeric: bounded from both sides (its type records `bounds`), and a value past either bound, NaN,
  infinity or 1e400 is refused as the option is parsed;
- paths: a loop of symbolic links, a name over 255 bytes, a path over 4096, a path under a loop are
  refused as they are parsed;
- outputs: an output file that is a link to a corpus file, an output folder holding a corpus file, is
  refused before any corpus is prepared (folders of temporary files only, TEMPORARY, excepted);
- corpus files: the same file as two splits is refused before any corpus is prepared.
Then one test per remaining item: a long token's memory, results.json's blocks against its perplexities,
intervals on too few blocks, `mix` of two files of one name, ARPA values, a report folder replaced
whole, line cutting, a binary file, the <unk> warning of every command.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from lmbench.errors import LMBenchError
from lmbench_cli import build_parser, main
from tests.helpers import corpus_args, write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile import files_fail_after

ROOT = Path(__file__).resolve().parents[1]

PATH_TYPES = {"existing_file": "input", "text_file": "input", "existing_directory": "input folder", "examined_path": "input folder",
              "output_file": "output", "output_directory": "output folder"}
TEXT_TYPES = {"comma_list.<locals>.parse", "row_ids", "folder_name", "str", "_budget"}  # names, lists, a budget
FREE_TEXT = {"words", "device", "rdzv_endpoint", "seed_text", "row", "cluster"}  # options of any text (checked where
# they are used: torch, torchrun, Ray's address by reports.running.cluster.check_address)
TEMPORARY = {"--tmp-dir"}  # output folders of temporary files only (a folder of their own, removed): no input at risk
CORPUS_FILES = ("--train", "--valid", "--test", "--corpus-file")
# what each subcommand needs first (positionals, a required option); {dir}: a run folder, {npz}: log-probabilities
POSITIONALS = {"corpus": ["text"], "ngram": ["--method", "kneser-ney"], "nplm train": [], "nplm eval": ["{dir}"],
               "train": [], "eval": ["{dir}"],
               "nplm neighbors": ["{dir}", "w1"], "mix": ["{npz}"], "reproduce": ["text"], "report": ["text"],
               "score": ["{dir}", "{text}"], "generate": ["{dir}"],
               "build-binary": ["{text}", "{npz}"]}  # {text}: a text file (build-binary: its ARPA file, then its OUT)


def subcommands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, parser) of every subcommand at any depth."""
    found = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not found:
        yield words, parser
    for action in found:
        for name, sub in action.choices.items():
            yield from subcommands(sub, (*words, name))


def kind(action: argparse.Action) -> str | None:
    """numeric, path (input, input folder, output, output folder), text, flag; None: unknown."""
    kind_of = action.type
    if kind_of is None:
        return "flag" if action.nargs == 0 else ("text" if action.choices is not None or action.dest in FREE_TEXT
                                                   else None)
    if kind_of in (int, float):
        return "unbounded number"
    if hasattr(kind_of, "bounds"):
        return "numeric"
    name = getattr(kind_of, "__qualname__", "")
    return PATH_TYPES.get(name) or ("text" if name in TEXT_TYPES else None)


def options():
    """(command, option, action) of every option and positional of every subcommand (help and the
    subcommand choice itself left out)."""
    for words, parser in subcommands(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            name = action.option_strings[-1] if action.option_strings else action.dest
            if words[-1:] in (("corpus",), ("reproduce",), ("report",)) and name == "corpus":
                continue  # the corpus's name: a choice
            yield " ".join(words), name, action


ALL = list(options())


def of_kind(*kinds: str) -> list:
    return [pytest.param(command, name, action, id=f"{command} {name}") for command, name, action in ALL
            if kind(action) in kinds]


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A corpus, a run folder, a log-probability file, and preparing a corpus or running a pipeline made
    to fail the test: what is refused must be refused before."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2), test=zipf_text(60, 20, 3))
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.safetensors").write_bytes(b"a model")
    npz = tmp_path / "a.npz"
    np.savez(npz, valid=np.full(3, -1.0), test=np.full(3, -1.0))

    def prepared(*args, **kwargs):
        raise AssertionError("a corpus was prepared (or a pipeline run) before the refusal")
    for target in ("corpora.cli.load_corpus", "corpora.cli.load_options", "neural.cli.load_corpus",
                   "neural.cli.load_options", "reports.running.pipeline.reproduce", "reports.building.build.build_report"):
        monkeypatch.setattr(target, prepared)
    return {"files": files, "dir": run, "npz": npz, "root": tmp_path}


def base(command: str, place: dict) -> list[str]:
    return [*command.split(), *(word.format(dir=place["dir"], npz=place["npz"], text=place["files"]["test"])
                                for word in POSITIONALS[command])]


def with_value(command: str, name: str, action, value: str, place: dict) -> list[str]:
    """The command's words with `name` given `value` (a positional replaced in place)."""
    words = base(command, place)
    if action.option_strings:
        return [*words, name, value]
    positional = POSITIONALS[command].index({"dir": "{dir}", "model": "{dir}", "file": "{text}", "arpa": "{text}"}.get(
        name, "{npz}"))
    words[len(command.split()) + positional] = value
    return words


def test_every_option_is_classified():
    unknown = [f"{command} {name} (type {getattr(action.type, '__qualname__', action.type)})"
               for command, name, action in ALL if kind(action) is None]
    assert not unknown, f"classify these options in tests/test_hostile_classes.py (kind): {unknown}"
    assert {command for command, _, _ in ALL} == set(POSITIONALS)


def test_every_numeric_option_is_bounded_from_both_sides():
    loose = [f"{command} {name}" for command, name, action in ALL
             if kind(action) == "unbounded number" or (kind(action) == "numeric" and isinstance(action.type.bounds, tuple)
                                                        and None in action.type.bounds)]
    assert not loose, f"numeric options without a bound on one side: {loose}"


def hostile_numbers(action) -> list[str]:
    bounds = getattr(action.type, "bounds", None)
    values = ["nan", "inf", "-inf", "1e400", "1" + "0" * 30]
    if isinstance(bounds, tuple) and None not in bounds:
        low, high = bounds
        step = 1 if action.type.__name__ == "integer" else 1e-3 * (abs(high - low) or 1)
        values += [repr(low - step), repr(high + step)]
    else:
        values += ["-1", "0"]
    return values


@pytest.mark.parametrize("command, name, action", of_kind("numeric", "unbounded number"))
def test_every_numeric_option_refuses_values_past_its_bounds(place, capsys, command, name, action):
    for value in hostile_numbers(action):
        line = error_line(capsys, with_value(command, name, action, value, place))
        assert name in line, (value, line)


def hostile_paths(root: Path) -> dict[str, str]:
    loop = root / "loop"
    loop.symlink_to(loop)
    return {"a loop of links": str(loop), "under a loop": str(loop / "x"), "a name over 255 bytes": str(root / ("x" * 300)),
            "a path over 4096 bytes": "/".join(["y" * 200] * 25)}


@pytest.mark.parametrize("command, name, action", of_kind(*set(PATH_TYPES.values())))
def test_every_path_option_refuses_loops_and_overlong_names(place, capsys, command, name, action):
    for what, value in hostile_paths(place["root"]).items():
        line = error_line(capsys, with_value(command, name, action, value, place))
        assert name in line, (what, line)


def corpus_command(command: str, place: dict) -> list[str]:
    """A command that would run on the place's corpus (its three files)."""
    words = base(command, place)
    splits = corpus_args(place["files"])
    return words + (splits[2:] if command in ("corpus", "reproduce") else splits) + (["--device", "cpu", "--threads", "1"]
                                                                        if command.startswith("nplm") and command != "nplm neighbors" else [])


def takes_corpus_files(command: str) -> bool:
    return any(name == "--train" for other, name, _ in ALL if other == command)


OUTPUTS = [param for param in of_kind("output", "output folder") if param.values[1] not in TEMPORARY]


@pytest.mark.parametrize("command, name, action", [p for p in OUTPUTS if takes_corpus_files(p.values[0])])
def test_no_output_lands_on_a_corpus_file(place, capsys, command, name, action):
    """An output file that is a link to --train, an output folder that holds --train (named as the
    command would write it there: train.txt): refused before the corpus is prepared, --train as it was."""
    train = place["files"]["train"]
    before = train.read_bytes()
    if kind(action) == "output":
        target = place["root"] / "link-to-train"
        target.symlink_to(train)
    else:
        target = train.parent
    line = error_line(capsys, [*corpus_command(command, place), name, str(target)])
    assert name in line and "--train" in line and str(train.name) in line, line
    assert train.read_bytes() == before and train.is_file() and not train.is_symlink()


@pytest.mark.parametrize("command", sorted({c for c, _, _ in ALL if takes_corpus_files(c)}))
def test_the_same_file_as_two_splits_is_refused(place, capsys, command):
    files = place["files"]
    link = place["root"] / "link-to-train.txt"
    link.symlink_to(files["train"])
    for valid in (files["train"], link):
        words = corpus_command(command, place)
        words[words.index("--valid") + 1] = str(valid)
        line = error_line(capsys, words)
        assert "same file" in line and "--valid" in line and "--train" in line, line


def test_threads_past_the_machine_are_refused_first(place, capsys):
    """`nplm train --threads 100000` crashed (exit 139), `reproduce text` printed libgomp's out of memory."""
    for command in ("nplm train", "reproduce"):
        line = error_line(capsys, [*corpus_command(command, place), "--threads", "100000"])
        assert "--threads" in line and "from 1 to 1024" in line


# --- 1. memory of the corpus, not of its longest token ------------------------------------------------

def test_one_long_token_costs_its_length_not_the_corpus_times_it(tmp_path):
    """3,000 tokens with one of 20,000 characters: a numpy str array of the tokens was 3,000 x 80 KB
    (240 MB); counted and encoded through dictionaries the corpus takes well under 20 MB."""
    from corpora.text import load_text
    words = zipf_text(3000, 150, 1).split()
    words[100] = "u" * 20_000
    files = write_splits(tmp_path, train=" ".join(words), valid=zipf_text(300, 150, 2), test=zipf_text(300, 150, 3))
    tracemalloc.start()
    try:
        corpus = load_text(files["train"], files["valid"], files["test"], use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(corpus.train) == 3000 and corpus.unk_words["train"].tolist().count("u" * 20_000) == 1
    assert peak < 20e6, f"peak {peak / 1e6:.0f} MB"


def test_unk_words_round_trip_through_the_cache(tmp_path, monkeypatch):
    from corpora.text import load_text
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train="a a b b é " + "ü" * 5000, valid="a zebra é ñ", test="b ünseen a")
    first = load_text(files["train"], files["valid"], files["test"])
    again = load_text(files["train"], files["valid"], files["test"])
    assert again.info["from_cache"] is True
    for split in ("train", "valid", "test"):
        assert again.unk_words[split].tolist() == first.unk_words[split].tolist()
    assert again.unk_words["valid"].tolist() == ["zebra", "é", "ñ"]


# --- 3. what the suite wrote is checked against what it can recompute -------------------------------------

def test_a_results_json_whose_blocks_were_altered_is_refused(tmp_path, capsys):
    """Halving kn-interp-5's test block log-probabilities turned a claim from "fails" to "holds" while the
    tables kept test 136.1: the blocks no longer give the row's perplexity back."""
    results = json.loads((ROOT / "results" / "brown" / "results.json").read_text())
    row = next(r for r in results["rows"] if r["id"] == "kn-interp-5")
    row["blocks"]["test"]["logprob"] = [x / 2 for x in row["blocks"]["test"]["logprob"]]
    (tmp_path / "results.json").write_text(json.dumps(results))
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert "kn-interp-5" in line and "test blocks give perplexity" in line and "reproduce" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


@pytest.mark.parametrize("report", sorted(p.name for p in (ROOT / "results").iterdir() if (p / "results.json").exists()))
def test_every_committed_results_json_passes_the_check(report):
    from reports.records import load_results
    load_results(ROOT / "results" / report)


def test_blocks_of_another_token_count_are_refused():
    from reports.records import check_blocks
    row = {"id": "r", "test_ppl": math.e, "blocks": {"test": {"logprob": [-5.0, -5.0], "tokens": [5, 5]}}}
    check_blocks(row, {"test": 10})
    with pytest.raises(ValueError, match="hold 10 tokens where the corpus's test holds 11"):
        check_blocks(row, {"test": 11})


# --- 4. no interval on too few blocks ----------------------------------------------------------------

def test_too_few_blocks_give_no_interval_and_no_verdict(caplog):
    from lmbench import bootstrap
    from reports.building.significance import Check, judge
    few = {"logprob": [-5.0, -6.0, -5.5, -4.0, -6.5], "tokens": [1] * 5}     # a 5-token test split
    other = {"logprob": [-5.1, -6.0, -5.6, -4.2, -6.5], "tokens": [1] * 5}
    with caplog.at_level(logging.WARNING):
        assert bootstrap.intervals({"test": few}) == {"test_ppl_ci95": None}
    assert any("too few blocks" in r.getMessage() for r in caplog.records)
    assert bootstrap.paired_splits(few, other)[1] is None
    rows = {"a": {"test_ppl": math.exp(27 / 5), "blocks": {"test": few}},
            "b": {"test_ppl": math.exp(27.4 / 5), "blocks": {"test": other}}}
    judged = judge(rows, [Check("a", "b")])
    assert judged["verdict"].startswith("too few blocks") and judged["difference_ci95"] is None
    assert judged["significant"] is None
    many = {"logprob": [-5.0] * bootstrap.MIN_BLOCKS, "tokens": [1] * bootstrap.MIN_BLOCKS}
    assert bootstrap.intervals({"test": many})["test_ppl_ci95"] is not None


# --- 6. mix of two files of one name -----------------------------------------------------------------

def test_mix_of_two_files_of_one_name_keeps_both(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=zipf_text(2000, 40, 1), valid=zipf_text(300, 40, 2), test=zipf_text(300, 40, 3))
    for folder, order in (("a", "2"), ("b", "3")):
        (tmp_path / folder).mkdir()
        assert main(["ngram", "--method", "kneser-ney", "--order", order, *corpus_args(files), "--save-logprobs",
                     str(tmp_path / folder / "kn.npz")]) == 0
    capsys.readouterr()
    assert main(["mix", str(tmp_path / "a" / "kn.npz"), str(tmp_path / "b" / "kn.npz"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    parts = [key for key, value in result.items() if isinstance(value, dict)]
    assert parts == [str(tmp_path / "a" / "kn.npz"), str(tmp_path / "b" / "kn.npz")]
    assert result[parts[0]]["test_perplexity"] != result[parts[1]]["test_perplexity"]


# --- 7. ARPA values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, named", [("nan", "nan"), ("-inf", "-inf"), ("3.5", "3.5")])
def test_an_arpa_probability_that_is_no_probability_is_refused(tmp_path, capsys, monkeypatch, value, named):
    from baselines.arpa_reader import read_arpa
    from corpora.text import load_text
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train=zipf_text(2000, 40, 1), valid=zipf_text(300, 40, 2), test=zipf_text(300, 40, 3))
    arpa = tmp_path / "kn.arpa"
    assert main(["ngram", "--method", "kneser-ney", "--order", "3", *corpus_args(files), "--arpa", str(arpa)]) == 0
    corpus = load_text(files["train"], files["valid"], files["test"])
    lines = arpa.read_text().split("\n")
    first = lines.index("\\1-grams:") + 3                     # after <s> and </s>: a word of the vocabulary
    lines[first] = "\t".join([value, *lines[first].split("\t")[1:]])
    arpa.write_text("\n".join(lines))
    with pytest.raises(LMBenchError) as refused:
        read_arpa(arpa, corpus.vocab)
    message = str(refused.value)
    assert "\n" not in message and str(arpa) in message and named in message and "1-grams" in message


# --- 8. a report folder replaced whole or not at all ----------------------------------------------------

def test_a_full_disk_over_an_existing_report_leaves_the_old_report_whole(tmp_path, capsys):
    from tests.test_reports import fake_results
    (tmp_path / "results.json").write_text(json.dumps(fake_results({}), indent=1))
    assert main(["report", "brown", "--report-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    changed = fake_results({"mlp1": 300.0, "kn-interp-5": 250.0})
    (tmp_path / "results.json").write_text(json.dumps(changed, indent=1))
    with files_fail_after(20_000):
        line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path)])
    assert "no room to write" in line and str(tmp_path) in line
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    del before[Path("results.json")], after[Path("results.json")]
    assert after == before                                    # the old report, every file of it
    assert [p.name for p in tmp_path.parent.iterdir() if p.name.startswith(f".{tmp_path.name}.")] == []
    assert main(["report", "brown", "--report-dir", str(tmp_path)]) == 0
    assert (tmp_path / "table.md").read_bytes() != before[Path("table.md")]


# --- 10. line cutting --------------------------------------------------------------------------------

def test_a_corpus_file_is_cut_at_newlines_only_and_loses_its_byte_order_mark(tmp_path):
    """U+2028, a form feed, NEL, a vertical tab and a lone carriage return inside lines: the file of 10
    lines is cut as 10 (8/1/1), as `wc -l` and `sed -n` count it; the byte-order mark is no part of w0."""
    from corpora.text import load_text_file
    lines = [f"w{i} a b\u2028c\x0cd\x85e\x0bf\rg" for i in range(10)]
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    corpus = load_text_file(path, min_count=1, use_cache=False)
    assert corpus.info["cut"]["lines"] == {"train": [0, 8], "valid": [8, 9], "test": [9, 10]}
    assert "w0" in corpus.vocab and corpus.vocab.decode(corpus.train[:1]) == ["w0"]
    assert len(corpus.train) == 8 * 8 and len(corpus.test) == 8


# --- 11. a binary file, the <unk> warning --------------------------------------------------------------

def test_a_binary_train_file_is_refused_before_it_is_read_whole(tmp_path):
    """A 1 GB file of NUL bytes (sparse: no disk): refused at its first block, the memory of a block."""
    from corpora.text import load_text
    files = write_splits(tmp_path, valid="a b", test="b a")
    train = tmp_path / "train.bin"
    with open(train, "wb") as f:
        f.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(LMBenchError, match="NUL byte at offset 0"):
            load_text(train, files["valid"], files["test"], use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("command", [["corpus", "text"], ["ngram", "--method", "kneser-ney", "--order", "2"],
                                     ["nplm", "train", "--n", "2", "--m", "2", "--h", "2", "--epochs", "1",
                                      "--device", "cpu", "--threads", "1"]])
def test_every_command_warns_when_no_train_token_is_unk(tmp_path, capsys, caplog, monkeypatch, command):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train="a b c a b c a b c " * 10, valid="a b zebra c", test="c yak a b")
    out = ["--out", str(tmp_path / "run")] if command[0] == "nplm" else []
    with caplog.at_level(logging.WARNING):
        assert main([*command, *corpus_args(files)[(2 if command[0] == "corpus" else 0):], "--min-count", "1", *out]) == 0
    assert len([r for r in caplog.records if "no train token is <unk>" in r.getMessage()]) == 1


def test_a_checkpoint_whose_weights_are_not_finite_is_refused(tmp_path, capsys, monkeypatch):
    import torch
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = write_splits(tmp_path, train="a b c a b c a b " * 20, valid="a b c a", test="b c a b")
    out = tmp_path / "run"
    assert main(["nplm", "train", *corpus_args(files), "--n", "3", "--m", "4", "--h", "5", "--epochs", "1",
                 "--device", "cpu", "--threads", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    from neural.training import weights_file
    from neural.training.checkpoint import BEST
    state = weights_file.read(out / BEST)
    name = next(key for key, value in state["model"].items() if value.is_floating_point())
    state["model"][name].view(-1)[0] = float("nan")
    weights_file.write(state, out / BEST)
    line = error_line(capsys, ["nplm", "eval", str(out), *corpus_args(files), "--device", "cpu", "--threads", "1"])
    assert str(out / BEST) in line and name in line and "NaN" in line

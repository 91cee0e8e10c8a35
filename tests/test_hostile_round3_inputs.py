"""Hostile inputs, third round (issue 53), the classes of a corpus's inputs and of the messages they get:
degenerate vocabularies, options a corpus would silently ignore, output folders that cannot be written,
and the messages that named the wrong cause. Each class is walked over every command (and option) it
concerns, as tests/test_hostile_classes.py does for the second round; each case ends in one
`lmbench: error:` line (exit 2), with nothing run before the refusal that the refusal could have saved.

- A vocabulary of no word (<unk> and the corpus's markers alone: `--min-count 1000000`, or a train file
  whose words are all seen once) gave every perplexity 1.0 and exit 0: refused by every command that
  builds a vocabulary. And a perplexity lies in its own bootstrap interval however certain its model
  (block sums rounded to 3 decimals were 0.0 for a model at 1.6e-5 nats a token: [1.0, 1.0] around
  1.0000156).
- Every corpus option is honoured or refused: `--vocab-size` on Brown, `--vocab-from`, `--ap-dir`,
  `--skip-bad-files` on a text corpus, `--min-count` on AP, reproduce's own-corpus options on the
  paper's corpora, report's `--name`/`--quick` where nothing reads them.
- An output folder that cannot be written is refused before any row runs (a PermissionError traceback
  after every row had run).
- Messages: an older results.json, a summary of quick reports only, `mix --with-counts` of a file that
  is no infini-gram's, a UTF-16 corpus file, NLTK_DATA without Brown.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from lmbench import bootstrap
from lmbench_cli import main
from tests.helpers import corpus_args, write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile_classes import ALL

ROOT = Path(__file__).resolve().parents[1]
BROWN = Path(os.environ.get("NLTK_DATA", "/nonexistent")) / "corpora" / "brown.zip"


def commands_with(option: str) -> list[str]:
    """Every subcommand (as words) that takes `option`."""
    return sorted({command for command, name, _ in ALL if name == option})


def corpus_words(command: str, corpus: str, run: Path) -> list[str]:
    """The words of `command` up to its corpus options, on corpus `corpus` (a positional name for corpus
    and reproduce, --corpus for the rest; a run folder for the commands that read one)."""
    words = command.split()
    if command in ("corpus", "reproduce"):
        return [*words, corpus]
    if command == "ngram":
        words += ["--method", "kneser-ney", "--order", "2"]
    elif command in ("eval", "nplm eval"):
        words += [str(run)]
    elif command == "nplm neighbors":
        words += [str(run), "w1"]
    elif command in ("train", "nplm train"):
        words += ["--device", "cpu", "--threads", "1", "--epochs", "1", "--out", str(run.parent / "out")]
    return [*words, "--corpus", corpus]


@pytest.fixture
def place(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.safetensors").write_bytes(b"a model")
    return {"root": tmp_path, "run": run}


# --- 1. degenerate vocabularies ---------------------------------------------------------------------------

def with_text(command: str, place: dict, files: dict) -> list[str]:
    words = corpus_words(command, "text", place["run"])
    return [*words, *corpus_args(files)[2:]] + (["--work-dir", str(place["root"] / "work"), "--report-dir",
                                                 str(place["root"] / "report"), "--threads", "1"]
                                                if command == "reproduce" else [])


@pytest.mark.parametrize("command", commands_with("--min-count"))
def test_every_command_refuses_a_vocabulary_of_no_word(place, capsys, command):
    """A train file whose every word is seen once (the default --min-count 2 keeps none of them), and one
    whose words recur under --min-count 1000000: each a vocabulary of <unk> alone."""
    root = place["root"]
    (root / "once").mkdir()
    (root / "recurring").mkdir()
    once = write_splits(root / "once", train=" ".join(f"u{i}" for i in range(300)), valid="v1 v2 v3", test="t1 t2 t3")
    recurring = write_splits(root / "recurring", train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2),
                             test=zipf_text(60, 20, 3))
    for files, extra in ((once, []), (recurring, ["--min-count", "1000000"])):
        line = error_line(capsys, [*with_text(command, place, files), *extra])
        assert "vocabulary would be <unk> alone" in line and "--min-count" in line, line
        assert not (root / "report").exists() and not (root / "out").exists()


@pytest.mark.skipif(not BROWN.exists(), reason="the Brown corpus (NLTK_DATA) is not on this machine")
def test_brown_refuses_a_min_count_past_every_word(tmp_path_factory, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))  # one build for all of them
    run = tmp_path_factory.mktemp("run")
    for command in ("corpus", "ngram", "train"):
        line = error_line(capsys, [*corpus_words(command, "brown", run), "--min-count", "1000000"])
        assert "--min-count 1000000 keeps no word of Brown" in line and "<unk>, </p>, </d> alone" in line, line


def nearly_certain(tokens: int, seed: int) -> np.ndarray:
    """The log-probabilities of a model that is nearly certain of every token (1.6e-5 nats a token)."""
    return -1.56e-5 * (1 + 0.1 * np.random.default_rng(seed).random(tokens))


@pytest.mark.parametrize("logprobs", [nearly_certain(5000, 1), -np.random.default_rng(2).gamma(2.0, 2.5, 5000)],
                         ids=["nearly certain", "ordinary"])
def test_a_perplexity_lies_in_its_own_interval(logprobs):
    """Each perplexity (from the log-probabilities) in its interval (from the blocks results.json keeps),
    and a paired difference in its own, whatever the scale of the sums (within float64 sums' 1e-12)."""
    ends = bootstrap.block_ends(np.arange(len(logprobs)) % 7 + 1, None)[0]
    blocks = bootstrap.row_blocks(logprobs, ends)
    ppl = float(np.exp(-np.mean(logprobs)))
    low, high = bootstrap.split_interval(blocks)
    assert low * (1 - 1e-12) <= ppl <= high * (1 + 1e-12) and high > low, (low, ppl, high)
    other = logprobs * 1.0005
    gap = float(np.exp(-np.mean(other)) / ppl - 1)
    _, (lower, upper) = bootstrap.paired_splits(bootstrap.row_blocks(other, ends), blocks)
    assert lower - 1e-12 * abs(gap) <= gap <= upper + 1e-12 * abs(gap), (lower, gap, upper)
    grouped = bootstrap.group(blocks, 20)
    low, high = bootstrap.split_interval(grouped)
    assert low * (1 - 1e-12) <= ppl <= high * (1 + 1e-12)


# --- 2. every corpus option honoured or refused -----------------------------------------------------------

TAKES = {"brown": {"--min-count", "--vocab-from"}, "ap": {"--ap-dir", "--vocab-size", "--skip-bad-files"},
         "text": {"--min-count", "--vocab-size"}}  # (the text files: tests/test_hostile_classes.py)
VALUES = {"--min-count": ["3"], "--vocab-from": ["train"], "--vocab-size": ["100"], "--skip-bad-files": [],
          "--ap-dir": ["{root}/ap"]}
FILE_OPTIONS = {"--train", "--valid", "--test", "--corpus-file", "--corpus-split"}


def corpus_group_options(command: str) -> list[str]:
    """The options of `command`'s corpus options group, its files and --no-cache left out."""
    return [name for other, name, action in ALL if other == command and action.container.title
            and action.container.title.startswith("corpus options") and name not in FILE_OPTIONS | {"--no-cache"}]


@pytest.mark.parametrize("command", commands_with("--vocab-from"))
def test_every_corpus_option_a_corpus_does_not_take_is_refused(place, capsys, monkeypatch, command):
    def prepared(*args, **kwargs):
        raise AssertionError("a corpus was prepared before the refusal")
    for target in ("corpora.record.load_named", "corpora.text.load_text", "corpora.text.load_text_file"):
        monkeypatch.setattr(target, prepared)
    options = corpus_group_options(command)
    assert set(options) == set(VALUES), f"classify {sorted(set(options) ^ set(VALUES))} in TAKES and VALUES"
    files = corpus_args(write_splits(place["root"], train="a b", valid="a", test="b"))[2:]
    (place["root"] / "ap").mkdir()
    for corpus, taken in TAKES.items():
        for option in sorted(set(options) - taken):
            words = [*corpus_words(command, corpus, place["run"]), *(files if corpus == "text" else []), option,
                     *(value.format(root=place["root"]) for value in VALUES[option])]
            line = error_line(capsys, words)
            assert f"{option}: not an option of the {corpus} corpus" in line, (words, line)


def test_a_run_record_with_an_option_its_corpus_ignored_loads_without_it(tmp_path):
    """A corpus.json written before the refusal may record an option its corpus ignored then: it names the
    same corpus without it, and is not refused for an option this command was never given."""
    import argparse
    from corpora.cli import OPTIONS, corpus_options
    files = write_splits(tmp_path, train="a b a b", valid="a b", test="b a")
    record = {"corpus": "text", "vocab_from": "train", "skip_bad_files": True,
              "files": {s: {"path": str(p.resolve()), "sha256": __import__("corpora.text").text.file_digest(p)}
                        for s, p in files.items()}}
    (tmp_path / "corpus.json").write_text(json.dumps(record))
    found = corpus_options(argparse.Namespace(**{name: None for name in OPTIONS}), tmp_path)
    assert found["corpus"] == "text" and "vocab_from" not in found and "skip_bad_files" not in found


def reproduce_text_options() -> list[tuple[str, list[str]]]:
    """reproduce's own-corpus options (its 'your own corpus' group), each with a value."""
    values = {"--corpus-split": ["0.8,0.1,0.1"], "--split": ["0.8,0.1,0.1"], "--name": ["mine"], "--min-count": ["3"],
              "--vocab-size": ["100"], "--only": ["ngram"], "--memory": ["1G"], "--tmp-dir": ["{root}"]}
    found = [name for command, name, action in ALL if command == "reproduce" and action.container.title
             and action.container.title.startswith("your own corpus")]
    assert set(found) - {"--train", "--valid", "--test", "--corpus-file"} == set(values), found
    return [(name, values.get(name, ["{file}"])) for name in found]


@pytest.mark.parametrize("corpus", ["brown", "ap"])
def test_reproduce_refuses_every_own_corpus_option_on_a_paper_corpus(place, capsys, monkeypatch, corpus):
    def ran(*args, **kwargs):
        raise AssertionError("the pipeline ran")
    monkeypatch.setattr("reports.running.pipeline.reproduce", ran)
    (place["root"] / "a.txt").write_text("a b")
    for option, values in reproduce_text_options():
        words = ["reproduce", corpus, "--work-dir", str(place["root"] / "work"), option,
                 *(v.format(root=place["root"], file=place["root"] / "a.txt") for v in values)]
        line = error_line(capsys, words)
        named = "--corpus-split" if option == "--split" else option  # (--split: its former name)
        assert named in line and "only for `lmbench reproduce text`" in line, (words, line)


@pytest.mark.parametrize("words, said", [
    (["report", "brown", "--name", "x"], "--name: only for `lmbench report text`"),
    (["report", "summary", "--quick"], "report summary: --quick"),
    (["report", "summary", "--name", "x"], "report summary: --name"),
    (["report", "text", "--name", "x", "--report-dir", "{root}/r"], "--name picks the default report folder"),
    (["report", "text", "--quick", "--report-dir", "{root}/r"], "--quick picks the default report folder")])
def test_report_refuses_a_name_or_quick_that_nothing_reads(place, capsys, monkeypatch, words, said):
    def built(*args, **kwargs):
        raise AssertionError("a report was built")
    monkeypatch.setattr("reports.building.build.build_report", built)
    monkeypatch.setattr("reports.building.summary.write_summary", built)
    line = error_line(capsys, [word.format(root=place["root"]) for word in words])
    assert said in line, line


def method_options() -> dict[str, list[str]]:
    """`lmbench ngram`'s options that belong to some methods only, each with a value."""
    return {"--classes": ["5"], "--cluster-passes": ["3"], "--tmp-dir": ["{root}/tmp"]}


@pytest.mark.parametrize("method", sorted(__import__("baselines.methods").methods.METHODS))
def test_ngram_refuses_every_option_its_method_does_not_take(place, capsys, monkeypatch, method):
    """`--classes` and `--cluster-passes` of another method than class, `--tmp-dir` without `--memory`
    (its bounded path): each was silently ignored; refused before the corpus is prepared."""
    from baselines.methods import METHODS, OPTIONS
    prepared_nothing(monkeypatch)
    files = corpus_args(write_splits(place["root"], train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2),
                                     test=zipf_text(60, 20, 3)))
    takes = {flag for name, flag in OPTIONS.items() if name in METHODS[method].options}
    for option, values in method_options().items():
        if option in takes:
            continue
        words = ["ngram", "--method", method, *files, option, *(v.format(root=place["root"]) for v in values)]
        line = error_line(capsys, words)
        assert option in line and ("--memory" in line if option == "--tmp-dir" else "only for --method class" in line), line
    if METHODS[method].bounded:  # with --memory, --tmp-dir is taken: nothing refused before the corpus
        with pytest.raises(AssertionError, match="before the refusal"):
            main(["ngram", "--method", method, *files, "--memory", "1G", "--tmp-dir", str(place["root"] / "tmp"),
                  *(["--classes", "5"] if "classes" in METHODS[method].options else [])])


def test_reproduce_text_refuses_tmp_dir_without_memory(place, capsys, monkeypatch):
    prepared_nothing(monkeypatch)
    files = corpus_args(write_splits(place["root"], train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2),
                                     test=zipf_text(60, 20, 3)))[2:]
    line = error_line(capsys, ["reproduce", "text", *files, "--tmp-dir", str(place["root"] / "tmp"),
                               "--work-dir", str(place["root"] / "work"), "--threads", "1"])
    assert "--tmp-dir" in line and "--memory" in line, line


@pytest.mark.parametrize("words, refused", [
    (["--weights", "0.3", "0.7"], "--weights"), (["--method", "em", "--weights", "0.3", "0.7"], "--weights"),
    (["--method", "bucketed", "--buckets-from", "{b}", "--weights", "0.3", "0.7"], "--weights"),
    (["--method", "em", "--buckets-from", "{b}"], "--buckets-from"),
    (["--method", "fixed", "--weights", "0.3", "0.7", "--buckets-from", "{b}"], "--buckets-from")])
def test_mix_refuses_the_options_of_another_method(tmp_path, capsys, words, refused):
    """--weights beside a method that fits its own (the default, em, bucketed), --buckets-from beside fixed or
    em: each was silently ignored (the weights given, 0.3/0.7, never used)."""
    rng = np.random.default_rng(0)
    paths = []
    for name in ("a", "b"):
        paths.append(tmp_path / f"{name}.npz")
        np.savez(paths[-1], valid=np.log(rng.uniform(0.01, 0.5, 300)), test=np.log(rng.uniform(0.01, 0.5, 300)),
                 buckets_valid=rng.integers(0, 3, 300), buckets_test=rng.integers(0, 3, 300))
    line = error_line(capsys, ["mix", *map(str, paths), *(word.format(b=paths[1]) for word in words)])
    assert line.startswith(f"lmbench: error: {refused}"), line


# --- 3. output folders that cannot be written ---------------------------------------------------------

@pytest.fixture
def unwritable(tmp_path):
    """A folder no file can be made in: one without write permission, or, for root (whom permissions do not
    stop), /sys (a file system where no folder can be made)."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
    else:
        if not Path("/sys").is_dir():
            pytest.skip("no /sys to stand for a folder root cannot write in")
        yield Path("/sys")


OUTPUTS = [(command, name) for command, name, action in ALL
           if getattr(action.type, "__qualname__", "") in ("output_file", "output_directory")]


def prepared_nothing(monkeypatch) -> None:
    """Preparing a corpus, running a pipeline or building a report made to fail the test: what is refused
    must be refused before."""
    def ran(*args, **kwargs):
        raise AssertionError("a corpus was prepared, rows ran or a report was built before the refusal")
    for target in ("corpora.cli.load_corpus", "corpora.cli.load_options", "neural.cli.load_corpus",
                   "neural.cli.load_options", "reports.running.pipeline.reproduce", "reports.building.build.build_report",
                   "reports.building.summary.write_summary"):
        monkeypatch.setattr(target, ran)


def command_words(command: str, place: dict, files: list[str]) -> list[str]:
    """`command` on the place's text corpus (its three files), with what it needs first."""
    words = {"corpus": ["corpus", "text"], "ngram": ["ngram", "--method", "kneser-ney"],
             "reproduce": ["reproduce", "text"], "report": ["report", "text"], "mix": ["mix", str(place["npz"])],
             "eval": ["eval", str(place["run"])], "nplm eval": ["nplm", "eval", str(place["run"])],
             "nplm neighbors": ["nplm", "neighbors", str(place["run"]), "w1"]}.get(command, command.split())
    return words + (files if command not in ("report", "mix", "nplm neighbors") else [])


@pytest.mark.parametrize("command, option", OUTPUTS, ids=[f"{c} {o}" for c, o in OUTPUTS])
def test_every_output_in_a_folder_that_cannot_be_written_is_refused_first(place, unwritable, capsys, monkeypatch,
                                                                           command, option):
    """Every output file and folder of every command, in a folder where nothing can be made: one line
    naming the option, before anything is prepared or run (`reproduce` with --report-dir there ran
    every row, then ended in a PermissionError traceback)."""
    prepared_nothing(monkeypatch)
    place["npz"] = place["root"] / "a.npz"
    np.savez(place["npz"], valid=np.full(3, -1.0), test=np.full(3, -1.0))
    files = corpus_args(write_splits(place["root"], train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2),
                                     test=zipf_text(60, 20, 3)))[(2 if command in ("corpus", "reproduce") else 0):]
    words = [*command_words(command, place, files), option, str(unwritable / "out")]
    if command == "build-binary":  # its output is its second positional, after an ARPA file
        arpa = place["root"] / "model.arpa"
        arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n0 <unk>\n\n\\end\\\n")
        words = ["build-binary", str(arpa), str(unwritable / "out")]
    line = error_line(capsys, words)
    assert option in line and ("not writable" in line or "cannot write" in line), line


@pytest.mark.parametrize("words", [["reproduce", "text"], ["report", "text"], ["report", "summary"]])
def test_default_output_folders_that_cannot_be_written_are_refused_before_any_row(place, unwritable, capsys,
                                                                                   monkeypatch, words):
    """The folders a command writes when none is given (runs/..., results/ in the working directory), and a
    report folder's parent (the report is written beside it, then takes its place)."""
    prepared_nothing(monkeypatch)
    files = corpus_args(write_splits(place["root"], train=zipf_text(400, 20, 1), valid=zipf_text(60, 20, 2),
                                     test=zipf_text(60, 20, 3)))[2:]
    monkeypatch.chdir(unwritable)
    line = error_line(capsys, words + (files + ["--threads", "1"] if words[0] == "reproduce" else []))
    assert "cannot write in" in line and str(unwritable) in line, line


# --- 4. messages that named the wrong cause -----------------------------------------------------------

def test_report_on_an_older_results_json_says_so(tmp_path, capsys):
    """A network row's configuration of an older format (an LSTM under the `halving` schedule, before it
    was the SGD recipe's alone): the line says the file is older and how to rebuild, not an option."""
    results = json.loads((ROOT / "results" / "brown" / "results.json").read_text())
    row = next(r for r in results["rows"] if r.get("family") == "lstm")
    row["config"]["recipe"], row["config"]["schedule"] = "adamw", "halving"
    row.pop("train_flops", None)
    row.update(tokens_per_s=row.get("tokens_per_s") or 1000.0, train_seconds=row.get("train_seconds") or 10.0)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.json").write_text(json.dumps(results))
    line = error_line(capsys, ["report", "brown", "--report-dir", str(tmp_path / "old"), "--allow-dirty"])
    assert "older format" in line and "lmbench reproduce" in line and "--schedule" not in line, line


def test_report_summary_of_quick_reports_only_says_they_are_quick(tmp_path, capsys):
    from tests.test_summary import KN5, record, results
    quick = results("first-quick", [record(KN5, 1, 1)], quick=True)
    (tmp_path / "first-quick").mkdir()
    (tmp_path / "first-quick" / "results.json").write_text(json.dumps(quick))
    (tmp_path / "index.txt").write_text("first-quick\n")
    line = error_line(capsys, ["report", "summary", "--results-dir", str(tmp_path)])
    assert "quick run (first-quick)" in line and "without --quick" in line, line


def test_mix_with_counts_of_a_file_that_is_no_infinigram_says_so(tmp_path, capsys):
    """A kneser-ney file given as --with-counts was called an old infini-gram file."""
    for name in ("a", "kn"):
        np.savez(tmp_path / f"{name}.npz", valid=np.full(30, -2.0), test=np.full(30, -2.0))
    line = error_line(capsys, ["mix", str(tmp_path / "a.npz"), "--with-counts", str(tmp_path / "kn.npz")])
    assert "is not an infini-gram file" in line and "kn.npz" in line and "written before" not in line, line


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("command", commands_with("--train"))
def test_every_command_names_a_utf16_corpus_file(place, capsys, command, encoding):
    text = "the cat sat on the mat . " * 40
    files = write_splits(place["root"], train=text.encode(encoding), valid="the cat", test="the mat")
    line = error_line(capsys, with_text(command, place, files))
    assert "UTF-16" in line and "iconv -f UTF-16" in line and str(files["train"]) in line, line


@pytest.mark.parametrize("command", ["corpus", "ngram", "train"])
def test_nltk_data_without_brown_is_one_line(place, capsys, monkeypatch, command):
    """NLTK_DATA naming a folder without Brown: one line, no download tried, none of nltk's lines."""
    import nltk

    def download(*args, **kwargs):
        raise AssertionError("a download was tried")
    monkeypatch.setattr(nltk, "download", download)
    empty = place["root"] / "nltk_data"
    empty.mkdir()
    monkeypatch.setenv("NLTK_DATA", str(empty))
    monkeypatch.setattr(nltk.data, "path", [str(empty)])
    code = main(corpus_words(command, "brown", place["run"]))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "nltk_data" not in err.replace(str(empty), ""), err
    assert err.count("\n") == 1 and f"NLTK_DATA={empty} holds no corpora/brown.zip" in err, err


# --- 5. a window family beyond 2003 (issue 53, item 2; the contract tests on a scratch log-bilinear family) --

def test_the_claim_of_a_window_family_beyond_2003_does_not_call_the_nplm_its_opposite(monkeypatch):
    """A family that reads a window (a log-bilinear model, say) is feed-forward itself: its claim against
    the best network of equation 1 reads "beats the best NPLM alone", a stream family's "the best feed-forward
    network". (The energy network, a window family, stands in for one registered with beyond_2003.)"""
    import dataclasses
    from neural.families import FAMILIES
    from reports.building import claims
    families = {**FAMILIES, "energy": dataclasses.replace(FAMILIES["energy"], label="Energy network", beyond_2003=True)}
    monkeypatch.setattr(claims, "FAMILIES", families)
    monkeypatch.setattr(claims, "NETWORKS_BEYOND_2003", {"energy": "energy", "lstm": "lstm"}, raising=False)
    rows = {"mlp1": {"id": "mlp1", "family": "nplm", "mix": False, "valid_ppl": 300.0, "test_ppl": 290.0},
            "energy": {"id": "energy", "family": "energy", "mix": False, "valid_ppl": 280.0, "test_ppl": 270.0},
            "lstm": {"id": "lstm", "family": "lstm", "mix": False, "valid_ppl": 200.0, "test_ppl": 190.0}}
    said = [claim["claim"] for claim in claims.beyond_2003(rows)]
    assert "The Energy network (ours) beats the best NPLM alone" in said, said
    assert f"The {FAMILIES['lstm'].label} (ours) beats the best feed-forward network" in said, said


def test_a_failed_download_of_brown_is_one_line_with_its_reason(place, capsys, monkeypatch):
    """NLTK_DATA unset and Brown nowhere: the download is tried, and its failure (nltk's several
    [nltk_data] lines) ends in the one error line."""
    import sys
    import nltk

    def download(name, quiet=False, print_error_to=sys.stderr, **kwargs):
        print("[nltk_data] Error loading brown: <urlopen error no\n[nltk_data]     network>", file=print_error_to)
        return False
    monkeypatch.setattr(nltk, "download", download)
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setattr(nltk.data, "path", [str(place["root"] / "nowhere")])
    code = main(["corpus", "brown"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "[nltk_data]" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert len(errors) == 1 and "(Error loading brown: <urlopen error no network>)" in errors[0], err


def test_a_quick_run_refuses_a_slice_of_no_word(place, capsys):
    """The quick slice counts its own vocabulary (words seen 3 times in its first 10,000 train tokens): a
    train whose every word is seen twice passes the full corpus's default (2) and left the quick run a
    vocabulary of <unk> alone, every perplexity 1.0."""
    words = [f"u{i}" for i in range(300)]
    files = write_splits(place["root"], train=" ".join(words + words), valid="u1 u2 u3", test="u4 u5 u6")
    line = error_line(capsys, ["reproduce", "text", "--quick", *corpus_args(files)[2:], "--work-dir",
                               str(place["root"] / "work"), "--report-dir", str(place["root"] / "report"),
                               "--threads", "1"])
    assert "keeps no word seen 3 times" in line and "without --quick" in line, line
    assert not (place["root"] / "report").exists()

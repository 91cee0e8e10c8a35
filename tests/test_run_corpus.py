"""A run folder records its corpus (corpus.json): `nplm eval`, `nplm neighbors` and `nplm train --resume`
need only the folder; corpus options given explicitly still win; a changed or moved corpus file is
refused in one line. `--corpus-file` (one file cut by lines) wherever a text corpus is read."""

import json

import pytest

from tests.helpers import corpus_args, run_cli, write_splits

TEXT = "the cat sat on the mat . the dog sat on the log . a cat and a dog saw the mat . " * 12
NETWORK = ["--n", "3", "--m", "4", "--h", "5", "--direct", "--device", "cpu", "--json"]


@pytest.fixture
def trained(tmp_path, capsys):
    """A run trained for one epoch on three text files: (its folder, the files, its figures)."""
    paths = write_splits(tmp_path, train=TEXT, valid="the cat sat on the log .", test="a dog sat .")
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, "nplm", "train", *corpus_args(paths), *NETWORK, "--epochs", "1",
                                 "--out", out)
    assert code == 0, err
    return out, paths, json.loads(printed)


def test_the_run_folder_records_how_to_load_its_corpus(trained):
    out, paths, _ = trained
    record = json.loads((out / "corpus.json").read_text())
    assert record["corpus"] == "text"
    assert {split: entry["path"] for split, entry in record["files"].items()} == {
        split: str(path.resolve()) for split, path in paths.items()}
    from corpora.text import file_digest
    assert all(entry["sha256"] == file_digest(paths[split]) for split, entry in record["files"].items())


def test_eval_neighbors_and_resume_need_only_the_folder(trained, capsys):
    out, _, figures = trained
    code, printed, err = run_cli(capsys, "nplm", "eval", out, "--split", "test", "--device", "cpu", "--json")
    assert code == 0, err
    assert json.loads(printed)["perplexity"] == pytest.approx(figures["test_perplexity"])
    code, printed, err = run_cli(capsys, "nplm", "neighbors", out, "cat", "--k", "2", "--json")
    assert code == 0, err
    assert len(json.loads(printed)["cat"]) == 2
    code, printed, err = run_cli(capsys, "nplm", "train", *NETWORK, "--epochs", "2", "--out", out, "--resume")
    assert code == 0, err
    assert json.loads(printed)["epochs"] == 2


def test_options_given_explicitly_win_and_another_vocabulary_is_refused(trained, tmp_path, capsys):
    out, paths, _ = trained
    (tmp_path / "other").mkdir()
    other = write_splits(tmp_path / "other", train="x y z x y z w " * 30, valid="x y z", test="w x y")
    code, _, err = run_cli(capsys, "nplm", "eval", out, *corpus_args(other), "--device", "cpu")
    assert code == 2 and "another vocabulary" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "nplm", "eval", out, "--min-count", "13", "--device", "cpu")  # the record's files,
    assert code == 2 and "another vocabulary" in err  # another threshold (words seen 12 times out): another vocabulary


def test_a_changed_or_missing_corpus_file_is_refused_in_one_line(trained, capsys):
    out, paths, _ = trained
    paths["valid"].write_text("the dog sat on the mat .")
    code, _, err = run_cli(capsys, "nplm", "eval", out, "--device", "cpu")
    assert code == 2 and "changed since" in err and str(paths["valid"].resolve()) in err
    assert len(err.strip().splitlines()) == 1
    paths["valid"].unlink()
    code, _, err = run_cli(capsys, "nplm", "neighbors", out, "cat")
    assert code == 2 and "is missing" in err and "--corpus text" in err


def test_corpus_file_wherever_a_text_corpus_is_read(tmp_path, capsys):
    from corpora.text import load_text_file
    path = tmp_path / "all.txt"
    path.write_text("".join(f"the cat {i % 5} sat on the mat {i % 3} .\n" for i in range(60)))
    expected = load_text_file(path, (0.8, 0.1, 0.1)).summary()
    code, printed, err = run_cli(capsys, "corpus", "text", "--corpus-file", path, "--json")
    assert code == 0, err
    assert json.loads(printed)["tokens"] == expected["tokens"]
    code, printed, err = run_cli(capsys, "corpus", "text", "--corpus-file", path, "--corpus-split", "0.5,0.25,0.25",
                                 "--json")
    assert json.loads(printed)["cut"]["split"] == [0.5, 0.25, 0.25]
    code, printed, err = run_cli(capsys, "ngram", "--corpus", "text", "--corpus-file", path, "--method",
                                 "kneser-ney", "--order", "3", "--json")
    assert code == 0, err
    assert json.loads(printed)["vocab_size"] == expected["vocab_size"]
    out = tmp_path / "run"
    code, printed, err = run_cli(capsys, "nplm", "train", "--corpus", "text", "--corpus-file", path, *NETWORK,
                                 "--epochs", "1", "--out", out)
    assert code == 0, err
    record = json.loads((out / "corpus.json").read_text())
    assert record["corpus_file"]["path"] == str(path.resolve()) and record["corpus_split"] == [0.8, 0.1, 0.1]
    code, printed, err = run_cli(capsys, "nplm", "eval", out, "--device", "cpu", "--json")
    assert code == 0, err


@pytest.mark.parametrize("argv,message", [
    (["--corpus-file", "F", "--train", "F"], "--corpus-file is cut into train, valid and test: drop --train"),
    (["--train", "F", "--valid", "G", "--test", "H", "--corpus-split", "0.8,0.1,0.1"], "--corpus-split cuts"),
    (["--corpus-file", "F", "--corpus-split", "0.5,0.5"], "three fractions"),
])
def test_corpus_file_conflicts_are_refused_in_one_line(tmp_path, capsys, argv, message):
    for name in "FGH":
        (tmp_path / name).write_text(f"a b c {name}\n" * 20)
    argv = [str(tmp_path / word) if word in ("F", "G", "H") else word for word in argv]
    code, _, err = run_cli(capsys, "corpus", "text", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("record", ['{"corpus": "nowhere"}', '{"corpus": "text", "files": {"train": {"path": "x"}}}',
                                    "{not json"])
def test_a_damaged_record_is_refused_in_one_line(trained, capsys, record):
    out, _, _ = trained
    (out / "corpus.json").write_text(record)
    code, _, err = run_cli(capsys, "nplm", "eval", out, "--device", "cpu")
    assert code == 2 and "cannot read corpus record" in err and len(err.strip().splitlines()) == 1

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_cli, write_splits


@pytest.fixture
def text_files(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    return write_splits(tmp_path, train="a b a c a b", valid="a b d", test="c a")


def test_corpus_text_json(capsys, text_files):
    code, out, _ = run_cli(capsys, "corpus", "text", "--train", str(text_files["train"]),
                           "--valid", str(text_files["valid"]), "--test", str(text_files["test"]), "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["tokens"] == {"train": 6, "valid": 3, "test": 2}
    assert stats["vocab_size"] == 3 and stats["unk_tokens"] == {"train": 1, "valid": 1, "test": 1}  # c: seen once
    assert "prepare_seconds" in stats and "cache" in stats


def test_ngram_unigram_end_to_end(capsys, text_files):
    code, out, _ = run_cli(capsys, "ngram", "--method", "add-one-unigram", "--corpus", "text",
                           "--train", str(text_files["train"]), "--valid", str(text_files["valid"]),
                           "--test", str(text_files["test"]), "--json")
    assert code == 0
    result = json.loads(out)
    # V = {<unk>, a, b} (c, seen once, is <unk>); counts a3 b2 <unk>1, N = 6: P = (c + 1) / 9
    expected_test = math.exp(-(math.log(2 / 9) + math.log(4 / 9)) / 2)
    assert math.isclose(result["test_perplexity"], expected_test)


def test_expected_errors_exit_2_with_one_line(capsys, tmp_path):
    code, out, err = run_cli(capsys, "corpus", "text", "--train", str(tmp_path / "missing.txt"),
                             "--valid", "x", "--test", "y")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "does not exist" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "corpus", "text")
    assert code == 2 and "--train" in err


def test_human_readable_output(capsys, text_files):
    code, out, _ = run_cli(capsys, "corpus", "text", "--train", str(text_files["train"]),
                           "--valid", str(text_files["valid"]), "--test", str(text_files["test"]))
    assert code == 0 and "vocab_size: 3" in out and "tokens:" in out


def test_every_ngram_method_from_the_command_line(capsys, text_files, tmp_path):
    """Every registered method (baselines.methods.METHODS) at its lowest order, from `lmbench ngram`: finite
    perplexities of valid and test (and of train where it is scored) and its saved log-probabilities."""
    from baselines.methods import METHODS
    files = ["--corpus", "text", "--train", str(text_files["train"]), "--valid", str(text_files["valid"]),
             "--test", str(text_files["test"])]
    for name, method in METHODS.items():
        code, out, err = run_cli(capsys, "ngram", "--method", name, "--order", str(method.min_order), *files,
                                 *(["--classes", "2"] if "classes" in method.options else []), "--json",
                                 "--save-logprobs", str(tmp_path / f"{name}.npz"))
        assert code == 0, (name, err)
        result = json.loads(out)
        scored = [key for key in result if key.endswith("_perplexity")]
        assert {"valid_perplexity", "test_perplexity"} <= set(scored), (name, result)
        assert all(math.isfinite(result[key]) for key in scored), (name, result)
    code, out, _ = run_cli(capsys, "mix", str(tmp_path / "kneser-ney.npz"), str(tmp_path / "class.npz"),
                           "--json")
    assert code == 0 and math.isfinite(json.loads(out)["test_perplexity"])
    code, _, err = run_cli(capsys, "ngram", "--method", "class", *files)
    assert code == 2 and "--classes" in err
    code, _, err = run_cli(capsys, "ngram", "--method", "deleted-interpolation", "--order", "4", *files)
    assert code == 2 and "order 3" in err


def test_the_ground_floor_imports_no_package_above_it():
    """`lmbench` (errors, files, the model interface, option types) imports no package built on it."""
    code = ("import sys, lmbench.errors, lmbench.files, lmbench.model, lmbench.options; "
            "print(sorted({name.split('.')[0] for name in sys.modules} & "
            "{'corpora', 'baselines', 'neural', 'mixing', 'reports', 'lmbench_cli'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.strip() == "[]"


def test_output_files_take_any_name_under_missing_folders(capsys, text_files, tmp_path):
    files = ["--corpus", "text", "--train", str(text_files["train"]), "--valid", str(text_files["valid"]),
             "--test", str(text_files["test"])]
    logprobs, arpa = tmp_path / "new" / "katz.logprobs", tmp_path / "other" / "katz.lm"
    code, _, err = run_cli(capsys, "ngram", "--method", "katz", "--order", "2", *files,
                           "--save-logprobs", str(logprobs), "--arpa", str(arpa))
    assert code == 0, err
    assert arpa.read_text().startswith("\\data\\")
    assert run_cli(capsys, "mix", str(logprobs), str(logprobs), "--json")[0] == 0


def test_each_package_registers_the_commands_the_top_level_names_for_it():
    """`lmbench_cli.COMMANDS` says which package owns a command; a package adding or renaming one fails here."""
    import argparse
    import importlib
    from lmbench_cli import COMMANDS
    for module, commands in COMMANDS.items():
        subparsers = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(subparsers)
        assert tuple(subparsers.choices) == commands, module


def test_the_commands_that_train_no_network_start_without_torch():
    """`corpus`, `ngram` and `mix` never read the families' registry, whose files load torch (3 s here)."""
    code = ("import atexit, sys, lmbench_cli; atexit.register(lambda: print('torch' in sys.modules)); "
            "lmbench_cli.build_parser(sys.argv[1:]).parse_args(sys.argv[1:] + ['--help'])")
    for command in ("corpus", "ngram", "mix"):
        done = subprocess.run([sys.executable, "-c", code, command], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1])
        assert done.stdout.strip().splitlines()[-1] == "False", (command, done.stderr[-300:])


def test_every_command_with_threads_measures_the_cores_before_its_package_loads_torch():
    """`lmbench_cli.THREADED` names the commands whose parsers take --threads: the free cores are measured
    (and OpenMP's waiting set) before their package loads the registry, and with it torch."""
    import argparse
    import importlib
    from lmbench_cli import COMMANDS, THREADED
    threaded = set()
    for module in COMMANDS:
        subparsers = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(subparsers)
        for name, parser in subparsers.choices.items():
            nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            parsers = [parser] + [p for action in nested for p in action.choices.values()]
            if any("--threads" in a.option_strings for p in parsers for a in p._actions):
                threaded.add(name)
    assert threaded == set(THREADED)

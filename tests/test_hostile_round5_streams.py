"""Issue 69, item 7: the standard streams of `lmbench score` and `lmbench generate`. Cases, by class:

- standard input that is no text (6): closed (`<&-`: an AttributeError), /dev/zero (read without bound to a
  MemoryError), /dev/null (a device, as FILE /dev/null is refused), NUL bytes, bytes that are not UTF-8, UTF-16
  text (scored as text, where the same bytes as FILE are refused): each refused in one line that names
  standard input, before the model loads, as FILE is (`corpora.text.standard_input`, `text_blocks`);
- a reader of standard output gone (`| head -1`, 4: score's TSV and JSON lines, generate's words and JSON):
  a BrokenPipeError traceback, or Python's "Exception ignored" at exit; now a quiet stop, exit 141, as
  `cat` makes;
- JSON lines of figures beyond a float's range (3 lines: a log10 probability below -1.8e308, a perplexity
  above 1.8e308, the total of both): `-Infinity` and `Infinity`, which no JSON parser reads; now null.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpora.vocab import Vocabulary
from tests.helpers import run_cli
from tests.test_faults import error_line

ROOT = Path(__file__).resolve().parents[1]

# A bigram model over a, b and <unk> (KenLM's <s> and </s> at ARPA's zero): P(a) 1/2, P(b) P(<unk>) 1/4,
# P(b | a) 1/2, so bow(a) = (1 - 1/2) / (1 - 1/4) = 2/3; every other context backs off whole (bow 1).
# {p1}, {bow1}: <s>'s probability and back-off weight; {p2}: P(b | a).
ARPA = """\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
{p1}\t<s>\t{bow1}
-99\t</s>\t0
-0.60205999\t<unk>\t0
-0.30103000\ta\t-0.17609126
-0.60205999\tb\t0

\\2-grams:
{p2}\ta b

\\end\\
"""
VOCAB = Vocabulary(["<unk>", "a", "b", "<s>", "</s>"])
SANE = {"p1": "-99", "bow1": "0", "p2": "-0.30103000"}


def arpa_file(tmp_path, **values) -> str:
    """The model's file with `values` in place of SANE's (tests/test_hostile_round5_arpa.py changes them)."""
    path = tmp_path / "model.arpa"
    path.write_text(ARPA.format(**{**SANE, **values}))
    return str(path)


def pipe_of(data: bytes):
    """A pipe holding `data`, its writer closed, opened for reading as sys.stdin is."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return os.fdopen(read, "r")


# Each: what standard input is, and a word of the one line that refuses it (beside "standard input").
NO_TEXT = {"closed": (lambda: None, "closed"),
           "/dev/null": (lambda: open(os.devnull), "/dev/null, a device"),
           "NUL bytes": (lambda: pipe_of(b"the cat\n\0\1\2\xff"), "NUL byte at offset 8"),
           "latin-1": (lambda: pipe_of("the caf\xe9\n".encode("latin-1")), "not UTF-8"),
           "UTF-16": (lambda: pipe_of("the cat sat\n".encode("utf-16")), "UTF-16LE")}


@pytest.mark.parametrize("case", NO_TEXT)
def test_standard_input_that_is_no_text_is_refused_in_one_line(tmp_path, capsys, monkeypatch, case):
    opened, named = NO_TEXT[case]
    monkeypatch.setattr(sys, "stdin", opened())
    monkeypatch.setattr("lmbench_cli.score._loaded", pytest.fail)  # refused before the model loads
    line = error_line(capsys, ["score", arpa_file(tmp_path), "-", "--threads", "1"])
    assert "standard input" in line and named in line, line


def subprocess_env(tmp_path) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), LMBENCH_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")


def test_dev_zero_on_standard_input_is_refused_before_a_byte_is_read(tmp_path):
    """Read whole, /dev/zero filled the memory (here: under a 3 GiB limit, a MemoryError) before any check."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run([sys.executable, "-c", limit + "from lmbench_cli import main; raise SystemExit(main())",
                               "score", arpa_file(tmp_path), "-", "--threads", "1"], stdin=zero, capture_output=True,
                              text=True, env=subprocess_env(tmp_path), cwd=tmp_path, timeout=300)
    errors = [line for line in done.stderr.splitlines() if line.startswith("lmbench: error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(errors) == 1 and "standard input is /dev/zero, a device" in errors[0], done.stderr


@pytest.mark.parametrize("command", [["score", "{model}", "{text}"], ["score", "{model}", "{text}", "--json"],
                                     ["generate", "{model}", "--words", "50"],
                                     ["generate", "{model}", "--words", "50", "--json"]])
def test_a_reader_gone_from_standard_output_stops_quietly(tmp_path, command):
    text = tmp_path / "lines.txt"
    text.write_text("a b\n" * 50)
    words = [word.format(model=arpa_file(tmp_path), text=text) for word in command]
    read, write = os.pipe()
    os.close(read)  # `| head -0`: the reader gone before the first byte
    try:
        done = subprocess.run([sys.executable, "-m", "lmbench_cli", *words, "--threads", "1"], stdout=write,
                              stderr=subprocess.PIPE, text=True, env=subprocess_env(tmp_path), cwd=tmp_path, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr
    assert [line for line in done.stderr.splitlines() if "lmbench: threads:" not in line] == [], done.stderr


def test_json_lines_beyond_a_float_are_null_and_the_tsv_says_inf(tmp_path, capsys):
    """`<s>` at log10 -7.7e307 (a float once converted, so the file reads), three times on a line: the line's
    log10 probability is below -1.8e308, -inf as a float, and its perplexity and the total's are inf."""
    model, text = arpa_file(tmp_path, p1="-7.7e307"), tmp_path / "lines.txt"
    text.write_text("<s> <s> <s>\n")
    code, out, err = run_cli(capsys, "score", model, text, "--threads", "1", "--json")
    assert code == 0 and "Warning" not in err, err
    entries = [json.loads(line, parse_constant=pytest.fail) for line in out.splitlines()]  # nan, Infinity: refused
    assert [(e["line"], e["log10_prob"], e["perplexity"]) for e in entries] == [(1, None, None), ("total", None, None)]
    code, out, err = run_cli(capsys, "score", model, text, "--threads", "1")
    assert code == 0 and [line.split("\t")[1::3] for line in out.splitlines()[1:]] == [["-inf", "inf"]] * 2

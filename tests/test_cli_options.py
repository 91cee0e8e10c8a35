"""Every subcommand, given options drawn from valid and invalid values, ends with exit code 0 or 2 and
never a traceback; an option refused by construction ends in 2 with one `lmbench: error:` line naming it,
and an argument list of valid values only exits 0 and prints (with --json) the fields it promises, every
perplexity finite and within (1, |V|].

Each drawn option is a pair (its words on the command line, the option's name when the value is invalid
by construction, else None), drawn from a `Maker`: about half the examples take valid values only, so
that the commands also run through. The corpus is a bigram chain over 8 letters whose every one occurs in
train, so that every model, even a network that has not trained (it starts from the unigram), is below
the uniform |V|. The corpora are tiny text files and the cache is a temporary folder, so
each command runs in milliseconds (an NPLM trains a few updates); `lmbench reproduce` with valid options
calls a stand-in for the pipeline, which tests/test_reproduce.py runs end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import math

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from lmbench_cli import main
from tests.helpers import corpus_args, random_text, write_splits

REPO = Path(__file__).resolve().parents[1]
# CI draws the same examples on every run (.ci/run sets HYPOTHESIS_PROFILE=ci), so that a red CI names a
# change, not a new draw; every other run draws afresh (and a failing draw is replayed from .hypothesis/).
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
EXAMPLES = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# Each drawn `nplm train` trains a network (up to 400 updates at batch size 1): 50 of them cost 6-60 s in a
# suite run, with what the other test process runs beside it.
TRAINING_EXAMPLES = settings(EXAMPLES, max_examples=25)
NOT_INTEGERS = ["x", "1.5", "", "1e3", "nan"]
NOT_NUMBERS = ["x", "", "nan", "-inf"]  # "-inf": taken for an option, so the value is missing
ABSENT = st.just(([], None))
Maker = Callable[[bool], st.SearchStrategy]  # valid values only? -> the strategy of (words, refused option)


pytestmark = pytest.mark.slow  # many runs of the command line


@dataclass(frozen=True)
class Place:
    """The files the drawn options point at."""
    root: Path
    train: Path
    valid: Path
    test: Path
    di_logprobs: Path  # deleted interpolation's saved log-probabilities, with context buckets
    kn_logprobs: Path
    empty_folder: Path


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("options")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LMBENCH_CACHE", str(root / "cache"))
        patch.delenv("AP_DIR", raising=False)  # an empty --ap-dir draw must not fall back to a real corpus
        splits = write_splits(root, **{split: random_text(seed, length, "abcdefgh") for split, length, seed
                                       in (("train", 200, 1), ("valid", 40, 2), ("test", 40, 3))})
        assert len(set(splits["train"].read_text().split())) == 8
        (root / "empty").mkdir()
        here = Place(root, splits["train"], splits["valid"], splits["test"], root / "di.npz", root / "kn.npz",
                     root / "empty")
        for method, path in (("deleted-interpolation", here.di_logprobs), ("kneser-ney", here.kn_logprobs)):
            assert main(["ngram", "--method", method, *text_corpus(here), "--save-logprobs", str(path)]) == 0
        yield here


def text_corpus(place: Place) -> list[str]:
    return corpus_args({"train": place.train, "valid": place.valid, "test": place.test})


VOCAB_SIZE = 9  # the chain's 8 words and <unk>


def option(name: str, valid: st.SearchStrategy, invalid: st.SearchStrategy | None = None, *,
           may_be_absent: bool = True) -> Maker:
    """The option left out (when it may be), given a valid value, or (when `invalid` is given and the
    example may hold invalid values) an invalid one."""
    def make(valid_only: bool) -> st.SearchStrategy:
        choices = [ABSENT] if may_be_absent else []
        choices.append(valid.map(lambda value: ([name, value], None)))
        if invalid is not None and not valid_only:
            choices.append(invalid.map(lambda value: ([name, value], name)))
        return st.one_of(choices)

    return make


def merged(parts: tuple) -> tuple[list[str], str | None]:
    """Drawn options as one: their words, and the first refused option (argparse reports the first)."""
    return [word for words, _ in parts for word in words], next((name for _, name in parts if name), None)


class drawer:
    """The draw of one example's options: in about half the examples, valid values only."""

    def __init__(self, data):
        self.data = data
        self.valid_only = data.draw(st.booleans(), label="valid values only")

    def __call__(self, make: Maker) -> tuple[list[str], str | None]:
        return self.data.draw(make(self.valid_only))


def flag(name: str) -> Maker:
    """A flag given or left out."""
    return lambda valid_only: st.sampled_from([([], None), ([name], None)])


def integers(name: str, low: int, high: int, *, refused_above: int | None = None) -> Maker:
    """Valid values in [low, high]; invalid: below low, above refused_above when given, not integers."""
    invalid = st.integers(low - 1000, low - 1) | st.sampled_from(NOT_INTEGERS)
    if refused_above is not None:
        invalid |= st.integers(refused_above + 1, refused_above + 10**12)
    return option(name, st.integers(low, high).map(str), invalid.map(str))


def numbers(name: str, low: float, high: float, *, refused_below: float | None = None,
            refused_above: float | None = None, refused: tuple[str, ...] = ()) -> Maker:
    """Valid values in [low, high]; invalid: below refused_below, above refused_above, `refused` texts."""
    invalid = st.sampled_from(refused) if refused else st.nothing()
    if refused_below is not None:
        invalid |= st.floats(refused_below - 1e6, refused_below - 1e-6).map(repr)
    if refused_above is not None:
        invalid |= st.floats(refused_above + 1e-6, refused_above + 1e6).map(repr)
    return option(name, st.floats(low, high).map(repr), invalid)


def input_file(name: str, place: Place, *good: Path, may_be_absent: bool = True) -> Maker:
    """An existing file (valid), or a missing path, a folder or the empty string (invalid)."""
    return option(name, st.sampled_from([str(p) for p in good]),
                  st.sampled_from([str(place.root / "missing.txt"), str(place.empty_folder), ""]),
                  may_be_absent=may_be_absent)


def output_file(name: str, place: Place) -> Maker:
    """A file to write, maybe under folders still missing (valid), or a folder or a path under a file; each
    option's own (two outputs at one path are refused)."""
    own = name.lstrip("-")
    return option(name, st.sampled_from([str(place.root / "out" / f"{own}.npz"),
                                         str(place.root / "new" / f"{own}.out")]),
                  st.sampled_from([str(place.empty_folder), str(place.train / "under-a-file.npz")]))


def output_folder(name: str, place: Place, *, may_be_absent: bool = True, own: bool = False) -> Maker:
    """A folder to write into, existing or not (valid), or a file or a path under a file (invalid); `own`:
    folders of its own (another output folder may not hold it)."""
    folders = ([place.root / name.lstrip("-"), place.root / "fresh" / name.lstrip("-")] if own
               else [place.empty_folder, place.root / "fresh" / "folder"])
    return option(name, st.sampled_from([str(folder) for folder in folders]),
                  st.sampled_from([str(place.train), str(place.train / "below")]), may_be_absent=may_be_absent)


def corpus_options(place: Place) -> Maker:
    """--corpus text with its three files (each may be invalid) and --min-count, or --corpus ap with a
    folder that holds no AP files (an expected error) and --vocab-size; the flags of either."""
    splits = {"train": place.train, "valid": place.valid, "test": place.test}
    text = [lambda _: st.just((["--corpus", "text"], None)),
            *[input_file(f"--{split}", place, path, may_be_absent=False) for split, path in splits.items()],
            integers("--min-count", 1, 3), flag("--no-cache")]
    ap = [lambda _: st.just((["--corpus", "ap"], None)),
          option("--ap-dir", st.just(str(place.empty_folder)),
                 st.sampled_from([str(place.root / "missing"), str(place.train)])),
          integers("--vocab-size", 5, 20000)]
    return lambda valid_only: st.one_of(st.tuples(*[make(valid_only) for make in options]).map(merged)
                                        for options in ((text,) if valid_only else (text, ap)))


def in_range(perplexity, bounded: bool = True) -> bool:
    """Finite and above 1, and at most |V| when `bounded` (a smoothed word n-gram model is not worse than
    uniform on this corpus; a class model with a drawn few classes, or a network after an epoch or two of a
    drawn recipe, may be: seen, valid 9.38 with 3 classes and 9.63 for an energy network, |V| = 9)."""
    return (isinstance(perplexity, float) and math.isfinite(perplexity) and 1 < perplexity
            and (not bounded or perplexity <= VOCAB_SIZE))


DIVERGED = "lower the learning rate (--lr)"  # a drawn recipe may diverge: the documented one-line stop


def run(capsys, parts, promised: Callable[[dict], None] | None = None) -> None:
    """Run `lmbench` on the drawn parts; check the exit code, the error line for a refused option, and
    when `promised` is given (the options are all valid, --json among them) exit 0 and the figures
    printed, which `promised` checks."""
    argv = [word for words, _ in parts for word in words]
    refused = [name for _, name in parts if name]
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own exit: a usage block, not one line
        pytest.fail(f"lmbench {argv} exited through argparse with {exit.code}")
    out, err = capsys.readouterr()
    event(f"exit code {code}")  # pytest --hypothesis-show-statistics: how many runs got through
    assert code in (0, 2), (argv, err)
    assert "Traceback" not in err
    if code == 2:
        assert "lmbench: error: " in err, (argv, err)
    if refused:
        assert code == 2, (argv, refused)
        errors = [line for line in err.splitlines() if line.startswith("lmbench: error: ")]
        assert len(errors) == 1 and any(name in errors[0] for name in refused), (argv, err)
    elif promised is not None:
        errors = [line for line in err.splitlines() if "lmbench: error: " in line]  # maybe after a progress bar
        assert code == 0 or (len(errors) == 1 and DIVERGED in errors[0]), (argv, err)
        if code == 0:
            promised(json.loads(out))


def promises(*fields: str, perplexities: tuple[str, ...] = (), bounded: bool = True) -> Callable[[dict], None]:
    """The check of a --json result: these fields present, and these perplexities, like every other one
    printed (a key ending in `perplexity`, at any depth), finite within (1, |V|] (above 1 only, unless
    `bounded`)."""
    def check(result: dict) -> None:
        assert set(fields) | set(perplexities) <= set(result), (fields, result)
        for name, value in result.items():
            if isinstance(value, dict):
                check_nested(value)
            elif name.endswith("perplexity"):
                assert in_range(value, bounded), (name, value)

    def check_nested(result: dict) -> None:
        for name, value in result.items():
            if name.endswith("perplexity"):
                assert in_range(value, bounded), (name, value)
    return check


@EXAMPLES
@given(data=st.data())
def test_corpus(place, capsys, data):
    draw = drawer(data)
    words, refused = draw(corpus_options(place))
    run(capsys, [(["corpus", *words[1:]], refused), (["--json"], None)],  # the corpus is a positional name
        promises("tokens", "unk_tokens", "vocab_size", "prepare_seconds") if draw.valid_only else None)


@EXAMPLES
@given(data=st.data())
def test_ngram(place, capsys, data):
    """The options a method refuses (an order outside its range, --classes missing for class, --classes or
    --cluster-passes for another method, a count cutoff for interpolated KN, --arpa of a model that is not
    back-off) are invalid by construction too."""
    from baselines.methods import METHODS
    draw = drawer(data)
    method = data.draw(st.sampled_from(sorted(METHODS)))
    spec = METHODS[method]
    # what each method takes is its registration's (baselines.methods): an option it does not take is refused
    # (given, not ignored), whichever method a contributor registers
    arpa = output_file("--arpa", place)
    if not spec.arpa:
        arpa = option("--arpa", st.nothing(), st.just(str(place.root / "out" / "a.arpa")))
    classes = option("--classes", st.nothing(), st.integers(2, 6).map(str))
    passes = option("--cluster-passes", st.nothing(), st.integers(1, 5).map(str))
    if "classes" in spec.options:
        classes = option("--classes", st.integers(2, 6).map(str), st.just("1"), may_be_absent=False)
    if "cluster_passes" in spec.options:
        passes = integers("--cluster-passes", 1, 5)
    cutoff = (integers("--min-ngram-count", 1, 3) if "min_ngram_count" in spec.options
              else option("--min-ngram-count", st.just("1"), st.integers(2, 3).map(str)))
    given = [(["ngram", "--method", method, "--json"], None),
             draw(integers("--order", spec.min_order, spec.max_order, refused_above=6)),
             draw(classes), draw(passes), draw(cutoff), draw(arpa),
             draw(output_file("--save-logprobs", place)), draw(corpus_options(place))]
    words = merged(given)[0]
    run(capsys, given, promises("method", "order", "vocab_size", *(["arpa"] if "--arpa" in words else []),
                                *(["logprobs"] if "--save-logprobs" in words else []),
                                perplexities=("valid_perplexity", "test_perplexity") + (
                                    ("train_perplexity",) if method != "infini-gram" else ()),  # train not scored
                                bounded=method != "class")  # a few classes over 9 words can be worse than uniform
        if draw.valid_only else None)


def shape_options(data, model: str) -> list:
    """The drawn shape options of window family `model`, each field of its shape (`neural.families`): a
    flag either way, a count from the least its shape takes (the other fields at their defaults) to 4
    more, a text its default; a draw the shape refuses as a whole (--h 0 without --direct) is not run."""
    from dataclasses import fields
    from lmbench.errors import LMBenchError
    from neural.families import FAMILIES, option_name
    shape = FAMILIES[model].shape

    def takes(name: str, value) -> bool:
        try:
            shape(**{name: value})
        except LMBenchError:
            return False
        return True

    drawn, values = [], {}
    for f in fields(shape):
        flag = "--" + option_name(f.name)
        if isinstance(f.default, bool):
            values[f.name] = data.draw(st.booleans())
            drawn.append(([flag if values[f.name] else "--no-" + option_name(f.name)], None))
        elif isinstance(f.default, int):
            low = next(value for value in range(f.default + 1) if takes(f.name, value))
            values[f.name] = data.draw(st.integers(low, low + 4))
            drawn.append(([flag, str(values[f.name])], None))
    try:
        shape(**values)
    except LMBenchError:
        assume(False)
    return drawn


@TRAINING_EXAMPLES
@given(data=st.data())
def test_nplm_train(place, capsys, data, tmp_path_factory):
    """Every window family (`neural.families`), its shape options drawn from its own fields and the run
    options it refuses (dropout where its network has no place for it) kept valid by asking the family."""
    from lmbench.errors import LMBenchError
    from neural.config import OBJECTIVES, RunConfig
    from neural.families import FAMILIES
    draw = drawer(data)
    out = tmp_path_factory.mktemp("nplm-run")
    windowed = sorted(name for name, family in FAMILIES.items() if family.context == "window")
    model = data.draw(st.sampled_from(windowed))
    try:
        RunConfig(model=model, dropout=0.5)
        dropout = 0.5
    except LMBenchError:  # a family without a place for dropout (the energy network) refuses any
        dropout = 0.0
    outputs = FAMILIES[model].shape.outputs  # the output layers the family has (None: every one)
    objectives = [name for name, entry in OBJECTIVES.items() if outputs is None or entry.output in outputs]
    max_steps = draw(integers("--max-steps", 1, 3))  # a speed run: perplexities only once an epoch is done
    run(capsys, [(["nplm", "train", "--device", "cpu", "--threads", "1", "--out", str(out), "--json"], None),
                 *shape_options(data, model),
                 draw(option("--objective", st.sampled_from(objectives))),
                 draw(option("--model", st.just(model), st.just("rbm"), may_be_absent=model == RunConfig().model)),
                 draw(option("--recipe", st.sampled_from(["sgd", "paper"]))),
                 draw(integers("--samples", 1, 20)), draw(integers("--epochs", 1, 2)),
                 draw(integers("--batch-size", 1, 64)),
                 max_steps, draw(integers("--patience", 1, 2)),
                 draw(numbers("--lr", 1e-3, 1.0, refused_below=0.0, refused=tuple(NOT_NUMBERS))),
                 draw(numbers("--dropout", 0.0, dropout, refused_below=0.0, refused_above=1.0)),
                 draw(numbers("--weight-decay", 0.0, 1e-3, refused_below=0.0)),
                 draw(numbers("--checkpoint-minutes", 1e-3, 10.0, refused_below=0.0)),
                 (text_corpus(place), None)],
        promises("epochs", "seconds", "tokens_per_s", perplexities=() if max_steps[0] else
                 ("train_perplexity", "valid_perplexity", "test_perplexity"), bounded=False)
        if draw.valid_only else None)


@EXAMPLES
@given(data=st.data())
def test_nplm_eval_and_neighbors_of_no_run(place, capsys, data):
    command = data.draw(st.sampled_from([["eval"], ["neighbors", "the", "cat"]]))
    folder = data.draw(st.sampled_from([str(place.empty_folder), str(place.root / "missing"), str(place.train)]))
    extra = (option("--split", st.sampled_from(["train", "valid", "test"])) if command == ["eval"]
             else option("--k", st.integers(-3, 20).map(str)))
    oov = (option("--oov", st.sampled_from(["unk", "init"])) if command == ["eval"]
           else option("--oov-from", st.sampled_from(["valid", "test"])))
    run(capsys, [(["nplm", *command, folder], None), data.draw(extra(False)), data.draw(oov(False)),
                 (text_corpus(place), None)])


@EXAMPLES
@given(data=st.data())
def test_mix(place, capsys, data):
    draw = drawer(data)
    good = [([str(place.di_logprobs)], None), ([str(place.kn_logprobs)], None)]
    bad = [([str(place.root / "missing.npz")], "logprobs"), ([str(place.empty_folder)], "logprobs"),
           ([str(place.train)], None)]  # a text file: read, then refused

    def files(valid_only: bool) -> st.SearchStrategy:
        return st.lists(st.sampled_from(good if valid_only else good + bad), min_size=1, max_size=3).map(merged)

    def weights(valid_only: bool) -> st.SearchStrategy:
        refused = st.sampled_from(["x", "", "nan", "inf", "-0.5", "1.5"]).map(lambda w: ([w], "--weights"))
        weight = st.floats(0, 1).map(lambda w: ([repr(w)], None))
        listed = st.lists(weight if valid_only else weight | refused, min_size=1, max_size=3)
        return ABSENT | listed.map(lambda drawn: merged(((["--weights"], None), *drawn)))

    run(capsys, [(["mix"], None), draw(files), draw(option("--method", st.sampled_from(["fixed", "em", "bucketed"]))),
                 draw(input_file("--buckets-from", place, place.di_logprobs, place.kn_logprobs)), draw(weights)])

@EXAMPLES
@given(data=st.data())
def test_reproduce_and_report(place, capsys, data):
    draw = drawer(data)
    command = data.draw(st.sampled_from(["reproduce", "report"]))
    # for report, always given: the default is the real report of the corpus, which would be rebuilt
    report_dir = output_folder("--report-dir", place, may_be_absent=command == "reproduce")
    # report reads the folder --report-dir names: a --quick beside it picks no folder, and is refused
    quick = draw(flag("--quick")) if command == "reproduce" or not draw.valid_only else ([], None)
    if command == "report" and quick[0]:
        quick = (quick[0], "--quick")
    parts = [([command, data.draw(st.sampled_from(["brown", "ap"]))], None), quick, draw(report_dir)]
    if command == "reproduce":
        parts += [draw(output_folder("--work-dir", place, own=True)),  # (not in --report-dir, replaced whole)
                  draw(option("--skip", st.sampled_from(["ngram", "network", "mix"])))]
    summary = {"commit": "commit abc (clean tree)", "report_dir": "r", "wall_seconds": 0.0, "report": "r/report.md",
               "html": "r/report.html", "figures": [], "claims": [], "quick": False}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("reports.running.pipeline.reproduce", lambda *args, **kwargs: summary)
        patch.setattr("reports.building.build.build_report", lambda *args, **kwargs: summary)
        run(capsys, parts + [(["--json"], None)], promises("commit", "report", "html", "claims")
            if draw.valid_only else None)


@EXAMPLES
@given(argv=st.lists(st.sampled_from(["corpus", "ngram", "nplm", "mix", "report", "text", "--json", "--order",
                                      "3", "-v", "--bogus", "x"]), max_size=4))
def test_any_words(place, capsys, argv):
    """Words in any order: a missing subcommand, an unknown option, a value without its option (no
    corpus name: `lmbench corpus brown` would prepare Brown, `lmbench report brown` rebuild its report)."""
    run(capsys, [(argv, None)])


def test_a_refused_option_is_one_line_naming_option_value_and_range(tmp_path):
    """Through `python -m lmbench_cli`, as the Makefile runs it: exit 2, one line on stderr, no corpus."""
    done = subprocess.run([sys.executable, "-m", "lmbench_cli", "ngram", "--method", "katz", "--order", "0"],
                          capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "LMBENCH_CACHE": str(tmp_path)})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("lmbench: error: argument --order: got 0: give an integer from 1 to 6 "
                           "(`lmbench ngram --help` lists the options)\n")
    assert not any(tmp_path.iterdir())  # nothing prepared


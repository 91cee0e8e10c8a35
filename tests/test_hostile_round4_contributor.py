"""Hostile inputs, fourth round (issue 59, items 17-19): a contributor's path. A contributor's family is one
file; the acid test drops a log-bilinear window family (tests/data/log_bilinear.py, one shared word table
and an option of its own, --diagonal) among the family files, where the registry's discovery finds it, and
checks that what follows the registry sees it, no other file edited. 10 tests:

- 17, the tests that listed every family by hand (2): the resume tests classify and refuse the family's
  --diagonal (its shape's fields are its options); the sampled-update test takes its one shared table from
  the network's WORD_TABLES (2 sampled objectives, and its distribution checked).
- 18, what chooses among the families (2): bench/nplm_bench.py --families lists and times it (every family
  but the NPLM); the claims' "best feed-forward network" is picked among every window family's rows (2 picks).
- 19, docs and messages (6): docs/networks.md and docs/architecture.md say what adding a family takes as the
  code does (2 pages); docs/development.md states no count of tests; train's --out and --dropout help and a
  user corpus's report title name no family (3 texts), nor do the energy network's refusal of --dropout and
  eval's of a folder without a model (2 lines); `train --resume` takes the network from the run's
  checkpoint; `reproduce text --extra NAME` names `--networks default,NAME`, which adds NAME to the default
  networks (1 refusal, 2 tables).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

from lmbench_cli import main
from reports.building.claims import beyond_2003  # (before a family is contributed: reports.experiments reads the registry once)
from tests import test_hostile_round3_outputs as resume_tests, test_nplm_families as family_tests
from tests.helpers import corpus_args
from tests.test_faults import error_line
from tests.test_hostile_round3_outputs import TINY, paused, tiny_corpus  # noqa: F401 (paused: a fixture, a tiny run)

ROOT = Path(__file__).resolve().parents[1]
FAMILY_FILE = ROOT / "tests" / "data" / "log_bilinear.py"
MODULE = "neural.networks.log_bilinear"


@pytest.fixture
def contributed(tmp_path, monkeypatch):
    """The log-bilinear family's file put among the family files (a folder added to the path of the package
    `neural.networks`) and found by the registry's own discovery, as a file of neural/networks/ is; the
    registry as it was afterwards. Yields the family's name."""
    import neural.networks
    from neural import families
    folder = tmp_path / "networks"
    folder.mkdir()
    shutil.copy(FAMILY_FILE, folder / "log_bilinear.py")
    families.discover()  # the suite's families, as any earlier test found them
    monkeypatch.setattr(families, "_REGISTERED", dict(families._REGISTERED))
    monkeypatch.setattr(neural.networks, "__path__", [*neural.networks.__path__, str(folder)])
    monkeypatch.setattr(families, "_discovered", False)
    families.discover()
    assert families.FAMILIES["lbl"].network.__module__ == MODULE
    yield "lbl"
    sys.modules.pop(MODULE, None)


# --- 17. the tests that list every family's options and word tables take them from the registration ---------

def test_the_resume_tests_take_a_new_familys_options_from_its_shape(contributed, paused, capsys):  # noqa: F811
    """The tests that classify every option of `train` for --resume listed each family's options by hand:
    the family's --diagonal was unclassified. Its shape's fields are its options, what its network is
    (compared whole on a resume); a resume given one of another family's is refused naming it."""
    resume_tests.test_every_option_of_train_is_classified_for_resume(paused)
    assert "--no-diagonal" in resume_tests.shape_options()
    resume_tests.test_a_resume_with_another_option_than_the_runs_is_refused(paused, capsys, "train")


def test_the_sampled_update_test_takes_the_word_tables_from_the_network(contributed):
    """The sampled-update test asked for two word tables with sparse gradients (the NPLM's C and [U, W]):
    the family's one table R, shared by its context and its output, failed it. The tables are the
    network's WORD_TABLES; each with a row of features per word (not a bias vector) has a sparse gradient."""
    sampled = [objective for family, objective in family_tests.cases(sampled=True) if family == contributed]
    assert sampled == ["importance", "nce"]
    for objective in sampled:
        family_tests.test_sampled_update_touches_only_the_rows_it_uses(contributed, objective)
    family_tests.test_distribution_sums_to_one_and_its_log_is_the_score(contributed, "softmax", torch.float64)


# --- 18. what chooses among the families follows the registry: every window family ------------------------

def test_the_bench_times_every_family_but_the_nplm_whose_shapes_it_times(contributed, capsys, monkeypatch):
    """bench/nplm_bench.py --families took the stream families only: a window family was never timed.
    It takes every registered family but the NPLM (whose shapes --shapes times), by default all of them; a
    window family is timed with the window recipe's update for each objective it takes, and its exact
    scoring."""
    from neural.families import FAMILIES
    spec = importlib.util.spec_from_file_location("nplm_bench", ROOT / "bench" / "nplm_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(sys, "argv", ["nplm_bench.py"])
    assert bench.arguments().families == [name for name in FAMILIES if name != "nplm"]
    monkeypatch.setattr(sys, "argv", ["nplm_bench.py", "--tiny", "--device", "cpu", "--objectives", "importance",
                                      "softmax-bf16", "--families", contributed, "--json"])
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)  # (the bench takes every core)
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [run["objective"] for run in runs if run["shape"] == contributed] == ["importance", "evaluation (exact)"]


def test_the_best_feed_forward_network_is_picked_among_every_window_family(contributed):
    """The claims' "best feed-forward network", a stream network's rival, was picked among the NPLM's rows:
    a window family better on valid was never compared. It is picked among every window family's rows alone,
    on valid."""
    rows = {"mlp1": {"family": "nplm", "valid_ppl": 300.0, "test_ppl": 290.0},
            "mlp1-del-int": {"family": None, "mix": "0.5/0.5", "valid_ppl": 240.0, "test_ppl": 230.0},
            "energy1": {"family": "energy", "valid_ppl": 280.0, "test_ppl": 270.0},
            contributed: {"family": contributed, "valid_ppl": 250.0, "test_ppl": 240.0},
            "lstm": {"family": "lstm", "valid_ppl": 200.0, "test_ppl": 190.0}}
    rows = {key: {"id": key, "mix": None, **row} for key, row in rows.items()}
    claims = {claim["claim"]: claim for claim in beyond_2003(rows)}
    assert claims["The LSTM (ours) beats the best feed-forward network"]["best_on_valid"] == [contributed]
    rows[contributed]["valid_ppl"] = 290.0
    claims = {claim["claim"]: claim for claim in beyond_2003(rows)}
    assert claims["The LSTM (ours) beats the best feed-forward network"]["best_on_valid"] == ["energy1"]


# --- 19. what the docs and the messages say of the families, a resume, a user's corpus's networks ----------

def test_the_docs_say_a_family_is_one_file_that_the_registry_finds():
    """docs/networks.md said a new family takes "one registration line" and that the GRU brought "its entry in
    neural/families.py"; docs/architecture.md, one file the registry finds: the code's way (the acid test's
    family is one file). Both say so now, and neither names a registration outside the family's file."""
    for page in ("networks.md", "architecture.md"):
        text = " ".join((ROOT / "docs" / page).read_text().split())
        assert "`neural/networks/NAME.py`" in text and "registry finds" in text, page
        assert not re.search(r"registration line|entry in `neural/families\.py`", text), page


def test_the_development_page_states_no_count_of_tests():
    """A count of the suite's tests goes stale with the next test: the development page states none (the
    measurement log's are those of the commit each entry names)."""
    text = " ".join((ROOT / "docs" / "development.md").read_text().split())
    assert not re.search(r"\b\d[\d,]* (fast |slow )?tests\b(?![/_.])", text)  # (not -n 0 tests/FILE)


def test_train_help_and_a_user_corpus_report_title_assume_no_family():
    """`--out`'s default was written as the NPLM's (n5-m60-h50-direct), `--dropout`'s help as the NPLM's
    features, the title of a report on a user's corpus "n-gram models and the NPLM"."""
    from lmbench_cli import build_parser
    from reports.building.build import _headings
    from tests.test_hostile_classes import subcommands
    train = dict(subcommands(build_parser(["train"])))[("train",)]
    helps = {action.option_strings[0]: action.help for action in train._actions if action.option_strings}
    assert "SHAPE" in helps["--out"] and "n5-m60" not in helps["--out"]
    assert "NPLM" not in helps["--dropout"] and "NPLM" not in helps["--out"]
    assert "NPLM" not in _headings({"corpus": "text", "name": "mine"})["title"]


def test_the_refusals_of_a_family_or_a_run_name_no_other_family(tmp_path, capsys):
    """The energy network refused --dropout as acting "on the NPLM's [tanh(d + Hx), x]"; `eval` of a folder
    without a model said to train there with `lmbench nplm train`."""
    from lmbench.errors import LMBenchError
    from neural.config import RunConfig
    with pytest.raises(LMBenchError, match="--dropout") as refused:
        RunConfig(model="energy", dropout=0.1)
    assert "NPLM" not in str(refused.value)
    line = error_line(capsys, ["eval", str(tmp_path), "--device", "cpu"])
    assert f"lmbench train --out {tmp_path}" in line and "nplm" not in line, line


def test_a_resume_takes_the_network_from_the_runs_record(tmp_path):
    """`train --out RUN --resume` of an energy network was refused ("--model nplm: the run was trained with
    --model energy") unless --model and the shape options were given again: the run's record holds them."""
    files, run = tiny_corpus(tmp_path / "corpus"), tmp_path / "run"
    assert main(["train", "--model", "energy", *corpus_args(files), *TINY, "--epochs", "1", "--max-steps", "2",
                 "--out", str(run)]) == 0
    assert main(["train", "--device", "cpu", "--threads", "1", "--epochs", "1", "--out", str(run), "--resume"]) == 0
    config = json.loads((run / "result.json").read_text())["config"]
    assert (config["model"], config["shape"]) == ("energy", {"n": 3, "m": 4, "h": 5, "direct": True})


def test_a_user_corpus_takes_the_default_networks_and_one_more(tmp_path, capsys):
    """`reproduce text --extra NAME` was refused as "the text table has no such row group", never naming
    --networks, and --networks could not say "the default networks and this one" (naming one left the
    others out): `--networks default,NAME`, which the refusal names."""
    from neural.families import FAMILIES
    from reports.experiments import rows_beyond_2003
    from reports.running.pipeline import Reproduction
    from reports.running.settings import TextCorpus, default_settings
    files = tiny_corpus(tmp_path / "corpus")
    name = next(name for name, entry in FAMILIES.items() if entry.beyond_2003 and not entry.compared)
    line = error_line(capsys, ["reproduce", "text", *(f"--{split}={path}" for split, path in files.items()),
                               "--quick", "--extra", name, "--work-dir", str(tmp_path / "work"),
                               "--report-dir", str(tmp_path / "report")])
    assert f"--networks default,{name}" in line, line

    def table(networks):
        reproduction = Reproduction(default_settings("text", True), tmp_path / "work", tmp_path / "report",
                                    TextCorpus(**files, networks=networks), code={})
        reproduction.corpus = reproduction.load_corpus()
        return {row.id for row in reproduction.table_rows()}

    assert table(("default", name)) == table(None) | {row.id for row in rows_beyond_2003((name,))} > table((name,))
    assert table(("default",)) == table(None)

"""A work folder's files prove which row they belong to (issue 69 items 1 and 2): each file a row reads back, its
network's best model and checkpoint (nplm/ID-FINGERPRINT), its log-probabilities (logprobs/ID.npz) and its record
(rows/ID.json), an n-gram row's kept model (ngram/ID-FINGERPRINT.lmb), exchanged with its twin of another row, is refused in one line or the row computed again (a log
line saying so), never read as the other row's figure; the fields of corpus.json (its slice, their types, the
digest of the corpus the rows ran on) are checked, and one that loads another corpus than the rows ran on is
refused in one line.

Seen failing before the change (the same tests run against the commit before it): the LSTM row's best model
replaced by MLP1's gave exit 0 and MLP1's figure in the LSTM's row (the other way round an AttributeError), load
returned the other network; rows/lstm.json holding MLP1's record loaded MLP1 as row lstm; logprobs/lstm.npz
holding MLP1's was mixed as the LSTM's (the mixture's figure changed); a slice of "train": 500 refitted the row on
500 tokens silently, "abc" there was a TypeError."""

import json
import logging
import shutil
from pathlib import Path

import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import copied_work_folder, quick_work_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A quick `reproduce text` with a window network (MLP1) and a stream network (LSTM) row."""
    return quick_work_folder(tmp_path_factory.mktemp("work"))


@pytest.fixture
def copy(folder, tmp_path):
    """A copy of the work folder, and the command that runs it again (its report elsewhere)."""
    return copied_work_folder(folder, tmp_path)


FAMILY = {"mlp1": "nplm", "lstm": "lstm"}  # each network row's family


def training_folder(work: Path, row: str) -> Path:
    (found,) = (work / "nplm").glob(f"{row}-*")
    return found


def put(source: Path, target: Path) -> None:
    """`source` copied over `target`, with its record of its content (.sha256) where it has one."""
    shutil.copyfile(source, target)
    for side in (".sha256",):
        if Path(f"{source}{side}").exists():
            shutil.copyfile(f"{source}{side}", f"{target}{side}")


def perplexity(folder, model) -> float:
    history = folder["texts"]["train"] + folder["texts"]["valid"]
    return model.perplexity(folder["texts"]["test"], bos=False, eos=False, history=history)


def refused(call) -> str:
    with pytest.raises(LMBenchError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def rerun(copy, capsys) -> tuple[int, dict, str]:
    """The command run again on the copy: its exit code, its rows by id (where it wrote a report), its stderr."""
    capsys.readouterr()
    code = main(copy["command"])
    err = capsys.readouterr().err
    rows = ({row["id"]: row for row in json.loads(copy["report"].read_text())["rows"]}
            if code == 0 else {})
    return code, rows, err


@pytest.mark.parametrize("row, other, which", [("lstm", "mlp1", "best.safetensors"),
                                               ("mlp1", "lstm", "best.safetensors"),
                                               ("lstm", "mlp1", "checkpoint.safetensors")])
def test_another_rows_network_file_is_refused_by_load_and_reproduce(folder, copy, capsys, row, other, which):
    """Another family's model (or checkpoint) in a row's training folder: `load(row=...)` refuses it in one line
    (it returned the other network), and `reproduce` with the row's record deleted stops in one line naming
    the file and what reproduce's user does (it gave exit 0 and the other row's figure, or an AttributeError; a
    checkpoint's line advised lmbench train's --model and --out), never the other row's figure."""
    work = copy["work"]
    put(training_folder(work, other) / which, training_folder(work, row) / which)
    if which == "best.safetensors":
        message = refused(lambda: lmbench.load(work, row=row))
        assert training_folder(work, row).name in message and f"family {FAMILY[other]}" in message, message
    (work / "rows" / f"{row}.json").unlink()
    code, rows, err = rerun(copy, capsys)
    assert code == 2, (code, rows.get(row))
    lines = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert len(lines) == 1 and training_folder(work, row).name in lines[0] and FAMILY[other] in lines[0], err
    # reproduce's own advice (the checkpoint's line told it to resume with --model ... or another --out, options
    # of lmbench train that reproduce has not)
    assert "--out" not in lines[0] and "--model" not in lines[0] and "run the same command again" in lines[0], err


@pytest.mark.parametrize("row, other", [("kn-interp-5", "kn-interp-3"), ("kn-interp-5", "kn-backoff-5")])
def test_another_rows_kept_ngram_model_is_refused_by_load_and_fitted_again(folder, copy, capsys, caplog, row, other):
    """ngram/ID-FINGERPRINT.lmb holding another n-gram row's model (its content record beside it, so it reads as
    intact; of the same order and kind too): `load` refuses it in one line (it returned the other row's model);
    `reproduce` fits the row again, saying so, and then `load` gives the row's figure."""
    work = copy["work"]
    (target,) = (work / "ngram").glob(f"{row}-*.lmb")
    (source,) = (work / "ngram").glob(f"{other}-*.lmb")
    put(source, target)
    message = refused(lambda: lmbench.load(work, row=row))
    assert f"model of row {other}" in message and target.name in message, message
    with caplog.at_level(logging.WARNING):
        code, rows, _ = rerun(copy, capsys)
    assert code == 0
    assert any(f"not of row {row}: it is fitted again" in record.getMessage() for record in caplog.records), caplog.text
    assert perplexity(folder, lmbench.load(work, row=row)) == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-9)


@pytest.mark.parametrize("row, other", [("lstm", "mlp1"), ("kn-interp-3", "kn-interp-5")])
def test_another_rows_record_is_refused_by_load_and_run_again_by_reproduce(folder, copy, capsys, caplog, row, other):
    """rows/ROW.json holding another row's record: `load` refuses it in one line (it loaded the other row's model
    as this row); `reproduce` runs the row again, saying so, and reports the row's own figure."""
    work = copy["work"]
    put(work / "rows" / f"{other}.json", work / "rows" / f"{row}.json")
    message = refused(lambda: lmbench.load(work, row=row))
    assert f"record of row '{other}'" in message and f"{row}.json" in message, message
    with caplog.at_level(logging.WARNING):
        code, rows, _ = rerun(copy, capsys)
    assert code == 0
    assert rows[row]["test_ppl"] == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-6)
    assert any(f"row {row} runs again" in record.getMessage() for record in caplog.records), caplog.text
    model = lmbench.load(work, row=row)
    assert perplexity(folder, model) == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-6)


@pytest.mark.parametrize("row, other, mixture", [("lstm", "mlp1", "lstm-kn-interp-5-em"),
                                                 ("kn-interp-5", "kn-interp-3", "mlp1-kn-interp-5-em")])
def test_another_rows_logprobs_are_never_mixed_as_the_rows(folder, copy, capsys, caplog, row, other, mixture):
    """logprobs/ROW.npz holding another row's log-probabilities (same corpus, same lengths): the row runs again,
    saying so, and its mixture (run again) gives its own figure (it mixed the other row's)."""
    work = copy["work"]
    put(work / "logprobs" / f"{other}.npz", work / "logprobs" / f"{row}.npz")
    (work / "rows" / f"{mixture}.json").unlink()
    with caplog.at_level(logging.WARNING):
        code, rows, _ = rerun(copy, capsys)
    assert code == 0
    assert rows[mixture]["test_ppl"] == pytest.approx(folder["rows"][mixture]["test_ppl"], rel=1e-6)
    assert rows[row]["test_ppl"] == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-6)
    assert any(f"row {row} runs again" in record.getMessage() for record in caplog.records), caplog.text


@pytest.fixture
def older(copy):
    """The copy as a release before this one left it (no kept model, no vocabulary): what reads corpus.json."""
    shutil.rmtree(copy["work"] / "ngram")
    (copy["work"] / "vocab.json").unlink()
    return copy["work"]


def edit_record(work: Path, change) -> None:
    path = work / "corpus.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("digest", [True, False], ids=["recorded digest", "older record without digest"])
@pytest.mark.parametrize("cut", [{"train": 500}, {"valid": 300}, {"test": 400}, {"min_count": 60}])
def test_a_slice_that_loads_another_corpus_is_refused(folder, older, cut, digest):
    """corpus.json's slice edited: the corpus it loads is not the one the rows ran on (the recorded digest, or the
    vocabulary and stream of the row's log-probabilities where an older record has none): refused in one line
    (a train of 500 refitted the row on 500 tokens silently). The slice as written still loads the row's figure."""
    row = "kn-interp-5"
    model = lmbench.load(older, row=row)
    assert perplexity(folder, model) == pytest.approx(folder["rows"][row]["test_ppl"], rel=1e-9)

    def change(record):
        record["slice"].update(cut)
        if not digest:
            record.pop("digest", None)
    edit_record(older, change)
    for asked in (row, "mlp1"):
        message = refused(lambda: lmbench.load(older, row=asked))
        assert "corpus.json" in message and "another corpus" in message, message


@pytest.mark.parametrize("cut", [{"train": 20000}, {"min_count": 1}])
def test_a_slice_that_cuts_nothing_more_loads_the_same_corpus(folder, older, cut):
    """A slice that gives the same corpus (larger than the files; a min_count every word of them passes): no
    refusal, the row's figure: what is compared is the corpus, not the record's text."""
    edit_record(older, lambda record: record["slice"].update(cut))
    model = lmbench.load(older, row="kn-interp-5")
    assert perplexity(folder, model) == pytest.approx(folder["rows"]["kn-interp-5"]["test_ppl"], rel=1e-9)


BAD_FIELDS = {
    "slice train abc": lambda r: r["slice"].update(train="abc"),
    "slice train true": lambda r: r["slice"].update(train=True),
    "slice train 0": lambda r: r["slice"].update(train=0),
    "slice train 2.5": lambda r: r["slice"].update(train=2.5),
    "slice without min_count": lambda r: r["slice"].pop("min_count"),
    "slice with a stray key": lambda r: r["slice"].update(vocab=3),
    "slice a list": lambda r: r.update(slice=[10000, 2000, 2000, 3]),
    "slice null": lambda r: r.update(slice=None),
    "digest a number": lambda r: r.update(digest=12),
    "digest not hex": lambda r: r.update(digest="z" * 16),
    "min_count abc": lambda r: r.update(min_count="abc"),
    "min_count null": lambda r: r.update(min_count=None),
    "a stray field": lambda r: r.update(slices={"train": 500}),
    "no corpus": lambda r: r.pop("corpus"),
}


@pytest.mark.parametrize("name", BAD_FIELDS)
def test_a_corpus_record_field_of_the_wrong_type_is_refused_in_one_line(older, name):
    """Each field of corpus.json checked against its type: one line naming corpus.json (a slice of "abc" was a
    TypeError, a null slice loaded the whole corpus)."""
    edit_record(older, BAD_FIELDS[name])
    message = refused(lambda: lmbench.load(older, row="kn-interp-5"))
    assert "corpus.json" in message and "cannot read corpus record" in message, message
    assert "lmbench reproduce" in message, message

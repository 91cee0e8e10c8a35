"""Every file a work folder holds, exchanged with its twin of another run, seed or family (issue 69, round 5):
read by `lmbench.load(folder, row=...)`, `lmbench score FOLDER --row ID FILE` and `lmbench reproduce` run again,
each is refused in one line or gives the folder's own figure, never another run's figure read silently.

Three work folders of the same command (`reproduce text --quick --seeds 2 --networks mlp1,lstm`): the folder;
"run", one of another corpus of the same vocabulary (its train the folder's train read backwards: the same words
and counts, other n-grams; other valid and test texts); "vocabulary", one of another corpus and vocabulary. Each
case copies the folder and puts the twin (with its content record, .sha256, where it has one) in the place of one
file. The files a quick folder holds: corpus.json, vocab.json, rows/ID.json (and its .lock, empty: the same in
every folder, nothing to exchange), logprobs/ID.npz, ngram/ID-FINGERPRINT.lmb, nplm/ID-FINGERPRINT/ (best and
checkpoint.safetensors, log.jsonl, result.json), samples/ID.json; another ROW's twin of the row's record, model
files and log-probabilities is tests/test_hostile_round5_folders.py's.

26 cases, outcome of load / score / reproduce, before the change -> after ("same": the folder's own figures):
- vocab.json of run (the same word list): same / same / same; of vocabulary: refused (the network was
  trained on another vocabulary) / refused / same (reproduce writes it again) -> unchanged
- corpus.json of run: same / same / same (written again) -> refused / refused / same (the network was trained on
  another corpus than corpus.json records); of vocabulary, read for an n-gram row: same (its kept model) -> unchanged
- rows/mlp1.json of run: refused (no training folder of its fingerprint) / refused / same (run again);
  rows/kn-interp-5.json of run: same (refitted on the folder's corpus) / same / same (run again) -> unchanged
- logprobs/mlp1.npz of run and of seed, logprobs/kn-interp-5.npz of run and of vocabulary: same / same (neither
  reads them) / same (the row run again, saying so) -> unchanged
- ngram/kn-interp-5-FINGERPRINT.lmb of run and of vocabulary: refused / refused / same (fitted again, saying so)
  -> unchanged
- nplm/mlp1-FINGERPRINT/best.safetensors of run and of seed: the twin's figure in all three (load's and score's
  perplexity, reproduce's test and valid perplexity and samples) -> refused in all three (trained on corpus X,
  or seed 1, the row's: ...); nplm/lstm-.../best.safetensors of run: same (by chance) / the twin's / the twin's
  -> refused in all three; mlp1's of vocabulary: refused in all three (another vocabulary) -> unchanged
- checkpoint.safetensors of run and of seed: same / same / same (a finished run's checkpoint gives no figure)
  -> unchanged
- log.jsonl of run, of seed and of lstm: same / same / the twin's training curve in the report -> same / same /
  refused (its epoch's valid perplexity is not the best model's)
- result.json of run, of seed and of lstm: same / same / same (its figures are the checkpoint's) -> unchanged
- samples/mlp1.json of run and of lstm: same / same / drawn again without a word -> drawn again, saying so

And 2 cases of an unfinished run (the last test): checkpoint.safetensors of run and of seed, resumed by the
trainer: resumed as this run's, ending as neither -> refused in one line (another run's: trained on corpus X, or
seed 4).
"""

import json
import logging
import shutil
from pathlib import Path

import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import chain_text, copied_work_folder, corpus_args, write_splits


def build(root: Path, texts: dict) -> dict:
    """A quick reproduction of `texts` (split -> text) into root/runs/mine-quick: {"work", "command", "texts",
    "results" (its results.json), "records" (each rows/ID.json by id)}."""
    (root / "corpus").mkdir(parents=True)
    files = write_splits(root / "corpus", **texts)
    work = root / "runs" / "mine-quick"
    command = ["reproduce", "text", "--quick", "--name", "mine", *corpus_args(files)[2:], "--networks", "mlp1,lstm",
               "--seeds", "2", "--work-dir", str(work), "--report-dir", str(root / "report"), "--threads", "1"]
    assert main(command) == 0
    records = {path.stem: json.loads(path.read_text()) for path in (work / "rows").glob("*.json")}
    return {"work": work, "command": command, "texts": texts, "files": files, "records": records,
            "results": json.loads((root / "report" / "results.json").read_text())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    train = chain_text(5000, 21)
    texts = {"train": train, "valid": chain_text(700, 22), "test": chain_text(700, 23)}
    backwards = {"train": " ".join(reversed(train.split())) + "\n", "valid": chain_text(700, 32),
                 "test": chain_text(700, 33)}
    another = {"train": chain_text(5000, 41), "valid": chain_text(700, 42), "test": chain_text(700, 43)}
    return {"folder": build(tmp_path_factory.mktemp("folder"), texts),
            "run": build(tmp_path_factory.mktemp("run"), backwards),
            "vocabulary": build(tmp_path_factory.mktemp("vocabulary"), another)}


def place(work: Path, row: str) -> Path:
    """A row's training folder (nplm/ID-FINGERPRINT) or kept model (ngram/ID-FINGERPRINT.lmb) in `work`."""
    (found,) = [path for path in [*(work / "nplm").glob(f"{row}-*"), *(work / "ngram").glob(f"{row}-*.lmb")]
                if path.name.rsplit("-", 1)[0] == row]
    return found


def where(work: Path, name: str) -> Path:
    """The file `name` names in `work`: a path, with {ID} for a row's training folder or kept model."""
    head, _, rest = name.partition("/")
    if head.startswith("{") and head.endswith("}"):
        return place(work, head[1:-1]) / rest if rest else place(work, head[1:-1])
    return work / name


def put(source: Path, target: Path) -> None:
    """`source` copied over `target`, with its record of its content (.sha256) where it has one."""
    shutil.copyfile(source, target)
    if Path(f"{source}.sha256").exists():
        shutil.copyfile(f"{source}.sha256", f"{target}.sha256")


# (file, the row read, twin: "run" (the folder of another corpus of the same vocabulary), "vocabulary" (of another
#  corpus and vocabulary), "seed" (the row's copy of seed 1, mlp1-seed1) or another family's row (lstm), whether
#  reproduce reads the file only when the row runs: its record deleted first)
CASES = [
    ("vocab.json", "mlp1", "run", False),
    ("vocab.json", "mlp1", "vocabulary", False),
    ("corpus.json", "mlp1", "run", False),
    ("corpus.json", "kn-interp-5", "vocabulary", False),
    ("rows/mlp1.json", "mlp1", "run", False),
    ("rows/kn-interp-5.json", "kn-interp-5", "run", False),
    ("logprobs/mlp1.npz", "mlp1", "run", False),
    ("logprobs/mlp1.npz", "mlp1", "seed", False),
    ("logprobs/kn-interp-5.npz", "kn-interp-5", "run", False),
    ("logprobs/kn-interp-5.npz", "kn-interp-5", "vocabulary", False),
    ("{kn-interp-5}", "kn-interp-5", "run", False),
    ("{kn-interp-5}", "kn-interp-5", "vocabulary", False),
    ("{mlp1}/best.safetensors", "mlp1", "run", True),
    ("{mlp1}/best.safetensors", "mlp1", "seed", True),
    ("{lstm}/best.safetensors", "lstm", "run", True),
    ("{mlp1}/best.safetensors", "mlp1", "vocabulary", True),
    ("{mlp1}/checkpoint.safetensors", "mlp1", "run", True),
    ("{mlp1}/checkpoint.safetensors", "mlp1", "seed", True),
    ("{mlp1}/log.jsonl", "mlp1", "run", True),
    ("{mlp1}/log.jsonl", "mlp1", "seed", True),
    ("{mlp1}/log.jsonl", "mlp1", "lstm", True),
    ("{mlp1}/result.json", "mlp1", "run", True),
    ("{mlp1}/result.json", "mlp1", "seed", True),
    ("{mlp1}/result.json", "mlp1", "lstm", True),
    ("samples/mlp1.json", "mlp1", "run", False),
    ("samples/mlp1.json", "mlp1", "lstm", False),
]


def twin(runs, name: str, twin_of: str) -> Path:
    """The twin of file `name` of the folder: the same file of the other run, or of the row's seed copy or of
    another family's row in the folder itself."""
    if twin_of in ("run", "vocabulary"):
        return where(runs[twin_of]["work"], name)
    other = "mlp1-seed1" if twin_of == "seed" else twin_of
    swapped = name.replace("{mlp1}", "{" + other + "}").replace("/mlp1.", f"/{other}.")
    return where(runs["folder"]["work"], swapped)


@pytest.fixture
def copy(runs, tmp_path):
    return copied_work_folder(runs["folder"], tmp_path)


def one_line(err: str) -> bool:
    return len([line for line in err.splitlines() if line.startswith("lmbench: error:")]) == 1


def loaded(runs, work: Path, row: str) -> str:
    """`load(work, row=row)`'s test perplexity against the row's own: refused (one line), same or WRONG."""
    folder = runs["folder"]
    try:
        model = lmbench.load(work, row=row, threads=1)
    except LMBenchError as refusal:
        return "refused" if "\n" not in str(refusal) else f"refused in lines: {refusal}"
    texts = folder["texts"]
    found = model.perplexity(texts["test"], bos=False, eos=False, history=texts["train"] + texts["valid"])
    own = folder["records"][row]["test_ppl"]
    return "same" if found == pytest.approx(own, rel=1e-6) else f"WRONG: {found} (the row's {own})"


def scored(runs, work: Path, row: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["score", str(work), "--row", row, str(runs["folder"]["files"]["test"]), "--json", "--threads", "1"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def own_scores(runs):
    return {}


def score_outcome(runs, work: Path, row: str, capsys, own_scores) -> str:
    """`lmbench score WORK --row ROW test.txt` against the same command on the folder itself."""
    if row not in own_scores:
        own_scores[row] = scored(runs, runs["folder"]["work"], row, capsys)
        assert own_scores[row][0] == 0, own_scores[row]
    code, out, err = scored(runs, work, row, capsys)
    if code == 2:
        return "refused" if one_line(err) else f"refused in lines: {err}"
    return "same" if (code, out) == own_scores[row][:2] else f"WRONG: exit {code}, {out[:200]} {err[-300:]}"


FIGURES = ("test_ppl", "valid_ppl", "train_ppl", "seeds", "curve", "train_tokens", "updates", "epochs")


def reproduced(runs, copy, row: str, runs_again: bool, capsys) -> str:
    """`reproduce` run again on the copy (the row's record deleted where `runs_again`): refused (one line), or
    its figures those of the folder's own report (the row's, and the samples), or WRONG."""
    if runs_again:
        (copy["work"] / "rows" / f"{row}.json").unlink()
    capsys.readouterr()
    code = main(copy["command"])
    err = capsys.readouterr().err
    if code == 2:
        return "refused" if one_line(err) else f"refused in lines: {err}"
    if code != 0:
        return f"WRONG: exit {code}: {err[-500:]}"
    own = runs["folder"]["results"]
    results = json.loads(copy["report"].read_text())
    mine = {r["id"]: r for r in own["rows"]}[row]
    found = {r["id"]: r for r in results["rows"]}[row]
    differs = [key for key in FIGURES if mine.get(key) != pytest.approx(found.get(key), rel=1e-6)
               and not (key in ("seeds", "curve") and close_records(mine.get(key), found.get(key)))]
    if json.dumps(results.get("samples")) != json.dumps(own.get("samples")):
        differs.append("samples")
    return "same" if not differs else f"WRONG: {', '.join(differs)} of row {row}"


def close_records(mine, found) -> bool:
    """Lists of records (a row's seeds, its curve) equal, their floats within 1e-6, their seconds left out."""
    if not (isinstance(mine, list) and isinstance(found, list) and len(mine) == len(found)):
        return mine == found
    for a, b in zip(mine, found):
        keys = {key for key in a if "second" not in key and "per_s" not in key}
        if keys != {key for key in b if "second" not in key and "per_s" not in key}:
            return False
        if any(a[key] != pytest.approx(b[key], rel=1e-6) for key in keys):
            return False
    return True


@pytest.mark.parametrize("name, row, twin_of, runs_again", CASES,
                         ids=[f"{name} of {twin_of}" for name, _, twin_of, _ in CASES])
def test_a_file_exchanged_with_its_twin_is_refused_or_read_as_the_folders_own(runs, copy, capsys, caplog, own_scores,
                                                                                name, row, twin_of, runs_again):
    """The file replaced by its twin: load, score and reproduce each refuse it in one line or give the row's own
    figures (the folder's report, its samples), never the twin's; samples drawn again are said to be."""
    put(twin(runs, name, twin_of), where(copy["work"], name))
    outcomes = {"load": loaded(runs, copy["work"], row),
                "score": score_outcome(runs, copy["work"], row, capsys, own_scores)}
    with caplog.at_level(logging.INFO):
        outcomes["reproduce"] = reproduced(runs, copy, row, runs_again, capsys)
    assert all(outcome in ("refused", "same") for outcome in outcomes.values()), outcomes
    if name.startswith("samples/"):
        assert any(message.endswith(f"than row {row}'s: drawn again") for message in caplog.messages), caplog.text


@pytest.mark.parametrize("twin", ("run", "seed"))
def test_a_checkpoint_of_another_run_or_seed_is_never_resumed_as_this_runs(tmp_path, twin):
    """An unfinished network's checkpoint.safetensors in its place, from a run on another corpus of the same
    vocabulary (its train text reversed) or of another seed: resumed, the run would end as neither (the round's
    one case left open by 0aeca04: a resume compared neither the corpus nor the seed). Refused in one line."""
    from dataclasses import replace

    from corpora.text import load_text
    from neural.config import RunConfig
    from neural.training.trainer import train_network
    train = chain_text(3000, 31)
    (tmp_path / "mine").mkdir()
    (tmp_path / "theirs").mkdir()
    mine = write_splits(tmp_path / "mine", train=train, valid=chain_text(400, 32), test=chain_text(400, 33))
    reversed_train = " ".join(reversed(train.split()))
    theirs = write_splits(tmp_path / "theirs", train=reversed_train, valid=chain_text(400, 32),
                          test=chain_text(400, 33))
    corpus = load_text(mine["train"], mine["valid"], mine["test"])
    other = load_text(theirs["train"], theirs["valid"], theirs["test"])
    assert other.vocab.fingerprint() == corpus.vocab.fingerprint()
    config = RunConfig(model="nplm", objective="softmax", n=3, m=6, h=5, epochs=2, seed=3, device="cpu", threads=1,
                       precision="fp32")
    theirs_run = (other, config) if twin == "run" else (corpus, replace(config, seed=4))
    train_network(*theirs_run, tmp_path / "out", progress=False, evaluate=False)
    with pytest.raises(LMBenchError, match="is another run's: " + ("trained on corpus" if twin == "run" else
                                                                   "seed 4 \\(this run's: 3\\)")):
        train_network(corpus, config, tmp_path / "out", resume=True, progress=False, evaluate=False)

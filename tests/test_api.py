"""`lmbench.load` (reports.api) and `lmbench score` / `generate`: a loaded model gives the benchmark's own
figures (an n-gram row, an ARPA file, a window network, a stream network, a run folder of `lmbench train`),
KenLM's meanings of bos, eos and full_scores, reproducible samples from its vocabulary, and every bad input
refused in one line with nothing written."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import chain_text, corpus_args, run_cli, write_splits

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n", "3", "--m", "4", "--h", "5", "--device", "cpu", "--threads", "1"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A quick `reproduce text` (its n-gram rows, MLP1 and the LSTM) in runs/mine-quick, the KN 3 ARPA
    file of `lmbench ngram --arpa`, a tiny `lmbench train` run, the corpus files and every figure."""
    root = tmp_path_factory.mktemp("api")
    files = write_splits(root, train=chain_text(6000, 1), valid=chain_text(800, 2), test=chain_text(800, 3))
    work = root / "runs" / "mine-quick"
    assert main(["reproduce", "text", "--quick", "--name", "mine", *corpus_args(files)[2:], "--networks", "mlp1,lstm",
                 "--work-dir", str(work), "--report-dir", str(root / "report"), "--threads", "1"]) == 0
    results = json.loads((root / "report" / "results.json").read_text())
    rows = {row["id"]: row for row in results["rows"]}
    arpa = root / "kn3.arpa"
    assert main(["ngram", "--method", "kneser-ney", "--order", "3", *corpus_args(files), "--arpa", str(arpa),
                 "--save-logprobs", str(root / "kn3.npz")]) == 0
    run = root / "run"
    assert main(["train", *corpus_args(files), *TINY, "--epochs", "1", "--out", str(run)]) == 0
    texts = {split: path.read_text() for split, path in files.items()}
    return {"root": root, "files": files, "work": work, "rows": rows, "arpa": arpa, "run": run, "texts": texts,
            "results": results}


def test_import_lmbench_loads_no_torch_and_offers_load():
    import subprocess
    import sys
    code = "import sys, lmbench; assert 'torch' not in sys.modules and 'reports' not in sys.modules; print(lmbench.load)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and "function load" in done.stdout, done.stderr


@pytest.mark.parametrize("row", ["kn-interp-5", "katz-3", "mlp1", "lstm"])
def test_a_loaded_row_gives_the_reports_test_perplexity(saved, row):
    """The n-gram rows refitted from the work folder's corpus record, MLP1 (a window network) and the LSTM (a
    stream network, reading all of train and valid before test) from their training folders."""
    model = lmbench.load(saved["work"], row=row)
    history = saved["texts"]["train"] + saved["texts"]["valid"]
    found = model.perplexity(saved["texts"]["test"], bos=False, eos=False, history=history)
    assert found == pytest.approx(saved["rows"][row]["test_ppl"], rel=1e-9)


def test_an_arpa_file_gives_its_models_test_perplexity(saved):
    from baselines.arpa_reader import read_arpa
    from mixing import saved as saved_logprobs
    model = lmbench.load(saved["arpa"])
    history = saved["texts"]["train"] + saved["texts"]["valid"]
    test = saved["texts"]["test"]
    expected = saved_logprobs.load(saved["root"] / "kn3.npz")["test"]  # the fitted model's, before writing
    assert model.perplexity(test, bos=False, eos=False, history=history) == pytest.approx(
        np.exp(-expected.mean()), rel=1e-6)  # (8 printed decimals)
    # full_scores: the suite's own ARPA reader over the file's words, token by token, in log10
    scores = np.array([logprob for logprob, _, _ in model.full_scores(test, bos=False, eos=False, history=history)])
    reader = read_arpa(saved["arpa"], model.vocab)
    ids = model.vocab.encode((history + test).split())
    assert np.allclose(scores, reader.score(ids, len(history.split())) / np.log(10), rtol=0, atol=1e-12)


def test_a_train_run_folder_gives_its_test_perplexity(saved):
    result = json.loads((saved["run"] / "result.json").read_text())
    model = lmbench.load(saved["run"])
    history = saved["texts"]["train"] + saved["texts"]["valid"]
    assert model.perplexity(saved["texts"]["test"], bos=False, eos=False, history=history) == pytest.approx(
        result["test_perplexity"], rel=1e-9)


KENLM_STYLE = """\\data\\
ngram 1=6
ngram 2=3

\\1-grams:
-1.5\t<unk>\t0
-1.0\t</s>\t0
-99\t<s>\t-0.2622116
-0.7\ta\t-0.6791998
-0.8\tb\t0
-0.2921219\td\t0

\\2-grams:
-0.25\t<s> a
-0.4\ta b
-0.35\ta </s>

\\end\\
"""


def test_an_arpa_file_with_sentence_markers_is_scored_as_kenlm_scores_it(tmp_path):
    """bos reads after <s>, eos scores </s>; full_scores gives KenLM's (log10 p, n-gram length, oov): the
    listed bigram, or the back-off weight of the context plus the unigram, and <unk> for an unknown word."""
    path = tmp_path / "kenlm.arpa"
    path.write_text(KENLM_STYLE)
    model = lmbench.load(path)
    assert np.allclose(list(model.full_scores("a")), [(-0.25, 2, False), (-0.35, 2, False)])
    assert np.allclose(list(model.full_scores("b c")), [(-1.0622116, 1, False), (-1.5, 1, True), (-1.0, 1, False)])
    assert model.score("a b") == pytest.approx(-0.25 - 0.4 - 1.0)  # a b, then b </s> (bow(b) = 0)
    assert model.score("a", bos=False, eos=False) == pytest.approx(-0.7)
    assert model.perplexity("a") == pytest.approx(10 ** ((0.25 + 0.35) / 2))
    assert model.next_words("a", k=2) == [("</s>", pytest.approx(10 ** -0.35)), ("b", pytest.approx(10 ** -0.4))]


def test_full_scores_of_an_arpa_file_are_kenlms(saved, tmp_path):
    """Where KenLM's module is installed (`pip install kenlm`): the same log10 probabilities (KenLM's float32),
    n-gram lengths and oov flags, for a file with KenLM's markers and for the suite's own (whose <s> and </s>
    are placeholders: its sentences are scored without eos)."""
    kenlm = pytest.importorskip("kenlm")
    path = tmp_path / "kenlm.arpa"
    path.write_text(KENLM_STYLE)
    for arpa, sentence, eos in ((path, "a b c a a b", True), (saved["arpa"], "w0 w50 w26 w6 zzz w31 w75", False)):
        theirs = np.array(list(kenlm.Model(str(arpa)).full_scores(sentence, bos=True, eos=eos)), dtype=float)
        ours = np.array(list(lmbench.load(arpa).full_scores(sentence, bos=True, eos=eos)), dtype=float)
        assert theirs.shape == ours.shape and np.allclose(ours, theirs, rtol=0, atol=1e-6)


def test_a_corpus_with_paragraph_ends_marks_sentences_with_them(tmp_path):
    """A corpus whose units end in </p> (Brown's): bos reads after a </p>, eos scores the next one."""
    text = " ".join(f"w{i % 7} w{(i * 3) % 5} </p>" for i in range(400))
    files = write_splits(tmp_path, train=text, valid=text[:600], test=text[:300])
    arpa = tmp_path / "kn.arpa"
    assert main(["ngram", "--method", "kneser-ney", "--order", "3", *corpus_args(files), "--arpa", str(arpa)]) == 0
    model = lmbench.load(arpa)
    assert model.vocab.word(model.begin) == model.vocab.word(model.end) == "</p>"
    scores = [logprob for logprob, _, _ in model.full_scores("w1 w3")]
    assert len(scores) == 3
    assert sum(scores) == pytest.approx(model.score("w1 w3 </p>", bos=False, eos=False, history="</p>"))


def test_generate_is_reproducible_and_draws_words_of_the_vocabulary(saved):
    for row in ("kn-interp-5", "lstm"):
        model = lmbench.load(saved["work"], row=row)
        first = model.generate(30, text_seed="w0 w1", random_seed=7)
        assert first == model.generate(30, text_seed="w0 w1", random_seed=7)
        assert len(first) == 30 and all(word in model.vocab for word in first)
        assert model.generate(30, text_seed="w0 w1", random_seed=8) != first
    cold = model.generate(200, random_seed=1, temperature=0.05)  # near the argmax: the likeliest words
    assert len(set(cold)) < len(set(model.generate(200, random_seed=1, temperature=3.0)))


def test_the_score_command_prints_each_line_and_the_files_perplexity(saved, capsys, tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("w0 w50 w26\n\nw6 w31 unknown\n")
    code, out, _ = run_cli(capsys, "score", saved["work"], sentences, "--row", "kn-interp-5")
    lines = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and lines[0] == ["line", "log10_prob", "tokens", "oov", "perplexity"]
    model = lmbench.load(saved["work"], row="kn-interp-5")
    assert [row[0] for row in lines[1:]] == ["1", "3", "total"]
    assert float(lines[1][1]) == pytest.approx(model.score("w0 w50 w26")) and lines[2][3] == "1"
    whole = 10 ** (-(model.score("w0 w50 w26") + model.score("w6 w31 unknown")) / 6)  # each line on its own
    assert float(lines[3][4]) == pytest.approx(whole)
    code, out, _ = run_cli(capsys, "score", saved["work"], sentences, "--row", "kn-interp-5", "--json")
    entries = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and entries[-1]["perplexity"] == pytest.approx(whole) and entries[-1]["tokens"] == 6


def test_the_generate_command_is_reproducible(saved, capsys):
    argv = ["generate", saved["work"], "--row", "lstm", "--words", "12", "--seed-text", "w0", "--seed", "3",
            "--temperature", "0.8", "--threads", "1"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0 and run_cli(capsys, *argv)[1] == out
    words = out.split()
    assert words == lmbench.load(saved["work"], row="lstm").generate(12, "w0", 3, 0.8)


def _family_lacking(saved, tmp_path) -> Path:
    from neural.training import weights_file
    from neural.training.checkpoint import BEST
    run = tmp_path / "other"
    shutil.copytree(saved["run"], run)
    state = weights_file.read(run / BEST)
    weights_file.write({**state, "family": "hopfield"}, run / BEST)
    return run


BAD = {  # what is given, what the one line names
    "no such path": (lambda s, t: dict(path=t / "missing"), "missing"),
    "an empty folder": (lambda s, t: dict(path=t / "empty"), "empty is a folder, not a saved model"),
    "a file that is no ARPA file": (lambda s, t: dict(path=s["files"]["train"]), "no ARPA file"),
    "a row not in the folder": (lambda s, t: dict(path=s["work"], row="kn-9"), "no row 'kn-9'"),
    "a work folder without a row": (lambda s, t: dict(path=s["work"]), "name one of its rows"),
    "a mixture row": (lambda s, t: dict(path=s["work"], row="lstm-kn-interp-5-em"), "mixes lstm, kn-interp-5"),
    "a family this install lacks": (lambda s, t: dict(path=_family_lacking(s, t)), "'hopfield', which this install lacks"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_model_path_is_refused_in_one_line(saved, tmp_path, capsys, case):
    (tmp_path / "empty").mkdir()
    make, named = BAD[case]
    given = make(saved, tmp_path)
    before = snapshot(saved["root"], tmp_path)
    with pytest.raises(LMBenchError, match=re.escape(named)):
        lmbench.load(given["path"], row=given.get("row"))
    sentences = tmp_path / "s.txt"
    sentences.write_text("w0 w1\n")
    for command in (["score", given["path"], sentences], ["generate", given["path"]]):
        code, out, err = run_cli(capsys, *command, *(["--row", given["row"]] if "row" in given else []))
        errors = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
        assert code == 2 and len(errors) == 1 and named in errors[0] and out == "", err
    sentences.unlink()
    assert snapshot(saved["root"], tmp_path) == before


SAMPLING = [(dict(num_words=0), "num_words=0", "--words"), (dict(num_words=-3), "num_words=-3", "--words"),
            (dict(temperature=0.0), "temperature=0.0", "--temperature"),
            (dict(temperature=-1.0), "temperature=-1.0", "--temperature"),
            (dict(temperature=float("nan")), "temperature=nan", "--temperature"),
            (dict(text_seed="zz yy"), "the seed text (--seed-text) 'zz yy' holds no word", "--seed-text")]


@pytest.mark.parametrize("options, named, flag", SAMPLING)
def test_bad_sampling_options_are_refused_in_one_line(saved, capsys, options, named, flag):
    model = lmbench.load(saved["work"], row="kn-interp-3")
    with pytest.raises(LMBenchError, match=re.escape(named)):
        model.generate(**{"num_words": 5, **options})
    value = str(next(iter(options.values())))
    before = snapshot(saved["root"])
    code, out, err = run_cli(capsys, "generate", saved["work"], "--row", "kn-interp-3", flag, value)
    errors = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
    assert code == 2 and len(errors) == 1 and flag in errors[0] and value in errors[0] and out == "", err
    assert snapshot(saved["root"]) == before


def snapshot(*folders: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for folder in folders for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def test_the_docs_example_runs(saved, monkeypatch, capsys):
    """docs/api.md's Python block, as it is, in a folder holding its work folder and a file of sentences."""
    page = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(saved["root"])
    (saved["root"] / "sentences.txt").write_text("w0 w50 w26 w6\n\nw31 w75 w0\n")
    exec(compile(blocks[0], "docs/api.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("TextModel('runs/mine-quick:kn-interp-5'") and len(out[-1].split()) == 12


def test_the_report_shows_samples_of_the_best_ngram_model_and_of_each_network_family(saved, tmp_path):
    """results.json records continuations of the first tokens of test from the best n-gram row and each family's
    best network on valid, as `generate` draws them with the run's seed plus their number; report.md and
    report.html show them, and so does a report rebuilt from results.json alone."""
    from reports.building.build import build_report
    samples = saved["results"]["samples"]
    rows = saved["rows"]
    ngram = min((row for row in rows.values() if row["kind"] == "ngram"), key=lambda row: row["valid_ppl"])
    assert [entry["row"] for entry in samples["rows"]] == [ngram["id"], "mlp1", "lstm"]
    assert samples["seed_text"] == " ".join(saved["texts"]["test"].split()[:8])
    for entry in samples["rows"]:
        model = lmbench.load(saved["work"], row=entry["row"])
        assert entry["continuations"] == [" ".join(model.generate(samples["words"], samples["seed_text"], seed))
                                          for seed in range(samples["seed"], samples["seed"] + 3)]
    build_report(tmp_path / "rebuilt", results_text=(saved["root"] / "report" / "results.json").read_text())
    for folder in (saved["root"] / "report", tmp_path / "rebuilt"):
        page, markdown = (folder / "report.html").read_text(), (folder / "report.md").read_text()
        assert all(continuation in page and continuation in markdown
                   for entry in samples["rows"] for continuation in entry["continuations"])

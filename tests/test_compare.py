"""`lmbench reproduce text`: the comparison on a user's own three files, end to end (--quick), cached by
the files' content, with rows chosen by --only / --networks, and bad set-ups refused in one line."""

import json

import numpy as np
import pytest

from baselines.methods import METHODS, class_counts
from baselines.disk_counts import DiskCounts
from lmbench_cli import main
from neural.families import FAMILIES
from reports.experiments import INFINI_GRAM, NETWORKS_BEYOND_2003, WITH_COUNTS, text_rows

COMPARED = [name for name in NETWORKS_BEYOND_2003 if FAMILIES[name].compared]  # every comparison's beyond 2003
from tests.helpers import chain_text, run_cli, write_splits
from tests.test_reproduce import assert_mixtures_not_above_their_parts


@pytest.fixture
def corpus_files(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    return write_splits(tmp_path, train=chain_text(6000, 1), valid=chain_text(800, 2), test=chain_text(800, 3))


def _argv(files, tmp_path, *more):
    return ["reproduce", "text", "--quick", "--name", "markov", "--work-dir", str(tmp_path / "work"),
            "--report-dir", str(tmp_path / "report"), "--json",
            *[arg for split, path in files.items() for arg in (f"--{split}", str(path))], *more]


def assert_judged(claim: dict, better: dict, worse: dict) -> None:
    """The claim that row `better` beats row `worse`, judged by the paired interval of their test blocks."""
    low, high = claim["difference_ci95"]
    assert claim["difference"] == pytest.approx(100 * (better["test_ppl"] / worse["test_ppl"] - 1))
    assert claim["verdict"].startswith(("holds" if high < 0 else "fails" if low > 0 else "not significant") + " (")


@pytest.mark.slow
def test_quick_comparison_end_to_end(corpus_files, tmp_path, capsys):
    assert main(_argv(corpus_files, tmp_path)) == 0
    summary = json.loads(capsys.readouterr().out)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    vocab_size = results["corpus_summary"]["vocab_size"]
    rows = {row["id"]: row for row in results["rows"]}
    ours = ["nplm-ours", "nplm-ours-kn-interp-5-em", "nplm-ours-kn-interp-5-infini-gram"]  # and its mixtures,
    assert list(rows) == [row.id for row in text_rows(vocab_size)] + ours                 # after the table's rows
    assert {f"class-3-{c}" for c in class_counts(vocab_size)} <= set(rows)
    for row in rows.values():
        assert 1 < row["test_ppl"] <= vocab_size and 1 < row["valid_ppl"] <= vocab_size, row["id"]
    assert_mixtures_not_above_their_parts(rows)
    assert rows["kn-interp-3"]["test_ppl"] < 6  # the chain's 4 successors per word
    assert rows["mlp1"]["test_ppl"] < 70  # two quick epochs: below the uniform 80
    # EM-fitted mixture weights cannot lose to either part on valid
    assert rows["mlp1-del-int-em"]["valid_ppl"] <= min(rows["mlp1"]["valid_ppl"], rows["del-int"]["valid_ppl"]) * (1 + 1e-4)
    # ... nor the network mixed with KN 5 and the ∞-gram (weights per effective n, shrunk a little) to its
    # parts, to the network + KN 5 mixture or to ∞-gram + KN 5; each bucket's weights sum to 1
    with_counts = [row for row in rows.values() if row["mix"] == WITH_COUNTS]
    assert len(with_counts) == sum(row["id"].endswith("-kn-interp-5-em") for row in rows.values())
    for row in with_counts:
        rivals = [rows[part]["valid_ppl"] for part in row["parts"]] + [rows[f"{row['parts'][0]}-kn-interp-5-em"]["valid_ppl"]]
        assert row["valid_ppl"] <= min(rivals) * (1 + 1e-3), row["id"]
        weights = np.array(row["weights"])
        assert weights.shape[1] == 3 and np.allclose(weights.sum(axis=1), 1) and (weights > 0).all()
        assert len(row["effective_n"]["network_mean_logprob"]) == len(rows[INFINI_GRAM]["effective_n"]["n"])
    assert results["name"] == "markov"
    table = (tmp_path / "report" / "table.md").read_text()
    assert [line for line in table.splitlines() if "paper" in line] == [] and " test " in table.splitlines()[0]
    claims = {c["claim"]: c for c in json.loads((tmp_path / "report" / "claims.json").read_text())}
    beyond = len(COMPARED)  # the paper's 6, the best network of any family's, NPLM (ours)'s 2, 2 per family
    assert len(claims) == 6 + 1 + 2 + 2 * beyond + beyond * (beyond - 1) // 2 + 2  # beyond 2003, 1 per pair, the ∞-gram's 2
    assert all("paper" not in claim for claim in claims.values())
    # recomputed from the rows
    assert_judged(claims["Mixing the LSTM (ours) with interpolated KN 5 helps"], rows["lstm-kn-interp-5-em"], rows["lstm"])
    assert_judged(claims["NPLM (ours) alone beats interpolated KN 5"], rows["nplm-ours"], rows["kn-interp-5"])
    assert_judged(claims["∞-gram + KN 5 beats interpolated KN 5"], rows[INFINI_GRAM], rows["kn-interp-5"])
    best = min((row for row in rows.values() if f"{row['id']}-kn-interp-5-infini-gram" in rows),
               key=lambda row: (row["valid_ppl"], row["id"]))["id"]  # the best network on valid
    assert_judged(claims["The best network + KN 5 + ∞-gram beats the best network + KN 5"],
                  rows[f"{best}-kn-interp-5-infini-gram"], rows[f"{best}-kn-interp-5-em"])
    assert summary["claims"].startswith("not judged on a quick run")  # its report has them, the terminal not
    # the headline recomputed from the rows: the best paper-shape network alone against the best n-gram model,
    # each the best on valid (NPLM (ours) has its own line in the summary, not the paper's claims)
    best = {kind: rows[min((r["valid_ppl"], r["id"]) for r in rows.values() if r["kind"] == kind and not r.get("ours")
                           and r["family"] in (None, "nplm"))[1]] for kind in ("network", "ngram")}
    claim = claims["The best paper-shape network alone beats the best n-gram model"]
    assert_judged(claim, best["network"], best["ngram"])
    assert claim["ours"].startswith(f"{best['network']['id']} (best on valid) {best['network']['test_ppl']:.1f} vs "
                                    f"{best['ngram']['id']} (best on valid) {best['ngram']['test_ppl']:.1f}")
    assert claim["best_on_valid"] == [best["network"]["id"], best["ngram"]["id"]]
    assert all(claim["difference_ci95"] is not None for claim in claims.values())  # no row missing
    assert "markov" in (tmp_path / "report" / "report.html").read_text()
    assert {"commit", "dirty"} <= set(results["meta"])

    # a second run re-uses every row; an edited training file re-runs them (the cache follows content)
    assert main(_argv(corpus_files, tmp_path)) == 0
    again = json.loads((tmp_path / "report" / "results.json").read_text())
    assert [r["test_ppl"] for r in again["rows"]] == [r["test_ppl"] for r in results["rows"]]
    assert [r["fingerprint"] for r in again["rows"]] == [r["fingerprint"] for r in results["rows"]]
    corpus_files["train"].write_text(chain_text(6000, seed=4))
    assert main(_argv(corpus_files, tmp_path, "--only", "ngram")) == 0
    edited = {r["id"]: r for r in json.loads((tmp_path / "report" / "results.json").read_text())["rows"]}
    assert set(edited) == {row.id for row in text_rows(vocab_size, only="ngram")}
    assert edited["del-int"]["fingerprint"] != rows["del-int"]["fingerprint"]
    assert edited["del-int"]["test_ppl"] != rows["del-int"]["test_ppl"]


def test_rows_are_chosen_by_only_and_networks():
    ids = [row.id for row in text_rows(10_000, networks=("mlp1", "mlp9", "lstm"))]
    assert "mlp1" in ids and "mlp9-del-int-bucketed" in ids and "mlp5" not in ids and "katz-3" in ids
    nplm_only = [row.id for row in text_rows(10_000, only="nplm")]
    assert nplm_only[:3] == ["del-int", "kn-interp-5", INFINI_GRAM] and all(i.startswith(("mlp", *NETWORKS_BEYOND_2003))
                                                                                for i in nplm_only[3:])
    beyond = [*COMPARED, *(f"{name}-kn-interp-5-{how}" for name in COMPARED
                           for how in ("em", "infini-gram"))]  # ours beyond 2003, on by default
    assert {"lstm", "transformer"} <= set(NETWORKS_BEYOND_2003)
    assert "mlp9-kn-interp-5-em" in nplm_only and nplm_only[-len(beyond):] == beyond
    assert "lstm" in ids and "transformer" not in [row.id for row in text_rows(10_000, networks=("mlp1", "lstm"))]
    assert class_counts(16_000) == [160, 480, 1600] and class_counts(50) == [2, 5]


@pytest.mark.slow  # two comparisons
def test_bounded_memory_gives_the_same_rows(corpus_files, tmp_path, capsys, monkeypatch):
    """--memory: the n-gram rows that take it estimate in bounded memory, to the same perplexities and
    the same fingerprints (the cap is no part of them) as in memory."""
    counted = []
    count = DiskCounts.count
    monkeypatch.setattr(DiskCounts, "count", lambda self: (counted.append(self.order), count(self))[1])
    rows = {}
    for name, more in (("in-memory", ()), ("bounded", ("--memory", "100K", "--tmp-dir", str(tmp_path / "tmp")))):
        assert main(_argv(corpus_files, tmp_path / name, "--only", "ngram", *more)) == 0, capsys.readouterr().err
        rows[name] = json.loads((tmp_path / name / "report" / "results.json").read_text())["rows"]
        assert counted == ([] if name == "in-memory" else
                           [row["n"] for row in rows[name] if row["method"] and METHODS[row["method"]].bounded])
    assert "kn-backoff-5" in {row["id"] for row in rows["bounded"]}  # its cutoff too
    keys = ("id", "fingerprint", "train_ppl", "valid_ppl", "test_ppl")
    assert [[row[key] for key in keys] for row in rows["bounded"]] == [[row[key] for key in keys]
                                                                        for row in rows["in-memory"]]
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "text"], "reproduce text needs --train, --valid, --test"),
    (["reproduce", "brown", "--only", "ngram"], "--only: only for `lmbench reproduce text`"),
    (["reproduce", "text", "--networks", "mlp2"], "give a comma-separated list of default, mlp1"),
    (["reproduce", "text", "--name", "../x"], "a folder name of ASCII letters"),
    (["reproduce", "text", "--corpus-file", "pyproject.toml", "--train", "pyproject.toml"],
     "--corpus-file is cut into train, valid and test: drop --train"),
    (["reproduce", "text", "--corpus-split", "0.8,0.1,0.1"], "--corpus-split cuts the one file of --corpus-file"),
    (["reproduce", "text", "--corpus-file", "pyproject.toml", "--corpus-split", "0.8,0.3"],
     "give three fractions above 0"),
    (["reproduce", "brown", "--corpus-file", "pyproject.toml"], "--corpus-file: only for `lmbench reproduce text`"),
    (["reproduce", "ap", "--memory", "1G"], "--memory: only for `lmbench reproduce text`"),
    (["reproduce", "text", "--memory", "lots"], "give a size such as 4G"),
    (["reproduce", "brown", "--budget-rule", "flops"], "--budget-rule shares a wall-time --budget"),
    (["reproduce", "text", "--corpus-file", "pyproject.toml", "--budget-flops", "1e15", "--budget-rule", "recipe"],
     "drop --budget-rule"),
])
def test_bad_setups_end_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_corpus_split_is_one_option_and_reproduces_former_split_is_noted(tmp_path, capsys, monkeypatch):
    """--corpus-split, the fractions of --corpus-file's lines, is one option of every command that reads a text
    corpus, `reproduce text` among them: the same help and type, and the same cut (the tokens of each split
    `reproduce text` loads are `lmbench corpus text`'s). Its former name in `reproduce`, --split, still cuts so,
    with one line on standard error naming --corpus-split."""
    from lmbench_cli import build_parser
    from reports.running import pipeline
    from tests.test_hostile_classes import subcommands
    found = {" ".join(words): (action.help, action.type) for words, parser in subcommands(build_parser())
             for action in parser._actions if "--corpus-split" in action.option_strings}
    assert {"corpus", "ngram", "train", "eval", "reproduce"} <= set(found) and len(set(found.values())) == 1, found
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    words = chain_text(2000, 1, words=30).split()
    corpus = tmp_path / "all.txt"
    corpus.write_text("".join(" ".join(words[i:i + 20]) + "\n" for i in range(0, len(words), 20)))  # 100 lines
    code, out, err = run_cli(capsys, "corpus", "text", "--corpus-file", corpus, "--corpus-split", "0.7,0.2,0.1",
                             "--json")
    assert code == 0, err
    tokens = json.loads(out)["tokens"]
    assert tokens == {"train": 1400, "valid": 400, "test": 200}
    loaded = []

    def stand_in(corpus, quick, work_dir, report_dir, skip, text, *args, **kwargs):  # the corpus the pipeline loads
        reproduction = pipeline.Reproduction(pipeline.default_settings(corpus, quick), work_dir, report_dir, text,
                                             code={})
        loaded.append(reproduction.load_corpus().summary()["tokens"])
        return {"report_dir": str(report_dir), "claims": [], "quick": quick}

    monkeypatch.setattr(pipeline, "reproduce", stand_in)
    for option in ("--corpus-split", "--split"):
        code, _, err = run_cli(capsys, "reproduce", "text", "--corpus-file", corpus, option, "0.7,0.2,0.1",
                               "--work-dir", tmp_path / "work", "--report-dir", tmp_path / "report", "--json")
        assert code == 0, err
        notes = [line for line in err.splitlines() if "--split" in line]
        assert notes == ([] if option == "--corpus-split" else
                         ["lmbench: warning: --split is now --corpus-split, as in every command: the old name goes in "
                          "the next release"]), err
    assert loaded == [tokens, tokens]


@pytest.mark.slow
def test_one_corpus_file_is_cut_and_the_cut_recorded(tmp_path, capsys):
    lines = chain_text(4000, 1, words=30).split()
    corpus = tmp_path / "all.txt"
    corpus.write_text("".join(" ".join(lines[i:i + 20]) + "\n" for i in range(0, len(lines), 20)))  # 200 lines
    report = tmp_path / "report"
    code, _, err = run_cli(capsys, "reproduce", "text", "--corpus-file", corpus, "--corpus-split", "0.7,0.15,0.15",
                           "--only", "ngram", "--name", "one", "--work-dir", tmp_path / "work", "--report-dir", report)
    assert code == 0, err
    results = json.loads((report / "results.json").read_text())
    assert results["corpus_summary"]["cut"] == {"split": [0.7, 0.15, 0.15],
                                                "lines": {"train": [0, 140], "valid": [140, 170], "test": [170, 200]}}
    assert results["corpus_summary"]["tokens"] == {"train": 2800, "valid": 600, "test": 600}


def test_rows_give_their_perplexity_without_unk_and_a_train_without_unk_is_warned_of(tmp_path, monkeypatch, caplog):
    """--min-count 1 on a train without <unk> (every train word kept): one warning line, in the log and in
    the report. Every row records valid and test perplexity over the tokens that are not <unk> (each
    scored in its context), from its saved log-probabilities, a row cached before it recorded them
    too; the report's table shows them beside every token's, and its corpus line each split's <unk> rate."""
    import logging
    from lmbench.files import write_checked
    from lmbench.model import perplexity
    from mixing import saved
    from reports.running import pipeline, settings
    from reports.building.build import build_report
    from reports.experiments import Row

    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))

    def with_new_words(text: str, every: int) -> str:  # words train never saw: <unk> in valid and test
        return " ".join(f"new{i}" if i % every == 0 else word for i, word in enumerate(text.split()))

    files = write_splits(tmp_path, train=chain_text(3000, 1), valid=with_new_words(chain_text(400, 2), 10),
                         test=with_new_words(chain_text(400, 3), 8))
    rows = [Row("kn-interp-3", "ngram", "Kneser-Ney interpolated", n=3, method="kneser-ney"),
            Row("katz-3", "ngram", "Katz back-off", n=3, method="katz"),
            Row("kn-katz", "mix", "KN + Katz", mix="EM", parts=("kn-interp-3", "katz-3"))]
    monkeypatch.setattr(pipeline.Reproduction, "table_rows", lambda self: rows)
    work, report = tmp_path / "work", tmp_path / "report"
    text = settings.TextCorpus(**files, name="unk", min_count=1)

    def reproduce() -> pipeline.Reproduction:
        reproduction = pipeline.Reproduction(pipeline.default_settings("text", False), work, report, text)
        reproduction.run()
        return reproduction

    with caplog.at_level(logging.WARNING):
        reproduction = reproduce()
    warned = [r.getMessage() for r in caplog.records if "no train token is <unk>" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0] and "10.0% of valid and 12.5% of test" in warned[0]
    corpus = reproduction.corpus
    results = json.loads((report / "results.json").read_text())
    for row in results["rows"]:
        logprobs = saved.load(work / "logprobs" / f"{row['id']}.npz")
        for split in ("valid", "test"):
            known = corpus.split(split) != corpus.vocab.unk_id
            assert row[f"{split}_ppl_no_unk"] == perplexity(logprobs[split][known]) != row[f"{split}_ppl"]
    # a row cached before rows recorded it gets it from its saved log-probabilities
    cached = work / "rows" / "katz-3.json"
    old = {key: value for key, value in json.loads(cached.read_text()).items() if "no_unk" not in key}
    write_checked(cached, lambda path: path.write_text(json.dumps(old)))
    reproduce()
    again = {row["id"]: row for row in json.loads((report / "results.json").read_text())["rows"]}
    assert again["katz-3"]["test_ppl_no_unk"] == results["rows"][1]["test_ppl_no_unk"]

    build_report(report)
    header = (report / "table.csv").read_text().splitlines()[0].split(",")
    no_unk = header.index("valid w/o unk")
    assert header[no_unk:no_unk + 2] == ["valid w/o unk", "test w/o unk"] and no_unk > header.index("test")
    md = (report / "report.md").read_text()
    assert "tokens, `<unk>` 0.0% / 10.0% / 12.5%" in md and "Warning: no train token is `<unk>`" in md
    assert "Warning: no train token is &lt;unk&gt;" in (report / "report.html").read_text()


@pytest.mark.slow  # three quick runs, three networks trained
def test_seeds_train_each_network_apart_and_the_row_gives_their_mean_sd_and_every_one(corpus_files, tmp_path, capsys):
    """--seeds 2: NPLM (ours) trained and scored under seeds 0 and 1, each in its own cache entry; the row
    gives the mean of the two seeds' perplexities, their standard deviation and each seed's figures, and
    its mixture with KN 5 mixes each seed's own log-probabilities. Seed 0 is the one-seed row, from the
    same cache entry (the same fingerprint and figures), and the table shows mean ± sd."""
    import statistics
    from mixing import saved
    from lmbench.model import perplexity

    def run(seeds: int) -> dict:
        code, _, err = run_cli(capsys, *_argv(corpus_files, tmp_path, "--only", "nplm", "--networks", "ours",
                                              "--seeds", str(seeds), "--threads", "1"))
        assert code == 0, err
        return {row["id"]: row for row in json.loads((tmp_path / "report" / "results.json").read_text())["rows"]}

    one = run(1)
    assert not any("seeds" in row or "test_ppl_sd" in row for row in one.values())
    two = run(2)
    work = tmp_path / "work"
    assert sorted(path.name.rsplit("-", 1)[0] for path in (work / "nplm").iterdir()) == ["nplm-ours", "nplm-ours-seed1"]
    assert (work / "rows" / "nplm-ours-seed1.json").exists() and (work / "logprobs" / "nplm-ours-kn-interp-5-em-seed1.npz").exists()
    ours, mixed = two["nplm-ours"], two["nplm-ours-kn-interp-5-em"]
    for row in (ours, mixed):
        assert [seed["seed"] for seed in row["seeds"]] == [0, 1]
        first = row["seeds"][0]
        assert row["fingerprint"] == one[row["id"]]["fingerprint"]  # seed 0: the one-seed row, cached
        assert (first["valid_ppl"], first["test_ppl"]) == (one[row["id"]]["valid_ppl"], one[row["id"]]["test_ppl"])
        tests = [seed["test_ppl"] for seed in row["seeds"]]
        assert tests[0] != tests[1]  # another seed, another network
        assert row["test_ppl"] == pytest.approx(statistics.mean(tests))
        assert row["test_ppl_sd"] == pytest.approx(statistics.stdev(tests))
        assert row["valid_ppl"] == pytest.approx(statistics.mean(seed["valid_ppl"] for seed in row["seeds"]))
    def apart_from_figures(row: dict) -> dict:
        return {key: value for key, value in row.items()
                if key not in ("seeds", "seconds", "blocks") and "_ppl" not in key}

    assert apart_from_figures(ours) == apart_from_figures(one["nplm-ours"])  # the first seed's record
    seed1 = json.loads((work / "rows" / "nplm-ours-seed1.json").read_text())
    for split in ("valid", "test"):  # the blocks of the seeds' mean: the intervals and claims are the mean's
        mean = np.mean([one["nplm-ours"]["blocks"][split]["logprob"], seed1["blocks"][split]["logprob"]], axis=0)
        assert ours["blocks"][split]["logprob"] == pytest.approx(mean, abs=1e-3)
    assert ours["seconds"] == pytest.approx(sum(seed["seconds"] for seed in ours["seeds"]))
    # each seed's mixture: the EM mixture of that seed's network with KN 5, refitted on valid
    kn5 = saved.load(work / "logprobs" / "kn-interp-5.npz")
    for seed, network in zip(mixed["seeds"], ("nplm-ours", "nplm-ours-seed1")):
        remixed, weights = saved.mix_saved([saved.load(work / "logprobs" / f"{network}.npz"), kn5], "em")
        assert perplexity(remixed["test"]) == pytest.approx(seed["test_ppl"], rel=1e-12)
        assert weights.tolist() == seed["weights"]
    table = (tmp_path / "report" / "table.md").read_text()
    assert f"{ours['test_ppl']:.1f} ± {ours['test_ppl_sd']:.1f}" in table
    assert f'<td class="num">{ours["test_ppl"]:.1f} ± {ours["test_ppl_sd"]:.1f}</td>' in (
        tmp_path / "report" / "report.html").read_text()
    # a third run finds every seed's work in the cache
    again = run(2)
    assert again["nplm-ours"]["seeds"] == ours["seeds"] and again["nplm-ours"]["seconds"] == ours["seconds"]


@pytest.mark.slow  # one quick run, one network trained
def test_a_network_row_is_trained_and_scored_under_the_threads_asked_for(corpus_files, tmp_path, capsys, monkeypatch):
    """--threads 2 on a machine whose free cores read 1 at the start (a load of 1: the step before it):
    every thread count set, the training's and the exact scoring's, is 2 (the scoring used to take the
    free cores: a 2-thread AP run scored its networks on 1 thread)."""
    import torch
    from lmbench import threads
    counts = []
    monkeypatch.setattr(threads, "free_cores", lambda: 1)
    monkeypatch.setattr(torch, "set_num_threads", counts.append)  # (records; the test process keeps its own)
    code, _, err = run_cli(capsys, *_argv(corpus_files, tmp_path, "--only", "nplm", "--networks", "ours",
                                          "--threads", "2"))
    assert code == 0, err
    assert counts and set(counts) == {2}


@pytest.mark.parametrize("more, asked, rule", [((), None, "complete"), (("--budget", "20m"), "20m", "complete"),
                                               (("--budget", "1h", "--budget-rule", "recipe"), "1h", "recipe")])
def test_a_default_comparison_trains_every_network_to_its_recipes_end(corpus_files, tmp_path, monkeypatch, more,
                                                                      asked, rule):
    """`reproduce text` (and `make compare`) with no --budget runs with none: every network to its recipe's
    end; a budget the user names is the one run, shared by the complete rule unless another is named."""
    from reports.running import pipeline
    seen = {}
    monkeypatch.setattr(pipeline, "reproduce", lambda *args: seen.update(budget=args[11], rule=args[14])
                        or {"claims": [], "quick": False})
    assert main([arg for arg in _argv(corpus_files, tmp_path, *more) if arg != "--quick"]) == 0
    assert seen == {"budget": asked, "rule": rule}


def test_a_report_rebuilt_from_the_row_cache_keeps_its_training_runs_time_and_memory(corpus_files, tmp_path, capsys):
    """A second run whose every row comes from the row cache rewrites results.json: its meta says so and keeps
    the wall time and peak memory of the run that computed the rows, which the cost table shows."""
    from reports.building.summary import cost_block
    argv = _argv(corpus_files, tmp_path, "--only", "ngram")
    assert main(argv) == 0, capsys.readouterr().err
    first = json.loads((tmp_path / "report" / "results.json").read_text())["meta"]
    assert first["trained"]["wall_seconds"] == first["wall_seconds"] and "rebuilt" not in first
    first["trained"]["wall_seconds"] = 2520.0  # (as if the rows had taken 42 min: told apart from the re-run's)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    (tmp_path / "report" / "results.json").write_text(json.dumps({**results, "meta": first}))
    assert main(argv) == 0, capsys.readouterr().err
    again = json.loads((tmp_path / "report" / "results.json").read_text())
    assert again["meta"]["rebuilt"] and again["meta"]["trained"] == first["trained"]
    assert "| markov-quick | " in cost_block({"markov-quick": again}) and "| 42 min |" in cost_block({"markov-quick": again})

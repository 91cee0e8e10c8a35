"""Issue 69, items 8 and 12: a sample, and the API's arguments.

Item 8: `TextModel.sample` (`lmbench generate`) read the whole sample again for every word of a stream
network (2,000 words of an LSTM took a minute, and `--words 100000` hours): a model now reads the stream a
token at a time (`LanguageModel.reader`: a recurrent network's state carried, each token fed once; the
Transformer's window slid, at most its length a step), and draws the words the sampler drew before for the
same seed; a sample is at most SAMPLE_MAX words, which the refusal states.

Item 12: the API's numbers were checked each its own way: `k` and `num_words` as numpy integers refused,
`k=True` taken for 1, `temperature=1e-308` a NaN from numpy; one checker now (`reports.api.whole_number`,
`positive_number`) serves every method. A results.json whose samples hold no row or continuation, or whose
wall time is Infinity, failed the report with a traceback or showed "inf min"; a work folder's row record
without its kind was a KeyError: each is one line naming the field, nothing written.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import lmbench
from lmbench.errors import LMBenchError
from lmbench.model import SAMPLE_MAX
from reports.api import TextModel
from tests.test_faults import error_line
from tests.test_stream_networks import SHAPES, recurrent, tiny_config, tiny_corpus

SEED_TEXT = "the cat"
WORDS = 80  # more than the quick Transformer's window of 32: the window slides


@pytest.fixture(scope="module")
def corpus():
    return tiny_corpus()


@pytest.fixture(scope="module")
def models(corpus, tmp_path_factory) -> dict[str, TextModel]:
    """Every stream family trained for two epochs on the tiny corpus, an NPLM (a window network) and KN 3."""
    from baselines.methods import NGramOptions, make_ngram
    from neural.config import RunConfig
    from neural.training.checkpoint import load_network
    from neural.training.trainer import train_network
    found = {}
    configs = {family: tiny_config(family) for family in SHAPES}
    configs["nplm"] = RunConfig(model="nplm", n=3, m=4, h=5, epochs=1, objective="softmax", device="cpu", threads=1)
    for family, config in configs.items():
        out = tmp_path_factory.mktemp(family)
        train_network(corpus, config, out, progress=False)
        found[family] = TextModel(load_network(out, corpus, device="cpu"), corpus.vocab, family)
    found["kn-3"] = TextModel(make_ngram(NGramOptions("kneser-ney", 3)).fit(corpus), corpus.vocab, "kn-3")
    return found


def sampled_before(model: TextModel, num_words: int, seed_text: str, seed: int, temperature: float = 1.0) -> list[str]:
    """The sampler before item 8: each word drawn from `distribution` of the seed and every word drawn so far."""
    context = model._context(seed_text, True, "seed text")
    rng, drawn = np.random.default_rng(seed), []
    for _ in range(num_words):
        p = np.asarray(model.model.distribution(context), dtype=np.float64)
        if temperature != 1:
            with np.errstate(divide="ignore"):
                logits = np.log(p) / temperature
            p = np.exp(logits - logits.max())
        word = int(rng.choice(len(p), p=p / p.sum()))
        drawn.append(word)
        context.append(word)
    return model.vocab.decode(drawn)


@pytest.mark.parametrize("name", [*sorted(SHAPES), "nplm", "kn-3"])
def test_a_sample_draws_the_words_it_drew_before(models, name):
    """The same words for the same seed as the sampler that read the whole history at each word, for every
    kind of model (each stream family, a window network, an n-gram model), at two seeds and a temperature."""
    model = models[name]
    for seed, temperature in ((0, 1.0), (7, 1.0), (3, 0.7)):
        words = model.sample(WORDS, SEED_TEXT, seed, temperature)
        assert words == sampled_before(model, WORDS, SEED_TEXT, seed, temperature), (name, seed, temperature)
        assert len(set(words)) > 3  # (a sample, not one word again and again)


@pytest.mark.parametrize("family", sorted(SHAPES))
def test_a_stream_network_reads_each_sampled_token_once(models, family, monkeypatch):
    """Before, each word read the seed and every word drawn so far again (`history_log_probs` of all of them):
    WORDS words fed a recurrent network WORDS^2 / 2 tokens. Now a recurrent network is fed each token once (the
    seed with its begin marker, then each word drawn but the last), one `encode` a word; the Transformer reads
    one window of at most its length a word; no step hands the network more than the seed as history."""
    model = models[family]
    net = model.model.net
    fed, histories = [], []
    encode, history = net.encode, net.history_log_probs

    def counted_encode(inputs, state=None):
        fed.append(tuple(inputs.shape))
        return encode(inputs, state)

    def counted_history(context):
        histories.append(len(context))
        return history(context)

    monkeypatch.setattr(net, "encode", counted_encode)
    monkeypatch.setattr(net, "history_log_probs", counted_history)
    seed = model._context(SEED_TEXT, True, "seed")
    model.sample(WORDS, SEED_TEXT, 0)
    assert len(fed) == WORDS, (family, len(fed))
    assert max(histories, default=0) <= len(seed), (family, histories[-3:])
    if recurrent(family):
        assert sum(rows * steps for rows, steps in fed) == 1 + len(seed) + WORDS - 1, (family, fed[:3])
    else:  # a window of the context's length, one row a word
        assert set(fed) == {(1, net.shape.length)}, (family, set(fed))


def test_a_sample_longer_than_the_bound_is_refused_in_one_line_before_a_word_is_drawn(models, tmp_path, capsys,
                                                                                       monkeypatch):
    """--words 100000 was accepted (hours for a network); the API took any number. SAMPLE_MAX now, stated
    by the refusal, before the model draws anything (the API) or loads (the command)."""
    from baselines.arpa_writer import write_arpa
    model = models["kn-3"]

    def refused(*args):
        raise AssertionError("a word was drawn")

    monkeypatch.setattr(model.model, "distribution", refused)
    monkeypatch.setattr(model.model, "reader", refused, raising=False)  # (before item 8: no reader)
    for call in (model.sample, model.generate):
        with pytest.raises(LMBenchError) as err:
            call(SAMPLE_MAX + 1, SEED_TEXT, 0)
        line = str(err.value)
        assert "\n" not in line and f"num_words={SAMPLE_MAX + 1}" in line and f"{SAMPLE_MAX:,}" in line, line
    arpa = tmp_path / "kn3.arpa"
    write_arpa(models["kn-3"].model, models["kn-3"].vocab, arpa)
    line = error_line(capsys, ["generate", str(arpa), "--words", str(SAMPLE_MAX + 1)])
    assert "--words" in line and str(SAMPLE_MAX) in line, line


# Item 12: the API's numbers. Each argument with the values it takes (the answer of the int beside it) and
# those it refuses, naming the argument.
WHOLE = {"k": (1, [True, False, "3", 1.5, 0, -1, None]), "num_words": (1, [True, "3", 2.0, 0, -2, None]),
         "random_seed": (0, [True, False, "abc", 1.5, -1]), "threads": (1, [True, "2", 1.5, 0, 10**6])}
NUMPY_INTEGERS = (np.int64, np.int32, np.uint8, np.int16)


def whole_calls(model: TextModel, arpa) -> dict:
    return {"k": lambda k: model.next_words("the", k=k),
            "num_words": lambda n: (model.sample(n, SEED_TEXT, 0), model.generate(n, SEED_TEXT, 0)),
            "random_seed": lambda seed: model.generate(5, SEED_TEXT, random_seed=seed),
            "threads": lambda threads: lmbench.load(arpa, threads=threads).score("the cat")}


def test_every_whole_number_of_the_api_takes_numpy_integers_and_refuses_bools_and_the_rest(models, tmp_path):
    """k and num_words as numpy integers (what np.argmax or a numpy array's length gives) were refused, k=True
    taken for 1; threads was not checked at all."""
    from baselines.arpa_writer import write_arpa
    model = models["kn-3"]
    arpa = tmp_path / "kn3.arpa"
    write_arpa(model.model, model.vocab, arpa)
    calls = whole_calls(model, arpa)
    walked = 0
    for name, (least, bad) in WHOLE.items():
        for value in (least + 2, least + 1):
            expected = calls[name](value)
            for kind in NUMPY_INTEGERS:
                assert calls[name](kind(value)) == expected, (name, kind)
                walked += 1
        for value in bad:
            with pytest.raises(LMBenchError) as err:
                calls[name](value)
            line = str(err.value)
            assert "\n" not in line and f"{name}={value!r}" in line and "whole number" in line, (name, value, line)
            walked += 1
    assert walked == 2 * len(WHOLE) * len(NUMPY_INTEGERS) + sum(len(bad) for _, bad in WHOLE.values())


def test_a_temperature_is_a_finite_positive_number_and_sampling_stays_finite(models):
    """temperature=1e-308 drew from NaN weights (numpy: "probabilities contain NaN"); now any finite
    temperature above 0 samples (near 0: the likeliest word each time), and the rest is refused in one line."""
    model = models["kn-3"]
    likeliest = []
    context = model._context(SEED_TEXT, True, "seed")
    for _ in range(6):
        likeliest.append(int(np.argmax(model.model.distribution(context))))
        context.append(likeliest[-1])
    for tiny in (1e-308, 5e-324, 1e-300, np.float64(1e-310)):
        assert model.sample(6, SEED_TEXT, 0, tiny) == model.vocab.decode(likeliest), tiny
    for value in (1e308, np.float32(0.5), np.float16(2), 3):
        words = model.sample(6, SEED_TEXT, 0, value)
        assert len(words) == 6 and all(word in model.vocab for word in words), value
    assert model.sample(6, SEED_TEXT, 0, np.float32(0.5)) == model.sample(6, SEED_TEXT, 0, 0.5)
    for value in (True, 0, 0.0, -1.0, float("nan"), float("inf"), -float("inf"), "1", None):
        with pytest.raises(LMBenchError) as err:
            model.sample(3, SEED_TEXT, 0, value)
        line = str(err.value)
        assert "\n" not in line and "temperature=" in line and "above 0" in line, (value, line)


def test_a_text_is_a_str_or_utf8_bytes_in_every_call(models):
    """score(b"...") scored as <unk> and score(None) an AttributeError (reported in the issue; fixed before this
    commit by item 7's text checks, kept here as a walk of every call that takes a text)."""
    model = models["kn-3"]
    assert model.score(SEED_TEXT.encode()) == model.score(SEED_TEXT) < 0
    assert model.perplexity(SEED_TEXT.encode()) == model.perplexity(SEED_TEXT)
    takes_none = [model.perplexity, lambda t: model.sample(2, t, 0), lambda t: model.next_words(t)]  # (None: nltk's
    calls = [model.score, model.logprob, lambda t: list(model.full_scores(t)),  # n-grams, no seed, no context)
             lambda t: model.score_many([t]), lambda t: t in model, *takes_none]
    for call in calls:
        for value in (None, 3, 2.5, b"\xff\xfe"):
            if value is None and call in takes_none:
                continue
            with pytest.raises(LMBenchError) as err:
                call(value)
            assert "\n" not in str(err.value)


HOSTILE_RESULTS = {
    "samples with no row": lambda r: r.update(samples={"seed_text": "a b", "seed": 0, "words": 3, "rows": []}),
    "samples with no continuation": lambda r: r.update(samples={"seed_text": "a b", "seed": 0, "words": 3, "rows": [
        {"row": "kn-interp-5", "model": "KN", "test_ppl": 200.0, "continuations": []}]}),
    "wall time Infinity": lambda r: r["meta"].update(wall_seconds=float("inf")),
    "rows' seconds Infinity": lambda r: r["meta"].update(rows_seconds=float("inf")),
    "trained wall time Infinity": lambda r: r["meta"].update(trained={"wall_seconds": float("inf")}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RESULTS))
def test_a_results_file_the_report_cannot_show_is_refused_in_one_line(tmp_path, case):
    """samples with no row failed the report (max() of an empty sequence), a wall time of Infinity was shown as
    "inf min": each is refused by the report's reading of results.json, naming the field; nothing written."""
    from reports.building.build import build_report
    from reports.records import check_results
    from tests.test_summary import KN5, record, results
    written = json.loads(json.dumps(results("hostile", [record(KN5, 210, 200)])))
    check_results(written)  # (as written, the file is one a report reads)
    HOSTILE_RESULTS[case](written)
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(written))
    with pytest.raises(LMBenchError) as err:
        build_report(folder, {"commit": "abc", "dirty": False}, results_dir=tmp_path)
    line = str(err.value)
    field = "samples" if "samples" in case else "seconds"
    assert "\n" not in line and field in line and "results.json" in line, line
    assert sorted(path.name for path in folder.iterdir()) == ["results.json"]


ROW_RECORDS = {
    "no kind": {"id": "x", "fingerprint": "f"},
    "a kind that is no string": {"id": "x", "kind": 3, "fingerprint": "f"},
    "an unknown kind": {"id": "x", "kind": "nplm", "fingerprint": "f"},
    "no fingerprint": {"id": "x", "kind": "network"},
    "no id": {"kind": "network", "fingerprint": "f"},
    "a mixture without parts": {"id": "x", "kind": "mix", "fingerprint": "f"},
    "an n-gram row without its method": {"id": "x", "kind": "ngram", "fingerprint": "f", "n": 3},
    "a list": [1, 2],
}


@pytest.mark.parametrize("case", sorted(ROW_RECORDS))
def test_a_work_folders_row_record_without_its_fields_is_refused_in_one_line(tmp_path, case):
    """rows/x.json without `kind` was a KeyError: 'kind' (and the others, KeyErrors or TypeErrors)."""
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "x.json").write_text(json.dumps(ROW_RECORDS[case]))
    with pytest.raises(LMBenchError) as err:
        lmbench.load(tmp_path, row="x")
    line = str(err.value)
    assert "\n" not in line and "x.json" in line and "lmbench reproduce" in line, line

"""The stream networks (every family `neural.families` registers with context "stream": the LSTM, the
Transformer, ...) and their trainer (`neural.training.trainer`): the contract of `tests/lm_checks.py`,
training, exact resume and the options, over every registered stream family in its quick shape."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from tests.lm_checks import assert_normalised, assert_scores_match_distribution, make_corpus
from lmbench.errors import LMBenchError
from lmbench.model import perplexity, split_logprobs
from neural.families import FAMILIES
from neural.networks.lstm import LSTMShape
from neural.networks.transformer import TransformerShape
from neural.networks.stream import RecurrentNetwork
from neural.config import RunConfig
from neural.training.checkpoint import CHECKPOINT, LOG, load_network, read_state
from neural.training.batches import lane_layout
from neural.training.trainer import train_network

SHAPES = {name: entry.shape(**entry.quick) for name, entry in FAMILIES.items() if entry.context == "stream"}


def recurrent(family: str) -> bool:
    return issubclass(FAMILIES[family].network_class(), RecurrentNetwork)


def tiny_corpus(seed: int = 0):
    """A stream of a few sentences in random order: most words follow from the ones before."""
    rng = np.random.default_rng(seed)
    sentences = ["the cat sat on a mat .", "a dog ran to the cat .", "the dog sat ."]

    def text(count):
        return " ".join(sentences[i] for i in rng.integers(0, len(sentences), size=count))

    return make_corpus(text(150), text(25), text(25))


def tiny_config(family: str, shape=None, **overrides) -> RunConfig:
    """The run of a `family` network in its quick shape (or `shape`): 2 epochs of 4 lanes of 10 steps."""
    fields = dict(epochs=2, dropout=0.1, batch_size=4, steps=10, objective="softmax", samples=6, lr=3e-2, warmup_steps=3,
                  device="cpu", threads=1, valid_tokens=None)
    return RunConfig(model=family, shape=shape or SHAPES[family], **{**fields, **overrides})


@pytest.fixture(scope="module")
def corpus():
    return tiny_corpus()


@pytest.fixture(scope="module", params=sorted(SHAPES))
def trained(request, corpus, tmp_path_factory):
    """(family, run directory) of a network trained for two epochs with the full softmax."""
    out = tmp_path_factory.mktemp(request.param)
    train_network(corpus, tiny_config(request.param), out, progress=False)
    return request.param, out


def double_model(out, corpus):
    model = load_network(out, corpus, device="cpu")
    model.net.double()  # float64, so that a batch's rounding does not blur the comparisons
    return model


def test_distributions_sum_to_one_and_scores_are_their_logs(trained, corpus):
    family, out = trained
    model = double_model(out, corpus)
    assert_normalised(model, corpus, count=10)  # (each history is read whole: an LSTM's in ~1,000 steps)
    for split in ("valid", "test"):
        assert_scores_match_distribution(model, corpus, split, tokens=20)


def test_training_lowers_the_validation_perplexity_below_the_unigram(trained, corpus):
    family, out = trained
    history = [json.loads(line) for line in (out / LOG).read_text().splitlines()]
    counts = np.bincount(corpus.train, minlength=len(corpus.vocab)) + 1.0
    unigram = perplexity(np.log(counts / counts.sum())[corpus.valid])
    assert history[-1]["valid_perplexity"] < 0.9 * unigram, (history, unigram)


def test_recurrent_lanes_equal_one_lane_after_their_warm_up(trained, corpus):
    """A family whose state does not forget within the warm-up fails here (the Elman RNN under this tiny
    recipe: spectral radius 3-5 after training): it sets `forgets = False` in its file and is scored in one
    lane from the stream's start, exactly, whatever its state (`neural.networks.stream.RecurrentNetwork`)."""
    family, out = trained
    if not recurrent(family):
        pytest.skip("lanes are the recurrent networks'")
    net = double_model(out, corpus).net
    if not net.forgets:
        pytest.skip(f"{family} is scored in one lane from the stream's start: its state need not forget")
    stream, start = corpus.stream_for("test")
    one = net.score_stream(stream, start, lanes=1, warmup=None)
    # every lane read from the stream's start: the same computation, cut differently
    np.testing.assert_allclose(net.score_stream(stream, start, lanes=7, warmup=None), one, rtol=0, atol=1e-10)
    # each lane warmed on the 200 tokens before it: within rounding of the state's memory
    warmed = net.score_stream(stream, start, lanes=7, warmup=200)
    assert np.abs(warmed - one).max() < 1e-4
    assert abs(perplexity(warmed) / perplexity(one) - 1) < 1e-5
    # with no warm-up the lanes' first tokens are scored without their history: visibly different
    assert np.abs(net.score_stream(stream, start, lanes=7, warmup=0) - one).max() > 1e-3


def test_recurrent_lanes_read_no_more_warm_up_than_they_score(trained, corpus, monkeypatch):
    """By default a split is cut into lanes only as far as each lane still scores `warmup` tokens:
    the warm-up read to score it is at most its length, or one lane's warm-up."""
    family, out = trained
    if not recurrent(family):
        pytest.skip("lanes are the recurrent networks'")
    net = load_network(out, corpus, device="cpu").net
    read = []
    encode = type(net).encode
    monkeypatch.setattr(type(net), "encode", lambda self, inputs, state=None: read.append(inputs.numel())
                        or encode(self, inputs, state))
    stream, start = corpus.stream_for("test")
    count = len(stream) - start
    for warmup in (count // 5, count // 2, 3 * count):
        read.clear()
        net.score_stream(stream, start, warmup=warmup)
        bound = count + max(count, min(warmup, start)) + 32  # 32: the lanes' end padding
        assert sum(read) <= bound, (warmup, sum(read), count)


def test_transformer_windows_give_every_target_half_its_context_of_history():
    from neural.networks.transformer import TransformerNetwork
    net = TransformerNetwork(TransformerShape(layers=1, d=4, heads=1, ff=4, length=8), 5)
    for target in range(40):
        begin, end = net.window_of(target)
        assert begin <= target < end and end - begin <= 8
        assert target - begin >= min(target, 4)


def test_resume_mid_epoch_gives_the_uninterrupted_run(corpus, tmp_path):
    for family in sorted(SHAPES):
        config = tiny_config(family, objective="importance")  # the sampler's draws resumed too
        whole, parts = tmp_path / f"{family}-whole", tmp_path / f"{family}-parts"
        train_network(corpus, config, whole, progress=False, evaluate=False)
        inside_second_epoch = lane_layout(len(corpus.train), config.batch, config.steps, 0)[1] + 2
        stopped = train_network(corpus, dataclasses.replace(config, max_steps=inside_second_epoch), parts,
                               progress=False, evaluate=False)
        assert stopped["stopped"] == "max_steps" and stopped["epochs"] == 1  # inside the second epoch
        train_network(corpus, config, parts, resume=True, progress=False, evaluate=False)
        assert (parts / LOG).read_text().count("\n") == 2
        for name in ("valid_perplexity", "train_loss"):
            assert [json.loads(r)[name] for r in (whole / LOG).read_text().splitlines()] == \
                   [json.loads(r)[name] for r in (parts / LOG).read_text().splitlines()], family


def test_an_existing_run_needs_resume_and_the_same_network(corpus, tmp_path):
    train_network(corpus, tiny_config("lstm", max_steps=2), tmp_path, progress=False)
    with pytest.raises(LMBenchError, match="--resume"):
        train_network(corpus, tiny_config("lstm"), tmp_path, progress=False)
    with pytest.raises(LMBenchError, match="has another network: layers=2"):
        train_network(corpus, tiny_config("lstm", LSTMShape(layers=1, m=12, h=12)), tmp_path, resume=True,
                     progress=False)


def test_a_diverging_run_stops_in_one_line_and_keeps_its_last_good_checkpoint(corpus, tmp_path, monkeypatch):
    train_network(corpus, tiny_config("lstm", objective="importance", max_steps=3), tmp_path, progress=False)
    good = read_state(tmp_path / CHECKPOINT)["model"]
    from neural.outputs.objectives import ImportanceSampling
    monkeypatch.setattr(ImportanceSampling, "loss_with", lambda self, net, z, target, sample: z.sum() * np.nan)
    with pytest.raises(LMBenchError, match="became nan at update 3.*last good checkpoint"):
        train_network(corpus, tiny_config("lstm", objective="importance"), tmp_path, resume=True, progress=False)
    kept = read_state(tmp_path / CHECKPOINT)["model"]
    assert all(torch.equal(good[k], kept[k]) for k in good)


def test_importance_sampling_trains_too(corpus, tmp_path):
    result = train_network(corpus, tiny_config("transformer", objective="importance", epochs=1), tmp_path,
                          progress=False)
    assert np.isfinite(result["valid_perplexity"]) and result["valid_perplexity"] < len(corpus.vocab)


@pytest.mark.parametrize("make, message", [
    (lambda: LSTMShape(layers=3), "--layers 3"),
    (lambda: LSTMShape(m=10, h=12), "tied"),
    (lambda: TransformerShape(d=10, heads=3), "--heads 3"),
    (lambda: TransformerShape(positions="sinusoid"), "unknown positions"),
    (lambda: RunConfig(model="lstm", objective="class"), "no class output layer"),
    (lambda: RunConfig(model="nplm", clip=0.5), "--model nplm has no use for --clip"),
    (lambda: RunConfig(model="transformer", schedule="halving"), "not a schedule of the adamw recipe: give cosine"),
    (lambda: RunConfig(model="nplm", schedule="cosine"), "not a schedule of the sgd recipe")])
def test_bad_options_are_refused_in_one_line(make, message):
    with pytest.raises(LMBenchError, match=message):
        make()


def test_the_command_line_trains_an_lstm_and_refuses_a_missing_cuda(tmp_path, monkeypatch, capsys):
    from lmbench_cli import main
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    sentences = tiny_corpus()  # the same kind of text, written out
    paths = []
    for split in ("train", "valid", "test"):
        path = tmp_path / f"{split}.txt"
        path.write_text(" ".join(sentences.vocab.decode(sentences.split(split))))
        paths += [f"--{split}", str(path)]
    common = ["nplm", "train", "--corpus", "text", *paths, "--model", "lstm", "--m", "8", "--h", "8", "--layers", "1"]
    if not torch.cuda.is_available():
        assert main([*common, "--device", "cuda", "--out", str(tmp_path / "cuda")]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
        assert not (tmp_path / "cuda").exists()
    for window_option, refusal in ((["--recipe", "paper"], "no use for --recipe: drop it"),
                                   (["--schedule", "halving"], "--schedule halving is not a schedule of the adamw "
                                                               "recipe: give cosine"),
                                   (["--patience", "3"], "no use for --patience: drop it"),
                                   (["--min-gain", "0.01"], "no use for --min-gain: drop it")):
        # the window networks' recipe options: refused in one line, never dropped without a word
        assert main([*common, *window_option, "--out", str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and refusal in err, err
        assert not (tmp_path / "refused").exists()
    assert main([*common, "--epochs", "1", "--batch-size", "2", "--threads", "1", "--device", "cpu", "--json",
                 "--dropout", "0", "--out", str(tmp_path / "run")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["epochs"] == 1 and np.isfinite(result["test_perplexity"])
    assert json.loads((tmp_path / "run" / "result.json").read_text())["config"]["dropout"] == 0.0  # not the family's 0.4
    saved = read_state(tmp_path / "run" / CHECKPOINT)
    assert saved["config"]["dropout"] == 0.0 and saved["family"] == "lstm"
    assert (tmp_path / "run" / "logprobs.npz").exists()
    assert main(["nplm", "eval", str(tmp_path / "run"), "--corpus", "text", *paths, "--split", "test", "--json",
                 "--device", "cpu"]) == 0  # the stream family's own loader and scoring, through `nplm eval`
    assert json.loads(capsys.readouterr().out)["perplexity"] == pytest.approx(result["test_perplexity"], rel=1e-9)


def test_a_stream_family_trains_by_its_own_recipe_unless_told_otherwise():
    from neural.config import RunConfig
    for family in SHAPES:
        defaults = FAMILIES[family].shape.run_defaults
        config = RunConfig(model=family)
        assert {key: getattr(config, key) for key in defaults} == defaults and defaults["dropout"] > 0
        assert RunConfig(model=family, epochs=2).epochs == 2  # given: it wins
        assert RunConfig(model=family, dropout=0.0).dropout == 0.0
    assert (RunConfig().epochs, RunConfig().samples, RunConfig().weight_decay) == (40, 400, 1e-4)  # the NPLM's


def test_a_reproduction_loads_a_stream_run_as_any_network(corpus, tmp_path):
    """`neural.training.trainer.train_network` and `load_network`, the pipeline's two calls, go to the family's own trainer
    and loader: the loaded model scores as `load_network`'s."""
    from neural.config import RunConfig
    from neural.training.checkpoint import load_network
    from neural.training.trainer import train_network
    config = RunConfig(model="lstm", layers=1, m=8, h=8, epochs=1, batch_size=4, objective="softmax", device="cpu",
                        threads=1)
    train_network(corpus, config, tmp_path, evaluate=False, progress=False)
    assert np.array_equal(split_logprobs(load_network(tmp_path, corpus, device="cpu"), corpus, "valid"),
                          split_logprobs(load_network(tmp_path, corpus, device="cpu"), corpus, "valid"))


@pytest.mark.parametrize("family", [name for name in SHAPES if recurrent(name)])
def test_the_state_carried_across_chunks_gives_the_whole_stream(family):
    """Every recurrent family: encoding a stream in two chunks, the state carried, is encoding it at once,
    what training's lanes and the exact scoring rely on."""
    torch.manual_seed(1)
    net = FAMILIES[family].network_class()(FAMILIES[family].shape(layers=2, m=6, h=6), 9).double().eval()
    inputs = torch.from_numpy(np.random.default_rng(0).integers(0, 9, size=(3, 20)))
    whole, _ = net.encode(inputs)
    first, state = net.encode(inputs[:, :8])
    second, _ = net.encode(inputs[:, 8:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole, rtol=1e-12, atol=1e-12)

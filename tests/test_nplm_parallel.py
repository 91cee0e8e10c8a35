"""Parallel training (neural/parallel/teams.py) on 2 gloo processes on localhost, spawned by the tests: the
loss and gradients of one minibatch and the parameters after a few updates equal one process's,
a run of a few hundred updates learns, stops, resumes and writes one checkpoint in the
single-process format, distributed evaluation scores like one process, and bad set-ups are named.
Launched by torchrun through the command line: tests/test_launch.py."""

import dataclasses
import json
import math
import multiprocessing
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from lmbench.errors import LMBenchError
from lmbench.model import perplexity, split_perplexity
from neural.outputs.classes import word_classes
from neural.config import RunConfig
from neural.scoring import context_windows
from neural.outputs.objectives import make_objective
from neural.parallel.teams import LAUNCH_ENV, blocks, connect, leave_process_group
from neural.training.team import Team
from neural.training import weights_file
from neural.training.checkpoint import BEST, CHECKPOINT, load_network, read_state
from neural.training.trainer import train_network
from tests.lm_checks import make_corpus

TEXT = ("the cat sat on the mat . the dog sat on the log . a cat and a dog saw the mat . "
        "my dog ate the bone . the bird sang on a branch . ") * 8
CORPUS = make_corpus(TEXT, "the cat sat on the log . a dog saw a bird .", "a dog sat on the mat .")
V = len(CORPUS.vocab)
WORLD = 2
BATCH = 16  # windows per update, all processes together


def tiny(**overrides) -> RunConfig:
    settings = dict(n=3, m=4, h=5, direct=True, epochs=2, batch_size=BATCH, lr=0.5, samples=8,
                    threads=1, device="cpu", min_gain=-1.0, weight_decay=1e-3)
    settings.update(overrides)
    if settings.get("parallel") == "data":
        settings["batch_size"] //= WORLD  # per process
    return RunConfig(**settings)


# -- the harness: WORLD processes, each running `worker(rank, directory, *args)` ---------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_env(rank: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": str(WORLD), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def _entry(rank, port, worker, directory, args):
    os.environ.update(launch_env(rank, port))
    torch.set_num_threads(1)
    try:
        weights_file.write(worker(rank, directory, *args), directory / f"rank{rank}.safetensors")
    finally:
        leave_process_group()


# The processes are forked from one server that imported this module (torch with it) and torch._dynamo
# (which the first optimizer imports) once: a fresh interpreter per process spent about 7 s of a core
# importing them, most of each test.
multiprocessing.set_forkserver_preload([__name__, "torch._dynamo"])


def spawn(worker, directory: Path, *args) -> list:
    """What worker returned on each process."""
    mp.start_processes(_entry, args=(free_port(), worker, directory, args), nprocs=WORLD, join=True,
                       start_method="forkserver")
    return [weights_file.read(directory / f"rank{r}.safetensors") for r in range(WORLD)]


# -- one minibatch ------------------------------------------------------------------------------------

def batch_gradients(team: Team, objective_name: str) -> tuple[float, dict]:
    """The loss of one minibatch and every parameter's gradient (dense, whole) through the team's hooks,
    for a network and sampler started from the same seeds as `train_network` starts them."""
    config = tiny(objective=objective_name)
    torch.manual_seed(0)
    classes = objective_name == "class"
    net = team.network("nplm", config.shape, V, output="class" if classes else "softmax",
                       structure=word_classes(CORPUS, config, progress=False) if classes else None)
    counts = np.bincount(CORPUS.train, minlength=V) + 1.0
    unigram = torch.from_numpy(counts / counts.sum())
    net.set_unigram_biases(unigram)
    objective = make_objective(objective_name, unigram.float(), 8, torch.Generator().manual_seed(0))
    contexts = torch.from_numpy(context_windows(CORPUS.train, 2).copy())
    targets = torch.from_numpy(CORPUS.train.astype(np.int64))
    ids = torch.from_numpy(np.random.default_rng(1).permutation(len(targets))[:BATCH])
    mine, share = team.shard_batch(ids)
    loss = objective.loss(net, net.features(contexts[mine]), targets[mine])
    loss.backward()
    value = float(team.sum_gradients(net, loss, share))
    grads = {name: p.grad.to_dense() for name, p in net.named_parameters()}
    if team.mode == "vocab":
        grads.update({name: team.gather_rows(grads[name], team.row_sizes) for name in ("output.out", "output.b")})
    return value, grads


def gradient_worker(rank, directory, scheme, objectives):
    """Per objective: the minibatch's loss and gradients, and the network after a few updates of
    train_network (rank 0's checkpoint)."""
    team = connect(scheme, V, device="cpu", threads=1)
    results = {}
    for name in objectives:
        loss, grads = batch_gradients(team, name)
        train_network(CORPUS, tiny(objective=name, parallel=scheme, max_steps=4), directory / name,
                   progress=False, team=team)
        results[name] = loss, grads
    return results


def assert_close(actual, expected, what):
    """Equal to 1e-5 relative (entries near zero: to 1e-5 of the tensor's largest entry)."""
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5 * float(expected.abs().max()),
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("scheme,objectives", [("data", ["softmax", "importance", "nce", "class"]),
                                               ("vocab", ["softmax", "importance", "nce"])])
def test_loss_gradients_and_updates_equal_one_process(tmp_path, scheme, objectives):
    results = spawn(gradient_worker, tmp_path, scheme, objectives)
    for name in objectives:
        loss, grads = batch_gradients(Team(), name)
        for rank, result in enumerate(results):
            parallel_loss, parallel_grads = result[name]
            assert parallel_loss == pytest.approx(loss, rel=1e-5), (name, rank)
            for param, grad in grads.items():
                assert_close(parallel_grads[param], grad, f"{scheme} {name} grad {param} rank {rank}")
        single = tmp_path / f"single-{name}"
        train_network(CORPUS, tiny(objective=name, max_steps=4), single, progress=False)
        expected = read_state(single / CHECKPOINT)
        trained = read_state(tmp_path / name / CHECKPOINT)
        assert trained["state"]["step"] == 4 and trained["batch"] == BATCH
        assert trained["state"]["loss_sum"] == pytest.approx(expected["state"]["loss_sum"], rel=1e-5)
        assert trained["model"].keys() == expected["model"].keys()
        for param, value in expected["model"].items():
            assert_close(trained["model"][param], value, f"{scheme} {name} {param} after 4 updates")


# -- a run: learn, stop, resume, evaluate -------------------------------------------------------------

RUN_EPOCHS = 8  # of 18 updates (16 windows each)


def run_worker(rank, directory, scheme):
    """An uninterrupted run and one stopped after 100 updates then resumed (each 144 updates), and
    the distributed evaluation of the resumed run's best model."""
    team = connect(scheme, V, device="cpu", threads=1)
    config = tiny(objective="softmax", parallel=scheme, epochs=RUN_EPOCHS)
    whole = train_network(CORPUS, config, directory / "whole", progress=False, team=team)
    stopped = train_network(CORPUS, dataclasses.replace(config, max_steps=100), directory / "split",
                         progress=False, team=team)
    resumed = train_network(CORPUS, config, directory / "split", resume=True, progress=False, team=team)
    net = load_network(directory / "split", CORPUS, team=team).net
    stream, start = CORPUS.stream_for("valid", history=2)
    return {"whole": whole, "stopped": stopped, "resumed": resumed,
            "distributed_valid": perplexity(team.score_stream(net, stream, start)),
            "full_scores": net(torch.from_numpy(context_windows(stream, 2, start).copy())).detach()}


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["data", "vocab"])
def test_run_learns_stops_resumes_and_evaluates_like_one_process(tmp_path, scheme):
    results = spawn(run_worker, tmp_path, scheme)
    first = results[0]
    assert first["stopped"]["stopped"] == "max_steps" and first["stopped"]["updates"] == 100
    updates = RUN_EPOCHS * math.ceil(len(CORPUS.train) / BATCH)
    assert first["whole"]["updates"] == first["resumed"]["updates"] == updates
    assert first["resumed"]["valid_perplexity"] == pytest.approx(first["whole"]["valid_perplexity"], rel=1e-6)
    for result in results:  # every process reports the same figures
        assert result["resumed"]["valid_perplexity"] == first["resumed"]["valid_perplexity"]
    start = load_network(tmp_path / "split", CORPUS, device="cpu")  # the unigram network it started from
    torch.manual_seed(0)
    start.net.reset_parameters()
    counts = np.bincount(CORPUS.train, minlength=V) + 1.0
    start.net.set_unigram_biases(torch.from_numpy(counts / counts.sum()))
    assert first["resumed"]["valid_perplexity"] < 0.7 * split_perplexity(start, CORPUS, "valid")
    # one checkpoint, in the single-process format: it loads, scores and resumes on one process
    run = tmp_path / "split"
    assert sorted(p.name for p in run.iterdir()) == [BEST, CHECKPOINT, "log.jsonl", "logprobs.npz", "result.json"]
    written = json.loads((run / "result.json").read_text())
    assert written["valid_perplexity"] == first["resumed"]["valid_perplexity"]
    single = load_network(run, CORPUS, device="cpu")
    assert split_perplexity(single, CORPUS, "valid") == pytest.approx(first["distributed_valid"], rel=1e-6)
    assert split_perplexity(single, CORPUS, "valid") == pytest.approx(first["resumed"]["valid_perplexity"], rel=1e-6)
    stream, start_at = CORPUS.stream_for("valid", history=2)
    expected = single.net(torch.from_numpy(context_windows(stream, 2, start_at).copy())).detach()
    for result in results:
        assert_close(result["full_scores"], expected, "the gathered scores y")
    more = train_network(CORPUS, tiny(objective="softmax", epochs=RUN_EPOCHS + 1), run, resume=True, progress=False)
    assert more["epochs"] == RUN_EPOCHS + 1
    assert more["valid_perplexity"] < 0.7 * split_perplexity(start, CORPUS, "valid")


# -- bad set-ups: one clear line, before any rendezvous -----------------------------------------------

def test_blocks_are_contiguous_and_even():
    assert blocks(10, 3) == [0, 3, 6, 10] and blocks(10, 4) == [0, 2, 5, 7, 10]
    assert blocks(5, 5) == [0, 1, 2, 3, 4, 5]


def test_parallel_without_torchrun_is_refused(tmp_path, monkeypatch, capsys):
    for key in LAUNCH_ENV:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(LMBenchError, match="runs under torchrun, which sets RANK"):
        train_network(CORPUS, tiny(parallel="data"), tmp_path, progress=False)
    from lmbench_cli import main
    assert main(["nplm", "train", "--corpus", "brown", "--parallel", "vocab", "--out", str(tmp_path)]) == 2
    assert "--parallel vocab runs under torchrun" in capsys.readouterr().err  # before Brown is loaded


@pytest.mark.parametrize("overrides,message", [
    (dict(parallel="vocab"), f"needs at least one output row each, but the vocabulary has {V} words"),
    (dict(parallel="data", backend="nccl"), "--backend nccl needs CUDA"),
    (dict(parallel="data", device="cuda"), "CUDA is not available")])
def test_bad_setups_are_named(tmp_path, monkeypatch, overrides, message):
    if torch.cuda.is_available() and "vocab" not in overrides.values():
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("WORLD_SIZE", str(V + 1))  # no process group is joined: the checks come first
    for key, value in launch_env(0, free_port()).items():
        if key != "WORLD_SIZE":
            monkeypatch.setenv(key, value)
    with pytest.raises(LMBenchError, match=message):
        train_network(CORPUS, tiny(**overrides), tmp_path, progress=False)


def test_class_objective_with_vocab_parallel_is_refused():
    with pytest.raises(LMBenchError, match="--objective class does not compose with --parallel vocab"):
        RunConfig(objective="class", parallel="vocab")

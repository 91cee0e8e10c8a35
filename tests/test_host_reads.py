"""The training loop reads no tensor value on the host per update (issue 51): on a GPU every such read
(`loss.item()`, a tensor in an `if`) waits for the device to finish, and the paper's network, whose
update is a few small kernels, then runs at the speed of the round trips. The loss is summed on the
device and read once per many updates (`neural.training.loop.READ_EVERY`), at a progress point, a
checkpoint and an epoch's end. Counted here on the CPU: every call that hands a tensor's value to
Python, during runs of N updates (inside one epoch, so no validation between them), is the same count
for every N."""

from __future__ import annotations

import pytest
import torch

from neural.config import RunConfig
from neural.training import loop
from neural.training.trainer import train_network
from tests.lm_checks import make_corpus

TEXT = "the cat sat on the mat . the dog sat on the log . a cat and a dog saw the mat . " * 12  # 264 tokens
CORPUS = make_corpus(TEXT, "the cat sat on the log . a dog saw a cat .", "a dog sat on the mat .")
READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")  # a tensor's value to Python


def reads_while_training(tmp_path, updates: int, **options) -> int:
    """Host reads of tensor values during a run stopped after `updates` updates of its first epoch."""
    counted, originals = [0], {name: getattr(torch.Tensor, name) for name in READS}

    def counting(original):
        def read(self, *args, **kwargs):
            counted[0] += 1
            return original(self, *args, **kwargs)
        return read
    config = RunConfig(**{**dict(n=3, m=4, h=5, direct=True, batch_size=16, samples=8, threads=1, device="cpu"),
                          **options}, epochs=1, max_steps=updates)
    try:
        for name, original in originals.items():
            setattr(torch.Tensor, name, counting(original))
        result = train_network(CORPUS, config, tmp_path / f"run-{updates}", progress=False, evaluate=False)
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    assert result["updates"] == updates
    return counted[0]


@pytest.mark.parametrize("options, per_update", [
    (dict(objective="importance"), 0), (dict(objective="softmax"), 0), (dict(objective="nce"), 0),
    (dict(model="energy", objective="nce"), 0),
    # the class and tree layers lay a minibatch out as ragged runs (the words of each target's class,
    # the nodes of its path): the size of that layout is one read per update, inherent to it
    (dict(objective="class", classes=3), 1), (dict(objective="tree"), 1)],
    ids=lambda o: "-".join(map(str, o.values())) if isinstance(o, dict) else str(o))
def test_the_host_reads_no_tensor_value_per_update(tmp_path, options, per_update):
    assert 2 + 12 < loop.READ_EVERY  # both runs read their losses once, at their end
    few, many = (reads_while_training(tmp_path, n, **options) for n in (2, 12))
    assert many - few == 10 * per_update, f"{many - few} more host reads in 10 more updates"


def test_the_losses_are_read_every_read_every_updates(monkeypatch, tmp_path):
    """Past READ_EVERY updates the losses are read again (NaN caught within that many), not per update."""
    monkeypatch.setattr(loop, "READ_EVERY", 4)
    few, many = (reads_while_training(tmp_path, n) for n in (2, 14))
    assert many - few == 3  # the pending losses read after updates 4, 8 and 12 (and both at the run's end)


@pytest.mark.parametrize("scatter", [False, True])
def test_the_foreach_step_is_torchs_sgd(scatter):
    """`sgd_step` (the dense gradients in one foreach call; the sparse ones coalesced, or on a GPU
    scattered row by row without the coalescing's read of their count) moves an NPLM's parameters as
    torch.optim.SGD does, with repeated rows in the sparse gradients of C and the sampled rows."""
    from neural.networks.nplm import NPLM, NPLMShape
    from neural.outputs.objectives import make_objective
    from neural.training.recipe import sgd_step

    def trained(step):
        torch.manual_seed(0)
        net = NPLM(NPLMShape(n=3, m=4, h=5, direct=True), 30)
        unigram = torch.full((30,), 1 / 30)
        objective = make_objective("importance", unigram, 40, torch.Generator().manual_seed(1))
        contexts, targets = torch.randint(0, 30, (64, 2)), torch.randint(0, 30, (64,))
        for _ in range(3):
            net.zero_grad(set_to_none=True)
            objective.loss(net, net.features(contexts), targets).backward()
            step(net)
        assert any(p.grad.is_sparse for p in net.parameters() if p.grad is not None)  # C and the sampled rows
        return net.state_dict()

    sgd = {}
    reference = trained(lambda net: sgd.setdefault(id(net), torch.optim.SGD(net.parameters(), lr=0.3)).step())
    ours = trained(lambda net: sgd_step(list(net.parameters()), 0.3, scatter=scatter))
    for name, value in reference.items():
        torch.testing.assert_close(ours[name], value, rtol=1e-5, atol=1e-7, msg=name)

"""The training objectives over the output layer: importance sampling tends to the exact softmax
gradient, NCE matches its formula, updates touch only the rows they use."""

import math

import numpy as np
import pytest
import torch

from neural.networks.nplm import NPLMShape
from neural.networks.nplm import NPLM
from neural.outputs.objectives import ImportanceSampling, NoiseContrastive

V = 12


def setup(seed=0, direct=True):
    torch.manual_seed(seed)
    net = NPLM(NPLMShape(n=3, m=3, h=4, direct=direct), V).double()
    with torch.no_grad():
        net.output.b.normal_()
        net.output.out.mul_(3.0)  # a peaked distribution, far from the proposal
    context, target = torch.randint(0, V, (6, 2)), torch.randint(0, V, (6,))
    unigram = torch.arange(1, V + 1, dtype=torch.float64)
    return net, context, target, unigram / unigram.sum()


def gradients(net, loss):
    return [g.to_dense() for g in torch.autograd.grad(loss, list(net.parameters()))]


def test_importance_sampling_gradient_approaches_the_exact_one_as_k_grows():
    net, context, target, unigram = setup(1)
    exact = torch.cat([g.flatten() for g in gradients(net, net.loss(net.features(context), target))])
    errors = []
    for k in (4, 64, 4096):
        generator = torch.Generator().manual_seed(0)
        objective = ImportanceSampling(unigram, k, generator)
        loss = objective.loss(net, net.features(context), target)
        estimate = torch.cat([g.flatten() for g in gradients(net, loss)])
        errors.append(((estimate - exact).norm() / exact.norm()).item())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.05, errors


def test_nce_loss_and_gradient_match_the_formula():
    net, context, target, unigram = setup(2)
    k = 5
    noise = torch.tensor([3, 0, 11, 3, 7])
    objective = NoiseContrastive(unigram, k, torch.Generator())
    loss = objective.loss_with(net, net.features(context), target, noise)
    # the formula, one example and one word at a time, from the full scores y
    y = net(context).detach().numpy()
    q = unigram.numpy()

    def sigma(a):
        return 1.0 / (1.0 + math.exp(-a))

    expected, grad_y = 0.0, np.zeros_like(y)
    for i, w in enumerate(target.tolist()):
        delta = y[i, w] - math.log(k * q[w])
        expected -= math.log(sigma(delta))
        grad_y[i, w] -= 1.0 - sigma(delta)
        for j in noise.tolist():
            delta = y[i, j] - math.log(k * q[j])
            expected -= math.log(1.0 - sigma(delta))
            grad_y[i, j] += sigma(delta)
    expected /= len(target)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    # the gradient: back through y = b + [U, W] z with dL/dy above
    reference = gradients(net, (net(context) * torch.from_numpy(grad_y / len(target))).sum())
    for g, r in zip(gradients(net, loss), reference):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-12)



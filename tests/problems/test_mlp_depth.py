"""A deeper MLP (``sims.problems.models.MLP(depth=...)``, the FedLADA stand-in search's option) keeps
the linear-stack fast path exact: its batched gradient equals ``torch.func``'s, and its local
SGD (Gram path and direct path) equals plain step-by-step SGD, in float64."""
from __future__ import annotations

import pytest
import torch

from sims.problems.models import MLP
from sims.problems.neural import NeuralProblem

from conftest import plan_payload, stepwise_sgd_delta, unequal_parts


def _problem(image_data, **kw):
    return NeuralProblem(image_data, unequal_parts(), MLP(784, hidden=6, depth=3),
                         batch_size=4, dtype=torch.float64, **kw)


def test_depth_one_is_the_two_layer_mlp():
    a, b = MLP(784, hidden=5), MLP(784, hidden=5, depth=1)
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()] == \
        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    with pytest.raises(ValueError, match="depth"):
        MLP(784, hidden=5, depth=0)


def test_deep_mlp_fast_gradient_equals_autograd(image_data):
    from sims.problems.linear_stack import linear_stack_grad
    prob = _problem(image_data)
    assert prob.fast_path and len(prob.layout.shapes) == 8
    clients = [4, 0, 2, 3, 1]
    theta = torch.stack([prob.init_theta(s) for s in range(len(clients))])
    payload = plan_payload(prob, clients)[:, 0]
    want = prob.generic_grad(theta, payload)
    got = linear_stack_grad(theta, prob.layout, *prob.minibatch(payload))[0]
    assert want.abs().max() > 0
    assert torch.allclose(got, want, rtol=0, atol=1e-12 * want.abs().max())


def test_deep_mlp_local_sgd_equals_step_by_step(image_data):
    """The Gram path trains one layer above the first, so a deeper MLP takes the direct
    fused path (auto) and refuses the Gram path when asked for it."""
    with pytest.raises(ValueError, match="one hidden layer"):
        _problem(image_data, gram_path=True)
    prob = _problem(image_data)
    assert prob.fast_path and not prob.gram_path
    clients = [4, 0, 2, 3, 1]
    server = torch.stack([prob.init_theta(s) for s in range(2)])
    rep = torch.as_tensor([0, 0, 1, 1, 1])
    payload = plan_payload(prob, clients)
    got = prob.local_sgd_delta(server, rep, torch.as_tensor(clients), payload, 0.3)
    want = stepwise_sgd_delta(prob, server, rep, payload, 0.3)
    assert want.abs().max() > 0
    assert torch.allclose(got, want, rtol=0, atol=1e-12 * want.abs().max())


def test_norm_mlp_layers_and_scale_invariance():
    """``mlp-ln``: Linear - LayerNorm - ReLU hidden layers; the output does not change when a
    hidden layer's weight and bias are scaled (what weight decay acts on in a normalised net)."""
    from sims.problems.models import make_model
    torch.manual_seed(0)
    net = make_model("mlp-ln", (1, 28, 28), 10, hidden=8, depth=2)
    assert [n for n, _ in net.named_parameters()] == [
        "hidden.0.weight", "hidden.0.bias", "hidden.1.weight", "hidden.1.bias",
        "norms.0.weight", "norms.0.bias", "norms.1.weight", "norms.1.bias", "out.weight",
        "out.bias"]
    x = torch.randn(5, 1, 28, 28)
    before = net(x)
    assert before.shape == (5, 10)
    with torch.no_grad():
        net.hidden[0].weight.mul_(3.0)
        net.hidden[0].bias.mul_(3.0)
    assert torch.allclose(net(x), before, atol=1e-4)
    with pytest.raises(ValueError, match="depth"):
        make_model("mlp-ln", (1, 28, 28), 10, hidden=8, depth=0)

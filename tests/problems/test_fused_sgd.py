"""The fused local-SGD paths for stacks of Linear layers against plain step-by-step SGD.

``linear_stack_sgd_delta`` has two paths: one local step (shared-weight forward, the delta
written straight out) and several steps (gathered copies trained in place); participants
come in runs of replicas. Both are held to ``theta_start - theta_end`` of stepping
``theta <- theta - lr * linear_stack_grad(theta)`` in float64.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.fed_ef import FedEF
from sims.core.batching import replica_runs, start_minus, start_rows
from sims.rules.compress import TopK
from sims.core.engine import run
from sims.problems.models import MLP, LogReg
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem

from conftest import plan_payload, stepwise_sgd_delta


def _problem(image_data, model, batch_size, sizes=(5, 9, 14, 20, 14)):
    bounds = np.cumsum((0, *sizes))
    parts = [np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    prob = NeuralProblem(image_data, parts, model, batch_size=batch_size, dtype=torch.float64)
    assert prob.fast_path
    return prob


@pytest.mark.parametrize("model", [lambda: MLP(784, hidden=4), lambda: LogReg(784)])
@pytest.mark.parametrize("batch_size", [32, 4])        # one padded step / several steps
@pytest.mark.parametrize("rep", [[0, 0, 1, 1, 1], [1, 0, 0, 1, 0], [0, 0, 0, 0, 0]])
def test_sgd_delta_equals_step_by_step(image_data, model, batch_size, rep):
    prob = _problem(image_data, model(), batch_size)
    R = max(rep) + 1
    server = torch.stack([prob.init_theta(s) for s in range(R)])
    payload = plan_payload(prob, range(5))
    k_max = payload.shape[1]
    rep = torch.as_tensor(rep)
    got = prob.local_sgd_delta(server, rep, torch.arange(5), payload, 0.3)
    want = stepwise_sgd_delta(prob, server, rep, payload, 0.3)
    assert (k_max == 1) == (batch_size == 32)
    assert torch.allclose(got, want, rtol=0, atol=1e-12 * want.abs().max())
    assert want.abs().max() > 0
    # the copy-returning form leaves its input alone and ends where the delta says
    start = server[rep]
    end = prob.local_sgd(start, torch.arange(5), payload, 0.3)
    assert torch.equal(start, server[rep])
    assert torch.allclose(start - end, want, rtol=0, atol=1e-12 * want.abs().max())


def test_minibatch_drops_columns_that_are_padding_for_every_client(image_data):
    prob = _problem(image_data, MLP(784, hidden=4), 32)     # largest client: 20 samples
    assert prob.batch_width == 20 and prob.max_steps == 1
    payload = torch.full((2, 32), -1)
    payload[0, :3] = torch.tensor([3, 4, 5])
    payload[1, 0] = 7
    x, y, w = prob.minibatch(payload)
    assert x.shape == (2, 20, 1, 28, 28) and w.sum(1).tolist() == [3, 1]
    assert torch.equal(x[0, 1], prob.x[4]) and y[1, 0] == prob.y[7]
    assert _problem(image_data, MLP(784, hidden=4), 4).batch_width == 4


def test_one_step_path_does_not_depend_on_chunking(image_data):
    """The width and the one-step choice belong to the problem, so a client's numbers do
    not depend on which clients share its chunk."""
    prob = _problem(image_data, MLP(784, hidden=4), 32)
    alg = FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.1))
    part = Participation("fixed", m=4)
    together = run(prob, alg, part, 3, [4, 5], eval_every=0)
    for r, seed in enumerate([4, 5]):
        alone = run(prob, alg, part, 3, [seed], max_batch=1, eval_every=0)
        assert torch.allclose(together.server["theta"][r], alone.server["theta"][0],
                              rtol=1e-13, atol=0)
        assert torch.allclose(together.client_state["error"][r], alone.client_state["error"][0],
                              rtol=1e-12, atol=1e-300)


def test_replica_runs_and_start_minus():
    rep = torch.tensor([2, 2, 0, 1, 1, 2])
    assert replica_runs(rep) == [(2, slice(0, 2)), (0, slice(2, 3)), (1, slice(3, 5)),
                                 (2, slice(5, 6))]
    server = torch.randn(3, 7, dtype=torch.float64)
    theta = torch.randn(6, 7, dtype=torch.float64)
    want = server[rep] - theta
    assert torch.equal(start_minus(server, rep, theta), want)
    assert torch.equal(start_rows(server, rep), server[rep]) and start_rows(server, rep).is_contiguous()
    assert torch.equal(start_minus(server, rep, theta, out=theta), want) and torch.equal(theta, want)


@pytest.mark.parametrize("batch_size", [32, 4])
def test_engine_fused_one_step_equals_unfused(image_data, batch_size):
    """Whole runs (2 replicas, partial participation, EF with TopK) through both paths."""
    prob = _problem(image_data, MLP(784, hidden=4), batch_size)
    alg = FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.1))
    a = run(prob, alg, Participation("fixed", m=3), 3, [0, 1], eval_every=0)
    b = run(prob, alg, Participation("fixed", m=3), 3, [0, 1], eval_every=0, fused=False)
    err = (a.server["theta"] - b.server["theta"]).abs().max() / b.server["theta"].abs().max()
    assert err <= 1e-12
    assert not torch.equal(a.client_state["error"], torch.zeros_like(a.client_state["error"]))
    assert torch.allclose(a.client_state["error"], b.client_state["error"], rtol=0, atol=1e-12)


def test_minibatch_keeps_rows_wider_than_a_plan(image_data):
    """Rows with samples beyond ``batch_width`` (a client's whole data, say) are used whole."""
    prob = _problem(image_data, MLP(784, hidden=4), 8)
    assert prob.batch_width == 8
    row = torch.arange(20).unsqueeze(0)
    x, y, w = prob.minibatch(row)
    assert x.shape[1] == 20 and w.sum() == 20
    g = prob.stoch_grad(prob.init_theta(0).unsqueeze(0), torch.tensor([3]), row)
    prob.layout.load_into(prob.model, prob.init_theta(0))
    loss = torch.nn.functional.cross_entropy(prob.model(prob.x[:20]), prob.y[:20])
    want = torch.cat([p.reshape(-1) for p in torch.autograd.grad(loss, list(prob.model.parameters()))])
    assert torch.allclose(g[0], want, rtol=1e-10, atol=1e-14)

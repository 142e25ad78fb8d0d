"""Batched update rules (sims/optim.py): Fed-EF's AMSGrad against a hand-written scalar loop,
the torch.optim readings against torch.optim.Adam, masking, and hyperparameter errors."""
from __future__ import annotations

import math

import pytest
import torch

from sims.algorithms.fed_ef import FedEF
from sims.rules.optim import SGD, Adam, AMSGrad, OptimizerError, make_rule

F64 = torch.float64


def grad_sequence(steps=25, B=3, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    # changing scales so that vhat's max actually binds on some coordinates
    return [torch.randn(B, d, generator=g, dtype=F64) * (3.0 if t % 7 == 0 else 0.3)
            for t in range(steps)]


def scalar_amsgrad(theta0, grads, lr, b1, b2, eps):
    """Fed-EF Alg. 2 lines 17-19, one coordinate at a time, plain Python floats."""
    B, d = theta0.shape
    theta = [[float(theta0[i, j]) for j in range(d)] for i in range(B)]
    m = [[0.0] * d for _ in range(B)]
    v = [[0.0] * d for _ in range(B)]
    vhat = [[0.0] * d for _ in range(B)]
    for g in grads:
        for i in range(B):
            for j in range(d):
                gij = float(g[i, j])
                m[i][j] = b1 * m[i][j] + (1 - b1) * gij
                v[i][j] = b2 * v[i][j] + (1 - b2) * gij * gij
                vhat[i][j] = max(vhat[i][j], v[i][j])
                theta[i][j] = theta[i][j] - lr * m[i][j] / math.sqrt(vhat[i][j] + eps)
    return torch.tensor(theta, dtype=F64), torch.tensor(vhat, dtype=F64)


def run_rule(rule, theta, grads, mask=None):
    state = rule.init(theta)
    for g in grads:
        theta, state = rule.step(theta, g, state, mask)
    return theta, state


def rel(a, b):
    return float((a - b).norm() / b.norm())


def test_amsgrad_matches_fed_ef_lines_17_to_19():
    grads = grad_sequence()
    theta0 = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=F64)
    lr, b1, b2, eps = 0.05, 0.9, 0.99, 1e-3      # a large eps makes "inside the sqrt" visible
    rule = AMSGrad(lr, beta1=b1, beta2=b2, eps=eps)
    assert rule.amsgrad and rule.eps_inside_sqrt and not rule.bias_correction   # the defaults
    theta, state = run_rule(rule, theta0, grads)
    want, want_vhat = scalar_amsgrad(theta0, grads, lr, b1, b2, eps)
    assert rel(theta, want) <= 1e-14
    assert rel(state["vhat"], want_vhat) <= 1e-14
    assert torch.equal(state["vhat"], torch.maximum(state["vhat"], state["v"]))
    assert (state["vhat"] > state["v"]).any()     # the max binds somewhere in this sequence
    assert torch.equal(state["t"], torch.full((3,), float(len(grads)), dtype=F64))
    # the other readings differ on this sequence (so the comparison above can fail)
    outside, _ = run_rule(AMSGrad(lr, beta1=b1, beta2=b2, eps=eps, eps_inside_sqrt=False),
                          theta0, grads)
    plain, _ = run_rule(Adam(lr, beta1=b1, beta2=b2, eps=eps), theta0, grads)
    assert rel(outside, want) > 1e-6 and rel(plain, want) > 1e-6


def test_amsgrad_direction_is_the_server_step():
    g = grad_sequence(steps=1)[0]
    rule = AMSGrad(0.1, eps=1e-8)
    direction, state = rule.direction(g, rule.init(torch.zeros_like(g)))
    m, v = 0.1 * g, 0.001 * g * g
    assert torch.allclose(direction, m / torch.sqrt(v + 1e-8), rtol=1e-15, atol=0)
    theta, _ = rule.step(torch.zeros_like(g), g, rule.init(torch.zeros_like(g)))
    assert torch.allclose(theta, -0.1 * direction, rtol=1e-15, atol=0)


@pytest.mark.parametrize("amsgrad", [True, False])
def test_torch_readings_match_torch_optim_adam(amsgrad):
    grads = grad_sequence(steps=30, seed=2)
    theta0 = torch.randn(3, 6, generator=torch.Generator().manual_seed(3), dtype=F64)
    lr, b1, b2, eps = 0.01, 0.8, 0.95, 1e-6
    rule = Adam(lr, beta1=b1, beta2=b2, eps=eps, eps_inside_sqrt=False, bias_correction=True,
                amsgrad=amsgrad)
    p = torch.nn.Parameter(theta0.clone())
    opt = torch.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, amsgrad=amsgrad)
    theta, state = theta0.clone(), rule.init(theta0)
    for g in grads:
        p.grad = g.clone()
        opt.step()
        theta, state = rule.step(theta, g, state)
        assert rel(theta, p.detach()) <= 1e-12
    # and Fed-EF's default reading is a different rule on the same sequence
    fed_ef, _ = run_rule(Adam(lr, beta1=b1, beta2=b2, eps=eps, amsgrad=amsgrad), theta0, grads)
    assert rel(fed_ef, p.detach()) > 1e-6


@pytest.mark.parametrize("rule", [SGD(0.1), AMSGrad(0.1), Adam(0.1, bias_correction=True)],
                         ids=["sgd", "amsgrad", "adam-bc"])
def test_masked_rows_are_untouched(rule):
    grads = grad_sequence(steps=6, B=4, seed=4)
    theta0 = torch.randn(4, 6, generator=torch.Generator().manual_seed(5), dtype=F64)
    mask = torch.tensor([True, False, True, False])
    theta, state = run_rule(rule, theta0, grads, mask)
    assert torch.equal(theta[~mask], theta0[~mask])
    init = rule.init(theta0)
    for key, val in state.items():
        assert torch.equal(val[~mask], init[key][~mask]), key
    # the unmasked rows are exactly what an unmasked run gives them
    full, full_state = run_rule(rule, theta0, grads)
    assert torch.equal(theta[mask], full[mask])
    for key, val in state.items():
        assert torch.equal(val[mask], full_state[key][mask]), key
    assert not torch.equal(theta[mask], theta0[mask])


def test_mask_changing_between_steps():
    # a row masked at step 2 only keeps its state from step 1 and resumes from it
    rule = AMSGrad(0.1)
    grads = grad_sequence(steps=3, B=2, seed=6)
    theta0 = torch.zeros(2, 6, dtype=F64)
    state = rule.init(theta0)
    theta, state = rule.step(theta0, grads[0], state)
    t1, s1 = theta.clone(), {k: v.clone() for k, v in state.items()}
    theta, state = rule.step(theta, grads[1], state, torch.tensor([True, False]))
    assert torch.equal(theta[1], t1[1]) and torch.equal(state["m"][1], s1["m"][1])
    theta, state = rule.step(theta, grads[2], state)
    # row 1 saw grads 0 and 2 only
    ref, _ = run_rule(rule, theta0[1:], [grads[0][1:], grads[2][1:]])
    assert torch.equal(theta[1:], ref)
    assert torch.equal(state["t"], torch.tensor([3.0, 2.0], dtype=F64))


def test_sgd_rule():
    theta = torch.ones(2, 3, dtype=F64)
    g = torch.full((2, 3), 2.0, dtype=F64)
    new, state = SGD(0.25).step(theta, g, SGD(0.25).init(theta))
    assert torch.equal(new, torch.full((2, 3), 0.5, dtype=F64)) and state == {}


def test_make_rule():
    assert make_rule("sgd", 0.1) == SGD(0.1)
    ams = make_rule("amsgrad", 0.1, beta2=0.99)
    assert ams.amsgrad and ams.beta2 == 0.99
    assert not make_rule("adam", 0.1).amsgrad


@pytest.mark.parametrize("build, words", [
    (lambda: SGD(0.0), "lr"),
    (lambda: SGD(-1.0), "lr"),
    (lambda: SGD(float("nan")), "lr"),
    (lambda: Adam(0.0), "lr"),
    (lambda: Adam(0.1, eps=0.0), "eps"),
    (lambda: Adam(0.1, eps=-1e-8), "eps"),
    (lambda: Adam(0.1, beta1=1.0), "beta1"),
    (lambda: Adam(0.1, beta1=-0.1), "beta1"),
    (lambda: Adam(0.1, beta2=1.5), "beta2"),
    (lambda: Adam(0.1, beta2=float("nan")), "beta2"),
    (lambda: AMSGrad(0.1, beta1=2.0), "beta1"),
    (lambda: make_rule("adamw", 0.1), "unknown optimizer"),
    (lambda: FedEF(1.0, 0.1, server="adam"), "server"),
    (lambda: FedEF(1.0, 0.0), "lr"),
    (lambda: FedEF(-1.0, 0.1), "lr"),
    (lambda: FedEF(1.0, 0.1, server="amsgrad", beta2=1.0), "beta2"),
    (lambda: FedEF(1.0, 0.1, restart_period=0), "restart"),
])
def test_bad_hyperparameters_raise_optimizer_error(build, words):
    with pytest.raises(OptimizerError) as info:
        build()
    assert words in str(info.value) and "\n" not in str(info.value)

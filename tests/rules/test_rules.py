"""The update rules (sims/rules): each transform against its paper's equation written as a
plain scalar loop or formula, torch.optim's readings against torch.optim itself, the local
step's masks and counts, chains, server rule objects and their string constructors, and
one-line errors."""
from __future__ import annotations

import math

import pytest
import torch

from sims.algorithms.fed_ef import FedEF
from sims.core.params import ParamLayout
from sims.rules.base import (Optimizer, OptimizerError, StepInfo, chain, local_step, start)
from sims.rules.frozen import Frozen
from sims.rules.mixture import Mixture
from sims.rules.moments import Adaptive, Ema, Momentum
from sims.rules.server import (SGD, AdaGrad, Adam, AMSGrad, Momentum as ServerMomentum, Yogi,
                               server_rule)
from sims.rules.terms import (SVRG, AddDecayedWeights, Amend, ClipByNorm, ControlVariate,
                              FirstGradient, Proximal, Warmup)
from sims.rules.trust import TrustRatio, layer_norms

F64 = torch.float64


def grad_sequence(steps=25, B=3, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    # changing scales so that vhat's max actually binds on some coordinates
    return [torch.randn(B, d, generator=g, dtype=F64) * (3.0 if t % 7 == 0 else 0.3)
            for t in range(steps)]


def run(rule, lr, theta, grads, mask=None):
    opt = Optimizer(rule, lr)
    state = opt.init(theta)
    for g in grads:
        theta, state = opt.step(theta, g, state, mask)
    return theta, state


def rel(a, b):
    return float((a - b).norm() / b.norm())


def scalar_loop(theta0, grads, update):
    """``theta - lr u`` one coordinate at a time in plain floats; ``update(g, s) -> (u, s)``
    with ``s`` a dict of floats per coordinate."""
    B, d = theta0.shape
    theta = [[float(theta0[i, j]) for j in range(d)] for i in range(B)]
    states = [[{} for _ in range(d)] for _ in range(B)]
    for t, g in enumerate(grads, start=1):
        for i in range(B):
            for j in range(d):
                u = update(float(g[i, j]), states[i][j], t)
                theta[i][j] -= u
    return torch.tensor(theta, dtype=F64), states


def test_amsgrad_matches_fed_ef_lines_17_to_19():
    grads = grad_sequence()
    theta0 = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=F64)
    lr, b1, b2, eps = 0.05, 0.9, 0.99, 1e-3      # a large eps makes "inside the sqrt" visible
    rule = FedEF(1.0, 0.1, server="amsgrad", beta1=b1, beta2=b2, eps=eps).server_rule

    def lines_17_19(g, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        s["vhat"] = max(s.get("vhat", 0.0), s["v"])
        return lr * s["m"] / math.sqrt(s["vhat"] + eps)
    theta, state = run(rule, lr, theta0, grads)
    want, states = scalar_loop(theta0, grads, lines_17_19)
    assert rel(theta, want) <= 1e-14
    want_vhat = torch.tensor([[s["vhat"] for s in row] for row in states], dtype=F64)
    assert rel(state["vhat"], want_vhat) <= 1e-14
    assert (state["vhat"] > state["v"]).any()     # the max binds somewhere in this sequence
    assert torch.equal(state["n"], torch.full((3,), float(len(grads)), dtype=F64))
    # the other readings differ on this sequence (so the comparison above can fail)
    outside, _ = run(chain(Adaptive("amsgrad", b1, b2, eps, eps_inside=False)), lr, theta0, grads)
    plain, _ = run(chain(Adaptive("adam", b1, b2, eps)), lr, theta0, grads)
    assert rel(outside, want) > 1e-6 and rel(plain, want) > 1e-6


@pytest.mark.parametrize("amsgrad", [True, False])
def test_torch_readings_match_torch_optim_adam(amsgrad):
    grads = grad_sequence(steps=30, seed=2)
    theta0 = torch.randn(3, 6, generator=torch.Generator().manual_seed(3), dtype=F64)
    lr, b1, b2, eps = 0.01, 0.8, 0.95, 1e-6
    rule = chain(Adaptive("amsgrad" if amsgrad else "adam", b1, b2, eps, eps_inside=False,
                          bias_correction=True))
    p = torch.nn.Parameter(theta0.clone())
    opt = torch.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, amsgrad=amsgrad)
    mine = Optimizer(rule, lr)
    theta, state = theta0.clone(), mine.init(theta0)
    for g in grads:
        p.grad = g.clone()
        opt.step()
        theta, state = mine.step(theta, g, state)
        assert rel(theta, p.detach()) <= 1e-12
    # Fed-LAMB's order (the max of the corrected v) is another rule on this sequence
    if amsgrad:
        fed_lamb, _ = run(chain(Adaptive("amsgrad", b1, b2, eps, eps_inside=False,
                                         bias_correction=True, correct_before_max=True)),
                          lr, theta0, grads)
        assert rel(fed_lamb, p.detach()) > 1e-6


def test_fed_lamb_amsgrad_takes_the_max_of_the_corrected_v_with_separate_counts():
    """MAIN Alg. 2 lines 8-12 with choice (b): m_c = m / (1 - b1^nm), v_c = v / (1 - b2^n),
    vhat = max(vhat, v_c), p = m_c / sqrt(vhat): the counts start where the state says."""
    b1, b2 = 0.9, 0.999
    rule = chain(Adaptive("amsgrad", b1, b2, eps=0.0, bias_correction=True,
                          correct_before_max=True))
    g = torch.tensor([[0.3, -2.0]], dtype=F64)
    s = start(rule, g, m=torch.tensor([[0.1, 0.2]], dtype=F64),
              v=torch.tensor([[0.5, 0.01]], dtype=F64), vhat=torch.tensor([[0.2, 0.3]], dtype=F64),
              n=torch.tensor([4.0], dtype=F64), nm=torch.tensor([1.0], dtype=F64))
    theta, new = local_step(rule, torch.zeros(1, 2, dtype=F64), g, s, 0.5, None,
                            StepInfo(s["k"]))
    m = b1 * s["m"] + (1 - b1) * g
    v = b2 * s["v"] + (1 - b2) * g * g
    vhat = torch.maximum(s["vhat"], v / (1 - b2 ** 5))
    torch.testing.assert_close(new["vhat"], vhat, rtol=1e-15, atol=0)
    torch.testing.assert_close(theta, -0.5 * (m / (1 - b1 ** 2)) / vhat.sqrt(), rtol=1e-15,
                               atol=0)
    assert new["n"].item() == 5 and new["nm"].item() == 2 and new["k"].item() == 1


def test_fixed_vhat_is_read_only():
    rule = chain(Adaptive("amsgrad", eps=0.0, vhat="fixed", bias_correction=True,
                          correct_before_max=True))
    g = grad_sequence(steps=1)[0]
    s = start(rule, g, vhat=torch.full_like(g, 0.25))
    theta, new = local_step(rule, torch.zeros_like(g), g, s, 1.0, None, StepInfo(s["k"]))
    assert "vhat" not in rule.update(g, s, g, None)[1]
    torch.testing.assert_close(theta, -((1 - 0.9) * g / (1 - 0.9)) / 0.5, rtol=1e-15, atol=0)


def test_yogi_is_zaheer_et_al_algorithm_2():
    grads = grad_sequence(steps=20, seed=7)
    theta0 = torch.zeros(3, 6, dtype=F64)
    lr, b1, b2, eps, v0 = 0.02, 0.9, 0.99, 1e-3, 1e-6

    def yogi(g, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        v = s.get("v", v0)
        s["v"] = v - (1 - b2) * g * g * math.copysign(1.0, v - g * g) if v != g * g else v
        return lr * s["m"] / (math.sqrt(s["v"]) + eps)
    theta, _ = run(chain(Adaptive("yogi", b1, b2, eps, eps_inside=False, v0=v0)), lr,
                   theta0, grads)
    want, _ = scalar_loop(theta0, grads, yogi)
    assert rel(theta, want) <= 1e-13


def test_adagrad_with_momentum_and_v0():
    grads = grad_sequence(steps=10, seed=8)
    theta0 = torch.zeros(3, 6, dtype=F64)
    lr, b1, tau = 0.1, 0.5, 1e-2

    def su(g, s, t):                                  # FedAda2 SU (spec 1.1)
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = s.get("v", tau * tau) + g * g
        return lr * s["m"] / (math.sqrt(s["v"]) + tau)
    theta, _ = run(AdaGrad(beta1=b1, tau=tau), lr, theta0, grads)
    want, _ = scalar_loop(theta0, grads, su)
    assert rel(theta, want) <= 1e-14


def test_momentum_and_ema():
    grads = grad_sequence(steps=5, seed=9)
    theta0 = torch.zeros(3, 6, dtype=F64)
    heavy, _ = scalar_loop(theta0, grads, lambda g, s, t: s.__setitem__(
        "m", 0.8 * s.get("m", 0.0) + g) or 0.1 * s["m"])
    averaged, _ = scalar_loop(theta0, grads, lambda g, s, t: s.__setitem__(
        "m", 0.8 * s.get("m", 0.0) + 0.2 * g) or 0.1 * s["m"])
    assert rel(run(chain(Momentum(0.8)), 0.1, theta0, grads)[0], heavy) <= 1e-14
    assert rel(run(ServerMomentum(0.8), 0.1, theta0, grads)[0], heavy) <= 1e-14
    assert rel(run(chain(Ema(0.8)), 0.1, theta0, grads)[0], averaged) <= 1e-14


RULES = {
    "sgd": chain(),
    "amsgrad": chain(Adaptive("amsgrad", eps=1e-8)),
    "adam-bc": chain(Adaptive("adam", bias_correction=True)),
    "yogi": chain(Adaptive("yogi", eps=1e-3, eps_inside=False, v0=1e-6)),
    "wd-first": chain(AddDecayedWeights(0.1), FirstGradient()),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_masked_rows_are_untouched(name):
    rule = RULES[name]
    grads = grad_sequence(steps=6, B=4, seed=4)
    theta0 = torch.randn(4, 6, generator=torch.Generator().manual_seed(5), dtype=F64)
    mask = torch.tensor([True, False, True, False])
    theta, state = run(rule, 0.1, theta0, grads, mask)
    assert torch.equal(theta[~mask], theta0[~mask])
    init = start(rule, theta0)
    for key, val in state.items():
        assert torch.equal(val[~mask], init[key][~mask]), key
    # the unmasked rows are exactly what an unmasked run gives them
    full, full_state = run(rule, 0.1, theta0, grads)
    assert torch.equal(theta[mask], full[mask])
    for key, val in state.items():
        assert torch.equal(val[mask], full_state[key][mask]), key
    assert not torch.equal(theta[mask], theta0[mask])
    assert torch.equal(state["k"], torch.tensor([6.0, 0.0, 6.0, 0.0], dtype=F64))


def test_mask_changing_between_steps():
    # a row masked at step 2 only keeps its state from step 1 and resumes from it
    opt = Optimizer(RULES["amsgrad"], 0.1)
    grads = grad_sequence(steps=3, B=2, seed=6)
    theta0 = torch.zeros(2, 6, dtype=F64)
    state = opt.init(theta0)
    theta, state = opt.step(theta0, grads[0], state)
    t1, s1 = theta.clone(), {k: v.clone() for k, v in state.items()}
    theta, state = opt.step(theta, grads[1], state, torch.tensor([True, False]))
    assert torch.equal(theta[1], t1[1]) and torch.equal(state["m"][1], s1["m"][1])
    theta, state = opt.step(theta, grads[2], state)
    ref, _ = run(RULES["amsgrad"], 0.1, theta0[1:], [grads[0][1:], grads[2][1:]])
    assert torch.equal(theta[1:], ref)
    assert torch.equal(state["n"], torch.tensor([3.0, 2.0], dtype=F64))


def test_chain_state_is_flat_and_its_keys_are_owned_once():
    rule = chain(chain(AddDecayedWeights(0.1)), Adaptive("adam"), FirstGradient())
    assert [type(t).__name__ for t in rule] == ["AddDecayedWeights", "Adaptive",
                                                "FirstGradient"]
    assert set(start(rule, torch.zeros(2, 3))) == {"k", "m", "v", "n", "nm", "gx"}
    with pytest.raises(OptimizerError, match="keep"):
        chain(Adaptive("adam"), Ema(0.9))                     # both keep "m"
    with pytest.raises(OptimizerError, match="keeps"):
        rule.init(torch.zeros(2, 3), mu=torch.zeros(2, 3))    # no transform keeps mu


def test_linear_terms():
    g = torch.Generator().manual_seed(10)
    theta, u, t0, ga, c, ci, anchor = (torch.randn(3, 4, generator=g, dtype=F64)
                                       for _ in range(7))
    info = StepInfo(torch.zeros(3, dtype=F64), bcast={"theta": t0, "ga": ga, "c": c},
                    cstate={"c": ci}, extra={"anchor_grad": anchor})
    cases = [(AddDecayedWeights(0.3), u + 0.3 * theta), (Proximal(0.2), u + 0.2 * (theta - t0)),
             (Amend(0.25), 0.25 * u + 0.75 * ga), (ControlVariate(1.5), u + 1.5 * (c - ci)),
             (SVRG(), (u - anchor) + c)]
    for tr, want in cases:
        got, new = tr.update(u, {}, theta, info)
        assert torch.equal(got, want) and new == {}, tr


def test_first_gradient_warmup_and_clipping():
    u = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=F64)
    k = torch.tensor([0.0, 2.0], dtype=F64)
    got, new = FirstGradient().update(u, {"gx": torch.zeros_like(u)}, u, StepInfo(k))
    assert torch.equal(got, u) and torch.equal(new["gx"], torch.stack([u[0], torch.zeros(2,
                                                                                      dtype=F64)]))
    got, _ = Warmup(4).update(u, {}, u, StepInfo(k))          # steps 1 and 3 of a 4-step ramp
    assert torch.equal(got, u * torch.tensor([[0.25], [0.75]], dtype=F64))
    got, _ = ClipByNorm(1.0).update(u, {}, u, None)
    torch.testing.assert_close(got, torch.tensor([[0.6, 0.8], [0.3, 0.4]], dtype=F64))


LAYOUT = ParamLayout(("w", "b", "v"), ((3, 4), (3,), (5,)))


def test_trust_ratio_moves_every_layer_by_lr_phi():
    """Fed-LAMB spec P1: a step moves layer l by exactly lr phi(||theta_l||) (a zero layer at
    phi_min), and with phi = ||u_l||, lam = 0 the update is u itself (P3)."""
    g = torch.Generator().manual_seed(11)
    theta = torch.randn(2, LAYOUT.d, generator=g, dtype=F64)
    theta[1, 12:15] = 0.0                                      # a zero bias
    u = torch.randn(2, LAYOUT.d, generator=g, dtype=F64)
    info = StepInfo(torch.zeros(2, dtype=F64), layout=LAYOUT)
    out, _ = TrustRatio("clip", 0.05, 1.0, lam=0.1).update(u, {}, theta, info)
    phi = layer_norms(theta, LAYOUT).clamp(0.05, 1.0)
    torch.testing.assert_close(layer_norms(out, LAYOUT), phi, rtol=1e-14, atol=0)
    same, _ = TrustRatio("update_norm").update(u, {}, theta, info)
    torch.testing.assert_close(same, u, rtol=1e-14, atol=0)


def test_frozen_base_gives_the_direction_and_keeps_the_state():
    base = Adaptive("amsgrad", 0.9, 0.999, 1e-8)
    g = grad_sequence(steps=1, B=2)[0]
    s = {k: v.abs() + 0.1 for k, v in base.init(g).items()}
    bcast = {f"s_{k}": v for k, v in s.items()}
    got, new = Frozen(base).update(g, {}, g, StepInfo(torch.zeros(2), bcast=bcast))
    want, _ = base.update(g, s, g, None)
    assert torch.equal(got, want) and new == {}


def test_mixture_rows_follow_their_member_within_its_budget():
    rule = chain(Mixture((chain(), chain(Adaptive("adam"))), (None, 1)))
    theta0 = torch.zeros(4, 3, dtype=F64)
    opt_state = start(rule, theta0)
    clients = torch.tensor([0, 1, 2, 3])
    theta = theta0
    for g in grad_sequence(steps=3, B=4, d=3, seed=12):
        info = StepInfo(opt_state["k"], clients=clients)
        theta, opt_state = local_step(rule, theta, g, opt_state, 0.1, None, info)
    sgd, _ = run(chain(), 0.1, theta0[[0, 2]], [g[[0, 2]] for g in grad_sequence(3, 4, 3, 12)])
    assert torch.equal(theta[[0, 2]], sgd)
    adam, _ = run(chain(Adaptive("adam")), 0.1, theta0[[1, 3]],
                  [g[[1, 3]] for g in grad_sequence(3, 4, 3, 12)[:1]])
    assert torch.equal(theta[[1, 3]], adam)                   # one step, then the budget


def test_server_rules_from_strings_are_the_objects():
    for kind, obj in (("sgd", SGD()), ("adam", Adam(tau=0.1)), ("amsgrad", AMSGrad(tau=0.1)),
                      ("adagrad", AdaGrad(beta1=0.9, tau=0.1)), ("yogi", Yogi(tau=0.1)),
                      ("momentum", ServerMomentum(0.9))):
        kw = {"beta1": 0.9, "tau": 0.1} if kind != "momentum" else {"momentum": 0.9}
        assert server_rule(kind, **kw) == obj, kind
    assert server_rule(Adam(tau=0.2)) == Adam(tau=0.2)
    assert Adam(tau=0.1).transforms[0].v0 == pytest.approx(0.01)      # v0 = tau^2


@pytest.mark.parametrize("build, words", [
    (lambda: Adaptive("adamw"), "unknown adaptive rule"),
    (lambda: Adaptive("adam", beta1=1.0), "beta1"),
    (lambda: Adaptive("adam", beta2=float("nan")), "beta2"),
    (lambda: Adaptive("adam", eps=-1e-8), "eps"),
    (lambda: Adam(tau=0.0, v0=0.0), "eps = 0 needs v0 > 0"),
    (lambda: server_rule("adamw"), "unknown server rule"),
    (lambda: server_rule(3.0), "server rule"),
    (lambda: TrustRatio("sqrt"), "unknown phi"),
    (lambda: TrustRatio(lam=-1.0), "lambda"),
    (lambda: Warmup(1.5), "local_warmup"),
    (lambda: ClipByNorm(0.0), "clip"),
    (lambda: Momentum(1.0), "beta"),
    (lambda: FedEF(1.0, 0.1, server="adam"), "server"),
    (lambda: FedEF(1.0, 0.0), "eta_l"),
    (lambda: FedEF(-1.0, 0.1), "eta"),
    (lambda: FedEF(1.0, 0.1, server="amsgrad", beta2=1.0), "beta2"),
    (lambda: FedEF(1.0, 0.1, server="amsgrad", eps=0.0), "eps"),
    (lambda: FedEF(1.0, 0.1, restart_period=0), "restart"),
])
def test_bad_hyperparameters_raise_optimizer_error(build, words):
    with pytest.raises(OptimizerError) as info:
        build()
    assert words in str(info.value) and "\n" not in str(info.value)

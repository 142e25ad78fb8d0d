"""Fast forms of the local adaptive rules equal their readable references in float64 (issue 16).

``LocalAdaptive.step`` (Fed-AMS, Fed-LAMB, FedLADA, LocalAdam) dispatches to the C kernel
(:mod:`sims.accel.native.adaptive`), torch's fused kernel (no mask) or
:func:`sims.rules.optim.local_adaptive_step`; every test runs with the C kernel on and off, and
the step is held here to ``reference_step`` over every
option (rule, vhat handling, eps, bias correction, amendment, trust ratio, weight decay,
per-row rates, masks), several steps in a row so the state recursion is covered too.
"""
from __future__ import annotations

import itertools

import pytest
import torch

from sims.accel import native
from sims.algorithms.adaptive import LocalAdaptive
from sims.problems.models import MLP
from sims.rules.optim import TrustRatio, layer_norms, layer_norms_fast, trust_step, unscaled_vhat
from sims.core.params import ParamLayout
from conftest import require_native

B = 4


@pytest.fixture(autouse=True, params=["native", "torch"])
def local_kernel(request, monkeypatch):
    """Every test twice: ``LocalAdaptive.step`` with its one-pass C kernel first
    (:mod:`sims.accel.native.adaptive`, built here) and without it (torch's fused kernel, then the
    eager form). Returns the name."""
    on = request.param == "native"
    monkeypatch.setattr(LocalAdaptive, "native_step", on)
    if on:
        require_native()
    return request.param


@pytest.fixture(scope="module")
def layout():
    return ParamLayout.from_module(MLP(6, 5, 3))


def _state(theta, gen):
    B, d = theta.shape
    v = torch.rand(B, d, generator=gen, dtype=torch.float64)
    return LocalAdaptive.start(torch.randn(B, d, generator=gen, dtype=torch.float64) * 0.1,
                               v, v + torch.rand(B, d, generator=gen, dtype=torch.float64),
                               torch.tensor([0.0, 1.0, 3.0, 7.0], dtype=torch.float64)[:B])


TRUSTS = [None, TrustRatio(), TrustRatio("identity", lam=0.1), TrustRatio("update_norm"),
          TrustRatio(phi_min=0.5, phi_max=0.6, lam=0.01)]
OPTIONS = list(itertools.product(
    [("amsgrad", "step"), ("amsgrad", "round"), ("adam", "step")],   # rule, vhat
    [0.0, 1e-8],                                                    # eps (inside the root)
    [False, True],                                                  # bias correction
    [1.0, 0.3],                                                     # alpha (amended: g_a)
    range(len(TRUSTS)),
    [(0.0, "coupled"), (0.01, "coupled"), (0.02, "decoupled")]))


@pytest.mark.parametrize("rv,eps,bc,alpha,trust,wd", OPTIONS)
def test_local_adaptive_fast_equals_reference(layout, local_kernel, rv, eps, bc, alpha, trust,
                                              wd):
    rule = LocalAdaptive(rv[0], 0.9, 0.99, vhat=rv[1], eps=eps, bias_correction=bc,
                         alpha=alpha, trust=TRUSTS[trust], weight_decay=wd[0], wd_mode=wd[1])
    gen = torch.Generator().manual_seed(hash((rv, eps, bc, alpha, trust, wd)) % 2**31)
    d = layout.d
    theta = torch.randn(B, d, generator=gen, dtype=torch.float64)
    ga = torch.randn(B, d, generator=gen, dtype=torch.float64)
    lrs = [0.05, torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)]
    masks = [None, torch.tensor([True, False, True, True])]
    for lr, mask in itertools.product(lrs, masks):
        st_f = st_r = _state(theta, gen)
        th_f = th_r = theta
        before = native.calls.get("adaptive_step", 0)
        for _ in range(3):
            g = torch.randn(B, d, generator=gen, dtype=torch.float64)
            th_f, st_f = rule.step(th_f, g, st_f, mask, lr, layout, ga=ga)
            th_r, st_r = rule.reference_step(th_r, g, st_r, mask, lr, layout, ga=ga)
        # the C kernel takes every step when on (masked ones too), none otherwise
        want = 3 if local_kernel == "native" else 0
        assert native.calls.get("adaptive_step", 0) - before == want
        torch.testing.assert_close(th_f, th_r, rtol=1e-12, atol=1e-12)
        st_f = unscaled_vhat(st_f)           # the torch-fused step keeps it scaled
        assert set(st_f) == set(st_r)
        for k in st_r:
            torch.testing.assert_close(st_f[k], st_r[k], rtol=1e-12, atol=1e-12)
        assert not torch.equal(th_f, theta)


def test_fast_step_leaves_its_inputs_alone(layout):
    """The engine's callers may keep the previous iterate and state (probes, references)."""
    rule = LocalAdaptive("amsgrad", bias_correction=True, trust=TrustRatio(), alpha=0.5,
                         weight_decay=0.01)
    gen = torch.Generator().manual_seed(1)
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    state = _state(theta, gen)
    g, ga = torch.randn_like(theta), torch.randn_like(theta)
    before = (theta.clone(), g.clone(), {k: v.clone() for k, v in state.items()})
    rule.step(theta, g, state, None, 0.1, layout, ga=ga)
    assert torch.equal(theta, before[0]) and torch.equal(g, before[1])
    for k, v in state.items():
        assert torch.equal(v, before[2][k])


def test_trust_step_and_layer_norms_equal_the_readable_rule(layout):
    gen = torch.Generator().manual_seed(2)
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    u = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    u[1, layout.slices[1]] = 0                         # a layer with w_l = 0 does not move
    torch.testing.assert_close(layer_norms_fast(u, layout), layer_norms(u, layout))
    for trust in TRUSTS[1:]:
        for lr in (0.1, torch.tensor([[0.1], [0.2], [0.3], [0.4]], dtype=torch.float64)):
            want = theta - lr * trust(theta, u, layout)
            torch.testing.assert_close(trust_step(trust, theta, u, layout, lr), want,
                                       rtol=1e-12, atol=1e-12)
            inplace = theta.clone()                     # out=theta: written in place
            assert trust_step(trust, inplace, u, layout, lr, out=inplace) is inplace
            torch.testing.assert_close(inplace, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind,beta1,inside,bc", list(itertools.product(
    ["adam", "amsgrad", "adagrad"], [0.0, 0.9], [False, True], [False, True])))
def test_adaptive_rule_fast_direction_equals_reference(kind, beta1, inside, bc):
    """``AdaptiveRule.direction`` (MimeLite / Mime's frozen base optimizer, the server rules)
    against ``reference_direction``, several steps so the state recursion is covered."""
    from sims.rules.optim import AdaptiveRule
    rule = AdaptiveRule(0.1, kind, beta1, 0.99, 1e-3, 1e-4, inside, bc)
    gen = torch.Generator().manual_seed(3)
    theta = torch.randn(B, 50, generator=gen, dtype=torch.float64)
    st_f = st_r = rule.init(theta)
    for _ in range(3):
        g = torch.randn(B, 50, generator=gen, dtype=torch.float64)
        u_f, st_f = rule.direction(g, st_f)
        u_r, st_r = rule.reference_direction(g, st_r)
        torch.testing.assert_close(u_f, u_r, rtol=1e-12, atol=1e-14)
        assert set(st_f) == set(st_r)
        for k in st_r:
            torch.testing.assert_close(st_f[k], st_r[k], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,hyper", [
    ("fedada2", {}), ("fedada2", {"precond": "sm3-i"}), ("joint-adaptive", {}), ("dja", {}),
    ("fedadaadagrad", {}), ("fedada2-adam", {}), ("fedada2-adam", {"precond": "sm3-i"}),
    ("fedadaadam", {}), ("fedadaadam", {"bias_correction": False}),
    ("dja", {"client": "adam", "server": "adam"})])
def test_fedada2_fast_client_step_equals_reference(layout, name, hyper):
    """FedAda2's client AdaGrad and Adam (SM3-II / SM3-I / full, z = 1) through
    :func:`sims.rules.optim.sm3_adagrad_step` / :func:`sims.rules.optim.sm3_adam_step` against the
    readable ``reference_local_step``, with and without a mask."""
    from sims.algorithms.base import RoundContext
    from sims.algorithms.registry import make_algorithm
    alg = make_algorithm(name, **hyper)
    gen = torch.Generator().manual_seed(4)
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    ctx = RoundContext(2, layout, torch.zeros(B, dtype=torch.long), torch.arange(B),
                       torch.full((B,), -1))
    bcast = {"theta": theta}
    if alg.init == "server":
        bcast["pre"] = torch.rand(B, layout.d, generator=gen, dtype=torch.float64)
    for mask in (None, torch.tensor([True, False, True, True])):
        st_f = st_r = alg.local_start(bcast, {}, ctx)
        th_f = th_r = theta
        for _ in range(3):
            g = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
            th_f, st_f = alg.local_step(th_f, g, st_f, bcast, {}, mask, ctx)
            th_r, st_r = alg.reference_local_step(th_r, g, st_r, bcast, {}, mask, ctx)
        torch.testing.assert_close(th_f, th_r, rtol=1e-12, atol=1e-13)
        for k in st_r:
            torch.testing.assert_close(st_f[k], st_r[k], rtol=1e-12, atol=1e-13)


def test_cover_min_into_equals_cover_min(layout):
    from sims.rules.optim import SM3Cover
    gen = torch.Generator().manual_seed(5)
    for full in (False, True):
        cover = SM3Cover(layout, full=full)
        mu = torch.rand(B, cover.size, generator=gen, dtype=torch.float64)
        out = cover.cover_min_into(mu, torch.empty(B, layout.d, dtype=torch.float64))
        assert torch.equal(out, cover.cover_min(mu))


@pytest.mark.parametrize("rv,bc,wd", [(("amsgrad", "step"), True, (0.0, "coupled")),
                                      (("amsgrad", "step"), False, (0.02, "decoupled")),
                                      (("amsgrad", "round"), True, (0.01, "coupled")),
                                      (("adam", "step"), True, (0.0, "coupled"))])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_local_adaptive_owned_in_place_equals_fresh(layout, rv, bc, wd, dtype):
    """With ``owned`` (the engine's state from a round's second step on) the eager fast form
    writes into ``theta`` and the state: bit for bit the out-of-place result, and the inputs
    it was not given (a round-fixed ``vhat``) untouched."""
    rule = LocalAdaptive(rv[0], 0.9, 0.99, vhat=rv[1], bias_correction=bc,
                         weight_decay=wd[0], wd_mode=wd[1])
    gen = torch.Generator().manual_seed(5)
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64).to(dtype)
    st = {k: v.to(dtype) for k, v in _state(theta, gen).items()}
    fixed_vhat = st["vhat"].clone()
    th_a, st_a = theta, st
    th_b, st_b = theta.clone(), {k: v.clone() for k, v in st.items()}
    for step in range(3):
        g = torch.sin(th_a + step)
        th_a, st_a = rule.step(th_a, g, st_a, None, 0.05, layout)
        th_b, st_b = rule.step(th_b, g.clone(), st_b, None, 0.05, layout, owned=step > 0)
        assert torch.equal(th_a, th_b)
        assert all(torch.equal(st_a[k], st_b[k]) for k in st_a)
    if rv[1] == "round":
        assert torch.equal(st_b["vhat"], fixed_vhat)

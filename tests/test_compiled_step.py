"""The compiled one-pass local step (``sims.compiled``, opt-in) equals the readable rule in
float64 (issue 16): ``LocalAdaptive.reference_step`` over the options the registry's
algorithms use (Fed-AMS, FedLADA, LocalAdam, a round-fixed ``vhat``, decoupled decay), per-row
rates, several steps in a row, with and without ownership of the inputs; through the engine
(its ``owned_state`` flag) against the eager run; and the fallback when compiling fails.

The kernels are built by ``torch.compile`` (inductor), which needs a C++ compiler: without one
these tests are skipped (the compiled form is then unusable here, and the eager form runs).
"""
from __future__ import annotations

import shutil

import pytest
import torch

from conftest import tiny_uneven_problem
from sims import compiled, torch_fused
from sims.core import engine
from sims.algorithms.adaptive import LocalAdaptive
from sims.rules.optim import AdaptiveRule, TrustRatio
from sims.core.params import ParamLayout
from sims.algorithms.registry import make_for_problem
from sims.problems.models import MLP
from sims.core.participation import Participation

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                    reason="torch.compile's CPU backend needs a C++ compiler")
B, D = 4, 43

RULES = {   # rule, vhat, eps, bias correction, alpha, weight decay, mode
    "fed-ams": ("amsgrad", "step", 0.0, True, 1.0, 0.0, "coupled"),
    "fedlada": ("amsgrad", "step", 0.0, False, 0.3, 0.01, "coupled"),
    "adam-decoupled": ("adam", "step", 1e-8, True, 1.0, 0.02, "decoupled"),
    "vhat-round": ("amsgrad", "round", 1e-8, True, 1.0, 0.0, "coupled"),
    "fed-lamb": ("amsgrad", "step", 0.0, True, 1.0, 0.0, "coupled"),
    "lamb-amended": ("amsgrad", "step", 0.0, False, 0.3, 0.02, "decoupled"),
}
TRUST = {"fed-lamb": TrustRatio(), "lamb-amended": TrustRatio("identity", lam=0.1)}


@pytest.fixture(autouse=True)
def restore_compiled(monkeypatch):
    """Every test leaves the compiled form as it found it (``FEDTOOLKIT_COMPILE``), and runs
    with torch's fused kernels off (:mod:`sims.torch_fused` goes first where it applies;
    ``tests/test_torch_fused.py`` tests it), and FedAda2's SM3-II C kernel off (it goes
    first too; ``tests/test_fedada2_fast_step.py``)."""
    from sims.algorithms.fedada2 import JointAdaptive
    monkeypatch.setattr(JointAdaptive, "native_step", False)
    was, fused_was = compiled.enabled(), torch_fused.enabled()
    torch_fused.enable(False)
    yield
    compiled.enable(was)
    torch_fused.enable(fused_was)


@pytest.fixture
def compiled_on():
    compiled.enable(True)
    yield


def _start(gen):
    v = torch.rand(B, D, generator=gen, dtype=torch.float64)
    return LocalAdaptive.start(torch.randn(B, D, generator=gen, dtype=torch.float64) * 0.1, v,
                               v + torch.rand(B, D, generator=gen, dtype=torch.float64),
                               torch.tensor([0.0, 1.0, 3.0, 7.0], dtype=torch.float64))


@needs_compiler
@pytest.mark.parametrize("name", list(RULES))
def test_compiled_step_equals_reference(compiled_on, name):
    r, vh, eps, bc, alpha, wd, mode = RULES[name]
    rule = LocalAdaptive(r, 0.9, 0.99, vhat=vh, eps=eps, bias_correction=bc, alpha=alpha,
                         weight_decay=wd, wd_mode=mode, trust=TRUST.get(name))
    layout = ParamLayout.from_module(MLP(4, 5, 3))       # d = 43
    gen = torch.Generator().manual_seed(len(name))
    ga = torch.randn(B, D, generator=gen, dtype=torch.float64)
    for lr in (0.05, torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)):
        theta = torch.randn(B, D, generator=gen, dtype=torch.float64)
        st_c = st_r = _start(gen)
        th_c, th_r = theta, theta
        inputs = {k: v.clone() for k, v in st_c.items()}
        for step in range(3):
            assert compiled.usable(rule, None, th_c)
            got = compiled.fused_local_adaptive_step(rule, th_c, torch.sin(th_c + step), st_c,
                                                     lr, ga, owned=step > 0, layout=layout)
            assert got is not None
            if step == 0:       # not owned: the inputs are left as they were
                assert torch.equal(th_c, theta)
                assert all(torch.equal(st_c[k], inputs[k]) for k in inputs)
            th_c, st_c = got
            th_r, st_r = rule.reference_step(th_r, torch.sin(th_r + step), st_r, None, lr,
                                             layout, ga=ga)
            torch.testing.assert_close(th_c, th_r, rtol=1e-12, atol=1e-12)
            for k in st_r:
                torch.testing.assert_close(st_c[k], st_r[k], rtol=1e-12, atol=1e-12)


@needs_compiler
@pytest.mark.parametrize("kind,inside,corrected,lamb", [("amsgrad", True, False, False),
                                                        ("amsgrad", True, True, False),
                                                        ("adam", False, True, False),
                                                        ("amsgrad", True, True, True)])
def test_compiled_frozen_step_equals_reference(compiled_on, kind, inside, corrected, lamb):
    """MimeLite / Mime's step ``theta - lr U(g; s)`` on the frozen server state (Mime: on
    ``g - anchor + c``) against the base rule's readable direction."""
    rule = AdaptiveRule(0.01, kind, 0.9, 0.999, 1e-8, 0.0, eps_inside_sqrt=inside)
    trust = TrustRatio(lam=0.1) if lamb else None
    layout = ParamLayout.from_module(MLP(4, 5, 3))       # d = 43
    gen = torch.Generator().manual_seed(7)
    rand = lambda: torch.randn(B, D, generator=gen, dtype=torch.float64)  # noqa: E731
    s = rule.init(rand())
    s = {k: (v + rand().abs() if v.dim() == 2 else v) for k, v in s.items()}
    theta, g, anchor, c = rand(), rand(), rand(), rand()
    for lr in (0.05, torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)):
        assert compiled.frozen_usable(rule, None, theta)
        got = compiled.fused_frozen_step(rule, theta, g, s, lr, *((anchor, c) if corrected
                                                                  else (None, None)),
                                         trust=trust, layout=layout)
        u, _ = rule.reference_direction(g - anchor + c if corrected else g, s)
        want = theta - lr * (trust(theta, u, layout) if lamb else u)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@needs_compiler
@pytest.mark.parametrize("name,kernel", [("fed-ams", False), ("fedlada", False),
                                         ("localadam", False), ("mimelite", "frozen"),
                                         ("mime", "frozen"), ("dja", "full"),
                                         ("fed-lamb", False), ("mime-lamb", "frozen"),
                                         ("mimelite-lamb", "frozen"),
                                         ("fedadaadam", "full"), ("fedadaadagrad", "full"),
                                         ("fedada2", "sm3"), ("fedada2-adam", "sm3")])
def test_engine_compiled_equals_eager(name, kernel, monkeypatch):
    problem = tiny_uneven_problem()
    out = {}
    for on in (False, True):
        compiled.enable(on)
        monkeypatch.setattr(compiled, "_kernels", {})
        try:
            alg = make_for_problem(name, problem)
            out[on] = engine.run(problem, alg, Participation("fixed", m=3), 3, [0],
                                 eval_every=0).server["theta"]
            assert compiled.enabled() == on     # compiled and ran (no fallback)
            used = {k[0] if isinstance(k[0], str) else False for k in compiled._kernels}
            assert used == ({kernel} if on else set())
        finally:
            compiled.enable(False)
    assert not torch.equal(out[True], problem.init_theta(0).unsqueeze(0))
    torch.testing.assert_close(out[True], out[False], rtol=1e-10, atol=1e-12)


@needs_compiler
@pytest.mark.parametrize("name", ["dja", "fedada2", "fedada2-adam"])
def test_epoch_wise_freezing_stays_on_the_eager_rule(name, monkeypatch):
    """FedAda2 Fig. 7's frozen epochs (``freeze_epochs``) have no compiled kernel: with the
    compiled mode on, such a run uses none and equals the eager run (it would not, were the
    one-pass kernel applied, since that kernel updates the preconditioner every step)."""
    problem = tiny_uneven_problem(local_epochs=3)
    out = {}
    for on in (False, True):
        compiled.enable(on)
        monkeypatch.setattr(compiled, "_kernels", {})
        try:
            alg = make_for_problem(name, problem, freeze_epochs=1)
            out[on] = engine.run(problem, alg, Participation("fixed", m=3), 3, [0],
                                 eval_every=0).server["theta"]
            assert compiled._kernels == {}
        finally:
            compiled.enable(False)
    plain = engine.run(problem, make_for_problem(name, problem), Participation("fixed", m=3),
                       3, [0], eval_every=0).server["theta"]
    assert not torch.allclose(out[False], plain)           # the freezing changes the run
    torch.testing.assert_close(out[True], out[False], rtol=0, atol=0)


def test_compile_failure_falls_back_to_eager(monkeypatch):
    def broken(fn, **kw):
        def run(*a):
            raise RuntimeError("no compiler here")
        return run
    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(compiled, "_kernels", {})
    compiled.enable(True)
    try:
        rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True)
        gen = torch.Generator().manual_seed(1)
        theta = torch.randn(B, D, generator=gen, dtype=torch.float64)
        state = _start(gen)
        with pytest.warns(RuntimeWarning, match="torch.compile failed"):
            th, st = rule.step(theta, torch.cos(theta), state, None, 0.1, None)
        assert not compiled.enabled()
        th_r, st_r = rule.reference_step(theta, torch.cos(theta), state, None, 0.1, None)
        torch.testing.assert_close(th, th_r, rtol=1e-12, atol=1e-12)
    finally:
        compiled.enable(False)


@needs_compiler
@pytest.mark.parametrize("adam", [False, True])
def test_compiled_sm3_step_equals_eager_form(compiled_on, adam):
    """FedAda2's SM3-II client step (AdaGrad / Adam with bias corrections and per-row rates)
    against the eager fast forms, which ``tests/test_fedada2*.py`` hold to the readable rule."""
    from sims.rules.optim import SM3Cover, sm3_adagrad_step, sm3_adam_step
    layout = ParamLayout.from_module(MLP(4, 5, 3))
    cover = SM3Cover(layout)
    gen = torch.Generator().manual_seed(3)
    rand = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    theta, g, m = rand(B, layout.d), rand(B, layout.d), rand(B, layout.d)
    mu = rand(B, cover.size).abs()
    lr = torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)
    c1 = torch.tensor([[0.1], [0.19], [0.5], [0.9]], dtype=torch.float64)
    c2 = torch.tensor([[0.001], [0.002], [0.01], [0.3]], dtype=torch.float64)
    if adam:
        got = compiled.fused_sm3_step(cover, theta, g, mu, lr, 1e-3, m, 0.9, 0.999, c1, c2)
        th, m_r, mu_r, nu_r = sm3_adam_step(cover, theta, g, m, mu, lr, 1e-3, True, 0.9, 0.999,
                                            c1, c2)
        want = (th, mu_r, nu_r, m_r)
    else:
        got = compiled.fused_sm3_step(cover, theta, g, mu, lr, 1e-3)
        want = sm3_adagrad_step(cover, theta, g, mu, lr, 1e-3, True)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("compile_on", [False, pytest.param(True, marks=needs_compiler)])
def test_blend_rows_form_equals_masked_reference(monkeypatch, compile_on):
    """FedAda2-blend's fast local step (each member on its own rows) equals the readable form
    (every member over all rows under masks), with step budgets, a client with fewer steps
    (masks) and, compiled or not, the members' fast steps."""
    from sims.algorithms.fedada2 import FedAda2Blend
    problem = tiny_uneven_problem()
    out = {}
    for form in ("fast", "reference"):
        compiled.enable(compile_on)
        alg = FedAda2Blend(eta=0.05, weights="1,0.5,2", steps="2,1,3",
                           strategies="sm3-adagrad,sm3-adam,adagrad")
        if form == "reference":
            monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        out[form] = engine.run(problem, alg, Participation("fixed", m=4), 3, [0],
                               eval_every=0).server["theta"]
    assert not torch.equal(out["fast"], problem.init_theta(0).unsqueeze(0))
    torch.testing.assert_close(out["fast"], out["reference"], rtol=1e-10, atol=1e-12)

"""Every accelerated form held to its rule: one harness, in the spirit of torch's OptimizerInfo
tests (rule x form x dtype x mask x ownership).

For each client rule that :func:`sims.accel.plan` gives a fast step (the local AMSGrad /
Adam kernel, the frozen-state kernel, the SM3 / full-preconditioner kernel, a mixture of
them), on random state: the planned step against :func:`sims.rules.base.local_step` (the
readable rule), in float64 (relative error 1e-12) and float32 (to rounding), with and without
a mask of rows that do not step, with one rate or a rate per row, and with the state owned
(the step may overwrite it) or not (it must leave every input as it was). The form must be
the one taken (its kernel called), not a fallback. The fused local-SGD rounds are held to
stepping the readable rule through the problem's gradient; TopK and error feedback in C to
the readable compressor, bit for bit; and whole engine runs of every registry algorithm with
the fast forms on equal the runs with them off."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
import torch

from sims import accel
from sims.accel import native
from sims.algorithms.registry import ALGORITHMS, make_for_problem
from sims.core.engine import run
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.rules.base import READABLE, Rows, StepInfo, chain, local_step, start
from sims.rules.compress import HeavySign, Sign, TopK, error_feedback
from sims.rules.frozen import Frozen
from sims.rules.mixture import Mixture
from sims.rules.moments import Adaptive, Ema
from sims.rules.sm3 import SM3
from sims.rules.terms import (SVRG, AddDecayedWeights, Amend, ControlVariate, FirstGradient,
                              Proximal, Warmup)
from sims.rules.trust import TrustRatio
from conftest import require_native, tiny_uneven_problem

pytestmark = pytest.mark.accel

LAYOUT = ParamLayout(("w1", "b1", "w2", "b2"), ((6, 5), (6,), (3, 6), (3,)))
REP = torch.tensor([0, 0, 0, 1, 1])
B, R, D = 5, 2, LAYOUT.d

AMS = dict(eps=0.0, bias_correction=True, correct_before_max=True)       # Fed-LAMB's reading
TRUST = TrustRatio("clip", 0.05, 3.0, lam=0.01)
MIME_BASE = Adaptive("amsgrad", 0.9, 0.999, 1e-8)

#: (case id, plan name, rule)
CASES = [
    ("fed-ams", "adaptive-C", chain(Adaptive("amsgrad", 0.9, 0.999, **AMS))),
    ("fed-lamb", "adaptive-C", chain(Adaptive("amsgrad", 0.9, 0.999, **AMS), TRUST)),
    ("fed-lamb-printed", "adaptive-C",
     chain(Adaptive("amsgrad", 0.9, 0.999, eps=1e-8, bias_correction=True, vhat="fixed",
                    correct_before_max=True), TRUST)),
    ("fed-ams-no-bc", "adaptive-C", chain(Adaptive("amsgrad", 0.9, 0.999, eps=1e-8))),
    ("local-adam", "adaptive-C", chain(Adaptive("adam", 0.9, 0.99, eps=1e-8,
                                                bias_correction=True))),
    ("fedlada-coupled", "adaptive-C", chain(AddDecayedWeights(0.01),
                                            Adaptive("amsgrad", 0.9, 0.99, eps=0.0),
                                            Amend(0.2))),
    ("fedlada-decoupled", "adaptive-C", chain(Adaptive("amsgrad", 0.9, 0.99, eps=0.0),
                                              Amend(0.2), AddDecayedWeights(0.01))),
    ("lamb-amended", "adaptive-C", chain(Adaptive("amsgrad", 0.9, 0.999, **AMS), TRUST,
                                         Amend(0.5))),
    ("local-yogi", "adaptive-C", chain(Adaptive("yogi", eps=1e-3, eps_inside=False, v0=1e-6))),
    ("yogi-bc", "adaptive-C", chain(Adaptive("yogi", eps=1e-3, eps_inside=False,
                                             bias_correction=True))),
    ("mimelite", "frozen-C", chain(FirstGradient(), Frozen(MIME_BASE))),
    ("mimelite-lamb", "frozen-C", chain(FirstGradient(), Frozen(MIME_BASE), TRUST)),
    ("mimelite-adam", "frozen-C", chain(FirstGradient(),
                                        Frozen(Adaptive("adam", 0.9, 0.999, 1e-8)))),
    ("mime", "frozen-C", chain(SVRG(), Frozen(MIME_BASE))),
    ("mime-lamb", "frozen-C", chain(SVRG(), Frozen(MIME_BASE), TRUST)),
    ("fedada2", "sm3-C", chain(SM3("adagrad", "sm3-ii"))),
    ("fedada2-adam", "sm3-C", chain(SM3("adam", "sm3-ii"))),
    ("fedada2-sm3i", "sm3-C", chain(SM3("adagrad", "sm3-i"))),
    ("fedada2-sm3i-adam", "sm3-C", chain(SM3("adam", "sm3-i"))),
    ("joint-adaptive", "sm3-C", chain(SM3("adagrad", "full"))),
    ("fedadaadam", "sm3-C", chain(SM3("adam", "full"))),
    ("dja-adam", "sm3-C", chain(SM3("adam", "full", count_offset="round"))),
    ("blend", "mixture", chain(Mixture((chain(SM3("adagrad", "sm3-ii")),
                                        chain(SM3("adam", "sm3-ii")), chain()),
                                       (None, 3, None)))),
]
#: the rules no fast step takes (the readable rule runs): the plan declines them
DECLINED = [
    ("yogi-eps-inside", chain(Adaptive("yogi", eps=1e-3))),
    ("eps-outside", chain(Adaptive("amsgrad", eps=1e-3, eps_inside=False))),
    ("torch-order-max", chain(Adaptive("amsgrad", eps=1e-8, bias_correction=True))),
    ("sm3-i-delayed", chain(SM3("adagrad", "sm3-i", delay=3))),
    ("sm3-delayed", chain(SM3("adagrad", "sm3-ii", delay=2))),
    ("sm3-warmup", chain(SM3("adagrad", "sm3-ii"), Warmup(3))),
    ("sgdm-mime", chain(FirstGradient(), Frozen(Ema(0.9)))),
    ("per-replica-beta", chain(Adaptive("amsgrad", torch.tensor([[0.9]]), 0.999, **AMS))),
]


class EngineView(Mapping):
    """The engine's per-participant view of ``[R, ...]`` server tensors (``per_replica``)."""

    def __init__(self, server: dict, rep: torch.Tensor):
        self.server, self.rep = server, rep

    def __getitem__(self, key):
        return self.server[key].index_select(0, self.rep)

    def per_replica(self, key):
        return self.server[key], self.rep

    def __iter__(self):
        return iter(self.server)

    def __len__(self):
        return len(self.server)


def _positive(gen, shape, dtype, lo=1e-3):
    return torch.rand(shape, generator=gen, dtype=dtype) + lo


def setup(rule, dtype, seed=0):
    """Random ``theta``, ``g``, state, broadcast and client rows for ``rule``."""
    gen = torch.Generator().manual_seed(seed)
    rows = Rows(B, D, dtype, torch.device("cpu"), LAYOUT)
    theta = torch.randn(B, D, generator=gen, dtype=dtype)
    g = torch.randn(B, D, generator=gen, dtype=dtype)
    state = start(rule, rows)

    def fill(st):
        for key, val in list(st.items()):
            if key == "members":
                for member in val:
                    fill(member)
            elif key in ("m", "gx"):
                st[key] = 0.1 * torch.randn(val.shape, generator=gen, dtype=dtype)
            elif key in ("n", "nm"):
                st[key] = torch.randint(0, 6, val.shape, generator=gen).to(dtype)
            elif key != "k":
                st[key] = _positive(gen, val.shape, dtype)
        if "vhat" in st:
            st["vhat"] = torch.maximum(st["vhat"], st["v"])
        if "nm" in st:
            st["nm"] = torch.minimum(st["nm"], st["n"])
        if "mu" in st and st["mu"].shape == st["nu"].shape:    # the full preconditioner:
            st["nu"] = st["mu"].clone()                        # nu = cover_min(mu) = mu
    fill(state)
    state["k"] = torch.tensor([0.0, 1.0, 2.0, 0.0, 4.0], dtype=dtype)
    server = {"theta": torch.randn(R, D, generator=gen, dtype=dtype),
              "ga": torch.randn(R, D, generator=gen, dtype=dtype),
              "c": torch.randn(R, D, generator=gen, dtype=dtype),
              "s_m": 0.1 * torch.randn(R, D, generator=gen, dtype=dtype),
              "s_v": _positive(gen, (R, D), dtype), "s_vhat": _positive(gen, (R, D), dtype),
              "s_n": torch.full((R,), 7.0, dtype=dtype), "s_nm": torch.full((R,), 7.0, dtype=dtype)}
    server["s_vhat"] = torch.maximum(server["s_vhat"], server["s_v"])
    info = StepInfo(state["k"], 3, LAYOUT, EngineView(server, REP),
                    {"c": torch.randn(B, D, generator=gen, dtype=dtype)},
                    torch.tensor([0, 1, 2, 3, 4]),
                    {"anchor_grad": torch.randn(B, D, generator=gen, dtype=dtype)})
    return theta, g, state, info


def clone(x):
    if torch.is_tensor(x):
        return x.clone()
    if isinstance(x, dict):
        return {k: clone(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clone(v) for v in x]
    return x


def assert_close(got, want, dtype, what):
    if isinstance(want, dict):
        assert set(got) >= set(want), what
        for k in want:
            assert_close(got[k], want[k], dtype, f"{what}.{k}")
        return
    if isinstance(want, list):
        for i, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, dtype, f"{what}[{i}]")
        return
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(got, want, **tol, msg=what)


@pytest.fixture(scope="module")
def kernels():
    """The C kernels: skipped where they are turned off, a failure where they do not build."""
    require_native()


def _calls():
    return sum(native.calls.values())


@pytest.mark.parametrize("owned", [False, True], ids=["copied", "owned"])
@pytest.mark.parametrize("mask", [None, "some"], ids=["all-rows", "masked"])
@pytest.mark.parametrize("rate", ["one", "per-row"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fast_step_is_the_rule(kernels, case, dtype, rate, mask, owned):
    name, form, rule = case
    plan = accel.plan(rule, None, "cpu")
    assert plan is not None and plan.name == form and plan.step is not None
    theta, g, state, info = setup(rule, dtype)
    mask_t = None if mask is None else torch.tensor([True, False, True, True, False])
    lr = 0.05 if rate == "one" else torch.linspace(0.01, 0.09, B, dtype=dtype).unsqueeze(-1)
    want = local_step(rule, clone(theta), g, clone(state), lr, mask_t, info)
    given = clone(state)
    before, calls = clone(given), _calls()
    got = plan.step(clone(theta), g, given, lr, mask_t, info, owned)
    assert got is not None, f"{name}: the fast form declined"
    assert _calls() > calls, f"{name}: the kernel was not called"
    assert_close(got[0], want[0], dtype, f"{name}.theta")
    assert_close(got[1], want[1], dtype, f"{name}.state")
    if not owned:                                 # a state it does not own is left alone
        assert_close(given, before, torch.float64, f"{name}: input state")
        for key, val in given.items():
            if torch.is_tensor(val):
                assert torch.equal(val, before[key]), key


@pytest.mark.parametrize("case", DECLINED, ids=[c[0] for c in DECLINED])
def test_rules_without_a_fast_form_take_the_readable_rule(case):
    name, rule = case
    got = accel.plan(rule, None, "cpu")
    assert got is None or got.step is None, name


def test_nothing_is_planned_off_the_cpu_or_when_turned_off():
    rule = CASES[0][2]
    assert accel.plan(rule, None, "meta") is None
    accel.enable(False)
    try:
        assert accel.plan(rule, None, "cpu") is None
        assert accel.executor(None, "cpu") is READABLE
    finally:
        accel.enable(True)


def test_several_steps_in_place_are_the_rule(kernels):
    """A round of steps, the first on state the step does not own and then in place (the
    engine's contract), against the readable rule step by step."""
    for name, form, rule in CASES:
        plan = accel.plan(rule, None, "cpu")
        theta, g, state, info = setup(rule, torch.float64, seed=3)
        fast_theta, fast = clone(theta), clone(state)
        slow_theta, slow = clone(theta), clone(state)
        gen = torch.Generator().manual_seed(4)
        for step in range(4):
            g = torch.randn(B, D, generator=gen, dtype=torch.float64)
            info_f = StepInfo(fast["k"], info.t, LAYOUT, info.bcast, info.cstate, info.clients,
                              info.extra)
            info_s = StepInfo(slow["k"], info.t, LAYOUT, info.bcast, info.cstate, info.clients,
                              info.extra)
            fast_theta, fast = plan.step(fast_theta, g, fast, 0.05, None, info_f, step > 0)
            slow_theta, slow = local_step(rule, slow_theta, g, slow, 0.05, None, info_s)
        assert_close(fast_theta, slow_theta, torch.float64, name)
        assert_close(fast, slow, torch.float64, name)


# ------------------------------------------------------------------------------ SGD rounds

SGD_RULES = {
    "plain": chain(),
    "wd-coupled": chain(AddDecayedWeights(0.02)),
    "prox": chain(Proximal(0.3)),
    "amend": chain(Amend(0.3)),
    "scaffold": chain(ControlVariate(1.5)),
    "prox-amend-wd": chain(AddDecayedWeights(0.02), Proximal(0.3), Amend(0.3)),
    "amend-decoupled": chain(Amend(0.3), AddDecayedWeights(0.02)),
}


@pytest.mark.parametrize("rate", ["one", "per-row"])
@pytest.mark.parametrize("name", sorted(SGD_RULES))
def test_fused_sgd_round_is_the_rule_stepped(name, rate):
    """The whole local round fused with the problem's gradient (uneven clients: a masked
    last step) against the readable rule stepped through ``stoch_grad``."""
    prob = tiny_uneven_problem()
    rule = SGD_RULES[name]
    plan = accel.plan(rule, prob, "cpu")
    assert plan is not None and plan.round is not None
    gen = torch.Generator().manual_seed(5)
    server = torch.randn(2, prob.d, generator=gen, dtype=torch.float64) * 0.3
    rep = torch.tensor([0, 0, 0, 1, 1, 1])
    cli = torch.arange(6)
    bcast = {"theta": server, "ga": torch.randn(2, prob.d, generator=gen, dtype=torch.float64),
             "c": torch.randn(2, prob.d, generator=gen, dtype=torch.float64)}
    view = EngineView(bcast, rep)
    cstate = {"c": torch.randn(6, prob.d, generator=gen, dtype=torch.float64)}
    from sims.core.engine import stack_payloads
    rng = np.random.default_rng(0)
    payload, step_mask = stack_payloads(prob, [prob.plan_client(rng, c) for c in range(6)],
                                         "cpu", torch.float64)
    lr = 0.05 if rate == "one" else torch.linspace(0.01, 0.06, 6,
                                                   dtype=torch.float64).unsqueeze(-1)
    ctx = type("Ctx", (), {"replica": rep, "clients": cli})()
    delta = plan.round(lr, prob, bcast, view, cstate, ctx, payload, step_mask)
    theta = view["theta"].clone()
    state = start(rule, theta)
    for k in range(payload.shape[1]):
        m = step_mask[:, k]
        g = prob.stoch_grad(theta, cli, payload[:, k])
        theta, state = local_step(rule, theta, g, state, lr, None if bool(m.all()) else m,
                                  StepInfo(state["k"], 0, prob.layout, view, cstate, cli))
    torch.testing.assert_close(delta, view["theta"] - theta, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------ TopK in C

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("scope", ["layer", "model"])
def test_topk_and_error_feedback_in_c_are_the_compressor_bit_for_bit(kernels, dtype, scope):
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(B, D, generator=gen, dtype=dtype)
    x[0, :10] = 1.5                                            # ties at the k-th magnitude
    x[1, 5:9] = -2.0
    err = torch.randn(B, D, generator=gen, dtype=dtype)
    zero = torch.tensor([False, True, False, False, True])
    ex = accel.Executor()
    for comp in (TopK(0.1, scope), TopK(0.5, scope)):
        assert torch.equal(ex.compress(comp, x, LAYOUT), comp(x, LAYOUT))
        for z in (None, zero):
            got = ex.error_feedback(comp, x, err.clone(), LAYOUT, zero=z)
            want = error_feedback(comp, x, err.clone(), LAYOUT, zero=z)
            for a, b in zip(got, want):
                assert torch.equal(a, b)
    assert ex.used["topk"] == 2 and ex.used["ef_topk"] == 4
    for comp in (Sign(scope), HeavySign(0.1, scope)):          # no fast form: the readable
        assert torch.equal(ex.compress(comp, x, LAYOUT), comp(x, LAYOUT))


# ------------------------------------------------------------------------------ whole runs

@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_engine_runs_with_the_fast_forms_equal_the_readable_runs(name):
    """Every registry algorithm, float64, uneven clients (masked steps), two seeds: the run
    with every fast form (the forms it took listed) equals the readable run."""
    prob = tiny_uneven_problem()
    part = Participation("fixed", m=4)
    alg = make_for_problem(name, prob)
    fast = run(prob, alg, part, 3, [0, 1], eval_test=False)
    accel.enable(False)
    try:
        slow = run(prob, make_for_problem(name, prob), part, 3, [0, 1], eval_test=False)
    finally:
        accel.enable(True)
    assert slow.forms == {}
    if native.library() is not None:
        assert fast.forms, f"{name}: no fast form taken"
    torch.testing.assert_close(fast.server["theta"], slow.server["theta"], rtol=1e-10,
                               atol=1e-12)
    for key, val in slow.client_state.items():
        torch.testing.assert_close(fast.client_state[key], val, rtol=1e-10, atol=1e-12)

"""FedAda2's fast client steps (issue 16) equal the readable rule
(``JointAdaptive.reference_local_step``, ``FedAda2Blend.reference_local_step``) in float64:
the SM3-II step in one C pass (``JointAdaptive._native_rows_step``, :mod:`sims.accel.native.sm3`)
and through torch's fused kernels on row lists (``JointAdaptive._kernel_rows_step``: the
cover's ``cover_min`` into the kernel's ``v``, ``cover_max`` after), every test with the C
kernel on and off (the autouse ``sm3_kernel`` fixture), each checking which kernel ran
(``sims.accel.native.calls``, ``sims.torch_fused.calls``): matrix, 3-axis and vector layers,
AdaGrad and Adam accumulators (bias correction on and off, DJA's server init with its two
counts, eps values), the full preconditioner (the C kernel too where it is on: more in
``tests/test_fedada2_full_native.py``), rows at different
step counts, a subset of rows (masked rows, owned and not), a round's first step (inputs not
owned: left alone) and later ones (owned: in place); FedAda2-blend with mixed and uniform
strategies, step budgets, masks and a member that must gather its rows; whole engine runs
with the kernels on, off and the readable rule; the priority of the C, torch and compiled
kernels; a broken torch kernel; the C kernels turned off."""
from __future__ import annotations

import warnings

import pytest
import torch

from sims import compiled, torch_fused
from sims.core import engine
from sims.accel import native
from sims.rules import optim
from sims.algorithms.fedada2 import FedAda2Blend, JointAdaptive
from sims.algorithms.registry import make_algorithm, make_for_problem
from sims.problems.models import MLP
from sims.core.params import ParamLayout
from sims.core.participation import Participation

from fedada2_clients import B, TOL
from fedada2_clients import assert_states as _assert_states
from fedada2_clients import client_ctx as _ctx
from fedada2_clients import client_start as _client_start
from fedada2_clients import kernel_calls, steps_against_reference
from conftest import require_native

LAYOUTS = {
    "mlp": ParamLayout.from_module(MLP(6, 5, 3)),                  # matrices and biases
    "tensor": ParamLayout(("w", "b", "s"), ((3, 4, 2), (4,), (1, 5))),   # 3 axes, a 1 x n
    "vector": ParamLayout.single(7),                               # one full accumulator
}

CLIENTS = [("fedada2", {}), ("fedada2-adam", {}), ("fedada2-adam", {"bias_correction": False}),
           ("fedada2", {"init": "server"}), ("fedada2-adam", {"client": "adagrad"}),
           ("fedada2", {"client": "adam", "server": "adam"}),
           ("fedada2", {"eps": 1e-8}), ("fedada2-adam", {"eps": 0.3, "beta2": 0.9}),
           ("joint-adaptive", {}), ("fedadaadam", {})]
#: clients torch's kernels do not take (DJA's Adam debiases m and nu by two counts): the C
#: kernel, else the eager form
C_ONLY = [("fedada2-adam", {"init": "server", "server": "adam"}),
          ("fedada2-adam", {"init": "server", "server": "adam", "beta1": 0.0}),
          ("fedadaadam", {"init": "server"})]
FULL = {"joint-adaptive", "fedadaadam"}             # full preconditioner


# every test with torch's kernels on and the compiled form off, both restored after
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


@pytest.fixture(autouse=True, params=["native", "torch"])
def sm3_kernel(request, monkeypatch):
    """Every test twice: the SM3-II step through the C kernel (:mod:`sims.accel.native.sm3`; it
    must be built here) and with it off (torch's kernels, else the eager forms). Returns
    the name."""
    on = request.param == "native"
    monkeypatch.setattr(JointAdaptive, "native_step", on)
    if on:
        require_native()
    return request.param


def _ran(before, sm3_kernel, sm3: bool, steps: int, torch_rule: bool = True):
    """Checks the kernel calls since ``before`` (:func:`kernel_calls`): ``steps`` through the
    C kernel for a client of its rule (``sm3``: SM3-II or, since it takes it too, the full
    preconditioner) with it on, else ``steps`` through torch's (none where its rule does not
    hold: ``torch_rule`` False)."""
    t, n = (a - b for a, b in zip(kernel_calls(), before))
    c = sm3 and sm3_kernel == "native"
    assert (n, t) == ((steps, 0) if c else (0, steps if torch_rule else 0))


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
@pytest.mark.parametrize("name,hyper", CLIENTS + C_ONLY)
def test_client_step_equals_reference(layout, name, hyper, sm3_kernel):
    """Three steps of ``local_step`` (the kernels, every row) against the readable rule: the
    first not owned (inputs left as they were), the later ones in place."""
    layout = LAYOUTS[layout]
    alg = make_algorithm(name, **hyper)
    before = kernel_calls()
    steps_against_reference(alg, layout, torch.Generator().manual_seed(len(name)),
                            grads=torch.Generator().manual_seed(1))
    _ran(before, sm3_kernel, True, 3, (name, hyper) not in C_ONLY)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["fedada2", "fedada2-adam"])
def test_client_step_in_float32_is_the_rule_up_to_rounding(name, dtype, sm3_kernel):
    """The benchmark's type: five steps from zero state (the first not owned) against the
    readable rule in the same type, to its rounding; the kernel named by the fixture ran."""
    layout = LAYOUTS["mlp"]
    alg = make_algorithm(name)
    gen = torch.Generator().manual_seed(21)
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64).to(dtype)
    bcast = {"theta": theta}
    st_f = st_r = alg.local_start(bcast, {}, _ctx(layout, False))
    th_f = th_r = theta
    before = kernel_calls()
    for step in range(5):
        g = torch.randn(B, layout.d, generator=gen, dtype=torch.float64).to(dtype)
        th_f, st_f = alg.local_step(th_f, g, st_f, bcast, {}, None, _ctx(layout, step > 0))
        th_r, st_r = alg.reference_local_step(th_r, g, st_r, bcast, {}, None,
                                              _ctx(layout, step > 0))
    tol = {} if dtype == torch.float32 else TOL
    torch.testing.assert_close(th_f, th_r, **tol)
    for key in st_r:
        torch.testing.assert_close(st_f[key], st_r[key], **tol)
    _ran(before, sm3_kernel, True, 5)


def _subset_against_reference(alg, layout, rows_step, owned, seed=7):
    """``rows_step(theta, g, st, rows, owned, ctx)`` (a rows form, in place on ``theta``) on
    rows 0, 2, 3 (row 1 masked out: untouched in ``theta`` and every state tensor) against
    the readable rule under that mask; the inputs left alone where not owned."""
    theta, bcast, st = _client_start(alg, layout, torch.Generator().manual_seed(seed))
    g = torch.randn(B, layout.d, generator=torch.Generator().manual_seed(seed + 1),
                    dtype=torch.float64)
    mask = torch.tensor([True, False, True, True])
    ctx = _ctx(layout, owned)
    th_r, st_r = alg.reference_local_step(theta, g, st, bcast, {}, mask, ctx)
    kept = {k: v.clone() for k, v in st.items()}
    th_f = theta.clone()
    st_f = rows_step(th_f, g, st, mask.nonzero().squeeze(-1), owned, ctx)
    torch.testing.assert_close(th_f, th_r, **TOL)
    assert torch.equal(th_f[1], theta[1])
    _assert_states(st_f, st_r)
    for key in st_f:
        assert torch.equal(st_f[key][1], kept[key][1])
    if not owned:
        assert all(torch.equal(st[k], kept[k]) for k in st)


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("layout", ["mlp", "tensor"])
@pytest.mark.parametrize("name,hyper", CLIENTS + [("fedada2", {"client": "sgd"})])
def test_rows_step_on_a_subset_equals_masked_reference(layout, name, hyper, owned,
                                                       sm3_kernel):
    """``_kernel_rows_step`` (torch's kernels) on a subset of rows."""
    alg = make_algorithm(name, **hyper)
    before = kernel_calls()
    _subset_against_reference(alg, LAYOUTS[layout], alg._kernel_rows_step, owned)
    assert kernel_calls()[1] == before[1]                  # never the C kernel


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("layout", ["mlp", "tensor", "vector"])
@pytest.mark.parametrize("name,hyper", CLIENTS + C_ONLY)
def test_native_rows_step_on_a_subset_equals_masked_reference(layout, name, hyper, owned,
                                                              sm3_kernel):
    """``_native_rows_step`` (the C kernel) on a subset of rows; with the kernel off (the
    ``torch`` run) it declines (None) and writes nothing."""
    alg = make_algorithm(name, **hyper)
    layout = LAYOUTS[layout]
    before = kernel_calls()
    if sm3_kernel == "native":
        _subset_against_reference(alg, layout, alg._native_rows_step, owned)
        assert kernel_calls()[1] == before[1] + 1
        return
    theta, bcast, st = _client_start(alg, layout, torch.Generator().manual_seed(7))
    kept = theta.clone(), {k: v.clone() for k, v in st.items()}
    assert alg._native_rows_step(theta, theta, st, None, True, _ctx(layout, True)) is None
    assert torch.equal(theta, kept[0]) and all(torch.equal(st[k], kept[1][k]) for k in st)


@pytest.mark.parametrize("owned", [False, True])
def test_masked_step_equals_reference(owned, sm3_kernel):
    """A mask on a FedAda2 client (not the blend): the C kernel on the mask's rows (into a
    copy of ``theta`` where not owned), else the eager SM3 form (no torch kernel call); the
    readable rule's result, the masked rows left as they were."""
    layout = LAYOUTS["mlp"]
    for name in ("fedada2", "fedada2-adam"):
        alg = make_algorithm(name)
        theta, bcast, st = _client_start(alg, layout, torch.Generator().manual_seed(3))
        g = torch.randn(B, layout.d, generator=torch.Generator().manual_seed(4),
                        dtype=torch.float64)
        mask = torch.tensor([True, False, True, False])
        kept = theta.clone(), {k: v.clone() for k, v in st.items()}
        before = kernel_calls()
        th_f, st_f = alg.local_step(theta, g, st, bcast, {}, mask, _ctx(layout, owned))
        _ran(before, sm3_kernel, True, 1, torch_rule=False)
        if not owned:
            assert torch.equal(theta, kept[0])
            assert all(torch.equal(st[k], kept[1][k]) for k in st)
        th_r, st_r = alg.reference_local_step(kept[0], g, kept[1], bcast, {}, mask,
                                              _ctx(layout, False))
        torch.testing.assert_close(th_f, th_r, **TOL)
        assert torch.equal(th_f[1], kept[0][1]) and torch.equal(th_f[3], kept[0][3])
        _assert_states(st_f, st_r)


# ------------------------------------------------------------------------------ blend

def _no_gather(monkeypatch):
    """Members' own ``local_step`` (the gathered-rows form) raises: the rows are stepped in
    place through ``_kernel_rows_step``."""
    def gathered(*args, **kw):
        raise AssertionError("a member's rows were gathered")
    monkeypatch.setattr(JointAdaptive, "local_step", gathered)


def _blend_run(alg, layout, clients, masks, gen):
    """Steps of ``alg.local_step`` and of the readable form from ``local_start`` (the first
    not owned), one mask per step; checks ``theta`` and every member's state each step."""
    n = len(clients)
    theta = torch.randn(n, layout.d, generator=gen, dtype=torch.float64)
    bcast = {"theta": theta}
    st_f = st_r = alg.local_start(bcast, {}, _ctx(layout, False, n, clients))
    th_f = th_r = theta
    kept = theta.clone()
    for step, mask in enumerate(masks):
        g = torch.randn(n, layout.d, generator=gen, dtype=torch.float64)
        ctx = _ctx(layout, step > 0, n, clients)
        th_f, st_f = alg.local_step(th_f, g, st_f, bcast, {}, mask, ctx)
        if step == 0:
            assert torch.equal(theta, kept)
        th_r, st_r = FedAda2Blend.reference_local_step(alg, th_r, g, st_r, bcast, {}, mask, ctx)
        torch.testing.assert_close(th_f, th_r, **TOL)
        torch.testing.assert_close(st_f["k"], st_r["k"], **TOL)
        for mf, mr in zip(st_f["members"], st_r["members"]):
            _assert_states(mf, mr)
    assert not torch.equal(th_f, theta)


@pytest.mark.parametrize("strategies,steps", [
    ("sm3-adagrad,sm3-adam,sgd", None),                            # the registry default
    ("adagrad,adam,sm3-adam,sgd,sm3-adagrad", "2,5,3,1,4"),       # step budgets
])
def test_blend_mixed_strategies_equal_reference(monkeypatch, strategies, steps, sm3_kernel):
    """The adaptive members (SM3-II and full) through the C kernel where it is on (torch's
    kernels otherwise), each on its own rows in place."""
    layout = LAYOUTS["mlp"]
    alg = FedAda2Blend(eta=0.05, strategies=strategies, steps=steps)
    _no_gather(monkeypatch)
    clients = torch.tensor([4, 0, 7, 2, 9, 5, 1, 3, 8])
    masks = [None, None, None, torch.tensor([True] * 6 + [False] * 3), None,
             torch.tensor([False, True] * 4 + [True])]
    before = kernel_calls()
    _blend_run(alg, layout, clients, masks, torch.Generator().manual_seed(5))
    t, n = (a - b for a, b in zip(kernel_calls(), before))
    assert (n > 0) == (sm3_kernel == "native")
    assert (t > 0) == (sm3_kernel == "torch")


@pytest.mark.parametrize("strategies", ["sm3-adagrad,sm3-adam,sgd", "sm3-adam", "sgd,adam"])
def test_blend_uniform_strategy_equals_reference(monkeypatch, strategies, sm3_kernel):
    """Every participant on one strategy (clients 0, 3, 6, 9 with three strategies; or one
    strategy): the member's whole-tensor form, no rows gathered."""
    layout = LAYOUTS["tensor"]
    alg = FedAda2Blend(eta=0.05, strategies=strategies)
    _no_gather(monkeypatch)
    clients = torch.tensor([0, 3, 6, 9]) if "," in strategies else torch.arange(4)
    if strategies == "sgd,adam":
        clients = torch.tensor([1, 3, 5, 7])                       # all on adam
    before = kernel_calls()
    _blend_run(alg, layout, clients, [None, None, torch.tensor([True, False, True, True])],
               torch.Generator().manual_seed(6))
    _ran(before, sm3_kernel, True, 3)      # one member, 3 steps


def test_blend_member_outside_the_kernels_gathers_its_rows():
    """An SM3-I member (not a kernel's rule) is handed its rows gathered beside in-place
    members, and the whole equals the readable form."""
    alg = FedAda2Blend(eta=0.05, strategies="sm3i-adam,sm3-adam,sgd", steps="3,4,2")
    calls = []
    member = alg.members[0]
    orig = member.local_step
    member.local_step = lambda *a, **kw: calls.append(1) or orig(*a, **kw)
    _blend_run(alg, LAYOUTS["mlp"], torch.tensor([0, 1, 2, 3, 4, 5]),
               [None, None, torch.tensor([True, True, False, True, True, True]), None],
               torch.Generator().manual_seed(7))
    assert len(calls) == 3                      # steps 1-3 (budget 3); its rows only


def test_blend_with_a_broken_kernel_falls_back(monkeypatch, sm3_kernel):
    """A torch kernel that fails its probe is found before anything is written: the members
    it would step then take the gathered eager form, and the result is still the readable
    one. With the C kernel on, it takes every adaptive member (SM3-II and full: 3 members x
    3 steps) and torch's Adam kernel is never probed."""
    monkeypatch.setattr(torch, "_fused_adam_", lambda *a, **kw: None)
    alg = FedAda2Blend(eta=0.05, strategies="sm3-adagrad,sm3-adam,adam,sgd")
    before = kernel_calls()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _blend_run(alg, LAYOUTS["mlp"], torch.arange(8), [None, None, None],
                   torch.Generator().manual_seed(8))
    assert torch_fused.enabled() == (sm3_kernel == "native")
    assert kernel_calls()[1] - before[1] == (9 if sm3_kernel == "native" else 0)


# ------------------------------------------------------------------------------ priority

def test_torch_kernels_go_before_the_compiled_sm3_kernel(monkeypatch, sm3_kernel):
    """With the C kernel off and the compiled form on, SM3-II steps still take torch's
    kernels first (measured faster, README "Every algorithm"), in FedAda2 and in the blend;
    with torch's kernels off they take the compiled kernel (here a stand-in returning the
    eager form, so nothing compiles). Both equal the readable rule. (With the C kernel on:
    :func:`test_the_c_kernel_goes_first`.)"""
    if sm3_kernel == "native":
        pytest.skip("the priority with the C kernel off")
    compiled.enable(True)
    seen = []

    def stand_in(cover, theta, g, mu, lr, eps, m=None, beta1=0.9, beta2=0.999, c1=None,
                 c2=None):
        seen.append(len(theta))
        if m is None:
            return optim.sm3_adagrad_step(cover, theta, g, mu, lr, eps, True)
        th, m, mu, nu = optim.sm3_adam_step(cover, theta, g, m, mu, lr, eps, True, beta1,
                                            beta2, c1, c2)
        return th, mu, nu, m
    monkeypatch.setattr(compiled, "fused_sm3_step", stand_in)
    layout = LAYOUTS["mlp"]
    gen = torch.Generator().manual_seed(9)
    for kernels in (True, False):
        torch_fused.enable(kernels)
        for name in ("fedada2", "fedada2-adam"):
            alg = make_algorithm(name)
            theta, bcast, st = _client_start(alg, layout, gen)
            g = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
            before, n_seen = sum(torch_fused.calls.values()), len(seen)
            th_f, st_f = alg.local_step(theta, g, st, bcast, {}, None, _ctx(layout, False))
            assert (sum(torch_fused.calls.values()) > before) == kernels
            assert (len(seen) > n_seen) == (not kernels)
            th_r, st_r = alg.reference_local_step(theta, g, st, bcast, {}, None,
                                                  _ctx(layout, False))
            torch.testing.assert_close(th_f, th_r, **TOL)
    torch_fused.enable(True)
    seen.clear()
    alg = FedAda2Blend(eta=0.05, strategies="sm3-adagrad,sm3-adam,adam")
    before = sum(torch_fused.calls.values())
    _blend_run(alg, layout, torch.arange(6), [None, None], torch.Generator().manual_seed(10))
    assert seen == []                                   # no member took the compiled kernel
    assert sum(torch_fused.calls.values()) - before == 6   # 3 members x 2 steps, in place


def test_the_c_kernel_goes_first(monkeypatch, sm3_kernel):
    """With torch's kernels and the compiled form on, the SM3-II step takes the C kernel
    (nothing else is called), alone and in the blend; turned off for the process
    (``sims.accel.native.enable(False)``, as ``FEDTOOLKIT_NATIVE=0``) it takes torch's kernels.
    Both equal the readable rule."""
    if sm3_kernel == "torch":
        pytest.skip("the priority with the C kernel on")
    compiled.enable(True)
    monkeypatch.setattr(compiled, "fused_sm3_step", lambda *a, **kw: pytest.fail("compiled"))
    layout = LAYOUTS["mlp"]
    try:
        for on in (True, False):
            native.enable(on)
            for name in ("fedada2", "fedada2-adam"):
                before = kernel_calls()
                steps_against_reference(make_algorithm(name), layout,
                                        torch.Generator().manual_seed(12), steps=2)
                _ran(before, "native" if on else "torch", True, 2)
            before = kernel_calls()
            _blend_run(FedAda2Blend(eta=0.05, strategies="sm3-adagrad,sm3-adam,sgd"), layout,
                       torch.arange(6), [None, None], torch.Generator().manual_seed(13))
            _ran(before, "native" if on else "torch", True, 4)   # 2 members x 2 steps
    finally:
        native.enable(True)


# ------------------------------------------------------------------------------ engine

@pytest.mark.parametrize("name", ["fedada2", "fedada2-adam", "fedada2-blend"])
def test_engine_kernels_on_off_and_reference_agree(mlp_problem, monkeypatch, name,
                                                    sm3_kernel):
    """Whole runs (two replicas, unequal clients: masked last steps; first steps in place,
    ``tests/test_ownership.py``) with the kernels on (the C kernel where the fixture says,
    else torch's), off (the eager forms) and with the readable local rule: the same
    trajectory."""
    out = {}
    for form in ("kernels", "eager", "reference"):
        torch_fused.enable(form == "kernels")
        monkeypatch.setattr(JointAdaptive, "native_step",
                            form == "kernels" and sm3_kernel == "native")
        alg = make_for_problem(name, mlp_problem)
        if form == "reference":
            monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        before = kernel_calls()
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=4), 3, [0, 1],
                               eval_every=0).server["theta"]
        t, n = (a - b for a, b in zip(kernel_calls(), before))
        on = form == "kernels"
        assert (n > 0) == (on and sm3_kernel == "native")
        assert (t > 0) == (on and sm3_kernel == "torch")   # the blend's SGD: no counted call
    assert not torch.equal(out["kernels"], mlp_problem.init_theta(0).unsqueeze(0))
    torch.testing.assert_close(out["kernels"], out["reference"], **TOL)
    torch.testing.assert_close(out["eager"], out["reference"], **TOL)

"""FedAda2's client steps through torch's fused kernels on row lists (issue 16) equal the
readable rule (``JointAdaptive.reference_local_step``, ``FedAda2Blend.reference_local_step``)
in float64: ``JointAdaptive._kernel_rows_step`` with the SM3-II cover (``cover_min`` into the
kernel's ``v``, ``cover_max`` after) on matrix, 3-axis and vector layers, AdaGrad and Adam
accumulators (bias correction on and off, DJA's server init), the full preconditioner, rows at
different step counts, a subset of rows (masked rows), a round's first step (inputs not owned:
left alone) and later ones (owned: in place); FedAda2-blend with mixed and uniform strategies,
step budgets, masks and a member that must gather its rows; whole engine runs with the
kernels on, off and the readable rule; the compiled kernel's priority; a broken kernel."""
from __future__ import annotations

import warnings

import pytest
import torch

from sims import compiled, engine, optim, torch_fused
from sims.algorithms.fedada2 import FedAda2Blend, JointAdaptive
from sims.algorithms.registry import make_algorithm, make_for_problem
from sims.models import MLP
from sims.params import ParamLayout
from sims.participation import Participation

from fedada2_clients import B, TOL
from fedada2_clients import assert_states as _assert_states
from fedada2_clients import client_ctx as _ctx
from fedada2_clients import client_start as _client_start
from fedada2_clients import steps_against_reference

LAYOUTS = {
    "mlp": ParamLayout.from_module(MLP(6, 5, 3)),                  # matrices and biases
    "tensor": ParamLayout(("w", "b", "s"), ((3, 4, 2), (4,), (1, 5))),   # 3 axes, a 1 x n
    "vector": ParamLayout.single(7),                               # one full accumulator
}

CLIENTS = [("fedada2", {}), ("fedada2-adam", {}), ("fedada2-adam", {"bias_correction": False}),
           ("fedada2", {"init": "server"}), ("fedada2-adam", {"client": "adagrad"}),
           ("fedada2", {"client": "adam", "server": "adam"}),
           ("joint-adaptive", {}), ("fedadaadam", {})]


# every test with torch's kernels on and the compiled form off, both restored after
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
@pytest.mark.parametrize("name,hyper", CLIENTS)
def test_client_step_equals_reference(layout, name, hyper):
    """Three steps of ``local_step`` (the kernels, every row) against the readable rule: the
    first not owned (inputs left as they were), the later ones in place."""
    layout = LAYOUTS[layout]
    alg = make_algorithm(name, **hyper)
    assert steps_against_reference(alg, layout, torch.Generator().manual_seed(len(name)),
                                   grads=torch.Generator().manual_seed(1)) == 3


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("layout", ["mlp", "tensor"])
@pytest.mark.parametrize("name,hyper", CLIENTS + [("fedada2", {"client": "sgd"})])
def test_rows_step_on_a_subset_equals_masked_reference(layout, name, hyper, owned):
    """``_kernel_rows_step`` on rows 0, 2, 3 (row 1 masked out: untouched in ``theta`` and
    every state tensor) against the readable rule under that mask."""
    layout = LAYOUTS[layout]
    alg = make_algorithm(name, **hyper)
    theta, bcast, st = _client_start(alg, layout, torch.Generator().manual_seed(7))
    g = torch.randn(B, layout.d, generator=torch.Generator().manual_seed(8),
                    dtype=torch.float64)
    mask = torch.tensor([True, False, True, True])
    ctx = _ctx(layout, owned)
    th_r, st_r = alg.reference_local_step(theta, g, st, bcast, {}, mask, ctx)
    kept = {k: v.clone() for k, v in st.items()}
    th_f = theta.clone()
    st_f = alg._kernel_rows_step(th_f, g, st, mask.nonzero().squeeze(-1), owned, ctx)
    torch.testing.assert_close(th_f, th_r, **TOL)
    assert torch.equal(th_f[1], theta[1])
    _assert_states(st_f, st_r)
    for key in st_f:
        assert torch.equal(st_f[key][1], kept[key][1])
    if not owned:
        assert all(torch.equal(st[k], kept[k]) for k in st)


def test_masked_step_takes_the_eager_form_and_equals_reference():
    """A mask on a FedAda2 client (not the blend) takes the eager SM3 form: no kernel call,
    the readable rule's result."""
    layout = LAYOUTS["mlp"]
    for name in ("fedada2", "fedada2-adam"):
        alg = make_algorithm(name)
        theta, bcast, st = _client_start(alg, layout, torch.Generator().manual_seed(3))
        g = torch.randn(B, layout.d, generator=torch.Generator().manual_seed(4),
                        dtype=torch.float64)
        mask = torch.tensor([True, False, True, False])
        before = sum(torch_fused.calls.values())
        th_f, st_f = alg.local_step(theta, g, st, bcast, {}, mask, _ctx(layout, True))
        assert sum(torch_fused.calls.values()) == before
        th_r, st_r = alg.reference_local_step(theta, g, st, bcast, {}, mask, _ctx(layout, True))
        torch.testing.assert_close(th_f, th_r, **TOL)
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
def test_blend_mixed_strategies_equal_reference(monkeypatch, strategies, steps):
    layout = LAYOUTS["mlp"]
    alg = FedAda2Blend(eta=0.05, strategies=strategies, steps=steps)
    _no_gather(monkeypatch)
    clients = torch.tensor([4, 0, 7, 2, 9, 5, 1, 3, 8])
    masks = [None, None, None, torch.tensor([True] * 6 + [False] * 3), None,
             torch.tensor([False, True] * 4 + [True])]
    before = sum(torch_fused.calls.values())
    _blend_run(alg, layout, clients, masks, torch.Generator().manual_seed(5))
    assert sum(torch_fused.calls.values()) > before


@pytest.mark.parametrize("strategies", ["sm3-adagrad,sm3-adam,sgd", "sm3-adam", "sgd,adam"])
def test_blend_uniform_strategy_equals_reference(monkeypatch, strategies):
    """Every participant on one strategy (clients 0, 3, 6, 9 with three strategies; or one
    strategy): the member's whole-tensor form, no rows gathered."""
    layout = LAYOUTS["tensor"]
    alg = FedAda2Blend(eta=0.05, strategies=strategies)
    _no_gather(monkeypatch)
    clients = torch.tensor([0, 3, 6, 9]) if "," in strategies else torch.arange(4)
    if strategies == "sgd,adam":
        clients = torch.tensor([1, 3, 5, 7])                       # all on adam
    _blend_run(alg, layout, clients, [None, None, torch.tensor([True, False, True, True])],
               torch.Generator().manual_seed(6))


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


def test_blend_with_a_broken_kernel_falls_back(monkeypatch):
    """A kernel that fails its probe is found before anything is written: the members then
    take the gathered eager form, and the result is still the readable one."""
    monkeypatch.setattr(torch, "_fused_adam_", lambda *a, **kw: None)
    alg = FedAda2Blend(eta=0.05, strategies="sm3-adagrad,sm3-adam,sgd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _blend_run(alg, LAYOUTS["mlp"], torch.arange(6), [None, None, None],
                   torch.Generator().manual_seed(8))
    assert not torch_fused.enabled()


# ------------------------------------------------------------------------------ priority

def test_torch_kernels_go_before_the_compiled_sm3_kernel(monkeypatch):
    """With the compiled form on, SM3-II steps still take torch's kernels first (measured
    faster, README "Every algorithm"), in FedAda2 and in the blend; with torch's kernels off
    they take the compiled kernel (here a stand-in returning the eager form, so nothing
    compiles). Both equal the readable rule."""
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


# ------------------------------------------------------------------------------ engine

@pytest.mark.parametrize("name", ["fedada2", "fedada2-adam", "fedada2-blend"])
def test_engine_kernels_on_off_and_reference_agree(mlp_problem, monkeypatch, name):
    """Whole runs (two replicas, unequal clients: masked last steps; first steps in place,
    ``tests/test_ownership.py``) with the kernels on, off (the eager forms) and with the
    readable local rule: the same trajectory."""
    out = {}
    for form in ("kernels", "eager", "reference"):
        torch_fused.enable(form == "kernels")
        alg = make_for_problem(name, mlp_problem)
        if form == "reference":
            monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        before = sum(torch_fused.calls.values())
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=4), 3, [0, 1],
                               eval_every=0).server["theta"]
        assert (sum(torch_fused.calls.values()) > before) == (form == "kernels")
    assert not torch.equal(out["kernels"], mlp_problem.init_theta(0).unsqueeze(0))
    torch.testing.assert_close(out["kernels"], out["reference"], **TOL)
    torch.testing.assert_close(out["eager"], out["reference"], **TOL)

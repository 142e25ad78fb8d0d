"""The eager fast form of MimeLite / Mime's frozen local step (issue 16) equals the readable
rule in float64.

``MimeLite._frozen_step_fast`` forms ``b2 v + eps`` and ``vhat + eps`` of the broadcast
(frozen) server state once and takes each step in 5 passes over ``[B, d]`` (Mime: 7); the
readable rule is ``MimeLite._frozen_step_reference`` (the base rule's direction through
``_advance``) and, written out here, ``AdaptiveRule.reference_direction``. Covered: the AMSGrad
and Adam bases (SGD with momentum stays on the readable rule), MimeLite, Mime (SVRG
correction), their LAMB variants, masked and unmasked steps, per-row rates, several steps in a
row with the in-place (owned) update, one block of rows or several (the fast form runs
its passes on row blocks), the per-broadcast cache (never stale across rounds,
replicas, in-place changes or constants; dropped when pickled), and whole engine runs with
the fast form on and off.
"""
from __future__ import annotations

import copy
import itertools
import pickle
import zlib

import pytest
import torch

from conftest import tiny_uneven_problem
from sims import compiled, engine
from sims.algorithms.base import RoundContext
from sims.algorithms.fed_lamb import Mime, MimeLAMB, MimeLite, MimeLiteLAMB
from sims.algorithms.registry import make_for_problem
from sims.models import MLP
from sims.params import ParamLayout
from sims.participation import Participation

B = 4
CLASSES = {("lite", False): MimeLite, ("lite", True): MimeLiteLAMB,
           ("mime", False): Mime, ("mime", True): MimeLAMB}
MASK = torch.tensor([True, False, True, True])
TOL = {"rtol": 1e-12, "atol": 1e-12}


@pytest.fixture(autouse=True)
def eager_only():
    """The compiled form (opt-in, ``FEDTOOLKIT_COMPILE``) goes first where it is on: off here."""
    was = compiled.enabled()
    compiled.enable(False)
    yield
    compiled.enable(was)


def _layout():
    return ParamLayout.from_module(MLP(4, 5, 3))          # d = 43, four layers


def _rand(gen, d, scale=1.0):
    return torch.randn(B, d, generator=gen, dtype=torch.float64) * scale


def _bcast(alg, gen, d):
    """A broadcast gathered per participant (rows of two replicas with different states), the
    server state advanced a few times from its start so ``m, v, vhat`` are all nonzero and
    ``vhat > v`` in some coordinates."""
    theta = _rand(gen, d)
    server = alg.init_server(theta[:2])
    for _ in range(3):
        server = {**server, **alg._server_update(server, torch.zeros_like(server["theta"]),
                                                 _rand(gen, d)[:2] * 0.3,
                                                 torch.ones(2, dtype=torch.bool))}
    if isinstance(alg, Mime):
        server = alg.round_gradient(server, _rand(gen, d)[:2] * 0.2,
                                    torch.ones(2, dtype=torch.bool))
    rep = torch.tensor([0, 1, 1, 0])
    return {k: v[rep] for k, v in alg.broadcast(server).items()}


def _ctx(layout, owned=False):
    ctx = RoundContext(1, layout, torch.tensor([0, 1, 1, 0]), torch.arange(B),
                       torch.full((B,), -1))
    ctx.extra["owned_state"] = owned
    return ctx


def _rows_per_block(alg, rows, d):
    """Row blocks of ``rows`` rows (None: the default size, here one block)."""
    if rows is not None:
        alg.frozen_block_bytes = rows * d * 8               # float64 rows
    return alg


def _written_out(alg, theta, g, bcast, mask, lr, layout, anchor=None, c=None):
    """``theta - lr U(g; s)`` from ``AdaptiveRule.reference_direction`` (the rule as written in
    its docstring), not through any fast form."""
    if anchor is not None:
        g = g - anchor + c
    s = {k[2:]: v for k, v in bcast.items() if k.startswith("s_")}
    u, _ = alg.base_rule.reference_direction(g, s)
    step = alg.trust(theta, u, layout) if alg.trust is not None else u
    new = theta - lr * step
    return new if mask is None else torch.where(mask.unsqueeze(-1), new, theta)


@pytest.mark.parametrize("base,kind,lamb,masked,rows", list(itertools.product(
    ["amsgrad", "adam"], ["lite", "mime"], [False, True], [False, True], [None, 3])))
def test_fast_frozen_step_equals_readable_rule(base, kind, lamb, masked, rows, monkeypatch):
    """Several local steps through ``_frozen_step`` (the fast form, in place from the second
    step on; one block of rows, or blocks of 3 rows and 1) against ``_frozen_step_reference``
    and the written-out rule, both on their own copies; the fast form must be the one
    taken."""
    layout = _layout()
    alg = _rows_per_block(CLASSES[(kind, lamb)](eta_l=0.05, base=base,
                                                lam=0.01 if lamb else 0.0), rows, layout.d)
    assert alg._frozen_fast_ok()
    taken = []
    fast = alg._frozen_step_fast
    monkeypatch.setattr(alg, "_frozen_step_fast", lambda *a, **k: taken.append(1) or fast(*a, **k))
    gen = torch.Generator().manual_seed(zlib.crc32(f"{base}{kind}{lamb}{masked}".encode()))
    bcast = _bcast(alg, gen, layout.d)
    frozen = {k: v.clone() for k, v in bcast.items()}
    theta0 = _rand(gen, layout.d)
    th_f, th_r = theta0.clone(), theta0.clone()
    mask = MASK if masked else None
    for step in range(4):
        g = _rand(gen, layout.d)
        extra = (_rand(gen, layout.d), bcast["c"]) if kind == "mime" else (None, None)
        want = alg._frozen_step_reference(th_r, g.clone(), bcast, mask, 0.05, layout, *extra)
        written = _written_out(alg, th_r, g, bcast, mask, 0.05, layout, *extra)
        torch.testing.assert_close(want, written, **TOL)
        g_before = g.clone()
        got = alg._frozen_step(th_f, g, bcast, mask, _ctx(layout, owned=step > 0), *extra)
        assert torch.equal(g, g_before)                     # the gradient is not written
        torch.testing.assert_close(got, want, **TOL)
        if masked:                                          # masked rows keep theta exactly
            assert torch.equal(got[~mask], th_f[~mask])
        th_f, th_r = got, want
    assert len(taken) == 4
    assert not torch.equal(th_f, theta0)
    for k, v in frozen.items():                             # the server state stays frozen
        assert torch.equal(bcast[k], v), k


@pytest.mark.parametrize("kind,lamb,rows", list(itertools.product(["lite", "mime"],
                                                                  [False, True], [None, 1, 3])))
def test_fast_frozen_step_per_row_rate(kind, lamb, rows):
    """A rate per row (``[B, 1]``, a per-replica ``eta_l``), in place and not, masked and not,
    in one block of rows or several (each block takes its own rows' rates)."""
    layout = _layout()
    alg = _rows_per_block(CLASSES[(kind, lamb)](eta_l=0.05), rows, layout.d)
    gen = torch.Generator().manual_seed(11)
    bcast = _bcast(alg, gen, layout.d)
    lr = torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)
    for owned, mask in ((False, None), (True, None), (False, MASK), (True, MASK)):
        theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
        extra = (_rand(gen, layout.d), bcast["c"]) if kind == "mime" else (None, None)
        want = _written_out(alg, theta, g, bcast, mask, lr, layout, *extra)
        got = alg._frozen_step_fast(theta.clone(), g, bcast, mask, lr, layout, *extra,
                                    owned=owned)
        torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("phi,lam", [("clip", 0.0), ("clip", 0.1), ("identity", 0.1),
                                     ("update_norm", 0.0)])
def test_trust_step_in_place_equals_new(phi, lam):
    """``trust_step(..., out=theta)`` (the LAMB variants' owned step) overwrites ``theta``
    with what the readable ``TrustRatio`` gives."""
    from sims.optim import TrustRatio, trust_step
    layout = _layout()
    gen = torch.Generator().manual_seed(9)
    theta, u = _rand(gen, layout.d), _rand(gen, layout.d)
    u[1, :20] = 0.0
    trust = TrustRatio(phi, lam=lam)
    want = theta - 0.05 * trust(theta, u, layout)
    got = trust_step(trust, theta, u, layout, 0.05, out=theta)
    assert got is theta
    torch.testing.assert_close(got, want, **TOL)


def test_beta1_zero_and_sgdm_base():
    """``beta1 = 0`` (``m = g``) takes the fast form; SGD with momentum keeps the readable
    rule (the fast form is not offered for it)."""
    layout = _layout()
    gen = torch.Generator().manual_seed(5)
    alg = MimeLite(eta_l=0.05, beta1=0.0)
    bcast = _bcast(alg, gen, layout.d)
    theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
    torch.testing.assert_close(alg._frozen_step(theta, g, bcast, None, _ctx(layout)),
                               _written_out(alg, theta, g, bcast, None, 0.05, layout), **TOL)
    sgdm = MimeLite(eta_l=0.05, base="sgdm")
    assert not sgdm._frozen_fast_ok()


def test_cache_never_stale():
    """The per-broadcast terms are recomputed for a new broadcast (rounds whose tensors may
    reuse the old ones' ids), after an in-place change of the broadcast, and per instance
    (other constants); each step equals the readable rule."""
    layout = _layout()
    gen = torch.Generator().manual_seed(21)
    alg = MimeLite(eta_l=0.05)

    def check(a, bcast):
        theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
        torch.testing.assert_close(
            a._frozen_step(theta, g, bcast, None, _ctx(layout)),
            a._frozen_step_reference(theta, g, bcast, None, 0.05, layout), **TOL)

    for _ in range(6):                      # new rounds: fresh tensors, ids often reused
        bcast = _bcast(alg, gen, layout.d)
        check(alg, bcast)
        check(alg, bcast)                   # second step of the round: from the cache
        del bcast
        assert alg._frozen_cache[1][0]() is None    # the cache does not keep it alive
    bcast = _bcast(alg, gen, layout.d)
    check(alg, bcast)
    cached = alg._frozen_cache[3]
    bcast["s_v"].mul_(3.0)                  # in place: the version counter moves
    bcast["s_vhat"][:, :5] = 7.0
    check(alg, bcast)
    assert alg._frozen_cache[3] is not cached
    other = MimeLite(eta_l=0.05, eps=1e-3, beta2=0.9)   # same broadcast, other constants
    check(other, bcast)
    check(alg, bcast)
    alg.base_rule = other.base_rule         # the same instance given other constants
    check(alg, bcast)


def test_pickle_and_copy_drop_the_cache():
    layout = _layout()
    gen = torch.Generator().manual_seed(2)
    alg = MimeLAMB(eta_l=0.05)
    bcast = _bcast(alg, gen, layout.d)
    alg._frozen_step(_rand(gen, layout.d), _rand(gen, layout.d), bcast, None, _ctx(layout),
                     _rand(gen, layout.d), bcast["c"])
    assert hasattr(alg, "_frozen_cache")
    for clone in (pickle.loads(pickle.dumps(alg)), copy.copy(alg), copy.deepcopy(alg)):
        assert not hasattr(clone, "_frozen_cache") and clone == alg


@pytest.mark.parametrize("name,base,rows", [
    ("mimelite", "amsgrad", None), ("mimelite-lamb", "amsgrad", None), ("mime", "amsgrad", None),
    ("mime-lamb", "amsgrad", None), ("mimelite", "adam", None), ("mime", "adam", None),
    ("mimelite", "amsgrad", 4), ("mime-lamb", "amsgrad", 4)])
def test_engine_fast_equals_readable(name, base, rows, monkeypatch):
    """A few rounds in the engine (two seeds, uneven clients: masked steps; 6 participant
    rows, in one block or blocks of 4 and 2) with the fast form on and off give the same
    trajectory of server models and states."""
    problem = tiny_uneven_problem()
    out, calls = {}, []
    fast = MimeLite._frozen_step_fast
    monkeypatch.setattr(MimeLite, "_frozen_step_fast",
                        lambda self, *a, **k: calls.append(a[3] is not None) or fast(self, *a, **k))
    for on in (True, False):
        alg = _rows_per_block(make_for_problem(name, problem, base=base), rows, problem.d)
        alg.fast_frozen = on
        calls.clear()
        res = engine.run(problem, alg, Participation("fixed", m=3), 3, [0, 1], eval_every=0)
        out[on] = res.server
        assert (len(calls) > 0) == on
        if on:
            assert any(calls) and not all(calls)            # masked and unmasked steps
    assert not torch.equal(out[True]["theta"], problem.init_theta(0).unsqueeze(0))
    torch.testing.assert_close(out[True]["theta"], out[False]["theta"], **TOL)
    for k in out[False]["s"]:
        torch.testing.assert_close(out[True]["s"][k], out[False]["s"][k], **TOL)

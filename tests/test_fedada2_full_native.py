"""FedAda2's client step through the C kernel (:mod:`sims.accel.native.sm3`, issue 16) as the engine
drives it, held to the readable rule (``JointAdaptive.reference_local_step``) in float64 at
1e-12 and in float32 to its rounding: the full preconditioner (``dja``, ``joint-adaptive``,
``fedadaadagrad``, ``fedadaadam``; AdaGrad and Adam clients, zero and server init) and
SM3-II (``fedada2``, ``fedada2-adam``), over a round of local steps of six participants of
three replicas (so each reads its own replica's server rows), with

* the round's start read where it is (:mod:`sims.row_source`): ``local_start`` hands zeros as
  one shared zero row and DJA's server statistic as the server's rows per replica, never
  written (the server state and the zero row unchanged after the round);
* the gradient's deferred block read where the products left it
  (:class:`sims.deferred_grad.DeferredGrad`; its block in ``flat`` poisoned with NaN, so a
  read of ``flat`` there shows; never materialized), the block on a layer, inside the
  parameters or cutting a layer's rows;
* the full preconditioner's ``nu`` the same tensor as its ``mu`` (not written);
* masks (rows that finished earlier; a first step with a mask: the row sources materialized);
* the engine protocol of :mod:`sims.row_source`: the first step's ``theta`` the server rows
  (not copied), the last step writing ``delta = start - theta'`` itself;

each with the C kernel on and off (torch's fused kernels, else the eager forms: the same
rule), and checking which ran. Whole engine runs with the kernel on, off and the readable
rule agree; the flags the engine reads (``takes_deferred_grad``, ``takes_row_sources``)
follow the kernel."""
from __future__ import annotations

import pytest
import torch

from sims.core import engine
from sims.accel import native
from sims.algorithms.base import RoundContext
from sims.algorithms.fedada2 import FedAda2Blend, JointAdaptive
from sims.algorithms.registry import make_algorithm, make_for_problem
from sims.core.batching import start_rows
from sims.deferred_grad import DeferredGrad
from sims.problems.models import MLP
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.row_source import DeltaRequest, RowSource, ServerRows, ZeroRows, materialized
from conftest import require_native

pytestmark = pytest.mark.usefixtures("torch_kernels_eager")

LAYOUT = ParamLayout.from_module(MLP(6, 5, 3))          # 5 x 6, 5, 3 x 5, 3: d = 53
REP = torch.tensor([0, 0, 1, 2, 2, 2])                  # six participants, three replicas
B, R = len(REP), 3
TOL = dict(rtol=1e-12, atol=1e-13)

FULL = [("joint-adaptive", {}), ("fedadaadagrad", {}), ("fedadaadam", {}),
        ("fedadaadam", {"bias_correction": False}),
        ("joint-adaptive", {"client": "adam", "eps": 1e-8, "beta2": 0.9}),
        ("dja", {}), ("dja", {"client": "adam"}),
        ("dja", {"client": "adam", "server": "adam"}),            # m, nu: two counts
        ("dja", {"client": "adam", "server": "adam", "bias_correction": False})]
SM3 = [("fedada2", {}), ("fedada2-adam", {}), ("fedada2", {"init": "server"}),
       ("fedada2-adam", {"init": "server", "server": "adam"})]
#: the rows that step: a round of four steps, rows finishing early
LATE_MASKS = [None, None, torch.tensor([True, True, False, True, True, True]),
              torch.tensor([True, False, False, True, False, True])]
FIRST_MASKED = [torch.tensor([True, False, True, True, False, True]), None,
                torch.tensor([True, True, True, False, True, True])]
BLOCKS = {"layer": LAYOUT.slices[0], "inner-layer": LAYOUT.slices[2],
          "cuts-rows": slice(3, 40)}


@pytest.fixture(params=["native", "torch"])
def kernel(request, monkeypatch):
    """The C kernel on (it must be built here) or off (``JointAdaptive.native_step``)."""
    on = request.param == "native"
    monkeypatch.setattr(JointAdaptive, "native_step", on)
    if on:
        require_native()
    return request.param


def _server(alg, gen, dtype):
    """``R`` server models and the broadcast; an adaptive server's statistic ``v`` positive and
    different per replica (as after some rounds)."""
    theta = torch.randn(R, LAYOUT.d, generator=gen, dtype=torch.float64).to(dtype)
    server = alg.init_server(theta)
    if "v" in server["opt"]:
        server["opt"]["v"] = (torch.rand(R, LAYOUT.d, generator=gen, dtype=torch.float64)
                              + 0.01).to(dtype)
    return theta, alg.broadcast(server)


def _deferred(g, block):
    """``g`` with ``block`` left in per-row parts (``[rows, cols]`` where it is a layer), its
    columns in ``flat`` NaN."""
    flat = g.clone()
    flat[:, block] = float("nan")
    shape = (LAYOUT.shapes[LAYOUT.slices.index(block)] if block in LAYOUT.slices
             else (block.stop - block.start,))
    return DeferredGrad(flat, block, [g[i, block].clone().view(shape) for i in range(B)])


def _reference_start(alg, bcast, ctx, monkeypatch):
    """``local_start``'s plain tensors (the C kernel off), from the gathered broadcast."""
    with monkeypatch.context() as m:
        m.setattr(JointAdaptive, "native_step", False)
        st = alg.local_start({k: start_rows(v, REP) for k, v in bcast.items()}, {}, ctx)
    assert all(torch.is_tensor(v) for v in st.values())
    return st


def _round(alg, monkeypatch, kernel, masks, *, dtype=torch.float64, block=None,
           protocol=False, seed=0):
    """A round of ``len(masks)`` local steps of ``alg.local_step`` as the engine drives it
    (ownership flags; with ``protocol`` the first ``theta`` the server rows and the last step
    asked for ``delta``) against the readable rule from its plain start, compared after
    every step; checks the row sources, the deferred gradients and the kernel calls."""
    gen = torch.Generator().manual_seed(seed)
    theta_r, bcast = _server(alg, gen, dtype)
    kept = {k: v.clone() for k, v in bcast.items()}
    view = engine._ParticipantRows(bcast, REP)
    ctx = RoundContext(3, LAYOUT, REP, torch.arange(B), torch.full((B,), -1))
    st = alg.local_start(view, {}, ctx)
    on = kernel == "native"
    assert not view._rows or (not on and alg.init == "server")     # nothing gathered
    full = alg.precond == "full"
    assert any(isinstance(v, RowSource) for v in st.values()) == on
    if on:
        assert isinstance(st["mu"], ServerRows if alg.init == "server" else ZeroRows)
        assert (st["nu"] is st["mu"]) == full
        assert alg.takes_deferred_grad and alg.takes_row_sources
    st_r = _reference_start(alg, bcast, ctx, monkeypatch)
    th = ServerRows(theta_r, REP) if protocol else start_rows(theta_r, REP)
    th_r = start_rows(theta_r, REP)
    before = native.calls.get("sm3_step", 0)
    for k, mask in enumerate(masks):
        g = torch.randn(B, LAYOUT.d, generator=gen, dtype=torch.float64).to(dtype)
        last = k == len(masks) - 1
        ctx.extra.clear()
        ctx.extra.update(owned_theta=not (protocol and k == 0), owned_state=k > 0,
                         owned_start=k == 0)
        request = None
        if protocol and last:
            request = ctx.extra["delta_from"] = DeltaRequest(ServerRows(theta_r, REP))
        gf = g if block is None else _deferred(g, block)
        th, st = alg.local_step(th, gf, st, view, {}, mask, ctx)
        if block is not None and on:
            assert gf.parts is not None                 # read where it is
        th_r, st_r = alg.reference_local_step(th_r, g, st_r, {}, {}, mask, ctx)
        wrote = request is not None and request.done
        assert wrote == (protocol and last and on)
        want = start_rows(theta_r, REP) - th_r if wrote else th_r
        tol = TOL if dtype == torch.float64 else {}
        torch.testing.assert_close(th, want, **tol)
        assert set(st) == set(st_r)
        for key in st_r:
            torch.testing.assert_close(materialized(st[key]), st_r[key], **tol)
        if on and full:
            assert st["nu"] is st["mu"]
    assert native.calls.get("sm3_step", 0) - before == (len(masks) if on else 0)
    for key, val in bcast.items():                      # the server rows never written
        assert torch.equal(val, kept[key]), key
    for row in ZeroRows._zero.values():                 # nor the shared zero row
        assert not row.any()
    return th


@pytest.mark.parametrize("protocol", [False, True], ids=["copied-start", "row-protocol"])
@pytest.mark.parametrize("masks", [LATE_MASKS, FIRST_MASKED], ids=["late-masks", "first-masked"])
@pytest.mark.parametrize("name,hyper", FULL + SM3)
def test_round_equals_reference(monkeypatch, kernel, name, hyper, masks, protocol):
    _round(make_algorithm(name, **hyper), monkeypatch, kernel, masks, protocol=protocol,
           seed=len(name) + len(hyper))


@pytest.mark.parametrize("block", list(BLOCKS), ids=list(BLOCKS))
@pytest.mark.parametrize("name,hyper", FULL[::2] + SM3)
def test_deferred_gradient_read_where_it_is(monkeypatch, kernel, name, hyper, block):
    """The deferred block (NaN in ``flat``) read from the rows' parts by the kernel, with
    the row sources, masks and the engine protocol."""
    _round(make_algorithm(name, **hyper), monkeypatch, kernel, LATE_MASKS,
           block=BLOCKS[block], protocol=True, seed=3)


@pytest.mark.parametrize("name,hyper", [("joint-adaptive", {}), ("fedadaadam", {}),
                                        ("dja", {"client": "adam", "server": "adam"}),
                                        ("fedada2-adam", {})])
def test_float32_is_the_rule_to_rounding(monkeypatch, kernel, name, hyper):
    """The benchmark's type: the kernel's round against the readable rule in float32."""
    _round(make_algorithm(name, **hyper), monkeypatch, kernel, LATE_MASKS,
           dtype=torch.float32, block=LAYOUT.slices[0], protocol=True, seed=5)


def test_a_broken_table_is_caught(monkeypatch):
    """The check above is not vacuous: the zero rows read as the server's rows (a wrong
    address table) make the round differ from the rule."""
    monkeypatch.setattr(JointAdaptive, "native_step", True)
    monkeypatch.setattr(ZeroRows, "addresses", lambda self: torch.full(
        (self.shape[0],), _ones(self).data_ptr(), dtype=torch.int64))
    with pytest.raises(AssertionError):
        _round(make_algorithm("joint-adaptive"), monkeypatch, "native", LATE_MASKS)


_ONES = {}


def _ones(src):
    key = (src.shape[1], src.dtype)
    if key not in _ONES:
        _ONES[key] = torch.ones(src.shape[1], dtype=src.dtype)
    return _ONES[key]


def test_flags_follow_the_kernel(monkeypatch):
    """``takes_deferred_grad`` / ``takes_row_sources``: with the C kernel for its rules (the
    full preconditioner and SM3-II, ``z = 1``); not where it is off (the full preconditioner
    still takes a deferred gradient through torch's row lists), nor for the blend, a delay or
    a warm-up."""
    require_native()
    def flags(name, **hyper):
        alg = make_algorithm(name, **hyper)
        return alg.takes_deferred_grad, getattr(alg, "takes_row_sources", False)
    for name in ("dja", "joint-adaptive", "fedadaadagrad", "fedadaadam", "fedada2",
                 "fedada2-adam"):
        assert flags(name) == (True, True), name
    assert flags("fedada2-blend") == (False, False)
    assert flags("fedadaadagrad", delay=2) == (False, False)
    assert flags("joint-adaptive", local_warmup=3) == (False, False)
    native.enable(False)
    try:
        assert flags("dja") == (True, False) and flags("fedada2") == (False, False)
    finally:
        native.enable(True)
    monkeypatch.setattr(JointAdaptive, "native_step", False)
    assert flags("fedadaadam") == (True, False)


def test_blend_full_member_on_every_row_reads_its_row_sources(monkeypatch):
    """A blend whose every participant is on its full Adam member: the member's whole-tensor
    step reads its zero rows where they are (no state materialized) and equals the rule."""
    require_native()
    monkeypatch.setattr(JointAdaptive, "native_step", True)
    alg = FedAda2Blend(eta=0.05, strategies="sgd,adam")
    gen = torch.Generator().manual_seed(9)
    theta_r, bcast = _server(alg, gen, torch.float64)
    view = engine._ParticipantRows(bcast, REP)
    ctx = RoundContext(1, LAYOUT, REP, torch.tensor([1, 3, 5, 7, 9, 11]),
                       torch.full((B,), -1))
    st = alg.local_start(view, {}, ctx)
    assert isinstance(st["members"][1]["m"], ZeroRows)
    made = []
    real = ZeroRows.materialize
    monkeypatch.setattr(ZeroRows, "materialize", lambda self: made.append(1) or real(self))
    st_r = {"k": st["k"], "members": [{k: real(v) if isinstance(v, ZeroRows) else v
                                       for k, v in m.items()} for m in st["members"]]}
    th, th_r = start_rows(theta_r, REP), start_rows(theta_r, REP)
    for step in range(2):
        g = torch.randn(B, LAYOUT.d, generator=gen, dtype=torch.float64)
        ctx.extra.update(owned_theta=True, owned_state=step > 0, owned_start=step == 0)
        th, st = alg.local_step(th, g, st, view, {}, None, ctx)
        th_r, st_r = FedAda2Blend.reference_local_step(alg, th_r, g, st_r, {}, {}, None, ctx)
        torch.testing.assert_close(th, th_r, **TOL)
    assert made == []                 # the Adam member's zero rows read where they are
    for key, val in st_r["members"][1].items():
        torch.testing.assert_close(st["members"][1][key], val, **TOL)


@pytest.mark.parametrize("name,hyper", [("dja", {}), ("joint-adaptive", {}),
                                        ("fedadaadagrad", {}), ("fedadaadam", {}),
                                        ("dja", {"client": "adam", "server": "adam"}),
                                        ("fedada2", {"init": "server"})])
def test_engine_kernel_on_off_and_reference_agree(mlp_problem, monkeypatch, name, hyper):
    """Whole runs (two replicas, unequal clients: masked last steps) with the C kernel on,
    off (torch's fused kernels where they take the rule, else the eager forms) and the
    readable local rule: the same trajectory, server statistic included; the kernel ran only
    where on."""
    require_native()
    out = {}
    for form in ("native", "torch", "reference"):
        monkeypatch.setattr(JointAdaptive, "native_step", form == "native")
        alg = make_for_problem(name, mlp_problem, **hyper)
        if form == "reference":
            monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        before = native.calls.get("sm3_step", 0)
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=4), 3, [0, 1],
                               eval_every=0).server
        assert (native.calls.get("sm3_step", 0) > before) == (form == "native")
    assert not torch.equal(out["native"]["theta"], mlp_problem.init_theta(0).unsqueeze(0))
    for form in ("native", "torch"):
        torch.testing.assert_close(out[form]["theta"], out["reference"]["theta"], **TOL)
        for key, val in out["reference"]["opt"].items():
            torch.testing.assert_close(out[form]["opt"][key], val, **TOL)


@pytest.mark.parametrize("name", ["dja", "fedada2-adam"])
def test_threads_give_the_same_bits(monkeypatch, name):
    """The kernel's rows split over two threads (its address tables and deferred parts read
    per row) give the bits of one thread."""
    require_native()
    monkeypatch.setattr(JointAdaptive, "native_step", True)
    threads = torch.get_num_threads()
    out = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out.append(_round(make_algorithm(name), monkeypatch, "native", LATE_MASKS,
                              block=BLOCKS["cuts-rows"], protocol=True, seed=11))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out[0], out[1])


@pytest.mark.parametrize("full", [True, False], ids=["full", "sm3-ii"])
@pytest.mark.parametrize("adam", [False, True], ids=["adagrad", "adam"])
def test_wrapper_reads_every_operand_form_alike(full, adam):
    """:func:`sims.accel.native.sm3.sm3_step` on row sources (server rows per replica, client-state
    slots, one zero row) and on a deferred gradient gives the bits of the step on the
    gathered tensors; ``delta_from`` a tensor or a row source gives ``start - theta'``."""
    from sims.accel.native import sm3
    from sims.rules.optim import SM3Cover
    from sims.row_source import SlotRows
    require_native()
    cover = SM3Cover(LAYOUT, full=full)
    gen = torch.Generator().manual_seed(13)
    server = torch.randn(R, LAYOUT.d, generator=gen, dtype=torch.float64)
    storage = torch.rand(2 * B, cover.size, generator=gen, dtype=torch.float64)
    slot = torch.tensor([7, 0, 3, 9, 4, 11])
    g = torch.randn(B, LAYOUT.d, generator=gen, dtype=torch.float64)
    c1 = torch.linspace(0.2, 0.9, B, dtype=torch.float64) if adam else None

    def step(theta, mu, m, grad, delta_from=None):
        out = torch.empty(B, LAYOUT.d, dtype=torch.float64)
        mu_out = torch.empty(B, cover.size, dtype=torch.float64)
        m_out = torch.empty(B, LAYOUT.d, dtype=torch.float64) if adam else None
        assert sm3.sm3_step(cover, theta, grad, mu, 0.05, 1e-3, m=m, c1=c1, c2=c1,
                            theta_out=out, mu_out=mu_out, m_out=m_out,
                            delta_from=delta_from)
        return out, mu_out, m_out
    zero_m = ZeroRows(B, LAYOUT.d, torch.float64, "cpu") if adam else None
    want = step(start_rows(server, REP), storage[slot], materialized(zero_m), g)
    got = step(ServerRows(server, REP), SlotRows(storage, slot), zero_m,
               _deferred(g, BLOCKS["cuts-rows"]))
    for x, y in zip(got, want):
        assert (x is None and y is None) or torch.equal(x, y)
    start = start_rows(server, REP)
    for delta_from in (start, ServerRows(server, REP)):
        delta = step(start, storage[slot], materialized(zero_m), g, delta_from)[0]
        assert torch.equal(delta, start - want[0])

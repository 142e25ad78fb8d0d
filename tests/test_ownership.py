"""What a round's first local step may overwrite (``sims.ownership``, issue 16).

The engine owns ``theta`` at every local step, and on a round's first step the entries of
``local_start``'s state each algorithm declares fresh (``owned_start_keys``); the in-place
fast paths then write those without copying them. Held here, for every algorithm whose fast
local step writes in place: one chunk of two replicas run by hand as the engine runs it
(``_ParticipantRows``, the gathered client rows, ``start_rows``, the engine's flags):

* the declaration is honest: no declared entry shares memory with the broadcast (the
  server's tensors or the chunk's gathered rows), and after ``local_start`` and the first
  ``local_step`` the server state, the broadcast rows, the gathered client rows and every
  undeclared entry hold what they held;
* the first step copies neither ``theta`` (the step's ``theta`` is the engine's start rows,
  written in place) nor a declared entry (``torch_fused._writable`` clones none of them);
  LocalAdaptive's algorithms run it with their one-pass C kernel (``sims.accel.native.adaptive``)
  on and off;
* its result (model, local state, message) equals, bit for bit, the same step with nothing
  owned (the flags absent: any other caller's contract).

Whole engine runs against the readable rules are in ``tests/test_torch_fused.py`` and
``tests/test_fedada2_fast_step.py`` (which also check the first step ran in place)."""
from __future__ import annotations

import pytest
import torch

from sims import compiled, torch_fused
from sims.accel import native
from sims.algorithms.adaptive import LocalAdaptive
from sims.algorithms.base import Algorithm, RoundContext
from sims.experiments.footprint import _rows as footprint_rows
from sims.algorithms.registry import make_algorithm
from sims.core.batching import start_rows
from sims.core.engine import _ParticipantRows
from sims.problems.models import MLP
from sims.rules.optim import unscaled_vhat
from sims.ownership import EVERYTHING, NOTHING, Owned, step_owned
from sims.core.params import ParamLayout
from sims.row_source import ServerRows, SlotRows, materialized
from conftest import require_native

LAYOUT = ParamLayout.from_module(MLP(6, 5, 3))
R, N = 2, 5                                           # replicas, clients per replica
REP = torch.tensor([0, 0, 0, 1, 1])                   # the chunk: 3 + 2 participants
CLI = torch.tensor([4, 1, 2, 0, 3])


# every test with torch's kernels on and the compiled form off, both restored after
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


# ------------------------------------------------------------------------------ the flags

def _ctx(**flags):
    ctx = RoundContext(1, LAYOUT, REP, CLI, torch.tensor([0, -1, 0, 0, -1]))
    ctx.extra.update(flags)
    return ctx


def test_step_owned_reads_the_engine_flags():
    fresh = {"m", "v"}
    assert step_owned(_ctx(), fresh) == NOTHING                 # another caller: nothing
    assert step_owned(_ctx(owned_state=False), fresh) == NOTHING
    assert step_owned(_ctx(owned_state=True), fresh) == EVERYTHING
    first = step_owned(_ctx(owned_theta=True, owned_state=False, owned_start=True), fresh)
    assert first.theta and first("m") and first("v") and not first("vhat")
    assert step_owned(_ctx(owned_theta=True, owned_start=False), fresh) == Owned(True)
    # the declaration counts only where the engine hands local_start's state on unchanged
    assert not step_owned(_ctx(owned_start=True), fresh).theta


def test_owned_values():
    assert Owned.of(True) == EVERYTHING and Owned.of(False) == NOTHING
    own = Owned(True, frozenset({"m"}))
    assert Owned.of(own) is own
    assert own.plus("vhat")("vhat") and not own("vhat") and own.plus("vhat").theta
    assert EVERYTHING("anything") and EVERYTHING.plus("x") is EVERYTHING
    with pytest.raises(TypeError, match="not a bool"):
        bool(own)                         # a fast path reading it as a flag fails loudly


def test_default_owns_nothing():
    assert Algorithm().owned_start_keys() == frozenset()


# ------------------------------------------------------------------------------ one chunk

#: (name, hyper): every algorithm whose fast local step writes in place, and the options
#: that change what its local_start hands out
CASES = [("fed-ams", {}), ("fed-ams", {"bias_correction": "none"}),
         ("fed-ams", {"vhat": "local"}), ("fed-ams", {"persist_m": False, "v_init": "eps"}),
         ("fed-lamb", {}), ("fedlada", {}), ("fedlada", {"v_init": "zero"}),
         ("localadam", {}), ("fedada2", {}), ("fedada2-adam", {}), ("dja", {}),
         ("dja", {"client": "adam", "server": "adam", "bias_correction": False}),
         ("joint-adaptive", {}), ("fedadaadam", {}), ("fedadaadagrad", {}),
         ("fedada2-blend", {"strategies": "adagrad,sm3-adam,adam,sgd"}), ("mimelite", {})]
#: the cases whose step is not torch's kernels': the eager sims.rules.optim.local_adaptive_step
#: (m restarted, v not: two bias-correction counts) and Mime's frozen step
EAGER = {("fed-ams", "persist_m"), ("mimelite", None)}


def _server_and_clients(alg, gen):
    """Server state as after some rounds (positive statistics) and random client state."""
    theta0 = torch.randn(R, LAYOUT.d, generator=gen, dtype=torch.float64)
    server = alg.init_server(theta0)

    def stir(x):
        if isinstance(x, dict):
            return {k: stir(v) for k, v in x.items()}
        if torch.is_tensor(x) and x.is_floating_point() and x.shape == theta0.shape:
            return x.abs() + torch.rand(x.shape, generator=gen, dtype=x.dtype)
        return x
    server = {k: (v if k == "theta" else stir(v)) for k, v in server.items()}
    cstate = {}
    for k, kind in alg.client_state_spec().items():
        shape = (R, N, LAYOUT.d) if kind == "vector" else (R, N)
        cstate[k] = (torch.randint(0, 5, shape, generator=gen).to(torch.float64)
                     if kind == "scalar" else torch.rand(shape, generator=gen,
                                                         dtype=torch.float64))
    return server, cstate


_tensors = footprint_rows          # every tensor inside a (nested) dict, list or tensor


def _entries(alg, lstate):
    """``(tensor, declared)`` for each entry of a local-start state (a blend: its members',
    each under its own declaration)."""
    if "members" in lstate:
        return [pair for member, st in zip(alg.members, lstate["members"])
                for pair in _entries(member, st)]
    keys = alg.owned_start_keys()
    return [(v.storage if isinstance(v, SlotRows) else v, k in keys)
            for k, v in lstate.items() if torch.is_tensor(v) or isinstance(v, SlotRows)]
    # (a SlotRows is written in place: its storage counts; the read-only row sources,
    # ServerRows and ZeroRows, are never written whatever is declared, sims.row_source)


def _shares(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _chunk(alg, server, cstate, grad, flags, clones=None):
    """One chunk as ``sims.core.engine._run_clients`` runs it: ``local_start`` and one unmasked
    ``local_step`` under ``flags`` (the engine's first-step flags, or none), then
    ``client_message``. Returns what the test checks."""
    bcast = alg.broadcast(server)
    b_cast = _ParticipantRows(bcast, REP)
    slot = REP * N + CLI
    c_state = {k: v.flatten(0, 1).index_select(0, slot) for k, v in cstate.items()}
    ctx = _ctx(**flags)
    lstate = alg.local_start(b_cast, c_state, ctx)
    for k in bcast:                 # every broadcast row gathered, as any reader would find it
        b_cast[k]
    entries = _entries(alg, lstate)
    snap = {"server": [t.clone() for t in _tensors(server)],
            "rows": {k: v.clone() for k, v in b_cast._rows.items()},
            "cstate": {k: v.clone() for k, v in c_state.items()},
            "undeclared": [t.clone() for t, declared in entries if not declared]}
    theta = start_rows(bcast["theta"], REP)
    start = theta.clone()
    if clones is not None:
        clones.clear()
    th, new = alg.local_step(theta, grad, lstate, b_cast, c_state, None, ctx)
    seen = list(clones) if clones is not None else []
    msg, c_new, aux = alg.client_message(start - th, new, c_state, ctx)
    return dict(bcast=bcast, b_cast=b_cast, c_state=c_state, entries=entries, snap=snap,
                server=server, theta=theta, th=th, new=new, msg=msg, c_new=c_new, aux=aux,
                clones=seen)


def _spy_clones(monkeypatch):
    """Record every tensor ``torch_fused._writable`` copies (not owned, or not contiguous)."""
    real, seen = torch_fused._writable, []

    def spy(x, owned):
        out = real(x, owned)
        if out is not x:
            seen.append(x)
        return out
    monkeypatch.setattr(torch_fused, "_writable", spy)
    return seen


FIRST = {"owned_theta": True, "owned_state": False, "owned_start": True}


#: the algorithms whose local step is LocalAdaptive's, which takes the C kernel first
#: (sims.accel.native.adaptive: it writes in place what is owned, new tensors otherwise)
NATIVE = {"fed-ams", "fed-lamb", "fedlada", "localadam"}


@pytest.mark.parametrize("native_on", [True, False], ids=["native", "torch"])
@pytest.mark.parametrize("name,hyper", CASES)
def test_first_step_writes_only_what_is_owned(monkeypatch, name, hyper, native_on):
    if native_on:
        require_native()
    monkeypatch.setattr(LocalAdaptive, "native_step", native_on)

    def kernels():      # torch's fused kernels and FedAda2's SM3-II C kernel (sims.accel.native.sm3)
        return sum(torch_fused.calls.values()) + native.calls.get("sm3_step", 0)
    before = kernels(), native.calls.get("adaptive_step", 0)
    _check_first_step(monkeypatch, name, hyper)
    kernel = kernels() > before[0]
    in_c = native.calls.get("adaptive_step", 0) > before[1]
    if native_on and name in NATIVE:
        assert in_c and not kernel
    else:
        assert not in_c and kernel != ((name, next(iter(hyper), None)) in EAGER)


@pytest.mark.skipif(__import__("shutil").which("g++") is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
@pytest.mark.parametrize("name,hyper", [("fed-ams", {}), ("fedlada", {}),
                                        ("fedlada", {"v_init": "zero"})])
def test_compiled_first_step_writes_only_what_is_owned(monkeypatch, name, hyper):
    """The same with the opt-in compiled step (:func:`sims.compiled.fused_local_adaptive_step`,
    which copies what it does not own itself)."""
    torch_fused.enable(False)
    compiled.enable(True)
    monkeypatch.setattr(compiled, "_kernels", {})
    _check_first_step(monkeypatch, name, hyper)
    assert len(compiled._kernels) == 1 and compiled.enabled()


def _check_first_step(monkeypatch, name, hyper):
    alg = make_algorithm(name, **hyper)
    gen = torch.Generator().manual_seed(len(name) + len(hyper))
    server, cstate = _server_and_clients(alg, gen)
    grad = torch.randn(len(REP), LAYOUT.d, generator=gen, dtype=torch.float64)
    clones = _spy_clones(monkeypatch)
    got = _chunk(alg, server, cstate, grad, FIRST, clones)
    broadcast = _tensors(got["bcast"]) + list(got["b_cast"]._rows.values())
    # the declaration: no declared entry is (part of) a broadcast tensor
    for t, declared in got["entries"]:
        if declared:
            assert not any(_shares(t, b) for b in broadcast), "a declared entry aliases the " \
                                                              "broadcast"
    # nothing but the declared entries (and the gathered client rows they came from) changed
    for t, old in zip(_tensors(got["server"]), got["snap"]["server"]):
        assert torch.equal(t, old)
    for k, old in got["snap"]["rows"].items():
        assert torch.equal(got["b_cast"]._rows[k], old), f"the broadcast rows {k!r} changed"
    declared = [t for t, d in got["entries"] if d]
    for k, old in got["snap"]["cstate"].items():
        if not any(_shares(got["c_state"][k], t) for t in declared):
            assert torch.equal(got["c_state"][k], old), f"client rows {k!r} changed"
    undeclared = [t for t, d in got["entries"] if not d]
    for t, old in zip(undeclared, got["snap"]["undeclared"]):
        assert torch.equal(t, old)
    # no copy of theta (the engine's start rows, stepped in place) nor of a declared entry
    assert got["th"] is got["theta"] or _shares(got["th"], got["theta"])
    assert not any(x is got["theta"] for x in got["clones"])
    assert not any(x is t for x in got["clones"] for t in declared)
    # the same step with nothing owned: the same numbers
    plain = _chunk(alg, server, cstate, grad, {})
    assert not _shares(plain["th"], plain["theta"])
    assert torch.equal(got["th"], plain["th"]) and torch.equal(got["msg"], plain["msg"])
    for key in ("c_new", "aux"):
        assert set(got[key]) == set(plain[key])
        for k in plain[key]:
            assert torch.equal(materialized(got[key][k]), materialized(plain[key][k]))
    a, b = _tensors(_unscaled(got["new"])), _tensors(_unscaled(plain["new"]))
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def _unscaled(state):
    if "members" in state:
        return {**state, "members": [_unscaled(s) for s in state["members"]]}
    return unscaled_vhat(state)


@pytest.mark.parametrize("name,hyper,key", [
    ("fedlada", {}, "v"),                                  # v and vhat: the broadcast rows
    ("localadam", {}, "vhat"),
    ("fed-ams", {}, "vhat"),                               # the server's vhat: rescaled
    ("fed-ams", {"bias_correction": "none"}, "vhat")])     # ... or stepped as is
def test_a_false_declaration_is_caught(monkeypatch, name, hyper, key):
    """Declaring a broadcast row owned: the check above fails (the cache written). With the
    C kernel the broadcast rows are read-only row sources (test_a_written_cache_is_caught):
    the tensor forms here."""
    monkeypatch.setattr(LocalAdaptive, "native_step", False)
    alg = make_algorithm(name, **hyper)
    honest = alg.owned_start_keys()
    monkeypatch.setattr(type(alg), "owned_start_keys", lambda self: honest | {key})
    with pytest.raises(AssertionError, match="declared entry aliases the broadcast"):
        _check_first_step(monkeypatch, name, hyper)


@pytest.mark.parametrize("native_on,name,key", [
    (False, "fedlada", "v"),
    (False, "fed-ams", "vhat"),
    # the C kernel reads the server's rows as row sources (sims.row_source), which it never
    # writes, whatever is declared: Fed-AMS's server vhat declared stays as it was
    (True, "fed-ams", "vhat")], ids=["torch-fedlada", "torch-fed-ams", "native"])
def test_a_written_cache_is_caught(monkeypatch, native_on, name, key):
    """With the declaration check off, writing the broadcast rows in place still fails the
    check of the rows (a broadcast entry declared owned); the C kernel cannot write them."""
    if native_on:
        require_native()
    monkeypatch.setattr(LocalAdaptive, "native_step", native_on)
    alg = make_algorithm(name)
    monkeypatch.setattr(type(alg), "owned_start_keys", lambda self: frozenset({"m", "v", key}))
    before = native.calls.get("adaptive_step", 0)
    if native_on:
        gen = torch.Generator().manual_seed(5)
        server, cstate = _server_and_clients(alg, gen)
        grad = torch.randn(len(REP), LAYOUT.d, generator=gen, dtype=torch.float64)
        snap = [t.clone() for t in _tensors(server)]
        got = _chunk(alg, server, cstate, grad, FIRST)
        assert isinstance(got["new"]["vhat"], torch.Tensor)            # stepped: a new one
        assert all(torch.equal(t, old) for t, old in zip(_tensors(server), snap))
    else:
        monkeypatch.setitem(globals(), "_shares", lambda a, b: False)
        with pytest.raises(AssertionError, match=f"broadcast rows '{key}' changed"):
            _check_first_step(monkeypatch, name, {})
    assert (native.calls.get("adaptive_step", 0) > before) == native_on


# ------------------------------------------------------------------------------ the engine

@pytest.mark.parametrize("name", ["fed-ams", "fed-lamb", "fedlada", "fedada2-adam", "dja",
                                  "fedada2-blend", "mimelite"])
def test_engine_first_steps_in_place_caches_intact(mlp_problem, monkeypatch, name):
    """Whole engine runs (two replicas, unequal clients, three rounds): every unmasked first
    step returns the engine's start rows stepped in place (no copy of ``theta``), and every
    chunk's gathered broadcast rows still equal the broadcast they were gathered from."""
    from sims.core import engine
    from sims.algorithms.registry import make_for_problem
    from sims.core.participation import Participation
    chunks, firsts = [], []

    class Recording(engine._ParticipantRows):
        def __init__(self, bcast, rep):
            super().__init__(bcast, rep)
            chunks.append(self)
    monkeypatch.setattr(engine, "_ParticipantRows", Recording)
    alg = make_for_problem(name, mlp_problem)
    real = alg.local_step

    def spy(theta, grad, lstate, bcast, cstate, mask, ctx):
        out = real(theta, grad, lstate, bcast, cstate, mask, ctx)
        if ctx.extra["owned_start"] and mask is None:
            if isinstance(theta, ServerRows):   # the server's rows where they are, stepped
                firsts.append(torch.is_tensor(out[0])            # into a new tensor
                              and not _shares(out[0], theta.server))
            else:
                firsts.append(_shares(out[0], theta))
        return out
    monkeypatch.setattr(alg, "local_step", spy)
    engine.run(mlp_problem, alg, Participation("fixed", m=3), 3, [0, 1], eval_every=0)
    assert len(firsts) >= 3 and all(firsts)
    assert chunks and any(len(set(c._rep.tolist())) == 2 for c in chunks)
    # nothing gathered where the step reads the server rows per replica (MimeLite, FedAda2)
    # or takes row sources (sims.row_source; DJA's preconditioner is gathered where the C
    # kernel, which reads it per replica, is off)
    per_replica = {"mimelite", "fedada2-adam", "fedada2-blend"} | (
        {"dja"} if native.library() is not None else set())
    sources = getattr(alg, "takes_row_sources", False)
    assert any(c._rows for c in chunks) != (name in per_replica or sources)
    for c in chunks:
        for k, rows in c._rows.items():
            assert torch.equal(rows, start_rows(c._bcast[k], c._rep)), k

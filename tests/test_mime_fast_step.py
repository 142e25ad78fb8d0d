"""The eager fast form of MimeLite / Mime's frozen local step (issue 16) equals the readable
rule in float64, and reads the server state per replica.

``MimeLite._frozen_step_fast`` forms ``b2 v + eps`` and ``vhat + eps`` of the broadcast
(frozen) server state once, on the server's ``[R, d]`` rows, and takes each step in 5 passes
over ``[B, d]`` (Mime: 7), each replica's row of ``m, P, Q`` (and Mime's ``c``) broadcast over
its participants' rows, never gathered per participant; the readable rule is
``MimeLite._frozen_step_reference`` (the base rule's direction through ``_advance``, on rows
gathered per participant) and, written out here, ``AdaptiveRule.reference_direction``.
Covered: the AMSGrad and Adam bases (SGD with momentum stays on the readable rule), MimeLite,
Mime (SVRG correction), their LAMB variants, one replica or three (runs of participants as the
engine orders them, and a replica in two runs), masked and unmasked steps, per-row rates,
several steps in a row with the in-place (owned) update, one block of rows per replica run or
several (the fast form runs its passes on row blocks within runs), a plain dict of gathered
rows (each row its own replica), the off-CPU block plan, the per-broadcast cache (never stale
across rounds, replicas, in-place changes or constants; shared by the chunks of a round;
dropped when pickled), no gather of the server state (counted), the compiled form's
per-replica rows, and whole engine runs with the fast form on and off (two and three
replicas, chunks of participants).
"""
from __future__ import annotations

import copy
import itertools
import pickle
import shutil
import zlib

import pytest
import torch

from conftest import require_native, tiny_uneven_problem
from sims import compiled
from sims.core import engine
from sims.accel import native
from sims.algorithms.base import RoundContext
from sims.algorithms.fed_lamb import Mime, MimeLAMB, MimeLite, MimeLiteLAMB
from sims.algorithms.registry import make_for_problem
from sims.core.batching import per_replica
from sims.problems.models import MLP
from sims.core.params import ParamLayout
from sims.core.participation import Participation

CLASSES = {("lite", False): MimeLite, ("lite", True): MimeLiteLAMB,
           ("mime", False): Mime, ("mime", True): MimeLAMB}
#: participant -> replica maps: three replicas in runs as the engine orders a chunk; one
#: replica; a replica in two runs (replica_runs takes any runs)
REPS = {"three": [0, 0, 1, 1, 1, 2, 2], "one": [0] * 7, "split": [1, 0, 0, 2, 2, 2, 1]}
B = 7
MASK = torch.tensor([True, False, True, True, False, True, True])
TOL = {"rtol": 1e-12, "atol": 1e-12}
STATE_KEYS = {"s_m", "s_v", "s_vhat", "c"}


# every test with torch's kernels on and the compiled form (opt-in, which goes first where
# it is on) off, both restored after
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


@pytest.fixture(autouse=True, params=["native", "torch"])
def frozen_kernel(request, monkeypatch):
    """Every test twice: the fast form through the C kernel (:mod:`sims.accel.native.frozen`; it
    must be built here) and through its torch passes. Returns the name."""
    on = request.param == "native"
    monkeypatch.setattr(MimeLite, "native_frozen", on)
    if on:
        require_native()
    return request.param


class CountingRows(engine._ParticipantRows):
    """The engine's per-participant view of the broadcast, recording every key gathered to
    ``[B, d]`` rows (``gathered``)."""

    def __init__(self, bcast, rep):
        super().__init__(bcast, rep)
        self.gathered = []

    def __getitem__(self, key):
        self.gathered.append(key)
        return super().__getitem__(key)


def _layout():
    return ParamLayout.from_module(MLP(4, 5, 3))          # d = 43, four layers


def _rand(gen, d, scale=1.0, rows=B):
    return torch.randn(rows, d, generator=gen, dtype=torch.float64) * scale


def _server_bcast(alg, gen, d, R=3):
    """The server's broadcast for ``R`` replicas with different states, advanced a few times
    from its start so ``m, v, vhat`` are all nonzero and ``vhat > v`` in some coordinates."""
    server = alg.init_server(_rand(gen, d, rows=R))
    every = torch.ones(R, dtype=torch.bool)
    for _ in range(3):
        server = {**server, **alg._server_update(server, torch.zeros_like(server["theta"]),
                                                 _rand(gen, d, 0.3, rows=R), every)}
    if isinstance(alg, Mime):
        server = alg.round_gradient(server, _rand(gen, d, 0.2, rows=R), every)
    return alg.broadcast(server)


def _bcast(alg, gen, d, reps="three"):
    """The engine's view of a broadcast (:class:`CountingRows`) for the participants of
    ``REPS[reps]``."""
    rep = torch.tensor(REPS[reps])
    return CountingRows(_server_bcast(alg, gen, d, int(rep.max()) + 1), rep)


def _gathered(bcast):
    """A plain dict of the broadcast gathered per participant (what the readable rule reads)."""
    return {k: v[bcast._rep] for k, v in bcast._bcast.items()}


def _ctx(layout, reps="three", owned=False):
    ctx = RoundContext(1, layout, torch.tensor(REPS[reps]), torch.arange(B),
                       torch.full((B,), -1))
    ctx.extra["owned_state"] = owned
    return ctx


def _rows_per_block(alg, rows, d):
    """Row blocks of ``rows`` rows (None: the default size, here one block per replica run)."""
    if rows is not None:
        alg.frozen_block_bytes = rows * d * 8               # float64 rows
    return alg


def _written_out(alg, theta, g, rows, mask, lr, layout, anchor=None):
    """``theta - lr U(g; s)`` from ``AdaptiveRule.reference_direction`` (the rule as written in
    its docstring) on the gathered rows ``rows``, not through any fast form."""
    if anchor is not None:
        g = g - anchor + rows["c"]
    s = {k[2:]: v for k, v in rows.items() if k.startswith("s_")}
    u, _ = alg.base_rule.reference_direction(g, s)
    step = alg.trust(theta, u, layout) if alg.trust is not None else u
    new = theta - lr * step
    return new if mask is None else torch.where(mask.unsqueeze(-1), new, theta)


#: (rows per block, participants' replicas): one block per replica run, or blocks of 2 rows
#: and 1 within the runs; three replicas, one, a replica in two runs
BLOCKINGS = [(None, "three"), (2, "three"), (1, "split"), (None, "one"), (2, "one")]


@pytest.mark.parametrize("base,kind,lamb,masked,blocking", list(itertools.product(
    ["amsgrad", "adam"], ["lite", "mime"], [False, True], [False, True], BLOCKINGS)))
def test_fast_frozen_step_equals_readable_rule(base, kind, lamb, masked, blocking,
                                               monkeypatch, frozen_kernel):
    """Several local steps through ``_frozen_step`` (the fast form, in place from the second
    step on) on the engine's view of a broadcast against ``_frozen_step_reference`` and the
    written-out rule on the rows gathered per participant, each on its own copies; the fast
    form must be the one taken, and it must never gather the server state."""
    rows, reps = blocking
    layout = _layout()
    alg = _rows_per_block(CLASSES[(kind, lamb)](eta_l=0.05, base=base,
                                                lam=0.01 if lamb else 0.0), rows, layout.d)
    assert alg._frozen_fast_ok()
    taken, calls0 = [], native.calls.get("frozen_step", 0)
    fast = alg._frozen_step_fast
    monkeypatch.setattr(alg, "_frozen_step_fast", lambda *a, **k: taken.append(1) or fast(*a, **k))
    gen = torch.Generator().manual_seed(zlib.crc32(f"{base}{kind}{lamb}{masked}{reps}".encode()))
    bcast = _bcast(alg, gen, layout.d, reps)
    gathered = _gathered(bcast)
    frozen = {k: v.clone() for k, v in bcast._bcast.items()}
    theta0 = _rand(gen, layout.d)
    th_f, th_r = theta0.clone(), theta0.clone()
    mask = MASK if masked else None
    for step in range(4):
        g = _rand(gen, layout.d)
        anchor = _rand(gen, layout.d) if kind == "mime" else None
        want = alg._frozen_step_reference(th_r, g.clone(), gathered, mask, 0.05, layout, anchor)
        written = _written_out(alg, th_r, g, gathered, mask, 0.05, layout, anchor)
        torch.testing.assert_close(want, written, **TOL)
        g_before = g.clone()
        got = alg._frozen_step(th_f, g, bcast, mask, _ctx(layout, reps, owned=step > 0), anchor)
        assert torch.equal(g, g_before)                     # the gradient is not written
        torch.testing.assert_close(got, want, **TOL)
        if masked:                                          # masked rows keep theta exactly
            assert torch.equal(got[~mask], th_f[~mask])
        th_f, th_r = got, want
    assert len(taken) == 4
    assert not torch.equal(th_f, theta0)
    if frozen_kernel == "native":                          # the C kernel took every step
        assert native.calls.get("frozen_step", 0) - calls0 == 4
    assert not STATE_KEYS & set(bcast.gathered), bcast.gathered     # read per replica
    for k, v in frozen.items():                             # the server state stays frozen
        assert torch.equal(bcast._bcast[k], v), k


@pytest.mark.parametrize("kind,lamb,blocking", list(itertools.product(
    ["lite", "mime"], [False, True], [(None, "three"), (1, "three"), (2, "split")])))
def test_fast_frozen_step_per_row_rate(kind, lamb, blocking):
    """A rate per row (``[B, 1]``, a per-replica ``eta_l``), in place and not, masked and not,
    in one block of rows per replica run or several (each block takes its own rows' rates)."""
    rows, reps = blocking
    layout = _layout()
    alg = _rows_per_block(CLASSES[(kind, lamb)](eta_l=0.05), rows, layout.d)
    gen = torch.Generator().manual_seed(11)
    bcast = _bcast(alg, gen, layout.d, reps)
    lr = torch.tensor([[0.05], [0.01], [0.2], [0.1], [0.03], [0.07], [0.15]],
                      dtype=torch.float64)
    for owned, mask in ((False, None), (True, None), (False, MASK), (True, MASK)):
        theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
        anchor = _rand(gen, layout.d) if kind == "mime" else None
        want = _written_out(alg, theta, g, _gathered(bcast), mask, lr, layout, anchor)
        got = alg._frozen_step_fast(theta.clone(), g, bcast, mask, lr, layout, anchor,
                                    owned=owned)
        torch.testing.assert_close(got, want, **TOL)
    assert not STATE_KEYS & set(bcast.gathered)


@pytest.mark.parametrize("kind,lamb,masked", list(itertools.product(
    ["lite", "mime"], [False, True], [False, True])))
def test_fast_frozen_step_on_plain_rows(kind, lamb, masked):
    """A plain dict of ``[B, d]`` rows (callers outside the engine: the observers, the
    footprint probe) takes the fast form with each row its own replica."""
    layout = _layout()
    alg = CLASSES[(kind, lamb)](eta_l=0.05)
    gen = torch.Generator().manual_seed(17)
    rows = _gathered(_bcast(alg, gen, layout.d, "split"))
    mask = MASK if masked else None
    theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
    anchor = _rand(gen, layout.d) if kind == "mime" else None
    got = alg._frozen_step(theta, g, rows, mask, _ctx(layout, "split"), anchor)
    torch.testing.assert_close(got, _written_out(alg, theta, g, rows, mask, 0.05, layout,
                                                 anchor), **TOL)


def test_per_replica_helper():
    """``sims.core.batching.per_replica``: the engine's view hands out the server tensor itself and
    the participants' replicas, gathering nothing; a plain dict its rows and ``arange(B)``."""
    gen = torch.Generator().manual_seed(3)
    server = {"theta": _rand(gen, 5, rows=3), "s_m": _rand(gen, 5, rows=3)}
    rep = torch.tensor(REPS["split"])
    view = CountingRows(server, rep)
    tensor, got_rep = per_replica(view, "s_m")
    assert tensor is server["s_m"] and torch.equal(got_rep, rep) and view.gathered == []
    assert torch.equal(view["s_m"], server["s_m"][rep])       # the gathered rows, on use
    rows = {"s_m": server["s_m"][rep]}
    tensor, got_rep = per_replica(rows, "s_m")
    assert tensor is rows["s_m"] and torch.equal(got_rep, torch.arange(B))


@pytest.mark.parametrize("rows", [1, 2, 3, 100])
def test_frozen_blocks_cover_each_row_once_within_its_run(rows):
    """On the CPU the blocks cover the rows in order, each once, each inside one replica's
    run and indexed by that replica, at most ``rows`` rows each; off the CPU one block (the
    replica's row) where the chunk has one replica, else None (gathered rows)."""
    from sims.core.batching import replica_runs
    alg = MimeLite()
    alg.frozen_block_bytes = rows * 8
    for reps in REPS.values():
        rep = torch.tensor(reps)
        blocks = alg._frozen_blocks("cpu", B, 8, replica_runs(rep))
        assert [i for sl, _ in blocks for i in range(sl.start, sl.stop)] == list(range(B))
        for sl, r in blocks:
            assert 0 < sl.stop - sl.start <= rows and set(reps[sl]) == {r}
        off = alg._frozen_blocks("cuda", B, 8, replica_runs(rep))
        assert off == ([(slice(0, B), 0)] if len(set(reps)) == 1 else None)


@pytest.mark.parametrize("kind,lamb,reps", list(itertools.product(
    ["lite", "mime"], [False, True], ["one", "three"])))
def test_off_cpu_block_plan(kind, lamb, reps, monkeypatch):
    """The block plan of other devices (one launch per pass) run on the CPU: one replica
    broadcasts its row over all rows, several read the rows gathered per participant; both
    equal the written-out rule."""
    monkeypatch.setattr(MimeLite, "native_frozen", False)   # the plan is the torch passes'
    layout = _layout()
    alg = CLASSES[(kind, lamb)](eta_l=0.05)
    plan = MimeLite._frozen_blocks
    monkeypatch.setattr(alg, "_frozen_blocks", lambda _dev, *a: plan(alg, "cuda", *a))
    gen = torch.Generator().manual_seed(23)
    bcast = _bcast(alg, gen, layout.d, reps)
    theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
    anchor = _rand(gen, layout.d) if kind == "mime" else None
    got = alg._frozen_step(theta, g, bcast, MASK, _ctx(layout, reps), anchor)
    torch.testing.assert_close(got, _written_out(alg, theta, g, _gathered(bcast), MASK, 0.05,
                                                 layout, anchor), **TOL)
    assert bool(STATE_KEYS & set(bcast.gathered)) == (reps != "one")


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
@pytest.mark.parametrize("kind,lamb,reps", [("lite", False, "one"), ("mime", False, "three"),
                                            ("mime", True, "one")])
def test_compiled_form_reads_one_replica_per_replica(kind, lamb, reps, monkeypatch):
    """The compiled one pass (opt-in, :mod:`sims.compiled`) gets the replica's ``[1, d]``
    rows, broadcast in the kernel, where the chunk's participants belong to one replica (no
    gather of the server state), else the rows gathered per participant; both equal the
    written-out rule, and the eager fast form is not taken."""
    layout = _layout()
    alg = CLASSES[(kind, lamb)](eta_l=0.05, lam=0.01 if lamb else 0.0)
    monkeypatch.setattr(alg, "_frozen_step_fast", None)          # must not be reached
    monkeypatch.setattr(compiled, "_kernels", {})
    gen = torch.Generator().manual_seed(29)
    bcast = _bcast(alg, gen, layout.d, reps)
    theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
    anchor = _rand(gen, layout.d) if kind == "mime" else None
    compiled.enable(True)
    got = alg._frozen_step(theta, g, bcast, None, _ctx(layout, reps), anchor)
    assert compiled.enabled(), "compiling failed"
    torch.testing.assert_close(got, _written_out(alg, theta, g, _gathered(bcast), None, 0.05,
                                                 layout, anchor), **TOL)
    assert bool(STATE_KEYS & set(bcast.gathered)) == (reps != "one")


@pytest.mark.parametrize("phi,lam", [("clip", 0.0), ("clip", 0.1), ("identity", 0.1),
                                     ("update_norm", 0.0)])
def test_trust_step_in_place_equals_new(phi, lam):
    """``trust_step(..., out=theta)`` (the LAMB variants' owned step) overwrites ``theta``
    with what the readable ``TrustRatio`` gives."""
    from sims.rules.optim import TrustRatio, trust_step
    layout = _layout()
    gen = torch.Generator().manual_seed(9)
    theta, u = _rand(gen, layout.d), _rand(gen, layout.d)
    u[1, :20] = 0.0
    trust = TrustRatio(phi, lam=lam)
    want = theta - 0.05 * trust(theta, u, layout)
    got = trust_step(trust, theta, u, layout, 0.05, out=theta)
    assert got is theta
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_root_power_is_rsqrt_bit_for_bit(dtype):
    """The fast steps' root ``sims.rules.optim.rsqrt_`` (``pow_(-0.5)``, faster than ``rsqrt_`` on
    the CPU; and the out-of-place ``torch.pow(x, -0.5)`` of the eager AMSGrad step) gives
    ``rsqrt``'s values bit for bit, over the range of ``max(P + (1 - b2) g^2, Q)``."""
    from sims.rules.optim import rsqrt_
    x = torch.logspace(-12, 12, 20001, dtype=dtype)
    x = torch.cat([x, x * (1 + torch.finfo(dtype).eps), torch.rand(20001, dtype=dtype)])
    want = torch.rsqrt(x)
    assert torch.equal(rsqrt_(x.clone()), want)
    assert torch.equal(torch.pow(x, -0.5), want)


def test_beta1_zero_and_sgdm_base():
    """``beta1 = 0`` (``m = g``) takes the fast form; SGD with momentum keeps the readable
    rule (the fast form is not offered for it)."""
    layout = _layout()
    gen = torch.Generator().manual_seed(5)
    alg = MimeLite(eta_l=0.05, beta1=0.0)
    bcast = _bcast(alg, gen, layout.d)
    theta, g = _rand(gen, layout.d), _rand(gen, layout.d)
    torch.testing.assert_close(alg._frozen_step(theta, g, bcast, None, _ctx(layout)),
                               _written_out(alg, theta, g, _gathered(bcast), None, 0.05,
                                            layout), **TOL)
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
            a._frozen_step_reference(theta, g, _gathered(bcast), None, 0.05, layout), **TOL)

    for _ in range(6):                      # new rounds: fresh tensors, ids often reused
        bcast = _bcast(alg, gen, layout.d)
        check(alg, bcast)
        check(alg, bcast)                   # second step of the round: from the cache
        del bcast
        assert alg._frozen_cache[1][0]() is None    # the cache does not keep it alive
    bcast = _bcast(alg, gen, layout.d)
    check(alg, bcast)
    cached = alg._frozen_cache[3]
    bcast._bcast["s_v"].mul_(3.0)           # in place: the version counter moves
    bcast._bcast["s_vhat"][:, :5] = 7.0
    check(alg, bcast)
    assert alg._frozen_cache[3] is not cached
    other = MimeLite(eta_l=0.05, eps=1e-3, beta2=0.9)   # same broadcast, other constants
    check(other, bcast)
    check(alg, bcast)
    alg.base_rule = other.base_rule         # the same instance given other constants
    check(alg, bcast)


def test_cache_shared_by_the_chunks_of_a_round():
    """The terms are formed once per broadcast on the server's ``[R, d]`` rows: a round's
    second chunk of participants (another view of the same broadcast) reuses them."""
    layout = _layout()
    gen = torch.Generator().manual_seed(13)
    alg = Mime(eta_l=0.05)
    server = _server_bcast(alg, gen, layout.d, R=3)
    terms = None
    for rep in ([0, 0, 0, 1], [1, 1, 2], [2]):
        chunk = CountingRows(server, torch.tensor(rep))
        b = len(rep)
        ctx = RoundContext(1, layout, torch.tensor(rep), torch.arange(b), torch.full((b,), -1))
        theta, g, anchor = (_rand(gen, layout.d, rows=b) for _ in range(3))
        got = alg._frozen_step(theta, g, chunk, None, ctx, anchor)
        torch.testing.assert_close(got, _written_out(alg, theta, g, _gathered(chunk), None,
                                                     0.05, layout, anchor), **TOL)
        assert not STATE_KEYS & set(chunk.gathered)
        if terms is None:
            terms = alg._frozen_cache[3]
            assert all(t.shape == (3, layout.d) for t in terms)
        assert alg._frozen_cache[3] is terms


def test_pickle_and_copy_drop_the_cache():
    layout = _layout()
    gen = torch.Generator().manual_seed(2)
    alg = MimeLAMB(eta_l=0.05)
    bcast = _bcast(alg, gen, layout.d)
    alg._frozen_step(_rand(gen, layout.d), _rand(gen, layout.d), bcast, None, _ctx(layout),
                     _rand(gen, layout.d))
    assert hasattr(alg, "_frozen_cache")
    for clone in (pickle.loads(pickle.dumps(alg)), copy.copy(alg), copy.deepcopy(alg)):
        assert not hasattr(clone, "_frozen_cache") and clone == alg


@pytest.mark.parametrize("name,base,rows,seeds,max_batch", [
    ("mimelite", "amsgrad", None, 2, None), ("mimelite-lamb", "amsgrad", None, 2, None),
    ("mime", "amsgrad", None, 2, None), ("mime-lamb", "amsgrad", None, 2, None),
    ("mimelite", "adam", None, 1, None), ("mime", "adam", None, 1, None),
    ("mimelite", "amsgrad", 2, 3, 4), ("mime-lamb", "amsgrad", 2, 3, 4),
    ("mime", "amsgrad", None, 3, 4), ("mimelite-lamb", "amsgrad", 1, 3, 5)])
def test_engine_fast_equals_readable(name, base, rows, seeds, max_batch, monkeypatch):
    """A few rounds in the engine (one to three seeds, i.e. replicas; uneven clients: masked
    steps; 3 participants a replica, in one chunk or chunks of 4 or 5 rows that mix
    replicas; one block per replica run or blocks of 2 or 1 rows) with the fast form on and
    off give the same trajectory of server models and states. The fast form never gathers
    the server state per participant; the readable rule does (the count can see it).
    Chunks mix clients of unequal step counts whatever their fill (``CHUNK_FILL = 0``), so
    the masked steps happen."""
    from sims.core import batching
    monkeypatch.setattr(batching, "CHUNK_FILL", 0.0)
    problem = tiny_uneven_problem()
    out, calls, gathered = {}, [], []
    fast = MimeLite._frozen_step_fast
    monkeypatch.setattr(MimeLite, "_frozen_step_fast",
                        lambda self, *a, **k: calls.append(a[3] is not None) or fast(self, *a, **k))
    gather = engine._ParticipantRows.__getitem__
    monkeypatch.setattr(engine._ParticipantRows, "__getitem__",
                        lambda self, key: gathered.append(key) or gather(self, key))
    for on in (True, False):
        alg = _rows_per_block(make_for_problem(name, problem, base=base), rows, problem.d)
        alg.fast_frozen = on
        calls.clear()
        gathered.clear()
        res = engine.run(problem, alg, Participation("fixed", m=3), 3, list(range(seeds)),
                         eval_every=0, max_batch=max_batch)
        out[on] = res.server
        assert (len(calls) > 0) == on
        assert bool(STATE_KEYS & set(gathered)) != on
        if on:
            assert any(calls) and not all(calls)            # masked and unmasked steps
    for r in range(seeds):                                  # every replica moved
        assert not torch.equal(out[True]["theta"][r], problem.init_theta(r))
    torch.testing.assert_close(out[True]["theta"], out[False]["theta"], **TOL)
    for k in out[False]["s"]:
        torch.testing.assert_close(out[True]["s"][k], out[False]["s"][k], **TOL)

"""Fed-EF's error rows read and written where they are (issue 16): TopK's one-kernel error
feedback (sims.accel.native.topk.ef_topk) reading the participants' error rows through a table of
row addresses and writing the residual over them in place (sims.row_source.SlotRows), stale
rows (error restarting) read as the shared zero row. Held to the gathered form bit for bit:
the kernel's table path against its strided path, the algorithm's message and state, and
whole engine runs with the in-place rows on and off (FedEF.error_rows_in_place)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.core import engine
from sims.accel import native
from sims.algorithms import fed_ef as fed_ef_module
from sims.algorithms.base import RoundContext
from sims.algorithms.fed_ef import FedEF
from sims.algorithms.registry import make_for_problem
from sims.rules.compress import Sign, TopK, error_feedback, kept_count
from sims.core.engine import _ClientRows
from sims.problems.models import MLP
from sims.accel.native import topk as native_topk
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.privacy.mechanism import Private
from sims.problems import NeuralProblem
from sims.experiments.probes.observer import Probe
from sims.row_source import SlotRows, ZeroRows
from conftest import assert_same_runs, random_dataset
from test_native_topk import _check
from test_native_topk_paths import FORMS, SIMD, _rows, form, with_forms  # noqa: F401

needs_kernel = pytest.mark.skipif(SIMD is None, reason="C kernels off or not built")
LAYOUT = ParamLayout(("w", "b", "v"), ((100, 200), (37,), (17000,)))


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _storage(N, dtype, seed):
    """Client-state rows ``[N, d]`` with NaN-free values and a few ties after the sum."""
    s = torch.randn(N, LAYOUT.d, generator=_gen(seed), dtype=dtype) * 1e-2
    s[1] = torch.randint(-2, 3, (LAYOUT.d,), generator=_gen(seed + 1)).to(dtype)
    return s


def _strided(x, e, k=0.01, zero=None):
    """The strided kernel on gathered tensors, stale rows masked_fill-ed first: what the
    table path must equal."""
    if zero is not None:
        e = e.masked_fill(zero.unsqueeze(-1), 0.0)
    outs = tuple(torch.empty_like(x) for _ in range(3))
    blocks = LAYOUT.slices
    ks = [kept_count(k, s) for s in LAYOUT.sizes]
    assert native_topk.ef_topk(x, e, blocks, ks, outs)
    return [t.nan_to_num(7.0) for t in outs]


def _table(x, error, err, zero=None, k=0.01):
    target, msg = torch.empty_like(x), torch.empty_like(x)
    ks = [kept_count(k, s) for s in LAYOUT.sizes]
    before = native.calls.get("ef_topk", 0)
    ok = native_topk.ef_topk(x, error, LAYOUT.slices, ks, (target, msg, err), zero)
    assert ok and native.calls.get("ef_topk", 0) == before + 1
    return target, msg


# ----------------------------------------------------------------------------- the kernel

@with_forms
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("restart", [False, True])
def test_in_place_rows_equal_the_gathered_kernel(form, dtype, restart):
    """The error read from the participants' rows of a client-state tensor (out of order,
    not all of them) and the residual written over the same rows: target, message and the
    rows' new values are the strided kernel's on the gathered copy bit for bit (with ties,
    special values and misleading samples, every vector form); stale rows read zeros, yet
    get their residual; the other rows are untouched."""
    x = _rows(LAYOUT.d, dtype, _gen(21))                       # 13 rows of every kind
    B = x.shape[0]
    storage = _storage(2 * B + 3, dtype, 22)
    slot = torch.randperm(len(storage), generator=_gen(23))[:B]
    zero = (torch.arange(B) % 3 == 1) if restart else None
    gathered = storage[slot].clone()
    want = _strided(x, gathered, zero=zero)
    before = storage.clone()
    rows = SlotRows(storage, slot)
    target, msg = _table(x, rows, rows, zero)
    assert torch.equal(target.nan_to_num(7.0), want[0])
    assert torch.equal(msg.nan_to_num(7.0), want[1])
    assert torch.equal(storage[slot].nan_to_num(7.0), want[2])
    others = torch.ones(len(storage), dtype=torch.bool)
    others[slot] = False
    assert torch.equal(storage[others], before[others])
    for sl, size in zip(LAYOUT.slices, LAYOUT.sizes):            # and it is the rule
        _check(target, msg, sl, kept_count(0.01, size))
    if restart:                                 # the stale rows' target is x itself
        assert torch.equal(target[zero].nan_to_num(7.0), x[zero].nan_to_num(7.0))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_table_reads_and_writes_in_every_combination(dtype):
    """Each side through a table or strided: a tensor error with stale rows (its own rows'
    table), a ZeroRows error, an error read from rows and the residual into a new tensor,
    an error tensor and the residual into rows. Each equals the strided kernel."""
    B = 5
    x = torch.randn(B, LAYOUT.d, generator=_gen(31), dtype=dtype)
    storage = _storage(9, dtype, 32)
    slot = torch.tensor([7, 0, 4, 2, 8])
    e = storage[slot].clone()
    zero = torch.tensor([False, True, True, False, False])
    # a tensor error with stale rows
    res = torch.empty_like(x)
    got = _table(x, e, res, zero)
    assert all(torch.equal(a.nan_to_num(7.0), b)
               for a, b in zip((*got, res), _strided(x, e, zero=zero)))
    # zeros
    res = torch.empty_like(x)
    got = _table(x, ZeroRows(B, LAYOUT.d, dtype, "cpu"), res)
    assert all(torch.equal(a.nan_to_num(7.0), b)
               for a, b in zip((*got, res), _strided(x, torch.zeros_like(x))))
    # rows in, a new tensor out: the rows untouched
    before = storage.clone()
    res = torch.empty_like(x)
    got = _table(x, SlotRows(storage, slot), res)
    assert all(torch.equal(a.nan_to_num(7.0), b)
               for a, b in zip((*got, res), _strided(x, e)))
    assert torch.equal(storage, before)
    # a tensor in, rows out
    other = torch.full_like(storage, float("nan"))
    got = _table(x, e, SlotRows(other, slot))
    want = _strided(x, e)
    assert all(torch.equal(a.nan_to_num(7.0), b) for a, b in zip(got, want))
    assert torch.equal(other[slot].nan_to_num(7.0), want[2])
    assert torch.isnan(other[[1, 3, 5, 6]]).all()
    # a plain tensor written over in place (err is error: the kernel's in-place stores)
    mine = e.clone()
    got = _table(x, mine, mine)
    assert all(torch.equal(a.nan_to_num(7.0), b)
               for a, b in zip((*got, mine), _strided(x, e)))


@needs_kernel
@pytest.mark.parametrize("threads", [2, 3])
def test_in_place_rows_split_over_threads_agree(threads, monkeypatch):
    x = _rows(LAYOUT.d, torch.float32, _gen(41))
    storage = _storage(20, torch.float32, 42)
    slot = torch.randperm(20, generator=_gen(43))[:len(x)]
    zero = torch.arange(len(x)) % 4 == 0
    one_store = storage.clone()
    rows = SlotRows(one_store, slot)
    one = _table(x, rows, rows, zero)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    rows = SlotRows(storage, slot)
    many = _table(x, rows, rows, zero)
    assert all(torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) for a, b in zip(one, many))
    assert torch.equal(storage.nan_to_num(7.0), one_store.nan_to_num(7.0))


@needs_kernel
def test_unsafe_or_unusable_tables_are_refused():
    """Nothing written (False) where the residual rows would overlap another operand, other
    rows of the error's own storage, a row source that is not own rows, a bad mask or a
    dtype the kernel does not take."""
    B, d = 3, LAYOUT.d
    x = torch.randn(B, d, generator=_gen(51))
    storage = torch.randn(6, d, generator=_gen(52))
    slot = torch.tensor([4, 1, 3])
    ks = [kept_count(0.01, s) for s in LAYOUT.sizes]
    before = storage.clone()

    def call(error, err, zero=None, delta=x):
        outs = (torch.empty_like(delta), torch.empty_like(delta), err)
        return native_topk.ef_topk(delta, error, LAYOUT.slices, ks, outs, zero)
    rows = SlotRows(storage, slot)
    assert not call(rows, SlotRows(storage, torch.tensor([0, 2, 5])))   # other rows
    assert not call(x.clone(), SlotRows(x, torch.tensor([0, 1, 2])))     # over delta
    assert not call(rows, ZeroRows(B, d, torch.float32, "cpu"))          # not own rows
    assert not call(rows, rows, torch.tensor([1, 0, 1]))                 # not a bool mask
    assert not call(rows, rows, torch.tensor([True, False]))             # wrong length
    assert not call(SlotRows(storage.double(), slot), torch.empty(B, d))  # dtypes differ
    assert torch.equal(storage, before)


# ----------------------------------------------------------------------------- the algorithm

def _ctx(B, t, last, rep):
    return RoundContext(t, LAYOUT, rep, torch.arange(B), torch.as_tensor(last))


@pytest.mark.parametrize("comp", [TopK(0.01), TopK(0.05, scope="model"), Sign()], ids=repr)
@pytest.mark.parametrize("native_on", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_client_message_on_the_engines_rows(comp, native_on, dtype, monkeypatch):
    """Fed-EF's client_message on the engine's view of the client state (two replicas'
    rows, error restarting with stale rows): the same message, compress_in and new error
    bits as on the gathered rows; where TopK's kernel takes the step the new state is the
    very rows (nothing to write back), else a new tensor (Sign, the kernel off) and the
    rows untouched."""
    monkeypatch.setattr(TopK, "native", native_on)
    R, n, B, t = 2, 4, 5, 6
    cstate = {"error": _storage(R * n, dtype, 61).view(R, n, LAYOUT.d).clone()}
    rep = torch.tensor([0, 0, 1, 1, 1])
    cli = torch.tensor([3, 1, 0, 2, 3])
    slot = rep * n + cli
    delta = torch.randn(B, LAYOUT.d, generator=_gen(62), dtype=dtype)
    last = [t - 1, 2, -1, t - 3, t - 2]            # stale (last < t - S = 4): rows 1, 2
    alg = FedEF(1.0, 0.1, comp, restart_period=2, restart_start=3)
    gathered = cstate["error"].flatten(0, 1)[slot].clone()
    want = alg.client_message(delta, None, {"error": gathered}, _ctx(B, t, last, rep))
    before = cstate["error"].clone()
    msg, new, aux = alg.client_message(delta, None, _ClientRows(cstate, slot),
                                       _ctx(B, t, last, rep))
    assert torch.equal(msg, want[0]) and torch.equal(aux["compress_in"], want[2]["compress_in"])
    in_place = native_on and isinstance(comp, TopK) and native.usable(delta)
    assert isinstance(new["error"], SlotRows) == in_place
    if in_place:
        assert new["error"].same_rows(cstate["error"].flatten(0, 1), slot)
        assert torch.equal(cstate["error"].flatten(0, 1)[slot], want[1]["error"])
        others = torch.ones(R * n, dtype=torch.bool)
        others[slot] = False
        assert torch.equal(cstate["error"].flatten(0, 1)[others], before.flatten(0, 1)[others])
    else:
        assert torch.equal(new["error"], want[1]["error"])
        assert torch.equal(cstate["error"], before)
    stale = torch.tensor([False, True, True, False, False])
    assert torch.equal(want[2]["compress_in"][stale], delta[stale])


def test_error_feedback_gathers_rows_where_no_kernel_takes_them(monkeypatch):
    """compress.error_feedback with a SlotRows error and no fused form (Sign; TopK with the
    kernel off): the rows gathered, stale rows zeroed, a new residual, the rows untouched."""
    storage = _storage(6, torch.float64, 71)
    slot = torch.tensor([5, 0, 2])
    x = torch.randn(3, LAYOUT.d, generator=_gen(72), dtype=torch.float64)
    zero = torch.tensor([False, True, False])
    before = storage.clone()
    e = storage[slot].masked_fill(zero.unsqueeze(-1), 0.0)
    monkeypatch.setattr(TopK, "native", False)
    for comp in (Sign(), TopK(0.01)):
        target, msg, res = error_feedback(comp, x, SlotRows(storage, slot), LAYOUT, zero=zero)
        assert torch.equal(target, x + e) and torch.equal(msg, comp(x + e, LAYOUT))
        assert torch.equal(res, target - msg) and torch.equal(storage, before)


# ----------------------------------------------------------------------------- the engine

def _float32_problem(clients=6, per=40):
    data = random_dataset(clients * per, 28, seed=2)
    parts = list(np.arange(clients * per).reshape(clients, per))
    return NeuralProblem(data, parts, MLP(784, hidden=40), batch_size=32)


@pytest.fixture(scope="module")
def f32_problem():
    return _float32_problem()


def _run(prob, alg, on, monkeypatch, rounds=5, seeds=(0, 1), **kw):
    """An engine run with the in-place rows on or off; also how many client messages there
    were and how many error feedbacks got the rows and handed them back (in place)."""
    monkeypatch.setattr(FedEF, "error_rows_in_place", on)
    counts = {"messages": 0, "in_place": 0}
    real, real_message = fed_ef_module.error_feedback, FedEF.client_message

    def spy(comp, x, error, *a, **k):
        out = real(comp, x, error, *a, **k)
        counts["in_place"] += isinstance(error, SlotRows) and out[2] is error
        return out

    def message(self, *a, **k):
        counts["messages"] += 1
        return real_message(self, *a, **k)
    monkeypatch.setattr(fed_ef_module, "error_feedback", spy)
    monkeypatch.setattr(FedEF, "client_message", message)
    out = engine.run(prob, alg, Participation("fixed", m=3), rounds, list(seeds),
                     eval_every=0, **kw)
    monkeypatch.undo()
    return out, counts


def _restarts(out, S):
    """How many participations found a stale error (last < t - S)."""
    hits = 0
    for rounds in out.participants:
        last = {}
        for t, ids in enumerate(rounds):
            for c in ids.tolist():
                hits += c in last and last[c] < t - S
                last[c] = t
    return hits


def _same_runs(on, off):
    assert_same_runs(on, off, metrics=True)


CASES = {
    "sgd-restart": ("fed-ef-sgd", dict(restart_period=1, restart_start=1)),
    "ams": ("fed-ef-ams", {}),
    "ams-restart-two-way": ("fed-ef-ams", dict(restart_period=1, restart_start=2,
                                               two_way=True)),
    "sgd-model-scope": ("fed-ef-sgd", dict(scope="model", compressor="topk-0.05")),
}


@needs_kernel
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_engine_runs_with_the_rows_in_place_on_and_off_agree(case, dtype, mlp_problem,
                                                             f32_problem, monkeypatch):
    """Whole runs (two replicas, 3 of 5-6 clients a round; float64: unequal clients in
    chunks of 2; float32: one chunk): the same server models and optimizer state, client
    errors and metrics (qA2 from the summed compress_in) bit for bit with the rows in place
    and gathered; in place every client error feedback took the rows, and error restarting
    found stale rows."""
    name, hyper = CASES[case]
    prob = mlp_problem if dtype == "float64" else f32_problem
    alg = make_for_problem(name, prob, **hyper)
    kw = dict(max_batch=2) if dtype == "float64" else {}
    on, took_on = _run(prob, alg, True, monkeypatch, **kw)
    off, took_off = _run(prob, alg, False, monkeypatch, **kw)
    _same_runs(on, off)
    assert took_off["in_place"] == 0 and took_off["messages"] > 0
    assert took_on["in_place"] == took_on["messages"] == took_off["messages"]
    if "restart" in case:
        assert _restarts(on, hyper["restart_period"]) > 0
    assert np.isfinite(on.metrics["qA2"]).all()
    assert not torch.equal(on.client_state["error"], torch.zeros_like(on.client_state["error"]))


@pytest.mark.parametrize("variant", ["native-off", "sign", "dp", "probe"])
def test_other_paths_with_the_rows_in_place_on_and_off_agree(variant, mlp_problem,
                                                             monkeypatch):
    """What the kernel does not take keeps working with the switch on: the C kernels off
    (gathered rows, the torch TopK), a compressor without a fused form (Sign), the DP
    wrapper (clipping the message and compress_in; noise), the probes' dry run of
    client_message on a plain dict: the same bits on and off (float64, restarting)."""
    prob = mlp_problem
    hyper = dict(restart_period=1, restart_start=1)
    if variant == "sign":
        hyper["compressor"] = "sign"
    alg = make_for_problem("fed-ef-sgd", prob, **hyper)
    kw = {}
    if variant == "dp":
        alg = Private(alg, clip=0.5, noise_multiplier=0.3)
    if variant == "probe":
        kw["observers"] = [Probe(every=2, n_clients_sampled=2, minibatches=2, hvp_iters=0,
                                 secant=False)]
    was = native.enabled()
    if variant == "native-off":
        native.enable(False)
    try:
        on, took_on = _run(prob, alg, True, monkeypatch, rounds=4, **kw)
        off, _ = _run(prob, alg, False, monkeypatch, rounds=4, **kw)
    finally:
        native.enable(was)
    _same_runs(on, off)
    kernel = variant in ("dp", "probe") and SIMD is not None
    if variant == "probe":              # the probe's own calls, on a plain dict, gather
        assert 0 < took_on["in_place"] < took_on["messages"] or SIMD is None
        assert np.isfinite(on.metrics["probe_qA2"]).all()
    else:
        assert took_on["in_place"] == (took_on["messages"] if kernel else 0)

"""Row sources (sims.row_source): rows a kernel reads where they are. Each is held to the
tensor it stands for: the sources themselves, the C kernel reading and writing through them
(bit for bit against the same step on gathered tensors), the MLP gradient at the server rows,
the per-replica sums of scaled rows, and whole engine runs with row sources on and off."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.core import engine
from sims.accel import native
from sims.algorithms.adaptive import LocalAdaptive
from sims.algorithms.registry import make_for_problem
from sims.core.batching import start_minus
from sims.problems.models import MLP
from sims.accel.native.adaptive import local_adaptive_step
from sims.rules.optim import TrustRatio
from sims.ownership import EVERYTHING, NOTHING, Owned
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.problems import NeuralProblem
from sims.problems.mlp_grad import stack_grad
from conftest import assert_same_runs, random_dataset
from sims.row_source import (DeltaRequest, ScaledRows, ServerRows, SlotRows, ZeroRows,
                             materialized, materialized_state, row_addresses)

LAYOUT = ParamLayout.from_module(MLP(6, 5, 3))
needs_native = pytest.mark.skipif(not native.usable(torch.zeros(1)),
                                  reason="the C kernels are not built here")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------ the sources

def test_sources_materialize_and_address_their_rows():
    g = _gen(0)
    server = torch.randn(3, 7, generator=g, dtype=torch.float64)
    rep = torch.tensor([0, 0, 2, 1])
    rows = ServerRows(server, rep)
    assert rows.shape == (4, 7) and torch.equal(rows.materialize(), server[rep])
    assert (rows.addresses() - server.data_ptr()).tolist() == [0, 0, 2 * 56, 56]
    storage = torch.randn(6, 7, generator=g)
    slot = torch.tensor([5, 0, 3])
    own = SlotRows(storage, slot)
    assert torch.equal(own.materialize(), storage[slot])
    assert (own.addresses() - storage.data_ptr()).tolist() == [5 * 28, 0, 3 * 28]
    assert own.same_rows(storage, slot.clone()) and not own.same_rows(storage, slot.flip(0))
    assert not own.same_rows(storage.clone(), slot)
    zero = ZeroRows(4, 7, torch.float32, "cpu")
    assert torch.equal(zero.materialize(), torch.zeros(4, 7))
    assert zero.addresses().unique().tolist() == [zero.zero_row().data_ptr()]
    plain = torch.zeros(3, 4)
    assert row_addresses(plain).diff().tolist() == [16, 16]
    assert row_addresses(plain.T) is None
    scaled = ScaledRows(own, torch.tensor([1.0, 2.0, -1.0]))
    assert torch.equal(materialized(scaled), storage[slot] * torch.tensor([[1.0], [2.0], [-1.0]]))
    with pytest.raises(ValueError, match="2 scales for 3 rows"):
        ScaledRows(own, torch.ones(2))
    assert materialized_state({"a": plain}) == {"a": plain}


@pytest.mark.parametrize("R", [2, 70])            # the one-hot product, and index_add_
@pytest.mark.parametrize("kind", ["tensor", "slot"])
def test_per_replica_sums_of_scaled_rows(R, kind):
    g = _gen(R)
    B, d = 5, 9
    storage = torch.randn(8, d, generator=g, dtype=torch.float64)
    slot = torch.tensor([6, 1, 2, 7, 4])
    rep = torch.tensor([0, 0, 1, 1, 1])
    scale = torch.rand(B, generator=g, dtype=torch.float64) + 0.5
    rows = SlotRows(storage, slot) if kind == "slot" else storage[slot]
    want = torch.zeros(R, d, dtype=torch.float64)
    want.index_add_(0, rep, storage[slot] * scale[:, None])
    for value, expect in ((ScaledRows(rows, scale), want), (rows, None)):
        total = torch.zeros(R, d, dtype=torch.float64)
        engine._add_per_replica(total, rep, value)
        if expect is None:
            expect = torch.zeros(R, d, dtype=torch.float64).index_add_(0, rep, storage[slot])
        torch.testing.assert_close(total, expect, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------------------ the C kernel

def _case(dtype, seed=0):
    g = _gen(seed)
    B, R, d = 5, 2, LAYOUT.d
    rep = torch.tensor([0, 0, 0, 1, 1])
    server = torch.randn(R, d, generator=g, dtype=dtype)
    vhat_server = torch.rand(R, d, generator=g, dtype=dtype) + 0.1
    storage_m = torch.randn(9, d, generator=g, dtype=dtype)
    storage_v = torch.rand(9, d, generator=g, dtype=dtype)
    slot = torch.tensor([7, 2, 0, 4, 8])
    grad = torch.randn(B, d, generator=g, dtype=dtype)
    n = torch.tensor([3.0, 0.0, 1.0, 5.0, 2.0], dtype=dtype)
    return dict(B=B, d=d, rep=rep, server=server, vhat_server=vhat_server, storage_m=storage_m,
                storage_v=storage_v, slot=slot, grad=grad, n=n)


RULES = {
    "fed-ams": LocalAdaptive("amsgrad", bias_correction=True),
    "fed-lamb": LocalAdaptive("amsgrad", bias_correction=True, trust=TrustRatio("clip", 1e-3,
                                                                                 10.0, 0.0)),
    "amsgrad-round": LocalAdaptive("amsgrad", vhat="round", eps=1e-8),
    "localadam": LocalAdaptive("adam", bias_correction=True, weight_decay=0.01,
                               wd_mode="decoupled"),
}


@needs_native
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", sorted(RULES))
def test_kernel_through_row_sources_equals_gathered(name, dtype, masked):
    """A round's first step from the server rows (theta, vhat), the clients' own m and v rows
    in place and a zero m, and the same step again as the last one writing the delta: the
    same bits as the kernel on gathered tensors; the storage's other rows untouched."""
    rule, c = RULES[name], _case(dtype)
    mask = torch.tensor([True, False, True, True, False]) if masked else None
    for zero_m in (False, True):
        sm, sv = c["storage_m"].clone(), c["storage_v"].clone()
        sources = {"m": ZeroRows(c["B"], c["d"], dtype, "cpu") if zero_m
                   else SlotRows(sm, c["slot"]),
                   "v": SlotRows(sv, c["slot"]),
                   "vhat": ServerRows(c["vhat_server"], c["rep"]),
                   "n": c["n"], "nm": c["n"], "k": torch.zeros(c["B"], dtype=dtype)}
        gathered = materialized_state(sources)
        theta = ServerRows(c["server"], c["rep"])
        owned = Owned(False, frozenset({"m", "v"}))
        th_s, st_s = local_adaptive_step(rule, theta, c["grad"], sources, 0.05, LAYOUT,
                                         owned=owned, mask=mask)
        th_g, st_g = local_adaptive_step(rule, materialized(theta), c["grad"], gathered, 0.05,
                                         LAYOUT, owned=owned, mask=mask)
        assert torch.equal(th_s, th_g)
        for k in st_g:
            assert torch.equal(materialized(st_s[k]), materialized(st_g[k])), k
        if not zero_m:                         # written in place, the rows handed back
            assert st_s["m"] is sources["m"] and torch.equal(sm[c["slot"]], st_g["m"])
        assert st_s["v"] is sources["v"] and torch.equal(sv[c["slot"]], st_g["v"])
        others = [i for i in range(9) if i not in c["slot"].tolist()]
        assert torch.equal(sv[others], c["storage_v"][others])
        assert torch.equal(materialized(sources["vhat"]), c["vhat_server"][c["rep"]])
        # the last step: the delta, masked rows too (server - their theta)
        request = DeltaRequest(ServerRows(c["server"], c["rep"]))
        grad2 = torch.sin(th_g)
        d_s, _ = local_adaptive_step(rule, th_s, grad2, materialized_state(st_s), 0.05, LAYOUT,
                                     owned=EVERYTHING, mask=mask, delta_from=request.rows)
        th2, _ = local_adaptive_step(rule, th_g.clone(), grad2, materialized_state(st_g), 0.05,
                                     LAYOUT, owned=NOTHING, mask=mask)
        assert torch.equal(d_s, start_minus(c["server"], c["rep"], th2))


# ------------------------------------------------------------------------------ the gradient

def _float32_problem(hidden=64, clients=6, per=40):
    data = random_dataset(clients * per, 28, seed=2)
    parts = list(np.arange(clients * per).reshape(clients, per))
    return NeuralProblem(data, parts, MLP(784, hidden=hidden), batch_size=32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_at_server_rows_equals_gathered(dtype, mlp_problem):
    """stack_grad at a ServerRows theta (the first weight read per client from the server
    rows where its forward is per-client oneDNN products) is the gradient at the gathered
    copy, bit for bit."""
    prob = _float32_problem() if dtype == torch.float32 else mlp_problem
    g = _gen(3)
    server = torch.randn(2, prob.layout.d, generator=g, dtype=dtype) * 0.05
    rep = torch.tensor([0, 1, 1])
    x = torch.randn(3, 32, 1, 28, 28, generator=g, dtype=dtype)
    y = torch.randint(0, 10, (3, 32), generator=g)
    w = torch.ones(3, 32, dtype=dtype)
    w[2, 20:] = 0
    for defer in (False, True):
        at_rows = materialized(stack_grad(ServerRows(server, rep), prob.layout, x, y, w,
                                          defer=defer))
        at_copy = materialized(stack_grad(server[rep], prob.layout, x, y, w, defer=defer))
        assert torch.equal(at_rows, at_copy)


# ------------------------------------------------------------------------------ the engine

def _run(prob, name, sources_on, monkeypatch, seeds=(0, 1), **hyper):
    alg = make_for_problem(name, prob, **hyper)
    if not sources_on:
        monkeypatch.setattr(type(alg), "takes_row_sources", property(lambda self: False))
    subtractions = []
    real = engine.start_minus
    monkeypatch.setattr(engine, "start_minus",
                        lambda *a, **k: subtractions.append(1) or real(*a, **k))
    out = engine.run(prob, alg, Participation("fixed", m=3), 3, list(seeds), eval_every=0)
    monkeypatch.undo()
    return out, len(subtractions)


@needs_native
@pytest.mark.parametrize("name,hyper", [("fed-ams", {}), ("fed-lamb", {}), ("fedlada", {}),
                                        ("localadam", {}), ("fed-ams", {"persist_m": False}),
                                        ("fedlada", {"v_init": "zero"}), ("mimelite", {}),
                                        ("mimelite-lamb", {}), ("dja", {}),
                                        ("joint-adaptive", {}), ("fedadaadam", {}),
                                        ("fedada2", {}), ("fedada2-adam", {})])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_engine_runs_with_and_without_row_sources_agree(mlp_problem, monkeypatch, name, hyper,
                                                        dtype):
    """Whole runs (two replicas; float64: unequal clients, masked last steps; float32: the
    oneDNN gradient): the same server models and client state bit for bit, and with row
    sources the engine subtracts no delta on equal clients (the last steps wrote it)."""
    prob = mlp_problem if dtype == "float64" else _float32_problem(hidden=40)
    on, subtracted_on = _run(prob, name, True, monkeypatch, **hyper)
    off, subtracted_off = _run(prob, name, False, monkeypatch, **hyper)
    assert subtracted_off > 0
    if dtype == "float32":              # equal clients: every chunk's last step wrote it
        assert subtracted_on == 0
    assert_same_runs(on, off)
    assert not torch.equal(on.server["theta"][0], prob.init_theta(0).to(on.server["theta"]))


@needs_native
@pytest.mark.parametrize("trust", [None, TrustRatio("clip", 1e-3, 10.0, 0.0),
                                   TrustRatio("clip", 1e-3, 10.0, 0.1)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_frozen_kernel_from_server_rows_and_writing_the_delta(dtype, trust):
    """MimeLite's frozen step (sims.accel.native.frozen) from the server rows where they are, and
    writing the delta: the same bits as from the gathered copy, and as server - theta'."""
    from sims.core.batching import replica_runs
    from sims.accel.native.frozen import frozen_step
    c = _case(dtype, seed=4)
    g = _gen(5)
    m, p, q = (torch.rand(2, c["d"], generator=g, dtype=dtype) + 0.1 for _ in range(3))
    runs = replica_runs(c["rep"])
    args = (c["grad"], m, p, q, runs, 0.05, 0.9, 0.999)
    kw = dict(trust=trust, layout=LAYOUT)
    start = ServerRows(c["server"], c["rep"])
    gathered = frozen_step(materialized(start), *args, **kw)
    assert torch.equal(frozen_step(start, *args, **kw), gathered)
    delta = frozen_step(start, *args, delta_from=start, **kw)
    assert torch.equal(delta, start_minus(c["server"], c["rep"], gathered))
    theta = gathered.clone()                   # a later step, in place, writing the delta
    want = start_minus(c["server"], c["rep"], frozen_step(theta.clone(), *args, **kw))
    assert torch.equal(frozen_step(theta, *args, out=theta, delta_from=start, **kw), want)

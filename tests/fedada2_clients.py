"""Shared by the tests of FedAda2's fast client steps (``tests/test_torch_fused.py``,
``tests/test_fedada2_fast_step.py``): a client part-way through a round and a few of its
local steps held to the readable rule."""
from __future__ import annotations

import torch

from sims import torch_fused
from sims.accel import native
from sims.algorithms.base import RoundContext
from sims.row_source import materialized

B = 4
STEPS = torch.tensor([0.0, 1.0, 3.0, 7.0], dtype=torch.float64)    # rows' steps so far
TOL = dict(rtol=1e-12, atol=1e-13)


def client_ctx(layout, owned, n=B, clients=None):
    ctx = RoundContext(2, layout, torch.zeros(n, dtype=torch.long),
                       torch.arange(n) if clients is None else clients, torch.full((n,), -1))
    ctx.extra["owned_state"] = owned
    return ctx


def client_start(alg, layout, gen):
    """A client state part-way through a round: rows at steps 0, 1, 3, 7, nonzero moments."""
    theta = torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    bcast = {"theta": theta}
    if alg.init == "server":
        bcast["pre"] = torch.rand(B, layout.d, generator=gen, dtype=torch.float64)
    # (local_start's row sources, sims.row_source, as the tensors they stand for)
    st = {k: materialized(v) for k, v in alg.local_start(bcast, {}, client_ctx(layout, False))
          .items()}
    st["k"] = STEPS.clone()
    if alg.client == "sgd":
        return theta, bcast, st
    st["mu"] = st["mu"] + torch.rand(st["mu"].shape, generator=gen, dtype=torch.float64)
    st["nu"] = alg.cover(layout).cover_min(st["mu"])
    if "m" in st:
        st["m"] = 0.1 * torch.randn(B, layout.d, generator=gen, dtype=torch.float64)
    return theta, bcast, st


def assert_states(got, want):
    """The same entries and values (a row source, :mod:`sims.row_source`, by the tensor it
    stands for: a blend member that has not stepped keeps its ``local_start``'s)."""
    assert set(got) == set(want)
    for key in want:
        torch.testing.assert_close(materialized(got[key]), want[key], **TOL)


def steps_against_reference(alg, layout, gen, mask=None, steps=3, grads=None):
    """``steps`` local steps of ``alg.local_step`` (the first not owned) and of the readable
    rule from :func:`client_start`, the gradients drawn from ``grads`` (default: ``gen``);
    checks the first step left its inputs alone and the two agree after every step; returns
    the number of kernel calls made (torch's fused kernels and the C kernel
    :mod:`sims.accel.native.sm3`; :func:`kernel_calls` tells them apart)."""
    grads = gen if grads is None else grads
    theta, bcast, st = client_start(alg, layout, gen)
    inputs = (theta.clone(), {k: v.clone() for k, v in st.items()})
    th_f, st_f, th_r, st_r = theta, st, theta, st
    before = sum(kernel_calls())
    for step in range(steps):
        g = torch.randn(B, layout.d, generator=grads, dtype=torch.float64)
        ctx = client_ctx(layout, step > 0)
        th_f, st_f = alg.local_step(th_f, g, st_f, bcast, {}, mask, ctx)
        if step == 0:
            assert torch.equal(theta, inputs[0])
            assert all(torch.equal(st[k], inputs[1][k]) for k in st)
        th_r, st_r = alg.reference_local_step(th_r, g, st_r, bcast, {}, mask, ctx)
        torch.testing.assert_close(th_f, th_r, **TOL)
        assert_states(st_f, st_r)
    return sum(kernel_calls()) - before


def kernel_calls() -> tuple[int, int]:
    """``(torch, native)``: the calls so far of torch's fused kernels and of the SM3-II C
    kernel (:func:`sims.accel.native.sm3.sm3_step`)."""
    return sum(torch_fused.calls.values()), native.calls.get("sm3_step", 0)

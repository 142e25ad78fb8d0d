"""oneDNN products in the fused local-SGD paths (issue 16): the Gram path
(:func:`sims.problems.gram_sgd.gram_sgd_delta`, its two per-client products with the
client's whole data) and the fused step (:func:`sims.problems.linear_stack.sgd_step_`, a
large layer's forward product and weight update), by the shared rule and wrapper of
:mod:`sims.problems.onednn`.

The oneDNN branch (float32 on the CPU only; forced on the tiny test model by lowering the
size threshold, its calls counted) is held to the float64 reference at float32 rounding;
float64 never calls it and gives the reference bit for bit; through the engine, float32
runs with oneDNN on and off stay within float32 rounding of each other, relative to how far
the model moved.
"""
from __future__ import annotations

import pytest
import torch

from sims.algorithms.registry import make_for_problem
from sims.core.engine import run
from sims.problems.models import MLP
from sims.core.participation import Participation
from sims.problems import onednn
from sims.problems.linear_stack import linear_stack_sgd_
from sims.problems.onednn import onednn_available
from sims.problems.neural import NeuralProblem

from conftest import plan_payload, stepwise_sgd_delta, unequal_parts

needs_onednn = pytest.mark.skipif(not onednn_available(torch.zeros(1)),
                                  reason="no oneDNN on this build")
CLIENTS = [4, 0, 2, 3, 1]
REP = [0, 0, 1, 1, 0]


def _problem(image_data, dtype, gram_path, **kw):
    kw = {"batch_size": 4, **kw}
    return NeuralProblem(image_data, unequal_parts(), MLP(784, hidden=6), dtype=dtype,
                         gram_path=gram_path, **kw)


@pytest.fixture
def calls(onednn_calls):
    """Every oneDNN product counted, and every layer large enough to take it."""
    return onednn_calls


def _rel(a, b):
    return float((a.double() - b.double()).abs().max()) / float(b.abs().max())


def _server(prob):
    return torch.stack([prob.init_theta(s) for s in range(2)])


@needs_onednn
@pytest.mark.parametrize("gram_path", [True, False])
def test_onednn_branch_matches_float64_reference(image_data, calls, gram_path, monkeypatch):
    prob64 = _problem(image_data, torch.float64, gram_path, local_epochs=2)
    prob32 = _problem(image_data, torch.float32, gram_path, local_epochs=2)
    assert prob64.gram_path == prob32.gram_path == gram_path
    payload = plan_payload(prob64, CLIENTS)
    B, S = payload.shape[:2]
    rep, clients, server = torch.as_tensor(REP), torch.as_tensor(CLIENTS), _server(prob64)
    want = stepwise_sgd_delta(prob64, server, rep, payload, 0.3)
    assert not calls                                      # float64: never oneDNN
    got = prob32.local_sgd_delta(server.float(), rep, clients, payload, 0.3)
    # Gram: X [W0, b0]^T and G^T X per client, then the tail layer's forward and update
    # per step; direct: both layers' forward and update per step
    assert len(calls) == (2 * B + 2 * B * S if gram_path else 4 * B * S)
    assert want.abs().max() > 0
    assert _rel(got, want) < 1e-5
    calls.clear()
    monkeypatch.setattr(onednn, "ONEDNN_ENABLED", False)    # the bmm reference
    off = prob32.local_sgd_delta(server.float(), rep, clients, payload, 0.3)
    assert not calls and _rel(off, want) < 1e-5


@needs_onednn
@pytest.mark.parametrize("decay", [0.1, "per-client"])
def test_onednn_step_with_decay_and_shift(image_data, calls, decay):
    """The fused step with linear extras (``keep`` a number or per client, a shift, a
    client masked at one step) through oneDNN against the same in float64."""
    prob64 = _problem(image_data, torch.float64, False)
    payload = plan_payload(prob64, CLIENTS)
    B, S = payload.shape[:2]
    if decay == "per-client":
        decay = torch.linspace(0.0, 0.2, B, dtype=torch.float64).unsqueeze(1)
    g = torch.Generator().manual_seed(1)
    shift = 1e-3 * torch.randn(B, prob64.d, generator=g, dtype=torch.float64)
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1, 0] = False
    theta = _server(prob64)[torch.as_tensor(REP)].contiguous()
    out = {}
    for dtype in (torch.float64, torch.float32):
        prob = _problem(image_data, dtype, False)
        d = decay.to(dtype) if torch.is_tensor(decay) else decay
        out[dtype] = linear_stack_sgd_(theta.to(dtype).clone(), prob.layout,
                                       lambda k: prob.minibatch(payload[:, k]), S, 0.3, d,
                                       shift.to(dtype), mask)
        assert bool(calls) == (dtype == torch.float32)
    moved = (out[torch.float64] - theta).abs().max()
    assert moved > 1e-2
    assert float((out[torch.float32] - out[torch.float64]).abs().max()) < 1e-5 * moved


def test_float64_takes_the_reference_bit_for_bit(image_data, calls, monkeypatch):
    for gram_path in (True, False):
        prob = _problem(image_data, torch.float64, gram_path)
        payload = plan_payload(prob, CLIENTS)
        args = (_server(prob), torch.as_tensor(REP), torch.as_tensor(CLIENTS), payload, 0.3)
        monkeypatch.setattr(onednn, "ONEDNN_ENABLED", True)
        got = prob.local_sgd_delta(*args)
        monkeypatch.setattr(onednn, "ONEDNN_ENABLED", False)
        ref = prob.local_sgd_delta(*args)
        assert not calls and torch.equal(got, ref)


@needs_onednn
@pytest.mark.parametrize("name,gram_path", [("fed-sgd", True), ("fedavg", False),
                                            ("scaffold", False)])
def test_engine_float32_onednn_on_vs_off(image_data, calls, name, gram_path, monkeypatch):
    out = {}
    for on in (True, False):
        monkeypatch.setattr(onednn, "ONEDNN_ENABLED", on)
        prob = _problem(image_data, torch.float32, gram_path)
        assert prob.gram_path == gram_path
        out[on] = run(prob, make_for_problem(name, prob), Participation("fixed", m=3), 3,
                      [0], eval_every=0).server["theta"]
        assert bool(calls) == on
        calls.clear()
    start = _problem(image_data, torch.float32, gram_path).init_theta(0)
    moved = float((out[False] - start).abs().max())
    assert moved > 1e-3
    assert float((out[True] - out[False]).abs().max()) < 1e-4 * moved


def test_client_gram_feature_major_copy_and_its_bytes(image_data):
    from sims.problems.gram_sgd import ClientGram
    parts = unequal_parts()
    cg = ClientGram(image_data.x_train.float(), parts)
    xT = cg.xT()
    assert xT.is_contiguous() and xT.shape == (5, 784, 20)
    assert torch.equal(xT, cg.x[:, :, :-1].transpose(1, 2)) and cg.xT() is xT
    assert (ClientGram.nbytes(parts, 784, 4, feature_major=True)
            - ClientGram.nbytes(parts, 784, 4)) == xT.numel() * 4

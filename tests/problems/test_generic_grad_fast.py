"""The adaptive algorithms' minibatch gradient (:mod:`sims.problems.mlp_grad`) against the
readable reference :func:`sims.problems.linear_stack.linear_stack_grad` (issue 16).

``stack_grad`` (oneDNN per-client products in float32 on the CPU, ``bmm`` otherwise) and
``stack_grad_pair`` (Mime's gradient and anchor gradient on one gathered minibatch, the
anchor with each replica's shared weights) are held to the reference in float64 at ~1e-12 on
uneven clients with padded and all-padding rows; the oneDNN branch (float32 only: oneDNN
has no float64 matmul) to the float64 reference at float32 rounding; and through the engine,
fast gradient on vs off give the same float64 trajectory for Fed-AMS, MimeLite-LAMB and Mime.

Dropout (``MLPDropout``): the hand-batched gradient takes the problem's masks, which are a
function of the minibatch rows (:meth:`NeuralProblem.dropout_masks`). With those masks it is
held to the reference and the reference to autograd of the masked model in float64; the
masks to ``torch.nn.Dropout``'s law; a run to itself under other chunkings; no fused SGD
runs such a model; ``stoch_grad_pair`` is the two ``stoch_grad`` calls it replaces.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.registry import make_for_problem
from sims.core.engine import run
from sims.problems.models import MLP, LogReg, MLPDropout
from sims.core.participation import Participation
from sims.problems import mlp_grad, onednn
from sims.problems.linear_stack import linear_stack_grad
from sims.problems.mlp_grad import stack_grad, stack_grad_pair
from sims.problems.onednn import onednn_available
from sims.problems.neural import NeuralProblem

from conftest import random_dataset, unequal_parts

SIZES = (5, 9, 14, 20, 14)


def _problem(model, dtype=torch.float64, batch_size=4, **kw):
    data = random_dataset(sum(SIZES), 28, seed=3)
    return NeuralProblem(data, unequal_parts(SIZES), model, batch_size=batch_size,
                         dtype=dtype, **kw)


def _payload(prob):
    """One step's index rows of the 5 clients: full, partial (padding) and all-padding."""
    rng = np.random.default_rng(0)
    rows = [prob.plan_client(rng, c)[-1] for c in range(prob.n_clients)]   # last: partial
    rows[2] = np.full_like(rows[2], -1)                                   # a masked row
    return torch.as_tensor(np.stack(rows))


def _thetas(prob, B, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = prob.init_theta(seed)
    return base + 0.1 * torch.randn(B, prob.d, generator=g, dtype=torch.float64).to(base.dtype)


def _rel(a, b):
    return float((a.double() - b.double()).abs().max()) / float(b.abs().max())


@pytest.mark.parametrize("model", [lambda: MLP(784, hidden=6), lambda: LogReg(784),
                                   lambda: MLP(784, hidden=200)])
def test_stack_grad_equals_reference_float64(model):
    prob = _problem(model())
    payload = _payload(prob)
    x, y, w = prob.minibatch(payload)
    assert w.sum(1).tolist() == [1, 1, 0, 4, 2]     # partial rows, a masked row, a full one
    theta = _thetas(prob, len(payload))
    want = linear_stack_grad(theta, prob.layout, x, y, w)[0]
    got = stack_grad(theta, prob.layout, x, y, w)
    assert _rel(got, want) < 1e-12 and want.abs().max() > 0
    assert torch.equal(got[2], torch.zeros_like(got[2]))          # all padding: gradient 0
    # and as the problem hands it to the engine
    assert _rel(prob.stoch_grad(theta, torch.arange(5), payload), want) < 1e-12


@pytest.mark.parametrize("rep", [[0, 0, 1, 1, 1], [1, 0, 0, 1, 0], [0, 0, 0, 0, 0]])
@pytest.mark.parametrize("model", [lambda: MLP(784, hidden=6), lambda: LogReg(784)])
def test_pair_equals_two_reference_gradients_float64(model, rep):
    """Mime's pair: the model's gradient and the anchor's at ``server[rep]`` (replicas in
    runs, out of order, or one), on the same minibatch."""
    prob = _problem(model())
    payload = _payload(prob)
    x, y, w = prob.minibatch(payload)
    rep = torch.as_tensor(rep)
    server = torch.stack([prob.init_theta(s) for s in range(int(rep.max()) + 1)])
    theta = _thetas(prob, len(rep))
    g, anchor = stack_grad_pair(theta, server, rep, prob.layout, x, y, w)
    assert _rel(g, linear_stack_grad(theta, prob.layout, x, y, w)[0]) < 1e-12
    want = linear_stack_grad(server[rep], prob.layout, x, y, w)[0]
    assert _rel(anchor, want) < 1e-12
    pg, pa = prob.stoch_grad_pair(theta, server, rep, torch.arange(5), payload)
    assert torch.equal(pg, g) and torch.equal(pa, anchor)
    # a client's first step (theta = server[rep]): one evaluation, g - anchor exactly 0
    g0, a0 = prob.stoch_grad_pair(server[rep], server, rep, torch.arange(5), payload,
                                  at_start=True)
    assert torch.equal(a0, anchor) and torch.equal(g0, a0)
    assert g0.data_ptr() != a0.data_ptr()


@pytest.mark.skipif(not onednn_available(torch.zeros(1)), reason="no oneDNN on this build")
def test_onednn_branch_matches_float64_reference(onednn_calls):
    """float32 through oneDNN (threshold lowered so the tiny layers take it; the call is
    counted) against the float64 reference, at float32 rounding."""
    calls = onednn_calls
    prob64 = _problem(MLP(784, hidden=6))
    payload = _payload(prob64)
    x, y, w = prob64.minibatch(payload)
    theta = _thetas(prob64, 5)
    rep = torch.as_tensor([0, 0, 1, 1, 0])
    server = torch.stack([prob64.init_theta(s) for s in range(2)])
    want = linear_stack_grad(theta, prob64.layout, x, y, w)[0]
    want_anchor = linear_stack_grad(server[rep], prob64.layout, x, y, w)[0]
    f32 = [t.float() for t in (theta, x, server)]
    got = stack_grad(f32[0], prob64.layout, f32[1], y, w.float())
    assert len(calls) == 5 + 2 * 5        # first layer's forward, both weight gradients
    assert _rel(got, want) < 1e-5
    g, anchor = stack_grad_pair(f32[0], f32[2], rep, prob64.layout, f32[1], y, w.float())
    assert _rel(g, want) < 1e-5 and _rel(anchor, want_anchor) < 1e-5
    calls.clear()
    assert _rel(stack_grad(f32[0], prob64.layout, f32[1], y, w.float(), onednn=False),
                want) < 1e-5 and not calls


def test_onednn_only_for_float32_on_the_cpu():
    assert not onednn_available(torch.zeros(1, dtype=torch.float64))


@pytest.mark.parametrize("name", ["fed-ams", "mimelite-lamb", "mime"])
def test_engine_trajectory_fast_grad_on_vs_off(name):
    """A few rounds of an adaptive algorithm (Mime: the pair and its full gradients), two
    replicas, uneven clients: the fast gradient and the reference give one trajectory."""
    out = {}
    for fast in (True, False):
        prob = _problem(MLP(784, hidden=6), fast_grad=fast)
        alg = make_for_problem(name, prob)
        out[fast] = run(prob, alg, Participation("fixed", m=3), 3, [0, 1], eval_every=0)
    a, b = out[True].server["theta"], out[False].server["theta"]
    start = _problem(MLP(784, hidden=6)).init_theta(0)
    assert (b[0] - start).abs().max() > 1e-4                   # it trained
    assert torch.allclose(a, b, rtol=0, atol=1e-11 * float(b.abs().max()))


def _masked_autograd(prob, theta, x, y, w, masks):
    """Per-client gradients by autograd of ``fc2(relu(fc1 x) * mask)`` (MLPDropout with its
    dropout replaced by the given mask), the loss ``sum_s w_s CE_s / sum_s w_s``."""
    out = []
    for c in range(len(theta)):
        th = theta[c].clone().requires_grad_(True)
        W1, b1, W2, b2 = prob.layout.unflatten(th).values()
        h = torch.relu(x[c].reshape(len(y[c]), -1) @ W1.T + b1) * masks[0][c]
        losses = torch.nn.functional.cross_entropy(h @ W2.T + b2, y[c], reduction="none")
        loss = (losses * w[c]).sum() / w[c].sum().clamp_min(1)
        out.append(torch.autograd.grad(loss, th)[0] if w[c].sum() > 0
                   else torch.zeros_like(th))
    return torch.stack(out)


def test_dropout_gradient_is_autograd_of_the_masked_model_float64():
    prob = _problem(MLPDropout(784, hidden=6))
    assert prob.fast_path and prob.dropout == 0.5 and not prob.fused_sgd
    payload = _payload(prob)
    x, y, w = prob.minibatch(payload)
    theta = _thetas(prob, len(payload))
    masks = prob.dropout_masks(payload, theta.dtype)
    assert len(masks) == 1 and masks[0].shape == (5, payload.shape[1], 6)
    want = _masked_autograd(prob, theta, x, y, w, masks)
    ref = linear_stack_grad(theta, prob.layout, x, y, w, masks=masks)[0]
    assert _rel(ref, want) < 1e-12 and want.abs().max() > 0
    assert _rel(stack_grad(theta, prob.layout, x, y, w, masks=masks), want) < 1e-12
    # as the problem hands it to the engine (fast and reference gradient), masks included
    got = prob.stoch_grad(theta, torch.arange(5), payload)
    assert _rel(got, want) < 1e-12
    ref_prob = _problem(MLPDropout(784, hidden=6), fast_grad=False)
    assert _rel(ref_prob.stoch_grad(theta, torch.arange(5), payload), want) < 1e-12
    # the masks matter: without them the gradient is another one
    assert _rel(stack_grad(theta, prob.layout, x, y, w), want) > 1e-3


@pytest.mark.skipif(not onednn_available(torch.zeros(1)), reason="no oneDNN on this build")
def test_dropout_gradient_through_onednn_matches_float64(onednn_calls):
    """float32 with masks, every layer through oneDNN (threshold lowered), against the
    float64 masked reference at float32 rounding."""
    prob = _problem(MLPDropout(784, hidden=6))
    payload = _payload(prob)
    x, y, w = prob.minibatch(payload)
    theta = _thetas(prob, 5)
    masks = prob.dropout_masks(payload, torch.float64)
    want = linear_stack_grad(theta, prob.layout, x, y, w, masks=masks)[0]
    got = stack_grad(theta.float(), prob.layout, x.float(), y, w.float(),
                     masks=[m.float() for m in masks])
    assert onednn_calls and _rel(got, want) < 1e-5


def test_dropout_masks_follow_the_minibatch_and_dropouts_law():
    prob = _problem(MLPDropout(784, hidden=6, dropout=0.3), batch_size=8)
    rng = np.random.default_rng(1)
    payload = torch.as_tensor(rng.integers(0, sum(SIZES), (400, 8)))
    m = prob.dropout_masks(payload, torch.float64)[0]
    assert set(torch.unique(m).tolist()) == {0.0, 1 / 0.7}
    kept = (m > 0).double().mean()
    assert abs(float(kept) - 0.7) < 4 * (0.7 * 0.3 / m.numel()) ** 0.5
    assert abs(float(m.mean()) - 1) < 0.02                       # E[mask] = 1
    # a row's masks: the same whoever it is batched with, in any order; other rows differ
    sub = prob.dropout_masks(payload[[7, 3]], torch.float64)[0]
    assert torch.equal(sub[0], m[7]) and torch.equal(sub[1], m[3])
    assert not torch.equal(m[3], m[4])
    # outside training (evaluation) there is no dropout
    prob.model.eval()
    assert prob.dropout_masks(payload, torch.float64) is None
    prob.model.train()


def test_dropout_model_takes_no_fused_sgd_and_pair_is_the_two_calls():
    prob = _problem(MLPDropout(784, hidden=6))
    payload = _payload(prob)
    steps = payload.unsqueeze(1)
    rep = torch.as_tensor([0, 0, 1, 1, 0])
    server = torch.stack([prob.init_theta(s) for s in range(2)])
    assert prob.local_sgd_delta(server, rep, torch.arange(5), steps, 0.1) is None
    assert prob.local_sgd(server[rep], torch.arange(5), steps, 0.1) is None
    assert prob.full_grad_sum(server, rep, torch.arange(5)) is None
    theta = _thetas(prob, 5)
    g, anchor = prob.stoch_grad_pair(theta, server, rep, torch.arange(5), payload)
    assert torch.equal(g, prob.stoch_grad(theta, torch.arange(5), payload))
    assert torch.equal(anchor, prob.stoch_grad(server[rep], torch.arange(5), payload))


@pytest.mark.parametrize("name", ["fed-lamb", "fed-sgd"])
def test_dropout_run_is_the_same_in_any_chunking(name):
    """The masks are a function of the minibatch, so a run does not depend on how its
    clients are chunked (nor, by the same token, on a resume from a checkpoint)."""
    out = {}
    for max_batch in (None, 2):
        prob = _problem(MLPDropout(784, hidden=6))
        alg = make_for_problem(name, prob)
        out[max_batch] = run(prob, alg, Participation("fixed", m=3), 3, [0, 1],
                             eval_every=0, max_batch=max_batch)
    a, b = out[None].server["theta"], out[2].server["theta"]
    assert (a[0] - _problem(MLPDropout(784, hidden=6)).init_theta(0)).abs().max() > 1e-4
    assert torch.allclose(a, b, rtol=0, atol=1e-12 * float(b.abs().max()))


@pytest.mark.parametrize("model", [lambda: MLP(784, hidden=6), lambda: LogReg(784)])
def test_full_grad_sum_equals_summed_full_grads_float64(model, monkeypatch):
    """Mime's round gradient: per replica, one product per layer over all its participants'
    samples (blocks smaller than a replica's samples) == the sum of per-client full_grad."""
    from sims.core.batching import start_rows
    prob = _problem(model())
    server = torch.stack([prob.init_theta(s) for s in range(3)])
    rep = torch.as_tensor([0, 2, 2, 0, 2])          # replica 1 has no participant
    clients = torch.as_tensor([4, 0, 3, 1, 2])
    got = prob.full_grad_sum(server, rep, clients)
    per_row = prob.full_grad(start_rows(server, rep), clients)
    want = torch.zeros_like(server).index_add_(0, rep, per_row)
    assert _rel(got, want) < 1e-12 and torch.equal(got[1], torch.zeros_like(got[1]))
    rows = np.concatenate([prob.parts[c] for c in (4, 1)])
    w = torch.as_tensor(np.concatenate([np.full(len(prob.parts[c]), 1 / len(prob.parts[c]))
                                        for c in (4, 1)]))
    small = mlp_grad.stack_full_grad_sum(server[0], prob.layout, prob.x.flatten(1), prob.y,
                                         torch.as_tensor(rows), w, block=7)
    assert _rel(small, want[0]) < 1e-12
    if onednn_available(torch.zeros(1)):             # float32 through oneDNN
        monkeypatch.setattr(onednn, "ONEDNN_MIN_MACS", 0)
        f32 = mlp_grad.stack_full_grad_sum(server[0].float(), prob.layout,
                                           prob.x.flatten(1).float(), prob.y,
                                           torch.as_tensor(rows), w.float(), block=7)
        assert _rel(f32, want[0]) < 1e-5


def test_full_grad_sum_declines_without_fast_gradient():
    prob = _problem(MLP(784, hidden=6), fast_grad=False)
    server = prob.init_theta(0).unsqueeze(0)
    assert prob.full_grad_sum(server, torch.zeros(2, dtype=torch.long),
                              torch.as_tensor([0, 1])) is None


@pytest.mark.skipif(not onednn_available(torch.zeros(1)), reason="no oneDNN on this build")
@pytest.mark.parametrize("name", ["fed-ams", "mime"])
def test_engine_float32_onednn_close_to_reference(name, onednn_calls, monkeypatch):
    """float32 through the engine with every product on oneDNN (threshold lowered for the
    tiny model; the calls are counted) stays at float32 rounding of the reference run."""
    calls = onednn_calls
    out = {}
    for fast in (True, False):
        prob = _problem(MLP(784, hidden=6), dtype=torch.float32, fast_grad=fast)
        out[fast] = run(prob, make_for_problem(name, prob), Participation("fixed", m=3), 3,
                        [0], eval_every=0).server["theta"]
    assert calls
    start = _problem(MLP(784, hidden=6), dtype=torch.float32).init_theta(0)
    moved = float((out[False] - start).abs().max())
    assert moved > 1e-3
    assert float((out[True] - out[False]).abs().max()) < 1e-4 * moved     # measured ~3e-6

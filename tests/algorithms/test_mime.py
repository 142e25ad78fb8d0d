"""Full Mime and Mime-LAMB (Karimireddy et al.; Fed-LAMB spec 1.6) and the engine hooks they
use (``needs_round_gradient``: the participants' full gradients at ``x`` averaged into ``c``
before the broadcast; ``needs_anchor_grad``: each step's minibatch gradient at ``x``).

Invariants: the first local step's corrected gradient is ``c`` exactly (so one local step is
one centralized base-optimizer step on ``c``, whatever the noise); on a noise-free quadratic
with shared curvature and full participation the correction removes client drift exactly
(Mime on heterogeneous clients = Mime = MimeLite on identical clients with the mean centre);
the server statistics are ``V(c, s)``, independent of the local work. The batched ==
reference checks are in ``test_algorithms_equivalence.py``; descent and the registry /
comparison command in ``test_algorithms_invariants.py`` and
``test_algorithms_registry_compare.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims import accel
from sims.algorithms.baselines import FedAvg, Mime, MimeLite
from sims.algorithms.fed_lamb import MimeLAMB, MimeLiteLAMB
from sims.core.context import RoundContext
from sims.algorithms.registry import client_memory, make_algorithm
from sims.core.engine import run
from sims.problems.models import MLP, MLPDropout
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem
from sims.problems.quadratic import NoiseLaw, QuadraticProblem, heterogeneous_quadratic
from conftest import random_dataset



def _rel(a, b):
    return float((a - b).norm()) / max(float(b.norm()), 1e-300)


def _advance_amsgrad(alg, g, s):
    """AMSGrad with epsilon inside the root, no bias correction, written out."""
    m = alg.beta1 * s["m"] + (1 - alg.beta1) * g
    v = alg.beta2 * s["v"] + (1 - alg.beta2) * g * g
    vhat = torch.maximum(s["vhat"], v)
    return m / torch.sqrt(vhat + alg.eps), {"m": m, "v": v, "vhat": vhat}


def _zero_state(theta):
    return {k: torch.zeros_like(theta) for k in ("m", "v", "vhat")}


class _Recorder:
    """Observer keeping every round's server model and c (and the model at t = 0)."""
    at_start = True

    def __init__(self):
        self.theta, self.c, self.s = {}, {}, {}

    def __call__(self, view):
        self.theta[view.t] = view.server["theta"].clone()
        self.c[view.t] = view.server["c"].clone()
        self.s[view.t] = {k: v.clone() for k, v in view.server["s"].items()}
        return {}


# ------------------------------------------------------------------------------ hooks

def test_first_step_direction_is_c_exactly():
    """At y = x the SVRG-corrected gradient is grad f_i(x; z) - grad f_i(x; z) + c = c,
    bit for bit: Mime's step equals MimeLite's step on the gradient c."""
    d, B = 7, 3
    layout = ParamLayout.single(d)
    gen = torch.Generator().manual_seed(0)
    theta0 = torch.randn(1, d, generator=gen, dtype=torch.float64)
    for mime, lite in ((Mime(eta_l=0.1), MimeLite(eta_l=0.1)),
                       (MimeLAMB(eta_l=0.1, lam=0.01), MimeLiteLAMB(eta_l=0.1, lam=0.01))):
        server = mime.init_server(theta0)
        c = torch.randn(1, d, generator=gen, dtype=torch.float64)
        server = mime.round_gradient(server, c, torch.ones(1, dtype=torch.bool))
        rep = torch.zeros(B, dtype=torch.long)
        ctx = RoundContext(0, layout, rep, torch.arange(B), torch.full((B,), -1))
        bcast = {k: v[rep] for k, v in mime.broadcast(server).items()}
        noisy = torch.randn(B, d, generator=gen, dtype=torch.float64)   # grad f_i(x; z)
        ctx.extra["anchor_grad"] = noisy.clone()
        theta = bcast["theta"].clone()
        got, _ = mime.local_step(theta, noisy, mime.local_start(bcast, {}, ctx), bcast, {},
                                 None, ctx)
        lite_bcast = {k: v for k, v in bcast.items() if k != "c"}
        want, _ = lite.local_step(theta, c[rep], lite.local_start(lite_bcast, {}, ctx),
                                  lite_bcast, {}, None, ctx)
        assert torch.equal(got, want)


@pytest.mark.parametrize("part", [Participation("fixed", m=3), Participation("full")],
                         ids=["m3", "full"])
def test_one_local_step_is_the_centralized_step_on_c(part):
    """K = 1 on a noisy quadratic: every participant moves by lr U(c; s) with c the exact
    mean gradient of the round's participants, so the noise never enters."""
    prob = heterogeneous_quadratic(6, 9, local_steps=1, seed=2, sigma=3.0, x0=1.0)
    alg = Mime(eta_l=0.05)
    rec = _Recorder()
    out = run(prob, alg, part, 3, [0, 5], observers=[rec])
    for r in range(2):
        theta, s = prob.init_theta(0).clone(), _zero_state(prob.init_theta(0))
        for t, clients in enumerate(out.participants[r]):
            idx = torch.as_tensor(clients)
            c = (prob.a[idx] * (theta - prob.b[idx])).mean(0)
            assert _rel(rec.c[t + 1][r], c) <= 1e-13
            u, s = _advance_amsgrad(alg, c, s)
            theta = theta - alg.eta_l * u
            assert _rel(rec.theta[t + 1][r], theta) <= 1e-13
        for k in ("m", "v", "vhat"):
            assert _rel(out.server["s"][k][r], s[k]) <= 1e-13


def _shared_quadratic(centers, steps=4):
    curv = np.geomspace(0.2, 2.0, centers.shape[1])
    return QuadraticProblem(curv, centers, NoiseLaw("none"), local_steps=steps, x0=1.5)


@pytest.mark.parametrize("pair", [(Mime(eta_l=0.05), MimeLite(eta_l=0.05)),
                                  (MimeLAMB(eta_l=0.05, lam=0.01),
                                   MimeLiteLAMB(eta_l=0.05, lam=0.01))],
                         ids=["mime", "mime-lamb"])
def test_correction_removes_client_drift(pair):
    """No noise, shared curvature a, full participation: grad f_i(y) - grad f_i(x) + c =
    a (y - x) + a (x - b_bar) = grad f(y), so every client follows the global gradient.
    Mime on heterogeneous clients = Mime = MimeLite on identical clients centred at b_bar,
    while MimeLite on the heterogeneous clients drifts."""
    mime, lite = pair
    centers = np.random.default_rng(4).standard_normal((5, 6)) * 2.0
    hetero = _shared_quadratic(centers)
    same = _shared_quadratic(np.broadcast_to(centers.mean(0), centers.shape).copy())
    part = Participation("full")
    a = run(hetero, mime, part, 6, [0]).server["theta"]
    b = run(same, mime, part, 6, [0]).server["theta"]
    c = run(same, lite, part, 6, [0]).server["theta"]
    drift = run(hetero, lite, part, 6, [0]).server["theta"]
    assert _rel(a, b) <= 1e-12 and _rel(b, c) <= 1e-12
    assert _rel(drift, a) > 1e-3


def test_server_statistics_come_from_c_not_from_the_local_work():
    """s after a round is V(c, s) with c the participants' mean gradient at x: the same for
    any local learning rate or number of local steps (which change the deltas)."""
    runs = []
    for eta_l, steps in ((0.01, 2), (0.2, 5)):
        prob = heterogeneous_quadratic(6, 8, local_steps=steps, seed=1, sigma=1.0, x0=1.0)
        runs.append(run(prob, Mime(eta_l=eta_l), Participation("fixed", m=3), 1, [0, 1]))
    assert not torch.allclose(runs[0].server["theta"], runs[1].server["theta"])
    for k in ("m", "v", "vhat"):
        assert torch.equal(runs[0].server["s"][k], runs[1].server["s"][k])
    prob = heterogeneous_quadratic(6, 8, local_steps=2, seed=1, sigma=1.0, x0=1.0)
    alg = Mime(eta_l=0.01)
    for r, seed in enumerate((0, 1)):
        idx = torch.as_tensor(runs[0].participants[r][0])
        x = prob.init_theta(seed)
        c = (prob.a[idx] * (x - prob.b[idx])).mean(0)
        _, s = _advance_amsgrad(alg, c, _zero_state(x))
        for k in ("m", "v", "vhat"):
            assert _rel(runs[0].server["s"][k][r], s[k]) <= 1e-14


def test_replica_without_participants_keeps_x_s_and_c():
    prob = heterogeneous_quadratic(6, 5, local_steps=2, seed=0, sigma=0.5, x0=1.0)
    rec = _Recorder()
    out = run(prob, Mime(eta_l=0.05), Participation("bernoulli", p=0.15), 8, [0, 1, 2, 3],
              observers=[rec])
    empty = [(r, t) for r in range(4) for t, cl in enumerate(out.participants[r]) if len(cl) == 0]
    assert empty, "the seeds should give a round without participants"
    for r, t in empty:
        assert torch.equal(rec.theta[t + 1][r], rec.theta[t][r])
        assert torch.equal(rec.c[t + 1][r], rec.c[t][r])
        for k, v in rec.s[t + 1].items():
            assert torch.equal(v[r], rec.s[t][k][r])
    assert np.isfinite(out.metrics["train_loss"]).all()


# ------------------------------------------------------------------------------ engine

@pytest.mark.accel
def test_mime_never_takes_the_fused_path():
    """Mime's rule (SVRG, frozen base) is no SGD round; an algorithm that asks for anchor
    gradients steps through its rule even when the rule is plain SGD."""
    ds = random_dataset(40, 28, 0)
    prob = NeuralProblem(ds, list(np.arange(40).reshape(4, 10)), MLP(784, hidden=4),
                         batch_size=5, dtype=torch.float64)
    for alg in (Mime(), MimeLAMB()):
        got = accel.plan(alg.local_rule, prob)
        assert got is None or got.round is None
    assert accel.plan(FedAvg().local_rule, prob).round is not None

    class AnchoredSGD(FedAvg):
        needs_anchor_grad = True
    part = Participation("fixed", m=2)
    forms = [run(prob, alg, part, 1, [0], eval_every=0).forms
             for alg in (FedAvg(), AnchoredSGD())]
    assert forms[0].get("sgd-round", 0) > 0 and "sgd-round" not in forms[1]


def test_problem_without_full_grad_is_refused():
    class NoFullGrad:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            if name == "full_grad":
                raise AttributeError(name)
            return getattr(self._inner, name)

    prob = NoFullGrad(heterogeneous_quadratic(4, 3, local_steps=1, seed=0))
    with pytest.raises(ValueError, match="full_grad"):
        run(prob, Mime(), Participation("full"), 1, [0])


@pytest.mark.parametrize("fast_path", [True, False], ids=["linear-stack", "vmap"])
def test_neural_full_grad_equals_the_plain_whole_data_gradient(fast_path):
    """NeuralProblem.full_grad (column blocks of 256 samples weighted by their share) equals
    one autograd pass over the client's whole data, for clients larger than one block."""
    sizes = (300, 600, 40)
    perm = np.random.default_rng(0).permutation(sum(sizes))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]
    prob = NeuralProblem(random_dataset(sum(sizes), 8, 1), parts, MLP(64, hidden=5),
                         batch_size=16, dtype=torch.float64, fast_path=fast_path)
    clients = torch.tensor([1, 0, 2, 1])
    theta = torch.stack([prob.init_theta(s) for s in range(4)])
    got = prob.full_grad(theta, clients)
    for b, cl in enumerate(clients.tolist()):
        assert _rel(got[b], prob.reference_full_grad(theta[b], cl)) <= 1e-12


def test_dropout_full_grad_draws_fresh_masks_each_round_and_seed():
    """A dropout MLP's full local gradient (Mime's ``c``) draws its masks by the engine's
    salt: a client's whole data is the same index row every round, so without the salt
    every round and seed would reuse one set of masks. The engine's salts differ across
    rounds and seeds and are the same on a rerun; equal salts give equal gradients."""
    sizes = (30, 50)
    perm = np.random.default_rng(4).permutation(sum(sizes))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]
    prob = NeuralProblem(random_dataset(sum(sizes), 8, 2), parts, MLPDropout(64, hidden=16),
                         batch_size=10, dtype=torch.float64)
    assert prob.dropout > 0
    theta = prob.init_theta(0).expand(2, -1).contiguous()
    clients = torch.tensor([0, 0])

    def grad(salt):
        return prob.full_grad(theta, clients, salt=torch.tensor(salt))

    fresh = grad([1, 2])
    assert not torch.allclose(fresh[0], fresh[1])           # other salt, other masks
    assert torch.equal(grad([1, 1])[0], grad([1, 1])[1])    # same salt, same masks
    assert torch.equal(grad([2, 5])[0], fresh[1])           # a function of (samples, salt)

    seen = []
    real = prob.full_grad

    def recording(th, cl, salt=None):
        seen.append(salt.tolist())
        return real(th, cl, salt=salt)

    prob.full_grad = recording
    run(prob, Mime(eta_l=0.01), Participation("full"), 3, [0, 1], eval_every=0)
    first, seen[:] = list(seen), []
    run(prob, Mime(eta_l=0.01), Participation("full"), 3, [0, 1], eval_every=0)
    assert seen == first                                      # reproducible from the seed
    keys = {k for salts in first for k in salts}
    assert len(first) == 3 and len(keys) == 6                 # 3 rounds x 2 seeds, all distinct


# ------------------------------------------------------------------------------ descent, bits

@pytest.mark.parametrize("name,eta_l", [("mime", 0.01), ("mime-lamb", 0.05)])
def test_mime_decreases_the_mlp_loss(name, eta_l):
    sizes = (30, 50, 40, 60)
    perm = np.random.default_rng(3).permutation(sum(sizes))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]
    prob = NeuralProblem(random_dataset(sum(sizes), 8, 2), parts, MLP(64, hidden=16),
                         batch_size=10, dtype=torch.float64)
    out = run(prob, make_algorithm(name, eta_l=eta_l), Participation("fixed", m=3), 15, [0],
              eval_test=False)
    loss = out.metrics["train_loss"][0]
    assert np.isfinite(loss).all() and loss[-1] < 0.5 * loss[0], loss


def test_mime_bits_and_memory():
    lay = ParamLayout.single(10)
    mime, lite = make_algorithm("mime"), make_algorithm("mimelite")
    assert mime.uplink_bits(lay) == lite.uplink_bits(lay) == 2 * 32 * 10     # model + grad f_i(x)
    assert mime.downlink_bits(lay) == 5 * 32 * 10                           # x, m, v, vhat, c
    assert make_algorithm("mime", base="sgdm").downlink_bits(lay) == 3 * 32 * 10
    assert client_memory(mime, lay) == 6 * 10

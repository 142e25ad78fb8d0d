"""User-level DP (:mod:`sims.privacy`): accounting against FedAda2's epsilon, clipping,
the noise's law, reproducibility, and the identity wrapper for every registry algorithm."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sims.algorithms.base import Algorithm
from sims.core.context import RoundContext
from sims.algorithms.registry import ALGORITHMS, make_algorithm, make_for_problem
from sims.core.engine import run
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.privacy import EpsilonCurve, Private, PrivacyError, dp_epsilon
from sims.reference.privacy import reference_private_mean


# ------------------------------------------------------------------------------ accounting

def test_paper_epsilon_13_1():
    """FedAda2 Sec. 6.1 / App. H.1: sigma = 1, q = 0.1 (40 of 400), T = 500 rounds,
    delta = 1/400 -> epsilon = 13.1 at optimal RDP order 2.0. The library's improved
    RDP conversion equals the closed form at order 2 (spec fedada2 3.14 #16)."""
    q, sigma, T, delta = 0.1, 1.0, 500, 1 / 400
    eps, order = dp_epsilon(q, sigma, T, delta)
    assert order == 2.0
    assert round(eps, 1) == 13.1
    rdp2 = T * math.log(1 + q * q * (math.exp(1 / sigma ** 2) - 1))
    closed = rdp2 + math.log(1 / 2) - (math.log(delta) + math.log(2)) / 1
    assert eps == pytest.approx(closed, abs=1e-9)
    classic = rdp2 + math.log(1 / delta)     # the classic conversion would not give 13.1
    assert round(classic, 1) != 13.1


def test_epsilon_curve_matches_fresh_accountant():
    curve = EpsilonCurve(0.1, 1.0, 1 / 400)
    for t in (1, 37, 500):
        assert curve(t) == pytest.approx(dp_epsilon(0.1, 1.0, t, 1 / 400)[0], rel=1e-12)
    assert curve(0) == 0.0
    assert EpsilonCurve(0.1, 0.0, 1e-3)(10) == math.inf
    assert curve(100) < curve(200) < curve(500)


# ------------------------------------------------------------------------------ hooks

class _Capture(Algorithm):
    """An inner algorithm that sends given messages/aux and records what the server gets."""
    name = "capture"

    def __init__(self, aux_keys=("dc", "steps")):
        self.aux_keys = aux_keys
        self.seen = None

    def client_message(self, delta, lstate, cstate, ctx):
        aux = {}
        if "dc" in self.aux_keys:
            aux["dc"] = 0.5 * delta.flip(-1)
        if "steps" in self.aux_keys:
            aux["steps"] = delta[:, :1].abs() + 1.0
        return delta, cstate, aux

    def server_step(self, server, mean_message, sums, active, ctx):
        self.seen = (mean_message.clone(), {k: v.clone() for k, v in sums.items()})
        return server, {}


def _drive(alg, deltas, rep, seeds, t=3, chunk=4):
    """What the engine does with one round of messages: chunks of ``client_message``,
    per-replica means, ``server_step`` with the seeds in ``ctx.extra``."""
    R, d = len(seeds), deltas.shape[1]
    layout = ParamLayout.single(d)
    server = alg.init_server(torch.zeros(R, d, dtype=deltas.dtype))
    sums, counts = {}, torch.zeros(R, dtype=deltas.dtype)
    sent = []
    for lo in range(0, len(deltas), chunk):
        r = rep[lo:lo + chunk]
        ctx = RoundContext(t, layout, r, torch.arange(lo, lo + len(r)), torch.full_like(r, -1))
        msg, _, aux = alg.client_message(deltas[lo:lo + chunk], {}, {}, ctx)
        sent.append((msg, aux))
        for k, v in {"message": msg, **aux}.items():
            sums.setdefault(k, torch.zeros(R, *v.shape[1:], dtype=v.dtype)).index_add_(0, r, v)
        counts += torch.bincount(r, minlength=R).to(counts.dtype)
    means = {k: v / counts.clamp_min(1).unsqueeze(-1) for k, v in sums.items()}
    msg = means.pop("message")
    ctx = RoundContext(t, layout, torch.arange(R), None, None, extra={"seeds": list(seeds)})
    alg.server_step(server, msg, means, counts > 0, ctx)
    return sent


def test_clipping_bounds_every_record_and_keeps_small_ones():
    g = torch.Generator().manual_seed(0)
    scales = torch.tensor([0.01, 0.1, 1.0, 10.0, 100.0] * 2, dtype=torch.float64)
    deltas = torch.randn(10, 40, generator=g, dtype=torch.float64) * scales[:, None]
    rep = torch.tensor([0, 1] * 5)
    c = 2.0
    inner = _Capture()
    sent = _drive(Private(inner, clip=c), deltas, rep, seeds=[5, 6])
    msg = torch.cat([m for m, _ in sent])
    aux = {k: torch.cat([a[k] for _, a in sent]) for k in ("dc", "steps")}
    joint = (msg.square().sum(1) + aux["dc"].square().sum(1) + aux["steps"].square().sum(1)).sqrt()
    assert (joint <= c * (1 + 1e-12)).all()
    raw = (deltas.square().sum(1) * 1.25 + (deltas[:, 0].abs() + 1) ** 2).sqrt()
    small = raw <= c
    assert small.any() and (~small).any()          # both cases occur
    assert torch.equal(msg[small], deltas[small])   # records within the bound are untouched
    assert torch.allclose(joint[~small], torch.full_like(joint[~small], c), rtol=1e-12)
    cos = torch.nn.functional.cosine_similarity(msg, deltas, dim=1)
    assert torch.allclose(cos, torch.ones_like(cos), rtol=0, atol=1e-12)   # direction kept


def test_private_mean_equals_per_client_reference():
    """The batched DP step (chunks, per-replica means, noise by seed) against the plain
    per-participant reference, float64, with aux entries and unequal replica sizes."""
    g = torch.Generator().manual_seed(1)
    deltas = torch.randn(11, 30, generator=g, dtype=torch.float64) * 3
    rep = torch.tensor([0, 1, 1, 0, 2, 1, 1, 0, 2, 1, 1])
    seeds, c, sigma = [11, 12, 13], 1.3, 0.8
    inner = _Capture()
    _drive(Private(inner, clip=c, noise_multiplier=sigma), deltas, rep, seeds, t=7, chunk=3)
    got_msg, got_aux = inner.seen
    for r, seed in enumerate(seeds):
        rows = deltas[rep == r]
        records = [{"message": x, "dc": 0.5 * x.flip(-1), "steps": x[:1].abs() + 1.0} for x in rows]
        ref = reference_private_mean(records, c, sigma, seed, t=7)
        torch.testing.assert_close(got_msg[r], ref["message"], rtol=1e-12, atol=1e-12)
        for k in ("dc", "steps"):
            torch.testing.assert_close(got_aux[k][r], ref[k], rtol=1e-12, atol=1e-12)


def test_noise_has_the_stated_variance():
    """Zero updates: the server sees pure noise, N(0, (sigma c / |S|)^2) per coordinate,
    independent across replicas and rounds. With N = 4 x 3 x 25,000 = 300,000 draws the
    sample variance's relative standard error is sqrt(2/N) = 0.26%; the tolerance is 5 of
    them (1.3%), the mean's and the cross-replica correlation's 5 / sqrt(N)."""
    R, S, d, c, sigma = 4, 5, 25_000, 0.5, 1.7
    inner = _Capture(aux_keys=())
    private = Private(inner, clip=c, noise_multiplier=sigma)
    draws = []
    for t in range(3):
        _drive(private, torch.zeros(R * S, d, dtype=torch.float64),
               torch.arange(R).repeat_interleave(S), seeds=[21, 22, 23, 24], t=t, chunk=7)
        draws.append(inner.seen[0])
    z = torch.stack(draws, 1)                       # [R, T, d]
    std = sigma * c / S
    N = z.numel()
    var = float(z.square().mean())
    assert abs(var / std ** 2 - 1) < 5 * math.sqrt(2 / N)
    assert abs(float(z.mean())) < 5 * std / math.sqrt(N)
    flat = z.reshape(R, -1) / std
    corr = (flat @ flat.T) / flat.shape[1]
    off = corr[~torch.eye(R, dtype=bool)]
    assert off.abs().max() < 5 / math.sqrt(flat.shape[1])
    # a different round gives different noise; the same (seed, round) the same
    assert not torch.equal(draws[0], draws[1])
    _drive(private, torch.zeros(R * S, d, dtype=torch.float64),
           torch.arange(R).repeat_interleave(S), seeds=[21, 22, 23, 24], t=0, chunk=5)
    assert torch.equal(inner.seen[0], draws[0])


# ------------------------------------------------------------------------------ engine

def _run(problem, alg, seeds, rounds=3, m=3, **kw):
    return run(problem, alg, Participation("fixed", m), rounds, seeds, **kw)


def _same_run(a, b):
    assert torch.equal(a.server["theta"], b.server["theta"])
    keys = set(a.metrics) - {"wall_time"}
    assert keys == set(b.metrics) - {"wall_time"}
    for k in keys:
        np.testing.assert_array_equal(a.metrics[k], b.metrics[k])


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_identity_wrapper_is_the_plain_run(quad, name):
    """sigma = 0 and c = inf: the run is bit-for-bit the non-private one, every algorithm."""
    plain = _run(quad, make_for_problem(name, quad), [0, 1])
    wrapped = _run(quad, Private(make_for_problem(name, quad), clip=math.inf,
                                 noise_multiplier=0.0),
                   [0, 1])
    _same_run(plain, wrapped)


@pytest.mark.accel
@pytest.mark.parametrize("name", ["fedavg", "fedada2", "fed-ef-sgd", "fed-lamb", "fed-ams",
                                  "fedlada", "mimelite"])
def test_identity_wrapper_takes_the_inner_algorithms_fast_forms(mlp_problem, name):
    """The wrapper runs the inner algorithm's rule, so the run plans the inner rule's fast
    forms (the fused SGD round, the C kernels: nothing to delegate, nothing a base class
    could shadow) and is the plain run bit for bit."""
    alg = make_algorithm(name)
    assert Private(alg).local_rule is alg.local_rule
    plain = run(mlp_problem, make_algorithm(name), Participation("fixed", m=3), 2, [0, 1])
    wrapped = run(mlp_problem, Private(make_algorithm(name)), Participation("fixed", m=3), 2,
                  [0, 1])
    assert wrapped.forms == plain.forms and plain.forms
    assert torch.equal(wrapped.server["theta"], plain.server["theta"])


def test_private_run_reproducible_and_batching_independent(quad):
    def alg():
        return Private(make_algorithm("fedadagrad"), clip=0.3, noise_multiplier=1.0)
    both = _run(quad, alg(), [3, 4], rounds=4)
    chunked = _run(quad, alg(), [3, 4], rounds=4, max_batch=2)
    for r, s in enumerate([3, 4]):
        alone = _run(quad, alg(), [s], rounds=4)
        torch.testing.assert_close(both.server["theta"][r], alone.server["theta"][0],
                                   rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(both.server["theta"], chunked.server["theta"],
                               rtol=1e-12, atol=1e-12)
    plain = _run(quad, make_algorithm("fedadagrad"), [3, 4], rounds=4)
    assert not torch.allclose(both.server["theta"], plain.server["theta"])


def test_clipping_holds_inside_the_engine(quad):
    """Every participant's message reaching the engine has norm <= c (and some were cut)."""
    norms = []

    class Spy(Private):
        def client_message(self, delta, lstate, cstate, ctx):
            out = super().client_message(delta, lstate, cstate, ctx)
            norms.append((delta.norm(dim=1), out[0].norm(dim=1)))
            return out

    c = 0.05
    _run(quad, Spy(make_algorithm("fedada2"), clip=c, noise_multiplier=0.5), [0, 1], rounds=3)
    raw = torch.cat([a for a, _ in norms])
    sent = torch.cat([b for _, b in norms])
    assert (raw > c).any()
    assert (sent <= c * (1 + 1e-12)).all()


def test_run_records_epsilon(quad):
    q, sigma, delta, T = 0.5, 1.1, 1e-3, 5
    out = _run(quad, Private(make_algorithm("fedavg"), clip=1.0, noise_multiplier=sigma,
                             delta=delta, sampling_rate=q), [0], rounds=T)
    eps = out.metrics["dp_epsilon"][0]
    assert len(eps) == T and np.all(np.diff(eps) > 0)
    assert eps[-1] == pytest.approx(dp_epsilon(q, sigma, T, delta)[0], rel=1e-12)


@pytest.mark.parametrize("kw, text", [
    ({"clip": 0}, "clip must be > 0"),
    ({"clip": -1.0}, "clip must be > 0"),
    ({"noise_multiplier": -0.1}, "noise_multiplier must be"),
    ({"noise_multiplier": 1.0}, "needs a finite clip"),
    ({"clip": 1.0, "delta": 1e-5}, "give both delta and sampling_rate"),
])
def test_bad_parameters_one_line(kw, text):
    with pytest.raises(PrivacyError, match=text) as info:
        Private(make_algorithm("fedavg"), **kw)
    assert "\n" not in str(info.value)


def test_round_gradient_algorithms_refused_when_private():
    for name in ("mime", "mime-lamb"):
        with pytest.raises(PrivacyError, match="cannot run under DP"):
            Private(make_algorithm(name), clip=1.0)
        Private(make_algorithm(name))               # the identity wrapper is fine


def test_private_pickles_for_worker_processes(quad):
    """Sweeps ship algorithms to worker processes: a pickled wrapper runs identically."""
    import pickle
    alg = Private(make_algorithm("fedada2"), clip=0.2, noise_multiplier=0.7, delta=1e-3,
                  sampling_rate=0.5)
    copy = pickle.loads(pickle.dumps(alg))
    assert copy.describe() == alg.describe() and copy.eta_l == alg.eta_l
    _same_run(_run(quad, alg, [5]), _run(quad, copy, [5]))

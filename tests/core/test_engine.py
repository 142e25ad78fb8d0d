"""The batched engine (sims.core.engine.run) against the sequential reference
(sims.reference.fed_ef.run_fed_ef_reference) in float64, for every Fed-EF variant, under full,
fixed-m and Bernoulli participation, on a quadratic, on an MLP (fast linear-stack gradient),
and on the generic torch.func path (a CNN and an MLP with the fast path off); several seeds
batched in one run and chunked execution. Also client sampling (sims.core.participation)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import HeavySign, Identity, Sign, Stoc, TopK
from sims.data import Dataset
from sims.core.engine import draw_round, run
from sims.core.participation import Participation, ParticipationError
from sims.problems.image import build_image_problem

VARIANTS = {
    # Fed-SGD, full precision (Alg. 4 with the identity)
    "fedsgd-full": dict(eta=1.0, eta_l=0.05, compressor=Identity(), error_feedback=False),
    # Alg. 1: direct biased compression, no EF
    "alg1-sign": dict(eta=1.0, eta_l=0.05, compressor=Sign(), error_feedback=False),
    # Alg. 2: Fed-EF-SGD with TopK
    "ef-sgd-topk": dict(eta=1.0, eta_l=0.05, compressor=TopK(0.05)),
    # Alg. 2: Fed-EF-AMS with heavy-Sign
    "ef-ams-hvsign": dict(eta=0.02, eta_l=0.05, compressor=HeavySign(0.1), server="amsgrad"),
    # Alg. 4: Stoc without EF (SGD and AMSGrad servers)
    "alg4-stoc": dict(eta=1.0, eta_l=0.05, compressor=Stoc(2), error_feedback=False),
    "alg4-stoc-ams": dict(eta=0.02, eta_l=0.05, compressor=Stoc(4), error_feedback=False,
                          server="amsgrad"),
    # Alg. 3: two-way compression (SGD and AMS servers)
    "two-way-topk": dict(eta=1.0, eta_l=0.05, compressor=TopK(0.1), two_way=True),
    "two-way-ams-sign": dict(eta=0.02, eta_l=0.05, compressor=Sign(), two_way=True,
                             server="amsgrad"),
    # error restarting (S = 1 from round 1 on, so it triggers within a few rounds)
    "restart": dict(eta=1.0, eta_l=0.05, compressor=TopK(0.05), restart_period=1,
                    restart_start=1),
}
PARTICIPATION = {
    "full": Participation("full"),
    "fixed-m3": Participation("fixed", m=3),
    "bernoulli": Participation("bernoulli", p=0.4),
}
NN_VARIANTS = ["fedsgd-full", "alg1-sign", "ef-sgd-topk", "ef-ams-hvsign", "two-way-topk",
               "restart"]


# ----------------------------------------------------------------------------- quadratic

@pytest.mark.parametrize("part", list(PARTICIPATION))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_engine_equals_reference_quadratic(quad, variant, part, engine_vs_reference):
    # three seeds batched in one engine run, chunks of 2 participants (across replicas); the
    # reference Stoc is a per-coordinate Python loop, so those variants get fewer seeds
    seeds = (0, 1) if variant.startswith("alg4-stoc") else (0, 1, 2)
    engine_vs_reference(quad, FedEF(**VARIANTS[variant]), PARTICIPATION[part], 4,
                              seeds, max_batch=2)


# ----------------------------------------------------------------------------- MLP, fast path

@pytest.mark.parametrize("variant", NN_VARIANTS)
def test_engine_equals_reference_mlp(mlp_problem, variant, engine_vs_reference):
    engine_vs_reference(mlp_problem, FedEF(**VARIANTS[variant]),
                              Participation("fixed", m=3), 3, (0, 1))


@pytest.mark.parametrize("part", ["full", "bernoulli"])
def test_engine_equals_reference_mlp_participation(mlp_problem, part, engine_vs_reference):
    engine_vs_reference(mlp_problem, FedEF(**VARIANTS["ef-ams-hvsign"]),
                              PARTICIPATION[part], 3, (0, 1), max_batch=3)


def test_engine_equals_reference_mlp_stoc(mlp_problem, engine_vs_reference):
    engine_vs_reference(mlp_problem, FedEF(**VARIANTS["alg4-stoc"]),
                              Participation("fixed", m=1), 2, (3,))


def test_engine_equals_reference_built_image_problem(engine_vs_reference):
    # sims.problems.image.build_image_problem on a small in-memory Dataset; iid split of 62
    # samples over 4 clients (16, 16, 15, 15) with batch 5 -> 4, 4, 3, 3 local steps
    g = torch.Generator().manual_seed(5)
    data = Dataset("fixture", torch.randn(62, 1, 28, 28, generator=g),
                   torch.randint(0, 10, (62,), generator=g), torch.randn(8, 1, 28, 28, generator=g),
                   torch.randint(0, 10, (8,), generator=g), 10, "random fixture")
    prob = build_image_problem(model="mlp", n_clients=4, scheme="iid", batch_size=5,
                               dtype=torch.float64, model_kw={"hidden": 3}, data=data)
    assert prob.d == 784 * 3 + 3 + 3 * 10 + 10 and prob.fast_path
    assert sorted(prob.steps_for(c) for c in range(4)) == [3, 3, 4, 4]
    engine_vs_reference(prob, FedEF(**VARIANTS["ef-sgd-topk"]), Participation("full"), 2,
                              (0, 1))


# ----------------------------------------------------------------------------- generic path

@pytest.mark.parametrize("variant", ["ef-sgd-topk", "ef-ams-hvsign", "two-way-ams-sign"])
def test_engine_equals_reference_cnn(cnn_problem, variant, engine_vs_reference):
    engine_vs_reference(cnn_problem, FedEF(**VARIANTS[variant]),
                              Participation("fixed", m=3), 2, (0, 1), max_batch=2)


@pytest.mark.parametrize("variant", ["alg1-sign", "restart"])
def test_engine_equals_reference_mlp_generic(mlp_generic, variant, engine_vs_reference):
    engine_vs_reference(mlp_generic, FedEF(**VARIANTS[variant]),
                              Participation("bernoulli", p=0.6), 3, (0, 1))


# ----------------------------------------------------------------------------- batching

def test_batched_seeds_and_chunking_do_not_change_results(mlp_problem):
    alg = FedEF(**VARIANTS["ef-ams-hvsign"])
    part = Participation("fixed", m=3)
    together = run(mlp_problem, alg, part, 3, [4, 5, 6], eval_test=False)
    chunked = run(mlp_problem, alg, part, 3, [4, 5, 6], max_batch=1, eval_test=False)
    for r, seed in enumerate([4, 5, 6]):
        alone = run(mlp_problem, alg, part, 3, [seed], max_batch=2, eval_test=False)
        for other in (together, chunked):
            assert torch.allclose(other.server["theta"][r], alone.server["theta"][0],
                                  rtol=1e-12, atol=0)
            assert torch.allclose(other.client_state["error"][r], alone.client_state["error"][0],
                                  rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(other.metrics["grad_norm2"][r],
                                       alone.metrics["grad_norm2"][0], rtol=1e-12)
            for a, b in zip(other.participants[r], alone.participants[0]):
                assert np.array_equal(a, b)
    # different seeds really are different runs
    assert not torch.allclose(together.server["theta"][0], together.server["theta"][1])


def test_same_seed_shares_draws_across_configurations(quad):
    # two configurations with the same seed see the same participants (Fig. 9 branching)
    part = Participation("fixed", m=2)
    a = run(quad, FedEF(**VARIANTS["ef-sgd-topk"]), part, 3, [9], eval_test=False)
    b = run(quad, FedEF(**VARIANTS["alg1-sign"]), part, 3, [9], eval_test=False)
    for x, y in zip(a.participants[0], b.participants[0]):
        assert np.array_equal(x, y)
    for t in range(3):
        assert np.array_equal(draw_round(quad, part, False, 9, t).clients, a.participants[0][t])


def test_run_records_curves(quad):
    alg = FedEF(**VARIANTS["ef-sgd-topk"])
    out = run(quad, alg, Participation("fixed", m=3), 5, [0, 1], eval_every=2)
    assert list(out.rounds["grad_norm2"]) == [0, 2, 4, 5]
    assert out.metrics["grad_norm2"].shape == (2, 4)
    assert list(out.rounds["bits_up"]) == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(out.metrics["participants"], np.full((2, 5), 3.0))
    # accumulated uplink bits averaged over all n clients (spec 2.6): t * m * bits / n
    bits = TopK(0.05).bits(quad.layout)
    np.testing.assert_allclose(out.metrics["bits_up"][0], np.arange(1, 6) * 3 * bits / 6)
    np.testing.assert_allclose(out.metrics["bits_down"][0], np.arange(1, 6) * 3 * 32 * quad.d / 6)
    assert out.diverged_at == [None, None]


def test_run_rejects_bad_arguments(quad):
    alg = FedEF(**VARIANTS["ef-sgd-topk"])
    with pytest.raises(ValueError):
        run(quad, alg, Participation("full"), -1, [0])
    with pytest.raises(ParticipationError, match="m=7 of n=6"):
        run(quad, alg, Participation("fixed", m=7), 1, [0])


# ----------------------------------------------------------------------------- participation

def test_fixed_participation_draws_m_distinct_sorted_ids():
    part = Participation("fixed", m=7)
    rng = np.random.default_rng(0)
    counts = np.zeros(20)
    for _ in range(2000):
        ids = part.sample(rng, 20)
        assert len(ids) == 7 and len(set(ids.tolist())) == 7
        assert np.all(np.diff(ids) > 0) and ids.min() >= 0 and ids.max() < 20
        counts[ids] += 1
    # uniform without replacement: each client with probability m/n = 0.35
    se = np.sqrt(0.35 * 0.65 / 2000)
    assert np.all(np.abs(counts / 2000 - 0.35) < 5 * se)
    assert part.expected(20) == 7


def test_bernoulli_participation_frequencies():
    part = Participation("bernoulli", p=0.3)
    rng = np.random.default_rng(1)
    draws = [part.sample(rng, 40) for _ in range(3000)]
    counts = np.zeros(40)
    for ids in draws:
        assert np.all(np.diff(ids) > 0)
        counts[ids] += 1
    se = np.sqrt(0.3 * 0.7 / 3000)
    assert np.all(np.abs(counts / 3000 - 0.3) < 5 * se)
    sizes = np.array([len(ids) for ids in draws])
    assert abs(sizes.mean() - 12) < 0.2 and sizes.std() > 1       # the count varies
    assert part.expected(40) == pytest.approx(12)
    assert any(len(Participation("bernoulli", p=0.05).sample(rng, 5)) == 0 for _ in range(50))


def test_full_participation():
    ids = Participation("full").sample(np.random.default_rng(0), 5)
    assert np.array_equal(ids, np.arange(5))


@pytest.mark.parametrize("text, expected", [
    ("full", Participation("full")),
    (" full ", Participation("full")),
    ("m=20", Participation("fixed", m=20)),
    ("fixed:20", Participation("fixed", m=20)),
    ("p=0.5", Participation("bernoulli", p=0.5)),
    ("bernoulli:0.1", Participation("bernoulli", p=0.1)),
    ("p=1", Participation("bernoulli", p=1.0)),
])
def test_participation_parse(text, expected):
    assert Participation.parse(text) == expected


@pytest.mark.parametrize("text, words", [
    ("half", "cannot read"),
    ("m=", "cannot read"),
    ("m=2.5", "cannot read"),
    ("q=0.5", "cannot read"),
    ("p=abc", "cannot read"),
    ("m=0", "m >= 1"),             # readable, but a bad value: the specific message survives
    ("p=0", "0 < p <= 1"),
    ("p=1.5", "0 < p <= 1"),
])
def test_participation_parse_errors(text, words):
    with pytest.raises(ParticipationError) as info:
        Participation.parse(text)
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("build", [
    lambda: Participation("random"),
    lambda: Participation("fixed"),
    lambda: Participation("fixed", m=0),
    lambda: Participation("fixed", m=2.5),
    lambda: Participation("fixed", m=True),
    lambda: Participation("bernoulli"),
    lambda: Participation("bernoulli", p=0.0),
    lambda: Participation("bernoulli", p=1.2),
    lambda: Participation("bernoulli", p=float("nan")),
    lambda: Participation("fixed", m=5).check(4),
])
def test_participation_errors(build):
    with pytest.raises(ParticipationError):
        build()
    Participation("fixed", m=4).check(4)          # m == n is fine
    Participation("fixed", m=np.int64(2)).check(4)
    assert Participation("fixed", m=3).describe() == {"kind": "fixed", "m": 3, "p": None}


@pytest.mark.accel
def test_fused_local_sgd_equals_step_by_step(mlp_problem):
    """The fused gradient-and-update path (linear stacks, plain local SGD) against stepping
    through stoch_grad and the SGD rule, with unequal client sizes (masked steps)."""
    alg = FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.1))
    assert len(alg.local_rule) == 0 and alg.local_lr(0) == 0.05
    a = run(mlp_problem, alg, Participation("fixed", m=3), 4, [0, 1], eval_every=2)
    b = run(mlp_problem, alg, Participation("fixed", m=3), 4, [0, 1], eval_every=2, fused=False)
    assert a.forms.get("sgd-round") and "sgd-round" not in b.forms
    err = (a.server["theta"] - b.server["theta"]).abs().max() / b.server["theta"].abs().max()
    assert err <= 1e-12
    assert not torch.equal(a.server["theta"], mlp_problem.init_theta(0).expand(2, -1))


def test_observers_add_metrics_on_their_rounds_only(quad):
    class NormProbe:
        every = 3

        def __init__(self):
            self.seen = []

        def __call__(self, view):
            self.seen.append(view.t)
            return {"theta_norm": view.server["theta"].norm(dim=-1)}

    probe = NormProbe()
    out = run(quad, FedEF(eta=1.0, eta_l=0.05), Participation("full"), 7, [0, 1],
              observers=[probe])
    assert probe.seen == [3, 6, 7]
    assert list(out.rounds["theta_norm"]) == [3, 6, 7]
    assert out.metrics["theta_norm"].shape == (2, 3)
    plain = run(quad, FedEF(eta=1.0, eta_l=0.05), Participation("full"), 7, [0, 1])
    assert "theta_norm" not in plain.metrics


def test_observer_view_at_start_server_metrics_and_last_round_before(quad):
    """``at_start`` observers also run at t = 0 (no draws, nothing participated yet); the
    view carries the round's ``server_step`` metrics and ``last_round`` as it was before the
    round's update beside the updated one."""
    class Recorder:
        at_start = True
        every = 2

        def __init__(self):
            self.views = []

        def __call__(self, view):
            self.views.append((view.t, view.draws, view.last_round.clone(),
                               None if view.last_round_before is None
                               else view.last_round_before.clone(), dict(view.server_metrics)))
            return {"theta_norm": view.server["theta"].norm(dim=-1)}

    class EveryRound:
        def __init__(self):
            self.before, self.after = [], []

        def __call__(self, view):
            self.before.append(view.last_round_before.clone())
            self.after.append(view.last_round.clone())
            return {}

    rec, every = Recorder(), EveryRound()
    alg = FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.2))
    out = run(quad, alg, Participation("fixed", m=3), 5, [0, 1], observers=[rec, every])
    assert [v[0] for v in rec.views] == [0, 2, 4, 5]
    assert list(out.rounds["theta_norm"]) == [0, 2, 4, 5]
    t0, draws0, last0, before0, metrics0 = rec.views[0]
    assert draws0 == [] and metrics0 == {}
    assert (last0 == -1).all() and torch.equal(before0, last0)
    for t, _, _, _, metrics in rec.views[1:]:
        assert "qA2" in metrics and metrics["qA2"].shape == (2,)
    assert (every.before[0] == -1).all()
    for t in range(5):
        if t:
            assert torch.equal(every.before[t], every.after[t - 1])
        changed = every.after[t] != every.before[t]
        for r in range(2):
            ids = np.flatnonzero(changed[r].numpy())
            assert set(ids) <= set(out.participants[r][t].tolist())
            assert (every.after[t][r, out.participants[r][t]] == t).all()
    assert len(every.after) == 5                           # at_start is off by default

"""Assumption probes (sims.experiments.probes): the probe recovers a quadratic's known constants, costs
nothing when off and does not change the run, and flags broken premises.

Tolerances (docs/probes.md derives them):

* L: Lanczos with ``hvp_iters >= d`` spans the whole space, so the top Ritz value is the top
  eigenvalue of ``diag(a)`` up to rounding (1e-10). The secant along the path is a Rayleigh
  quotient of ``diag(a)^2`` and must lie in ``[mu, L]``; it equals ``L`` on an isotropic
  quadratic.
* sigma^2: the quadratic's noise is ``xi ~ N(0, s^2 I_d)`` with ``d s^2 = sigma^2``, and the
  probe's ``g(theta; xi) - grad f_i(theta)`` is exactly ``xi``, so a client's estimate from
  ``N`` draws is ``sigma^2 chi^2_{N d} / (N d)``: relative standard deviation
  ``sqrt(2 / (N d))``. We allow 4 of them (each check fails with probability < 1e-4 under
  the Gaussian approximation), per client for the max and pooled over clients for the mean.
  The replayed draws pin the estimate to 1e-12.
* sigma_g^2: ``grad f_i - grad f = a (b_bar - b_i)`` does not depend on ``theta``; exact up
  to rounding (1e-10).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import Identity, TopK
from sims.core.participation import Participation
from sims.experiments.probes import (Probe, ProbeError, bounds_from_probe, client_full_grads,
                         hvp_operator, lanczos_extremes, measured_constants,
                         premise_violations, run_with_probe, setting_from_df, summary,
                         theory_setting)
from sims.experiments.probes.observer import SALT
from sims.problems.quadratic import QuadraticProblem, heterogeneous_quadratic
from theory import bounds as tb

N_DRAWS, D, N_CLIENTS, K_STEPS, ROUNDS, EVERY = 64, 40, 6, 3, 12, 3
SEEDS = [0, 1]


def _quad(**kw):
    args = dict(local_steps=K_STEPS, seed=1, sigma=1.0, x0=2.0)
    args.update(kw)
    return heterogeneous_quadratic(N_CLIENTS, D, **args)


def _probe(**kw):
    args = dict(every=EVERY, n_clients_sampled=None, minibatches=N_DRAWS, hvp_iters=D,
                hvp_clients=None)
    args.update(kw)
    return Probe(**args)


@pytest.fixture(scope="module")
def quad_runs():
    prob = _quad()
    alg = FedEF(eta=1.0, eta_l=0.01, compressor=TopK(0.25))
    part = Participation("full")
    base = engine.run(prob, alg, part, ROUNDS, SEEDS)
    out, df = run_with_probe(prob, alg, part, ROUNDS, SEEDS, _probe())
    return prob, base, out, df


def test_probe_off_adds_nothing_and_on_leaves_the_run_unchanged(quad_runs):
    _, base, out, df = quad_runs
    assert not [k for k in base.metrics if k.startswith("probe_")]
    assert torch.equal(base.server["theta"], out.server["theta"])
    assert torch.equal(base.client_state["error"], out.client_state["error"])
    for name, vals in base.metrics.items():
        if name != "wall_time":
            np.testing.assert_array_equal(vals, out.metrics[name])
    probed = {k for k in out.metrics if k.startswith("probe_")}
    assert {"probe_L_hvp", "probe_sigma2_max", "probe_sigma_g2_mean", "probe_qA2",
            "probe_tail_index", "probe_time", "probe_staleness_max"} <= probed
    assert list(out.rounds["probe_time"]) == list(range(EVERY, ROUNDS + 1, EVERY))
    assert list(out.rounds["probe_staleness_max"]) == list(range(1, ROUNDS + 1))
    assert (out.metrics["probe_time"] > 0).all()
    assert set(df.metric) >= probed                       # ordinary results rows


def test_recovers_L_exactly_by_lanczos_and_secant_is_inside_the_spectrum(quad_runs):
    prob, _, out, _ = quad_runs
    c = prob.constants()
    np.testing.assert_allclose(out.metrics["probe_L_hvp"], c["L"], rtol=1e-10)
    sec = out.metrics["probe_L_secant"][:, 1:]            # the first call has no previous model
    assert np.isnan(out.metrics["probe_L_secant"][:, 0]).all()
    assert (sec >= c["mu"] - 1e-12).all() and (sec <= c["L"] + 1e-12).all()
    # shared curvature: every client's secant is the global one
    np.testing.assert_allclose(out.metrics["probe_L_secant_client"][:, 1:], sec, rtol=1e-9)


def test_secant_equals_L_on_an_isotropic_quadratic():
    rng = np.random.default_rng(3)
    from sims.problems.quadratic import NoiseLaw
    prob = QuadraticProblem(2.5, rng.standard_normal((4, 10)), NoiseLaw("gaussian", 0.1),
                            local_steps=2, x0=np.ones(10))
    out, _ = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.05, compressor=Identity()),
                            Participation("full"), 4, [0], _probe(every=1, hvp_iters=5,
                                                                  minibatches=4))
    np.testing.assert_allclose(out.metrics["probe_L_secant"][0, 1:], 2.5, rtol=1e-9)
    np.testing.assert_allclose(out.metrics["probe_L_hvp"], 2.5, rtol=1e-12)


def test_recovers_sigma2_within_the_chi2_tolerance(quad_runs):
    prob, _, out, _ = quad_runs
    sigma2 = prob.constants()["sigma2"]
    per_client = 4 * math.sqrt(2 / (N_DRAWS * D))
    pooled = 4 * math.sqrt(2 / (N_DRAWS * D * N_CLIENTS))
    assert np.all(np.abs(out.metrics["probe_sigma2_max"] / sigma2 - 1) <= per_client)
    assert np.all(np.abs(out.metrics["probe_sigma2_mean"] / sigma2 - 1) <= pooled)
    all_calls = out.metrics["probe_sigma2_mean"].mean()
    assert abs(all_calls / sigma2 - 1) <= pooled / math.sqrt(out.metrics["probe_time"].size)


def test_sigma2_is_the_mean_squared_noise_of_the_replayed_draws(quad_runs):
    prob, _, out, _ = quad_runs
    for r, seed in enumerate(SEEDS):
        for j, t in enumerate(out.rounds["probe_sigma2_mean"]):
            rng = np.random.default_rng([seed, int(t), SALT])
            est = []
            for c in range(N_CLIENTS):
                rows = np.concatenate([prob.plan_client(rng, c)
                                       for _ in range(math.ceil(N_DRAWS / K_STEPS))])[:N_DRAWS]
                est.append((rows ** 2).sum(1).mean())
            assert out.metrics["probe_sigma2_mean"][r, j] == pytest.approx(np.mean(est),
                                                                           rel=1e-12)
            assert out.metrics["probe_sigma2_max"][r, j] == pytest.approx(np.max(est),
                                                                          rel=1e-12)


def test_recovers_sigma_g2_and_G_exactly(quad_runs):
    prob, _, out, _ = quad_runs
    a, b = prob.a_np, prob.b_np
    mean_form = ((a * (b - b.mean(0))) ** 2).sum(1).mean()
    np.testing.assert_allclose(out.metrics["probe_sigma_g2_mean"], mean_form, rtol=1e-10)
    np.testing.assert_allclose(out.metrics["probe_sigma_g2_max"],
                               prob.constants()["sigma_g2"], rtol=1e-10)
    theta = out.server["theta"].numpy()                   # the last call is after the last round
    g_full = [np.linalg.norm(a * (th - b), axis=1).max() for th in theta]
    np.testing.assert_allclose(out.metrics["probe_G_full"][:, -1], g_full, rtol=1e-12)
    grad = [(a * (th - b)).mean(0) for th in theta]
    np.testing.assert_allclose(out.metrics["probe_grad_norm2"][:, -1],
                               [g @ g for g in grad], rtol=1e-10)
    assert (out.metrics["probe_G"] >= out.metrics["probe_G_full"]).all()


def test_compression_coefficients(quad_runs):
    _, _, out, _ = quad_runs
    q2_worst = TopK(0.25).q2_bound(_quad().layout)
    assert ((out.metrics["probe_qC2_max"] > 0) & (out.metrics["probe_qC2_max"] <= q2_worst)).all()
    assert (out.metrics["probe_qC2_mean"] <= out.metrics["probe_qC2_max"]).all()
    assert np.isfinite(out.metrics["probe_qA2"]).all()
    full, _ = run_with_probe(_quad(), FedEF(eta=1.0, eta_l=0.01, compressor=Identity(),
                                            error_feedback=False),
                             Participation("full"), 3, [0], _probe(minibatches=4, hvp_iters=2))
    assert (full.metrics["probe_qC2_max"] == 0).all() and (full.metrics["probe_qA2"] == 0).all()


def test_staleness_tracker_matches_the_recorded_participation():
    prob = _quad()
    out, _ = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.01, compressor=TopK(0.25)),
                            Participation("fixed", m=2), 15, [4], _probe(
                                every=5, minibatches=4, hvp_iters=2, n_clients_sampled=3))
    last = np.full(N_CLIENTS, -1)
    for t, clients in enumerate(out.participants[0]):
        seen = last[clients][last[clients] >= 0]
        want = t - seen.min() if len(seen) else math.nan
        got = out.metrics["probe_staleness_max"][0, t]
        assert (math.isnan(want) and math.isnan(got)) or got == want
        last[clients] = t
        assert out.metrics["probe_error_age_max"][0, t] == t - last[last >= 0].min()


def test_lanczos_extremes_on_dense_matrices():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 30, 30, dtype=torch.float64, generator=g)
    A = A + A.transpose(1, 2)
    eig = torch.linalg.eigvalsh(A)
    v0 = torch.randn(3, 30, dtype=torch.float64, generator=g)
    lo, hi = lanczos_extremes(lambda v: torch.bmm(A, v.unsqueeze(-1)).squeeze(-1), v0, 30)
    torch.testing.assert_close(lo, eig[:, 0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(hi, eig[:, -1], rtol=1e-10, atol=1e-10)
    # more steps than dimensions: the Krylov space closes, the extremes stay exact
    lo, hi = lanczos_extremes(lambda v: torch.bmm(A[:, :5, :5], v.unsqueeze(-1)).squeeze(-1),
                              v0[:, :5], 9)
    torch.testing.assert_close(hi, torch.linalg.eigvalsh(A[:, :5, :5])[:, -1], rtol=1e-9,
                               atol=1e-9)


def test_neural_problem_gradients_hvp_and_noise(mlp_problem):
    prob = mlp_problem
    theta = torch.stack([prob.init_theta(s) for s in range(3)])
    clients = torch.tensor([0, 3, 4])
    # a client's full gradient is its loss over all its data
    g = client_full_grads(prob, theta, clients)
    for j, c in enumerate(clients.tolist()):
        ref = prob.reference_grad(theta[j], c, prob.parts[c])
        assert float((g[j] - ref).norm()) <= 1e-10 * float(ref.norm())
    # forward-over-reverse hvp against central differences of those gradients (float64)
    v = torch.randn(theta.shape, dtype=prob.dtype, generator=torch.Generator().manual_seed(0))
    hv = hvp_operator(prob)(theta, clients)(v)
    eps = 1e-5
    fd = (client_full_grads(prob, theta + eps * v, clients)
          - client_full_grads(prob, theta - eps * v, clients)) / (2 * eps)
    assert float(((fd - hv).norm(dim=1) / hv.norm(dim=1)).max()) < 1e-6
    # the probe on the engine: minibatches of 4 from clients of 5..20 samples are noisy
    out, df = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.1)),
                             Participation("fixed", m=3), 4, [0, 1],
                             Probe(every=2, n_clients_sampled=3, minibatches=4, hvp_iters=8,
                                   hvp_clients=2))
    assert (out.metrics["probe_sigma2_max"] > 0).all()
    assert np.isfinite(out.metrics["probe_tail_index"]).all()
    assert (out.metrics["probe_L_hvp"] > 0).all()
    assert np.isfinite(out.metrics["probe_L_secant"][:, 1]).all()
    assert setting_from_df(df)["theorems"] == ["fed_ef_thm44"]


def test_hvp_with_dropout_is_one_fixed_operator(image_data):
    """With dropout in training mode, a bound Hessian-vector operator uses one set of masks
    (keyed by the client's samples, as the full gradient's): repeated products agree, the
    operator is symmetric, and it is the derivative of that full gradient. Drawn afresh
    per product (vmap's own randomness), none of this holds."""
    from conftest import unequal_parts
    from sims.problems.models import MLPDropout
    from sims.problems.neural import NeuralProblem
    prob = NeuralProblem(image_data, unequal_parts(), MLPDropout(784, hidden=6), batch_size=4,
                         dtype=torch.float64, fast_path=False)
    assert [s.p for s in prob.dropout_sites] == [0.5]
    theta = torch.stack([prob.init_theta(s) for s in range(2)])
    clients = torch.tensor([0, 3])
    g = torch.Generator().manual_seed(0)
    u, v = (torch.randn(theta.shape, dtype=prob.dtype, generator=g) for _ in range(2))

    def check(matvec):
        hv = matvec(v)
        assert torch.equal(matvec(v), hv)
        torch.testing.assert_close((u * hv).sum(1), (v * matvec(u)).sum(1), rtol=1e-9,
                                   atol=1e-12)
        eps = 1e-5
        fd = (client_full_grads(prob, theta + eps * v, clients)
              - client_full_grads(prob, theta - eps * v, clients)) / (2 * eps)
        assert float(((fd - hv).norm(dim=1) / hv.norm(dim=1)).max()) < 1e-6
    check(hvp_operator(prob)(theta, clients))
    op = hvp_operator(prob)
    with pytest.raises(AssertionError):
        check(lambda w: op._batched(theta, *_whole(prob, clients), w))


def _whole(prob, clients):
    from sims.experiments.probes.estimators import _client_batch
    idx = _client_batch(prob, clients)
    return prob.x[idx.clamp_min(0)], prob.y[idx.clamp_min(0)], (idx >= 0).to(prob.dtype)


def test_bounds_use_the_measured_constants_and_hold_when_premises_do(quad_runs):
    prob, _, _, df = quad_runs
    setting = setting_from_df(df)
    b = bounds_from_probe(df)
    consts = measured_constants(df)
    row = consts[(consts.seed == 1) & (consts["round"] == 9)].iloc[0]
    f0 = df[(df.metric == "suboptimality") & (df.seed == 1) & (df["round"] == 0)].value.iloc[0]
    want, _ = tb.evaluate("fed_ef_thm42", L=row.L, sigma=math.sqrt(row.sigma2),
                          sigma_g=math.sqrt(row.sigma_g2), q=math.sqrt(row.q2), n=N_CLIENTS,
                          K=K_STEPS, T=9, eta=1.0, eta_l=0.01, f0_minus_fstar=f0,
                          include_dropped_term=True)
    got = b[(b.seed == 1) & (b["round"] == 9) & (b.metric == "bound_fed_ef_thm42")].value
    assert float(got.iloc[0]) == pytest.approx(want, rel=1e-12)
    wide = b.pivot_table(index=["seed", "round"], columns="metric", values="value")
    assert (wide["bound_fed_ef_thm42"] >= wide["avg_grad_norm2"]).all()
    # the only premise this run breaks is the corrected Thm 4.2 rate condition
    viol = premise_violations(df, setting)
    assert [v.premise for v in viol] == ["eta_l <= 1/(16KL eta C1) (corrected, spec sec. 6)"]
    assert viol[0].round == EVERY


def test_flags_a_learning_rate_too_large_for_the_measured_L():
    prob = _quad()
    out, df = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.2, compressor=TopK(0.25)),
                             Participation("full"), 6, [0], _probe(minibatches=4, hvp_iters=10))
    viol = premise_violations(df)
    hit = [v for v in viol if v.premise == "eta_l <= 1/(8KL)"]
    assert hit and hit[0].theorem == "fed_ef_thm42" and hit[0].round == EVERY
    assert "measured L = 1" in hit[0].detail
    assert any("eta_l <= 1/(8KL)" in line and "from round 3" in line for line in summary(df))


def test_flags_q_A_at_least_one():
    # near stationarity of a heterogeneous quadratic the mean compressor input shrinks
    # while the compression error does not: the per-round q_A^2 of the real messages >= 1
    prob = heterogeneous_quadratic(4, 20, local_steps=3, seed=1, sigma=1.0, x0=2.0)
    out, df = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.1, compressor=TopK(0.1)),
                             Participation("full"), 30, [0],
                             _probe(every=10, minibatches=4, hvp_iters=5))
    q = out.metrics["qA2"][0]
    first = int(np.argmax(q >= 1)) + 1
    assert (q >= 1).any()
    hit = [v for v in premise_violations(df) if v.premise == "A3 (per round): q_A < 1"]
    assert hit and hit[0].round == first and hit[0].theorem == "all"
    # the bound is undefined (q >= 1) from the first probe round at or after it
    b = bounds_from_probe(df, qa_reading="round")
    after = b[(b.metric == "bound_fed_ef_thm42") & (b["round"] >= first)]
    assert len(after) and after.value.isna().all()


def test_flags_heavy_tailed_noise():
    prob = _quad(noise="cauchy")
    out, df = run_with_probe(prob, FedEF(eta=1.0, eta_l=0.01, compressor=TopK(0.25)),
                             Participation("full"), 3, [0], _probe(hvp_iters=2))
    assert (out.metrics["probe_tail_index"] < 1.5).all()
    assert any(v.premise.startswith("A2(ii)") for v in premise_violations(df))
    gauss = _quad()
    out, _ = run_with_probe(gauss, FedEF(eta=1.0, eta_l=0.01, compressor=TopK(0.25)),
                            Participation("full"), 3, [0], _probe(hvp_iters=2))
    assert (out.metrics["probe_tail_index"] > 4).all()


def test_settings_and_errors():
    prob = _quad()
    s = theory_setting(prob, FedEF(eta=1.0, eta_l=0.1, compressor=TopK(0.25)),
                       Participation("full"))
    assert s["theorems"] == ["fed_ef_thm42"] and s["K"] == K_STEPS and s["n"] == N_CLIENTS
    s = theory_setting(prob, FedEF(eta=1.0, eta_l=0.1, compressor=TopK(0.25),
                                   error_feedback=False), Participation("full"))
    assert s["theorems"] == ["fed_ef_thm41"]
    s = theory_setting(prob, FedEF(eta=0.01, eta_l=0.1, compressor=TopK(0.25),
                                   server="amsgrad"), Participation("fixed", m=2))
    assert s["theorems"] == []
    with pytest.raises(ProbeError):
        Probe(every=0)
    with pytest.raises(ProbeError):
        Probe(minibatches=1)
    with pytest.raises(ValueError):
        measured_constants(pd.DataFrame({"run": [], "seed": [], "round": [], "metric": [],
                                         "value": []}))


def test_entry_tiny_writes_results_and_figures(tmp_path, capsys):
    import json

    from reproduce import common
    from reproduce import probes as entry
    out, figs = tmp_path / "results", tmp_path / "figures"
    argv = ["--tiny", "--quiet", "--out", str(out), "--figures", str(figs)]
    assert common.main(entry, argv) == 0
    printed = capsys.readouterr().out
    for stem in ("probes_quadratic", "probes_fig8_full_n20"):
        assert f"figure: {figs / (stem + '.png')}" in printed
        for ext in ("png", "pdf"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 0
    assert "recovered vs known constants" in printed and "NOT recovered" not in printed
    assert "fig8_full_n20" in printed and "premise" in printed
    from verdict_util import saved
    # the bounds evaluated with the measured constants hold, q_A^2 < 1 every round
    assert saved(out, "probes") == {"B [quadratic, fed_ef_thm42]": "shows",
                                    "A3 [quadratic]": "shows",
                                    "B [fig8_full_n20, fed_ef_thm42]": "shows",
                                    "A3 [fig8_full_n20]": "shows"}
    records = sorted((out / "probes").glob("*.json"))
    assert len(records) == 2
    (quad_record,) = [r for r in records if r.name.startswith("quadratic")]
    meta = json.loads(quad_record.read_text())
    assert meta["entry"] == "probes" and meta["known_constants"]["L"] == 1.0
    assert meta["probe"]["every"] == 2 and "premise_violations" in meta


def test_probed_run_resumes_from_a_checkpoint_and_equals_the_uninterrupted_run(tmp_path,
                                                                              monkeypatch):
    """The probe and its staleness tracker keep their state in a checkpoint (the secants need
    the previous probe call's model): a run stopped after round 7 and resumed measures the
    same constants, the secants included, as the run that never stopped."""
    from sims.store.checkpoint import Checkpointer
    prob, part = _quad(), Participation("fixed", m=3)
    alg = FedEF(eta=1.0, eta_l=0.01, compressor=TopK(0.25))
    small = dict(n_clients_sampled=4, minibatches=4, hvp_iters=4, hvp_clients=2)
    ref_probe = _probe(**small)
    ref = engine.run(prob, alg, part, ROUNDS, SEEDS, observers=ref_probe.observers())
    real_save, saves = Checkpointer.save, []

    def save_then_stop(self, state):
        real_save(self, state)
        saves.append(state["t"])
        if state["t"] == 7:
            raise KeyboardInterrupt
    monkeypatch.setattr(Checkpointer, "save", save_then_stop)
    ck = lambda: Checkpointer(tmp_path / "c.pt", every_rounds=1, key="probe")  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        engine.run(prob, alg, part, ROUNDS, SEEDS, observers=_probe(**small).observers(),
                   checkpoint=ck())
    monkeypatch.undo()
    again = ck()
    got = engine.run(prob, alg, part, ROUNDS, SEEDS, observers=_probe(**small).observers(),
                     checkpoint=again)
    assert again.resumed_from == 7
    secant = ref.metrics["probe_L_secant"]
    assert np.isfinite(secant[:, -1]).all()          # the resumed call had a previous model
    for name, values in ref.metrics.items():
        if name not in ("wall_time", "probe_time"):
            np.testing.assert_array_equal(got.metrics[name], values, err_msg=name)

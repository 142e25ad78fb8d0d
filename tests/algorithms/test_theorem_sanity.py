"""Theorem-sanity tests: Fed-EF's bounds against the simulator on quadratics with exact constants.

The quadratic (sims.problems.quadratic.heterogeneous_quadratic) shares its curvature across
clients, so L, sigma^2 and sigma_g^2 are known exactly (QuadraticProblem.constants()); the
bounds come from theory.bounds with the hidden absolute constants made explicit (8 for
Theorems 4.1 and 4.2, spec 3.2-3.3). The measured quantity is the theorems' left side, the
average over rounds t < T of ||grad f(theta_t)||^2, averaged over seeds (the expectation).
"""
import math


from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from theory import bounds

SEEDS = list(range(6))


def _avg_grad_norm2(problem, alg, rounds, participation=Participation("full"), seeds=SEEDS):
    out = engine.run(problem, alg, participation, rounds, seeds)
    return float(out.metrics["grad_norm2"][:, :rounds].mean())


def _constants(problem, comp, **kw):
    c = problem.constants()
    return dict(L=c["L"], sigma=math.sqrt(c["sigma2"]), sigma_g=math.sqrt(c["sigma_g2"]),
                q=math.sqrt(comp.q2_bound(problem.layout)), n=problem.n_clients,
                K=problem.local_steps, f0_minus_fstar=c["f0_minus_fstar"], **kw)


def test_fed_ef_sgd_stays_below_theorem_4_2():
    """Thm 4.2 with the corrected learning-rate condition (the printed one is refuted by the
    audit, check fed-ef:thm42_lr_condition_sufficient): the bound holds, and is not vacuous
    (within a factor 100 of the measurement)."""
    problem = heterogeneous_quadratic(10, 20, L=1.0, mu=0.5, sigma=1.0, heterogeneity=0.3,
                                      seed=0, local_steps=5, x0=3.0)
    comp = TopK(0.5, scope="model")
    q = math.sqrt(comp.q2_bound(problem.layout))
    K, L, eta = 5, 1.0, 1.0
    eta_l = min(1 / (8 * K * L), 1 / (16 * K * L * eta * bounds.fed_ef_C1_sgd(q)))
    consts = _constants(problem, comp, eta=eta, eta_l=eta_l)
    assert bounds.fed_ef_thm42_conditions(L=L, q=q, K=K, eta=eta, eta_l=eta_l,
                                          corrected=True) == []
    for T in (50, 200):
        measured = _avg_grad_norm2(problem, FedEF(eta=eta, eta_l=eta_l, compressor=comp), T)
        bound = bounds.fed_ef_thm42_bound(T=T, **consts)
        assert measured <= bound, (T, measured, bound)
        assert measured >= bound / 100, (T, measured, bound)


def test_direct_compression_stays_below_theorem_4_1_when_its_premises_hold():
    """Thm 4.1 needs q <= 1/32 in its proof (audit: fed-ef:thm41_needs_q_bound): a TopK that
    keeps 1999 of 2000 coordinates has q ~ 0.022."""
    problem = heterogeneous_quadratic(10, 2000, L=1.0, mu=0.5, sigma=1.0, heterogeneity=0.3,
                                      seed=0, local_steps=5, x0=1.0)
    comp = TopK(0.9995, scope="model")
    q = math.sqrt(comp.q2_bound(problem.layout))
    K, L, eta = 5, 1.0, 1.0
    eta_l = min(1 / (8 * K * L), 1 / (64 * K * L * (1 + q * q) * eta))
    assert bounds.fed_ef_thm41_conditions(L=L, q=q, K=K, eta=eta, eta_l=eta_l) == []
    T = 60
    measured = _avg_grad_norm2(problem, FedEF(eta=eta, eta_l=eta_l, compressor=comp,
                                              error_feedback=False), T, seeds=SEEDS[:3])
    bound = bounds.fed_ef_thm41_bound(T=T, eta=eta, eta_l=eta_l, **_constants(problem, comp))
    assert measured <= bound
    assert measured >= bound / 100


def _plateau(problem, eta_l, rounds, error_feedback):
    alg = FedEF(eta=1.0, eta_l=eta_l, compressor=TopK(0.5, scope="model"),
                error_feedback=error_feedback)
    out = engine.run(problem, alg, Participation("full"), rounds, SEEDS[:3], eval_every=5)
    g = out.metrics["grad_norm2"].mean(0)
    return float(g[-len(g) // 4:].mean())


def test_direct_compression_has_a_floor_that_error_feedback_removes():
    """Thm 4.1's non-vanishing term: with direct biased compression the gradient norm stalls
    at a level that does not shrink with the learning rate (TopK is scale-equivariant, so the
    biased fixed point does not move), while Fed-EF's plateau shrinks with eta_l.

    Measured (3 seeds): direct 2.8e-3 at both eta_l; Fed-EF 1.3e-4 -> 2e-5 when eta_l / 4.
    Tolerances: the direct floor may change by at most a factor 1.5 while eta_l drops 4x,
    Fed-EF's plateau must fall by at least 2x, and stay 10x below the direct floor.
    """
    problem = heterogeneous_quadratic(10, 20, L=1.0, mu=0.5, sigma=0.3, heterogeneity=0.3,
                                      seed=0, local_steps=5, x0=3.0)
    direct = [_plateau(problem, lr, T, False) for lr, T in ((0.04, 250), (0.01, 1000))]
    ef = [_plateau(problem, lr, T, True) for lr, T in ((0.04, 250), (0.01, 1000))]
    assert 1 / 1.5 <= direct[1] / direct[0] <= 1.5, direct
    assert ef[1] <= ef[0] / 2, ef
    assert ef[1] * 10 <= direct[1], (ef, direct)


def test_partial_participation_stays_below_theorem_4_4():
    """Thm 4.4 (m of n without replacement) with every stated condition satisfied (checked by
    theory.bounds); its stale-error condition eta_l <= m^2/(53760 (n-m) C1 eta K L) forces a
    tiny local rate, so the bound is loose: it must hold, within a factor 1000."""
    problem = heterogeneous_quadratic(20, 20, L=1.0, mu=0.5, sigma=1.0, heterogeneity=0.3,
                                      seed=1, local_steps=5, x0=3.0)
    comp = TopK(0.9, scope="model")
    q = math.sqrt(comp.q2_bound(problem.layout))
    n, m, K, L, eta = 20, 10, 5, 1.0, 1.0
    C1, Cp = bounds.fed_ef_C1_pp(q), (n - m) / (n - 1)
    eta_l = min(1 / (8 * K * L), m / (96 * Cp * eta * K * L),
                m * m / (53760 * (n - m) * C1 * eta * K * L), 1 / (32 * C1 * eta * K * L))
    violated = bounds.fed_ef_thm44_conditions(L=L, q=q, n=n, m=m, K=K, eta=eta, eta_l=eta_l)
    assert violated == [], violated
    T = 200
    measured = _avg_grad_norm2(problem, FedEF(eta=eta, eta_l=eta_l, compressor=comp), T,
                               Participation("fixed", m=m))
    bound = bounds.fed_ef_thm44_bound(T=T, m=m, eta=eta, eta_l=eta_l,
                                      **_constants(problem, comp))
    assert measured <= bound
    assert measured >= bound / 1000

"""Numeric bound evaluators (theory.bounds): agreement with the sympy statements, positivity, monotonicity in T,
limits (q = 0, m = n) and the learning-rate condition checkers."""

from __future__ import annotations

import math
import random

import pytest
import sympy as sp

from theory import bounds as B
from theory import fed_ef, fed_lamb, fedada2, fedlada

BASE = dict(L=1.0, sigma=1.0, sigma_g=0.5, G=2.0, q=0.5, n=20, m=5, K=5, d=100, beta1=0.9, epsilon=0.01, f0_minus_fstar=3.0)


def _rand(r: random.Random):
    return dict(L=r.uniform(0.5, 3), sigma=r.uniform(0.1, 2), sigma_g=r.uniform(0, 2), G=r.uniform(0.5, 3),
                q=r.uniform(0, 0.9), n=r.randint(2, 50), K=r.randint(1, 10), T=r.randint(10, 10**4),
                eta=r.uniform(0.1, 5), eta_l=r.uniform(1e-4, 1e-1), f0_minus_fstar=r.uniform(0.1, 5),
                d=r.randint(1, 1000), beta1=r.uniform(0, 0.95), epsilon=r.uniform(1e-6, 0.5))


def _sym_value(terms: dict, module, values: dict) -> float:
    expr = sp.Add(*terms.values())
    for _ in range(2):
        expr = expr.subs(module.CONSTANTS)
    subs = {}
    for sym in expr.free_symbols:
        name = {"F": "f0_minus_fstar", "epsilon": "epsilon"}.get(sym.name, sym.name)
        subs[sym] = values[name]
    return float(expr.subs(subs))


# ---------------------------------------------------------------------------
# agreement with the sympy statements of the paper modules
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_fed_ef_evaluators_match_sympy(seed):
    r = random.Random(seed)
    v = _rand(r)
    v["m"] = r.randint(1, v["n"])
    pick = lambda fn: {k: v[k] for k in B._accepted(fn)[0] if k in v}
    assert B.fed_ef_thm41_bound(**pick(B.fed_ef_thm41_bound), hidden_constant=1) == pytest.approx(_sym_value(fed_ef.THM41, fed_ef, v), rel=1e-10)
    assert B.fed_ef_thm42_bound(**pick(B.fed_ef_thm42_bound), hidden_constant=1) == pytest.approx(_sym_value(fed_ef.THM42, fed_ef, v), rel=1e-10)
    assert B.fed_ef_thm43_bound(**pick(B.fed_ef_thm43_bound), hidden_constant=1) == pytest.approx(_sym_value(fed_ef.THM43, fed_ef, v), rel=1e-10)
    assert B.fed_ef_thm44_bound(**pick(B.fed_ef_thm44_bound), hidden_constant=1) == pytest.approx(_sym_value(fed_ef.THM44, fed_ef, v), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_fedlada_evaluator_matches_sympy(seed):
    r = random.Random(seed)
    K = r.randint(2, 10)
    v = dict(L=r.uniform(0.5, 2), sigma_l=r.uniform(0.1, 1), sigma_g=r.uniform(0, 1), sigma_u=r.uniform(0, 1), G_g=r.uniform(0.5, 2),
             G_theta=r.uniform(1, 10), eps_v=r.uniform(0.1, 1), d=r.randint(1, 50), S=r.randint(1, 10), K=K, T=r.randint(10, 1000),
             eta=r.uniform(0.5, 5), eta_l=r.uniform(1e-4, 1e-2), alpha=r.uniform(0.05, 1), beta1=r.uniform(0, 0.5),
             f0_minus_fstar=r.uniform(0.1, 5))
    sym = fedlada.bound_expr().subs(fedlada.a, sp.Rational(1, K - 1))
    names = {"F": "f0_minus_fstar", "epsilon_v": "eps_v"}
    subs = {s: v[names.get(s.name, s.name)] for s in sym.free_symbols}
    assert B.fedlada_thm35_bound(**v) == pytest.approx(float(sym.subs(subs)), rel=1e-10)


@pytest.mark.parametrize("z,b", [(1, 0.0), (2, 0.5), (3, 0.9)])
def test_fedada2_evaluator_matches_sympy(z, b):
    v = dict(L=1.5, G=0.8, d=20, K=6, T=500, eta=0.7, eta_l=0.05, tau=0.01, epsilon=0.1, eps_s=0.2, f0_minus_fstar=2.0, v0=0.3,
             v_tilde0=0.02)
    got = B.fedada2_thm20_terms(**v, z=z, beta1_server=b)
    names = {"F": "f0_minus_fstar", "v_0": "v0", "vtilde_0": "v_tilde0"}
    for k, expr in fedada2.THM20.items():
        subs = {s_: v[names.get(s_.name, s_.name)] for s_ in expr.free_symbols if s_.name not in ("z", "beta1_server", "c_beta")}
        subs.update({fedada2.z20: z, fedada2.b20: b, fedada2.cbeta20: B.fedada2_c_beta(b)})
        assert got[k] == pytest.approx(float(expr.subs(subs)), rel=1e-10), k


@pytest.mark.parametrize("form", ["statement", "proof"])
def test_fed_lamb_evaluator_matches_sympy(form):
    v = dict(L=2.0, M=0.8, sigma=0.7, n=10, h=3, p=1000, T=4, R=100, alpha=0.01, phi_M=1.5, beta2=0.999, epsilon=1e-3,
             f0_minus_fstar=2.0, beta1=0.9)
    terms = fed_lamb.THM5 if form == "statement" else fed_lamb.THM5_PROOF
    expr = sp.Add(*terms.values())
    subs = {s: v["f0_minus_fstar" if s.name == "Delta" else s.name] for s in expr.free_symbols}
    assert B.fed_lamb_thm5_bound(**v, form=form) == pytest.approx(float(expr.subs(subs)), rel=1e-10)


# ---------------------------------------------------------------------------
# positivity and decrease in T
# ---------------------------------------------------------------------------


def _fed_ef_at(T, which, **over):
    c = {**BASE, **over}
    if which == "thm44":
        eta, eta_l = B.fed_ef_thm44_learning_rates(K=c["K"], n=c["n"], m=c["m"], T=T, c_l=0.05, c_g=0.05)
    else:
        eta, eta_l = B.fed_ef_cor1_learning_rates(K=c["K"], n=c["n"], T=T, c_l=0.05, c_g=0.05)
    return B.evaluate(f"fed_ef_{which}", **c, T=T, eta=eta, eta_l=eta_l)


@pytest.mark.parametrize("which", ["thm41", "thm42", "thm43", "thm44"])
def test_fed_ef_bounds_positive_and_decreasing_in_T(which):
    vals = [_fed_ef_at(T, which)[0] for T in (10**2, 10**3, 10**4, 10**5, 10**6)]
    assert all(v > 0 and math.isfinite(v) for v in vals)
    assert all(a > b for a, b in zip(vals, vals[1:])), vals


def test_thm41_tends_to_its_floor_and_ef_bounds_vanish():
    floor = B.fed_ef_thm41_floor(sigma=BASE["sigma"], q=BASE["q"], n=BASE["n"], K=BASE["K"])
    v = _fed_ef_at(10**12, "thm41")[0]
    assert floor > 0 and v == pytest.approx(floor, rel=1e-3)
    # error feedback: no floor, the bound keeps shrinking like T^-1/2
    assert _fed_ef_at(10**12, "thm42")[0] < 0.02 * _fed_ef_at(10**8, "thm42")[0]


def test_cor1_rates_decrease_and_corrected_rate_is_larger():
    kw = dict(sigma=1.0, sigma_g=1.0, n=10, K=5, f0_minus_fstar=1.0)
    r = [B.fed_ef_cor1_rate(**kw, T=T) for T in (10, 100, 1000)]
    assert r[0] > r[1] > r[2] > 0
    assert B.fed_ef_cor1_rate(**kw, T=100, variant="ams") > B.fed_ef_cor1_rate(**kw, T=100)


def test_fedlada_bound_decreases_with_T_under_corollary_rates():
    vals = []
    for T in (10**2, 10**4, 10**6):
        eta, eta_l = B.fedlada_cor36_learning_rates(S=5, K=4, T=T, c1=0.1, c2=0.1)
        vals.append(B.fedlada_thm35_bound(L=1, sigma_l=1, sigma_g=0.5, sigma_u=0.5, G_g=1, G_theta=2, eps_v=0.5, d=10, S=5, K=4, T=T,
                                          eta=eta, eta_l=eta_l, alpha=0.5, beta1=0.5, f0_minus_fstar=1))
    assert all(v > 0 for v in vals) and vals[0] > vals[1] > vals[2]
    assert B.fedlada_cor36_rate(S=5, K=4, T=100, uniform=True) > B.fedlada_cor36_rate(S=5, K=4, T=100)


def test_fedada2_bound_decreases_with_T_under_cor24_rates():
    kw = dict(L=1, G=1, d=10, K=5, eta=1.0, tau=0.1, epsilon=0.1, eps_s=0.1, f0_minus_fstar=1.0, v0=0.1)
    vals = [B.fedada2_thm20_bound(**kw, T=T, eta_l=T**-0.5) for T in (10**2, 10**4, 10**6)]
    assert all(v > 0 for v in vals) and vals[0] > vals[1] > vals[2]
    assert B.fedada2_rate_exponent(0, -0.5) == -0.5
    assert B.fedada2_rate_exponent(0.48, -0.49) >= 0 > B.fedada2_rate_exponent(0.4, -0.49)


def test_fedada2_c_beta_and_lemma_bounds():
    assert B.fedada2_c_beta(0.0) == 1.0
    assert B.fedada2_c_beta(0.5) == pytest.approx(6.056, abs=1e-3)
    assert B.fedada2_c_beta(0.9) == pytest.approx(1710.005, abs=1e-3)
    phi1 = B.fedada2_phi1(G=1, K=4, eta_l=0.1, epsilon=0.1, v0=0.0, z=2)
    assert phi1 > 0
    assert B.fedada2_phi2(eta=1, phi1=phi1, tau=1e-6, T=10) == pytest.approx(1.0)  # beta1 = 0: |server step| <= eta


def test_fed_lamb_rate_and_preconditioning():
    kw = dict(L=1, M=1, sigma=1, n=8, h=4, p=100, T=2, beta2=0.999, epsilon=1e-4, phi_M=1, f0_minus_fstar=1)
    vals = [B.fed_lamb_thm5_bound(**kw, R=R, alpha=0.1 / math.sqrt(R)) for R in (10**2, 10**4, 10**6)]
    assert vals[0] > vals[1] > vals[2] > 0
    # local steps only hurt (T^2 term) and the proof form is larger for small alpha (alpha vs alpha^2 terms)
    assert B.fed_lamb_thm5_bound(**{**kw, "T": 4}, R=100, alpha=0.01) > B.fed_lamb_thm5_bound(**kw, R=100, alpha=0.01)
    assert B.fed_lamb_thm5_bound(**kw, R=100, alpha=0.01, form="proof") > B.fed_lamb_thm5_bound(**kw, R=100, alpha=0.01)
    assert B.fed_lamb_to_unpreconditioned(M=2.0, epsilon=1e-8) == 2.0


# ---------------------------------------------------------------------------
# limits
# ---------------------------------------------------------------------------


def test_q_zero_limits():
    kw = dict(L=1.0, sigma=1.0, sigma_g=0.5, n=10, K=4, T=1000, eta=1.0, eta_l=0.01, f0_minus_fstar=1.0)
    assert B.fed_ef_thm41_floor(sigma=1.0, q=0.0, n=10, K=4) == 0.0
    t41 = B.fed_ef_thm41_terms(**kw, q=0.0)
    assert t41["bias_floor"] == 0.0
    assert B.fed_ef_C1_sgd(0.0) == 2.0 and B.fed_ef_C1_pp(0.0) == 0.0
    t44 = B.fed_ef_thm44_terms(**kw, q=0.0, m=5)
    assert t44["variance_stale"] == 0.0 and t44["stale_error"] == 0.0
    # EF-SGD bound grows with compression
    assert B.fed_ef_thm42_bound(**kw, q=0.5) > B.fed_ef_thm42_bound(**kw, q=0.0)


def test_full_participation_limit_of_thm44():
    kw = dict(L=1.0, sigma=1.0, sigma_g=0.5, q=0.3, n=10, K=4, T=1000, eta=1.0, eta_l=0.01, f0_minus_fstar=1.0)
    t = B.fed_ef_thm44_terms(**kw, m=10)
    assert t["sampling_het"] == 0.0 and t["drift_global"] == 0.0 and t["stale_error"] == 0.0
    assert B.fed_ef_thm44_bound(**kw, m=5) > B.fed_ef_thm44_bound(**kw, m=10)  # fewer clients, larger bound


def test_dropped_term_option_and_hidden_constants():
    kw = dict(L=1.0, sigma=1.0, sigma_g=0.5, q=0.3, n=10, K=4, T=1000, eta=1.0, eta_l=0.01, f0_minus_fstar=1.0)
    assert B.fed_ef_thm42_bound(**kw, include_dropped_term=True) > B.fed_ef_thm42_bound(**kw)
    assert B.fed_ef_thm42_bound(**kw) == pytest.approx(8 * sum(B.fed_ef_thm42_terms(**kw).values()))
    kw43 = dict(kw, G=1.0, d=10, beta1=0.9, epsilon=0.04)
    assert B.fed_ef_thm43_bound(**kw43) == pytest.approx(16 * 0.2 * sum(B.fed_ef_thm43_terms(**kw43).values()))


# ---------------------------------------------------------------------------
# compressors
# ---------------------------------------------------------------------------


def test_compressor_q2():
    assert B.compressor_q2("identity", [10]) == 0.0
    assert B.compressor_q2("topk", [1000], k=0.01) == pytest.approx(0.99)
    assert B.compressor_q2("topk", [1000, 50], k=0.01) == pytest.approx(0.99)  # worst layer keeps 10/1000
    assert B.compressor_q2("topk", [150], k=0.01) == pytest.approx(1 - 1 / 150)  # floor(1.5) = 1 kept: above 1 - k
    assert B.compressor_q2("sign", [10, 100]) == pytest.approx(1 - 1 / 100)
    assert B.compressor_q2("hvsign", [10, 100], k=0.1) == pytest.approx(1 - 0.1 / 100)
    # floored counts: d = 2, k = 0.9 keeps one entry -> 1 - 1/4, not the printed 1 - 0.45
    assert B.compressor_q2("hvsign", [2], k=0.9) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        B.compressor_q2("topk", [10])
    with pytest.raises(ValueError):
        B.compressor_q2("qsgd", [10])


# ---------------------------------------------------------------------------
# condition checkers
# ---------------------------------------------------------------------------


def test_fed_ef_condition_checkers_flag_violations():
    assert B.fed_ef_thm41_conditions(L=1, q=0.01, K=1, eta=1, eta_l=1e-4) == []
    assert "q <= 1/32 (required by the proof, missing in the statement)" in B.fed_ef_thm41_conditions(L=1, q=0.5, K=1, eta=1, eta_l=1e-4)
    assert "eta_l <= 1/(8KL)" in B.fed_ef_thm41_conditions(L=1, q=0.0, K=1, eta=0.01, eta_l=0.2)
    # the literal Thm 4.2 condition admits eta_l = 1/8 at q = 0, eta = 1; the corrected one does not
    assert B.fed_ef_thm42_conditions(L=1, q=0.0, K=1, eta=1, eta_l=0.125) == []
    assert B.fed_ef_thm42_conditions(L=1, q=0.0, K=1, eta=1, eta_l=0.125, corrected=True) == ["eta_l <= 1/(16KL eta C1)"]
    assert B.fed_ef_thm43_conditions(L=1, G=1, q=0.1, K=1, eta=1, eta_l=1.0, beta1=0.9, epsilon=0.01)
    v44 = B.fed_ef_thm44_conditions(L=1, q=0.0, n=10, m=10, K=1, eta=1, eta_l=1 / 6)
    assert v44 == ["eta_l <= 1/(8KL) (Lemma D.1, used in the proof)"]
    assert B.fed_ef_thm44_conditions(L=1, q=0.3, n=10, m=5, K=1, eta=1, eta_l=1e-7) == []


def test_other_condition_checkers():
    assert B.fedlada_thm35_conditions(L=1, S=5, m=10, K=4, eta=1, eta_l=1e-3, alpha=0.5, beta1=0.5, G_theta=1) == []
    bad = B.fedlada_thm35_conditions(L=1, S=5, m=10, K=4, eta=10, eta_l=0.1, alpha=0.5, beta1=0.9, G_theta=1, a=1.0)
    assert "eta*eta_l <= 1/(4L)" in bad and "beta1 < K/(K+1) (C > 0)" in bad and "a <= 1/(K-1) (proof)" in bad
    assert B.fedada2_thm20_conditions(G=1, eta_l=0.1, epsilon=0.1) == []
    assert B.fedada2_thm20_conditions(G=1, eta_l=0.1, epsilon=0.1, beta1_server=1.0)
    assert B.fed_lamb_thm5_conditions(M=2, alpha=0.1, form="proof") == ["M <= 1 (assumed in the proof's last step)"]
    assert B.fed_lamb_thm5_conditions(M=0.5, alpha=0.1, lam=0.01) == ["lambda = 0"]


def test_evaluate_helper_filters_constants_and_reports_missing():
    consts = {**BASE, "T": 100, "eta": 1.0, "eta_l": 1e-3, "unused_constant": 1.0}
    for name in ("fed_ef_thm41", "fed_ef_thm42", "fed_ef_thm43", "fed_ef_thm44"):
        val, viol = B.evaluate(name, **consts)
        assert val > 0 and isinstance(viol, list)
    with pytest.raises(TypeError):
        B.evaluate("fed_ef_thm42", L=1.0)
    assert set(B.EVALUATORS) == {"fed_ef_thm41", "fed_ef_thm42", "fed_ef_thm43", "fed_ef_thm44", "fedlada_thm35",
                                 "fedada2_thm20", "fed_lamb_thm5"}


def test_bounds_module_does_not_import_sympy():
    import subprocess
    import sys

    code = "import sys, theory.bounds; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"

"""The audit's own guarantees (issue 18): computed verdicts, severity labels, claim kinds, dependencies, premises.

* every refuted check is either shown to flip to "verified" when the paper's printed expression is replaced by the
  correct one (``Check.corrected``) or has a reachable "verified" branch in its own code;
* the eleven checks that used to return a fixed "refuted" each carry such a correction;
* every refutation carries a severity label, every check a kind, every dependency names a registered check;
* a verified check resting on a refuted one reports "verified, conditional on ...";
* refutations that used to lie outside the paper's hypotheses now test inside them (FedAda2's I(eps) < 1, Lemma 28's
  Phi_0 and bias correction, Fed-EF's eps < 1), and the readings outside them still refute (the spec's readings).
"""

from __future__ import annotations

import inspect

import pytest
import sympy as sp

from theory.core import KINDS, SEVERITIES, all_checks, get_check, resolve, run_check

CHECKS = all_checks()
REFUTED = [c for c in CHECKS if run_check(c.key).status == "refuted"]
CORRECTED = [c for c in CHECKS if c.corrected is not None]

#: the checks whose code could only return "refuted" before issue 18
FORMERLY_FIXED = (
    "fed-ef:thm41_needs_q_bound", "fed-ef:thm42_keeps_lemma_D3_term", "fed-ef:stoc_sparsity_bound_vs_qsgd",
    "fedlada:beta_weighted_closed_form_printed", "fedlada:cor36_rate_uniform_in_S_K", "fedlada:remark39_alpha_coefficients",
    "fedada2:paper_argmax_and_majorant", "fedada2:prop9_iv_statement_drops_K2", "fedada2:lemma21_stabilisation_remark",
    "fed-lamb:S6_layer_factor", "fed-lamb:thm5_statement_matches_proof",
)


#: refuted checks without a corrected expression, and why (a new refutation needs a correction or an entry here;
#: each of these has a reachable "verified" branch, see test_every_refutation_can_verify)
NO_CORRECTION = {
    "fedlada:table_multipliers_truncated": "the tables match neither truncation nor rounding",
    "fedlada:table3_vs_table6_at_1500": "printed table values, no expression to correct",
    "fedada2:def1_covers_cauchy": "Cauchy satisfies only Def. 11; no corrected Def. 1 is implied",
    "fedada2:I_eps_uniform_in_x": "no eps makes I uniform in x: the step has no local fix",
    "fedada2:B_maximised_at_zero": "the argmax is not at 0 for any admissible eps",
    "fedada2:thm20_drift_squared_lipschitz": "with squared constants the step holds but the bound stops vanishing",
    "fedada2:any_sampling_deterministic_guarantee": "a simulation of the claim; no printed expression",
    "fed-lamb:S8_ratio_bound_global_v": "the bound grows with sqrt(n); the own-v version is S8_ratio_bound_own_v",
    "fed-lamb:thm5_proof_form_speedup": "the proof's alpha-powers are what they are; the statement's are thm5_statement_matches_proof",
    "fed-lamb:T6_dependence_on_constants": "a spec reading",
    "fed-lamb:main_bound_42_no_decay": "the draft's bound has no decaying form to correct to",
    "fed-lamb:eq39_vector_inequality": "no coordinate-wise inequality holds for heterogeneous clients",
}


def test_refutations_without_correction_are_listed():
    missing = {c.key for c in REFUTED if c.corrected is None} - set(NO_CORRECTION)
    assert not missing, f"refuted checks with neither a corrected expression nor a listed reason: {sorted(missing)}"


@pytest.mark.parametrize("key", [c.key for c in CORRECTED])
def test_corrected_expression_flips_the_verdict(key):
    """With the paper's printed expression the check refutes; with the correct one it verifies."""
    c = get_check(key)
    assert run_check(key).status == "refuted", f"{key} is not refuted as printed"
    res = c.run(**c.corrected)
    assert res.status == "verified", f"{key} with {c.corrected}: {res.status}: {res.evidence}"


@pytest.mark.parametrize("key", FORMERLY_FIXED)
def test_formerly_fixed_checks_carry_a_correction(key):
    assert get_check(key).corrected is not None, f"{key} has no corrected expression that would make it verify"


@pytest.mark.parametrize("key", [c.key for c in REFUTED])
def test_every_refutation_can_verify(key):
    """No fixed verdict: a refuted check has a correction that verifies, or its own code has a verified branch."""
    c = get_check(key)
    src = inspect.getsource(c.func)
    assert c.corrected is not None or "verified(" in src or "identities(" in src, f"{key} has no path to 'verified'"


@pytest.mark.parametrize("key", [c.key for c in REFUTED])
def test_refutations_are_labelled(key):
    assert get_check(key).severity in SEVERITIES


def test_kinds_and_dependencies_are_valid():
    keys = {c.key for c in CHECKS}
    for c in CHECKS:
        assert c.kind in KINDS, c.key
        assert c.severity is None or c.severity in SEVERITIES, c.key
        for dep in c.dependency_keys:
            assert dep in keys, f"{c.key} depends on unknown check {dep}"
            assert dep != c.key


def test_conditional_verdicts():
    """Cor. 1's SGD rate rests on Thm 4.2's learning-rate condition and its dropped Lemma D.3 term, both refuted."""
    res = resolve("fed-ef:cor1_sgd_rate")
    assert res.status == "verified" and res.tally == "conditional"
    assert {"fed-ef:thm42_lr_condition_sufficient", "fed-ef:thm42_keeps_lemma_D3_term"} <= set(res.conditional_on)
    assert res.verdict.startswith("verified, conditional on ")
    # a verified check whose dependencies all verify stays plainly verified
    plain = resolve("fed-ef:thm43_condition_implies_components")
    assert plain.verdict == "verified" and not plain.conditional_on
    # refuted checks are never conditional
    assert all(not resolve(c.key).conditional_on for c in REFUTED)


# --------------------------------------------------------------------------- premises of the papers' statements


def test_fedada2_B_bounds_hold_under_the_premise_and_fail_outside_it():
    """Prop. 9 (ii) needs I(eps) < 1 (line 401); the spec's 'any eps in (0, 1]' reading is what fails."""
    from theory import fedada2 as m

    c = get_check("fedada2:B_below_2sqrt3")
    assert run_check(c.key).status == "verified"
    assert c.run(eps_values=(1e-4,)).status == "refuted"
    p = m._pdf_t(2)
    e_star = m.admissible_eps(p)
    assert max(m._expect(lambda s: 1.0, p, x0, 1.01 * e_star) for x0 in m.X_GRID) < 1
    assert m._expect(lambda s: 1.0, p, 0.0, 0.99 * e_star) >= 1
    # B_maximised_at_zero is refuted at an eps that satisfies the premise
    assert run_check("fedada2:B_maximised_at_zero").status == "refuted"
    assert "premise holds" in run_check("fedada2:B_maximised_at_zero").evidence


def test_fedada2_lemma28_counterexample_includes_phi0_and_bias_correction():
    from theory import fedada2 as m

    # Phi_0 is part of the bound tested and large for small eps
    assert m.lemma28_phi1(3, 0.9, 0.9, 3, 1e-3, 1.0) > m.lemma28_phi1(3, 0.9, 0.9, 3, 1e-3, 1.0, lambda *a: 0.0) + 100
    # bias correction: a constant gradient gives exactly one unit per step (m_hat/sqrt(v_hat) = 1)
    assert m.admu_pseudo_gradient((1.0, 1.0, 1.0), 0.9, 0.999, 1, 0.0) == pytest.approx(3.0)
    ev = run_check("fedada2:lemma28_phi1_bound").evidence
    assert "Phi_0 included" in ev and "z = 1 the bound holds" in ev


def test_fed_ef_hidden_factor_is_bounded_only_on_the_proofs_eps_range():
    c = get_check("fed-ef:thm43_hidden_factor")
    assert run_check(c.key).status == "verified"
    assert c.run(eps_max=sp.oo).status == "refuted"


def test_fed_ef_thm41_counterexample_respects_the_statement():
    """The statement allows every q < 1; the proof adds q <= 1/32, under which the coefficient is negative."""
    c = get_check("fed-ef:thm41_needs_q_bound")
    assert "allowed: q < 1" in run_check(c.key).evidence
    assert c.run(q_max=sp.Rational(1, 32)).status == "verified"


def test_thm20_psi_orders_detects_a_wrong_order(monkeypatch):
    """The order check reads Theorem 20's full expressions: an extra factor eta in Psi_4 is caught."""
    from theory import fedada2 as m

    assert m._thm20_orders().status == "verified"
    monkeypatch.setitem(m.THM20, "Psi4", m.THM20["Psi4"] * m.eta20)
    assert m._thm20_orders().status == "refuted"


def test_fedlada_gc_statement_drops_d():
    from theory import fedlada as m

    c = get_check("fedlada:Gc_statement_vs_proof")
    assert run_check(c.key).status == "refuted" and "d - 1" in run_check(c.key).evidence
    assert c.run(statement=m.Gc_expr).status == "verified"

"""Every registered theory check runs here; its status is pinned so that a change flipping it is caught.

If a check's outcome changes on purpose, update EXPECTED below *and* regenerate the committed report:
    python -m theory --format markdown > docs/theory_audit.md
"""

from __future__ import annotations

import re

import pytest

from theory.core import PAPERS, STATUSES, all_checks, run_check

#: pinned outcome of every check (paper:check -> status)
EXPECTED = {
    # fed-ef
    "fed-ef:C1_sgd_definition": "verified",
    "fed-ef:young_rho_step": "verified",
    "fed-ef:lemma_D5_geometric_constants": "verified",
    "fed-ef:lemma_D7_identity": "verified",
    "fed-ef:thm43_termI_G_condition": "verified",
    "fed-ef:lemma_D3_constants": "verified",
    "fed-ef:C2_le_C1_squared": "verified",
    "fed-ef:thm43_each_term_one_64th": "verified",
    "fed-ef:thm43_printed_48_constant": "refuted",
    "fed-ef:thm43_condition_implies_components": "verified",
    "fed-ef:thm43_C1_at_least_one": "refuted",
    "fed-ef:thm43_hidden_factor": "verified",
    "fed-ef:thm42_lr_condition_sufficient": "refuted",
    "fed-ef:thm42_sufficient_lr_condition": "verified",
    "fed-ef:thm41_coefficient_one_eighth": "refuted",
    "fed-ef:thm41_needs_q_bound": "refuted",
    "fed-ef:cor1_lr_feasibility": "verified",
    "fed-ef:thm44_lr_one_sixth_vs_lemma_D1": "refuted",
    "fed-ef:thm44_missing_m2_over_n2": "refuted",
    "fed-ef:thm41_rate_eq2": "verified",
    "fed-ef:thm41_nonvanishing_floor": "verified",
    "fed-ef:cor1_sgd_rate": "verified",
    "fed-ef:cor1_ams_rate": "verified",
    "fed-ef:thm42_keeps_lemma_D3_term": "refuted",
    "fed-ef:cor1_linear_speedup_threshold": "verified",
    "fed-ef:thm44_rate_substitution": "verified",
    "fed-ef:thm44_reduces_to_full_participation": "verified",
    "fed-ef:thm44_q0_recovers_full_precision_pp": "verified",
    "fed-ef:thm44_gamma_step_constants": "verified",
    "fed-ef:thm44_sampling_second_moment": "verified",
    "fed-ef:thm44_paper_bound_on_A": "refuted",
    "fed-ef:prop31_sign_identity": "verified",
    "fed-ef:compressor_q_bounds": "verified",
    "fed-ef:hvsign_bound_with_flooring": "refuted",
    "fed-ef:stoc_unbiased_variance": "verified",
    "fed-ef:stoc_sparsity_bound_vs_qsgd": "verified",
    "fed-ef:lemma_D8_telescoping": "verified",
    "fed-ef:ef_virtual_sequence_identities": "verified",
    "fed-ef:two_way_server_error_recursion": "verified",
    "fed-ef:expected_staleness": "verified",
    "fed-ef:realistic_q_constants": "verified",
    "fed-ef:lemma_D1_D3_steps": "refuted",
    "fed-ef:lemma_D4_D8_steps": "refuted",
    "fed-ef:thm42_steps": "refuted",
    "fed-ef:thm43_steps": "refuted",
    "fed-ef:thm41_steps": "verified",
    "fed-ef:thm44_steps": "refuted",
    "fed-ef:prop31_32_steps": "refuted",
    "fed-ef:remark2_unbiased_recovers_rate": "verified",
    "fed-ef:remark3_ams_pp_same_rate": "verified",
    "fed-ef:remark5_restart_bias_floor": "verified",
    # fedlada
    "fedlada:lemma_B7_closed_form": "verified",
    "fedlada:lemma_B8_z_identity": "verified",
    "fedlada:lemmas_B1_to_B5": "verified",
    "fedlada:lemma_B6_zero_mean_sum": "refuted",
    "fedlada:lemma_B6_martingale_use": "verified",
    "fedlada:sampling_identity_W": "verified",
    "fedlada:delta_and_R3_scalar_inequalities": "verified",
    "fedlada:momentum_unrolling_18": "verified",
    "fedlada:beta_weighted_sums": "verified",
    "fedlada:beta_weighted_closed_form_printed": "refuted",
    "fedlada:mbar_and_ga_bounds": "verified",
    "fedlada:ga_printed_intermediate": "refuted",
    "fedlada:quadratic_19_p_q_C": "verified",
    "fedlada:gamma_pp_upper_root": "verified",
    "fedlada:p_choice_3K2_bound": "verified",
    "fedlada:constant_propagation_C2_C3": "verified",
    "fedlada:stepsize_conditions_basic": "verified",
    "fedlada:pp_condition_relaxation": "refuted",
    "fedlada:eta_l_condition_theorem_vs_proof": "refuted",
    "fedlada:gamma_plus_half_condition": "refuted",
    "fedlada:Gc_statement_vs_proof": "refuted",
    "fedlada:final_assembly_mu1": "refuted",
    "fedlada:cor36_rate_in_T": "verified",
    "fedlada:cor36_rate_uniform_in_S_K": "refuted",
    "fedlada:cor36_lr_feasibility": "verified",
    "fedlada:thm35_condition_G_L_placement": "refuted",
    "fedlada:cor36_implied_global_lr": "verified",
    "fedlada:remark38_rounds_for_precision": "verified",
    "fedlada:sec43_crossover_with_derived_orders": "verified",
    "fedlada:remark39_alpha_coefficients": "refuted",
    "fedlada:eq6_and_theta_range": "verified",
    "fedlada:G_theta_printed_inequality": "refuted",
    "fedlada:G_theta_used_as_lower_bound": "refuted",
    "fedlada:q_upper_bound_in_negative_term": "refuted",
    "fedlada:mbar_definition_consistent": "refuted",
    "fedlada:table_multipliers_truncated": "refuted",
    "fedlada:table3_vs_table6_at_1500": "refuted",
    "fedlada:thm35_descent_split": "refuted",
    "fedlada:thm35_R1_bound": "verified",
    "fedlada:thm35_M_noise_replacement": "refuted",
    "fedlada:thm35_R2_bound": "verified",
    "fedlada:thm35_R3_bound": "refuted",
    "fedlada:thm35_recursion_algebra": "verified",
    "fedlada:thm35_A_K_substitution": "verified",
    "fedlada:thm35_assembly_810_822": "refuted",
    "fedlada:thm35_pp_difference": "refuted",
    # fedada2
    "fedada2:student_t_normalisation_and_variance": "verified",
    "fedada2:student_t2_infinite_variance": "verified",
    "fedada2:student_t_moment_finiteness": "verified",
    "fedada2:student_t_normal_limit": "verified",
    "fedada2:cauchy_moments_and_stability": "verified",
    "fedada2:def1_covers_cauchy": "refuted",
    "fedada2:argmax_xi_p": "verified",
    "fedada2:paper_argmax_and_majorant": "refuted",
    "fedada2:I_eps_divergence_and_bound": "verified",
    "fedada2:I_eps_uniform_in_x": "refuted",
    "fedada2:B_maximised_at_zero": "refuted",
    "fedada2:B_below_2sqrt3": "verified",
    "fedada2:cauchy_B_below_2": "verified",
    "fedada2:fedavg_unrolling": "verified",
    "fedada2:prop9_ii_recursion": "verified",
    "fedada2:prop9_iv_sum_vs_integral": "refuted",
    "fedada2:prop9_iv_statement_drops_K2": "refuted",
    "fedada2:lemma16_server_step": "verified",
    "fedada2:log_telescoping_lemma": "verified",
    "fedada2:lemma21_series_and_c_beta": "verified",
    "fedada2:lemma21_stabilisation_remark": "refuted",
    "fedada2:thm6_psi_labels": "refuted",
    "fedada2:thm20_drift_squared_lipschitz": "refuted",
    "fedada2:thm20_bound_with_squared_constants": "refuted",
    "fedada2:thm20_psi_orders": "verified",
    "fedada2:thm4_13_fedavg_infinite_variance": "verified",
    "fedada2:prop5_14_adagrad_bounded": "verified",
    "fedada2:thm25_update_form": "refuted",
    "fedada2:cor27_29_same_orders": "verified",
    "fedada2:cor23_exponent_regions": "verified",
    "fedada2:cor23_case2_boundary_strict": "refuted",
    "fedada2:cor24_rate_T_minus_half": "verified",
    "fedada2:ceil_floor_and_bias_correction": "verified",
    "fedada2:lemma26_28_sums": "verified",
    "fedada2:lemma28_phi1_bound": "refuted",
    "fedada2:derived_lipschitz_Ltilde": "verified",
    "fedada2:dp_accounting_epsilon": "verified",
    "fedada2:any_sampling_deterministic_guarantee": "refuted",
    "fedada2:server_adam_v_lower_bound": "refuted",
    "fedada2:lemma15_statement_vs_proof": "refuted",
    "fedada2:prop9_i_steps": "refuted",
    "fedada2:prop9_ii_steps": "verified",
    "fedada2:prop9_iii_steps": "verified",
    "fedada2:prop9_iv_steps": "refuted",
    "fedada2:prop10_steps": "verified",
    "fedada2:thm13_steps": "refuted",
    "fedada2:lemma15_steps": "verified",
    "fedada2:lemma17_sm3_bounds": "refuted",
    "fedada2:lemma18_subsequence": "verified",
    "fedada2:lemma22_log_bound": "verified",
    "fedada2:lemma28_steps": "refuted",
    "fedada2:lemma30_steps": "verified",
    "fedada2:cor23_printed_ratios": "verified",
    "fedada2:lemma16_steps": "verified",
    "fedada2:thm20_run_steps": "refuted",
    "fedada2:thm25_run_steps": "refuted",
    "fedada2:lemma26_steps": "verified",
    "fedada2:cor27_bound_on_runs": "verified",
    "fedada2:cor29_bound_on_runs": "verified",
    # fed-lamb
    "fed-lamb:S1_virtual_sequence": "verified",
    "fed-lamb:S2_virtual_step": "verified",
    "fed-lamb:S2_paper_signs": "refuted",
    "fed-lamb:S3_polarization_equality": "refuted",
    "fed-lamb:S4_norm_inequalities": "verified",
    "fed-lamb:S5_p_cancels": "verified",
    "fed-lamb:S6_layer_factor": "refuted",
    "fed-lamb:S7_telescoping": "verified",
    "fed-lamb:S11_epsilon_powers": "refuted",
    "fed-lamb:S12_layer_count_bound": "verified",
    "fed-lamb:S13_bias_correction": "verified",
    "fed-lamb:S8_ratio_bound_own_v": "verified",
    "fed-lamb:S8_ratio_bound_global_v": "refuted",
    "fed-lamb:S9_lemma1_consensus_bound": "refuted",
    "fed-lamb:main_lemma1_eq3": "refuted",
    "fed-lamb:main_lemma1_eq5": "refuted",
    "fed-lamb:S10_rate_expansion": "verified",
    "fed-lamb:S10_claimed_rate_sqrt_pL_over_nR": "verified",
    "fed-lamb:S10_spec_exact_scaling": "refuted",
    "fed-lamb:S10_alpha_sqrt_n_no_speedup": "verified",
    "fed-lamb:thm5_proof_form_speedup": "refuted",
    "fed-lamb:thm5_statement_matches_proof": "refuted",
    "fed-lamb:thm5_init_term_from_descent": "refuted",
    "fed-lamb:B2_sign_probability_step": "refuted",
    "fed-lamb:supp10_cross_terms": "refuted",
    "fed-lamb:T6_dependence_on_constants": "refuted",
    "fed-lamb:main_bound_42_no_decay": "refuted",
    "fed-lamb:P1_P2_step_properties": "verified",
    "fed-lamb:T4_local_steps_hurt": "verified",
    "fed-lamb:phi_M_factored_out_of_difference": "refuted",
    "fed-lamb:eq39_vector_inequality": "refuted",
    "fed-lamb:main_thm1_descent_steps": "verified",
    "fed-lamb:main_thm1_15_sign": "refuted",
    "fed-lamb:main_thm1_A1_chain": "refuted",
    "fed-lamb:main_thm1_A2_bounds": "refuted",
    "fed-lamb:main_thm1_sums_34_35": "verified",
    "fed-lamb:main_thm1_33_combination": "refuted",
    "fed-lamb:main_thm1_36_37_logic": "refuted",
    "fed-lamb:main_thm1_41": "refuted",
    "fed-lamb:main_lemma1_local_step": "verified",
    "fed-lamb:supp_thm5_decomposition_steps": "verified",
    "fed-lamb:supp_190_consensus_term": "refuted",
    "fed-lamb:supp_A1_sign": "refuted",
    "fed-lamb:supp_B2_chain": "verified",
    "fed-lamb:supp_lipschitz_squared": "refuted",
    "fed-lamb:supp_eq8_young_coefficient": "refuted",
}

#: spec items each paper's checks must cover (ids as tagged in the check's ``spec``; "err-N" = item N of the spec's
#: ambiguities/typos section, "2.7.x"/"3.9.x" = FedAda2's [CHECK] lists)
REQUIRED_SPEC_ITEMS = {
    # specs/fed-ef.md sec. 3.9 (V1-V24), sec. 5 theoretical claims (T1-T4), sec. 6 theory items
    "fed-ef": {f"V{i}" for i in range(1, 25)} | {"T1", "T2", "T3", "T4"}
    | {"err-21", "err-22a", "err-22b", "err-23", "err-24", "err-26", "err-27"},
    # specs/fedlada.md sec. 2.6 items 1-18 and sec. 5 theory items
    "fedlada": {str(i) for i in range(1, 19)} | {"err-18", "err-20", "err-21", "err-22", "err-23", "err-24", "err-26", "err-28"},
    # specs/fedada2.md sec. 3.14 items 1-16, [CHECK] lists of sec. 2.7 and 3.9, sec. 6 theory items 14-24
    "fedada2": {str(i) for i in range(1, 17)} | {f"2.7.{i}" for i in range(1, 6)}
    | {"3.9.1", "3.9.2", "3.9.3", "3.9.5", "3.9.6"} | {f"err-{i}" for i in range(14, 25)},
    # specs/fed-lamb.md sec. 2.7 (S1-S13), sec. 4 theory claims, sec. 5 theory items
    "fed-lamb": {f"S{i}" for i in range(1, 14)} | {"T2", "T3", "T4", "T5", "T6"}
    | {"err-2", "err-3", "err-4", "err-5", "err-6", "err-7", "err-8", "err-9", "err-10", "err-12"},
}

CHECKS = all_checks()


@pytest.mark.parametrize("key", [c.key for c in CHECKS])
def test_check_status_is_pinned(key):
    res = run_check(key)
    assert key in EXPECTED, f"new check {key} has no pinned status (got {res.status}: {res.evidence})"
    assert res.status == EXPECTED[key], f"{key}: expected {EXPECTED[key]}, got {res.status}: {res.evidence}"
    assert res.status in STATUSES and res.evidence.strip()
    assert "\n" not in res.evidence


@pytest.mark.parametrize("key", [k for k, v in EXPECTED.items() if v == "refuted"])
def test_refutations_carry_concrete_evidence(key):
    """A refutation names concrete values or a simplified counter-expression: it contains a number or an '='."""
    res = run_check(key)
    assert re.search(r"[0-9=]", res.evidence), res.evidence


def test_no_stale_pins():
    registered = {c.key for c in CHECKS}
    assert set(EXPECTED) == registered, f"pinned but not registered: {set(EXPECTED) - registered}"


def test_every_paper_has_checks_and_findings():
    for paper in PAPERS:
        statuses = [EXPECTED[c.key] for c in CHECKS if c.paper == paper]
        assert len(statuses) >= 15, paper
        assert "verified" in statuses and "refuted" in statuses, paper


@pytest.mark.parametrize("paper", PAPERS)
def test_spec_items_covered(paper):
    covered = set().union(*(set(c.spec) for c in CHECKS if c.paper == paper))
    missing = REQUIRED_SPEC_ITEMS[paper] - covered
    assert not missing, f"{paper}: spec items without a check: {sorted(missing)}"


def test_checks_have_claims_and_citations():
    for c in CHECKS:
        assert c.claim, c.key
        assert re.search(r"(line|eq\.|Lemma|Theorem|Thm|Prop|Cor|Table|App\.|Algorithm)", c.source), f"{c.key}: docstring lacks a citation"
        assert ".txt" in c.source, f"{c.key}: docstring should name the paper file"


def test_names_are_unique_per_paper():
    keys = [c.key for c in CHECKS]
    assert len(keys) == len(set(keys))

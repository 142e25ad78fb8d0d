"""Fed-EF (Li & Li): constants, learning-rate conditions, bounds and their checks.

Source: /work/shared/papers/fed-ef.txt (line numbers below refer to it) and
the extract /work/shared/specs/fed-ef.md (section 3; items V1-V24, T1-T4 and
the theory items 21-27 of section 6).

The paper reuses the name C1 for three different constants; they are
namespaced here as ``C1_sgd`` (Thm 4.2), ``C1_ams`` (Thm 4.3) and ``C1_pp``
(Thm 4.4).  Inside the proof of Thm 4.2, "C1" means ``C1_sgd_proof`` = C1_sgd - 1.
Bounds are stored as dicts of named terms, exactly as displayed in the
theorems (the hidden absolute constant of "<~" is *not* included; see
:mod:`theory.bounds` for the numeric evaluators that make it explicit).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp

from .algebra import (
    compare_rate,
    describe,
    fmt,
    geometric_series,
    identities,
    is_identity,
    lr_threshold,
    order_match,
    pos,
    rational_nonneg,
    show,
    simplify_zero,
    subset_mean,
    unit,
)
from .core import H as Hyp
from .core import check, refuted, verified

PAPER = "fed-ef"

# ---------------------------------------------------------------------------
# symbols (paper names)
# ---------------------------------------------------------------------------
q, L, sigma, sigma_g, G, n, m, K, T, eta, eta_l, eps, d, F = pos(
    "q L sigma sigma_g G n m K T eta eta_l epsilon d F"
)
beta1 = sp.Symbol("beta1", positive=True)
c_g, c_l = pos("c_g c_l")  # the constants hidden in Theta(.) learning-rate choices
#: sigma^2 + 6 K sigma_g^2, the recurring heterogeneity factor
H = sigma**2 + 6 * K * sigma_g**2
SCALE = (T, K, n, m)  # variables an O(.) rate is expressed in

# symbols standing for the namespaced constants inside the bound dictionaries
C1_SGD, C1_AMS, C1_PP, CPRIME = pos("C1_sgd C1_ams C1_pp Cprime")

# ---------------------------------------------------------------------------
# constants (Assumptions / theorem statements)
# ---------------------------------------------------------------------------
#: Thm 4.2 (line 221): C1 := 2 + 4q^2/(1-q^2)^2
C1_sgd = 2 + 4 * q**2 / (1 - q**2) ** 2
#: the "C1" used inside the proof of Thm 4.2 (line 899): 1 + 4q^2/(1-q^2)^2
C1_sgd_proof = 1 + 4 * q**2 / (1 - q**2) ** 2
#: Thm 4.3 (line 239): C1 := beta1/(1-beta1) + 2q/(1-q^2)
C1_ams = beta1 / (1 - beta1) + 2 * q / (1 - q**2)
#: proof of Thm 4.3, eq. (11): C2 := beta1^2/(1-beta1)^2 + 4q^2/(1-q^2)^2
C2_ams = beta1**2 / (1 - beta1) ** 2 + 4 * q**2 / (1 - q**2) ** 2
#: Thm 4.4 (line 266): C1 := q^2/(1-q^2)^3 and C' := (n-m)/(n-1)
C1_pp = q**2 / (1 - q**2) ** 3
Cprime = (n - m) / (n - 1)

CONSTANTS = {C1_SGD: C1_sgd, C1_AMS: C1_ams, C1_PP: C1_pp, CPRIME: Cprime}

# ---------------------------------------------------------------------------
# theorem bounds (displayed form, without the hidden constant of "<~")
# ---------------------------------------------------------------------------
#: Thm 4.1 (line 199), Fed-SGD with direct biased compression.  (Numerator
#: printed f(theta_1) - E f(theta_{t+1}); F = f(theta_1) - f* used here.)
THM41 = {
    "init": F / (eta * eta_l * T * K),
    "variance": 4 * eta * eta_l * (1 + q**2) * L * sigma**2 / n,
    "bias_floor": 64 * q**2 * sigma**2 / (K * n),
    "drift_global": 20 * eta * eta_l**3 * (1 + q**2) * K**2 * L**3 * H,
    "drift_local": (320 * q**2 + 3) * eta_l**2 * K * L**2 * H,
}
#: Thm 4.2 (line 223), Fed-EF-SGD.
THM42 = {
    "init": F / (eta * eta_l * T * K),
    "variance": 2 * eta * eta_l * C1_SGD * L * sigma**2 / n,
    "drift": 10 * eta * eta_l**3 * C1_SGD * K**2 * L**3 * H,
}
#: Thm 4.3 (line 240), Fed-EF-AMS.
THM43 = {
    "init": F / (eta * eta_l * T * K),
    "drift_local": 5 * eta_l**2 * K * L**2 / (2 * sp.sqrt(eps)) * H,
    "drift_global": eta * eta_l**3 * (30 + 20 * C1_AMS**2) * K**2 * L**3 / eps * H,
    "variance": eta * eta_l * L * (6 + 4 * C1_AMS**2) * sigma**2 / (n * eps),
    "adaptive_d1": (C1_AMS + 1) * G**2 * d / (T * sp.sqrt(eps)),
    "adaptive_d2": 3 * eta * eta_l * C1_AMS**2 * L * K * G**2 * d / (T * eps),
}
#: Thm 4.4 (line 265), Fed-EF-SGD under partial participation.
THM44 = {
    "init": F / (eta * eta_l * T * K),
    "variance": eta * eta_l * L * sigma**2 / m,
    "variance_stale": 8 * eta * eta_l * C1_PP * L * n * sigma**2 / m**2,
    "sampling_het": 3 * eta * eta_l * CPRIME * K * L * sigma_g**2 / m,
    "drift_local": 5 * eta_l**2 * K * L**2 / 2 * H,
    "drift_global": 15 * eta * eta_l**3 * CPRIME * K**2 * L**3 / m * H,
    "stale_error": 560 * eta * eta_l * C1_PP * (n - m) * L / m**2 * H,
}

# ---------------------------------------------------------------------------
# learning-rate conditions: eta_l <= bound, one entry per term of the min
# ---------------------------------------------------------------------------
THM41_CONDITIONS = {  # line 199: eta_l <= 1/(8KL max{1, 8(1+q^2) eta})
    "eta_l <= 1/(8KL)": 1 / (8 * K * L),
    "eta_l <= 1/(64KL(1+q^2)eta)": 1 / (64 * K * L * (1 + q**2) * eta),
}
THM42_CONDITIONS = {  # line 221: eta_l <= 1/(2KL max{4, eta(C1+1)})
    "eta_l <= 1/(8KL)": 1 / (8 * K * L),
    "eta_l <= 1/(2KL eta (C1+1))": 1 / (2 * K * L * eta * (C1_SGD + 1)),
}
THM43_CONDITIONS = {  # line 239
    "eta_l <= 1/(8KL)": 1 / (8 * K * L),
    "eta_l <= (1-q^2) sqrt(eps)/(4K(1+q^2)^1.5 G)": (1 - q**2) * sp.sqrt(eps) / (4 * K * (1 + q**2) ** sp.Rational(3, 2) * G),
    "eta_l <= sqrt(eps)/(128 eta K L)": sp.sqrt(eps) / (128 * eta * K * L),
    "eta_l <= sqrt(eps)/(256 C1^2 eta K L)": sp.sqrt(eps) / (256 * C1_AMS**2 * eta * K * L),
    "eta_l <= sqrt(eps)/(24 eta^(1/3) K L)": sp.sqrt(eps) / (24 * eta ** sp.Rational(1, 3) * K * L),
}
THM44_CONDITIONS = {  # line 265
    "eta_l <= 1/(6KL)": 1 / (6 * K * L),
    "eta_l <= m/(96 C' eta K L)": m / (96 * CPRIME * eta * K * L),
    "eta_l <= m^2/(53760 (n-m) C1 eta K L)": m**2 / (53760 * (n - m) * C1_PP * eta * K * L),
    "eta_l <= 1/(4 eta K L)": 1 / (4 * eta * K * L),
    "eta_l <= 1/(32 C1 eta K L)": 1 / (32 * C1_PP * eta * K * L),
}

# ---------------------------------------------------------------------------
# learning-rate choices and stated rates
# ---------------------------------------------------------------------------
#: Corollary 1 / Thm 4.1 (lines 207, 248): eta = Theta(sqrt(Kn)), eta_l = Theta(1/(K sqrt T))
COR1_LR = {eta: c_g * sp.sqrt(K * n), eta_l: c_l / (K * sp.sqrt(T))}
#: Thm 4.4 (line 267): eta = Theta(sqrt(Km)), eta_l = Theta(sqrt(m)/(K sqrt(Tn)))
THM44_LR = {eta: c_g * sp.sqrt(K * m), eta_l: c_l * sp.sqrt(m) / (K * sp.sqrt(T * n))}
#: eq. (2), line 207
THM41_RATE = (1 + q**2) / sp.sqrt(T * K * n) + (1 + q**2) / (T * K) * (sigma**2 + K * sigma_g**2) + q**2 * sigma**2 / (K * n)
#: Corollary 1, Fed-EF-SGD (line 249)
COR1_SGD_RATE = (F + sigma**2) / sp.sqrt(T * K * n) + sp.sqrt(n) / (T ** sp.Rational(3, 2) * sp.sqrt(K)) * (sigma**2 + K * sigma_g**2)
#: Corollary 1, Fed-EF-AMS (line 251)
COR1_AMS_RATE = (F + sigma**2) / sp.sqrt(T * K * n) + (1 / (T * K) + sp.sqrt(n) / (T ** sp.Rational(3, 2) * sp.sqrt(K))) * (sigma**2 + K * sigma_g**2)
#: Thm 4.4 final rate (line 267)
THM44_RATE = sp.sqrt(n / m) * ((F + sigma**2) / sp.sqrt(T * K * m) + sp.sqrt(K) / sp.sqrt(T * m) * sigma_g**2)


# ---------------------------------------------------------------------------
# hypotheses of the statements, evaluated at a refutation's counterexample (core.judge)
# ---------------------------------------------------------------------------
def _v(p, name):
    return sp.nsimplify(p[name])


def _cond_holds(conditions: dict, p: dict) -> bool:
    """eta_l at the point satisfies every term of a learning-rate condition (a dict of upper bounds on eta_l)."""
    vals = {sym: _v(p, sym.name) for sym in (q, n, m, eta, K, L, eps, G) if sym.name in p}
    extra = {CPRIME: Cprime, C1_PP: C1_pp, C1_SGD: C1_sgd, C1_AMS: C1_ams}
    for b in conditions.values():
        bb = b.subs(extra).subs(vals)
        if bb.has(sp.zoo, sp.nan, sp.oo):  # C1 = 0 or n = m: the term puts no constraint
            continue
        if not _v(p, "eta_l") <= bb:
            return False
    return True


H_Q = Hyp("0 <= q < 1 (q-deviate compressor, discrepancy q_A < 1)", lambda p: 0 <= _v(p, "q") < 1,
          "fed-ef.txt line 68 (Def. 1), line 189 (Assumption 3)")
H_BETA1 = Hyp("0 <= beta1 < 1 (AMSGrad momentum)", lambda p: 0 <= _v(p, "beta1") < 1, "fed-ef.txt Alg. 2 line 17, Thm 4.3 line 239")
H_POS = Hyp("eta > 0, K >= 1 an integer, L > 0", lambda p: _v(p, "eta") > 0 and _v(p, "K") >= 1 and _v(p, "K").is_integer
            and _v(p, "L") > 0, "fed-ef.txt Assumption 1 (line 180), Alg. 1-2")
H_PP = Hyp("1 <= m <= n integers (m of n clients sampled)", lambda p: 1 <= _v(p, "m") <= _v(p, "n")
           and _v(p, "m").is_integer and _v(p, "n").is_integer, "fed-ef.txt Thm 4.4 line 265, line 1190")
H_LR41 = Hyp("eta_l <= 1/(8KL max{1, 8(1+q^2) eta}) (Thm 4.1's condition)",
             lambda p: _cond_holds(THM41_CONDITIONS, p), "fed-ef.txt line 199")
H_LR42 = Hyp("eta_l <= 1/(2KL max{4, eta(C1+1)}), C1 = 2 + 4q^2/(1-q^2)^2 (Thm 4.2's condition)",
             lambda p: _cond_holds(THM42_CONDITIONS, p), "fed-ef.txt line 221")
H_LR44 = Hyp("eta_l <= min{1/6, m/(96C' eta), m^2/(53760(n-m)C1 eta), 1/(4 eta), 1/(32 C1 eta)}/(KL) (Thm 4.4's condition)",
             lambda p: _cond_holds(THM44_CONDITIONS, p), "fed-ef.txt line 265")


def bound(terms: dict) -> sp.Expr:
    """Sum of a bound's terms with the namespaced constants substituted."""
    return sp.Add(*terms.values()).subs(CONSTANTS)



# ===========================================================================
# constants, Young steps and geometric sums  (spec V1-V8)
# ===========================================================================


@check(PAPER, "C1_sgd_definition",
       "Thm 4.2's C1 = 2 + 4q^2/(1-q^2)^2 equals 1 + the proof's C1, where the proof's C1 = 1 + "
       "(2q^2/(1-q^2)) * sum_k ((1+q^2)/2)^k comes from Lemma D.5's geometric summation.",
       spec=("V2", "err-22c"), severity="constant")
def _c1_sgd_definition():
    """fed-ef.txt line 221 (Thm 4.2 statement), line 899 (proof's C1), Lemma D.5 line 1039."""
    geo = geometric_series((1 + q**2) / 2)
    return identities([
        ("geometric sum", geo, 2 / (1 - q**2)),
        ("proof's C1", 1 + 2 * q**2 / (1 - q**2) * geo, C1_sgd_proof),
        ("theorem's C1 = proof's C1 + 1", C1_sgd_proof + 1, C1_sgd),
    ])


@check(PAPER, "young_rho_step",
       "With rho = (1-q^2)/(2q^2): q^2(1+rho) = (1+q^2)/2 and q^2(1+1/rho) = q^2(1+q^2)/(1-q^2) <= 2q^2/(1-q^2) "
       "(Lemma D.5 recursion (17); same algebra for the two-way server error phi of Sec. 6).",
       spec=("V1", "V21"), severity="constant")
def _young_rho():
    """fed-ef.txt Lemma D.5 (line 1034ff, eq. 17) and Sec. 6 (line 398ff). Display 1045-1048."""
    rho = (1 - q**2) / (2 * q**2)
    res = identities([
        ("q^2(1+rho)", q**2 * (1 + rho), (1 + q**2) / 2),
        ("q^2(1+1/rho)", q**2 * (1 + 1 / rho), q**2 * (1 + q**2) / (1 - q**2)),
    ])
    if res.status != "verified":
        return res
    s = sp.Symbol("s", positive=True)  # q^2 = s/(1+s) in (0,1)
    gap = (2 * q**2 / (1 - q**2) - q**2 * (1 + q**2) / (1 - q**2)).subs(q, sp.sqrt(unit(s)))
    if not rational_nonneg(gap, [s]):
        return refuted(f"2q^2/(1-q^2) - q^2(1+q^2)/(1-q^2) = {show(sp.factor(gap))} is not >= 0")
    return verified(res.evidence + "; and 2q^2/(1-q^2) - q^2(1+q^2)/(1-q^2) = q^2 >= 0 for q<1")


@check(PAPER, "lemma_D5_geometric_constants",
       "Lemma D.5: (2q^2/(1-q^2)) * 2/(1-q^2) = 4q^2/(1-q^2)^2, and the sigma^2 and drift constants are "
       "(2q^2/(1-q^2)) * 4 * 2/(1-q^2) = 16q^2/(1-q^2)^2 and (2q^2/(1-q^2)) * 20 * 2/(1-q^2) = 80q^2/(1-q^2)^2.",
       spec=("V2",), severity="constant")
def _lemma_d5():
    """fed-ef.txt Lemma D.5, line 1039-1040. Display 1038-1040."""
    a = 2 * q**2 / (1 - q**2)
    geo = geometric_series((1 + q**2) / 2)
    return identities([
        ("4q^2/(1-q^2)^2", a * geo, 4 * q**2 / (1 - q**2) ** 2),
        ("16", a * 4 * geo, 16 * q**2 / (1 - q**2) ** 2),
        ("80", a * 20 * geo, 80 * q**2 / (1 - q**2) ** 2),
    ])


@check(PAPER, "lemma_D7_identity",
       "Lemma D.7: 4(1+q^2)(1 + 4q^2/(1-q^2)^2) = 4(1+q^2)^3/(1-q^2)^2, using (1-q^2)^2 + 4q^2 = (1+q^2)^2.",
       spec=("V3",), severity="constant")
def _lemma_d7():
    """fed-ef.txt Lemma D.7, line 1100. Display 1106-1110."""
    return identities([
        ("(1-q^2)^2 + 4q^2", (1 - q**2) ** 2 + 4 * q**2, (1 + q**2) ** 2),
        ("v-hat constant", 4 * (1 + q**2) * (1 + 4 * q**2 / (1 - q**2) ** 2), 4 * (1 + q**2) ** 3 / (1 - q**2) ** 2),
    ])


@check(PAPER, "thm43_termI_G_condition",
       "Term I of Thm 4.3: eta_l <= sqrt(15)(1-q^2)sqrt(eps)/(14(1+q^2)^1.5 K G) gives "
       "4 eta_l^2 (1+q^2)^3 K^2 G^2/(1-q^2)^2 + eps <= 64/49 eps, then -7/8 + 3/4 = -1/8; the theorem's "
       "(1-q^2)/4 condition implies the sqrt(15)/14 one.",
       spec=("V4",), severity="constant", depends=("lemma_D7_identity",))
def _thm43_term_i():
    """fed-ef.txt proof of Thm 4.3, lines 740-744 (term I, eq. 7). Display 722-726."""
    bound_l = sp.sqrt(15) * (1 - q**2) * sp.sqrt(eps) / (14 * (1 + q**2) ** sp.Rational(3, 2) * K * G)
    lhs = (4 * eta_l**2 * (1 + q**2) ** 3 * K**2 * G**2 / (1 - q**2) ** 2).subs(eta_l, bound_l)
    res = identities([
        ("v-hat term at the bound", lhs, sp.Rational(60, 196) * eps),
        ("1 + 60/196", 1 + sp.Rational(60, 196), sp.Rational(64, 49)),
        ("-7/8 + 3/4", sp.Rational(-7, 8) + sp.Rational(3, 4), sp.Rational(-1, 8)),
    ])
    if res.status != "verified":
        return res
    if not sp.Rational(1, 4) <= sp.sqrt(15) / 14:
        return refuted("1/4 > sqrt(15)/14, so the theorem's G-condition does not imply term I's")
    return verified(res.evidence + f"; and 1/4 <= sqrt(15)/14 = {fmt(float(sp.sqrt(15) / 14))}, "
                    "so the theorem's (1-q^2)sqrt(eps)/(4KG(1+q^2)^1.5) condition implies it")


@check(PAPER, "lemma_D3_constants",
       "Lemma D.3: eta_l <= 1/(8KL) gives 30 eta_l^2 K^2 L^2/2 <= 15/64, 1/2 + 15/64 = 47/64 < 3/4, "
       "and 60 eta_l^2 K^2 L^2 + 1 < 2.",
       spec=("V5",), severity="constant")
def _lemma_d3():
    """fed-ef.txt Lemma D.3 (line 974) and its proof ending at line 995. Displays 978 and 993."""
    x = (eta_l * K * L) ** 2
    at = {eta_l: 1 / (8 * K * L)}
    ok = (sp.nsimplify(30 * x / 2).subs(at) == sp.Rational(15, 64)
          and sp.Rational(1, 2) + sp.Rational(15, 64) == sp.Rational(47, 64) < sp.Rational(3, 4)
          and (60 * x + 1).subs(at) < 2)
    if not ok:
        return refuted("one of 15/64, 47/64 < 3/4, 60/64 + 1 < 2 fails")
    return verified("at eta_l = 1/(8KL): 30x/2 = 15/64 and 60x + 1 = 31/16 < 2 (x = eta_l^2K^2L^2, "
                    "both increasing in eta_l); 1/2 + 15/64 = 47/64 < 3/4")


@check(PAPER, "C2_le_C1_squared",
       "Proof of Thm 4.3: C2 = beta1^2/(1-beta1)^2 + 4q^2/(1-q^2)^2 <= C1^2 with C1 = beta1/(1-beta1) + 2q/(1-q^2); "
       "the difference is 4 beta1 q/((1-beta1)(1-q^2)) >= 0.",
       spec=("V6",), severity="constant")
def _c2_le_c1sq():
    """fed-ef.txt line 830 (simplification C2 <= C1^2) and eq. (11). Display 838-839 (C_2 <= C_1^2)."""
    diff = sp.factor(simplify_zero(C1_ams**2 - C2_ams))
    expected = 4 * beta1 * q / ((1 - beta1) * (1 - q**2))
    if not is_identity(diff, expected):
        return refuted(f"C1^2 - C2 = {show(diff)}")
    return verified(f"C1^2 - C2 simplifies to {show(expected)}, >= 0 for beta1, q in [0,1)")


@check(PAPER, "thm43_each_term_one_64th",
       "With rho = L*eta, each of the four positive terms of Upsilon_1 (eq. 13) equals exactly "
       "eta*eta_l*K/(64 sqrt(eps)) at its own learning-rate bound, so Upsilon_1 <= (-1/8 + 4/64) = -1/16 "
       "(in units of eta*eta_l*K/sqrt(eps)).",
       spec=("V7",), kind="derived", severity="constant")
def _thm43_terms_64():
    """fed-ef.txt proof of Thm 4.3, lines 808-816 (condition and Upsilon_1 <= -eta eta_l K/(16 sqrt eps)). Display 802-807."""
    rho = L * eta
    C2 = sp.Symbol("C2", positive=True)
    unit_ = eta * eta_l * K / (64 * sp.sqrt(eps))
    items = [
        ("2 eta^2 eta_l^2 K^2 L/eps", 2 * eta**2 * eta_l**2 * K**2 * L / eps, sp.sqrt(eps) / (128 * eta * K * L)),
        ("120 eta^2 eta_l^4 K^4 L^3/eps", 120 * eta**2 * eta_l**4 * K**4 * L**3 / eps,
         (sp.sqrt(eps) / (7680 * eta)) ** sp.Rational(1, 3) / (K * L)),
        ("2 rho eta eta_l^2 K^2/eps", 2 * rho * eta * eta_l**2 * K**2 / eps, sp.sqrt(eps) / (128 * eta * K * L)),
        ("4 eta^3 eta_l^2 C2 K^2 L^2/(rho eps)", 4 * eta**3 * eta_l**2 * C2 * K**2 * L**2 / (rho * eps),
         sp.sqrt(eps) / (256 * C2 * eta * K * L)),
    ]
    res = identities([(lab, term.subs(eta_l, b), unit_.subs(eta_l, b)) for lab, term, b in items])
    if res.status != "verified":
        return res
    return verified("each term / (eta eta_l K/(64 sqrt eps)) simplifies to 1 at its bound; "
                    "-1/8 + 4/64 = -1/16 as claimed")


@check(PAPER, "thm43_printed_48_constant",
       "The proof states each of the last four terms of Upsilon_1 is <= eta*eta_l*K/(48 sqrt(eps)) and concludes "
       "Upsilon_1 <= -eta*eta_l*K/(16 sqrt(eps)).",
       spec=("V7", "err-23"), severity="typo", depends=("thm43_each_term_one_64th",),
       corrected={"per_term": sp.Rational(1, 64)},
       hypotheses=(Hyp("each of the four terms is at most the per-term bound used (at the condition's bounds each equals "
                       "1/64, thm43_each_term_one_64th)", lambda p: p["term_max"] <= p["per_term"], "fed-ef.txt lines 811-814"),))
def _thm43_48(per_term=sp.Rational(1, 48)):
    """fed-ef.txt line 814 ("each of the last four terms can be bounded by eta eta_l K/(48 sqrt eps)") and line 816.

    ``per_term`` is the printed per-term constant 1/48; the proof's terms are <= 1/64 each."""
    total = sp.Rational(-1, 8) + 4 * per_term
    if total <= sp.Rational(-1, 16):
        return verified(f"-1/8 + 4*({per_term}) = {total} <= -1/16", "exact")
    return refuted(f"with {per_term} per term the sum is -1/8 + 4*({per_term}) = {total} > -1/16; the terms are in fact "
                   "<= 1/64 each (see thm43_each_term_one_64th), so 48 is a typo for 64 and the conclusion stands", "exact",
                   at={"per_term": per_term, "term_max": sp.Rational(1, 64)})


@check(PAPER, "thm43_condition_implies_components",
       "For eps <= 1, Thm 4.3's simplified condition eta_l <= sqrt(eps)/(8KL) min{1/sqrt(eps), 2(1-q^2)L/((1+q^2)^1.5 G), "
       "1/(max{16,32C1^2} eta), 1/(3 eta^(1/3))} implies the proof's five component conditions.",
       spec=("V8",), severity="constant", depends=("C2_le_C1_squared",))
def _thm43_implies():
    """fed-ef.txt line 239 (theorem) vs line 811 (proof's component conditions). Display 811-812."""
    C2 = sp.Symbol("C2", positive=True)
    pre = sp.sqrt(eps) / (8 * K * L)
    thm = {
        "1/(8KL)": pre / sp.sqrt(eps),
        "G": pre * 2 * (1 - q**2) * L / ((1 + q**2) ** sp.Rational(3, 2) * G),
        "128": pre / (16 * eta),
        "256": pre / (32 * C1_AMS**2 * eta),
        "7680": pre / (3 * eta ** sp.Rational(1, 3)),
    }
    comp = {
        "1/(8KL)": 1 / (8 * K * L),
        "G": (1 - q**2) * sp.sqrt(eps) / (4 * (1 + q**2) ** sp.Rational(3, 2) * G * K),
        "128": sp.sqrt(eps) / (128 * eta * L * K),
        "256": sp.sqrt(eps) / (256 * C2 * eta * L * K),
        "7680": (sp.sqrt(eps) / (7680 * eta)) ** sp.Rational(1, 3) / (L * K),
    }
    notes = []
    for key in ("1/(8KL)", "G", "128"):
        if not is_identity(thm[key], comp[key]):
            return refuted(f"component {key}: theorem term {show(thm[key])} != proof term {show(comp[key])}")
        notes.append(f"{key}: identical")
    # 256: theorem uses C1^2 >= C2 (checked in C2_le_C1_squared), so its bound is smaller
    ratio = sp.simplify(thm["256"] / comp["256"])
    notes.append(f"256: theorem/proof = {show(ratio)} <= 1 since C2 <= C1^2")
    # 7680: need sqrt(eps)/24 <= (sqrt(eps)/7680)^(1/3), i.e. eps^(1/3) <= 24/7680^(1/3) ~ 1.216
    e = sp.Symbol("e", positive=True)
    crit = sp.Rational(24) ** 3 / 7680  # eps <= crit^(2/3) ... equivalently sqrt(eps)^2 <= crit
    r = sp.simplify((thm["7680"] / comp["7680"]).subs(eps, e**6))
    # r = e^2 * 7680^(1/3)/24 ; r <= 1 iff e^6 = eps <= (24/7680^(1/3))^3 = 13824/7680 = 1.8
    bound_eps = sp.nsimplify((24 / sp.Integer(7680) ** sp.Rational(1, 3)) ** 3)
    if not (r.subs(e, 1) <= 1 and bound_eps >= 1):
        return refuted(f"7680 term: theorem/proof ratio {show(r)} exceeds 1 at eps = 1")
    notes.append(f"7680: theorem/proof = {show(r)} with eps = e^6, <= 1 iff eps <= {show(bound_eps)} "
                 f"(= {fmt(float(crit))}), true for eps <= 1")
    return verified("; ".join(notes))


@check(PAPER, "thm43_C1_at_least_one",
       "The proof of Thm 4.3 uses C1 <= C1^2 'since C1 >= 1' with C1 = beta1/(1-beta1) + 2q/(1-q^2), "
       "for every beta1, q in [0,1).",
       spec=("err-23",), severity="constant", corrected={"beta1_min": sp.Rational(1, 2)}, hypotheses=(H_BETA1, H_Q))
def _thm43_c1_ge_1(beta1_min=sp.Integer(0)):
    """fed-ef.txt line 830 ("using the fact that C1 <= C1^2 since C1 >= 1").

    Exact search over beta1 in [beta1_min, 1) and q in [0, 1) on a grid of step 1/20 (C1 increases in both,
    so the grid's smallest corner decides); the theorem allows every beta1 in [0, 1)."""
    grid = [sp.Rational(k, 20) for k in range(20)]
    for b in (g for g in grid if g >= beta1_min):
        for qv in grid[1:]:  # q > 0: a compressor that compresses
            c = C1_ams.subs({beta1: b, q: qv})
            if c < 1:
                return refuted(f"at beta1={b}, q={qv}: C1 = {show(c)} ~ {fmt(float(c))} < 1 (so C1 > C1^2); "
                               "C1 >= 1 holds e.g. when beta1 >= 1/2 (beta1/(1-beta1) >= 1); only the constant of the "
                               "C1-terms changes (C1 <= max(1, C1^2))", "exact", at={"beta1": b, "q": qv})
    return verified(f"C1 >= 1 at every grid point with beta1 >= {beta1_min} (C1 increases in beta1 and q; at beta1 = "
                    f"{beta1_min}, q -> 0: C1 -> {show(C1_ams.subs({beta1: beta1_min, q: 0}))})", "exact")


@check(PAPER, "thm43_hidden_factor",
       "Thm 4.3's '<~' hides only an absolute constant, on the proof's range eps < 1 (line 809).",
       spec=("err-23",), severity="constant",
       hypotheses=(Hyp("0 < eps < 1 (the proof's range; the statement omits it)", lambda p: 0 < p["epsilon"] < 1, "fed-ef.txt line 809"),))
def _thm43_hidden(eps_max=1):
    """fed-ef.txt line 816-830: the proof's left side is eta eta_l K/(16 sqrt eps) sum E||grad||^2, and the
    displayed bound (line 240) divides by eta eta_l K T only; the proof works with eps < 1 (line 809).

    ``eps_max`` is the range of eps the claim is read on (the proof's eps < 1; ``sp.oo`` = any eps)."""
    proof_term = 5 * T * eta * eta_l**3 * K**2 * L**2 / (2 * sp.sqrt(eps))  # Upsilon_2's first term
    derived = proof_term / (T * eta * eta_l * K / (16 * sp.sqrt(eps)))
    displayed = THM43["drift_local"] / H
    factor = sp.simplify(derived / displayed)
    sup = sp.limit(factor, eps, eps_max, "-") if eps_max is not sp.oo else sp.limit(factor, eps, sp.oo)
    if factor.free_symbols - {eps} or not sup.is_finite:
        return refuted(f"dividing the proof's inequality by its left coefficient eta eta_l K T/(16 sqrt eps) gives "
                       f"{show(derived)} for the first drift term, i.e. the displayed {show(displayed)} times "
                       f"{show(factor)}, unbounded for eps < {show(eps_max)}",
                       at={"epsilon": 100, "factor": factor.subs(eps, 100)})
    return verified(f"dividing the proof's inequality by its left coefficient eta eta_l K T/(16 sqrt eps) gives "
                    f"{show(derived)} for the first drift term = the displayed {show(displayed)} times {show(factor)} "
                    f"<= {show(sup)} on the proof's range eps < {show(eps_max)} (line 809): the '<~' hides an absolute "
                    f"constant; the displayed 1/sqrt(eps) is loose (the true term has no eps) and the statement omits eps < 1")


# ===========================================================================
# learning-rate conditions  (V9, V10, V19, V24)
# ===========================================================================


def _thm42_coefficient(lr, eta_v, q_v, K_v=1, L_v=1, exact_factor=True):
    """Coefficient of sum E||grad||^2 per eta*eta_l*K in the proof of Thm 4.2 (line 901):
    -1/4 + eta*eta_l*(C_p+1)*K*L*(60 eta_l^2 K^2 L^2 + 1), C_p = proof's C1."""
    x = (lr * K_v * L_v) ** 2
    cp = C1_sgd_proof.subs(q, q_v)
    factor = (60 * x + 1) if exact_factor else 2
    return sp.Rational(-1, 4) + eta_v * lr * (cp + 1) * K_v * L_v * factor


@check(PAPER, "thm42_lr_condition_sufficient",
       "Thm 4.2's condition eta_l <= 1/(2KL max{4, eta(C1+1)}) makes the coefficient of sum E||grad f||^2 at most "
       "-eta*eta_l*K/8 (lines 904-910).",
       spec=("V9", "err-22b"), severity="constant", depends=("C1_sgd_definition", "lemma_D3_constants"),
       corrected={"second": lambda c1, eta_v: 1 / (16 * eta_v * c1)}, hypotheses=(H_Q, H_POS, H_LR42))
def _thm42_condition(second=lambda c1, eta_v: 1 / (2 * eta_v * (c1 + 1))):
    """fed-ef.txt line 221 (theorem) and lines 901-910 (proof: coefficient -eta eta_l K/4 +
    eta^2 eta_l^2 (C1+1) K^2 L (60 eta_l^2K^2L^2+1), then claimed eta eta_l K/8).

    ``second(C1, eta)`` is the second term of the condition (times KL); exact search over q in {0, 1/4, 1/2, 3/4},
    eta in {1/4, 1, 4} (K = L = 1; the coefficient grows with eta_l, so the condition's boundary decides). Display 906."""
    for q0 in (sp.Integer(0), sp.Rational(1, 4), sp.Rational(1, 2), sp.Rational(3, 4)):
        for eta0 in (sp.Rational(1, 4), sp.Integer(1), sp.Integer(4)):
            c1 = C1_sgd.subs(q, q0)
            lr = min(sp.Rational(1, 8), second(c1, eta0))  # K = L = 1
            coef = _thm42_coefficient(lr, eta0, q0)
            if coef > sp.Rational(-1, 8):
                break
        else:
            continue
        break
    # proof's own reading of the condition: C1 there is the proof's C1 (= theorem's C1 - 1)
    Cp = sp.Symbol("C_p", positive=True)
    lr_p = 1 / (2 * K * L * eta * (Cp + 1))
    coef_p = sp.simplify(sp.Rational(-1, 4) + eta * lr_p * (Cp + 1) * K * L * 2)
    if coef <= sp.Rational(-1, 8):
        return verified(f"at the condition's boundary the proof's coefficient per eta*eta_l*K is <= -1/8 at all 12 "
                        f"(q, eta) points (last: {coef})", "exact")
    return refuted(f"at q={q0}, eta={eta0}, K=L=1 the condition allows eta_l = {lr}; the proof's coefficient per "
                   f"eta*eta_l*K is then {coef} > -1/8. With the proof's own C1 in the condition the "
                   f"bounded coefficient at the boundary is {show(coef_p)} (spec: +3/4). A sufficient condition is "
                   "eta_l <= min{1/(8KL), 1/(16KL eta C1)} (see thm42_sufficient_lr_condition)", "exact",
                   at={"q": q0, "eta": eta0, "K": 1, "L": 1, "eta_l": lr})


@check(PAPER, "thm42_sufficient_lr_condition",
       "eta_l <= min{1/(8KL), 1/(16 K L eta C1_sgd)} makes the proof's coefficient <= -eta*eta_l*K/8.",
       spec=("V9",), kind="derived", severity="constant", depends=("C1_sgd_definition", "lemma_D3_constants"))
def _thm42_sufficient():
    """fed-ef.txt proof of Thm 4.2, line 901 (coefficient) with the corrected condition (spec sec. 6 item 22b). Display 906."""
    # coefficient is increasing in eta_l; use 60x+1 <= 60/64+1 < 2 (eta_l <= 1/(8KL)), then eta_l = 1/(16KL eta C1)
    lr = 1 / (16 * K * L * eta * C1_SGD)
    coef = sp.simplify(sp.Rational(-1, 4) + eta * lr * C1_SGD * K * L * 2)
    if coef == sp.Rational(-1, 8):
        return verified("with 60 eta_l^2K^2L^2 + 1 < 2 (eta_l <= 1/(8KL)) and eta_l = 1/(16KL eta C1), "
                        f"-1/4 + 2 eta eta_l C1 K L simplifies to {coef}; the coefficient is increasing in eta_l")
    return refuted(f"coefficient at the bound is {show(coef)}")


@check(PAPER, "thm41_coefficient_one_eighth",
       "Under eta_l <= 1/(8KL max{1, 8(1+q^2)eta}) and q <= 1/32, the per-round coefficient of E||grad f||^2 in "
       "the proof of Thm 4.1 is <= -eta*eta_l*K/8.",
       spec=("V10", "err-21"), severity="constant", depends=("thm41_needs_q_bound",),
       corrected={"target": sp.Rational(-17, 256)},
       hypotheses=(H_Q, Hyp("q <= 1/32 (the proof's bound on q, part of the claim)", lambda p: _v(p, "q") <= sp.Rational(1, 32),
                            "fed-ef.txt line 1315"), H_POS, H_LR41))
def _thm41_coefficient(target=sp.Rational(-1, 8)):
    """fed-ef.txt proof of Thm 4.1 (App. D.5), lines 1300-1320: terms -1 + 3/4 (VI) + 1/16 + 16q^2(2+120x) (VII)
    + (1+q^2) eta eta_l K L (2+120x) (second term of (21)), x = eta_l^2 K^2 L^2."""
    x, qq, y = sp.symbols("x qq y", nonnegative=True)  # x = (eta_l K L)^2, qq = q^2, y = (1+q^2) eta eta_l K L
    coef = -1 + sp.Rational(3, 4) + sp.Rational(1, 16) + 16 * qq * (2 + 120 * x) + y * (2 + 120 * x)
    # every positive term increases in x, qq, y: worst case at the boundary of the allowed region
    worst = coef.subs({x: sp.Rational(1, 64), qq: sp.Rational(1, 1024), y: sp.Rational(1, 64)})
    if worst <= target:
        return verified(f"worst-case coefficient {worst} <= {target} (at q = 1/32, eta_l K L = 1/8, (1+q^2) eta eta_l K L "
                        "= 1/64; every positive term increases in x, q^2, y)", "exact")
    return refuted(f"at the boundary (q = 1/32, eta_l K L = 1/8, (1+q^2) eta eta_l K L = 1/64) the coefficient is "
                   f"{worst} ~ {fmt(float(worst))} > {target}; still negative, so only the hidden constant changes "
                   f"(256/17 ~ {fmt(256 / 17)} instead of 8)", "exact",
                   at={"q": sp.Rational(1, 32), "K": 1, "L": 1, "eta_l": sp.Rational(1, 8), "eta": 1 / (8 * (1 + sp.Rational(1, 1024)))})


@check(PAPER, "thm41_needs_q_bound",
       "Thm 4.1's stated learning-rate condition alone (no bound on q) makes the per-round coefficient of "
       "E||grad f||^2 negative for every q < 1.",
       spec=("err-21",), severity="proof", corrected={"q_max": sp.Rational(1, 32)}, hypotheses=(H_Q, H_POS, H_LR41))
def _thm41_q(q_max=sp.Integer(1)):
    """fed-ef.txt line 199 (statement without q-bound) vs line 1315 ("and q <= 1/32" in the proof).

    ``q_max``: the range of q the statement allows (q < 1 in the statement; the proof adds q <= 1/32). Display 1317-1319 (the per-round bound that needs q <= 1/32)."""
    qq = sp.Symbol("qq", positive=True)
    # smallest the coefficient can be for given q: eta_l -> 0 kills the x and y terms
    coef_limit = -1 + sp.Rational(3, 4) + sp.Rational(1, 16) + 32 * qq
    thr = sp.solve(sp.Eq(coef_limit, 0), qq)[0]
    if q_max**2 < thr:
        return verified(f"as eta_l -> 0 the coefficient is -3/16 + 32q^2 < 0 iff q^2 < {thr}; q <= {q_max} gives "
                        f"q^2 <= {q_max**2} < {thr}", "exact")
    bad = sp.Rational(1, 2) if q_max > sp.Rational(1, 2) else q_max
    val = coef_limit.subs(qq, bad**2)
    # a concrete admissible point: eta = K = L = 1, eta_l = 1/100 (the condition allows eta_l <= 1/(64(1+q^2)))
    x_, y_ = sp.Rational(1, 100) ** 2, (1 + bad**2) * sp.Rational(1, 100)
    at_pt = -1 + sp.Rational(3, 4) + sp.Rational(1, 16) + 16 * bad**2 * (2 + 120 * x_) + y_ * (2 + 120 * x_)
    return refuted(f"even as eta_l -> 0 the coefficient is -3/16 + 32q^2, which equals {val} > 0 at q = {bad} (allowed: "
                   f"q < {q_max}); at eta = K = L = 1, eta_l = 1/100 it is {fmt(float(at_pt))} > 0; negativity needs q^2 < "
                   f"{thr} (q < {fmt(float(sp.sqrt(thr)))}); the proof assumes q <= 1/32, which the theorem statement omits",
                   "exact", at={"q": bad, "eta": 1, "K": 1, "L": 1, "eta_l": sp.Rational(1, 100)})


@check(PAPER, "cor1_lr_feasibility",
       "With eta_l = c_l/(K sqrt T), eta = c_g sqrt(Kn) (Cor. 1) every term of Thm 4.2's and Thm 4.3's learning-rate "
       "conditions holds once T exceeds a finite threshold; for Thm 4.2 the threshold is "
       "sqrt(T) >= 2 L c_l max{4, c_g sqrt(Kn)(C1+1)}.",
       spec=("V19",), severity="constant")
def _cor1_feasibility():
    """fed-ef.txt Corollary 1 (line 246ff) with the conditions of Thm 4.2 (line 221) and Thm 4.3 (line 239)."""
    notes = []
    for label, conds, subs in (("Thm 4.2", THM42_CONDITIONS, COR1_LR), ("Thm 4.3", THM43_CONDITIONS, COR1_LR),
                               ("Thm 4.4", THM44_CONDITIONS, THM44_LR)):
        for cname, b in conds.items():
            thr = lr_threshold(b.subs(eta, subs[eta]), subs[eta_l], T)
            notes.append(f"{label} [{cname}]: T >= {show(thr)}")
    expected = (8 * L * c_l) ** 2, (2 * L * c_l * c_g * sp.sqrt(K * n) * (C1_SGD + 1)) ** 2
    got = [lr_threshold(b.subs(eta, COR1_LR[eta]), COR1_LR[eta_l], T) for b in THM42_CONDITIONS.values()]
    if not all(is_identity(a, b) for a, b in zip(got, expected)):
        return refuted(f"Thm 4.2 thresholds {got} differ from {expected}")
    return verified("each condition holds for T above a finite threshold: " + "; ".join(notes))


@check(PAPER, "thm44_lr_one_sixth_vs_lemma_D1",
       "Thm 4.4's condition (with its 1/6 term) implies Lemma D.1's requirement eta_l <= 1/(8KL), used in the proof.",
       spec=("V24", "err-24"), severity="constant", corrected={"first": sp.Rational(1, 8)},
       hypotheses=(H_Q, H_PP, H_POS, H_LR44))
def _thm44_one_sixth(first=sp.Rational(1, 6)):
    """fed-ef.txt line 265 (eta_l <= min{1/6, ...}/(KL)) vs Lemma D.1 (line 926: eta_l <= 1/(8LK)) used in D.4 term I.

    ``first`` is the condition's first constant (printed 1/6). Display 1254."""
    vals = {q: sp.Rational(1, 100), n: sp.Integer(10), m: sp.Integer(9), eta: sp.Rational(1, 100), K: sp.Integer(1),
            L: sp.Integer(1)}
    bounds = []
    conds = dict(THM44_CONDITIONS, **{"eta_l <= 1/(6KL)": first / (K * L)})
    for b in conds.values():
        bb = b.subs(CPRIME, Cprime).subs(C1_PP, C1_pp).subs(vals)
        if bb in (sp.zoo, sp.oo, sp.nan) or bb.has(sp.zoo) or bb.has(sp.nan):
            continue  # C1 = 0 or n - m = 0: the term puts no constraint
        bounds.append(bb)
    lr = min(bounds)
    if lr <= sp.Rational(1, 8):
        return verified(f"the first term ({first})/(KL) alone gives eta_l <= 1/(8KL); at q=1/100, n=10, m=9, eta=1/100, K=L=1 the "
                        f"condition allows eta_l = {lr}", "exact")
    return refuted(f"at q=1/100, n=10, m=9, eta=1/100, K=L=1 (partial participation) the condition allows eta_l = {lr} > 1/8 = Lemma D.1's limit", "exact",
                   at={str(k): v for k, v in vals.items()} | {"eta_l": lr})


@check(PAPER, "thm44_missing_m2_over_n2",
       "Thm 4.4's learning-rate condition makes the stale-error term 8 eta^2 eta_l^2 q^2 L/((1-q^2)^2 m^2) ||sum grad||^2 "
       "no larger than the negative term eta*eta_l/(2K n^2) ||sum grad||^2 of D.4.",
       spec=("V24", "err-24"), severity="constant", corrected={"fifth": m**2 / (32 * C1_PP * eta * K * L * n**2)},
       hypotheses=(H_Q, H_PP, H_POS, H_LR44))
def _thm44_m2n2(fifth=1 / (32 * C1_PP * eta * K * L)):
    """fed-ef.txt proof of Thm 4.4, line 1246 (negative term -eta eta_l/(2Kn^2) ...) and line 1249
    (8 eta^2 eta_l^2 q^2 L/((1-q^2)^2 m^2) ...), condition line 1254.

    ``fifth``: the condition's fifth term (printed 1/(32 C1 eta K L); the correction multiplies it by m^2/n^2).  Exact search over
    q^2 in {1/10, 1/2, 9/10}, (n, m) in {(4000, 2000), (100, 10), (10, 9)}, eta in {1/2, 2, 8}, K = L = 1."""
    ratio = (8 * eta**2 * eta_l**2 * q**2 * L / ((1 - q**2) ** 2 * m**2)) / (eta * eta_l / (2 * K * n**2))
    expected = 16 * eta * eta_l * q**2 * L * K * n**2 / ((1 - q**2) ** 2 * m**2)
    if not is_identity(ratio, expected):
        return refuted(f"ratio simplifies to {show(ratio)}")
    conditions = dict(THM44_CONDITIONS, **{"eta_l <= 1/(32 C1 eta K L)": fifth})
    worst = sp.Integer(0)
    for q2 in (sp.Rational(1, 10), sp.Rational(1, 2), sp.Rational(9, 10)):
        for nv, mv in ((4000, 2000), (100, 10), (10, 9)):
            for ev in (sp.Rational(1, 2), sp.Integer(2), sp.Integer(8)):
                vals = {q: sp.sqrt(q2), n: sp.Integer(nv), m: sp.Integer(mv), eta: ev, K: sp.Integer(1), L: sp.Integer(1)}
                conds = {k: sp.nsimplify(v.subs(CPRIME, Cprime).subs(C1_PP, C1_pp).subs(vals)) for k, v in conditions.items()}
                lr = min(conds.values())
                binding = [k for k, v in conds.items() if v == lr][0]
                r = sp.nsimplify(sp.simplify(expected.subs(vals).subs(eta_l, lr)))
                worst = max(worst, r)
                if r > 1:
                    break
            else:
                continue
            break
        else:
            continue
        break
    if worst <= 1:
        return verified(f"ratio of the two terms = {show(expected)} <= 1 at the condition's boundary at all 27 points "
                        f"(largest {worst})", "exact")
    return refuted(f"ratio of the two terms = {show(expected)}; at q^2={q2}, n={nv}, m={mv}, eta={ev}, K=L=1 the "
                   f"condition allows eta_l = {show(lr)} (binding: {binding}) and the ratio is {r} > 1, so the "
                   "positive term is not absorbed; a factor m^2/n^2 is missing in the 1/(32 C1 eta) term", "exact",
                   at={"q": sp.sqrt(q2), "n": nv, "m": mv, "eta": ev, "K": 1, "L": 1, "eta_l": lr})


# ===========================================================================
# rates  (V11, V12, V18, T1, T2, sec. 6 items 22a/26)
# ===========================================================================


@check(PAPER, "thm41_rate_eq2",
       "Substituting eta_l = Theta(1/(K sqrt T)), eta = Theta(sqrt(Kn)) into Thm 4.1 gives rate (2): "
       "O((1+q^2)/sqrt(TKn) + (1+q^2)/(TK) (sigma^2 + K sigma_g^2) + q^2 sigma^2/(Kn)).",
       spec=("V11",), severity="rate", depends=("thm41_coefficient_one_eighth", "thm41_needs_q_bound"))
def _thm41_rate():
    """fed-ef.txt line 207, eq. (2), and line 1326 (D.5). Statement display 206 and the proof's display 1328."""
    ok, notes = compare_rate(THM41, COR1_LR, THM41_RATE + F / sp.sqrt(T * K * n), SCALE, T)
    return (verified if ok else refuted)("; ".join(notes))


@check(PAPER, "thm41_nonvanishing_floor",
       "Fed-SGD with direct biased compression (Thm 4.1) keeps the non-vanishing term 64 q^2 sigma^2/(Kn) as "
       "T -> infinity under the Corollary learning rates; it vanishes for q = 0.",
       spec=("T1",), severity="rate", depends=("thm41_needs_q_bound",))
def _thm41_floor():
    """fed-ef.txt line 199 (bias term 64q^2 sigma^2/(Kn)), Remark 1 (line 209). Display 206."""
    b = sp.Add(*THM41.values()).subs(COR1_LR)
    lim = sp.limit(b, T, sp.oo)
    if is_identity(lim, 64 * q**2 * sigma**2 / (K * n)) and lim.subs(q, 0) == 0:
        return verified(f"limit of the bound as T -> oo is {show(lim)} (> 0 for q > 0, 0 for q = 0)")
    return refuted(f"limit as T -> oo is {show(lim)}")


@check(PAPER, "cor1_sgd_rate",
       "Corollary 1 (Fed-EF-SGD) follows from Thm 4.2 as stated: with eta_l = Theta(1/(K sqrt T)), eta = Theta(sqrt(Kn)) "
       "the bound is O((f1-f*)/sqrt(TKn) + sigma^2/sqrt(TKn) + sqrt(n)/(T^1.5 sqrt K) (sigma^2 + K sigma_g^2)), "
       "which vanishes as T -> infinity.",
       spec=("V11", "T1"), severity="rate", depends=("thm42_lr_condition_sufficient", "thm42_keeps_lemma_D3_term", "C1_sgd_definition", "lemma_D5_geometric_constants", "lemma_D3_constants", "ef_virtual_sequence_identities"))
def _cor1_sgd():
    """fed-ef.txt line 249 (Corollary 1, SGD) from Thm 4.2 (line 223). Display 250."""
    ok, notes = compare_rate(THM42, COR1_LR, COR1_SGD_RATE, SCALE, T)
    lim = sp.limit(sp.Add(*THM42.values()).subs(COR1_LR), T, sp.oo)
    return (verified if ok and lim == 0 else refuted)("; ".join(notes) + f"; limit T -> oo: {show(lim)}")


@check(PAPER, "cor1_ams_rate",
       "Corollary 1 (Fed-EF-AMS) follows from Thm 4.3: every term under the Corollary learning rates is "
       "O((f1-f*)/sqrt(TKn) + sigma^2/sqrt(TKn) + (1/(TK) + sqrt(n)/(T^1.5 sqrt K))(sigma^2 + K sigma_g^2)).",
       spec=("V11", "err-23"), severity="rate", depends=("thm43_each_term_one_64th", "thm43_C1_at_least_one", "thm43_hidden_factor", "thm43_condition_implies_components", "thm43_termI_G_condition", "C2_le_C1_squared", "lemma_D7_identity", "lemma_D8_telescoping", "ef_virtual_sequence_identities"))
def _cor1_ams():
    """fed-ef.txt line 251 (Corollary 1, AMS) from Thm 4.3 (line 240). Display 254."""
    ok, notes = compare_rate(THM43, COR1_LR, COR1_AMS_RATE, SCALE, T)
    msg = "; ".join(notes) + ("; note: the d G^2/T and sqrt(Kn) d G^2/T^1.5 terms of Thm 4.3 are matched only by "
                              "treating d, G, eps as constants (the corollary drops them silently)")
    return (verified if ok else refuted)(msg)


@check(PAPER, "thm42_keeps_lemma_D3_term",
       "The final bound of Thm 4.2 keeps every term of its proof.",
       spec=("err-22a", "err-26"), severity="proof",
       corrected={"displayed": dict(THM42, drift_local=20 * eta_l**2 * K * L**2 * H)},
       hypotheses=(H_Q, H_POS, H_LR42, Hyp("eta_l = c_l/(K sqrt T), eta = c_g sqrt(Kn) (Cor. 1's choice)",
                   lambda p: _v(p, "eta_l") == _v(p, "c_l") / (_v(p, "K") * sp.sqrt(_v(p, "T")))
                   and _v(p, "eta") == _v(p, "c_g") * sp.sqrt(_v(p, "K") * _v(p, "n")), "fed-ef.txt line 248"),))
def _thm42_dropped(displayed=THM42):
    """fed-ef.txt lines 874-877 (Lemma D.3 contributes 5 eta eta_l^3 K^2 L^2/2 (sigma^2+6K sigma_g^2) per round)
    vs line 901 (the summed inequality, where this term is missing) and line 915 (final bound), Cor. 1 (line 249).

    ``displayed``: the theorem's terms; the proof's term is kept when one displayed term equals it up to an absolute
    constant (a ratio free of every symbol)."""
    dropped = 5 * T * eta * eta_l**3 * K**2 * L**2 / 2 * H / (T * eta * eta_l * K / 8)
    under_cor = sp.simplify(dropped.subs(COR1_LR))
    ratios = {k: sp.simplify(dropped / v) for k, v in displayed.items()}
    kept = [k for k, r in ratios.items() if not r.free_symbols]
    if kept:
        return verified(f"the proof's term {show(sp.simplify(dropped))} (after dividing by eta eta_l K T/8) equals the displayed "
                        f"term {kept[0]} times {ratios[kept[0]]}")
    het = sp.expand(under_cor).coeff(sigma_g, 2) * sigma_g**2
    stated_het = (sp.sqrt(n) / (T ** sp.Rational(3, 2) * sp.sqrt(K)) * K * sigma_g**2)
    ratio = sp.simplify(het / stated_het)
    lim = sp.limit(ratio, T, sp.oo)
    thr = sp.solve(sp.Eq(het.subs(sigma_g, 1) * sigma_g**2, sigma**2 / sp.sqrt(T * K * n)), T)[0]
    # a concrete point: q = 1/2, K = n = L = c_l = c_g = 1, T = 10^4 (Cor. 1's rates satisfy Thm 4.2's condition there)
    pt = {"q": sp.Rational(1, 2), "K": 1, "n": 1, "L": 1, "c_l": 1, "c_g": 1, "T": 10**4}
    pt |= {"eta_l": sp.Rational(1, 100), "eta": 1, "ratio": ratio.subs({sp.Symbol(k, positive=True): v for k, v in pt.items()})}
    return refuted(f"Lemma D.3's term 5 eta eta_l^3 K^2 L^2/2 (sigma^2+6K sigma_g^2) (line 877) is absent from the "
                   f"summed inequality (line 901); after dividing by eta eta_l K T/8 it adds {show(sp.simplify(dropped))}, not bounded by a "
                   f"displayed term (ratio to the drift term: {show(ratios.get('drift', sp.nan))}), "
                   f"i.e. {show(under_cor)} under Cor. 1. Its sigma_g part divided by the stated sqrt(n) K sigma_g^2/(T^1.5 sqrt K) "
                   f"is {show(ratio)} -> {show(lim)} as T -> oo, so the corrected rate has a (sigma^2 + K sigma_g^2)/(TK) "
                   f"term (as for AMS) and the sigma_g term falls below sigma^2/sqrt(TKn) only for T >= {show(thr)} "
                   "(not T >= Kn sigma_g^2/sigma^2)", at=pt)


@check(PAPER, "cor1_linear_speedup_threshold",
       "Cor. 1 discussion: sqrt(n)/(T^1.5 sqrt K) K sigma_g^2 <= sigma^2/sqrt(TKn) iff T >= K n sigma_g^2/sigma^2; "
       "1/sqrt(TKn) <= delta iff TK >= 1/(n delta^2); with K = 1/(n delta) this needs T = 1/delta rounds (then T = Kn).",
       spec=("V18", "T1"), severity="rate", depends=("cor1_sgd_rate", "thm42_keeps_lemma_D3_term"))
def _cor1_threshold():
    """fed-ef.txt line 256 (Discussion after Corollary 1)."""
    delta = sp.Symbol("delta", positive=True)
    thr = sp.solve(sp.Eq(sp.sqrt(n) / (T ** sp.Rational(3, 2) * sp.sqrt(K)) * K * sigma_g**2, sigma**2 / sp.sqrt(T * K * n)), T)
    tk = sp.solve(sp.Eq(1 / sp.sqrt(T * K * n), delta), T)
    t_rounds = sp.simplify(tk[0].subs(K, 1 / (n * delta)))
    ok = (len(thr) == 1 and is_identity(thr[0], K * n * sigma_g**2 / sigma**2)
          and is_identity(tk[0] * K, 1 / (n * delta**2)) and is_identity(t_rounds, 1 / delta)
          and is_identity(t_rounds, (1 / (n * delta)) * n))
    if not ok:
        return refuted(f"thresholds: {thr}, TK: {tk}, T at K=1/(n delta): {t_rounds}")
    return verified(f"solving gives T = {show(thr[0])}; TK = {show(tk[0] * K)}; at K = 1/(n delta): T = {show(t_rounds)} = Kn")


@check(PAPER, "thm44_rate_substitution",
       "Thm 4.4 with eta = Theta(sqrt(Km)), eta_l = Theta(sqrt(m)/(K sqrt(Tn))) gives "
       "O(sqrt(n/m) ((f1-f*)/sqrt(TKm) + sigma^2/sqrt(TKm) + sqrt(K)/sqrt(Tm) sigma_g^2)) (for m <= n, C' <= 1).",
       spec=("V12", "T2"), severity="rate", depends=("thm44_lr_one_sixth_vs_lemma_D1", "thm44_missing_m2_over_n2", "thm44_paper_bound_on_A", "thm44_gamma_step_constants", "thm44_sampling_second_moment", "ef_virtual_sequence_identities"))
def _thm44_rate():
    """fed-ef.txt line 267 (rate of Thm 4.4) and lines 1305-1312 (proof's intermediate form). Displays 273, 1263-1264, 1268."""
    coeff = order_match([
        ("1/(eta eta_l T K)", 1 / (eta * eta_l * T * K), sp.sqrt(n) / (m * sp.sqrt(K * T))),
        ("eta eta_l/m", eta * eta_l / m, 1 / sp.sqrt(K * T * n)),
        ("eta eta_l n/m^2", eta * eta_l * n / m**2, sp.sqrt(n) / (m * sp.sqrt(K * T))),
        ("eta eta_l K/m", eta * eta_l * K / m, sp.sqrt(K) / sp.sqrt(T * n)),
        ("eta_l^2 K", eta_l**2 * K, m / (K * T * n)),
        ("eta eta_l^3 K^2/m", eta * eta_l**3 * K**2 / m, m / (sp.sqrt(K) * T ** sp.Rational(3, 2) * n ** sp.Rational(3, 2))),
        ("eta eta_l (n-m)/m^2", eta * eta_l * n / m**2, sp.sqrt(n) / (m * sp.sqrt(K * T))),
    ], THM44_LR, SCALE)
    if coeff.status != "verified":
        return coeff
    terms = {k: v.subs(CPRIME, 1) for k, v in THM44.items()}  # C' = (n-m)/(n-1) <= 1
    ok, notes = compare_rate(terms, THM44_LR, THM44_RATE, SCALE, T, bounded=((m, n),))
    msg = coeff.evidence + ". Term by term (C' <= 1, m <= n; negative monomials of (n-m) dropped): " + "; ".join(notes)
    # "exact" matches with m/n-type factors need m <= n: check the sigma_g part explicitly
    ratio = sp.simplify((3 * eta * eta_l * K * sigma_g**2 / m).subs(THM44_LR) / (sp.sqrt(n / m) * sp.sqrt(K) / sp.sqrt(T * m) * sigma_g**2))
    return (verified if ok else refuted)(msg + f"; e.g. sampling term / stated sigma_g term = {show(ratio)} <= 3c for m <= n")


@check(PAPER, "thm44_reduces_to_full_participation",
       "Remark 4: at m = n (so C' = 0 and n - m = 0) the Thm 4.4 bound under its learning rates is O(1/sqrt(TKn)) as in Cor. 1.",
       spec=("T2",), severity="rate", depends=("thm44_rate_substitution",))
def _thm44_m_eq_n():
    """fed-ef.txt Remark 4, line 280."""
    terms = {k: v.subs({CPRIME: 0}).subs(m, n) for k, v in THM44.items()}
    lr = {k: v.subs(m, n) for k, v in THM44_LR.items()}
    target = (F + sigma**2) / sp.sqrt(T * K * n) + sp.sqrt(K) / sp.sqrt(T * n) * sigma_g**2
    ok, notes = compare_rate(terms, lr, target, (T, K, n), T)
    b = sp.Add(*terms.values()).subs(lr)
    lead = sp.limit(b * sp.sqrt(T), T, sp.oo)
    return (verified if ok else refuted)("; ".join(notes) + f"; sqrt(T) * bound -> {show(lead)} (the K sigma_g^2 part "
                                         "comes from C1-terms times 6K sigma_g^2 and vanishes at q = 0)")


@check(PAPER, "thm44_q0_recovers_full_precision_pp",
       "Remark 4: at q = 0 (C1 = 0) Thm 4.4 with eta = Theta(sqrt(Km)), eta_l = Theta(1/(K sqrt T)) gives the "
       "O(sqrt(K/(Tm))) rate of full-precision Fed-SGD under partial participation (Yang et al. 2021a).",
       spec=("T2",), severity="rate", depends=("thm44_rate_substitution",))
def _thm44_q0():
    """fed-ef.txt Remark 4, line 280 and line 282."""
    terms = {k: v.subs({C1_PP: 0, CPRIME: 1}) for k, v in THM44.items()}
    lr = {eta: c_g * sp.sqrt(K * m), eta_l: c_l / (K * sp.sqrt(T))}
    target = (F + sigma**2) / sp.sqrt(T * K * m) + sp.sqrt(K) / sp.sqrt(T * m) * sigma_g**2
    ok, notes = compare_rate(terms, lr, target, (T, K, m), T)
    return (verified if ok else refuted)("with Yang et al.'s learning rates the bound is O((f1-f*+sigma^2)/sqrt(TKm) + "
                                         "sqrt(K) sigma_g^2/sqrt(Tm)) = O(sqrt(K/(Tm))) for K >= 1 (the theorem's own eta_l "
                                         "keeps the sqrt(n/m) factor): " + "; ".join(notes))


# ===========================================================================
# partial participation algebra  (V13, V14)
# ===========================================================================


@check(PAPER, "thm44_gamma_step_constants",
       "D.4: with gamma = (1-q^2)/(2q^2), (m(1+gamma)q^2 + n - m)/n = 1 - (1-q^2)m/(2n), m(1+1/gamma)q^2/n = "
       "m(1+q^2)q^2/(n(1-q^2)); geometric sum 2n/((1-q^2)m); 70 = 3*20 + 2*5, 180 = 3*60, 280 = 2*140, "
       "1680/(1-q^2)^3 = 720/(1-q^2)^2 * 2/(1-q^2) + 240/(1-q^2)^3, 3360 = 2*1680, 53760 = 16*3360, 96 = 16*6.",
       spec=("V13",), severity="constant")
def _thm44_gamma():
    """fed-ef.txt proof of Thm 4.4 (App. D.4), lines 1222-1260. Display 1224-1225."""
    gam = (1 - q**2) / (2 * q**2)
    ints = [(70, 3 * 20 + 2 * 5), (180, 3 * 60), (280, 2 * 140), (3360, 2 * 1680), (53760, 16 * 3360), (96, 16 * 6)]
    bad = [f"{a} != {b}" for a, b in ints if a != b]
    if bad:
        return refuted("; ".join(bad), "exact")
    return identities([
        ("contraction", (m * (1 + gam) * q**2 + (n - m)) / n, 1 - (1 - q**2) * m / (2 * n)),
        ("Young factor", m * (1 + 1 / gam) * q**2 / n, m * (1 + q**2) * q**2 / (n * (1 - q**2))),
        ("geometric sum", geometric_series(1 - (1 - q**2) * m / (2 * n)), 2 * n / ((1 - q**2) * m)),
        ("1680", 720 / (1 - q**2) ** 2 * 2 / (1 - q**2) + 240 / (1 - q**2) ** 3, 1680 / (1 - q**2) ** 3),
    ], "integer constants 70, 180, 280, 3360, 53760, 96 check;")


def _subset_second_moment(et, e, n_, m_):
    """E over uniform m-subsets M of (sum_{i in M} et_i + sum_{i notin M} e_i)^2 (exact for Fractions or sympy symbols)."""
    return subset_mean(n_, m_, lambda S: sum((et[i] if i in S else e[i]) for i in range(n_)) ** 2)


@check(PAPER, "thm44_sampling_second_moment",
       "Uniform sampling of m of n clients without replacement: P(i in M) = m/n, P(i,j in M) = m(m-1)/(n(n-1)), "
       "and A = E||sum_{i in M} e~_i + sum_{i not in M} e_i||^2 = (m/n)||sum e~_i||^2 + ((n-m)/n)||sum e_i||^2 "
       "- c||sum (e~_i - e_i)||^2 + c sum||e~_i - e_i||^2 with c = m(n-m)/(n(n-1)).",
       spec=("V14",), severity="constant")
def _thm44_sampling():
    """fed-ef.txt proof of Thm 4.4, lines 1190-1200 (second moment A). Display 1181-1182 (term II uses this second moment)."""
    notes = []
    for n_ in range(2, 6):
        et = sp.symbols(f"a0:{n_}")
        e = sp.symbols(f"b0:{n_}")
        for m_ in range(1, n_):
            A = _subset_second_moment(et, e, n_, m_)
            c = sp.Rational(m_ * (n_ - m_), n_ * (n_ - 1))
            claim = (sp.Rational(m_, n_) * sum(et) ** 2 + sp.Rational(n_ - m_, n_) * sum(e) ** 2
                     - c * sum(a - b for a, b in zip(et, e)) ** 2 + c * sum((a - b) ** 2 for a, b in zip(et, e)))
            if sp.expand(A - claim) != 0:
                return refuted(f"identity fails at n={n_}, m={m_}: residual {show(sp.factor(A - claim))}")
            p1 = subset_mean(n_, m_, lambda S: Fraction(int(0 in S)))
            p2 = subset_mean(n_, m_, lambda S: Fraction(int(0 in S and 1 in S)))
            if p1 != Fraction(m_, n_) or p2 != Fraction(m_ * (m_ - 1), n_ * (n_ - 1)):
                return refuted(f"inclusion probabilities wrong at n={n_}, m={m_}: {p1}, {p2}")
        notes.append(f"n={n_}")
    return verified("exact expansion over all m-subsets equals the claimed identity as polynomials in the e~_i, e_i "
                    "(a quadratic-form identity in scalars implies it for vectors) and P(i in M) = m/n, "
                    "P(i,j in M) = m(m-1)/(n(n-1)), for all 1 <= m < n <= 5")


@check(PAPER, "thm44_paper_bound_on_A",
       "The paper's bound A <= (m/n)||sum e~_i||^2 + ((n-m)/n)||sum e_i||^2 + c sum(||e~_i||^2 + ||e_i||^2), "
       "c = m(n-m)/(n(n-1)), holds for all vectors.",
       spec=("V14", "err-24"), severity="constant", depends=("thm44_sampling_second_moment",),
       corrected={"cross": 2}, hypotheses=(H_PP, Hyp("m < n (partial participation: some client is not sampled)",
                                              lambda p: _v(p, "m") < _v(p, "n"), "fed-ef.txt line 1190")))
def _thm44_paper_a(cross=1):
    """fed-ef.txt lines 1192-1200 (A's expansion with cross-term coefficient m(n-m)/(n(n-1)), missing a factor 2,
    and the final inequality at line 1200).

    ``cross`` multiplies c in the bound (printed 1).  Exhaustive exact search: 1 <= m < n <= 3, scalar errors in {-1, 0, 1}
    (a bound on quadratic forms in scalars; the vector case adds coordinates). Display 1194-1201."""
    found = None
    cases = 0
    for n_ in (2, 3):
        for m_ in range(1, n_):
            c = Fraction(m_ * (n_ - m_), n_ * (n_ - 1))
            for vals in itertools.product((Fraction(-1), Fraction(0), Fraction(1)), repeat=2 * n_):
                et, e = vals[:n_], vals[n_:]
                A = _subset_second_moment(et, e, n_, m_)
                rhs = (Fraction(m_, n_) * sum(et) ** 2 + Fraction(n_ - m_, n_) * sum(e) ** 2
                       + cross * c * sum(a * a + b * b for a, b in zip(et, e)))
                cases += 1
                if A > rhs and (found is None or A - rhs > found[-1]):
                    found = (n_, m_, et, e, A, rhs, A - rhs)
    if found is None:
        return verified(f"with {cross}c the bound holds at all {cases} (n, m, e~, e) cases (1 <= m < n <= 3, "
                        "entries in {-1, 0, 1})", "exact")
    n_, m_, et, e, A, rhs, _ = found
    c = Fraction(m_ * (n_ - m_), n_ * (n_ - 1))
    correct = (Fraction(m_, n_) * sum(et) ** 2 + Fraction(n_ - m_, n_) * sum(e) ** 2
               + 2 * c * sum(a * a + b * b for a, b in zip(et, e)))
    tup = lambda v: "(" + ", ".join(str(x) for x in v) + ")"
    return refuted(f"n={n_}, m={m_}, scalar errors e~ = {tup(et)}, e = {tup(e)}: exact A = {A} > paper's bound {rhs} (bound - A = "
                   "c(2 sum e~_i e_i + ||sum(e~_i - e_i)||^2), negative here). The expansion's cross term "
                   f"sum_(i!=j) e~_i e_j needs coefficient 2m(n-m)/(n(n-1)); with 2c instead of c the bound holds "
                   f"({correct} >= {A}); only constants change", "exact",
                   at={"n": n_, "m": m_, "e~": tup(et), "e": tup(e)})


# ===========================================================================
# compressors  (V15-V17, T4, sec. 6 item 10)
# ===========================================================================


def topk(x, k, layers=None):
    """Layer-wise TopK: keep max(1, floor(k d_l)) largest-magnitude entries per layer (footnote 2)."""
    out = np.zeros_like(x)
    for lo, hi in layers or [(0, len(x))]:
        blk = x[lo:hi]
        kk = max(1, int(np.floor(k * (hi - lo))))
        idx = np.argsort(-np.abs(blk), kind="stable")[:kk]
        out[lo + idx] = blk[idx]
    return out


def grouped_sign(x, layers=None, scale_by="size"):
    """Grouped Sign (Prop. 3.1): ||x_I||_1/d_I * sign(x_I); ``scale_by='nnz'`` divides by the non-zeros (hv-Sign)."""
    out = np.zeros_like(x)
    for lo, hi in layers or [(0, len(x))]:
        blk = x[lo:hi]
        denom = (hi - lo) if scale_by == "size" else max(1, int(np.count_nonzero(blk)))
        out[lo:hi] = np.abs(blk).sum() / denom * np.sign(blk)
    return out


def hv_sign(x, k, layers=None, scale_by="size"):
    """Heavy-Sign (Def. 2): Sign(TopK(x))."""
    return grouped_sign(topk(x, k, layers), layers, scale_by)


@check(PAPER, "prop31_sign_identity",
       "Prop. 3.1: ||x - (||x||_1/d) sign(x)||^2 = ||x||^2 - ||x||_1^2/d for a block without zeros, and "
       "||x||_1^2 >= ||x||_2^2, hence q_C^2 = 1 - min_i 1/d_i for grouped Sign.",
       spec=("V15", "T4"), severity="constant")
def _prop31():
    """fed-ef.txt Proposition 3.1 and proof, lines 76-95."""
    for d_ in range(1, 5):
        a = sp.symbols(f"a0:{d_}", positive=True)
        l1 = sum(a)
        for signs in itertools.product((1, -1), repeat=d_):
            x = [s * ai for s, ai in zip(signs, a)]
            lhs = sum((xi - l1 / d_ * s) ** 2 for xi, s in zip(x, signs))
            rhs = sum(ai**2 for ai in a) - l1**2 / d_
            if sp.expand(lhs - rhs) != 0:
                return refuted(f"identity fails for d={d_}, signs={signs}")
        if not all(c >= 0 for c in sp.Poly(sp.expand(l1**2 - sum(ai**2 for ai in a)), *a).coeffs()):
            return refuted(f"||x||_1^2 - ||x||_2^2 has a negative coefficient at d={d_}")
    return verified("expanded identity holds for every sign pattern, d = 1..4; ||x||_1^2 - ||x||_2^2 = "
                    "2 sum_{i<j}|x_i||x_j| >= 0")


@check(PAPER, "compressor_q_bounds",
       "Def. 1 bounds ||C(x)-x||^2 <= q^2 ||x||^2 hold for layer-wise TopK (q^2 = 1 - min_l max(1,floor(k d_l))/d_l), "
       "grouped Sign (q^2 = 1 - min 1/d_i, tight for 1-sparse blocks) and heavy-Sign (q^2 = 1 - min k_l/d_l^2 with "
       "the floored counts k_l, both scalings), including ||C_k(x)||^2 >= sum_l (k_l/d_l)||x_l||^2 and the "
       "orthogonal split of Prop. 3.2.",
       spec=("V16", "T4", "err-13"), kind="derived", severity="constant")
def _compressor_bounds():
    """fed-ef.txt Prop. 3.1 (line 76), Prop. 3.2 (line 105) and its proof (lines 110-121), footnote 2 (layer-wise TopK). Displays 86-88 and 92-95 (Prop. 3.1's proof)."""
    from .bounds import compressor_q2

    r = np.random.default_rng(0)
    trials = 0
    for _ in range(300):
        sizes = [int(v) for v in r.integers(1, 40, size=r.integers(1, 4))]
        edges = np.cumsum([0] + sizes)
        layers = list(zip(edges[:-1], edges[1:]))
        x = r.standard_normal(edges[-1]) * r.choice([1e-3, 1, 1e3], size=edges[-1])
        nx = float(x @ x)
        for k in (0.01, 0.1, 0.3, 0.7):
            ck = topk(x, k, layers)
            if float((ck - x) @ (ck - x)) > compressor_q2("topk", sizes, k) * nx * (1 + 1e-12):
                return refuted(f"TopK bound violated for sizes={sizes}, k={k}", "numeric")
            kept = sum(max(1, int(np.floor(k * d))) / d * float(x[a:b] @ x[a:b]) for (a, b), d
                       in zip(layers, sizes))
            if float(ck @ ck) < kept * (1 - 1e-12):
                return refuted(f"||C_k(x)||^2 < sum_l (k_l/d_l)||x_l||^2 for sizes={sizes}, k={k}",
                               "numeric")
            for scale in ("size", "nnz"):
                hv = hv_sign(x, k, layers, scale)
                split = float((hv - ck) @ (hv - ck)) + float((ck - x) @ (ck - x))
                if abs(float((hv - x) @ (hv - x)) - split) > 1e-9 * nx:
                    return refuted(f"orthogonal split fails (scale={scale})", "numeric")
                if float((hv - x) @ (hv - x)) > compressor_q2("hvsign", sizes, k) * nx * (1 + 1e-12):
                    return refuted(f"hv-Sign bound violated, sizes={sizes}, k={k}, scale={scale}", "numeric")
            trials += 1
        s = grouped_sign(x, layers)
        if float((s - x) @ (s - x)) > compressor_q2("sign", sizes) * nx * (1 + 1e-12):
            return refuted(f"Sign bound violated for sizes={sizes}", "numeric")
    # tightness of Sign as the largest block tends to a 1-sparse vector (tiny entries keep a non-zero sign)
    sizes = [5, 3]
    x = np.array([2.0, 1e-9, 1e-9, 1e-9, 1e-9, -1.0, 0, 0])
    s = grouped_sign(x, [(0, 5), (5, 8)])
    q2 = compressor_q2("sign", sizes)
    block_ratio = float((s[:5] - x[:5]) @ (s[:5] - x[:5])) / float(x[:5] @ x[:5])
    if abs(block_ratio - q2) > 1e-6:
        return refuted(f"Sign not tight on a nearly 1-sparse largest block: {block_ratio} vs {q2}", "numeric")
    return verified(f"seeded random search, {trials} (vector, layer split, k) cases with magnitudes 1e-3..1e3: no "
                    f"violation of the TopK, Sign (both hv-Sign scalings) bounds; Sign's error ratio on the block "
                    f"(2, 1e-9, 1e-9, 1e-9, 1e-9) is {fmt(block_ratio, 8)} -> q^2 = 1 - 1/5 (tight in the limit; with "
                    "exact zeros and sign(0) = 0 the ratio is smaller)", "numeric")


@check(PAPER, "hvsign_bound_with_flooring",
       "Prop. 3.2's heavy-Sign bound q^2 = 1 - min_i k/d_i holds for the layer-wise implementation that keeps "
       "max(1, floor(k d_l)) entries (footnote 2).",
       spec=("err-13",), severity="constant", kind="derived",
       corrected={"q2": lambda k, d: 1 - max(1, int(np.floor(k * d))) / d**2},
       hypotheses=(Hyp("0 < k < 1 (TopK's compression rate)", lambda p: 0 < p["k"] < 1, "fed-ef.txt line 70 (Def. 1)"),
                   Hyp("d >= 1 an integer, x != 0", lambda p: int(p["d"]) == p["d"] >= 1 and p["x_norm2"] > 0, "fed-ef.txt line 105")))
def _hvsign_flooring(q2=lambda k, d: 1 - k / d):
    """fed-ef.txt Prop. 3.2 (line 105) and its proof (lines 110-121), which uses ||C_k(x)||^2 >= k||x||^2; the
    experiments' TopK floors the kept count per layer (footnote 2).

    ``q2(k, d)``: the bound tested (printed 1 - k/d).  Search over single-layer vectors of 1s and 2s, d = 2..4,
    k in {0.3, 0.6, 0.9}, with this module's topk / hv_sign (Definition 2 with scale ||.||_1/d). Display 118-119 (Prop. 3.2's bound)."""
    for d in (2, 3, 4):
        for k in (0.3, 0.6, 0.9):
            for x in itertools.product((1.0, 2.0), repeat=d):
                x = np.array(x)
                hv = hv_sign(x, k)
                ratio = float((hv - x) @ (hv - x) / (x @ x))
                if ratio > q2(k, d) * (1 + 1e-12):
                    ck = topk(x, k)
                    return refuted(f"d = {d}, k = {k}, x = ({', '.join(f'{v:g}' for v in x)}): {max(1, int(np.floor(k * d)))} entries kept, "
                                   f"||C(x) - x||^2/||x||^2 = {fmt(ratio)} > bound {fmt(q2(k, d))} (also ||C_k(x)||^2 = "
                                   f"{fmt(float(ck @ ck))} vs k||x||^2 = {fmt(k * float(x @ x))}); with the floored count "
                                   "k_l the bound 1 - min_l k_l/d_l^2 holds (compressor_q_bounds)", "exact",
                                   at={"d": d, "k": k, "x": "(" + ", ".join(f"{v:g}" for v in x) + ")", "x_norm2": float(x @ x)})
    return verified("no violation over d = 2..4, k in {0.3, 0.6, 0.9}, x in {1, 2}^d", "exact")


@check(PAPER, "stoc_unbiased_variance",
       "Stoc quantizer (eq. 4, s = 2^(b-1)): E[xi] = (l/s)(1-g) + ((l+1)/s) g = a with g = a s - l, "
       "and Var(xi) = g(1-g)/s^2 <= 1/(4s^2).",
       spec=("V17",), severity="constant")
def _stoc():
    """fed-ef.txt App. A, eq. (4), lines 545-553."""
    a, s, l = sp.symbols("a s l", positive=True)
    g = a * s - l
    mean = (l / s) * (1 - g) + ((l + 1) / s) * g
    second = (l / s) ** 2 * (1 - g) + ((l + 1) / s) ** 2 * g
    var = sp.simplify(second - mean**2)
    res = identities([("mean", mean, a), ("variance", var, g * (1 - g) / s**2)])
    if res.status != "verified":
        return res
    gg = sp.Symbol("gg")
    if sp.factor(sp.Rational(1, 4) - gg * (1 - gg)) != (gg - sp.Rational(1, 2)) ** 2 and \
            sp.expand(sp.Rational(1, 4) - gg * (1 - gg) - (gg - sp.Rational(1, 2)) ** 2) != 0:
        return refuted("1/4 - g(1-g) is not (g-1/2)^2")
    return verified(res.evidence + "; 1/4 - g(1-g) = (g - 1/2)^2 >= 0")


def stoc_expected_nnz(x, b) -> float:
    """E||Q_b(x)||_0 (eq. 4, s = 2^(b-1)): an entry with l >= 1 is always non-zero, one with l = 0 is non-zero with
    probability g = s|x_i|/||x||; i.e. sum_i min(1, s|x_i|/||x||)."""
    s_ = 2.0 ** (b - 1)
    nrm = float(np.sqrt(sum(float(v) ** 2 for v in x)))
    return sum(min(1.0, s_ * abs(float(v)) / nrm) for v in x)


@check(PAPER, "stoc_sparsity_bound_vs_qsgd",
       "The Stoc sparsity bound E||Q_b(x)||_0 <= 2^b + 2^(b-1) sqrt(d) (App. A) holds for every x in R^d and b >= 1 "
       "(the spec, err-10, reads it as a misprint of QSGD's s^2 + s sqrt(d) with s = 2^(b-1)).",
       spec=("err-10",), severity="typo",
       hypotheses=(Hyp("b >= 1 an integer (bits per entry)", lambda p: int(p["b"]) == p["b"] >= 1, "fed-ef.txt line 547"),
                   Hyp("x in R^d, x != 0, d = len(x)", lambda p: p["d"] >= 1 and p["x_norm2"] > 0, "fed-ef.txt line 545")))
def _stoc_sparsity(printed=lambda b, d: 2**b + 2 ** (b - 1) * sp.sqrt(d)):
    """fed-ef.txt line 553 (App. A sparsity claim; levels l/2^(b-1), line 548, so s = 2^(b-1)), eq. (4).

    ``printed(b, d)`` is the bound tested.  Proof: E||Q_b(x)||_0 = sum_i min(1, s|x_i|/||x||) <= min(d, s ||x||_1/||x||)
    <= min(d, s sqrt(d)) (Cauchy-Schwarz), attained at x = (1, ..., 1) with d <= s^2 (then E = d); the claim holds iff
    min(d, s sqrt d) <= printed(b, d) for all d, checked for b = 1..6 at d = 1..32, s^2 +- 1, 4s^2, 10^4, plus a search over
    x in {0, 1, 2, 5}^d, d <= 4.  QSGD's s^2 + s sqrt(d) is a weaker bound than s sqrt(d) as well; the paper never
    attributes its bound to QSGD, so the difference from QSGD (spec err-10) is no error of the paper."""
    for bb in range(1, 7):
        s_ = 2 ** (bb - 1)
        for dd in sorted(set(range(1, 33)) | {s_**2 - 1, s_**2, s_**2 + 1, 4 * s_**2, 10**4} - {0}):
            sup = min(float(dd), s_ * np.sqrt(dd))  # attained: x = (1,...,1) if d <= s^2, else s^2 entries 1 and the rest 0
            bound_ = float(printed(bb, dd))
            if bound_ < sup * (1 - 1e-12):
                x = "(1, ..., 1)" if dd <= s_**2 else f"({s_**2} ones, {dd - s_**2} zeros)"
                return refuted(f"at b = {bb}, d = {dd}, x = {x}: E||Q_b(x)||_0 = {fmt(sup)} > printed bound {fmt(bound_)}",
                               "numeric", at={"b": bb, "d": dd, "x": x, "x_norm2": min(dd, s_**2)})
    cases = 0
    for dd in range(1, 5):
        for x in itertools.product((0, 1, 2, 5), repeat=dd):
            if not any(x):
                continue
            for bb in (1, 2, 3):
                e = stoc_expected_nnz(x, bb)
                cases += 1
                if e > float(printed(bb, dd)) * (1 + 1e-12):
                    return refuted(f"at b = {bb}, x = {x}: E||Q_b(x)||_0 = {fmt(e)} > printed bound", "numeric",
                                   at={"b": bb, "d": dd, "x": str(x), "x_norm2": sum(v * v for v in x)})
    return verified("E||Q_b(x)||_0 = sum_i min(1, s|x_i|/||x||) <= min(d, s sqrt d) <= 2^b + 2^(b-1) sqrt(d) (checked exactly "
                    f"for b = 1..6, d = 1..32, s^2 +- 1, 4s^2, 10^4, and over {cases} vectors x in {{0,1,2,5}}^d, d <= 4): the printed bound "
                    "holds; it differs from QSGD's s^2 + s sqrt(d) (spec err-10), which is looser than s sqrt(d) too, but "
                    "the paper does not claim QSGD's form, so the spec's 'misprint' reading is not an error of the paper",
                    "numeric")


# ===========================================================================
# adaptive-server lemmas, EF identities, staleness  (V20, V22, V23, T3)
# ===========================================================================


@check(PAPER, "lemma_D8_telescoping",
       "Lemma D.8: (a-b)^2 <= a^2 - b^2 for a >= b >= 0, and sum_t D_t telescopes to 1/sqrt(eps) - 1/sqrt(v_T+eps) <= 1/sqrt(eps) "
       "per coordinate (so sum ||D_t||_1 <= d/sqrt(eps), sum ||D_t||^2 <= d/eps).",
       spec=("V20",), severity="constant")
def _lemma_d8():
    """fed-ef.txt Lemma D.8, lines 1120-1140."""
    b, u = sp.symbols("b u", nonnegative=True)
    a = b + u
    gap = sp.expand(a**2 - b**2 - (a - b) ** 2)
    if gap != 2 * b * u:
        return refuted(f"a^2 - b^2 - (a-b)^2 = {show(gap)}")
    v = sp.symbols("v0:6", nonnegative=True)
    D = [1 / sp.sqrt(v[t - 1] + eps) - 1 / sp.sqrt(v[t] + eps) for t in range(1, 6)]
    tele = sp.simplify(sp.Add(*D) - (1 / sp.sqrt(v[0] + eps) - 1 / sp.sqrt(v[5] + eps)))
    if tele != 0:
        return refuted(f"telescoping residual {show(tele)}")
    return verified("a^2 - b^2 - (a-b)^2 = 2b(a-b) >= 0 (a = b + u); sum_{t=1}^5 D_t telescopes exactly; with "
                    "v_hat_0 = 0 and v_hat non-decreasing, each D_t >= 0 and the sum is <= 1/sqrt(eps)")


def _ef_run(rule, seed=0, n_=5, m_=None, dim=12, T_=25, eta_=0.7, b1=0.9, b2=0.99, eps_=1e-3):
    """Simulate the EF recursions with arbitrary local updates and return the worst identity residual."""
    r = np.random.default_rng(seed)
    layers = [(0, 5), (5, dim)]
    theta = r.standard_normal(dim)
    e = np.zeros((n_, dim))
    worst = 0.0
    if rule == "sgd":
        x = theta.copy()
        for _ in range(T_):
            delta = r.standard_normal((n_, dim))
            comp = np.array([topk(delta[i] + e[i], 0.3, layers) for i in range(n_)])
            e = e + delta - comp
            theta = theta - eta_ * comp.mean(0)
            x = x - eta_ * delta.mean(0)
            worst = max(worst, np.abs((theta - eta_ * e.mean(0)) - x).max())
    elif rule == "pp":
        x = theta.copy()
        for _ in range(T_):
            M = r.choice(n_, size=m_, replace=False)
            delta = r.standard_normal((n_, dim))
            comp = np.zeros((n_, dim))
            for i in M:
                comp[i] = grouped_sign(delta[i] + e[i], layers)
                e[i] = e[i] + delta[i] - comp[i]
            theta = theta - eta_ * comp[M].sum(0) / m_
            x = x - eta_ * delta[M].sum(0) / m_
            worst = max(worst, np.abs((theta - eta_ / m_ * e.sum(0)) - x).max())
    elif rule == "two_way":
        phi = np.zeros(dim)
        x = theta.copy()
        for _ in range(T_):
            delta = r.standard_normal((n_, dim))
            comp = np.array([topk(delta[i] + e[i], 0.3, layers) for i in range(n_)])
            e = e + delta - comp
            U = comp.mean(0)
            Ht = topk(U + phi, 0.5, layers)
            phi = phi + U - Ht
            theta = theta - eta_ * Ht
            x = x - eta_ * delta.mean(0)
            worst = max(worst, np.abs((theta - eta_ * phi - eta_ * e.mean(0)) - x).max())
    elif rule == "ams":
        mom = np.zeros(dim)
        mp = np.zeros(dim)
        v = np.zeros(dim)
        vhat_prev = np.zeros(dim)
        E = np.zeros(dim)
        x = theta.copy()
        for _ in range(T_):
            delta = r.standard_normal((n_, dim))
            comp = np.array([topk(delta[i] + e[i], 0.3, layers) for i in range(n_)])
            ebar_t = e.mean(0)
            e = e + delta - comp
            dt = comp.mean(0)
            mom = b1 * mom + (1 - b1) * dt
            mp_prev = mp
            mp = b1 * mp + (1 - b1) * delta.mean(0)
            v = b2 * v + (1 - b2) * dt**2
            vhat = np.maximum(v, vhat_prev)
            E = b1 * E + (1 - b1) * ebar_t  # E_t = (1-b1) sum b1^{t-tau} ebar_tau
            D = 1 / np.sqrt(vhat_prev + eps_) - 1 / np.sqrt(vhat + eps_)
            theta = theta - eta_ * mom / np.sqrt(vhat + eps_)
            x = (x - eta_ * delta.mean(0) / np.sqrt(vhat + eps_) + eta_ * b1 / (1 - b1) * D * mp_prev
                 + eta_ * D * E)
            E_next = b1 * E + (1 - b1) * e.mean(0)
            x_def = theta - eta_ * E_next / np.sqrt(vhat + eps_) - eta_ * b1 / (1 - b1) * mp / np.sqrt(vhat + eps_)
            worst = max(worst, np.abs(x_def - x).max())
            vhat_prev = vhat
    return worst


@check(PAPER, "ef_virtual_sequence_identities",
       "EF identities with the pseudo-gradient convention Delta = theta_t - theta^(K+1): SGD x_t = theta_t - eta e_bar_t "
       "moves by -eta Delta_bar_t (14); AMS x_{t+1} = x_t - eta Delta_bar/sqrt(v_hat+eps) + eta beta1/(1-beta1) D_t m'_{t-1} "
       "+ eta D_t E_t; PP x_t = theta_t - (eta/m) sum_i e_i moves by -eta Delta_bar_M (18); two-way x_t = theta_t - eta phi_t "
       "- eta e_bar_t moves by -eta Delta_bar_t (Sec. 6).",
       spec=("V22", "T3"), severity="rate")
def _ef_identities():
    """fed-ef.txt eq. (14) line 851, D.1 virtual sequence (line 664ff), eq. (18) line 1151, Sec. 6 line 398ff. Displays 677-683 and 851-855."""
    res = {rule: max(_ef_run(rule, seed=s, m_=2) for s in range(3)) for rule in ("sgd", "ams", "pp", "two_way")}
    bad = {k: v for k, v in res.items() if v > 1e-10}
    if bad:
        return refuted("identity residuals: " + describe(bad), "numeric")
    return verified("float64 simulation with random local updates, TopK/Sign compressors, 3 seeds x 25 rounds: max "
                    "residuals " + ", ".join(f"{k} {v:.1e}" for k, v in res.items()), "numeric")


@check(PAPER, "two_way_server_error_recursion",
       "Sec. 6: ||phi_{t+1}||^2 <= q^2||phi_t + Delta~_t||^2 <= ((1+q^2)/2)||phi_t||^2 + (2q^2/(1-q^2))||Delta~_t||^2, so "
       "sum_t ||phi_t||^2 <= (4q^2/(1-q^2)^2) sum_t ||Delta~_t||^2, the same order as the client error e_bar (same rate).",
       spec=("V21", "T3"), severity="rate")
def _two_way():
    """fed-ef.txt Sec. 6, lines 398-410 (eq. 3 and the phi recursion)."""
    s = sp.Symbol("s", positive=True)
    qq = unit(s)  # q^2 in (0,1)
    rho = (1 - qq) / (2 * qq)
    # Young: ||a+b||^2 <= (1+rho)||a||^2 + (1+1/rho)||b||^2
    c_phi, c_delta = sp.simplify(qq * (1 + rho)), sp.simplify(qq * (1 + 1 / rho))
    total = sp.simplify(c_delta * geometric_series(c_phi))
    target = 4 * qq / (1 - qq) ** 2
    if not rational_nonneg(target - total, [s]):
        return refuted(f"accumulated constant {show(total)} exceeds 4q^2/(1-q^2)^2")
    return verified(f"Young with rho = (1-q^2)/(2q^2): contraction {show(sp.factor(c_phi))}, input weight {show(sp.factor(c_delta))} "
                    "(q^2 = s/(1+s)); summed geometric constant = q^2(1+q^2)/(1-q^2) * 2/(1-q^2) <= 4q^2/(1-q^2)^2, "
                    "identical to Lemma D.5's constant for e_bar")


@check(PAPER, "expected_staleness",
       "Under uniform sampling with participation probability p = m/n per round, the staleness s of a selected client's "
       "error is geometric with E[s] = n/m.",
       spec=("V23",), severity="constant")
def _staleness():
    """fed-ef.txt Sec. 4.3, line 284 ("delayed error compensation")."""
    p, r = sp.symbols("p r", positive=True)
    # sum_{s>=1} s r^(s-1) = d/dr sum_{s>=0} r^s = d/dr 1/(1-r), at r = 1 - p
    es = sp.simplify(p * sp.diff(geometric_series(r), r).subs(r, 1 - p))
    partial = sp.Add(*[s_ * sp.Rational(1, 4) * sp.Rational(3, 4) ** (s_ - 1) for s_ in range(1, 400)])
    if not is_identity(es, 1 / p) or abs(float(partial) - 4) > 1e-12:
        return refuted(f"E[s] = {show(es)}")
    return verified(f"E[s] = p * d/dr(1/(1-r)) at r = 1-p = {show(es)} = n/m for p = m/n "
                    f"(exact partial sum to 399 at p = 1/4: {fmt(float(partial))})")


@check(PAPER, "realistic_q_constants",
       "With realistic layer sizes the theory constants are vacuous: grouped Sign on a 10^6-parameter layer has 1 - q^2 = 10^-6, "
       "so C1_sgd ~ 4q^2/(1-q^2)^2 ~ 4*10^12 and Thm 4.2's condition forces eta_l <= 1/(2KL eta (C1+1)) ~ 10^-13/(KL eta).",
       spec=("err-27",), kind="derived", severity="constant")
def _realistic_q():
    """fed-ef.txt Prop. 3.1 (line 76) with Thm 4.2 (line 221); spec sec. 2.7 practical remark and sec. 6 item 27."""
    from .bounds import compressor_q2

    q2 = sp.Rational(1) - sp.Rational(1, 10**6)  # compressor_q2("sign", [10**6]) exactly
    if abs(float(q2) - compressor_q2("sign", [10**6])) > 1e-15:
        return refuted("compressor_q2 disagrees with 1 - 1/d")
    c1 = C1_sgd.subs(q, sp.sqrt(q2))
    lr = 1 / (2 * (c1 + 1))
    return verified(f"q^2 = 1 - 10^-6 gives C1_sgd = {fmt(float(c1))}, C1_pp = {fmt(float(C1_pp.subs(q, sp.sqrt(q2))))} and "
                    f"eta_l K L eta <= {fmt(float(lr))}; TopK-0.01 (q^2 = 0.99) gives C1_sgd = "
                    f"{fmt(float(C1_sgd.subs(q, sp.sqrt(sp.Rational(99, 100)))))}", "exact")
from . import fed_ef_steps as _steps  # noqa: E402,F401  (the proof-step map and its checks, registered after this module)

"""Fed-LAMB (Karimi, Li, Li): Theorem 5 (supplement), Lemma 1 and the proof steps S1-S13.

Sources: /work/shared/papers/fed-lamb.txt (MAIN, the early draft; its Theorem 1
has the placeholder right-hand side "dd") and /work/shared/papers/fed-lamb-supplement.txt
(SUPP, Theorem 5 for T >= 1 local steps); extract /work/shared/specs/fed-lamb.md
(section 2.7, items S1-S13; claims T1-T6 of section 4).

Notation (SUPP): n clients, h layers, p = sum_l p_l total dimension, T local
steps, R rounds, alpha the learning rate, M the gradient bound, phi_M the
upper bound of the scaling function phi, Delta = E f(theta_1) - min f.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from .algebra import fmt, identities, is_identity, poly_nonneg, pos, show, simplify_zero
from .core import H as Hyp
from .core import check, refuted, verified

PAPER = "fed-lamb"

alpha, M, p, h, n, T, R, L, eps, sigma, phi_M, phi_m, Delta, kappa = pos(
    "alpha M p h n T R L epsilon sigma phi_M phi_m Delta kappa"
)
beta1, beta2 = pos("beta1 beta2")

#: SUPP Theorem 5 (line 96-100), right-hand side term by term (statement form)
THM5 = {
    "T1_init": sp.sqrt(M**2 * p / n) * Delta / (h * alpha * R),
    "T2_local": 4 * alpha**2 * L * M**2 * T**2 * phi_M**2 * (1 - beta2) * p / sp.sqrt(eps),
    "T3_grad": 4 * alpha**2 * M**2 / sp.sqrt(eps),
    "T4_noise": phi_M * sigma**2 / (R * n) * sp.sqrt((1 - beta2) / (M**2 * p)),
    "T5_layer_noise": 4 * alpha * phi_M * h * sigma**2 / sp.sqrt(n),
    "T6_bounded": 4 * alpha**2 * phi_M**2 * sp.sqrt(M**2 + p * sigma**2),
}
#: SUPP, final display of the proof (line 206ff; "assuming M <= 1"; Lbar -> L, G -> phi_M)
THM5_PROOF = {
    "T1_init": THM5["T1_init"],
    "T4_noise": THM5["T4_noise"],
    "T2_local": 4 * alpha**2 * L / sp.sqrt(eps) * M**2 * T**2 * phi_M**2 * (1 - beta2) * p,
    "T3_grad": 4 * M**2 * alpha / sp.sqrt(eps),
    "T6_bounded": 4 * phi_M**2 * alpha * sp.sqrt(M**2 + p * sigma**2),
    "T2b_local_noise": 4 * sigma**2 * alpha**2 * L / sp.sqrt(eps) * M**2 * T**2 * (1 - beta2) * p,
    "T5_layer_noise": 4 * sigma**2 * phi_M * alpha * h / sp.sqrt(n),
    "beta1_cross": alpha * beta1 / (1 - beta1) * sp.sqrt((1 - beta2) * p) * h * M**2 / sp.sqrt(eps),
    "consensus": L * alpha**2 * M**2 * phi_M**2 * (1 - beta2) * p / (T * eps),
    "beta1_shift": 2 * alpha**3 * L * p * phi_M**2 / sp.sqrt(eps) * beta1**2 / (1 - beta1) ** 2,
}
#: learning rate alpha = kappa/sqrt(R) (spec sec. 2.6)
LR_SQRT_R = {alpha: kappa / sp.sqrt(R)}

# ---------------------------------------------------------------------------
# hypotheses of the statements (H1-H4 of MAIN, Assumptions 1-4 of SUPP), evaluated at a refutation's counterexample
# ---------------------------------------------------------------------------
H_B1 = Hyp("0 <= beta1 < 1", lambda q: 0 <= q["beta1"] < 1, "fed-lamb.txt Algorithm 2")
H_B2 = Hyp("0 < beta2 < 1", lambda q: 0 < q["beta2"] < 1, "fed-lamb.txt Algorithm 2")
H_EPS = Hyp("eps > 0", lambda q: q["eps"] > 0, "fed-lamb-supplement.txt Theorem 5 (line 96)")
H_PHI = Hyp("0 < phi_m <= phi <= phi_M (H4)", lambda q: 0 < q["phi_m"] <= min(q["phi"]) and max(q["phi"]) <= q["phi_M"],
            "fed-lamb.txt line 143 (H4)")
H_M = Hyp("|g| <= M (H2), and M <= 1 as the proof assumes ('assuming M <= 1')", lambda q: max(abs(float(x)) for x in q["gradients"])
          <= float(q["M"]) <= 1, "fed-lamb.txt line 139 (H2), fed-lamb-supplement.txt line 206")
H_N = Hyp("n >= 1 clients, T >= 1 local steps (integers)", lambda q: int(q["n"]) == q["n"] >= 1 and int(q["T"]) == q["T"] >= 1,
          "fed-lamb-supplement.txt Theorem 5 (line 96)")


# ===========================================================================
# virtual sequence and elementary inequalities (S1-S4)
# ===========================================================================

_th = sp.symbols("theta_prev theta_r theta_next")
_c, _s, _mprev, _g = sp.symbols("c_r s_r m_prev g_r")
_c0, _s0 = sp.symbols("c_prev s_prev")


def _virtual(cur, prev):
    """MAIN eq. (9): vartheta_r = theta_r + beta1/(1-beta1)(theta_r - theta_(r-1))."""
    return cur + beta1 / (1 - beta1) * (cur - prev)


@check(PAPER, "S1_virtual_sequence",
       "MAIN (9)-(10): vartheta_(r+1) - vartheta_r = (theta_(r+1) - theta_r)/(1-beta1) - beta1/(1-beta1) (theta_r - theta_(r-1)).",
       spec=("S1",), severity="rate")
def _s1():
    """fed-lamb.txt eq. (9) line 209 and eq. (10) line 213; fed-lamb-supplement.txt (2) line 104 and the first line of (3), line 108."""
    tp, tr, tn = _th
    lhs = _virtual(tn, tr) - _virtual(tr, tp)
    rhs = (tn - tr) / (1 - beta1) - beta1 / (1 - beta1) * (tr - tp)
    return identities([("(10)", lhs, rhs)])


def _s2_parts():
    tp, tr, tn = _th
    m_r = beta1 * _mprev + (1 - beta1) * _g
    subs = {tn: tr - alpha * _c / _s * m_r, tr: tp - alpha * _c0 / _s0 * _mprev}
    lhs = (_virtual(tn, tr) - _virtual(tr, tp)).subs(tn, subs[tn]).subs(tr, subs[tr])
    correct = -alpha * beta1 / (1 - beta1) * (_c / _s - _c0 / _s0) * _mprev - alpha * _c / _s * _g
    printed12 = alpha * beta1 / (1 - beta1) * (_c / _s - _c0 / _s0) * _mprev + alpha * _c / _s * _g
    printed11 = alpha / (1 - beta1) * _c / _s * m_r - alpha / (1 - beta1) * _c0 / _s0 * _mprev
    return lhs, correct, printed11, printed12


@check(PAPER, "S2_virtual_step",
       "With theta_(r+1) - theta_r = -alpha c_r m_r/s_r and m_r = beta1 m_(r-1) + (1-beta1) g_r (T = 1, lambda = 0, no bias correction): "
       "vartheta_(r+1) - vartheta_r = -alpha beta1/(1-beta1) (c_r/s_r - c_(r-1)/s_(r-1)) m_(r-1) - alpha (c_r/s_r) g_r (both terms negative).",
       spec=("S2",), kind="derived", severity="rate")
def _s2():
    """fed-lamb.txt eqs. (11)-(12), lines 215-217; fed-lamb-supplement.txt eq. (3), line 108."""
    lhs, correct, _, _ = _s2_parts()
    return identities([("virtual step", lhs, correct)])


@check(PAPER, "S2_paper_signs",
       "MAIN (11)-(12) (and SUPP (3)) state vartheta_(r+1) - vartheta_r = +alpha beta1/(1-beta1)(c_r/s_r - c_(r-1)/s_(r-1)) m_(r-1) "
       "+ alpha (c_r/s_r) g_r, with (11) = (alpha/(1-beta1)) c_r m_r/s_r - (alpha/(1-beta1)) c_(r-1) m_(r-1)/s_(r-1).",
       spec=("S2", "err-8"), severity="typo", corrected={"sign": -1, "coef11": beta1},
       hypotheses=(H_B1, Hyp("alpha > 0 (constant learning rate), c_r/s_r, c_(r-1)/s_(r-1) > 0 (positive step scalings)",
                             lambda q: q["alpha"] > 0 and q["c_r/s_r"] > 0 and q["c_(r-1)/s_(r-1)"] > 0, "fed-lamb.txt lines 213-219")))
def _s2_signs(sign=1, coef11=1):
    """fed-lamb.txt lines 215 (eq. 11) and 217 (eq. 12), repeated in fed-lamb-supplement.txt (3), line 108; ``sign`` multiplies both printed forms (printed +1) and
    ``coef11`` is the numerator of (11)'s second coefficient coef11/(1-beta1) (printed 1)."""
    lhs, _, p11, p12 = _s2_parts()
    tp, tr, tn = _th
    m_r = beta1 * _mprev + (1 - beta1) * _g
    p11 = sign * (alpha / (1 - beta1) * _c / _s * m_r - alpha * coef11 / (1 - beta1) * _c0 / _s0 * _mprev)
    p12 = sign * p12
    if is_identity(p12, lhs) and is_identity(p11, lhs):
        return verified("printed forms equal the true step")
    neg12 = is_identity(p12, -lhs)
    rest11 = sp.factor(simplify_zero(p11 + lhs))
    return refuted(f"printed (12) {'equals -1 x' if neg12 else 'differs from'} the true step (both signs flipped); printed (11) = "
                   f"-(true step) + ({show(rest11)}): sign flipped and its second coefficient 1/(1-beta1) should be beta1/(1-beta1)",
                   at=(pt := {beta1: sp.Rational(1, 2), alpha: 1, _c: 1, _s: 1, _c0: 1, _s0: 1, _mprev: 1, _g: 1}) and
                   {"beta1": sp.Rational(1, 2), "alpha": 1, "c_r/s_r": 1, "c_(r-1)/s_(r-1)": 1, "m_(r-1)": 1, "g_r": 1,
                    "printed (12)": p12.subs(pt), "true step": lhs.subs(pt)})


@check(PAPER, "S3_polarization_equality",
       "SUPP (7): <a, b> = (1/2)||a||^2 + (1/2)||b||^2 - ||a - b||^2 (stated as an equality).",
       spec=("S3",), severity="typo", corrected={"coef": sp.Rational(1, 2)},
       hypotheses=(Hyp("a, b real (any vectors: (7) is applied to arbitrary a, b)", lambda q: q["a"].is_real and q["b"].is_real,
                       "fed-lamb-supplement.txt line 134"),))
def _s3(coef=1):
    """fed-lamb-supplement.txt eq. (7), line 134; ``coef`` is the printed coefficient of ||a - b||^2 (1)."""
    a, b = sp.symbols("a b", real=True)
    diff = sp.factor(sp.expand(a * b - (a**2 / 2 + b**2 / 2 - coef * (a - b) ** 2)))
    if diff == 0:
        return verified(f"<a,b> - [(1/2)|a|^2 + (1/2)|b|^2 - {coef}|a-b|^2] expands to 0")
    return refuted(f"<a,b> - [(1/2)|a|^2 + (1/2)|b|^2 - |a-b|^2] = {show(diff)} (e.g. 1/2 at a = 1, b = 0); the correct polarisation "
                   "has -(1/2)||a-b||^2, so (7) holds only as '>='", at={"a": sp.Integer(1), "b": sp.Integer(0)})


@check(PAPER, "S4_norm_inequalities",
       "||a||^2 >= (1/2)||b||^2 - ||a - b||^2 (SUPP) and ||a|| >= (1/2)||b|| - ||a - b|| (MAIN (40)).",
       spec=("S4",), kind="textbook", severity="constant")
def _s4():
    """fed-lamb.txt eq. (40) line 336 (first line of (41), line 340); SUPP lines 190-194 (first line), after (10)."""
    A, C = pos("A C")  # A = ||a||, C = ||a - b||; triangle: ||b|| <= A + C
    gap1 = sp.expand(2 * A**2 + 2 * C**2 - (A + C) ** 2)
    gap2 = sp.expand(A - ((A + C) / 2 - C))
    if gap1 == sp.expand((A - C) ** 2) and poly_nonneg(gap2, [A, C]):
        return verified("with ||b|| <= ||a|| + ||a-b||: 2||a||^2 + 2||a-b||^2 - (||a|| + ||a-b||)^2 = (||a|| - ||a-b||)^2 >= 0 and "
                        "||a|| - ((||a|| + ||a-b||)/2 - ||a-b||) = (||a|| + ||a-b||)/2 >= 0 (weaker than the triangle inequality)")
    return refuted(f"gaps {show(gap1)}, {show(gap2)}")


# ===========================================================================
# bookkeeping of constants (S5-S7, S11, S12)
# ===========================================================================


@check(PAPER, "S5_p_cancels",
       "MAIN (38): sum_l (L_l/2) beta1^2/(1-beta1)^2 (Lc(1-beta2)/p) M^2 phi_M^2 (n p/v0) = Lbar beta1^2 Lc (1-beta2) M^2 phi_M^2 n/(2(1-beta1)^2 v0).",
       spec=("S5",), severity="constant")
def _s5():
    """fed-lamb.txt eqs. (32)-(38); the collected constant of (38), line 326."""
    Ls = sp.symbols("L1:4", positive=True)
    Lc, v0 = pos("Lc v0")
    per = beta1**2 / (1 - beta1) ** 2 * Lc * (1 - beta2) / p * M**2 * phi_M**2 * n * p / v0
    lhs = sum(l / 2 * per for l in Ls)
    rhs = sum(Ls) * beta1**2 * Lc * (1 - beta2) * M**2 * phi_M**2 * n / (2 * (1 - beta1) ** 2 * v0)
    return identities([("(38) with three layers", lhs, rhs)])


@check(PAPER, "S6_layer_factor",
       "MAIN (26)/(38): sum_(l=1)^L sum_(i=1)^n sum_(j=1)^(p_l) sigma/sqrt(n) = sigma L p sqrt(n).",
       spec=("S6", "err-9"), severity="constant",
       corrected={"printed": lambda sig, layers, P: sig * P * sp.sqrt(n)},
       hypotheses=(Hyp("L >= 1 layers, n >= 1 clients (integers), sigma > 0", lambda q: int(q["L"]) == q["L"] >= 1
                       and int(q["n"]) == q["n"] >= 1 and q["sigma"] > 0, "fed-lamb.txt line 79, H3 (line 141), eq. (26)"),))
def _s6(printed=lambda sig, layers, P: sig * layers * P * sp.sqrt(n)):
    """fed-lamb.txt eq. (26) line 261 and eq. (38) line 326; ``printed(sigma, L, p)`` is the printed value of the triple sum."""
    ps = sp.symbols("p1:4", positive=True)
    sig = sp.Symbol("sigma", positive=True)
    total = sum(n * pl * sig / sp.sqrt(n) for pl in ps)
    P = sum(ps)
    ratio = sp.simplify(printed(sig, 3, P) / total)
    if ratio == 1:
        return verified(f"with 3 layers the triple sum is {show(sp.factor(total))} = the printed value")
    return refuted(f"with 3 layers the triple sum is {show(sp.factor(total))} = sigma p sqrt(n) (p = p1+p2+p3); the printed "
                   f"sigma L p sqrt(n) is {show(ratio)} times larger (spurious layer factor)", at={"L": 3, "n": 4, "sigma": 1, "p_l": "1, 1, 1"})


@check(PAPER, "S7_telescoping",
       "sum_(r=1)^R (v_(r-1)^(-1/2) - v_r^(-1/2)) = v_0^(-1/2) - v_R^(-1/2) <= eps^(-1/2) for non-decreasing v >= eps, and "
       "sum_r d_r^2 <= (max_r d_r) sum_r d_r <= 1/eps.",
       spec=("S7",), severity="constant")
def _s7():
    """fed-lamb.txt eq. (32) (telescoping of the max operator), lines 291-297."""
    v = sp.symbols("v0:6", positive=True)
    d = [1 / sp.sqrt(v[r - 1]) - 1 / sp.sqrt(v[r]) for r in range(1, 6)]
    tele = sp.simplify(sum(d) - (1 / sp.sqrt(v[0]) - 1 / sp.sqrt(v[5])))
    if tele != 0:
        return refuted(f"telescoping residual {show(tele)}")
    return verified("sum of 5 differences telescopes exactly; each d_r >= 0 and d_r <= v_0^(-1/2) <= eps^(-1/2), so "
                    "sum d_r^2 <= eps^(-1/2) * eps^(-1/2) = 1/eps")


@check(PAPER, "S11_epsilon_powers",
       "SUPP (9): B_1 <= (L/sqrt(eps)) sum_i ||theta_bar - theta_i||^2 <= n (alpha^2 L/sqrt(eps)) M^2 T^2 phi_M^2 (1-beta2) p, using Lemma 1.",
       spec=("S11", "err-10"), severity="constant", depends=("S9_lemma1_consensus_bound",),
       corrected={"eps_power": sp.Rational(3, 2)},
       hypotheses=(H_EPS, H_B2, Hyp("alpha, M, T, phi_M, p > 0, n >= 1 (Theorem 5's constants)", lambda q: all(q[k] > 0 for k in
                                                                                               ("alpha", "M", "T", "phi_M", "p", "n")),
                                    "fed-lamb-supplement.txt lines 78, 96")))
def _s11(eps_power=sp.Rational(1, 2)):
    """fed-lamb-supplement.txt eq. (9), line 150, with Lemma 1 (line 78: bound carries 1/eps); ``eps_power``: the printed
    power of 1/eps in (9) (1/2)."""
    lemma1 = alpha**2 * M**2 * T**2 * phi_M**2 * (1 - beta2) * p / eps
    derived = n * L / sp.sqrt(eps) * lemma1
    printed = n * alpha**2 * L / eps**eps_power * M**2 * T**2 * phi_M**2 * (1 - beta2) * p
    ratio = sp.simplify(derived / printed)
    if ratio == 1:
        return verified("powers agree")
    return refuted(f"plugging Lemma 1 (which carries 1/eps) into 1/sqrt(v_hat) <= 1/sqrt(eps) gives {show(derived)}, i.e. the printed "
                   f"bound times {show(ratio)}: eps^(-3/2), not eps^(-1/2) (for eps < 1 the printed bound is too small)",
                   at={"eps": sp.Rational(1, 100), "beta2": sp.Rational(999, 1000), "alpha": sp.Rational(1, 10), "M": 1, "T": 1,
                       "phi_M": 1, "p": 1, "n": 2, "derived/printed": ratio.subs(eps, sp.Rational(1, 100))})


@check(PAPER, "S12_layer_count_bound",
       "(2/n) sum_i sum_l ||phi psi^l/||psi^l|| ||^2 <= 2 h phi_M^2 (each layer contributes a vector of norm phi <= phi_M), which is <= 2 p phi_M^2.",
       spec=("S12",), severity="constant")
def _s12():
    """fed-lamb-supplement.txt B_2 bound (lines 156-167): the layer count of ||g_bar/v^(1/4)||^2 in line 156."""
    r = np.random.default_rng(0)
    worst = 0.0
    for _ in range(200):
        hh = int(r.integers(1, 6))
        sizes = r.integers(1, 8, size=hh)
        phis = r.uniform(0.1, 2.0, size=hh)
        total = 0.0
        for size, ph in zip(sizes, phis):
            psi = r.standard_normal(size)
            total += float(np.sum((ph * psi / np.linalg.norm(psi)) ** 2))
        worst = max(worst, total / (hh * max(phis) ** 2))
        if total > sizes.sum() * max(phis) ** 2 + 1e-9:
            return refuted("exceeds p phi_M^2", "numeric")
    return verified(f"||phi psi/||psi|| ||^2 = phi^2 per layer exactly (max ratio to h phi_M^2 over 200 random cases: {fmt(worst)}); "
                    "h <= p makes 2 p phi_M^2 a valid but loose bound", "numeric")


@check(PAPER, "S13_bias_correction",
       "EMA with zero init of a constant g^2: v_t = (1-b^t) g^2, so dividing by (1-b^t) recovers g^2; with the paper's v_0 = eps init, "
       "the corrected v_1 = b eps/(1-b) + g^2.",
       spec=("S13",), severity="constant")
def _s13():
    """fed-lamb.txt Algorithm 2, lines 9-11 and init v_0 = eps 1 (spec sec. 1.2)."""
    b, g2, e = pos("b g2 e")
    v = sp.Integer(0)
    for tt in range(1, 6):
        v = b * v + (1 - b) * g2
        if not is_identity(v, (1 - b**tt) * g2):
            return refuted(f"zero-init EMA differs at t = {tt}")
    v1 = b * e + (1 - b) * g2
    return identities([("corrected v_1 with v_0 = eps", v1 / (1 - b), b * e / (1 - b) + g2)],
                      "zero-init EMA equals (1-b^t) g^2 for t = 1..5;")


# ===========================================================================
# ratio bound and Lemma 1 (S8, S9)
# ===========================================================================


def _ratio_sup(b1: float, b2: float) -> float:
    """(1-b1)/(sqrt(1-b2) sqrt(1-b1^2/b2)): Cauchy-Schwarz bound on |m/sqrt(v)| for EMAs with zero init."""
    return (1 - b1) / (math.sqrt(1 - b2) * math.sqrt(1 - b1 * b1 / b2))


@check(PAPER, "S8_ratio_bound_own_v",
       "|m^j/sqrt(v^j)| <= (1-b1)/(sqrt(1-b2) sqrt(1-b1^2/b2)) (Cauchy-Schwarz, tight) when m and v are the EMAs of the same client's "
       "gradients; hence <= 1/sqrt(1-b2) iff (1-b1)^2 <= 1 - b1^2/b2 (true at (0.9, 0.999)).",
       spec=("S8",), kind="derived", severity="constant")
def _s8():
    """fed-lamb.txt ratio bound used for A_1 ('||p|| <= sqrt(p_l/(1-beta2))', around eq. 18-22)."""
    b1, b2 = 0.9, 0.999
    bound = _ratio_sup(b1, b2)
    r = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        tlen = int(r.integers(1, 200))
        g = r.standard_normal(tlen) * r.choice([1e-3, 1, 1e3], size=tlen)
        m = v = 0.0
        for gi in g:
            m = b1 * m + (1 - b1) * gi
            v = b2 * v + (1 - b2) * gi * gi
        worst = max(worst, abs(m) / math.sqrt(v))
    # the extremal sequence g_s proportional to (b1/b2)^(t-s) attains the bound as t -> oo
    tlen = 3000
    g = np.array([(b1 / b2) ** (tlen - s) for s in range(1, tlen + 1)])
    m = v = 0.0
    for gi in g:
        m = b1 * m + (1 - b1) * gi
        v = b2 * v + (1 - b2) * gi * gi
    tight = abs(m) / math.sqrt(v)
    cond = (1 - b1) ** 2 <= 1 - b1 * b1 / b2
    if worst <= bound * (1 + 1e-12) and abs(tight - bound) / bound < 1e-6 and cond:
        return verified(f"bound = {fmt(bound)} = {fmt(bound * math.sqrt(1 - b2))}/sqrt(1-b2) at (0.9, 0.999); 300 random gradient sequences "
                        f"reach at most {fmt(worst)}; the extremal sequence reaches {fmt(tight)}; (1-b1)^2 = 0.01 <= 1 - b1^2/b2 = "
                        f"{fmt(1 - b1 * b1 / b2)}", "numeric")
    return refuted(f"worst {worst}, bound {bound}, tight {tight}", "numeric")


def server_v_ratio(n_: int, b1: float = 0.9, b2: float = 0.999, rounds: int = 3000, bias_correction: bool = False) -> float:
    """|m_1/sqrt(v_hat)| after ``rounds`` rounds of Algorithm 2 (T = 1) with n clients: client 1 receives the gradient sequence
    g_s = (b1/b2)^(rounds - s) (the extremal sequence of the own-v Cauchy-Schwarz bound), the other n - 1 clients gradient 0
    (|g| <= M holds); each client keeps the EMAs of lines 8 and 10 (with the bias corrections of lines 9 and 11 at the local
    step t = T = 1 when asked), the devices send v (line 15), and the
    server sets v_hat = max(v_hat, mean_i v_i) (line 17), v_hat_0 = 0 (eps = 0 as in Theorem 1)."""
    m = np.zeros(n_)
    v = np.zeros(n_)
    vhat = 0.0
    for s_ in range(1, rounds + 1):
        g = np.zeros(n_)
        g[0] = (b1 / b2) ** (rounds - s_)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mm, vv = (m / (1 - b1), v / (1 - b2)) if bias_correction else (m, v)  # lines 9, 11 at local step t = T = 1
        vhat = max(vhat, float(vv.mean()))
    return abs(float(mm[0])) / math.sqrt(vhat)


@check(PAPER, "S8_ratio_bound_global_v",
       "The ratio bound |m^j/sqrt(v_hat^j)| <= 1/sqrt(1-b2) (used for ||p^l|| <= sqrt(p_l/(1-b2))) still holds when v_hat is the server's "
       "average of the clients' second moments (Algorithm 2, line 17).",
       spec=("S8", "err-6"), severity="rate",
       hypotheses=(H_B1, H_B2, Hyp("beta1^2 < beta2 (the own-v ratio bound's condition)", lambda q: q["beta1"] ** 2 < q["beta2"],
                                   "fed-lamb.txt A_1 bound"),
                   Hyp("n >= 1 clients (an integer) whose gradients satisfy |g| <= M (H2; a client may have gradient 0)",
                       lambda q: int(q["n"]) == q["n"] >= 1 and q["max |g|"] <= q["M"], "fed-lamb.txt H2, Algorithm 2 line 17"),
                   Hyp("the devices' ratio uses the server's v_hat (line 17: 'send them back to the devices'; line 12 "
                       "writes v_hat_(r,i))", lambda q: q["v_hat"] == "server average", "fed-lamb.txt Algorithm 2 lines 12, 17")))
def _s8_global():
    """fed-lamb.txt Algorithm 2 line 17 (v_hat_(r+1) = max(v_hat_r, mean_i v_i)) and the ratio bound of A_1 (line 233).

    Computed by simulating the moment recursions (server_v_ratio) at fixed sizes n in {1, 19, 100}, without the bias
    corrections of lines 9 and 11 as in the proof's (12) (and, for reference, with them at n = 100 and 200)."""
    b1, b2 = 0.9, 0.999
    bound = 1 / math.sqrt(1 - b2)
    vals = {n_: server_v_ratio(n_, b1, b2) for n_ in (1, 19, 100)}
    corrected = {n_: server_v_ratio(n_, b1, b2, bias_correction=True) for n_ in (100, 200)}
    over = [n_ for n_, v in vals.items() if v > bound]
    if not over:
        return verified(f"simulated ratios {', '.join(f'{fmt(v)} (n = {k})' for k, v in vals.items())} <= 1/sqrt(1-b2) = {fmt(bound)}",
                        "numeric")
    n_ = over[0]
    return refuted("simulating Algorithm 2's moment recursions (T = 1, lines 8, 10, 17, no bias correction as in (12)) with client 1 on "
                   "the extremal sequence g_s = (b1/b2)^(R-s) and the other n-1 clients at gradient 0, R = 3000 rounds, b1 = 0.9, "
                   "b2 = 0.999: |m_1/sqrt(v_hat)| = " + ", ".join(f"{fmt(v)} (n = {k})" for k, v in vals.items())
                   + f" against the bound 1/sqrt(1-b2) = {fmt(bound)}: the server average divides v_1 by n, so the ratio grows like "
                   f"sqrt(n) (7.27 sqrt(n)); with the bias corrections of lines 9 and 11 it is "
                   + ", ".join(f"{fmt(v)} (n = {k})" for k, v in corrected.items())
                   + ". The line-233 bound ||p|| <= sqrt(p_l/(1-beta2)) holds with each client's own v_hat (S8_ratio_bound_own_v)",
                   "numeric", at={"beta1": b1, "beta2": b2, "n": n_, "M": 1, "max |g|": 1, "v_hat": "server average",
                                  "ratio": vals[n_]})


def _lamb_layer_step(theta, grad, alpha_, phi, eps_=0.0, v_hat=None, lam=0.0):
    """One Fed-LAMB local step on one layer (Algorithm 2 line 13, T = 1, bias-corrected m = g)."""
    m = grad
    v = v_hat if v_hat is not None else grad * grad
    ratio = m / np.sqrt(v + eps_)
    u = ratio + lam * theta
    return theta - alpha_ * phi * u / np.linalg.norm(u)


@check(PAPER, "S9_lemma1_consensus_bound",
       "Lemma 1 (SUPP): ||theta_bar_r - theta_(r,i)||^2 <= alpha^2 M^2 T^2 phi_M^2 (1-beta2) p/eps for every admissible run.",
       spec=("S9", "T5"), severity="constant", depends=("P1_P2_step_properties",),
       corrected={"bound": lambda al_, M_, T_, phiM, b2, p_, e, h_: 4 * al_**2 * T_**2 * phiM**2 * h_},
       hypotheses=(H_B2, H_EPS, H_PHI, H_M, H_N, Hyp("lambda = 0 (Theorem 5)", lambda q: q["lambda"] == 0,
                                                    "fed-lamb-supplement.txt line 96")))
def _s9(bound=lambda al_, M_, T_, phiM, b2, p_, e, h_: al_**2 * M_**2 * T_**2 * phiM**2 * (1 - b2) * p_ / e):
    """fed-lamb-supplement.txt Lemma 1, statement line 80, proof line 90; exact step length (P1) of Algorithm 2 line 13.
    ``bound(alpha, M, T, phi_M, beta2, p, eps, h)``: the bound tested (Lemma 1's by default)."""
    al_, phiM, Mv, b2, e = 0.1, 1.0, 1.0, 0.999, 0.01
    start = np.zeros(1)
    loc = [_lamb_layer_step(start, np.array([s * Mv]), al_, phiM) for s in (+1, -1)]  # two clients, opposite gradients
    avg = sum(loc) / 2
    dist2 = float(np.sum((avg - loc[0]) ** 2))
    paper = bound(al_, Mv, 1, phiM, b2, 1, e, 1)
    ratio = sp.simplify((alpha**2 * M**2 * T**2 * phi_M**2 * (1 - beta2) * p / eps) / (4 * alpha**2 * T**2 * phi_M**2 * h))
    if dist2 <= paper:
        return verified(f"two clients with opposite gradients, one local step of length alpha phi each: ||theta_bar - theta_i||^2 = "
                        f"{fmt(dist2)} <= bound {fmt(paper)}", "numeric")
    return refuted(f"n = 2 clients, one layer of size 1 (h = p = 1), T = 1, phi = phi_M = 1, alpha = 0.1, gradients +-M with M = 1, "
                   f"beta2 = 0.999, eps = 0.01: each local step has length alpha phi exactly, so ||theta_bar - theta_i||^2 = {fmt(dist2)} "
                   f"> Lemma 1's {fmt(paper)}. The sharp bound is 4 alpha^2 T^2 phi_M^2 h; Lemma 1 / sharp = {show(ratio)}, so the "
                   "lemma holds only when M^2 (1-beta2) p >= 4 eps h", "numeric",
                   at={"n": 2, "T": 1, "h": 1, "p": 1, "phi": (phiM,), "phi_m": 0.5, "phi_M": phiM, "alpha": al_, "M": Mv,
                       "gradients": (Mv, -Mv), "beta2": b2, "eps": e, "lambda": 0})


def _main_lemma1_distance(al_: float = 0.1, phi_: float = 1.0, n_: int = 2) -> float:
    """||theta_bar_r - theta_(r,1)|| after one local step (T = 1) of Algorithm 2 from a common start, one layer of size 1,
    clients with opposite gradients +-M (so the ratios p_i and their unit directions are opposite)."""
    start = np.zeros(1)
    loc = [_lamb_layer_step(start, np.array([(-1) ** i * 1.0]), al_, phi_) for i in range(n_)]
    avg = sum(loc) / n_
    return float(np.linalg.norm(avg - loc[0]))


_MAIN_L1_HYP = (H_B2, H_PHI, Hyp("|g| <= M (H2)", lambda q: max(abs(float(x)) for x in q["gradients"]) <= float(q["M"]),
                                 "fed-lamb.txt line 139 (H2)"),
                Hyp("v_0 > 0 (Algorithm 2 initialises v_0 = eps 1; the lemma divides by v_0), T = 1 (the proof's case), "
                    "n >= 1 clients, p >= 1", lambda q: q["v_0"] > 0 and q["T"] == 1 and q["n"] >= 1 and q["p"] >= 1,
                    "fed-lamb.txt lines 102, 179-183"))


@check(PAPER, "main_lemma1_eq3",
       "MAIN Lemma 1, eq. (3): ||theta_bar_r - theta_(r,i)|| <= alpha^2 M^2 phi_M^2 (1-beta2) p/v_0 (a norm bounded by a "
       "quantity quadratic in alpha).",
       spec=("S9",), severity="constant", corrected={"bound": lambda al_, M_, phiM, b2, p_, v0, h_: 2 * al_ * phiM * math.sqrt(h_)},
       hypotheses=_MAIN_L1_HYP)
def _main_l1_eq3(bound=lambda al_, M_, phiM, b2, p_, v0, h_: al_**2 * M_**2 * phiM**2 * (1 - b2) * p_ / v0):
    """fed-lamb.txt Lemma 1, line 179, eq. (3) at line 181.  ``bound(alpha, M, phi_M, beta2, p, v_0, h)``: the bound on the
    norm (printed alpha^2 M^2 phi_M^2 (1-beta2) p/v_0).  Each local step moves a layer by exactly alpha phi (P1), so the
    distance is linear in alpha; the valid bound is 2 alpha phi_M sqrt(h).  Instance: n = 2, one layer of size 1 (h = p = 1),
    T = 1, phi = phi_M = 1, gradients +-M with M = 1, beta2 = 0.999, v_0 = 1/100, alpha in {1/10, 1/1000}."""
    for al_ in (0.1, 0.001):
        dist = _main_lemma1_distance(al_)
        b = bound(al_, 1.0, 1.0, 0.999, 1, 0.01, 1)
        if dist > b * (1 + 1e-12):
            return refuted(f"n = 2 clients with gradients +-1 (M = 1), one layer of size 1, T = 1, phi = phi_M = 1, alpha = {al_:g}, "
                           f"beta2 = 0.999, v_0 = 1/100: each local step has length alpha phi exactly, so ||theta_bar - theta_1|| = "
                           f"{fmt(dist)} > eq. (3)'s {fmt(b)}: (3) bounds a quantity linear in alpha by one quadratic in alpha; "
                           "a valid bound is 2 alpha phi_M sqrt(h) (with Theorem 1's eps = 0, v_0 = eps = 0 makes (3) vacuous)",
                           "numeric", at={"n": 2, "T": 1, "h": 1, "p": 1, "phi": (1.0,), "phi_m": 0.5, "phi_M": 1.0, "alpha": al_,
                                          "M": 1.0, "gradients": (1.0, -1.0), "beta2": 0.999, "v_0": 0.01})
    return verified("||theta_bar - theta_i|| <= bound at alpha in {1/10, 1/1000}", "numeric")


@check(PAPER, "main_lemma1_eq5",
       "MAIN Lemma 1's proof, eq. (5): ||theta_bar_r - theta_(r,i)||^2 <= alpha^2 M^2 phi_M^2 (1-beta2) p/v_0 (T = 1).",
       spec=("S9",), severity="constant", corrected={"bound": lambda al_, M_, phiM, b2, p_, v0, h_: 4 * al_**2 * phiM**2 * h_},
       hypotheses=_MAIN_L1_HYP)
def _main_l1_eq5(bound=lambda al_, M_, phiM, b2, p_, v0, h_: al_**2 * M_**2 * phiM**2 * (1 - b2) * p_ / v0):
    """fed-lamb.txt Lemma 1's proof, eqs. (4)-(5) at lines 185-189 (squared form, as the supplement's Lemma 1 with T = 1 and
    v_0 for eps).  ``bound``: the bound on the squared distance (printed); the sharp bound is 4 alpha^2 phi_M^2 h.  Same
    instance as main_lemma1_eq3."""
    dist2 = _main_lemma1_distance(0.1) ** 2
    b = bound(0.1, 1.0, 1.0, 0.999, 1, 0.01, 1)
    if dist2 <= b * (1 + 1e-12):
        return verified(f"||theta_bar - theta_1||^2 = {fmt(dist2)} <= {fmt(b)}", "numeric")
    return refuted(f"n = 2 clients with gradients +-1 (M = 1), one layer of size 1, T = 1, phi = phi_M = 1, alpha = 0.1, beta2 = 0.999, "
                   f"v_0 = 1/100: ||theta_bar - theta_1||^2 = {fmt(dist2)} > (5)'s {fmt(b)}; (4)'s step has length alpha phi, so the "
                   "bound needs 4 alpha^2 phi_M^2 h (the factor (1-beta2)p/v_0 is not a bound on ||m/(sqrt(v)||p||)||^2 = 1)",
                   "numeric", at={"n": 2, "T": 1, "h": 1, "p": 1, "phi": (1.0,), "phi_m": 0.5, "phi_M": 1.0, "alpha": 0.1,
                                  "M": 1.0, "gradients": (1.0, -1.0), "beta2": 0.999, "v_0": 0.01})


# ===========================================================================
# Theorem 5: rate, speedup and statement vs proof (S10, T2-T4, T6)
# ===========================================================================


def _rate_expansion():
    C1 = M * sp.sqrt(p) * Delta / (h * kappa) + 4 * h * kappa * phi_M * sigma**2
    C2 = 4 * kappa**2 * (L * M**2 * T**2 * phi_M**2 * (1 - beta2) * p + M**2) / sp.sqrt(eps) + 4 * kappa**2 * phi_M**2 * sp.sqrt(M**2 + p * sigma**2)
    C3 = phi_M * sigma**2 * sp.sqrt(1 - beta2) / (M * sp.sqrt(p))
    return C1, C2, C3


@check(PAPER, "S10_rate_expansion",
       "Theorem 5 with alpha = kappa/sqrt(R) equals C1/sqrt(nR) + C2/R + C3/(nR), with C1 = M sqrt(p) Delta/(h kappa) + 4 h kappa phi_M sigma^2; "
       "linear speedup (C2/R <= C1/sqrt(nR)) once R >= n C2^2/C1^2; the best kappa gives C1* = 4 sigma sqrt(M sqrt(p) Delta phi_M), "
       "independent of h.",
       spec=("S10", "T2", "T3"), kind="derived", severity="rate", depends=("thm5_statement_matches_proof", "thm5_init_term_from_descent", "S9_lemma1_consensus_bound", "S11_epsilon_powers", "S8_ratio_bound_global_v", "supp10_cross_terms", "S1_virtual_sequence", "S2_virtual_step"))
def _s10():
    """fed-lamb-supplement.txt Theorem 5, statement display line 98; spec sec. 2.6."""
    C1, C2, C3 = _rate_expansion()
    total = sp.Add(*THM5.values()).subs(LR_SQRT_R)
    res = identities([("expansion", total, C1 / sp.sqrt(n * R) + C2 / R + C3 / (n * R))])
    if res.status != "verified":
        return res
    c1s, c2s = pos("C1s C2s")
    thr = sp.solve(sp.Eq(c2s / R, c1s / sp.sqrt(n * R)), R)
    kstar = [k for k in sp.solve(sp.diff(C1, kappa), kappa) if k.is_positive]
    c1min = sp.simplify(C1.subs(kappa, kstar[0]))
    ok = len(thr) == 1 and is_identity(thr[0], n * c2s**2 / c1s**2) and is_identity(c1min, 4 * sigma * sp.sqrt(M * sp.sqrt(p) * Delta * phi_M))
    if not ok:
        return refuted(f"threshold {thr}, kappa* {kstar}, C1* {show(c1min)}")
    return verified(res.evidence + f"; threshold R = {show(thr[0])}; kappa* = {show(kstar[0])}; C1(kappa*) = {show(c1min)} (no h)")


def _leading_exponents():
    """(C1 at the best kappa, its exponents of (p, h)): Theorem 5's 1/sqrt(nR) coefficient C1 = M sqrt(p) Delta/(h kappa) +
    4 h kappa phi_M sigma^2 minimised over kappa."""
    C1, _, _ = _rate_expansion()
    kstar = [k for k in sp.solve(sp.diff(C1, kappa), kappa) if k.is_positive][0]
    c1min = sp.simplify(C1.subs(kappa, kstar))
    d = sp.powsimp(sp.expand_power_base(c1min, force=True), force=True).as_powers_dict()
    return c1min, kstar, (sp.nsimplify(d.get(p, 0)), sp.nsimplify(d.get(h, 0)))


_H_LAYERS = Hyp("L in the claim is the number of layers (MAIN's notation, line 79; h in SUPP), p >= h >= 1",
                lambda q: q["L"] == "number of layers h", "fed-lamb.txt lines 36, 79")
_H_KAPPA = Hyp("alpha = kappa/sqrt(R) with kappa > 0 (the rate's learning rate), kappa at its best value",
               lambda q: q["kappa"] > 0, "fed-lamb-supplement.txt Theorem 5")


@check(PAPER, "S10_claimed_rate_sqrt_pL_over_nR",
       "MAIN's contribution claim: the bound is O(sqrt(p L/(n R))) with L the number of layers (MAIN line 79; h in SUPP): "
       "Theorem 5's leading 1/sqrt(nR) coefficient (at the best kappa) grows no faster than sqrt(p h) for p >= h >= 1.",
       spec=("S10",), severity="rate", depends=("S10_rate_expansion",), hypotheses=(_H_LAYERS, _H_KAPPA))
def _s10_claim(claimed=(sp.Rational(1, 2), sp.Rational(1, 2))):
    """fed-lamb.txt line 36 (contribution claim; L = number of layers by the notation of line 79, not the smoothness
    constant) vs Theorem 5 (SUPP line 96).  ``claimed``: exponents (a, b) of p^a h^b in the claimed O(.) (printed (1/2, 1/2)).
    p^x h^y <= p^a h^b for all p >= h >= 1 iff x <= a and x + y <= a + b."""
    c1min, kstar, got = _leading_exponents()
    a_, b_ = (sp.nsimplify(c) for c in claimed)
    if got[0] <= a_ and got[0] + got[1] <= a_ + b_:
        return verified(f"the leading coefficient at the best kappa, {show(c1min)}, scales as p^{got[0]} h^{got[1]} <= p^{a_} h^{b_} "
                        "for p >= h >= 1: the O(.) holds as an upper bound (not as the exact scaling, S10_spec_exact_scaling)")
    return refuted(f"the leading 1/sqrt(nR) coefficient at the best kappa is {show(c1min)}: it scales as p^{got[0]} h^{got[1]}, which "
                   f"grows faster than p^{a_} h^{b_}", at={"L": "number of layers h", "kappa": 1, "exponents (p, h)": got})


@check(PAPER, "S10_spec_exact_scaling",
       "The spec's reading of MAIN's claim: Theorem 5's leading 1/sqrt(nR) coefficient (at the best kappa) scales exactly as "
       "sqrt(p L) (L = number of layers).",
       spec=("S10", "err-23"), kind="spec", severity="rate", depends=("S10_rate_expansion",), hypotheses=(_H_LAYERS, _H_KAPPA))
def _s10_spec(claimed=(sp.Rational(1, 2), sp.Rational(1, 2))):
    """specs/fed-lamb.md sec. 2.6 ('p^(1/4) does not match sqrt(pL/(nR))') on fed-lamb.txt line 36 and Theorem 5 (SUPP line 96);
    ``claimed``: the exponents of (p, h) read as exact."""
    c1min, kstar, got = _leading_exponents()
    if got == tuple(sp.nsimplify(c) for c in claimed):
        return verified(f"the leading coefficient at the best kappa, {show(c1min)}, scales as p^{got[0]} h^{got[1]} exactly")
    return refuted(f"the leading 1/sqrt(nR) coefficient at the best kappa is {show(c1min)}: it scales as p^{got[0]} h^{got[1]}, not "
                   f"p^{claimed[0]} h^{claimed[1]} (at a fixed kappa it is M sqrt(p) Delta/(h kappa) + 4 h kappa phi_M sigma^2, "
                   "non-monotone in h); as an upper bound the paper's O(.) holds (S10_claimed_rate_sqrt_pL_over_nR)",
                   at={"L": "number of layers h", "kappa": kstar.subs({M: 1, p: 1, Delta: 1, h: 1, phi_M: 1, sigma: 1}),
                       "exponents (p, h)": got})


@check(PAPER, "S10_alpha_sqrt_n_no_speedup",
       "With alpha = kappa sqrt(n/R) the noise term 4 alpha phi_M h sigma^2/sqrt(n) = 4 kappa phi_M h sigma^2/sqrt(R) has no 1/sqrt(n): "
       "linear speedup needs alpha independent of n.",
       spec=("S10", "T3"), kind="derived", severity="rate")
def _s10_n():
    """fed-lamb-supplement.txt Theorem 5, term 4 alpha [phi_M h sigma^2/sqrt(n)]."""
    term = sp.simplify(THM5["T5_layer_noise"].subs(alpha, kappa * sp.sqrt(n / R)))
    if n not in term.free_symbols:
        return verified(f"term becomes {show(term)} (free of n)")
    return refuted(f"term {show(term)}")


@check(PAPER, "thm5_proof_form_speedup",
       "The proof's final display of Theorem 5 also exhibits linear speedup in n with alpha = kappa/sqrt(R).",
       spec=("S10", "err-4"), severity="rate",
       hypotheses=(Hyp("alpha = kappa/sqrt(R), kappa > 0, M <= 1 (the display's 'assuming M <= 1'), eps > 0, n, R >= 1",
                       lambda q: q["kappa"] > 0 and q["M"] <= 1 and q["eps"] > 0 and q["n"] >= 1 and q["R"] >= 1,
                       "fed-lamb-supplement.txt line 206"),))
def _proof_speedup():
    """fed-lamb-supplement.txt final display after 'assuming M <= 1' (lines 208-217)."""
    term = THM5_PROOF["T3_grad"].subs(LR_SQRT_R)
    ratio = sp.simplify(term / (1 / sp.sqrt(n * R)))
    if n not in ratio.free_symbols:
        return verified("no n growth")
    return refuted(f"its term 4 alpha M^2/sqrt(eps) becomes {show(term)}; divided by 1/sqrt(nR) this is {show(ratio)}, unbounded in n "
                   "(likewise 4 alpha phi_M^2 sqrt(M^2+p sigma^2) and the beta1 cross term): linear speedup holds only for the "
                   "statement's alpha^2 form", at=(pt := {"kappa": 1, "M": 1, "eps": 1, "n": 100, "R": 10**4}) and
                   pt | {"term*sqrt(nR)": ratio.subs({kappa: 1, M: 1, eps: 1, n: 100, R: 10**4})})


@check(PAPER, "thm5_statement_matches_proof",
       "Theorem 5's statement is the proof's final display with terms organised (same powers of alpha, same terms).",
       spec=("err-4", "err-5", "S10"), severity="proof", corrected={"statement": THM5_PROOF},
       hypotheses=(Hyp("alpha > 0 (constant), M <= 1 (the display's assumption), T >= 1, sigma >= 0, 0 <= beta1 < 1",
                       lambda q: q["alpha"] > 0 and q["M"] <= 1 and q["T"] >= 1 and q["sigma"] >= 0 and 0 <= q["beta1"] < 1,
                       "fed-lamb-supplement.txt lines 96-100, 206"),))
def _statement_vs_proof(statement=THM5):
    """fed-lamb-supplement.txt Theorem 5 statement (line 98) vs the proof's last display (lines 208-217);
    ``statement``: the statement's terms (default: as printed)."""
    diffs = [f"{k}: statement/proof = {show(r)}" for k in THM5_PROOF if k in statement
             for r in [sp.simplify(statement[k] / THM5_PROOF[k])] if r != 1]
    missing = [k for k in THM5_PROOF if k not in statement]
    if not diffs and not missing:
        return verified("every term of the proof's final display appears in the statement with the same expression")
    return refuted("; ".join(diffs) + f"; proof terms absent from the statement: {', '.join(missing)} (the consensus term has T in "
                   "the denominator); phi_m appears in neither although the proof's descent coefficient is alpha phi_m^2 (1-beta2)/4",
                   at={"alpha": sp.Rational(1, 10), "M": 1, "T": 1, "sigma": 1, "beta1": sp.Rational(9, 10),
                       "differing terms": len(diffs) + len(missing)})


@check(PAPER, "thm5_init_term_from_descent",
       "Theorem 5's leading term sqrt(M^2 p/n) Delta/(h alpha R) is what dividing the telescoped descent inequality by the "
       "proof's descent coefficient alpha phi_m^2 (1-beta2)/4 (the A_1 bound) gives for the initial gap.",
       spec=("S10", "err-5"), severity="rate",
       corrected={"prefactor": 4 / (phi_m**2 * (1 - beta2))},
       hypotheses=(H_B2, Hyp("0 < phi_m (H4), M <= 1, n >= 1, h >= 1, p >= h", lambda q: q["phi_m"] > 0 and q["M"] <= 1 and q["n"] >= 1
                             and q["h"] >= 1 and q["p"] >= q["h"], "fed-lamb.txt H4, fed-lamb-supplement.txt lines 96, 206"),))
def _thm5_init(prefactor=sp.sqrt(M**2 * p / n) / h):
    """fed-lamb-supplement.txt A_1 bound (lines 198-204: -alpha phi_m^2 (1-beta2)/4 ||grad f/v^(1/4)||^2) and the telescoped
    final display (lines 208-217), whose first term is sqrt(M^2 p/n) Delta/(h alpha R); ``prefactor`` is the printed one."""
    coeff = alpha * phi_m**2 * (1 - beta2) / 4
    derived = Delta / (coeff * R)  # (f(theta_1) - min f) / (R * descent coefficient)
    ratio = sp.simplify(derived / (prefactor * Delta / (alpha * R)))
    if not ratio.free_symbols:
        return verified(f"Delta/(R * alpha phi_m^2 (1-beta2)/4) = {show(derived)} equals the stated term times {show(ratio)}")
    under = sp.simplify(derived.subs(LR_SQRT_R) * sp.sqrt(R))
    return refuted(f"dividing by the descent coefficient alpha phi_m^2 (1-beta2)/4 gives {show(derived)}; its ratio to the stated "
                   f"sqrt(M^2 p/n) Delta/(h alpha R) is {show(ratio)}, growing like sqrt(n): with alpha = kappa/sqrt(R) the derived "
                   f"leading term is {show(under)}/sqrt(R), with no 1/sqrt(n), so the proof shows no linear speedup in n for this "
                   "term (and phi_m, which the statement drops, enters as 1/phi_m^2)",
                   at=(pt := {beta2: sp.Rational(999, 1000), phi_m: sp.Rational(1, 2), M: 1, n: 100, p: 1, h: 1}) and
                   {str(k): v for k, v in pt.items()} | {"derived/stated": ratio.subs(pt)})


@check(PAPER, "B2_sign_probability_step",
       "SUPP B_2 bound: -E[phi (grad_l f)^j (g^j/||psi||) 1(sign(grad_l f)^j != sign g^j)] <= phi_M (grad_l f)^j "
       "P[sign(grad_l f)^j != sign g^j] for every coordinate (beta1 = 0, so psi = g/sqrt(v_hat)).",
       spec=("S12",), severity="typo", corrected={"right": lambda gf: abs(gf)},
       hypotheses=(H_M, H_PHI, Hyp("zero-mean noise (E g = grad f, H2), 0 < v_hat <= M^2", lambda q: q["noise mean"] == 0
                                   and 0 < q["v_hat"] <= q["M"] ** 2, "fed-lamb.txt H2, Algorithm 2")))
def _b2_sign(right=lambda gf: gf):
    """fed-lamb-supplement.txt B_2 bound, lines 160-163 (sign-probability step).  One coordinate per layer (p_l = 1), beta1 = 0
    so psi = g/sqrt(v_hat) and g/||psi|| = sqrt(v_hat) sign(g); gradients bounded by M <= 1 (the proof's 'assuming M <= 1'),
    v_hat in [eps, M^2].  ``right(grad_l f^j)``: the factor of the right side (printed: the signed (grad_l f)^j).
    Exact search over grad f in {+-1/4, +-1/2}, zero-mean two-point noise +-s, s in {1/2, 3/4}, v_hat in {1/100, M^2},
    phi in {phi_m, phi_M} = {1/2, 1}."""
    phi_M_ = Fraction(1)
    for gf in (Fraction(1, 4), Fraction(-1, 4), Fraction(1, 2), Fraction(-1, 2)):
        for s in (Fraction(1, 2), Fraction(3, 4)):
            outcomes = [gf + s, gf - s]  # equiprobable
            M_ = max(abs(o) for o in outcomes)
            if M_ > 1:
                continue
            for vhat in (Fraction(1, 100), M_ * M_):
                root = math.sqrt(vhat)
                for ph in (Fraction(1, 2), phi_M_):
                    lhs = -sum(float(ph * gf) * root * (1 if o > 0 else -1) for o in outcomes
                               if o != 0 and (o > 0) != (gf > 0)) / 2
                    prob = Fraction(sum(1 for o in outcomes if o != 0 and (o > 0) != (gf > 0)), 2)
                    rhs = float(phi_M_ * right(gf) * prob)
                    if lhs > rhs + 1e-15:
                        return refuted(f"grad f = {gf}, noise +-{s} (M = {M_} <= 1), v_hat = {vhat}, phi = {ph}: the left side "
                                       f"is {fmt(lhs)} >= 0 (on the sign-mismatch event grad f * g <= 0) but the right side "
                                       f"phi_M (grad f) P = {fmt(rhs)} < 0; with |grad f| (and sqrt(v_hat) <= M <= 1) it holds. "
                                       "The next display uses a positive sigma^2 term, so only the printed sign is wrong", "exact",
                                       at={"grad f": gf, "gradients": tuple(outcomes), "noise mean": 0, "M": M_, "v_hat": vhat,
                                           "phi": (ph,), "phi_m": Fraction(1, 2), "phi_M": phi_M_})
    return verified("left side <= phi_M |grad f| P[sign mismatch] at every case (|g|/||psi|| = sqrt(v_hat) <= M <= 1)", "exact")


@check(PAPER, "supp10_cross_terms",
       "SUPP (10): E||g_bar_r/v_hat^(1/4)||^2 = (1/n^2) E sum_i ||g_bar_(r,i)/v_hat^(1/4)||^2 >= phi_m^2 (1-beta2) "
       "E||(1/n) sum_i grad f(theta_(r,i))/v_hat^(1/4)||^2 (g_bar_(r,i) = phi g/||psi||, beta1 = 0).",
       spec=("S12", "err-12"), severity="rate", corrected={"cases": (((1, Fraction(1, 2)), 1),)},
       hypotheses=(H_M, H_PHI, H_B2, Hyp("beta1 = 0 (the claim's case), v_hat > 0, clients' f_i may differ (federated)",
                                         lambda q: q["beta1"] == 0 and q["v_hat"] > 0, "fed-lamb-supplement.txt lines 180-186")))
def _supp10(cases=(((1, Fraction(-1, 2)), 1), ((1, -1), 1), ((Fraction(1, 4), Fraction(-1, 8), 1), 1))):
    """fed-lamb-supplement.txt eq. (10), lines 182-186; noise-free clients (g = grad f_i), one coordinate, v_hat fixed,
    phi = phi_m = phi_M = 1, beta2 = 999/1000; ``cases``: (client gradients, v_hat) tested."""
    b2 = Fraction(999, 1000)
    for grads, vhat in cases:
        nn = len(grads)
        root = math.sqrt(vhat)
        gbar = [root * (1 if g_ > 0 else -1) for g_ in grads]  # phi g/||psi|| with psi = g/sqrt(v_hat)
        lhs = (sum(gbar) / nn) ** 2 / root
        first = sum(x * x for x in gbar) / nn**2 / root
        rhs = float((1 - b2) * (Fraction(sum(grads)) / nn) ** 2) / root
        if lhs < rhs - 1e-15:
            return refuted(f"clients with gradients {', '.join(str(g_) for g_ in grads)} (heterogeneous signs), v_hat = {vhat}: "
                           f"||g_bar_r||^2/sqrt(v_hat) = {fmt(lhs)} while the first '=' gives {fmt(first)} (cross terms dropped) "
                           f"and the claimed lower bound is phi_m^2 (1-beta2) ||mean grad||^2/sqrt(v_hat) = {fmt(rhs)} > {fmt(lhs)}: "
                           "the normalised updates cancel while the mean gradient does not, so the descent term of A_1 "
                           "can vanish", "exact",
                           at={"gradients": grads, "M": max(abs(g_) for g_ in grads), "v_hat": vhat, "beta1": 0, "beta2": b2,
                               "phi": (1,), "phi_m": 1, "phi_M": 1})
    return verified(f"(10) holds at the {len(cases)} tested configurations", "exact")


@check(PAPER, "T6_dependence_on_constants",
       "Spec claim T6: Theorem 5's bound is independent of phi_m and increases in phi_M, p and 1/eps; its h-dependence is non-monotone "
       "(T1 ~ 1/h, T5 ~ h).",
       spec=("T6",), kind="spec", severity="constant",
       hypotheses=(Hyp("every constant positive, 0 < beta2 < 1, M <= 1 (the proof's assumption)", lambda q: all(
           float(v) > 0 for k, v in q.items() if k != "beta2") and 0 < q["beta2"] < 1 and q["M"] <= 1,
           "fed-lamb-supplement.txt Theorem 5, line 206"),))
def _t6():
    """fed-lamb-supplement.txt Theorem 5 (line 98); spec sec. 4 T6."""
    w = sp.Symbol("w", positive=True)  # w = 1 - beta2 > 0
    b = sp.Add(*THM5.values()).subs(beta2, 1 - w)
    if phi_m in b.free_symbols:
        return refuted("bound depends on phi_m")
    dphi = sp.expand(sp.diff(b, phi_M))
    deps = sp.diff(b, eps)
    if not all(sp.sign(term.as_coeff_Mul()[0]) > 0 for term in sp.Add.make_args(dphi)):
        return refuted(f"d/dphi_M has a negative term: {show(dphi)}")
    if not all(sp.sign(term.as_coeff_Mul()[0]) < 0 for term in sp.Add.make_args(sp.expand(deps))):
        return refuted("d/deps has a positive term")
    vals = {M: sp.Rational(1, 100), Delta: 1, n: 1, h: 1, R: 1, alpha: sp.Rational(1, 100), L: 1, T: 1, phi_M: 1,
            w: sp.Rational(1, 1000), eps: 1, sigma: 1, p: 1}
    dp = sp.diff(b, p).subs(vals)
    if dp < 0:
        return refuted(f"independent of phi_m, increasing in phi_M and in 1/eps, non-monotone in h (hold); but the T4 term "
                       f"phi_M sigma^2 sqrt((1-beta2)/(M^2 p))/(Rn) decreases in p: at M = 1/100, p = 1, alpha = 1/100, other "
                       f"constants 1, beta2 = 0.999, d bound/dp = {fmt(float(dp))} < 0", "exact",
                       at={str(k): v for k, v in vals.items() if k != w} | {"beta2": 1 - vals[w]})
    return verified("all monotonicity claims hold at the tested point")


@check(PAPER, "main_bound_42_no_decay",
       "MAIN's final bound (42) (T = 1) decays to 0 as R -> infinity (sublinear convergence in R).",
       spec=("err-3", "err-2"), severity="rate",
       hypotheses=(Hyp("T = 1 and eps = lambda = 0 (Theorem 1's setting)", lambda q: q["T"] == 1 and q["eps"] == 0
                       and q["lambda"] == 0, "fed-lamb.txt line 147"),
                   Hyp("alpha > 0 constant (the proof assumes a constant learning rate), v_0 > 0, n >= 1",
                       lambda q: q["alpha"] > 0 and q["v_0"] > 0 and q["n"] >= 1, "fed-lamb.txt lines 102, 219")))
def _main42():
    """fed-lamb.txt eq. (42), line 344 (Theorem 1's right-hand side is the placeholder 'dd', line 147)."""
    gap, sig, Lc, Lbar, v0, noise = pos("gap sig Lc Lbar v0 noise")  # noise: (1/n)||sum_i sigma_i^2 E[phi/(sqrt(v)||p||)]||^2
    b = (gap + noise + alpha * phi_M * sig * Lc * p * sp.sqrt(n)
         + Lbar * beta1**2 * Lc * (1 - beta2) * M**2 * phi_M**2 * n / (2 * (1 - beta1) ** 2 * v0)
         + alpha * beta1 / (1 - beta1) * sp.sqrt((1 - beta2) * p) * Lc * M**2 / sp.sqrt(v0)
         + Lbar * alpha**2 * M**2 * phi_M**2 * (1 - beta2) * p / (R * v0))
    last = Lbar * alpha**2 * M**2 * phi_M**2 * (1 - beta2) * p / (R * v0)
    rest = sp.expand(b - last)
    if R not in rest.free_symbols and sp.limit(last, R, sp.oo) == 0:
        return refuted("as R -> oo the bound tends to itself minus its last term (> 0): the initial gap is not divided by alpha R and "
                       "the noise term (1/n)||sum sigma_i^2 E[...]||^2, alpha phi_M sigma L p sqrt(n) and constant beta1 terms remain; only the last term decays like 1/R (and "
                       "Theorem 1's right-hand side is the placeholder 'dd')",
                       at={"T": 1, "eps": 0, "lambda": 0, "alpha": sp.Rational(1, 10), "v_0": 1, "n": 1,
                           "limit": rest.subs({gap: 1, noise: 0, sig: 0, Lc: 1, Lbar: 1, v0: 1, alpha: sp.Rational(1, 10), beta1: 0,
                                               phi_M: 1, beta2: sp.Rational(1, 2), M: 1, p: 1, n: 1})})
    return verified("the R-independent part vanishes")


@check(PAPER, "P1_P2_step_properties",
       "Fed-LAMB's local step (Algorithm 2 line 13) moves each layer by exactly alpha phi(||theta^l||) (any lambda), and with lambda = 0 "
       "the direction is invariant to the bias correction of m (a positive rescaling).",
       spec=("T5",), kind="derived", severity="constant")
def _p1p2():
    """fed-lamb.txt Algorithm 2, line 13 (spec sec. 1.2, properties P1 and P2); the T local steps of SUPP Lemma 1's line 86 are such steps."""
    r = np.random.default_rng(0)
    worst_len = worst_dir = 0.0
    for _ in range(200):
        size = int(r.integers(1, 20))
        theta = r.standard_normal(size)
        g = r.standard_normal(size)
        vh = r.uniform(1e-4, 2, size)
        al_, ph, lam = r.uniform(0.01, 1), r.uniform(0.1, 3), float(r.choice([0.0, 0.01, 0.1]))
        new = _lamb_layer_step(theta, g, al_, ph, 1e-8, vh, lam)
        worst_len = max(worst_len, abs(np.linalg.norm(new - theta) - al_ * ph) / (al_ * ph))
        a = _lamb_layer_step(theta, g, al_, ph, 1e-8, vh, 0.0)
        b = _lamb_layer_step(theta, g / (1 - 0.9 ** int(r.integers(1, 10))), al_, ph, 1e-8, vh, 0.0)
        worst_dir = max(worst_dir, float(np.max(np.abs(a - b))))
    if worst_len < 1e-12 and worst_dir < 1e-12:
        return verified(f"200 random layers: max relative step-length error {worst_len:.1e}, max change from bias-correcting m "
                        f"{worst_dir:.1e}; hence per-round drift <= alpha T phi_M per layer", "numeric")
    return refuted(f"length error {worst_len}, direction change {worst_dir}", "numeric")


@check(PAPER, "T4_local_steps_hurt",
       "Theorem 5's bound increases with the number of local steps T (only the T^2 term depends on T), so more local steps never "
       "improve the worst-case bound at fixed alpha and R.",
       spec=("T4",), kind="derived", severity="constant")
def _t4():
    """fed-lamb-supplement.txt Theorem 5 (line 98): term 4 alpha^2 L M^2 T^2 phi_M^2 (1-beta2) p/sqrt(eps)."""
    w = sp.Symbol("w", positive=True)
    dT = sp.expand(sp.diff(sp.Add(*THM5.values()).subs(beta2, 1 - w), T))
    if all(term.as_coeff_Mul()[0] > 0 for term in sp.Add.make_args(dT)):
        return verified(f"d bound/dT = {show(dT)} > 0 (with w = 1 - beta2)")
    return refuted(f"d bound/dT = {show(dT)}")


@check(PAPER, "phi_M_factored_out_of_difference",
       "MAIN (32): phi(||theta_r||)/a_r - phi(||theta_(r-1)||)/a_(r-1) can be bounded by phi_M (1/a_r - 1/a_(r-1)) "
       "(phi_M factored out of a difference).",
       spec=("err-7",), severity="rate", corrected={"extra": lambda phi_r, phi_prev, a_prev: abs(phi_r - phi_prev) / a_prev},
       hypotheses=(H_PHI, Hyp("a_r, a_(r-1) > 0 (sqrt(v_hat) terms)", lambda q: q["a_r"] > 0 and q["a_(r-1)"] > 0,
                              "fed-lamb.txt eq. (32)")))
def _phi_difference(extra=lambda phi_r, phi_prev, a_prev: 0):
    """fed-lamb.txt eq. (32), lines 291-297.  ``extra(phi_r, phi_(r-1), a_(r-1))`` is added to the bound (printed 0; the
    correction adds the missing |phi_r - phi_(r-1)|/a_(r-1):
    |phi_r/a_r - phi_(r-1)/a_(r-1)| <= phi_M |1/a_r - 1/a_(r-1)| + |phi_r - phi_(r-1)|/a_(r-1), which does not telescope)."""
    phiM_, phi_r, phi_prev, a_r, a_prev = (Fraction(1), Fraction(1, 10), Fraction(1), Fraction(1), Fraction(1))  # v_hat unchanged
    lhs = phi_r / a_r - phi_prev / a_prev
    rhs = abs(phiM_ * (Fraction(1, a_r) - Fraction(1, a_prev))) + extra(phi_r, phi_prev, a_prev)
    if abs(lhs) <= rhs:
        return verified(f"|phi_r/a_r - phi_(r-1)/a_(r-1)| = {abs(lhs)} <= {rhs} at phi_r = 1/10, phi_(r-1) = 1, a_r = a_(r-1) = 1",
                        "exact")
    return refuted(f"phi_M = 1, phi_r = 1/10, phi_(r-1) = 1 (both in [phi_m, phi_M]) and a_r = a_(r-1) = 1 (sqrt(v_hat) unchanged): "
                   f"|phi_r/a_r - phi_(r-1)/a_(r-1)| = {abs(lhs)} > phi_M |1/a_r - 1/a_(r-1)| = {abs(rhs)}; a difference of two "
                   "terms cannot be bounded by factoring out the majorant, so the telescoping of (32) does not follow", "exact",
                   at={"phi": (phi_r, phi_prev), "phi_m": Fraction(1, 10), "phi_M": phiM_, "a_r": a_r, "a_(r-1)": a_prev})


def eq39_instances(seed: int = 0, count: int = 200):
    """Seeded instances of (39)'s two sides: n in {2, 3} clients, one layer of size p_l in {1, 2, 3}, client gradients
    grad f_i in [-1, 1]^(p_l) (so |g| <= M = 1, heterogeneous), phi_i in [phi_m, phi_M] = [1/2, 1], ratio p_i = m_i/sqrt(v_hat)
    with m_i = grad f_i (beta1 = 0, T = 1) and the server's v_hat = mean_i grad f_i^2 + eps (line 17, eps = 1e-3); weights
    w_i = phi_i/(sqrt(v_hat) ||p_i||) per coordinate.  Yields (weights, grads, v_hat) as numpy arrays."""
    r = np.random.default_rng(seed)
    for _ in range(count):
        n_, pl = int(r.integers(2, 4)), int(r.integers(1, 4))
        grads = r.uniform(-1, 1, size=(n_, pl))
        phis = r.uniform(0.5, 1.0, size=n_)
        vhat = (grads**2).mean(0) + 1e-3
        pn = np.linalg.norm(grads / np.sqrt(vhat), axis=1)
        w = phis[:, None] / (np.sqrt(vhat)[None, :] * pn[:, None])
        yield w, grads, vhat


@check(PAPER, "eq39_vector_inequality",
       "MAIN (39): (1/n) sum_i phi(||theta_i||)/(sqrt(v) ||p_i||) grad f_i(theta_r) <= phi_M (1-beta2) grad f(theta_r)/sqrt(v) "
       "(as vectors, coordinate-wise).",
       spec=("err-12",), severity="rate",
       corrected={"right": lambda wmax, gmean, gabs, phiM, b2, v: wmax * gabs},
       hypotheses=(H_M, H_B2, Hyp("weights w_i = phi_i/(sqrt(v_hat) ||p_i||) with phi_i in [phi_m, phi_M] (H4), p_i = m_i/sqrt(v_hat), "
                                  "v_hat > 0; clients' f_i may differ", lambda q: min(q["weights"]) > 0 and q["v_hat"] > 0
                                  and 0 < q["phi_m"] <= q["phi_M"], "fed-lamb.txt H4, Algorithm 2 lines 12-17, eq. (39)")))
def _eq39(right=lambda wmax, gmean, gabs, phiM, b2, v: phiM * (1 - b2) * gmean / math.sqrt(v)):
    """fed-lamb.txt eq. (39), line 332.  ``right(max_i w_i, mean_i grad f_i, mean_i |grad f_i|, phi_M, beta2, v_hat)``: the
    right-hand side per coordinate (printed phi_M (1-beta2) grad f/sqrt(v)); a valid bound is max_i w_i mean_i |grad f_i|.
    Search over eq39_instances (200 seeded instances, beta2 = 0.999, phi_M = 1)."""
    b2, phiM = 0.999, 1.0
    for w, grads, vhat in eq39_instances():
        lhs = (w * grads).mean(0)
        for j in range(grads.shape[1]):
            rhs = right(float(w[:, j].max()), float(grads[:, j].mean()), float(np.abs(grads[:, j]).mean()), phiM, b2, float(vhat[j]))
            if lhs[j] > rhs + 1e-12:
                return refuted(f"n = {grads.shape[0]} clients, coordinate {j}: gradients ({', '.join(fmt(float(g)) for g in grads[:, j])}) "
                               f"(|g| <= 1, heterogeneous), weights phi/(sqrt(v)||p_i||) = ({', '.join(fmt(float(x)) for x in w[:, j])}), "
                               f"v_hat = {fmt(float(vhat[j]))}: left side {fmt(float(lhs[j]))} > right side {fmt(rhs)}; the weighted "
                               "average of heterogeneous gradients is not controlled by phi_M (1-beta2) times the plain gradient "
                               "(a valid coordinate bound is max_i w_i mean_i |grad f_i|)", "numeric",
                               at={"gradients": tuple(float(g) for g in grads[:, j]), "M": 1, "beta2": b2, "weights":
                                   tuple(float(x) for x in w[:, j]), "v_hat": float(vhat[j]), "phi_m": 0.5, "phi_M": phiM})
    return verified("the right side bounds the left at every coordinate of the 200 seeded instances", "numeric")
from . import fed_lamb_steps as _steps  # noqa: E402,F401  (the proof-step map and its checks, registered after this module)

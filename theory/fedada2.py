"""FedAda2 (Lee, Sharma, Zaheer, Li): heavy-tail propositions, Theorem 20 / Theorem 6 and its corollaries.

Source: /work/shared/papers/fedada2.txt (line numbers below) and the extract
/work/shared/specs/fedada2.md (section 3.14, items 1-16; the [CHECK] lists of
sections 2.7 and 3.9; the theory items 14-30 of section 6).

Heavy-tail facts use closed forms plus limits (no slow symbolic integrals);
where a claim is a number (expectations with a log singularity) it is
evaluated with scipy quadrature and the evidence says "numeric".
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from scipy import integrate

from .algebra import finite_sum, fmt, identities, is_identity, pos, show, simplify_zero
from .core import H as Hyp
from .core import check, refuted, verified

PAPER = "fedada2"

t, x, nu, al, gam, a_ = sp.symbols("t x nu alpha gamma a", positive=True)

# ---------------------------------------------------------------------------
# distributions (Sec. 3, App. A; line 310 and line 473)
# ---------------------------------------------------------------------------
#: Student-t density f_nu(t) (line 310)
f_nu = sp.gamma((nu + 1) / 2) / (sp.sqrt(sp.pi * nu) * sp.gamma(nu / 2)) * (1 + t**2 / nu) ** (-(nu + 1) / 2)
#: t_2 density simplifies to (2 + t^2)^(-3/2)
f_2 = (2 + t**2) ** sp.Rational(-3, 2)
#: Cauchy CL(0, gamma) density (line 473)
f_cauchy = gam / (sp.pi * (x**2 + gam**2))
#: closed-form absolute moment E|t_nu|^alpha (finite iff alpha < nu)
abs_moment = nu ** (al / 2) * sp.gamma((al + 1) / 2) * sp.gamma((nu - al) / 2) / (sp.sqrt(sp.pi) * sp.gamma(nu / 2))


def _pdf_t(v: float):
    c = math.exp(math.lgamma((v + 1) / 2) - math.lgamma(v / 2)) / math.sqrt(math.pi * v)
    return lambda s: c * (1 + s * s / v) ** (-(v + 1) / 2)


def _pdf_cauchy(g: float):
    return lambda s: g / (math.pi * (s * s + g * g))


def _expect(fn, pdf, x0: float, eps: float) -> float:
    """E[fn(xi)/(|x0+xi|+eps)] for a symmetric density; the integrand peaks at xi = -x0 (split there)."""
    def g(s):
        return fn(s) / (abs(x0 + s) + eps) * pdf(s)
    c = -x0
    pts = [c - 1, c - 10 * eps, c, c + 10 * eps, c + 1]
    pts = sorted(set(pts + [-1.0, 0.0, 1.0]))
    total = integrate.quad(g, -np.inf, pts[0], limit=200)[0] + integrate.quad(g, pts[-1], np.inf, limit=200)[0]
    for lo, hi in zip(pts[:-1], pts[1:]):
        total += integrate.quad(g, lo, hi, limit=200, epsabs=1e-12)[0]
    return total


#: iterates x_t at which the premise and B are evaluated (by symmetry x_t >= 0 suffices)
X_GRID = tuple(k / 10 for k in range(0, 31))


def admissible_eps(pdf, xs=X_GRID, lo: float = 1e-4) -> float:
    """Smallest eps with the premise of Prop. 9 (ii) (line 401): I(eps) = E[1/(|x_t + xi| + eps)] < 1 at every x_t in ``xs``.

    I decreases in eps, so the premise holds exactly on (eps_*, 1]; eps_* is found by bisection (to 1e-6)."""
    def sup_i(eps: float) -> float:
        return max(_expect(lambda s: 1.0, pdf, x0, eps) for x0 in xs)
    a, b = lo, 1.0
    if sup_i(b) >= 1:
        return math.inf
    for _ in range(20):
        mid = (a + b) / 2
        a, b = (mid, b) if sup_i(mid) >= 1 else (a, mid)
    return b


def sup_B(pdf, eps: float, xs=X_GRID) -> tuple[float, float]:
    """(argmax, max) over x_t in ``xs`` of E[|xi|/(|x_t + xi| + eps)] (the quantity B bounds in eq. (5))."""
    vals = [(x0, _expect(lambda s: abs(s), pdf, x0, eps)) for x0 in xs]
    return max(vals, key=lambda kv: kv[1])


# ===========================================================================
# Student-t and Cauchy moments (items 1-5; sec. 2.7)
# ===========================================================================


# ---------------------------------------------------------------------------
# hypotheses of the statements, evaluated at a refutation's counterexample (core.judge)
# ---------------------------------------------------------------------------
def _v(p, name):
    return sp.nsimplify(p[name])


H_NU = Hyp("client i has t_(i+1) noise: nu = i + 1 >= 2 an integer", lambda p: int(p["nu"]) == p["nu"] >= 2,
           "fedada2.txt Prop. 9, lines 380-395")
H_PREMISE = Hyp("eps in the proof's range [max_i eps_i, 1], where I(eps) = E[1/(|x_t + xi| + eps)] < 1 at every x_t",
                lambda p: p["eps_star"] < p["eps"] <= 1, "fedada2.txt line 401")
H_EPS = Hyp("eps > 0", lambda p: p["eps"] > 0, "fedada2.txt Algorithm 2 / 7 (AdaGrad / Adam epsilon)")
H_G = Hyp("|g| <= G for every gradient (Assumption 2, bounded gradients)", lambda p: max(abs(float(g)) for g in p["gradients"])
          <= float(p["G"]), "fedada2.txt Assumption 2")
H_Z = Hyp("z >= 1 and K >= 1 integers (delay step, local steps)", lambda p: int(p["z"]) == p["z"] >= 1
          and int(p["K"]) == p["K"] >= 1, "fedada2.txt Algorithm 2 / 8")


@check(PAPER, "student_t_normalisation_and_variance",
       "f_nu integrates to 1, E[t_nu^2] = nu/(nu-2) for nu > 2 (3, 2, 5/3, 3/2 at nu = 3..6), and "
       "E|t_nu|^alpha = nu^(alpha/2) Gamma((alpha+1)/2) Gamma((nu-alpha)/2)/(sqrt(pi) Gamma(nu/2)) for alpha < nu.",
       spec=("1",), kind="textbook", severity="constant")
def _t_moments():
    """fedada2.txt line 310 (density) and Prop. 9 construction (line 316ff)."""
    # normalisation: int (1+t^2/nu)^(-(nu+1)/2) dt = sqrt(nu) B(1/2, nu/2)
    norm = sp.gammasimp(f_nu.subs(t, 0) * sp.sqrt(nu) * sp.gamma(sp.Rational(1, 2)) * sp.gamma(nu / 2) / sp.gamma((nu + 1) / 2))
    var = sp.gammasimp(abs_moment.subs(al, 2))
    vals = [sp.nsimplify(var.subs(nu, v)) for v in (3, 4, 5, 6)]
    if norm != 1 or not is_identity(var, nu / (nu - 2)) or vals != [3, 2, sp.Rational(5, 3), sp.Rational(3, 2)]:
        return refuted(f"normalisation {show(norm)}, variance {show(var)}, values {vals}")
    # numeric cross-check of the closed-form moment formula
    worst = 0.0
    for v, a in ((3, 2), (5, 1.5), (2.5, 1), (4, 3.5)):
        pdf = _pdf_t(v)
        num = 2 * integrate.quad(lambda s: s**a * pdf(s), 0, np.inf, limit=200)[0]
        cf = float(abs_moment.subs({nu: v, al: a}))
        worst = max(worst, abs(num - cf) / cf)
    return verified(f"normalising constant times sqrt(nu) B(1/2, nu/2) gamma-simplifies to 1; the alpha = 2 moment "
                    f"simplifies to nu/(nu-2) = 3, 2, 5/3, 3/2 at nu = 3..6; quadrature agrees with the closed form to "
                    f"{worst:.1e} (relative) at 4 (nu, alpha) pairs")


@check(PAPER, "student_t2_infinite_variance",
       "For t_2: E[T^2 1{|T| <= a}] = 2 asinh(a/sqrt 2) - 2a/sqrt(a^2+2) -> infinity (E[t_2^2] = infinity, log growth), "
       "P(|T| > a) = 1 - a/sqrt(a^2+2), and E|t_2| = sqrt(2).",
       spec=("1", "3"), kind="textbook", severity="rate")
def _t2():
    """fedada2.txt Prop. 9 (line 316): client 1 has t_2 noise, the only heavy-tailed client."""
    dens_ok = is_identity(f_nu.subs(nu, 2), f_2)
    A = sp.Symbol("A", positive=True)
    M = 2 * sp.asinh(A / sp.sqrt(2)) - 2 * A / sp.sqrt(A**2 + 2)
    P = 1 - A / sp.sqrt(A**2 + 2)
    E1 = 2 * (1 / sp.sqrt(2) - 1 / sp.sqrt(A**2 + 2))
    ok = (dens_ok
          and simplify_zero(sp.diff(M, A) - 2 * A**2 * f_2.subs(t, A)) == 0 and M.subs(A, 0) == 0
          and simplify_zero(sp.diff(P, A) + 2 * f_2.subs(t, A)) == 0 and P.subs(A, 0) == 1
          and simplify_zero(sp.diff(E1, A) - 2 * A * f_2.subs(t, A)) == 0 and E1.subs(A, 0) == 0)
    lim_M, lim_P, lim_E = sp.limit(M, A, sp.oo), sp.limit(P, A, sp.oo), sp.limit(E1, A, sp.oo)
    if ok and lim_M == sp.oo and lim_P == 0 and is_identity(lim_E, sp.sqrt(2)):
        return verified("f_2 = (2+t^2)^(-3/2); each closed form has the right derivative and value at a = 0; limits a -> oo: "
                        f"truncated second moment -> {lim_M}, tail -> {lim_P}, E|T| -> {show(lim_E)}")
    return refuted(f"closed forms fail: density {dens_ok}, limits {lim_M}, {lim_P}, {lim_E}")


@check(PAPER, "student_t_moment_finiteness",
       "E|t_nu|^alpha < infinity iff alpha < nu (tail |t|^alpha f_nu(t) ~ c |t|^(alpha-nu-1)); so t_2 is heavy-tailed in the "
       "sense of Def. 1 (finite for alpha < 2, infinite for alpha >= 2) while t_3, t_4, ... have finite variance.",
       spec=("1", "2.2"), kind="textbook", severity="rate")
def _t_finiteness():
    """fedada2.txt Def. 1 (line 42) and Prop. 9 (clients i >= 2 have t_(i+1) noise)."""
    tail = sp.limit(f_nu.subs(nu, 5) * t**6, t, sp.oo)
    tail_general = sp.simplify(sp.limit((1 + t**2 / nu) ** (-(nu + 1) / 2) * t ** (nu + 1), t, sp.oo))
    if not (tail.is_positive and tail_general.is_positive):
        return refuted(f"tail constant {show(tail)}, {show(tail_general)}")
    return verified(f"|t|^(nu+1) f_nu(t) -> {show(tail_general)} * (normalising constant) > 0 as |t| -> oo (e.g. "
                    f"{show(tail)} at nu = 5), so the alpha-moment converges iff int_1^oo t^(alpha-nu-1) dt < oo iff alpha < nu; "
                    "the closed form's Gamma((nu-alpha)/2) has its pole exactly at alpha = nu")


@check(PAPER, "student_t_normal_limit",
       "f_nu tends to the standard normal density as nu -> infinity.",
       spec=("1",), kind="textbook", severity="typo")
def _t_normal():
    """fedada2.txt line 310 ("nu -> infinity gives N(0,1)")."""
    grid = np.linspace(-6, 6, 241)
    phi = np.exp(-grid**2 / 2) / math.sqrt(2 * math.pi)
    errs = []
    for v in (1e2, 1e4, 1e6):
        pdf = _pdf_t(v)
        errs.append(float(np.max(np.abs(np.array([pdf(s) for s in grid]) - phi))))
    if errs[0] > errs[1] > errs[2] and errs[2] < 1e-6:
        return verified("max |f_nu - phi| on [-6, 6]: " + ", ".join(f"nu={v:.0e}: {e:.1e}" for v, e in zip((1e2, 1e4, 1e6), errs))
                        + " (decreasing like 1/nu)", "numeric")
    return refuted(f"errors {errs}", "numeric")


@check(PAPER, "cauchy_moments_and_stability",
       "Cauchy CL(0, gamma): E[|C| 1{|C| <= a}] = (gamma/pi) log(1 + a^2/gamma^2) -> infinity (no mean); E|C|^alpha < infinity "
       "iff alpha < 1; stability (e^(-gamma|s|/n))^n = e^(-gamma|s|) (the mean of n draws is again CL(0, gamma)).",
       spec=("2",), kind="textbook", severity="rate")
def _cauchy():
    """fedada2.txt Prop. 10 construction (line 473ff)."""
    A, s, n_ = sp.symbols("A s n", positive=True)
    trunc = gam / sp.pi * sp.log(1 + A**2 / gam**2)
    ok = simplify_zero(sp.diff(trunc, A) - 2 * A * f_cauchy.subs(x, A)) == 0 and trunc.subs(A, 0) == 0
    lim = sp.limit(trunc, A, sp.oo)
    tail = sp.limit(f_cauchy * x**2, x, sp.oo)
    stab = sp.simplify(sp.exp(-gam * s / n_) ** n_ - sp.exp(-gam * s))
    if ok and lim == sp.oo and tail.is_positive and stab == 0:
        return verified(f"closed form has derivative 2a f(a) and value 0 at a = 0, limit {lim}; x^2 f(x) -> {show(tail)} so "
                        "|x|^alpha f(x) ~ x^(alpha-2) is integrable iff alpha < 1; characteristic-function identity exact")
    return refuted(f"closed form ok={ok}, limit {lim}, tail {tail}, stability residual {stab}")


@check(PAPER, "def1_covers_cauchy",
       "The Cauchy noise of Prop. 10 is heavy-tailed in the sense of Definition 1 (alpha-moment bounded for alpha in (0,2), "
       "unbounded for alpha >= 2).",
       spec=("2", "err-28"), severity="typo",
       hypotheses=(Hyp("gamma > 0 (Cauchy scale)", lambda p: p["gamma"] > 0, "fedada2.txt line 473"),
                   Hyp("0 < alpha < 2 (Def. 1 requires E|xi|^alpha bounded there)", lambda p: 0 < p["alpha"] < 2,
                       "fedada2.txt line 44 (Def. 1)"),
                   Hyp("Prop. 10 calls the Cauchy client's noise heavy-tailed", lambda p: p["called heavy-tailed"] == "yes",
                       "fedada2.txt lines 62, 479")))
def _def1_cauchy():
    """fedada2.txt Def. 1 (line 42) vs Prop. 10 (line 475, 'generalized' problem) and Thm 13 (needs a finite mean)."""
    A = sp.Symbol("A", positive=True)
    lim = sp.limit(gam / sp.pi * sp.log(1 + A**2 / gam**2), A, sp.oo)
    if lim == sp.oo:
        return refuted("E|C|^1 = lim (gamma/pi) log(1 + a^2/gamma^2) = oo although 1 is in (0, 2): Cauchy violates Def. 1's "
                       "'bounded for alpha in (0,2)' clause (it is heavy-tailed only in Def. 11's weaker sense), and Thm 13, "
                       "which needs a finite mean, does not cover it",
                       at={"gamma": 1, "alpha": 1, "called heavy-tailed": "yes"})
    return verified("first absolute moment finite")


@check(PAPER, "argmax_xi_p",
       "For every nu > 0 the function xi -> xi p_nu(xi) on xi >= 0 has its maximum at xi = 1: "
       "d/dxi [xi (1+xi^2/nu)^(-(nu+1)/2)] = (1 - xi^2)(1+xi^2/nu)^(-(nu+3)/2).",
       spec=("4",), kind="derived", severity="constant")
def _argmax():
    """fedada2.txt proof of Prop. 9 (ii), line 405 (monotonicity of ||xi|| p_(i+1)(xi))."""
    xi = sp.Symbol("xi", positive=True)
    g = xi * (1 + xi**2 / nu) ** (-(nu + 1) / 2)
    e = sp.diff(g, xi) * (1 + xi**2 / nu) ** ((nu + 3) / 2)
    ratio = sp.cancel(sp.expand(sp.powsimp(sp.expand(e), combine="exp", force=True)))
    if ratio == 1 - xi**2:
        return verified("derivative / (1+xi^2/nu)^(-(nu+3)/2) simplifies to 1 - xi^2 for symbolic nu: increasing on [0,1], "
                        "decreasing after")
    return refuted(f"derivative ratio {show(ratio)}")


@check(PAPER, "paper_argmax_and_majorant",
       "Proof of Prop. 9 (ii): ||xi|| p_(i+1)(xi) increases on [0, (3/2 + 2/(i+1))^(-1/2)] and decreases after, and "
       "h_(i+1)(xi) = -xi/(3/2+2/(i+1))^(-1/2) + sup ||xi|| p + eps on that interval is a non-negative majorant.",
       spec=("4", "2.7.1", "err-22"), severity="typo",
       corrected={"turning": lambda nu_: 1.0, "slope": lambda nu_: 0.0},
       hypotheses=(H_NU, Hyp("0 < eps_h <= 1/10: h's own small constant ('for small 1 >> eps > 0', not AdaGrad's eps)",
                             lambda p: 0 < p["eps_h"] <= 0.1, "fedada2.txt line 407")))
def _paper_argmax(turning=lambda nu_: (1.5 + 2 / nu_) ** -0.5, slope=lambda nu_: 1 / (1.5 + 2 / nu_) ** -0.5):
    """fedada2.txt lines 405-407 (definition of h_(i+1)): turning point (3/2 + 2/(i+1))^(-1/2) and, on [0, turning],
    h = -slope * xi + sup ||xi|| p + eps.  Checked on a grid of 601 points of [0, 6] for nu = 2..5 and eps = 0.1:
    xi p(xi) increases before the turning point and decreases after, and h >= max(0, xi p) on [0, turning]."""
    for v in (2, 3, 4, 5):  # client i has t_(i+1) noise
        a = turning(v)
        p = _pdf_t(v)
        grid = np.linspace(0, 6, 601)
        vals = grid * np.array([p(s) for s in grid])
        sup = float(vals.max())
        inc = np.diff(vals) > 0
        wrong_mono = bool(np.any(inc[grid[1:] > a + 1e-9]) or np.any(~inc[grid[1:] <= a - 1e-9]))
        h = -slope(v) * grid + sup + 0.1
        on = grid <= a
        bad_h = bool(np.any(h[on] < np.maximum(vals[on], 0) - 1e-12))
        if wrong_mono or bad_h:
            break
    else:
        return verified("for nu = 2..5: xi p(xi) increases up to the turning point and decreases after, and h is a "
                        "non-negative majorant on [0, turning] (grid of 601 points, eps = 0.1); B_i is finite", "numeric")
    at_a, at_1 = a * p(a), 1.0 * p(1.0)
    h_end = -slope(v) * a + sup + 0.1  # value of h at xi = a with eps = 0.1
    return refuted(f"nu = {v}: the claimed turning point is {fmt(a)} but xi p(xi) is still increasing there "
                   f"({fmt(at_a)} at {fmt(a)} < {fmt(at_1)} at 1, the true argmax); h at the end of its interval equals "
                   f"-1 + sup + eps = {fmt(h_end)} < 0 for eps = 0.1, so h is not a non-negative majorant. No effect on the result: "
                   "the constant h = sup + eps on [0, 1] is a majorant and B_i stays finite", "numeric",
                   at={"nu": v, "eps_h": 0.1, "turning": a})


@check(PAPER, "I_eps_divergence_and_bound",
       "I(eps) = int p(xi)/(|x+xi| + eps) dxi satisfies I(eps) <= 1/eps, and I(0) = infinity (log divergence at xi = -x).",
       spec=("5",), severity="constant")
def _I_eps():
    """fedada2.txt proof of Prop. 9 (ii), lines 395-400 (I_i(0) = oo, I_i(1) < 1)."""
    eta_ = sp.Symbol("eta", positive=True)
    piece = sp.integrate(1 / t, (t, eta_, 1))
    lim = sp.limit(piece, eta_, 0, "+")
    if lim == sp.oo:
        return verified(f"1/(|x+xi|+eps) <= 1/eps and int p = 1 give I(eps) <= 1/eps; near xi = -x the integrand is "
                        f"~ p(-x)/|u| with p(-x) > 0 and int_eta^1 du/u = {show(piece)} -> oo as eta -> 0")
    return refuted(f"int_eta^1 du/u -> {lim}")


@check(PAPER, "I_eps_uniform_in_x",
       "There is one eps with I(eps) ~ 1 - eps_hat, eps_hat ~ 0, uniformly in the iterate x_t (step (4) of Prop. 9 (ii)).",
       spec=("2.7.3", "err-23"), severity="rate", hypotheses=(H_NU, H_PREMISE))
def _I_uniform():
    """fedada2.txt line 398-401 (I_i(eps) in [1 - eps_hat_i, 1) for eps in [eps_i, 1])."""
    p = _pdf_t(2)
    vals = {x0: _expect(lambda s: 1.0, p, x0, 1.0) for x0 in (0.0, 1.0, 3.0)}
    if max(vals.values()) - min(vals.values()) < 0.05:
        return verified(f"I(1) nearly constant in x: {vals}", "numeric")
    return refuted("t_2 noise, eps = 1: I(eps) = " + ", ".join(f"{fmt(v, 3)} at x = {k:g}" for k, v in vals.items())
                   + "; I depends on x_t (about 1/|x| for large |x|), so no single eps gives 1 - eps_hat with eps_hat ~ 0 (eps = 1 "
                   "is in the proof's range: I(1) < 1 at every x_t)", "numeric",
                   at={"nu": 2, "eps": 1.0, "eps_star": admissible_eps(p), "x_t": "0, 1, 3"})


@check(PAPER, "B_maximised_at_zero",
       "E_t[||xi||/(||x_t + xi|| + eps)] is maximised at x_t = 0 (eq. 5 of Prop. 9 (ii)).",
       spec=("2.7.2", "err-23"), severity="constant", hypotheses=(H_NU, H_PREMISE))
def _B_zero():
    """fedada2.txt line 405-410 ('by matching monotonicity ... maximized at x_t = 0'), for eps in the proof's range
    (line 401: 1 > I(eps) for eps in [eps_i, 1]); t_2 noise (client 1), eps at the smallest admissible value and at 1."""
    p = _pdf_t(2)
    e_star = admissible_eps(p)
    for eps in (1.01 * e_star, 1.0):
        at0 = _expect(lambda s: abs(s), p, 0.0, eps)
        xm, vm = sup_B(p, eps)
        if vm > at0 * (1 + 1e-9):
            i0 = _expect(lambda s: 1.0, p, 0.0, eps)
            return refuted(f"t_2 noise, eps = {fmt(eps)} (premise holds: I(eps) < 1 for eps > {fmt(e_star)}; I = {fmt(i0, 6)} at "
                           f"x = 0, its maximum): the expectation is {fmt(at0)} at x_t = 0 but {fmt(vm)} at x_t = {xm:g}", "numeric",
                           at={"nu": 2, "eps": eps, "eps_star": e_star, "x_t": xm})
    return verified(f"for eps in {{{fmt(e_star)}, 1}} the maximum over x_t in [0, 3] is at x_t = 0", "numeric")


@check(PAPER, "B_below_2sqrt3",
       "For the t-construction, B = sup over clients and iterates of E[||xi||/(||x_t+xi|| + eps)] < 2 sqrt(3) (Prop. 9 (ii)), "
       "for every eps the proof admits (I_i(eps) < 1 for all clients, line 401).",
       spec=("2.7.2", "err-23"), severity="constant",
       hypotheses=(H_NU, Hyp(H_PREMISE.text, H_PREMISE.cond, H_PREMISE.line, spec="any eps in (0, 1] (specs/fedada2.md 2.7.2)")))
def _B_2sqrt3(eps_values=None):
    """fedada2.txt line 424 ('It is easy to show by straightforward integration that B < 2 sqrt 3'), with the premise of
    line 401: eps in [max_i eps_i, 1] where 1 > I_i(eps).  Clients i = 1..4 have t_(i+1) noise; the admissible range is
    set by the client with the largest eps_* (B decreases in eps, so its smallest admissible eps is the worst case).
    ``eps_values`` overrides the eps tested (e.g. the spec's reading, any eps in (0, 1]). Proposition 2 (ii) at line 56."""
    pdfs = {v: _pdf_t(v) for v in (2, 3, 4, 5)}
    e_star = max(admissible_eps(p) for p in pdfs.values())
    worst = (0.0, None, None, None)
    for eps in (eps_values or (e_star, 0.5, 1.0)):
        for v, p in pdfs.items():
            xm, vm = sup_B(p, eps)
            if vm > worst[0]:
                worst = (vm, v, xm, eps)
    vm, v, xm, eps = worst
    if vm < 2 * math.sqrt(3):
        outside = _expect(lambda s: abs(s), pdfs[2], 1.0, 1e-4)
        return verified(f"premise I_i(eps) < 1 for all clients holds for eps > {fmt(e_star)}; there the largest "
                        f"E[|xi|/(|x+xi|+eps)] over clients t_2..t_5 and x_t in [0, 3] is {fmt(vm)} (t_{v}, x_t = {xm:g}, "
                        f"eps = {fmt(eps)}) < 2 sqrt 3 = {fmt(2 * math.sqrt(3))}. Outside the premise the bound fails (eps = 1e-4: "
                        f"{fmt(outside)} at x_t = 1): the spec's reading 'any eps in (0, 1]' is refuted, not the paper", "numeric")
    return refuted(f"t_{v} noise, eps = {fmt(eps)}: the expectation at x_t = {xm:g} is {fmt(vm)} >= 2 sqrt 3 = "
                   f"{fmt(2 * math.sqrt(3))} (premise I(eps) < 1 holds for eps > {fmt(e_star)})", "numeric",
                   at={"nu": v, "eps": eps, "eps_star": e_star, "x_t": xm})


@check(PAPER, "cauchy_B_below_2",
       "Prop. 10 (ii): for Cauchy noise with gamma < 1/3 the same B is at most 2.",
       spec=("2.7.5",), severity="constant")
def _cauchy_B():
    """fedada2.txt proof of Prop. 10 (ii) (construction line 487, bound B <= 2 for gamma < 1/3 at line 516), with the
    premise of Prop. 9 (ii) that it reuses (line 401: I(eps) < 1); Cauchy client at gamma in {0.05, 0.1, 0.2, 0.3, 0.33}
    (the Gaussian clients only raise the smallest admissible eps, which lowers B)."""
    worst = (0.0, None, None, None)
    for g in (0.05, 0.1, 0.2, 0.3, 0.33):
        p = _pdf_cauchy(g)
        e_star = admissible_eps(p)
        xm, vm = sup_B(p, e_star)
        if vm > worst[0]:
            worst = (vm, g, xm, e_star)
    vm, g, xm, e_star = worst
    if vm <= 2:
        outside = _expect(lambda s: abs(s), _pdf_cauchy(0.3), 0.3, 1e-6)
        return verified(f"at the smallest admissible eps (I(eps) < 1) the largest E[|xi|/(|x+xi|+eps)] over gamma in "
                        f"[0.05, 0.33] and x_t in [0, 3] is {fmt(vm)} (gamma = {g}, x_t = {xm:g}, eps = {fmt(e_star)}) <= 2. "
                        f"Outside the premise it fails (gamma = 0.3, eps = 1e-6: {fmt(outside)}): the spec's reading with "
                        "any eps is refuted, not the paper", "numeric")
    return refuted(f"gamma = {g}, eps = {fmt(e_star)} (premise holds): the expectation at x_t = {xm:g} is {fmt(vm)} > 2", "numeric")


# ===========================================================================
# FedAvg unrolling and Prop. 9 recursions (items 6-8)
# ===========================================================================


@check(PAPER, "fedavg_unrolling",
       "Local SGD on F = x^2/2 + xi x: x_(i,k) = (1-eta)^k x_t - eta sum_(p<k) (1-eta)^(k-1-p) xi_(i,p); the last noise xi_(i,K-1) enters "
       "x_(t+1) with coefficient -eta/|S|; for K = 1, E[x_(t+1)^2 | x_t, S] = (1-eta)^2 x_t^2 + (eta^2/|S|^2) sum Var(xi_i).",
       spec=("6",), severity="rate")
def _unroll():
    """fedada2.txt proof of Prop. 9 (i), lines 336-350. Display 359-362 (x_(i,l-1) = a_t x_t - sum a_(i,p) xi_(i,p))."""
    e, xt = sp.symbols("eta x_t")
    xis = sp.symbols("xi0:6")
    y = xt
    for k in range(1, 6):
        y = y - e * (y + xis[k - 1])
        closed = (1 - e) ** k * xt - e * sum((1 - e) ** (k - 1 - p) * xis[p] for p in range(k))
        if sp.expand(y - closed) != 0:
            return refuted(f"unrolled iterate differs at k = {k}")
    # server average over |S| = 3 clients, K = 5: coefficient of the last noise of client 0
    Sn, K_ = 3, 5
    coeff = sp.expand(y).coeff(xis[K_ - 1]) / Sn
    vs = sp.symbols("v0:3", positive=True)
    z = sp.symbols("z0:3")
    x1 = (1 - e) * xt - e / Sn * sum(z)
    sq = sp.expand(x1**2)
    expect = sq.subs({zi * zj: 0 for i, zi in enumerate(z) for j, zj in enumerate(z) if i < j})
    expect = expect.subs({zi**2: vi for zi, vi in zip(z, vs)}).subs({zi: 0 for zi in z})
    if is_identity(coeff, -e / Sn) and is_identity(expect, (1 - e) ** 2 * xt**2 + e**2 / Sn**2 * sum(vs)):
        return verified("closed form equals the recursion for k = 1..5; coefficient of xi_(0,K-1) in the averaged iterate "
                        f"is {show(coeff)} != 0; K = 1 second moment expands to (1-eta)^2 x^2 + eta^2/|S|^2 sum Var (independent, zero mean)")
    return refuted(f"coefficient {show(coeff)}, second moment {show(expect)}")


@check(PAPER, "prop9_ii_recursion",
       "With eta_l^t = 1/((t+t0)(1-eps_hat)): 1 - eta_l^t (1-eps_hat) = (t+t0-1)/(t+t0), and a_(t+1) <= (t+t0-1)/(t+t0) a_t + "
       "B/((t+t0)(1-eps_hat)) implies a_(t+1) <= (t0-1)/(t+t0) a_0 + (t+1)B/((t+t0)(1-eps_hat)) -> B/(1-eps_hat).",
       spec=("7",), severity="rate", depends=("I_eps_uniform_in_x", "B_maximised_at_zero", "B_below_2sqrt3", "paper_argmax_and_majorant"))
def _prop9_ii():
    """fedada2.txt proof of Prop. 9 (ii), lines 412-423. Display 419-422."""
    tt, t0, e, B, a0 = sp.symbols("t t_0 epsilon_hat B a_0", positive=True)
    lr = 1 / ((tt + t0) * (1 - e))
    claim = lambda s: (t0 - 1) / (s + t0) * a0 + (s + 1) * B / ((s + t0) * (1 - e))
    step = (tt + t0 - 1) / (tt + t0) * claim(tt - 1) + B / ((tt + t0) * (1 - e))
    base = (t0 - 1) / t0 * a0 + B / (t0 * (1 - e))
    lim = sp.limit(claim(tt), tt, sp.oo)
    return identities([
        ("contraction factor", 1 - lr * (1 - e), (tt + t0 - 1) / (tt + t0)),
        ("induction step", step, claim(tt)),
        ("base case t = 0", base, claim(0)),
        ("limit", lim, B / (1 - e)),
    ])


@check(PAPER, "prop9_iv_sum_vs_integral",
       "Prop. 9 (iv): sum_(t=1)^T eta_l^t with eta_l^t = 1/t^2 is at most int_1^oo x^(-2) dx = 1.",
       spec=("8", "2.7.4", "err-24"), severity="constant", corrected={"bound": sp.Integer(2)},
       hypotheses=(Hyp("eta_l^t = 1/t^2 (the proof's schedule)", lambda p: p["schedule"] == "1/t^2", "fedada2.txt line 445"),
                   Hyp("T >= 1 an integer, t in {1, ..., T}", lambda p: int(p["T"]) == p["T"] >= 1, "fedada2.txt line 334")))
def _prop9_iv(bound=sp.Integer(1)):
    """fedada2.txt lines 455-463 (proof of Prop. 9 (iv), display 458-459) and statement line 334; ``bound`` is the bound
    used for sum_t t^-2 (printed: int_1^oo x^-2 dx = 1)."""
    total = sp.zeta(2)  # sum_{t>=1} t^-2 = pi^2/6 (Basel)
    integral = sp.integrate(1 / t**2, (t, 1, sp.oo))
    s2 = sp.Rational(1, 1) + sp.Rational(1, 4)
    if total <= bound:
        return verified(f"sum_t t^-2 = {show(total)} ~ {fmt(float(total))} <= {bound}")
    return refuted(f"already at T = 2 the sum is {s2} > int_1^oo x^-2 dx = {integral}; the full sum is {show(total)} ~ "
                   f"{fmt(float(total))}; correct: sum_(t<=T) t^-2 <= 1 + int_1^T x^-2 dx <= 2 (or pi^2/6), giving "
                   "E||x_t||^2 <= 2||x_0||^2 + 2K^2 (pi^2/6)^2 (the statement 'for appropriate schedules' survives with "
                   "eta_l^t = 1/(t+1)^2, whose sum is pi^2/6 - 1 < 1; the proof's schedule 1/t^2 does not give it)",
                   at={"schedule": "1/t^2", "T": 2})


def prop9_iv_second_moment(K_: int, eps: float = 1e-3, T_: int = 40, paths: int = 20000, seed: int = 0) -> float:
    """max_t E x_t^2 (Monte Carlo) for Prop. 9's construction under (iv)'s schedule: the heavy-tailed client (F_1 = x^2/2 + xi x,
    xi ~ t_2, line 340) sampled every round, x_0 = 0, eta_l^t = 1/t^2 (line 445), K local steps of (2) (line 377,
    g/(|g| + eps)), T rounds; ``paths`` seeded sample paths."""
    r = np.random.default_rng(seed)
    x_ = np.zeros(paths)
    best = 0.0
    for tt in range(1, T_ + 1):
        el = 1.0 / tt**2
        for _ in range(K_):
            g = x_ + r.standard_t(2, size=paths)
            x_ = x_ - el * g / (np.abs(g) + eps)
        best = max(best, float(np.mean(x_**2)))
    return best


@check(PAPER, "prop9_iv_statement_drops_K2",
       "Prop. 9 (iv)'s statement E||grad f(x_t)||^2 <= 2||x_0||^2 + 2(int_1^oo x^-2 dx)^2 is what its proof concludes "
       "(E||x_t||^2 <= 2||x_0||^2 + 2K^2 (int_1^oo x^-2 dx)^2, line 463).",
       spec=("8",), severity="proof", corrected={"statement": lambda K_, x0, I: 2 * x0**2 + 2 * K_**2 * I**2},
       hypotheses=(Hyp("K >= 1 local steps (an integer); x_0 in R", lambda p: int(p["K"]) == p["K"] >= 1, "fedada2.txt lines 318, 445"),))
def _prop9_iv_K(statement=lambda K_, x0, I: 2 * x0**2 + 2 * I**2):
    """fedada2.txt statement line 334 vs the proof's conclusion at line 463 (displays 451-454, 458-459);
    ``statement(K, ||x_0||, I)`` with I = int_1^oo x^-2 dx.  The check compares the two symbolically; a Monte Carlo of the
    construction (prop9_iv_second_moment) says whether the statement itself fails."""
    Ks, X0, I = sp.symbols("K x_0 I", positive=True)
    proof_form = 2 * X0**2 + 2 * Ks**2 * I**2
    diff = sp.simplify(proof_form - statement(Ks, X0, I))
    if diff == 0:
        return verified("statement and proof's conclusion agree symbolically")
    mc = {k: prop9_iv_second_moment(k) for k in (2, 5)}
    return refuted(f"proof - statement = {show(diff)}: for K >= 2 local steps the proof shows only the K^2 form (at x_0 = 0: "
                   f"{show(proof_form.subs({Ks: 2, X0: 0, I: 1}))} for K = 2, not the stated 2), so the proof does not establish the "
                   "statement. The statement itself is not shown false: a Monte Carlo of the construction (heavy-tailed t_2 client "
                   "sampled every round, x_0 = 0, eta_l^t = 1/t^2, eps = 1e-3, 40 rounds, 20000 seeded paths) gives max_t E x_t^2 = "
                   + ", ".join(f"{fmt(v, 3)} (K = {k})" for k, v in mc.items()) + ", below the stated 2", "exact",
                   at={"K": 2, "x_0": 0, "proof bound": proof_form.subs({Ks: 2, X0: 0, I: 1}), "statement bound": statement(2, 0, 1)})


# ===========================================================================
# Theorem 20 / Theorem 6 machinery (items 9-15; sec. 3.9)
# ===========================================================================


@check(PAPER, "lemma16_server_step",
       "Lemma 16: sum_(l=1)^t b^(2(t-l)) = (1-b^(2t))/(1-b^2), and the Cauchy-Schwarz constant (1-b) sqrt((1-b^(2t))/(1-b^2)) "
       "= sqrt((1-b)(1-b^(2t))/(1+b)) <= sqrt((1-b)(1-b^(2t))), so the stated server step bound is valid (looser by sqrt(1+b)).",
       spec=("9", "err-19"), severity="constant")
def _lemma16():
    """fedada2.txt Lemma 16 and proof, lines 778-792. Display 787-790 (its constants)."""
    b = sp.Symbol("b", positive=True)
    for tt in range(1, 7):
        if not is_identity(finite_sum(lambda l: b ** (2 * (tt - l)), 1, tt), (1 - b ** (2 * tt)) / (1 - b**2)):
            return refuted(f"geometric sum fails at t = {tt}")
    tt = sp.Symbol("t", positive=True)
    cs_sq = (1 - b) ** 2 * (1 - b ** (2 * tt)) / (1 - b**2)
    ratio = sp.simplify(cs_sq / ((1 - b) * (1 - b ** (2 * tt))))
    if is_identity(ratio, 1 / (1 + b)):
        return verified(f"geometric sums exact for t = 1..6; (C-S constant)^2 / ((1-b)(1-b^(2t))) = {show(ratio)} <= 1")
    return refuted(f"ratio {show(ratio)}")


@check(PAPER, "log_telescoping_lemma",
       "log(1+x) >= x/(1+x) for x >= 0, hence sum_t a_t/(c + S_t) <= log(1 + S_T/c) (S_t = a_1 + ... + a_t); and "
       "|g|/(sqrt(|g|^2 + S) + eps) <= sqrt(|g|^2/(eps^2 + S + |g|^2)).",
       spec=("10",), severity="constant")
def _log_tele():
    """fedada2.txt Theorem 20 proof, eqs. (13)-(14) (lines 955-972), Lemma 15 proof (line 760). Displays 770-772 (the sqrt form), 957-958 and 987-988 ((13), (14)), 1071 (Lemma 22)."""
    y = sp.Symbol("y", nonnegative=True)
    h = sp.log(1 + y) - y / (1 + y)
    dh = sp.simplify(sp.diff(h, y))
    g, Sv, e = pos("g S e")
    gap = sp.expand((sp.sqrt(g**2 + Sv) + e) ** 2 - (e**2 + Sv + g**2))
    # telescoping: with x_t = a_t/(c+S_(t-1)), a_t/(c+S_t) = x_t/(1+x_t) <= log(1+x_t) = log((c+S_t)/(c+S_(t-1)))
    c, at, sp_ = pos("c a_t S_prev")
    xt_ = at / (c + sp_)
    tele = sp.simplify(xt_ / (1 + xt_) - at / (c + sp_ + at))
    if is_identity(dh, y / (1 + y) ** 2) and h.subs(y, 0) == 0 and gap == 2 * e * sp.sqrt(g**2 + Sv) and tele == 0:
        return verified(f"h(x) = log(1+x) - x/(1+x) has h(0) = 0 and h' = {show(dh)} >= 0; a_t/(c+S_t) = x/(1+x) with "
                        "x = a_t/(c+S_(t-1)) and log(1+x) telescopes to log((c+S_T)/c); (sqrt(g^2+S)+eps)^2 - (eps^2+S+g^2) = "
                        "2 eps sqrt(g^2+S) >= 0")
    return refuted(f"derivative {show(dh)}, gap {show(gap)}, telescoping residual {show(tele)}")


def c_beta(b: float) -> tuple[float, int]:
    """c(beta) of Theorem 20 and u0(beta) = inf{u : beta^v v^2 < 1/v^2 for all v >= u} (line 858)."""
    if b == 0:
        return 1.0, 1
    # beta^v v^4 is unimodal (max at v = -4/log b): u0 is one past the last v with beta^v v^4 >= 1
    vmax = max(1, int(-4 / math.log(b)))
    v = vmax
    while b**v * v**4 >= 1:
        v += 1
    u0 = v
    return sum(b**u * u * u for u in range(u0 + 1)) + 1.0 / u0, u0


@check(PAPER, "lemma21_series_and_c_beta",
       "Lemma 21: sum_(u>=0) b^u u^2 = b(1+b)/(1-b)^3; sum_(t=1)^T sum_(r=1)^t b^(t-r)(t-r)^2 = sum_(u=0)^(T-1) b^u u^2 (T-u) <= c(b) T "
       "with c(b) = sum_(u<=u0) b^u u^2 + int_(u0)^oo x^-2 dx (c(0) = 1, c(0.5) ~ 6.056, c(0.9) ~ 1710.005).",
       spec=("11",), severity="constant")
def _lemma21():
    """fedada2.txt Lemma 21 (line 1054) and c(beta) in Theorem 20 (line 858). Statement line 1066; the induction of 1012-1013."""
    b, r = sp.symbols("b r", positive=True)
    series = sp.simplify(r * sp.diff(r * sp.diff(1 / (1 - r), r), r)).subs(r, b)
    if not is_identity(series, b * (1 + b) / (1 - b) ** 3):
        return refuted(f"series {show(series)}")
    for T_ in range(1, 7):
        dbl = sp.Add(*[b ** (tt - rr) * (tt - rr) ** 2 for tt in range(1, T_ + 1) for rr in range(1, tt + 1)])
        sng = sp.Add(*[b**u * u**2 * (T_ - u) for u in range(T_)])
        if sp.expand(dbl - sng) != 0:
            return refuted(f"change of variables fails at T = {T_}")
    vals = {bb: c_beta(bb) for bb in (0.0, 0.5, 0.9)}
    expected = {0.0: 1.0, 0.5: 6.056, 0.9: 1710.005}
    if any(abs(vals[bb][0] - expected[bb]) > 1e-3 for bb in vals):
        return refuted(f"c(beta) values {vals}")
    for bb in (0.5, 0.9):
        tot = sum(bb**u * u * u for u in range(3000))
        if tot > vals[bb][0]:
            return refuted(f"sum_u b^u u^2 = {tot} exceeds c({bb})", "numeric")
    return verified("series via r d/dr(r d/dr 1/(1-r)); double sum = single sum exactly for T = 1..6; c(beta) = "
                    + ", ".join(f"{fmt(v[0], 7)} (u0 = {v[1]}) at beta = {bb:g}" for bb, v in vals.items())
                    + "; each exceeds the full series sum_u beta^u u^2, so the induction step holds")


@check(PAPER, "lemma21_stabilisation_remark",
       "Remark after Lemma 21: the factor (1 - beta1) 'stabilizes the divergence' of c(beta1) as beta1 -> 1.",
       spec=("11", "err-18"), severity="constant", corrected={"power": 3},
       hypotheses=(Hyp("0 <= beta1 < 1 (server momentum; the remark is about beta1 -> 1^-)", lambda p: 0 <= p["beta1"] < 1,
                       "fedada2.txt line 994"),))
def _lemma21_remark(power=1):
    """fedada2.txt line 994 (remark on (1-beta1) c(beta1)); ``power``: the remark's factor is (1-beta1)^power (printed 1).
    c(b) lies between sum_u b^u u^2 - (tail) and sum_u b^u u^2 + 1, and sum_u b^u u^2 = b(1+b)/(1-b)^3."""
    b = sp.Symbol("b", positive=True)
    lim = sp.limit((1 - b) ** power * b * (1 + b) / (1 - b) ** 3, b, 1, "-")
    nums = {bb: (1 - bb) ** power * c_beta(bb)[0] for bb in (0.9, 0.99)}
    if lim.is_finite:
        return verified(f"(1-b)^{power} * sum_u b^u u^2 -> {lim} as b -> 1 and (1-b)^{power} c(b) <= that + (1-b)^{power}: "
                        + ", ".join(f"{fmt(v)} at b = {bb:g}" for bb, v in nums.items()))
    return refuted(f"(1-b)^{power} * sum_u b^u u^2 -> {lim} as b -> 1 and c(b) exceeds that sum; numerically "
                   + ", ".join(f"(1-b)c(b) = {fmt(v)} at b = {bb:g}" for bb, v in nums.items()), at={"beta1": 0.99})


# Theorem 20 (line 842) as sympy expressions, with Lemma 15 (proof's version) and Lemma 16 for Phi_1, Phi_2
(L20, G20, d20, K20, T20, eta20, etal20, tau20, eps20, epss20, F20) = pos("L G d K T eta eta_l tau epsilon eps_s F")
v0_20, vt0_20, cbeta20 = sp.symbols("v_0 vtilde_0 c_beta", nonnegative=True)
b20 = sp.Symbol("beta1_server", nonnegative=True)
z20 = sp.Symbol("z", positive=True, integer=True)
_nu20 = sp.ceiling(K20 / z20)
#: Lemma 15 (coordinate-wise bound on |Delta_i|; eta_l, not eta_l^2, on the second term as in its proof)
PHI1 = etal20 * (sp.sqrt(_nu20) * sp.sqrt(sp.log(1 + _nu20 * G20**2 / eps20**2)) + (K20 - _nu20) * G20 / (sp.sqrt(v0_20) + eps20))
#: Lemma 16 (server step bound) at t = T
PHI2 = sp.Min(eta20 * sp.sqrt((1 - b20) * (1 - b20 ** (2 * T20))), eta20 / tau20 * PHI1)
#: derived cross-client Lipschitz constant (line 140), gamma_1 and alpha_1 (line 858)
LTILDE = 2 * sp.sqrt(d20) * G20 / (etal20 * epss20)
GAMMA1 = etal20 * K20 / (sp.sqrt(v0_20 + d20 * K20 * G20**2) + eps20)
ALPHA1 = 1 / (2 * sp.sqrt(v0_20 + d20 * K20 * G20**2) + 2 * eps20)
_n1, _n2 = sp.sqrt(d20) * PHI1, sp.sqrt(d20) * PHI2  # ||Phi|| of the broadcast coordinate-wise bounds
_den20 = ALPHA1 * tau20 * (sp.sqrt(v0_20) + eps20) ** 2
#: Psi_1..Psi_6 of Theorem 20: min_t ||grad f(x_(t-1))||^2 <= (Psi_1 + ... + Psi_5)/Psi_6
THM20 = {
    "Psi1": F20,
    "Psi2": eta20**2 * L20 * T20 * d20 * _n1**2 / tau20**2,
    "Psi3": (1 - b20**T20) * eta20 * etal20 * K20 * LTILDE * T20 * _n1**2 / _den20,
    "Psi4": (1 - b20) * eta20 * etal20 * K20 * L20 * T20 * cbeta20 * _n2**2 / _den20,
    "Psi5": eta20 * d20 * _n1 * G20 * (1 - b20 + sp.log(1 + T20 * _n1**2 / tau20**2)) / tau20,
    "Psi6": 3 * (1 - b20) * eta20 * GAMMA1 * T20 / (4 * (sp.sqrt(T20 * _n1**2 + vt0_20) + tau20)),
}


# Theorem 20 in orders (Sec. 5 line 146 and App. C line 842): Phi1 = Theta(eta_l), L~ = Theta(1/eta_l),
# Phi2 = Theta(min{eta, eta*eta_l}), gamma1 = Theta(eta_l), alpha1 = Theta(1), eta = T^p1, eta_l = T^p2.
_eta, _etal, _T = pos("eta eta_l T")


def thm20_orders(squared_lipschitz: bool = False, case: str = "small") -> dict[str, sp.Expr]:
    """Orders of Psi_1..Psi_6 of Theorem 20; ``case`` 'small' is eta_l <= O(1) and T eta_l^2 <= O(1),
    'large' is eta_l <= O(1) and T eta_l^2 >= Omega(1)."""
    phi1 = _etal
    lt = 1 / _etal
    phi2 = _eta * _etal  # eta_l <= O(1)
    psi6 = _eta * _etal * _T if case == "small" else _eta * sp.sqrt(_T)
    return {
        "Psi1": sp.Integer(1),
        "Psi2": _eta**2 * _T * phi1**2,
        "Psi3": _eta * _etal * (lt**2 if squared_lipschitz else lt) * _T * phi1**2,
        "Psi4": _eta * _etal * _T * phi2**2,
        "Psi5": _eta * phi1 * sp.log(1 + _T * phi1**2),
        "Psi6": psi6,
    }


#: main-text labelling of Theorem 6 (line 146)
THM6_MAIN = {
    "psi2": _eta**2 * _etal**2 * _T,
    "psi3": _eta * _etal**2 * _T,
    "psi4": _eta * _etal * sp.log(1 + _T * _etal**2),
    "psi5": _eta**3 * _etal**3 * _T,
}


_P1, _P2 = sp.symbols("p1 p2", real=True)


def _exponent(expr, p1, p2):
    """Exponent of T in expr with eta = T^p1, eta_l = T^p2 (log factors dropped)."""
    return _linear_exponent(expr).subs({_P1: p1, _P2: p2})


_EXP_CACHE: dict = {}


def _linear_exponent(expr) -> sp.Expr:
    """Exponent of T as a linear function of (p1, p2), cached per expression."""
    if expr not in _EXP_CACHE:
        e = expr.replace(sp.log, lambda arg: sp.Integer(1)).subs({_eta: _T**_P1, _etal: _T**_P2})
        _EXP_CACHE[expr] = sp.expand(sp.powsimp(sp.expand_power_base(e, force=True), force=True).as_coeff_exponent(_T)[1])
    return _EXP_CACHE[expr]


def _exponent_fn(expr):
    """Fast evaluator (p1, p2) -> exponent with Fractions."""
    lin = sp.Poly(_linear_exponent(expr), _P1, _P2)
    c = {mon: Fraction(int(sp.fraction(co)[0]), int(sp.fraction(co)[1])) for mon, co in zip(lin.monoms(), lin.coeffs())}
    return lambda p1, p2: sum(co * (p1 ** i) * (p2 ** j) for (i, j), co in c.items())


@check(PAPER, "thm6_psi_labels",
       "Theorem 6's main-text asymptotics label psi_4 = eta eta_l log(1 + T eta_l^2) and psi_5 = eta^3 eta_l^3 T (for eta_l <= O(1)) "
       "consistently with Theorem 20's Psi_4 and Psi_5.",
       spec=("12", "err-14"), severity="typo", depends=("thm20_psi_orders",),
       corrected={"main": {"psi2": THM6_MAIN["psi2"], "psi3": THM6_MAIN["psi3"], "psi4": THM6_MAIN["psi5"],
                           "psi5": THM6_MAIN["psi4"]}},
       hypotheses=(Hyp("eta_l <= O(1): p2 <= 0 (the main text's case) with eta = T^p1, eta_l = T^p2", lambda p: p["p2"] <= 0,
                       "fedada2.txt line 146"),
))
def _psi_labels(main=THM6_MAIN):
    """fedada2.txt Theorem 6 (line 146) vs Theorem 20 (line 842) and Corollary 23's proof (line 1075ff);
    ``main``: the main text's psi_2..psi_5. Theorem 6's psi's at lines 154 and 158."""
    o = thm20_orders()
    if all(is_identity(o["Psi" + k[3]], v) for k, v in main.items()):
        return verified("main-text psi_2..psi_5 equal Theorem 20's Psi_2..Psi_5 orders")
    swap = is_identity(o["Psi4"], main["psi5"]) and is_identity(o["Psi5"], main["psi4"])
    same = is_identity(o["Psi2"], main["psi2"]) and is_identity(o["Psi3"], main["psi3"])
    if swap and same:
        return refuted(f"from Thm 20: Psi4 ~ eta eta_l T ||Phi2||^2 = {show(o['Psi4'])} and Psi5 ~ eta ||Phi1|| log(1 + T||Phi1||^2) "
                       f"= {show(o['Psi5'])}: the main text swaps the labels psi4 and psi5 (psi2, psi3 agree); Cor. 23's proof uses "
                       "Thm 20's labelling", at={"p1": 0, "p2": sp.Rational(-1, 4),
                                                  "Psi4 exponent": _exponent(o["Psi4"], 0, sp.Rational(-1, 4)),
                                                  "Psi5 exponent": _exponent(o["Psi5"], 0, sp.Rational(-1, 4))})
    return refuted("main-text orders differ from Theorem 20's: " + ", ".join(f"{k} = {show(v)}" for k, v in main.items()),
                   at={"p1": 0, "p2": sp.Rational(-1, 4), "Psi4 exponent": _exponent(o["Psi4"], 0, sp.Rational(-1, 4)),
                       "Psi5 exponent": _exponent(o["Psi5"], 0, sp.Rational(-1, 4))})


@check(PAPER, "thm20_drift_squared_lipschitz",
       "The drift step of Theorem 20's proof, ||grad f(x_(t-1)) - grad F_i(x)||^2 <= 2L(t-r)^2 ||Phi2||^2 + 2 L~ ||Phi1||^2, rests "
       "on ||grad F(x) - grad F(y)||^2 <= L ||x - y||^2 for an L-smooth F with bounded gradients (and likewise with L~).",
       spec=("12", "3.9.2", "3.9.3", "err-16"), severity="rate", corrected={"power": 2},
       hypotheses=(Hyp("F is L-smooth (Assumption 1) with |grad F| <= G (Assumption 2): F(x) = L log cosh(x) has grad F = L tanh(x), "
                       "Lipschitz constant L and |grad F| <= G = L", lambda p: p["F"] == "L log cosh(x)" and p["L"] > 0
                       and p["G"] == p["L"], "fedada2.txt Assumptions 1-2 (lines 130-136)"),))
def _drift_sq(power=1):
    """fedada2.txt proof of Theorem 20, drift term (lines 919-925, with L and L~ to the first power); L~ defined in Sec. 5
    (line 140).  ``power``: the power of L in the step's ||grad F(x) - grad F(y)||^2 <= L^power ||x - y||^2 (printed 1).
    Search over F = L log cosh(x), L in {1/2, 2, 4}, x, y in {-1, -1/20, 0, 1/20, 1/2, 2} (float64)."""
    worst = None
    for Lv in (0.5, 2.0, 4.0):
        for x0, y0 in itertools.combinations((-1.0, -0.05, 0.0, 0.05, 0.5, 2.0), 2):
            true_sq = (Lv * math.tanh(x0) - Lv * math.tanh(y0)) ** 2
            bound = Lv**power * (x0 - y0) ** 2
            if true_sq > bound * (1 + 1e-12) and (worst is None or true_sq / bound > worst[0]):
                worst = (true_sq / bound, Lv, x0, y0, true_sq, bound)
    if worst is None:
        return verified(f"||grad F(x) - grad F(y)||^2 <= L^{power} |x - y|^2 at every searched (L, x, y) for F = L log cosh x", "numeric")
    _, Lv, x0, y0, true_sq, bound = worst
    return refuted(f"F(x) = {Lv:g} log cosh(x) (L-smooth, |grad F| <= G = {Lv:g}), x = {x0:g}, y = {y0:g}: ||grad F(x) - grad F(y)||^2 "
                   f"= {fmt(true_sq)} > L|x - y|^2 = {fmt(bound)}; the step needs L^2 (and L~^2 for the cross-client term). "
                   "Whether the bound still vanishes with the squared constants is thm20_bound_with_squared_constants", "numeric",
                   at={"F": "L log cosh(x)", "L": Lv, "G": Lv, "x": x0, "y": y0})


@check(PAPER, "thm20_bound_with_squared_constants",
       "With the drift step repaired (L^2 and L~^2 = Theta(eta_l^-2) in place of L and L~), Theorem 20's bound still vanishes in "
       "Corollary 23's case T eta_l^2 <= O(1) (p2 <= -1/2, -1 < p1 + p2 < 0).",
       spec=("12", "3.9.2"), kind="derived", severity="rate", depends=("thm20_drift_squared_lipschitz",),
       hypotheses=(Hyp("(p1, p2) in Corollary 23's first region: p2 <= -1/2 and -1 < p1 + p2 < 0", lambda p: p["p2"] <= sp.Rational(-1, 2)
                       and -1 < p["p1"] + p["p2"] < 0, "fedada2.txt lines 1085-1090"),))
def _drift_sq_consequence():
    """fedada2.txt Theorem 20 (line 842, Psi_3 ~ eta eta_l L~ T ||Phi1||^2) and Corollary 23 (lines 1075-1090): Psi_3's L~
    becomes L~^2 = Theta(eta_l^-2); exponents of Psi_i/Psi_6 on the region's grid (step 1/20)."""
    o = thm20_orders(squared_lipschitz=True, case="small")
    grid = [Fraction(k, 20) for k in range(-40, 41)]
    for p1 in grid:
        for p2 in grid:
            if not (p2 <= Fraction(-1, 2) and -1 < p1 + p2 < 0):
                continue
            for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5"):
                ex = _exponent(o[k] / o["Psi6"], sp.Rational(p1), sp.Rational(p2))
                if ex >= 0:
                    return refuted(f"at p1 = {p1}, p2 = {p2} (eta = T^p1, eta_l = T^p2, inside Cor. 23's first region): with L~^2 "
                                   f"= Theta(eta_l^-2) in Psi_3, {k}/Psi_6 ~ T^{show(ex)}, so the repaired bound does not vanish "
                                   f"(Psi_3/Psi_6 = Theta({show(sp.simplify(o['Psi3'] / o['Psi6']))}); L~ = 2 sqrt(d) G/(eta_l eps_s) "
                                   "also grows as eps_s -> 0): the proof, repaired, does not show the rate", "exact",
                                   at={"p1": sp.Rational(p1), "p2": sp.Rational(p2)})
    return verified("with squared constants every Psi_i/Psi_6 still vanishes on the region's grid", "exact")


def _psi_slopes(p1: float, p2: float, T1: float = 1e10, T2: float = 1e14) -> dict[str, float]:
    """Log-log slopes in T of Theorem 20's full Psi_1..Psi_6 (expressions THM20) with eta = T^p1, eta_l = T^p2 and the
    other constants fixed (L = G = d = tau = eps = eps_s = v0 = v~0 = c(beta) = 1, K = 2, z = 1, beta~1 = 1/2)."""
    import mpmath

    mpmath.mp.dps = 40
    fixed = {L20: 1, G20: 1, d20: 1, K20: 2, z20: 1, tau20: 1, eps20: 1, epss20: 1, F20: 1, v0_20: 1, vt0_20: 1,
             cbeta20: 1, b20: sp.Rational(1, 2)}
    out = {}
    for k, e in THM20.items():
        f = sp.lambdify((T20, eta20, etal20), e.subs(fixed), modules="mpmath")
        vals = [f(mpmath.mpf(Tv), mpmath.mpf(Tv) ** p1, mpmath.mpf(Tv) ** p2) for Tv in (T1, T2)]
        out[k] = float(mpmath.log(vals[1] / vals[0]) / mpmath.log(mpmath.mpf(T2) / T1))
    return out


@check(PAPER, "thm20_psi_orders",
       "Theorem 20's Psi_1..Psi_6, with Lemma 15's Phi_1 = Theta(eta_l), Lemma 16's Phi_2 = Theta(min{eta, eta eta_l}), "
       "L~ = Theta(1/eta_l), gamma_1 = Theta(eta_l), have the orders used by Theorem 6 and Corollaries 7/8/23/24: Psi_2 ~ "
       "eta^2 eta_l^2 T, Psi_3 ~ eta eta_l^2 T, Psi_4 ~ eta^3 eta_l^3 T (eta^3 eta_l T for eta_l >~ 1), Psi_5 ~ eta eta_l "
       "log(1 + T eta_l^2), Psi_6 ~ eta eta_l T (T eta_l^2 <~ 1) or eta sqrt(T) (T eta_l^2 >~ 1).",
       spec=("12",), severity="rate", depends=("lemma16_server_step", "derived_lipschitz_Ltilde"))
def _thm20_orders():
    """fedada2.txt Theorem 20 (lines 842-860) with Lemma 15 (line 741), Lemma 16 (line 778) and L~ (line 140) vs the
    main text's Theorem 6 (line 146); numeric log-log slopes between T = 1e10 and 1e14 (40-digit arithmetic), tolerance
    0.06 (the log factor of Psi_5 moves its slope by < 0.04). Theorem 6's orders at lines 154, 158; Theorem 20's Psi's at 850; Corollary 23's orders at 1085."""
    points = [(0.0, -0.5), (0.2, -0.6), (-0.3, -0.5), (0.3, -0.49), (0.0, -0.3), (0.1, -0.4), (0.0, 0.25)]
    worst = 0.0
    for p1, p2 in points:
        got = _psi_slopes(p1, p2)
        case = "small" if 1 + 2 * p2 <= 0 else "large"
        o = thm20_orders(case=case)
        expected = {k: float(_exponent(v, sp.nsimplify(p1), sp.nsimplify(p2))) for k, v in o.items()}
        if p2 > 0:  # eta_l >~ 1: Phi_2 = Theta(eta), so Psi_4 ~ eta^3 eta_l T (main text's second case)
            expected["Psi4"] = 3 * p1 + p2 + 1
        for k in THM20:
            dev = abs(got[k] - expected[k])
            worst = max(worst, dev)
            if dev > 0.06:
                return refuted(f"at eta = T^{p1}, eta_l = T^{p2}: {k} grows like T^{fmt(got[k])}, the order used is "
                               f"T^{fmt(expected[k])}", "numeric")
    return verified(f"slopes of the full Psi_1..Psi_6 match the orders at {len(points)} (p1, p2) points in both regimes "
                    f"(largest deviation {fmt(worst)}, from Psi_5's log)", "numeric")


@check(PAPER, "thm4_13_fedavg_infinite_variance",
       "Theorem 4/13: for FedAvg on the mu-strongly convex f = x^2/2 with one client's gradient noise t_2 (infinite variance) "
       "sampled with probability > 0, E|x_(t+1)|^2 = infinity and hence E f(x_(t+1))^2 = infinity, for any K >= 1.",
       spec=("6",), severity="rate", depends=("fedavg_unrolling", "student_t2_infinite_variance"))
def _thm4():
    """fedada2.txt Theorem 4 (line 72) / Theorem 13 (line 544) and its proof (lines 560-600): x_(t+1) = a + c xi with
    c = -eta_l/|S| != 0 the coefficient of the last local noise (fedavg_unrolling) and a independent of xi. Statement lines 74 (Theorem 4) and 546 (Theorem 13); Proposition 2 (i) at line 52."""
    A, a0, c0 = sp.symbols("A a c", positive=True)
    # E[(a + c T)^2 1{|T| <= A}] for T ~ t_2 (symmetric): a^2 P(|T|<=A) + c^2 E[T^2 1{|T|<=A}]
    trunc2 = 2 * sp.asinh(A / sp.sqrt(2)) - 2 * A / sp.sqrt(A**2 + 2)
    second = a0**2 * (A / sp.sqrt(A**2 + 2)) + c0**2 * trunc2
    lim = sp.limit(second, A, sp.oo)
    if lim != sp.oo:
        return refuted(f"truncated second moment tends to {show(lim)}")
    # E f^2 >= (E f)^2 = (E x^2 / 2)^2 (Jensen) and P(heavy-tailed client sampled) = p > 0 multiplies an infinite term
    return verified(f"E[(a + c xi)^2 1{{|xi| <= A}}] = a^2 P(|xi| <= A) + c^2 (2 asinh(A/sqrt 2) - 2A/sqrt(A^2+2)) -> {lim} as "
                    "A -> oo for every c != 0 (the last local noise enters with c = -eta_l/|S|); with sampling probability "
                    "p > 0, E|x_(t+1)|^2 >= p * oo = oo and E f(x_(t+1))^2 >= (E x_(t+1)^2/2)^2 = oo (Jensen)")


@check(PAPER, "prop5_14_adagrad_bounded",
       "Proposition 5/14: with client AdaGrad (v includes the current gradient, eps > 0) every local step has length "
       "< eta_l, so x_t stays in the ball of radius K t eta_l around x_0 (the proof's B_(Kt)(x_0) for eta_l <= 1) and "
       "E|f(x_t)| < infinity for any gradient noise, Cauchy included.",
       spec=("6",), severity="rate")
def _prop5():
    """fedada2.txt Proposition 5 (line 78) / 14 (line 651) and its proof (x_t in B_(Kt)(x_0), line 658). Statement lines 80 (Proposition 5) and 653 (Proposition 14)."""
    g, v = sp.symbols("g v", nonnegative=True)
    e = sp.Symbol("e", positive=True)
    # step/eta_l = |g|/(sqrt(v + g^2) + eps) < 1 since sqrt(v + g^2) >= |g|
    gap = sp.simplify((sp.sqrt(v + g**2) + e) - g)
    if not (gap.subs({v: 0, g: 0}) > 0 and sp.simplify(sp.sqrt(v + g**2) - sp.sqrt(g**2)).is_nonnegative is not False):
        return refuted(f"sqrt(v + g^2) + eps - |g| = {show(gap)}")
    r = np.random.default_rng(0)
    worst = 0.0
    for _ in range(20):
        K_, T_, el, eps = 5, 30, float(r.uniform(0.01, 2)), 1e-8
        x_ = x0 = float(r.standard_normal())
        for tt in range(1, T_ + 1):
            ys = []
            for _c in range(3):  # clients: Cauchy noise on F = x^2/2
                y, acc = x_, 0.0
                for _k in range(K_):
                    gr = y + float(r.standard_cauchy()) * 10.0
                    acc += gr * gr
                    y -= el * gr / (math.sqrt(acc) + eps)
                ys.append(y)
            x_ = sum(ys) / len(ys)
            worst = max(worst, abs(x_ - x0) / (K_ * tt * el))
    if worst >= 1:
        return refuted(f"|x_t - x_0| reached {fmt(worst)} x K t eta_l", "numeric")
    return verified(f"sqrt(v + g^2) + eps > |g| for eps > 0, so each AdaGrad step is shorter than eta_l and the server average "
                    f"stays in the ball; 20 seeded FedAvg+client-AdaGrad runs with Cauchy(0, 10) noise reach at most "
                    f"{fmt(worst)} x K t eta_l; f is continuous, hence bounded on the ball and E|f(x_t)| < oo", "numeric")


@check(PAPER, "thm25_update_form",
       "Theorem 25's optimizer condition x_(i,p) = x_(i,p-1) - eta_l sum_(l=1)^p a_l g_l/theta_l(g_1..g_l) with "
       "0 < a_lower <= a_l (coefficients independent of p) is satisfied by SGD and AdaGrad (as the text after Theorem 25 states).",
       spec=("12",), severity="typo", corrected={"weight": lambda p_, l_: 1 if l_ == p_ else 0},
       hypotheses=(Hyp("the optimizer is one the text after Theorem 25 names (SGD, AdaGrad, Adam)",
                       lambda p: p["optimizer"] in ("SGD", "AdaGrad", "Adam"), "fedada2.txt line 1211"),
                   Hyp("0 < a_lower <= a_l for every l (the condition's bounds, independent of p), local step p >= 1",
                       lambda p: p["a_lower"] > 0 and p["p"] >= 1, "fedada2.txt lines 1193-1197")))
def _thm25(weight=lambda p_, l_: 1):
    """fedada2.txt Theorem 25 (lines 1189-1200) and the remark after it (line 1211: 'Adam, AdaGrad, and SGD ... all satisfy
    the optimizer condition').  ``weight(p, l)``: how the l-th term a_l g_l/theta_l enters the p-th increment x_(i,p) -
    x_(i,p-1) (printed: every l <= p with weight 1).  Lemma 26 (lines 1226-1230) unrolls exactly this printed increment
    (sum_p sum_(l<=p), hence K(K+1)/2), so the proof is consistent with the printed rule; what fails is the remark."""
    gs = sp.symbols("g1:4")
    a = sp.symbols("a1:4", positive=True)
    th = sp.symbols("th1:4", positive=True)
    # SGD / AdaGrad: x_p - x_(p-1) = -eta_l g_p/theta_p (theta_l = 1 for SGD)
    eqs = []
    for p_ in range(1, 4):
        rule = sp.Add(*[weight(p_, l + 1) * a[l] * gs[l] / th[l] for l in range(p_)])
        eqs += sp.Poly(sp.expand((rule - gs[p_ - 1] / th[p_ - 1]) * sp.prod(th)), *gs).coeffs()
    eqs = [e for e in eqs if e != 0]
    sol = sp.solve(eqs, a, dict=True) if eqs else [{}]
    if sol and all(v.is_positive for v in sol[0].values()):
        return verified(f"matching coefficients of g_1..g_3 for p = 1..3 gives {sol[0] or 'no constraint'} with a_l = 1 admissible: "
                        "SGD (theta_l = 1) and AdaGrad (theta_l = sqrt(v_0 + sum g^2) + eps in [eps, sqrt(v_0 + K G^2) + eps]) "
                        "satisfy the rule; Lemma 26's count K(K+1)/2 then bounds the true K terms")
    return refuted(f"matching coefficients of g_1..g_3 for p = 1..3 forces {sol[0] if sol else 'no solution'}: a_l = 0 for "
                   "l < p, which the condition 0 < a_lower <= a_l excludes, so SGD and AdaGrad do not satisfy the printed rule "
                   "and the remark at line 1211 is wrong. Lemma 26 (lines 1226-1230) unrolls the printed rule itself (its "
                   "K(K+1)/2 counts the sum over l <= p), so the proof is consistent with the statement; with the increment "
                   "a_p g_p/theta_p (the cumulative form x_(i,p) = x_(i,0) - eta_l sum_(l<=p) ...) SGD and AdaGrad fit with "
                   "a_l = 1 and Lemma 26's bound still holds (K <= K(K+1)/2)",
                   at={"optimizer": "SGD", "p": 2, "a_lower": Fraction(1, 2)})


def lemma30_phi1(K_: int, z: int, G: float, eps: float, v0: float = 0.0) -> float:
    """Phi_1/(eta_l B) of Lemma 30 (line 1560): floor((K-1)/z) + 1 + K G/(sqrt(v0) + eps)."""
    return (K_ - 1) // z + 1 + K_ * G / (math.sqrt(v0) + eps)


def delayed_adagrad_delta(gs, z: int, eps: float, v0: float = 0.0) -> float:
    """|Delta|/eta_l of one client of Algorithm 10 (AdaGrad whose accumulator takes g_p only when (p-1)/z is an integer)."""
    v, total = v0, 0.0
    for p_, g in enumerate(gs, 1):
        if (p_ - 1) % z == 0:
            v += g * g
        total += g / (math.sqrt(v) + eps)
    return abs(total)


@check(PAPER, "cor27_29_same_orders",
       "Corollaries 27 (delayed Adam) and 29 (delayed AdaGrad) inherit Theorem 6's rate: their Psi_3, Psi_4, gamma~_1, "
       "alpha~_1 have the orders of Theorem 20's (Theta(eta eta_l^2 T), Theta(eta^3 eta_l^3 T), Theta(eta_l), Theta(1)) "
       "given Lemma 28 / Lemma 30's Phi_1 = Theta(eta_l); Lemma 30's bound holds for delayed AdaGrad.",
       spec=("12", "14"), severity="rate", depends=("thm20_psi_orders", "lemma28_phi1_bound"))
def _cor27_29():
    """fedada2.txt Corollary 27 (line 1435), Lemma 28 (line 1448), Corollary 29 (line 1547), Lemma 30 (line 1557). Corollary 27's display 1439-1440, Corollary 29's constants (line 1551), Lemma 30's bound (1575-1577)."""
    el, et, T_, B, eps, b1, K_, L_, Lt, c, tau, ew, G, v0 = pos("eta_l eta T B epsilon beta1 K L Ltilde c tau eps_w G v0")
    phi1, phi2 = el, et * el  # Theta(eta_l), Theta(eta eta_l)
    w = sp.Symbol("w", positive=True)  # 1 - beta~1^T in [1 - beta~1, 1]: Theta(1)
    psi3 = w * et * el * (1 - b1 ** (2 * K_)) * K_ * (Lt / el) * B**2 * T_ * phi1**2 / (2 * tau * eps**2)
    psi4 = et * el * (1 - b1 ** (2 * K_)) * K_ * L_ * T_ * B**2 * c * phi2**2 / (2 * tau * eps**2)
    gam29 = el * ew * K_ / (sp.sqrt(v0 + K_ * G**2) + eps)
    alp29 = ew * K_ / (2 * K_ * (sp.sqrt(v0 + K_ * G**2) + eps))
    want = {"Psi3": et * el**2 * T_, "Psi4": et**3 * el**3 * T_, "gamma1": el, "alpha1": sp.Integer(1)}
    got = {"Psi3": psi3, "Psi4": psi4, "gamma1": gam29, "alpha1": alp29}
    for k, v in got.items():
        ratio = sp.simplify(v / want[k])
        if ratio.has(et) or ratio.has(el) or ratio.has(T_):
            return refuted(f"{k}: ratio to the expected order {show(want[k])} is {show(ratio)}")
    worst = 0.0
    for k in range(1, 6):
        for z in (1, 2, 3):
            for eps_ in (1e-3, 0.1, 1.0):
                for gs in itertools.product((1e-6, 1.0, -1.0), repeat=k):
                    worst = max(worst, delayed_adagrad_delta(gs, z, eps_) / lemma30_phi1(k, z, 1.0, eps_))
    if worst > 1 + 1e-12:
        return refuted(f"Lemma 30's bound violated: |Delta|/Phi_1 reaches {fmt(worst)}", "numeric")
    return verified("each of Psi_3, Psi_4, gamma~_1, alpha~_1 divided by Theorem 20's order is free of eta, eta_l, T; "
                    f"Lemma 30 holds over K = 1..5, z = 1..3, eps in {{1e-3, 0.1, 1}}, gradients in {{1e-6, 1, -1}}^K "
                    f"(largest |Delta|/Phi_1 = {fmt(worst)})")


@check(PAPER, "cor23_exponent_regions",
       "Cor. 7/23: case T eta_l^2 <= O(1) converges for p2 <= -1/2, -1 < p1 + p2 < 0; case T eta_l^2 >= Omega(1) converges for "
       "-1/2 < p2 < -1/4, p1 > -1/2, p1 + 2 p2 < -1/2, 2 p1 + 3 p2 < -1/2; the example p2 = -49/100, -1/2 < p1 < 12/25 lies in "
       "the second region (T eta_l^2 = T^(1/50) -> oo).",
       spec=("12",), severity="rate", depends=("thm20_psi_orders", "thm20_drift_squared_lipschitz"))
def _cor23_regions():
    """fedada2.txt Corollary 23 and its proof, lines 1075-1118. Corollary 7 (line 166) and Corollary 23's statement (line 1079)."""
    grid = [Fraction(k, 20) for k in range(-40, 41)]
    checked = 0
    for case, region in (("small", lambda p1, p2: p2 <= Fraction(-1, 2) and -1 < p1 + p2 < 0),
                         ("large", lambda p1, p2: Fraction(-1, 2) < p2 < Fraction(-1, 4) and p1 > Fraction(-1, 2)
                          and p1 + 2 * p2 < Fraction(-1, 2) and 2 * p1 + 3 * p2 < Fraction(-1, 2))):
        o = thm20_orders(case=case)
        fns = {k: _exponent_fn(o[k] / o["Psi6"]) for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5")}
        for p1 in grid:
            for p2 in grid:
                if not region(p1, p2):
                    continue
                if case == "large" and 1 + 2 * p2 <= 0:
                    continue
                for k, fn in fns.items():
                    ex = fn(p1, p2)
                    if ex >= 0:
                        return refuted(f"{case} case, p1 = {p1}, p2 = {p2}: {k}/Psi6 ~ T^{show(ex)}", "exact")
                checked += 1
    p2 = Fraction(-49, 100)
    o = thm20_orders(case="large")
    for p1 in (Fraction(-49, 100), Fraction(0), Fraction(47, 100), Fraction(479, 1000)):
        for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5"):
            if _exponent(o[k] / o["Psi6"], sp.Rational(p1), sp.Rational(p2)) >= 0:
                return refuted(f"example point p1 = {p1}, p2 = -49/100 fails for {k}", "exact")
    return verified(f"all Psi_i/Psi_6 exponents are negative on {checked} grid points (step 1/20) of the two regions and at "
                    "p1 in {-0.49, 0, 0.47, 0.479} with p2 = -0.49 (log factors ignored)", "exact")


def cor23_case2_conditions(p1, p2) -> bool:
    """The printed sufficient conditions of Cor. 23's case T eta_l^2 >= Omega(1) (line 1112):
    -1/2 < p2 <= -1/4, -1/2 < p1, p1 + 2 p2 < -1/2, 2 p1 + 3 p2 < -1/2 (eta = T^p1, eta_l = T^p2)."""
    h = sp.Rational(1, 2)
    return bool(-h < p2 <= -sp.Rational(1, 4) and -h < p1 and p1 + 2 * p2 < -h and 2 * p1 + 3 * p2 < -h)


@check(PAPER, "cor23_case2_boundary_strict",
       "Cor. 23's case-2 conditions as printed (-1/2 < p2 <= -1/4, -1/2 < p1, p1 + 2p2 < -1/2, 2p1 + 3p2 < -1/2) suffice for "
       "convergence, including the boundary p2 = -1/4 (and the example eta_l = T^(-49/100), eta up to T^(12/25)).",
       spec=("12", "err-17"), severity="typo",
       corrected={"p2_edge": sp.Rational(-1, 4) - sp.Rational(1, 100), "p1_edge": sp.Rational(12, 25) - sp.Rational(1, 100)},
       hypotheses=(Hyp("(p1, p2) satisfies the printed case-2 conditions", lambda p: cor23_case2_conditions(p["p1"], p["p2"]),
                       "fedada2.txt line 1112", spec="specs/fedada2.md err-17 reads the example's limit p1 = 12/25 as admitted"),))
def _cor23_strict(p2_edge=sp.Rational(-1, 4), p1_edge=sp.Rational(12, 25)):
    """fedada2.txt proof of Corollary 23, case T eta_l^2 > Omega(1) (lines 1100-1118: '-1/2 < p2 <= -1/4'; example
    'eta_l = Theta(T^(-49/100)), Omega(T^(-1/2)) < eta < O(T^(12/25))'); ``p2_edge``, ``p1_edge``: the largest exponents
    tested.  The p2 edge is tested at p1 = -1/3 (inside every other printed condition); the p1 edge at the example's
    p2 = -49/100, where the printed p1 + 2p2 < -1/2 already excludes p1 = 12/25 (the example's '<' is strict). Statements: Corollary 7 (line 166), Corollary 23 (line 1079)."""
    o = thm20_orders(case="large")
    e3 = _exponent(o["Psi3"] / o["Psi6"], sp.Rational(-1, 3), p2_edge)
    e2 = _exponent(o["Psi2"] / o["Psi6"], p1_edge, sp.Rational(-49, 100))
    if e3 < 0 and e2 < 0:
        return verified(f"at p2 = {p2_edge}: Psi3/Psi6 ~ T^{show(e3)}; at p1 = {p1_edge}: Psi2/Psi6 ~ T^{show(e2)}: both vanish", "exact")
    if e3 >= 0:
        return refuted(f"at p1 = -1/3, p2 = {p2_edge} (every printed case-2 condition holds): Psi3/Psi6 ~ T^{show(e3)} = "
                       f"Theta(1), no convergence: p2 <= -1/4 must be strict. The example's limit p1 = 12/25 at p2 = -49/100 "
                       f"gives Psi2/Psi6 ~ T^{show(e2)}, but it is excluded by the printed p1 + 2p2 < -1/2 and the example "
                       "writes eta < O(T^(12/25)) (open): that half of spec err-17 is no error of the paper", "exact",
                       at={"p1": sp.Rational(-1, 3), "p2": p2_edge})
    return refuted(f"at p1 = {p1_edge}, p2 = -49/100: Psi2/Psi6 ~ T^{show(e2)} = Theta(1)", "exact",
                   at={"p1": p1_edge, "p2": sp.Rational(-49, 100)})


@check(PAPER, "cor24_rate_T_minus_half",
       "Cor. 8/24: with eta = Theta(1) (p1 = 0) and eta_l = Theta(T^(-1/2)) (p2 = -1/2), min_t ||grad f(x_(t-1))||^2 = O(T^(-1/2)).",
       spec=("12",), severity="rate", depends=("thm20_psi_orders", "thm20_drift_squared_lipschitz", "lemma21_series_and_c_beta", "log_telescoping_lemma"))
def _cor24():
    """fedada2.txt Corollary 24 and proof, lines 1120-1140. Statements: Corollary 8 (line 170), Corollary 24 (line 1122)."""
    o = thm20_orders(case="small")
    exps = {k: _exponent(o[k] / o["Psi6"], 0, sp.Rational(-1, 2)) for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5")}
    if max(exps.values()) == sp.Rational(-1, 2):
        return verified("exponents of Psi_i/Psi_6: " + ", ".join(f"{k} T^{show(v)}" for k, v in exps.items())
                        + " (Psi5 carries log 2); the maximum is -1/2", "exact")
    return refuted(f"exponents {exps}", "exact")


@check(PAPER, "ceil_floor_and_bias_correction",
       "ceil(K/z) = floor((K-1)/z) + 1 for positive integers, and sum_(r=1)^n (1-b2) b2^(n-r) = 1 - b2^n.",
       spec=("13",), kind="textbook", severity="constant")
def _ceil():
    """fedada2.txt Lemma 30 (line 1557: update steps F = {0,...,floor((K-1)/z)} z + 1) and ADMU bias correction (line 1382)."""
    bad = [(k, z) for k in range(1, 201) for z in range(1, 201) if -(-k // z) != (k - 1) // z + 1]
    b = sp.Symbol("b", positive=True)
    ok = all(is_identity(finite_sum(lambda r: (1 - b) * b ** (n_ - r), 1, n_), 1 - b**n_) for n_ in range(1, 8))
    if bad or not ok:
        return refuted(f"counterexamples {bad[:3]}", "exact")
    return verified("exhaustive over 1 <= K, z <= 200; bias-correction sum exact for n = 1..7", "exact")


@check(PAPER, "lemma26_28_sums",
       "Lemma 26: sum_(p=1)^K sum_(l=1)^p 1 = K(K+1)/2; Lemma 28: sum_(p=1)^K sum_(r=1)^p b^(p-r) <= K(1-b^K)/(1-b); "
       "sum_(r=1)^n (b1^2/b2)^(n-r) is non-decreasing in n.",
       spec=("14",), severity="constant")
def _lemma26_28():
    """fedada2.txt Lemma 26 (line 1213) and Lemma 28 (line 1448). Displays 1230 (Lemma 26) and 1480-1482 (Lemma 28's sums)."""
    for KK in range(1, 9):
        if sum(p for p in range(1, KK + 1)) != KK * (KK + 1) // 2:
            return refuted(f"Lemma 26 count fails at K = {KK}")
        for bv in (Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)):
            lhs = sum(bv ** (p - r) for p in range(1, KK + 1) for r in range(1, p + 1))
            if KK * (1 - bv**KK) / (1 - bv) - lhs < 0:
                return refuted(f"Lemma 28 sum exceeds K(1-b^K)/(1-b) at K = {KK}, b = {bv}")
    return verified("counts exact for K = 1..8; K(1-b^K)/(1-b) - sum = sum_p (b^p - b^K)/(1-b) >= 0 (checked exactly at "
                    "b in {1/10, 1/2, 9/10}); the (b1^2/b2)-sum gains a positive term when n grows", "exact")


def admu_pseudo_gradient(gs, b1: float, b2: float, z: int, eps: float, bias: bool = True) -> float:
    """|Delta|/eta_l of one ADMU client (fedada2.txt Algorithm 7, lines 1360-1375): m, v start at 0, v and its bias
    correction 1 - b2^(floor((t-1)/z)+1) are updated only when (t-1)/z is an integer, x_t = x_(t-1) - eta_l m_hat/(sqrt(v_hat)+eps)."""
    m_ = v_ = vhat = 0.0
    total = 0.0
    for t_, g in enumerate(gs, 1):
        m_ = b1 * m_ + (1 - b1) * g
        mhat = m_ / (1 - b1**t_) if bias else m_
        if (t_ - 1) % z == 0:
            v_ = b2 * v_ + (1 - b2) * g * g
            vhat = v_ / (1 - b2 ** ((t_ - 1) // z + 1)) if bias else v_
        total += mhat / (math.sqrt(vhat) + eps)
    return abs(total)


def lemma28_phi1(K_: int, b1: float, b2: float, z: int, eps: float, G: float, phi0=None) -> float:
    """Phi_1/eta_l of Lemma 28 (line 1452) with |Xi| = 1: K sqrt(sum_(r<=ceil(K/z)) b1^(2n-2r)/b2^(n-r)) + Phi_0/eta_l,
    Phi_0 = K G eta_l (1 - b1^K)/eps as printed (``phi0(K, b1, G, eps)`` overrides it)."""
    n_ = -(-K_ // z)
    main = K_ * math.sqrt(sum(b1 ** (2 * n_ - 2 * r) / b2 ** (n_ - r) for r in range(1, n_ + 1)))
    return main + (K_ * G * (1 - b1**K_) / eps if phi0 is None else phi0(K_, b1, G, eps))


@check(PAPER, "lemma28_phi1_bound",
       "Lemma 28: an ADMU client's pseudo-gradient obeys |Delta| <= Phi_1 = |Xi| (eta_l K sqrt(sum_(r<=ceil(K/z)) "
       "b1^(2 ceil(K/z) - 2r)/b2^(ceil(K/z)-r)) + Phi_0), Phi_0 = K G eta_l (1 - b1^K)/eps, for gradients |g| <= G.",
       spec=("14", "3.9.6", "err-20"), severity="constant",
       corrected={"phi0": lambda K_, b1, G, eps: K_ * G / eps},
       hypotheses=(H_G, H_Z, H_EPS, Hyp("0 <= beta1 < 1, 0 < beta2 < 1", lambda p: 0 <= p["beta1"] < 1 and 0 < p["beta2"] < 1,
                                        "fedada2.txt Algorithm 7 (line 1357)")))
def _lemma28(phi0=lambda K_, b1, G, eps: K_ * G * (1 - b1**K_) / eps):
    """fedada2.txt Lemma 28 (line 1448-1452) with Algorithm 7's bias corrections (lines 1369-1375), |Xi| = 1, G = 1.

    Exhaustive search: K = 1..5, z = 1..3, b1 in {0, 1/2, 9/10}, b2 in {9/10, 999/1000}, eps in {1e-3, 0.1, 1},
    gradient sequences in {1e-6, 1, -1}^K.  ``phi0`` overrides Phi_0 (the paper's is printed in the claim). Phi_1 is display 1480-1482's final right side."""
    worst = (0.0, None)
    for K_ in range(1, 6):
        for z in (1, 2, 3):
            for b1 in (0.0, 0.5, 0.9):
                for b2 in (0.9, 0.999):
                    for eps in (1e-3, 0.1, 1.0):
                        bound = lemma28_phi1(K_, b1, b2, z, eps, 1.0, phi0)
                        for gs in itertools.product((1e-6, 1.0, -1.0), repeat=K_):
                            r = admu_pseudo_gradient(gs, b1, b2, z, eps) / bound
                            if r > worst[0]:
                                worst = (r, (K_, z, b1, b2, eps, gs, bound))
    r, (K_, z, b1, b2, eps, gs, bound) = worst
    if r <= 1 + 1e-12:
        return verified(f"largest |Delta|/Phi_1 over the search: {fmt(r)}", "numeric")
    # the spec's reading: z = 1, no bias correction, Phi_0 = 0, constant gradient (its counterexample)
    spec_delta = admu_pseudo_gradient((1.0, 1.0), 0.9, 0.999, 1, 1e-12, bias=False)
    spec_bound = lemma28_phi1(2, 0.9, 0.999, 1, 1e-12, 1.0, lambda *a: 0.0)
    z1 = max(admu_pseudo_gradient(g, b1_, b2_, 1, e) / lemma28_phi1(k, b1_, b2_, 1, e, 1.0, phi0)
             for k in range(1, 6) for b1_ in (0.0, 0.5, 0.9) for b2_ in (0.9, 0.999) for e in (1e-3, 0.1, 1.0)
             for g in itertools.product((1e-6, 1.0, -1.0), repeat=k))
    return refuted(f"K = {K_}, z = {z}, b1 = {b1}, b2 = {b2}, eps = {eps:g}, G = 1, gradients ({', '.join(f'{g:g}' for g in gs)}) "
                   f"(a tiny gradient at the preconditioner update, then G while v_hat is frozen): |Delta|/eta_l = "
                   f"{fmt(r * bound)} > Phi_1/eta_l = {fmt(bound)} with Phi_0 included and Algorithm 7's bias correction. For "
                   f"z = 1 the bound holds in the same search (largest ratio {fmt(z1)}); the spec's counterexample (z = 1, no bias "
                   f"correction, Phi_0 dropped: {fmt(spec_delta)} > {fmt(spec_bound)}) refutes the spec's reading, not the "
                   "paper. |m_hat| <= G gives the valid Phi_0 = K G eta_l/eps", "numeric",
                   at={"K": K_, "z": z, "beta1": b1, "beta2": b2, "eps": eps, "G": 1.0, "gradients": gs})


@check(PAPER, "derived_lipschitz_Ltilde",
       "||grad F_i(x) - grad F_j(y)|| <= 2 sqrt(d) G <= (2 sqrt(d) G/(eta_l eps_s)) ||x - y|| whenever ||x - y|| >= eta_l eps_s.",
       spec=("15", "3.9.3"), kind="derived", severity="rate")
def _ltilde():
    """fedada2.txt Assumption 2 and the derived cross-client Lipschitz constant L~ (lines 138-142)."""
    G, dd, el, es, r = pos("G d eta_l eps_s r")
    dist = el * es * (1 + r)  # any ||x - y|| >= eta_l eps_s
    gap = sp.simplify(2 * sp.sqrt(dd) * G / (el * es) * dist - 2 * sp.sqrt(dd) * G)
    if is_identity(gap, 2 * sp.sqrt(dd) * G * r):
        return verified(f"each coordinate difference is <= 2G, so the norm is <= 2 sqrt(d) G; L~ ||x-y|| - 2 sqrt(d) G = {show(gap)} >= 0 "
                        "when ||x-y|| = eta_l eps_s (1+r), r >= 0 (L~ -> oo as eps_s -> 0)")
    return refuted(f"gap {show(gap)}")


@check(PAPER, "dp_accounting_epsilon",
       "DP setting (App. H): sampling rate 0.1, noise multiplier 1, 500 rounds give (eps, delta) = (13.1, 0.0025) with optimal RDP "
       "order 2.0: eps_RDP(2) = 500 log(1 + q^2(e^(1/sigma^2) - 1)) = 8.5184 and eps = rdp + log(1 - 1/a) - (log delta + log a)/(a-1).",
       spec=("16",), severity="typo")
def _dp():
    """fedada2.txt line 1639."""
    q, sig, Tn, delta = 0.1, 1.0, 500, 0.0025

    def rdp(order: int) -> float:
        s = sum(math.comb(order, k) * (1 - q) ** (order - k) * q**k * math.exp((k * k - k) / (2 * sig**2)) for k in range(order + 1))
        return Tn * math.log(s) / (order - 1)

    def eps_of(order: int) -> float:
        return rdp(order) + math.log1p(-1 / order) - (math.log(delta) + math.log(order)) / (order - 1)

    e2 = eps_of(2)
    others = {o: eps_of(o) for o in range(3, 9)}
    if abs(rdp(2) - 8.5184) < 1e-3 and round(e2, 1) == 13.1 and all(v > e2 for v in others.values()):
        return verified(f"eps_RDP(2) = {rdp(2):.4f}, eps = {e2:.3f} (rounds to 13.1); integer orders 3..8 give larger eps "
                        f"(min {min(others.values()):.2f})", "numeric")
    return refuted(f"eps_RDP(2) = {rdp(2):.4f}, eps = {e2:.3f}, others {others}", "numeric")


def _hetero_run(T_: int, sampler: str) -> float:
    """Server AdaGrad (eta = 1, tau = 1e-3, beta1 = 0) + client AdaGrad (zero init, K = 5, eta_l = T^-1/2, eps = 1e-3)
    on F_1 = log cosh(x-1), F_2 = log cosh(x+1), x_0 = 3; returns min_t |grad f(x_t)|^2 (spec sec. 3.9.1)."""
    x_, vs, tau, K_, el, eps = 3.0, 1e-6, 1e-3, 5, T_**-0.5, 1e-3
    centres = (1.0, -1.0)
    best = math.inf
    for _ in range(T_):
        best = min(best, (0.5 * (math.tanh(x_ - 1) + math.tanh(x_ + 1))) ** 2)
        clients = (0,) if sampler == "always1" else (0, 1)
        delta = 0.0
        for c in clients:
            y, v = x_, 0.0
            for _ in range(K_):
                g = math.tanh(y - centres[c])
                v += g * g
                y -= el * g / (math.sqrt(v) + eps)
            delta += (y - x_) / len(clients)
        vs += delta * delta
        x_ += delta / (math.sqrt(vs) + tau)
    return best


@check(PAPER, "any_sampling_deterministic_guarantee",
       "Theorem 6 holds deterministically for any initialisation and any client subsampling: with eta_l = T^(-1/2), "
       "min_t ||grad f(x_(t-1))||^2 = O(T^(-1/2)).",
       spec=("3.9.1", "err-16"), severity="rate", depends=("thm20_drift_squared_lipschitz",),
       hypotheses=(Hyp("each F_i is L-smooth with |grad F_i| <= G (Assumptions 1, 2): log cosh has L = 1, |tanh| <= 1",
                       lambda p: p["L"] == 1 and p["G"] == 1, "fedada2.txt Assumptions 1-2"),
                   Hyp("server and client AdaGrad (optimizers the text after Theorem 25 says satisfy its condition)",
                       lambda p: p["optimizers"] == "AdaGrad/AdaGrad", "fedada2.txt line 1211"),
                   Hyp("a client subsampling Algorithm 1 allows (Theorem 6/20 put no condition on S^t)",
                       lambda p: p["sampling"] in ("always client 1", "full"), "fedada2.txt lines 146, 842")))
def _any_sampling():
    """fedada2.txt Theorem 6 (line 146, 'deterministically ... for any client subsampling') and App. C assumptions."""
    vals = {T_: _hetero_run(T_, "always1") for T_ in (100, 1000, 10000)}
    full = _hetero_run(1000, "full")
    if vals[10000] * 100 ** 0.5 < vals[100] / 2:
        return verified(f"decays: {vals}", "numeric")
    return refuted("N = 2 heterogeneous clients F_1 = log cosh(x-1), F_2 = log cosh(x+1) (L = 1, |grad| <= 1), x_0 = 3, server "
                   "AdaGrad + client AdaGrad, always sampling client 1: min_t |grad f|^2 = "
                   + ", ".join(f"{fmt(v, 3)} (T = {k})" for k, v in vals.items())
                   + f", no T^-1/2 decay (x_t -> 1 where grad f = tanh(2)/2); full participation gives {full:.1e} at T = 1000. "
                   "The drift step bounds the heterogeneity gap at p = 1 by L~ * 0", "numeric",
                   at={"L": 1, "G": 1, "optimizers": "AdaGrad/AdaGrad", "sampling": "always client 1", "x_0": 3,
                       "eta_l": "T^(-1/2)"})


@check(PAPER, "server_adam_v_lower_bound",
       "App. C.2 (server Adam): v~_t >= tau^2 for all t when v~_0 = tau^2.",
       spec=("3.9.5", "err-21"), severity="constant", corrected={"floor": lambda b2, t_, v0: b2**t_ * v0},
       hypotheses=(Hyp("0 < beta2 < 1, tau > 0, v~_0 >= tau^2 (the initialisation)", lambda p: 0 < p["beta2"] < 1 and p["tau"] > 0
                       and p["v~_0"] >= p["tau"] ** 2, "fedada2.txt line 1169 (initialisation), App. C.2 line 1136"),
                   Hyp("the pseudo-gradient is a possible one (Delta = 0 when the clients' gradients vanish)",
                       lambda p: p["Delta"] == 0, "fedada2.txt Algorithm (server update)")))
def _adam_v(floor=lambda b2, t_, v0: v0):
    """fedada2.txt App. C.2 (line 1136: server EMA v~_t = b2^t v~_0 + (1-b2) sum ...; the C.2 bounds divide by tau^2 using
    v~_0 >= tau^2); ``floor(b2, t, v~_0)``: the claimed lower bound of v~_t (printed: v~_0 = tau^2).  Exact over
    t = 1..5 rounds of zero pseudo-gradients (the worst case) at b2 = 9/10."""
    b2, tau = Fraction(9, 10), Fraction(1, 100)
    v = tau**2
    for t_ in range(1, 6):
        v = b2 * v + (1 - b2) * 0
        if v < floor(b2, t_, tau**2):
            break
    else:
        return verified("v~_t >= the claimed floor for t = 1..5 with zero pseudo-gradients (the smallest v~_t)", "exact")
    v1 = b2 * tau**2
    return refuted(f"with pseudo-gradient 0 in round 1: v~_1 = b2 tau^2 = {v1} < tau^2 = {tau**2} (b2 = 9/10); the EMA only "
                   "gives v~_t >= b2^t v~_0", "exact", at={"beta2": b2, "tau": tau, "v~_0": tau**2, "Delta": 0, "t": 1})


@check(PAPER, "lemma15_statement_vs_proof",
       "Lemma 15's statement Phi_1 = eta_l(sqrt(ceil(K/z)) log^(1/2)(1 + ceil(K/z) G^2/eps^2) + eta_l (K - ceil(K/z)) G/(sqrt(v0)+eps)) "
       "bounds |Delta_i| for every admissible gradient sequence.",
       spec=("3.2", "err-15"), severity="proof", corrected={"second": lambda el: 1},
       hypotheses=(H_G, H_Z, H_EPS, Hyp("eta_l > 0, v0 >= 0", lambda p: p["eta_l"] > 0 and p["v0"] >= 0, "fedada2.txt Algorithm 2")))
def _lemma15(second=lambda el: el):
    """fedada2.txt Lemma 15 statement (line 743) vs its proof's last line (eta_l T_1 + eta_l(K - ceil(K/z))G/(sqrt(v0)+eps))."""
    el, G, eps, v0, K_, z = 0.01, 1.0, 1e-6, 0.0, 2, 2
    # gradients g_1 = 0 (update step), g_2 = G (delayed step reuses v = v0 + g_1^2 = 0)
    v = v0 + 0.0
    delta = el * 0.0 / (math.sqrt(v) + eps) + el * G / (math.sqrt(v) + eps)
    nu_ = -(-K_ // z)
    # ``second(eta_l)``: the factor in front of the second term inside the bracket (the statement prints an extra eta_l)
    stated = el * (math.sqrt(nu_) * math.sqrt(math.log(1 + nu_ * G**2 / eps**2)) + second(el) * (K_ - nu_) * G / (math.sqrt(v0) + eps))
    proof = el * (math.sqrt(nu_) * math.sqrt(math.log(1 + nu_ * G**2 / eps**2)) + (K_ - nu_) * G / (math.sqrt(v0) + eps))
    if delta <= stated:
        return verified(f"|Delta| = {fmt(delta)} <= Phi_1 = {fmt(stated)} at the proof's extremal sequence (gradients (0, G))", "exact")
    return refuted(f"K = 2, z = 2, eta_l = 0.01, G = 1, eps = 1e-6, v0 = 0, gradients (0, G): |Delta| = {fmt(delta)} > stated "
                   f"Phi_1 = {fmt(stated)}; the proof's version (eta_l, not eta_l^2, on the second term) gives {fmt(proof)}", "exact",
                   at={"K": K_, "z": z, "eta_l": el, "G": G, "eps": eps, "v0": v0, "gradients": (0.0, G)})
from . import fedada2_steps as _steps  # noqa: E402,F401  (the proof-step map and its checks, registered after this module)

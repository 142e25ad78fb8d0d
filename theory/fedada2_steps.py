"""FedAda2: the proof-step map of every numbered result and the checks that evaluate the displayed steps.

Results (fedada2.txt): main text Proposition 2, Theorem 4, Proposition 5, Theorem 6, Corollaries 7-8 (statements only: their
proofs are Proposition 9, Theorem 13, Proposition 14, Theorem 20 and Corollaries 23-24); Appendix A Propositions 9-10,
Theorem 13, Proposition 14; Appendix C Lemmas 15-18, Theorem 20, Lemmas 21-22, Corollaries 23-24; Appendix D Theorem 25,
Lemma 26; Appendices E-F Corollary 27, Lemma 28, Corollary 29, Lemma 30.  A result whose statement and proof contain no
display (e.g. Proposition 14) lists the inline formula of its statement as its one step.

Displays are evaluated on seeded instances of the constructions and algorithms they are about:

* Proposition 9 (i): FedAvg on F_i = x^2/2 + xi_i x with xi_i ~ t_(i+1) (line 340); the iterate is affine in the noise, so
  second moments are exact (Var t_nu = nu/(nu-2), infinite for client 1's t_2);
* Propositions 9 (ii)-(iv) and 10: the displayed relations pathwise on noise grids or seeded t-paths, and the expectations
  of (ii) by quadrature under the t density;
* Theorem 13: a round of FedAvg on f = mu/2 ||x||^2 with a heavy-tailed client 1 (t_2 noise, sampled with positive
  probability) and light clients 2, 3 whose noise is uncentered (line 534 allows it), exact over their finite laws;
* Lemmas 15-17, 22, 28, 30: the bounds on seeded gradient sequences (SM3-II / delayed AdaGrad / ADMU without bias
  correction as the proofs write them);
* Theorem 20 (and Lemma 16): seeded deterministic runs of Algorithm 2 (server AdaGrad with momentum, client SM3-II AdaGrad
  with delay z, full gradients, heterogeneous F_i = sum_j a_ij (1 - cos(x_j - c_ij))), every display per round;
* Theorem 25 and Lemma 26: seeded runs of Algorithm 5 with two optimizer strategies that satisfy the printed update
  condition (1193); Corollaries 27 and 29: the bound with their constants on runs of Algorithms 8 and 10.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy import integrate

from .core import H as Hyp
from .core import check, refuted, verified
from .replay import Rel, relations_result
from .steps import S, result

PAPER = "fedada2"
F = "fedada2.txt"
INF = math.inf
BIG = 1e300


def _safe(lhs: float, op: str, rhs: float):
    """A relation row with infinite sides decided exactly (both infinite and equal counts as holding)."""
    lhs, rhs = float(lhs), float(rhs)
    if math.isinf(lhs) or math.isinf(rhs):
        ok = {"=": lhs == rhs, "<=": lhs <= rhs, ">=": lhs >= rhs}[op]
        if ok:
            return (0.0, "=", 0.0)
        return (min(max(lhs, -BIG), BIG), op, min(max(rhs, -BIG), BIG))
    return (lhs, op, rhs)


def _worst(lhs, op: str, rhs):
    """The row (lhs, op, rhs) of the arrays where the relation is tightest or most violated."""
    lhs, rhs = np.broadcast_arrays(np.asarray(lhs, float), np.asarray(rhs, float))
    scale = 1e-12 + np.abs(lhs) + np.abs(rhs)
    gap = {"<=": rhs - lhs, ">=": lhs - rhs, "=": -np.abs(lhs - rhs)}[op] / scale
    k = int(np.argmin(gap))
    return (float(lhs.flat[k]), op, float(rhs.flat[k]))


def _t_pdf(nu: float):
    c = math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / math.sqrt(math.pi * nu)
    return lambda s: c * (1 + s * s / nu) ** (-(nu + 1) / 2)


def _t_var(nu: float) -> float:
    return nu / (nu - 2) if nu > 2 else INF


def _texp(fn, nu: float, centre: float) -> float:
    """E fn(xi) for xi ~ t_nu by quadrature, split at 0 and around ``centre`` (where fn has a kink)."""
    pdf = _t_pdf(nu)
    pts = sorted({0.0, centre, centre - 1, centre + 1, centre - 0.05, centre + 0.05, -1.0, 1.0})
    g = lambda s: fn(s) * pdf(s)
    tot = integrate.quad(g, -np.inf, pts[0], limit=200)[0] + integrate.quad(g, pts[-1], np.inf, limit=200)[0]
    for lo, hi in zip(pts[:-1], pts[1:]):
        tot += integrate.quad(g, lo, hi, limit=200, epsabs=1e-13)[0]
    return tot


# ===========================================================================
# Proposition 9 (i): FedAvg on F_i = x^2/2 + xi_i x, xi_i ~ t_(i+1): the iterate is affine in the noise
# ===========================================================================


@dataclass
class AvgWorld:
    """One FedAvg round of Prop. 9 (i)'s construction (line 340): N clients, K local SGD steps, client i's noise t_(nus[i-1])."""

    name: str
    N: int
    K: int
    eta: float
    xt: float
    nus: tuple
    sampling: tuple  # ((clients...), probability), the multisets of line 344

    def __post_init__(self):
        self.nv = self.N * self.K
        self.var = np.array([_t_var(self.nus[i]) for i in range(self.N) for _ in range(self.K)])

    def e(self, i: int, p: int) -> np.ndarray:
        """The affine form of the noise xi_(i,p) (client i 1-based, local index p = 0..K-1)."""
        v = np.zeros(self.nv + 1)
        v[1 + (i - 1) * self.K + p] = 1.0
        return v

    def const(self, c: float) -> np.ndarray:
        v = np.zeros(self.nv + 1)
        v[0] = c
        return v

    def E2(self, aff: np.ndarray) -> float:
        """E[(c + sum a_k xi_k)^2] = c^2 + sum a_k^2 Var(xi_k) (independent, zero mean); infinite when an infinite-variance
        noise enters with a nonzero coefficient."""
        a = aff[1:]
        if np.any((np.abs(a) > 1e-14) & np.isinf(self.var)):
            return INF
        return float(aff[0] ** 2 + np.sum(np.where(np.isinf(self.var), 0.0, a**2 * np.nan_to_num(self.var, posinf=0.0))))

    def local(self, i: int) -> list:
        """x_(i,0..K) of client i's local SGD (gradient of F_i at x is x + xi)."""
        xs = [self.const(self.xt)]
        for p in range(self.K):
            xs.append(xs[-1] - self.eta * (xs[-1] + self.e(i, p)))
        return xs

    def averaged(self, S_: tuple) -> np.ndarray:
        """FedAvg's x_(t+1) as the average of the clients' final models."""
        return sum(self.local(i)[self.K] for i in S_) / len(S_)

    def gradient_sum(self, S_: tuple) -> np.ndarray:
        """x_t - eta/|S| sum_i sum_(l=1)^K (grad f(x_(i,l-1)) + xi_(i,l-1)) (line 352)."""
        return self.const(self.xt) - self.eta / len(S_) * sum(self.local(i)[l - 1] + self.e(i, l - 1)
                                                             for i in S_ for l in range(1, self.K + 1))

    def point(self) -> dict:
        return {"instance": self.name, "N": self.N, "K": self.K, "eta_l": self.eta, "x_t": self.xt, "nu": self.nus,
                "sampling": self.sampling}


P9_WORLDS = (
    AvgWorld("A", 3, 2, 0.3, 1.5, (2, 3, 4), (((1, 2), 0.3), ((2, 3), 0.5), ((1, 3), 0.2))),
    AvgWorld("B", 3, 3, 0.7, -0.8, (2, 3, 4), (((1, 2, 3), 0.6), ((2, 3), 0.4))),
    AvgWorld("C (light-tailed variant)", 3, 2, 0.5, 0.4, (3, 4, 5), (((1, 2), 0.5), ((1, 3), 0.5))),
)


def _rel_352(w: AvgWorld):
    lhs = sum(p * w.E2(w.averaged(S_)) for S_, p in w.sampling)
    per = [p * w.E2(w.gradient_sum(S_)) for S_, p in w.sampling]
    rows = [_safe(lhs, "=", sum(per))]
    for (S_, p), val in zip(w.sampling, per):
        low = p * w.E2(w.const(w.xt) - w.eta / len(S_) * sum(w.local(i)[l - 1] + w.e(i, l - 1) for i in S_
                                                             for l in range(1, w.K + 1)))
        rows.append(_safe(sum(per), ">=", low))
    return rows


def _a_coeffs(w: AvgWorld, l: int):
    """a_t = (1-eta)^(l-1) and a_(i,p) = eta (1-eta)^(l-2-p): the polynomials line 364 says exist."""
    return (1 - w.eta) ** (l - 1), [w.eta * (1 - w.eta) ** (l - 2 - p) for p in range(l - 1)]


def _rel_359(w: AvgWorld):
    rows = []
    for i in range(1, w.N + 1):
        xs = w.local(i)
        for l in range(2, w.K + 1):
            x_l1 = xs[l - 1]
            step = xs[l - 2] - w.eta * (xs[l - 2] + w.e(i, l - 2))
            tele = w.const(w.xt) - w.eta * sum(xs[p] + w.e(i, p) for p in range(l - 1))
            at, ap = _a_coeffs(w, l)
            poly = w.const(at * w.xt) - sum(ap[p] * w.e(i, p) for p in range(l - 1))
            for other in (step, tele, poly):
                rows.append((float(np.abs(x_l1 - other).max()), "=", 0.0))
    return rows


def _form_366(w: AvgWorld, S_, i, l):
    at, ap = _a_coeffs(w, l)
    return w.const(at * w.xt) - sum(ap[p] * w.e(i, p) for p in range(l - 1))


def _rel_366(w: AvgWorld, last_noise_sign: float):
    rows = []
    for S_, p in w.sampling:
        n = len(S_)
        v355 = p * w.E2(w.const(w.xt) - w.eta / n * sum(w.local(i)[l - 1] + w.e(i, l - 1) for i in S_ for l in range(1, w.K + 1)))
        v366 = p * w.E2(w.const(w.xt) - w.eta / n * sum(_form_366(w, S_, i, l) + w.e(i, l - 1) for i in S_ for l in range(1, w.K + 1)))
        coef_x = 1 - w.eta / n * sum(_a_coeffs(w, l)[0] for i in S_ for l in range(1, w.K + 1))
        noise = sum(sum(_a_coeffs(w, l)[1][q] * w.e(i, q) for q in range(l - 1)) + last_noise_sign * w.e(i, l - 1)
                    for i in S_ for l in range(1, w.K + 1))
        v367 = p * w.E2(w.const(coef_x * w.xt) + w.eta / n * noise)
        v368 = p * w.E2(w.const(coef_x * w.xt)) + w.eta**2 * p / n**2 * w.E2(noise)
        first = S_[0]
        v369 = w.eta**2 * p * w.E2(w.e(first, w.K - 1)) / n**2
        rows += [_safe(v355, "=", v366), _safe(v366, "=", v367), _safe(v367, "=", v368), _safe(v368, ">=", v369)]
    return rows


H_P9 = (Hyp("Prop. 9's construction: F_i(x, xi_i) = x^2/2 + xi_i x with xi_i ~ t_(i+1) (nu_i = i + 1), independent across clients "
            "and local steps", lambda p: tuple(p["nu"]) == tuple(range(2, 2 + len(p["nu"]))), "fedada2.txt line 340"),
        Hyp("eta_l > 0, K >= 1, any sampling strategy: probabilities p_C(r) > 0 summing to 1", lambda p: p["eta_l"] > 0
            and p["K"] >= 1 and abs(sum(q for _, q in p["sampling"]) - 1) < 1e-12 and all(q > 0 for _, q in p["sampling"]),
            "fedada2.txt lines 320, 344"))


def _describe_avg(w: AvgWorld) -> str:
    return (f"instance {w.name} (N = {w.N}, K = {w.K}, eta_l = {w.eta:g}, x_t = {w.xt:g}, nu = {w.nus}, sampling "
            + ", ".join(f"{set(S_)} w.p. {p:g}" for S_, p in w.sampling) + ")")


@check(PAPER, "prop9_i_steps",
       "Proposition 9 (i)'s proof: the second moment of x_(t+1) under FedAvg on F_i = x^2/2 + xi_i x (352-355), the unrolled local "
       "iterate x_(i,l-1) = a_t x_t - sum a_(i,p) xi_(i,p) (359-362), and the regrouping into a noise-free part and the noise "
       "(366-369).",
       spec=("6",), severity="typo", corrected={"last_noise_sign": -1}, depends=("student_t2_infinite_variance",), hypotheses=H_P9)
def _prop9_i(last_noise_sign=1):
    """fedada2.txt Prop. 2 (i) (line 52) / Prop. 9 (i) and its proof, displays 352-355, 359-362, 366-369 (line 367 regroups with +xi_(i,l-1); in 366 the
    noise enters x_(t+1) as -eta/|S| xi_(i,l-1): ``last_noise_sign`` is the sign 367 gives it, printed +1).  Second moments
    exact: the iterate is affine in the noise, Var t_nu = nu/(nu - 2) (infinite for nu = 2); instances A, B are the
    construction, C a light-tailed variant (all nu > 2) on which the infinite moments become finite."""
    rels = [Rel("352-355", "E||x_(t+1)||^2: FedAvg average = gradient sum; the sum over multisets; one multiset's term",
                _rel_352),
            Rel("359-362", "x_(i,l-1) unrolled: one step, the telescoped sum, a_t x_t - sum a_(i,p) xi_(i,p)", _rel_359),
            Rel("366-369", "substitution, regrouping (367), the split into noise-free part and noise (368), the last noise",
                lambda w: _rel_366(w, last_noise_sign))]
    res = relations_result(rels, P9_WORLDS, "Prop. 9 (i)'s displays", AvgWorld.point, describe=_describe_avg)
    if res.status == "refuted" and last_noise_sign == 1:
        res = dataclasses.replace(res, evidence=res.evidence + "; line 367 gives xi_(i,l-1) the sign + where 366 has -: for K >= 2 "
                                  "the coefficient of xi_(i,0) becomes eta/|S| (1 + eta) instead of -eta/|S| (1 - eta), and the "
                                  "second moments differ on a multiset without the t_2 client (with it both sides are infinite, so "
                                  "the conclusion E||grad f(x_(t+1))||^2 = oo of 369 is unaffected)")
    return res


# ===========================================================================
# Proposition 9 (ii)-(iv): client AdaGrad steps g/(|g| + eps)
# ===========================================================================


def _adagrad_step(x, xis, eta, eps):
    """(2) with K = 1: x - eta/|S| sum (x + xi)/(|x + xi| + eps) (line 377)."""
    g = x + np.asarray(xis)
    return x - eta / len(xis) * np.sum(g / (np.abs(g) + eps), axis=0)


P9II = tuple(dict(x=x, eps=e, eta=e * f_, nu=nu) for x, e, f_, nu in
             ((0.5, 1.0, 1.0, 2), (2.0, 0.5, 0.5, 2), (-1.2, 1.0, 0.5, 3), (0.1, 0.5, 1.0, 3)))
NOISE_GRID = (-7.0, -1.3, -0.2, 0.0, 0.45, 1.0, 3.5)


def _rel_377(q):
    rows = []
    for xis in itertools.product(NOISE_GRID, repeat=2):
        xis = np.array(xis)
        a = _adagrad_step(q["x"], xis, q["eta"], q["eps"])
        g = q["x"] + xis
        b = q["x"] - q["eta"] / 2 * np.sum(g / (np.abs(g) + q["eps"]))
        c = q["x"] * (1 - q["eta"] / 2 * np.sum(1 / (np.abs(g) + q["eps"]))) - q["eta"] / 2 * np.sum(xis / (np.abs(g) + q["eps"]))
        rows += [(a, "=", b), (b, "=", c)]
    return rows


def _rel_391(q):
    x0, eps, eta, nu = q["x"], q["eps"], q["eta"], q["nu"]
    lhs = _texp(lambda s: abs(x0 - eta * (x0 + s) / (abs(x0 + s) + eps)), nu, -x0)
    inv = _texp(lambda s: 1 / (abs(x0 + s) + eps), nu, -x0)
    ab = _texp(lambda s: abs(s) / (abs(x0 + s) + eps), nu, -x0)
    return [(lhs, "<=", abs(x0) * (1 - eta * inv) + eta * ab)]


def _rel_419(q):
    B, eh, t0, a0 = 1.7, 0.05, 3, 2.0
    a = [a0]
    rows = []
    for t_ in range(0, 12):
        lr = 1 / ((t_ + t0) * (1 - eh))
        rows.append((1 - lr * (1 - eh), "=", (t_ + t0 - 1) / (t_ + t0)))
        a.append((t_ + t0 - 1) / (t_ + t0) * a[-1] + B / ((t_ + t0) * (1 - eh)))
    for t_ in range(1, 12):
        rows.append((a[t_ + 1], "<=", (t_ + t0 - 2) / (t_ + t0) * a[t_ - 1] + 2 * B / ((t_ + t0) * (1 - eh))))
        rows.append((a[t_ + 1], "<=", (t0 - 1) / (t_ + t0) * a0 + (t_ + 1) * B / ((t_ + t0) * (1 - eh))))
        rows.append(((t0 - 1) / (t_ + t0) * a0 + (t_ + 1) * B / ((t_ + t0) * (1 - eh)), "<=", (t0 - 1) * a0 / t_ + B / (1 - eh)))
    return rows


@check(PAPER, "prop9_ii_steps",
       "Proposition 9 (ii)'s proof: the client-AdaGrad update with K = 1 in three forms (377-379), the bound on E_t||x_(t+1)|| for "
       "eta_l <= eps (391), and the recursion under eta_l^t = 1/((t + t0)(1 - eps_hat)) unrolled (419-422).",
       spec=("7",), severity="rate", depends=("prop9_ii_recursion",), hypotheses=H_P9)
def _prop9_ii():
    """fedada2.txt Prop. 2 (ii) (line 56) / Prop. 9 (ii); its proof's displays 377-379 (pathwise on a 7 x 7 grid of two clients' noise values), 391
    (E_t under t_nu by quadrature, one sampled client, eta_l <= eps as line 385 imposes) and 419-422 (the recursion run with
    equality from a_0, B = 1.7, eps_hat = 0.05, t0 = 3; the O(1/t) of 422 read as (t0 - 1) a_0/t)."""
    rels = [Rel("377-379", "update (2) with K = 1 in three forms", _rel_377), Rel("391", "E_t||x_(t+1)|| bound", _rel_391),
            Rel("419-422", "recursion under the schedule, unrolled", _rel_419)]
    return relations_result(rels, P9II, "Prop. 9 (ii)'s displays", lambda q: dict(q), rtol=1e-7,
                            describe=lambda q: f"x_t = {q['x']:g}, eps = {q['eps']:g}, eta_l = {q['eta']:g}, t_{q['nu']} noise")


def _rel_430(q):
    rows = []
    for xis in itertools.product(NOISE_GRID, repeat=2):
        xis = np.array(xis)
        x0, eta, eps = q["x"], q["eta"], q["eps"]
        x1 = _adagrad_step(x0, xis, eta, eps)
        den = np.abs(x0 + xis) + eps
        r430 = 2 * x0**2 * (1 - eta / 2 * np.sum(1 / den)) ** 2 + 2 * eta**2 / 4 * np.sum(np.abs(xis) / den) ** 2
        r431 = 2 * x0**2 * (1 - eta / 2 * np.sum(1 / den)) ** 2 + 2 * eta**2 / 2 * np.sum((np.abs(xis) / den) ** 2)
        rows += [(x1**2, "<=", r430), (r430, "<=", r431)]
    return rows


@check(PAPER, "prop9_iii_steps",
       "Proposition 9 (iii)'s proof: ||x_(t+1)||^2 <= 2||x_t||^2 (1 - ...)^2 + (2 eta_l^2/|S|^2)(sum ...)^2 <= ... + (2 eta_l^2/|S|) "
       "sum (...)^2 (430-431).",
       spec=("7",), severity="constant", hypotheses=H_P9)
def _prop9_iii():
    """fedada2.txt proof of Prop. 9 (iii), display 430-431, pathwise for two sampled clients on a 7 x 7 grid of noise values
    at four (x_t, eps, eta_l <= 2 eps) settings."""
    qs = tuple(dict(x=x, eps=e, eta=h) for x, e, h in ((0.5, 1.0, 2.0), (2.0, 0.5, 0.3), (-0.05, 0.2, 0.4), (1.0, 1.0, 1.0)))
    return relations_result([Rel("430-431", "(3) squared, Young and Jensen", _rel_430)], qs, "Prop. 9 (iii)'s display",
                            lambda q: dict(q), describe=lambda q: f"x_t = {q['x']:g}, eps = {q['eps']:g}, eta_l = {q['eta']:g}")


def _p9iv_paths(x0: float, K_: int, T_: int, eps: float, seed: int, n: int = 40):
    """n seeded paths of (2) with eta_l^t = 1/t^2, clients 1 and 2 (t_2 and t_3 noise) sampled every round."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x_, tot = x0, 0.0
        for tt in range(1, T_ + 1):
            el = 1.0 / tt**2
            ys = []
            for nu in (2, 3):
                y, acc = x_, 0.0
                for _k in range(K_):
                    g = y + r.standard_t(nu)
                    acc += g / (abs(g) + eps)
                    y -= el * g / (abs(g) + eps)
                ys.append(acc)
            x_ = x_ - el / 2 * sum(ys)
            tot += el / 2 * sum(ys)
        out.append((x_, tot))
    return out


def _rel_451(q, sum_bound):
    rows = []
    for xT, tot in _p9iv_paths(q["x0"], q["K"], q["T"], q["eps"], q["seed"]):
        x0 = q["x0"]
        rows += [(abs(xT - x0), "=", abs(tot)), (abs(abs(xT) - abs(x0)), "<=", abs(tot)), (abs(xT), "<=", abs(x0) + abs(tot)),
                 (xT**2, "<=", 2 * x0**2 + 2 * tot**2)]
    return rows


def _rel_458(q, sum_bound):
    s = sum(q["K"] / t_**2 for t_ in range(1, q["T"] + 1))
    rows = [(tot**2, "<=", s**2) for _, tot in _p9iv_paths(q["x0"], q["K"], q["T"], q["eps"], q["seed"])]
    return rows + [(s**2, "<=", (q["K"] * float(sum_bound)) ** 2)]


@check(PAPER, "prop9_iv_steps",
       "Proposition 9 (iv)'s proof: telescoping (2) and the triangle inequality give E||x_(T+1)||^2 <= 2||x_0||^2 + 2 E||sum ...||^2 "
       "(451-454), and the schedule eta_l^t = 1/t^2 bounds the sum by ||sum_t K eta_l^t||^2 <= ||K int_1^oo x^-2 dx||^2 (458-459).",
       spec=("8", "2.7.4"), severity="constant", corrected={"sum_bound": sp.pi**2 / 6}, depends=("prop9_iv_sum_vs_integral",),
       hypotheses=(H_P9[0], Hyp("eta_l^t = 1/t^2 (line 445), K >= 1, T >= 1", lambda p: p["eta_l"] == "1/t^2" and p["K"] >= 1
                                and p["T"] >= 1, "fedada2.txt line 445")))
def _prop9_iv(sum_bound=sp.Integer(1)):
    """fedada2.txt proof of Prop. 9 (iv), displays 451-454 and 458-459, pathwise on 40 seeded paths per setting (clients with
    t_2 and t_3 noise, K local steps of (2), eps = 0.1; the expectations follow from the pathwise relations);
    ``sum_bound``: the bound 459 puts on sum_(t <= T) t^-2 (printed int_1^oo x^-2 dx = 1)."""
    qs = tuple(dict(x0=x0, K=k, T=T_, eps=0.1, seed=s, nu=(2, 3), eta_l="1/t^2") for x0, k, T_, s in
               ((0.0, 2, 4, 1), (0.7, 1, 3, 2), (-1.5, 3, 5, 3)))
    rels = [Rel("451-454", "telescoping, triangle inequality, (a + b)^2 <= 2a^2 + 2b^2", lambda q: _rel_451(q, sum_bound)),
            Rel("458-459", "each normalised step has length < 1; the schedule's sum", lambda q: _rel_458(q, sum_bound))]
    return relations_result(rels, qs, "Prop. 9 (iv)'s displays",
                            lambda q: {"x_0": q["x0"], "K": q["K"], "T": q["T"], "eps": q["eps"], "nu": (2, 3),
                                       "eta_l": q["eta_l"], "sampling": (((1, 2), 1.0),)},
                            describe=lambda q: f"x_0 = {q['x0']:g}, K = {q['K']}, T = {q['T']}, eps = 0.1, eta_l^t = 1/t^2")


# ===========================================================================
# Proposition 10: one Cauchy client among Gaussian ones, K = 1 (pathwise)
# ===========================================================================


def _rel_503(q):
    rows = []
    eta, xt, n = q["eta"], q["x"], 3
    for xis in itertools.product((-40.0, -2.0, -0.3, 0.0, 0.7, 5.0), (-1.1, 0.0, 0.8), (-0.4, 0.9)):
        xi = np.array(xis)
        x1 = xt - eta / n * np.sum(xt + xi)                  # FedAvg, grad f(x_(i,0)) = x_t
        rest = (1 - eta / n) * xt - eta / n * np.sum(xt + xi[1:])
        rows += [(abs(x1), "=", abs(xt - eta / n * np.sum(xt + xi))),
                 (abs(x1), ">=", abs(eta / n * xi[0]) - abs(rest)),
                 (abs(rest), "=", abs((1 - eta) * xt - eta / n * np.sum(xi[1:]))),
                 (abs(eta / n * xi[0]) - abs((1 - eta) * xt - eta / n * np.sum(xi[1:])), ">=",
                  abs(eta / n * xi[0]) - abs((1 - eta) * xt) - eta / n * np.sum(np.abs(xi[1:])))]
    return rows


@check(PAPER, "prop10_steps",
       "Proposition 10 (i)'s proof: E||grad f(x_(t+1))|| >= E||eta_l/|S| xi_(1,1)|| - E||(1 - eta_l) x_t - (eta_l/|S|) sum_(i != 1) "
       "xi_(i,1)|| >= ... (503-506).",
       spec=("6",), severity="rate",
       hypotheses=(Hyp("Prop. 10's construction: F_i = x^2/2 + xi_i x, client 1 Cauchy, the others Gaussian, K = 1, client 1 sampled",
                       lambda p: p["K"] == 1 and 1 in p["S"], "fedada2.txt lines 487, 497"),))
def _prop10():
    """fedada2.txt proof of Prop. 10 (i), display 503-506, pathwise (each expectation relation follows from its pathwise form)
    for S = {1, 2, 3} on a grid of noise values (client 1's over a Cauchy-like range), eta_l in {0.3, 1} (line 508 allows 1)."""
    qs = (dict(eta=0.3, x=1.2), dict(eta=1.0, x=-0.7), dict(eta=0.6, x=0.0))
    return relations_result([Rel("503-506", "reverse triangle inequality and grad f = x", _rel_503)], qs, "Prop. 10's display",
                            lambda q: {"K": 1, "S": (1, 2, 3), "eta_l": q["eta"], "x_t": q["x"]},
                            describe=lambda q: f"eta_l = {q['eta']:g}, x_t = {q['x']:g}")


# ===========================================================================
# Theorem 13: one FedAvg round on a mu-strongly convex f with a heavy-tailed client 1 (t_2) and light, uncentered clients 2, 3
# ===========================================================================

MU13 = 1.0
#: light clients' noise laws per coordinate (values, probabilities): uncentered (means 2.5 and 2), line 534
LAW13 = {2: (np.array([-3.0, 8.0]), np.array([0.5, 0.5])), 3: (np.array([-2.0, 6.0]), np.array([0.5, 0.5]))}
#: compact intervals [a_bar, b_bar] of line 612 for the light clients (each holds one support point)
IV13 = {2: (-3.5, -2.5), 3: (5.0, 7.0)}


def _f13(x):
    """f(x) = sum_j mu/2 x_j^2 + log cosh x_j: mu-strongly convex, f >= 0 (last axis = coordinates)."""
    return np.sum(MU13 / 2 * x**2 + np.log(np.cosh(x)), axis=-1)


def _g13(x):
    return MU13 * x + np.tanh(x)


@dataclass
class T13World:
    """A round of FedAvg (K = 2 local SGD steps on the global f, line 556) at x_t, clients S (light ones enumerated exactly)."""

    name: str
    d: int
    eta: float
    xt: np.ndarray
    R: float | None  # None: the smallest R (7) admits at x = x_t (see __post_init__)
    a_t: float      # a~ > 0 of (7)
    b_t: float      # b~ < 0 of (7)
    S_: tuple = (2, 3)
    K: int = 2

    def __post_init__(self):
        self.xt = np.asarray(self.xt, float)
        if self.R is None:
            # (7) needs f~ <= the quadratic q_j of line 591 outside [-R, R], f~ >= 0: R beyond where q_j < 0, plus a margin
            ys = np.linspace(-20, 20, 4001)
            neg = [np.abs(ys[(_f13(self.xt) / self.d + _g13(self.xt)[j] * (ys - self.xt[j]) + MU13 / 2 * (ys - self.xt[j]) ** 2)
                             < 0]) for j in range(self.d)]
            self.R = round(max([1.0] + [float(a.max()) + 0.25 for a in neg if a.size]), 2)
        lights = [i for i in self.S_ if i != 1]
        # variables: (light client, local index l, coordinate j); the last local noise l = K-1 enumerated separately
        early = [(i, l, j) for i in lights for l in range(self.K - 1) for j in range(self.d)]
        last = [(i, self.K - 1, j) for i in lights for j in range(self.d)]
        self.early, self.last = early, last

        def outcomes(vars_):
            idx = list(itertools.product(*[range(len(LAW13[i][0])) for i, _, _ in vars_])) or [()]
            vals = np.array([[LAW13[v[0]][0][k] for v, k in zip(vars_, o)] for o in idx]).reshape(len(idx), len(vars_))
            pr = np.array([np.prod([LAW13[v[0]][1][k] for v, k in zip(vars_, o)]) for o in idx])
            return vals, pr

        self.ve, self.pe = outcomes(early)
        self.vl, self.pl = outcomes(last)
        Oe, Ol = len(self.pe), len(self.pl)
        n, K, d = len(self.S_), self.K, self.d
        xi = np.zeros((Oe, Ol, n, K, d))
        for c, (i, l, j) in enumerate(early):
            xi[:, :, self.S_.index(i), l, j] = self.ve[:, None, c]
        for c, (i, l, j) in enumerate(last):
            xi[:, :, self.S_.index(i), l, j] = self.vl[None, :, c]
        self.xi = xi
        xs = np.zeros((Oe, Ol, n, K + 1, d))
        xs[..., 0, :] = self.xt
        grads = np.zeros((Oe, Ol, n, K, d))
        for l in range(K):
            grads[..., l, :] = _g13(xs[..., l, :])
            xs[..., l + 1, :] = xs[..., l, :] - self.eta * (grads[..., l, :] + xi[..., l, :])
        self.xs, self.grads = xs, grads
        self.step = self.eta / n * np.sum(grads + xi, axis=(2, 3))        # (Oe, Ol, d)
        self.x1 = self.xt - self.step
        self.P = self.pe[:, None] * self.pl[None, :]

    def ftilde(self, y):
        """(7): a~(y_j - R) above R, 0 on [-R, R], b~(y_j + R) below -R, per coordinate (last axis)."""
        return np.where(y > self.R, self.a_t * (y - self.R), np.where(y < -self.R, self.b_t * (y + self.R), 0.0))

    def point(self) -> dict:
        return {"instance": self.name, "d": self.d, "K": self.K, "eta_l": self.eta, "x_t": tuple(float(v) for v in self.xt), "S": self.S_,
                "f": "sum_j x_j^2/2 + log cosh x_j", "mu": MU13, "heavy": "t_2", "p_heavy": 0.5,
                "light laws": "client 2 {-3, 8}, client 3 {-2, 6}, equiprobable"}


def _premise_591(w: T13World) -> bool:
    """(7)'s f~ satisfies line 591 at x = x_t on a grid, and f >= sum_j f~_j there (the proof's use at line 597)."""
    ys = np.linspace(-12, 12, 241)
    for j in range(w.d):
        q = _f13(w.xt) / w.d + _g13(w.xt)[j] * (ys - w.xt[j]) + MU13 / 2 * (ys - w.xt[j]) ** 2
        out = np.abs(ys) > w.R
        if np.any(w.ftilde(ys)[out] > q[out] + 1e-12) or np.any(w.ftilde(ys) < 0):
            return False
    grid = np.array(list(itertools.product(ys[::6], repeat=w.d)))
    return bool(np.all(_f13(grid) >= w.ftilde(grid).sum(-1) - 1e-12))


T13_WORLDS = (
    T13World("A", 1, 0.9, [3.0], None, 0.5, -0.5),
    T13World("B", 2, 0.8, [2.5, -0.4], None, 0.5, -0.5),
    T13World("C", 1, 0.4, [-1.2], None, 0.4, -0.6),
)


def _rel_556(w: T13World):
    gx = _g13(w.xt)
    rhs = _f13(w.xt) - np.sum(gx * w.step, -1) + MU13 / 2 * np.sum(w.step**2, -1)
    n = len(w.S_)
    g_exp = np.sum(w.grads + w.xi, axis=(2, 3))
    rhs2 = _f13(w.xt) - np.sum(gx * w.eta / n * g_exp, -1) + MU13 * w.eta**2 / (2 * n**2) * np.sum(g_exp**2, -1)
    return [_worst(_f13(w.x1), ">=", rhs), _worst(rhs, "=", rhs2)]


def _A13(w: T13World):
    """sum_i ((sum_(l<K) grad f(x_(i,l-1)) + xi_(i,l-1)) + grad f(x_(i,K-1))): depends on the early noise only."""
    return np.sum(w.grads[..., :-1, :] + w.xi[..., :-1, :], axis=(2, 3)) + np.sum(w.grads[..., -1, :], axis=2)


def _rel_562(w: T13World):
    n, gx = len(w.S_), _g13(w.xt)
    El = lambda a: np.tensordot(a, w.pl, axes=([1], [0]))   # expectation over the last noise, per early outcome
    lhs = El(_f13(w.x1))
    A = _A13(w)[:, 0]
    mean_last = np.array([[np.dot(LAW13[i][0], LAW13[i][1])] * w.d for i in w.S_ if i != 1]).sum(0)
    rhs = (_f13(w.xt) - np.sum(gx * w.eta / n * A, -1) - np.sum(gx * w.eta / n * mean_last, -1)
           + MU13 * w.eta**2 / (2 * n**2) * El(np.sum(np.sum(w.grads + w.xi, axis=(2, 3)) ** 2, -1)))
    return [_worst(lhs, ">=", rhs)]


def _rel_571(w: T13World, noise_cross):
    El = lambda a: np.tensordot(a, w.pl, axes=([1], [0]))
    A = _A13(w)
    lights = [i for i in w.S_ if i != 1]
    lhs = El(np.sum((A + np.sum(w.xi[..., -1, :], axis=2)) ** 2, -1))
    means = [np.full(w.d, np.dot(LAW13[i][0], LAW13[i][1])) for i in lights]
    sec = [w.d * np.dot(LAW13[i][0] ** 2, LAW13[i][1]) for i in lights]
    A0 = A[:, 0]
    cross = sum(np.dot(means[a], means[b]) for a in range(len(lights)) for b in range(len(lights)) if a != b)
    rhs = np.sum(A0**2, -1) + 2 * np.sum(A0 * sum(means), -1) + sum(sec) + noise_cross * cross
    return [_worst(lhs, "=", rhs)]


def _rel_582(w: T13World):
    rows = []
    grid = np.linspace(-3, 3, 7)
    pts = np.array(list(itertools.product(grid, repeat=w.d)))
    for x0 in pts[::5]:
        y = pts
        lin = _f13(x0) + np.sum(_g13(x0) * (y - x0), -1) + MU13 / 2 * np.sum((y - x0) ** 2, -1)
        coord = _f13(x0) + sum(_g13(x0)[j] * (y[:, j] - x0[j]) + MU13 / 2 * (y[:, j] - x0[j]) ** 2 for j in range(w.d))
        rows += [_worst(_f13(y), ">=", lin), _worst(lin, "=", coord)]
    return rows


def _rel_599(w: T13World, arg):
    chi = (np.abs(w.x1).max(-1) > w.R).astype(float)
    E = lambda a: float(np.sum(w.P * a))
    f1 = _f13(w.x1)
    s1 = w.ftilde(w.x1).sum(-1)
    y = arg(w.xt, w.step)
    s2 = w.ftilde(y).sum(-1)
    return [(E(f1**2), ">=", E(chi * f1**2)), (E(chi * f1**2), ">=", E(chi * s1**2)), (E(chi * s1**2), ">=", E(chi * s2**2))]


def _rel_604(w: T13World, arg, lower):
    rows = []
    chi = np.abs(w.x1).max(-1) > w.R
    y = arg(w.xt, w.step)
    c = min(abs(w.a_t), abs(w.b_t))
    low = lower(y, w.R)
    integrand = w.ftilde(y).sum(-1) ** 2
    b604 = (c * low.sum(-1)) ** 2
    b605 = np.sum(c**2 * low**2, -1)
    if chi.any():
        rows += [_worst(integrand[chi], ">=", b604[chi]), _worst(b604[chi], ">=", b605[chi])]
    out = chi[..., None] & (np.abs(y) >= w.R)
    if out.any():
        # 606-608: the square of u_j + w_j (u: the noise-free part with -+R, w: the last local noise as it enters y) expanded
        sgn = arg(0.0, 1.0)                        # how the step enters y: +1 (printed) or -1 (x_t - step)
        wj = sgn * w.eta / len(w.S_) * np.sum(w.xi[..., -1, :], axis=2)
        uj = y - wj - np.sign(y) * w.R
        rows.append(_worst(c**2 * low[out] ** 2, "=", c**2 * (uj[out] + wj[out]) ** 2))
        rows.append(_worst(c**2 * (uj[out] + wj[out]) ** 2, "=", c**2 * (uj[out] ** 2 + 2 * uj[out] * wj[out] + wj[out] ** 2)))
    return rows


def _round13(xt, eta, K, xi):
    """Local SGD on f for noise xi (..., n, K, d): (grads, step, x_(t+1))."""
    xs = [np.broadcast_to(xt, xi[..., 0, :].shape)]
    grads = []
    for l in range(K):
        grads.append(_g13(xs[-1]))
        xs.append(xs[-1] - eta * (grads[-1] + xi[..., l, :]))
    grads = np.stack(grads, axis=-2)
    n = xi.shape[-3]
    step = eta / n * np.sum(grads + xi, axis=(-3, -2))
    return grads, step, xt - step


G1 = np.array([-60.0, -9.0, -3.3, -1.0, 0.0, 0.6, 2.5, 4.0, 8.0, 25.0, 70.0])   # client 1's (t_2) noise values on a grid


def _rel_618(w: T13World, rhat):
    """S = {1, 2, 3}: client 1's noise on a grid (t_2 has a positive density everywhere), the light clients' laws enumerated."""
    S_, K, d, n = (1, 2, 3), w.K, w.d, 3
    if d > 1:
        return []  # evaluated on the one-dimensional instances (the grid would have 11^(K d) points per light outcome)
    vars_ = [(i, l, j) for i in (2, 3) for l in range(K) for j in range(d)]
    rows = []
    for o in itertools.product(*[range(2) for _ in vars_]):
        for g1 in itertools.product(G1, repeat=K * d):
            xi = np.zeros((n, K, d))
            xi[0] = np.array(g1).reshape(K, d)
            for (i, l, j), k in zip(vars_, o):
                xi[S_.index(i), l, j] = LAW13[i][0][k]
            grads, step, x1 = _round13(w.xt, w.eta, K, xi)
            A = np.sum(grads[:, :-1] + xi[:, :-1], axis=(0, 1)) + np.sum(grads[:, -1], axis=0)
            M = max(max(abs(a), abs(b)) for a, b in IV13.values())
            R_hat = rhat(w.R, float(np.abs(w.xt).max()), n, w.eta, M, float(np.abs(w.eta / n * A).max()))
            inside = all(IV13[i][0] <= xi[S_.index(i), -1, j] <= IV13[i][1] for i in (2, 3) for j in range(d))
            out_b = float(np.abs(x1).max() > w.R)
            lhs = out_b * inside
            rows += [(out_b, ">=", lhs), (lhs, ">=", float(np.abs(xi[0, -1]).max() > R_hat) * inside)]
    return rows


def _t2_tail(r: float) -> float:
    """P(|xi| > r) for xi ~ t_2 (CDF 1/2 + t/(2 sqrt(t^2 + 2)))."""
    return 1 - r / math.sqrt(r * r + 2)


def _t2_m2(r: float) -> float:
    """E[xi^2 1{|xi| <= r}] for xi ~ t_2: 2 asinh(r/sqrt 2) - 2r/sqrt(r^2 + 2)."""
    return 2 * math.asinh(r / math.sqrt(2)) - 2 * r / math.sqrt(r * r + 2)


def _light(i):
    v, p = LAW13[i]
    a, b = IV13[i]
    ins = (v >= a) & (v <= b)
    return float(p[ins].sum()), float((p * v)[ins].sum()), float((p * v * v)[ins].sum())   # P(in), E[chi xi], E[chi xi^2]


def _rel_635(w: T13World, joint):
    """d = 1, S = {1, 2, 3}, chi+ = chi{|xi_1| > R_hat} chi{xi_2 in I_2} chi{xi_3 in I_3}: the cross terms of 635-636."""
    rows = []
    for R_hat in (0.5, 2.0, 7.0):
        p1 = _t2_tail(R_hat)
        (P2, e2, _), (P3, e3, _) = _light(2), _light(3)
        P = p1 * P2 * P3
        lhs = p1 * e2 * e3                      # E[chi+ xi_2 xi_3]: the factors are independent
        E2, E3 = p1 * e2 * P3, p1 * P2 * e3      # E[chi+ xi_2], E[chi+ xi_3]
        rows.append((lhs, "=", joint(E2, E3, P)))
        rows.append((0.0, "=", joint(0.0, E2, P)))  # pairs with client 1: E[chi+ xi_1] = 0 by symmetry of t_2 and of |xi_1| > R_hat
    return rows


def _rel_640(w: T13World):
    """Truncating client 1's noise at |xi_1| < A: 640's inequality for every A, and its right side -> oo (641's '= oo')."""
    rows = []
    R_hat = 2.0
    (P2, _, s2), (P3, _, s3) = _light(2), _light(3)
    C2 = P2 * P3
    prev = None
    for A in (10.0, 1e2, 1e3, 1e4, 1e5):
        m2 = _t2_m2(A) - _t2_m2(R_hat)
        pA = _t2_tail(R_hat) - _t2_tail(A)
        lhs = C2 * m2 + pA * (s2 * P3 + P2 * s3)
        rows += [(lhs, ">=", C2 * m2), (C2 * m2, "=", C2 * m2)]
        if prev is not None:
            rows.append((C2 * (m2 - prev), ">=", C2 * 2 * math.log(10) * 0.99))
        prev = m2
    return rows


#: line 614's R_hat as printed: |S|/eta (|R| + max(eta max{|a_bar|, |b_bar|}/|S| + |eta/|S| sum_i A_i|))
RHAT_PRINTED = lambda R, xt, n, eta, M, A: n / eta * (abs(R) + eta * M / n + A)
#: what line 619 needs: |x_(t+1)| >= |step| - |x_t| and every other sampled client's last noise
RHAT_NEEDED = lambda R, xt, n, eta, M, A: n / eta * (abs(R) + xt + (n - 1) * eta * M / n + A)

H_T13 = (Hyp("Theorem 13's setting: f_t mu-strongly convex (here sum_j x_j^2/2 + log cosh x_j, mu = 1), additive noise independent "
              "across clients and steps, possibly uncentered with finite mean (line 534), a heavy-tailed client (client 1, t_2: infinite "
              "second moment) sampled with probability > 0", lambda p: p["f"] == "sum_j x_j^2/2 + log cosh x_j" and p["heavy"] == "t_2"
              and p["p_heavy"] > 0 and p["mu"] > 0, "fedada2.txt lines 534, 546"),
         Hyp("FedAvg with eta_l > 0, K >= 1 local steps", lambda p: p["eta_l"] > 0 and p["K"] >= 1, "fedada2.txt line 556"))


@check(PAPER, "thm13_steps",
       "Theorem 13's proof: strong convexity along the FedAvg step (556-558), its conditional expectation (562-563) and the "
       "expansion of E||sum (grad f + xi)||^2 (571-572); the quadratic minorant (582-583) and the piecewise-linear f~ of (7) giving "
       "E||f(x_(t+1))||^2 >= E[chi (sum_j f~_j(...))^2] (599-600) >= the expanded square (604-608); the event chi+ (618-619), the "
       "cross terms by independence (635-636) and the divergent truncated second moment (640-641).",
       spec=("6",), severity="proof", depends=("thm4_13_fedavg_infinite_variance", "student_t2_infinite_variance"),
       corrected={"noise_cross": 1, "arg": lambda xt, step: xt - step, "lower": lambda y, R: np.maximum(np.abs(y) - R, 0.0),
                  "rhat": RHAT_NEEDED, "joint": lambda e_a, e_b, P: e_a * e_b / P},
       hypotheses=H_T13)
def _thm13(noise_cross=0, arg=lambda xt, step: step, lower=lambda y, R: np.abs(np.abs(y) - R), rhat=RHAT_PRINTED,
           joint=lambda e_a, e_b, P: e_a * e_b):
    """fedada2.txt Theorem 13 (Theorem 4 in the main text, line 74) and its proof, displays 556-558, 562-563, 571-572, 582-583, 599-600, 604-608, 618-619, 635-636,
    640-641 (623-627 is not evaluated).  Instances: FedAvg rounds with K = 2 on f = sum_j x_j^2/2 + log cosh x_j at the sampled
    light clients {2, 3} (uncentered two-point noise, exact), and with client 1 (t_2) sampled: its noise on a grid for the
    pathwise indicator relation 618-619, its law exactly (t_2 tail and truncated moments in closed form) for 635-641.
    The printed forms, each replaced by its correction: ``noise_cross`` (571-572 keeps only sum_i E||xi_i||^2 of the noise
    square: the cross terms sum_(i != k) <E xi_i, E xi_k> with weight noise_cross, printed 0), ``arg`` (600 evaluates f~ at
    the step, not at x_(t+1) = x_t - step), ``lower`` (604 bounds f~_j(y_j) below by c|y_j -+ R_j| for every coordinate,
    also those inside [-R_j, R_j]), ``rhat`` (line 614's R_hat), ``joint`` (636 writes E[chi+ xi_a xi_b] as E[chi+ xi_a]
    E[chi+ xi_b], with E[chi+] = P)."""
    for w in T13_WORLDS:
        assert _premise_591(w), f"instance {w.name}: (7) does not satisfy line 591"
    rels = [Rel("556-558", "strong convexity along the step, g = grad f + xi", _rel_556),
            Rel("562-563", "expectation over the last local noise", _rel_562),
            Rel("571-572", "E||A + sum_i xi_(i,K-1)||^2 expanded", lambda w: _rel_571(w, noise_cross)),
            Rel("582-583", "the quadratic minorant, coordinate-wise", _rel_582),
            Rel("599-600", "E f^2 >= E[chi f^2] >= E[chi (sum f~_j)^2], f~ at the step", lambda w: _rel_599(w, arg)),
            Rel("604-608", "f~_j >= c|. -+ R_j|, square of a sum, the expansion", lambda w: _rel_604(w, arg, lower)),
            Rel("618-619", "chi{x_(t+1) outside B} >= chi+", lambda w: _rel_618(w, rhat)),
            Rel("635-636", "the cross terms of E[chi+ (sum xi)^2] by independence", lambda w: _rel_635(w, joint)),
            Rel("640-641", "E[chi+ xi_1^2] = C_2 int_(|xi| > R_hat) xi^2 dp = oo", _rel_640)]
    res = relations_result(rels, T13_WORLDS, "Theorem 13's displays", T13World.point, rtol=1e-9,
                           describe=lambda w: f"instance {w.name} (d = {w.d}, K = 2, eta_l = {w.eta:g}, x_t = {tuple(float(v) for v in w.xt)}, "
                                              f"R = {w.R:g}, a~ = {w.a_t:g}, b~ = {w.b_t:g})")
    if res.status == "refuted":
        res = dataclasses.replace(res, evidence=res.evidence + "; where client 1 (t_2) is sampled the displays' two sides are "
                                  "infinite, so the theorem's conclusion E f(x_(t+1))^2 = oo is not affected by these steps "
                                  "(thm4_13_fedavg_infinite_variance shows it directly)")
    return res


# ===========================================================================
# Lemmas 15 and 17: client SM3-II AdaGrad with delayed preconditioner updates (Algorithm 2, line 695)
# ===========================================================================

COVER = ((0, 1), (1, 2))   # SM3 cover {S_1, S_2} of d = 3 coordinates (line 668)


def sm3_client(gs: np.ndarray, z: int, v0: float, eps: float, eta: float = 1.0):
    """One client's K steps of Algorithm 2's SM3-II update (line 695) on the gradient rows ``gs`` (K, d): v_k(j) = min_(b: S_b
    contains j) mu_(k-1)(b) + g_k(j)^2 and mu_k(b) = max_(j in S_b) v_k(j) when (k-1)/z is an integer, v_k = v_(k-1) otherwise.
    mu_0(b) = v0 (Algorithm 2 line 672's initialisation, the reading under which line 752's v_k >= v0 + sum g^2 holds) and mu is
    carried through the steps without an update (line 675's reset read as the start of an update).  Returns (v (K, d),
    mu (K, q), Delta = -eta sum_p g_p/(sqrt(v_p) + eps))."""
    K_, d = gs.shape
    mu = np.full(len(COVER), float(v0))
    v = np.full(d, float(v0))
    vs, mus = [], []
    for k in range(1, K_ + 1):
        if (k - 1) % z == 0:
            v = np.array([min(mu[b] for b, Sb in enumerate(COVER) if j in Sb) for j in range(d)]) + gs[k - 1] ** 2
            mu = np.array([max(v[j] for j in Sb) for Sb in COVER])
        vs.append(v.copy())
        mus.append(mu.copy())
    vs, mus = np.array(vs), np.array(mus)
    delta = -eta * np.sum(gs / (np.sqrt(vs) + eps), axis=0)
    return vs, mus, delta


def _seqs(seed: int, n: int = 24):
    """Seeded (K, z, v0, eps, G, gradient rows) with |g| <= G, tiny gradients at some update steps (the worst case of line 763)."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        K_, z = int(r.integers(1, 6)), int(r.integers(1, 4))
        G, eps, v0 = float(r.choice([0.5, 1.0, 3.0])), float(r.choice([1e-3, 0.1, 1.0])), float(r.choice([0.0, 0.0, 0.5]))
        gs = r.uniform(-G, G, size=(K_, 3))
        gs[r.random((K_, 3)) < 0.25] = 1e-6
        out.append(dict(K=K_, z=z, v0=v0, eps=eps, G=G, gs=gs))
    return tuple(out)


SEQS = _seqs(7)


def _rel_760(q, part="760"):
    K_, z, v0, eps, G, gs = q["K"], q["z"], q["v0"], q["eps"], q["G"], q["gs"]
    vs, _, delta = sm3_client(gs, z, v0, eps)
    Fset = [p for p in range(1, K_ + 1) if (p - 1) % z == 0]
    nK = -(-K_ // z)
    rows = []
    for j in range(gs.shape[1]):
        g = np.abs(gs[:, j])
        acc = lambda p: v0 + sum(gs[(r - 1) * z, j] ** 2 for r in range(1, -(-p // z) + 1))
        r760 = sum(g[p - 1] / (math.sqrt(acc(p)) + eps) for p in range(1, K_ + 1))
        T1 = sum(g[p - 1] / (math.sqrt(v0 + g[p - 1] ** 2 + sum(gs[(r - 1) * z, j] ** 2 for r in range(1, -(-p // z)))) + eps)
                 for p in Fset)
        r765 = T1 + sum(g[p - 1] for p in range(1, K_ + 1) if p not in Fset) / (math.sqrt(v0) + eps)
        r766 = T1 + (K_ - nK) * G / (math.sqrt(v0) + eps)
        rows += [(abs(delta[j]), "<=", r760)] if part == "760" else [(r760, "<=", r765), (r765, "<=", r766)]
    return rows


def _rel_770(q):
    K_, z, v0, eps, G, gs = q["K"], q["z"], q["v0"], q["eps"], q["G"], q["gs"]
    Fset = [p for p in range(1, K_ + 1) if (p - 1) % z == 0]
    rows = []
    for j in range(gs.shape[1]):
        g = np.abs(gs[:, j])
        prev = lambda p: sum(gs[(r - 1) * z, j] ** 2 for r in range(1, -(-p // z)))
        T1 = sum(g[p - 1] / (math.sqrt(v0 + g[p - 1] ** 2 + prev(p)) + eps) for p in Fset)
        a = sum(g[p - 1] / (math.sqrt(g[p - 1] ** 2 + prev(p)) + eps) for p in Fset)
        fr = [g[p - 1] ** 2 / (eps**2 + sum(g[r - 1] ** 2 for r in Fset if r <= p)) for p in Fset]
        b = sum(math.sqrt(x_) for x_ in fr)
        c = math.sqrt(len(Fset)) * math.sqrt(sum(fr))
        e = math.sqrt(-(-K_ // z)) * math.sqrt(math.log1p(sum(g[p - 1] ** 2 for p in Fset) / eps**2))
        rows += [(T1, "<=", a), (a, "<=", b), (b, "<=", c), (c, "<=", e),
                 (e, "<=", math.sqrt(-(-K_ // z)) * math.sqrt(math.log1p(-(-K_ // z) * G**2 / eps**2)))]
    return rows


H_SEQ = (Hyp("|g| <= G coordinate-wise (Assumption 2), K, z >= 1 integers, eps > 0, v0 >= 0", lambda p: p["max |g|"] <= p["G"]
              and p["K"] >= 1 and p["z"] >= 1 and p["eps"] > 0 and p["v0"] >= 0, "fedada2.txt Assumption 2, Algorithm 2 lines 668-672"),)


def _seq_point(q):
    return {"K": q["K"], "z": q["z"], "v0": q["v0"], "eps": q["eps"], "G": q["G"], "max |g|": float(np.abs(q["gs"]).max()),
            "gradients": tuple(tuple(round(float(v), 6) for v in row) for row in q["gs"])}


def _seq_describe(q):
    return f"K = {q['K']}, z = {q['z']}, v0 = {q['v0']:g}, eps = {q['eps']:g}, G = {q['G']:g}"


@check(PAPER, "lemma15_steps",
       "Lemma 15's proof: |Delta_i| split over the update steps F and the rest (760-761), the worst case (8) and Assumption 2 "
       "(765-766), and T_1 <= sqrt(|F|) log^(1/2)(1 + sum_F |g_p|^2/eps^2) through Cauchy-Schwarz and the log-sum bound (770-772).",
       spec=("3.2",), severity="constant", depends=("log_telescoping_lemma",), hypotheses=H_SEQ)
def _lemma15_steps():
    """fedada2.txt proof of Lemma 15, displays 760-761, 765-766, 770-772, per coordinate on 24 seeded gradient sequences of one
    client of Algorithm 2 (SM3-II, cover {{1, 2}, {2, 3}} of d = 3, delay z in 1..3, K in 1..5, v0 in {0, 1/2}), tiny
    gradients at a quarter of the entries (line 763's worst case)."""
    return relations_result([Rel("760-761", "|Delta| split over F and [K] \\ F, v_p >= v0 + sum of update gradients", _rel_760),
                             Rel("770-772", "T_1 bound: drop v0, sqrt form, Cauchy-Schwarz, log-sum, Assumption 2", _rel_770)]
                            + [Rel("765-766", "(8): worst case and Assumption 2", lambda q: _rel_760(q, "765"))],
                            SEQS, "Lemma 15's displays", _seq_point, describe=_seq_describe)


@check(PAPER, "lemma17_sm3_bounds",
       "Lemma 17: for k = 1..K, 0 <= mu_k(b) <= d k G^2 and 0 <= v_k(j) <= d k G^2 in Algorithm 2 (800-801).",
       spec=("3.2",), severity="constant", corrected={"bound": lambda d, k, G, v0: v0 + d * k * G**2}, hypotheses=H_SEQ)
def _lemma17(bound=lambda d, k, G, v0: d * k * G**2):
    """fedada2.txt Lemma 17 (display 800-801) and its proof (lines 804-820: 'the case k = 1 is satisfied by zero
    initialization'); Algorithm 2 line 672 initialises v0 >= 0 (default 0).  ``bound(d, k, G, v0)``: the stated upper bound
    (printed d k G^2).  On the 24 seeded sequences of lemma15_steps plus three with v0 = 3 (SM3-II with mu_0 = v0)."""
    extra = tuple(dict(q, v0=3.0) for q in SEQS[:3])

    def rel(q):
        vs, mus, _ = sm3_client(q["gs"], q["z"], q["v0"], q["eps"])
        d = q["gs"].shape[1]
        rows = []
        for k in range(1, q["K"] + 1):
            b = bound(d, k, q["G"], q["v0"])
            rows += [(0.0, "<=", float(mus[k - 1].min())), (float(mus[k - 1].max()), "<=", b),
                     (0.0, "<=", float(vs[k - 1].min())), (float(vs[k - 1].max()), "<=", b)]
        return rows

    res = relations_result([Rel("800-801", "(B1), (B2)", rel)], SEQS + extra, "Lemma 17", _seq_point, describe=_seq_describe)
    if res.status == "refuted":
        res = dataclasses.replace(res, evidence=res.evidence + "; the proof assumes v0 = 0 (its base case 'by zero "
                                  "initialization'); with Algorithm 2's v0 > 0 the bound is v0 + d k G^2, the form gamma~_1 and "
                                  "alpha~_1 of Theorem 20 already use (sqrt(v0 + d K G^2))")
    return res


@check(PAPER, "lemma18_subsequence",
       "Lemma 18: if min_(1<=t<=T) ||grad f(x_t)|| <= O(T^-alpha) with alpha > 0, the iterates x_phi(n), phi(n) = argmin_(t<=n), "
       "satisfy ||grad f(x_phi(n))|| -> 0 (precompact convergence, Definition 19).",
       spec=("12",), severity="constant")
def _lemma18():
    """fedada2.txt Lemma 18 (statement line 828, proof lines 830-832): the subsequence of running minimisers.  Exact on the bound
    C n^-alpha (the limit) and on seeded sequences s_t >= 0 whose running minimum obeys it (the chosen values decrease and
    stay below the bound)."""
    n, C, a = sp.symbols("n C alpha", positive=True)
    lim = sp.limit(C * n ** (-a), n, sp.oo)
    r = np.random.default_rng(18)
    for alpha in (0.25, 0.5, 1.0):
        s = np.abs(r.standard_normal(400)) * 5
        for t_ in range(1, 401):      # impose the hypothesis: a value below 3 t^-alpha somewhere in every prefix
            if s[:t_].min() > 3 * t_**-alpha:
                s[t_ - 1] = 3 * t_**-alpha * r.uniform(0.2, 1)
        phi = [int(np.argmin(s[:t_])) for t_ in range(1, 401)]
        vals = s[phi]
        if np.any(np.diff(vals) > 0) or np.any(vals > 3 * np.arange(1, 401) ** -alpha + 1e-12):
            return refuted(f"running minimisers fail at alpha = {alpha}", "numeric")
    if lim == 0:
        return verified(f"C n^-alpha -> {lim} for alpha > 0; on seeded sequences (alpha in {{1/4, 1/2, 1}}, 400 terms) the values "
                        "at phi(n) = argmin_(t<=n) are non-increasing and below 3 n^-alpha, hence -> 0", "exact")
    return refuted(f"limit {lim}")


def _rel_1071(q):
    r = np.random.default_rng(q["seed"])
    T_, b, tau, phi = q["T"], q["beta"], q["tau"], q["phi"]
    D = r.uniform(-phi, phi, T_)
    D[r.random(T_) < 0.2] = 0.0
    S_ = np.cumsum(D**2)
    lhs = (1 - b) * sum(b ** (t_ - rr) * D[t_ - 1] ** 2 / (S_[t_ - 1] + tau**2) for t_ in range(1, T_ + 1) for rr in range(1, t_ + 1))
    mid = 1 - b + math.log1p(S_[-1] / tau**2)
    return [(lhs, "<=", mid), (mid, "<=", 1 - b + math.log1p(T_ * phi**2 / tau**2))]


@check(PAPER, "lemma22_log_bound",
       "Lemma 22: (1 - b) sum_(t<=T) sum_(r<=t) b^(t-r) Delta_(t,j)^2/(sum_(l<=t) Delta_(l,j)^2 + tau^2) <= 1 - b + log(1 + T "
       "||Phi_1^K||^2/tau^2) for |Delta_(l,j)| <= ||Phi_1^K|| (1071).",
       spec=("10",), severity="constant", depends=("log_telescoping_lemma",),
       hypotheses=(Hyp("0 <= b < 1, T >= 0, |Delta_(l,j)| <= ||Phi_1^K|| (Lemma 15)", lambda p: 0 <= p["beta"] < 1 and p["T"] >= 0,
                       "fedada2.txt lines 1069-1071"),))
def _lemma22():
    """fedada2.txt Lemma 22 (display 1071) with (14) (lines 987-988), on 12 seeded sequences (T up to 60, b in {0, 0.5, 0.9,
    0.99}, a fifth of the Delta zero)."""
    qs = tuple(dict(seed=s, T=T_, beta=b, tau=tau, phi=ph) for s, (T_, b, tau, ph) in enumerate(itertools.product(
        (5, 60), (0.0, 0.5, 0.9, 0.99), (0.1,), (0.05,))) ) + tuple(dict(seed=40 + s, T=30, beta=0.9, tau=tau, phi=ph)
                                                                   for s, (tau, ph) in enumerate(((1.0, 3.0), (0.01, 1.0), (2.0, 0.1), (0.5, 0.5))))
    return relations_result([Rel("1071", "the log bound, then |Delta| <= ||Phi_1||", _rel_1071)], qs, "Lemma 22", lambda q: dict(q),
                            describe=lambda q: f"seed {q['seed']}, T = {q['T']}, b = {q['beta']}, tau = {q['tau']}, Phi = {q['phi']}")


# ===========================================================================
# Lemmas 28 (ADMU) and 30 (AGDU): the proofs' displays on gradient sequences
# ===========================================================================


def _admu_terms(gs, b1, b2, z, eps):
    """Per local step p of ADMU as the proof writes it (m0 = v0 = 0, no bias correction, line 1463-1465): the numerator
    (1 - b1) sum_(r<=p) b1^(p-r) g_r and the denominator sqrt((1 - b2) sum_(r<=ceil(p/z)) b2^(ceil(p/z)-r) g_((r-1)z+1)^2) + eps."""
    K_ = len(gs)
    num, den = [], []
    for p in range(1, K_ + 1):
        n_ = -(-p // z)
        num.append((1 - b1) * sum(b1 ** (p - r) * gs[r - 1] for r in range(1, p + 1)))
        den.append(math.sqrt((1 - b2) * sum(b2 ** (n_ - r) * gs[(r - 1) * z] ** 2 for r in range(1, n_ + 1))) + eps)
    return num, den


def _admu_run(gs, b1, b2, z, eps):
    """Algorithm 7 without bias correction (the proof's reading), |Xi| = 1, eta_l = 1: Delta = x_K - x_0."""
    m_ = v_ = 0.0
    x_ = 0.0
    for t_, g in enumerate(gs, 1):
        m_ = b1 * m_ + (1 - b1) * g
        if (t_ - 1) % z == 0:
            v_ = b2 * v_ + (1 - b2) * g * g
        x_ -= m_ / (math.sqrt(v_) + eps)
    return x_


def _rel_1465(q):
    gs, b1, b2, z, eps = q["gs"], q["b1"], q["b2"], q["z"], q["eps"]
    num, den = _admu_terms(gs, b1, b2, z, eps)
    return [(_admu_run(gs, b1, b2, z, eps), "=", -sum(a / b for a, b in zip(num, den)))]


def _split_parts(q):
    gs, b1, b2, z, eps = q["gs"], q["b1"], q["b2"], q["z"], q["eps"]
    K_ = len(gs)
    _, den = _admu_terms(gs, b1, b2, z, eps)
    first, second, first_abs, second_abs = [], [], [], []
    for p in range(1, K_ + 1):
        n_ = -(-p // z)
        chi = (p - 1) % z != 0
        first.append((1 - b1) * sum(b1 ** (n_ - r) * gs[(r - 1) * z] for r in range(1, n_ + 1)) / den[p - 1])
        first_abs.append((1 - b1) * sum(b1 ** (n_ - r) * abs(gs[(r - 1) * z]) for r in range(1, n_ + 1)) / den[p - 1])
        second.append((1 - b1) * sum(b1 ** (p - r) * gs[r - 1] for r in range(1, p + 1)) * chi / den[p - 1])
        second_abs.append((1 - b1) * sum(b1 ** (p - r) * abs(gs[r - 1]) for r in range(1, p + 1)) * chi)
    return first, second, first_abs, second_abs


def _rel_1466(q):
    first, second, _, _ = _split_parts(q)
    num, den = _admu_terms(q["gs"], q["b1"], q["b2"], q["z"], q["eps"])
    return [(-sum(a / b for a, b in zip(num, den)), "=", -sum(first) - sum(second))]


def _rel_1471(q):
    _, _, first_abs, second_abs = _split_parts(q)
    delta = abs(_admu_run(q["gs"], q["b1"], q["b2"], q["z"], q["eps"]))
    return [(delta, "<=", sum(first_abs) + sum(second_abs) / q["eps"])]


def _rel_1480(q):
    gs, b1, b2, z, eps, G = q["gs"], q["b1"], q["b2"], q["z"], q["eps"], q["G"]
    K_ = len(gs)
    _, _, first_abs, second_abs = _split_parts(q)
    cs = lambda p: math.sqrt(sum(b1 ** (2 * (-(-p // z)) - 2 * r) / b2 ** (-(-p // z) - r) for r in range(1, -(-p // z) + 1)))
    r1471 = sum(first_abs) + sum(second_abs) / eps
    r1480 = sum(cs(p) for p in range(1, K_ + 1)) + sum(second_abs) / eps
    r1481 = sum(cs(p) for p in range(1, K_ + 1)) + K_ * G * (1 - b1) / eps * (1 - b1**K_) / (1 - b1)
    r1482 = K_ * cs(K_) + K_ * G * (1 - b1**K_) / eps
    return [(r1471, "<=", r1480), (r1480, "<=", r1481), (r1481, "<=", r1482)]


def _admu_seqs():
    out = []
    for K_, z, (b1, b2), eps, pattern in itertools.product((3,), (1, 2), ((0.9, 0.999), (0.5, 0.9)), (1e-3, 1.0),
                                                           ("const", "tiny-update")):
        gs = [1.0] * K_ if pattern == "const" else [1e-6 if (p - 1) % z == 0 else 1.0 for p in range(1, K_ + 1)]
        out.append(dict(K=K_, z=z, b1=b1, b2=b2, eps=eps, G=1.0, gs=gs, pattern=pattern))
    r = np.random.default_rng(28)
    for _ in range(8):
        K_, z = int(r.integers(1, 6)), int(r.integers(1, 4))
        out.append(dict(K=K_, z=z, b1=0.9, b2=0.999, eps=0.1, G=1.0, gs=list(r.uniform(-1, 1, K_)), pattern="random"))
    return tuple(out)


ADMU_SEQS = _admu_seqs()


@check(PAPER, "lemma28_steps",
       "Lemma 28's proof (ADMU, m0 = v0 = 0, as displayed without bias correction): the unrolled Delta (1465), its split into the "
       "update-step gradients and the rest (1466-1467), the bound (20) (1471-1472), Cauchy-Schwarz (1480) and the sums (1481-1482).",
       spec=("14",), severity="constant", depends=("lemma26_28_sums",),
       hypotheses=(H_SEQ[0].__class__("|g| <= G (Assumption 2), K, z >= 1 integers, eps > 0, 0 <= beta1 < 1, 0 < beta2 < 1",
                                      lambda p: p["max |g|"] <= p["G"] and p["K"] >= 1 and p["z"] >= 1 and p["eps"] > 0
                                      and 0 <= p["beta1"] < 1 and 0 < p["beta2"] < 1, "fedada2.txt Algorithm 8 (lines 1397-1428)"),))
def _lemma28_steps():
    """fedada2.txt proof of Lemma 28, displays 1465-1467, 1471-1472, 1480-1482, on 24 gradient sequences (K = 3 with constant
    gradients or a tiny gradient at each preconditioner update, z in {1, 2}, (beta1, beta2) in {(0.9, 0.999), (0.5, 0.9)}, eps in
    {1e-3, 1}; 8 seeded random ones), |Xi| = 1, eta_l = 1.  The proof drops Algorithm 7's bias corrections (line 1463); the
    displays are evaluated as written."""
    rels = [Rel("1465-1467", "Delta unrolled (1465); the split into update-step and other gradients (1466-1467)",
                lambda q: _rel_1465(q) + _rel_1466(q)),
            Rel("1471-1472", "(20): triangle inequality, eps in the second denominator", _rel_1471),
            Rel("1480-1482", "Cauchy-Schwarz (1476) without eps, then the sums", _rel_1480)]
    res = relations_result(rels, ADMU_SEQS, "Lemma 28's displays",
                           lambda q: {"K": q["K"], "z": q["z"], "beta1": q["b1"], "beta2": q["b2"], "eps": q["eps"], "G": q["G"],
                                      "max |g|": max(abs(g) for g in q["gs"]), "gradients": tuple(q["gs"])},
                           describe=lambda q: f"K = {q['K']}, z = {q['z']}, beta1 = {q['b1']}, beta2 = {q['b2']}, eps = {q['eps']:g}, "
                                              f"gradients {tuple(round(g, 4) for g in q['gs'])}")
    if res.status == "refuted":
        res = dataclasses.replace(res, evidence=res.evidence + "; (a) for z >= 2 the split 1466-1467 counts the update-step "
                                  "gradients twice and drops b1^(p-r) g_r of non-update steps from update steps p, so it is no "
                                  "identity and (20) can fail; (b) 1480 drops the factor (1 - beta1)/sqrt(1 - beta2) of the "
                                  "Cauchy-Schwarz step 1476 (3.16 at beta1 = 0.9, beta2 = 0.999), so it fails even for z = 1 when "
                                  "eps is small; Lemma 28's final bound survives for z = 1 only through Phi_0 (which line 1484 "
                                  "says can be 0 there); lemma28_phi1_bound tests the lemma itself")
    return res


def _agdu(q):
    """AGDU (Algorithm 10) for one client: v_p = v0 + sum of the update-step gradients squared; returns the per-step terms."""
    gs, z, v0, eps = q["gs"], q["z"], q["v0"], q["eps"]
    terms, v = [], v0
    for p, g in enumerate(gs, 1):
        if (p - 1) % z == 0:
            v += g * g
        terms.append(g / (math.sqrt(v) + eps))
    return terms


def _rel_1570(q):
    gs, z, v0, eps, Xi = q["gs"], q["z"], q["v0"], q["eps"], q["Xi"]
    K_ = len(gs)
    terms = _agdu(q)
    Fset = [p for p in range(1, K_ + 1) if (p - 1) % z == 0]
    acc = lambda p: v0 + sum(gs[(r - 1) * z] ** 2 for r in range(1, -(-p // z) + 1))
    delta = -Xi * sum(terms)
    split = -Xi * sum(gs[p - 1] / (math.sqrt(acc(p)) + eps) for p in Fset) - Xi * sum(
        gs[p - 1] / (math.sqrt(acc(p)) + eps) for p in range(1, K_ + 1) if p not in Fset)
    return [(delta, "=", split)]


def _rel_1575(q):
    gs, z, v0, eps, Xi, G, Kmax = q["gs"], q["z"], q["v0"], q["eps"], q["Xi"], q["G"], q["Kmax"]
    K_ = len(gs)
    Fset = [p for p in range(1, K_ + 1) if (p - 1) % z == 0]
    prev = lambda p: sum(gs[(r - 1) * z] ** 2 for r in range(1, -(-p // z)))
    r1575 = abs(Xi) * (sum(abs(gs[p - 1]) / (math.sqrt(v0 + gs[p - 1] ** 2 + prev(p)) + eps) for p in Fset)
                       + sum(abs(gs[p - 1]) for p in range(1, K_ + 1) if p not in Fset) / (math.sqrt(v0) + eps))
    r1577 = abs(Xi) * ((Kmax - 1) // z + 1) + abs(Xi) * Kmax * G / (math.sqrt(v0) + eps)
    return [(abs(Xi * sum(_agdu(q))), "<=", r1575), (r1575, "<=", r1577)]


@check(PAPER, "lemma30_steps",
       "Lemma 30's proof (AGDU): Delta split over the update steps F = {0, ..., floor((K-1)/z)} z + 1 (1570-1571), the bound (21) "
       "(1575-1576) and |Delta| <= eta_l |Xi| (floor((K-1)/z) + 1) + eta_l |Xi| K G/(sqrt(v0) + eps) (1577).",
       spec=("13",), severity="constant", depends=("ceil_floor_and_bias_correction",),
       hypotheses=(Hyp("|g| <= G, 1 <= K_i^t <= K, z >= 1, eps > 0, v0 >= 0, |Xi| <= B", lambda p: p["max |g|"] <= p["G"]
                       and 1 <= p["K_i"] <= p["K"] and p["eps"] > 0 and p["v0"] >= 0, "fedada2.txt Algorithm 10 (lines 1513-1543)"),))
def _lemma30_steps():
    """fedada2.txt proof of Lemma 30, displays 1570-1571, 1575-1577 (the latter with the epoch schedule's bound K >= K_i^t), on
    30 seeded gradient sequences (K_i^t <= K = 5, z in 1..3, eps in {1e-3, 0.1, 1}, v0 in {0, 0.3}, Xi in [0.2, 1.5]), eta_l = 1."""
    r = np.random.default_rng(30)
    qs = []
    for _ in range(30):
        Ki = int(r.integers(1, 6))
        G = float(r.choice([0.5, 1.0, 2.0]))
        gs = list(r.uniform(-G, G, Ki))
        gs = [1e-6 if r.random() < 0.25 else g for g in gs]
        qs.append(dict(gs=gs, z=int(r.integers(1, 4)), v0=float(r.choice([0.0, 0.3])), eps=float(r.choice([1e-3, 0.1, 1.0])),
                       Xi=float(r.uniform(0.2, 1.5)), G=G, Kmax=5))
    return relations_result([Rel("1570-1571", "the split over F", _rel_1570), Rel("1575-1577", "(21) and the count", _rel_1575)],
                            tuple(qs), "Lemma 30's displays",
                            lambda q: {"K_i": len(q["gs"]), "K": q["Kmax"], "z": q["z"], "v0": q["v0"], "eps": q["eps"], "Xi": q["Xi"],
                                       "G": q["G"], "max |g|": max(abs(g) for g in q["gs"])},
                            describe=lambda q: f"K_i = {len(q['gs'])}, z = {q['z']}, v0 = {q['v0']}, eps = {q['eps']:g}")


# ===========================================================================
# Corollary 23's proof: the printed orders of psi_i/psi_6 in both cases
# ===========================================================================


@check(PAPER, "cor23_printed_ratios",
       "Corollary 23's proof: Theorem 20's Psi_1..Psi_6 in orders (1085-1090) and the ratios psi_i/psi_6 it prints for T eta_l^2 <= "
       "O(1) (1094-1098) and T eta_l^2 >= Omega(1) (1104-1108).",
       spec=("12",), severity="rate", depends=("thm20_psi_orders",))
def _cor23_printed():
    """fedada2.txt Corollary 23's proof, displays 1085-1090 (compared with thm20_orders, the orders thm20_psi_orders checks
    against the full Psi_i), 1094-1098 and 1104-1108 (each printed ratio compared symbolically with psi_i/psi_6 of its case;
    log factors compared as printed: log(1 + T eta_l^2)/T is O(T^-1) when T eta_l^2 <= O(1), and 1108's '< O(T^(-1/2+p2))'
    holds up to that log factor)."""
    from .fedada2 import _eta as e_, _etal as l_, _T as T_, thm20_orders

    printed_psi = {"Psi1": sp.Integer(1), "Psi2": e_**2 * l_**2 * T_, "Psi3": e_ * l_**2 * T_, "Psi4": e_**3 * l_**3 * T_,
                   "Psi5": e_ * l_ * sp.log(1 + T_ * l_**2)}
    small = {"Psi1": 1 / (e_ * l_ * T_), "Psi2": e_ * l_, "Psi3": l_, "Psi4": e_**2 * l_**2, "Psi5": sp.log(1 + T_ * l_**2) / T_}
    large = {"Psi1": 1 / (e_ * sp.sqrt(T_)), "Psi2": e_ * l_**2 * sp.sqrt(T_), "Psi3": l_**2 * sp.sqrt(T_),
             "Psi4": e_**2 * l_**3 * sp.sqrt(T_), "Psi5": l_ * sp.log(1 + T_ * l_**2) / sp.sqrt(T_)}
    bad = []
    for case, printed in (("small", small), ("large", large)):
        o = thm20_orders(case=case)
        for k, v in printed_psi.items():
            if sp.simplify(o[k] - v) != 0:
                bad.append(f"1085-1090 {k}: Thm 20 order {o[k]} vs printed {v}")
        for k, v in printed.items():
            if sp.simplify(o[k] / o["Psi6"] - v) != 0:
                bad.append(f"{case} {k}/Psi6: {sp.simplify(o[k] / o['Psi6'])} vs printed {v}")
    if bad:
        return refuted("; ".join(bad))
    return verified("Theorem 20's Psi_1..Psi_5 orders equal the printed psi_1..psi_5 (1085-1090, eta_l <= O(1)); every printed "
                    "ratio equals psi_i/psi_6 of its case: 1094-1098 with psi_6 = eta eta_l T, 1104-1108 with psi_6 = eta sqrt(T)")


# ===========================================================================
# Theorem 20 (and Lemma 16): deterministic runs of Algorithm 2
# ===========================================================================


def _Fi(a, c, x):
    """F_i(x) = sum_j a_ij (1 - cos(x_j - c_ij)) for every client (rows of a, c): L-smooth with L = max a, |grad| <= max a."""
    return np.sum(a * (1 - np.cos(x - c)), axis=-1)


def _gFi(a, c, x):
    return a * np.sin(x - c)


@dataclass
class Ada2Run:
    """T rounds of Algorithm 2 (lines 667-685, server update (SU) line 100) with full client gradients (line 913) and the
    SM3-II client of :func:`sm3_client` (delay z, mu_0 = v0), clipping threshold eps_s (line 679)."""

    seed: int
    T: int
    K: int
    z: int
    eta: float
    eta_l: float
    eps: float
    tau: float
    v0: float
    vt0: float       # v~_0 >= tau^2 (line 668)
    beta: float      # server beta~_1
    eps_s: float
    N: int = 3
    d: int = 3
    sampling: tuple = ()

    def __post_init__(self):
        r = np.random.default_rng(self.seed)
        self.a = r.uniform(0.5, 2.0, (self.N, self.d))
        self.c = r.uniform(-2.5, 2.5, (self.N, self.d))
        self.x0 = r.uniform(-3, 3, self.d)
        if not self.sampling:
            self.sampling = tuple(tuple(sorted(r.choice(self.N, size=int(r.integers(1, self.N + 1)), replace=False).tolist()))
                                  for _ in range(self.T))
        self.L = float(self.a.max())
        self.G = float(self.a.max())
        self.Lt = 2 * math.sqrt(self.d) * self.G / (self.eta_l * self.eps_s)           # L~ (line 140)
        self.run()

    def f(self, x):
        return float(np.mean(_Fi(self.a, self.c, x)))

    def gf(self, x):
        return np.mean(_gFi(self.a, self.c, x), axis=0)

    def fstar(self) -> float:
        """min f: f is separable, minimised per coordinate on a fine grid and refined."""
        tot = 0.0
        for j in range(self.d):
            g = np.linspace(-math.pi, math.pi, 20001)
            vals = np.mean(self.a[:, j, None] * (1 - np.cos(g[None, :] - self.c[:, j, None])), axis=0)
            k = int(np.argmin(vals))
            lo, hi = g[max(k - 1, 0)], g[min(k + 1, len(g) - 1)]
            for _ in range(60):
                m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
                f1 = np.mean(self.a[:, j] * (1 - np.cos(m1 - self.c[:, j])))
                f2 = np.mean(self.a[:, j] * (1 - np.cos(m2 - self.c[:, j])))
                lo, hi = (lo, m2) if f1 < f2 else (m1, hi)
            tot += float(np.mean(self.a[:, j] * (1 - np.cos((lo + hi) / 2 - self.c[:, j]))))
        return tot

    def client(self, i: int, x):
        """K local steps of client i from x: (iterates x_(i,0..K), gradients g_(i,1..K), preconditioners v_(i,1..K), clipped?)."""
        mu = np.full(len(COVER), float(self.v0))
        v = np.full(self.d, float(self.v0))
        xs, gs, vs, clipped = [x.copy()], [], [], False
        for k in range(1, self.K + 1):
            g = _gFi(self.a[i], self.c[i], xs[-1])
            if (k - 1) % self.z == 0:
                v = np.array([min(mu[b] for b, Sb in enumerate(COVER) if j in Sb) for j in range(self.d)]) + g**2
                mu = np.array([max(v[j] for j in Sb) for Sb in COVER])
            upd = g / (np.sqrt(v) + self.eps)
            if 0 < np.linalg.norm(upd) < self.eps_s:
                upd, clipped = 0 * upd, True
            xs.append(xs[-1] - self.eta_l * upd)
            gs.append(g)
            vs.append(v.copy())
        return np.array(xs), np.array(gs), np.array(vs), clipped

    def run(self):
        x = self.x0.copy()
        m, v = np.zeros(self.d), np.full(self.d, float(self.vt0))
        self.xs, self.D, self.vt, self.mt, self.rec, self.clipped = [x.copy()], [None], [v.copy()], [m.copy()], [None], False
        for t_ in range(1, self.T + 1):
            S_ = self.sampling[t_ - 1]
            recs = [self.client(i, x) for i in S_]
            self.clipped |= any(rc[3] for rc in recs)
            D = np.mean([rc[0][-1] - x for rc in recs], axis=0)
            m = self.beta * m + (1 - self.beta) * D
            v = v + D**2
            x = x + self.eta * m / (np.sqrt(v) + self.tau)
            self.xs.append(x.copy()); self.D.append(D); self.vt.append(v.copy()); self.mt.append(m.copy())
            self.rec.append((S_, recs))

    # constants of Lemmas 15-17 and Theorem 20
    def phi1(self, K_=None) -> float:
        """Lemma 15's Phi_1 per coordinate (its proof's last line: eta_l, not eta_l^2, on the second term)."""
        K_ = self.K if K_ is None else K_
        n_ = -(-K_ // self.z)
        return self.eta_l * (math.sqrt(n_) * math.sqrt(math.log1p(n_ * self.G**2 / self.eps**2))
                             + (K_ - n_) * self.G / (math.sqrt(self.v0) + self.eps))

    def phi2(self) -> float:
        """Lemma 16's Phi_2 at t = T (the bound grows with t)."""
        return min(self.eta * math.sqrt((1 - self.beta) * (1 - self.beta ** (2 * self.T))), self.eta / self.tau * self.phi1())

    def gamma(self, r: int):
        """gamma_r (line 898), coordinate-wise (v_(i,p) is a vector; broadcast notation, line 866)."""
        S_, recs = self.rec[r]
        return self.eta_l / len(S_) * sum(np.sum(1 / (np.sqrt(rc[2]) + self.eps), axis=0) for rc in recs)

    @property
    def gamma1(self) -> float:
        return self.eta_l * self.K / (math.sqrt(self.v0 + self.d * self.K * self.G**2) + self.eps)

    @property
    def alpha1(self) -> float:
        return 1 / (2 * math.sqrt(self.v0 + self.d * self.K * self.G**2) + 2 * self.eps)

    def dcoef(self, den=None) -> float:
        """The factor of the drift sums in (12): eta_l K/(alpha~_1 tau (sqrt(v0) + eps)^2) (den overrides the last factor)."""
        den = (math.sqrt(self.v0) + self.eps) ** 2 if den is None else den
        return self.eta_l * self.K / (self.alpha1 * self.tau * den)

    def point(self) -> dict:
        return {"seed": self.seed, "T": self.T, "K": self.K, "z": self.z, "N": self.N, "d": self.d, "eta": self.eta,
                "eta_l": self.eta_l, "eps": self.eps, "tau": self.tau, "v0": self.v0, "v~_0": self.vt0, "beta1~": self.beta,
                "eps_s": self.eps_s, "L": self.L, "G": self.G, "clipped": self.clipped, "sampling": self.sampling,
                "F_i": "sum_j a_ij (1 - cos(x_j - c_ij))"}


def _describe_run(w) -> str:
    return (f"run seed {w.seed} (T = {w.T}, K = {w.K}, z = {w.z}, eta = {w.eta:g}, eta_l = {w.eta_l:g}, eps = {w.eps:g}, tau = "
            f"{w.tau:g}, v0 = {w.v0:g}, beta~1 = {w.beta:g}, eps_s = {w.eps_s:g}, sampling {w.sampling})")


RUNS20 = (
    Ada2Run(1, 6, 3, 2, 0.5, 0.1, 0.1, 0.1, 0.0, 0.02, 0.5, 1e-6),
    Ada2Run(2, 6, 3, 1, 1.0, 0.05, 0.01, 0.2, 0.5, 0.05, 0.9, 1e-6),
    Ada2Run(3, 5, 4, 3, 0.3, 0.2, 0.5, 0.05, 2.0, 0.003, 0.0, 1e-6),
)


def _sq(v):
    return float(np.sum(np.asarray(v) ** 2))


def _rel_868(w: Ada2Run):
    rows = []
    for t_ in range(1, w.T + 1):
        x0, x1, g = w.xs[t_ - 1], w.xs[t_], w.gf(w.xs[t_ - 1])
        den = np.sqrt(w.vt[t_]) + w.tau
        mom = w.beta**t_ * w.mt[0] + (1 - w.beta) * sum(w.beta ** (t_ - r) * w.D[r] for r in range(1, t_ + 1))
        T00 = float(np.dot(g, w.beta**t_ * w.mt[0] / den))
        T0r = [w.beta ** (t_ - r) * float(np.dot(g, w.D[r] / den)) for r in range(1, t_ + 1)]
        rows += [(w.f(x1), "<=", w.f(x0) + float(np.dot(g, x1 - x0)) + w.L / 2 * _sq(x1 - x0)),
                 (float(np.abs(x1 - x0 - w.eta * mom / den).max()), "=", 0.0),
                 (float(np.dot(g, x1 - x0)), "=", w.eta * T00 + (1 - w.beta) * w.eta * sum(T0r))]
    return rows


def _T1(w, t_, r):
    g = w.gf(w.xs[t_ - 1])
    return w.beta ** (t_ - r) * float(np.dot(g, w.D[r] / (np.sqrt(w.vt[t_]) + w.tau) - w.D[r] / (np.sqrt(w.vt[t_ - 1]) + w.tau)))


def _rel_882(w: Ada2Run):
    rows = []
    n1 = math.sqrt(w.d) * w.phi1()
    for t_ in range(1, w.T + 1):
        g = w.gf(w.xs[t_ - 1])
        vt, vp, Dt = w.vt[t_], w.vt[t_ - 1], w.D[t_]
        for r in range(1, t_ + 1):
            b = w.beta ** (t_ - r)
            e882 = b * float(np.dot(g, w.D[r] * (np.sqrt(vp) - np.sqrt(vt)) / ((np.sqrt(vt) + w.tau) * (np.sqrt(vp) + w.tau))))
            e883 = b * float(np.dot(g, -w.D[r] * Dt**2 / ((np.sqrt(vt) + w.tau) * (np.sqrt(vp) + w.tau) * (np.sqrt(vp) + np.sqrt(vt)))))
            e884 = b * float(np.dot(np.abs(g), np.abs(w.D[r]) * Dt**2 / ((vt + w.tau**2) * (np.sqrt(vp) + w.tau))))
            e885 = b * float(np.sum(w.G * np.abs(w.D[r]) * Dt**2 / ((vt + w.tau**2) * (np.sqrt(vp) + w.tau))))
            e886 = n1 * w.G * b / w.tau * float(np.sum(Dt**2 / vt))
            rows += [(_T1(w, t_, r), "=", e882), (e882, "=", e883), (e883, "<=", e884), (e884, "<=", e885), (e885, "<=", e886)]
    return rows


def _T2_parts(w, t_, r):
    g = w.gf(w.xs[t_ - 1])
    den = np.sqrt(w.vt[t_ - 1]) + w.tau
    gam = w.gamma(r)
    b = w.beta ** (t_ - r)
    T2 = b * float(np.dot(g, w.D[r] / den))
    T21 = b * float(np.dot(g / den, w.D[r] + gam * g))
    quad = b * float(np.sum(gam * g**2 / den))
    return T2, T21, quad


def _rel_890(w: Ada2Run):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            T2, T21, quad = _T2_parts(w, t_, r)
            rows.append((T2, "=", T21 - quad))
    return rows


def _drift(w, t_, r, i, p, lip_power, cross_gap):
    """The chain 919-925 for client i (index in S^r) at local step p of round r, seen from round t."""
    S_, recs = w.rec[r]
    xs_i = recs[i][0]
    ci = S_[i]
    xt1, xr1, xip = w.xs[t_ - 1], w.xs[r - 1], xs_i[p - 1]
    gFi_xip = _gFi(w.a[ci], w.c[ci], xip)
    allt = _gFi(w.a, w.c, xt1)          # grad F_i'(x_(t-1)) for every i'
    allr = _gFi(w.a, w.c, xr1)
    lhs = _sq(w.gf(xt1) - gFi_xip)
    e919 = np.mean([_sq(allt[k] - gFi_xip) for k in range(w.N)])
    e920 = np.mean([_sq(allt[k] - allr[k] + allr[k] - gFi_xip) for k in range(w.N)])
    e921 = 2 * np.mean([_sq(allt[k] - allr[k]) + _sq(allr[k] - gFi_xip) for k in range(w.N)])
    dist = _sq(xip - xs_i[0])
    e922 = 2 * w.L**lip_power * _sq(xt1 - xr1) + 2 * cross_gap(w.Lt, dist, w.d, w.G)
    e924 = (2 * w.L**lip_power * (t_ - r) * sum(_sq(w.xs[o] - w.xs[o - 1]) for o in range(r, t_))
            + 2 * cross_gap(w.Lt, w.d * w.phi1(p) ** 2, w.d, w.G))
    e925 = 2 * w.L**lip_power * (t_ - r) ** 2 * w.d * w.phi2() ** 2 + 2 * cross_gap(w.Lt, w.d * w.phi1() ** 2, w.d, w.G)
    return [(lhs, "<=", e919), (e919, "=", e920), (e920, "<=", e921), (e921, "<=", e922), (e922, "=", e922), (e922, "<=", e924),
            (e924, "<=", e925)]


def _rel_919(w: Ada2Run, lip_power, cross_gap):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            for i in range(len(w.rec[r][0])):
                for p in range(1, w.K + 1):
                    rows += _drift(w, t_, r, i, p, lip_power, cross_gap)
    return rows


def _young(w, t_, r, lip_power, cross_gap):
    """T_(2,r)^1 (906) = 907 <= 908-909 <= 910-911, and 911's second term with 925's bound (929-930)."""
    S_, recs = w.rec[r]
    n = len(S_)
    g = w.gf(w.xs[t_ - 1])
    den = np.sqrt(w.vt[t_ - 1]) + w.tau
    gam = w.gamma(r)
    al = gam / (2 * w.eta_l * w.K)                       # alpha_r (line 915), coordinate-wise
    b = w.beta ** (t_ - r)
    _, T21, _ = _T2_parts(w, t_, r)
    e907 = b / n * sum(float(np.dot(g / den, w.eta_l * (g - rc[1][p]) / (np.sqrt(rc[2][p]) + w.eps)))
                       for rc in recs for p in range(w.K))
    first = w.eta_l * b * w.K / 2 * float(np.sum(al * g**2 / den))
    sec909 = w.eta_l * b / (2 * n) * sum(float(np.sum((g - _gFi(w.a[S_[k]], w.c[S_[k]], rc[0][p])) ** 2
                                                      / (den * (np.sqrt(rc[2][p]) + w.eps) ** 2 * al)))
                                         for k, rc in enumerate(recs) for p in range(w.K))
    amin = float(al.min())
    drift = [_sq(g - _gFi(w.a[S_[k]], w.c[S_[k]], rc[0][p])) for k, rc in enumerate(recs) for p in range(w.K)]
    sec911 = w.eta_l * b / (2 * n * amin * w.tau * (math.sqrt(w.v0) + w.eps) ** 2) * sum(drift)
    bound925 = 2 * w.L**lip_power * (t_ - r) ** 2 * w.d * w.phi2() ** 2 + 2 * cross_gap(w.Lt, w.d * w.phi1() ** 2, w.d, w.G)
    e929 = w.eta_l * b / (2 * n * amin * w.tau * (math.sqrt(w.v0) + w.eps) ** 2) * n * w.K * bound925
    e930 = (w.eta_l * b * w.K * w.L**lip_power * (t_ - r) ** 2 * w.d * w.phi2() ** 2 / (amin * w.tau * (math.sqrt(w.v0) + w.eps) ** 2)
            + w.eta_l * b * w.K * cross_gap(w.Lt, w.d * w.phi1() ** 2, w.d, w.G) / (amin * w.tau * (math.sqrt(w.v0) + w.eps) ** 2))
    return dict(T21=T21, e907=e907, first=first, sec909=sec909, sec911=sec911, e929=e929, e930=e930, gam=gam, amin=amin)


def _rel_906(w: Ada2Run):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            y = _young(w, t_, r, 1, lambda Lt, d2, d, G: Lt * d2)
            rows += [(y["T21"], "=", y["e907"]), (y["e907"], "<=", y["first"] + y["sec909"]),
                     (y["first"] + y["sec909"], "<=", y["first"] + y["sec911"])]
    return rows


def _rel_929(w: Ada2Run, lip_power, cross_gap):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            y = _young(w, t_, r, lip_power, cross_gap)
            rows.append((y["e929"], "<=", y["e930"]))
    return rows


def _collected(w, t_, lip_power, cross_gap):
    """Right side of 934-935 and of (11) (946-948) at round t."""
    g = w.gf(w.xs[t_ - 1])
    den = np.sqrt(w.vt[t_ - 1]) + w.tau
    n1 = math.sqrt(w.d) * w.phi1()
    dt = float(np.sum(w.D[t_] ** 2 / w.vt[t_]))
    a = b_ = 0.0
    for r in range(1, t_ + 1):
        y = _young(w, t_, r, lip_power, cross_gap)
        bb = w.beta ** (t_ - r)
        a += n1 * w.G * bb / w.tau * dt - 3 / 4 * bb * float(np.sum(y["gam"] * g**2 / den))
        b_ += y["e930"]
    return (1 - w.beta) * w.eta * a, (1 - w.beta) * w.eta * b_


def _rel_934(w: Ada2Run, lip_power, cross_gap):
    rows = []
    for t_ in range(1, w.T + 1):
        g = w.gf(w.xs[t_ - 1])
        den_t = np.sqrt(w.vt[t_]) + w.tau
        T0 = [w.beta ** (t_ - r) * float(np.dot(g, w.D[r] / den_t)) for r in range(1, t_ + 1)]
        a, b_ = _collected(w, t_, lip_power, cross_gap)
        rows.append(((1 - w.beta) * w.eta * sum(T0), "<=", a + b_))
    return rows


def _rel_939(w: Ada2Run):
    rows = []
    n1sq = w.d * w.phi1() ** 2
    for t_ in range(1, w.T + 1):
        den = np.sqrt(w.vt[t_]) + w.tau
        m0 = w.beta**t_ * w.mt[0] / den
        mom = (1 - w.beta) * sum(w.beta ** (t_ - r) * w.D[r] for r in range(1, t_ + 1)) / den
        mx = np.max(np.abs([w.D[r] for r in range(1, t_ + 1)]), axis=0)
        e939 = 2 * _sq(m0) + 2 * _sq(mom)
        e940 = 2 * _sq(m0) + 2 * _sq((1 - w.beta) * sum(w.beta ** (t_ - r) for r in range(1, t_ + 1)) * mx / den)
        e941 = 2 * _sq(m0) + 2 * _sq((1 - w.beta**t_) / den) * n1sq
        e942 = 2 * _sq(m0) + 2 * w.d * n1sq / w.tau**2
        rows += [(_sq(m0 + mom), "<=", e939), (e939, "<=", e940), (e940, "<=", e941), (e941, "<=", e942)]
    return rows


def _rel_946(w: Ada2Run, lip_power, cross_gap):
    rows = []
    n1sq = w.d * w.phi1() ** 2
    for t_ in range(1, w.T + 1):
        g = w.gf(w.xs[t_ - 1])
        den = np.sqrt(w.vt[t_]) + w.tau
        T00 = float(np.dot(g, w.beta**t_ * w.mt[0] / den))
        a, b_ = _collected(w, t_, lip_power, cross_gap)
        rhs = (w.f(w.xs[t_ - 1]) + w.eta * T00 + w.eta**2 * w.L * _sq(w.beta**t_ * w.mt[0] / den)
               + w.eta**2 * w.L * w.d * n1sq / w.tau**2 + a + b_)
        rows.append((w.f(w.xs[t_]), "<=", rhs))
    return rows


def _telescoped(w, lip_power, cross_gap):
    """(12)'s two sides (952-953) with gamma~_1, alpha~_1 and m~_0 = 0."""
    n1 = math.sqrt(w.d) * w.phi1()
    lhs = 3 * (1 - w.beta) * w.eta * w.gamma1 / 4 * sum(
        w.beta ** (t_ - r) * float(np.sum(w.gf(w.xs[t_ - 1]) ** 2 / (np.sqrt(w.vt[t_ - 1]) + w.tau)))
        for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
    dsum = sum(w.beta ** (t_ - r) * float(np.sum(w.D[t_] ** 2 / w.vt[t_])) for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
    cross = cross_gap(w.Lt, n1**2, w.d, w.G)
    dbl = sum(w.L**lip_power * w.beta ** (t_ - r) * (t_ - r) ** 2 * w.d * w.phi2() ** 2 + cross * w.beta ** (t_ - r)
              for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
    parts = dict(psi1=w.f(w.x0) - w.fstar(), delta=(1 - w.beta) * w.eta * n1 * w.G / w.tau * dsum,
                 psi2=w.eta**2 * w.L * w.T * w.d * n1**2 / w.tau**2,
                 drift=(1 - w.beta) * w.eta * w.dcoef() * dbl)
    return lhs, parts


def _rel_952(w: Ada2Run, lip_power, cross_gap):
    lhs, pt = _telescoped(w, lip_power, cross_gap)
    return [(lhs, "<=", sum(pt.values()))]


def _rel_957(w: Ada2Run):
    rows = []
    for j in range(w.d):
        D = np.array([w.D[t_][j] for t_ in range(1, w.T + 1)])
        S_ = np.cumsum(D**2)
        lhs = (1 - w.beta) * sum(w.beta ** (t_ - r) * D[t_ - 1] ** 2 / (S_[t_ - 1] + w.tau**2)
                                 for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
        mid = sum((1 - w.beta**t_) * D[t_ - 1] ** 2 / (S_[t_ - 1] + w.tau**2) for t_ in range(1, w.T + 1))
        rows += [(lhs, "<=", mid), (mid, "<=", 1 - w.beta + math.log1p(S_[-1] / w.tau**2))]
    return rows


def _rel_974(w: Ada2Run):
    rows = []
    for j in range(w.d):
        D = np.array([w.D[t_][j] for t_ in range(1, w.T + 1)])
        b = np.cumsum(D**2) / w.tau**2                 # b_T of line 985 (b_1 = Delta_1^2/tau^2)
        for T_ in range(1, w.T):
            x_ = D[T_] ** 2 / (np.sum(D[:T_ + 1] ** 2) + w.tau**2)
            c_, b0, b1 = 1.0, b[T_ - 1], b[T_]
            rows += [(x_, "<=", c_ * (b1 - b0) / (b1 + 1)),
                     ((c_ * (b1 - b0) / (b1 + 1) - x_) * (b1 + 1), "=", (c_ - x_) * b1 - (x_ + c_ * b0))]
    return rows


def _rel_987(w: Ada2Run):
    rows = []
    n1sq = w.d * w.phi1() ** 2
    for j in range(w.d):
        D = np.array([w.D[t_][j] for t_ in range(1, w.T + 1)])
        S_ = np.cumsum(D**2)
        lhs = (1 - w.beta) * sum(w.beta ** (t_ - r) * D[t_ - 1] ** 2 / (S_[t_ - 1] + w.tau**2)
                                 for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
        mid = 1 - w.beta + math.log1p(float(np.sum((D / w.tau) ** 2)))
        rows += [(lhs, "<=", mid), (mid, "<=", 1 - w.beta + math.log1p(w.T * n1sq / w.tau**2))]
    return rows


def _rel_1012(w: Ada2Run):
    from .fedada2 import c_beta

    b, T_ = w.beta, w.T
    cb = c_beta(b)[0]
    lhs = (1 - b) * sum(b**u * u * u * (T_ - u + 1) for u in range(T_ + 1))
    split = (1 - b) * sum(b**u * u * u * (T_ - u) for u in range(T_)) + (1 - b) * sum(b**u * u * u for u in range(T_ + 1))
    dbl = (1 - b) * sum(b ** (t_ - r) * (t_ - r) ** 2 for t_ in range(1, T_ + 1) for r in range(1, t_ + 1))
    return [(lhs, "=", split), (lhs, "<=", (1 - b) * cb * (T_ + 1)), (dbl, "<=", (1 - b) * cb * T_),
            (sum(b**u * u * u for u in range(T_ + 1)), "<=", cb)]


def _psi(w, lip_power, cross_gap, den15=None):
    """Psi_1..Psi_6 of Theorem 20 (lines 850-855) on run w (den15: the denominator (15) prints for Psi_3, Psi_4)."""
    from .fedada2 import c_beta

    n1sq, n2sq = w.d * w.phi1() ** 2, w.d * w.phi2() ** 2
    dc = w.dcoef(den15)
    return {"Psi1": w.f(w.x0) - w.fstar(),
            "Psi2": w.eta**2 * w.L * w.T * w.d * n1sq / w.tau**2,
            "Psi3": (1 - w.beta**w.T) * w.eta * dc * cross_gap(w.Lt, n1sq, w.d, w.G) * w.T,
            "Psi4": (1 - w.beta) * w.eta * dc * w.L**lip_power * w.T * c_beta(w.beta)[0] * n2sq,
            "Psi5": w.eta * w.d * math.sqrt(n1sq) * w.G * (1 - w.beta + math.log1p(w.T * n1sq / w.tau**2)) / w.tau,
            "Psi6": 3 * (1 - w.beta) * w.eta * w.gamma1 * w.T / (4 * (math.sqrt(w.T * n1sq + float(np.max(w.vt[0]))) + w.tau))}


def _min_grad(w) -> float:
    return min(_sq(w.gf(w.xs[t_ - 1])) for t_ in range(1, w.T + 1))


def _rel_1021(w: Ada2Run, lip_power, cross_gap):
    lhs, _ = _telescoped(w, lip_power, cross_gap)
    return [(lhs, ">=", _psi(w, lip_power, cross_gap)["Psi6"] * _min_grad(w))]


def _rel_1025(w: Ada2Run, lip_power, cross_gap, eq15_den):
    den = eq15_den(w.v0, w.eps)
    p = _psi(w, lip_power, cross_gap, den15=den)
    return [(p["Psi6"] * _min_grad(w), "<=", sum(p[k] for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5"))),
            (den, "=", (math.sqrt(w.v0) + w.eps) ** 2)]


def _rel_1035(w: Ada2Run, lip_power, cross_gap):
    """The Psi_i bound the terms of (12): Psi_2 equal, Psi_3 >= the cross term summed, Psi_4 >= the (t-r)^2 term (Lemma 21),
    Psi_5 >= the Delta^2/v~ term (Lemma 22); and the conclusion min ||grad f||^2 <= (Psi_1 + ... + Psi_5)/Psi_6."""
    from .fedada2 import c_beta

    _, pt = _telescoped(w, lip_power, cross_gap)
    p = _psi(w, lip_power, cross_gap)
    n1sq = w.d * w.phi1() ** 2
    c3 = (1 - w.beta) * w.eta * w.dcoef()
    cross = cross_gap(w.Lt, n1sq, w.d, w.G)
    t3 = c3 * sum(cross * w.beta ** (t_ - r) for t_ in range(1, w.T + 1) for r in range(1, t_ + 1))
    t4 = pt["drift"] - t3
    return [(pt["psi1"], "=", p["Psi1"]), (pt["psi2"], "=", p["Psi2"]), (t3, "<=", p["Psi3"]), (t4, "<=", p["Psi4"]),
            (pt["delta"], "<=", p["Psi5"]), (_min_grad(w), "<=", sum(p[k] for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5"))
                                            / p["Psi6"]), (c_beta(w.beta)[0], ">=", 1.0)]


def _rel_850(w: Ada2Run, lip_power, cross_gap):
    p = _psi(w, lip_power, cross_gap)
    g1 = w.eta_l * sum(1 / (math.sqrt(w.v0 + w.d * w.K * w.G**2) + w.eps) for _ in range(w.K))   # line 902's gamma~_1
    rows = [(_min_grad(w), "<=", sum(p[k] for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5")) / p["Psi6"]),
            (w.gamma1, "=", g1), (w.alpha1, "=", g1 / (2 * w.eta_l * w.K))]
    for r in range(1, w.T + 1):      # gamma_r in [gamma~_1, gamma~_2] (902) and alpha_r >= alpha~_1 (915): Lemma 17
        rows += [(float(w.gamma(r).min()), ">=", w.gamma1), (float(w.gamma(r).max()), "<=", w.eta_l * w.K / (math.sqrt(w.v0) + w.eps))]
    return rows


def _rel_787(w: Ada2Run):
    rows = []
    b = w.beta
    for t_ in range(1, w.T + 1):
        Ds = np.array([w.D[l] for l in range(1, t_ + 1)])
        step = w.eta * np.abs(w.mt[t_]) / (np.sqrt(w.vt[t_]) + w.tau)
        wts = np.array([b ** (t_ - l) for l in range(1, t_ + 1)])
        num = w.eta * (1 - b) * (wts[:, None] * np.abs(Ds)).sum(0)
        e787 = num / (np.sqrt((Ds**2).sum(0) + w.tau**2) + w.tau)
        sw = math.sqrt(float(np.sum(wts**2)))
        nz = (Ds**2).sum(0) > 0
        e788 = np.where(nz, num * sw / (np.sqrt((Ds**2).sum(0)) * sw + 1e-300), 0.0)
        e789 = w.eta * math.sqrt(1 - b) * math.sqrt(1 - b * b) * sw
        e790 = w.eta * math.sqrt(1 - b) * math.sqrt(1 - b ** (2 * t_))
        rows += [_worst(step, "<=", e787), _worst(e787, "<=", e788), _worst(e788, "<=", e789), (e789, "=", e790)]
    return rows


@check(PAPER, "lemma16_steps",
       "Lemma 16's proof: eta |m~_t|/(sqrt(v~_t) + tau) <= eta (1 - b) sum b^(t-l) |Delta_l|/(sqrt(sum Delta_l^2 + tau^2) + tau) "
       "<= ... (Cauchy-Schwarz) <= eta sqrt(1 - b) sqrt(1 - b^2) sqrt(sum b^(2t-2l)) = eta sqrt(1 - b) sqrt(1 - b^(2t)) (787-790).",
       spec=("9",), severity="constant", depends=("lemma16_server_step",),
       hypotheses=(Hyp("Algorithm 2: m~_0 = 0, v~_0 >= tau^2, 0 <= beta~_1 < 1", lambda p: p["v~_0"] >= p["tau"] ** 2
                       and 0 <= p["beta1~"] < 1, "fedada2.txt lines 668, 100"),))
def _lemma16_steps():
    """fedada2.txt proof of Lemma 16, display 787-790, per coordinate and round on the three seeded runs of Algorithm 2 used
    for Theorem 20 (RUNS20); 788 drops tau (taken where sum Delta^2 > 0)."""
    return relations_result([Rel("787-790", "the server step bound", _rel_787)], RUNS20, "Lemma 16's display", Ada2Run.point,
                            describe=_describe_run)


H_T20 = (Hyp("Assumptions 1-2 on the run: every F_i = sum_j a_ij (1 - cos(x_j - c_ij)) is L-smooth with L = max a and |grad F_i|_j <= "
              "G = max a; full client gradients (line 913); no clipping triggered (line 892's case)", lambda p: p["F_i"].startswith("sum_j")
              and p["L"] > 0 and p["G"] > 0 and not p["clipped"], "fedada2.txt lines 130-136, 892, 913"),
         Hyp("Algorithm 2's ranges: v~_0 >= tau^2 > 0, 0 <= beta~_1 < 1, v0 >= 0, eps, eps_s > 0, K, z >= 1, any client sampling",
             lambda p: p["v~_0"] >= p["tau"] ** 2 > 0 and 0 <= p["beta1~"] < 1 and p["v0"] >= 0 and p["eps"] > 0 and p["eps_s"] > 0,
             "fedada2.txt lines 667-685"))

CROSS_PRINTED = lambda Lt, dist2, d, G: Lt * dist2
#: |[grad F_i'(x) - grad F_i(y)]_j| <= 2G, so the cross-client gap is at most 4 d G^2 whatever ||x - y|| (at p = 1, x = y)
CROSS_NEEDED = lambda Lt, dist2, d, G: 4 * d * G**2


@check(PAPER, "thm20_run_steps",
       "Theorem 20 and its proof evaluated on runs of Algorithm 2: the statement's bound (850-855), (9) (868-870), T_(1,r) "
       "(882-886), T_(2,r) (890), Young (906-911), the drift chain (919-925), 929-930, the collected bound (934-935), the momentum "
       "term (939-942), (11) (946-948), (12) (952-953), the log recursion (957-958, 974-975, 987-988), Lemma 21's induction "
       "(1012-1013), the min bound (1021), (15) (1025-1027) and the Psi's (1035-1040).",
       spec=("9", "10", "11", "12", "3.9.2"), severity="rate",
       depends=("lemma15_statement_vs_proof", "lemma16_server_step", "lemma17_sm3_bounds", "derived_lipschitz_Ltilde"),
       corrected={"lip_power": 2, "cross_gap": CROSS_NEEDED, "eq15_den": lambda v0, eps: (math.sqrt(v0) + eps) ** 2},
       hypotheses=H_T20)
def _thm20_run(lip_power=1, cross_gap=CROSS_PRINTED, eq15_den=lambda v0, eps: (v0 + eps) ** 2):
    """fedada2.txt Theorem 20 (statement 842-863, display 850-855; Theorem 6's main-text form at line 150) and its proof (864-1050): displays 868-870, 882-886, 890,
    906-911, 919-925, 929-930, 934-935, 939-942, 946-948, 952-953, 957-958, 974-975, 987-988, 1012-1013, 1021, 1025-1027,
    1035-1040, per round t and r <= t on three seeded runs of Algorithm 2 (N = 3 heterogeneous clients, d = 3, SM3 cover
    {{1, 2}, {2, 3}}, random client subsets).  Phi_1 is Lemma 15's proof's (eta_l on the second term), ||Phi|| = sqrt(d) Phi
    (broadcast), Phi_2 Lemma 16's at t = T, gamma_r and alpha_r coordinate-wise (line 866) with min_j alpha_r in 911.
    The printed forms: ``lip_power`` (922 bounds ||grad F(x) - grad F(y)||^2 by L ||x - y||^2, power 1), ``cross_gap(L~,
    ||x_(i,p-1) - x_(i,0)||^2, d, G)`` (922's cross-client term L~ ||x_(i,p-1) - x_(i,0)||^2, which is 0 at p = 1 while the
    clients' gradients differ), ``eq15_den(v0, eps)`` ((15) prints (v0 + eps)^2 where (12) and Psi_3, Psi_4 have
    (sqrt(v0) + eps)^2)."""
    rels = [Rel("850-855", "the bound min ||grad f||^2 <= (Psi_1 + ... + Psi_5)/Psi_6; gamma~_1, alpha~_1", lambda w: _rel_850(w, lip_power, cross_gap)),
            Rel("868-870", "(9): L-smoothness, the momentum unrolled, T_(0,0) and T_(0,r)", _rel_868),
            Rel("882-886", "T_(1,r) bound", _rel_882),
            Rel("890", "T_(2,r) split with gamma_r", _rel_890),
            Rel("906-911", "T_(2,r)^1: Delta_r unrolled, Young with alpha_r, tau and v0 in the denominators", _rel_906),
            Rel("919-925", "the drift chain", lambda w: _rel_919(w, lip_power, cross_gap)),
            Rel("929-930", "the drift bound substituted", lambda w: _rel_929(w, lip_power, cross_gap)),
            Rel("934-935", "collected: (1 - b) eta sum_r T_(0,r)", lambda w: _rel_934(w, lip_power, cross_gap)),
            Rel("939-942", "the last term of (9)", _rel_939),
            Rel("946-948", "(11)", lambda w: _rel_946(w, lip_power, cross_gap)),
            Rel("952-953", "(12): telescoped with gamma~_1, alpha~_1", lambda w: _rel_952(w, lip_power, cross_gap)),
            Rel("957-958", "(13) with a_T = 1 - b, c_T = 1, b_T = sum Delta^2/tau^2", _rel_957),
            Rel("974-975", "the induction step's equivalence", _rel_974),
            Rel("987-988", "(14)", _rel_987),
            Rel("1012-1013", "Lemma 21's induction step", _rel_1012),
            Rel("1021", "the min bound", lambda w: _rel_1021(w, lip_power, cross_gap)),
            Rel("1025-1027", "(15)", lambda w: _rel_1025(w, lip_power, cross_gap, eq15_den)),
            Rel("1035-1040", "the Psi's bound (12)'s terms", lambda w: _rel_1035(w, lip_power, cross_gap))]
    res = relations_result(rels, RUNS20, "Theorem 20's displays", Ada2Run.point, rtol=1e-9, describe=_describe_run)
    if res.status == "refuted" and lip_power == 1:
        res = dataclasses.replace(res, evidence=res.evidence + "; 922 needs L^2 ||x - y||^2 (thm20_drift_squared_lipschitz) and, for "
                                  "the cross-client term, a bound that does not vanish at p = 1 where x_(i,0) = x_(r-1) but grad "
                                  "F_i' != grad F_i (|.|_j <= 2G gives 4 d G^2; any_sampling_deterministic_guarantee shows the "
                                  "rate fails without it); (15) prints (v0 + eps)^2 for (sqrt(v0) + eps)^2 (equal at the default "
                                  "v0 = 0)")
    return res


# ===========================================================================
# Theorem 25 and Lemma 26: runs of Algorithm 5 (blended optimizer strategies)
# ===========================================================================

#: two optimizer strategies satisfying the printed update condition (1193-1197): (weight w(O_l), local epochs K(O_l), a_l
#: schedule, theta kind); strategy 0: a = 1, theta = 1 (m = M = 1); strategy 1: a in {1, 1/2}, theta = sqrt(v0 + sum g^2) + eps
STRATS = ((0.8, 2, "const"), (1.2, 3, "adagrad"))
XI_MINUS, XI_PLUS = 0.7, 1.3


@dataclass
class Ada25Run(Ada2Run):
    """T rounds of Algorithm 5 (lines 1167-1185): client i of S^t runs strategy i mod 2 with the printed rule x_p = x_(p-1) -
    eta_l sum_(l<=p) a_l g_l/theta_l (1193), Delta_i = w(O)(x_(i,K(O)) - x_(t-1)), server as Algorithm 2."""

    def _a(self, kind, l):
        return 1.0 if kind == "const" or l % 2 == 1 else 0.5

    def client(self, i: int, x):
        w_, Ko, kind = STRATS[i % 2]
        xs, gs, th, al, acc, clipped = [x.copy()], [], [], [], np.full(self.d, float(self.v0)), False
        for p in range(1, Ko + 1):
            g = _gFi(self.a[i], self.c[i], xs[-1])
            acc = acc + g**2
            gs.append(g)
            th.append(np.ones(self.d) if kind == "const" else np.sqrt(acc) + self.eps)
            al.append(self._a(kind, p))
            upd = sum(al[l] * gs[l] / th[l] for l in range(p))
            if 0 < np.linalg.norm(upd) < self.eps_s:      # Clip=True (Algorithm 5 line 1176, as in Algorithm 2 line 679)
                upd, clipped = 0 * upd, True
            xs.append(xs[-1] - self.eta_l * upd)
        return np.array(xs), np.array(gs), (np.array(th), np.array(al), w_, Ko), clipped

    def run(self):
        x = self.x0.copy()
        m, v = np.zeros(self.d), np.full(self.d, float(self.vt0))
        self.xs, self.D, self.vt, self.mt, self.rec, self.clipped = [x.copy()], [None], [v.copy()], [m.copy()], [None], False
        for t_ in range(1, self.T + 1):
            S_ = self.sampling[t_ - 1]
            recs = [self.client(i, x) for i in S_]
            self.clipped |= any(rc[3] for rc in recs)
            D = np.mean([rc[2][2] * (rc[0][-1] - x) for rc in recs], axis=0)
            m = self.beta * m + (1 - self.beta) * D
            v = v + D**2
            x = x + self.eta * m / (np.sqrt(v) + self.tau)
            self.xs.append(x.copy()); self.D.append(D); self.vt.append(v.copy()); self.mt.append(m.copy())
            self.rec.append((S_, recs))

    # the condition's constants (1197-1199) for the two strategies
    @property
    def m_min(self):
        return min(1.0, math.sqrt(self.v0) + self.eps)

    @property
    def M_max(self):
        return max(1.0, math.sqrt(self.v0 + self.K * self.G**2) + self.eps)

    a_min, A_max = 0.5, 1.0

    def phi1(self, K_=None) -> float:
        """Lemma 26's Phi_1 (1217) per coordinate."""
        return self.eta_l * XI_PLUS * self.K * (self.K + 1) * self.A_max * self.G / (2 * self.m_min)

    def gamma(self, r: int):
        """gamma_r (1264), coordinate-wise."""
        S_, recs = self.rec[r]
        tot = 0.0
        for rc in recs:
            th, al, w_, Ko = rc[2]
            tot = tot + sum(w_ * al[l] / th[l] for p in range(1, Ko + 1) for l in range(p))
        return self.eta_l / len(S_) * tot

    @property
    def gamma1(self) -> float:
        return self.eta_l * XI_MINUS * self.a_min / self.M_max

    @property
    def alpha1(self) -> float:
        return XI_MINUS * self.a_min / (self.K * (self.K + 1) * self.M_max)

    @property
    def C(self) -> float:
        """C of (1203)."""
        return XI_PLUS**2 * self.K * (self.K + 1) * self.A_max**2 / (2 * self.alpha1 * self.tau * self.m_min**2)

    def dcoef(self, den=None) -> float:
        return self.eta_l * self.C


RUNS25 = (
    Ada25Run(11, 6, 3, 1, 0.5, 0.1, 0.1, 0.1, 1.0, 0.02, 0.5, 1e-6),
    Ada25Run(21, 4, 3, 1, 0.5, 1e-4, 0.1, 0.1, 1.0, 0.02, 0.5, 0.2),
    Ada25Run(13, 6, 3, 1, 0.3, 0.05, 0.5, 0.05, 0.0, 0.003, 0.0, 1e-6),
)


def _young25(w, t_, r, lip_power, cross_gap):
    S_, recs = w.rec[r]
    n = len(S_)
    g = w.gf(w.xs[t_ - 1])
    den = np.sqrt(w.vt[t_ - 1]) + w.tau
    gam = w.gamma(r)
    al = gam / (w.eta_l * w.K * (w.K + 1))                  # alpha_r^l (line 1281), coordinate-wise
    b = w.beta ** (t_ - r)
    _, T21, _ = _T2_parts(w, t_, r)
    e1273 = b / n * sum(float(np.dot(g / den, w.eta_l * rc[2][2] * rc[2][1][l] * (g - rc[1][l]) / rc[2][0][l]))
                        for rc in recs for p in range(1, rc[2][3] + 1) for l in range(p))
    first = w.eta_l * b / (4 * n) * sum(rc[2][3] * (rc[2][3] + 1) for rc in recs) * float(np.sum(al * g**2 / den))
    drifts = [(k, l, _sq(g - _gFi(w.a[S_[k]], w.c[S_[k]], rc[0][l]))) for k, rc in enumerate(recs)
              for p in range(1, rc[2][3] + 1) for l in range(p)]
    sec1275 = w.eta_l * b / (2 * n) * sum(float(np.sum((recs[k][2][2] * recs[k][2][1][l] * (g - _gFi(w.a[S_[k]], w.c[S_[k]],
                                                        recs[k][0][l]))) ** 2 / (recs[k][2][0][l] ** 2 * den * al)))
                                          for k, l, _ in drifts)
    first1276 = w.eta_l * b * w.K * (w.K + 1) / 4 * float(np.sum(al * g**2 / den))
    amin = float(al.min())
    sec1277 = w.eta_l * b * XI_PLUS**2 / (2 * w.tau * n) * sum(w.A_max**2 / (amin * w.m_min**2) * dd for _, _, dd in drifts)
    n1sq, n2sq = w.d * w.phi1() ** 2, w.d * w.phi2() ** 2
    e1290 = w.eta_l * w.C * (w.L**lip_power * b * (t_ - r) ** 2 * n2sq + cross_gap(w.Lt, n1sq, w.d, w.G) * b)
    return dict(T21=T21, e1273=e1273, first=first, sec1275=sec1275, first1276=first1276, sec1277=sec1277, e1290=e1290,
                gam=gam, amin=amin, drifts=drifts, bound1285=2 * w.L**lip_power * (t_ - r) ** 2 * n2sq
                + 2 * cross_gap(w.Lt, n1sq, w.d, w.G))


def _rel_1272(w):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            y = _young25(w, t_, r, 1, CROSS_PRINTED)
            rows += [(y["T21"], "=", y["e1273"]), (y["e1273"], "<=", y["first"] + y["sec1275"]),
                     (y["first"] + y["sec1275"], "<=", y["first1276"] + y["sec1277"]),
                     (float(w.gamma(r).min()), ">=", w.gamma1), (y["amin"], ">=", w.alpha1)]
    return rows


def _rel_1285(w, lip_power, cross_gap):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            y = _young25(w, t_, r, lip_power, cross_gap)
            rows += [(dd, "<=", y["bound1285"]) for _, _, dd in y["drifts"]]
    return rows


def _rel_1289(w, lip_power, cross_gap):
    rows = []
    for t_ in range(1, w.T + 1):
        for r in range(1, t_ + 1):
            y = _young25(w, t_, r, lip_power, cross_gap)
            rows.append((y["sec1277"], "<=", y["e1290"]))
    return rows


def _rel_1294(w, lip_power, cross_gap):
    rows = []
    n1sq = w.d * w.phi1() ** 2
    n1 = math.sqrt(n1sq)
    for t_ in range(1, w.T + 1):
        g = w.gf(w.xs[t_ - 1])
        den_t = np.sqrt(w.vt[t_]) + w.tau
        den = np.sqrt(w.vt[t_ - 1]) + w.tau
        T00 = float(np.dot(g, w.beta**t_ * w.mt[0] / den_t))
        dt = float(np.sum(w.D[t_] ** 2 / w.vt[t_]))
        acc = 0.0
        for r in range(1, t_ + 1):
            y = _young25(w, t_, r, lip_power, cross_gap)
            bb = w.beta ** (t_ - r)
            acc += n1 * w.G * bb / w.tau * dt + y["e1290"] / 1.0 - 3 / 4 * bb * float(np.sum(y["gam"] * g**2 / den))
        rhs = (w.f(w.xs[t_ - 1]) + w.eta * T00 + w.eta**2 * w.L * _sq(w.beta**t_ * w.mt[0] / den_t)
               + w.eta**2 * w.L * w.d * n1sq / w.tau**2 + (1 - w.beta) * w.eta * acc)
        rows.append((w.f(w.xs[t_]), "<=", rhs))
    return rows


def _rel_1201(w, lip_power, cross_gap):
    p = _psi(w, lip_power, cross_gap)
    C = XI_PLUS**2 * w.K * (w.K + 1) * w.A_max**2 / (2 * w.alpha1 * w.tau * w.m_min**2)
    return [(_min_grad(w), "<=", sum(p[k] for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5")) / p["Psi6"]), (w.C, "=", C),
            (w.alpha1, "=", w.gamma1 / (w.eta_l * w.K * (w.K + 1)))]


def _rel_1230(w):
    rows = []
    for r in range(1, w.T + 1):
        S_, recs = w.rec[r]
        for rc in recs:
            th, al, w_, Ko = rc[2]
            D = np.abs(w_ * (rc[0][-1] - rc[0][0]))
            e1 = w.eta_l * XI_PLUS * sum(w.A_max * w.G / w.m_min for p in range(1, w.K + 1) for _ in range(p))
            rows += [(float(D.max()), "<=", e1), (e1, "=", w.phi1())]
    return rows


H_T25 = (H_T20[0], Hyp("Theorem 25's conditions on the strategies: 0 < m_l <= theta <= M_l, 0 < a_l <= a <= A_l, 1 <= K(O) <= K, "
                       "0 < Xi- < w(O) < Xi+ (strategy 0: a = theta = 1; strategy 1: theta = sqrt(v0 + sum g^2) + eps in [sqrt(v0) + eps, "
                       "sqrt(v0 + K G^2) + eps], a in {1/2, 1}; w = 0.8, 1.2, Xi = 0.7, 1.3)", lambda p: p["strategies"] == "const/adagrad"
                       and p["v~_0"] >= p["tau"] ** 2 > 0 and 0 <= p["beta1~"] < 1, "fedada2.txt lines 1191-1199, Algorithm 5"))


def _point25(w):
    return dict(Ada2Run.point(w), strategies="const/adagrad")


@check(PAPER, "thm25_run_steps",
       "Theorem 25 and its proof on runs of Algorithm 5: the bound with C, gamma~_1, alpha~_1 (1201-1203), (16) (1240), T_(1,r) "
       "(1252), T_(2,r) (1256), Young over the strategies (1272-1277), the drift (1285), its substitution (1289-1290), (17) "
       "(1294-1296), (18) (1300-1301), the min bound (1305), the final inequality (1309-1311) and the Psi's with C (1319-1325).",
       spec=("12",), severity="rate", depends=("thm25_update_form", "lemma21_series_and_c_beta", "derived_lipschitz_Ltilde"),
       corrected={"lip_power": 2, "cross_gap": CROSS_NEEDED}, hypotheses=H_T25)
def _thm25_run(lip_power=1, cross_gap=CROSS_PRINTED):
    """fedada2.txt Theorem 25 (statement 1189-1209, display 1201-1203) and its proof (1236-1329): displays 1240, 1252, 1256,
    1272-1277, 1285, 1289-1290, 1294-1296, 1300-1301, 1305, 1309-1311, 1319-1325, per round on three seeded runs of
    Algorithm 5 (N = 3 heterogeneous clients, d = 3, client i of S^t runs strategy i mod 2 under the printed rule 1193,
    K = 3), Phi_1 of Lemma 26, gamma_r and alpha_r^l coordinate-wise (min_j alpha in 1277).  ``lip_power`` and ``cross_gap``
    are 1285's drift bound 2 L^lip_power (t-r)^2 ||Phi_2||^2 + 2 cross_gap(L~, ||Phi_1||^2, d, G) (printed: L, L~ ||Phi_1||^2);
    run 21 has eta_l = 1e-4, eps_s = 0.2 (no clipping triggered; L~ ||Phi_1||^2 is proportional to eta_l/eps_s), where the
    printed drift bound fails at the first local step of heterogeneous clients."""
    rels = [Rel("1201-1203", "the bound with Psi_3, Psi_4 of C; C, alpha~_1 = gamma~_1/(eta_l K(K+1))", lambda w: _rel_1201(w, lip_power, cross_gap)),
            Rel("1240", "(16)", _rel_868),
            Rel("1252", "T_(1,r) bound", _rel_882),
            Rel("1256", "T_(2,r) split", _rel_890),
            Rel("1272-1277", "Delta_r unrolled over strategies, Young with alpha_r^l, the constants; gamma_r >= gamma~_1, alpha_r >= alpha~_1", _rel_1272),
            Rel("1285", "the drift bound", lambda w: _rel_1285(w, lip_power, cross_gap)),
            Rel("1289-1290", "the drift term with C", lambda w: _rel_1289(w, lip_power, cross_gap)),
            Rel("1294-1296", "(17)", lambda w: _rel_1294(w, lip_power, cross_gap)),
            Rel("1300-1301", "(18)", lambda w: _rel_952(w, lip_power, cross_gap)),
            Rel("1305", "the min bound", lambda w: _rel_1021(w, lip_power, cross_gap)),
            Rel("1309-1311", "the final inequality", lambda w: _rel_1025(w, lip_power, cross_gap, lambda v0, eps: None)[:1]),
            Rel("1319-1325", "the Psi's bound (18)'s terms", lambda w: _rel_1035(w, lip_power, cross_gap))]
    return relations_result(rels, RUNS25, "Theorem 25's displays", _point25, rtol=1e-9, describe=_describe_run)


@check(PAPER, "lemma26_steps",
       "Lemma 26: under Algorithm 5, |Delta_i^(t,l)| <= eta_l Xi+ sum_(p<=K) sum_(l<=p) A_l G/m_l = eta_l Xi+ K(K+1) A_l G/(2 m_l) "
       "(1230), the Phi_1 of 1217.",
       spec=("14",), severity="constant", depends=("lemma26_28_sums", "thm25_update_form"), hypotheses=H_T25)
def _lemma26_steps():
    """fedada2.txt Lemma 26 (1213-1221) and its proof's display 1230, per client and round on the runs of thm25_run_steps."""
    return relations_result([Rel("1230", "the bound on |Delta_i^(t,l)|", _rel_1230)], RUNS25, "Lemma 26's display", _point25,
                            describe=_describe_run)


# ===========================================================================
# Corollaries 27 and 29: the bounds with their constants on runs of Algorithms 8 (ADMU clients) and 10 (AGDU clients)
# ===========================================================================


@dataclass
class DelayedRun(Ada2Run):
    """T rounds of Algorithm 8 (client ADMU with bias corrections, lines 1397-1428) or 10 (client AGDU, lines 1513-1543):
    client i's epochs K_i^t = 2 + (i + t) mod 2 <= K = 3 and weight Xi_i^t = 1/2 + (i + t) mod 2 / 2 in [eps_w, B] = [1/2, 1]."""

    kind: str = "admu"
    b1: float = 0.9
    b2: float = 0.99

    def client_t(self, i: int, x, t_: int):
        Ki, Xi = 2 + (i + t_) % 2, 0.5 + 0.5 * ((i + t_) % 2)
        m_, v_, vhat = np.zeros(self.d), np.full(self.d, float(self.v0)), np.full(self.d, float(self.v0))
        y, clipped = x.copy(), False
        for k in range(1, Ki + 1):
            g = _gFi(self.a[i], self.c[i], y)
            if self.kind == "admu":
                m_ = self.b1 * m_ + (1 - self.b1) * g
                mhat = m_ / (1 - self.b1**k)
                if (k - 1) % self.z == 0:
                    v_ = self.b2 * v_ + (1 - self.b2) * g * g
                    vhat = v_ / (1 - self.b2 ** ((k - 1) // self.z + 1))
                upd = mhat / (np.sqrt(vhat) + self.eps)
            else:
                if (k - 1) % self.z == 0:
                    v_ = v_ + g * g
                upd = g / (np.sqrt(v_) + self.eps)
            if 0 < np.linalg.norm(upd) < self.eps_s:
                upd, clipped = 0 * upd, True
            y = y - self.eta_l * upd
        return Xi * (y - x), clipped

    def run(self):
        x = self.x0.copy()
        m, v = np.zeros(self.d), np.full(self.d, float(self.vt0))
        self.xs, self.D, self.vt, self.mt, self.rec, self.clipped = [x.copy()], [None], [v.copy()], [m.copy()], [None], False
        for t_ in range(1, self.T + 1):
            S_ = self.sampling[t_ - 1]
            outs = [self.client_t(i, x, t_) for i in S_]
            self.clipped |= any(o[1] for o in outs)
            D = np.mean([o[0] for o in outs], axis=0)
            m = self.beta * m + (1 - self.beta) * D
            v = v + D**2
            x = x + self.eta * m / (np.sqrt(v) + self.tau)
            self.xs.append(x.copy()); self.D.append(D); self.vt.append(v.copy()); self.mt.append(m.copy())
            self.rec.append((S_, outs))

    B, eps_w, Kminus = 1.0, 0.5, 2

    def phi1(self, K_=None) -> float:
        """Lemma 28's (ADMU, as printed) or Lemma 30's (AGDU) Phi_1 with |Xi| <= B, at K."""
        from .fedada2 import lemma28_phi1, lemma30_phi1

        if self.kind == "admu":
            return self.B * self.eta_l * lemma28_phi1(self.K, self.b1, self.b2, self.z, self.eps, self.G)
        return self.eta_l * self.B * lemma30_phi1(self.K, self.z, self.G, self.eps, self.v0)

    @property
    def gamma1(self) -> float:
        if self.kind == "admu":
            return self.eta_l * self.eps_w * sum((1 - self.b1**p) / (self.G * math.sqrt(1 - self.b2 ** (-(-p // self.z))) + self.eps)
                                                 for p in range(1, self.Kminus + 1))
        nK = -(-self.K // self.z)
        return self.eta_l * self.eps_w * sum(1 / (math.sqrt(self.v0 + nK * self.G**2) + self.eps) for _ in range(self.Kminus))

    @property
    def alpha1(self) -> float:
        if self.kind == "admu":
            return sum(self.eps_w * (1 - self.b1**p) / ((self.G * math.sqrt(1 - self.b2 ** (-(-p // self.z))) + self.eps)
                                                          * (self.K + 1) ** 2) for p in range(1, self.Kminus + 1))
        nK = -(-self.K // self.z)
        return self.eps_w * self.Kminus / (2 * self.K * (math.sqrt(self.v0 + nK * self.G**2) + self.eps))

    def dcoef(self, den=None) -> float:
        if self.kind == "admu":   # Corollary 27's Psi_3, Psi_4: eta_l (1 - b1^(2K)) K B^2/(2 alpha~_1 tau eps^2)
            return self.eta_l * (1 - self.b1 ** (2 * self.K)) * self.K * self.B**2 / (2 * self.alpha1 * self.tau * self.eps**2)
        return Ada2Run.dcoef(self, den)

    def point(self) -> dict:
        return dict(Ada2Run.point(self), algorithm="8 (ADMU)" if self.kind == "admu" else "10 (AGDU)", beta1=self.b1, beta2=self.b2,
                    B=self.B, eps_w=self.eps_w)


RUNS27 = tuple(DelayedRun(s, 6, 3, z, 0.5, el, eps, 0.1, 0.0, 0.02, 0.5, 1e-6, kind="admu") for s, z, el, eps in
               ((31, 1, 0.1, 0.1), (32, 2, 0.05, 0.01), (33, 3, 0.2, 0.5)))
RUNS29 = tuple(DelayedRun(s, 6, 3, z, 0.5, el, eps, 0.1, v0, 0.02, 0.5, 1e-6, kind="agdu") for s, z, el, eps, v0 in
               ((41, 1, 0.1, 0.1, 0.0), (42, 2, 0.05, 0.01, 0.5), (43, 3, 0.2, 0.5, 1.0)))

H_DELAYED = (Hyp("Assumptions 1-2 on the run (F_i = sum_j a_ij (1 - cos(x_j - c_ij)), L = G = max a), no clipping triggered",
                 lambda p: p["F_i"].startswith("sum_j") and not p["clipped"], "fedada2.txt lines 130-136"),
             Hyp("the algorithm's ranges: 1 <= K_i^t <= K, eps_w <= Xi_i^t <= B, v~_0 >= tau^2, 0 <= beta's < 1", lambda p:
                 p["v~_0"] >= p["tau"] ** 2 > 0 and 0 <= p["beta1~"] < 1 and 0 <= p["beta1"] < 1 and 0 < p["beta2"] < 1,
                 "fedada2.txt Algorithms 8 and 10, lines 1431-1433"))


def _rel_bound(w):
    p = _psi(w, 1, CROSS_PRINTED)
    return [(_min_grad(w), "<=", sum(p[k] for k in ("Psi1", "Psi2", "Psi3", "Psi4", "Psi5")) / p["Psi6"])]


@check(PAPER, "cor27_bound_on_runs",
       "Corollary 27: Algorithm 8 satisfies Theorem 6's bound with Psi_3 = (1 - b~^T) eta eta_l (1 - b1^(2K)) K L~ B^2 T ||Phi_1||^2/"
       "(2 alpha~_1 tau eps^2), Psi_4 = (1 - b~) eta eta_l (1 - b1^(2K)) K L T B^2 c(b~) ||Phi_2||^2/(2 alpha~_1 tau eps^2) (1439-1440) "
       "and its gamma~_1, alpha~_1 (1444).",
       spec=("14",), severity="rate", depends=("lemma28_phi1_bound", "thm20_run_steps"), hypotheses=H_DELAYED)
def _cor27():
    """fedada2.txt Corollary 27 (display 1439-1440, constants line 1444) with Lemma 28's Phi_1 as printed, on three seeded runs
    of Algorithm 8 (ADMU clients with Algorithm 8's bias corrections, z in 1..3, K_i^t in {2, 3}, Xi_i^t in {1/2, 1}).  The
    bound carries L~ = 2 sqrt(d) G/(eta_l eps_s): with eps_s = 1e-6 it is very loose, so the evaluation shows the formulas are
    consistent on these runs, not that they are tight."""
    return relations_result([Rel("1439-1440", "the bound with Corollary 27's Psi_3, Psi_4", _rel_bound)], RUNS27, "Corollary 27's bound",
                            DelayedRun.point, describe=_describe_run)


@check(PAPER, "cor29_bound_on_runs",
       "Corollary 29: Algorithm 10 satisfies Theorem 6's bound with gamma~_1 = eta_l eps_w sum_(p<=K-) 1/(sqrt(v0 + ceil(K/z) G^2) + eps) "
       "and alpha~_1 = eps_w K-/(2K (sqrt(v0 + ceil(K/z) G^2) + eps)) (1551) and Lemma 30's Phi_1.",
       spec=("13",), severity="rate", depends=("thm20_run_steps", "cor27_29_same_orders"), hypotheses=H_DELAYED)
def _cor29():
    """fedada2.txt Corollary 29 (statement lines 1547-1553, constants at line 1551) with Lemma 30's Phi_1 and Theorem 20's Psi's,
    on three seeded runs of Algorithm 10 (AGDU clients, z in 1..3, v0 in {0, 1/2, 1}, K_i^t in {2, 3}, Xi_i^t in {1/2, 1}); as for
    Corollary 27 the bound is loose (L~ with eps_s = 1e-6)."""
    return relations_result([Rel("1551", "the bound with Corollary 29's gamma~_1, alpha~_1", _rel_bound)], RUNS29, "Corollary 29's bound",
                            DelayedRun.point, describe=_describe_run)


# ===========================================================================
# the proof-step map
# ===========================================================================

result(PAPER, "Proposition 2", F, (48, 58), None, [
    S(52, "(i) FedAvg: E||grad f(x_(t+1))||^2 = oo when the t_2 client is sampled", "prop9_i_steps", "thm4_13_fedavg_infinite_variance"),
    S(56, "(ii) client AdaGrad: lim E||x_t - x*|| <= 2 sqrt 3/(1 - eps_hat)", "prop9_ii_steps", "B_below_2sqrt3")],
  note="main-text statement without display; proved as Proposition 9 (i)-(ii)", proved_in="Proposition 9")
result(PAPER, "Theorem 4", F, (72, 74), None, [
    S(74, "FedAvg deeply remorseful and resentful of heavy-tailed noise", "thm4_13_fedavg_infinite_variance", "thm13_steps")],
  note="main-text statement without display", proved_in="Theorem 13")
result(PAPER, "Proposition 5", F, (78, 80), None, [
    S(80, "client AdaGrad: non-remorseful, non-resentful", "prop5_14_adagrad_bounded")],
  note="main-text statement without display", proved_in="Proposition 14")
result(PAPER, "Theorem 6", F, (146, 158), None, [
    S(150, "min_t ||grad f(x_(t-1))||^2 <= (Psi_1 + ... + Psi_5)/Psi_6", "thm20_run_steps"),
    S(154, "psi_1..psi_4 asymptotically", "thm6_psi_labels", "thm20_psi_orders"),
    S(158, "psi_5 and psi_6 by case", "thm6_psi_labels", "thm20_psi_orders")],
  note="main-text simplified statement; its formulas are inline (no display)", proved_in="Theorem 20 / Theorem 25")
result(PAPER, "Corollary 7", F, (162, 167), None, [
    S("166-167", "(A), (B): sufficient learning-rate conditions", "cor23_exponent_regions", "cor23_case2_boundary_strict")],
  note="main-text statement", proved_in="Corollary 23")
result(PAPER, "Corollary 8", F, (168, 170), None, [S(170, "rate O(T^(-1/2))", "cor24_rate_T_minus_half")],
  note="main-text statement without display", proved_in="Corollary 24")
result(PAPER, "Proposition 9", F, (316, 334), (338, 463), [
    S("352-355", "(i) E||grad f(x_(t+1))||^2 over sampling and noise", "prop9_i_steps"),
    S("359-362", "(i) the local iterate unrolled", "prop9_i_steps", "fedavg_unrolling"),
    S("366-369", "(i) regrouping and the infinite lower bound", "prop9_i_steps"),
    S("377-379", "(ii) the AdaGrad update with K = 1", "prop9_ii_steps"),
    S(391, "(ii) the bound on E_t||x_(t+1)||", "prop9_ii_steps"),
    S("419-422", "(ii) the recursion under the schedule", "prop9_ii_steps", "prop9_ii_recursion"),
    S("430-431", "(iii) the squared update", "prop9_iii_steps"),
    S("451-454", "(iv) telescoping and the triangle inequality", "prop9_iv_steps"),
    S("458-459", "(iv) the schedule's sum", "prop9_iv_steps", "prop9_iv_sum_vs_integral")])
result(PAPER, "Proposition 10", F, (475, 483), (485, 516), [
    S("503-506", "(i) reverse triangle inequality with the Cauchy client", "prop10_steps")])
result(PAPER, "Theorem 13", F, (544, 546), (548, 647), [
    S("556-558", "strong convexity along the FedAvg step", "thm13_steps"),
    S("562-563", "(6): expectation over the last local noise", "thm13_steps"),
    S("571-572", "the noise square expanded", "thm13_steps"),
    S("582-583", "the quadratic minorant", "thm13_steps"),
    S("599-600", "E f^2 >= E[chi (sum_j f~_j)^2]", "thm13_steps"),
    S("604-608", "the piecewise-linear lower bound expanded", "thm13_steps"),
    S("618-619", "the event chi+", "thm13_steps"),
    S("623-627", "expectation with chi+ (C_1 + ...)"),
    S("635-636", "cross terms by independence", "thm13_steps"),
    S("640-641", "the divergent truncated second moment", "thm13_steps")])
result(PAPER, "Proposition 14", F, (651, 653), (655, 661), [
    S(653, "client AdaGrad in Theorem 4's setting: non-remorseful, non-resentful (f_t continuous)", "prop5_14_adagrad_bounded")],
  note="neither statement nor proof has a display; the step is the statement")
result(PAPER, "Lemma 15", F, (741, 745), (746, 774), [
    S("760-761", "|Delta| split over the update steps", "lemma15_steps"),
    S("765-766", "(8): the worst case and Assumption 2", "lemma15_steps"),
    S("770-772", "T_1 <= sqrt(ceil(K/z)) log^(1/2)(...)", "lemma15_steps", "log_telescoping_lemma")])
result(PAPER, "Lemma 16", F, (778, 782), (783, 792), [
    S("787-790", "the server step bound", "lemma16_steps", "lemma16_server_step")])
result(PAPER, "Lemma 17", F, (796, 801), (802, 820), [S("800-801", "(B1), (B2): mu_k, v_k <= d k G^2", "lemma17_sm3_bounds")])
result(PAPER, "Lemma 18", F, (826, 828), (830, 832), [
    S(828, "min_t ||grad f(x_t)|| <= O(T^-alpha) gives a subsequence with ||grad f|| -> 0", "lemma18_subsequence")],
  note="neither statement nor proof has a display; the step is the statement")
result(PAPER, "Theorem 20", F, (842, 863), (864, 1050), [
    S("850-855", "Psi_1..Psi_6", "thm20_run_steps", "thm20_psi_orders"),
    S("868-870", "(9)", "thm20_run_steps"),
    S("882-886", "T_(1,r) bound", "thm20_run_steps"),
    S(890, "T_(2,r) with gamma_r", "thm20_run_steps"),
    S("906-911", "T_(2,r)^1 with Young", "thm20_run_steps"),
    S("919-925", "the drift chain", "thm20_run_steps", "thm20_drift_squared_lipschitz"),
    S("929-930", "the drift bound substituted", "thm20_run_steps"),
    S("934-935", "collected terms", "thm20_run_steps"),
    S("939-942", "the momentum term of (9)", "thm20_run_steps"),
    S("946-948", "(11)", "thm20_run_steps"),
    S("952-953", "(12)", "thm20_run_steps"),
    S("957-958", "(13)", "thm20_run_steps", "log_telescoping_lemma"),
    S("974-975", "the induction's equivalence", "thm20_run_steps"),
    S("987-988", "(14)", "thm20_run_steps", "log_telescoping_lemma"),
    S("1012-1013", "Lemma 21's induction step", "thm20_run_steps", "lemma21_series_and_c_beta"),
    S(1021, "the min bound", "thm20_run_steps"),
    S("1025-1027", "(15)", "thm20_run_steps"),
    S("1035-1040", "Psi_1..Psi_6 (conclusion)", "thm20_run_steps")])
result(PAPER, "Lemma 21", F, (1054, 1066), None, [
    S(1066, "sum_t sum_r b^(t-r) (t-r)^2 <= c(b) T", "lemma21_series_and_c_beta")],
  note="stated as shown in Theorem 20's proof (lines 1008-1019); no display of its own")
result(PAPER, "Lemma 22", F, (1067, 1071), None, [S(1071, "the log bound (14)", "lemma22_log_bound", "log_telescoping_lemma")],
  note="stated as shown in Theorem 20's proof (lines 955-988)", proved_in="Theorem 20")
result(PAPER, "Corollary 23", F, (1075, 1080), (1081, 1118), [
    S("1079-1080", "(A), (B)", "cor23_exponent_regions", "cor23_case2_boundary_strict"),
    S("1085-1090", "psi_1..psi_6 in orders", "cor23_printed_ratios", "thm20_psi_orders"),
    S("1094-1098", "ratios, T eta_l^2 <= O(1)", "cor23_printed_ratios"),
    S("1104-1108", "ratios, T eta_l^2 >= Omega(1)", "cor23_printed_ratios")])
result(PAPER, "Corollary 24", F, (1120, 1122), (1124, 1127), [S(1122, "rate O(T^(-1/2))", "cor24_rate_T_minus_half")],
  note="neither statement nor proof has a display; the step is the statement")
result(PAPER, "Theorem 25", F, (1189, 1209), (1236, 1329), [
    S("1201-1203", "Psi_3, Psi_4 with C", "thm25_run_steps"),
    S(1240, "(16)", "thm25_run_steps"),
    S(1252, "T_(1,r) bound", "thm25_run_steps"),
    S(1256, "T_(2,r) split", "thm25_run_steps"),
    S("1272-1277", "Young over the strategies", "thm25_run_steps"),
    S(1285, "the drift bound", "thm25_run_steps"),
    S("1289-1290", "the drift term with C", "thm25_run_steps"),
    S("1294-1296", "(17)", "thm25_run_steps"),
    S("1300-1301", "(18)", "thm25_run_steps"),
    S(1305, "the min bound", "thm25_run_steps"),
    S("1309-1311", "the final inequality", "thm25_run_steps"),
    S("1319-1325", "Psi's and C", "thm25_run_steps")])
result(PAPER, "Lemma 26", F, (1213, 1221), (1222, 1232), [S(1230, "|Delta_i^(t,l)| <= Phi_1", "lemma26_steps", "lemma26_28_sums")])
result(PAPER, "Corollary 27", F, (1435, 1446), None, [
    S("1439-1440", "Psi_3, Psi_4 for Algorithm 8", "cor27_bound_on_runs", "cor27_29_same_orders")],
  note="proof 'subsumed by or analogous to Theorems 6 and 25' (line 1446); changes in Lemma 28")
result(PAPER, "Lemma 28", F, (1448, 1456), (1457, 1484), [
    S("1465-1467", "Delta unrolled and split", "lemma28_steps"),
    S("1471-1472", "(20)", "lemma28_steps"),
    S("1480-1482", "Cauchy-Schwarz and the sums (Phi_1)", "lemma28_steps", "lemma28_phi1_bound")])
result(PAPER, "Corollary 29", F, (1547, 1553), None, [
    S(1551, "gamma~_1, alpha~_1 for Algorithm 10 (bound of Theorem 6)", "cor29_bound_on_runs", "cor27_29_same_orders")],
  note="no display; proof 'analogous to Theorem 6' (line 1555), changes in Lemma 30")
result(PAPER, "Lemma 30", F, (1557, 1561), (1562, 1579), [
    S("1570-1571", "Delta split over the update steps", "lemma30_steps"),
    S("1575-1577", "(21) and the count", "lemma30_steps", "cor27_29_same_orders")])

"""Fed-LAMB: the proof-step map of every numbered result and the checks that evaluate the remaining displayed steps.

Results: MAIN (fed-lamb.txt, the draft) Lemma 1 and Theorem 1; SUPP (fed-lamb-supplement.txt) Lemma 1 and Theorem 5.
MAIN's Theorem 1 is proved for T = 1, eps = lambda = 0 (line 199).  Its displays are evaluated on :func:`main_world`
instances: two clients with heterogeneous smooth, bounded-gradient objectives f_i(theta) = sum_j a_ij (1 - cos(theta_j -
c_ij)) on two layers (sizes 1 and 2), gradient noise uniform on {-s, s} per coordinate (zero mean, variance s^2 < sigma^2,
H2-H3), phi a clipped identity with values in [phi_m, phi_M] (H4), the moment recursion of Algorithm 2 (m = beta1 m +
(1-beta1) g, ratio p = m/sqrt(v), no bias correction as in (12)), and the exact expectation over the round's noise
(2^6 equiprobable outcomes).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .core import H as Hyp
from .core import check, refuted, verified
from .replay import Rel, relations_result
from .steps import S, result

PAPER = "fed-lamb"

# ---------------------------------------------------------------------------
# MAIN Theorem 1 instances (T = 1, eps = lambda = 0)
# ---------------------------------------------------------------------------
LAYERS = np.array([0, 1, 1])  # layer of each coordinate: sizes p_1 = 1, p_2 = 2
P_L = np.array([1, 2])
PHI_M_, PHI_m_ = 1.5, 0.5


def _phi(x):
    """phi(a) = min(max(a, phi_m), phi_M): H4's scaling function, applied to each layer's norm."""
    return np.clip(x, PHI_m_, PHI_M_)


def _layer_norms(x):
    """Per-coordinate norm of the coordinate's layer of x (last axis = coordinates)."""
    out = np.empty_like(x)
    for l_ in range(len(P_L)):
        idx = LAYERS == l_
        out[..., idx] = np.linalg.norm(x[..., idx], axis=-1, keepdims=True)
    return out


@dataclass
class MainWorld:
    """One round r of MAIN's Theorem 1 setting; arrays over (outcome, client, coordinate) where they depend on the noise."""

    seed: int
    alpha: float
    beta1: float
    beta2: float
    a: np.ndarray      # (n, p) curvatures
    c: np.ndarray      # (n, p) centres
    s: float           # noise level
    theta_prev: np.ndarray   # theta_bar_(r-1)
    m_prev: np.ndarray       # (n, p) m_(r-1, i)
    v_prev: np.ndarray       # (p,) v_(r-1)
    v_r: np.ndarray          # (p,) v_r >= v_(r-1)

    def __post_init__(self):
        n, p = self.a.shape
        self.n, self.p = n, p
        self.L_layer = np.array([self.a[:, LAYERS == l_].max() for l_ in range(len(P_L))])
        # round r-1 -> theta_bar_r
        p_prev = self.m_prev / np.sqrt(self.v_prev)
        self.phi_prev = _phi(_layer_norms(self.theta_prev[None, :]))[0]
        self.w_prev = self.phi_prev / (np.sqrt(self.v_prev) * _layer_norms(p_prev))       # (n, p)
        self.theta_r = self.theta_prev - self.alpha / n * (self.w_prev * self.m_prev).sum(0)
        self.vt_r = self.theta_r + self.beta1 / (1 - self.beta1) * (self.theta_r - self.theta_prev)
        # round r: noise outcomes
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=n * p))).reshape(-1, n, p)
        self.xi = self.s * signs                                                          # (O, n, p)
        self.grad_i_r = self.a * np.sin(self.theta_r - self.c)                            # (n, p) grad f_i(theta_bar_r)
        self.g = self.grad_i_r[None] + self.xi
        self.m_r = self.beta1 * self.m_prev[None] + (1 - self.beta1) * self.g
        self.p_r = self.m_r / np.sqrt(self.v_r)
        self.phi_r = _phi(_layer_norms(self.theta_r[None, :]))[0]
        self.w_r = self.phi_r / (np.sqrt(self.v_r) * _layer_norms(self.p_r))              # (O, n, p)
        self.theta_next = self.theta_r - self.alpha / n * (self.w_r * self.m_r).sum(1)    # (O, p)
        self.vt_next = self.theta_next + self.beta1 / (1 - self.beta1) * (self.theta_next - self.theta_r)
        self.D = self.vt_next - self.vt_r[None]
        self.M = float(np.linalg.norm(self.g, axis=-1).max())
        self.sigma = self.s * 1.0001

    def f(self, x):
        """f = (1/n) sum_i f_i at points x (..., p)."""
        return (self.a * (1 - np.cos(x[..., None, :] - self.c))).sum(-1).mean(-1)

    def grad(self, x):
        return (self.a * np.sin(x[..., None, :] - self.c)).mean(-2)

    def E(self, x):
        return float(np.mean(x))

    def point(self) -> dict:
        return {"seed": self.seed, "alpha": self.alpha, "beta1": self.beta1, "beta2": self.beta2, "T": 1, "eps": 0, "lambda": 0,
                "n": self.n, "layers": "sizes (1, 2)", "M": self.M, "max |g|": self.M, "noise": f"+-{self.s:.3g} per coordinate",
                "sigma": self.sigma, "phi_m": PHI_m_, "phi_M": PHI_M_, "phi": tuple(float(x) for x in np.r_[self.phi_prev, self.phi_r])}


def main_world(seed: int) -> MainWorld:
    r = np.random.default_rng(seed)
    n, p = 2, 3
    alpha = float(r.choice([0.05, 0.3, 1.0]))
    beta1 = float(r.choice([0.0, 0.5, 0.9]))
    v_prev = r.uniform(0.2, 1.0, p)
    return MainWorld(seed, alpha, beta1, float(r.choice([0.9, 0.999])), r.uniform(0.5, 1.5, (n, p)), r.uniform(-1, 1, (n, p)),
                     float(r.uniform(0.1, 0.5)), r.uniform(-2, 2, p), r.uniform(-1, 1, (n, p)), v_prev,
                     v_prev + r.uniform(0, 0.5, p))


MAIN_WORLDS = [main_world(k) for k in range(24)]


def _describe(w: MainWorld) -> str:
    return (f"seed {w.seed} (n = 2, layers of sizes 1 and 2, alpha = {w.alpha:g}, beta1 = {w.beta1:g}, beta2 = {w.beta2:g}, "
            f"noise +-{w.s:.3g})")


def _main_hyps_hold(q) -> bool:
    """Rebuild the instance from its seed and test H1-H4 and Theorem 1's setting on it."""
    w = main_world(int(q["seed"]))
    grads_ok = float(np.linalg.norm(w.g, axis=-1).max()) <= w.M + 1e-12
    unbiased = np.allclose(w.g.mean(0), w.grad_i_r)
    var_ok = bool(np.all(((w.g - w.grad_i_r[None]) ** 2).mean(0) < w.sigma**2))
    phi_ok = bool(np.all((w.phi_r >= PHI_m_) & (w.phi_r <= PHI_M_)))
    smooth_ok = bool(np.all(w.a <= w.L_layer[LAYERS][None]))
    return grads_ok and unbiased and var_ok and phi_ok and smooth_ok and 0 <= w.beta1 < 1 and 0 < w.beta2 < 1


H_MAIN = (Hyp("H1-H4 on the instance (rebuilt from its seed): layer-wise L_l-smooth f_i, unbiased gradients with ||g|| <= M, "
              "coordinate variance < sigma^2, phi in [phi_m, phi_M]; 0 <= beta1 < 1, 0 < beta2 < 1", _main_hyps_hold,
              "fed-lamb.txt lines 135-143, Algorithm 2"),
          Hyp("T = 1 and eps = lambda = 0 (Theorem 1's setting)", lambda q: q["T"] == 1 and q["eps"] == 0 and q["lambda"] == 0,
              "fed-lamb.txt lines 147, 199"))


def _inner(a, b):
    return (a * b).sum(-1)


def _Lsq(w: MainWorld, D):
    """sum_l (L_l/2) ||D^l||^2."""
    return sum(w.L_layer[l_] / 2 * (D[..., LAYERS == l_] ** 2).sum(-1) for l_ in range(len(P_L)))


def _A1(w: MainWorld):
    """(16): A_1 = (alpha/n) sum_(l,j) grad_l f(vartheta_r)^j sum_i w_(r,i) g_(r,i), per outcome."""
    gf = w.grad(w.vt_r)
    return w.alpha / w.n * (gf[None, None, :] * w.w_r * w.g).sum((1, 2))


def _first_term(w: MainWorld):
    """(15)'s bracket per outcome: (alpha beta1/(1-beta1)) (1/n) sum_(l,j) grad f^j sum_i (w_(r,i) - w_(r-1,i)) m_(r-1,i)."""
    gf = w.grad(w.vt_r)
    return w.alpha * w.beta1 / (1 - w.beta1) / w.n * (gf[None, None, :] * (w.w_r - w.w_prev[None]) * w.m_prev[None]).sum((1, 2))


# ---------------------------------------------------------------------------
# MAIN Theorem 1: the displayed relations on MainWorld instances
# ---------------------------------------------------------------------------


def _gf(w: MainWorld):
    return w.grad(w.vt_r)


def _nl(x, l_):
    """||x^l||^2 (last axis = coordinates)."""
    return (x[..., LAYERS == l_] ** 2).sum(-1)


def _unit(w: MainWorld):
    return w.p_r / _layer_norms(w.p_r)


def _mismatch(w: MainWorld):
    return np.sign(_gf(w))[None, None, :] != np.sign(w.p_r)


def _beta_vec(w: MainWorld):
    """(alpha beta1/(1-beta1)) (1/n) sum_i (w_(r,i) - w_(r-1,i)) m_(r-1,i): the first vector of (12) and (29), per outcome."""
    return w.alpha * w.beta1 / (1 - w.beta1) / w.n * ((w.w_r - w.w_prev[None]) * w.m_prev[None]).sum(1)


def _grad_vec(w: MainWorld):
    """(alpha/n) sum_i w_(r,i) g_(r,i): the second vector of (12) and (29), per outcome."""
    return w.alpha / w.n * (w.w_r * w.g).sum(1)


MAIN_HOLDING = (
    Rel("201", "(7): L-smoothness at vartheta_r, both lines", lambda w: [
        (w.f(w.vt_next)[k], "<=", w.f(w.vt_r) + _inner(_gf(w), w.D[k]) + _Lsq(w, w.D[k])) for k in range(len(w.D))]
        + [(_inner(_gf(w), w.D[k]), "=", sum((_gf(w) * w.D[k])[LAYERS == l_].sum() for l_ in range(len(P_L)))) for k in range(len(w.D))]),
    Rel("205", "(8): (7) in expectation, rearranged", lambda w: [
        (-w.E(_inner(_gf(w)[None], w.D)), "<=", w.f(w.vt_r) - w.E(w.f(w.vt_next)) + w.E(_Lsq(w, w.D)))]),
    Rel("223", "(13): (8) with sum_l (L_l/2) E||vartheta_(r+1) - vartheta_r||^2", lambda w: [
        (-w.E(_inner(_gf(w)[None], w.D)), "<=", w.f(w.vt_r) - w.E(w.f(w.vt_next)) + w.E(w.L_layer.sum() / 2 * (w.D**2).sum(-1)))]),
    Rel("227", "(14): the inner product coordinate by coordinate", lambda w: [
        (_inner(_gf(w), w.D[k]), "=", sum(float((_gf(w)[LAYERS == l_] * w.D[k][LAYERS == l_]).sum()) for l_ in range(len(P_L))))
        for k in range(len(w.D))]),
    Rel("231", "(16): the gradient term of <grad f, vartheta_(r+1) - vartheta_r> is -A_1", lambda w: [
        (_inner(_gf(w), w.D[k]) + _first_term(w)[k], "=", -_A1(w)[k]) for k in range(len(w.D))]),
    Rel("257", "(25): E[|grad f^j p^j/||p||| 1(sign mismatch)] <= |grad f^j| P(sign mismatch)", lambda w: [
        (w.E((np.abs(_gf(w)[None, None] * _unit(w)) * _mismatch(w))[:, i, j]), "<=", abs(_gf(w)[j]) * w.E(_mismatch(w)[:, i, j]))
        for i in range(w.n) for j in range(w.p)]),
    Rel("273", "(29): ||vartheta_(r+1)^l - vartheta_r^l||^2 written with (12)'s two vectors (both signs flipped, same norm)", lambda w: [
        (_nl(w.D, l_)[k], "=", _nl(_beta_vec(w) + _grad_vec(w), l_)[k]) for l_ in range(len(P_L)) for k in range(len(w.D))]),
)


@check(PAPER, "main_thm1_descent_steps",
       "MAIN Theorem 1's proof (T = 1, eps = lambda = 0): (7) L-smoothness at the virtual iterates, (8) and (13) its expectation, "
       "(14) the inner product by coordinates, (16) the gradient part -A_1 of the step, (25) the sign-mismatch bound and (29) the "
       "squared step in (12)'s terms hold.",
       spec=("S1",), kind="paper", severity="constant", depends=("S1_virtual_sequence",))
def _main_descent():
    """fed-lamb.txt lines 199-261 and 273: (7) line 201, (8) line 205, (13) line 223, (14) line 227, (16) line 231, (25) line 257,
    (29) line 273, each evaluated on 24 seeded MainWorld instances with the exact expectation over the round's noise.  The
    supplement repeats (7), (8), (13) and (14)/(16) as lines 114, 118, 122 and 126 (same relations, h layers)."""
    return relations_result(MAIN_HOLDING, MAIN_WORLDS, "MAIN Theorem 1 displays", MainWorld.point, describe=_describe)


@check(PAPER, "main_thm1_15_sign",
       "MAIN (14)-(15): <grad f(vartheta_r), vartheta_(r+1) - vartheta_r> = +(alpha beta1/(1-beta1)) (1/n) sum grad f^j "
       "[sum_i (phi_r/(sqrt(v_r)||p_r||) - phi_(r-1)/(sqrt(v_(r-1))||p_(r-1)||)) m_(r-1)] - A_1 (the momentum term with a plus sign, "
       "as (12) prints it; SUPP (6) repeats it).",
       spec=("S2", "err-8"), severity="typo", corrected={"sign": -1}, depends=("S2_paper_signs",), hypotheses=H_MAIN)
def _main_15(sign=1):
    """fed-lamb.txt (15) line 229 (from (12), line 217); fed-lamb-supplement.txt (6) line 126.  ``sign``: the sign of the
    momentum term (printed +1; the true step, S2_virtual_step, has -1)."""
    rel = Rel("229", "(15): the momentum term of the inner product", lambda w: [
        (_inner(_gf(w), w.D[k]), "=", sign * _first_term(w)[k] - _A1(w)[k]) for k in range(len(w.D))])
    return relations_result([rel], [w for w in MAIN_WORLDS if w.beta1 > 0], "(15) with the momentum term's sign "
                            f"{'+' if sign > 0 else '-'}", MainWorld.point, describe=_describe)


def _neg_A1_bound_18(w: MainWorld):
    """(18) + (19) per outcome: the printed bound on the gradient term."""
    gf = _gf(w)
    t1 = -w.alpha / w.n * np.array([sum(np.sqrt((1 - w.beta2) / (w.M**2 * P_L[l_]))
                                        * (w.phi_r[LAYERS == l_] * gf[LAYERS == l_] * w.g[k][:, LAYERS == l_]).sum()
                                        for l_ in range(len(P_L))) for k in range(len(w.D))])
    t2 = -w.alpha / w.n * (w.phi_r[None, None] * gf[None, None] * _unit(w) * _mismatch(w)).sum((1, 2))
    return t1 + t2


def _bound_20(w: MainWorld):
    """(20) + (21): the expectation of (18)-(19) as printed (the first sum without 1/n)."""
    gf = _gf(w)
    t1 = -w.alpha * sum(np.sqrt((1 - w.beta2) / (w.M**2 * P_L[l_]))
                        * w.E((w.phi_r[None, None, LAYERS == l_] * gf[None, None, LAYERS == l_] * w.g[:, :, LAYERS == l_]).sum((1, 2)))
                        for l_ in range(len(P_L)))
    t2 = -w.alpha / w.n * w.E((w.phi_r[None, None] * gf[None, None] * _unit(w) * _mismatch(w)).sum((1, 2)))
    return t1 + t2


def _bound_22(w: MainWorld):
    """(22) + (23)."""
    gf = _gf(w)
    t1 = -w.alpha / w.n * sum(PHI_m_ * np.sqrt((1 - w.beta2) / (w.M**2 * P_L[l_])) * w.n * (gf[LAYERS == l_] ** 2).sum()
                              for l_ in range(len(P_L)))
    t2 = -w.alpha / w.n * PHI_M_ * w.E((np.abs(gf[None, None] * _unit(w)) * _mismatch(w)).sum((1, 2)))
    return t1 + t2


def _bound_26(w: MainWorld):
    """(26) with grad f = sum_i grad f_i (the display's own definition), L = 2 layers, sigma_i^(l,j) = s."""
    gsum = w.n * _gf(w)
    return (-w.alpha * PHI_m_ * np.sqrt(len(P_L) * (1 - w.beta2) / (w.M**2 * w.p)) * float((gsum**2).sum())
            - w.alpha * PHI_M_ * w.n * w.p * w.s / math.sqrt(w.n))


MAIN_A1 = (
    Rel("235", "(17): A_1 <= -(alpha/n) sum grad f^j sum_i phi g/(sqrt(v)||p||), i.e. A_1 <= -A_1", lambda w: [
        (_A1(w)[k], "<=", -_A1(w)[k]) for k in range(len(w.D))]),
    Rel("237", "(18)-(19) read as a bound on -A_1 (the term (16) subtracts)", lambda w: [
        (-_A1(w)[k], "<=", _neg_A1_bound_18(w)[k]) for k in range(len(w.D))]),
    Rel("239", "(19): the sign-mismatch part of the bound, with (17)'s A_1", lambda w: [
        (_A1(w)[k], "<=", _neg_A1_bound_18(w)[k]) for k in range(len(w.D))]),
    Rel("243", "(20)-(21): E[A_1] <= the expectation of (18)-(19) (as printed: first sum without 1/n)", lambda w: [
        (w.E(_A1(w)), "<=", _bound_20(w))]),
    Rel("245", "(21) read as a bound on E[-A_1]", lambda w: [(-w.E(_A1(w)), "<=", _bound_20(w))]),
    Rel("247", "(20)-(21) <= (22)-(23) (H4 and E g = grad f)", lambda w: [(_bound_20(w), "<=", _bound_22(w))]),
    Rel("249", "(23): E[A_1] <= (22) + (23)", lambda w: [(w.E(_A1(w)), "<=", _bound_22(w))]),
    Rel("261", "(26): E[A_1] <= -alpha phi_m sqrt(L(1-beta2)/(M^2 p)) E||grad f||^2 - alpha phi_M sum sigma/sqrt(n)", lambda w: [
        (w.E(_A1(w)), "<=", _bound_26(w)), (-w.E(_A1(w)), "<=", _bound_26(w))]),
)


@check(PAPER, "main_thm1_A1_chain",
       "MAIN (17)-(26): the displayed bounds on the gradient term A_1 of (16) (read literally, and where (17) writes A_1 for the "
       "-A_1 that (16) subtracts, also read as bounds on -A_1) hold.",
       spec=("S8", "err-6"), severity="rate", depends=("S8_ratio_bound_global_v",), hypotheses=H_MAIN)
def _main_a1():
    """fed-lamb.txt (17) line 235, (18)-(19) lines 237-239, (20)-(21) lines 243-245, (22)-(23) lines 247-249, (26) line 261, on
    24 seeded MainWorld instances (exact expectations); (24) at line 251 is an empty display."""
    return relations_result(MAIN_A1, MAIN_WORLDS, "MAIN's bounds on A_1", MainWorld.point, describe=_describe)


MAIN_A2 = (
    Rel("275", "(30): ||a + b||^2 <= 2(alpha^2/n^2)||beta1/(1-beta1) sum(...) m||^2 + (1/n^2)||sum_i w g||^2", lambda w: [
        (_nl(w.D, l_)[k], "<=", 2 * _nl(_beta_vec(w), l_)[k] + _nl((w.w_r * w.g).sum(1), l_)[k] / w.n**2)
        for l_ in range(len(P_L)) for k in range(len(w.D))]),
    Rel("279-285", "(31): the three bounds on E||vartheta_(r+1)^l - vartheta_r^l||^2 (cross-client terms dropped, then H2-H3)",
        lambda w: [x for l_ in range(len(P_L)) for x in _rel31(w, l_)]),
)


def _rel31(w: MainWorld, l_: int):
    A = w.E(_nl(_beta_vec(w) / w.alpha * w.n, l_))
    B = w.E(_nl((w.w_r * w.g).sum(1), l_))
    C = w.E(((w.w_r * w.g)[..., LAYERS == l_] ** 2).sum((1, 2)))
    Ew = w.w_r[..., LAYERS == l_].mean(0)
    D3 = w.E(_nl((w.w_r * w.grad_i_r[None]).sum(1), l_)) / w.n**2 + float((w.s**2 * Ew**2).sum()) / w.n
    lhs = w.E(_nl(w.D, l_))
    return [(lhs, "<=", 2 * w.alpha**2 * A + B / w.n**2), (lhs, "<=", 2 * w.alpha**2 / w.n**2 * A + C / w.n**2),
            (lhs, "<=", 2 * w.alpha**2 / w.n**2 * A + D3)]


@check(PAPER, "main_thm1_A2_bounds",
       "MAIN (30)-(31): the bounds on ||vartheta_(r+1)^l - vartheta_r^l||^2 and its expectation (Cauchy-Schwarz, then H2-H3) hold.",
       spec=("S8",), severity="constant", hypotheses=H_MAIN)
def _main_a2():
    """fed-lamb.txt (27) line 267 (definition of A_r^2), (30) line 275, (31) lines 279-285, on 24 seeded MainWorld instances."""
    return relations_result(MAIN_A2, MAIN_WORLDS, "MAIN's bounds on A_r^2", MainWorld.point, describe=_describe)


# ---------------------------------------------------------------------------
# MAIN (33)-(41): bookkeeping and the multi-round sums
# ---------------------------------------------------------------------------


def main_path(seed: int, rounds: int = 30):
    """One sample path of Algorithm 2 (T = 1, lambda = 0) on the MainWorld objectives, started at v_hat_0 = v_0 > 0.

    Returns per step k = 1..R: theta_bar_k, the weights W_k = phi/(sqrt(v_hat)||p||) and momenta M_k of the step
    theta_bar_(k-1) -> theta_bar_k, the gradients, and the constants (L_l, M, v_0)."""
    r = np.random.default_rng(1000 + seed)
    w0 = main_world(seed)
    n, p = w0.n, w0.p
    a, c, s = w0.a, w0.c, w0.s
    v0 = float(r.uniform(0.05, 0.2))
    theta = [w0.theta_prev.copy()]
    m = np.zeros((n, p))
    v = np.zeros((n, p))
    vhat = np.full(p, v0)
    Ws, Ms, gmax = [], [], 0.0
    for _ in range(rounds):
        g = a * np.sin(theta[-1] - c) + s * r.choice([-1.0, 1.0], size=(n, p))
        gmax = max(gmax, float(np.linalg.norm(g, axis=1).max()))
        m = w0.beta1 * m + (1 - w0.beta1) * g
        v = w0.beta2 * v + (1 - w0.beta2) * g * g
        pr = m / np.sqrt(vhat)
        W = _phi(_layer_norms(theta[-1][None, :]))[0] / (np.sqrt(vhat) * _layer_norms(pr))
        theta.append(theta[-1] - w0.alpha / n * (W * m).sum(0))
        Ws.append(W)
        Ms.append(m.copy())
        vhat = np.maximum(vhat, v.mean(0))
    return w0, np.array(theta), Ws, Ms, gmax, v0


def _path_sums(seed: int):
    """(sum_r A_r^3, the bound of (34), sum_r -<grad f(vartheta_r), D_r>, the right side of (35)) on one path."""
    w0, th, Ws, Ms, M, v0 = main_path(seed)
    b1, al, n = w0.beta1, w0.alpha, w0.n
    vt = th[1:] + b1 / (1 - b1) * (th[1:] - th[:-1])          # vartheta_k for k = 1..R
    A3 = lhs35 = rhs35 = 0.0
    for k in range(len(vt) - 1):                               # D_k = vartheta_(k+1) - vartheta_k uses steps k+1 and k
        gf = w0.grad(vt[k])
        A3 += al * b1 / (1 - b1) / n * float((gf[None] * (Ws[k + 1] - Ws[k]) * Ms[k]).sum())
        D = vt[k + 1] - vt[k]
        lhs35 += -float(gf @ D)
        rhs35 += float(w0.f(vt[k]) - w0.f(vt[k + 1])) + float(_Lsq(w0, D))
    bound34 = al * b1 / (1 - b1) * math.sqrt((1 - w0.beta2) * w0.p) * len(P_L) * M**2 / math.sqrt(v0)
    return A3, bound34, lhs35, rhs35, w0, v0, M


@check(PAPER, "main_thm1_sums_34_35",
       "MAIN (34): sum_r A_r^3 <= (alpha beta1/(1-beta1)) sqrt((1-beta2) p) L M^2/sqrt(v_0) (L = number of layers), and (35): the sum "
       "over r of (13), on sample paths of Algorithm 2 (T = 1).",
       spec=("S7",), severity="constant",
       hypotheses=(Hyp("H1-H4 on the path's objectives (rebuilt from the seed), 0 <= beta1 < 1, 0 < beta2 < 1, v_0 > 0 (the display "
                       "divides by sqrt(v_0); with Theorem 1's eps = 0 the bound is infinite)", lambda q: _main_hyps_hold(q) and q["v_0"] > 0,
                       "fed-lamb.txt lines 135-143, 310"),))
def _main_34_35():
    """fed-lamb.txt (28) line 269 (A_r^3), (34) line 310 and (35) line 314, on 12 seeded sample paths of 30 rounds (pathwise:
    (35) sums the pathwise (7), which implies the expectation form; A_r^3 is a pathwise quantity)."""
    rows = [_path_sums(k) for k in range(12)]
    rels = (Rel("310", "(34)", lambda r: [(r[0], "<=", r[1])]), Rel("314", "(35)", lambda r: [(r[2], "<=", r[3])]))
    return relations_result(rels, rows, "MAIN's sums over rounds",
                            lambda r: r[4].point() | {"v_0": r[5], "M": r[6], "max |g|": r[6], "rounds": 30},
                            describe=lambda r: f"the path of seed {r[4].seed} (v_0 = {r[5]:.3g}, M = {r[6]:.3g})")


@check(PAPER, "main_thm1_33_combination",
       "MAIN (33): combining (32) into (31) and summing over r gives sum_r A_r^2 <= (beta1^2/(1-beta1)^2)(L(1-beta2)/p) M^2 phi_M^2 "
       "np/v_0 + sum_r [...]: the factor 2 alpha^2/n^2 of (31)'s first term is dropped.",
       spec=("S7",), severity="constant", corrected={"factor": lambda al_, n_: 2 * al_**2 / n_**2},
       hypotheses=(Hyp("alpha > 0 (constant; Theorem 1 puts no bound on it), n >= 1 clients", lambda q: q["alpha"] > 0
                       and int(q["n"]) == q["n"] >= 1, "fed-lamb.txt lines 147, 219"),))
def _main_33(factor=lambda al_, n_: 1):
    """fed-lamb.txt (31) lines 279-285 (first term 2(alpha^2/n^2) E||...||^2), (32) lines 291-297 (its sum <= Q) and (33) lines
    303-306; ``factor(alpha, n)``: what multiplies Q in (33) (printed 1).  With stand-ins X_r >= 0 (the (32) sums) and Y_r >= 0
    (the rest of (31)), (31) and (32) give sum_r A_r^2 <= 2(alpha^2/n^2) Q + sum_r Y_r; (33) follows iff 2 alpha^2/n^2 <= factor.
    Exact search over alpha in {1/10, 1, 2}, n in {1, 2, 4}."""
    for al_ in (sp.Rational(1, 10), sp.Integer(1), sp.Integer(2)):
        for n_ in (1, 2, 4):
            need = 2 * al_**2 / n_**2
            if need > factor(al_, n_):
                return refuted(f"alpha = {al_}, n = {n_}: (31) and (32) give sum_r A_r^2 <= {need} Q + sum_r Y_r but (33) writes "
                               f"{factor(al_, n_)} Q: it follows only when 2 alpha^2/n^2 <= 1, a condition on alpha Theorem 1 does not "
                               "state (at Q = 1, Y = 0 and (31) tight the display fails)", "exact", at={"alpha": al_, "n": n_})
    return verified("2 alpha^2/n^2 <= the factor at every searched (alpha, n): (33) follows from (31) and (32)", "exact")


@check(PAPER, "main_thm1_36_37_logic",
       "MAIN (36) follows from (26), (33), (34) plugged into (35) (with (14)-(16): -<grad f, vartheta_(r+1) - vartheta_r> = A_1 - A_r^3), "
       "and (37) follows from (36).",
       spec=("S10", "err-3"), severity="proof", depends=("main_thm1_A1_chain",),
       hypotheses=(Hyp("the stand-in values satisfy the cited premises (26), (33), (34), (35) (one round, all terms >= 0 where they "
                       "are norms or expectations of squares)", lambda q: q["premises hold"] is True, "fed-lamb.txt lines 261, 303-314"),))
def _main_36_37():
    """fed-lamb.txt (35) line 314 and the displays it combines, (36) line 318, (37) line 322, with stand-ins (one round):
    EA1 = E[A_1], A3 = A_r^3, S2 = sum_r A_r^2, G = E||grad f(vartheta_r)||^2, Df = E[f(vartheta_r) - f(vartheta_(r+1))],
    Y = the bracketed sum of (33) and (36), N = its noise part, c_1 = alpha phi_m sqrt(L(1-beta2)/(M^2 p)), c_2 = the sigma term,
    U3 = (34)'s bound, Q = sum_l (L_l/2)(...) np/v_0 (L_l = 1).  (26): EA1 <= -c_1 G - c_2; (33): S2 <= Q + Y; (34): A3 <= U3;
    (35): EA1 - A3 <= Df + S2/2.  (36): c_1 G - c_2 + U3 <= Df + Q - Y.  (37): c_1 G + Y <= Df + N + c_2 + U3 + Q; it follows from
    (36) because (37)'s slack minus (36)'s is 2 U3 + 2 Y + N - ... >= 0 (checked symbolically)."""
    c1 = c2 = U3 = Q = sp.Integer(1)
    G, Y, Df, A3, S2 = sp.Integer(10), sp.Integer(0), sp.Integer(0), sp.Integer(0), sp.Integer(0)
    EA1 = -c1 * G - c2
    premises = EA1 <= -c1 * G - c2 and S2 <= Q + Y and A3 <= U3 and EA1 - A3 <= Df + S2 / 2
    holds36 = c1 * G - c2 + U3 <= Df + Q - Y
    # (37) from (36): both sides as symbols, all >= 0
    g_, y_, df_, n_, c1_, c2_, u3_, q_ = sp.symbols("G Y Df N c1 c2 U3 Q", nonnegative=True)
    slack36 = (df_ + q_ - y_ - n_) - (c1_ * g_ - c2_ + u3_)
    slack37 = (df_ + n_ + c2_ + u3_ + q_) - (c1_ * g_ + y_)
    extra = sp.expand(slack37 - slack36)
    follows37 = all(co >= 0 for co in sp.Poly(extra, g_, y_, df_, n_, c1_, c2_, u3_, q_).coeffs())
    if holds36 and follows37:
        return verified("(36) holds at the stand-in point and (37) follows from (36)", "exact")
    if not holds36:
        return dataclasses.replace(refuted(
            f"at E[A_1] = -11, E||grad f||^2 = 10, c_1 = c_2 = U3 = Q = 1, A_r^3 = S2 = Y = Df = 0 every premise holds ((26): -11 <= -11, "
            f"(33), (34), (35): -11 <= 0) but (36) reads 10 - 1 + 1 <= 0 + 1 - 0, false: (26) bounds E[A_1] from above, while moving "
            "it to the left of (35) needs a lower bound, and (36) subtracts the bracket Y that (33) adds. (37) does follow from "
            f"(36) (its slack exceeds (36)'s by {sp.factor(extra)} >= 0)" if follows37 else "(37) does not follow from (36) either",
            "exact", at={"E[A_1]": EA1, "E||grad f||^2": G, "c_1": c1, "c_2": c2, "U3": U3, "Q": Q, "A_r^3": A3, "S2": S2, "Y": Y,
                         "Df": Df, "premises hold": bool(premises)}), steps=(("318", "refuted"), ("322", "verified" if follows37 else "refuted")))
    return refuted("(37) does not follow from (36)", "exact", at={"premises hold": True})


def _local_models(w: MainWorld):
    """theta_(r,i): one local step (Algorithm 2 line 13, T = 1, lambda = 0) from theta_bar_r, per outcome (O, n, p)."""
    return w.theta_r[None, None] - w.alpha * w.phi_r[None, None] * _unit(w)


def _rel41(w: MainWorld, term):
    v0 = float(w.v_prev.min())
    th = _local_models(w)
    out = []
    for k in range(len(w.D)):
        gbar = (w.a * np.sin(th[k] - w.c)).mean(0)            # (1/n) sum_i grad f_i(theta_(r,i))
        gf = w.grad(w.theta_r)
        lhs = float(np.linalg.norm(gbar / np.sqrt(w.v_r)))
        out.append((lhs, ">=", 0.5 * float(np.linalg.norm(gf / np.sqrt(w.v_r)))
                    - term(float(w.L_layer.sum()), w.alpha, w.M, PHI_M_, w.beta2, w.p, v0, len(P_L))))
    return out


@check(PAPER, "main_thm1_41",
       "MAIN (41), second line: ||grad_bar f(theta_r)/sqrt(v)|| >= (1/2)||grad f(theta_bar_r)/sqrt(v)|| - Lbar alpha^2 M^2 phi_M^2 "
       "(1-beta2) p/v_0 (Lemma 1's (3) and H1 bound the gradient difference).",
       spec=("S9",), severity="constant", depends=("main_lemma1_eq3",), hypotheses=H_MAIN,
       corrected={"term": lambda Lb, al, M_, phiM, b2, p_, v0, h_: Lb * al * phiM * math.sqrt(h_) / math.sqrt(v0)})
def _main_41(term=lambda Lb, al, M_, phiM, b2, p_, v0, h_: Lb * al**2 * M_**2 * phiM**2 * (1 - b2) * p_ / v0):
    """fed-lamb.txt (41) line 340 (its first line is (40), line 336, checked by S4_norm_inequalities); grad_bar f(theta_r) =
    (1/n) sum_i grad f_i(theta_(r,i)) at the local models after one step (line 13), v_0 = the smallest past v (the tightest
    admissible), on 24 seeded MainWorld instances.  ``term(Lbar, alpha, M, phi_M, beta2, p, v_0, h)``: the subtracted bound on
    ||(grad_bar f - grad f(theta_bar))/sqrt(v)|| (printed from Lemma 1's (3)); each local model is alpha phi sqrt(h) <= alpha
    phi_M sqrt(h) from theta_bar (P1), which gives Lbar alpha phi_M sqrt(h)/sqrt(v_0)."""
    return relations_result([Rel("340", "(41)'s second line", lambda w: _rel41(w, term))], MAIN_WORLDS, "MAIN (41)",
                            MainWorld.point, describe=_describe)


def _rel4(w: MainWorld):
    """(4): the local model after one step equals both printed forms (p = m/sqrt(v)), per outcome and client."""
    th = _local_models(w)
    form2 = w.theta_r[None, None] - w.alpha * w.phi_r[None, None] * (w.m_r / np.sqrt(w.v_r)) / _layer_norms(w.p_r)
    out = []
    for k in range(len(w.D)):
        step = np.array([_line13(w.theta_r, w.p_r[k, i], w.alpha, w.phi_r) for i in range(w.n)])
        out += [(float(np.abs(step - th[k]).max()), "<=", 1e-12), (float(np.abs(step - form2[k]).max()), "<=", 1e-12)]
    return out


def _line13(theta, p_ratio, alpha_, phi_):
    """Algorithm 2 line 13 (lambda = 0), layer by layer."""
    out = theta.copy()
    for l_ in range(len(P_L)):
        idx = LAYERS == l_
        out[idx] = theta[idx] - alpha_ * phi_[idx] * p_ratio[idx] / np.linalg.norm(p_ratio[idx])
    return out


@check(PAPER, "main_lemma1_local_step",
       "MAIN Lemma 1's proof, (4): with T = 1 the local model is theta_bar^l - alpha phi p^l/||p^l|| = theta_bar^l - alpha phi "
       "(m/sqrt(v)) / ||p^l|| (Algorithm 2 line 13, lambda = 0); SUPP Lemma 1's display sums this over the T local steps.",
       spec=("S9",), severity="typo")
def _main_l1_step():
    """fed-lamb.txt (4) line 185 and Algorithm 2 line 13 (line 115); fed-lamb-supplement.txt line 86 (T steps): evaluated with
    line 13's layer-wise update on 24 MainWorld instances (each layer moves by exactly alpha phi, P1)."""
    return relations_result([Rel("185", "(4), both forms", _rel4)], MAIN_WORLDS, "Lemma 1's local step", MainWorld.point,
                            describe=_describe)


# ---------------------------------------------------------------------------
# SUPP Theorem 5: the displays of the B_1 / B_2 analysis on the same instances (T = 1)
# ---------------------------------------------------------------------------
#: SUPP reads the ratio psi = m/sqrt(v_hat) (p_r here), the normalised gradient g_bar_(t,i) = [phi g^l/||psi^l||] and divides by
#: v_hat^(1/4); eps is taken as the smallest v_hat entry (v_hat >= eps).  B_2 assumes beta1 = 0 (line 154).
SUPP_WORLDS = MAIN_WORLDS
SUPP_B2_WORLDS = [w for w in MAIN_WORLDS if w.beta1 == 0]


def _q4(x, v):
    """||x/v^(1/4)||^2 along the last axis."""
    return (x**2 / np.sqrt(v)).sum(-1)


def _gbar_i(w: MainWorld):
    """g_bar_(t,i) = phi g/||psi^l|| per outcome and client (so g_bar/sqrt(v_hat) = w_r g)."""
    return w.phi_r[None, None] * w.g / _layer_norms(w.p_r)


def _supp_eps(w: MainWorld) -> float:
    return float(w.v_r.min())


def _supp_bracket(w: MainWorld) -> float:
    """The bracket of SUPP line 171 / 175-178 (T = 1, L = Lbar, h = 2 layers, p = 3, sigma^2 = s^2)."""
    e, L_ = _supp_eps(w), float(w.L_layer.sum())
    return (w.alpha**2 * L_ / math.sqrt(e) * w.alpha**2 * w.M**2 * PHI_M_**2 * (1 - w.beta2) * w.p + w.alpha * w.M**2 / math.sqrt(e)
            + PHI_M_**2 * math.sqrt(w.M**2 + w.p * w.sigma**2) + w.alpha * PHI_M_ * len(P_L) * w.sigma**2 / math.sqrt(w.n))


def _A1_supp(w: MainWorld):
    """SUPP line 130's A_1 = -alpha <grad f(vartheta_r), g_bar_r/sqrt(v_hat_r)> per outcome."""
    gbar = _gbar_i(w).mean(1)
    return -w.alpha * _inner(_gf(w)[None], gbar / np.sqrt(w.v_r))


SUPP_HOLDING = (
    Rel("138", "||(grad f(vartheta) - g_bar)/v^(1/4)||^2 <= (1/n) sum_i ||...||^2 <= (2/n) sum_i (||(grad f(vartheta) - grad f(theta_bar))"
        "/v^(1/4)||^2 + ||(grad f(theta_bar) - g_bar_i)/v^(1/4)||^2)", lambda w: [
            x for k in range(len(w.D)) for x in (
                (_q4(_gf(w) - _gbar_i(w)[k].mean(0), w.v_r), "<=", _q4(_gf(w)[None] - _gbar_i(w)[k], w.v_r).mean()),
                (_q4(_gf(w)[None] - _gbar_i(w)[k], w.v_r).mean(), "<=", 2 * (_q4(_gf(w) - w.grad(w.theta_r), w.v_r)
                                                                            + _q4(w.grad(w.theta_r)[None] - _gbar_i(w)[k], w.v_r).mean())))]),
    Rel("190-194", "(1/2)||grad f(theta_bar)/v^(1/4)||^2 - ||(grad_bar f - grad f(theta_bar))/v^(1/4)||^2 <= ||grad_bar f/v^(1/4)||^2 "
        "(the first line of lines 190-194)", lambda w: [_rel190(w, k, None)[0] for k in range(len(w.D))]),
)


def _rel190(w: MainWorld, k: int, term):
    th = _local_models(w)[k]
    gbar = (w.a * np.sin(th - w.c)).mean(0)
    gf = w.grad(w.theta_r)
    G2 = float((np.linalg.norm(w.a * np.sin(w.theta_r - w.c), axis=1) ** 2).max())
    e, L_ = _supp_eps(w), float(w.L_layer.sum())
    first = (_q4(gbar, w.v_r), ">=", 0.5 * _q4(gf, w.v_r) - _q4(gbar - gf, w.v_r))
    if term is None:
        return [first]
    return [first, (_q4(gbar, w.v_r), ">=", 0.5 * _q4(gf, w.v_r) - term(L_, w.alpha, w.M, w.sigma, G2, w.beta2, w.p, e, len(P_L)))]


@check(PAPER, "supp_thm5_decomposition_steps",
       "SUPP Theorem 5's proof: the bound of ||(grad f(vartheta_r) - g_bar_r)/v^(1/4)||^2 by Jensen and Young (line 138) and the lower "
       "bound of ||grad_bar f(theta_r)/v^(1/4)||^2 by Cauchy-Schwarz (first line of lines 190-194) hold; (4)-(6) (lines 114-126) are "
       "MAIN's (7), (8), (13)-(16) (main_thm1_descent_steps, main_thm1_15_sign).",
       spec=("S12",), severity="constant")
def _supp_decomp():
    """fed-lamb-supplement.txt lines 138 and 190 on 24 seeded MainWorld instances (T = 1, eps = smallest v_hat entry, local
    models after one step of line 13)."""
    return relations_result(SUPP_HOLDING, SUPP_WORLDS, "SUPP's decompositions", MainWorld.point, describe=_describe)


@check(PAPER, "supp_190_consensus_term",
       "SUPP lines 190-194, last line: ||(grad_bar f(theta_r) - grad f(theta_bar_r))/v^(1/4)||^2 <= (alpha^2 L/sqrt(eps)) M^2 T^2 "
       "(sigma^2 + G^2)(1-beta2) p (from (9) and Assumption 3).",
       spec=("S9", "S11"), severity="constant", depends=("S9_lemma1_consensus_bound",), hypotheses=H_MAIN[:1],
       corrected={"term": lambda L_, al, M_, sig, G2, b2, p_, e, h_: L_**2 * al**2 * PHI_M_**2 * h_ / math.sqrt(e)})
def _supp_190(term=lambda L_, al, M_, sig, G2, b2, p_, e, h_: al**2 * L_ / math.sqrt(e) * M_**2 * (sig**2 + G2) * (1 - b2) * p_):
    """fed-lamb-supplement.txt lines 190-194 (the last line uses (9) and Assumption 3), on 24 seeded MainWorld instances (T = 1,
    eps = smallest v_hat entry, grad_bar f(theta_r) = (1/n) sum_i grad f_i at the local models after one step of line 13,
    G^2 = max_i ||grad f_i||^2, L = Lbar).  ``term(L, alpha, M, sigma, G^2, beta2, p, eps, h)``: the subtracted bound (printed);
    each local model is alpha phi_M sqrt(h) from theta_bar (P1), which gives L^2 alpha^2 phi_M^2 h/sqrt(eps)."""
    rel = Rel("190-194", "the last line of lines 190-194", lambda w: [_rel190(w, k, term)[1] for k in range(len(w.D))])
    return relations_result([rel], SUPP_WORLDS, "SUPP line 190-194", MainWorld.point, describe=_describe)


@check(PAPER, "supp_A1_sign",
       "SUPP line 130: the term A_1 of (6) equals -alpha <grad f(vartheta_r), g_bar_r/sqrt(v_hat_r)>.",
       spec=("S2",), severity="typo", corrected={"sign": 1}, hypotheses=H_MAIN[:1])
def _supp_130(sign=-1):
    """fed-lamb-supplement.txt (6) line 126 (A_1 = (alpha/n) sum grad f^j sum_i phi g/(sqrt(v)||psi||), subtracted) and line 130;
    ``sign``: the sign in front of alpha <grad f, g_bar/sqrt(v_hat)> (printed -1)."""
    rel = Rel("130", "A_1 = sign * alpha <grad f(vartheta_r), g_bar_r/sqrt(v_hat_r)>", lambda w: [
        (_A1(w)[k], "=", -sign * _A1_supp(w)[k]) for k in range(len(w.D))])
    res = relations_result([rel], SUPP_WORLDS, "line 130", MainWorld.point, describe=_describe)
    if res.status == "refuted":
        return dataclasses.replace(res, evidence=res.evidence + "; (6) defines A_1 as the positive term it subtracts, "
                                   "so A_1 = +alpha <grad f, g_bar/sqrt(v_hat)> (a sign typo; A_1's use at line 198 keeps "
                                   "the minus of (6))")
    return res


_SUPP_B2_HYP = (Hyp("H1-H4 on the instance (rebuilt from its seed), beta1 = 0 (the B_2 bound's simplification, line 154), T = 1, "
                    "eps <= v_hat", lambda q: _main_hyps_hold(q) and q["beta1"] == 0, "fed-lamb-supplement.txt lines 96, 154"),)


def _B2(w: MainWorld):
    """B_2 = sum_i ||(grad f(theta_(t,i)) - g_bar_(t,i))/v_hat^(1/4)||^2 per outcome (T = 1: theta_(t,i) = theta_bar_r)."""
    gf = w.grad(w.theta_r)
    return _q4(gf[None, None] - _gbar_i(w), w.v_r).sum(-1)


def _rel156(w: MainWorld):
    gf = w.grad(w.theta_r)
    e = _supp_eps(w)
    first = w.n * w.M**2 / math.sqrt(e) + w.n * PHI_M_**2 * math.sqrt(w.M**2 + w.p * w.sigma**2)
    agree = -2 * sum(np.sqrt((1 - w.beta2) / (w.M**2 * P_L[l_])) * w.E((w.phi_r[None, None, LAYERS == l_] * gf[None, None, LAYERS == l_]
                                                                       * w.g[:, :, LAYERS == l_]).sum((1, 2))) for l_ in range(len(P_L)))
    mis = np.sign(gf)[None, None] != np.sign(w.g)
    disagree = -2 * w.E((w.phi_r[None, None] * gf[None, None] * w.g / _layer_norms(w.p_r) * mis).sum((1, 2)))
    cross = -2 * w.E((gf[None, None] * _gbar_i(w) / np.sqrt(w.v_r)).sum((1, 2)))
    return [(w.E(_B2(w)), "<=", first + cross), (w.E(_B2(w)), "<=", first + agree + disagree)]


def _rel167(w: MainWorld):
    gf = w.grad(w.theta_r)
    e = _supp_eps(w)
    rhs = (w.n * w.M**2 / math.sqrt(e) + w.n * PHI_M_**2 * math.sqrt(w.M**2 + w.p * w.sigma**2)
           - 2 * PHI_m_ * math.sqrt((1 - w.beta2) / (w.M**2 * w.p)) * w.n * float(gf @ gf)
           + PHI_M_ * len(P_L) * w.sigma**2 / math.sqrt(w.n))
    return [(w.E(_B2(w)), "<=", rhs)]


def _rel171(w: MainWorld):
    lhs = 2 / w.n * w.E(_q4(w.grad_i_r[None] - _gbar_i(w), w.v_r).sum(-1))
    return [(lhs, "<=", 4 * _supp_bracket(w))]


def _rel175(w: MainWorld):
    gbar = _gbar_i(w).mean(1)
    lhs = w.E(_A1_supp(w))
    rhs = (-w.alpha / 2 * _q4(_gf(w), w.v_r) - w.alpha / 2 * w.E(_q4(gbar, w.v_r)) + 4 * w.alpha * _supp_bracket(w))
    return [(lhs, "<=", rhs)]


def _rel198(w: MainWorld):
    gf = w.grad(w.theta_r)
    e, L_ = _supp_eps(w), float(w.L_layer.sum())
    G2 = float((np.linalg.norm(w.grad_i_r, axis=1) ** 2).max())
    al, b1 = w.alpha, w.beta1
    rest = (al**3 * L_ / math.sqrt(e) * w.M**2 * PHI_m_**2 * PHI_M_**2 * (1 - w.beta2) ** 2 * w.p
            + 2 * al**3 * L_ * w.p * PHI_M_**2 / math.sqrt(e) * b1**2 / (1 - b1) ** 2)
    line1 = -al * PHI_m_**2 * (1 - w.beta2) / 4 * _q4(gf, w.v_r) + rest + 4 * al * (
        al**2 * L_ / math.sqrt(e) * w.M**2 * (w.sigma**2 + G2) * (1 - w.beta2) * w.p + w.M**2 * al / math.sqrt(e)
        + al * PHI_M_**2 * math.sqrt(w.M**2 + w.p * w.sigma**2) + PHI_M_ * al * len(P_L) * w.sigma**2 / math.sqrt(w.n))
    return [(w.E(_A1_supp(w)), "<=", line1)]


SUPP_B2 = (
    Rel("156", "E[B_2] <= n M^2/sqrt(eps) + n phi_M^2 sqrt(M^2 + p sigma^2) - 2 sum E<grad f, g_bar_i>/sqrt(v_hat), then the "
        "sign split with sqrt((1-beta2)/(M^2 p_l))", _rel156),
    Rel("167", "E[B_2] <= n M^2/sqrt(eps) + n phi_M^2 sqrt(M^2+p sigma^2) - 2 phi_m sqrt((1-beta2)/(M^2 p)) sum E||grad f||^2 + "
        "phi_M h sigma^2/sqrt(n)", _rel167),
    Rel("171", "(2/n) sum_i ||(grad f_i(theta_bar) - g_bar_i)/v^(1/4)||^2 <= 4[...]", _rel171),
    Rel("175-178", "(7) with the bounds substituted: -alpha E<grad f, g_bar/sqrt(v)> <= -(alpha/2)E||grad f/v^(1/4)||^2 - "
        "(alpha/2)E||g_bar/v^(1/4)||^2 + 4 alpha [...]", _rel175),
    Rel("198-204", "the bound on A_1 (line 130's sign) assembled from (7), (10) and line 190-194", _rel198),
)


@check(PAPER, "supp_B2_chain",
       "SUPP Theorem 5's proof: the bound on E[B_2] (lines 156 and 167), its combination (line 171), the substitution into (7) "
       "(lines 175-178) and the assembled bound on A_1 (lines 198-204) hold (beta1 = 0, T = 1).",
       spec=("S12",), severity="rate", depends=("B2_sign_probability_step", "supp10_cross_terms", "S8_ratio_bound_global_v"),
       hypotheses=_SUPP_B2_HYP)
def _supp_b2():
    """fed-lamb-supplement.txt lines 154-204: B_2 (line 156, 6 relations, first and last evaluated), E[B_2] (line 167), line 171,
    lines 175-178 and 198-204, on the seeded MainWorld instances with beta1 = 0 (the simplification of line 154), eps = smallest
    v_hat entry, L = Lbar, h = 2, G^2 = max_i ||grad f_i||^2, exact expectations over the noise."""
    return relations_result(SUPP_B2, SUPP_B2_WORLDS, "SUPP's B_2 analysis", MainWorld.point, describe=_describe)


@check(PAPER, "supp_lipschitz_squared",
       "SUPP lines 142 and 150 (first inequality): for an L-smooth f_i, ||(grad f_i(x) - grad f_i(y))/v^(1/4)||^2 <= (L/sqrt(eps)) "
       "||x - y||^2 (v >= eps).",
       spec=("S11",), severity="constant", corrected={"power": 2},
       hypotheses=(Hyp("f is L-smooth with |grad f| <= M: f(x) = L log cosh(x) (grad L tanh x), v = eps", lambda q: q["f"] ==
                       "L log cosh(x)" and q["L"] > 0 and q["v"] == q["eps"] > 0, "fed-lamb-supplement.txt Assumption 1, line 142"),))
def _supp_lsq(power=1):
    """fed-lamb-supplement.txt line 142 ('<= (2/(n sqrt(eps))) sum L ||vartheta - theta_bar||^2') and (9) line 150 ('B_1 <= (L/sqrt(eps))
    sum ||theta_bar - theta_(t,i)||^2'): the squared gradient difference needs L^2; ``power`` (printed 1).  Search over f = L log
    cosh(x), L in {1/2, 2, 4}, points in {-1, -1/20, 0, 1/20, 1/2}, v = eps = 1."""
    for Lv in (0.5, 2.0, 4.0):
        for x0, y0 in itertools.combinations((-1.0, -0.05, 0.0, 0.05, 0.5), 2):
            lhs = (Lv * math.tanh(x0) - Lv * math.tanh(y0)) ** 2
            rhs = Lv**power * (x0 - y0) ** 2
            if lhs > rhs * (1 + 1e-12):
                return refuted(f"f(x) = {Lv:g} log cosh(x) (L-smooth, |grad f| <= {Lv:g}), x = {x0:g}, y = {y0:g}, v = eps = 1: "
                               f"||grad f(x) - grad f(y)||^2 = {lhs:.4g} > L ||x - y||^2 = {rhs:.4g}; the step needs L^2 (lines 142, 150)",
                               "numeric", at={"f": "L log cosh(x)", "L": Lv, "x": x0, "y": y0, "v": 1.0, "eps": 1.0})
    return verified(f"||grad f(x) - grad f(y)||^2 <= L^{power} ||x - y||^2 at every searched point", "numeric")


@check(PAPER, "supp_eq8_young_coefficient",
       "SUPP (8): (2/n) sum_i ||(grad f(theta_bar) - g_bar_i)/v^(1/4)||^2 <= (4/n) B_1 + B_2 for B_1 = sum_i ||a_i||^2, B_2 = sum_i ||b_i||^2, "
       "a_i = (grad f(theta_bar) - grad f(theta_(t,i)))/v^(1/4), b_i = (grad f(theta_(t,i)) - g_bar_(t,i))/v^(1/4).",
       spec=("S12",), severity="constant", corrected={"b2_coef": lambda n_: sp.Rational(4, n_)},
       hypotheses=(Hyp("n >= 1 clients; a_i, b_i are the vectors of the display (any vectors: the step applies Young's inequality "
                       "||a + b||^2 <= 2||a||^2 + 2||b||^2 to them)", lambda q: int(q["n"]) == q["n"] >= 1,
                       "fed-lamb-supplement.txt line 146"),))
def _supp_eq8(b2_coef=lambda n_: 1):
    """fed-lamb-supplement.txt (8) line 146; ``b2_coef(n)``: the coefficient of B_2 (printed 1; Young gives 4/n).  Exact search over
    n in {1, 2, 4} and scalar a_i, b_i in {-1, 0, 1} (a quadratic-form inequality in scalars implies it for vectors and back)."""
    for n_ in (1, 2, 4):
        for a_ in itertools.product((-1, 0, 1), repeat=min(n_, 2)):
            for b_ in itertools.product((-1, 0, 1), repeat=min(n_, 2)):
                a = list(a_) + [0] * (n_ - len(a_))
                b = list(b_) + [0] * (n_ - len(b_))
                lhs = sp.Rational(2, n_) * sum((x + y) ** 2 for x, y in zip(a, b))
                rhs = sp.Rational(4, n_) * sum(x * x for x in a) + b2_coef(n_) * sum(y * y for y in b)
                if lhs > rhs:
                    return refuted(f"n = {n_}, a = {tuple(a)}, b = {tuple(b)}: (2/n) sum ||a_i + b_i||^2 = {lhs} > (4/n) B_1 + "
                                   f"{b2_coef(n_)} B_2 = {rhs}; Young gives (4/n) B_1 + (4/n) B_2, so the display holds only for "
                                   "n >= 4", "exact", at={"n": n_, "a": tuple(a), "b": tuple(b)})
    return verified("the inequality holds for every searched n, a, b", "exact")


# ===========================================================================
# the proof-step map (line numbers of fed-lamb.txt = MAIN, fed-lamb-supplement.txt = SUPP)
# ===========================================================================
MAIN, SUPP = "fed-lamb.txt", "fed-lamb-supplement.txt"

result(PAPER, "Lemma 1 (MAIN)", MAIN, (179, 181), (183, 191), [
    S(181, "(3): ||theta_bar_r - theta_(r,i)|| <= alpha^2 M^2 phi_M^2 (1-beta2) p/v_0", "main_lemma1_eq3"),
    S(185, "(4): the local step written with p = m/sqrt(v)", "main_lemma1_local_step"),
    S(189, "(5): the squared distance bounded by alpha^2 M^2 phi_M^2 (1-beta2) p/v_0", "main_lemma1_eq5"),
])

result(PAPER, "Theorem 1 (MAIN)", MAIN, (147, 149), (193, 345), [
    S(149, "(2): the bound's right-hand side is the placeholder 'dd': no relation to evaluate"),
    S(197, "(6): the statement restated with the placeholder 'dd': no relation to evaluate"),
    S(201, "(7): L-smoothness at the virtual iterates", "main_thm1_descent_steps"),
    S(205, "(8): (7) in expectation", "main_thm1_descent_steps"),
    S(209, "(9): the virtual sequence vartheta_r", "S1_virtual_sequence"),
    S(213, "(10): its increment", "S1_virtual_sequence"),
    S(215, "(11): the increment through the local updates", "S2_virtual_step", "S2_paper_signs"),
    S(217, "(12): the increment split into a momentum and a gradient term", "S2_virtual_step", "S2_paper_signs"),
    S(223, "(13): (8) with the full step", "main_thm1_descent_steps"),
    S(227, "(14): the inner product by coordinates", "main_thm1_descent_steps"),
    S(229, "(15): the momentum term of the inner product", "main_thm1_15_sign"),
    S(231, "(16): the gradient term -A_1", "main_thm1_descent_steps"),
    S(235, "(17): A_1 bounded by minus itself", "main_thm1_A1_chain"),
    S(237, "(18): the sign-agreeing part with sqrt((1-beta2)/(M^2 p_l))", "main_thm1_A1_chain"),
    S(239, "(19): the sign-mismatch part", "main_thm1_A1_chain"),
    S(243, "(20): expectation of (18)", "main_thm1_A1_chain"),
    S(245, "(21): expectation of (19)", "main_thm1_A1_chain"),
    S(247, "(22): H4 and E g = grad f", "main_thm1_A1_chain"),
    S(249, "(23): the mismatch term with phi_M", "main_thm1_A1_chain"),
    S(251, "(24): an empty display (only the tag): no relation to evaluate"),
    S(257, "(25): E[|grad f^j p^j/||p||| 1(mismatch)] <= |grad f^j| P(mismatch)", "main_thm1_descent_steps"),
    S(261, "(26): the bound on E[A_1] with the noise sum", "main_thm1_A1_chain", "S6_layer_factor"),
    S(267, "(27): definition of A_r^2 (evaluated where (30)-(31) bound it)", "main_thm1_A2_bounds"),
    S(269, "(28): definition of A_r^3 (evaluated where (34) bounds it)", "main_thm1_sums_34_35"),
    S(273, "(29): the squared step in (12)'s terms", "main_thm1_descent_steps"),
    S(275, "(30): Cauchy-Schwarz on the two terms", "main_thm1_A2_bounds"),
    S("279-285", "(31): expectation, H2-H3", "main_thm1_A2_bounds"),
    S("291-297", "(32): the momentum term summed over rounds and telescoped", "phi_M_factored_out_of_difference", "S7_telescoping"),
    S("303-306", "(33): (32) combined into (31)", "main_thm1_33_combination"),
    S(310, "(34): the sum of A_r^3", "main_thm1_sums_34_35"),
    S(314, "(35): (13) summed over rounds", "main_thm1_sums_34_35"),
    S(318, "(36): (26), (33), (34) plugged into (35)", "main_thm1_36_37_logic"),
    S(322, "(37): (36) rearranged", "main_thm1_36_37_logic"),
    S(326, "(38): the constants collected", "S5_p_cancels", "S6_layer_factor"),
    S(332, "(39): the weighted gradient bounded by phi_M (1-beta2) grad f/sqrt(v)", "eq39_vector_inequality"),
    S(336, "(40): ||a|| >= ||b||/2 - ||a - b||", "S4_norm_inequalities"),
    S(340, "(41): (40) with Lemma 1 and H1", "main_thm1_41"),
    S(344, "(42): the final bound", "main_bound_42_no_decay"),
], note="Theorem 1 (T = 1, eps = lambda = 0) states the placeholder 'dd' as its bound; its proof is evaluated display by display")

result(PAPER, "Lemma 1 (SUPP)", SUPP, (78, 82), (84, 92), [
    S(80, "||theta_bar_r - theta_(r,i)||^2 <= alpha^2 M^2 T^2 phi_M^2 (1-beta2) p/eps", "S9_lemma1_consensus_bound"),
    S(86, "the local model after T local steps", "main_lemma1_local_step", "P1_P2_step_properties"),
    S(90, "the squared distance summed over layers and bounded", "S9_lemma1_consensus_bound"),
])

result(PAPER, "Theorem 5 (SUPP)", SUPP, (96, 100), (102, 219), [
    S(98, "(1): the bound with its six terms", "thm5_statement_matches_proof", "S10_rate_expansion", "T4_local_steps_hurt"),
    S(104, "(2): the virtual sequence", "S1_virtual_sequence"),
    S(108, "(3): its increment through the local updates", "S2_virtual_step", "S2_paper_signs"),
    S(114, "L-smoothness at the virtual iterates", "main_thm1_descent_steps"),
    S(118, "(4): in expectation", "main_thm1_descent_steps"),
    S(122, "(5): (4) restated", "main_thm1_descent_steps"),
    S(126, "(6): the inner product split into the momentum term and -A_1", "main_thm1_15_sign", "main_thm1_descent_steps"),
    S(130, "A_1 = -alpha <grad f, g_bar/sqrt(v_hat)>", "supp_A1_sign"),
    S(134, "(7): the polarisation identity", "S3_polarization_equality"),
    S(138, "Jensen and Young on ||grad f - g_bar||^2", "supp_thm5_decomposition_steps"),
    S(142, "the first term through smoothness and the virtual sequence", "supp_lipschitz_squared"),
    S(146, "(8): split into B_1 and B_2", "supp_eq8_young_coefficient"),
    S(150, "(9): B_1 through smoothness and Lemma 1", "S11_epsilon_powers", "supp_lipschitz_squared"),
    S(156, "the bound on E[B_2] (beta1 = 0)", "supp_B2_chain", "S12_layer_count_bound"),
    S("160-163", "the sign-probability step", "B2_sign_probability_step"),
    S(167, "E[B_2] bounded", "supp_B2_chain"),
    S(171, "the combination of (8), (9) and E[B_2]", "supp_B2_chain"),
    S("175-178", "substitution into (7)", "supp_B2_chain"),
    S("182-186", "(10): the lower bound on E||g_bar/v^(1/4)||^2", "supp10_cross_terms"),
    S("190-194", "the lower bound on ||grad_bar f/v^(1/4)||^2", "supp_thm5_decomposition_steps", "supp_190_consensus_term"),
    S("198-204", "the assembled bound on A_1", "supp_B2_chain", "thm5_init_term_from_descent"),
    S("208-217", "the telescoped final display", "thm5_statement_matches_proof", "thm5_proof_form_speedup",
      "thm5_init_term_from_descent"),
], note="SUPP states the theorem inside its proof section (line 96); the main text's statement is the draft's Theorem 1")

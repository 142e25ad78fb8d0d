"""Plain-float evaluators of the four papers' convergence bounds.

Every ``*_bound`` function takes keyword arguments named as in the papers and
returns the right-hand side of the theorem as a float: an upper bound on the
quantity the theorem bounds (average or minimum of E||grad f||^2, see each
docstring).  Where a theorem writes "<~" the hidden absolute constant is made
explicit through ``hidden_constant`` (defaults follow specs/fed-ef.md sec. 0:
8 for Thms 4.1/4.2, 16 for Thm 4.4, 16 sqrt(eps) for Thm 4.3).

Every bound has a companion ``*_conditions`` function returning the list of
violated learning-rate conditions (empty when all hold), and most have a
``*_terms`` function returning the named terms.  ``evaluate(name, **consts)``
calls an evaluator with whichever of the given constants it accepts, so a
simulator can pass one dict of problem constants to all of them.

No sympy here: this module is imported by the simulator and must be cheap.
The tests check every evaluator against the sympy expressions of the paper
modules, so the two cannot drift apart.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Sequence

__all__ = [
    "compressor_q2",
    "fed_ef_C1_sgd", "fed_ef_C1_ams", "fed_ef_C1_pp",
    "fed_ef_thm41_terms", "fed_ef_thm41_bound", "fed_ef_thm41_floor", "fed_ef_thm41_conditions",
    "fed_ef_thm42_terms", "fed_ef_thm42_bound", "fed_ef_thm42_conditions",
    "fed_ef_thm43_terms", "fed_ef_thm43_bound", "fed_ef_thm43_conditions",
    "fed_ef_thm44_terms", "fed_ef_thm44_bound", "fed_ef_thm44_conditions",
    "fed_ef_cor1_learning_rates", "fed_ef_cor1_rate", "fed_ef_thm44_learning_rates",
    "fedlada_thm35_terms", "fedlada_thm35_bound", "fedlada_thm35_conditions", "fedlada_cor36_learning_rates",
    "fedlada_cor36_rate",
    "fedada2_c_beta", "fedada2_phi1", "fedada2_phi2", "fedada2_thm20_terms", "fedada2_thm20_bound",
    "fedada2_thm20_conditions", "fedada2_rate_exponent",
    "fed_lamb_thm5_terms", "fed_lamb_thm5_bound", "fed_lamb_thm5_conditions", "fed_lamb_to_unpreconditioned",
    "EVALUATORS", "evaluate",
]


def _check_positive(**kw) -> None:
    for k, v in kw.items():
        if not (v > 0):
            raise ValueError(f"{k} must be positive, got {v}")


def _check_q(q: float) -> None:
    if not 0 <= q < 1:
        raise ValueError(f"q must lie in [0, 1), got {q}")


# ===========================================================================
# compressors (Fed-EF sec. 2.7)
# ===========================================================================


def compressor_q2(name: str, layer_sizes: Sequence[int], k: float | None = None) -> float:
    """Worst-case q_C^2 of Definition 1 for a compressor applied layer-wise.

    * ``identity``: 0.
    * ``topk``: keeps max(1, floor(k d_l)) entries per layer (footnote 2), so
      q^2 = 1 - min_l max(1, floor(k d_l))/d_l (Prop. 3.1 states 1 - k).
    * ``sign``: grouped Sign with one group per layer, q^2 = 1 - min_l 1/d_l (Prop. 3.1).
    * ``hvsign``: heavy-Sign = Sign(TopK); Prop. 3.2 states q^2 = 1 - min_l k/d_l, which
      assumes ||C_k(x)||^2 >= k ||x||^2; with the layer-wise flooring the kept fraction is
      k_l/d_l (k_l = max(1, floor(k d_l))), so q^2 = 1 - min_l k_l/d_l^2 (check
      fed-ef:hvsign_bound_with_flooring; equal to the paper's when k d_l is whole).
    """
    sizes = [int(s) for s in layer_sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError("layer_sizes must be a non-empty list of positive integers")
    if name == "identity":
        return 0.0
    if name in ("topk", "hvsign"):
        if k is None or not 0 < k <= 1:
            raise ValueError(f"{name} needs a fraction k in (0, 1]")
    if name == "topk":
        return 1.0 - min(max(1, math.floor(k * d)) / d for d in sizes)
    if name == "sign":
        return 1.0 - min(1.0 / d for d in sizes)
    if name == "hvsign":
        return 1.0 - min(max(1, math.floor(k * d)) / (d * d) for d in sizes)
    raise ValueError(f"unknown compressor {name!r}; use identity, topk, sign or hvsign")


# ===========================================================================
# Fed-EF (Li & Li)
# ===========================================================================


def fed_ef_C1_sgd(q: float) -> float:
    """Thm 4.2: C1 = 2 + 4q^2/(1-q^2)^2."""
    _check_q(q)
    return 2 + 4 * q * q / (1 - q * q) ** 2


def fed_ef_C1_ams(q: float, beta1: float) -> float:
    """Thm 4.3: C1 = beta1/(1-beta1) + 2q/(1-q^2)."""
    _check_q(q)
    return beta1 / (1 - beta1) + 2 * q / (1 - q * q)


def fed_ef_C1_pp(q: float) -> float:
    """Thm 4.4: C1 = q^2/(1-q^2)^3."""
    _check_q(q)
    return q * q / (1 - q * q) ** 3


def fed_ef_thm41_terms(*, L, sigma, sigma_g, q, n, K, T, eta, eta_l, f0_minus_fstar) -> dict[str, float]:
    """Displayed terms of Thm 4.1 (Fed-SGD with direct biased compression, Algorithm 1)."""
    _check_q(q)
    _check_positive(L=L, n=n, K=K, T=T, eta=eta, eta_l=eta_l)
    H = sigma**2 + 6 * K * sigma_g**2
    return {
        "init": f0_minus_fstar / (eta * eta_l * T * K),
        "variance": 4 * eta * eta_l * (1 + q * q) * L * sigma**2 / n,
        "bias_floor": 64 * q * q * sigma**2 / (K * n),
        "drift_global": 20 * eta * eta_l**3 * (1 + q * q) * K**2 * L**3 * H,
        "drift_local": (320 * q * q + 3) * eta_l**2 * K * L**2 * H,
    }


def fed_ef_thm41_bound(*, L, sigma, sigma_g, q, n, K, T, eta, eta_l, f0_minus_fstar, hidden_constant: float = 8.0) -> float:
    """Thm 4.1: bound on (1/T) sum_t E||grad f(theta_t)||^2 for Fed-SGD with a biased compressor (no error feedback).

    ``hidden_constant`` multiplies the displayed right-hand side (8 from the claimed -eta eta_l K/8
    coefficient; with the coefficient the proof actually gives, -17/256, it is 256/17 ~ 15.06).
    The term 64 q^2 sigma^2/(Kn) does not vanish as T grows, see :func:`fed_ef_thm41_floor`.
    """
    return hidden_constant * sum(fed_ef_thm41_terms(L=L, sigma=sigma, sigma_g=sigma_g, q=q, n=n, K=K, T=T, eta=eta,
                                                    eta_l=eta_l, f0_minus_fstar=f0_minus_fstar).values())


def fed_ef_thm41_floor(*, sigma, q, n, K, hidden_constant: float = 8.0) -> float:
    """Non-vanishing part of Thm 4.1: hidden_constant * 64 q^2 sigma^2/(K n) (the limit of the bound as T -> oo, eta_l -> 0)."""
    _check_q(q)
    return hidden_constant * 64 * q * q * sigma**2 / (K * n)


def fed_ef_thm41_conditions(*, L, q, K, eta, eta_l) -> list[str]:
    """Violated conditions of Thm 4.1: eta_l <= 1/(8KL max{1, 8(1+q^2)eta}), plus the proof's q <= 1/32."""
    out = []
    if eta_l > 1 / (8 * K * L):
        out.append("eta_l <= 1/(8KL)")
    if eta_l > 1 / (64 * K * L * (1 + q * q) * eta):
        out.append("eta_l <= 1/(64KL(1+q^2)eta)")
    if q > 1 / 32:
        out.append("q <= 1/32 (required by the proof, missing in the statement)")
    return out


def fed_ef_thm42_terms(*, L, sigma, sigma_g, q, n, K, T, eta, eta_l, f0_minus_fstar, include_dropped_term: bool = False) -> dict[str, float]:
    """Displayed terms of Thm 4.2 (Fed-EF-SGD).  ``include_dropped_term`` adds the Lemma D.3 term
    (5/2) eta_l^2 K L^2 (sigma^2+6K sigma_g^2) that the proof drops (spec sec. 6 item 22a)."""
    _check_positive(L=L, n=n, K=K, T=T, eta=eta, eta_l=eta_l)
    C1 = fed_ef_C1_sgd(q)
    H = sigma**2 + 6 * K * sigma_g**2
    terms = {
        "init": f0_minus_fstar / (eta * eta_l * T * K),
        "variance": 2 * eta * eta_l * C1 * L * sigma**2 / n,
        "drift": 10 * eta * eta_l**3 * C1 * K**2 * L**3 * H,
    }
    if include_dropped_term:
        terms["dropped_lemma_D3"] = 2.5 * eta_l**2 * K * L**2 * H
    return terms


def fed_ef_thm42_bound(*, L, sigma, sigma_g, q, n, K, T, eta, eta_l, f0_minus_fstar, hidden_constant: float = 8.0,
                       include_dropped_term: bool = False) -> float:
    """Thm 4.2: bound on (1/T) sum_t E||grad f(theta_t)||^2 for Fed-EF-SGD (full participation).

    Equals ``hidden_constant`` (8: the proof's left side is eta eta_l K/8 sum E||grad||^2) times the displayed bound.
    Valid under the corrected condition of :func:`fed_ef_thm42_conditions` (``corrected=True``).
    """
    return hidden_constant * sum(fed_ef_thm42_terms(L=L, sigma=sigma, sigma_g=sigma_g, q=q, n=n, K=K, T=T, eta=eta, eta_l=eta_l,
                                                    f0_minus_fstar=f0_minus_fstar, include_dropped_term=include_dropped_term).values())


def fed_ef_thm42_conditions(*, L, q, K, eta, eta_l, corrected: bool = False) -> list[str]:
    """Violated conditions of Thm 4.2.  As printed: eta_l <= 1/(2KL max{4, eta(C1+1)}).  With ``corrected=True``
    the sufficient condition eta_l <= min{1/(8KL), 1/(16KL eta C1)} that makes the proof's coefficient -1/8 (check
    fed-ef:thm42_sufficient_lr_condition)."""
    C1 = fed_ef_C1_sgd(q)
    out = []
    if eta_l > 1 / (8 * K * L):
        out.append("eta_l <= 1/(8KL)")
    if not corrected and eta_l > 1 / (2 * K * L * eta * (C1 + 1)):
        out.append("eta_l <= 1/(2KL eta (C1+1))")
    if corrected and eta_l > 1 / (16 * K * L * eta * C1):
        out.append("eta_l <= 1/(16KL eta C1)")
    return out


def fed_ef_thm43_terms(*, L, sigma, sigma_g, G, q, n, K, T, d, eta, eta_l, beta1, epsilon, f0_minus_fstar) -> dict[str, float]:
    """Displayed terms of Thm 4.3 (Fed-EF-AMS; epsilon inside the square root of the AMSGrad denominator)."""
    _check_positive(L=L, n=n, K=K, T=T, eta=eta, eta_l=eta_l, epsilon=epsilon, d=d)
    C1 = fed_ef_C1_ams(q, beta1)
    H = sigma**2 + 6 * K * sigma_g**2
    se = math.sqrt(epsilon)
    return {
        "init": f0_minus_fstar / (eta * eta_l * T * K),
        "drift_local": 5 * eta_l**2 * K * L**2 / (2 * se) * H,
        "drift_global": eta * eta_l**3 * (30 + 20 * C1**2) * K**2 * L**3 / epsilon * H,
        "variance": eta * eta_l * L * (6 + 4 * C1**2) * sigma**2 / (n * epsilon),
        "adaptive_d1": (C1 + 1) * G**2 * d / (T * se),
        "adaptive_d2": 3 * eta * eta_l * C1**2 * L * K * G**2 * d / (T * epsilon),
    }


def fed_ef_thm43_bound(*, L, sigma, sigma_g, G, q, n, K, T, d, eta, eta_l, beta1, epsilon, f0_minus_fstar,
                       hidden_constant: float | None = None) -> float:
    """Thm 4.3: bound on (1/T) sum_t E||grad f(theta_t)||^2 for Fed-EF-AMS.

    The proof's left side is eta eta_l K/(16 sqrt(eps)) sum E||grad||^2, so the default hidden constant is
    16 sqrt(epsilon) (check fed-ef:thm43_hidden_factor)."""
    c = 16 * math.sqrt(epsilon) if hidden_constant is None else hidden_constant
    return c * sum(fed_ef_thm43_terms(L=L, sigma=sigma, sigma_g=sigma_g, G=G, q=q, n=n, K=K, T=T, d=d, eta=eta, eta_l=eta_l,
                                      beta1=beta1, epsilon=epsilon, f0_minus_fstar=f0_minus_fstar).values())


def fed_ef_thm43_conditions(*, L, G, q, K, eta, eta_l, beta1, epsilon) -> list[str]:
    """Violated conditions of Thm 4.3 (eta_l <= sqrt(eps)/(8KL) min{...}) plus the proof's eps < 1 and C1 >= 1."""
    C1 = fed_ef_C1_ams(q, beta1)
    se = math.sqrt(epsilon)
    bounds = {
        "eta_l <= 1/(8KL)": 1 / (8 * K * L),
        "eta_l <= (1-q^2) sqrt(eps)/(4K(1+q^2)^1.5 G)": (1 - q * q) * se / (4 * K * (1 + q * q) ** 1.5 * G),
        "eta_l <= sqrt(eps)/(128 eta K L)": se / (128 * eta * K * L),
        "eta_l <= sqrt(eps)/(256 C1^2 eta K L)": se / (256 * C1**2 * eta * K * L),
        "eta_l <= sqrt(eps)/(24 eta^(1/3) K L)": se / (24 * eta ** (1 / 3) * K * L),
    }
    out = [k for k, b in bounds.items() if eta_l > b]
    if epsilon >= 1:
        out.append("epsilon < 1 (proof)")
    if C1 < 1:
        out.append("C1 >= 1 (proof, e.g. beta1 >= 1/2)")
    return out


def fed_ef_thm44_terms(*, L, sigma, sigma_g, q, n, m, K, T, eta, eta_l, f0_minus_fstar) -> dict[str, float]:
    """Displayed terms of Thm 4.4 (Fed-EF-SGD, m of n clients per round, sampled without replacement)."""
    _check_positive(L=L, n=n, m=m, K=K, T=T, eta=eta, eta_l=eta_l)
    if m > n:
        raise ValueError("m must not exceed n")
    C1 = fed_ef_C1_pp(q)
    Cp = (n - m) / (n - 1) if n > 1 else 0.0
    H = sigma**2 + 6 * K * sigma_g**2
    return {
        "init": f0_minus_fstar / (eta * eta_l * T * K),
        "variance": eta * eta_l * L * sigma**2 / m,
        "variance_stale": 8 * eta * eta_l * C1 * L * n * sigma**2 / m**2,
        "sampling_het": 3 * eta * eta_l * Cp * K * L * sigma_g**2 / m,
        "drift_local": 2.5 * eta_l**2 * K * L**2 * H,
        "drift_global": 15 * eta * eta_l**3 * Cp * K**2 * L**3 / m * H,
        "stale_error": 560 * eta * eta_l * C1 * (n - m) * L / m**2 * H,
    }


def fed_ef_thm44_bound(*, L, sigma, sigma_g, q, n, m, K, T, eta, eta_l, f0_minus_fstar, hidden_constant: float = 16.0) -> float:
    """Thm 4.4: bound on (1/T) sum_t E||grad f(theta_t)||^2 for Fed-EF-SGD under partial participation.

    The proof's conditions make the coefficient of sum E||grad||^2 equal to -eta eta_l K/16, hence the default 16."""
    return hidden_constant * sum(fed_ef_thm44_terms(L=L, sigma=sigma, sigma_g=sigma_g, q=q, n=n, m=m, K=K, T=T, eta=eta,
                                                    eta_l=eta_l, f0_minus_fstar=f0_minus_fstar).values())


def fed_ef_thm44_conditions(*, L, q, n, m, K, eta, eta_l) -> list[str]:
    """Violated conditions of Thm 4.4, plus Lemma D.1's eta_l <= 1/(8KL) that the proof uses."""
    C1 = fed_ef_C1_pp(q)
    Cp = (n - m) / (n - 1) if n > 1 else 0.0
    bounds = {
        "eta_l <= 1/(6KL)": 1 / (6 * K * L),
        "eta_l <= m/(96 C' eta K L)": m / (96 * Cp * eta * K * L) if Cp > 0 else math.inf,
        "eta_l <= m^2/(53760 (n-m) C1 eta K L)": m * m / (53760 * (n - m) * C1 * eta * K * L) if (n - m) * C1 > 0 else math.inf,
        "eta_l <= 1/(4 eta K L)": 1 / (4 * eta * K * L),
        "eta_l <= 1/(32 C1 eta K L)": 1 / (32 * C1 * eta * K * L) if C1 > 0 else math.inf,
        "eta_l <= 1/(8KL) (Lemma D.1, used in the proof)": 1 / (8 * K * L),
    }
    return [k for k, b in bounds.items() if eta_l > b]


def fed_ef_cor1_learning_rates(*, K, n, T, c_l: float = 1.0, c_g: float = 1.0) -> tuple[float, float]:
    """Corollary 1's learning rates (eta, eta_l) = (c_g sqrt(Kn), c_l/(K sqrt T))."""
    return c_g * math.sqrt(K * n), c_l / (K * math.sqrt(T))


def fed_ef_thm44_learning_rates(*, K, n, m, T, c_l: float = 1.0, c_g: float = 1.0) -> tuple[float, float]:
    """Thm 4.4's learning rates (eta, eta_l) = (c_g sqrt(Km), c_l sqrt(m)/(K sqrt(Tn)))."""
    return c_g * math.sqrt(K * m), c_l * math.sqrt(m) / (K * math.sqrt(T * n))


def fed_ef_cor1_rate(*, sigma, sigma_g, n, K, T, f0_minus_fstar, variant: str = "sgd") -> float:
    """Corollary 1's O(.) rate with unit constants: (f1-f* + sigma^2)/sqrt(TKn) + sqrt(n)/(T^1.5 sqrt K)(sigma^2 + K sigma_g^2),
    plus (sigma^2 + K sigma_g^2)/(TK) for ``variant='ams'`` (and for the corrected SGD rate, ``variant='sgd_corrected'``)."""
    base = (f0_minus_fstar + sigma**2) / math.sqrt(T * K * n) + math.sqrt(n) / (T**1.5 * math.sqrt(K)) * (sigma**2 + K * sigma_g**2)
    if variant == "sgd":
        return base
    if variant in ("ams", "sgd_corrected"):
        return base + (sigma**2 + K * sigma_g**2) / (T * K)
    raise ValueError("variant must be 'sgd', 'ams' or 'sgd_corrected'")


# ===========================================================================
# FedLADA (Sun et al.)
# ===========================================================================


def _fedlada_constants(*, K, G_theta, alpha, beta1, a):
    if a is None:
        a = 1.0 / (K - 1) if K > 1 else 1.0
    C1 = alpha * (1 + a) * (1 + 1 / a) / (1 + a - beta1)
    C2 = 6 * (1 - alpha) * (1 + 1 / a) * K * G_theta**2
    C3 = 24 * (1 - beta1) * K * G_theta**2 * C1
    C = 0.5 * (1 - beta1 / ((1 - beta1) * K))
    return a, C1, C2, C3, C


def fedlada_thm35_terms(*, L, sigma_l, sigma_g, sigma_u, G_g, G_theta, eps_v, d, S, K, T, eta, eta_l, alpha, beta1,
                        f0_minus_fstar, a: float | None = None, include_d_in_Gc: bool = True) -> dict[str, float]:
    """Terms of Theorem 3.5 (eq. 7): (F(z^0)-f*)/(eta eta_l C G_theta T) + Psi.

    ``eta`` is the proof's eta = K * eta_g.  ``a`` is the proof's free constant (default 1/(K-1), the largest
    allowed).  G_c includes the factor d derived in the proof (the statement drops it) unless ``include_d_in_Gc=False``."""
    _check_positive(L=L, S=S, K=K, T=T, eta=eta, eta_l=eta_l, alpha=alpha, eps_v=eps_v, G_theta=G_theta)
    a, _, C2, C3, C = _fedlada_constants(K=K, G_theta=G_theta, alpha=alpha, beta1=beta1, a=a)
    if C <= 0:
        raise ValueError("C = (1 - beta1/((1-beta1)K))/2 must be positive (beta1 < K/(K+1))")
    dd = d if include_d_in_Gc else 1.0
    Gc = 2 * dd * G_g**4 / eps_v**4 + 2 * beta1**2 * G_theta**2 * sigma_l**2 / (S * K) + 4 * G_theta**2 * (sigma_g**2 + sigma_u**2)
    sigma2 = sigma_l**2 + sigma_g**2 + sigma_u**2
    return {
        "init": f0_minus_fstar / (eta * eta_l * C * G_theta * T),
        "sigma_l": eta * eta_l * 2 * beta1**2 * G_theta * L * sigma_l**2 / (C * S * K),
        "v_drift_global": eta * eta_l * d * G_g**4 * L / (eps_v**4 * C * G_theta * T),
        "v_drift_local": d * G_g**4 / (2 * eps_v**3 * C * G_theta * T),
        "local_Gc": eta_l**2 * L**2 * C2 * Gc / C,
        "local_sigma": eta_l**2 * L**2 * C3 * sigma2 / C,
        "amended": eta**2 * eta_l**2 * (1 - alpha) ** 2 * L**2 * Gc / (alpha**2 * C),
    }


def fedlada_thm35_bound(*, L, sigma_l, sigma_g, sigma_u, G_g, G_theta, eps_v, d, S, K, T, eta, eta_l, alpha, beta1,
                        f0_minus_fstar, a: float | None = None, include_d_in_Gc: bool = True,
                        assembly_fix: bool = False) -> float:
    """Theorem 3.5: bound on (1/T) sum_t E||grad F(z^t)||^2, z^t = x^t/alpha - (1-alpha)/alpha x^(t-1).

    ``assembly_fix=True`` doubles the two G_c terms (factor lost between lines 836 and 840, check
    fedlada:final_assembly_mu1)."""
    terms = fedlada_thm35_terms(L=L, sigma_l=sigma_l, sigma_g=sigma_g, sigma_u=sigma_u, G_g=G_g, G_theta=G_theta, eps_v=eps_v,
                                d=d, S=S, K=K, T=T, eta=eta, eta_l=eta_l, alpha=alpha, beta1=beta1,
                                f0_minus_fstar=f0_minus_fstar, a=a, include_d_in_Gc=include_d_in_Gc)
    if assembly_fix:
        terms["local_Gc"] *= 2
        terms["amended"] *= 2
    return sum(terms.values())


def fedlada_thm35_conditions(*, L, S, m, K, eta, eta_l, alpha, beta1, G_theta, a: float | None = None) -> list[str]:
    """Violated conditions of Theorem 3.5 (mu = 1) and of its proof (beta1 < K/(K+1), a <= 1/(K-1), and the
    proof's eta_l <= 1/(2 sqrt(2 alpha(1-beta1)(1+1/a)) G L), which is stronger than the statement's when a < 1/(K-1))."""
    out = []
    if eta * eta_l > 1 / (4 * L):
        out.append("eta*eta_l <= 1/(4L)")
    if m > S and eta * eta_l > beta1 * S * (m - 1) * 2 / (32 * (m - S) * L * G_theta):
        out.append("eta*eta_l <= beta1 S (m-1)(1+mu)/(32 (m-S) L G_theta)")
    if eta_l > 1 / (2 * math.sqrt(2 * alpha * (1 - beta1) * K) * G_theta * L):
        out.append("eta_l <= 1/(2 sqrt(2 alpha (1-beta1) K) G_theta L)")
    if beta1 >= K / (K + 1):
        out.append("beta1 < K/(K+1) (C > 0)")
    if a is not None:
        if K > 1 and a > 1 / (K - 1):
            out.append("a <= 1/(K-1) (proof)")
        if eta_l > 1 / (2 * math.sqrt(2 * alpha * (1 - beta1) * (1 + 1 / a)) * G_theta * L):
            out.append("eta_l <= 1/(2 sqrt(2 alpha (1-beta1)(1+1/a)) G_theta L) (proof)")
    return out


def fedlada_cor36_learning_rates(*, S, K, T, c1: float = 1.0, c2: float = 1.0) -> tuple[float, float]:
    """Corollary 3.6: eta*eta_l = c1 sqrt(SK/T), eta_l = c2/sqrt(KT); returns (eta, eta_l) with eta = K eta_g."""
    eta_l = c2 / math.sqrt(K * T)
    return c1 * math.sqrt(S * K / T) / eta_l, eta_l


def fedlada_cor36_rate(*, S, K, T, uniform: bool = False) -> float:
    """Corollary 3.6's rate 1/sqrt(SKT) + 1/(KT) + 1/T + 1/T^1.5 (unit constants); with ``uniform=True`` the orders the
    bound really has in S and K: 1/sqrt(SKT) + K/T + SK/T + sqrt(SK)/T^1.5 (check fedlada:cor36_rate_uniform_in_S_K)."""
    if uniform:
        return 1 / math.sqrt(S * K * T) + K / T + S * K / T + math.sqrt(S * K) / T**1.5
    return 1 / math.sqrt(S * K * T) + 1 / (K * T) + 1 / T + 1 / T**1.5


# ===========================================================================
# FedAda2 (Lee et al.)
# ===========================================================================


def fedada2_c_beta(beta: float) -> float:
    """c(beta) of Theorem 20: sum_(u<=u0) beta^u u^2 + 1/u0 with u0 = inf{u: beta^v v^2 < 1/v^2 for v >= u}."""
    if not 0 <= beta < 1:
        raise ValueError("beta must lie in [0, 1)")
    if beta == 0:
        return 1.0
    v = max(1, int(-4 / math.log(beta)))
    while beta**v * v**4 >= 1:
        v += 1
    return sum(beta**u * u * u for u in range(v + 1)) + 1.0 / v


def fedada2_phi1(*, G, K, eta_l, epsilon, v0: float = 0.0, z: int = 1) -> float:
    """Lemma 15 (proof's version, eta_l not eta_l^2 on the second term): per-coordinate bound on |Delta_i|."""
    nu = -(-K // z)
    first = math.sqrt(nu) * math.sqrt(math.log1p(nu * G * G / epsilon**2))
    second = (K - nu) * G / (math.sqrt(v0) + epsilon)
    return eta_l * (first + second)


def fedada2_phi2(*, eta, phi1, tau, T, beta1_server: float = 0.0) -> float:
    """Lemma 16: server step bound min{eta sqrt((1-b)(1-b^(2T))), (eta/tau) Phi_1}."""
    b = beta1_server
    return min(eta * math.sqrt((1 - b) * (1 - b ** (2 * T))), eta / tau * phi1)


def fedada2_thm20_terms(*, L, G, d, K, T, eta, eta_l, tau, epsilon, eps_s, f0_minus_fstar, v0: float = 0.0,
                        v_tilde0: float | None = None, beta1_server: float = 0.0, z: int = 1,
                        squared_lipschitz: bool = False) -> dict[str, float]:
    """Psi_1..Psi_6 of Theorem 20 (Algorithm 2: server AdaGrad with momentum + client AdaGrad/SM3, full-batch gradients).

    ||Phi||: the coordinate-wise bounds broadcast to d coordinates (norm sqrt(d) Phi).  L~ = 2 sqrt(d) G/(eta_l eps_s).
    ``squared_lipschitz=True`` uses L^2 and L~^2 in Psi_3/Psi_4 (check fedada2:thm20_drift_squared_lipschitz)."""
    _check_positive(L=L, G=G, d=d, K=K, T=T, eta=eta, eta_l=eta_l, tau=tau, epsilon=epsilon, eps_s=eps_s)
    b = beta1_server
    vt0 = tau * tau if v_tilde0 is None else v_tilde0
    phi1 = fedada2_phi1(G=G, K=K, eta_l=eta_l, epsilon=epsilon, v0=v0, z=z)
    phi2 = fedada2_phi2(eta=eta, phi1=phi1, tau=tau, T=T, beta1_server=b)
    n1, n2 = math.sqrt(d) * phi1, math.sqrt(d) * phi2
    lt = 2 * math.sqrt(d) * G / (eta_l * eps_s)
    Lx, ltx = (L * L, lt * lt) if squared_lipschitz else (L, lt)
    gamma1 = eta_l * K / (math.sqrt(v0 + d * K * G * G) + epsilon)
    alpha1 = 1 / (2 * math.sqrt(v0 + d * K * G * G) + 2 * epsilon)
    den = alpha1 * tau * (math.sqrt(v0) + epsilon) ** 2
    return {
        "Psi1": f0_minus_fstar,
        "Psi2": eta**2 * L * T * d * n1**2 / tau**2,
        "Psi3": (1 - b**T) * eta * eta_l * K * ltx * T * n1**2 / den,
        "Psi4": (1 - b) * eta * eta_l * K * Lx * T * fedada2_c_beta(b) * n2**2 / den,
        "Psi5": eta * d * n1 * G * (1 - b + math.log1p(T * n1**2 / tau**2)) / tau,
        "Psi6": 3 * (1 - b) * eta * gamma1 * T / (4 * (math.sqrt(T * n1**2 + vt0) + tau)),
    }


def fedada2_thm20_bound(**kw) -> float:
    """Theorem 20 / Theorem 6: bound on min_(t<=T) ||grad f(x_(t-1))||^2, (Psi_1 + ... + Psi_5)/Psi_6.

    Keyword arguments as :func:`fedada2_thm20_terms`.  The bound is deterministic and assumes full-batch client
    gradients; it does not hold for heterogeneous clients under arbitrary sampling (check
    fedada2:any_sampling_deterministic_guarantee)."""
    p = fedada2_thm20_terms(**kw)
    return (p["Psi1"] + p["Psi2"] + p["Psi3"] + p["Psi4"] + p["Psi5"]) / p["Psi6"]


def fedada2_thm20_conditions(*, G, eta_l, epsilon, beta1_server: float = 0.0, tau: float = 1.0) -> list[str]:
    """Conditions of Theorem 20 that can be checked from constants (the paper states no learning-rate condition)."""
    out = []
    if not 0 <= beta1_server < 1:
        out.append("0 <= beta1_server < 1")
    if tau <= 0 or epsilon <= 0:
        out.append("tau > 0 and epsilon > 0")
    if eta_l <= 0:
        out.append("eta_l > 0")
    if G <= 0:
        out.append("G > 0")
    return out


def fedada2_rate_exponent(p1: float, p2: float) -> float:
    """Leading exponent of T in Theorem 6's bound with eta = T^p1, eta_l = T^p2 (log factors ignored), following
    Corollary 23's case analysis; negative means the bound vanishes.  Requires p2 <= 0 (eta_l <= O(1))."""
    if p2 > 0:
        return math.inf  # Psi_3/Psi_6 diverges for eta_l > Omega(1)
    if 1 + 2 * p2 <= 0:  # T eta_l^2 <= O(1): psi_6 = eta eta_l T
        exps = [-(p1 + p2 + 1), p1 + p2, p2, 2 * p1 + 2 * p2, -1.0]
    else:  # psi_6 = eta sqrt(T)
        exps = [-p1 - 0.5, p1 + 2 * p2 + 0.5, 2 * p2 + 0.5, 2 * p1 + 3 * p2 + 0.5, p2 - 0.5]
    return max(exps)


# ===========================================================================
# Fed-LAMB (Karimi et al.)
# ===========================================================================


def fed_lamb_thm5_terms(*, L, M, sigma, n, h, p, T, R, alpha, phi_M, beta2, epsilon, f0_minus_fstar,
                        beta1: float = 0.9, L_bar: float | None = None, form: str = "statement") -> dict[str, float]:
    """Terms of SUPP Theorem 5 (lambda = 0, constant alpha).  ``form='statement'`` is the theorem as stated;
    ``form='proof'`` is the final display of its proof (alpha instead of alpha^2 in two terms, extra beta1 and
    consensus terms; L_bar = sum of layer smoothness constants, default L)."""
    _check_positive(M=M, n=n, h=h, p=p, T=T, R=R, alpha=alpha, phi_M=phi_M, epsilon=epsilon)
    se = math.sqrt(epsilon)
    Lb = L if L_bar is None else L_bar
    common = {
        "T1_init": math.sqrt(M * M * p / n) * f0_minus_fstar / (h * alpha * R),
        "T4_noise": phi_M * sigma**2 / (R * n) * math.sqrt((1 - beta2) / (M * M * p)),
        "T5_layer_noise": 4 * alpha * phi_M * h * sigma**2 / math.sqrt(n),
    }
    if form == "statement":
        return {
            **common,
            "T2_local": 4 * alpha**2 * L * M * M * T * T * phi_M**2 * (1 - beta2) * p / se,
            "T3_grad": 4 * alpha**2 * M * M / se,
            "T6_bounded": 4 * alpha**2 * phi_M**2 * math.sqrt(M * M + p * sigma**2),
        }
    if form == "proof":
        return {
            **common,
            "T2_local": 4 * alpha**2 * Lb / se * M * M * T * T * phi_M**2 * (1 - beta2) * p,
            "T3_grad": 4 * M * M * alpha / se,
            "T6_bounded": 4 * phi_M**2 * alpha * math.sqrt(M * M + p * sigma**2),
            "T2b_local_noise": 4 * sigma**2 * alpha**2 * Lb / se * M * M * T * T * (1 - beta2) * p,
            "beta1_cross": alpha * beta1 / (1 - beta1) * math.sqrt((1 - beta2) * p) * h * M * M / se,
            "consensus": Lb * alpha**2 * M * M * phi_M**2 * (1 - beta2) * p / (T * epsilon),
            "beta1_shift": 2 * alpha**3 * Lb * p * phi_M**2 / se * beta1**2 / (1 - beta1) ** 2,
        }
    raise ValueError("form must be 'statement' or 'proof'")


def fed_lamb_thm5_bound(**kw) -> float:
    """SUPP Theorem 5: bound on (1/R) sum_r E||grad f(theta_bar_r)/v_hat_r^(1/4)||^2 (preconditioned gradient).

    Keyword arguments as :func:`fed_lamb_thm5_terms`.  Multiply by :func:`fed_lamb_to_unpreconditioned` to bound
    the plain E||grad f||^2."""
    return sum(fed_lamb_thm5_terms(**kw).values())


def fed_lamb_thm5_conditions(*, M, alpha, lam: float = 0.0, phi_m: float | None = None, phi_M: float | None = None,
                             form: str = "statement") -> list[str]:
    """Conditions of Theorem 5: lambda = 0, alpha > 0, 0 < phi_m <= phi_M (Assumption 4); the proof form also assumes M <= 1."""
    out = []
    if lam != 0:
        out.append("lambda = 0")
    if alpha <= 0:
        out.append("alpha > 0")
    if phi_m is not None and phi_M is not None and not 0 < phi_m <= phi_M:
        out.append("0 < phi_m <= phi_M (Assumption 4)")
    if form == "proof" and M > 1:
        out.append("M <= 1 (assumed in the proof's last step)")
    return out


def fed_lamb_to_unpreconditioned(*, M, epsilon) -> float:
    """Factor c with E||grad f||^2 <= c E||grad f/v_hat^(1/4)||^2: v_hat <= max(eps, M^2) coordinate-wise (no bias correction)."""
    return math.sqrt(max(epsilon, M * M))


# ===========================================================================
# registry and convenience
# ===========================================================================

#: name -> (bound function, conditions function)
EVALUATORS: dict[str, tuple[Callable[..., float], Callable[..., list]]] = {
    "fed_ef_thm41": (fed_ef_thm41_bound, fed_ef_thm41_conditions),
    "fed_ef_thm42": (fed_ef_thm42_bound, fed_ef_thm42_conditions),
    "fed_ef_thm43": (fed_ef_thm43_bound, fed_ef_thm43_conditions),
    "fed_ef_thm44": (fed_ef_thm44_bound, fed_ef_thm44_conditions),
    "fedlada_thm35": (fedlada_thm35_bound, fedlada_thm35_conditions),
    "fedada2_thm20": (fedada2_thm20_bound, fedada2_thm20_conditions),
    "fed_lamb_thm5": (fed_lamb_thm5_bound, fed_lamb_thm5_conditions),
}


def _accepted(fn: Callable) -> tuple[set[str], set[str]]:
    target = {"fedada2_thm20_bound": fedada2_thm20_terms, "fed_lamb_thm5_bound": fed_lamb_thm5_terms}.get(fn.__name__, fn)
    params = inspect.signature(target).parameters.values()
    names = {p.name for p in params if p.kind == p.KEYWORD_ONLY}
    required = {p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty}
    return names, required


def _call(fn: Callable, consts: dict):
    names, required = _accepted(fn)
    missing = required - consts.keys()
    if missing:
        raise TypeError(f"{fn.__name__} needs {sorted(missing)}")
    return fn(**{k: v for k, v in consts.items() if k in names})


def evaluate(name: str, **constants) -> tuple[float, list[str]]:
    """Evaluate bound ``name`` (a key of EVALUATORS) with the constants it accepts; returns (bound, violated conditions)."""
    bound_fn, cond_fn = EVALUATORS[name]
    return _call(bound_fn, constants), _call(cond_fn, constants)

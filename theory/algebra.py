"""Shared helpers for the per-paper checks.

Everything that more than one paper needs lives here: positive symbols,
identity proofs, sign proofs on a domain, geometric sums, "does the stated
learning rate satisfy the stated condition", "substitute the learning rates
and compare the order with the stated rate", and seeded numeric searches.
Helpers return plain Python values; the checks turn them into Results.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from typing import Callable, Iterable, Mapping, Sequence

import sympy as sp

from .core import Result, refuted, verified

# ---------------------------------------------------------------------------
# symbols and printing
# ---------------------------------------------------------------------------


def pos(names: str) -> tuple[sp.Symbol, ...]:
    """Positive real symbols, e.g. ``L, K = pos("L K")``."""
    out = sp.symbols(names, positive=True)
    return out if isinstance(out, tuple) else (out,)


def unit(s: sp.Expr) -> sp.Expr:
    """Map a positive symbol ``s`` onto the open unit interval: s/(1+s)."""
    return s / (1 + s)


def show(expr) -> str:
    """Compact one-line rendering of a sympy expression (``^`` for powers)."""
    if isinstance(expr, (int, Fraction)):
        return str(expr)
    if isinstance(expr, float):
        return fmt(expr)
    return sp.sstr(expr).replace("**", "^")


def fmt(x: float, digits: int = 4) -> str:
    """Deterministic short rendering of a float (4 significant digits)."""
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


# ---------------------------------------------------------------------------
# identities and signs
# ---------------------------------------------------------------------------


def simplify_zero(expr: sp.Expr) -> sp.Expr:
    """Cheap-first simplification of a difference; returns the simplified expression."""
    e = sp.cancel(sp.together(sp.expand(expr)))
    if e == 0:
        return e
    e2 = sp.simplify(e)
    return e2


def is_identity(lhs, rhs) -> bool:
    return simplify_zero(sp.sympify(lhs) - sp.sympify(rhs)) == 0


def identities(items: Sequence[tuple[str, sp.Expr, sp.Expr]], what: str = "") -> Result:
    """Verify a list of (label, lhs, rhs) identities; refute with the first residual."""
    for label, lhs, rhs in items:
        diff = simplify_zero(sp.sympify(lhs) - sp.sympify(rhs))
        if diff != 0:
            return refuted(f"{label}: lhs - rhs simplifies to {show(diff)}, not 0")
    labels = "; ".join(label for label, _, _ in items)
    return verified(f"{what}{' ' if what else ''}each difference lhs - rhs simplifies to 0: {labels}")


def poly_nonneg(expr: sp.Expr, gens: Iterable[sp.Symbol]) -> bool:
    """True if ``expr`` is a polynomial in the positive ``gens`` with no negative coefficient."""
    p = sp.Poly(sp.expand(expr), *gens)
    return all(c >= 0 for c in p.coeffs())


def rational_nonneg(expr: sp.Expr, gens: Sequence[sp.Symbol]) -> bool:
    """Sufficient test that a rational function of positive ``gens`` is >= 0.

    Numerator and denominator are expanded; both must have only coefficients
    of one sign.  (Certificate by positivity of coefficients.)
    """
    num, den = sp.fraction(sp.cancel(sp.together(expr)))
    try:
        pn = sp.Poly(sp.expand(num), *gens)
        pd = sp.Poly(sp.expand(den), *gens)
    except sp.PolynomialError:
        return False
    sn = {sp.sign(c) for c in pn.coeffs()} - {0}
    sd = {sp.sign(c) for c in pd.coeffs()} - {0}
    if not sn:
        return True
    return len(sn) == 1 and len(sd) == 1 and sn == sd


# ---------------------------------------------------------------------------
# sums
# ---------------------------------------------------------------------------


def geometric_series(r: sp.Expr) -> sp.Expr:
    """sum_{k>=0} r^k for |r| < 1."""
    return 1 / (1 - r)


def geometric_partial(r: sp.Expr, n) -> sp.Expr:
    """sum_{k=0}^{n-1} r^k."""
    return (1 - r**n) / (1 - r)


def finite_sum(f: Callable[[int], sp.Expr], lo: int, hi: int) -> sp.Expr:
    """Explicit sum f(lo) + ... + f(hi) (used for exact checks at fixed sizes)."""
    return sp.Add(*[f(k) for k in range(lo, hi + 1)])


def subset_mean(n: int, m: int, fn: Callable[[tuple], object]):
    """Exact mean of fn(subset) over all m-subsets of range(n) (uniform sampling without replacement).

    Works with sympy expressions and with Fractions (returns the same kind)."""
    subsets = list(itertools.combinations(range(n), m))
    total = sum((fn(s) for s in subsets), start=0 * fn(subsets[0]))
    return total / len(subsets) if not isinstance(total, Fraction) else total / Fraction(len(subsets))


# ---------------------------------------------------------------------------
# learning-rate conditions and rates
# ---------------------------------------------------------------------------


def lr_threshold(bound: sp.Expr, lr_choice: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """Smallest ``var`` for which ``lr_choice <= bound``.

    ``lr_choice`` must be a monomial a * var^e with e < 0 and ``bound`` free of
    ``var`` (the usual eta_l = c/(K sqrt T) choices); then the condition is
    var >= (a/bound)^(-1/e).
    """
    e = t_exponent(lr_choice, var)
    if not (e.is_number and e < 0) or var in sp.sympify(bound).free_symbols:
        raise ValueError("lr_threshold needs lr = a*var^e with e < 0 and a var-free bound")
    a = sp.powsimp(sp.expand_power_base(lr_choice / var**e, force=True), force=True)
    return sp.powsimp(sp.expand_power_base((a / bound) ** (-1 / e), force=True), force=True)


def t_exponent(mono: sp.Expr, T: sp.Symbol) -> sp.Expr:
    """Exponent of ``T`` in a monomial (product of powers)."""
    mono = sp.powsimp(sp.expand_power_base(mono, force=True), force=True)
    _, e = mono.as_coeff_exponent(T)
    return e


def monomials(expr: sp.Expr) -> list[sp.Expr]:
    """Positive monomials of the expanded expression (negative ones only help an upper bound)."""
    out = []
    for term in sp.Add.make_args(sp.expand(expr)):
        coeff, _ = term.as_coeff_Mul()
        if coeff > 0:
            out.append(term)
    return out


def _scale_exponents(mono: sp.Expr, scale: Sequence[sp.Symbol]) -> tuple:
    """Exponents of the scale variables in a monomial of positive symbols."""
    m = sp.expand_power_base(sp.powsimp(mono, force=True), force=True)
    d = m.as_powers_dict()
    return tuple(sp.nsimplify(d.get(v, 0)) for v in scale)


def _same_order(a: sp.Expr, b: sp.Expr, scale: Sequence[sp.Symbol], bounded: Sequence[tuple] = ()) -> bool:
    """a/b is free of the scale variables, possibly after removing non-negative powers of ratios known to be <= 1.

    ``bounded`` holds pairs (small, large) of scale symbols with small <= large on the domain (e.g. (m, n)).
    """
    return _exps_match(_scale_exponents(a, scale), _scale_exponents(b, scale), list(scale), bounded)


def _exps_match(ea: tuple, eb: tuple, scale: list, bounded: Sequence[tuple]) -> bool:
    diff = [x - y for x, y in zip(ea, eb)]
    for small, large in bounded:
        i, j = scale.index(small), scale.index(large)
        k = diff[i]
        if k > 0 and diff[j] == -k:
            diff[i] = diff[j] = 0
    return all(x == 0 for x in diff)


def compare_rate(
    terms: Mapping[str, sp.Expr],
    subs: Mapping[sp.Symbol, sp.Expr],
    stated: sp.Expr,
    scale: Sequence[sp.Symbol],
    T: sp.Symbol,
    bounded: Sequence[tuple] = (),
) -> tuple[bool, list[str]]:
    """Substitute learning rates into a bound and compare with a stated O(.) rate.

    Every positive monomial of every substituted term must either have the same
    order as a monomial of ``stated`` in all ``scale`` variables (the problem
    constants L, sigma, ... are absorbed into the O), or be dominated by one
    of them as T -> infinity with the other scale variables fixed.
    ``bounded`` lists (small, large) pairs with small <= large (e.g. m <= n):
    a monomial smaller than a stated one by a power of small/large counts as covered.
    Returns (ok, notes) where notes describe each term.
    """
    scale = list(scale)
    it = scale.index(T)
    stated_exps = [_scale_exponents(s, scale) for s in monomials(stated)]
    ok = True
    notes: list[str] = []
    for name, term in terms.items():
        e = sp.expand(sp.sympify(term).subs(subs))
        parts = []
        for mono in monomials(e):
            ex = _scale_exponents(mono, scale)
            if any(_exps_match(ex, s, scale, ()) for s in stated_exps):
                parts.append("exact")
            elif bounded and any(_exps_match(ex, s, scale, bounded) for s in stated_exps):
                parts.append("smaller by " + "/".join(f"({a}/{b})^k" for a, b in bounded))
            elif any(ex[it] < s[it] for s in stated_exps):
                parts.append(f"dominated (T^{show(ex[it])})")
            else:
                ok = False
                parts.append(f"NOT covered: {show(mono)}")
        notes.append(f"{name}: {', '.join(sorted(set(parts))) or 'vanishes'}")
    return ok, notes


def order_match(items: Sequence[tuple[str, sp.Expr, sp.Expr]], subs: Mapping, scale: Sequence[sp.Symbol]) -> Result:
    """Check that each substituted coefficient has exactly the stated order (ratio free of scale variables)."""
    for label, coeff, expected in items:
        got = sp.powsimp(sp.expand_power_base(sp.sympify(coeff).subs(subs), force=True), force=True)
        if not _same_order(got, expected, scale):
            return refuted(f"{label}: substitution gives {show(got)}, not of order {show(expected)}")
    return verified("after substituting the learning rates each coefficient equals the stated order up to a constant: "
                    + "; ".join(f"{lab} ~ {show(exp)}" for lab, _, exp in items))


# ---------------------------------------------------------------------------
# numeric search
# ---------------------------------------------------------------------------


def rng(seed: int = 0) -> random.Random:
    return random.Random(seed)


def search(
    predicate: Callable[[dict], bool],
    sampler: Callable[[random.Random], dict],
    n: int = 2000,
    seed: int = 0,
) -> dict | None:
    """Seeded random search; returns the first sample where ``predicate`` is False."""
    r = rng(seed)
    for _ in range(n):
        x = sampler(r)
        if not predicate(x):
            return x
    return None


def describe(values: Mapping) -> str:
    """'a=1/2, b=3' rendering of a counterexample."""
    def one(v):
        if isinstance(v, float):
            return fmt(v)
        return show(v)
    return ", ".join(f"{k}={one(v)}" for k, v in values.items())

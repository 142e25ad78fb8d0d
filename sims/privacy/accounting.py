"""Privacy accounting for user-level DP-FedAvg-style training, through ``dp-accounting``.

One round of :class:`sims.privacy.Private` is the sampled Gaussian mechanism on the users'
clipped updates: every user takes part with probability ``q`` (Poisson sampling), the sum of
the clipped updates (sensitivity ``c``) gets Gaussian noise of standard deviation
``sigma * c``. ``T`` rounds compose. The accountant is Google's ``dp_accounting`` RDP
accountant (``RdpAccountant``, neighbouring relation add-or-remove-one user, its default
orders ``DEFAULT_RDP_ORDERS``), and its RDP -> (epsilon, delta) conversion is the library's:
the improved conversion of Canonne, Kamath & Steinke (2020, Prop. 12) / Asoodeh et al.,

    epsilon = rdp(alpha) + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1),

minimised over the orders alpha. This is what gives FedAda2's (epsilon, delta) = (13.1, 1/400)
at q = 0.1, sigma = 1, T = 500 with optimal order 2.0 (FedAda2 Sec. 6.1 and App. H.1; spec
fedada2 3.14 #16: 500 log(1 + 0.01 (e - 1)) + log(1/2) - (log delta + log 2) = 13.124; the
classic conversion ``rdp + log(1/delta)/(alpha - 1)`` would give 14.51 at order 2).

Accountants (``accountant=``): ``"rdp"`` (the default; the FedAda2 paper's) or ``"pld"``
(``dp_accounting``'s privacy-loss-distribution accountant, pessimistic estimate with value
discretization :data:`PLD_DISCRETIZATION`; tighter: 11.50 at the FedAda2 point where RDP gives
13.12). PRV (Opacus' default) is not offered: no maintained PRV library is a dependency here.
:func:`noise_for_epsilon` calibrates the noise multiplier to a target ``(epsilon, delta)``
(``dp_accounting.calibrate_dp_mechanism``: the smallest sigma, within its tolerance, whose
epsilon is at most the target).

Caveat: the engine samples a fixed number ``m`` of clients without replacement (FedAda2's
code too), while the accountants assume Poisson sampling with ``q = m / N`` (the paper's
epsilon is computed that way, and so is ours). :func:`epsilon_fixed_size` gives epsilon for
what the engine does (sampling ``m`` of ``N`` without replacement, RDP of Wang, Balle &
Kasiviswanathan 2019, which ``dp_accounting`` supports only for the replace-one neighbouring
relation), and :func:`sampling_note` prints both.
"""
from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from functools import lru_cache

import numpy as np


class AccountingError(ValueError):
    """Bad accounting parameters (one line)."""


#: The accountants offered (``dp_accounting``'s RDP and PLD).
ACCOUNTANTS = ("rdp", "pld")
#: PLD's value discretization interval: 1e-3 keeps a 500-round curve to seconds, and moves
#: epsilon at the FedAda2 point by under 1e-5 relative to the library's default 1e-4.
PLD_DISCRETIZATION = 1e-3


def check_accountant(accountant: str) -> str:
    name = str(accountant).strip().lower()
    if name not in ACCOUNTANTS:
        raise AccountingError(f"unknown accountant {accountant!r}; use one of "
                              f"{', '.join(ACCOUNTANTS)} (PRV is not available here)")
    return name


def _check(q: float, sigma: float, delta: float) -> None:
    if not 0 < q <= 1:
        raise AccountingError(f"sampling rate q must be in (0, 1], got {q}")
    if not sigma >= 0:
        raise AccountingError(f"noise multiplier must be >= 0, got {sigma}")
    if not 0 < delta < 1:
        raise AccountingError(f"delta must be in (0, 1), got {delta}")


@contextmanager
def _quiet_absl():
    """dp_accounting logs one absl warning per fractional order below 1.5 whose series does
    not converge (it then excludes that order, as documented); keep runs' output clean."""
    log = logging.getLogger("absl")
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


def _event(q: float, sigma: float):
    import dp_accounting as dpa
    return dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma))


def _without_accounting(sigma: float, rounds: int) -> tuple[float, float] | None:
    """``(epsilon, order)`` where no accountant is needed (no noise: inf; no round: 0), else
    None; negative ``rounds`` is an :class:`AccountingError`."""
    if rounds < 0:
        raise AccountingError(f"rounds must be >= 0, got {rounds}")
    if sigma == 0:
        return math.inf, math.nan
    if rounds == 0:
        return 0.0, math.nan
    return None


def dp_epsilon(q: float, sigma: float, rounds: int, delta: float,
               orders=None, accountant: str = "rdp") -> tuple[float, float]:
    """``(epsilon, optimal order)`` after ``rounds`` rounds of the Poisson-sampled Gaussian
    mechanism (rate ``q``, noise multiplier ``sigma``), by ``dp_accounting``'s RDP accountant
    (``accountant="pld"``: its PLD accountant; the order is then nan).
    ``sigma = 0`` (no noise) gives ``(inf, nan)``; ``rounds = 0`` gives ``(0, nan)``."""
    _check(q, sigma, delta)
    accountant = check_accountant(accountant)
    trivial = _without_accounting(sigma, rounds)
    if trivial is not None:
        return trivial
    import dp_accounting as dpa
    if accountant == "pld":
        return float(_pld_epsilon(q, sigma, int(rounds), delta)), math.nan
    from dp_accounting import rdp
    acc = rdp.RdpAccountant(orders) if orders is not None else rdp.RdpAccountant()
    with _quiet_absl():
        acc.compose(dpa.SelfComposedDpEvent(_event(q, sigma), int(rounds)))
        eps, order = acc.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


def dp_epsilon_fixed_m(n: int, m: int, sigma: float, rounds: int, delta: float,
                       orders=None) -> tuple[float, float]:
    """``(epsilon, optimal order)`` after ``rounds`` rounds in which ``m`` of ``n`` users are
    drawn without replacement (the engine's fixed-``m`` participation, and FedAda2's code), by
    ``dp_accounting``'s RDP accountant (``SampledWithoutReplacementDpEvent``, Wang, Balle &
    Kasiviswanathan 2019). That event is accounted under the replace-one-user relation (the
    only one the library supports for it), so its epsilon is larger than and not directly
    comparable to :func:`dp_epsilon`'s add-or-remove, Poisson one (FedAda2's setting,
    m = 40 of 400, sigma = 1, 500 rounds, delta = 1/400: 31.1 vs 13.1)."""
    if not (isinstance(n, (int, np.integer)) and isinstance(m, (int, np.integer))
            and 1 <= m <= n):
        raise AccountingError(f"need integers 1 <= m <= n, got m = {m}, n = {n}")
    _check(m / n, sigma, delta)
    trivial = _without_accounting(sigma, rounds)
    if trivial is not None:
        return trivial
    import dp_accounting as dpa
    from dp_accounting import rdp
    relation = dpa.NeighboringRelation.REPLACE_ONE
    acc = (rdp.RdpAccountant(orders, neighboring_relation=relation) if orders is not None
           else rdp.RdpAccountant(neighboring_relation=relation))
    event = dpa.SampledWithoutReplacementDpEvent(int(n), int(m), dpa.GaussianDpEvent(sigma))
    with _quiet_absl():
        acc.compose(dpa.SelfComposedDpEvent(event, int(rounds)))
        eps, order = acc.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


def _pld_accountant():
    from dp_accounting import pld
    return pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)


def _pld_epsilon(q: float, sigma: float, rounds: int, delta: float) -> float:
    acc = _pld_accountant()
    acc.compose(_event(q, sigma), rounds)
    return acc.get_epsilon(delta)


def epsilon_fixed_size(n: int, m: int, sigma: float, rounds: int, delta: float) -> float:
    """epsilon alone of :func:`dp_epsilon_fixed_m` (``m`` of ``n`` users drawn without
    replacement each round, RDP, replace-one relation): the run-time note's second number."""
    return dp_epsilon_fixed_m(n, m, sigma, rounds, delta)[0]


@lru_cache(maxsize=64)
def noise_for_epsilon(q: float, rounds: int, epsilon: float, delta: float,
                      accountant: str = "rdp") -> float:
    """The noise multiplier whose ``rounds`` Poisson-sampled rounds at rate ``q`` spend at
    most ``epsilon`` (at ``delta``), by ``dp_accounting.calibrate_dp_mechanism`` (the smallest
    such sigma within its default tolerance) with the chosen accountant."""
    accountant = check_accountant(accountant)
    _check(q, 1.0, delta)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise AccountingError(f"target epsilon must be a finite number > 0, got {epsilon}")
    if rounds < 1:
        raise AccountingError(f"rounds must be >= 1 to calibrate noise, got {rounds}")
    import dp_accounting as dpa
    from dp_accounting import rdp

    def fresh():
        return rdp.RdpAccountant() if accountant == "rdp" else _pld_accountant()

    def event(sigma):
        return dpa.SelfComposedDpEvent(_event(q, sigma), int(rounds))

    try:
        with _quiet_absl():
            return float(dpa.calibrate_dp_mechanism(fresh, event, float(epsilon), float(delta)))
    except (ValueError, RuntimeError) as exc:
        raise AccountingError(f"cannot reach epsilon {epsilon:g} at delta {delta:g} in "
                              f"{rounds} rounds at q={q:g}: {' '.join(str(exc).split())}") \
            from None


def sampling_note(n: int, m: int, sigma: float, rounds: int, delta: float,
                  accountant: str = "rdp") -> str:
    """One line for a run's start: the engine samples a fixed ``m`` of ``n`` per round while
    the accountant assumes Poisson sampling at ``q = m / n``; epsilon under both."""
    q = m / n
    poisson = dp_epsilon(q, sigma, rounds, delta, accountant=accountant)[0]
    fixed = epsilon_fixed_size(n, m, sigma, rounds, delta)
    return (f"DP note: the engine samples a fixed m={m} of N={n} clients per round; the "
            f"{accountant.upper()} accountant assumes Poisson sampling with q=m/N={q:g}. After "
            f"{rounds} rounds at sigma={sigma:.4g}, delta={delta:g}: epsilon {poisson:.4g} "
            f"(Poisson, add/remove-one, recorded), {fixed:.4g} (fixed-size sampling without "
            "replacement, RDP, replace-one)")


class EpsilonCurve:
    """epsilon after each of ``t = 1, 2, ...`` rounds for fixed ``(q, sigma, delta)``.

    RDP composes additively, so the per-round RDP vector is computed once by the library
    (one ``RdpAccountant.compose``) and ``epsilon(t)`` is the library's ``compute_epsilon``
    on ``t`` times it. Reading the per-round vector uses the accountant's ``_rdp`` field
    (dp-accounting 0.6.0, pinned); ``tests/test_privacy.py`` holds ``epsilon(t)`` to a fresh
    accountant's public ``get_epsilon`` for ``t`` composed rounds.

    With ``accountant="pld"`` the PLD of ``t`` rounds is composed from that of ``t - 1`` (one
    convolution a round, cached), so reading ``t = 1, 2, ...`` in order costs one composition
    each; ``epsilon(t)`` equals :func:`dp_epsilon` with ``accountant="pld"`` within the
    discretization.
    """

    def __init__(self, q: float, sigma: float, delta: float, accountant: str = "rdp"):
        _check(q, sigma, delta)
        self.q, self.sigma, self.delta = float(q), float(sigma), float(delta)
        self.accountant = check_accountant(accountant)
        self._rdp = None
        self._pld = None                      # (t, PLD of t rounds), PLD of one round
        self._cache: dict[int, float] = {}

    def __call__(self, t: int) -> float:
        if self.sigma == 0:
            return math.inf
        if t <= 0:
            return 0.0
        if t not in self._cache and self.accountant == "pld":
            self._cache[t] = self._pld_at(int(t))
        if t not in self._cache:
            from dp_accounting import rdp
            if self._rdp is None:
                acc = rdp.RdpAccountant()
                with _quiet_absl():
                    acc.compose(_event(self.q, self.sigma))
                self._orders = np.asarray(acc._orders, dtype=float)
                self._rdp = np.asarray(acc._rdp, dtype=float)
            with _quiet_absl():
                eps, _ = rdp.rdp_privacy_accountant.compute_epsilon(
                    self._orders, t * self._rdp, self.delta)
            self._cache[t] = float(eps)
        return self._cache[t]

    def _pld_at(self, t: int) -> float:
        if self._pld is None:
            acc = _pld_accountant()
            acc.compose(_event(self.q, self.sigma))
            self._pld = (1, acc._pld), acc._pld
        (have, cur), one = self._pld
        if t < have:                                  # out of order: compose afresh
            return _pld_epsilon(self.q, self.sigma, t, self.delta)
        while have < t:
            cur, have = cur.compose(one), have + 1
        self._pld = (have, cur), one
        return float(cur.get_epsilon_for_delta(self.delta))

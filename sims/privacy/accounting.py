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

Caveat written down once: the engine samples a fixed number ``m`` of clients without
replacement (FedAda2's code too), while the accountant assumes Poisson sampling with
``q = m / N``; the paper's epsilon is computed that way, and so is ours.
"""
from __future__ import annotations

import logging
import math
from contextlib import contextmanager

import numpy as np


class AccountingError(ValueError):
    """Bad accounting parameters (one line)."""


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


def dp_epsilon(q: float, sigma: float, rounds: int, delta: float,
               orders=None) -> tuple[float, float]:
    """``(epsilon, optimal order)`` after ``rounds`` rounds of the Poisson-sampled Gaussian
    mechanism (rate ``q``, noise multiplier ``sigma``), by ``dp_accounting``'s RDP accountant.
    ``sigma = 0`` (no noise) gives ``(inf, nan)``; ``rounds = 0`` gives ``(0, nan)``."""
    _check(q, sigma, delta)
    if rounds < 0:
        raise AccountingError(f"rounds must be >= 0, got {rounds}")
    if sigma == 0:
        return math.inf, math.nan
    if rounds == 0:
        return 0.0, math.nan
    import dp_accounting as dpa
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
    if rounds < 0:
        raise AccountingError(f"rounds must be >= 0, got {rounds}")
    if sigma == 0:
        return math.inf, math.nan
    if rounds == 0:
        return 0.0, math.nan
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


class EpsilonCurve:
    """epsilon after each of ``t = 1, 2, ...`` rounds for fixed ``(q, sigma, delta)``.

    RDP composes additively, so the per-round RDP vector is computed once by the library
    (one ``RdpAccountant.compose``) and ``epsilon(t)`` is the library's ``compute_epsilon``
    on ``t`` times it. Reading the per-round vector uses the accountant's ``_rdp`` field
    (dp-accounting 0.6.0, pinned); ``tests/test_privacy.py`` holds ``epsilon(t)`` to a fresh
    accountant's public ``get_epsilon`` for ``t`` composed rounds.
    """

    def __init__(self, q: float, sigma: float, delta: float):
        _check(q, sigma, delta)
        self.q, self.sigma, self.delta = float(q), float(sigma), float(delta)
        self._rdp = None
        self._cache: dict[int, float] = {}

    def __call__(self, t: int) -> float:
        if self.sigma == 0:
            return math.inf
        if t <= 0:
            return 0.0
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

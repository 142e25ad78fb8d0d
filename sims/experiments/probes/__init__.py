"""Assumption probes: measure on a live run the constants the theorems assume.

Every theorem of the four papers rests on constants (L-smoothness, local variance
``sigma^2``, heterogeneity ``sigma_g^2``, gradient bounds ``G`` / ``G_g``, compression
coefficients ``q_C`` and ``q_A``, staleness, a tail index). :class:`Probe` is an engine
observer that estimates them at the server model every ``every`` rounds, on any problem
with the engine's batched gradient protocol (quadratics, image problems) and any algorithm
(compression coefficients where the algorithm compresses)::

    from sims import engine
    from sims.experiments.probes import Probe, bounds_from_probe, setting_params, summary, theory_setting
    from sims.store.results import tidy

    probe = Probe(every=5)
    out = engine.run(problem, algorithm, participation, rounds, seeds,
                     observers=probe.observers())
    df = tidy(out, "run", setting_params(theory_setting(problem, algorithm, participation)))
    bounds = bounds_from_probe(df)          # measured avg ||grad f||^2 and bounds, per round
    print("\\n".join(summary(df)))          # which theorem's premise fails, from which round

A run without the probe executes none of this code (the engine's ``observers`` default is
empty). What each constant means, how it is estimated and its error: ``docs/probes.md``.
"""
from __future__ import annotations

from .bounds import (SETTING_COLUMN, THEOREM_LABELS, Violation, bounds_from_probe,  # noqa: F401
                     measured_constants, premise_violations, setting_from_df, setting_params,
                     summary, theorems_for, theory_setting, violations_records)
from .estimators import (ProbeError, client_full_grads, hill_k, hill_stderr,  # noqa: F401
                         hvp_operator, lanczos_extremes)
from .observer import Probe, StalenessTracker  # noqa: F401


def run_with_probe(problem, algorithm, participation, rounds: int, seeds, probe: Probe,
                   name: str = "run", params: dict | None = None, **engine_kw):
    """``engine.run`` with the probe attached; returns ``(RunOutput, tidy table)`` where the
    table carries the run's theory setting (for :func:`bounds_from_probe`)."""
    from ...core import engine
    from ...store.results import tidy
    out = engine.run(problem, algorithm, participation, rounds, seeds,
                     observers=probe.observers(), **engine_kw)
    setting = theory_setting(problem, algorithm, participation)
    return out, tidy(out, name, {**(params or {}), **setting_params(setting)})

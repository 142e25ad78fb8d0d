"""Problems registered by name (plug-ins, :func:`sims.plugins.register` with kind
``"problem"``): ``--problem NAME`` in the commands builds them.

A problem factory is any callable returning a problem (:mod:`sims.problems`: e.g. a
:class:`sims.problems.neural.NeuralProblem`). It is called with the keyword arguments it
names among the commands' problem settings (:data:`SETTINGS`: ``n_clients``,
``local_steps``, ``batch_size``, ``partition``, ``data_dir``, ``dtype``, ...), or all of
them when it takes ``**kwargs``; the others are not passed. The built-in problems
(``quadratic``, ``DATASET-MODEL``) are built by :func:`sims.experiments.compare.build_problem`,
which asks here first.
"""
from __future__ import annotations

import inspect

from ..store.extensions import load_entry_points

#: The problem settings of the commands a factory may name.
SETTINGS = ("n_clients", "dim", "local_steps", "local_epochs", "batch_size", "partition",
            "noise", "df", "sigma", "heterogeneity", "dtype", "data_dir",
            "eval_train_samples", "device")

PROBLEMS: dict[str, tuple] = {}          # name -> (factory, description)


def canonical(name: str) -> str:
    return str(name).strip().lower()


def list_problems() -> dict[str, str]:
    """The registered problems' names and descriptions."""
    load_entry_points()
    return {name: desc for name, (_, desc) in sorted(PROBLEMS.items())}


def lookup(name: str):
    """The factory registered under ``name``, or None."""
    load_entry_points()
    item = PROBLEMS.get(canonical(name))
    return None if item is None else item[0]


def accepted(factory) -> set[str] | None:
    """The settings ``factory`` names (None: it takes ``**kwargs``, so all)."""
    params = inspect.signature(factory).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def build(name: str, settings: dict):
    """Build registered problem ``name`` from the settings its factory names."""
    factory = lookup(name)
    if factory is None:
        raise KeyError(name)
    names = accepted(factory)
    kw = {k: v for k, v in settings.items() if names is None or k in names}
    return factory(**kw)

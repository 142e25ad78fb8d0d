"""The papers' published hyperparameter grids, as sweep axes.

* :data:`FED_LAMB_TABLE1` -- Fed-LAMB supplement Table 1 ("Search grids of the learning
  rate"), by registry name, and MAIN Sec. 4's ``lambda`` in {0, 0.01, 0.1} for Fed-LAMB;
  ``adp-fed`` sweeps the local and the global rate (spec fed-lamb 3.4): 185 points over
  Fed-SGD, Fed-AMS, Fed-LAMB, Adp-Fed, Mime and Mime-LAMB.
* :data:`FED_EF_TABLE1` -- Fed-EF App. B.1: every method tunes ``eta`` in {1e-4, ..., 10}
  and ``eta_l`` in {1e-4, ..., 1} (30 points).

``python -m sims.sweep --table fed-lamb`` (or ``fed-ef``) adds these axes for the listed
algorithms.
"""
from __future__ import annotations

from .grid import Axis, Grid, GridError

#: Fed-LAMB supplement Table 1 ("Search grids of the learning rate"), by registry name;
#: ``adp-fed`` sweeps the local and the global rate (spec fed-lamb 3.4).
FED_LAMB_TABLE1 = {
    "fed-sgd": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)},
    "fed-ams": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "fed-lamb": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5),
                 "lam": (0.0, 0.01, 0.1)},
    "adp-fed": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1,
                          0.3, 0.5),
                "eta": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "mime": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "mime-lamb": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)},
}
FED_LAMB_TABLE1["mimelite"] = FED_LAMB_TABLE1["mime"]
FED_LAMB_TABLE1["mimelite-lamb"] = FED_LAMB_TABLE1["mime-lamb"]

#: Fed-EF App. B.1: every method tunes eta in {1e-4..10} and eta_l in {1e-4..1}.
FED_EF_TABLE1 = {"eta": (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0),
                 "eta_l": (1e-4, 1e-3, 1e-2, 1e-1, 1.0)}


def table_grid(table: dict, algorithms, fixed: dict | None = None,
               lr_only: bool = False) -> Grid:
    """A :class:`sims.experiments.sweep.Grid` of ``table``'s per-algorithm axes for ``algorithms``
    (``fixed[name]``: settings held fixed; ``lr_only``: leave out the non-rate axes, e.g.
    Fed-LAMB's lambda)."""
    fixed = fixed or {}
    axes = []
    for name in algorithms:
        if name not in table:
            raise GridError(f"the table has no grid for {name}; it covers "
                            f"{', '.join(sorted(table))}")
        for key, values in table[name].items():
            if lr_only and key not in ("eta", "eta_l"):
                continue
            axes.append(Axis(key, tuple(values), name))
    return Grid({name: dict(fixed.get(name, {})) for name in algorithms}, axes)


def fed_lamb_table1_grid(algorithms, fixed: dict | None = None, lr_only: bool = False) -> Grid:
    """Fed-LAMB supplement Table 1's grids (and MAIN Sec. 4's lambda in {0, 0.01, 0.1})."""
    return table_grid(FED_LAMB_TABLE1, algorithms, fixed, lr_only)


def fed_ef_table1_grid(algorithms, fixed: dict | None = None) -> Grid:
    """Fed-EF App. B.1's (eta, eta_l) grid for each of ``algorithms``."""
    return table_grid({a: FED_EF_TABLE1 for a in algorithms}, algorithms, fixed)


TABLES = {"fed-lamb": fed_lamb_table1_grid, "fed-ef": fed_ef_table1_grid}

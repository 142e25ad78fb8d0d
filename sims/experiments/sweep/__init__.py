"""Sweeps: grids over hyperparameters, seeds and algorithms; the papers' selection rules;
in-process or on Ray; resumable. ``python -m sims.sweep`` is the command line.

In a few lines (a reproduction entry, a notebook)::

    from sims.experiments.sweep import Grid, SweepSpec, run_sweep, write_outputs
    grid = Grid.from_specs("fed-lamb,fed-ams", ["eta_l=0.001,0.003,0.01", "fed-lamb.lam=0,0.01"])
    spec = SweepSpec("lamb", grid, problem={...}, build_problem=my_builder,
                     participation="m=25", rounds=100, seeds=[0, 1, 2], out="results/sweep")
    result = run_sweep(spec, executor="ray")           # or "inprocess"
    paths = write_outputs(spec, result, rule="fed-lamb")

Modules: :mod:`.grid` (axes, points), :mod:`.execute` (cells, plans, storage, Ray),
:mod:`.select` (rules), :mod:`.tables` (the papers' grids), :mod:`.plots` (figures),
:mod:`.outputs` (saved tables),
:mod:`.cli` (the command line). Per-replica hyperparameters (grids as batched runs) are in
:mod:`sims.experiments.sweep.per_replica`.
"""
from .execute import SweepResult, SweepSpec, make_units, run_sweep  # noqa: F401
from .on_ray import ray_init  # noqa: F401
from .grid import Axis, Grid, GridError, Point, logspace, parse_axis  # noqa: F401
from .outputs import write_outputs  # noqa: F401
from .select import RULES, get_rule, select, summarize  # noqa: F401
from .tables import FED_EF_TABLE1, FED_LAMB_TABLE1, fed_ef_table1_grid, fed_lamb_table1_grid  # noqa: F401,E501

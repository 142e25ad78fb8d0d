"""Sweeps inside reproduction entries: a grid as one entry run, the papers' grids, selection.

An entry that compares methods each at its best setting (every comparative claim of the four
papers) needs three lines::

    from reproduce.sweeps import fed_lamb_table1_grid, select, sweep_run
    def runs(cfg):
        return [sweep_run("lr-grid", fed_lamb_table1_grid(["fed-sgd", "fed-lamb"]),
                          problem={...}, build_problem=my_builder, participation="m=25")]
    def check(df, cfg):
        summary, curves = select(df, "fed-lamb")        # the selected setting per method

:func:`sweep_run` returns a :class:`reproduce.common.Run` whose ``execute`` runs the grid
through :func:`sims.experiments.sweep.run_sweep` (every (point, seed) cell saved and resumed under
``OUT/sweeps/NAME``, keyed by the code identity; in-process, or on Ray when the
entry's config has ``executor="ray"`` / ``ray_address``; cells of other code reused with the
entry's ``--reuse-stale``, which the sweep reports) and returns the whole grid's tidy
table, the grid values as columns and ``run`` the point's label.
"""
from __future__ import annotations

from sims.experiments.sweep import Grid, SweepSpec, run_sweep, select, summarize  # noqa: F401
from sims.experiments.sweep.tables import (FED_EF_TABLE1, FED_LAMB_TABLE1, fed_ef_table1_grid,  # noqa: F401
                               fed_lamb_table1_grid, table_grid)

from .common import Run


def sweep_run(name: str, grid: Grid, problem: dict, build_problem, participation: str, *,
              rounds: int | None = None, eval_every: int = 1, params: dict | None = None,
              plan: str = "auto") -> Run:
    """One entry run that is a whole sweep (see the module docstring). ``problem`` is the
    JSON description that ``build_problem(problem)`` builds (module-level function for Ray).
    The entry's ``--reuse-stale`` reaches the sweep: saved cells of other code are reused
    (and the sweep says so) instead of recomputed; its ``--checkpoint-every`` checkpoints
    the running units."""
    from . import protocols as pr

    def execute(cfg, seeds, progress):
        cells = len(grid.points()) * len(seeds)
        setup = pr.Setup.of_entry(cfg, problem, build_problem, participation=participation,
                                  rounds=rounds or cfg.rounds, eval_every=eval_every,
                                  plan=plan, progress=lambda k: progress(k / cells))
        result, folder = setup.sweep(name, grid, seeds)
        if result.missing:
            raise ValueError(f"sweep {name}: {len(result.missing)} cell(s) failed twice; see "
                             f"{folder / 'failures.json'}")
        table = result.table.copy()
        for key, val in {"sweep": name, **(params or {})}.items():   # rows name their sweep
            table[key] = val
        return table, {"sweep": grid.describe(), "cells_run": result.ran,
                       "cells_reused": result.reused, "failures": result.failures}
    return Run(name, {**(params or {}), "sweep": name, "grid": grid.describe()},
               rounds=rounds, eval_every=eval_every, execute=execute)


def tuning_run(name: str, methods, problem: dict, build_problem, participation: str, *,
               rule: str, kind: str = "tuned", rounds: int | None = None, eval_every: int = 1,
               params: dict | None = None, required_seeds: int | None = None,
               max_extensions: int | None = None, text: str = "", source: str = "") -> Run:
    """One entry run that is a tuning protocol (:mod:`reproduce.protocols`): ``kind="tuned"``
    (:func:`~reproduce.protocols.tune`, brackets extended while a pick sits on an edge) or
    ``"paper"`` (:func:`~reproduce.protocols.paper_grid`, the printed grids), over the
    entry's seeds, selected by ``rule`` at the run's horizon. Its table is every cell of every
    method's final grid (``method`` names the method, ``run`` is ``NAME:METHOD``) with the
    protocol in columns (``protocol``, ``protocol_kind``, ``selection_seeds``,
    ``selection_round``, ``picks_interior``: :func:`reproduce.protocols.protocol_of` reads
    it back), so the check reselects the same points (:func:`reproduce.protocols.select`) and
    names the protocol its verdicts rest on; the record keeps the picks and the extension
    history. Every cell is saved and resumed under ``OUT/sweeps/NAME-METHOD``; the entry's
    ``--reuse-stale`` reaches the cells as :func:`sweep_run`'s does."""
    from . import protocols as pr
    methods = list(methods)

    def execute(cfg, seeds, progress):
        horizon = rounds or cfg.rounds
        cells = [0]

        def tick(k):
            cells[0] += k
            progress(k / max(1, len(list(seeds))))
        setup = pr.Setup.of_entry(cfg, problem, build_problem, participation=participation,
                                  rounds=horizon, eval_every=eval_every, progress=tick)
        if kind == "tuned":
            t = pr.tune(name, methods, setup, list(seeds), rule=rule, text=text or
                        "symmetric: bracketed grids, edges extended",
                        **({} if max_extensions is None else {"max_extensions": max_extensions}))
        elif kind == "paper":
            t = pr.paper_grid(name, methods, setup, list(seeds), rule=rule,
                              required_seeds=required_seeds, text=text, source=source)
        else:
            raise ValueError(f"tuning_run: kind must be tuned or paper, got {kind!r}")
        table = t.table.assign(run=lambda d: name + ":" + d["method"], sweep=name,
                               **pr.protocol_columns(t.protocol), **(params or {}))
        return table, {"protocol": t.protocol.__dict__, "picks": t.picks,
                       "history": [list(h) for h in t.history]}
    return Run(name, {**(params or {}), "sweep": name, "tuning": kind, "rule": rule,
                      "methods": [[m.label, m.algorithm, m.fixed,
                                   [[b.key, list(b.values), b.step] for b in m.brackets]]
                                  for m in methods]},
               rounds=rounds, eval_every=eval_every, execute=execute)

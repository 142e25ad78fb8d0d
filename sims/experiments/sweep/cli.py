"""``python -m sims.sweep``: a grid over hyperparameters, seeds and algorithms on any problem.

::

    python -m sims.sweep --algorithms fed-lamb,fed-ams --grid eta_l=log:1e-4:0.5:9 \\
        --grid fed-lamb.lam=0,0.01,0.1 --problem fmnist-mlp --n-clients 50 \\
        --participation m=25 --rounds 100 --seeds 3 --rule fed-lamb --executor ray

The problem and run flags are those of ``python -m sims.compare`` (:mod:`sims.cli`:
``--problem`` including ``arrays:PATH.npz``, ``--partition dirichlet:alpha=0.5``,
``--n-clients``, ``--batch-size``, ``--device``, ``--dp``, ``--hp``, ``--import``,
``--reuse-stale``, ``--checkpoint-every``, ...); ``--tag`` is ``--name``. Cells are saved
one by one, and a running unit is checkpointed every ``--checkpoint-every`` seconds (default
600; 0: never), so an interrupted sweep resumes mid-unit. ``--grid [ALG.]KEY=v1,v2`` or
``[ALG.]KEY=log:LO:HI:N`` (repeatable) adds an axis (:mod:`sims.experiments.sweep.grid`);
``--algorithms`` takes ``NAME[:key=value...]`` fixed settings; ``--table fed-lamb`` (or
``fed-ef``) adds the paper's published grid for them (:mod:`sims.experiments.sweep.tables`). ``--executor ray`` runs one
task per core on a local Ray (``--workers``), or on the cluster at ``--ray-address`` (or
``RAY_ADDRESS``). ``--plan batched`` runs grid points as replicas of one batched engine run
(the default on ``--device cuda``), ``separate`` one run per (point, seed) (the CPU default).
Results: ``OUT/NAME/`` (:mod:`sims.experiments.sweep.outputs`); rerunning the same command computes only
the missing cells.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from ... import cli
from .. import compare
from ...core.interrupts import restore as restore_interrupts
from ...store.extensions import PluginError
from ...store.results import ResultsError
from ...store.checkpoint import interrupted_message, write_failed_message
from .execute import EXECUTORS, PLANS, SweepSpec, run_sweep
from .grid import Grid, GridError
from .outputs import write_outputs
from .select import RULES
from .tables import TABLES

PROBLEM_FIELDS = ("problem", "n_clients", "dim", "local_steps", "local_epochs", "batch_size",
                  "partition", "noise", "df", "sigma", "heterogeneity", "dtype", "data_dir",
                  "eval_train_samples")
#: Problem fields in a sweep's problem description only where they differ from these
#: defaults (so cells saved before they existed keep their fingerprints).
OPTIONAL_FIELDS = {"device": "cpu", "loss": None, "model": None}


def build_compare_problem(desc: dict):
    """The problem of ``sims.experiments.compare`` described by ``desc`` (its problem fields,
    ``device`` among them)."""
    cfg = compare.Config(**desc)
    try:
        return compare.build_problem(cfg)
    except compare.CompareError as exc:
        raise GridError(str(exc)) from None


def _parser(prog: str = "python -m sims.sweep") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=cli.catalogue())
    d = compare.Config()
    p.add_argument("--name", "--tag", dest="name", default="sweep",
                   help="results subfolder and figure stem (default %(default)s)")
    p.add_argument("--algorithms", default="fed-lamb",
                   help="comma-separated NAME[:key=value...] (default %(default)s)")
    p.add_argument("--grid", action="append", default=[],
                   help="[ALG.]KEY=v1,v2,... or [ALG.]KEY=log:LO:HI:N (repeatable)")
    p.add_argument("--table", default=None, choices=["fed-lamb", "fed-ef"],
                   help="add a paper's published grid for the listed algorithms: Fed-LAMB "
                        "supplement Table 1 (+ lambda), Fed-EF App. B.1 (eta x eta_l)")
    p.add_argument("--rule", default="auto", choices=["auto", *RULES],
                   help="selection rule (default auto: final-acc where the problem reports "
                        "test accuracy, else final-train-loss)")
    p.add_argument("--by", default="algorithm",
                   help="comma-separated columns to select within (default %(default)s)")
    p.add_argument("--reference-acc", type=float, default=None,
                   help="fed-ef-compression: the full-precision accuracy (fraction)")
    p.add_argument("--executor", default="inprocess", choices=EXECUTORS)
    p.add_argument("--ray-address", default=None,
                   help="an existing Ray cluster (default: RAY_ADDRESS, else a local Ray)")
    p.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all)")
    p.add_argument("--plan", default="auto", choices=PLANS)
    p.add_argument("--max-replicas", type=int, default=64, help="cells per batched unit")
    p.add_argument("--rounds", type=int, default=d.rounds)
    p.add_argument("--seeds", type=int, default=d.seeds, help="number of seeds")
    p.add_argument("--seed0", type=int, default=d.seed0)
    p.add_argument("--out", default="results/sweep")
    p.add_argument("--figures", default="figures/sweep")
    cli.add_problem_args(p, d)
    cli.add_run_args(p, checkpoint=d.checkpoint_every, tag=None, threads_default=1,
                     threads_help="torch threads per unit (default 1; 0: torch's choice "
                                  "in-process)")
    return p


def dp_line(spec, problem) -> str:
    """What ``--dp`` does in this sweep (the noise multiplier, calibrated where a target
    epsilon is given) and the note on fixed-``m`` sampling against the accountant's Poisson
    assumption."""
    from ...algorithms.registry import make_algorithm
    from ...core.participation import Participation
    dp = cli.DPOptions(**spec.dp)
    participation = Participation.parse(spec.participation)
    try:                  # every algorithm of the grid can be made private, before any work
        private = [dp.wrap(make_algorithm(name), participation, problem.n_clients, spec.rounds)
                   for name in spec.grid.algorithms]
    except ValueError as exc:                       # PrivacyError, AccountingError
        raise GridError(f"--dp: {' '.join(str(exc).split())}") from None
    return compare.dp_summary(dp, private[0], participation, problem.n_clients, spec.rounds)


def unselected_lines(summary, by) -> list[str]:
    """One line per group of the selection (``--by``) that has no selectable point: every
    point diverged or scored non-finite, so nothing of it is reported."""
    keys = [b for b in by if b in summary] or ["algorithm"]
    out = []
    for group, g in summary.groupby(keys, sort=False):
        if not g["selected"].any():
            name = ", ".join(map(str, group if isinstance(group, tuple) else (group,)))
            bad = int(g["diverged"].sum())
            out.append(f"no selectable point for {name}: {bad} of {len(g)} point(s) diverged, "
                       "the others have no finite score")
    return out


def problem_metrics(problem) -> set[str]:
    """The metrics the problem's evaluation reports (one evaluation of its initial model)."""
    import torch
    with torch.no_grad():
        return set(problem.evaluate(problem.init_theta(0).unsqueeze(0), test=True))


def check_selection(rule: str, by, grid, metrics: set[str]) -> str:
    """The rule to use (``auto`` resolved) and the ``--by`` columns, checked against what the
    problem reports and the grid's columns, before any work (:class:`GridError`)."""
    if rule == "auto":
        rule = "final-acc" if "test_acc" in metrics else "final-train-loss"
    needed = RULES[rule].metric
    if needed not in metrics:
        raise GridError(f"rule {rule} needs the metric {needed!r}, which this problem does not "
                        f"report (it reports {', '.join(sorted(metrics))}); choose another "
                        "--rule, e.g. final-train-loss")
    allowed = {"algorithm", *grid.columns}
    if "compressor" in grid.columns:
        allowed.add("compressor_family")
    unknown = [b for b in by if b not in allowed]
    if unknown:
        raise GridError(f"--by {','.join(unknown)}: not a column of this sweep; choose from "
                        f"{', '.join(sorted(allowed))}")
    return rule


def spec_from_args(args) -> SweepSpec:
    cfg = compare.Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(
        compare.Config) if hasattr(args, f.name) and f.name not in ("hp", "threads")})
    if args.tiny:
        compare.apply_tiny(cfg, compare.explicit_flags(_parser(), args))
    try:
        compare.validate(cfg)
    except compare.CompareError as exc:
        raise GridError(str(exc)) from None
    grid = Grid.from_specs(args.algorithms, args.grid, hp=args.hp)
    if args.table:
        table = TABLES[args.table](list(grid.algorithms), fixed=grid.algorithms)
        grid = Grid(grid.algorithms, table.axes + grid.axes)
    problem = {k: getattr(cfg, k) for k in PROBLEM_FIELDS}
    problem.update({k: getattr(cfg, k) for k, default in OPTIONAL_FIELDS.items()
                    if getattr(cfg, k) != default})
    try:
        dp = cli.parse_dp(args.dp)
    except cli.CLIError as exc:
        raise GridError(str(exc)) from None
    from .execute import _problem
    _problem(build_compare_problem, problem)   # bad flags fail before any work (kept built)
    if args.max_replicas < 1:
        raise GridError(f"--max-replicas must be >= 1, got {args.max_replicas}")
    if args.threads < 0:
        raise GridError(f"--threads must be >= 0, got {args.threads}")
    if args.workers is not None and args.workers < 1:
        raise GridError(f"--workers must be >= 1, got {args.workers}")
    return SweepSpec(args.name, grid, problem, build_compare_problem,
                     participation=cfg.participation, rounds=cfg.rounds,
                     seeds=list(range(cfg.seed0, cfg.seed0 + cfg.seeds)),
                     eval_every=cfg.eval_every, out=args.out, device=cfg.device,
                     max_replicas=args.max_replicas,
                     dp=None if dp is None else dp.describe(),
                     checkpoint_every=args.checkpoint_every)


def main(argv=None, prog: str = "python -m sims.sweep") -> int:
    restore_interrupts()
    from ...core import malloc
    malloc.tune_for_command()              # this process is the command's
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.preimport(argv)              # plug-ins first: --help names what they register
    except cli.CLIError as exc:
        return cli.fail(prog, exc)
    args = _parser(prog).parse_args(argv)
    try:
        spec = spec_from_args(args)
        from ...core.participation import Participation, ParticipationError
        from ...store.runstore import FolderError, check_folder
        from .execute import _problem
        try:
            Participation.parse(spec.participation)
        except ParticipationError as exc:
            raise GridError(str(exc)) from None
        by = tuple(b.strip() for b in args.by.split(",") if b.strip())
        metrics = problem_metrics(_problem(spec.build_problem, spec.problem))
        rule = check_selection(args.rule, by, spec.grid, metrics)
        if spec.dp is not None:
            print(dp_line(spec, _problem(spec.build_problem, spec.problem)), flush=True)
        try:
            check_folder(args.out, "--out")
            check_folder(spec.folder, "--out")
            if args.figures:
                check_folder(args.figures, "--figures")
        except FolderError as exc:
            raise GridError(str(exc)) from None
        result = run_sweep(spec, executor=args.executor, plan=args.plan,
                           ray_address=args.ray_address, workers=args.workers,
                           threads=args.threads, quiet=args.quiet,
                           reuse_stale=args.reuse_stale)
        if result.table.empty:
            raise GridError(f"no cell finished ({len(result.failures)} failure(s); see "
                            f"{spec.folder / 'failures.json'})")
        paths = write_outputs(spec, result, rule, by, args.figures, args.reference_acc)
    except (GridError, ResultsError, PluginError, OSError) as exc:
        what = (write_failed_message(exc, "cells") if isinstance(exc, OSError)
                else " ".join(str(exc).split()))
        print(f"{prog}: error: {what}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(interrupted_message(exc, "cells"), file=sys.stderr)
        return 130
    summary = paths.pop("summary")
    cols = ["algorithm", *[c for c in spec.grid.columns if c in summary], "score",
            "score_std", "rank"]
    if not args.quiet:
        import pandas as pd
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(summary[summary["selected"]][cols].to_string(index=False))
    for line in unselected_lines(summary, by):
        print(line)
    print(f"rule: {rule}")
    print(f"cells: {result.ran} run, {result.reused} reused, {len(result.missing)} missing"
          f"{' (see failures.json)' if result.missing else ''}")
    for key, path in paths.items():
        print(f"{key}: {path}")
    return 0 if not result.missing else 1

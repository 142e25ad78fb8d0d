"""Running a sweep: cells, plans, storage and resumption, in-process or as Ray tasks.

A *cell* is one (grid point, seed): one engine replica. Every finished cell is saved on its
own (:func:`sims.store.results.save_run`: CSV + JSON, written atomically) under
``OUT/NAME/cells/``, named by its fingerprint, which includes the problem, participation,
rounds, evaluation cadence, the point's full settings, the seed and
:func:`sims.store.identity.code_digest` (a code change recomputes); a finished cell is never
recomputed, so rerunning the same command runs only what is missing.

*Plans* group cells into *units*, the work of one task:

* ``separate`` (the default on a CPU): one unit per cell. On a CPU the engine is compute-bound
  per client, so batching buys nothing per replica; the speed comes from running one unit per
  core (Ray).
* ``batched`` (the default on a GPU): cells of one algorithm whose settings differ only in
  numeric hyperparameters run as replicas of one engine run
  (:func:`sims.experiments.sweep.per_replica.batched_algorithm`), up to ``max_replicas`` a unit,
  a group cut into units of equal size; on Ray into whole waves of the session's workers
  (:func:`make_units` with ``slots``), so none idles while another runs a long last unit.
  Replicas whose branch structure differs (e.g. FedLADA's ``alpha = 1`` against ``< 1``) are
  split apart when the run reports it (:class:`~sims.experiments.sweep.per_replica.MixedReplicaValues`)
  and run as separate batches.

Executors: ``inprocess`` runs the units one after another here; ``ray`` submits one Ray
task per unit (one CPU and one torch thread each), on a local Ray started on this machine
(the default; every core) or on the cluster at ``ray_address`` (or ``RAY_ADDRESS``), which
receives the project's packages with the tasks; results come back to this process, which
writes them; each cell's record names where it was computed (host, process id, torch
threads: on Ray, the worker's; the driver's under ``driver``), and Ray tasks carry the
driver's plug-ins (:mod:`sims.plugins`). A unit that fails (an exception, a killed worker)
is recorded with its error in
``OUT/NAME/failures.json`` and retried once; the other units finish either way. One progress
bar counts cell-rounds over the whole sweep.

A running unit checkpoints every ``checkpoint_every`` seconds under ``OUT/NAME/.checkpoints/``
(:func:`_unit_checkpointer`), so an interrupted sweep resumes mid-unit. A checkpoint of other
code is resumed only with ``reuse_stale`` (``--reuse-stale``); the cells of such a unit are
then saved as of other code, never read back as current.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ...data import DataError
from ...store.digest import changed as data_changed
from ...store.digest import record_of as data_record
from ...store import identity
from ...store.runstore import OTHER_CODE
from ...store.identity import code_identity
from ...store.locks import RunLock
from ...store.results import atomic_write_bytes, load_run, provenance, save_run, tidy
from .grid import Grid, GridError, Point

PLANS = ("auto", "separate", "batched")
EXECUTORS = ("inprocess", "ray")
AGGREGATIONS = ("uniform", "sample-weighted")


@dataclass
class SweepSpec:
    """Everything a sweep runs. ``problem`` is a JSON-able description of the problem (part
    of every cell's fingerprint) and ``build_problem(problem)`` builds it; for Ray both are
    shipped to the workers (a module-level function is shipped by reference)."""
    name: str
    grid: Grid
    problem: dict
    build_problem: Callable[[dict], object]
    participation: str = "full"
    rounds: int = 100
    seeds: list = field(default_factory=lambda: [0])
    eval_every: int = 1
    out: str = "results/sweep"
    device: str = "cpu"
    max_replicas: int = 64            # cells per batched unit
    max_batch: int | None = None      # the engine's client chunk (None: its default)
    #: user-level DP for every cell (:class:`sims.cli.DPOptions` fields: clip, sigma or
    #: epsilon, delta, accountant); None: none
    dp: dict | None = None
    #: seconds between checkpoints of a running unit (0: none): an interrupted sweep resumes
    #: its unfinished units from their last checkpoint (finished cells are saved anyway)
    checkpoint_every: float = 0.0
    #: how the server averages the participants' messages: ``"uniform"`` (the engine's mean)
    #: or ``"sample-weighted"`` (:class:`sims.algorithms.weighting.SampleWeighted` around
    #: every cell's algorithm, client ``i`` weighted by its ``len(problem.parts[i])``
    #: training samples; not with ``dp``). Part of a cell's fingerprint only when weighted.
    aggregation: str = "uniform"

    def __post_init__(self):
        from ... import cli
        try:
            cli.check_device(self.device, "device")    # never a silent run on the CPU
            if self.dp is not None:
                self.dp = cli.DPOptions(**self.dp).describe()
        except cli.CLIError as exc:
            raise GridError(str(exc)) from None
        except TypeError as exc:
            raise GridError(f"dp: {exc}") from None
        if self.rounds < 1:
            raise GridError(f"rounds must be >= 1, got {self.rounds}")
        if not self.seeds:
            raise GridError("a sweep needs at least one seed")
        if self.eval_every < 1:
            raise GridError(f"eval_every must be >= 1, got {self.eval_every}")
        if not self.checkpoint_every >= 0:                  # NaN too
            raise GridError(f"checkpoint_every must be >= 0 seconds (0: none), got "
                            f"{self.checkpoint_every}")
        if self.aggregation not in AGGREGATIONS:
            raise GridError(f"aggregation must be one of {AGGREGATIONS}, got "
                            f"{self.aggregation!r}")
        if self.aggregation != "uniform" and self.dp is not None:
            raise GridError("sample-weighted aggregation under DP is not supported: the DP "
                            "noise is calibrated to the uniform mean")
        if not str(self.name).strip() or "/" in str(self.name):
            raise GridError(f"bad sweep name {self.name!r}")
        self.seeds = [int(s) for s in self.seeds]

    @property
    def folder(self) -> Path:
        return Path(self.out) / self.name


@dataclass(frozen=True)
class Cell:
    point: Point
    seed: int


def cell_config_fingerprint(spec: SweepSpec, cell: Cell) -> str:
    """What a cell computes, without the code that computes it: names its files."""
    blob = json.dumps({"problem": spec.problem, "participation": spec.participation,
                       "rounds": spec.rounds, "eval_every": spec.eval_every,
                       "algorithm": cell.point.algorithm,
                       "hyper": [[k, v] for k, v in cell.point.hyper], "seed": cell.seed,
                       **({"dp": spec.dp} if spec.dp is not None else {}),
                       **_weighting(spec.aggregation)},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _weighting(aggregation) -> dict:
    """The aggregation's part of a fingerprint: none for the engine's uniform mean (the cells
    saved before the option existed keep their names)."""
    return {} if aggregation in (None, "uniform") else {"aggregation": aggregation}


def client_sizes(problem) -> list[int]:
    """Every client's number of training samples (``len(problem.parts[i])``): the weights of
    sample-weighted aggregation."""
    parts = getattr(problem, "parts", None)
    if parts is None:
        raise GridError(f"sample-weighted aggregation needs the problem's client parts; "
                        f"{type(problem).__name__} has none")
    return [len(p) for p in parts]


def cell_fingerprint(spec: SweepSpec, cell: Cell) -> str:
    """The cell's settings and the code identity (:func:`sims.store.identity.code_digest`): a
    saved cell is current only when its record holds this."""
    return hashlib.sha256(f"{cell_config_fingerprint(spec, cell)}|{identity.code_digest()}"
                          .encode()).hexdigest()


def cell_path(spec: SweepSpec, cell: Cell) -> Path:
    fp = cell_config_fingerprint(spec, cell)
    return (spec.folder / "cells"
            / f"{cell.point.algorithm}_{cell.point.key}_s{cell.seed}_{fp[:10]}.csv")


@dataclass
class CellLookup:
    """What :func:`load_cell` found: the table (None: compute the cell) and why a saved
    cell was not used as current (``"stale"``: other code; ``"data"``: other data)."""
    df: pd.DataFrame | None
    stale: bool = False
    why: str | None = None


def load_cell(spec: SweepSpec, cell: Cell, reuse_stale: bool = False) -> CellLookup:
    """The saved cell: current (same settings, code and data), or of other code (reused
    only with ``reuse_stale``), or none."""
    found = load_run(cell_path(spec, cell))
    if found is None:
        return CellLookup(None)
    df, record = found
    if record.get("config_fingerprint") != cell_config_fingerprint(spec, cell):
        return CellLookup(None)
    changed = data_changed(record.get("data"))
    if changed is not None:
        return CellLookup(None, why=f"data: {changed}")
    if record.get("fingerprint") != cell_fingerprint(spec, cell):
        return CellLookup(df if reuse_stale else None, stale=True, why="stale")
    return CellLookup(df)


def _remove_superseded(spec: SweepSpec, cell: Cell) -> int:
    """Delete the files of the same (point, seed) saved under other names (cells of other
    code from before cells were named by their settings alone); how many runs."""
    keep = cell_path(spec, cell)
    removed = 0
    for path in keep.parent.glob(f"{cell.point.algorithm}_{cell.point.key}_s{cell.seed}_*.csv"):
        if path != keep:
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
            removed += 1
    return removed


# ----------------------------------------------------------------------------- plans

def choose_plan(plan: str, device: str) -> str:
    if plan not in PLANS:
        raise GridError(f"plan must be one of {PLANS}, got {plan!r}")
    if plan == "auto":
        return "batched" if str(device).startswith("cuda") else "separate"
    return plan


def make_units(cells: list[Cell], plan: str, max_replicas: int = 64,
               slots: int = 1) -> list[list[Cell]]:
    """Group cells into units (see the module docstring). With ``slots`` workers (Ray's CPUs,
    or GPUs on a GPU) a batched group is cut into equal units so that the workers finish
    together: the number of waves ``ceil(K / slots)`` of the ``K`` units that
    ``max_replicas`` alone gives is kept, and every unit gets about ``N / (slots * waves)`` of
    the ``N`` cells (72 cells at 64 a unit on two workers: 36 + 36, not 64 + 8 with one
    worker idle for most of the sweep). Largest units first, so the last wave is the short
    one."""
    if plan == "separate":
        return [[c] for c in cells]
    from .per_replica import numeric_hyperparameters
    most = max(1, int(max_replicas))
    groups: dict = {}
    for c in cells:
        numeric = numeric_hyperparameters(c.point.algorithm)
        structure = tuple((k, repr(v)) for k, v in c.point.hyper if k not in numeric)
        groups.setdefault((c.point.algorithm, structure), []).append(c)
    size = most
    if slots > 1 and cells:
        waves = -(-sum(-(-len(m) // most) for m in groups.values()) // slots)
        size = min(most, -(-len(cells) // (slots * waves)))
    units = []
    for members in groups.values():
        k = -(-len(members) // size)                  # units of this group, sizes within 1
        base, extra = divmod(len(members), k)
        lo = 0
        for i in range(k):
            units.append(members[lo:lo + base + (i < extra)])
            lo += base + (i < extra)
    return sorted(units, key=len, reverse=True) if slots > 1 else units


# ----------------------------------------------------------------------------- one unit

_PROBLEMS: dict = {}


def _problem(build_problem, desc: dict):
    """The problem of ``desc``, built once per process (units of one sweep share it)."""
    key = (getattr(build_problem, "__qualname__", repr(build_problem)),
           json.dumps(desc, sort_keys=True, default=str))
    if key not in _PROBLEMS:
        _PROBLEMS.clear()                        # one problem at a time per worker
        _PROBLEMS[key] = build_problem(desc)
    return _PROBLEMS[key]


class _Slice:
    """The replicas ``rows`` of a :class:`sims.core.engine.RunOutput`, as :func:`tidy` reads it."""

    def __init__(self, out, rows):
        self.seeds = [out.seeds[r] for r in rows]
        self.metrics = {k: v[rows] for k, v in out.metrics.items()}
        self.rounds = out.rounds


def run_unit(payload: dict, units_cells: list[Cell], progress=None, threads: int = 0):
    """Run one unit; returns ``[(cell, tidy DataFrame, record)]`` for its cells. Batched
    units whose replicas take different branches are split and run part by part."""
    import torch

    from ...core import engine
    from .per_replica import MixedReplicaValues, batched_algorithm
    from ...algorithms.registry import with_population
    from ...core.participation import Participation
    from ...store.results import worker_context
    if threads:
        torch.set_num_threads(int(threads))
    problem = _problem(payload["build_problem"], payload["problem"])
    name = units_cells[0].point.algorithm
    settings = []
    for c in units_cells:
        settings.append(with_population(name, c.point.settings, problem.n_clients))
    seeds = [c.seed for c in units_cells]
    ckpt = _unit_checkpointer(payload, units_cells)
    started = time.perf_counter()
    participation = Participation.parse(payload["participation"])
    try:
        alg = batched_algorithm(name, settings)   # (a check may see replicas disagree)
        if payload.get("dp") is not None:
            from ...cli import DPOptions
            alg = DPOptions(**payload["dp"]).wrap(alg, participation, problem.n_clients,
                                                   payload["rounds"])
        if payload.get("aggregation", "uniform") == "sample-weighted":
            from ...algorithms.weighting import SampleWeighted
            alg = SampleWeighted(alg, client_sizes(problem))
        out = engine.run(problem, alg, participation,
                         payload["rounds"], seeds, eval_every=payload["eval_every"],
                         max_batch=payload.get("max_batch"), checkpoint=ckpt,
                         progress=(lambda t: progress(len(units_cells))) if progress else None)
    except MixedReplicaValues as exc:
        parts = [[c for c, p in zip(units_cells, exc.pattern) if p == side]
                 for side in (True, False)]
        if not parts[0] or not parts[1]:
            raise
        if ckpt is not None:
            ckpt.clear()
        return [r for part in parts for r in run_unit(payload, part, progress)]
    if progress is not None:          # rounds skipped because every replica diverged
        progress(len(units_cells) * (payload["rounds"] - len(out.participants[0])))
    wall = time.perf_counter() - started
    results = []
    for r, c in enumerate(units_cells):
        params = {"algorithm": name, **c.point.values, "point": c.point.key}
        df = tidy(_Slice(out, [r]), c.point.label, params)
        df["diverged_at"] = out.diverged_at[r]
        record = {"algorithm": alg.describe() if len(units_cells) == 1 else
                  {"name": name, **settings[r]},
                  "settings": settings[r], "seed": c.seed, "wall_time_unit_s": round(wall, 3),
                  "replicas_in_unit": len(units_cells), "diverged_at": out.diverged_at[r],
                  "data": data_record(problem),
                  "resumed_from_round": None if ckpt is None else ckpt.resumed_from,
                  "resumed_from_other_code": bool(ckpt is not None and ckpt.resumed_from
                                                  and ckpt.other_code),
                  **_weighting(payload.get("aggregation")),
                  **worker_context()}          # where it ran (a Ray worker: the worker's)
        results.append((c, df, record))
    if ckpt is not None:
        ckpt.clear()
    return results


def _unit_checkpointer(payload: dict, cells: list):
    """The checkpointer of one unit (None without ``checkpoint_every``): under the sweep's
    ``.checkpoints/``, named by what the unit computes and keyed by that and the code that
    computes it. A checkpoint of other code is not resumed (the first save replaces it),
    except with ``reuse_stale`` in the payload (``--reuse-stale``), as
    :meth:`sims.store.runstore.RunStore.checkpointer` does for an entry's runs: then
    ``other_code`` is set, and the unit's cells are saved as of other code
    (:func:`_record`), so only ``--reuse-stale`` reads them back."""
    every = payload.get("checkpoint_every") or 0
    if not every or not payload.get("folder"):
        return None
    from ...store.checkpoint import Checkpointer
    what = json.dumps({k: payload.get(k) for k in ("problem", "participation", "rounds",
                                                   "eval_every", "dp")}
        | _weighting(payload.get("aggregation")) | {
        "cells": [[c.point.algorithm, [[k, v] for k, v in c.point.hyper], c.seed]
                  for c in cells]}, sort_keys=True, default=str)
    unit = hashlib.sha256(what.encode()).hexdigest()
    ckpt = Checkpointer(Path(payload["folder"]) / ".checkpoints" / f"unit_{unit[:16]}.ckpt",
                        every_seconds=float(every), key=f"{unit}|{identity.code_digest()}")
    if payload.get("reuse_stale"):
        ckpt.adopt_other_code(f"{unit}|")
    return ckpt


# ----------------------------------------------------------------------------- the sweep

@dataclass
class SweepResult:
    table: pd.DataFrame                  # every finished cell, tidy
    failures: list                       # [{cells, attempt, error}]
    ran: int                             # cells computed by this call
    reused: int                          # cells read back from earlier runs
    missing: list                        # cells with no result (failed twice)
    wall_s: float
    reused_stale: int = 0                # of ``reused``: cells of other code (reuse_stale)
    recomputed_stale: int = 0            # cells of other code computed again
    recomputed_data: int = 0             # cells whose data changed, computed again


def payload_of(spec: SweepSpec, reuse_stale: bool = False) -> dict:
    """What a unit's worker needs of the sweep (``reuse_stale``: a unit may resume a
    checkpoint of other code, :func:`_unit_checkpointer`)."""
    return {"problem": spec.problem, "build_problem": spec.build_problem,
            "participation": spec.participation, "rounds": spec.rounds,
            "eval_every": spec.eval_every, "max_batch": spec.max_batch, "dp": spec.dp,
            "checkpoint_every": spec.checkpoint_every, "folder": str(spec.folder),
            "aggregation": spec.aggregation, "reuse_stale": bool(reuse_stale)}


def _record(spec: SweepSpec, cell: Cell, extra: dict, base: dict) -> dict:
    """A cell's provenance: ``base`` (the sweep's, computed once: versions, commit, code
    identity) with the cell's seed, settings and fingerprint."""
    return {**base, "seeds": [cell.seed], "wall_time_s": extra.get("wall_time_unit_s", 0.0),
            "wall_time_covers": "the engine run of the cell's unit (its replicas together), "
                                "where it ran (host, pid)",
            "driver": {"host": base.get("host"), "pid": base.get("pid")},
            **extra, "point": cell.point.key, "label": cell.point.label,
            "config_fingerprint": cell_config_fingerprint(spec, cell),
            "fingerprint": (OTHER_CODE if extra.get("resumed_from_other_code")
                            else cell_fingerprint(spec, cell))}


def _base_record(spec: SweepSpec) -> dict:
    return provenance({"sweep": spec.name, "problem": spec.problem,
                       "participation": spec.participation, "rounds": spec.rounds,
                       "eval_every": spec.eval_every, **_weighting(spec.aggregation)}, [],
                      0.0, {"code": code_identity()})


def _bar(total: int, quiet: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="cell-round", disable=quiet or not total, file=sys.stderr,
                dynamic_ncols=True, desc="sweep",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total} cell-rounds "
                           "[{elapsed}<{remaining}]{postfix}")


class _Relay:
    """The sweep's bar, also telling ``progress`` of every change (an entry's own bar)."""

    def __init__(self, bar, progress):
        self._bar, self._progress = bar, progress

    def __getattr__(self, name):
        return getattr(self._bar, name)

    @property
    def n(self):
        return self._bar.n

    @n.setter
    def n(self, value):
        self._progress(value - self._bar.n)
        self._bar.n = value

    def update(self, k=1):
        self._progress(k)
        self._bar.update(k)


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return " ".join(" ".join(lines).split())[:2000]


class NotSaved(GridError):
    """A sweep run with ``saved_only`` has cells without a saved result; ``busy``: another
    process is computing the sweep now (so they may come)."""

    def __init__(self, message: str, busy: bool = False):
        super().__init__(message)
        self.busy = busy


def run_sweep(spec: SweepSpec, *, executor: str = "inprocess", plan: str = "auto",
              ray_address: str | None = None, workers: int | None = None,
              threads: int = 1, quiet: bool = False, progress=None,
              reuse_stale: bool = False, say=None, saved_only: bool = False) -> SweepResult:
    """Run every missing cell of ``spec`` and return the whole grid's tidy table.

    ``executor``: ``"inprocess"`` or ``"ray"`` (local Ray with ``workers`` CPUs, default
    every core, or the cluster at ``ray_address`` / ``RAY_ADDRESS``). ``plan``: ``"auto"``
    (batched on a GPU, separate on a CPU), ``"separate"`` or ``"batched"``. ``threads``:
    torch threads per unit (one per task on Ray; in-process 0 keeps torch's choice).
    ``progress(k)``, when given, is told of every ``k`` cell-rounds done instead of the
    sweep's own bar. A saved cell of other code is computed again (and its file replaced),
    or with ``reuse_stale`` reused; a cell whose data changed is computed again; ``say``
    (default: stderr) tells which. The sweep holds its folder's lock while it runs: a second
    process on the same sweep waits, then reuses what the first computed. ``saved_only``:
    compute nothing, take no lock and write nothing (so a read never waits for a running
    sweep); a cell without a saved result (one of other code counts as saved only with
    ``reuse_stale``) is a one-line :class:`NotSaved` before any work, which says when another
    process is computing the sweep now.
    """
    if executor not in EXECUTORS:
        raise GridError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if workers is not None and workers < 1:
        raise GridError(f"workers must be >= 1, got {workers}")
    if threads is None or threads < 0:
        raise GridError(f"threads must be >= 0, got {threads}")
    if spec.max_replicas < 1:
        raise GridError(f"max_replicas must be >= 1, got {spec.max_replicas}")
    say = say or (lambda line: print(line, file=sys.stderr))
    plan = choose_plan(plan, spec.device)
    points = spec.grid.check()
    if saved_only and not spec.folder.is_dir():         # a read leaves no folder behind
        raise _not_saved(spec, len(points) * len(spec.seeds), len(points) * len(spec.seeds))
    # a read (saved_only) takes no lock and writes nothing: it never waits
    lock = None if saved_only else RunLock(spec.folder / ".locks" / "sweep.lock").take(
        f"sweep {spec.name}", say, GridError)
    try:
        return _run_cells(spec, points, executor, plan, ray_address, workers, threads, quiet,
                          progress, reuse_stale, say, saved_only)
    finally:
        if lock is not None:
            lock.release()


def _not_saved(spec: SweepSpec, missing: int, cells: int) -> NotSaved:
    lock = RunLock(spec.folder / ".locks" / "sweep.lock")
    busy = lock.busy()
    return NotSaved(f"sweep {spec.name}: {missing} of {cells} cell(s) have no saved result in "
                    f"{spec.folder} (computing was not allowed"
                    + (f"; being computed by another process now: {lock.holder()})" if busy
                       else ")"), busy=busy)


def _run_cells(spec, points, executor, plan, ray_address, workers, threads, quiet, progress,
               reuse_stale, say, saved_only=False) -> SweepResult:
    started = time.perf_counter()
    cells = [Cell(p, s) for p in points for s in spec.seeds]
    frames, todo = {}, []
    stale_reused = stale_redo = data_redo = 0
    for c in cells:
        found = load_cell(spec, c, reuse_stale)
        if found.df is None:
            todo.append(c)
            stale_redo += found.why == "stale"
            data_redo += bool(found.why and found.why.startswith("data"))
        else:
            frames[c] = found.df
            stale_reused += found.stale
    reused = len(frames)
    if saved_only and todo:
        raise _not_saved(spec, len(todo), len(cells))
    if stale_reused:
        say(f"sweep {spec.name}: reused {stale_reused} saved cell(s) computed by OTHER code "
            "than this checkout's (--reuse-stale)")
    if stale_redo:
        say(f"sweep {spec.name}: recomputing {stale_redo} saved cell(s): the code or numeric "
            "packages changed since; --reuse-stale reuses them instead")
    if data_redo:
        say(f"sweep {spec.name}: recomputing {data_redo} saved cell(s): the data they read "
            "changed")
    if todo and executor == "inprocess":
        # the units' problem, built here once (they share it): one that cannot be built
        # (missing data) fails here in one line, not as every unit failing twice
        try:
            problem = _problem(spec.build_problem, spec.problem)
        except (DataError, ValueError):  # missing data, a bad setting: nothing would run
            raise
        except Exception:  # noqa: BLE001 - maybe transient: the units record and retry it
            problem = None
        where = getattr(problem, "device", None)
        if where is not None and getattr(where, "type", str(where)) != \
                str(spec.device).split(":")[0]:
            raise GridError(f"the sweep's device is {spec.device}, but build_problem built the "
                            f"problem on {where}; build it on {spec.device}")
    def plan_units(slots: int = 1):
        return make_units(todo, plan, spec.max_replicas, slots)
    failures: list = []
    bar = _bar(len(todo) * spec.rounds, quiet or progress is not None)
    if progress is not None:
        bar = _Relay(bar, progress)

    base = _base_record(spec)

    def save(results):
        for c, df, extra in results:
            save_run(df, _record(spec, c, extra, base), cell_path(spec, c))
            frames[c] = df

    def failed(unit, attempt, exc):
        failures.append({"cells": [{"point": c.point.label, "key": c.point.key,
                                    "seed": c.seed} for c in unit],
                         "attempt": attempt, "error": _error_text(exc)})
        bar.set_postfix_str(f"{len(failures)} failure(s)")

    try:
        if executor == "inprocess":
            _run_inprocess(spec, plan_units(), save, failed, bar, threads, reuse_stale)
        elif todo:
            from .on_ray import run_ray
            run_ray(spec, plan_units, save, failed, bar, ray_address, workers, threads or 1,
                    payload_of(spec, reuse_stale), run_unit)
    finally:
        bar.close()
        if not saved_only:
            _write_failures(spec, failures, [c for c in cells if c not in frames])
    superseded = 0 if saved_only else sum(_remove_superseded(spec, c) for c in frames)
    if superseded:
        say(f"sweep {spec.name}: removed {superseded} superseded cell file(s) of other code")
    missing = [c for c in cells if c not in frames]
    table = (pd.concat([frames[c] for c in cells if c in frames], ignore_index=True)
             if frames else pd.DataFrame())
    return SweepResult(table, failures, len(todo) - len(missing), reused, missing,
                       time.perf_counter() - started, stale_reused, stale_redo, data_redo)


def _write_failures(spec, failures, missing):
    path = spec.folder / "failures.json"
    old = []
    if path.exists():
        try:
            old = json.loads(path.read_text()).get("history", [])
        except (ValueError, OSError):
            old = []
    doc = {"missing": [{"point": c.point.label, "key": c.point.key, "seed": c.seed}
                       for c in missing],
           "history": old + [dict(f, when=time.strftime("%Y-%m-%dT%H:%M:%S")) for f in failures]}
    if failures or missing or old:
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode())


def _run_inprocess(spec, units, save, failed, bar, threads, reuse_stale=False):
    payload = payload_of(spec, reuse_stale)
    for unit in units:
        for attempt in (0, 1):
            done = bar.n
            try:
                save(run_unit(payload, unit, progress=bar.update, threads=threads))
                break
            except Exception as exc:          # recorded, retried once, the others go on
                failed(unit, attempt, exc)
                bar.update(done - bar.n)      # undo the failed attempt's progress

"""The shared shape of every entry: config, runs, resumable execution, plot, claim check.

An entry module defines

* ``PAPER``, ``TARGET`` (e.g. ``"Figure 8"``), ``TITLE`` and ``DEFAULT_COST`` (how long its
  CPU default takes here);
* ``Config``, a dataclass extending :class:`EntryConfig`, whose ``scale()`` applies the
  ``--full`` and ``--tiny`` presets;
* ``runs(cfg) -> list[Run]``: every configuration to run, each over all seeds;
* ``plot(df, cfg) -> list[Path]`` and ``check(df, cfg) -> list`` (lines of text and one
  :class:`reproduce.verdicts.Verdict` per claim and panel, each with its regime card; diverged
  replicas dropped with :func:`healthy`, missing runs named with :func:`missing_runs`);
* ``CLAIMS`` (:func:`reproduce.verdicts.claims`: the paper's claims the check decides) and
  ``FIGURES`` (the stems it draws), read by the report (:mod:`reproduce.report`);
* optionally ``DEVICES`` (e.g. ``("cpu",)`` for an entry that never uses a GPU: another
  ``--device`` is refused before any work) and ``Config.validate()`` (its own settings,
  checked before any work, raising :class:`EntryError`).

:func:`main` parses the flags, runs what is not finished yet (each run's results are saved
atomically, so an interrupted entry started again with the same arguments continues),
prints the check, draws the figure (its footer carries the verdicts' regime cards) and saves
the verdicts for the ledger (:mod:`reproduce.ledger`). ``--plot-only`` redraws from saved
results; ``--plot-only --available`` draws the runs that have results and leaves the others
out; ``--plot-only --from-ledger`` redraws from the committed ledger.

A run's results are ``OUT/ENTRY/NAME_T{rounds}_{hash}.csv`` (+ ``.json``), where ``hash`` is
the start of the run's config fingerprint (the config's :meth:`EntryConfig.run_key`, the run's
name, parameters, round count and extras): runs that differ in anything that changes results
(``--rounds``, ``--seeds``, ...) have different files and never overwrite each other. Results
saved under the earlier name ``NAME.csv`` are still found when their fingerprint matches.
Shared flags that do not change results: ``--max-batch`` (the engine's client chunk, see
:class:`Run`), ``--threads`` (torch's intra-op threads on a CPU), ``--available``,
``--plot-only``, ``--quiet``, ``--reuse-stale``, ``--checkpoint-every``, the output folders,
the device.

Reuse is code-aware (:mod:`sims.store.runstore`): a saved run is reused only when the code that
computed it (:func:`sims.store.identity.code_digest`) is this checkout's, and every reuse is printed
("reused N saved runs (from commit X, DATE)"); results of other code are recomputed unless
``--reuse-stale``. Each run is computed under a per-run lock (a second process on the same
``--out`` waits, then reuses), engine runs checkpoint every ``--checkpoint-every`` seconds
(default 600; 0: never) and resume from the checkpoint after an interruption, and a replica
whose loss or parameters blow up is recorded in the ``diverged_at`` column, printed, marked
in the figure, and left out of the checks (:func:`healthy`). Settings and output folders are
validated before any run starts. ``--tiny`` draws its figures into ``OUT/figures`` (not the
committed ``figures/``) unless ``--figures`` is given, and every figure's footer states its
scale (seeds, rounds, data).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from sims.core import engine
from sims.core.interrupts import restore as restore_interrupts
from sims.store.checkpoint import interrupted_message, write_failed_message
from sims.data import DataError
from sims.store.digest import record_of as data_record
from sims.store.results import provenance, tidy, wall_time_fields
from sims.store.runstore import FolderError, RunStore, check_folder

from . import plotting

ROOT = Path(__file__).resolve().parent.parent


#: Config fields that say where and how an entry runs, not what it computes: left out of a
#: saved run's key (:meth:`EntryConfig.run_key`), not applied from a ledger record, carried
#: to a config an entry derives from its own (FedLADA's base tuning).
PLACE_FIELDS = ("out", "figures", "plot_only", "quiet", "device", "available", "max_batch",
                "threads", "reuse_stale", "checkpoint_every", "from_ledger")


@dataclass
class EntryConfig:
    seeds: int = 3                 # number of independent runs per configuration
    seed0: int = 0                 # first seed; seeds are seed0, seed0+1, ...
    rounds: int = 100
    data_dir: str | None = None
    device: str = "cpu"
    out: str = str(ROOT / "results")
    figures: str = str(ROOT / "figures")
    full: bool = False             # the paper's scale
    tiny: bool = False             # seconds-long smoke scale (tests)
    plot_only: bool = False
    quiet: bool = False
    available: bool = False        # with --plot-only: use the runs that have saved results
    max_batch: int = 0             # clients per engine chunk (0: the run's or engine's default)
    threads: int = 0               # torch intra-op threads on a CPU (0: torch's default)
    reuse_stale: bool = False      # reuse saved runs computed by other code (and say so)
    checkpoint_every: float = 600.0  # seconds between checkpoints of a running run (0: none)
    from_ledger: bool = False      # with --plot-only: the committed ledger's results and config

    def scale(self) -> None:
        """Apply the ``--full`` / ``--tiny`` presets (entries override)."""

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed0, self.seed0 + self.seeds))

    def run_key(self) -> dict:
        """The settings a saved run must match to be reused (every field but
        :data:`PLACE_FIELDS`)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in PLACE_FIELDS}

    def place(self) -> dict:
        """This config's :data:`PLACE_FIELDS`: where and how it runs, not what it computes."""
        return {k: getattr(self, k) for k in PLACE_FIELDS}


@dataclass
class Run:
    name: str                                    # file name stem, unique within the entry
    params: dict                                 # plotted columns (n, m, compressor, ...)
    build: Callable[[], tuple] | None = None     # -> (problem, algorithm, participation)
    rounds: int | None = None
    eval_every: int = 1
    eval_test: bool = True                       # also test loss/accuracy at eval rounds
    extra: dict = field(default_factory=dict)
    # The engine's chunk of clients run at once (None: the engine's 32 MiB rule, which caps
    # a ResNet-18 chunk at 8 clients; a GPU wants more). ``--max-batch`` overrides it. It
    # changes floating-point summation order only, so it is not part of the fingerprint.
    max_batch: int | None = None
    # False: evaluation leaves out the squared full-gradient norm ``grad_norm2`` (a backward
    # pass over the evaluation samples; costly for CNNs) where the entry does not plot it.
    # Saved results that have the metric serve such a run too.
    eval_grad: bool = True
    # Instead of ``build``: ``execute(cfg, seeds, progress) -> (tidy DataFrame, record dict)``
    # for runs that are not one engine run (Monte-Carlo experiments); ``progress(x)`` advances
    # the bar by ``x`` rounds.
    execute: Callable | None = None


class EntryError(Exception):
    """A one-line error for the command line."""


def items(text, kind=str, flag: str | None = None) -> list:
    """The values of a comma-separated list flag (``"1, 3,5"`` -> ``[1, 3, 5]`` with
    ``kind=int``), empty parts dropped. A part ``kind`` cannot read is an :class:`EntryError`
    naming ``flag``, or (without ``flag``) the ``ValueError`` for the caller's own message."""
    noun = {int: "integers", float: "numbers"}.get(kind, "values")
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        try:
            out.append(kind(part))
        except ValueError:
            if flag is None:
                raise
            raise EntryError(f"{flag}: cannot read {part!r}; give comma-separated {noun}") \
                from None
    return out


def flag_values(cfg, name: str, kind=str) -> list:
    """:func:`items` of the list flag ``--NAME`` (``cfg.NAME``; underscores as dashes)."""
    return items(getattr(cfg, name), kind, "--" + name.replace("_", "-"))


def _parser(entry, cfg_cls) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m reproduce.{entry_name(entry)}",
                                description=f"{entry.PAPER} {entry.TARGET}: {entry.TITLE}")
    for f in dataclasses.fields(cfg_cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.type in (bool, "bool"):
            p.add_argument(flag, action="store_true", default=None, help=f"(default {default})")
        else:
            kind = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
            if isinstance(default, int) and not isinstance(default, bool):
                kind = int
            elif isinstance(default, float):
                kind = float
            p.add_argument(flag, type=kind, default=None, help=f"(default {default})")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (repeatable): its sims.plugins.register calls add "
                        "algorithms, problems and models (the flag of every command, sims.cli)")
    return p


def parse_config(entry, argv=None):
    cfg_cls = entry.Config
    args = vars(_parser(entry, cfg_cls).parse_args(argv))
    from sims import cli
    try:
        cli.import_plugins(args.pop("imports", ()))
    except cli.CLIError as exc:
        raise EntryError(str(exc)) from None
    cfg = cfg_cls()
    for key in ("full", "tiny"):
        if args.get(key):
            setattr(cfg, key, True)
    cfg.scale()
    for key, val in args.items():
        if val is not None:
            setattr(cfg, key, val)
    if cfg.tiny and args.get("figures") is None:
        # a smoke run never replaces the committed figures
        cfg.figures = str(Path(cfg.out) / "figures")
    if cfg.from_ledger:                 # the settings the ledger's results were computed with
        from . import ledger
        ledger.apply_config(entry, cfg)
    validate(cfg, entry)
    return cfg


def validate(cfg: EntryConfig, entry=None) -> None:
    """The shared settings, then the entry's own ``Config.validate()`` when it has one, then
    (with ``entry``) the device it can use: one-line :class:`EntryError` before any work."""
    if cfg.seeds < 1:
        raise EntryError(f"--seeds must be >= 1, got {cfg.seeds}")
    if cfg.seed0 < 0:
        raise EntryError(f"--seed0 must be >= 0, got {cfg.seed0}")
    if cfg.rounds < 1:
        raise EntryError(f"--rounds must be >= 1, got {cfg.rounds}")
    if not cfg.checkpoint_every >= 0:                       # NaN too
        raise EntryError(f"--checkpoint-every must be >= 0 seconds (0: no checkpoints), "
                         f"got {cfg.checkpoint_every:g}")
    if getattr(cfg, "eval_every", 1) is not None and getattr(cfg, "eval_every", 1) < 1:
        raise EntryError(f"--eval-every must be >= 1, got {cfg.eval_every}")
    if cfg.available and not cfg.plot_only:
        raise EntryError("--available only applies with --plot-only")
    if cfg.from_ledger and not cfg.plot_only:
        raise EntryError("--from-ledger only applies with --plot-only")
    from sims import cli
    try:
        device = torch.device(cfg.device)
    except (RuntimeError, ValueError):
        raise EntryError(f"--device {cfg.device!r} is not a device torch knows "
                         "(cpu, cuda, cuda:1, ...)") from None
    if entry is not None and device.type not in getattr(entry, "DEVICES", (device.type,)):
        raise EntryError(f"--device {cfg.device}: {entry_name(entry)} runs on "
                         f"{' or '.join(entry.DEVICES)} only")
    if (getattr(cfg, "max_batch", 0) or 0) < 0:
        raise EntryError(f"--max-batch must be >= 0 (0: default), got {cfg.max_batch}")
    if cfg.threads < 0:
        raise EntryError(f"--threads must be >= 0 (0: torch's default), got {cfg.threads}")
    try:
        cli.check_device(cfg.device)          # the one device check of every command
    except cli.CLIError as exc:
        raise EntryError(str(exc)) from None
    if hasattr(cfg, "validate"):
        cfg.validate()


def refuse_cpu_default(cfg, job: str, tiny: str) -> None:
    """A GPU entry refuses to start its default on the CPU (hours of work) unless
    ``--cpu-ok`` (or ``--plot-only``) says so; ``job`` names the workload, ``tiny`` what
    ``--tiny`` runs instead. One line, before any work."""
    if str(cfg.device).startswith("cpu") and not (cfg.cpu_ok or cfg.plot_only):
        raise EntryError(f"this entry's default is {job}: pass --device cuda, or --tiny for "
                         f"{tiny}, or --cpu-ok to run on the CPU anyway")


def set_threads(cfg) -> None:
    """Apply ``--threads`` (on a CPU; 0 leaves torch's choice). On a machine whose cores are
    shared with other jobs, one thread avoids OpenMP threads waiting for a busy core."""
    if cfg.threads and str(cfg.device).startswith("cpu"):
        torch.set_num_threads(cfg.threads)


def entry_name(entry) -> str:
    """``"fig8"`` for ``reproduce.fig8``, also when run as ``python -m reproduce.fig8``."""
    spec = getattr(entry, "__spec__", None)
    return (spec.name if spec else entry.__name__).rsplit(".", 1)[-1]


def results_dir(entry, cfg) -> Path:
    return Path(cfg.out) / entry_name(entry)


def _fingerprint(cfg, run: Run) -> str:
    """The run's config fingerprint (settings only; :mod:`sims.store.runstore` joins the code)."""
    blob = json.dumps({"cfg": cfg.run_key(), "run": run.name, "params": run.params,
                       "rounds": run.rounds, "extra": run.extra}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_stem(cfg, run: Run) -> str:
    """The file stem of a run's results: its name, round count and fingerprint start."""
    return f"{run.name}_T{run.rounds or cfg.rounds}_{_fingerprint(cfg, run)[:8]}"


def store(entry, cfg, say=print) -> RunStore:
    return RunStore(results_dir(entry, cfg), reuse_stale=cfg.reuse_stale, say=say,
                    checkpoint_every=cfg.checkpoint_every)


def find_saved(outdir, cfg, run: Run, runs_store: RunStore | None = None):
    """The saved ``(DataFrame, record)`` of ``run`` under this config and this code (or
    other code with ``--reuse-stale``), or None: the file named by :func:`run_stem`, else one
    saved under the run's bare name (the earlier naming), if its fingerprint matches. A run
    that evaluates the gradient norm does not take results without it."""
    runs_store = runs_store or RunStore(outdir, reuse_stale=cfg.reuse_stale)
    found = runs_store.lookup((run_stem(cfg, run), run.name), _fingerprint(cfg, run),
                              accept=lambda rec: not (run.eval_grad
                                                      and rec.get("eval_grad") is False))
    return None if found is None else (found.df, found.record)


class _NoGradEval:
    """A problem whose evaluation leaves out ``grad_norm2`` (see :attr:`Run.eval_grad`):
    ``evaluate(theta, test, grad=False)`` where the problem takes ``grad`` (it then skips the
    backward pass), else the metric is dropped from the problem's evaluation."""

    def __init__(self, problem):
        import inspect
        self._problem = problem
        self._takes_grad = "grad" in inspect.signature(problem.evaluate).parameters

    def __getattr__(self, name):
        return getattr(self._problem, name)

    def evaluate(self, theta, test: bool = True):
        out = (self._problem.evaluate(theta, test, grad=False) if self._takes_grad
               else self._problem.evaluate(theta, test))
        out.pop("grad_norm2", None)
        return out


def _replica_chunks(problem, algorithm, seeds, budget_bytes=3e9):
    n_vec = sum(1 for v in algorithm.client_state_spec().values() if v == "vector")
    per = 4 * problem.d * (problem.n_clients * n_vec + 16) + 1
    size = max(1, int(budget_bytes // per))
    return [seeds[i:i + size] for i in range(0, len(seeds), size)]


def check_folders(entry, cfg) -> None:
    """The output folders exist as folders and can be written (before any work)."""
    try:
        if not cfg.plot_only:
            check_folder(cfg.out, "--out")
            check_folder(results_dir(entry, cfg), "--out")
        check_folder(cfg.figures, "--figures")
    except FolderError as exc:
        raise EntryError(str(exc)) from None


def execute(entry, cfg, progress=None, say=print) -> pd.DataFrame:
    """Run every unfinished run of ``entry`` and return all results as one table; ``say``
    prints what is reused, recomputed or waited for."""
    set_threads(cfg)
    if getattr(cfg, "from_ledger", False):
        from . import ledger
        check_folders(entry, cfg)
        return ledger.load_results(entry)
    runs = entry.runs(cfg)
    if not runs:
        raise EntryError(f"{entry_name(entry)}: the flags select no runs (an empty list flag?)")
    check_folders(entry, cfg)
    outdir = results_dir(entry, cfg)
    saved = store(entry, cfg, say)
    frames, todo = [], []
    for run in runs:
        found = find_saved(outdir, cfg, run, saved)
        if found is not None:
            frames.append(found[0])
        else:
            todo.append(run)
    saved.report(recompute=not cfg.plot_only)
    if cfg.plot_only:
        if getattr(cfg, "available", False):
            if not frames:
                raise EntryError(f"--available: no saved results for any of the {len(runs)} "
                                 f"run(s) in {outdir}")
            return pd.concat(frames, ignore_index=True)
        if todo:
            raise EntryError(f"--plot-only: no saved results for {len(todo)} run(s) in {outdir} "
                             f"(first: {todo[0].name}); run without --plot-only first, or add "
                             "--available to draw what is there")
        return pd.concat(frames, ignore_index=True)
    preflight(todo)
    bar = _progress(cfg, todo)
    try:
        for run in todo:
            with saved.lock(run_stem(cfg, run), run.name):
                # the process we waited for (or one that got there first) may have computed
                # it, possibly on other code: taken under the same --reuse-stale rule as the
                # runs found at the start, not recomputed
                meanwhile = RunStore(outdir, reuse_stale=cfg.reuse_stale)
                found = find_saved(outdir, cfg, run, meanwhile)
                if found is not None:
                    stale = any(s for _, s in meanwhile.reused)
                    say(f"run {run.name}: computed meanwhile by another process"
                        + (" on OTHER code than this checkout's; reused (--reuse-stale)"
                           if stale else "; reused"))
                    bar.update(run.rounds or cfg.rounds)
                    frames.append(found[0])
                    continue
                frames.append(_compute(entry, cfg, run, saved, bar))
    finally:
        bar.close()
    return pd.concat(frames, ignore_index=True)


def preflight(runs) -> None:
    """Build every run that is about to be computed once (its problem, algorithm and
    participation) and check the participation against the problem's population, so that
    a setting that cannot run fails in one line before any run is computed (not after the
    runs before it)."""
    from sims.core.participation import ParticipationError
    for run in runs:
        if run.build is None:
            continue
        problem, _, participation = run.build()
        try:
            participation.check(problem.n_clients)
        except ParticipationError as exc:
            raise EntryError(f"run {run.name}: {exc}") from None


def _compute(entry, cfg, run: Run, saved: RunStore, bar) -> pd.DataFrame:
    """Compute one run (checkpointed engine runs, resumed where a checkpoint exists), save
    it, remove its checkpoints, and return its table."""
    started, wall_started = time.perf_counter(), time.time()
    rounds = run.rounds or cfg.rounds
    stem, cfp = run_stem(cfg, run), _fingerprint(cfg, run)
    base = {"entry": entry_name(entry), "run": run.name, "params": run.params}
    if run.execute is not None:
        bar.set_description(run.name)
        df, extra = run.execute(cfg, cfg.seed_list, bar.update)
        record = provenance(cfg, cfg.seed_list, time.perf_counter() - started,
                            {**base, **extra}, started=wall_started)
        saved.save(df, record, stem, cfp)
        return df
    problem, algorithm, participation = run.build()
    parts, diverged, checkpoints, resumed, other_code = [], [], [], [], False
    before = 0.0                         # engine seconds spent before the checkpoints resumed
    chunks = _replica_chunks(problem, algorithm, cfg.seed_list)
    max_batch = getattr(cfg, "max_batch", 0) or run.max_batch or None
    engine_problem = problem if run.eval_grad else _NoGradEval(problem)
    for chunk in chunks:
        bar.set_description(f"{run.name} seeds {chunk[0]}-{chunk[-1]}")
        ckpt = saved.checkpointer(stem, cfp, f"s{chunk[0]}-{chunk[-1]}")
        if ckpt is not None:
            # the last round is checkpointed too: a finished chunk is kept until all are, and
            # a run whose results cannot be saved (a full disk) keeps all its work
            ckpt.final = True
            checkpoints.append(ckpt)
            state_t = ckpt.saved_round()
            if state_t:
                saved.say(f"run {run.name}: resuming seeds {chunk[0]}-{chunk[-1]} from its "
                          f"checkpoint at round {state_t}")
                bar.update(state_t / len(chunks))
                resumed.append(state_t)
                other_code |= ckpt.other_code
        out = engine.run(engine_problem, algorithm, participation, rounds, chunk,
                         eval_every=run.eval_every, eval_test=run.eval_test,
                         max_batch=max_batch, checkpoint=ckpt,
                         progress=lambda t: bar.update(1 / len(chunks)))
        bar.update((rounds - len(out.participants[0])) / len(chunks))
        if ckpt is not None and ckpt.resumed_from:
            before += ckpt.resumed_elapsed
        parts.append(tidy(out, run.name, run.params))
        diverged += [d for d in out.diverged_at]
    df = pd.concat(parts, ignore_index=True)
    timing = wall_time_fields(time.perf_counter() - started, resumed, before)
    record = provenance(cfg, cfg.seed_list, timing["wall_time_s"],
                        {**base, "algorithm": algorithm.describe(),
                         "participation": participation.describe(),
                         "problem": describe_problem(problem),
                         "data": data_record(problem),
                         "diverged_at_round": diverged, "blowup": engine.BLOWUP,
                         "resumed_from_round": resumed,
                         "resumed_from_other_code": other_code,
                         "max_batch": max_batch, "eval_grad": run.eval_grad, **timing},
                        started=wall_started)
    saved.save(df, record, stem, cfp)
    for ckpt in checkpoints:
        ckpt.clear()
    return df



def missing_runs(entry, cfg, df: pd.DataFrame) -> list[str]:
    """Names of the entry's runs (``entry.runs(cfg)``; with ``--from-ledger`` the runs its filed
    record names, :func:`reproduce.ledger.filed_runs`) that have no rows in ``df``: a check
    given partial results (``--plot-only --available``) says which are missing and gives no
    verdict that needs them."""
    names = run_names(entry, cfg)
    if names is None:                       # a record filed before it named its runs
        return []
    present = set(df["run"].unique()) if len(df) and "run" in df else set()
    if len(df) and "sweep" in df:           # a sweep's rows are named by grid point
        present |= set(df["sweep"].dropna().astype(str))
    return [name for name in names if name not in present]


def run_names(entry, cfg) -> list[str] | None:
    """The names of the entry's runs: ``entry.runs(cfg)``'s, or with ``--from-ledger`` the ones
    its filed record names (:func:`reproduce.ledger.filed_runs`; nothing is built or tuned;
    None where the record names none, and its table's runs stand for them)."""
    if getattr(cfg, "from_ledger", False):
        from . import ledger
        return ledger.filed_runs(entry)
    return [r.name for r in entry.runs(cfg)]


def diverged_replicas(df: pd.DataFrame) -> pd.DataFrame:
    """``(run, seed, diverged_at)`` of every replica recorded as diverged (empty if none)."""
    if "diverged_at" not in df or not df["diverged_at"].notna().any():
        return pd.DataFrame(columns=["run", "seed", "diverged_at"])
    bad = df[df["diverged_at"].notna()]
    return (bad.groupby(["run", "seed"], sort=True)["diverged_at"].first().reset_index())


def usable(entry, cfg, df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """What a check may use: ``(rows of healthy replicas, lines)``, where the lines name the
    runs with no results (:func:`missing_runs`; no verdict that needs them) and the replicas
    left out as diverged (:func:`diverged_replicas`): a diverged run is never evidence."""
    lines = []
    missing = missing_runs(entry, cfg, df)
    if missing:
        lines.append(f"missing results for {len(missing)} run(s): {', '.join(missing)} "
                     "(no verdict that needs them)")
    bad = diverged_replicas(df)
    if len(bad):
        lines.append(f"DIVERGED: {len(bad)} replica(s) left out (never evidence): " + ", ".join(
            f"{r.run} seed {r.seed} at round {r.diverged_at:g}" for r in bad.itertuples()))
    return healthy(df), lines


def without_nonfinite(df: pd.DataFrame, metric: str, lines: list[str]) -> pd.DataFrame:
    """``df`` without the runs where ``metric`` is ever non-finite (a run the engine did not
    flag as diverged still never counts as evidence), named in ``lines``."""
    bad = df[(df.metric == metric) & ~np.isfinite(df["value"].astype(float))]
    if not len(bad):
        return df
    runs_bad = sorted(set(bad["run"]))
    lines.append(f"DIVERGED: {', '.join(runs_bad)} (left out, never evidence)")
    return df[~df["run"].isin(runs_bad)]


def _changed(cfg) -> str:
    """`` with --KEY VALUE ...``: the settings of ``cfg`` (:meth:`EntryConfig.run_key`) that
    differ from its entry's defaults, so a footer never calls a changed run the default."""
    try:
        default = type(cfg)().run_key()
    except TypeError:                       # a config without defaults for every field
        return ""
    diff = [(k, v) for k, v in cfg.run_key().items() if k in default and default[k] != v]
    return (" with " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in diff)) if diff else ""


@dataclass(frozen=True)
class FigureScope:
    """The part of an entry's results one figure draws, so that its footer
    (:func:`scale_note`, :func:`check_and_plot`) names that part's missing and diverged runs
    and its claims' regime, not the whole entry's: the rows whose columns equal ``where``'s
    values (a tuple or list: any of them; a column a table lacks selects nothing away), of
    the paper protocol's runs (``protocol="paper"``), the tuned comparison's (``"tuned"``)
    or both (None); ``claims(verdict) -> bool`` keeps the verdicts whose regime it states
    (None: every one)."""
    where: dict = field(default_factory=dict)
    protocol: str | None = None
    claims: Callable | None = None

    def _keeps(self, key, value) -> bool:
        want = self.where[key]
        return value in want if isinstance(want, (tuple, list)) else value == want

    def rows(self, df: pd.DataFrame) -> pd.DataFrame:
        if self.protocol is not None:
            from .protocols import split_tuned
            df = split_tuned(df)[self.protocol == "tuned"]
        for key, want in self.where.items():
            if key in df:
                df = df[df[key].isin(list(want) if isinstance(want, (tuple, list)) else [want])]
        return df

    def keeps_run(self, run: Run | None) -> bool:
        """Whether a run of the entry (None: one known by name only) is in scope."""
        if run is None:
            return True
        if self.protocol is not None and \
                (run.params.get("tuning") == "tuned") != (self.protocol == "tuned"):
            return False
        return all(self._keeps(k, run.params[k]) for k in self.where if k in run.params)

    def keeps_claim(self, verdict) -> bool:
        return self.claims is None or bool(self.claims(verdict))


def scale_note(entry, cfg, df: pd.DataFrame | None = None,
               scope: FigureScope | None = None) -> str:
    """What a figure shows, for its footer: the scale preset, seeds, rounds, data, and the
    runs that are missing or diverged (of ``scope``'s part only, where given)."""
    preset = ("--tiny smoke scale (NOT the paper's)" if cfg.tiny else
              "--full (paper scale)" if cfg.full else "CPU default scale" + _changed(cfg))
    seeds = (f"seed {cfg.seed0}" if cfg.seeds == 1 else
             f"{cfg.seeds} seeds ({cfg.seed0}-{cfg.seed0 + cfg.seeds - 1})")
    parts = [f"{entry.PAPER} {entry.TARGET}: {preset}", seeds, f"{cfg.rounds} rounds"]
    title = getattr(cfg, "dataset_title", None)     # names the stand-in the run resolved to
    data = (title() if callable(title) else
            getattr(cfg, "dataset", None) or getattr(cfg, "datasets", None))
    if data:
        parts.append(f"data {data}")
    note = ", ".join(parts)
    if df is not None:
        missing = missing_runs(entry, cfg, df)
        if scope is not None:
            df = scope.rows(df)
            # a run known by name only (a filed record's, --from-ledger) stays listed
            known = ({r.name: r for r in entry.runs(cfg)}
                     if missing and not getattr(cfg, "from_ledger", False) else {})
            missing = [m for m in missing if scope.keeps_run(known.get(m))]
        if missing:
            note += (f"\nMISSING {len(missing)} run(s), not drawn: {', '.join(missing[:6])}"
                     + (" ..." if len(missing) > 6 else ""))
        from .protocols import split_tuned
        drawn, tuning = split_tuned(df)
        bad = diverged_replicas(drawn)
        if len(bad):
            items = [f"{r.run} seed {r.seed} (round {r.diverged_at:g})"
                     for r in bad.itertuples()]
            note += (f"\nDIVERGED, marked x and left out of means: {', '.join(items[:6])}"
                     + (" ..." if len(items) > 6 else ""))
        keys = [k for k in ("run", "point", "seed") if k in tuning]
        cells = (tuning.loc[tuning["diverged_at"].notna(), keys].drop_duplicates()
                 if len(tuning) and "diverged_at" in tuning else tuning.iloc[:0])
        if len(cells):
            note += (f"\n{len(cells)} cell(s) of the tuned comparison's grids "
                     "diverged (never picked)")
    return note


def healthy(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the (run, seed) replicas recorded as diverged (a non-null
    ``diverged_at`` column, when results carry one): a diverged run is never evidence."""
    if "diverged_at" not in df:
        return df
    return df[df["diverged_at"].isna()]


def _progress(cfg, todo):
    from tqdm.auto import tqdm
    total = sum(r.rounds or cfg.rounds for r in todo)
    return tqdm(total=total, unit="round", disable=cfg.quiet or not todo, file=sys.stderr,
                dynamic_ncols=True, bar_format="{l_bar}{bar}| {n:.0f}/{total} rounds "
                "[{elapsed}<{remaining}]")


def one_engine_run(build, name: str, params: dict, rounds: int | None = None,
                   observers=()) -> Callable:
    """A :class:`Run`'s ``execute`` for a run that is one plain engine run of every seed at
    once on one thread (the synthetic entries: a quadratic problem measured every round, no
    checkpoints or evaluation chunks): ``build(cfg) -> (problem, algorithm, participation)``;
    ``rounds`` defaults to ``cfg.rounds``; ``observers`` go to :func:`sims.core.engine.run`.
    Returns ``(tidy table, record)`` as ``execute`` must."""
    from sims.experiments.synthetic import torch_threads

    def execute(cfg, seeds, progress):
        prob, alg, part = build(cfg)
        with torch_threads(1):
            res = engine.run(prob, alg, part, rounds or cfg.rounds, seeds,
                             observers=observers, progress=lambda t: progress(1))
        return tidy(res, name, params), {"algorithm": alg.describe(),
                                         "participation": part.describe(),
                                         "problem": describe_problem(prob),
                                         "diverged_at_round": res.diverged_at}
    return execute


def describe_problem(problem) -> dict:
    desc = {"type": type(problem).__name__, "n_clients": problem.n_clients, "d": problem.d}
    if hasattr(problem, "dataset"):
        desc.update(dataset=problem.dataset.name, source=problem.dataset.source,
                    model=type(problem.model).__name__, batch_size=problem.batch_size,
                    local_epochs=problem.local_epochs, local_steps=problem.local_steps,
                    client_sizes=sorted({len(p) for p in problem.parts}))
        if getattr(problem, "augment", None):   # the training augmentation and its padding
            desc.update(augment=problem.augment, pad=problem.pad)
        if hasattr(problem, "gram_path"):       # which fused path ran (rounding differs)
            desc["local_sgd_path"] = "gram" if problem.gram_path else "direct"
    if hasattr(problem, "constants"):
        desc["constants"] = problem.constants()
    return desc


@lru_cache(maxsize=4)
def cached_dataset(name: str, data_dir: str | None):
    from sims.data import load_dataset
    return load_dataset(name, data_dir)


@lru_cache(maxsize=8)
def cached_problem(dataset: str, data_dir: str | None = None, **kw):
    """Build an image problem once per process (runs of one entry share it)."""
    from sims.problems.image import build_image_problem
    return build_image_problem(dataset, data=cached_dataset(dataset, data_dir), **kw)


def check_and_plot(entry, cfg, df):
    """The check first (its verdicts and regime cards, :mod:`reproduce.verdicts`), then the
    figures, whose footers carry the scale and the regime of the verdicts
    (:func:`reproduce.regime.footer_text`): ``(lines, figure paths)``."""
    from .regime import footer_text
    from .verdicts import verdicts_of
    lines = entry.check(df, cfg)
    verdicts = verdicts_of(lines)

    def footer(scope: FigureScope | None = None) -> str:
        note = scale_note(entry, cfg, df, scope)
        regime = footer_text([v for v in verdicts if scope is None or scope.keeps_claim(v)])
        return note + ("\n" + regime if regime else "")
    with plotting.footer(footer):
        paths = entry.plot(df, cfg)
    return lines, paths


def main(entry, argv=None) -> int:
    from . import ledger
    from .verdicts import text
    restore_interrupts()
    from sims.core import malloc
    malloc.tune_for_command()              # this process is the command's
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cfg = parse_config(entry, argv)
        df = execute(entry, cfg)
        lines, paths = check_and_plot(entry, cfg, df)
        if not cfg.from_ledger:
            ledger.record(entry, cfg, argv, df, lines, paths)
    except (EntryError, DataError, ValueError) as exc:
        if os.environ.get("FEDTOOLKIT_DEBUG"):
            raise
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:                      # a full disk, an unwritable output
        print(f"error: {write_failed_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(interrupted_message(exc, "runs"), file=sys.stderr)
        return 130
    missing = missing_runs(entry, cfg, df)
    if missing:
        print(f"missing: {len(missing)} of {len(run_names(entry, cfg))} runs have no results "
              f"({', '.join(missing)}); the figure and the check use the others")
    for run, grp in diverged_replicas(df).groupby("run", sort=True):
        seeds = ", ".join(f"seed {r.seed} at round {r.diverged_at:g}" for r in grp.itertuples())
        print(f"diverged: run {run}: {seeds} (non-finite or blown-up loss or parameters): "
              "marked in the figure, no evidence for the check")
    for p in paths:
        print(f"figure: {p}")
    print(f"results: {results_dir(entry, cfg)}")
    print(text(lines))
    return 0

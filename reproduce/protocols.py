"""Tuning protocols as one mechanism on :mod:`sims.experiments.sweep`: how the compared methods' settings
were chosen, run through the sweep API and recorded with every verdict that rests on them.

Two protocols back every comparison the papers make (issue: "Verdicts that decide"):

* **the paper's protocol as printed** (:func:`paper_fixed`, :func:`paper_grid`,
  :func:`two_step`): the paper's fixed per-family settings where it fixed them (FedLADA Sec.
  4.1's rates, FedAda2 Tables 3-6's points, Fed-EF Table 1), or its grids and selection rule
  where it tuned (Fed-LAMB supplement Table 1 selected at round 100 on 3 seeds; FedAda2 App.
  H.2's two-step tuning with App. H.1's running average of the last 10 logged points);
* **a symmetric tuned comparison** (:func:`tune`): every compared method over a bracketed grid
  of the hyperparameters that matter (:class:`Bracket`), the grid extended by one step while
  a method's pick sits on an extendable edge, selected by the paper's rule at the horizon
  actually plotted, on at least 3 seeds.

Each returns a :class:`Tuning`: the sweep's tidy table (every cell, resumable under
``OUT/sweeps``), the selection summary, the picks, the extension history and a
:class:`Protocol` record. A verdict names the protocol it rests on
(``verdicts.above(..., protocol=tuning.protocol)``) and the protocol's conformance (selection
seeds, selection horizon against the plotted one, picks interior) joins the claim's regime
card (:meth:`Protocol.card_items`): a comparison not tuned as its protocol says is not a test
of the claim under that protocol.

Selection rules: every rule of :data:`sims.experiments.sweep.RULES`, and :data:`EXTRA_RULES`:
``running10-acc`` (FedAda2 App. H.1 read literally: the best, over the logged points, of the
running average of the last 10 logged test accuracies).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from sims.experiments.sweep import Axis, Grid, SweepSpec, run_sweep, summarize
from sims.experiments.sweep.execute import NotSaved
from sims.experiments.sweep.grid import GridError

TUNED_SEEDS = 3            # the symmetric tuned protocol's least number of selection seeds
MAX_EXTENSIONS = 4         # edge extensions per method before giving up (recorded)


# ------------------------------------------------------------------------------ the record
@dataclass(frozen=True)
class Protocol:
    """How the compared settings were chosen. ``kind``: ``paper`` (the paper's protocol as
    printed), ``tuned`` (the symmetric tuned comparison), ``pilot`` (settings from a recorded
    pilot, neither of the two) or ``none`` (nothing tuned: a synthetic experiment at the
    theorem's settings). ``seeds`` / ``horizon``: what the selection used; ``plotted``: the
    horizon the verdict reads; ``required_seeds``: the protocol's least number of selection
    seeds; ``interior``: every pick strictly inside its bracket (tuned)."""
    kind: str
    text: str
    rule: str | None = None
    seeds: int | None = None
    horizon: int | None = None
    plotted: int | None = None
    required_seeds: int | None = None
    interior: bool | None = None
    source: str = ""

    def describe(self) -> str:
        extra = []
        if self.rule:
            extra.append(f"rule {self.rule}")
        if self.horizon is not None:
            extra.append(f"selected at round {self.horizon}")
        if self.seeds is not None:
            extra.append(f"{self.seeds} seed{'s' if self.seeds != 1 else ''}")
        return f"{self.kind}: {self.text}" + (f" ({', '.join(extra)})" if extra else "")

    def card_items(self) -> list:
        """Conformance items for a claim's regime card (:mod:`reproduce.regime`)."""
        from . import regime as rg
        items = []
        if self.kind in ("paper", "tuned") and self.horizon is not None and self.plotted:
            items.append(rg.value("selection horizon", self.horizon, self.plotted, rg.equal(),
                                  f"{self.kind} protocol: selected at the plotted horizon"))
        if self.kind in ("paper", "tuned") and self.required_seeds and self.seeds is not None:
            items.append(rg.value("selection seeds", self.seeds, self.required_seeds,
                                  rg.at_least(self.required_seeds),
                                  f"{self.kind} protocol: {self.required_seeds} seeds"))
        if self.kind == "tuned" and self.interior is not None:
            items.append(rg.premise("picks interior to their grids", self.interior,
                                    "tuned protocol: edges extended"))
        return items


def paper_fixed(text: str, source: str = "") -> Protocol:
    """The paper's fixed settings (nothing selected here)."""
    return Protocol("paper", text, source=source)


def pilot(text: str, seeds: int, horizon: int, plotted: int, source: str = "") -> Protocol:
    return Protocol("pilot", text, seeds=seeds, horizon=horizon, plotted=plotted,
                    source=source)


def none(text: str = "no tuning: the theorem's settings") -> Protocol:
    return Protocol("none", text)


# ------------------------------------------------------------------------------ selection
def _running10_best(values: pd.Series) -> float:
    v = values.to_numpy(dtype=float)
    if len(v) == 0:
        return math.nan
    w = min(10, len(v))
    return float(pd.Series(v).rolling(w, min_periods=w).mean().max())


#: Rules beyond :data:`sims.experiments.sweep.RULES`: name -> (metric, per-cell statistic, best, source).
EXTRA_RULES = {
    "running10-acc": ("test_acc", _running10_best, "max",
                      "FedAda2 App. H.1: best test accuracy over a running average of the last "
                      "10 logged datapoints"),
}


def rule_names() -> list[str]:
    from sims.experiments.sweep import RULES
    return [*RULES, *EXTRA_RULES]


def select(table: pd.DataFrame, rule: str, by=("algorithm",), at: int | None = None,
           reference: float | None = None) -> pd.DataFrame:
    """:func:`sims.experiments.sweep.summarize` of ``table`` by ``rule`` (any of :func:`rule_names`),
    read at round ``at`` (the plotted horizon; default: the last round): one row per point,
    ``score``, ``rank``, ``selected`` (diverged points never selected)."""
    if at is not None:
        table = table[table["round"] <= at]
    if rule not in EXTRA_RULES:
        return summarize(table, rule, by, reference)
    metric, stat, best, _ = EXTRA_RULES[rule]
    summary = summarize(table, "final-acc", by)
    sub = table[table["metric"] == metric].sort_values(["point", "seed", "round"])
    per = sub.groupby(["point", "seed"])["value"].apply(stat).groupby("point")
    summary["score"] = summary["point"].map(per.mean())
    summary["score_std"] = summary["point"].map(per.std())
    valid = np.isfinite(summary["score"].to_numpy(float)) & ~summary["diverged"]
    key = summary["score"].where(valid)
    key = -key if best == "max" else key
    summary["rank"] = 0
    summary["selected"] = False
    order = np.arange(len(summary))
    groups = summary.groupby([b for b in by if b in summary], sort=False) if by else [((), summary)]
    for _, g in groups:
        ranked = g.assign(_k=key[g.index], _o=order[g.index]).sort_values(
            ["_k", "_o"], na_position="last")
        summary.loc[ranked.index, "rank"] = np.arange(1, len(g) + 1)
        if np.isfinite(ranked["_k"].iloc[0]):
            summary.loc[ranked.index[0], "selected"] = True
    summary["rule"] = rule
    return summary


# ------------------------------------------------------------------------------ brackets
@dataclass(frozen=True)
class Bracket:
    """One hyperparameter's grid for one method: ascending ``values``; ``step`` the factor
    between neighbours by which the grid is extended (``None``: a fixed, unextendable axis,
    e.g. a categorical one or a paper's printed grid); ``lo`` / ``hi`` hard limits.
    ``ladder`` (with no ``step``): the paper's whole grid for this axis, of which ``values`` is
    a pruned part; the grid is then extended to the ladder's next value off an edge, never past
    the ladder's own ends (a pruned grid searched as the paper's whole-grid selection would)."""
    key: str
    values: tuple
    step: float | None = None
    lo: float | None = None
    hi: float | None = None
    ladder: tuple | None = None

    def __post_init__(self):
        vals = tuple(sorted(float(v) for v in self.values))
        if not vals:
            raise GridError(f"bracket {self.key} has no values")
        object.__setattr__(self, "values", vals)
        if self.ladder is not None:
            if self.step is not None:
                raise GridError(f"bracket {self.key}: a ladder or a step, not both")
            object.__setattr__(self, "ladder", tuple(sorted(float(v) for v in self.ladder)))

    def _beyond(self, side: str) -> float | None:
        """The ladder's next value past this grid's ``side`` edge (None: none)."""
        if side == "low":
            below = [v for v in self.ladder if v < self.values[0] * (1 - 1e-9)]
            return below[-1] if below else None
        above = [v for v in self.ladder if v > self.values[-1] * (1 + 1e-9)]
        return above[0] if above else None

    def at_edge(self, value) -> str | None:
        """``"low"`` / ``"high"`` when ``value`` is this grid's smallest / largest value and
        the grid can be extended past it (a one-value grid is on both edges)."""
        if self.step is None and self.ladder is None:
            return None
        if np.isclose(value, self.values[0]) and self._can("low"):
            return "low"
        if np.isclose(value, self.values[-1]) and self._can("high"):
            return "high"
        return None

    def _can(self, side: str) -> bool:
        if self.ladder is not None:
            return self._beyond(side) is not None
        if side == "low":
            new = self.values[0] / self.step
            return self.lo is None or new >= self.lo * (1 - 1e-12)
        new = self.values[-1] * self.step
        return self.hi is None or new <= self.hi * (1 + 1e-12)

    def extend(self, side: str) -> "Bracket":
        if self.ladder is not None:
            new = (self._beyond(side),)
        else:
            new = (self.values[0] / self.step,) if side == "low" else (self.values[-1] * self.step,)
        return replace(self, values=tuple(float(f"{v:.12g}") for v in
                                          sorted(self.values + new)))

    def interior(self, value) -> bool:
        """``value`` strictly inside the grid, or on an edge the grid cannot extend past."""
        if (self.step is None and self.ladder is None
                or len(self.values) == 1 and not (self._can("low") or self._can("high"))):
            return True
        return self.at_edge(value) is None


def bracket(key: str, center: float, step: float = math.sqrt(10), width: int = 1,
            lo: float | None = None, hi: float | None = None) -> Bracket:
    """``center * step^k`` for ``k = -width .. width`` (a log grid around a paper's or a
    pilot's value), extendable by ``step``."""
    vals = tuple(float(f"{center * step ** k:.12g}") for k in range(-width, width + 1))
    vals = tuple(v for v in vals if (lo is None or v >= lo) and (hi is None or v <= hi))
    return Bracket(key, vals, step, lo, hi)


def neighbours(values, center, width: int = 1) -> tuple:
    """``center`` and its ``width`` neighbours on each side in a printed grid ``values`` (the
    "near" grids of the Fed-LAMB entries: a bracket inside a paper's table)."""
    vals = list(values)
    i = vals.index(center)
    return tuple(vals[max(0, i - width): i + width + 1])


@dataclass(frozen=True)
class Method:
    """One compared method in a tuning: ``label`` (its name in the comparison), the registry
    ``algorithm``, ``fixed`` settings and its :class:`Bracket` axes. ``folder``: the sweep
    (under the setup's ``out``) its cells are saved in, default ``TUNING-LABEL``; a tuning
    that runs cells another run of the entry also runs names that run's sweep, so the two
    share them (a cell's files are named by what it computes, never by the sweep)."""
    label: str
    algorithm: str
    fixed: dict = field(default_factory=dict)
    brackets: tuple = ()
    folder: str = ""

    def grid(self, brackets=None) -> Grid:
        bs = self.brackets if brackets is None else brackets
        return Grid({self.algorithm: dict(self.fixed)},
                    [Axis(b.key, b.values, self.algorithm) for b in bs])


@dataclass
class Tuning:
    """What a protocol ran and picked: ``table`` (every cell of every method's final grid,
    tidy, with ``method``), ``summary`` (one row per point: score, rank, selected, ``method``),
    ``picks`` (``{label: settings}``), ``history`` (``[(label, step, what)]``: extensions and
    steps), ``protocol``."""
    table: pd.DataFrame
    summary: pd.DataFrame
    picks: dict
    history: list
    protocol: Protocol

    def selected(self) -> pd.DataFrame:
        """The tidy rows of every method's selected point (``run`` = the method's label)."""
        chosen = self.summary[self.summary["selected"]]
        rows = []
        for _, r in chosen.iterrows():
            sub = self.table[(self.table["method"] == r["method"])
                             & (self.table["point"] == r["point"])]
            rows.append(sub.assign(run=r["method"]))
        return pd.concat(rows, ignore_index=True) if rows else self.table.iloc[:0]


@dataclass
class Setup:
    """The problem every method of a tuning runs on (as :class:`sims.experiments.sweep.SweepSpec`)."""
    problem: dict
    build_problem: object
    participation: str = "full"
    rounds: int = 100
    eval_every: int = 1
    out: str = "results/sweeps"
    device: str = "cpu"
    executor: str = "inprocess"
    plan: str = "auto"
    threads: int = 0
    ray_address: str | None = None
    progress: object = None
    #: user-level DP around every cell (:attr:`sims.experiments.sweep.SweepSpec.dp`: clip,
    #: sigma, delta, ...); None: none
    dp: dict | None = None
    #: reuse saved cells computed by other code (an entry's ``--reuse-stale``; the sweep
    #: says how many); False: recompute them
    reuse_stale: bool = False
    #: the server's averaging in every cell (:attr:`sims.experiments.sweep.SweepSpec.aggregation`:
    #: ``"uniform"`` or ``"sample-weighted"``)
    aggregation: str = "uniform"
    #: seconds between checkpoints of a running unit (an entry's ``--checkpoint-every``;
    #: 0: none, an interrupted unit starts again)
    checkpoint_every: float = 0.0
    #: compute nothing, read saved cells only (an entry's ``--plot-only``): a tuning with a
    #: cell not saved is a one-line error, not a computation
    saved_only: bool = False

    @classmethod
    def of_entry(cls, cfg, problem: dict, build_problem, **settings) -> "Setup":
        """The setup of an entry's sweep or tuning: its cells under ``OUT/sweeps/``, run as
        the entry's ``cfg`` says (device, executor, plan, threads, Ray address), reusing
        cells of other code with its ``--reuse-stale``, checkpointing running units every
        ``--checkpoint-every`` seconds and, under ``--plot-only``, computing nothing (saved
        cells only); ``settings``: the rest (participation, rounds,
        eval_every, progress, dp, aggregation) and any override of those."""
        from pathlib import Path
        return cls(problem, build_problem, **{
            "out": str(Path(cfg.out) / "sweeps"), "device": getattr(cfg, "device", "cpu"),
            "executor": getattr(cfg, "executor", "inprocess"),
            "plan": getattr(cfg, "plan", "auto"), "threads": getattr(cfg, "threads", 0) or 1,
            "ray_address": getattr(cfg, "ray_address", None),
            "reuse_stale": bool(getattr(cfg, "reuse_stale", False)),
            "checkpoint_every": float(getattr(cfg, "checkpoint_every", 0) or 0),
            "saved_only": bool(getattr(cfg, "plot_only", False)),
            **settings})

    def sweep(self, name: str, grid: Grid, seeds):
        """Run (or read back) every cell of ``grid`` x ``seeds`` under ``OUT/NAME``: the
        :class:`sims.experiments.sweep.SweepResult` and the sweep's folder."""
        spec = SweepSpec(name, grid, self.problem, self.build_problem,
                         participation=self.participation, rounds=self.rounds,
                         seeds=list(seeds), eval_every=self.eval_every, out=self.out,
                         device=self.device, dp=None if self.dp is None else dict(self.dp),
                         aggregation=self.aggregation,
                         checkpoint_every=self.checkpoint_every)
        try:
            res = run_sweep(spec, executor=self.executor, plan=self.plan,
                            ray_address=self.ray_address, threads=self.threads or 1,
                            quiet=self.progress is None, progress=self.progress,
                            reuse_stale=self.reuse_stale, saved_only=self.saved_only)
        except NotSaved as exc:
            from .common import EntryError
            raise EntryError(f"--plot-only: {exc}; " + (
                "wait until it is done" if exc.busy else "run without --plot-only first")) \
                from None
        return res, spec.folder

    def run(self, name: str, grid: Grid, seeds) -> pd.DataFrame:
        res, folder = self.sweep(name, grid, seeds)
        if res.missing:
            raise GridError(f"tuning {name}: {len(res.missing)} cell(s) failed twice; see "
                            f"{folder / 'failures.json'}")
        return with_grid_columns(res.table, grid)


def with_grid_columns(table: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """``table`` with ``grid``'s columns set from each row's point: a cell saved by another
    sweep of the same folder (an earlier, differently bracketed step of a tuning) carries that
    sweep's grid columns, not this one's, and a pick read from a missing column is NaN."""
    table = table.copy()
    for p in grid.points():
        rows = table["point"] == p.key
        for k, v in p.values.items():
            if k not in table:
                table[k] = np.nan if isinstance(v, (int, float)) else None
            table.loc[rows, k] = v
    return table


def _pick(summary: pd.DataFrame) -> dict | None:
    sel = summary[summary["selected"]]
    return None if not len(sel) else dict(sel.iloc[0])


def tune(name: str, methods: list[Method], setup: Setup, seeds, *, rule: str,
         at: int | None = None, max_extensions: int = MAX_EXTENSIONS,
         text: str = "symmetric: bracketed grids, edges extended") -> Tuning:
    """The symmetric tuned comparison: each method over its brackets, extended by one step
    on a side while its pick (by ``rule`` at round ``at``, default the horizon) sits on an
    extendable edge, at most ``max_extensions`` times (the record says when a pick stays on
    an edge). Fewer than :data:`TUNED_SEEDS` seeds is recorded (the protocol's card fails)."""
    if rule not in rule_names():
        raise GridError(f"unknown selection rule {rule!r}; one of {', '.join(rule_names())}")
    at = at or setup.rounds
    tables, summaries, picks, history, interior = [], [], {}, [], True
    for m in methods:
        brackets = list(m.brackets)
        for step in range(max_extensions + 1):
            table = setup.run(m.folder or f"{name}-{m.label}", m.grid(brackets), seeds)
            summary = select(table, rule, at=at)
            pick = _pick(summary)
            if pick is None:
                history.append((m.label, step, "no healthy point"))
                break
            edges = [(i, b.at_edge(pick[b.key])) for i, b in enumerate(brackets)
                     if b.key in pick and b.at_edge(pick[b.key])]
            if not edges:
                break
            if step == max_extensions:
                history.append((m.label, step, "pick still on an edge after "
                                f"{max_extensions} extensions: "
                                + ", ".join(f"{brackets[i].key} {side}" for i, side in edges)))
                interior = False
                break
            for i, side in edges:
                brackets[i] = brackets[i].extend(side)
                history.append((m.label, step + 1, f"{brackets[i].key} extended {side} to "
                                f"{brackets[i].values[0 if side == 'low' else -1]:g}"))
        tables.append(table.assign(method=m.label))
        summaries.append(summary.assign(method=m.label))
        if pick is not None:
            picks[m.label] = {k: pick[k] for k in m.grid(brackets).columns if k in pick}
    proto = Protocol("tuned", text, rule=rule, seeds=len(list(seeds)), horizon=at,
                     plotted=at, required_seeds=TUNED_SEEDS, interior=interior)
    return Tuning(pd.concat(tables, ignore_index=True), pd.concat(summaries, ignore_index=True),
                  picks, history, proto)


def paper_grid(name: str, methods: list[Method], setup: Setup, seeds, *, rule: str,
               at: int | None = None, required_seeds: int | None = None, text: str = "",
               source: str = "") -> Tuning:
    """The paper's grids (unextended: :class:`Bracket` without ``step``) selected by its
    rule at round ``at`` (default the horizon) on ``seeds``; ``required_seeds`` is the
    paper's number of selection seeds (e.g. Fed-LAMB's 3). A bracket with a ``ladder`` (a
    pruned part of the paper's grid) is extended along it while the pick sits on its edge,
    up to the ladder's ends, so the pick is the one the paper's whole-grid selection would
    reach from there (its record lists each extension)."""
    fixed = [replace(m, brackets=tuple(replace(b, step=None) for b in m.brackets))
             for m in methods]
    rungs = max((len(b.ladder) for m in fixed for b in m.brackets if b.ladder), default=0)
    t = tune(name, fixed, setup, seeds, rule=rule, at=at, max_extensions=rungs)
    t.protocol = Protocol("paper", text or "the paper's grids and rule", rule=rule,
                          seeds=len(list(seeds)), horizon=at or setup.rounds,
                          plotted=at or setup.rounds, required_seeds=required_seeds,
                          source=source)
    return t


def two_step(name: str, step1: list[Method], step2: list[Method], setup: Setup, seeds, *,
             rule: str = "running10-acc", at: int | None = None,
             source: str = "FedAda2 App. H.2") -> Tuning:
    """FedAda2 App. H.2's two-step tuning: step 1 a symmetric grid (``step1``: the same
    values for client and server where both exist), step 2 the asymmetric grid (``step2``,
    same labels); each method's pick is the best by ``rule`` over both steps' points (the
    running average of the last 10 logged points by default, App. H.1)."""
    labels1, labels2 = [m.label for m in step1], [m.label for m in step2]
    if sorted(labels1) != sorted(labels2):
        raise GridError("two_step: the two steps must tune the same methods")
    one = paper_grid(f"{name}-step1", step1, setup, seeds, rule=rule, at=at)
    two = paper_grid(f"{name}-step2", step2, setup, seeds, rule=rule, at=at)
    table = pd.concat([one.table.assign(step=1), two.table.assign(step=2)], ignore_index=True)
    summaries, picks = [], {}
    for label in labels1:
        sub = table[table["method"] == label]
        algorithm = sub["algorithm"].iloc[0]
        both = sub.drop_duplicates(["point", "seed", "round", "metric"])
        summary = select(both, rule, at=at).assign(method=label)
        summaries.append(summary)
        pick = _pick(summary)
        if pick is not None:
            cols = [c for c in both.columns if c not in ("run", "seed", "round", "metric",
                                                         "value", "diverged_at", "point",
                                                         "algorithm", "method", "step",
                                                         "sweep")]
            picks[label] = {k: pick[k] for k in cols if k in pick and pd.notna(pick[k])}
        del algorithm
    history = [(lab, 1, "step 1 (symmetric)") for lab in labels1] + \
              [(lab, 2, "step 2 (asymmetric)") for lab in labels1]
    proto = Protocol("paper", "two-step tuning: symmetric, then asymmetric grid", rule=rule,
                     seeds=len(list(seeds)), horizon=at or setup.rounds,
                     plotted=at or setup.rounds, source=source)
    return Tuning(table, pd.concat(summaries, ignore_index=True), picks, history, proto)


def protocol_columns(p: Protocol) -> dict:
    """A protocol as the columns a tuning run's table carries (:func:`protocol_of`)."""
    return {"protocol": p.text, "protocol_kind": p.kind, "selection_rule": p.rule or "",
            "selection_seeds": p.seeds if p.seeds is not None else -1,
            "selection_round": p.horizon if p.horizon is not None else -1,
            "required_seeds": p.required_seeds if p.required_seeds is not None else -1,
            "picks_interior": "" if p.interior is None else bool(p.interior)}


def saved_flag(value) -> bool | None:
    """A yes/no a results table saved, as it reads back: ``True`` / ``False`` as written,
    the strings ``"True"`` / ``"true"`` / ``"1"`` of a CSV, or ``1.0`` / ``0.0`` where
    ``pandas.concat`` met a float column (a bool column beside another run's empty one
    becomes float64); None for an empty value (nothing recorded)."""
    if value is None or isinstance(value, str) and not value.strip():
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "1.0")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number != 0


def split_tuned(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(the paper protocol's rows, the symmetric tuned comparison's rows)`` of an entry's
    table: a tuning run's rows of kind ``tuned`` carry ``protocol_kind`` ``tuned``
    (:func:`protocol_columns`); every other row is the paper protocol's."""
    kind = df["protocol_kind"].astype(str) if "protocol_kind" in df else None
    if kind is None:
        return df, df.iloc[:0]
    return df[kind != "tuned"], df[kind == "tuned"]


def protocol_of(table: pd.DataFrame) -> Protocol | None:
    """The :class:`Protocol` a tuning run's table records (None when it records none)."""
    if "protocol_kind" not in table or not len(table):
        return None
    r = table.iloc[0]
    num = (lambda x: None if x is None or (isinstance(x, float) and math.isnan(x))
           or int(x) < 0 else int(x))
    interior = saved_flag(r.get("picks_interior", ""))
    return Protocol(str(r["protocol_kind"]), str(r["protocol"]),
                    rule=str(r.get("selection_rule", "")) or None,
                    seeds=num(r.get("selection_seeds")), horizon=num(r.get("selection_round")),
                    plotted=num(r.get("selection_round")),
                    required_seeds=num(r.get("required_seeds")), interior=interior)

"""What FedAda2's sweep figures share (Figure 3 bottom, Figures 6 and 7): panels of hyperparameter
sweeps, every run drawn, coloured by its rank in final test loss, and the sweep statistics of
claims 18-19.

A :class:`Panel` is one sweep: a registry algorithm with fixed settings (server / client
optimizer, preconditioner, initialisation, frozen epochs) over a grid of ``eta_l, eta, eps,
tau`` (the paper's ``eta_l, eta_s, tau_l, tau_s``) and, under DP, of the clip ``c``.

* Without DP (GLD-23K, Figs. 6-7) a panel is one :func:`reproduce.sweeps.sweep_run`: its cells
  are saved and resumed under ``OUT/sweeps/NAME`` (keyed by the code), run batched as replicas
  (``--plan batched``, the default here: 2.5x faster than one cell at a time on two cores,
  measured on the GLD-23K stand-in) or on Ray (``--executor ray``). Panels that are the same
  sweep in two figures (Fig. 7's top row is Fig. 6's FedAda2 row) share the cells.
* Under DP (StackOverflow, Fig. 3 bottom) the sweep grid cannot carry the clip (it is not a
  hyperparameter of the algorithm but of :class:`sims.privacy.Private` around it), so each
  point is one entry run of its own (saved and resumed by :mod:`reproduce.common`).

Every run of a panel is the point's curve (mean over seeds) in :func:`sims.experiments.sweep.plots.
ranked_figure`. Statistics (:func:`panel_stats`), per panel and seed over the panel's runs:
the best run's final test accuracy, the median, and the worst quartile's mean (the runs whose
final accuracy is among the lowest quarter; a diverged run counts as accuracy 0), and the
number of diverged runs; :func:`panel_seeds` gives them per seed, and :func:`not_degraded`
decides "does not significantly degrade" on paired-by-seed differences between panels
(:func:`reproduce.verdicts.not_below`, within :data:`TOLERANCE`, the FedAda2 entries' one
margin :data:`reproduce.fedada2_common.MARGIN`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sims.experiments.sweep import Grid
from sims.experiments.sweep.grid import Axis
from sims.experiments.sweep.plots import ranked_figure

from . import common
from . import fedada2_common as fc
from .sweeps import sweep_run

#: The paper's sweep symbols -> the registry's names.
SYMBOL = {"eta_l": "eta_l", "eta_s": "eta", "tau_l": "eps", "tau_s": "tau"}
ADAM_SERVER = {"server": "adam", "server_beta1": 0.9, "server_beta2": 0.999}
ADAM_CLIENT = {"client": "adam", "beta1": 0.9, "beta2": 0.999}
OPT = {"adagrad": "AdaGrad", "adam": "Adam"}
#: Figure 6's rows: the jointly adaptive variants (registry name, label, title colour)
VARIANTS = {"dja": ("dja", "Direct Joint Adap.", fc.COLORS["dja"]),
            "joint-no-precond": ("joint-adaptive", "Joint w/o Precond. Commu.",
                                 fc.COLORS["joint-no-precond"]),
            "fedada2": ("fedada2", "FedAda2", fc.COLORS["fedada2"])}
PAIRS = (("adagrad", "adagrad"), ("adagrad", "adam"), ("adam", "adagrad"), ("adam", "adam"))


@dataclass(frozen=True)
class Panel:
    key: str                     # unique id (the sweep's name)
    title: str
    color: str
    algorithm: str               # registry name
    fixed: dict                  # fixed hyperparameters
    axes: tuple                  # ((registry key, values), ...)
    clips: tuple | None = None   # DP clip values (None: no DP)

    def grid(self) -> Grid:
        return Grid({self.algorithm: dict(self.fixed)},
                    [Axis(k, tuple(v)) for k, v in self.axes])

    def size(self) -> int:
        return len(self.grid().points()) * (len(self.clips) if self.clips else 1)


def pair_fixed(server: str, client: str) -> dict:
    """Fixed settings of a server-client optimizer pair (Adam: beta1 0.9, beta2 0.999)."""
    out = {}
    out.update(ADAM_SERVER if server == "adam" else {"server": "adagrad"})
    out.update(ADAM_CLIENT if client == "adam" else {"client": "adagrad"})
    return out


def pair_panel(variant: str, server: str, client: str, axes, freeze: int = 0,
               prefix: str = "gld23k") -> Panel:
    """A Fig. 6 / Fig. 7 panel: ``variant`` (:data:`VARIANTS`) with the pair's optimizers,
    the preconditioner frozen ``freeze`` epochs after each updated one (Fig. 7)."""
    name, label, color = VARIANTS[variant]
    fixed = pair_fixed(server, client)
    if freeze:
        fixed["freeze_epochs"] = int(freeze)
    title = f"{label}: {OPT[server]}-{OPT[client]}" + (f", {freeze} frozen" if freeze else "")
    key = f"{prefix}_{variant}_{server}-{client}" + (f"_f{freeze}" if freeze else "")
    return Panel(key, title, color, name, fixed, tuple(axes))


# ------------------------------------------------------------------------------ problems
def problem_desc(setting: str, cfg, **changes) -> dict:
    """The JSON description of ``setting``'s problem under ``cfg`` (a sweep cell's identity;
    ``changes``: Config fields, e.g. ``image_local_epochs``)."""
    c = dataclasses.replace(cfg, **changes)
    return {"setting": setting, "standin": c.standin, "data_dir": c.data_dir,
            "weights": c.weights, "cache_dir": c.cache_dir, "device": c.device,
            "batch_size": c.batch_size, "so_local_epochs": c.so_local_epochs,
            "image_local_epochs": c.image_local_epochs,
            "eval_train_samples": c.eval_train_samples,
            "so_vocab": c.so_vocab, "so_tags": c.so_tags,
            "so_standin": c.so_standin, "so_loss": c.so_loss,
            "image_standin": c.image_standin,
            "standin_used": fc.is_standin(setting, c)}


def build_problem(desc: dict):
    """The problem of :func:`problem_desc` (module level, so Ray can ship it)."""
    return fc._problem(desc["setting"], desc["data_dir"], desc["standin"], desc["weights"],
                       desc["cache_dir"], desc["device"], desc["batch_size"],
                       desc["so_local_epochs"], desc["image_local_epochs"],
                       desc["eval_train_samples"], desc.get("so_vocab", 10_000),
                       desc.get("so_tags", 500), desc.get("so_standin", "fmnist"),
                       desc.get("so_loss", "sigmoid"),
                       desc.get("image_standin", "fmnist"))[0]


def panel_runs(cfg, setting: str, panels, **changes) -> list[common.Run]:
    """The runs of ``panels`` on ``setting`` (module docstring)."""
    c = dataclasses.replace(cfg, **changes)
    out = []
    m = fc.participants(setting, c)
    for p in panels:
        ref = panel_reference(setting, p, c)
        if ref:
            p = dataclasses.replace(p, fixed={**p.fixed, **ref})
        if p.clips is None:
            out.append(_named(sweep_run(p.key, p.grid(), problem_desc(setting, cfg, **changes),
                                        build_problem, f"m={m}", rounds=cfg.rounds,
                                        eval_every=cfg.eval_every, params={"panel": p.key},
                                        plan=cfg.plan)))
            continue
        for clip in p.clips:
            for point in p.grid().points():
                out.append(_private_run(c, setting, p, clip, point))
    return out


def panel_reference(setting: str, panel: Panel, cfg) -> dict:
    """The authors' reference choices for a panel's fixed settings
    (:data:`reproduce.fedada2_common.REFERENCE`): the warm-up only for adaptive clients
    (SGD-client panels none unless ``sgd_warmup = "on"``), FedAda2's SM3 cover, and a client
    Adam's bias correction. (Sample-weighted aggregation is not applied to sweep cells: they
    aggregate uniformly, stated in the results doc.)"""
    client = panel.fixed.get("client", "sgd" if panel.algorithm in fc.SGD_CLIENTS
                             else "adagrad")
    method = panel.algorithm if client == "sgd" else None
    out = dict(fc.warmup(setting, cfg, method if method in fc.SGD_CLIENTS else None))
    if client == "sgd" and getattr(cfg, "sgd_warmup", "on") == "off":
        out = {}
    if panel.algorithm in ("fedada2", "fedada2-adam"):
        out["precond"] = getattr(cfg, "sm3", "sm3-ii")
    if client == "adam":
        out["bias_correction"] = getattr(cfg, "adam_bias_correction", "on") == "on"
    return out


def _named(run: common.Run) -> common.Run:
    """A sweep run whose table names the sweep in ``run`` (the entry's run; each row's grid
    point stays in ``point`` and its label in ``label``)."""
    inner = run.execute

    def execute(cfg, seeds, progress):
        table, record = inner(cfg, seeds, progress)
        return table.assign(label=table["run"], run=run.name), record
    run.execute = execute
    return run


def _private_run(cfg, setting, panel, clip, point) -> common.Run:
    from sims.algorithms.registry import make_algorithm
    from sims.privacy import Private
    pid = f"c{clip:g}_{point.key}"

    def build():
        prob = fc.problem(setting, cfg)[0]
        n = prob.n_clients
        alg = Private(make_algorithm(point.algorithm, **point.settings), clip=clip,
                      noise_multiplier=cfg.noise_multiplier, delta=1.0 / n,
                      sampling_rate=fc.participants(setting, cfg) / n)
        return prob, alg, fc.participation(setting, cfg)
    return common.Run(f"{panel.key}_{pid}",
                      {"panel": panel.key, "algorithm": point.algorithm, "point": pid,
                       "clip": clip, **point.values},
                      build=build, eval_every=cfg.eval_every, eval_grad=False,
                      max_batch=cfg.max_batch or 8,
                      extra={"settings": point.settings, "clip": clip,
                             "noise_multiplier": cfg.noise_multiplier})


# ------------------------------------------------------------------------------ figure
def ranked_plot(df, cfg, panels, ncols: int, stem: str, title: str) -> list[Path]:
    """Every panel's runs, ranked by final test loss (lighter = lower), ``ncols`` a row."""
    table = df[df["panel"].isin([p.key for p in panels])]
    path = Path(cfg.figures) / stem
    from . import plotting
    note = plotting._FOOTERS[-1] if plotting._FOOTERS else None
    return ranked_figure(table, path, title, by="panel", panels=[p.key for p in panels],
                         ncols=ncols, titles={p.key: p.title for p in panels},
                         title_colors={p.key: p.color for p in panels}, footer=note)


# ------------------------------------------------------------------------------ statistics
def final_accuracies(df) -> pd.DataFrame:
    """``[panel, point, seed, acc, loss, diverged]``: each run's final test accuracy and loss
    (a diverged run, or one whose final values are not finite: accuracy 0, loss inf)."""
    sub = df[df.metric.isin(["test_acc", "test_loss"])].sort_values("round")
    last = (sub.groupby(["panel", "point", "seed", "metric"])["value"].last()
            .unstack("metric"))
    div = (df.groupby(["panel", "point", "seed"])["diverged_at"]
           .apply(lambda v: bool(v.notna().any())) if "diverged_at" in df
           else pd.Series(False, index=last.index))
    last["diverged"] = div.reindex(last.index).fillna(False).astype(bool)
    bad = last["diverged"] | ~np.isfinite(last["test_acc"].astype(float)) \
        | ~np.isfinite(last["test_loss"].astype(float))
    last["acc"] = last["test_acc"].where(~bad, 0.0)
    last["loss"] = last["test_loss"].where(~bad, math.inf)
    last["diverged"] = bad
    return last[["acc", "loss", "diverged"]].reset_index()


def per_point(df) -> pd.DataFrame:
    """``df`` with one run per sweep grid point (``run|point``), for the regime card's
    headroom items (:func:`reproduce.fedada2_common.card`): the best run of a sweep is its best
    grid point."""
    if "point" not in df.columns:
        return df
    return df.assign(run=df["run"].astype(str) + "|" + df["point"].astype(str))


def panel_stats(df) -> pd.DataFrame:
    """Per ``(panel, seed)``: ``best``, ``median``, ``worst_q`` (mean of the lowest quarter)
    final test accuracy over the panel's runs, ``runs`` and ``diverged`` counts."""
    fa = final_accuracies(df)

    def stats(g):
        acc = np.sort(g["acc"].to_numpy(dtype=float))
        k = max(1, len(acc) // 4)
        return pd.Series({"best": acc[-1], "median": float(np.median(acc)),
                          "worst_q": float(acc[:k].mean()), "runs": len(acc),
                          "diverged": int(g["diverged"].sum())})
    return fa.groupby(["panel", "seed"]).apply(stats)


def stat_ci(stats: pd.DataFrame, panel: str, col: str) -> dict:
    v = stats.xs(panel, level="panel")[col] if panel in stats.index.get_level_values(0) else []
    mean, lo, hi = fc.mean_ci(v)
    return {"mean": mean, "lo": lo, "hi": hi, "n": len(v)}


def stats_lines(stats: pd.DataFrame, panels) -> list[str]:
    """One line per panel: best / median / worst-quarter final accuracy (%, 95 % interval
    over seeds) and diverged runs."""
    out = []
    for p in panels:
        if p.key not in stats.index.get_level_values(0):
            out.append(f"  {p.title}: no results")
            continue
        s = {c: stat_ci(stats, p.key, c) for c in ("best", "median", "worst_q")}
        sub = stats.xs(p.key, level="panel")
        out.append(f"  {p.title} ({int(sub['runs'].iloc[0])} runs): best {fc.fmt_pp(s['best'])}"
                   f", median {fc.fmt_pp(s['median'])}, worst quarter "
                   f"{fc.fmt_pp(s['worst_q'])}; diverged {int(sub['diverged'].sum())} "
                   f"(all seeds)")
    return out


#: "Does not significantly degrade" (claims 18c, 19a, 19c): the paired difference's interval
#: above minus the FedAda2 entries' one margin of "above" and "not below" for accuracies
#: (:data:`reproduce.fedada2_common.MARGIN`, half a point; claim 14a's "Joint w/o precond >=
#: DJA" uses the same), not a tolerance of its own.
TOLERANCE = fc.MARGIN


def check_preamble(entry, cfg, df, setting: str, panels,
                   setup: str) -> tuple[list[str], pd.DataFrame]:
    """The opening of a ranked-sweep check: ``(lines, panel statistics)``. The lines say the
    setting (``setup``: rounds, seeds, grids), the missing runs (diverged runs stay: a sweep's
    worst runs are its point), that every number is a stand-in's where it is, and each panel's
    final test accuracy over its runs."""
    _, notes = common.usable(entry, cfg, df)
    lines = [f"setting: {fc.data_note(cfg)}; m = {fc.participants(setting, cfg)} clients a "
             f"round, {setup}"] + notes
    if fc.is_standin(setting, cfg):
        lines.append(f"STAND-IN: every number below is on {fc.SETTINGS[setting].label}'s "
                     "stand-in, not the paper's data")
    stats = panel_stats(df)
    lines.append("final test accuracy over each panel's runs (%, 95% interval over seeds):")
    return lines + stats_lines(stats, panels), stats


def panel_seeds(stats: pd.DataFrame, panel: str, col: str) -> pd.Series:
    """Per seed, ``col`` (best, median, worst_q) of ``panel`` (empty if it has no results).
    A diverged run counts at accuracy 0 (a sweep's worst runs are its point), but a seed
    whose every run of the panel diverged is no evidence: NaN there, which the verdicts count
    as diverged (all of them diverged: ``inconclusive: diverged``, never a decision)."""
    if panel not in stats.index.get_level_values(0):
        return pd.Series(dtype=float)
    sub = stats.xs(panel, level="panel")
    values = sub[col].astype(float)
    if {"diverged", "runs"} <= set(sub):
        values = values.where(sub["diverged"].astype(float) < sub["runs"].astype(float))
    return values


def not_degraded(claim, stats, panel: Panel, reference: Panel, col: str = "best"):
    """"``panel`` does not significantly degrade against ``reference``" in ``col``: the
    paired-by-seed difference's interval above ``-TOLERANCE``
    (:func:`reproduce.verdicts.not_below`)."""
    from . import verdicts as vd
    return vd.not_below(claim, panel_seeds(stats, panel.key, col),
                        panel_seeds(stats, reference.key, col), TOLERANCE, unit="pp",
                        scale=100, what=f"{panel.title} - {reference.title} ({col})")


def extremes_item(panels, paper: dict):
    """Regime item: every panel's grid reaches the paper's smallest and largest value of each
    swept hyperparameter (the worst and best runs of a sweep sit at its extreme cells);
    ``paper``: ``{registry key: (lo, hi)}`` (``clip`` for the DP clip)."""
    from . import regime as rg
    short = []
    for p in panels:
        axes = dict(p.axes)
        if p.clips:
            axes["clip"] = p.clips
        for key, (lo, hi) in paper.items():
            vals = axes.get(key)
            if vals is not None and (min(vals) > lo * (1 + 1e-9) or max(vals) < hi * (1 - 1e-9)):
                short.append(key)
    names = {v: k for k, v in SYMBOL.items()}
    missing = sorted({names.get(k, k) for k in short})
    return rg.value("grid reaches the paper's extreme cells",
                    "yes" if not missing else "no: " + ", ".join(missing), "yes", rg.equal(),
                    "the paper's grids (App. H.1, I.1, I.2)")


def axes_text(panel: Panel) -> str:
    names = {v: k for k, v in SYMBOL.items()}
    parts = [f"{names.get(k, k)} in {{{', '.join(f'{x:g}' for x in v)}}}" for k, v in panel.axes]
    if panel.clips:
        parts.insert(0, f"c in {{{', '.join(f'{x:g}' for x in panel.clips)}}}")
    return ", ".join(parts)


@dataclass
class Config(fc.Config):
    """The sweep entries' flags: ``--plan`` (batched replicas or one cell at a time),
    ``--executor`` (in-process or Ray; ``--ray-address`` a cluster)."""
    plan: str = "batched"
    executor: str = "inprocess"
    ray_address: str | None = None

    def validate(self):
        fc.Config.validate(self)
        if self.plan not in ("auto", "separate", "batched"):
            raise common.EntryError(f"--plan must be auto, separate or batched, got "
                                    f"{self.plan!r}")
        if self.executor not in ("inprocess", "ray"):
            raise common.EntryError(f"--executor must be inprocess or ray, got "
                                    f"{self.executor!r}")


def values(text: str, name: str) -> tuple:
    """A comma-separated list of numbers (one-line error)."""
    try:
        vals = tuple(float(v) for v in fc.items(text))
    except ValueError:
        raise common.EntryError(f"--{name.replace('_', '-')}: cannot read {text!r}; give "
                                "comma-separated numbers") from None
    if not vals or any(not (math.isfinite(v) and v > 0) for v in vals):
        raise common.EntryError(f"--{name.replace('_', '-')}: give positive numbers, got "
                                f"{text!r}")
    return vals


def grid_axes(cfg) -> tuple:
    """``((registry key, values), ...)`` from ``--eta-l --eta-s --tau-l --tau-s``."""
    return tuple((SYMBOL[k], values(getattr(cfg, k), k))
                 for k in ("eta_l", "eta_s", "tau_l", "tau_s"))


def sweep_protocol():
    """The sweep figures' protocol: the figure's grid run whole, every run drawn (nothing
    selected); the grid itself is the regime (:func:`extremes_item`)."""
    from .protocols import paper_fixed
    return paper_fixed("the figure's sweep grid, every run kept (no selection)",
                       "FedAda2 App. H.1, I.1, I.2")

"""The symmetric tuned comparison of the FedLADA entries, run beside the paper's protocol.

The protocol is :func:`reproduce.protocols.tune`: every compared method over bracketed grids,
each grid extended by one step while the method's pick sits on an edge, selected by final
test accuracy (``final-acc``, FedLADA Sec. 4 "best-performing") at the plotted horizon. The
CPU budget does not buy every method's full product grid on 3 seeds (seven methods, one to
five axes each), so the grids are pruned by a stated one-seed screen:

1. **Screen** (seed 0): one axis at a time, in the order of :data:`SCREEN`, each a 1-D
   ``tune`` extended off its edges, at the picks of the axes before it and the stand-in's
   pilot local rate (:data:`reproduce.fedlada_common.CPU_LR`): every method's server rate;
   FedCM's alpha; FedAdam's epsilon and initial second moment; FedLADA's alpha and its weight
   decay under coupled and decoupled decay (:data:`MODES`; the mode with the better pick is
   kept).
2. **Selection** (:data:`SELECT_SEEDS`, 3 seeds): every method's local rate, the screened
   settings fixed, a ``tune`` extended off its edges. Its picks are the tuned settings.
3. The entry runs each pick on its own seeds (``tuned:METHOD``), train accuracy and the
   consistency term recorded like the paper protocol's runs.

Cells are shared between the stages (one sweep folder per method, ``OUT/sweeps/NAME-METHOD``),
so a stage never recomputes a setting an earlier one ran. The record (:func:`summary_rows`)
keeps each stage's grid, the final test accuracy of every point and the picks;
:func:`protocol` is the :class:`reproduce.protocols.Protocol` the tuned verdicts name
(``interior`` only when every screen and selection pick is interior).
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from . import common
from . import fedlada_common as fc
from . import protocols as pr

NAME = "fedlada-tuned"
RULE = "final-acc"
SCREEN_SEED = 0
SELECT_SEEDS = (0, 1, 2)
ROOT10 = math.sqrt(10)

#: The screened axes per method, in order: ``(key, step, lo, hi)`` (a log grid of three
#: values around the current setting, extended by ``step``).
SCREEN = {
    "fedavg": [("eta", ROOT10, None, None)],
    "fedprox": [("eta", ROOT10, None, None)],
    "scaffold": [("eta", ROOT10, None, None)],
    "fedcm": [("eta", ROOT10, None, None), ("alpha", 2.0, None, 1.0)],
    "fedadam": [("eta", ROOT10, None, None), ("tau", 10.0, None, None),
                ("v0", 10.0, None, None)],
    "localadam": [("eta", ROOT10, None, None)],
    "fedlada": [("eta", ROOT10, None, None), ("alpha", 2.0, None, 1.0),
                ("weight_decay", 10.0, None, None)],
}
#: Categorical settings screened with an axis: FedLADA's weight decay under both readings.
MODES = {("fedlada", "weight_decay"): ("coupled", "decoupled")}
#: The selected axis (3 seeds): the local rate, a log grid by sqrt(10).
SELECT = ("eta_l", ROOT10)

TEXT = ("symmetric: final test accuracy at the plotted horizon; local rate bracketed on 3 "
        "seeds; server rate, FedAdam's epsilon and initial moment, FedCM's alpha, FedLADA's "
        "alpha and weight decay (coupled and decoupled) by a one-seed screen; every grid "
        "extended off its edges")


def centre(method: str, cfg) -> dict:
    """The grid's centre: the paper's settings at the stand-in's pilot local rate."""
    hp = fc.hyper(method, replace(cfg, paper_lr=False))
    hp.pop("n_clients", None)                       # the sweep adds the population
    return hp


def setup(cfg, progress=None) -> pr.Setup:
    return pr.Setup.of_entry(cfg, fc.problem_desc(cfg), fc.build_problem,
                             participation=fc.participation_text(cfg), rounds=cfg.rounds,
                             eval_every=cfg.eval_every, progress=progress)


def _selected(t: pr.Tuning, method: str) -> tuple[dict, float]:
    sel = t.summary[(t.summary["method"] == method) & t.summary["selected"]]
    if not len(sel):
        raise common.EntryError(f"tuned comparison: no healthy setting of {method} at "
                                f"{t.history}")
    return dict(sel.iloc[0]), float(sel.iloc[0]["score"])


def _rows(t: pr.Tuning, method: str, fixed: dict, stage: str, cfg) -> pd.DataFrame:
    """Every cell's final test accuracy of one stage, with the point's full settings."""
    tab = t.table[(t.table["method"] == method) & (t.table["metric"] == "test_acc")
                  & (t.table["round"] <= cfg.rounds)]
    tab = tab[tab["round"] == tab.groupby(["point", "seed"])["round"].transform("max")]
    summ = t.summary[t.summary["method"] == method]
    chosen = set(summ[summ["selected"]]["point"])
    cols = [c for c in ("eta", "alpha", "tau", "v0", "weight_decay", "eta_l")
            if c in t.table.columns]
    out = []
    for _, r in tab.iterrows():
        settings = {**fixed, **{c: float(r[c]) for c in cols if c in r and pd.notna(r[c])}}
        out.append({"run": f"tuning:{method}:{r['point']}", "method": method,
                    "stage": stage, "point": r["point"], "seed": int(r["seed"]),
                    "round": int(r["round"]), "metric": "test_acc", "value": float(r["value"]),
                    # a diverged cell is a recorded point of the grid (never selected), not a
                    # replica of the comparison: common.healthy keeps it in the record
                    "diverged_at": math.nan, "cell_diverged_at": r.get("diverged_at", math.nan),
                    "settings": json.dumps(settings, sort_keys=True),
                    "picked": r["point"] in chosen})
    return pd.DataFrame(out)


def screen(method: str, cfg, su: pr.Setup) -> tuple[dict, list, bool]:
    """Stage 1 for one method: ``(settings, record rows, every pick interior)``."""
    cur, rows, interior = centre(method, cfg), [], True
    for key, step, lo, hi in SCREEN.get(method, []):
        best = None
        for mode in MODES.get((method, key), (None,)):
            fixed = {k: v for k, v in cur.items() if k != key}
            if mode is not None:
                fixed.pop("wd_mode", None)
                if mode != "coupled":                  # coupled is the default: cells shared
                    fixed["wd_mode"] = mode
            br = pr.bracket(key, cur[key], step, 1, lo, hi)
            t = pr.tune(NAME, [pr.Method(method, method, fixed, (br,))], su, [SCREEN_SEED],
                        rule=RULE)
            pick, score = _selected(t, method)
            stage = f"screen {key}" + (f" ({mode})" if mode else "")
            rows.append(_rows(t, method, fixed, stage, cfg))
            if best is None or score > best[0]:
                best = (score, {**fixed, key: float(pick[key])}, t.protocol.interior)
        cur, interior = best[1], interior and bool(best[2])
    return cur, rows, interior


_CACHE: dict = {}


def tuning(cfg, methods, progress=None) -> dict:
    """The whole protocol (stages 1-2) for ``methods``: ``{"picks": {method: settings},
    "table": record rows, "protocol": Protocol}``; computed once a process (cells persist)."""
    key = json.dumps([fc.problem_desc(cfg), cfg.rounds, cfg.eval_every, str(cfg.out),
                      list(methods)], sort_keys=True, default=str)
    if key in _CACHE:
        return _CACHE[key]
    su = setup(cfg, progress)
    rows, screened, interior = [], {}, True
    for m in methods:
        screened[m], r, ok = screen(m, cfg, su)
        rows += r
        interior = interior and ok
    sel_key, step = SELECT
    ms = [pr.Method(m, m, {k: v for k, v in screened[m].items() if k != sel_key},
                    (pr.bracket(sel_key, screened[m][sel_key], step, 1),)) for m in methods]
    t = pr.tune(NAME, ms, su, list(SELECT_SEEDS), rule=RULE, text=TEXT)
    picks = {}
    for m, meth in zip(methods, ms):
        pick, _ = _selected(t, m)
        picks[m] = {**meth.fixed, sel_key: float(pick[sel_key])}
        rows.append(_rows(t, m, meth.fixed, f"select {sel_key}", cfg))
    proto = pr.Protocol("tuned", TEXT, rule=RULE, seeds=len(SELECT_SEEDS), horizon=cfg.rounds,
                        plotted=cfg.rounds, required_seeds=pr.TUNED_SEEDS,
                        interior=interior and bool(t.protocol.interior),
                        source="reproduce.fedlada_tuning")
    table = pd.concat(rows, ignore_index=True).assign(sweep="tuning",   # the run's name
                                                      **pr.protocol_columns(proto))
    _CACHE[key] = {"picks": picks, "table": table, "protocol": proto,
                   "history": [list(h) for h in t.history]}
    return _CACHE[key]


def tuning_run(cfg, methods) -> common.Run:
    """The entry run of stages 1-2: its table is :func:`tuning`'s record rows."""
    def execute(cfg_, seeds, progress):
        res = tuning(cfg_, methods, progress=lambda k: None)
        return res["table"], {"protocol": res["protocol"].__dict__, "picks": res["picks"],
                              "history": res["history"]}
    return common.Run("tuning", {"tuning": NAME, "rule": RULE, "methods": list(methods),
                                 "screen": {m: SCREEN.get(m, []) for m in methods},
                                 "select": list(SELECT), "seeds": [SCREEN_SEED,
                                                                   list(SELECT_SEEDS)]},
                      rounds=cfg.rounds, eval_every=cfg.eval_every, execute=execute)


def pick_run(cfg, method, methods) -> common.Run:
    """Stage 3: ``method``'s tuned pick on the entry's seeds, as the paper protocol's runs."""
    def build():
        pick = dict(tuning(cfg, methods)["picks"][method])
        if method == "scaffold":
            pick["n_clients"] = cfg.n_clients
        return fc.problem(cfg), fc.make_algorithm(method, **pick), fc.participation(cfg)
    run = fc.engine_run(f"tuned:{method}", {"method": method, "protocol": "tuned"}, build,
                        cfg.rounds, cfg.eval_every)
    return run


def picks_of(df: pd.DataFrame) -> dict:
    """``{method: settings}`` from a saved tuning table (the selection stage's picks)."""
    sub = df[(df["run"].astype(str).str.startswith("tuning:")) & (df["stage"] == "select eta_l")
             & df["picked"].map(lambda v: pr.saved_flag(v) is True)]
    return {m: json.loads(g["settings"].iloc[0]) for m, g in sub.groupby("method")}


def stage_lines(df: pd.DataFrame) -> list[str]:
    """Each method's stages as markdown: values tried (mean final test accuracy, seeds) and
    the pick of each stage."""
    tab = df[df["run"].astype(str).str.startswith("tuning:")]
    if not len(tab):
        return []
    L = ["Tuned comparison (stages: one-seed screen, then the local rate on 3 seeds; final "
         "test accuracy % at the horizon, mean over the stage's seeds; * = pick):", "",
         "| method | stage | values (final test acc %) |", "|---|---|---|"]
    order = [m for m in fc.METHODS if m in set(tab["method"])]
    for m in order:
        sub = tab[tab["method"] == m]
        for stage, g in sub.groupby("stage", sort=False):
            key = stage.split()[1]
            cells = []
            for point, p in g.groupby("point", sort=False):
                s = json.loads(p["settings"].iloc[0])
                star = "*" if pr.saved_flag(p["picked"].iloc[0]) else ""
                div = ("cell_diverged_at" in p and
                       pd.to_numeric(p["cell_diverged_at"], errors="coerce").notna().any())
                acc = "diverged" if div else f"{100 * p['value'].mean():.1f}"
                cells.append((float(s.get(key, math.nan)), f"{s.get(key):g}: {acc}{star}"))
            cells.sort()
            n = g["seed"].nunique()
            L.append(f"| {fc.label(m)} | {stage} ({n} seed{'s' if n != 1 else ''}) | "
                     f"{'; '.join(c for _, c in cells)} |")
    return L


# ------------------------------------------------------------------ every entry's two protocols
#: Run-name prefix of the tuned protocol's runs (``tuned:NAME``), as in ``fedlada_fig2``.
TUNED = "tuned:"
#: The entry whose setting the picks are tuned at (the base setting of every FedLADA entry).
BASE_ENTRY = "fedlada_fig2"
#: What the ablation entries say about the picks they run at.
ABLATION_TEXT = ("each method at the picks of fedlada_fig2's tuning at the base setting "
                 "(not re-tuned): the ablation axis varies around them, as the paper kept its "
                 "rates across its ablations")

_PICKS: dict = {}


def base_config(cfg):
    """``fedlada_fig2``'s default setting (the setting the picks are tuned at), at ``cfg``'s
    scale (``--tiny`` / ``--full``) and with ``cfg``'s data folder and every flag of where and
    how it runs (:meth:`reproduce.common.EntryConfig.place`: output folders, threads,
    ``--plot-only``, ``--reuse-stale``, ``--checkpoint-every``, ...)."""
    from . import fedlada_fig2 as f2
    base = f2.Config(tiny=cfg.tiny, full=cfg.full, data_dir=cfg.data_dir, paper_lr=True,
                     tuned=True, **cfg.place())
    base.scale()
    return base


def _setting(cfg) -> str:
    return json.dumps([fc.problem_desc(cfg), cfg.rounds, cfg.eval_every], sort_keys=True,
                      default=str)


def base_picks(cfg, methods) -> dict:
    """The tuned picks at the base setting: ``{"picks": {method: settings}, "protocol":
    Protocol, "source": text}``. Read from ``fedlada_fig2``'s filed tuning record (the
    ledger's results, the record its tuned verdicts rest on) when that record is at the base
    setting of ``cfg``'s scale, else computed by :func:`tuning` (stages 1-2, resumable cells
    under ``OUT/sweeps``; the ``--tiny`` runs, or a ledger without the record)."""
    from . import fedlada_fig2 as f2
    from . import ledger
    base = base_config(cfg)
    methods = [m for m in fc.METHODS if m in set(methods)]
    key = (_setting(base), str(cfg.out), tuple(methods))
    if key in _PICKS:
        return _PICKS[key]
    rec = ledger.entry_record(BASE_ENTRY)
    out = None
    if rec is not None:
        fields = {f for f in f2.Config.__dataclass_fields__}
        filed = f2.Config(**{k: v for k, v in rec["config"].items() if k in fields})
        if _setting(filed) == _setting(base) and filed.tuned:
            try:
                df = ledger.load_results(f2)
            except common.EntryError:
                df = None
            if df is not None:
                record = df[df["run"].astype(str).str.startswith("tuning:")]
                picks = picks_of(record)
                proto = pr.protocol_of(record)
                if proto is not None and set(methods) <= set(picks):
                    out = {"picks": {m: picks[m] for m in methods}, "protocol": proto,
                           "source": f"{BASE_ENTRY}'s filed tuning record (ledger, commit "
                                     f"{str(rec.get('commit', ''))[:10]})"}
    if out is None:
        res = tuning(base, methods)
        out = {"picks": res["picks"], "protocol": res["protocol"],
               "source": f"reproduce.fedlada_tuning at {BASE_ENTRY}'s setting"}
    _PICKS[key] = out
    return out


def tuned_hyper(cfg, methods, method: str, **over) -> dict:
    """``method``'s tuned settings (:func:`base_picks`) with ``over`` applied: FedAdam(*)
    (``fedadam-cm``) takes FedAdam's picks and its alpha; SCAFFOLD its population."""
    src = "fedadam" if method == "fedadam-cm" else method
    hp = dict(base_picks(cfg, methods)["picks"][src])
    hp.pop("n_clients", None)
    if method == "fedadam-cm":
        hp["alpha"] = fc.PAPER_HP["fedadam-cm"]["alpha"]
    if method == "scaffold":
        hp["n_clients"] = cfg.n_clients
    hp.update(over)
    return hp


def tuned_protocol(cfg, methods, text: str = ABLATION_TEXT) -> pr.Protocol:
    """The tuned protocol an entry's ``tuned`` verdicts name: the base tuning's (rule, seeds,
    horizon, interior), read at this entry's horizon (``plotted``)."""
    bp = base_picks(cfg, methods)
    p = bp["protocol"]
    return pr.Protocol("tuned", f"{TEXT}; {text}", rule=RULE, seeds=p.seeds, horizon=p.horizon,
                       plotted=cfg.rounds, required_seeds=pr.TUNED_SEEDS,
                       interior=p.interior, source=bp["source"])


def _canon(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def prefixed(run: common.Run, prefix: str = TUNED) -> common.Run:
    """``run`` renamed ``PREFIX + name``, its table's ``run`` column prefixed the same way
    (engine runs and sweeps alike; a sweep's ``sweep`` column too, so its rows name their
    run)."""
    inner = run.execute
    if inner is None:
        raise ValueError(f"prefixed: run {run.name} has no execute")
    sweep = "sweep" in run.params

    def execute(cfg, seeds, progress):
        df, extra = inner(cfg, seeds, progress)
        df = df.copy()
        df["run"] = prefix + df["run"].astype(str)
        if sweep and "sweep" in df:
            df["sweep"] = prefix + df["sweep"].astype(str)
        return df, extra
    return replace(run, name=prefix + run.name, execute=execute,
                   extra={**run.extra, "sweep_renamed": prefix} if sweep else run.extra)


def protocol_runs(cfg, make, methods, paper=None, tuned=None) -> list:
    """Every FedLADA entry's runs in its two protocols: ``make(hyper)`` builds the entry's
    runs with ``hyper(method, **over) -> settings`` (the runs' ``params`` carry the settings
    they run at). The plain runs use ``paper`` (default :func:`fedlada_common.hyper`: the
    paper's Sec. 4.1 rates with ``--paper-lr``, else the pilot's); with ``cfg.tuned`` the same
    runs at ``tuned`` (default :func:`tuned_hyper`, the base picks) are added as
    ``tuned:NAME``, except those whose settings equal a plain run's (run once, read by both
    protocols: :func:`split_protocols`)."""
    paper = paper or (lambda m, **o: fc.hyper(m, cfg, **o))
    out = list(make(paper))
    if not getattr(cfg, "tuned", False):
        return out
    tuned = tuned or (lambda m, **o: tuned_hyper(cfg, methods, m, **o))
    same = {_canon(r.params): r.name for r in out}
    for r in make(tuned):
        if _canon(r.params) not in same:
            out.append(prefixed(r))
    return out


def aliases(cfg, make, methods, paper=None, tuned=None) -> dict:
    """``{run name: plain run name}`` of the tuned runs :func:`protocol_runs` does not run
    (their settings equal a plain run's)."""
    if not getattr(cfg, "tuned", False):
        return {}
    paper = paper or (lambda m, **o: fc.hyper(m, cfg, **o))
    tuned = tuned or (lambda m, **o: tuned_hyper(cfg, methods, m, **o))
    same = {_canon(r.params): r.name for r in make(paper)}
    return {r.name: same[_canon(r.params)] for r in make(tuned) if _canon(r.params) in same}


def split_protocols(df: pd.DataFrame, alias: dict | None = None):
    """``(plain runs' rows, tuned runs' rows)``: the tuned rows renamed without the prefix,
    plus the plain rows of the runs ``alias`` (:func:`aliases`) says both protocols share."""
    run = df["run"].astype(str)
    plain = df[~run.str.startswith(TUNED) & ~run.str.startswith("tuning:")]
    tuned = df[run.str.startswith(TUNED)].copy()
    tuned["run"] = tuned["run"].astype(str).str[len(TUNED):]
    shared = []
    for name, src in (alias or {}).items():
        rows = plain[plain["run"].astype(str) == src]
        if not len(rows) and "sweep" in plain:
            rows = plain[plain["sweep"].astype(str) == src]
        shared.append(rows.assign(run=rows["run"].astype(str).str.replace(src, name, n=1)
                                  if src != name else rows["run"]))
    if shared:
        tuned = pd.concat([tuned, *shared], ignore_index=True)
    return plain, tuned


def check_both(cfg, df, alias, claims, methods) -> list:
    """An entry's check in both protocols: ``claims(df, proto, scope) -> lines`` on the plain
    runs (the paper's or the pilot's protocol, unscoped) and, with ``cfg.tuned``, on the tuned
    runs (scope ``tuned``)."""
    plain, tuned = split_protocols(df, alias)
    proto = fc.protocol(cfg)
    lines = [f"{proto.kind} protocol ({proto.describe()}):", ""] + claims(plain, proto, "")
    if getattr(cfg, "tuned", False):
        tp = tuned_protocol(cfg, methods)
        picks = base_picks(cfg, methods)["picks"]
        lines += ["", f"tuned protocol ({tp.describe()}; picks from {tp.source}):",
                  "tuned picks: " + "; ".join(
                      f"{fc.label(m)} " + ", ".join(
                          f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in sorted(picks[m].items()))
                      for m in fc.METHODS if m in picks), ""]
        if len(tuned):
            lines += claims(tuned, tp, "tuned")
    return lines


def plot_both(df, cfg, alias, draw, stem,
              tuned_text: str = "tuned protocol (fedlada_fig2's picks)") -> list:
    """An entry's figure in each protocol: ``draw(rows, stem, protocol text) -> paths`` on the
    plain runs (``STEM``) and, where there are tuned runs, on those (``STEM_tuned``)."""
    plain, tuned = split_protocols(df, alias)
    paths = [draw(plain, stem, f"{fc.protocol(cfg).kind} protocol")]
    if len(tuned):
        paths.append(draw(tuned, f"{stem}_tuned", tuned_text))
    return [p for group in paths for p in (group if isinstance(group, (list, tuple))
                                          else [group])]


#: What an entry whose setting the paper re-tuned (Fig. 7: "each method at its best
#: hyperparameters" for GeLU / SMU) says about its tuned protocol.
RETUNE_TEXT = ("the other settings at fedlada_fig2's base picks; the local rate re-bracketed "
               "for the entry's setting (each value below) on 3 seeds at the entry's horizon, "
               "edges extended; the picks' selection cells are the tuned curves")


def retune_local_rate(cfg, label: str, methods, desc: dict, build_problem) -> pr.Tuning:
    """The local rate of each of ``methods`` bracketed (x sqrt(10) a step, extended off its
    edges) around its base pick (:func:`base_picks`) on the problem ``desc`` (``build_problem``
    builds it; a module-level function), on :data:`SELECT_SEEDS`, selected by final test
    accuracy at ``cfg.rounds``; the other settings at the base picks. Cells persist under
    ``OUT/sweeps/fedlada-retuned-LABEL-METHOD``."""
    key, step = SELECT
    ms = []
    for m in methods:
        fixed = tuned_hyper(cfg, methods, m)
        fixed.pop("n_clients", None)
        centre_ = fixed.pop(key)
        ms.append(pr.Method(m, m, fixed, (pr.bracket(key, centre_, step, 1),)))
    su = pr.Setup.of_entry(cfg, desc, build_problem, participation=fc.participation_text(cfg),
                           rounds=cfg.rounds, eval_every=cfg.eval_every)
    return pr.tune(f"fedlada-retuned-{label}", ms, su, list(SELECT_SEEDS), rule=RULE,
                   text=f"{TEXT}; {RETUNE_TEXT}")


def retuned_run(cfg, groups: dict, methods) -> common.Run:
    """One entry run re-bracketing the local rate per group (``{name: (problem desc,
    build_problem, columns)}``, e.g. one per activation): its table is each pick's selection
    cells as ``tuned:NAME_METHOD`` (with ``columns`` and ``method``) and every other point as
    the record ``tuning:NAME:METHOD:POINT``, the protocol in columns
    (:func:`reproduce.protocols.protocol_of`)."""
    base = base_picks(cfg, methods)["protocol"]
    # the settings not re-bracketed are the base picks: their edges count too
    base_interior = True if base.interior is None else bool(base.interior)

    def execute(cfg_, seeds, progress):
        frames, picks, history, interior = [], {}, [], base_interior
        for name, (desc, build, cols) in groups.items():
            t = retune_local_rate(cfg_, name, methods, desc, build)
            interior = interior and bool(t.protocol.interior)
            history += [[name, *map(str, h)] for h in t.history]
            chosen = set(t.summary[t.summary["selected"]]["point"])
            for m in methods:
                tab = t.table[t.table["method"] == m].copy()
                pick = tab["point"].isin(chosen)
                tab["run"] = np.where(pick, f"{TUNED}{name}_{m}",
                                      f"tuning:{name}:{m}:" + tab["point"].astype(str))
                tab["picked"] = pick
                if "diverged_at" in tab:     # a record point is no replica of the comparison
                    tab["cell_diverged_at"] = tab["diverged_at"]
                    tab.loc[~pick, "diverged_at"] = math.nan
                frames.append(tab.assign(method=m, **cols))
                picks[f"{name}_{m}"] = t.picks.get(m)
        proto = pr.Protocol("tuned", f"{TEXT}; {RETUNE_TEXT}", rule=RULE,
                            seeds=len(SELECT_SEEDS), horizon=cfg_.rounds, plotted=cfg_.rounds,
                            required_seeds=pr.TUNED_SEEDS, interior=interior,
                            source="reproduce.fedlada_tuning.retune_local_rate")
        table = pd.concat(frames, ignore_index=True).assign(sweep="tuning")  # the run's name
        if "diverged_at" not in table:
            table["diverged_at"] = math.nan
        return (table.assign(**pr.protocol_columns(proto)),
                {"protocol": proto.__dict__, "picks": picks, "history": history})
    return common.Run("tuning", {"sweep": "tuning", "retune": list(groups),
                                 "methods": list(methods),
                                 "select": list(SELECT), "seeds": list(SELECT_SEEDS),
                                 "base_interior": base_interior,
                                 "base": {m: tuned_hyper(cfg, methods, m) for m in methods}},
                      rounds=cfg.rounds, eval_every=cfg.eval_every, execute=execute)

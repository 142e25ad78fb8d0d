"""The theorems' bounds with measured constants, and the premises the measurements break.

Input is a run's tidy results table (:func:`sims.store.results.tidy`, one run, any number of
seeds) holding the probe's metrics, and the run's *setting* (:func:`theory_setting`: n, m,
K, learning rates, compressor, ... -- the inputs of a theorem that are not measured).

Constants are sup-type (``L``, ``sigma^2``, ``sigma_g^2``, ``G``, ``q``): at probe round
``t`` each is the running maximum, per seed, of what the probe measured up to ``t`` (a lower
bound on the true constant over the region the run has visited by then). ``q^2`` is
``max(q_C^2, q_A^2)`` (Fed-EF's ``q := max{q_C, q_A}``), with ``q_A^2`` from the engine's
per-round ``qA2`` metric (the round's actual messages) and the probe's dry run.

:func:`bounds_from_probe` evaluates every Fed-EF theorem that covers the run at each probe
round ``T`` (horizon ``T`` rounds) and pairs it with the measured left-hand side, the running
average ``(1/T) sum_{t<T} ||grad f(theta_t)||^2`` (rounds 0..T-1 with an evaluation).
:func:`premise_violations` lists ``(theorem, premise, first round, seeds)`` for every
learning-rate condition the measured constants break, and for the assumptions a
measurement can refute: q_A < 1 (A3), q_C < 1 (Def. 1), finite variance (A2 ii, read from a
Hill tail index < 2), fixed-size sampling without replacement (Thm 4.4), equal K (all),
and an optional user-declared staleness bound.
"""
from __future__ import annotations

import inspect
import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from theory import bounds as tb

SETTING_COLUMN = "theory_setting"

THEOREM_LABELS = {"fed_ef_thm41": "Fed-EF Thm 4.1 (direct compression, Alg. 1)",
                  "fed_ef_thm42": "Fed-EF Thm 4.2 (Fed-EF-SGD)",
                  "fed_ef_thm43": "Fed-EF Thm 4.3 (Fed-EF-AMS)",
                  "fed_ef_thm44": "Fed-EF Thm 4.4 (Fed-EF-SGD, partial participation)"}

# how each theorem is evaluated: the bound that actually holds (the dropped Lemma D.3 term
# restored, theory.bounds docstrings) and both readings of Thm 4.2's condition.
_BOUND_FLAGS = {"include_dropped_term": True}


# ---------------------------------------------------------------------------- the setting
def theory_setting(problem, algorithm, participation) -> dict:
    """The theorem inputs a run fixes (not measured), as a flat JSON-able dict."""
    n = problem.n_clients
    if hasattr(problem, "steps_for"):
        steps = [problem.steps_for(c) for c in range(n)]
    else:
        steps = [getattr(problem, "local_steps", None) or 1]
    comp = getattr(algorithm, "compressor", None)
    setting = {
        "family": type(algorithm).__name__, "algorithm": getattr(algorithm, "name", "?"),
        "n": n, "m": float(participation.expected(n)), "participation": participation.kind,
        "K": int(max(steps)), "K_min": int(min(steps)), "d": int(problem.d),
        "eta": float(getattr(algorithm, "eta", math.nan)),
        "eta_l": float(getattr(algorithm, "eta_l", math.nan)),
        "error_feedback": bool(getattr(algorithm, "error_feedback", False)),
        "server": str(getattr(algorithm, "server", "")),
        "beta1": float(getattr(algorithm, "beta1", math.nan)),
        "epsilon": float(getattr(algorithm, "eps", math.nan)),
        "compressor": getattr(comp, "name", None),
        "compressor_biased": bool(getattr(comp, "biased", False)),
        "q2_worst": float(comp.q2_bound(problem.layout)) if comp is not None else math.nan,
        "two_way": bool(getattr(algorithm, "two_way", False)),
        "restart_period": getattr(algorithm, "restart_period", None),
    }
    setting["theorems"] = theorems_for(setting)
    return setting


def theorems_for(setting: dict) -> list[str]:
    """The Fed-EF theorems (keys of :data:`theory.bounds.EVALUATORS`) that cover a run."""
    if setting.get("family") != "FedEF" or setting.get("two_way"):
        return []                           # Sec. 6's two-way result has no formal theorem
    full = setting["m"] >= setting["n"]
    comp, biased = setting.get("compressor"), setting.get("compressor_biased")
    if comp not in (None, "full") and not biased:
        return []                           # Stoc: not a q-deviate compressor (spec 2.5)
    if setting["server"] == "sgd":
        if biased and setting["error_feedback"]:
            return ["fed_ef_thm42" if full else "fed_ef_thm44"]
        if not biased:                      # full precision: q = 0 (Remarks 1 and 4)
            return ["fed_ef_thm41" if full else "fed_ef_thm44"]
        return ["fed_ef_thm41"] if full else []
    if setting["server"] == "amsgrad" and full and (setting["error_feedback"] or not biased):
        return ["fed_ef_thm43"]
    return []


def setting_params(setting: dict) -> dict:
    """The setting as one results-table column (a JSON string)."""
    return {SETTING_COLUMN: json.dumps(setting, sort_keys=True)}


def setting_from_df(df: pd.DataFrame) -> dict:
    if SETTING_COLUMN not in df:
        raise ValueError(f"no {SETTING_COLUMN!r} column: pass the setting "
                         "(sims.experiments.probes.theory_setting) explicitly")
    values = df[SETTING_COLUMN].dropna().unique()
    if len(values) != 1:
        raise ValueError(f"expected one run's table, found {len(values)} settings")
    return json.loads(values[0])


# ---------------------------------------------------------------------------- constants
def _wide(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    sub = df[df.metric == metric]
    if sub.empty:
        return pd.DataFrame()
    return sub.pivot_table(index="round", columns="seed", values="value", aggfunc="first",
                           dropna=False)


def _running(wide: pd.DataFrame, rounds, how: str = "max") -> pd.DataFrame:
    """Running max (or min) over rounds, nan-aware, read at ``rounds``."""
    if wide.empty:
        return pd.DataFrame(index=rounds)
    full = wide.reindex(sorted(set(wide.index) | set(rounds)))
    fill = -np.inf if how == "max" else np.inf
    acc = full.fillna(fill).cummax() if how == "max" else full.fillna(fill).cummin()
    return acc.replace(fill, np.nan).reindex(rounds)


def _combine_max(*frames) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty and len(f.columns)]
    if not frames:
        return pd.DataFrame()
    out = frames[0]
    for f in frames[1:]:
        out = np.fmax(out, f.reindex_like(out))
    return out


def _running_mean_pooled(wide: pd.DataFrame, rounds) -> pd.Series:
    """Mean over every seed and every round <= t of a per-round metric, read at ``rounds``."""
    if wide.empty:
        return pd.Series(np.nan, index=rounds)
    full = wide.reindex(sorted(set(wide.index) | set(rounds)))
    total = full.sum(axis=1, min_count=1).fillna(0).cumsum()
    count = full.notna().sum(axis=1).cumsum()
    return (total / count.where(count > 0)).reindex(rounds)


def measured_constants(df: pd.DataFrame, qa_reading: str = "avg") -> pd.DataFrame:
    """Per seed and probe round, the running constants the bounds use (one row per (seed,
    round); columns ``L, sigma2, sigma_g2, sigma_g2_max, qC2, qA2_round, qA2_avg, q2, G,
    G_inf, staleness_max, tail_index``).

    ``q_A^2`` is read from the engine's per-round ``qA2`` (the round's actual messages; the
    probe's dry-run ``probe_qA2`` where the engine has none) in two ways: ``qA2_round``, the
    running max of the per-round ratios (Assumption 3 read round by round), and
    ``qA2_avg``, the mean of the per-round ratios over all seeds and rounds so far (Fed-EF
    App. C's "averaged q_A^2", spec item 19). ``q2 = max(qC2, qA2_<qa_reading>)``."""
    if qa_reading not in ("avg", "round"):
        raise ValueError(f"qa_reading must be 'avg' or 'round', got {qa_reading!r}")
    rounds = sorted(df[df.metric == "probe_time"]["round"].unique())
    if not rounds:
        raise ValueError("no probe metrics in this table (run with sims.experiments.probes.Probe)")
    run = {m: _running(_wide(df, m), rounds) for m in
           ("probe_L_hvp", "probe_L_secant", "probe_L_secant_client", "probe_sigma2_max",
            "probe_sigma_g2_mean", "probe_sigma_g2_max", "probe_qC2_max",
            "probe_G", "probe_G_inf", "probe_staleness_max")}
    qa_metric = "qA2" if (df.metric == "qA2").any() else "probe_qA2"
    seeds = sorted(df.seed.unique())
    qa_avg = _running_mean_pooled(_wide(df, qa_metric), rounds)
    cols = {
        "L": _combine_max(run["probe_L_hvp"], run["probe_L_secant"],
                          run["probe_L_secant_client"]),
        "sigma2": run["probe_sigma2_max"], "sigma_g2": run["probe_sigma_g2_mean"],
        "sigma_g2_max": run["probe_sigma_g2_max"], "qC2": run["probe_qC2_max"],
        "qA2_round": _running(_wide(df, qa_metric), rounds),
        "qA2_avg": pd.DataFrame({s: qa_avg for s in seeds}, index=rounds),
        "G": run["probe_G"], "G_inf": run["probe_G_inf"],
        "staleness_max": run["probe_staleness_max"],
        "tail_index": _running(_wide(df, "probe_tail_index"), rounds, "min"),
    }
    frames = []
    for name, wide in cols.items():
        wide = wide.reindex(index=rounds, columns=seeds) if len(wide.columns) else \
            pd.DataFrame(np.nan, index=rounds, columns=seeds)
        frames.append(wide.stack(future_stack=True).rename(name))
    out = pd.concat(frames, axis=1)
    out.index.names = ["round", "seed"]
    out = out.reset_index()
    qa = out[f"qA2_{qa_reading}"]
    out["q2"] = np.fmax(out["qC2"], qa)          # nan only where both are nan
    out["seed"] = out["seed"].astype(int)
    return out[["seed", "round", *[c for c in out.columns if c not in ("seed", "round")]]]


def _f0(df: pd.DataFrame, seed) -> float:
    for metric in ("suboptimality", "train_loss"):   # f* >= 0 for a loss: f0 - f* <= f0
        sub = df[(df.metric == metric) & (df.seed == seed) & (df["round"] == 0)]
        if len(sub):
            return float(sub.value.iloc[0])
    return math.nan


def _inputs(setting: dict, c, T: int, f0: float, q2_from_setting: bool) -> dict:
    q2 = c["q2"]
    if q2_from_setting or (isinstance(q2, float) and math.isnan(q2)):
        q2 = setting["q2_worst"]          # the compressor's worst case (not measured)
    if setting.get("compressor") in (None, "full"):
        q2 = 0.0
    return {"L": c["L"], "sigma": math.sqrt(c["sigma2"]) if c["sigma2"] >= 0 else math.nan,
            "sigma_g": math.sqrt(c["sigma_g2"]) if c["sigma_g2"] >= 0 else math.nan,
            "q": math.sqrt(q2) if q2 >= 0 else math.nan, "G": c["G"],
            "n": setting["n"], "m": setting["m"], "K": setting["K"], "T": T,
            "d": setting["d"], "eta": setting["eta"], "eta_l": setting["eta_l"],
            "beta1": setting["beta1"], "epsilon": setting["epsilon"],
            "f0_minus_fstar": f0, **_BOUND_FLAGS}


def _call(fn, inputs: dict):
    """``fn`` with the keyword arguments it accepts (a theorem's bound or conditions)."""
    names = {p.name for p in inspect.signature(fn).parameters.values()
             if p.kind == p.KEYWORD_ONLY}
    return fn(**{k: v for k, v in inputs.items() if k in names})


def _evaluate(name: str, inputs: dict) -> tuple[float, list[str]]:
    """(bound, violated conditions); the bound is nan where its premises make it undefined
    (q >= 1, a constant not measured)."""
    bound_fn, cond_fn = tb.EVALUATORS[name]
    if any(isinstance(v, float) and math.isnan(v) for k, v in inputs.items()
           if k in ("L", "q", "sigma", "sigma_g", "f0_minus_fstar")
           or (k == "G" and name == "fed_ef_thm43")):
        return math.nan, []
    try:
        conds = list(_call(cond_fn, {**inputs, "corrected": False}))
        if name == "fed_ef_thm42":
            conds += [c + " (corrected, spec sec. 6)" for c in
                      _call(cond_fn, {**inputs, "corrected": True}) if c not in conds]
    except ValueError:
        conds = []
    try:
        bound = float(_call(bound_fn, inputs))
    except (ValueError, ZeroDivisionError, OverflowError):
        bound = math.nan
    return bound, conds


def _running_avg_grad(df: pd.DataFrame, seed, T: int) -> float:
    sub = df[(df.metric == "grad_norm2") & (df.seed == seed) & (df["round"] < T)]
    return float(sub.value.mean()) if len(sub) else math.nan


def bounds_from_probe(df: pd.DataFrame, setting: dict | None = None, *,
                      q2_from_setting: bool = False, qa_reading: str = "avg") -> pd.DataFrame:
    """Tidy rows (run, seed, round, metric, value): ``avg_grad_norm2`` (the measured
    left-hand side) and ``bound_<theorem>`` at every probe round, plus the constants used
    (``used_L``, ``used_sigma2``, ``used_sigma_g2``, ``used_q2``, ``used_G``).
    ``q2_from_setting`` evaluates with the compressor's worst-case ``q_C^2`` instead;
    ``qa_reading`` picks how ``q_A`` enters (:func:`measured_constants`)."""
    setting = setting or setting_from_df(df)
    consts = measured_constants(df, qa_reading)
    run = df["run"].iloc[0] if "run" in df and len(df) else "run"
    rows = []
    for _, c in consts.iterrows():
        seed, T = c["seed"], int(c["round"])
        f0 = _f0(df, seed)
        vals = {"avg_grad_norm2": _running_avg_grad(df, seed, T), "used_L": c["L"],
                "used_sigma2": c["sigma2"], "used_sigma_g2": c["sigma_g2"],
                "used_q2": c["q2"], "used_G": c["G"]}
        for name in setting["theorems"]:
            vals[f"bound_{name}"] = _evaluate(name, _inputs(setting, c, T, f0,
                                                            q2_from_setting))[0]
        rows += [{"run": run, "seed": seed, "round": T, "metric": k, "value": v}
                 for k, v in vals.items()]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- premises
@dataclass
class Violation:
    theorem: str          # a key of THEOREM_LABELS, or "all" for an assumption every one uses
    premise: str
    round: int            # first probe (or engine) round at which it fails, any seed
    seeds: list
    detail: str = ""

    def line(self) -> str:
        label = THEOREM_LABELS.get(self.theorem, "every Fed-EF theorem"
                                   if self.theorem == "all" else self.theorem)
        seeds = f"seed{'s' if len(self.seeds) > 1 else ''} {', '.join(map(str, self.seeds))}"
        return (f"{label}: premise '{self.premise}' fails from round {self.round} ({seeds})"
                + (f"; {self.detail}" if self.detail else ""))


def _first(df: pd.DataFrame, metric: str, test) -> tuple[int, list, float] | None:
    sub = df[(df.metric == metric) & df.value.notna()]
    bad = sub[test(sub.value.to_numpy())]
    if bad.empty:
        return None
    r = int(bad["round"].min())
    at = bad[bad["round"] == r]
    return r, sorted(int(s) for s in bad.seed.unique()), float(at.value.iloc[0])


def premise_violations(df: pd.DataFrame, setting: dict | None = None, *,
                       staleness_bound: int | None = None, q2_from_setting: bool = False,
                       qa_reading: str = "avg") -> list[Violation]:
    """Every premise the measured constants break, with the first round it fails."""
    setting = setting or setting_from_df(df)
    theorems = setting["theorems"]
    out: list[Violation] = []
    consts = measured_constants(df, qa_reading)
    for name in theorems:
        first: dict[str, tuple[int, list, str]] = {}
        for _, c in consts.sort_values("round").iterrows():
            T = int(c["round"])
            inputs = _inputs(setting, c, T, _f0(df, c["seed"]), q2_from_setting)
            _, conds = _evaluate(name, inputs)
            if inputs["q"] >= 1:
                conds = conds + ["q = max(q_C, q_A) < 1"]
            for cond in conds:
                r, seeds, detail = first.get(cond, (T, [], ""))
                if T == r:
                    seeds = sorted(set(seeds) | {int(c["seed"])})
                    detail = (f"measured L = {c['L']:.4g}, q^2 = {c['q2']:.4g}; eta_l = "
                              f"{setting['eta_l']:g}, eta = {setting['eta']:g}, "
                              f"K = {setting['K']}") if not detail else detail
                    first[cond] = (r, seeds, detail)
        out += [Violation(name, cond, r, seeds, detail)
                for cond, (r, seeds, detail) in first.items()]
    if theorems:
        compressed = setting.get("compressor") not in (None, "full")
        if compressed:
            qa_metric = "qA2" if (df.metric == "qA2").any() else "probe_qA2"
            where = "the round's messages" if qa_metric == "qA2" else "dry run"
            hit = _first(df, qa_metric, lambda v: v >= 1)
            if hit:
                vals = df[df.metric == qa_metric].value.dropna()
                out.append(Violation("all", "A3 (per round): q_A < 1", hit[0], hit[1],
                                     f"q_A^2 = {hit[2]:.4g} ({where}; {(vals >= 1).sum()} of "
                                     f"{len(vals)} seed-rounds >= 1)"))
            avg = consts[consts.qA2_avg >= 1]
            if len(avg):
                r = int(avg["round"].min())
                out.append(Violation("all", "A3 (averaged over rounds and seeds, App. C): "
                                     "q_A < 1", r, sorted(consts.seed.unique().tolist()),
                                     f"mean q_A^2 so far = {avg.qA2_avg.iloc[0]:.4g}"))
            hit = _first(df, "probe_qC2_max", lambda v: v >= 1)
            if hit:
                out.append(Violation("all", "Def. 1: q_C < 1", hit[0], hit[1],
                                     f"max_i ||C(x_i) - x_i||^2/||x_i||^2 = {hit[2]:.4g}"))
        hit = _first(df, "probe_tail_index", lambda v: v < 2)
        if hit:
            out.append(Violation("all", "A2(ii): finite variance sigma^2", hit[0], hit[1],
                                 f"Hill tail index {hit[2]:.3g} < 2 (heavy-tailed noise, "
                                 "FedAda2 Def. 1)"))
        first_round = int(consts["round"].min())
        if setting["K_min"] != setting["K"]:
            out.append(Violation("all", "every client takes K local steps", first_round,
                                 sorted(int(s) for s in consts.seed.unique()),
                                 f"local steps range over {setting['K_min']}..{setting['K']}; "
                                 "bounds use K = max"))
        if "fed_ef_thm44" in theorems and setting["participation"] != "fixed":
            out.append(Violation("fed_ef_thm44", "m clients sampled uniformly without "
                                 "replacement", first_round,
                                 sorted(int(s) for s in consts.seed.unique()),
                                 f"participation is {setting['participation']}"))
    if staleness_bound is not None:
        hit = _first(df, "probe_staleness_max", lambda v: v > staleness_bound)
        if hit:
            out.append(Violation("all", f"staleness <= {staleness_bound}", hit[0], hit[1],
                                 f"a participant's error was {hit[2]:.0f} rounds old"))
    return sorted(out, key=lambda v: (v.round, v.theorem, v.premise))


def summary(df: pd.DataFrame, setting: dict | None = None, **kw) -> list[str]:
    """The run's summary: which theorems cover it and which premises fail from when."""
    setting = setting or setting_from_df(df)
    if not setting["theorems"]:
        return [f"no Fed-EF theorem covers {setting['algorithm']} "
                f"({setting['family']}, {setting['participation']} participation): "
                "constants measured, no bound evaluated"]
    viol = premise_violations(df, setting, **kw)
    names = ", ".join(THEOREM_LABELS[t] for t in setting["theorems"])
    if not viol:
        return [f"{names}: every checked premise holds with the measured constants"]
    return [v.line() for v in viol]


def violations_records(viol: list[Violation]) -> list[dict]:
    return [asdict(v) for v in viol]

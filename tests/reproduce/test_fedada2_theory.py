"""``reproduce.fedada2_theory``: Prop. 9 (iii), Prop. 9 (i) at K > 1, Theorem 13's regret and
Corollary 8's rate. The ``--tiny`` run's labels are asserted exactly; constructed tables reach
the other labels (a bound exceeded, FedAvg flat, client AdaGrad growing, no decay in T)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reproduce import common, fedada2_theory as ft
from verdict_util import labels, saved


def test_tiny_run_saves_exact_labels(tmp_path):
    out = tmp_path / "out"
    assert common.main(ft, ["--tiny", "--quiet", "--threads", "1", "--out", str(out),
                            "--figures", str(tmp_path / "fig")]) == 0
    got = saved(out, "fedada2_theory")
    assert got == {"3": "shows",
                   "1K [K=5]": "shows",
                   "6 [K=1]": "shows", "6 [K=5]": "shows",
                   # three horizons over 0.6 decades: no slope to read
                   "8 [K=1]": "premise absent", "8 [K=5]": "premise absent"}
    assert (tmp_path / "fig" / "fedada2_theory.png").exists()


def test_one_round_stays_under_the_propositions_bound():
    cfg = ft.Config(paths=20_000)
    for T in (100, 10_000):
        got = ft.one_round(cfg, T, seed=0)
        assert got["client_adagrad"] <= got["bound"]
        assert 0 < got["b_tilde"] <= 1.0 + 1e-12      # |xi| <= |x + xi| + eps once |x| <= eps
        # the step is bounded: |x_{t+1}| <= delta + eta_l = 2c/sqrt(T)
        assert got["client_adagrad"] <= 4 * cfg.c ** 2


def _table(cfg, *, ratio=0.5, growth=None, reach=0.5, slopes=None, ks=(1, 5)):
    """A results table in the entry's long format: 9iii's ``T E x^2`` at ``ratio`` times its
    bound; the Monte-Carlo growths ``growth[(method, metric)]`` and client AdaGrad's largest
    path at ``reach`` times its almost-sure bound; Corollary 8's minima falling like
    ``T^slopes[K]``."""
    growth = growth or {("fedavg", "final_m2"): 1.5, ("client_adagrad", "final_m2"): 1.07,
                        ("fedavg", "regret"): 1.5, ("client_adagrad", "regret"): 1.01}
    slopes = slopes or {K: -1.0 for K in ks}
    rows, rng = [], np.random.default_rng(0)
    for seed in range(cfg.seeds):
        for T in common.flag_values(cfg, "ts_iii", int):
            rows += [{"part": "iii", "T": T, "method": "client_adagrad", "seed": seed,
                      "metric": "t_mean_sq", "value": 2.0 * ratio},
                     {"part": "iii", "T": T, "method": "fedavg", "seed": seed,
                      "metric": "t_mean_sq", "value": 3.0},
                     {"part": "iii", "T": T, "method": "bound", "seed": seed,
                      "metric": "bound", "value": 2.0}]
        for K in sorted({1, cfg.local_steps}):
            for (m, metric), g in growth.items():
                rows += [{"part": "mc", "K": K, "method": m, "seed": seed,
                          "metric": f"{metric}_{stat}", "value": v}
                         for stat, v in (("growth", g), ("max", reach * 4.0), ("bound", 4.0))]
        for K in ks:
            for T in common.flag_values(cfg, "ts_rate", int):
                jitter = float(np.exp(0.01 * rng.standard_normal()))
                rows.append({"part": "rate", "K": K, "T": T, "method": "fedada2", "seed": seed,
                             "metric": "min_grad_norm2", "value": jitter * T ** slopes[K]})
    return pd.DataFrame(rows)


def test_constructed_tables_reach_every_label():
    cfg = ft.Config(seeds=3)
    assert labels(ft.check(_table(cfg), cfg)) == {
        "3": "shows", "1K [K=5]": "shows", "6 [K=1]": "shows", "6 [K=5]": "shows",
        "8 [K=1]": "shows", "8 [K=5]": "shows"}
    got = labels(ft.check(_table(cfg, ratio=1.2), cfg))
    assert got["3"] == "does not show"
    flat = {("fedavg", "final_m2"): 1.0, ("client_adagrad", "final_m2"): 1.0,
            ("fedavg", "regret"): 1.02, ("client_adagrad", "regret"): 1.0}
    got = labels(ft.check(_table(cfg, growth=flat), cfg))
    assert got["1K [K=5]"] == "does not show" and got["6 [K=1]"] == "does not show"
    # a path of client AdaGrad beyond its almost-sure bound: its steps are not bounded
    got = labels(ft.check(_table(cfg, reach=1.2), cfg))
    assert got["1K [K=5]"] == "does not show" and got["6 [K=5]"] == "does not show"
    got = labels(ft.check(_table(cfg, slopes={1: -1.0, 5: 0.05}), cfg))
    assert got["8 [K=1]"] == "shows" and got["8 [K=5]"] == "does not show"


def test_a_missing_run_is_missing_and_a_short_horizon_premise_absent():
    cfg = ft.Config(seeds=3)
    df = _table(cfg)
    got = labels(ft.check(df[df.part != "iii"], cfg))
    assert got["3"].startswith("inconclusive: missing")
    got = labels(ft.check(df[~((df.part == "rate") & (df.K == 5))], cfg))
    assert got["8 [K=5]"].startswith("inconclusive: missing")
    short = ft.Config(seeds=3, ts_rate="50,100,200")
    assert labels(ft.check(_table(short), short))["8 [K=1]"] == "premise absent"


@pytest.mark.parametrize("flags, msg", [
    (["--paths", "10"], "--paths must be >= 1000"),
    (["--local-steps", "1"], "K > 1"),
    (["--ts-iii", "1", "--c", "5"], "eta_l = c/sqrt(T) <= 2 eps"),
    (["--ts-rate", "100"], "two horizons"),
    (["--rate-eps", "0"], "--rate-eps must be > 0"),
])
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, msg):
    rc = common.main(ft, ["--tiny", "--quiet", "--out", str(tmp_path), *flags])
    assert rc != 0
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err
    assert not math.isnan(rc)

"""``reproduce.fedlamb_theory``: Fed-LAMB's Theorem 5 (T1), rate in R (T2) and speedup in n
(T3) on a layered quadratic. The ``--tiny`` run's labels are asserted exactly; constructed
tables reach the other labels (a bound exceeded, no speedup, a transient start that removes
the noise-dominated premise)."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from reproduce import common, fedlamb_theory as lt
from sims.problems.quadratic import NoiseLaw
from verdict_util import labels, saved

CLAIM = "at least the bound's rate (the claim)"


def test_tiny_run_saves_exact_labels(tmp_path):
    out = tmp_path / "out"
    assert common.main(lt, ["--tiny", "--quiet", "--out", str(out), "--figures",
                            str(tmp_path / "fig")]) == 0
    got = saved(out, "fedlamb_theory")
    assert got["T1 [the theorem's statement form]"] == "shows"
    assert got["T1 [the theorem's proof form]"] == "shows"
    assert got[f"T2 [{CLAIM}]"] == "shows"
    assert got[f"T3 [{CLAIM}]"] == "shows"
    # tightness is information, never a second verdict on the same claim
    assert set(got) == {"T1 [the theorem's statement form]", "T1 [the theorem's proof form]",
                        f"T2 [{CLAIM}]", f"T3 [{CLAIM}]"}
    assert (tmp_path / "fig" / "fedlamb_theory.png").exists()


def _table(cfg, lhs_of, plain_of=None, M_grad=5.0) -> pd.DataFrame:
    """A tidy results table whose per-round metrics are constant at ``lhs_of(n, R)``."""
    rows = []
    todo = ({(cfg.n_rates, R) for R in common.flag_values(cfg, "rs", int)}
            | {(n, cfg.rounds) for n in common.flag_values(cfg, "ns", int)})
    rng = np.random.default_rng(0)
    for (n, R), seed in itertools.product(sorted(todo), range(cfg.seeds)):
        jitter = float(np.exp(0.01 * rng.standard_normal()))
        values = {"precond_grad_norm2": lhs_of(n, R) * jitter,
                  "grad_norm2": (plain_of or lhs_of)(n, R) * jitter,
                  "max_client_grad": M_grad}
        for t in range(R + 1):
            for metric, v in values.items():
                rows.append({"run": f"R{R}_n{n}", "n": n, "R": R, "alpha": lt.alpha(cfg, R),
                             "seed": seed, "round": t, "metric": metric, "value": v})
    return pd.DataFrame(rows)


def _cfg(**kw):
    cfg = lt.Config(seeds=4, rs="50,100,200", ns="4,8,16", rounds=100, **kw)
    return cfg


def test_rates_at_the_bound_show_and_tightness_is_printed():
    cfg = _cfg()
    got = labels(lt.check(_table(cfg, lambda n, R: 3.0 / np.sqrt(n * R)), cfg))
    assert got[f"T2 [{CLAIM}]"] == "shows"
    assert got[f"T3 [{CLAIM}]"] == "shows"
    lines = lt.check(_table(cfg, lambda n, R: 3.0 / np.sqrt(n * R)), cfg)
    assert any(str(x).startswith("T3 tightness (not the claim): fitted slope in n") and "-0.5" in str(x)
               for x in lines)


def test_no_speedup_and_no_decay_do_not_show():
    cfg = _cfg()
    got = labels(lt.check(_table(cfg, lambda n, R: 1.0), cfg))
    assert got[f"T2 [{CLAIM}]"] == "does not show"
    assert got[f"T3 [{CLAIM}]"] == "does not show"


def test_a_left_side_above_the_bound_does_not_show():
    cfg = _cfg()
    got = labels(lt.check(_table(cfg, lambda n, R: 1e12), cfg))
    assert got["T1 [the theorem's statement form]"] == "does not show"


def test_a_start_away_from_the_optimum_is_premise_absent_for_the_rates_only():
    cfg = _cfg(x0=0.5)                     # Delta > 0: the transient, not the noise, leads
    got = labels(lt.check(_table(cfg, lambda n, R: 1.0), cfg))
    assert {k: v for k, v in got.items() if k.startswith(("T2", "T3"))} and \
        {v for k, v in got.items() if k.startswith(("T2", "T3"))} == {"premise absent"}
    assert got["T1 [the theorem's statement form]"] == "shows"   # the bound needs no Delta = 0


def test_rademacher_noise_is_bounded_with_unit_variance():
    law = NoiseLaw("rademacher", 0.5)
    x = law.sample(np.random.default_rng(0), (10_000, 20))
    assert set(np.unique(x)) == {-0.5, 0.5}
    assert law.variance() == 0.25
    assert abs(x.var() - 0.25) < 0.01


def test_layers_must_split_evenly():
    with pytest.raises(common.EntryError, match="equal layers"):
        lt.problem(lt.Config(d=10, layers=3), 4)

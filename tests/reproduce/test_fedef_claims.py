"""The Fed-EF entries' checks test the paper's claims (issue 17): seed intervals, verdicts that
can go either way, partial and diverged results, and the dataset in the paper's regime.

The claim tests feed each check a synthetic results table whose answer is known (e.g. late
levels that fall like n^(-1/2) in every seed, or restarting that helps in one seed and hurts
in another) and assert the verdict; the run tests use the tiny scale (seconds).
"""
from __future__ import annotations

import importlib
import itertools

import numpy as np
import pandas as pd
import pytest

from reproduce import common, fig1, fig8, fig9
from sims.data import dataset_label, paper_dataset
from sims.experiments.synthetic import qa
from sims.experiments.synthetic.stats import seed_interval
from test_data import make_mnist_like


def _run(name, tmp_path, *extra):
    entry = importlib.import_module(f"reproduce.{name}")
    out, figs = tmp_path / "results", tmp_path / "figures"
    return common.main(entry, ["--tiny", "--quiet", "--out", str(out), "--figures", str(figs),
                               *extra])


def _plot_without(name, tmp_path, capsys, prefix) -> str:
    """Run ``name`` at ``--tiny``, delete its saved runs named ``prefix*``, redraw with
    ``--plot-only --available`` and return what it printed."""
    assert _run(name, tmp_path) == 0
    capsys.readouterr()
    for p in (tmp_path / "results" / name).glob(f"{prefix}*"):
        p.unlink()
    assert _run(name, tmp_path, "--plot-only", "--available") == 0
    return capsys.readouterr().out


# ------------------------------------------------------------------ data in the paper's regime
def test_mnist_resolves_to_full_mnist_else_the_fashion_mnist_stand_in(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.delenv("FEDTOOLKIT_DATA", raising=False)
    make_mnist_like(tmp_path / "data")
    assert paper_dataset("mnist", str(tmp_path / "data")) == "mnist"
    assert dataset_label("mnist", str(tmp_path / "data")) == "MNIST"
    (tmp_path / "empty").mkdir()
    assert paper_dataset("mnist", str(tmp_path / "empty")) == "fmnist"
    assert "stand-in" in capsys.readouterr().err          # the one-line notice
    assert dataset_label("mnist", str(tmp_path / "empty")) == "Fashion-MNIST (stand-in for MNIST)"
    assert paper_dataset("mnist-subset", None) == "mnist-subset"   # still there by name


def test_run_key_names_the_data_actually_run(tmp_path, monkeypatch):
    """A run on the stand-in is never reused for full MNIST: the key holds the resolved name."""
    monkeypatch.delenv("FEDTOOLKIT_DATA", raising=False)
    make_mnist_like(tmp_path / "data")
    (tmp_path / "empty").mkdir()
    with_mnist = fig8.Config(data_dir=str(tmp_path / "data")).run_key()
    without = fig8.Config(data_dir=str(tmp_path / "empty")).run_key()
    assert with_mnist["dataset"] == "mnist" and without["dataset"] == "fmnist"


def test_default_mnist_entries_have_the_papers_client_regime():
    """The defaults give 300 samples and 10 local steps a client at n = 200 (the embedded
    subset gave 20 samples and one full-batch step)."""
    for mod in (fig1, fig8, fig9):
        cfg = mod.Config()
        assert cfg.dataset == "mnist" and cfg.rounds == 100 and cfg.seeds >= 3
    ds = common.cached_dataset(paper_dataset("mnist", None), None)
    per_client = len(ds.y_train) // 200
    assert per_client >= 300 and -(-per_client // 32) >= 10


# ------------------------------------------------------------------ statistics
def test_seed_interval_is_the_student_t_interval():
    mean, lo, hi = seed_interval([1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0)
    assert hi - mean == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))
    assert np.isnan(seed_interval([1.0])[1])
    assert seed_interval([1.0, np.nan, 3.0])[0] == pytest.approx(2.0)


# ------------------------------------------------------------------ Figure 8
def _fig8_table(slope_n, slope_m, seeds=3, noise=0.02, rounds=100):
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(seeds):
        for setting, var, slope in (("full", "n", slope_n), ("partial", "m", slope_m)):
            for x in (20, 40, 60, 100):
                level = x ** slope * np.exp(noise * rng.standard_normal())
                n, m = (x, x) if setting == "full" else (200, x)
                name = f"{setting}_{var}{x}"
                for r in range(0, rounds + 1, 10):
                    for metric in ("grad_norm2", "train_loss"):
                        rows.append({"run": name, "seed": seed, "round": r, "metric": metric,
                                     "value": level * (1 + 10 * (r < 50)), "setting": setting,
                                     "n": n, "m": m})
    return pd.DataFrame(rows)


def _label(lines, claim, scope=""):
    """The label of ``claim`` (whose scope starts with ``scope``) among a check's verdicts."""
    found = [v for v in lines if getattr(v, "claim", None) == claim
             and v.scope.startswith(scope)]
    assert len(found) == 1, [str(v) for v in found]
    return found[0].label


AVG = "grad_norm2, mean over rounds"


def test_fig8_check_shows_the_speedup_and_the_larger_spread_across_m():
    lines = fig8.check(_fig8_table(-0.5, -1.0, noise=0.002), fig8.Config())
    assert _label(lines, "E10a", AVG) == "shows"            # slope -0.50, theory -0.5
    assert _label(lines, "E10b", AVG) == "shows"            # slope -1.00, theory -1
    assert _label(lines, "E10c", AVG) == "shows"            # m spreads further than n
    assert _label(lines, "E10a", "train_loss") == "shows"   # a speedup in the train loss


def test_fig8_check_says_a_sublinear_speedup_is_not_the_linear_one():
    lines = fig8.check(_fig8_table(-0.5, -0.6, noise=0.002), fig8.Config())
    assert _label(lines, "E10b", AVG) == "does not show"    # -0.60, outside -1 +- 0.15
    assert _label(lines, "E10b", "train_loss") == "shows"   # still a speedup


def test_fig8_check_says_does_not_show_when_the_curves_do_not_separate():
    lines = fig8.check(_fig8_table(0.0, -0.5), fig8.Config())
    assert _label(lines, "E10a", AVG) == "does not show"
    # flat: a slope on the boundary 0 decides nothing at any number of seeds
    assert _label(lines, "E10a", "train_loss") == "inconclusive: underpowered"
    # m spreads further than n here, so the comparison itself is shown
    assert _label(lines, "E10c", AVG) == "shows"
    lines = fig8.check(_fig8_table(-0.5, -0.5), fig8.Config())
    assert _label(lines, "E10c", AVG) == "inconclusive: underpowered"


def test_fig8_all_evidence_diverged_is_inconclusive_diverged():
    df = _fig8_table(-0.5, -1.0)
    df["diverged_at"] = 20.0
    lines = fig8.check(df, fig8.Config())
    assert _label(lines, "E10a", AVG) == "inconclusive: diverged"
    assert _label(lines, "E10c", AVG) == "inconclusive: diverged"


def test_fig8_eval_every_zero_is_refused_before_any_work(tmp_path, capsys):
    assert _run("fig8", tmp_path, "--eval-every", "0") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --eval-every must be >= 1") and "\n" not in err
    assert not (tmp_path / "results").exists()


def test_fig8_diverged_runs_are_reported_instead_of_a_verdict(tmp_path, capsys):
    from verdict_util import saved
    assert _run("fig8", tmp_path, "--eta-l", "1000", "--rounds", "10") == 0
    out = capsys.readouterr().out
    assert "DIVERGED" in out
    # every replica diverged; the tiny run's card fails first (10 of 100 rounds)
    assert set(saved(tmp_path / "results", "fig8").values()) == {"premise absent"}


def test_fig8_partial_results_name_the_missing_runs(tmp_path, capsys):
    out = _plot_without("fig8", tmp_path, capsys, "partial_")
    assert "missing results for 2 run(s): partial_m5, partial_m20" in out
    assert "E10b (grad_norm2, mean over rounds 1..T): slope in m -> inconclusive: missing" in out
    assert "E10c (grad_norm2, mean over rounds 1..T): larger spread across m -> " \
           "inconclusive: missing (runs missing)" in out


# ------------------------------------------------------------------ Figure 1
def _fig1_table(fp_end, sign_end, sign_rise, seeds=3, rounds=100):
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(seeds):
        for i, (method, end, rise) in enumerate(((fig1.FP, fp_end, 0.02),
                                                 (fig1.SIGN, sign_end, sign_rise),
                                                 (fig1.EF, fp_end, 0.02))):
            for r in range(0, rounds + 1, 5):
                acc = end - rise * (rounds - r) / 10 + 0.005 * rng.standard_normal()
                for metric, v in (("test_acc", acc), ("train_loss", 1 - acc)):
                    rows.append({"run": f"variant{i}", "seed": seed, "round": r,
                                 "metric": metric, "value": v, "method": method})
    return pd.DataFrame(rows)


def test_fig1_check_calls_a_large_stalled_gap_the_papers_collapse():
    lines = fig1.check(_fig1_table(0.80, 0.30, 0.0, seeds=8), fig1.Config())
    assert _label(lines, "E1") == "shows"
    assert [p.label for p in lines[-1].parts] == ["shows", "shows"]


def test_fig1_check_calls_a_small_gap_with_sign_still_rising_a_slowdown():
    lines = fig1.check(_fig1_table(0.80, 0.75, 0.02), fig1.Config())
    assert _label(lines, "E1") == "does not show"
    gap, stalled = lines[-1].parts
    assert gap.label == "does not show" and 4 < gap.estimate * 100 < 6    # 5 points, not 20


def test_fig1_without_direct_sign_gives_no_verdict():
    df = _fig1_table(0.8, 0.3, 0.0)
    lines = fig1.check(df[df.method == fig1.FP], fig1.Config())
    assert any("missing results for 2 run(s)" in str(x) for x in lines)
    assert _label(lines, "E1") == "inconclusive: missing"


# ------------------------------------------------------------------ Figure 9
def _fig9_table(log_ratios, rounds=100, start=50):
    rows = []
    for seed, d in enumerate(log_ratios):
        for variant, shift in (("standard", 0.0), ("restart S=10", d)):
            for r in range(0, rounds + 1, 5):
                v = np.exp(-r / 50 + (shift if r > start else 0.0) + 0.01 * seed)
                rows.append({"run": f"logreg_m20_{'standard' if shift == 0 else 'restart'}",
                             "seed": seed, "round": r, "metric": "grad_norm2", "value": v,
                             "model": "logreg", "m": 20, "variant": variant})
    return pd.DataFrame(rows)


def test_fig9_paired_comparison_resolves_or_says_not_resolved():
    cfg = fig9.Config(models="logreg", ms="20")
    shows = fig9.check(_fig9_table([-0.2, -0.25, -0.15, -0.2]), cfg)
    assert _label(shows, "E11") == "shows" and shows[-1].estimate == pytest.approx(-0.2)
    mixed = fig9.check(_fig9_table([-0.3, 0.2, -0.1, 0.15]), cfg)
    assert _label(mixed, "E11") == "inconclusive: underpowered"
    assert "seeds would decide it" in mixed[-1].reason
    worse = fig9.check(_fig9_table([0.2, 0.25, 0.15, 0.2]), cfg)
    assert _label(worse, "E11") == "does not show"


def test_fig9_rounds_before_restarting_gives_no_verdict(tmp_path, capsys):
    """As ``fig9 --rounds 40`` with restarting from round 50: the check does not crash."""
    from verdict_util import saved
    assert _run("fig9", tmp_path, "--rounds", "3") == 0      # tiny: restarting from round 4
    out = capsys.readouterr().out
    assert "ends before restarting starts" in out
    assert saved(tmp_path / "results", "fig9") == {"E11": "inconclusive: missing"}


def test_fig9_only_standard_runs_available_gives_no_verdict(tmp_path, capsys):
    assert _run("fig9", tmp_path, "--seeds", "2") == 0
    capsys.readouterr()
    for p in (tmp_path / "results" / "fig9").glob("*_restart_*"):
        p.unlink()
    assert _run("fig9", tmp_path, "--seeds", "2", "--plot-only", "--available") == 0
    out = capsys.readouterr().out
    assert "missing results for 1 run(s): logreg_m10_restart" in out
    from verdict_util import saved
    assert saved(tmp_path / "results", "fig9") == {"E11 [logreg, m=10]": "premise absent"}


# ------------------------------------------------------------------ diverged replicas
def test_diverged_replicas_are_left_out_of_the_evidence():
    df = _fig9_table([-0.2, -0.2, -0.2])
    df["diverged_at"] = np.nan
    bad = (df.seed == 1) & (df.variant == "standard")
    df.loc[bad & (df["round"] >= 60), "value"] = np.nan
    df.loc[bad, "diverged_at"] = 60.0
    ok, lines = common.usable(fig9, fig9.Config(models="logreg", ms="20"), df)
    assert "DIVERGED: 1 replica(s)" in lines[-1] and "seed 1 at round 60" in lines[-1]
    assert set(ok[ok.variant == "standard"].seed) == {0, 2}
    assert np.isfinite(ok.value).all()


# ------------------------------------------------------------------ q_A
def test_well_below_one_threshold_fails_a_round_above_it(tmp_path):
    from reproduce import qa_sim
    cfg = qa_sim.Config(train_problems="quadratic", train_compressors="sign,topk-0.1",
                        dists="", out=str(tmp_path))

    def table(peak):
        rows = []
        for comp, r in itertools.product(("sign", "topk-0.1"), range(1, 101)):
            v = 0.3 if (comp == "sign" or r != 70) else peak
            rows.append({"run": f"train_quadratic_{comp}", "seed": 0, "round": r,
                         "metric": "qA2", "value": v, "part": "train", "compressor": comp,
                         "train_problem": "quadratic"})
        return pd.DataFrame(rows)

    assert qa.WELL_BELOW == 0.5
    good = qa_sim.check(table(0.45), cfg)[-1]
    assert good.claim == "E13x" and [p.label for p in good.parts] == ["shows", "shows"]
    bad = qa_sim.check(table(0.9), cfg)[-1]
    assert [p.label for p in bad.parts] == ["shows", "does not show"]
    assert bad.parts[1].estimate == pytest.approx(0.9)
    # 10 clients a round where the paper averages about 100: the claim is not tested
    assert good.label == bad.label == "premise absent"


def test_qa_sim_with_only_training_results_draws_and_names_the_missing(tmp_path, capsys):
    out = _plot_without("qa_sim", tmp_path, capsys, "sim_")
    assert "missing results for 2 run(s): sim_gaussian_disjoint, sim_laplace_disjoint" in out
    assert "E12: q_A^2 < 1 in every cell -> inconclusive: missing" in out
    assert "E13x: q_A^2 well below 1 during training -> premise absent" in out

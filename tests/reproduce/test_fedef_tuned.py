"""The Fed-EF image tables' symmetric tuned comparison (``fedef_images --tuned``): App. B.1's
grid bracketed from Table 1's point, the pick read at the plotted horizon, verdicts scoped
``tuned comparison`` with the protocol's conformance on their cards, and Table 1's verdicts
untouched by the tuned rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from reproduce import common, fedef_images, protocols
from reproduce.sweeps import FED_EF_TABLE1

torch.set_num_threads(1)


def test_tuned_panels_read_server_at_p():
    assert fedef_images.tuned_panels("ams@0.1, sgd@0.5") == [("ams", 0.1), ("sgd", 0.5)]
    assert fedef_images.tuned_panels("") == []
    for bad in ("adam@0.1", "ams", "ams@2"):
        with pytest.raises(common.EntryError):
            fedef_images.tuned_panels(bad)


@pytest.mark.parametrize("ds, server, eta, eta_l", [
    ("fmnist", "ams", (1e-3, 1e-2, 1e-1), (1e-2, 1e-1, 1.0)),     # Table 1: (1e-2, 1e-1)
    ("fmnist", "sgd", (1e-1, 1.0, 10.0), (1e-2, 1e-1, 1.0)),      # (1, 1e-1)
    ("mnist", "sgd", (1.0, 10.0), (1e-4, 1e-3, 1e-2))])           # (10, 1e-3): eta on the top
def test_tuned_method_brackets_table1_point_in_app_b1_grid(ds, server, eta, eta_l):
    m = fedef_images.tuned_method(ds, server, "topk-0.01")
    assert (m.label, m.algorithm, m.fixed) == ("topk-0.01", f"fed-ef-{server}",
                                               {"compressor": "topk-0.01"})
    got = {b.key: b for b in m.brackets}
    assert got["eta"].values == pytest.approx(eta) and got["eta_l"].values == pytest.approx(eta_l)
    assert got["eta"].ladder == FED_EF_TABLE1["eta"]
    assert got["eta_l"].ladder == FED_EF_TABLE1["eta_l"]
    # off an edge the bracket climbs App. B.1's grid, never past its ends
    low = got["eta"].extend("low").values
    assert low[0] == pytest.approx(eta[0] / 10) and got["eta"].at_edge(10.0) is None


def _cfg(tmp_path, *extra):
    return common.parse_config(fedef_images, ["--tiny", "--datasets", "mnist", "--out",
                                              str(tmp_path / "r"), *extra])


def test_tuned_runs_only_when_asked_and_bad_settings_refused(tmp_path):
    assert fedef_images.tuned_runs(_cfg(tmp_path)) == []
    runs = fedef_images.tuned_runs(_cfg(tmp_path, "--tuned", "ams@0.5,sgd@0.1",
                                        "--tuned-compressors", "full,sign"))
    assert [r.name for r in runs] == ["mnist_p0.5_ams_full-tuned", "mnist_p0.5_ams_sign-tuned",
                                      "mnist_p0.1_sgd_full-tuned", "mnist_p0.1_sgd_sign-tuned"]
    assert runs[0].params["tuning"] == "tuned" and runs[0].params["rule"] == "final-acc"
    for extra in (["--tuned-compressors", "stoc-2"], ["--tuned-compressors", "topk-x"],
                  ["--hv-scale", "full"], ["--ams-reading", "torch"]):
        with pytest.raises(common.EntryError):
            fedef_images.tuned_runs(_cfg(tmp_path, "--tuned", "ams@0.5", *extra))


def test_bad_tuned_panel_is_one_line_before_any_work(tmp_path, capsys):
    assert common.main(fedef_images, ["--tiny", "--tuned", "ams@0.1,adam@0.1", "--out",
                                      str(tmp_path / "r")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--tuned: 'adam@0.1'" in err[0], err
    assert not list((tmp_path / "r").rglob("*.csv"))


def _tidy(accs: dict, rounds=(0, 5, 10), seeds=(0, 1, 2)) -> pd.DataFrame:
    """A tuning's tidy rows: ``accs[(eta, eta_l)] = (accuracy at each round)`` for every
    seed (seed s adds 0.001 s), with the protocol columns a tuning run writes."""
    proto = protocols.Protocol("tuned", "t", rule="final-acc", seeds=len(seeds), horizon=10,
                               plotted=10, required_seeds=3, interior=True)
    rows = []
    for (eta, eta_l), acc in accs.items():
        for s in seeds:
            for r, a in zip(rounds, acc):
                for metric, v in (("test_acc", a + 0.001 * s), ("train_loss", 1 - a),
                                  ("bits_up", 32.0 * r)):
                    rows.append({"seed": s, "round": r, "metric": metric, "value": v,
                                 "eta": eta, "eta_l": eta_l, "point": f"p{eta}-{eta_l}",
                                 "algorithm": "fed-ef-ams", "diverged_at": np.nan})
    df = pd.DataFrame(rows).assign(
        sweep="fmnist_p0.1_ams_topk-0.01-tuned", method="topk-0.01", dataset="fmnist", p=0.1,
        n=100, m=10, server="ams", compressor="topk-0.01", family="topk", param=0.01,
        **protocols.protocol_columns(proto))
    return df.assign(run=lambda d: d["sweep"] + ":" + d["method"])


def test_tuned_picks_read_the_pick_at_the_plotted_horizon():
    # (1e-2, 0.1) leads at round 5, (1e-3, 0.1) at round 10
    tuned = _tidy({(1e-2, 0.1): (0.1, 0.7, 0.6), (1e-3, 0.1): (0.1, 0.5, 0.65)})
    rows, picks = fedef_images.tuned_picks(tuned, rounds=10)
    assert picks[["eta", "eta_l"]].iloc[0].tolist() == pytest.approx([1e-3, 0.1])
    assert picks["score"].iloc[0] == pytest.approx(0.651)       # mean over seeds at round 10
    assert set(rows["run"]) == {"fmnist_p0.1_ams_topk-0.01"}     # named as Table 1's run
    assert set(rows["eta"]) == {1e-3} and len(rows) == 3 * 3 * 3
    _, early = fedef_images.tuned_picks(tuned, rounds=5)
    assert early["eta"].iloc[0] == pytest.approx(1e-2)
    # a diverged point is never the pick, however well it did before diverging
    bad = tuned.copy()
    bad.loc[bad["eta"] == 1e-3, "diverged_at"] = 7
    _, picks = fedef_images.tuned_picks(bad, rounds=10)
    assert picks["eta"].iloc[0] == pytest.approx(1e-2)


def test_tuned_comparison_entry(tmp_path, capsys):
    out, figs = tmp_path / "results", tmp_path / "figures"
    argv = ["--tiny", "--quiet", "--datasets", "mnist", "--servers", "ams", "--compressors",
            "full,topk-0.01", "--rounds", "1", "--tuned", "ams@0.5",
            "--tuned-compressors", "full,topk-0.01", "--out", str(out), "--figures", str(figs)]
    assert common.main(fedef_images, argv) == 0
    printed = capsys.readouterr().out
    assert (figs / "fedef_tuned_mnist_p0.5_ams.png").stat().st_size > 0
    assert "Table 3: p = 0.5, Fed-EF-AMS, tuned comparison" in printed
    tables = (out / "fedef_images" / "tables.md").read_text()   # and --write-docs' block
    assert "**Table 3: p = 0.5, Fed-EF-AMS**" in tables
    assert "**Table 3: p = 0.5, Fed-EF-AMS, tuned comparison**" in tables
    assert "selection seeds 1 (paper 3; >= 3) FAILS" in printed    # one seed: not the protocol
    from verdict_util import saved
    got = saved(out, "fedef_images")
    scope = "MNIST, p=0.5, Fed-EF-AMS"
    assert got[f"E3 [{scope}, tuned comparison]"] == "premise absent"
    assert f"E6 [{scope}, tuned comparison]" not in got            # bits do not depend on rates
    # the tuned rows leave Table 1's verdicts as they are without them
    cfg = common.parse_config(fedef_images, argv + ["--plot-only"])
    df = common.execute(fedef_images, cfg)
    paper, tuned = fedef_images.split_tuned(df)
    assert len(paper) and len(tuned) and set(tuned["protocol_kind"]) == {"tuned"}
    from verdict_util import labels
    alone = labels(fedef_images.check(paper, cfg))
    both = labels(fedef_images.check(df, cfg))
    assert alone and {k: v for k, v in both.items() if k in alone} == alone
    assert set(both) - set(alone) == {f"E3 [{scope}, tuned comparison]"}


def test_footer_counts_diverged_tuning_cells_apart_from_drawn_runs(tmp_path):
    """A diverged grid cell of a tuning is never drawn: the figures' footer counts such cells
    (3 seeds of one point here) instead of listing them as curves marked diverged."""
    tuned = _tidy({(1e-2, 0.1): (0.1, 0.7, 0.6), (1e-1, 0.1): (0.1, 0.1, 0.1)})
    tuned.loc[tuned["eta"] == 1e-1, "diverged_at"] = 3
    note = common.scale_note(fedef_images, _cfg(tmp_path), tuned)
    assert "3 cell(s) of the tuned comparison's grids diverged (never picked)" in note
    assert "DIVERGED" not in note
    paper = tuned.assign(protocol_kind="paper")
    assert "DIVERGED, marked x" in common.scale_note(fedef_images, _cfg(tmp_path), paper)


def _run_rows(run: str, diverged=np.nan, **params) -> pd.DataFrame:
    """Table 1's rows of one run (3 seeds, test accuracy at rounds 0 and 10)."""
    return pd.DataFrame([{"run": run, "seed": s, "round": r, "metric": "test_acc",
                          "value": 0.5, "diverged_at": diverged, "protocol_kind": "paper",
                          **params} for s in range(3) for r in (0, 10)])


def test_footer_states_only_what_its_figure_draws(tmp_path):
    """Each figure's footer names the divergences, tuning cells, missing runs and regime
    claims of its own panel (a tuned Fed-EF-SGD figure once listed Fed-EF-AMS's diverged
    runs and p = 0.5's regime)."""
    cfg = _cfg(tmp_path, "--ps", "0.5,0.1", "--compressors", "full,topk-0.01")
    tuned = _tidy({(1e-2, 0.1): (0.1, 0.7, 0.6), (1e-1, 0.1): (0.1, 0.1, 0.1)})
    tuned.loc[tuned["eta"] == 1e-1, "diverged_at"] = 3                  # Fed-EF-AMS cells
    tuned = tuned.assign(dataset="mnist", sweep="mnist_p0.1_ams_topk-0.01-tuned")
    base = dict(dataset="mnist", n=100, compressor="full", family="full")
    df = pd.concat([tuned,
                    _run_rows("mnist_p0.1_sgd_full", p=0.1, server="sgd", **base),
                    _run_rows("mnist_p0.1_ams_full", 7, p=0.1, server="ams", **base),
                    _run_rows("mnist_p0.5_sgd_full", 4, p=0.5, server="sgd", **base)],
                   ignore_index=True)
    whole = common.scale_note(fedef_images, cfg, df)
    assert all(s in whole for s in ("mnist_p0.1_ams_full seed 0", "mnist_p0.5_sgd_full",
                                     "3 cell(s)", "mnist_p0.5_ams_topk-0.01"))

    def note(*args):
        return common.scale_note(fedef_images, cfg, df, fedef_images.figure_scope(*args))
    sgd = note(0.1, ["mnist"], ["sgd"], ("full", "topk-0.01"))   # the tuned SGD figure
    assert "DIVERGED" not in sgd and "cell(s)" not in sgd, sgd
    assert "MISSING 1 run(s), not drawn: mnist_p0.1_sgd_topk-0.01" in sgd, sgd
    assert "ams" not in sgd and "p0.5" not in sgd, sgd
    assert "MISSING" not in note(0.1, ["mnist"], ["sgd"], ("full",))
    ams = note(0.1, ["mnist"], ["ams"], ("topk-0.01",))   # the tuned Fed-EF-AMS figure
    assert "3 cell(s)" in ams and "mnist_p0.1_ams_full" not in ams, ams
    table1 = note(0.1, ["mnist"], ["sgd", "ams"])           # Table 1's runs at p = 0.1
    assert "mnist_p0.1_ams_full seed 0" in table1 and "p0.5" not in table1, table1
    assert "cell(s)" not in table1 and "tuned" not in table1, table1

    from types import SimpleNamespace as V
    scope_sgd = fedef_images.figure_scope(0.1, ["mnist"], ["sgd"], ("full",))
    scope_t1 = fedef_images.figure_scope(0.1, ["mnist"], ["sgd", "ams"])
    for scope, yes, no in (
            (scope_sgd, ["MNIST, p=0.1, Fed-EF-SGD, tuned comparison",
                         "MNIST, p=0.1, Fed-EF-SGD, tuned comparison, TopK"],
             ["MNIST, p=0.1, Fed-EF-AMS, tuned comparison", "MNIST, p=0.1, Fed-EF-SGD",
              "MNIST, p=0.5, Fed-EF-SGD, tuned comparison",
              "FMNIST, p=0.1, Fed-EF-SGD, tuned comparison"]),
            (scope_t1, ["MNIST, p=0.1, Fed-EF-SGD", "MNIST, p=0.1, Fed-EF-AMS, TopK"],
             ["MNIST, p=0.1, Fed-EF-SGD, tuned comparison", "MNIST, p=0.5, Fed-EF-AMS",
              "MNIST, p=0.15, Fed-EF-AMS"])):
        assert all(scope.keeps_claim(V(scope=s)) for s in yes)
        assert not any(scope.keeps_claim(V(scope=s)) for s in no)

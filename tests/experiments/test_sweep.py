"""Sweeps (sims.experiments.sweep): grid specs, resumable cells keyed by code identity, batched grids equal
to separate runs, failures recorded and retried once, the papers' selection rules, figures and
the command line."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sims.experiments.sweep import (Axis, Grid, GridError, SweepSpec, logspace, make_units, parse_axis,
                        run_sweep, select, summarize, write_outputs)
from sims.experiments.sweep import cli, execute
from sims.experiments.sweep.execute import Cell

QUAD = {"problem": "quadratic", "n_clients": 6, "dim": 8, "local_steps": 2, "local_epochs": 1,
        "batch_size": 32, "partition": "shards", "noise": "gaussian", "df": None,
        "sigma": 0.5, "heterogeneity": 1.0, "dtype": "float64", "data_dir": None,
        "eval_train_samples": None}


def quad_spec(tmp_path, name="s", **kw) -> SweepSpec:
    grid = kw.pop("grid", None) or Grid.from_specs(
        "fedavg,fedadam", ["eta_l=0.05,0.1", "fedadam.eta=0.03,0.1"])
    return SweepSpec(name, grid, QUAD, cli.build_compare_problem, participation="m=3",
                     rounds=kw.pop("rounds", 4), seeds=kw.pop("seeds", [0, 1]),
                     out=str(tmp_path / "out"), **kw)


def _values(df):
    df = df[df.metric != "wall_time"]
    return df.set_index(["point", "seed", "round", "metric"])["value"].sort_index()


# ----------------------------------------------------------------------------- grids

def test_grid_axes_and_points():
    assert logspace(1e-4, 1, 5) == (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    ax = parse_axis("fed-lamb.lam=0,0.01,0.1")
    assert ax == Axis("lam", (0, 0.01, 0.1), "fed-lamb")
    assert parse_axis("eta_l=log:1e-3:1e-1:3").values == (1e-3, 1e-2, 1e-1)
    grid = Grid.from_specs("fed-lamb,fed-ams:beta1=0.8",
                           ["eta_l=log:1e-3:1e-1:3", "fed-lamb.lam=0,0.01,0.1"])
    pts = grid.check()
    assert len(pts) == 3 * 3 + 3
    assert grid.columns == ["eta_l", "lam"]
    ams = [p for p in pts if p.algorithm == "fed-ams"]
    assert all(p.settings["beta1"] == 0.8 and "lam" not in p.values for p in ams)
    assert len({p.key for p in pts}) == len(pts)
    assert pts[0].label == "fed-lamb eta_l=0.001 lam=0"


@pytest.mark.parametrize("algs,axes,text", [
    ("fedavg", ["nosuch=1,2"], "no algorithm of the grid has a hyperparameter 'nosuch'"),
    ("fedavg", ["eta_l=log:0:1:3"], "log range needs"),
    ("fedavg", ["eta_l"], "cannot read grid axis"),
    ("fedavg", ["fedadam.eta=0.1"], "fedadam is not in the grid"),
    ("fedadam", ["eta=0,0.1"], "eta must be positive"),
    ("fedavg", ["eta_l=0.1,0.1"], "repeats a value"),
])
def test_grid_errors_are_one_line(algs, axes, text):
    with pytest.raises(GridError) as exc:
        Grid.from_specs(algs, axes).check()
    assert text in str(exc.value) and "\n" not in str(exc.value)


def test_plans_group_numeric_differences_only():
    grid = Grid.from_specs("fed-ef-sgd", ["eta_l=0.01,0.1", "compressor=sign,topk-0.1"])
    cells = [Cell(p, s) for p in grid.points() for s in (0, 1)]
    assert len(make_units(cells, "separate")) == 8
    units = make_units(cells, "batched")
    assert sorted(len(u) for u in units) == [4, 4]          # one unit per compressor
    assert all(len({c.point.settings["compressor"] for c in u}) == 1 for u in units)
    assert [len(u) for u in make_units(cells, "batched", max_replicas=3)] == [2, 2, 2, 2]


def _balanced(cells, units, most):
    flat = [c for u in units for c in u]
    assert sorted(map(id, flat)) == sorted(map(id, cells))      # every cell once
    assert max(len(u) for u in units) <= most
    assert all(len({(c.point.algorithm, c.point.settings.get("compressor")) for c in u}) == 1
               for u in units)


@pytest.mark.parametrize("seeds, slots, sizes", [
    (range(36), 1, [36, 36]),                # one worker: max_replicas decides the count
    (range(36), 2, [36, 36]),                # not 64 + 8 with a worker idle
    (range(72), 2, [36, 36, 36, 36]),        # two waves of two, not 64, 64, 16
    (range(4), 2, [4, 4]),                   # fewer cells than a unit: one per worker
    (range(36), 3, [24, 24, 24]),
])
def test_batched_units_are_cut_so_the_workers_finish_together(seeds, slots, sizes):
    grid = Grid.from_specs("fed-ef-sgd", ["eta_l=0.01,0.1"])
    cells = [Cell(p, s) for p in grid.points() for s in seeds]
    units = make_units(cells, "batched", max_replicas=64, slots=slots)
    _balanced(cells, units, 64)
    assert [len(u) for u in units] == sizes


def test_balancing_keeps_groups_apart_and_puts_the_largest_units_first():
    grid = Grid.from_specs("fed-ef-sgd", ["eta_l=0.01,0.1", "compressor=sign,topk-0.1"])
    cells = [Cell(p, s) for p in grid.points() for s in range(20)]     # two groups of 40
    units = make_units(cells, "batched", max_replicas=16, slots=2)
    _balanced(cells, units, 16)
    lengths = [len(u) for u in units]
    assert lengths == sorted(lengths, reverse=True) and max(lengths) - min(lengths) <= 1
    assert len(units) % 2 == 0                                  # whole waves on two workers
    assert make_units(cells, "separate", slots=2) == [[c] for c in cells]


# ----------------------------------------------------------------------------- running

def test_sweep_resumes_and_recomputes_after_code_change(tmp_path, monkeypatch):
    spec = quad_spec(tmp_path)
    first = run_sweep(spec, quiet=True)
    assert first.ran == 12 and first.reused == 0 and not first.missing
    table = first.table
    assert {"algorithm", "eta_l", "eta", "seed", "round", "metric", "value", "point",
            "diverged_at"} <= set(table.columns)
    assert table.groupby(["point", "seed"]).ngroups == 12
    assert table.loc[table.algorithm == "fedavg", "eta"].isna().all()
    record = json.loads(next((spec.folder / "cells").glob("*.json")).read_text())
    assert record["code"]["code_digest"] and record["fingerprint"] and record["versions"]
    again = run_sweep(spec, quiet=True)
    assert again.ran == 0 and again.reused == 12
    pd.testing.assert_series_equal(_values(again.table), _values(table))
    more = run_sweep(quad_spec(tmp_path, seeds=[0, 1, 2]), quiet=True)
    assert more.ran == 6 and more.reused == 12                # only the new seed runs
    monkeypatch.setattr(execute.identity, "code_digest", lambda: "another-code")
    redo = run_sweep(spec, quiet=True, say=lambda line: None)
    assert redo.ran == 12 and redo.recomputed_stale == 12      # code changed: recomputed


def test_batched_grid_equals_separate_runs(tmp_path):
    grid = Grid.from_specs("fedadam,fedlada", ["eta_l=0.05,0.1", "fedlada.alpha=0.5,1.0",
                                               "fedadam.tau=0.01,0.1"])
    sep = run_sweep(quad_spec(tmp_path, "sep", grid=grid), plan="separate", quiet=True)
    bat = run_sweep(quad_spec(tmp_path, "bat", grid=grid), plan="batched", quiet=True)
    a, b = _values(sep.table), _values(bat.table)
    assert a.index.equals(b.index) and len(a) > 0
    scale = a.abs().groupby(level="metric").transform("max").clip(lower=1e-300)
    assert float(((a - b).abs() / scale).max()) <= 1e-10


def broken_problem(desc):
    raise RuntimeError("always broken")


def build_parted(desc: dict):
    """QUAD's problem with clients of unequal sizes (``parts``: 1, 2, ..., 6 samples)."""
    prob = cli.build_compare_problem(desc)
    prob.parts = [np.arange(k + 1) for k in range(prob.n_clients)]
    return prob


@pytest.mark.parametrize("plan", ["separate", "batched"])
def test_sample_weighted_cell_equals_the_weighted_engine_run(tmp_path, plan):
    """``aggregation="sample-weighted"``: every cell is the engine run of
    ``SampleWeighted(algorithm, sizes)`` with the problem's client sizes (to rounding), not the
    uniform cell; its files are named apart from the uniform cells'; DP with it is refused."""
    from sims.algorithms.registry import make_algorithm
    from sims.algorithms.weighting import SampleWeighted
    from sims.core import engine
    from sims.core.participation import Participation
    grid = Grid.from_specs("fedadam", ["eta_l=0.05,0.1", "fedadam.eta=0.1"])
    spec = lambda name, agg: SweepSpec(name, grid, QUAD, build_parted,  # noqa: E731
                                       participation="m=3", rounds=4, seeds=[0, 1],
                                       out=str(tmp_path), aggregation=agg)
    weighted = run_sweep(spec("w", "sample-weighted"), plan=plan, quiet=True)
    uniform = run_sweep(spec("u", "uniform"), plan=plan, quiet=True)
    w, u = _values(weighted.table), _values(uniform.table)
    prob = build_parted(QUAD)
    for point in grid.points():
        ref = engine.run(prob, SampleWeighted(make_algorithm("fedadam", **point.settings),
                                              [len(p) for p in prob.parts]),
                         Participation.parse("m=3"), 4, [0, 1], eval_every=1)
        got = w.xs(point.key, level="point")
        for metric in ("train_loss",):
            mine = got.xs(metric, level="metric").unstack("seed")
            theirs = np.asarray(ref.metrics[metric]).T[:len(mine)]
            np.testing.assert_allclose(mine.to_numpy(), theirs, rtol=1e-10, atol=1e-12)
    diff = (w - u).abs().xs("train_loss", level="metric")
    assert float(diff.max()) > 1e-6                           # the weights matter here
    cw = {p.name for p in (tmp_path / "w" / "cells").glob("*.csv")}
    cu = {p.name for p in (tmp_path / "u" / "cells").glob("*.csv")}
    assert len(cw) == len(cu) == 4 and not cw & cu
    with pytest.raises(GridError, match="under DP"):
        SweepSpec("d", grid, QUAD, build_parted, aggregation="sample-weighted",
                  dp={"clip": 1.0, "sigma": 1.0, "delta": 1e-3})
    with pytest.raises(GridError, match="aggregation must be one of"):
        SweepSpec("d", grid, QUAD, build_parted, aggregation="weighted")


def test_failure_is_recorded_and_retried_once(tmp_path, monkeypatch):
    spec = quad_spec(tmp_path, grid=Grid.from_specs("fedavg", ["eta_l=0.05,0.1"]))
    from sims.core import engine
    real, calls = engine.run, {"n": 0}

    def flaky_run(*a, **k):               # the first unit's run fails (a broken worker)
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected failure")
        return real(*a, **k)
    monkeypatch.setattr(engine, "run", flaky_run)
    res = run_sweep(spec, quiet=True)
    assert not res.missing and res.ran == 4
    assert len(res.failures) == 1 and res.failures[0]["attempt"] == 0
    assert "injected failure" in res.failures[0]["error"]
    spec2 = quad_spec(tmp_path, "broken", grid=Grid.from_specs("fedavg", ["eta_l=0.05,0.1"]))
    spec2.build_problem = broken_problem
    res2 = run_sweep(spec2, quiet=True)
    assert len(res2.missing) == 4 and len(res2.failures) == 8      # every unit, twice
    doc = json.loads((spec2.folder / "failures.json").read_text())
    assert len(doc["missing"]) == 4 and "always broken" in doc["history"][0]["error"]
    spec2.build_problem = cli.build_compare_problem
    fixed = run_sweep(spec2, quiet=True)
    assert fixed.ran == 4 and not fixed.missing


# ----------------------------------------------------------------------------- selection

def synthetic_table():
    """Four points of one algorithm, two seeds, 12 evaluations; p2 diverges in one seed."""
    rows = []
    curves = {  # point -> (test_acc curve, train_loss final, bits)
        "p0": (np.r_[np.full(11, 0.50), 0.95], 0.30, 100.0),    # best final acc only
        "p1": (np.full(12, 0.90), 0.20, 100.0),                 # best last-10 average
        "p2": (np.full(12, 0.99), 0.01, 10.0),                  # diverged in seed 1
        "p3": (np.full(12, 0.80), 0.10, 10.0),                  # lowest train loss
    }
    for i, (p, (acc, loss, bits)) in enumerate(curves.items()):
        for seed in (0, 1):
            div = 7.0 if (p == "p2" and seed == 1) else np.nan
            for t, a in enumerate(acc):
                rows += [(p, seed, t, "test_acc", a, div), (p, seed, t, "test_loss", 1 - a, div),
                         (p, seed, t, "train_loss", loss + (11 - t) * 0.01, div),
                         (p, seed, t, "bits_up", bits * t, div)]
    df = pd.DataFrame(rows, columns=["point", "seed", "round", "metric", "value",
                                     "diverged_at"])
    df["algorithm"] = "alg"
    df["run"] = df["point"]
    df["eta_l"] = df["point"].map({"p0": 0.1, "p1": 0.01, "p2": 1.0, "p3": 0.001})
    return df


@pytest.mark.parametrize("rule,winner", [("final-acc", "p0"), ("fed-ef-table1", "p0"),
                                         ("fed-lamb", "p0"), ("last10-acc", "p1"),
                                         ("final-train-loss", "p3")])
def test_selection_rules(rule, winner):
    summary, curves = select(synthetic_table(), rule)
    assert summary.loc[summary.selected, "point"].tolist() == [winner]
    assert set(curves["point"]) == {winner}
    assert summary.set_index("point").loc["p2", "rank"] == 4        # diverged: last
    assert summary["rank"].tolist().count(1) == 1


def test_fed_ef_compression_rule():
    df = synthetic_table()
    df = df[df.point != "p2"]
    # p3 has the fewest bits but is 0.15 below the reference; p0/p1 tie on bits
    summary = summarize(df, "fed-ef-compression", reference=0.955)
    assert summary.loc[summary.selected, "point"].tolist() == ["p0"]     # within 0.1 pp
    summary = summarize(df, "fed-ef-compression", reference=0.80)
    assert summary.loc[summary.selected, "point"].tolist() == ["p3"]     # most compressed
    summary = summarize(df, "fed-ef-compression", reference=0.999)
    assert summary.loc[summary.selected, "point"].tolist() == ["p0"]     # none match: best
    with pytest.raises(GridError, match="no full-precision point"):
        summarize(df.assign(compressor="sign"), "fed-ef-compression")


def test_rule_errors():
    with pytest.raises(GridError, match="unknown selection rule"):
        summarize(synthetic_table(), "best")
    with pytest.raises(GridError, match="needs the metric 'test_acc'"):
        summarize(synthetic_table().query("metric != 'test_acc'"), "final-acc")


# ----------------------------------------------------------------------------- outputs, CLI

def test_outputs_and_figures(tmp_path):
    spec = quad_spec(tmp_path)
    res = run_sweep(spec, quiet=True)
    paths = write_outputs(spec, res, "final-train-loss", figures=str(tmp_path / "fig"))
    summary = paths.pop("summary")
    assert len(summary) == 6 and summary.selected.sum() == 2         # one per algorithm
    for key in ("table", "grid", "selected", "selected_curves", "record", "grid_figure",
                "ranked_figure"):
        assert paths[key].exists() and paths[key].stat().st_size > 0, key
    sel = pd.read_csv(paths["selected"])
    assert set(sel.algorithm) == {"fedavg", "fedadam"}
    rec = json.loads(paths["record"].read_text())
    assert rec["rule"]["name"] == "final-train-loss" and rec["cells_run"] == 12


def test_cli_tiny_and_errors(tmp_path, capsys):
    args = ["--tiny", "--quiet", "--algorithms", "fedavg", "--grid", "eta_l=0.05,0.1",
            "--rule", "final-train-loss", "--out", str(tmp_path / "o"), "--figures",
            str(tmp_path / "f"), "--name", "t"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "cells: 2 run, 0 reused" in out
    assert cli.main(args) == 0 and "cells: 0 run, 2 reused" in capsys.readouterr().out
    assert cli.main(["--grid", "eta_l=log:1:0:2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "log range" in err
    assert cli.main(["--problem", "nosuch-mlp", "--quiet"]) == 2
    assert "unknown problem" in capsys.readouterr().err


def test_reproduce_adapter_runs_a_grid_as_an_entry_run(tmp_path):
    """reproduce.sweeps: a grid as one entry run (resumable through both layers) and the
    papers' Table 1 grids."""
    import types

    from reproduce import common
    from reproduce.sweeps import fed_ef_table1_grid, fed_lamb_table1_grid, select, sweep_run
    assert len(fed_lamb_table1_grid(["fed-sgd", "fed-ams", "fed-lamb", "adp-fed", "mime",
                                     "mime-lamb"]).check()) == 9 + 10 + 27 + 120 + 10 + 9
    assert len(fed_ef_table1_grid(["fed-ef-sgd"]).points()) == 30
    grid = Grid.from_specs("fedavg", ["eta_l=0.05,0.1"])
    entry = types.ModuleType("fake_entry")
    entry.runs = lambda cfg: [sweep_run("lr", grid, QUAD, cli.build_compare_problem, "m=3")]
    cfg = common.EntryConfig(seeds=2, rounds=3, out=str(tmp_path), quiet=True)
    df = common.execute(entry, cfg)
    assert {"eta_l", "algorithm", "point"} <= set(df.columns)
    assert df.groupby(["point", "seed"]).ngroups == 4
    # rows are named by grid point and carry their sweep: the entry's run is not "missing"
    assert (df["sweep"] == "lr").all() and common.missing_runs(entry, cfg, df) == []
    summary, _ = select(df, "final-train-loss")
    assert summary.selected.sum() == 1
    cells = list((tmp_path / "sweeps" / "lr" / "cells").glob("*.csv"))
    assert len(cells) == 4


def test_reproduce_adapter_passes_reuse_stale(tmp_path, monkeypatch):
    """An entry's --reuse-stale reaches its sweep runs: cells of other code are reused with it
    (same values), computed again without it."""
    import shutil

    from reproduce import common
    from reproduce.sweeps import sweep_run
    grid = Grid.from_specs("fedavg", ["eta_l=0.05,0.1"])
    run = sweep_run("lr", grid, QUAD, cli.build_compare_problem, "m=3")
    cfg = common.EntryConfig(seeds=1, rounds=3, out=str(tmp_path / "a"), quiet=True)
    first, _ = run.execute(cfg, [0], lambda f: None)
    monkeypatch.setattr(execute.identity, "code_digest", lambda: "another-code")
    for stale, redone in ((True, 0), (False, 2)):
        out = tmp_path / f"o{stale}"
        shutil.copytree(tmp_path / "a" / "sweeps", out / "sweeps")
        cfg = common.EntryConfig(seeds=1, rounds=3, out=str(out), quiet=True,
                                 reuse_stale=stale)
        table, info = run.execute(cfg, [0], lambda f: None)
        assert info["cells_run"] == redone and info["cells_reused"] == 2 - redone
        pd.testing.assert_series_equal(_values(table), _values(first))


def test_tuning_run_passes_reuse_stale(tmp_path, monkeypatch, capsys):
    """An entry's --reuse-stale reaches a tuning protocol's cells too (reproduce.sweeps.
    tuning_run): cells of other code are reused with it, computed again without it."""
    import shutil

    from reproduce import common
    from reproduce import protocols as pr
    from reproduce.sweeps import tuning_run
    method = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (0.05, 0.1)),))
    run = tuning_run("lr", [method], QUAD, cli.build_compare_problem, "m=3",
                     rule="final-train-loss", kind="paper")
    cfg = common.EntryConfig(seeds=1, rounds=3, out=str(tmp_path / "a"), quiet=True)
    first, _ = run.execute(cfg, [0], lambda f: None)
    capsys.readouterr()
    monkeypatch.setattr(execute.identity, "code_digest", lambda: "another-code")
    for stale, said in ((True, "reused 2 saved cell(s) computed by OTHER code"),
                        (False, "recomputing 2 saved cell(s)")):
        out = tmp_path / f"o{stale}"
        shutil.copytree(tmp_path / "a" / "sweeps", out / "sweeps")
        cfg = common.EntryConfig(seeds=1, rounds=3, out=str(out), quiet=True,
                                 reuse_stale=stale)
        table, _ = run.execute(cfg, [0], lambda f: None)
        pd.testing.assert_series_equal(_values(table), _values(first))
        printed = capsys.readouterr()
        assert said in printed.out + printed.err


def test_saved_only_reads_a_complete_sweep_and_computes_nothing(tmp_path):
    """``saved_only`` (an entry's ``--plot-only``): a sweep with a cell not saved is a
    one-line error before any work (nothing written); a complete one is read back as it is.
    Through an entry's setup (``protocols.Setup.of_entry`` under ``--plot-only``) the error
    names the flag."""
    from reproduce import common
    from reproduce import protocols as pr
    spec = quad_spec(tmp_path)
    with pytest.raises(GridError, match=r"sweep s: 12 of 12 cell\(s\) have no saved result"):
        run_sweep(spec, quiet=True, saved_only=True)
    assert not spec.folder.exists()                   # nothing written, not even a lock
    first = run_sweep(spec, quiet=True)
    again = run_sweep(spec, quiet=True, saved_only=True)
    assert again.ran == 0 and again.reused == 12
    pd.testing.assert_series_equal(_values(again.table), _values(first.table))
    with pytest.raises(GridError, match="6 of 18 cell"):
        run_sweep(quad_spec(tmp_path, seeds=[0, 1, 2]), quiet=True, saved_only=True)
    cfg = common.EntryConfig(seeds=1, rounds=4, out=str(tmp_path / "entry"), plot_only=True)
    setup = pr.Setup.of_entry(cfg, QUAD, cli.build_compare_problem, participation="m=3",
                              rounds=4)
    assert setup.saved_only
    with pytest.raises(common.EntryError, match="^--plot-only: sweep g: 2 of 2 cell.*run "
                                                 "without --plot-only first$"):
        setup.sweep("g", Grid.from_specs("fedavg", ["eta_l=0.05,0.1"]), [0])


def _within(seconds, call):
    """``call()``'s value, failing (not hanging) when it does not return within ``seconds``."""
    import threading
    out = {}
    worker = threading.Thread(target=lambda: out.update(value=call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still waiting after {seconds} s"
    return out["value"]


def test_saved_only_never_waits_for_a_running_sweep_and_writes_nothing(tmp_path):
    """A read (``saved_only``) while another process holds the sweep's lock: a complete
    sweep is read back at once (no waiting, no lock taken, no file touched); an incomplete
    one is a one-line error that says the sweep is being computed now, and the entry's
    message says to wait rather than to run it (which would only queue behind the lock)."""
    import os

    from reproduce import common
    from reproduce import protocols as pr
    from sims.experiments.sweep.execute import NotSaved
    from sims.store.locks import RunLock
    spec = quad_spec(tmp_path)
    run_sweep(spec, quiet=True)
    lock_path = spec.folder / ".locks" / "sweep.lock"
    other = RunLock(lock_path)
    assert other.acquire(blocking=False)          # "another process" computing the sweep
    files = {p: os.stat(p).st_mtime_ns for p in spec.folder.rglob("*") if p.is_file()}
    try:
        assert RunLock(lock_path).busy()
        again = _within(60, lambda: run_sweep(spec, quiet=True, saved_only=True))
        assert again.ran == 0 and again.reused == 12
        assert {p: os.stat(p).st_mtime_ns for p in spec.folder.rglob("*")
                if p.is_file()} == files
        with pytest.raises(NotSaved, match=r"6 of 18 cell\(s\).*being computed by another "
                                           r"process now: pid ") as caught:
            run_sweep(quad_spec(tmp_path, seeds=[0, 1, 2]), quiet=True, saved_only=True)
        assert caught.value.busy
        cfg = common.EntryConfig(seeds=1, rounds=4, out=str(tmp_path / "entry"),
                                 plot_only=True)
        setup = pr.Setup.of_entry(cfg, QUAD, cli.build_compare_problem, participation="m=3",
                                  rounds=4)
        grid = Grid.from_specs("fedavg", ["eta_l=0.05,0.1"])
        folder = tmp_path / "entry" / "sweeps" / "g"
        held = RunLock(folder / ".locks" / "sweep.lock")
        assert held.acquire(blocking=False)
        try:
            with pytest.raises(common.EntryError, match="being computed.*wait until it is "
                                                         "done$"):
                setup.sweep("g", grid, [0])
        finally:
            held.release()
    finally:
        other.release()
    assert not RunLock(lock_path).busy()
    with pytest.raises(NotSaved, match=r"computing was not allowed\)$") as caught:
        run_sweep(quad_spec(tmp_path, seeds=[0, 1, 2]), quiet=True, saved_only=True)
    assert not caught.value.busy


def test_cli_paper_table_grid(tmp_path, capsys):
    """--table fed-lamb: the Fed-LAMB supplement Table 1 grid is one command."""
    args = ["--tiny", "--quiet", "--table", "fed-lamb", "--algorithms", "fed-sgd",
            "--rule", "final-train-loss", "--out", str(tmp_path / "o"), "--figures",
            str(tmp_path / "f"), "--name", "t1"]
    assert cli.main(args) == 0
    assert "cells: 9 run" in capsys.readouterr().out
    grid = pd.read_csv(tmp_path / "o" / "t1" / "grid.csv")
    assert sorted(grid.eta_l) == [0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5]
    assert grid.selected.sum() == 1


def test_benchmark_workload_is_the_issues():
    """benchmarks/sweep_batching.py times the workload issue 15 names: Fed-LAMB, the 9 rates
    of its Table 1 grid x 3 seeds, MLP on 28x28 inputs, 50 clients of which 25 take part,
    batch 32, one local epoch of 300 samples (10 steps)."""
    from conftest import load_benchmark
    bench = load_benchmark("sweep_batching")
    from sims.experiments.sweep.tables import FED_LAMB_TABLE1
    s = bench.spec("/tmp/unused", 1, bench.LRS, 3)
    assert bench.LRS == FED_LAMB_TABLE1["fed-lamb"]["eta_l"]
    assert len(s.grid.points()) * len(s.seeds) == 27 and s.participation == "m=25"
    prob = bench.build_problem({**s.problem, "per_client": 40, "test": 10})
    assert prob.n_clients == 50 and prob.batch_size == 32 and prob.d == 784 * 200 + 200 + 2010
    assert s.problem["per_client"] == 300 and s.problem["batch"] == 32


def test_unreachable_ray_cluster_is_one_line_naming_the_address(tmp_path, capsys, monkeypatch):
    """No Ray cluster at the address typed: one line naming it, what to check and the
    authentication settings, before any cell (Ray's own connection retries for minutes)."""
    pytest.importorskip("ray")
    import socket

    from sims.experiments.sweep import on_ray
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                            # nothing listens there now
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert cli.main(["--algorithms", "fedavg", "--tiny", "--quiet", "--executor", "ray",
                     "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o"),
                     "--figures", str(tmp_path / "f")]) == 2
    line = capsys.readouterr().err.strip()
    assert f"cannot connect to the Ray cluster at 127.0.0.1:{port} (--ray-address)" in line
    assert "RAY_AUTH_MODE=token" in line and "ray start --head" in line and "\n" not in line
    assert not list((tmp_path / "o").rglob("cells/*.csv"))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "RAY_AUTH_MODE=token is set here" in on_ray.connection_hint("h:1", None, "refused")
    assert "h:1 (RAY_ADDRESS)" in on_ray.connection_hint("h:1", None, "refused")
    assert on_ray.forward_auth() == "token"

"""Tuning protocols on the sweep API (:mod:`reproduce.protocols`): the symmetric tuned
comparison extends a grid while its pick sits on an edge, selects at the plotted horizon and
records its conformance; the paper's grid keeps its printed grid; FedAda2's two-step tuning
selects over both steps by the running average of the last 10 logged points."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from reproduce import protocols as pr
from sims.experiments.sweep import cli

QUAD = {"problem": "quadratic", "n_clients": 6, "dim": 8, "local_steps": 2, "local_epochs": 1,
        "batch_size": 32, "partition": "shards", "noise": "gaussian", "df": None,
        "sigma": 0.1, "heterogeneity": 1.0, "dtype": "float64", "data_dir": None,
        "eval_train_samples": None}


def _setup(tmp_path, rounds=6):
    return pr.Setup(QUAD, cli.build_compare_problem, participation="m=3", rounds=rounds,
                    out=str(tmp_path / "sweeps"))


def test_bracket_extends_on_its_edges_within_limits():
    b = pr.bracket("eta_l", 0.01, step=10, width=1)
    assert b.values == (0.001, 0.01, 0.1)
    assert b.at_edge(0.1) == "high" and b.at_edge(0.001) == "low" and b.at_edge(0.01) is None
    assert b.extend("high").values == (0.001, 0.01, 0.1, 1.0)
    capped = pr.Bracket("eta_l", (0.1, 1.0), step=10, hi=1.0)
    assert capped.at_edge(1.0) is None and capped.interior(1.0)   # cannot go past its limit
    printed = pr.Bracket("eta_l", (0.1, 1.0))                      # a paper's grid: fixed
    assert printed.at_edge(1.0) is None
    assert pr.neighbours((1, 2, 3, 4), 4) == (3, 4)


def test_tuned_protocol_extends_until_the_pick_is_interior(tmp_path):
    """FedAvg's rate on a quadratic: the best of {1e-4, 1e-3} is the upper edge, so the
    grid grows upwards until the pick has a worse neighbour above it."""
    m = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-4, 1e-3), step=10),))
    t = pr.tune("t", [m], _setup(tmp_path), [0, 1, 2], rule="final-train-loss")
    grid = sorted(t.summary["eta_l"])
    assert grid[0] == 1e-4 and len(grid) > 2                       # extended upwards
    pick = t.picks["fedavg"]["eta_l"]
    assert pick < max(grid)                                        # interior now
    assert any("extended high" in what for _, _, what in t.history)
    p = t.protocol
    assert p.kind == "tuned" and p.seeds == 3 and p.horizon == 6 and p.interior
    from reproduce.regime import RegimeCard
    assert RegimeCard(p.card_items()).ok                           # 3 seeds, at the horizon
    sel = t.selected()
    assert set(sel["run"]) == {"fedavg"} and sel["eta_l"].iloc[0] == pick
    # resumable: the same tuning again computes nothing new (every cell is saved)
    again = pr.tune("t", [m], _setup(tmp_path), [0, 1, 2], rule="final-train-loss")
    assert again.picks == t.picks


def test_a_second_tuning_step_on_shared_cells_reads_its_own_grid_columns(tmp_path):
    """A staged tuning (one axis, then another around its pick) shares the cells of its
    common point: the reused cell was saved with the first step's grid columns, and the
    second step still reads its own axis' value for it (not NaN), picks and edges included."""
    su = _setup(tmp_path)
    first = pr.tune("s", [pr.Method("fedavg", "fedavg", {"eta_l": 0.01},
                                    (pr.Bracket("eta", (0.5, 1.0, 2.0), step=2),))],
                    su, [0], rule="final-train-loss")
    eta = first.picks["fedavg"]["eta"]
    second = pr.tune("s", [pr.Method("fedavg", "fedavg", {"eta": eta},
                                     (pr.Bracket("eta_l", (0.001, 0.01, 0.1), step=10),))],
                     su, [0], rule="final-train-loss")
    assert second.summary["eta_l"].notna().all()          # the shared centre cell included
    assert second.table["eta_l"].notna().all()
    assert np.isfinite(second.picks["fedavg"]["eta_l"])
    shared = second.table[second.table["eta_l"] == 0.01]["point"].unique()
    assert len(shared) == 1 and shared[0] in set(first.table["point"])   # reused, not rerun


def test_tuned_protocol_with_too_few_seeds_fails_its_card(tmp_path):
    m = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (0.01, 0.1, 1.0), step=10,
                                                      hi=1.0),))
    t = pr.tune("few", [m], _setup(tmp_path, rounds=3), [0], rule="final-train-loss",
                max_extensions=1)
    from reproduce.regime import RegimeCard
    card = RegimeCard(t.protocol.card_items())
    assert not card.ok and "selection seeds 1 vs paper 3" in card.failures()


def test_paper_grid_never_extends(tmp_path):
    m = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-4, 1e-3), step=10),))
    t = pr.paper_grid("p", [m], _setup(tmp_path), [0, 1, 2], rule="final-train-loss",
                      required_seeds=3, text="a printed grid")
    assert sorted(t.summary["eta_l"]) == [1e-4, 1e-3]
    assert t.protocol.kind == "paper" and t.protocol.describe().startswith("paper: a printed")


def test_ladder_bracket_climbs_the_papers_grid_and_stops_at_its_ends():
    table1 = (0.001, 0.003, 0.01, 0.03, 0.1)
    b = pr.Bracket("eta_l", (0.003, 0.01), ladder=table1)
    assert b.at_edge(0.003) == "low" and b.at_edge(0.01) == "high"
    assert b.extend("low").values == (0.001, 0.003, 0.01)
    assert b.extend("high").values == (0.003, 0.01, 0.03)
    end = pr.Bracket("eta_l", (0.001, 0.003), ladder=table1)
    assert end.at_edge(0.001) is None and end.interior(0.001)      # Table 1's own edge
    with pytest.raises(pr.GridError):
        pr.Bracket("eta_l", (0.01,), step=2, ladder=table1)


def test_paper_grid_on_a_pruned_part_reaches_the_whole_grids_pick(tmp_path):
    """A pilot-pruned part of the paper's grid whose pick sits on its upper edge: the paper's
    protocol climbs the ladder until the pick has a worse neighbour (or the ladder ends), so it
    picks what the selection over the whole grid would; the same grid without a ladder stays."""
    ladder = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    whole = pr.paper_grid("w", [pr.Method("fedavg", "fedavg", {},
                                          (pr.Bracket("eta_l", ladder),))],
                          _setup(tmp_path), [0, 1, 2], rule="final-train-loss")
    best = whole.picks["fedavg"]["eta_l"]
    assert best > 1e-3                              # the pruned part below misses it
    pruned = pr.paper_grid("w", [pr.Method("fedavg", "fedavg", {},
                                           (pr.Bracket("eta_l", (1e-4, 1e-3), ladder=ladder),))],
                           _setup(tmp_path), [0, 1, 2], rule="final-train-loss")
    assert pruned.picks["fedavg"]["eta_l"] == best
    assert any("extended high" in what for _, _, what in pruned.history)
    assert set(pruned.summary["eta_l"]) <= set(ladder) and pruned.protocol.kind == "paper"


def test_running_average_rule_is_the_best_trailing_mean():
    """App. H.1's "running average of the last 10 logged datapoints": the best, over the
    logged points, of the mean of the 10 points ending there (not the final 10 alone)."""
    rows = []
    curves = {"a": [0.1] * 5 + [0.9] * 10 + [0.1] * 5,     # its best 10-window is 0.9
              "b": [0.5] * 20}                              # final-10 mean 0.5 > a's 0.1
    for point, vals in curves.items():
        for r, v in enumerate(vals):
            rows.append({"run": point, "point": point, "algorithm": "x", "seed": 0,
                         "round": r, "metric": "test_acc", "value": v})
    table = pd.DataFrame(rows)
    s = pr.select(table, "running10-acc")
    assert s.set_index("point")["score"]["a"] == pytest.approx(0.9)
    assert s.loc[s.selected, "point"].tolist() == ["a"]
    assert pr.select(table, "last10-acc").loc[lambda d: d.selected, "point"].tolist() == ["b"]
    # read at the plotted horizon: only the first 12 rounds count
    early = pr.select(table, "last10-acc", at=11)
    assert early.set_index("point")["score"]["a"] == pytest.approx(np.mean(curves["a"][2:12]))


def test_two_step_selects_over_both_steps(tmp_path):
    s1 = [pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-4,)),))]
    s2 = [pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-3, 1e-2)),))]
    t = pr.two_step("ts", s1, s2, _setup(tmp_path), [0, 1], rule="final-train-loss")
    assert set(t.table["step"]) == {1, 2}
    assert t.picks["fedavg"]["eta_l"] in (1e-3, 1e-2)               # step 2's grid wins here
    assert t.protocol.kind == "paper" and "two-step" in t.protocol.text
    with pytest.raises(ValueError, match="same methods"):
        pr.two_step("bad", s1, [pr.Method("other", "fedavg")], _setup(tmp_path), [0],
                    rule="final-train-loss")


def test_setup_carries_user_level_dp_to_every_cell(tmp_path):
    """``Setup.dp`` wraps every cell in user-level DP (the sweep's ``dp``): a tuning under DP
    runs other cells than one without (noise on the server's mean), and records the epsilon."""
    m = [pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-2,)),))]
    plain = pr.paper_grid("plain", m, _setup(tmp_path), [0], rule="final-train-loss")
    dp_setup = _setup(tmp_path)
    dp_setup.dp = {"clip": 0.1, "sigma": 1.0, "delta": 1e-2}
    private = pr.paper_grid("private", m, dp_setup, [0], rule="final-train-loss")
    assert "dp_epsilon" in set(private.table["metric"])
    assert "dp_epsilon" not in set(plain.table["metric"])
    loss = lambda t: t.table[t.table.metric == "train_loss"]["value"].iloc[-1]  # noqa: E731
    assert loss(private) != loss(plain)


def test_unknown_rule_is_one_line():
    with pytest.raises(ValueError, match="unknown selection rule 'nope'"):
        pr.tune("x", [], pr.Setup({}, None), [0], rule="nope")
    assert "running10-acc" in pr.rule_names() and "fed-lamb" in pr.rule_names()
    assert math.isnan(pr._running10_best(pd.Series([], dtype=float)))


def test_tuning_run_is_an_entry_run_that_records_its_protocol(tmp_path):
    """:func:`reproduce.sweeps.tuning_run`: the protocol as one resumable entry run; its
    table carries the protocol (read back by :func:`protocol_of`, also from a CSV) and the
    check reselects the same picks."""
    from types import SimpleNamespace

    from reproduce.sweeps import tuning_run
    m = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (1e-4, 1e-3), step=10),))
    run = tuning_run("tr", [m], QUAD, cli.build_compare_problem, "m=3",
                     rule="final-train-loss", rounds=5)
    cfg = SimpleNamespace(out=str(tmp_path), rounds=5, device="cpu", threads=1)
    table, record = run.execute(cfg, [0, 1, 2], lambda k: None)
    assert set(table["run"]) == {"tr:fedavg"} and record["picks"]["fedavg"]["eta_l"] > 1e-3
    back = pr.protocol_of(pd.read_csv(io.StringIO(table.to_csv(index=False))))
    assert back.kind == "tuned" and back.seeds == 3 and back.horizon == 5 and back.interior
    s = pr.select(table, "final-train-loss")
    assert s.loc[s.selected, "eta_l"].tolist() == [record["picks"]["fedavg"]["eta_l"]]


@pytest.mark.parametrize("kind", ["sweep", "tuning"])
def test_entry_sweeps_checkpoint_their_running_units(tmp_path, kind):
    """An entry's ``--checkpoint-every`` reaches its sweeps' and tunings' running units: an
    entry stopped mid-unit resumes the unit from its checkpoint (not from round 0) and ends
    where an uninterrupted run does."""
    import json
    from types import SimpleNamespace

    from reproduce.sweeps import sweep_run, tuning_run
    from sims.experiments.sweep import Grid

    def make():
        if kind == "sweep":
            return sweep_run("ck", Grid.from_specs("fedavg", ["eta_l=0.01"]), QUAD,
                             cli.build_compare_problem, "m=3", rounds=6)
        m = pr.Method("fedavg", "fedavg", {}, (pr.Bracket("eta_l", (0.01,)),))
        return tuning_run("ck", [m], QUAD, cli.build_compare_problem, "m=3",
                          rule="final-train-loss", kind="paper", rounds=6)

    def cfg(out, every):
        return SimpleNamespace(out=str(out), rounds=6, device="cpu", threads=1,
                               checkpoint_every=every)
    whole = make().execute(cfg(tmp_path / "whole", 0), [0], lambda k: None)[0]
    seen = [0.0]

    def stop(k):
        seen[0] += k
        if seen[0] >= 4:                      # the entry's progress: 4 of the 6 rounds done
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        make().execute(cfg(tmp_path / "cut", 1e-9), [0], stop)
    assert list((tmp_path / "cut").rglob("unit_*.ckpt"))
    resumed = make().execute(cfg(tmp_path / "cut", 1e-9), [0], lambda k: None)[0]
    records = [json.loads(p.read_text()) for p in (tmp_path / "cut").rglob("cells/*.json")]
    assert max(r["resumed_from_round"] or 0 for r in records) >= 3
    cols = ["seed", "round", "metric", "value"]
    keep = lambda t: t[t.metric != "wall_time"][cols].sort_values(cols[:3]).reset_index(  # noqa
        drop=True)
    pd.testing.assert_frame_equal(keep(resumed), keep(whole))


def test_entry_setups_take_the_entrys_flags():
    """Every entry's sweeps and tunings run as the entry's flags say (``Setup.of_entry``):
    ``--reuse-stale`` and ``--checkpoint-every`` reach FedLADA's tunings too (its screen
    used to drop ``--reuse-stale``, recomputing cells of other code the flag keeps)."""
    from pathlib import Path
    from types import SimpleNamespace

    from reproduce import common, fedlada_fig2, fedlada_tuning
    flags = SimpleNamespace(out="o", device="cpu", threads=0, reuse_stale=True,
                            checkpoint_every=7.0)
    su = pr.Setup.of_entry(flags, QUAD, cli.build_compare_problem, rounds=5, plan="separate")
    assert (su.out, su.threads, su.reuse_stale, su.checkpoint_every) == \
        (str(Path("o") / "sweeps"), 1, True, 7.0)
    assert (su.rounds, su.plan, su.executor, su.problem) == (5, "separate", "inprocess", QUAD)
    for argv, stale in ((["--reuse-stale", "--checkpoint-every", "7"], True), ([], False)):
        cfg = common.parse_config(fedlada_fig2, argv)
        su = fedlada_tuning.setup(cfg)
        assert su.reuse_stale is stale and su.checkpoint_every == cfg.checkpoint_every
    assert fedlada_tuning.setup(common.parse_config(fedlada_fig2, [
        "--checkpoint-every", "7"])).checkpoint_every == 7.0
    # the base tuning other FedLADA entries read their tuned picks from (fedlada_fig2's
    # setting, built from the entry's config) takes the entry's flags too
    from reproduce import fedlada_k
    for argv, on in ((["--reuse-stale", "--plot-only", "--checkpoint-every", "9"], True),
                     ([], False)):
        su = fedlada_tuning.setup(fedlada_tuning.base_config(
            common.parse_config(fedlada_k, argv)))
        assert (su.reuse_stale, su.saved_only) == (on, on)
        assert su.checkpoint_every == (9.0 if on else common.EntryConfig.checkpoint_every)


@pytest.mark.parametrize("interior", [True, False])
def test_protocol_of_reads_a_flag_that_pandas_concat_made_float(interior):
    """A tuned run's ``picks_interior`` read beside a paper run's rows, which record none:
    ``pandas.concat`` turns the bool column into float64 (``1.0`` / ``0.0``), and the
    protocol still reads the flag the tuning recorded (it once read ``1.0`` as not interior,
    so a tuned comparison with interior picks was filed as ``premise absent``)."""
    tuned = pd.DataFrame({"run": ["t"], "protocol_kind": ["tuned"], "protocol": ["x"],
                          **{k: [v] for k, v in pr.protocol_columns(pr.Protocol(
                              "tuned", "x", seeds=3, horizon=5, interior=interior)).items()
                             if k not in ("protocol", "protocol_kind")}})
    paper = pd.DataFrame({"run": ["p"], "picks_interior": [math.nan]})
    both = pd.concat([paper, tuned], ignore_index=True)
    assert both["picks_interior"].dtype == np.float64            # the form that was misread
    assert pr.protocol_of(both[both.run == "t"]).interior is interior


@pytest.mark.parametrize("value, flag", [
    (True, True), (False, False), ("True", True), ("true", True), ("1", True),
    ("False", False), (1.0, True), (0.0, False), (np.bool_(True), True), (1, True),
    ("", None), (None, None), (math.nan, None)])
def test_saved_flag_reads_every_form_a_table_gives_back(value, flag):
    assert pr.saved_flag(value) is flag

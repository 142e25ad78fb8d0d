"""The FedLADA stand-in search's summary (``docs/fedlada_standin_search/summarize.py``): the
premise read at each horizon of one candidate (``by_horizon``), and the committed summary
rebuilt from the committed curves."""
from __future__ import annotations

import pandas as pd
import pytest

from reproduce import fedlada_common as fc
from conftest import load_script


def _module():
    return load_script("docs/fedlada_standin_search/summarize.py")


def _curves(loss, acc, rounds=range(0, 101, 5)):
    """One seed, FedAvg and LocalAdam: ``loss[m](r)``, ``acc[m](r)`` (test accuracy)."""
    rows = []
    for m in ("fedavg", "localadam"):
        for r in rounds:
            rows += [{"candidate": "Z", "run": m, "seed": 0, "round": r, "metric": "train_loss",
                      "value": loss[m](r)},
                     {"candidate": "Z", "run": m, "seed": 0, "round": r, "metric": "test_acc",
                      "value": acc[m](r)},
                     {"candidate": "Z", "run": m, "seed": 0, "round": r, "metric": "train_acc",
                      "value": 0.5}]
    return pd.DataFrame(rows)


def test_by_horizon_reads_the_premise_on_the_curves_cut_at_each_round():
    """LocalAdam fits faster throughout; its test accuracy falls 2 points below FedAvg's from
    round 60 on: the premise first holds where the last 10 % of the cut lies past round 60,
    and every later cut keeps it."""
    mod = _module()
    df = _curves({"fedavg": lambda r: 1.0 / (1 + r), "localadam": lambda r: 0.5 / (1 + r)},
                 {"fedavg": lambda r: 0.80, "localadam": lambda r: 0.80 if r < 60 else 0.78})
    h = mod.by_horizon(df)
    assert list(h["round"]) == list(range(5, 101, 5))            # every evaluated round > 0
    assert h.fits.all()
    assert list(h.loc[h.holds, "round"]) == list(range(60, 101, 5))
    assert set(h.loc[~h.holds, "test"]) == {"tie"}
    # each cut is the entries' definition on the curves up to that round
    for _, row in h.iterrows():
        p = fc.localadam_premise(df[df["round"] <= row["round"]])
        assert (row.fits, row.test, row.holds, row.gap) == (p.fits, p.test, p.holds, p.gap)
        assert row["area_localadam"] == pytest.approx(p.area["localadam"])
        assert row["tail_fedavg"] == pytest.approx(p.tail_loss["fedavg"])


def test_by_horizon_tail_lead_crossing_fails_the_fit_half():
    """FedAvg's loss crosses below LocalAdam's at round 50: from a cut whose tail lies past
    the crossing the fit half fails though LocalAdam still leads in area at first."""
    mod = _module()
    df = _curves({"fedavg": lambda r: 1.0 - 0.008 * r, "localadam": lambda r: 0.8 - 0.004 * r},
                 {"fedavg": lambda r: 0.80, "localadam": lambda r: 0.78})
    h = mod.by_horizon(df).set_index("round")
    assert (h.test == "below").all()
    assert h.loc[45, "holds"] and not h.loc[55, "holds"]
    assert h.loc[55, "area_localadam"] < h.loc[55, "area_fedavg"]   # the area still leads
    assert not h.loc[55:, "fits"].any()


def test_by_horizon_without_both_methods_is_empty():
    mod = _module()
    df = _curves({"fedavg": lambda r: 1.0, "localadam": lambda r: 1.0},
                 {"fedavg": lambda r: 0.8, "localadam": lambda r: 0.8})
    assert mod.by_horizon(df[df.run == "fedavg"]).empty


def test_committed_summary_is_the_committed_curves_summarised():
    """``summary.csv`` is what ``summarise`` makes of ``curves.csv.gz`` and ``cpu.csv`` now:
    a candidate filed into one and not the other fails here."""
    mod = _module()
    got = mod.summarise().round(5).reset_index(drop=True)
    committed = pd.read_csv(mod.HERE / "summary.csv")
    assert list(got.candidate) == list(committed.candidate)
    assert list(got.method) == list(committed.method)
    assert list(got.premise) == list(committed.premise)
    for col in ("train_loss_tail", "loss_area", "test_acc_tail", "cpu_s_per_replica_round"):
        assert got[col].to_numpy() == pytest.approx(committed[col].to_numpy(), abs=1e-5)


def _fake_runs(root, runs, log):
    """A result directory ``Z-dir`` under ``root`` holding ``runs`` (name: file stem; one seed,
    rounds 0 and 10) and its log."""
    import json
    d = root / "Z-dir" / "fedlada_fig2"
    d.mkdir(parents=True)
    for run, stem in runs:
        pd.DataFrame([{"run": run, "seed": 0, "round": r, "metric": "train_loss", "value": 1.0}
                      for r in (0, 10)]).to_csv(d / f"{stem}.csv", index=False)
        (d / f"{stem}.json").write_text(json.dumps({"run": run, "table": {"file": f"{stem}.csv"}}))
    (root / "logs").mkdir()
    (root / "logs" / "Z-dir.log").write_text(log)


def test_collect_counts_only_the_runs_computed(tmp_path, monkeypatch):
    """A run reused from a saved result ("reused 1 saved run") costs no replica-rounds: the
    command's CPU seconds are divided over the runs it computed."""
    mod = _module()
    monkeypatch.setattr(mod, "HERE", tmp_path)
    monkeypatch.setattr(mod, "CANDIDATES", {"Z": "Z-dir"})
    cmd = "CMD: python3 -m x --methods fedavg,localadam --seeds 1 --rounds 10\n"
    _fake_runs(tmp_path / "runs", [("fedavg", "a"), ("localadam", "b")],
               "reused 1 saved run (from commit abc)\n" + cmd + "TIME 12.0 s wall 10.0 user 1.0 sys\n")
    mod.collect(str(tmp_path / "runs"))
    cpu = pd.read_csv(tmp_path / "cpu.csv")
    assert list(cpu.replica_rounds) == [10] and list(cpu.cpu_s) == [11.0]
    assert set(pd.read_csv(tmp_path / "curves.csv.gz").run) == {"fedavg", "localadam"}


def test_collect_refuses_two_results_of_one_run(tmp_path, monkeypatch):
    """Two saved results of the same run and seed in one candidate (a stale copy beside the
    new run) stop the collection with a one-line error instead of mixing their curves."""
    mod = _module()
    monkeypatch.setattr(mod, "HERE", tmp_path)
    monkeypatch.setattr(mod, "CANDIDATES", {"Z": "Z-dir"})
    _fake_runs(tmp_path / "runs", [("localadam", "old"), ("localadam", "new")], "")
    with pytest.raises(SystemExit, match="run localadam seed 0 in both"):
        mod.collect(str(tmp_path / "runs"))
    assert not (tmp_path / "curves.csv.gz").exists()

"""Sweeps on Ray: a local Ray instance on this machine (never another address) runs the same
sweep as the in-process executor, and a killed worker is recorded and retried once."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sims.experiments.sweep import Grid, SweepSpec, ray_init, run_sweep
from sims.experiments.sweep import cli

from test_sweep import QUAD, _values

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    os.environ.pop("RAY_ADDRESS", None)              # this machine only
    assert not ray.is_initialized()
    assert ray_init(None, workers=2)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def spec(tmp_path, name, build=cli.build_compare_problem):
    grid = Grid.from_specs("fedavg,fedadam", ["eta_l=0.05,0.1"])
    return SweepSpec(name, grid, QUAD, build, participation="m=3", rounds=4, seeds=[0, 1],
                     out=str(tmp_path / "out"))


def test_ray_sweep_equals_inprocess(tmp_path, local_ray):
    here = run_sweep(spec(tmp_path, "inproc"), executor="inprocess", quiet=True)
    there = run_sweep(spec(tmp_path, "ray"), executor="ray", quiet=True)
    assert there.ran == 8 and not there.failures and ray.is_initialized()
    a, b = _values(here.table), _values(there.table)
    assert a.index.equals(b.index)
    assert float((a - b).abs().max()) == 0.0           # same code, same thread count
    again = run_sweep(spec(tmp_path, "ray"), executor="ray", quiet=True)
    assert again.ran == 0 and again.reused == 8


def test_ray_batched_units_are_cut_for_the_workers_and_match_inprocess(tmp_path, local_ray,
                                                                        monkeypatch):
    """Two workers: one group of four replicas runs as two units of two (not one unit of four
    with a worker idle), and the values are the in-process batched run's."""
    from sims.experiments.sweep import execute
    seen = []
    real = execute.make_units

    def spy(cells, plan, max_replicas=64, slots=1):
        units = real(cells, plan, max_replicas, slots)
        seen.append((slots, [len(u) for u in units]))
        return units
    monkeypatch.setattr(execute, "make_units", spy)

    def one(name):
        return SweepSpec(name, Grid.from_specs("fedadam", ["eta_l=0.05,0.1"]), QUAD,
                         cli.build_compare_problem, participation="m=3", rounds=4,
                         seeds=[0, 1], out=str(tmp_path / "out"))
    here = run_sweep(one("b-inproc"), executor="inprocess", plan="batched", quiet=True)
    there = run_sweep(one("b-ray"), executor="ray", plan="batched", quiet=True)
    assert (1, [4]) in seen and (2, [2, 2]) in seen
    assert there.ran == 4 and not there.failures
    a, b = _values(here.table), _values(there.table)
    assert a.index.equals(b.index)
    assert float((a - b).abs().max()) <= 1e-12


def dies_once(desc):
    """Kills its worker process the first time any worker builds the problem."""
    flag = Path(desc["flag"])
    if not flag.exists():
        flag.write_text("died")
        os._exit(1)
    return cli.build_compare_problem({k: v for k, v in desc.items() if k != "flag"})


def test_ray_killed_worker_is_recorded_and_retried(tmp_path, local_ray):
    s = spec(tmp_path, "killed", dies_once)
    s.problem = {**QUAD, "flag": str(tmp_path / "flag")}
    res = run_sweep(s, executor="ray", quiet=True)
    assert not res.missing and res.ran == 8
    assert len(res.failures) >= 1 and all(f["attempt"] == 0 for f in res.failures)
    assert any("died" in f["error"].lower() or "crash" in f["error"].lower()
               or "exit" in f["error"].lower() for f in res.failures), res.failures


PLUGIN = '''
from dataclasses import dataclass

import sims
from sims.algorithms.baselines import FedOpt
from sims.rules.server import Momentum


@dataclass
class RayLabFedAvgM(FedOpt):
    """FedAvg with server momentum (a plug-in the Ray workers never saw)."""
    name = "ray-lab-fedavgm"
    beta: float = 0.9

    def make_server_rule(self):
        return Momentum(self.beta)


sims.register("algorithm", "ray-lab-fedavgm", RayLabFedAvgM)
'''


def test_ray_sweep_runs_a_plugged_algorithm_and_records_the_worker(tmp_path, local_ray):
    """An external module imported here (never on the workers' path) runs on Ray: the task
    carries its source; each cell's record names the worker that computed it."""
    import json

    from sims import plugins
    from sims.algorithms import registry
    from sims.store import extensions
    path = tmp_path / "ray_lab_plugin.py"
    path.write_text(PLUGIN)
    try:
        plugins.import_modules([str(path)])

        def lab_spec(name):
            grid = Grid.from_specs("ray-lab-fedavgm", ["beta=0.5,0.9"])
            return SweepSpec(name, grid, QUAD, cli.build_compare_problem, participation="m=3",
                             rounds=3, seeds=[0], out=str(tmp_path / "out"))

        there = run_sweep(lab_spec("ray"), executor="ray", quiet=True)
        assert there.ran == 2 and not there.failures, there.failures
        here = run_sweep(lab_spec("here"), executor="inprocess", quiet=True)
        a, b = _values(here.table), _values(there.table)
        assert float((a - b).abs().max()) == 0.0
        cells = sorted((tmp_path / "out" / "ray" / "cells").glob("*.json"))
        recs = [json.loads(p.read_text()) for p in cells]
        assert len(recs) == 2
        for rec in recs:
            assert rec["pid"] != os.getpid() and rec["driver"]["pid"] == os.getpid()
            assert rec["threads"] == 1 and rec["host"]
            assert rec["code"]["plugins"] == plugins.plugin_sources()
    finally:
        registry.ALGORITHMS.pop("ray-lab-fedavgm", None)
        extensions._LOADED.pop("ray_lab_plugin", None)
        sys.modules.pop("ray_lab_plugin", None)

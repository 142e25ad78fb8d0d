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

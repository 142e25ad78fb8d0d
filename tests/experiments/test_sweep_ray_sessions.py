"""Sweeps on Ray that start their own local Ray: each sweep starts a Ray session and shuts it
down, so a second sweep in the same process (the next panel of a multi-panel entry) runs on a
fresh session; nothing from the first (its progress actor) is reused there."""
from __future__ import annotations


import pytest

from sims.experiments.sweep import Grid, SweepSpec, run_sweep
from sims.experiments.sweep import cli

from test_sweep import QUAD

ray = pytest.importorskip("ray")


def test_consecutive_ray_sweeps_each_start_their_own_session(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)          # this machine only
    if ray.is_initialized():
        pytest.skip("a Ray session is already open in this process")
    grid = Grid.from_specs("fedavg", ["eta_l=0.05,0.1"])
    results = []
    for name in ("first-panel", "second-panel"):
        spec = SweepSpec(name, grid, QUAD, cli.build_compare_problem, participation="m=3",
                         rounds=3, seeds=[0], out=str(tmp_path / "out"))
        results.append(run_sweep(spec, executor="ray", workers=1, quiet=True))
        assert not ray.is_initialized()                        # started here, shut down here
    assert [(r.ran, len(r.failures), len(r.missing)) for r in results] == [(2, 0, 0)] * 2

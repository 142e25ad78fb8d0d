"""The two algorithms added the way docs/adding_an_algorithm.md says -- FedAvgM (a server rule
object) and local Yogi (one new client transform) -- are registry names whose rule sits in
one file, match their references (test_equivalence.py), and run in ``python -m sims.compare``
and ``python -m sims.sweep`` (also as a batched grid of replicas)."""
from __future__ import annotations

import json

import pandas as pd
import torch

from sims.algorithms.baselines import FedAvg, FedAvgM, LocalYogi
from sims.algorithms.registry import hyperparameters, make_algorithm, source_of
from sims.core.engine import run
from sims.core.participation import Participation
from sims.experiments import compare
from sims.experiments.sweep import cli
from sims.problems.quadratic import heterogeneous_quadratic
from sims.rules.moments import Adaptive, Momentum
from sims.rules.server import Momentum as ServerMomentum


def test_each_is_one_file_and_a_few_lines():
    for name in ("fedavgm", "local-yogi"):
        assert source_of(name) == "sims.algorithms.baselines"
    alg = make_algorithm("fedavgm", beta=0.5)
    assert alg.server_rule == ServerMomentum(0.5)
    assert [type(t) for t in alg.server_rule] == [Momentum]
    assert hyperparameters("fedavgm")["beta"] == 0.9
    yogi = make_algorithm("local-yogi")
    assert [type(t) for t in yogi.local_rule] == [Adaptive]
    assert yogi.local_rule.transforms[0].kind == "yogi"


def test_fedavgm_with_beta_zero_is_fedavg():
    quad = heterogeneous_quadratic(6, 8, local_steps=2, seed=0, sigma=0.2, x0=1.0)
    part = Participation("fixed", m=3)
    a = run(quad, FedAvg(eta=0.7, eta_l=0.05), part, 4, [0])
    b = run(quad, FedAvgM(eta=0.7, eta_l=0.05, beta=0.0), part, 4, [0])
    assert torch.equal(a.server["theta"], b.server["theta"])
    c = run(quad, FedAvgM(eta=0.7, eta_l=0.05, beta=0.9), part, 4, [0])
    assert not torch.equal(a.server["theta"], c.server["theta"])
    assert not torch.equal(run(quad, LocalYogi(eta_l=0.05), part, 4, [0]).server["theta"],
                           a.server["theta"])


def test_both_run_in_compare(tmp_path):
    out = tmp_path / "res"
    rc = compare.main(["--tiny", "--quiet", "--algorithms", "fedavgm:beta=0.8,local-yogi",
                       "--problem", "quadratic", "--participation", "m=4", "--seeds", "2",
                       "--out", str(out), "--figures", str(tmp_path / "fig")])
    assert rc == 0
    summary = pd.read_csv(next(out.glob("compare_summary_*.csv"))).set_index("algorithm")
    assert list(summary.index) == ["fedavgm:beta=0.8", "local-yogi"]
    record = json.loads(next(out.glob("compare_fedavgm_beta=0.8_T*.json")).read_text())
    assert record["algorithm"]["name"] == "fedavgm" and record["algorithm"]["beta"] == 0.8
    assert summary.loc["local-yogi", "client_memory_in_d"] == 3


def test_both_run_in_sweep_also_as_replicas(tmp_path):
    for plan in ("separate", "batched"):
        out = tmp_path / plan
        rc = cli.main(["--name", "ext", "--algorithms", "fedavgm,local-yogi",
                       "--grid", "eta_l=0.01,0.05", "--grid", "fedavgm.beta=0.5,0.9",
                       "--problem", "quadratic", "--rounds", "3", "--seeds", "1",
                       "--rule", "final-train-loss", "--plan", plan, "--quiet",
                       "--out", str(out), "--figures", str(tmp_path / f"fig-{plan}")])
        assert rc == 0
        grid = pd.read_csv(out / "ext" / "grid.csv")
        assert sorted(grid.algorithm.unique()) == ["fedavgm", "local-yogi"]
        assert len(grid) == 6 and grid.selected.sum() == 2
    a = pd.read_csv(tmp_path / "separate" / "ext" / "grid.csv").set_index("run")
    b = pd.read_csv(tmp_path / "batched" / "ext" / "grid.csv").set_index("run")
    pd.testing.assert_series_equal(a.score.sort_index(), b.score.sort_index(), rtol=1e-5)

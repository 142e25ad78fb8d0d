"""The engine-vs-loop benchmark runs end to end (on a shrunken workload) and counts FLOPs
from the model it times."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import load_benchmark
from sims.problems.models import MLP
from sims.problems.onednn import onednn_available


@pytest.fixture
def bench():
    return load_benchmark("engine_vs_loop")


def test_useful_flops_follow_the_timed_model(bench):
    """Forward (2 per weight) and weight gradient (2 per weight) of every layer, input
    gradient (2 per weight) of the layers above the first, per sample, for M clients."""
    params = [p.numel() for p in MLP().parameters()]
    first, above = sum(params[:2]), sum(params[2:])
    per_sample = 4 * (first + above) + 2 * above
    assert bench.useful_flops_per_round(300) == per_sample * 300 * bench.M


def test_benchmark_prints_its_json_line(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "N_CLIENTS", 6)
    monkeypatch.setattr(bench, "M", 3)
    threads = torch.get_num_threads()
    try:
        out = bench.main(["--rounds", "1", "--repeats", "1", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == out
    for key in ("speedup_vs_loop_small", "speedup_vs_loop_full",
                "fraction_of_matmul_peak_full", "speedup_gram_vs_direct_full"):
        assert out[key] > 0, key
    lo, hi = out["fraction_of_matmul_peak_full_range"]
    assert lo <= out["fraction_of_matmul_peak_full"] <= hi
    assert out["gram_path_full"] is True       # 300 samples per client take the Gram path
    assert out["threads"] == 1


def test_operator_profile_shows_the_gram_path_products(bench, monkeypatch):
    monkeypatch.setattr(bench, "N_CLIENTS", 6)
    monkeypatch.setattr(bench, "M", 3)
    table = bench.operator_profile(rounds=1)
    big = "mkldnn::_linear_pointwise" if onednn_available(torch.zeros(1)) else "aten::mm"
    assert big in table and "aten::baddbmm" in table          # big products, corrections

"""The algorithms-vs-loop benchmark runs end to end on its quick workload, for every registry
algorithm, and its ratios are the ones it prints the seconds for."""
from __future__ import annotations

import pytest
import torch

from conftest import load_benchmark
from sims.algorithms.registry import list_algorithms


@pytest.fixture
def bench():
    return load_benchmark("algorithms_vs_loop")


def test_quick_run_covers_every_algorithm(bench):
    threads = torch.get_num_threads()
    try:
        out = bench.main(["--quick", "--rounds", "1", "--repeats", "1", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    names = set(list_algorithms())
    assert set(out["seconds_per_round"]) == names
    assert set(out["ratio_to_fused_fedsgd"]) == names
    assert set(out["speedup_vs_loop"]) == {n for n in names if n in bench.LOOP_OPTIMIZER}
    for name, s in out["speedup_vs_loop"].items():       # one repeat: the ratio is exact
        row = out["seconds_per_round"][name]
        assert s == pytest.approx(row["loop"] / row["engine"], rel=0.02, abs=0.01)
    assert out["min_speedup_vs_loop"] == min(out["speedup_vs_loop"].values())
    for name, r in out["ratio_to_fused_fedsgd"].items():
        row = out["seconds_per_round"][name]
        assert r == pytest.approx(row["engine"] / out["fused_fedsgd_seconds"], rel=0.02, abs=0.01)
    assert out["seconds_per_round"]["fed-sgd"]["fused_path"]
    assert not out["seconds_per_round"]["fed-lamb"]["fused_path"]
    assert out["goals"]["mime"]["fused_goal"] == 5.0
    assert out["goals"]["fed-lamb"]["fused_goal"] == 2.5


def test_every_loop_optimizer_is_a_registry_algorithm(bench):
    assert set(bench.LOOP_OPTIMIZER) <= set(list_algorithms())


def test_bad_flags_are_one_line_errors(bench, capsys):
    for argv in (["--rounds", "0"], ["--algorithms", "no-such-thing"]):
        with pytest.raises(SystemExit):
            bench.main(argv)
        err = capsys.readouterr().err.strip()
        assert err.startswith("algorithms_vs_loop.py: error:") and "\n" not in err


def test_cnn_measurement_runs(bench, monkeypatch):
    monkeypatch.setattr(bench, "CNN_WORKLOAD", {"n_clients": 2, "per_client": 8, "m": 1,
                                                "batch": 4})
    out = bench.cnn_measurement(rounds=1, repeats=1)
    sec = out["seconds_per_round"]
    assert set(sec) == {"fed-sgd", "fed-ams", "loop_sgd", "loop_amsgrad"}
    assert out["fed_ams_over_fed_sgd"] == pytest.approx(sec["fed-ams"] / sec["fed-sgd"],
                                                        rel=0.02, abs=0.01)


@pytest.mark.skipif(__import__("shutil").which("g++") is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
def test_compile_flag_runs_the_compiled_steps(bench):
    from sims import compiled
    threads = torch.get_num_threads()
    try:
        out = bench.main(["--quick", "--rounds", "1", "--repeats", "1", "--threads", "1",
                          "--algorithms", "fed-ams,mime", "--compile"])
        assert out["compiled"] is True          # compiled, not fallen back to eager
    finally:
        compiled.enable(False)
        torch.set_num_threads(threads)


def test_torch_fused_ab_measures_both(bench):
    """``--torch-fused-ab``: each algorithm also with torch's fused kernels off; its gain is
    the ratio of the two seconds it prints (one repeat: exact)."""
    from sims import torch_fused
    threads, was = torch.get_num_threads(), torch_fused.enabled()
    try:
        out = bench.main(["--quick", "--rounds", "1", "--repeats", "1", "--threads", "1",
                          "--algorithms", "dja,fed-ams", "--torch-fused-ab"])
    finally:
        torch.set_num_threads(threads)
    assert torch_fused.enabled() == was and out["torch_fused"] == was
    off = out["without_torch_fused"]
    assert set(off["gain"]) == set(off["speedup_vs_loop"]) == {"dja", "fed-ams"}
    for name, gain in off["gain"].items():
        assert gain == pytest.approx(off["seconds_per_round"][name]
                                     / out["seconds_per_round"][name]["engine"], rel=0.02,
                                     abs=0.01)

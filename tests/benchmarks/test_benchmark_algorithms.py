"""The algorithms-vs-loop benchmark runs end to end on its quick workload, for every registry
algorithm, and its ratios are the ones it prints the seconds for."""
from __future__ import annotations

import time

import pytest
import torch

from conftest import load_benchmark, require_native
from sims.algorithms.registry import list_algorithms


@pytest.fixture
def bench():
    return load_benchmark("algorithms_vs_loop")


def quick(bench, *extra, rounds: int = 1):
    """The benchmark's JSON on its quick workload, one thread, one repeat (``extra``: more
    flags); torch's thread count put back after."""
    threads = torch.get_num_threads()
    try:
        return bench.main(["--quick", "--rounds", str(rounds), "--repeats", "1", "--threads",
                           "1", *extra])
    finally:
        torch.set_num_threads(threads)


def test_quick_run_covers_every_algorithm(bench):
    out = quick(bench)
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
    assert out["goals"]["fed-lamb"]["fused_goal"] == 3.0
    assert out["compiled"] is False and out["torch_fused"] is False     # (removed forms)


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


@pytest.mark.parametrize("flag,form,names", [("--accel-ab", "accel", "dja,fed-ams"),
                                             ("--native-ab", "native", "mimelite,fed-ams")])
def test_ab_measures_both(bench, flag, form, names):
    """``--accel-ab`` / ``--native-ab``: each algorithm also with that fast form off (every
    fast form: the readable rules; the C kernels), left on afterwards; its gain is the ratio
    of the two seconds it prints (one repeat: exact)."""
    require_native()
    is_on = bench.SWITCHES[form][0]
    was = is_on()
    out = quick(bench, "--algorithms", names, flag)
    assert is_on() == was
    assert out["native"].startswith("loaded ")            # the kernels were used and on
    assert out["accel"].startswith("on")
    off = out[f"without_{form}"]
    assert set(off["gain"]) == set(names.split(","))
    assert set(off["speedup_vs_loop"]) == {"fed-ams"} | ({"dja"} if form == "accel"
                                                         else set())
    for name, gain in off["gain"].items():
        assert gain == pytest.approx(off["seconds_per_round"][name]
                                     / out["seconds_per_round"][name]["engine"], rel=0.02,
                                     abs=0.01)


def test_accounting_splits_every_generic_round_and_its_floor(bench):
    """The ``accounting`` key: every generic-path algorithm's instrumented round split into
    gradient, local step and the rest (they add up to the round; the gradient calls were
    caught, Mime's pair and round gradient included), and its floor is the gradient plus
    ``local steps x rule streams x stream seconds``."""
    out = quick(bench, "--algorithms", "fed-sgd, fed-ams, mime, fedada2, fedada2-blend")
    acc = out["accounting"]
    per = acc["per_algorithm"]
    assert set(per) == {"fed-ams", "mime", "fedada2", "fedada2-blend"}    # not fused fed-sgd
    assert acc["local_steps"] == -(-bench.QUICK["per_client"] // bench.QUICK["batch"])
    assert acc["stream_seconds"] > 0
    assert set(acc["gradient_seconds"]) == {"one", "pair"}
    # both measured (their order is a timing, which a loaded machine can invert: not asserted)
    assert acc["gradient_seconds"]["one"] > 0 and acc["gradient_seconds"]["pair"] > 0
    for name, row in per.items():
        assert row["gradient"] > 0 and row["local_step"] > 0
        assert row["message"] > 0
        assert row["gradient"] + row["local_step"] + row["message"] + row["other"] == \
            pytest.approx(row["round"], abs=1e-5)
        assert row["gradient_over_fused_fedsgd"] == pytest.approx(
            row["gradient"] / out["fused_fedsgd_seconds"], rel=0.02, abs=0.01)
    assert per["fedada2-blend"]["rule_streams"] is None and "floor_seconds" not in per[
        "fedada2-blend"]
    for name in ("fed-ams", "mime", "fedada2"):
        row = per[name]
        grad = acc["gradient_seconds"]["pair" if name == "mime" else "one"]
        floor = grad + acc["local_steps"] * row["rule_streams"] * acc["stream_seconds"]
        assert row["floor_seconds"] == pytest.approx(floor, rel=1e-3, abs=1e-6)
        assert row["engine_over_floor"] == pytest.approx(
            out["seconds_per_round"][name]["engine"] / floor, rel=0.02, abs=0.01)
        limit = 5.0 if name == "mime" else 2.5
        if name == "fed-ams":                               # an AMSGrad loop exists
            assert row["floor_speedup_vs_loop"] == pytest.approx(
                out["seconds_per_round"][name]["loop"] / floor, rel=0.02, abs=0.01)
        else:
            assert "floor_speedup_vs_loop" not in row
        assert row["goal_reachable_at_floor"] == (row["floor_ratio_to_fused_fedsgd"] <= limit
                                                  + 0.005)


def test_compression_key_takes_the_compressor_out(bench):
    """The ``compression`` key: for the fused-path algorithms that compress, the seconds in
    ``client_message`` and the loop speedup without them (Fed-SGD, no compressor: absent)."""
    out = quick(bench, "--algorithms", "fed-sgd, fed-ef-sgd")
    comp = out["compression"]
    assert set(comp) == {"fed-ef-sgd"}
    row = comp["fed-ef-sgd"]
    engine_s = out["seconds_per_round"]["fed-ef-sgd"]
    assert 0 < row["message_seconds"] < engine_s["engine"]
    assert row["speedup_vs_loop_without_message"] == pytest.approx(
        engine_s["loop"] / (engine_s["engine"] - row["message_seconds"]), rel=0.02, abs=0.01)
    assert row["speedup_vs_loop_without_message"] > out["speedup_vs_loop"]["fed-ef-sgd"]


def test_rule_streams_cover_the_generic_path(bench):
    generic = {n for n in list_algorithms() if not bench.fused_path(n)}
    assert set(bench.RULE_STREAMS) == generic - {"fedada2-blend"}


def test_split_leaves_the_problem_as_it_was(bench):
    problem = bench.make_problem(bench.QUICK)
    got = bench.split_seconds(problem, "mime", bench.QUICK, rounds=1)
    assert got["gradient"] > 0
    assert not {"stoch_grad", "stoch_grad_pair", "full_grad", "full_grad_sum"} & set(
        vars(problem))


def test_uneven_measures_both_chunkings(bench, monkeypatch):
    """``--uneven``: Dirichlet-sized clients, each algorithm with the engine's chunks by step
    count and with lockstep chunks (``CHUNK_FILL = 0``, restored after); its gain is the
    ratio of the two seconds it prints (one repeat: exact)."""
    from sims.core import batching
    fill = batching.CHUNK_FILL
    seen = []
    real = bench.engine.run
    monkeypatch.setattr(bench.engine, "run",
                        lambda *a, **k: seen.append(batching.CHUNK_FILL) or real(*a, **k))
    out = quick(bench, "--algorithms", "fed-ams", "--uneven", rounds=2)
    assert batching.CHUNK_FILL == fill
    assert fill in seen and 0.0 in seen
    un = out["uneven"]
    sizes = [len(p) for p in bench.uneven_problem(bench.QUICK).parts]
    assert un["client_samples"]["max"] == max(sizes) > 2 * min(sizes)
    sec = un["seconds_per_round"]["fed-ams"]
    assert un["gain"]["fed-ams"] == pytest.approx(sec["lockstep"] / sec["grouped"], rel=0.02,
                                                  abs=0.01)


def test_cpu_clock_times_by_the_process_cpu_time(bench, monkeypatch):
    monkeypatch.setattr(bench, "CLOCK", bench.CLOCK)        # main() sets the module's clock
    out = quick(bench, "--clock", "cpu", "--algorithms", "fed-sgd,fed-ams")
    assert out["clock"] == "cpu" and bench.CLOCK == "cpu"
    assert bench.clock is not None and bench.CLOCKS["cpu"] is time.process_time
    for row in out["seconds_per_round"].values():
        assert row["engine"] > 0 and row["loop"] > 0
    assert quick(bench, "--algorithms", "fed-sgd")["clock"] == "wall"

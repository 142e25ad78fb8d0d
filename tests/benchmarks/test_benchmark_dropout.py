"""benchmarks/dropout_grad_ab.py runs end to end on a shrunken workload: both arms run (the
fast one on the hand-batched gradient with masks, the other on torch.func) and the gain is
their ratio."""
from __future__ import annotations

import json

from conftest import load_benchmark


def test_dropout_benchmark_prints_both_arms_and_their_ratio(monkeypatch, capsys):
    bench = load_benchmark("dropout_grad_ab")
    monkeypatch.setattr(bench, "N_CLIENTS", 4)
    monkeypatch.setattr(bench, "PER_CLIENT", 40)
    monkeypatch.setattr(bench, "M", 2)
    arms = []
    real = bench.round_seconds

    def spy(dataset, name, fast, epochs, rounds):
        arms.append(fast)
        return real(dataset, name, fast, epochs, rounds)

    monkeypatch.setattr(bench, "round_seconds", spy)
    bench.main(["--repeats", "1", "--rounds", "1", "--algorithms", "fed-lamb"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert arms == [True, False, False, True]                   # ABBA
    s = out["seconds_a_round"]["fed-lamb"]
    assert s["fast"] > 0 and s["generic"] > 0
    assert out["gain"]["fed-lamb"] == round(s["generic"] / s["fast"], 2)

"""Tidy results with provenance (sims/store/results.py): table shape, atomic save/load, incomplete runs."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

import sims.store.results as results
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.engine import run
from sims.core.participation import Participation
from sims.store.results import load_run, provenance, save_run, tidy


@pytest.fixture(scope="module")
def output(quad):
    return run(quad, FedEF(1.0, 0.05, TopK(0.1)), Participation("fixed", m=3), 4, [0, 1],
               eval_every=2)


def test_tidy_shape_and_columns(output):
    df = tidy(output, "topk", {"n": 6, "compressor": "topk-0.1", "grid": [1, 2], "none": None})
    assert list(df.columns) == ["run", "seed", "round", "metric", "value", "diverged_at", "n",
                                "compressor", "grid", "none"]
    assert df["diverged_at"].isna().all()
    expected_rows = sum(len(output.rounds[m]) * 2 for m in output.metrics)
    assert len(df) == expected_rows
    assert set(df["metric"]) == set(output.metrics) >= {"grad_norm2", "train_loss", "qA2",
                                                        "bits_up", "staleness_mean"}
    assert set(df["seed"]) == {0, 1} and (df["run"] == "topk").all()
    assert (df["n"] == 6).all() and (df["grid"] == "[1, 2]").all() and df["none"].isna().all()
    g = df[(df.metric == "grad_norm2") & (df.seed == 1)]
    assert list(g["round"]) == [0, 2, 4]
    np.testing.assert_array_equal(g["value"].to_numpy(), output.metrics["grad_norm2"][1])
    b = df[(df.metric == "bits_up") & (df.seed == 0)]
    assert list(b["round"]) == [1, 2, 3, 4]
    # one row per (run, seed, round, metric)
    assert not df.duplicated(["run", "seed", "round", "metric"]).any()


@dataclass
class Config:
    rounds: int = 4
    lr: float = 0.1
    seeds: tuple = (0, 1)


def test_provenance_record():
    rec = provenance(Config(), np.array([0, 1]), 1.23456, {"extra": np.float64(2.5),
                                                             "ids": (np.int64(3),)})
    assert rec["config"] == {"rounds": 4, "lr": 0.1, "seeds": [0, 1]}
    assert rec["seeds"] == [0, 1] and all(type(s) is int for s in rec["seeds"])
    assert {"python", "torch", "numpy", "pandas"} <= set(rec["versions"])
    assert rec["versions"]["torch"] not in ("", "absent")
    assert re.fullmatch(r"([0-9a-f]{40}(-dirty)?|unknown)", rec["commit"])
    assert rec["wall_time_s"] == 1.235
    assert rec["extra"] == 2.5 and rec["ids"] == [3]
    json.dumps(rec)                                       # JSON-able throughout
    assert provenance({"a": 1}, [5], 0.0)["config"] == {"a": 1}


def test_save_load_round_trip(output, tmp_path):
    df = tidy(output, "topk", {"n": 6})
    rec = provenance(Config(), output.seeds, output.wall_time)
    path = tmp_path / "sub" / "run.csv"
    save_run(df, rec, path)
    assert path.exists() and path.with_suffix(".json").exists()
    assert not list(path.parent.glob(".*.tmp"))           # no temporary files left behind
    loaded, meta = load_run(path)
    pd.testing.assert_frame_equal(loaded, df, check_dtype=False)
    table = meta.pop("table")
    assert meta == json.loads(json.dumps(rec))
    assert table["rows"] == len(df) and table["file"] == "run.csv"
    assert table["sha256"] == results.table_digest(path.read_bytes())


def test_incomplete_runs_are_not_loaded(output, tmp_path):
    df = tidy(output, "topk")
    path = tmp_path / "run.csv"
    assert load_run(path) is None                         # absent
    path.write_text(df.to_csv(index=False))
    assert load_run(path) is None                         # CSV without its JSON record
    path.with_suffix(".json").write_text("{not json")
    assert load_run(path) is None                         # corrupt record
    path.with_suffix(".json").write_text("{}")
    with pytest.raises(results.ResultsError, match="no checksum"):
        load_run(path)                                    # a record that vouches for nothing


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    class Boom(RuntimeError):
        pass

    def explode(*a, **k):
        raise Boom

    monkeypatch.setattr(results.os, "replace", explode)
    with pytest.raises(Boom):
        results.atomic_write_bytes(tmp_path / "x.csv", b"data")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_rewrite_is_not_loaded(output, tmp_path, monkeypatch):
    path = tmp_path / "run.csv"
    old = tidy(output, "old")
    save_run(old, {"run": "old"}, path)
    real = results.atomic_write_bytes

    def crash_on_json(p, data):
        if str(p).endswith(".json"):
            raise KeyboardInterrupt
        real(p, data)

    monkeypatch.setattr(results, "atomic_write_bytes", crash_on_json)
    with pytest.raises(KeyboardInterrupt):
        save_run(tidy(output, "new"), {"run": "new"}, path)
    monkeypatch.undo()
    assert load_run(path) is None


def test_a_point_key_that_looks_like_a_number_is_read_back_as_text(tmp_path):
    """A sweep cell's table holds one point, whose hexadecimal key can look like a number
    (``6075e12879``: 6075 x 10^12879); it is read back as the key, never ``inf`` (two such
    points of a panel would merge)."""
    df = pd.DataFrame({"run": ["1e5", "1e5"], "point": ["6075e12879", "6075e12879"],
                       "label": ["0012", "0012"], "round": [0, 1], "value": [0.5, 0.25]})
    path = tmp_path / "cell.csv"
    save_run(df, {"run": "cell"}, path)
    loaded, _ = load_run(path)
    assert loaded["point"].tolist() == ["6075e12879"] * 2
    assert loaded["run"].tolist() == ["1e5"] * 2 and loaded["label"].tolist() == ["0012"] * 2
    assert loaded["value"].tolist() == [0.5, 0.25]

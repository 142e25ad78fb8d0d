"""The algorithm registry (names, hyperparameters, one-line errors) and the comparison
command ``python -m sims.compare`` (a --tiny run writing results, provenance and figures;
one-line errors for bad input)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from sims.experiments import compare
from sims.algorithms.fed_ef import FedEF
from sims.algorithms.registry import (ALGORITHMS, AlgorithmError, hyperparameters,
                                      list_algorithms, make_algorithm)
from sims.rules.compress import TopK


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert msg and "\n" not in msg
    return msg


def test_every_name_builds_and_describes_itself():
    assert set(list_algorithms()) == set(ALGORITHMS)
    for name in ALGORITHMS:
        alg = make_algorithm(name)
        json.dumps(alg.describe())
        assert set(hyperparameters(name)) >= {"eta_l"}


def test_fed_ef_variants():
    alg = make_algorithm("fed-ef-ams", compressor="topk-0.1", scope="model", eta=0.02)
    assert isinstance(alg, FedEF) and alg.server == "amsgrad" and alg.error_feedback
    assert isinstance(alg.compressor, TopK) and alg.compressor.scope == "model"
    plain = make_algorithm("fed-sgd")
    assert not plain.error_feedback and plain.eta == 1.0
    assert not make_algorithm("fed-direct-sgd").error_feedback
    assert make_algorithm("FED_EF_SGD", restart_period=5).restart_period == 5


@pytest.mark.parametrize("name,hyper,text", [
    ("nosuch", {}, "unknown algorithm 'nosuch'"),
    ("fedlada", {"etal": 0.1}, "unknown hyperparameter(s) etal"),
    ("fedlada", {"alpha": 1.5}, "alpha must be in"),
    ("fedadam", {"eta": 0}, "eta must be positive"),
    ("fedada2", {"precond": "sm4"}, "precond must be one of"),
    ("fed-lamb", {"phi": "square"}, "unknown phi"),
    ("fed-ef-sgd", {"compressor": "topk-x"}, "bad compressor parameter"),
    ("fedadagrad", {"server": "lion"}, "unknown server rule"),
    ("dja", {"server": "sgd"}, "needs an adaptive server"),
    ("mime", {"base": "lion"}, "Mime base must be one of"),
])
def test_registry_errors_are_one_line(name, hyper, text):
    with pytest.raises(AlgorithmError) as exc:
        make_algorithm(name, **hyper)
    assert text in _one_line(exc)


def test_parse_algorithms_and_values():
    specs = compare.parse_algorithms("fedlada:alpha=0.05:v_init=zero,fedavg,fedlada",
                                     ("eta_l=0.02", "fedavg.eta=0.5"))
    assert specs[0] == ("fedlada:alpha=0.05:v_init=zero", "fedlada",
                        {"eta_l": 0.02, "alpha": 0.05, "v_init": "zero"})
    assert specs[1] == ("fedavg", "fedavg", {"eta_l": 0.02, "eta": 0.5})
    assert specs[2][0] == "fedlada" and specs[2][2] == {"eta_l": 0.02}
    assert compare.parse_value("none") is None and compare.parse_value("True") is True
    assert compare.parse_value("3") == 3 and compare.parse_value("1e-3") == 1e-3


def _saved(out, stem, ext="csv"):
    """The one results file of run ``stem`` (files are ``TAG_LABEL_T{rounds}_{hash}``)."""
    found = sorted(out.glob(f"{stem}_T*_*.{ext}"))
    assert len(found) == 1, found
    return found[0]


def test_compare_tiny_writes_results_and_figures(tmp_path, capsys):
    out, figs = tmp_path / "res", tmp_path / "fig"
    rc = compare.main(["--tiny", "--quiet", "--algorithms",
                       "fedavg,scaffold,fedlada:eta_l=0.05,fed-lamb,fedada2,fed-ef-sgd",
                       "--problem", "quadratic", "--participation", "m=4", "--seeds", "2",
                       "--out", str(out), "--figures", str(figs), "--hp", "fedavg.eta=0.9"])
    assert rc == 0
    for stem in ("fedavg", "scaffold", "fedlada_eta_l=0.05", "fed-lamb", "fedada2",
                 "fed-ef-sgd"):
        df = pd.read_csv(_saved(out, f"compare_{stem}"))
        record = json.loads(_saved(out, f"compare_{stem}", "json").read_text())
        assert {"train_loss", "suboptimality", "bits_up"} <= set(df.metric)
        assert record["seeds"] == [0] and record["commit"] and record["versions"]["torch"]
        assert record["bits_up_per_round"] > 0 and record["client_memory_floats"] > 0
        assert df["round"].max() == 3
    assert json.loads(_saved(out, "compare_fedavg", "json").read_text())["algorithm"]["eta"] == 0.9
    summary = pd.read_csv(next(out.glob("compare_summary_*.csv")))
    assert list(summary.algorithm) == ["fedavg", "scaffold", "fedlada:eta_l=0.05", "fed-lamb",
                                       "fedada2", "fed-ef-sgd"]
    row = summary.set_index("algorithm")
    assert row.loc["scaffold", "bits_up_per_round"] == 2 * row.loc["fedavg", "bits_up_per_round"]
    assert (figs / "compare.png").stat().st_size > 0 and (figs / "compare.pdf").exists()
    assert "results:" in capsys.readouterr().out


def test_compare_runs_mime(tmp_path):
    """Mime and Mime-LAMB are registry names the comparison command runs (their bits: the
    model and the full gradient up, model, optimizer state and c down)."""
    assert {"mime", "mime-lamb"} <= set(list_algorithms())
    assert make_algorithm("mime").needs_anchor_grad
    assert make_algorithm("mime-lamb", lam=0.01).layerwise
    out = tmp_path / "res"
    rc = compare.main(["--tiny", "--quiet", "--algorithms", "mime,mime-lamb:eta_l=0.02,mimelite",
                       "--problem", "quadratic", "--participation", "m=4", "--seeds", "1",
                       "--out", str(out), "--figures", str(tmp_path / "fig")])
    assert rc == 0
    row = pd.read_csv(next(out.glob("compare_summary_*.csv"))).set_index("algorithm")
    assert row.loc["mime", "bits_up_per_round"] == row.loc["mimelite", "bits_up_per_round"]
    record = json.loads(_saved(out, "compare_mime", "json").read_text())
    assert record["algorithm"]["name"] == "mime"
    df = pd.read_csv(_saved(out, "compare_mime-lamb_eta_l=0.02"))
    assert df[df.metric == "train_loss"]["value"].notna().all()


def test_compare_bits_axis_total(tmp_path):
    table = pd.DataFrame({"run": "a", "seed": 0, "round": [1, 2, 1, 2, 0, 1, 2],
                          "metric": ["bits_up", "bits_up", "bits_down", "bits_down",
                                     "train_loss", "train_loss", "train_loss"],
                          "value": [1.0, 2.0, 10.0, 20.0, 5.0, 4.0, 3.0]})
    up = compare.with_bits(table, "up")
    total = compare.with_bits(table, "total")
    loss_up = up[up.metric == "train_loss"].sort_values("round")["bits"].tolist()
    loss_total = total[total.metric == "train_loss"].sort_values("round")["bits"].tolist()
    assert loss_up == [0.0, 1.0, 2.0] and loss_total == [0.0, 11.0, 22.0]


@pytest.mark.parametrize("args,text", [
    (["--algorithms", "fedavg,nosuch"], "unknown algorithm 'nosuch'"),
    (["--algorithms", "fedlada:alpha"], "expected KEY=VALUE"),
    (["--algorithms", "fedlada:eta_k=1"], "unknown hyperparameter(s) eta_k"),
    (["--hp", "fedprox.mu=0.1"], "not being run"),
    (["--problem", "mnist-resnet"], "unknown problem"),
    (["--participation", "m=0"], "m >= 1"),
    (["--participation", "m=500"], "cannot sample m=500"),
    (["--bits", "sideways"], "--bits must be"),
    (["--noise", "student_t"], "needs --df"),
    (["--dtype", "float16"], "--dtype must be"),
])
def test_compare_errors_are_one_line(tmp_path, capsys, args, text):
    rc = compare.main(["--quiet", "--rounds", "2", "--seeds", "1", "--n-clients", "6",
                       "--participation", "m=3", "--dim", "4", "--out", str(tmp_path / "r"),
                       "--figures", str(tmp_path / "f")] + args)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and text in err, err
    assert not (tmp_path / "f").exists()

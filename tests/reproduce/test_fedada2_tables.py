"""FedAda2 Tables 3-6 as data (:mod:`reproduce.fedada2_tables`)."""
from __future__ import annotations

import pytest

from reproduce.fedada2_tables import (METHODS, TABLES, TableError, best, build,
                                            build_private)
from sims.privacy import Private

# Verbatim rows of the spec's Tables 4 (eta_s / eta_l) and 5 (tau_s / tau_l), columns
# FedAvg | FedAdaGrad | FedAdam | DJA | Joint w/o | FedAda2.
TABLE4 = {
    "cifar100": "N/A / 1e-1 | 1e-2 / 1e-5 | 1e-3 / 1e-3 | 1e-3 / 1e-2 | 1e-3 / 1e-2 | 1e-3 / 1e-2",
    "gld23k": "N/A / 0.04 | 1e-2 / 1e-2 | 1e-3 / 1e-2 | 1e-3 / 1e-2 | 1e-3 / 1e-2 | 1e-3 / 1e-2",
    "gld23k-full": "N/A / 0.02 | 1e-4 / 1e-2 | 1e-4 / 1e-2 | 1e-4 / 1e-4 | 1e-4 / 1e-2 | 1e-4 / 1e-4",
}
TABLE5 = {
    "cifar100": "N/A / N/A | 1e-10 / N/A | 1e-5 / N/A | 1e-5 / 1.0 | 1e-5 / 1.0 | 1e-5 / 1.0",
    "gld23k": "N/A / N/A | 1e-5 / N/A | 1e-5 / N/A | 1e-5 / 0.1 | 1e-5 / 0.1 | 1e-5 / 0.1",
    "gld23k-full": "N/A / N/A | 1e-2 / N/A | 1e-5 / N/A | 1e-5 / 1e-3 | 1e-5 / 1 | 1e-5 / 1e-3",
}
# Table 3 (DP StackOverflow): c, eta_s, eta_l, tau_s, tau_l; columns FedAvg | FedAdaGrad |
# DJA | Joint w/o | FedAda2
TABLE3 = {"c": "1.0 | 0.1 | 0.5 | 0.5 | 0.1", "eta": "N/A | 1.0 | 1.0 | 1.0 | 1.0",
          "eta_l": "20.0 | 1.0 | 1.0 | 0.1 | 0.1", "tau": "N/A | 1e-3 | 1e-3 | 1e-5 | 1e-5",
          "eps": "N/A | N/A | 1e-3 | 1e-3 | 1e-3"}


def _cells(row):
    return [c.strip() for c in row.split("|")]


def _num(text):
    return None if text == "N/A" else float(text)


@pytest.mark.parametrize("setting", sorted(TABLES))
def test_every_cell_builds_with_its_values(setting):
    for method, cell in TABLES[setting].items():
        alg = build(setting, method)
        assert alg.name == cell.algorithm
        for key, val in cell.hyper.items():
            assert getattr(alg, key) == val, (setting, method, key)


@pytest.mark.parametrize("setting", sorted(TABLE4))
def test_tables_4_5_verbatim(setting):
    for method, lr, tau in zip(METHODS, _cells(TABLE4[setting]), _cells(TABLE5[setting])):
        alg = build(setting, method)
        eta_s, eta_l = (_num(x.strip()) for x in lr.split(" / "))
        tau_s, tau_l = (_num(x.strip()) for x in tau.split(" / "))
        assert alg.eta_l == eta_l
        assert alg.eta == (1.0 if eta_s is None else eta_s)
        if tau_s is not None:
            assert alg.tau == tau_s
        if tau_l is not None:
            assert alg.eps == tau_l


def test_table_3_verbatim_and_private():
    methods = ["fedavg", "fedadagrad", "dja", "joint-no-precond", "fedada2"]
    for key, row in TABLE3.items():
        for method, text in zip(methods, _cells(row)):
            val = _num(text)
            if val is None:
                continue
            if key == "c":
                assert best("stackoverflow-dp", method).dp_clip == val
            else:
                assert getattr(build("stackoverflow-dp", method), key) == val
    alg = build_private("stackoverflow-dp", "fedada2", 1.0, delta=1 / 400, sampling_rate=0.1)
    assert isinstance(alg, Private) and alg.clip == 0.1 and alg.noise_multiplier == 1.0


def test_adaptivity_per_dataset():
    """StackOverflow: AdaGrad on both sides; images: Adam on both sides (spec 4.1), with
    beta2 = 0.999 for FedAda2's FedAdam; client preconditioner kinds per column."""
    for method in ("dja", "joint-no-precond", "fedada2"):
        so = build("stackoverflow-dp", method)
        assert (so.server, so.client) == ("adagrad", "adagrad")
        for setting in ("cifar100", "gld23k", "gld23k-1epoch", "gld23k-20epoch"):
            im = build(setting, method)
            assert (im.server, im.client) == ("adam", "adam")
            assert (im.server_beta2, im.beta2) == (0.999, 0.999)
        assert {"dja": "server", "joint-no-precond": "zero", "fedada2": "zero"}[method] == so.init
        assert so.precond == ("sm3-ii" if method == "fedada2" else "full")
    assert build("gld23k", "fedadam").beta2 == 0.999


def test_errors_one_line():
    with pytest.raises(TableError, match="unknown FedAda2 table"):
        best("imagenet", "fedada2")
    with pytest.raises(TableError, match="no entry for 'fedadam'"):
        best("stackoverflow-dp", "fedadam")
    with pytest.raises(TableError, match="no DP clip"):
        build_private("cifar100", "fedada2")


def test_settings_cover_every_table_and_follow_the_paper():
    from reproduce.fedada2_tables import SETTINGS
    assert set(SETTINGS) == set(TABLES)
    for s in SETTINGS.values():
        if s["q"] is not None:
            assert s["m"] == max(int(s["q"] * s["n_clients"]), 1)
    so = SETTINGS["stackoverflow-dp"]
    assert (so["n_clients"], so["m"], so["rounds"], so["delta"]) == (400, 40, 500, 1 / 400)
    assert [SETTINGS[k]["local_epochs"] for k in ("gld23k-1epoch", "gld23k", "gld23k-20epoch")] \
        == [1, 5, 20]

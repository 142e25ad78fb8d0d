"""FedAda2 App. H.2's two-step tuning on an image stand-in (``fedada2_fig5 --tuning
two-step``), through the one mechanism ``fedada2_common.two_step_tuning`` that
``fedada2_dp`` uses too: every grid value on H.2's grids, each method's Tables 4-5 point in a
step, the picks inside the grids, the card's "tuned on the task run" item held, and the
labels a ``--tiny`` run determines."""
from __future__ import annotations

import pytest
import torch

from reproduce import common
from reproduce import fedada2_common as fc
from reproduce import fedada2_fig5 as fig5
from reproduce import fedada2_tables as tables

#: App. H.2's grids (spec 4.2): step 1 symmetric, step 2 asymmetric, FedAvg's own
H2_STEP1 = {"eta_l": {0.001, 0.01, 0.1, 0.5, 1, 5, 20}, "eta": {0.001, 0.01, 0.1, 0.5, 1, 5, 20},
            "eps": {1e-9, 1e-7, 1e-5, 1e-3}, "tau": {1e-9, 1e-7, 1e-5, 1e-3}}
H2_STEP2 = {"eta_l": {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1},
            "eta": {1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2},
            "eps": {1e-7, 1e-5, 1e-3, 1e-1, 1}, "tau": {1e-12, 1e-11, 1e-10, 1e-9, 1e-5}}
FEDAVG1 = {0.001, 0.01, 0.1, 0.5, 1, 5, 20, 40, 80, 160, 320}
FEDAVG2 = {round(0.001 * k, 3) for k in range(1, 10)} | {round(0.01 * k, 2) for k in range(1, 10)} \
    | {0.1}


def _close_in(v, values):
    return any(abs(v - w) <= 1e-12 * max(1.0, abs(w)) for w in values)


@pytest.mark.parametrize("method", list(fig5.GRIDS))
def test_grids_lie_on_h2s_grids_and_contain_the_table_point(method):
    one, two = fig5.GRIDS[method]
    for step, grid, h2 in ((1, one, H2_STEP1), (2, two, H2_STEP2)):
        for key, values in grid.items():
            allowed = (FEDAVG1 if step == 1 else FEDAVG2) if method == "fedavg" else h2[key]
            for v in values:
                assert _close_in(v, allowed), (method, step, key, v)
    point = tables.best("cifar100", method).hyper
    assert any(all(_close_in(point[k], vs) for k, vs in grid.items()) for grid in (one, two)), \
        f"{method}: Tables 4-5's point {point} is in neither step"


def test_tuning_flags_are_checked_before_any_work():
    with pytest.raises(common.EntryError, match="--tuning must be paper or two-step"):
        common.parse_config(fig5, ["--tuning", "grid"])
    with pytest.raises(common.EntryError, match="--tune-seeds must be >= 1"):
        common.parse_config(fig5, ["--tune-seeds", "0"])


def test_tiny_two_step_run_tunes_every_method_and_holds_the_card(tmp_path, capsys):
    from verdict_util import saved
    torch.set_num_threads(1)
    argv = ["--tiny", "--quiet", "--tuning", "two-step", "--out", str(tmp_path / "res"),
            "--figures", str(tmp_path / "fig")]
    assert common.main(fig5, argv) == 0
    text = capsys.readouterr().out
    assert "two-step tuning (App. H.2 on the stand-in; rule running10-acc" in text
    assert "each method tuned on it by App. H.2's two steps" in text
    UP = "inconclusive: underpowered"
    assert saved(tmp_path / "res", "fedada2_fig5") == {
        "15a [CIFAR-100]": UP, "15b [CIFAR-100]": "premise absent", "15c [CIFAR-100]": "shows",
        "F5 [CIFAR-100]": UP}
    cfg = common.parse_config(fig5, argv)
    tuned = fc.two_step_tuning("cifar100", cfg, fig5.GRIDS_NAME, fig5.grids(cfg))
    assert set(tuned) == set(fc.SETTINGS["cifar100"].methods)
    for m, t in tuned.items():
        one, two = fig5.TINY_GRIDS[m]
        assert set(t.table["step"]) == {1, 2}
        for k, v in t.picks[m].items():
            assert _close_in(v, one.get(k, ()) + two.get(k, ())), (m, k, v)
    item = lambda c: next(i for i in fc.card("cifar100", c).items  # noqa: E731
                          if i.name == "tuned on the task run")
    assert item(cfg).ok and not item(common.parse_config(fig5, ["--tiny"])).ok
    assert fc.protocol("cifar100", cfg).rule == "running10-acc"
    assert "Table 3's clip" not in fc.protocol("cifar100", cfg).text


def test_tuning_refuses_unequal_clients_under_sample_weighting():
    """GLD-23K's clients differ in size: the authors' sample-weighted servers cannot be tuned
    by the (uniform) sweep cells, so the mechanism stops with one line instead of tuning a
    different algorithm than it runs."""
    from reproduce import fedada2_epochs as epochs
    cfg = common.parse_config(epochs, ["--tiny"])
    cfg.tuning = "two-step"
    with pytest.raises(common.EntryError, match="aggregate uniformly"):
        fc.two_step_tuning("gld23k", cfg, "check", {})

"""The FedAda2 image stand-ins' regime card (:func:`reproduce.fedada2_common.card`): the
headroom to the task's ceiling decides the premise (``premise absent`` where the best run sits
within 2 points of the ceiling, never ``does not show``), the separation of the runs relative
to the seed spread is information; and the composite stand-in is the default, the former one
an option named in the data note."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from reproduce import common
from reproduce import fedada2_common as fc
from reproduce import fedada2_fig5 as fig5
from reproduce import verdicts as vd


def _fake(monkeypatch, ceiling):
    rec = {"standin": True, "kind": "composite", "num_classes": 100, "ceiling": ceiling,
           "reason": "stand-in requested"}
    monkeypatch.setattr(fc, "problem", lambda *a, **k: (SimpleNamespace(n_clients=1000), rec))


def _finals(final: dict, seeds=3, rounds=100):
    rows = []
    for m, acc in final.items():
        for seed in range(seeds):
            for r in range(0, rounds + 1, 10):
                v = acc * min(1.0, r / rounds) + 0.002 * seed
                rows.append({"run": fc.run_name("cifar100", m), "seed": seed, "round": r,
                             "metric": "test_acc", "value": v, "method": m})
    return pd.DataFrame(rows)


def _item(card, name):
    return [i for i in card.items if i.name.startswith(name)][0]


def test_headroom_to_the_ceiling_decides_the_premise(monkeypatch):
    finals = {"fedavg": 0.50, "fedadagrad": 0.52, "fedadam": 0.52, "dja": 0.55,
              "joint-no-precond": 0.55, "fedada2": 0.551}
    df = _finals(finals)
    cfg = fig5.Config()
    _fake(monkeypatch, 0.636)
    card = fc.card("cifar100", cfg, df, points=False)
    head = _item(card, "headroom")
    assert head.ok and head.measured == pytest.approx(100 * (0.636 - 0.553), abs=1e-6)
    assert not _item(card, "late gain").checked                   # information beside it
    sep = _item(card, "separation")
    assert not sep.checked and sep.measured == pytest.approx(0.051 / 0.002, rel=1e-6)
    assert card.ok
    # saturated: the best run within 2 points of the ceiling -> premise absent, never
    # "does not show", whatever the statistic says
    _fake(monkeypatch, 0.56)
    card = fc.card("cifar100", cfg, df, points=False)
    assert not _item(card, "headroom").ok and not card.ok
    v = vd.about_equal(fig5.CLAIMS["15c"], fc.seeds_of(df, "cifar100_fedada2"),
                       fc.seeds_of(df, "cifar100_dja"), fc.EQUAL_MARGIN, card=card)
    assert v.label == vd.PREMISE and "headroom" in v.reason
    # no ceiling recorded (real task, former stand-in): the late gain is the checked item
    _fake(monkeypatch, None)
    card = fc.card("cifar100", cfg, df, points=False)
    assert _item(card, "late gain").checked
    assert not [i for i in card.items if i.name.startswith("headroom")]


def test_composite_is_the_default_and_the_former_stand_in_an_option():
    cfg = common.parse_config(fig5, ["--tiny"])
    assert cfg.image_standin == "composite"
    old = common.parse_config(fig5, ["--tiny", "--image-standin", "fmnist"])
    assert old.image_standin == "fmnist"
    with pytest.raises(common.EntryError, match="--image-standin must be one of"):
        common.parse_config(fig5, ["--image-standin", "pairs"])
    new_prob, new = fc.problem("cifar100", cfg)
    old_prob, former = fc.problem("cifar100", old)
    assert new["kind"] == "composite" and new["ceiling"] == pytest.approx(0.636)
    assert new_prob.d == 385 * 100 and old_prob.d == 385 * 10 and former["ceiling"] is None
    assert "100-class pairs" in fc.data_note(cfg) and "former 10-class" in fc.data_note(old)
    assert fc.target("cifar100", cfg) != fc.target("cifar100", old)

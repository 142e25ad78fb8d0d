"""Every FedLADA entry in two protocols (:mod:`reproduce.fedlada_tuning`'s
``protocol_runs`` / ``split_protocols`` / ``check_both``): the plain runs at the paper's (or the
pilot's) settings and, with ``--tuned``, the same runs at fedlada_fig2's tuned picks; the
Fig. 7 entry re-brackets the local rate per activation."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from reproduce import common
from reproduce import fedlada_common as fc
from reproduce import fedlada_tuning as ft

PA = "premise absent"


def _fake_make(seen):
    """``hyper -> runs`` of two methods; ``execute`` writes one row per run (no engine)."""
    def make(hyper):
        out = []
        for m in ("fedavg", "fedlada"):
            hp = hyper(m)

            def execute(cfg, seeds, progress, m=m, hp=hp):
                seen.append(m)
                return pd.DataFrame({"run": [m], "seed": [0], "round": [1],
                                     "metric": ["test_acc"], "value": [hp["eta_l"]]}), {}
            out.append(common.Run(m, {"method": m, **hp}, rounds=1, execute=execute))
        return out
    return make


def test_protocol_runs_share_equal_settings_and_split_by_protocol(monkeypatch):
    """A tuned run whose settings equal a plain run's is not run twice, and both protocols
    read it; a tuned run with other settings runs as ``tuned:NAME`` and only the tuned
    protocol reads it."""
    cfg = fc.StandIn(paper_lr=True, tuned=True)
    picks = {"fedavg": fc.hyper("fedavg", cfg), "fedlada": {**fc.hyper("fedlada", cfg),
                                                            "eta_l": 0.03}}
    monkeypatch.setattr(ft, "base_picks", lambda cfg, methods: {"picks": picks})
    seen = []
    make = _fake_make(seen)
    runs = ft.protocol_runs(cfg, make, ("fedavg", "fedlada"))
    assert [r.name for r in runs] == ["fedavg", "fedlada", "tuned:fedlada"]
    df = pd.concat([r.execute(cfg, [0], None)[0] for r in runs], ignore_index=True)
    assert seen == ["fedavg", "fedlada", "fedlada"]
    alias = ft.aliases(cfg, make, ("fedavg", "fedlada"))
    assert alias == {"fedavg": "fedavg"}
    plain, tuned = ft.split_protocols(df, alias)
    assert dict(zip(plain.run, plain.value)) == {"fedavg": 0.1, "fedlada": 1e-3}
    assert dict(zip(tuned.run, tuned.value)) == {"fedlada": 0.03, "fedavg": 0.1}
    # without --tuned: the plain runs only
    assert [r.name for r in ft.protocol_runs(fc.StandIn(paper_lr=True), make, ())] == \
        ["fedavg", "fedlada"]


def test_base_picks_are_fedlada_fig2s_filed_tuning_record():
    """At the CPU default the picks are read from fedlada_fig2's filed tuning record (the one
    its tuned verdicts rest on), never re-tuned; FedAdam(*) takes FedAdam's picks."""
    from reproduce import fedlada_fig2, fedlada_k, ledger
    cfg = fedlada_k.Config(paper_lr=True, tuned=True)
    cfg.scale()
    got = ft.base_picks(cfg, fc.METHODS)
    filed = ft.picks_of(ledger.load_results(fedlada_fig2))
    assert got["picks"] == filed and "filed tuning record" in got["source"]
    assert ft.tuned_hyper(cfg, fc.METHODS, "fedadam-cm")["tau"] == filed["fedadam"]["tau"]
    proto = ft.tuned_protocol(cfg, fc.METHODS)
    assert proto.horizon == 150 and proto.plotted == cfg.rounds and proto.seeds == 3


def _tiny_tuned_run(entry, tmp_path, capsys):
    """``entry --tiny --tuned`` in ``tmp_path``: ``(printed output, {claim: saved verdict})``;
    every figure it names was drawn."""
    from verdict_util import saved
    torch.set_num_threads(1)
    args = ["--tiny", "--quiet", "--tuned", "--out", str(tmp_path / "res"),
            "--figures", str(tmp_path / "fig")]
    assert common.main(entry, args) == 0
    for stem in entry.FIGURES:
        assert (tmp_path / "fig" / f"{stem}.png").stat().st_size > 0
    return capsys.readouterr().out, saved(tmp_path / "res", common.entry_name(entry))


def test_participation_tiny_run_has_a_verdict_in_each_protocol(tmp_path, capsys):
    from reproduce import fedlada_participation as entry
    out, verdicts = _tiny_tuned_run(entry, tmp_path, capsys)
    assert verdicts == {"E8": PA, "E8 [tuned]": PA}
    assert "tuned picks: FedLADA" in out and "the ablation axis varies around them" in out


@pytest.mark.slow
def test_fig7_tiny_run_rebrackets_the_local_rate_per_activation(tmp_path, capsys):
    from reproduce import fedlada_fig7 as entry
    out, verdicts = _tiny_tuned_run(entry, tmp_path, capsys)
    assert verdicts == {
        "E13 [gelu]": PA, "E13 [smu]": PA, "E13 [tuned gelu]": PA, "E13 [tuned smu]": PA}
    assert "| gelu | FedLADA |" in out and "| smu | FedAvg |" in out and "*" in out
    assert "local rate re-bracketed" in out and "missing" not in out.lower()


def test_alpha_tiny_tuned_sweeps_are_not_reported_missing(tmp_path, capsys):
    """A tuned sweep's rows name their run (``sweep`` prefixed too): no false "missing"."""
    from reproduce import fedlada_alpha as entry
    out, verdicts = _tiny_tuned_run(entry, tmp_path, capsys)
    assert "missing" not in out.lower(), out
    claims = ("E6", "E9a", "E9b", "E9c", "E9", "Tab3")
    assert verdicts == {**{c: PA for c in claims}, **{f"{c} [tuned]": PA for c in claims}}


def test_tuning_setup_passes_reuse_stale_to_the_sweep(monkeypatch):
    """``Setup(reuse_stale=True)`` (an entry's ``--reuse-stale``) reaches ``run_sweep``; the
    default recomputes cells of other code."""
    from reproduce import protocols as pr
    seen = []

    class Result:
        missing, table = [], pd.DataFrame({"point": []})

    def fake(spec, **kw):
        seen.append(kw["reuse_stale"])
        return Result()
    monkeypatch.setattr(pr, "run_sweep", fake)
    monkeypatch.setattr(pr, "with_grid_columns", lambda table, grid: table)
    grid = pr.Method("m", "fedavg", {}, (pr.bracket("eta_l", 0.1),)).grid()
    for flag in (False, True):
        pr.Setup({}, None, reuse_stale=flag).run("x", grid, [0])
    assert seen == [False, True]


"""The Fed-LAMB entries (main Figs. 1-2 and 3-4, supplement Fig. 1) on tiny seeded instances,
and the pieces their checks rest on: Table 1's grids, the selection rule, the verdicts."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reproduce import common
from reproduce import verdicts as vd, fedlamb_cifar, fedlamb_fig12, fedlamb_supp1
from reproduce import fedlamb_common as fl
from conftest import write_cifar10


def test_table1_grids_verbatim():
    """SUPP Table 1 (spec 3.4): the grid sizes 9 / 10 / 9 (x 3 lambdas) / 12 x 10 / 10 / 9
    (Mime-LAMB's 9 rates x MAIN Sec. 4's 3 lambdas: Table 1 lists its rates only)."""
    sizes = {m: fl.grid_size(m) for m in fl.GRIDS}
    assert sizes == {"fed-sgd": 9, "fed-ams": 10, "fed-lamb": 27, "adp-fed": 120, "mime": 10,
                     "mime-lamb": 27}
    assert len(fl.GRIDS["mime-lamb"]["eta_l"]) == 9
    # a pilot point without lambda (Mime-LAMB's) runs at lambda 0, the registry's default
    assert fl.grid_points("mime-lamb", "best", {"eta_l": 0.03}) == [{"eta_l": 0.03, "lam": 0.0}]
    assert fl.GRIDS["adp-fed"]["eta_l"][-2:] == (0.3, 0.5)
    assert fl.GRIDS["fed-sgd"]["eta_l"][0] == 0.001
    assert len(fl.grid_points("adp-fed", "table1", {}, 1e-4)) == 120
    near = fl.grid_points("fed-lamb", "near", {"eta_l": 0.5, "lam": 0.0}, 1e-4)
    assert sorted({p["eta_l"] for p in near}) == [0.3, 0.5] and len(near) == 6
    assert fl.grid_points("fed-ams-printed", "best", {"eta_l": 0.003}, 1e-3) == [
        {"eta_l": 0.003, "eps": 1e-3}]
    with pytest.raises(ValueError, match="--grid"):
        fl.grid_points("fed-sgd", "all", {"eta_l": 0.1}, 1e-4)


def test_default_subgrid_is_the_pilot_best_and_a_table1_neighbour():
    """``--grid sub`` (the CPU default of Figs. 1-2): per pilot key and method, the pilot's
    best point and one rate adjacent to it on the grid the pilot ran (Table 1's, Adp-Fed's
    coarser :data:`PILOT_AXES`) (the printed pair: the best point only); every value on
    Table 1's grid; lambda one of MAIN Sec. 4's three."""
    for key, methods in fl.PILOT.items():
        for method, (best, _) in methods.items():
            axes = fl.pilot_subgrid(key, method)
            grids = {**fl.GRIDS[fl.base_method(method)], "eps": fl.PRINTED_EPS}
            assert all(set(v) <= set(grids[k]) for k, v in axes.items()), (key, method)
            assert all(best[k] in v for k, v in axes.items())
            assert ("eps" in best) == method.endswith("-printed")      # printed: a tuned eps
            points = fl.grid_points(method, "sub", best, (), axes)
            if method.endswith("-printed"):
                assert points == [best]                  # the pilot's rate and eps
                continue
            assert len(points) == 2, (key, method, points)
            moved = [k for k, v in axes.items() if len(v) == 2]
            assert len(moved) == 1
            piloted = fl.grid_axes(method, "pilot", {})[moved[0]]   # adjacent where piloted
            i, j = (piloted.index(v) for v in axes[moved[0]])
            assert abs(i - j) == 1, (key, method, axes)
    with pytest.raises(ValueError, match="no sub-grid"):
        fl.grid_points("fed-sgd", "sub", {"eta_l": 0.1}, 1e-4)
    pilot = fl.grid_points("adp-fed", "pilot", {}, 1e-4)
    assert len(pilot) == 16 and len(fl.grid_points("fed-lamb", "pilot", {}, 1e-4)) == 9


def test_printed_eps_is_a_grid_axis_and_axes_override():
    """``--printed-eps`` with several values sweeps eps for the printed pair only (crossed with
    the rates); ``--axes`` replaces a method's values (beyond Table 1 too); bad values are
    one-line errors."""
    eps = (1e-8, 1e-3)
    best = {"eta_l": 0.005, "eps": 1e-4}
    near = fl.grid_points("fed-ams-printed", "near", best, eps)
    assert sorted((p["eta_l"], p["eps"]) for p in near) == sorted(
        (r, e) for r in (0.003, 0.005, 0.01) for e in eps)
    assert fl.grid_points("fed-ams-printed", "best", best) == [best]     # the pilot's eps
    assert fl.grid_points("fed-ams", "near", {"eta_l": 0.005}, eps) == [
        {"eta_l": r} for r in (0.003, 0.005, 0.01)]                      # no eps: default reading
    ov = fl.parse_axes("fed-lamb-printed.lam=0 fed-lamb.eta_l=1 eta_l=0.7")
    assert ov == [("fed-lamb-printed", "lam", (0.0,)), ("fed-lamb", "eta_l", (1.0,)),
                  (None, "eta_l", (0.7,))]
    pts = fl.grid_points("fed-lamb-printed", "near", {"eta_l": 0.5, "lam": 0.0, "eps": 1e-4},
                         fl.PRINTED_EPS, overrides=ov[:1])
    assert len(pts) == 2 * 6 and {p["lam"] for p in pts} == {0.0}
    assert fl.grid_points("fed-lamb", "best", {"eta_l": 0.5, "lam": 0.0},
                          overrides=ov[1:2]) == [{"eta_l": 1.0, "lam": 0.0}]
    with pytest.raises(common.EntryError, match="--axes: fed-sgd has no 'lam'"):
        fl.grid_points("fed-sgd", "best", {"eta_l": 0.1}, overrides=fl.parse_axes("fed-sgd.lam=0"))
    assert fl.parse_axes("mime.eta_l=log:0.01:1:3") == [("mime", "eta_l", (0.01, 0.1, 1.0))]
    for bad in ("lam", "lam=", "x.lam=a,b", "eta_l=0.1,0.1", "eta_l=log:1:2"):
        with pytest.raises(common.EntryError, match="--axes: cannot read"):
            fl.parse_axes(bad)
    for bad in ("0", "-1e-4", "1e-4,1e-4", "small"):
        with pytest.raises(common.EntryError, match="--printed-eps must be"):
            fl.eps_values(bad)
    assert fl.eps_values("") == () and fl.eps_values("1e-8, 1e-2") == (1e-8, 1e-2)


def test_eps_sweep_tiny_run_selects_by_the_rule(tmp_path, capsys):
    """A tiny seeded run that sweeps the printed Fed-AMS's eps (1e-8 and 1e-2) with two rates:
    every (rate, eps) point runs (the rate climbing Table 1's grid off the bracket's top edge,
    as the paper's protocol on a pruned grid does), the check ranks them with their eps, and
    the selected point
    is the one the paper's rule picks from the results table itself (highest mean final
    accuracy over seeds among points with no diverged seed)."""
    argv = ["--tiny", "--quiet", "--models", "mlp-dropout", "--methods", "fed-ams-printed",
            "--printed-eps", "1e-8,1e-2", "--axes", "fed-ams-printed.eta_l=0.001,0.01",
            "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    assert common.main(fedlamb_fig12, argv) == 0
    out = _lines(capsys)
    cfg = common.parse_config(fedlamb_fig12, argv + ["--plot-only"])
    df = common.execute(fedlamb_fig12, cfg)
    acc = df[df.metric == "test_acc"]
    # the bracket's top rate is not Table 1's: the paper's protocol climbs Table 1's grid off it
    rates = sorted(set(acc.eta_l))
    above = [r for r in fl.GRIDS["fed-ams"]["eta_l"] if r > 0.01]
    assert rates[:2] == [0.001, 0.01] and len(rates) > 2 and rates[2:] == above[:len(rates) - 2]
    assert set(zip(acc.eta_l, acc.eps)) == {(r, e) for r in rates for e in (1e-8, 1e-2)}
    healthy = df.groupby("point").diverged_at.apply(lambda d: d.isna().all())
    eps_of = acc.groupby("point").eps.first()
    # eps 1e-8: the printed Fed-AMS diverges (MAIN Alg. 2) at the larger rate; eps 1e-2 never
    assert not healthy[eps_of[eps_of == 1e-8].index].all()
    assert healthy[eps_of[eps_of > 1e-8].index].all()
    final = acc[acc["round"] == cfg.rounds]
    means = final.groupby("point").value.mean()[healthy[healthy].index]
    chosen = fl.select_best(df, cfg.rounds).iloc[0]
    assert chosen["point"] == means.idxmax()
    assert chosen["mean"] == pytest.approx(means.max())
    eps = fl.point_values(df, chosen["setting"], "fed-ams-printed", chosen["point"])["eps"]
    ranked = [l for l in out if "ranked (eta_l/eps: final acc %)" in l]
    assert len(ranked) == 1 and ranked[0].count("/") >= 4          # four points, with eps
    assert f"eps={eps:g}" in next(l for l in out if "selected" in l)


def _df(rows):
    """A sweep-shaped results table: rows of (point, method, seed, accuracies, diverged_at)."""
    frames = []
    for point, method, seed, accs, div in rows:
        rounds = np.arange(len(accs) + 1)
        for metric, vals in (("test_acc", [0.1, *accs]), ("train_loss", [2.3] * len(rounds))):
            frames.append(pd.DataFrame({"run": f"{method} {point}", "seed": seed,
                                        "round": rounds, "metric": metric, "value": vals,
                                        "setting": "s", "method": method, "algorithm": method,
                                        "sweep": f"s_{method}", "point": point,
                                        "diverged_at": div}))
    return pd.concat(frames, ignore_index=True)


def test_selection_rule_and_verdicts():
    """The ``fed-lamb`` rule per sweep (:func:`reproduce.protocols.select`): best mean final
    accuracy among points with no diverged seed; the E1-style comparison decided per pair
    (final accuracy not below by half a point, accuracy across rounds above), paired by seed."""
    df = _df([("a1", "fed-lamb", 0, [0.5, 0.8], None), ("a1", "fed-lamb", 1, [0.5, 0.9], None),
              ("a1", "fed-lamb", 2, [0.5, 0.85], None),
              ("a2", "fed-lamb", 0, [0.6, 0.95], None), ("a2", "fed-lamb", 1, [0.6, 0.3], None),
              ("a2", "fed-lamb", 2, [0.6, 0.3], None),
              ("a3", "fed-lamb", 0, [0.9, 0.99], None), ("a3", "fed-lamb", 1, [0.9, 0.1], 2),
              ("a3", "fed-lamb", 2, [0.9, 0.99], None),
              ("b1", "fed-ams", 0, [0.4, 0.7], None), ("b1", "fed-ams", 1, [0.4, 0.75], None),
              ("b1", "fed-ams", 2, [0.4, 0.72], None)])
    chosen = fl.select_best(df, rounds=2)
    lamb = chosen[chosen.method == "fed-lamb"].iloc[0]
    assert lamb["point"] == "a1" and lamb["mean"] == pytest.approx(0.85)   # 0.85 > 0.617
    assert (lamb["lo"], lamb["hi"]) == (0.8, 0.9) and lamb["auc"] == pytest.approx(0.675)
    assert lamb["points"] == 3 and lamb["diverged_points"] == 1
    claim = vd.Claim("E1", "Fed-LAMB", "above", "every")
    v = fl.compare(chosen, df, "s", ["fed-lamb"], ["fed-ams"], claim)
    assert v.label == "shows" and [p.label for p in v.parts] == ["shows", "shows"]
    assert v.parts[0].estimate == pytest.approx(np.mean([0.1, 0.15, 0.13]))
    assert fl.compare(chosen, df, "s", ["fed-ams"], ["fed-lamb"], claim).label == "does not show"
    assert fl.compare(chosen, df, "s", ["fed-lamb"], ["mime"], claim).label \
        == "inconclusive: missing"
    short = fl.select_best(df, rounds=3)             # curves that stop early give no verdict
    assert short["point"].isna().all()


def _claims(out, entry):
    """``[(claim, label)]`` of a saved run, sorted (the panels' scopes left out)."""
    from verdict_util import saved
    return sorted((k.split(" [")[0], v) for k, v in saved(out, entry).items())


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_fig12_tiny(tmp_path, capsys):
    argv = ["--tiny", "--quiet", "--models", "mlp-dropout", "--out", str(tmp_path / "r"),
            "--figures", str(tmp_path / "f")]
    assert common.main(fedlamb_fig12, argv) == 0
    out = _lines(capsys)
    assert (tmp_path / "f" / "fedlamb_fig12.png").exists()
    assert not any(l.startswith("missing") for l in out)     # sweeps are found by their name
    assert any("embedded 4,000-image subset" in l and "NOT full MNIST" in l for l in out)
    PA = "premise absent"
    # E1 in both readings: 13 local steps an epoch on the subset (paper 38), 5 clients a
    # round, 2 of 100 rounds; T5 holds on a real run of both readings of Fed-LAMB
    # E3 (the ordering at every E) needs two or more E: one was run
    assert _claims(tmp_path / "r", "fedlamb_fig12") == [("E1", PA), ("E1", PA),
                                                         ("E3", "inconclusive: missing"),
                                                         ("T5", "shows"), ("T5", "shows")]
    assert any("local steps/epoch 13 (paper 38" in l for l in out)
    assert any(l.startswith("cost:") for l in out)
    assert sum(l.startswith("  selected ") for l in out) == 5     # 3 methods + printed pair
    assert any("ranked (eta_l/lam: final acc %)" in l for l in out)   # the sub-grid competed
    rec = json.loads((tmp_path / "r" / "fedlamb_fig12" / "ledger" / "verdicts.json").read_text())
    for v in (v for v in rec["verdicts"] if v["claim"] == "T5"):   # T5 on a real run
        ratio, err = (p["estimate"] for p in json.loads(v["parts"]))
        assert 0.5 < ratio <= 1 and err < 1e-8
    # resumable: the same command finds every run saved
    cfg = common.parse_config(fedlamb_fig12, argv + ["--plot-only"])
    df = common.execute(fedlamb_fig12, cfg)
    assert not fl.missing(fedlamb_fig12, cfg, df)
    assert set(df.method) == {"fed-sgd", "fed-ams", "fed-lamb", "fed-ams-printed",
                              "fed-lamb-printed"}


def test_supp1_tiny(tmp_path, capsys):
    argv = ["--tiny", "--quiet", "--no-printed", "--out", str(tmp_path / "r"),
            "--figures", str(tmp_path / "f")]
    assert common.main(fedlamb_supp1, argv) == 0
    out = _lines(capsys)
    assert (tmp_path / "f" / "fedlamb_supp1.png").exists()
    PA = "premise absent"
    # n = 20 of the paper's 200 clients a round, 2 of 100 rounds
    assert _claims(tmp_path / "r", "fedlamb_supp1") == [("E4", PA), ("E5", PA), ("T5", "shows")]
    assert any("clients/round 20 (paper 200" in l for l in out)
    assert any("local steps/round 4 (paper 5" in l for l in out)
    assert sum(l.startswith("  selected ") for l in out) == 6
    # the runs went through the protocols' mechanism and their table records the protocol
    df = pd.read_csv(tmp_path / "r" / "fedlamb_supp1" / "ledger" / "checked.csv.gz")
    assert set(df.protocol_kind) == {"pilot"} and set(df.selection_round) == {6}
    assert df[df.method == "fed-lamb"].run.iloc[0] == "fed-lamb eta_l=0.5 lam=0"


def test_supp1_mnist_subset_card_reads_premise_absent_on_local_steps(tmp_path):
    """The supplement's MNIST panel on the embedded subset: 20 images a client at batch 64 is
    ONE local step a round against the paper's 5 (60,000 / 200 at batch 64), so the card's
    "local steps/round" item fails and the claims read premise absent, never does not show;
    Fashion-MNIST at full size keeps the paper's 5 steps and passes the item."""
    cfg = common.parse_config(fedlamb_supp1, ["--rounds", "100", "--seeds", "3",
                                              "--out", str(tmp_path)])
    proto = fedlamb_supp1.protocol(cfg)
    cards = {s.key: fl.card(cfg, s, proto, steps_paper=5, clients_paper=200, per_round=True)
             for s in fedlamb_supp1.settings(cfg)}
    steps = {k: next(i for i in c.items if i.name == "local steps/round")
             for k, c in cards.items()}
    assert (steps["mnist"].measured, steps["mnist"].paper, steps["mnist"].ok) == (1, 5, False)
    assert (steps["fmnist"].measured, steps["fmnist"].ok) == (5, True)
    assert cards["fmnist"].ok and not cards["mnist"].ok
    titles = {s.key: s.title for s in fedlamb_supp1.labelled_settings(cfg)}
    assert "PREMISE ABSENT: 1 local step(s) a round (paper 5)" in titles["mnist"]
    assert "PREMISE" not in titles["fmnist"]
    a, b = pd.Series([0.9, 0.91, 0.92]), pd.Series([0.8, 0.81, 0.82])
    claim = fedlamb_supp1.CLAIMS["E4"]
    assert vd.above(claim, a, b, card=cards["mnist"]).label == "premise absent"
    assert vd.above(claim, a, b, card=cards["fmnist"]).label == "shows"
    assert vd.above(claim, b, a, card=cards["fmnist"]).label == "does not show"


def test_supp1_protocols_and_tuned_comparison(tmp_path, capsys):
    """Supplement Fig. 1's protocols: ``--grid sub``/``near`` rest on the paper's (pilot-picked
    candidates selected at the plotted horizon on every seed; the card checks the seeds),
    ``--grid best`` on the pilot's; ``--tuned`` adds the symmetric tuned comparison, whose
    E4/E5 verdicts and figure sit beside the paper protocol's (tiny run, exact labels)."""
    def proto(*extra):
        return fedlamb_supp1.protocol(common.parse_config(
            fedlamb_supp1, ["--rounds", "100", "--out", str(tmp_path), *extra]))
    near = proto("--grid", "near", "--seeds", "3")
    assert near.kind == "paper" and "neighbours either side in each rate" in near.text
    assert [(i.name, i.ok) for i in near.card_items()] == [("selection horizon", True),
                                                           ("selection seeds", True)]
    assert [(i.name, i.ok) for i in proto("--grid", "sub").card_items()][-1] == (
        "selection seeds", False)                  # the default's 2 seeds: below the paper's 3
    assert proto("--grid", "best").kind == "pilot"
    argv = ["--tiny", "--quiet", "--no-printed", "--methods",
            "fed-sgd,fed-ams,fed-lamb,mime,mime-lamb,adp-fed", "--grid", "best", "--tuned",
            "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    assert common.main(fedlamb_supp1, argv) == 0
    out = _lines(capsys)
    assert (tmp_path / "f" / "fedlamb_supp1_tuned.png").exists()
    PA = "premise absent"           # 20 clients of 200 images: 4 local steps, 2 rounds
    assert _claims(tmp_path / "r", "fedlamb_supp1") == [("E4", PA), ("E4", PA), ("E5", PA),
                                                        ("E5", PA), ("T5", "shows")]
    assert any(l.startswith("the symmetric tuned comparison") for l in out)
    # a one-point start ("best") is on both edges: every method's tuned grid was extended
    cfg = common.parse_config(fedlamb_supp1, argv + ["--plot-only"])
    _, tuned = fl.split_tuned(common.execute(fedlamb_supp1, cfg))
    assert tuned.groupby("method").eta_l.nunique().min() >= 3
    # both protocols keep each method's cells in one sweep (SETTING_METHOD): the values the
    # paper's protocol ran are not computed again for the tuned comparison
    methods = argv[argv.index("--methods") + 1].split(",")
    folders = [p.name for p in (tmp_path / "r" / "sweeps").iterdir() if p.is_dir()]
    assert folders and all(f.rsplit("_", 1)[1] in methods for f in folders), folders


def test_pruned_edge_picks_fail_the_paper_protocols_card():
    """The paper's protocol on a pilot-pruned grid conforms only where every pick is inside
    the grid run or on Table 1's own edge (:func:`fedlamb_common.pruned_edge_picks`): a pick
    on a pruned edge is named, one on Table 1's edge (Fed-LAMB 0.001) or interior is not, and
    an axis pinned to one value is not a selection."""
    df = pd.DataFrame([
        {"setting": "s", "method": "fed-sgd", "point": f"p{v}", "eta_l": v} for v in
        (0.03, 0.05, 0.1)] + [
        {"setting": "s", "method": "fed-lamb", "point": f"q{v}", "eta_l": v, "lam": 0.0}
        for v in (0.001, 0.003)] + [
        {"setting": "s", "method": "fed-ams", "point": f"r{v}", "eta_l": v}
        for v in (0.001, 0.003)])
    chosen = pd.DataFrame([{"setting": "s", "method": "fed-sgd", "point": "p0.05"},
                           {"setting": "s", "method": "fed-lamb", "point": "q0.001"},
                           {"setting": "s", "method": "fed-ams", "point": "r0.003"}])
    assert fl.pruned_edge_picks(chosen, df, "s") == ["Fed-AMS eta_l=0.003"]
    chosen.loc[2, "point"] = "r0.001"                     # Fed-AMS's Table 1 starts at 1e-4
    assert fl.pruned_edge_picks(chosen, df, "s") == ["Fed-AMS eta_l=0.001"]
    chosen.loc[0, "point"] = "p0.1"
    assert fl.pruned_edge_picks(chosen, df, "s") == ["Fed-SGD eta_l=0.1",
                                                     "Fed-AMS eta_l=0.001"]
    cfg = common.parse_config(fedlamb_fig12, ["--tiny", "--models", "mlp-dropout"])
    s = fedlamb_fig12.settings(cfg)[0]
    proto = fedlamb_fig12.protocol(cfg)
    item = lambda edges: next(i for i in fl.card(                          # noqa: E731
        cfg, s, proto, steps_paper=38, clients_paper=25, edges=edges).items
        if i.name.startswith("picks inside"))
    assert item([]).ok and not item(["Fed-SGD eta_l=0.1"]).ok
    assert "Fed-SGD eta_l=0.1" in item(["Fed-SGD eta_l=0.1"]).source
    assert not any(i.name.startswith("picks inside") for i in fl.card(
        cfg, s, proto, steps_paper=38, clients_paper=25).items)


def test_fedlamb_entries_share_one_initialisation(tmp_path):
    """``--init-seed`` (default 0): every Fed-LAMB run's problem description names the one
    initialisation its seeds and methods share (part of each cell's fingerprint); -1 leaves
    it out (each seed its own, the engine's default); below -1 is a one-line error."""
    for entry in (fedlamb_supp1, fedlamb_fig12):
        cfg = common.parse_config(entry, ["--tiny", "--out", str(tmp_path)])
        assert cfg.init_seed == 0
        s = entry.settings(cfg)[0]
        assert fl.problem_desc(cfg, s)["init_seed"] == 0
        cfg = common.parse_config(entry, ["--tiny", "--init-seed", "-1", "--out", str(tmp_path)])
        assert "init_seed" not in fl.problem_desc(cfg, s)
    cfg = common.parse_config(fedlamb_supp1, ["--tiny", "--init-seed", "3", "--out",
                                              str(tmp_path)])
    problem = fl.build_problem(fl.problem_desc(cfg, fedlamb_supp1.settings(cfg)[0]))
    assert problem.init_seed == 3
    import torch
    assert torch.equal(problem.init_theta(0), problem.init_theta(1))


def test_cifar_tiny_on_fixture_files(tmp_path, capsys):
    write_cifar10(tmp_path / "data")
    argv = ["--tiny", "--quiet", "--no-printed", "--data-dir", str(tmp_path / "data"),
            "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    assert common.main(fedlamb_cifar, argv) == 0
    _lines(capsys)
    assert (tmp_path / "f" / "fedlamb_cifar.png").exists()
    PA = "premise absent"
    assert _claims(tmp_path / "r", "fedlamb_cifar") == [("E2", PA), ("E2", PA)]  # CNN, ResNet-9


BAD_INPUTS = [  # (entry, arguments, the one-line error's text)
    (fedlamb_cifar, [], "GPU job"),
    (fedlamb_fig12, ["--tiny", "--grid", "all"], "--grid must be one of"),
    (fedlamb_fig12, ["--tiny", "--dataset", "cifar10"], "--dataset must be one of mnist, fmnist"),
    (fedlamb_fig12, ["--tiny", "--epochs", ""], "--models and --epochs must each name"),
    (fedlamb_fig12, ["--tiny", "--dataset", "fmnist", "--models", "mnist-cnn"],
     "--dataset fmnist: no recorded pilot for mnist-cnn"),
    (fedlamb_supp1, ["--tiny", "--datasets", "cifar"], "--datasets"),
    (fedlamb_fig12, ["--tiny", "--methods", "mime"], "--methods: mime not among"),
    (fedlamb_fig12, ["--tiny", "--printed-eps", "0,1e-4"],
     "--printed-eps must be distinct positive numbers"),
    (fedlamb_fig12, ["--tiny", "--axes", "mime.eta_l=0.1"], "--axes: mime not among the methods run"),
    (fedlamb_supp1, ["--tiny", "--axes", "fed-sgd.eta=0.1"], "--axes: fed-sgd has no 'eta'"),
    (fedlamb_supp1, ["--tiny", "--init-seed", "-2"], "--init-seed must be >= 0"),
    (fedlamb_fig12, ["--tiny", "--epochs", "0"], "--epochs: local epochs must be >= 1, got 0"),
    (fedlamb_fig12, ["--tiny", "--epochs", "1,x"],
     "--epochs: cannot read 'x'; give comma-separated integers"),
]


@pytest.mark.parametrize("entry, args, message", BAD_INPUTS)
def test_bad_input_is_one_line(entry, args, message, tmp_path, capsys):
    assert common.main(entry, args + ["--out", str(tmp_path)]) == 2
    errors = [l for l in capsys.readouterr().err.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], errors
    assert not list(tmp_path.rglob("*.csv")) and not list(tmp_path.rglob("*.ckpt"))  # no work


# Supplement Table 1's grid sizes as the spec extracts them (fed-lamb.md section 3.4): Fed-LAMB
# over 9 rates x 3 lambdas, Adp-Fed over 12 local x 10 global rates; Mime-LAMB over its 9
# rates x MAIN Sec. 4's 3 lambdas (Table 1 lists its rates only); the printed pair over its
# methods' grids.
TABLE1_POINTS = {"fed-sgd": 9, "fed-ams": 10, "fed-lamb": 27, "adp-fed": 120, "mime": 10,
                 "mime-lamb": 27, "fed-ams-printed": 10, "fed-lamb-printed": 27}


def _grid_points(run) -> int:
    return int(np.prod([len(a["values"]) for a in run.params["grid"]["axes"]]))


@pytest.mark.parametrize("entry, epochs, per_setting", [
    (fedlamb_fig12, {1, 3, 5}, ("fed-sgd", "fed-ams", "fed-lamb", "fed-ams-printed",
                                "fed-lamb-printed")),
    (fedlamb_supp1, {1}, ("fed-sgd", "fed-ams", "adp-fed", "mime", "fed-lamb", "mime-lamb",
                          "fed-ams-printed", "fed-lamb-printed"))])
def test_full_is_the_papers_scale(entry, epochs, per_setting, tmp_path):
    """``--full`` is the paper's experiment: 3 seeds, 100 rounds, every method over its whole
    supplement Table 1 grid, in every setting (Figs. 1-2: both models at E = 1, 3, 5)."""
    cfg = common.parse_config(entry, ["--full", "--out", str(tmp_path)])
    runs = entry.runs(cfg)
    assert (cfg.seeds, cfg.rounds) == (3, 100)
    assert {r.params["epochs"] for r in runs} == epochs
    settings = {r.params["setting"] for r in runs}
    assert len(runs) == len(settings) * len(per_setting)
    for r in runs:
        assert _grid_points(r) == TABLE1_POINTS[r.params["method"]], r.name


def test_full_can_be_run_one_cell_at_a_time(tmp_path):
    """A slice of ``--full`` (docs/fedlamb_pilot.md, "a measured slice of --full"): explicit
    ``--methods``, ``--models`` and ``--epochs`` narrow it to one method's whole Table 1 grid on
    one panel, still at 3 seeds and 100 rounds, every round evaluated."""
    cfg = common.parse_config(fedlamb_fig12, ["--full", "--methods", "fed-sgd", "--models",
                                              "mlp-dropout", "--epochs", "1",
                                              "--out", str(tmp_path)])
    runs = fedlamb_fig12.runs(cfg)
    assert (cfg.seeds, cfg.rounds, cfg.grid, cfg.eval_every) == (3, 100, "table1", 1)
    assert [r.params["setting"] for r in runs] == ["mlp-dropout_E1"]
    assert [r.params["method"] for r in runs] == ["fed-sgd"]
    assert _grid_points(runs[0]) == 9
    cfg = common.parse_config(fedlamb_supp1, ["--full", "--methods", "adp-fed", "--datasets",
                                              "fmnist", "--out", str(tmp_path)])
    runs = fedlamb_supp1.runs(cfg)
    assert [(r.params["setting"], _grid_points(r)) for r in runs] == [("fmnist", 120)]


def test_fig12_panels_take_their_own_epochs_pilot(tmp_path):
    """Main Figs. 1-2's default sub-grids: an E = 2 panel runs the E = 2 pilot's
    (``PILOT["MODEL_E2"]``), an E = 1 panel the E = 1 pilot's, and a number of epochs with no
    pilot of its own (E = 3) falls back to E = 1's (:func:`fedlamb_common.pilot_key`)."""
    cfg = common.parse_config(fedlamb_fig12, ["--epochs", "1,2,3", "--out", str(tmp_path)])
    runs = {r.name: r for r in fedlamb_fig12.runs(cfg)}
    differ = 0
    for model in fedlamb_fig12.MODEL_LABEL:
        assert (fl.pilot_key(model, 1), fl.pilot_key(model, 2), fl.pilot_key(model, 3)) == (
            model, f"{model}_E2", model)
        for method in fedlamb_fig12.methods(cfg):
            for e, key in ((1, model), (2, f"{model}_E2"), (3, model)):
                ran = {a["key"]: tuple(a["values"])
                       for a in runs[f"{model}_E{e}_{method}"].params["grid"]["axes"]}
                assert ran == fl.grid_axes(method, "sub", fl.pilot_best(key, method),
                                           fl.pilot_subgrid(key, method)), (model, e, method)
            differ += fl.pilot_subgrid(model, method) != fl.pilot_subgrid(f"{model}_E2", method)
    assert differ >= 2          # the E = 2 pilot moved some sub-grids: the two are told apart


def test_fig12_fmnist_rests_on_the_papers_protocol(tmp_path, capsys):
    """Main Figs. 1-2 on full Fashion-MNIST (``--dataset fmnist``): 1,200 images a client at
    50 clients, the paper's 38 local steps an epoch; ``--grid sub`` runs the Fashion-MNIST
    pilot's two candidates a method and rests on the paper's protocol (selected at the plotted
    horizon, on the seeds the card counts). This tiny run keeps 5 clients a round and 2
    rounds, so its card fails on those two items and E1 reads premise absent."""
    argv = ["--tiny", "--quiet", "--dataset", "fmnist", "--models", "mlp-dropout", "--n", "50",
            "--m", "5", "--no-printed", "--methods", "fed-sgd,fed-lamb", "--seeds", "3",
            "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    cfg = common.parse_config(fedlamb_fig12, argv)
    key = "fmnist-mlp-dropout"
    for r in fedlamb_fig12.runs(cfg):
        ran = {a["key"]: tuple(a["values"]) for a in r.params["grid"]["axes"]}
        assert ran == fl.grid_axes(r.params["method"], "sub",
                                   fl.pilot_best(key, r.params["method"]),
                                   fl.pilot_subgrid(key, r.params["method"]))
        assert len(ran["eta_l"]) == 2 and r.params["dataset"] == "fmnist"
    assert common.main(fedlamb_fig12, argv) == 0
    out = _lines(capsys)
    assert any(l.startswith("data: full Fashion-MNIST stands in") for l in out)
    assert any("local steps/epoch 38 (paper 38; within x2) ok" in l for l in out)
    assert any("clients/round 5 (paper 25; within x2) FAILS" in l for l in out)
    assert any("selection seeds 3 (paper 3; >= 3) ok" in l for l in out)
    assert any("protocol: paper: supplement Table 1 grids and lambda: a one-seed pilot" in l
               for l in out)
    assert _claims(tmp_path / "r", "fedlamb_fig12") == [("E1", "premise absent"),
                                                         ("E3", "inconclusive: missing"),
                                                         ("T5", "shows")]
    proto = fedlamb_fig12.protocol(common.parse_config(fedlamb_fig12, argv + ["--seeds", "2"]))
    assert [(i.name, i.ok) for i in proto.card_items()] == [("selection horizon", True),
                                                            ("selection seeds", False)]
    near = fedlamb_fig12.protocol(common.parse_config(fedlamb_fig12, argv + ["--grid", "near"]))
    assert near.kind == "paper" and "neighbours either side" in near.text
    mnist = fedlamb_fig12.protocol(common.parse_config(fedlamb_fig12, ["--grid", "near"]))
    assert mnist.kind == "pilot"               # the subset's grids rest on its own pilot


def test_fig12_fmnist_at_three_and_five_epochs_use_their_own_pilots():
    """E = 3 and E = 5 on Fashion-MNIST have their own recorded pilots (docs/fedlamb_pilot.md):
    each panel's candidates are its pilot's, not E = 1's (Fed-AMS's runner-up moves 0.0005 ->
    0.0001, Fed-LAMB's 0.005 -> 0.001; at E = 5 Fed-LAMB's best lambda is 0.01); an E with
    no pilot of its own (E = 2) falls back to E = 1's."""
    cfg = common.parse_config(fedlamb_fig12, ["--dataset", "fmnist", "--models", "mlp-dropout",
                                              "--epochs", "1,2,3,5", "--grid", "sub"])
    keys = {s.epochs: fedlamb_fig12.pilot_of(cfg, s) for s in fedlamb_fig12.settings(cfg)}
    assert keys == {1: "fmnist-mlp-dropout", 2: "fmnist-mlp-dropout",
                    3: "fmnist-mlp-dropout_E3", 5: "fmnist-mlp-dropout_E5"}
    assert fl.pilot_subgrid(keys[3], "fed-ams")["eta_l"] == (0.0001, 0.0003)
    assert fl.pilot_subgrid(keys[1], "fed-ams")["eta_l"] == (0.0003, 0.0005)
    assert fl.pilot_subgrid(keys[3], "fed-lamb")["eta_l"] == (0.001, 0.003)
    assert fl.pilot_subgrid(keys[5], "fed-lamb")["eta_l"] == (0.001, 0.003)
    assert fl.PILOT[keys[5]]["fed-lamb"][0] == {"eta_l": 0.003, "lam": 0.01}


def test_axes_can_name_one_panel():
    """``--axes SETTING:...`` replaces values in one panel only, a later part over an earlier
    one (the ledger's lambda pinned at 0 except at E = 5, whose pilot's best lambda is 0.01);
    both protocols' runs take it; a panel or method that does not run is a one-line error."""
    text = "fed-lamb.lam=0 mlp-dropout_E5:fed-lamb.lam=0,0.01 fed-sgd.eta_l=0.03,0.3"
    assert fl.axes_parts(text)[1] == ("mlp-dropout_E5", "fed-lamb", "lam", (0.0, 0.01))
    assert fl.parse_axes(text) == [("fed-lamb", "lam", (0.0,)), ("fed-sgd", "eta_l", (0.03, 0.3))]
    assert fl.parse_axes(text, "mlp-dropout_E5")[1] == ("fed-lamb", "lam", (0.0, 0.01))
    argv = ["--dataset", "fmnist", "--models", "mlp-dropout", "--epochs", "1,5", "--grid",
            "near", "--no-printed", "--tuned", "--axes", text]
    runs = fedlamb_fig12.runs(common.parse_config(fedlamb_fig12, argv))
    lam = {}
    for r in runs:
        if r.params["method"] != "fed-lamb":
            continue
        if "grid" in r.params:
            axes = {a["key"]: tuple(a["values"]) for a in r.params["grid"]["axes"]}
        else:
            (_, _, _, brackets), = r.params["methods"]
            axes = {k: tuple(v) for k, v, _ in brackets}
        lam[r.name] = axes["lam"]
    assert lam == {"mlp-dropout_E1_fed-lamb": (0.0,), "mlp-dropout_E5_fed-lamb": (0.0, 0.01),
                   "mlp-dropout_E1_fed-lamb-tuned": (0.0,),
                   "mlp-dropout_E5_fed-lamb-tuned": (0.0, 0.01)}
    for bad, message in (("mlp-dropout_E3:lam=0", "mlp-dropout_E3 not among the panels run"),
                         ("a:b:lam=0", "cannot read"),
                         ("mlp-dropout_E5:fed-ams-printed.lam=0", "not among the methods")):
        with pytest.raises(common.EntryError, match=message):
            fedlamb_fig12.runs(common.parse_config(fedlamb_fig12, argv[:-1] + [bad]))


def test_fig12_tuned_comparison_beside_the_papers_protocol(tmp_path, capsys):
    """``--tuned``: the symmetric tuned comparison runs beside the paper protocol's runs. Each
    method starts from the values the paper protocol runs (its rates extendable by
    :data:`fedlamb_common.RATE_STEP`, lambda held), is extended while its pick sits on an
    edge, and E1/E3 are decided on each protocol's own selections (the tuned card checks the
    picks are interior); the tuned figure is drawn beside the paper protocol's."""
    argv = ["--tiny", "--quiet", "--models", "mlp-dropout", "--no-printed", "--methods",
            "fed-sgd,fed-lamb", "--tuned", "--out", str(tmp_path / "r"),
            "--figures", str(tmp_path / "f")]
    cfg = common.parse_config(fedlamb_fig12, argv)
    runs = fedlamb_fig12.runs(cfg)
    tuned = [r for r in runs if r.name.endswith(fl.TUNED_SUFFIX)]
    assert [r.name for r in tuned] == ["mlp-dropout_E1_fed-sgd-tuned",
                                       "mlp-dropout_E1_fed-lamb-tuned"]
    for r in tuned:
        (_, _, _, brackets), = r.params["methods"]
        paper = {a["key"]: tuple(a["values"]) for a in
                 next(p for p in runs if p.name == r.name[:-len(fl.TUNED_SUFFIX)])
                 .params["grid"]["axes"]}
        assert {k: tuple(v) for k, v, _ in brackets} == paper
        assert {k: step for k, _, step in brackets} == {
            k: (fl.RATE_STEP if k == "eta_l" else None) for k in paper}
    assert common.main(fedlamb_fig12, argv) == 0
    out = _lines(capsys)
    assert (tmp_path / "f" / "fedlamb_fig12.png").exists()
    assert (tmp_path / "f" / "fedlamb_fig12_tuned.png").exists()
    assert not any(l.startswith("missing") for l in out)
    PA = "premise absent"
    assert _claims(tmp_path / "r", "fedlamb_fig12") == [
        ("E1", PA), ("E1", PA), ("E3", "inconclusive: missing"),
        ("E3", "inconclusive: missing"), ("T5", "shows")]
    assert any("picks interior to their grids True (paper True; equal) ok" in l for l in out)
    cfg = common.parse_config(fedlamb_fig12, argv + ["--plot-only"])
    df = common.execute(fedlamb_fig12, cfg)
    paper, tuned_rows = fl.split_tuned(df)
    assert set(tuned_rows.sweep) == {r.name for r in tuned}
    assert len(paper) and not paper["sweep"].str.endswith(fl.TUNED_SUFFIX).any()
    chosen = fl.select_best(tuned_rows, cfg.rounds)
    for _, row in chosen.iterrows():         # every tuned pick strictly inside its final grid
        rates = sorted(tuned_rows[tuned_rows.sweep == f"{row.setting}_{row.method}"
                                  f"{fl.TUNED_SUFFIX}"].eta_l.unique())
        picked = float(row.label.split("eta_l=")[1].split()[0])
        assert rates[0] < picked < rates[-1], (row.method, rates, picked)
        start = fl.grid_axes(row.method, "sub", {}, sub=fl.pilot_subgrid(
            "mlp-dropout", row.method))["eta_l"]
        assert set(start) <= set(rates)
        for r in set(rates) - set(start):    # the added rates continue an edge by 2x steps
            k = np.log2(r / min(start)) if r < min(start) else np.log2(r / max(start))
            assert abs(k - round(k)) < 1e-9


def test_tuned_protocol_is_interior_only_when_every_method_is():
    """One setting's tuned protocol (:func:`fedlamb_common.tuned_protocol`): the tunings'
    rule and horizon, the fewest selection seeds, picks interior only when all are."""
    from reproduce import protocols

    def rows(sweep, interior, seeds):
        p = protocols.Protocol("tuned", "t", rule="fed-lamb", seeds=seeds, horizon=100,
                               plotted=100, required_seeds=3, interior=interior)
        return pd.DataFrame([{"sweep": sweep, **protocols.protocol_columns(p)}])
    both = pd.concat([rows("a-tuned", True, 3), rows("b-tuned", True, 4)])
    p = fl.tuned_protocol(both, None)
    assert (p.kind, p.interior, p.seeds, p.horizon) == ("tuned", True, 3, 100)
    one_edge = pd.concat([rows("a-tuned", True, 3), rows("b-tuned", False, 3)])
    p = fl.tuned_protocol(one_edge, None)
    assert p.interior is False
    assert [(i.name, i.ok) for i in p.card_items()][-1] == ("picks interior to their grids",
                                                            False)
    paper, tuned = fl.split_tuned(pd.concat([one_edge, pd.DataFrame([{"sweep": "c"}])]))
    assert list(paper.sweep) == ["c"] and list(tuned.sweep) == ["a-tuned", "b-tuned"]
    with pytest.raises(ValueError, match="no tuned rows"):
        fl.tuned_protocol(paper, None)


def test_cost_fit_is_a_line_in_local_epochs():
    """--full's cost line: a round's measured seconds at two or more E are fitted as a + b E
    (a fixed part per round), recovered exactly from points on a line; with one E it is
    proportional to E; a negative fixed part or slope is clipped at 0."""
    fit = fl.round_seconds({1: 0.09, 2: 0.14, 4: 0.24})
    assert [fit(e) for e in (1, 3, 5)] == pytest.approx([0.09, 0.19, 0.29])
    assert fl.round_seconds({2: 0.3})(5) == pytest.approx(0.75)
    assert fl.round_seconds({1: 0.1, 2: 0.3})(1) == pytest.approx(0.2 * 1 + 0.0)
    assert fl.round_seconds({1: 0.3, 2: 0.2})(4) == pytest.approx(0.25)


def test_the_declared_unrun_panels_are_scoped_as_the_entry_files_them():
    """Each of ``fedlamb_fig12.NOT_RUN``'s scopes is the title of a panel the ledger command
    with both models at E = 1, 3, 5 would check, so a filed run of it replaces the report's
    "not run" row instead of standing beside it."""
    cfg = common.parse_config(fedlamb_fig12, ["--dataset", "fmnist", "--models",
                                              "mlp-dropout,mnist-cnn", "--epochs", "1,3,5"])
    titles = {s.title for s in fedlamb_fig12.settings(cfg)}
    scopes = {u.scope for u in fedlamb_fig12.NOT_RUN}
    assert scopes and scopes <= titles
    assert {u.claim for u in fedlamb_fig12.NOT_RUN} <= set(fedlamb_fig12.CLAIMS)

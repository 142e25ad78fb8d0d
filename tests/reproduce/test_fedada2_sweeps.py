"""FedAda2 Figures 3-7 (issue 21, second part): epoch-wise preconditioner freezing (Fig. 7),
and the entries fedada2_epochs, fedada2_fig5, fedada2_sweeps, fedada2_fig6, fedada2_fig7,
fedada2_full at --tiny scale."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.fedada2 import FedAda2, FedAda2Adam, JointNoPrecond
from sims.core.engine import run
from sims.problems.models import MLP
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem
from conftest import random_dataset
from test_equivalence import check

SIZES = (5, 9, 14, 20, 14)                   # batch 4 -> 2, 3, 4, 5, 4 steps per epoch


@pytest.fixture(scope="module")
def mlp_epochs():
    perm = np.random.default_rng(7).permutation(sum(SIZES))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(SIZES)[:-1])]
    return NeuralProblem(random_dataset(sum(SIZES), 28, 0), parts, MLP(784, hidden=4),
                         batch_size=4, local_epochs=5, dtype=torch.float64)


FREEZE = {
    "sm3-adam-freeze1": lambda: FedAda2Adam(eta=0.01, freeze_epochs=1),
    "sm3-adam-freeze3": lambda: FedAda2Adam(eta=0.01, freeze_epochs=3, precond="sm3-i"),
    # eps 0.1: with eps 1e-3 a stale AdaGrad denominator (delay and freezing) amplifies the
    # two paths' rounding differences to ~2e-10 (measured; 2e-12 with delay alone)
    "adagrad-freeze1-delay2": lambda: JointNoPrecond(eta=0.05, freeze_epochs=1, delay=2,
                                                     eps=0.1),
    "sm3-adagrad-freeze3": lambda: FedAda2(eta=0.05, freeze_epochs=3),
    "dja-adam-freeze1": lambda: FedAda2Adam(eta=0.01, freeze_epochs=1, init="server"),
}


@pytest.mark.parametrize("name", sorted(FREEZE))
def test_epoch_freezing_engine_equals_reference(mlp_epochs, name):
    """Clients of unequal epoch lengths (2-5 steps), 5 epochs: the batched path equals the
    sequential reference (float64, 1e-10)."""
    check(mlp_epochs, FREEZE[name](), Participation("fixed", m=3))


def test_epoch_freezing_changes_the_run_and_zero_freeze_is_the_plain_rule(mlp_epochs):
    part = Participation("fixed", m=3)
    plain = run(mlp_epochs, FedAda2Adam(eta=0.01), part, 2, [0], eval_test=False)
    zero = run(mlp_epochs, FedAda2Adam(eta=0.01, freeze_epochs=0), part, 2, [0],
               eval_test=False)
    frozen = run(mlp_epochs, FedAda2Adam(eta=0.01, freeze_epochs=1), part, 2, [0],
                 eval_test=False)
    assert torch.equal(plain.server["theta"], zero.server["theta"])
    assert (frozen.server["theta"] - plain.server["theta"]).abs().max() > 1e-6


def test_epoch_freezing_update_schedule():
    """Steps 1..k of a client with 3 steps per epoch, 1 frozen epoch: updates in epochs 0, 2,
    4 only; the count is the number of updates so far (ADMU's debiasing exponent)."""
    from sims.rules.base import StepInfo
    alg = FedAda2Adam(freeze_epochs=1)
    k = torch.arange(1, 16, dtype=torch.float64)
    info = StepInfo(k - 1, extra={"epoch_steps": torch.full((15,), 3)})
    upd, count = alg.sm3.updates(k, info)
    assert upd.tolist() == [True] * 3 + [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3
    assert count.tolist() == [1, 2, 3, 3, 3, 3, 4, 5, 6, 6, 6, 6, 7, 8, 9]


def test_epoch_freezing_needs_epochs():
    from sims.problems.quadratic import heterogeneous_quadratic
    quad = heterogeneous_quadratic(4, 6, local_steps=3, seed=1)
    with pytest.raises(ValueError, match="no local epochs"):
        run(quad, FedAda2Adam(freeze_epochs=1), Participation("fixed", m=2), 1, [0])
    with pytest.raises(ValueError, match="freeze_epochs"):
        FedAda2Adam(freeze_epochs=-1)


# ------------------------------------------------------------------------------ entries
import pandas as pd  # noqa: E402

from reproduce import common
from reproduce import verdicts as vd  # noqa: E402
from reproduce import fedada2_epochs, fedada2_fig5, fedada2_fig6, fedada2_fig7  # noqa: E402
from reproduce import fedada2_full, fedada2_ranked as rk, fedada2_sweeps  # noqa: E402


def _cfg(entry, tmp_path, *extra):
    return common.parse_config(entry, ["--tiny", "--out", str(tmp_path), *extra])


def test_panel_stats_best_median_worst_quarter_and_divergence():
    """Four runs of one panel and seed, final accuracies 0.2, 0.4, 0.6 and one diverged: the
    diverged run counts 0, so best 0.6, median 0.3, worst quarter 0.0, one diverged."""
    rows = []
    for point, acc, div in (("a", 0.2, None), ("b", 0.4, None), ("c", 0.6, None),
                            ("d", 0.9, 3.0)):
        for metric, val in (("test_acc", acc), ("test_loss", 1 - acc)):
            for rnd in (0, 5):
                rows.append({"panel": "p", "point": point, "seed": 0, "round": rnd,
                             "metric": metric, "value": val if rnd else 0.1,
                             "diverged_at": div})
    stats = rk.panel_stats(pd.DataFrame(rows))
    got = stats.loc[("p", 0)]
    assert got["best"] == pytest.approx(0.6) and got["median"] == pytest.approx(0.3)
    assert got["worst_q"] == 0.0 and got["diverged"] == 1 and got["runs"] == 4


def test_all_diverged_sweep_gives_no_verdict():
    """Every run of every panel diverged (e.g. DP noise multiplier 1e40): the claim-18
    comparisons are ``inconclusive: diverged``, never a decision from the zeros the diverged
    runs count as."""
    rows = []
    for panel in ("so_fedavg", "so_fedadagrad", "so_dja", "so_joint-no-precond",
                  "so_fedada2"):
        for point in ("a", "b"):
            for seed in (0, 1):
                for metric in ("test_acc", "test_loss"):
                    for rnd in (0, 2):
                        rows.append({"panel": panel, "point": point, "seed": seed,
                                     "round": rnd, "metric": metric,
                                     "value": float("nan") if rnd else 0.1,
                                     "diverged_at": 1.0})
    stats = rk.panel_stats(pd.DataFrame(rows))
    seeds = lambda m, col="worst_q": rk.panel_seeds(stats, f"so_{m}", col)  # noqa: E731
    assert seeds("dja").isna().all()
    c = fedada2_sweeps.CLAIMS
    got = [vd.ordering(c["18a"], [(m, seeds(m)) for m in ("dja", "fedadagrad", "fedavg")],
                       unit="pp", scale=100),
           vd.above(c["18b"], seeds("dja"), seeds("joint-no-precond"), unit="pp", scale=100),
           vd.not_below(c["18c"], seeds("joint-no-precond", "best"), seeds("dja", "best"),
                        rk.TOLERANCE, unit="pp", scale=100)]
    assert [v.label for v in got] == [vd.DIVERGED] * 3


def test_no_degradation_is_paired_by_seed():
    """Claim 19's "does not significantly degrade": the paired-by-seed difference between two
    panels, shown when its interval lies above minus half a point (the FedAda2 entries' one
    margin), not shown when below."""
    idx = pd.MultiIndex.from_tuples([(p, s) for p in ("a", "b", "c") for s in range(3)],
                                    names=["panel", "seed"])
    best = [0.5, 0.7, 0.9, 0.4, 0.6, 0.8, 0.3, 0.52, 0.69]   # a - b = 0.1; c - b ~ -0.1
    stats = pd.DataFrame({"best": best}, index=idx)
    assert list(rk.panel_seeds(stats, "a", "best")) == [0.5, 0.7, 0.9]
    panel = lambda k: rk.Panel(k, k, "k", "fedada2", {}, ())  # noqa: E731
    c = vd.Claim("19a", "FedAda2", "no degradation", "every")
    v = rk.not_degraded(c, stats, panel("a"), panel("b"))
    assert v.label == "shows" and v.estimate == pytest.approx(0.1)
    assert v.hi - v.lo == pytest.approx(0, abs=1e-9)
    assert rk.not_degraded(c, stats, panel("c"), panel("b")).label == "does not show"


def test_fig6_panels_are_the_paper_rows_and_pairs(tmp_path):
    cfg = _cfg(fedada2_fig6, tmp_path)
    ps = {p.key: p for p in fedada2_fig6.panels(cfg)}
    assert len(ps) == 12
    dja = ps["gld23k_dja_adam-adagrad"]           # mismatched: server Adam v -> client AdaGrad
    alg = rk.Grid({dja.algorithm: dict(dja.fixed)}).check()[0]
    from sims.algorithms.registry import make_algorithm
    built = make_algorithm(alg.algorithm, **alg.settings)
    assert (built.server, built.client, built.init, built.precond) == ("adam", "adagrad",
                                                                       "server", "full")
    built = make_algorithm(ps["gld23k_fedada2_adagrad-adam"].algorithm,
                           **ps["gld23k_fedada2_adagrad-adam"].fixed)
    assert (built.server, built.client, built.init, built.precond) == ("adagrad", "adam",
                                                                       "zero", "sm3-ii")


def test_fig7_top_row_is_fig6s_fedada2_row_and_delayed_rows_freeze(tmp_path):
    cfg6, cfg7 = _cfg(fedada2_fig6, tmp_path), _cfg(fedada2_fig7, tmp_path)
    six = {p.key: p for p in fedada2_fig6.panels(cfg6)}
    seven = fedada2_fig7.panels(cfg7)
    for p in seven[:4]:                            # same sweep: the cells are shared
        assert six[p.key] == p
    assert [p.fixed.get("freeze_epochs", 0) for p in seven] == [0] * 4 + [1] * 4 + [3] * 4
    cfg7.delayed_grid = "paper"
    paper = fedada2_fig7.panels(cfg7)
    assert dict(paper[-1].axes)["eps"] == (1e-3, 1e-1, 1.0)
    assert paper[0].axes == seven[0].axes


def test_fig6_fig7_cpu_default_is_a_stated_subset_of_the_committed_sweeps(tmp_path):
    """The CPU default (about 10 CPU-minutes each) sweeps 9 points a panel, 2 seeds, 60 rounds:
    the slice at tau_l = 1e-1, tau_s = 1e-5, which leaves out the paper's extreme cells (the
    card item fails). Its cells are the committed sweeps' (keyed by the point): fig7's former
    36-point grid (``fedada2_fig7.SWEEP36``) contains it, fig6's ``COMMITTED_FLAGS`` (the
    ledger's command, 72 points a panel) its 3 points at eta_l = 1e-1."""
    for entry, flags, size, shared in (
            (fedada2_fig6, fedada2_fig6.COMMITTED_FLAGS, 72, 3),
            (fedada2_fig7, fedada2_fig6.as_flags(fedada2_fig7.SWEEP36), 36, 9)):
        default = common.parse_config(entry, ["--out", str(tmp_path)])
        committed = common.parse_config(entry, ["--out", str(tmp_path), *flags.split()])
        assert (default.seeds, default.rounds) == (2, 60) and committed.rounds == 60
        assert committed.seeds == (3 if entry is fedada2_fig6 else 2)     # fig6's ledger run
        small, big = entry.panels(default), entry.panels(committed)
        assert [p.key for p in small] == [p.key for p in big] and len(small) == 12
        for p, q in zip(small, big):
            assert dict(p.axes) == {"eta_l": (1e-3, 1e-2, 1e-1), "eta": (1e-3, 1e-2, 1e-1),
                                    "eps": (1e-1,), "tau": (1e-5,)}
            assert (p.size(), q.size()) == (9, size) and p.fixed == q.fixed
            mine = {pt.key for pt in p.grid().points()}
            assert len(mine & {pt.key for pt in q.grid().points()}) == shared   # same keys
        item = rk.extremes_item(entry.panels(default), entry.PAPER_EXTREMES)
        assert not item.ok and item.measured.startswith("no: ")


def test_fig6_committed_profile_reaches_the_papers_extreme_cells(tmp_path):
    """fedada2_fig6's ledger run: every axis's smallest and largest value of sweep (22) with the
    former sweep's best server rates and taus, 72 points a panel; the card's extremes item holds on
    every panel, and fig7's FedAda2 row shares its 16 points at tau_l in {0.1, 1}, tau_s =
    1e-5."""
    six = common.parse_config(
        fedada2_fig6, ["--out", str(tmp_path), *fedada2_fig6.COMMITTED_FLAGS.split()])
    panels = fedada2_fig6.panels(six)
    assert len(panels) == 12 and all(p.size() == 72 for p in panels)
    assert dict(panels[0].axes) == {"eta_l": (1e-4, 1e-1),
                                    "eta": (1e-4, 1e-3, 1e-2, 1e-1),
                                    "eps": (1e-7, 1e-1, 1.0), "tau": (1e-7, 1e-5, 1.0)}
    item = rk.extremes_item(panels, fedada2_fig6.PAPER_EXTREMES)
    assert item.ok and item.measured == "yes"
    seven = common.parse_config(
        fedada2_fig7, ["--out", str(tmp_path), *fedada2_fig7.COMMITTED_FLAGS.split()])
    fedada2_row, top_row = panels[-4], fedada2_fig7.panels(seven)[0]
    assert fedada2_row.key == top_row.key
    shared = ({pt.key for pt in top_row.grid().points()}
              & {pt.key for pt in fedada2_row.grid().points()})
    assert len(shared) == 16


def test_fig7_committed_profile_reaches_the_papers_extreme_cells(tmp_path):
    """fedada2_fig7's ledger run: the former 36-point grid plus App. I.2's extreme cells (eta
    1e-4, tau_l 1), 96 points a panel in every row; it contains the 36-point grid's cells, and
    the card's extremes item holds on the delayed rows (the part fig7's check reads)."""
    committed = common.parse_config(
        fedada2_fig7, ["--out", str(tmp_path), *fedada2_fig7.COMMITTED_FLAGS.split()])
    sweep36 = fedada2_fig6.as_flags(fedada2_fig7.SWEEP36).split()
    smaller = common.parse_config(fedada2_fig7, ["--out", str(tmp_path), *sweep36])
    big, small = fedada2_fig7.panels(committed), fedada2_fig7.panels(smaller)
    assert len(big) == 12 and all(p.size() == 96 for p in big)
    for p, q in zip(small, big):
        assert {pt.key for pt in p.grid().points()} < {pt.key for pt in q.grid().points()}
    item = rk.extremes_item(big[len(rk.PAIRS):], fedada2_fig7.PAPER_EXTREMES)
    assert item.ok and item.measured == "yes"


def test_fig3_bottom_runs_are_private_with_the_points_clip(tmp_path):
    cfg = _cfg(fedada2_sweeps, tmp_path, "--clip", "0.1,1", "--noise-multiplier", "0.5")
    runs = fedada2_sweeps.runs(cfg)
    ps = fedada2_sweeps.panels(cfg)
    assert len(runs) == sum(p.size() for p in ps)
    run = next(r for r in runs if r.params["panel"] == "so_fedada2" and r.params["clip"] == 0.1)
    _, alg, part = run.build()
    # the authors' SM3-I; 10 of the text stand-in's 100 clients a round (q = 0.1)
    assert alg.clip == 0.1 and alg.noise_multiplier == 0.5 and alg.inner.precond == "sm3-i"
    assert part.m == 10 and alg.inner.eta_l == run.params["eta_l"]


def test_epochs_entry_uses_the_table_of_its_local_epochs(tmp_path):
    cfg = _cfg(fedada2_epochs, tmp_path)
    runs = {r.name: r for r in fedada2_epochs.runs(cfg)}
    prob1, alg1, _ = runs["gld23k_E1_fedada2"].build()
    prob5, alg5, _ = runs["gld23k_E5_fedada2"].build()
    assert (prob1.local_epochs, prob5.local_epochs) == (1, 5)
    assert (alg1.eta_l, alg1.eps) == (1e-1, 1e-1)        # Table 6, 1 local epoch
    assert (alg5.eta_l, alg5.eps) == (1e-2, 1e-1)        # Tables 4-5
    assert prob5.steps_for(0) == 5 * prob1.steps_for(0)
    with pytest.raises(common.EntryError, match="1, 5 and 20"):
        _cfg(fedada2_epochs, tmp_path, "--epochs", "3")


def test_fig5_train_accuracy_is_the_accuracy_on_the_evaluated_training_samples(tmp_path):
    cfg = _cfg(fedada2_fig5, tmp_path)
    prob, _, _ = fedada2_fig5.runs(cfg)[0].build()
    theta = torch.stack([prob.init_theta(0), prob.init_theta(1)])
    out = prob.evaluate(theta, True)
    idx = torch.as_tensor(prob.eval_index)
    x, y = prob.x[idx], prob.y[idx]
    for r in range(2):
        w = theta[r, :-prob.dataset.num_classes].view(prob.dataset.num_classes, -1)
        b = theta[r, -prob.dataset.num_classes:]
        want = ((x.flatten(1) @ w.T + b).argmax(-1) == y).float().mean()
        assert float(out["train_acc"][r]) == pytest.approx(float(want), abs=1e-6)


def test_full_finetuning_refuses_the_cpu_default_and_trains_the_whole_net(tmp_path):
    with pytest.raises(common.EntryError, match="--cpu-ok"):
        common.parse_config(fedada2_full, ["--out", str(tmp_path)])
    cfg = _cfg(fedada2_full, tmp_path)
    run = fedada2_full.runs(cfg)[-1]
    prob, alg, part = run.build()
    head = prob.dataset.num_classes * (fedada2_full.TINY_VIT["embed_dim"] + 1)
    assert prob.d > 10 * head                     # backbone parameters are trained too
    out = run_engine_one_round(prob, alg, part)
    moved = (out - prob.init_theta(0)).abs()
    layout_head = moved[-head:]
    assert moved[:-head].max() > 0 and layout_head.max() > 0


def run_engine_one_round(prob, alg, part):
    out = run(prob, alg, part, 1, [0], eval_test=False)
    return out.server["theta"][0]


@pytest.mark.parametrize("entry,extra", [
    (fedada2_fig7, ["--rounds", "2", "--seeds", "2", "--eta-l", "0.1"]),
    (fedada2_epochs, ["--epochs", "1", "--rounds", "2"]),
])
def test_entry_runs_end_to_end_and_names_its_stand_in(tmp_path, capsys, entry, extra):
    rc = common.main(entry, ["--tiny", "--out", str(tmp_path), "--quiet", *extra])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "STAND-IN" in text
    assert list((tmp_path / "figures").glob("*.png"))
    from verdict_util import saved
    PA = "premise absent"
    expected = {fedada2_fig7: {"19c": PA},
                fedada2_epochs: {"16a [1 epoch]": PA}}[entry]   # the stand-ins' cards fail
    assert saved(tmp_path, entry.__name__.rsplit(".", 1)[1]) == expected


def test_sweep_panels_carry_the_vit_warm_up(monkeypatch):
    """``--local-warmup`` (10 by default, the paper's) reaches every grid point of the GLD-23K
    sweep panels (Figs. 6-7), as it reaches Figure 1's runs; 0 turns it off."""
    from reproduce import fedada2_fig6 as f6
    from reproduce import fedada2_ranked as rk
    grids = []
    monkeypatch.setattr(rk, "sweep_run", lambda name, grid, *a, **k: grids.append(grid))
    monkeypatch.setattr(rk, "_named", lambda run: run)
    monkeypatch.setattr(rk, "problem_desc", lambda *a, **k: {})
    for warm in (0, 10):
        grids.clear()
        cfg = common.parse_config(f6, ["--local-warmup", str(warm), "--standin", "yes"])
        f6.runs(cfg)
        assert len(grids) == 12
        for grid in grids:
            for point in grid.points():
                assert point.settings.get("local_warmup", 0) == warm


def test_sweep_panels_take_the_authors_reference_choices(monkeypatch):
    """Every grid point of the GLD-23K panels (Figs. 6-7) runs the authors' choices: FedAda2's
    SM3-I, a client Adam without bias correction (AdaGrad clients untouched), the warm-up on
    the adaptive clients; ``--sm3 sm3-ii --adam-bias-correction on`` turns both around."""
    from reproduce import fedada2_fig6 as f6
    from reproduce import fedada2_ranked as rk
    grids = []
    monkeypatch.setattr(rk, "sweep_run", lambda name, grid, *a, **k: grids.append(grid))
    monkeypatch.setattr(rk, "_named", lambda run: run)
    monkeypatch.setattr(rk, "problem_desc", lambda *a, **k: {})
    for flags, sm3, bc in (([], "sm3-i", False),
                           (["--sm3", "sm3-ii", "--adam-bias-correction", "on"], "sm3-ii", True)):
        grids.clear()
        f6.runs(common.parse_config(f6, ["--standin", "yes", *flags]))
        seen = set()
        for grid in grids:
            for point in grid.points():
                st = point.settings
                assert st["local_warmup"] == 10
                if point.algorithm == "fedada2":
                    assert st["precond"] == sm3
                    seen.add("sm3")
                if st.get("client") == "adam":
                    assert st["bias_correction"] is bc
                    seen.add("adam")
                else:
                    assert "bias_correction" not in st
        assert seen == {"sm3", "adam"}

"""The verdict vocabulary (:mod:`reproduce.verdicts`) and regime cards (:mod:`reproduce.regime`)
on constructed data: every definition reaches every label it can give, with the numbers that
decide it."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reproduce import regime as rg
from reproduce import verdicts as vd
from reproduce.verdicts import (DIVERGED, MISSING, NOT, PREMISE, SHOWS, UNDERPOWERED, Claim,
                                Estimate)

C = Claim("E1", "Paper", "A beats B", "above", "Sec. 4")


def s(values, seeds=None):
    return pd.Series(values, index=seeds if seeds is not None else range(len(values)),
                     dtype=float)


def test_interval_is_scipys_student_t():
    v = [1.0, 2.0, 4.0, 3.5]
    est = Estimate.of(v)
    lo, hi = est.interval()
    ref = stats.ttest_1samp(v, 0).confidence_interval(0.95)
    assert lo == pytest.approx(ref.low) and hi == pytest.approx(ref.high)


def test_seeds_to_decide_is_the_smallest_deciding_count():
    est = Estimate.summary(0.3, 1.0, 5, unit="seed")
    k = est.seeds_to_decide(0.3)
    half = lambda n: stats.t.ppf(0.975, n - 1) / math.sqrt(n)  # noqa: E731
    assert half(k) < 0.3 <= half(k - 1)
    assert est.seeds_to_decide(0.0) is None
    assert Estimate.summary(1e-9, 1.0, 5).seeds_to_decide(1e-9) is None   # beyond MAX_SEEDS


@pytest.mark.parametrize("a, b, label", [
    ([0.80, 0.81, 0.82, 0.80], [0.70, 0.71, 0.70, 0.72], SHOWS),
    ([0.60, 0.61, 0.62, 0.60], [0.70, 0.71, 0.70, 0.72], NOT),
    ([0.70, 0.73, 0.69, 0.72], [0.71, 0.70, 0.72, 0.70], UNDERPOWERED),
])
def test_above_reaches_its_labels(a, b, label):
    v = vd.above(C, s(a), s(b), what="A - B", unit="pp", scale=100)
    assert v.label == label
    assert v.n == 4 and v.definition == "above"
    if label == UNDERPOWERED:
        assert v.seeds_needed is not None and v.seeds_needed > 4
        assert f"about {v.seeds_needed:,} seeds would decide" in str(v)
    assert str(v).endswith(label) or f"-> {label}" in str(v)


def test_above_margin_decides_a_negligible_difference_against_the_claim():
    b = s([0.700, 0.710, 0.690, 0.701, 0.700])
    a = b + s([0.0010, 0.0012, 0.0009, 0.0011, 0.0010])
    assert vd.above(C, a, b).label == SHOWS              # significant, though tiny
    a2 = b + s([0.0010, -0.0012, 0.0019, -0.0011, 0.0004])   # about 0, +-0.1 points
    assert vd.above(C, a2, b).label == UNDERPOWERED
    assert vd.above(C, a2, b, margin=0.005).label == NOT     # not above by half a point


def test_above_is_paired_by_seed_and_drops_diverged_seeds():
    a = s([0.8, np.nan, 0.82, 0.81], seeds=[0, 1, 2, 3])
    b = s([0.7, 0.71, 0.72, 0.70], seeds=[0, 1, 2, 3])
    v = vd.above(C, a, b)
    assert v.n == 3 and v.diverged == 1 and v.seeds == (0, 2, 3)
    allbad = vd.above(C, s([np.nan, np.nan]), s([0.7, 0.7]))
    assert allbad.label == DIVERGED and "diverged" in allbad.reason
    assert vd.above(C, s([]), s([])).label == MISSING


def test_one_seed_is_underpowered_with_no_interval():
    v = vd.above(C, s([0.9]), s([0.1]))
    assert v.label == UNDERPOWERED and "no spread" in v.reason


def test_lower_is_better():
    loss_a, loss_b = s([0.3, 0.31, 0.29]), s([0.5, 0.52, 0.49])
    assert vd.above(C, loss_a, loss_b, lower_is_better=True).label == SHOWS
    assert vd.above(C, loss_b, loss_a, lower_is_better=True).label == NOT


@pytest.mark.parametrize("diff, label", [
    ([0.001, -0.002, 0.0, 0.001, -0.001], SHOWS),          # inside +-1 point
    ([0.05, 0.052, 0.049, 0.051, 0.05], NOT),               # 5 points apart
    ([0.02, -0.03, 0.01, -0.02, 0.03], UNDERPOWERED),       # contains 0, too wide
])
def test_about_equal_is_an_equivalence_test(diff, label):
    b = s([0.7] * 5)
    v = vd.about_equal(C, b + s(diff), b, margin=0.01)
    assert v.label == label
    assert "inside +-" in v.rule


def test_about_equal_never_passes_because_the_interval_contains_zero():
    v = vd.about_equal(C, s([0.70, 0.80, 0.60]), s([0.70, 0.70, 0.70]), margin=0.01)
    lo, hi = v.lo, v.hi
    assert lo < 0 < hi and v.label == UNDERPOWERED


def test_slope_interval_straddling_the_prediction_is_underpowered_not_shows():
    """The case of the issue: [-2.01, 1.20] against -0.5 must never read as "shows"."""
    slopes = s([-1.4, 0.6, -0.4])
    v = vd.slope(C, slopes, -0.5, 0.15)
    assert v.label == UNDERPOWERED
    assert vd.slope(C, s([-0.52, -0.49, -0.51, -0.50]), -0.5, 0.15).label == SHOWS
    assert vd.slope(C, s([-0.02, 0.01, 0.0, -0.01]), -0.5, 0.15).label == NOT


def test_size_band():
    assert vd.size(C, s([1.6, 1.7, 1.8, 1.75]), 1.5, 2.0).label == SHOWS
    assert vd.size(C, s([3.0, 3.1, 2.9]), 1.5, 2.0).label == NOT
    assert vd.size(C, s([1.4, 2.2, 1.1]), 1.5, 2.0).label == UNDERPOWERED


def test_exceeds_monte_carlo_summary():
    est = Estimate.summary(0.8, 0.5, 10_000)
    assert vd.exceeds(C, est, 1.0, direction=-1).label == SHOWS
    assert vd.exceeds(C, Estimate.summary(1.2, 0.5, 10_000), 1.0, direction=-1).label == NOT


def test_faster_rounds_to_an_absolute_target():
    ra = s([10, 12, 11, 10])
    rb = s([20, 25, 22, 21])
    assert vd.faster(C, ra, rb, horizon=100).label == SHOWS
    v = vd.faster(C, ra, rb, horizon=100, band=(1.5, 2.5))
    assert v.label == SHOWS and 1.5 < v.estimate < 2.5          # printed as a ratio
    assert vd.faster(C, rb, ra, horizon=100).label == NOT
    assert vd.faster(C, s([10, 30, 12, 28]), s([20, 12, 25, 14]), horizon=100).label \
        == UNDERPOWERED


def test_faster_censoring():
    inf = math.inf
    # B never gets there: the speed-up is a lower bound, "shows" is safe
    assert vd.faster(C, s([10, 11, 10]), s([inf, inf, inf]), horizon=50).label == SHOWS
    # A never gets there while B does: does not show, safely
    assert vd.faster(C, s([inf, inf, inf]), s([10, 11, 10]), horizon=50).label == NOT
    # neither reaches it: no information
    v = vd.faster(C, s([inf, inf]), s([inf, inf]), horizon=50)
    assert v.label == UNDERPOWERED and "neither" in v.reason
    # A censored in one seed behind a "shows": not decided
    v = vd.faster(C, s([10, 11, inf, 10, 10]), s([40, 41, 45, 40, 42]), horizon=40)
    assert v.label in (UNDERPOWERED, SHOWS)
    assert vd.faster(C, s([np.nan, np.nan]), s([10, 10]), horizon=50).label == DIVERGED


def test_ordering_decides_every_adjacent_pair():
    a, b, c = s([0.9, 0.91, 0.92]), s([0.8, 0.81, 0.8]), s([0.7, 0.72, 0.71])
    assert vd.ordering(C, [("A", a), ("B", b), ("C", c)]).label == SHOWS
    v = vd.ordering(C, [("A", a), ("C", c), ("B", b)])
    assert v.label == NOT and len(v.parts) == 2 and v.parts[1].label == NOT
    noisy = s([0.7, 0.9, 0.6])
    v = vd.ordering(C, [("A", a), ("B", b), ("N", noisy)])
    assert v.label == UNDERPOWERED and v.parts[0].label == SHOWS
    # non-strict ">=" within a margin
    assert vd.ordering(C, [("A", b + 0.001), ("B", b)], strict=[False], margin=0.01).label \
        == SHOWS


def test_every_combines_in_order_of_precedence():
    show = vd.exact(C, 1.5, 1.5)
    no = vd.exact(C, 1.4, 1.5)
    under = vd.above(C, s([0.9]), s([0.1]))
    gone = vd.missing(C, "x")
    assert vd.every(C, [show, show]).label == SHOWS
    assert vd.every(C, [show, no, under]).label == NOT
    assert vd.every(C, [show, gone, under]).label == MISSING
    assert vd.every(C, [show, under]).label == UNDERPOWERED


def test_exact_and_holds_are_deterministic():
    assert vd.exact(C, 1.5, 1.5, tol=1e-9).label == SHOWS
    assert vd.exact(C, 1.6, 1.5, tol=1e-9).label == NOT
    assert vd.holds(C, [0.5, 0.8, 0.99], 1.0).label == SHOWS
    assert vd.holds(C, [0.5, 1.02], 1.0).label == NOT
    assert vd.holds(C, [np.nan, np.nan], 1.0).label == DIVERGED
    assert vd.holds(C, [], 1.0).label == MISSING


def test_failed_regime_card_makes_premise_absent_whatever_the_data():
    card = rg.RegimeCard([rg.steps_per_epoch(3, 38, source="MAIN Sec. 4"),
                          rg.clients_per_round(25, 25), rg.seeds(3, 3)])
    assert not card.ok and "local steps/epoch 3 vs paper 38" in card.failures()
    a, b = s([0.9, 0.91, 0.92]), s([0.7, 0.72, 0.71])
    v = vd.above(C, a, b, card=card)
    assert v.label == PREMISE and np.isfinite(v.estimate)      # statistic still shown
    assert "regime card fails" in v.reason
    ok_card = rg.RegimeCard([rg.steps_per_epoch(36, 38), rg.clients_per_round(25, 25)])
    assert vd.above(C, a, b, card=ok_card).label == SHOWS
    assert vd.every(C, [vd.exact(C, 1, 1)], card=card).label == PREMISE


@pytest.mark.parametrize("tol, paper, measured, ok", [
    (rg.factor(2), 38, 20, True), (rg.factor(2), 38, 18, False),
    (rg.within(1.0), 5.0, 5.9, True), (rg.within(1.0), 5.0, 6.1, False),
    (rg.at_least(0.5), 1.0, 0.5, True), (rg.at_least(0.5), 1.0, 0.12, False),
    (rg.at_most(2.0), 1.0, 2.5, False), (rg.equal(), True, False, False),
    (rg.info(), 20, 2, True),
])
def test_tolerances(tol, paper, measured, ok):
    assert tol.ok(paper, measured) is ok


def test_card_texts_and_footer():
    card = rg.RegimeCard([rg.horizon(12, 100), rg.dp_noise_ratio(1.0, 7850, 40, 55.9),
                          rg.seeds(3, 20)])
    assert not card.ok
    assert card.compact().startswith("FAILS: horizon fraction 0.12/1 X")
    assert any("DP noise/clip per round 2.22 (paper 55.9; within x2) FAILS" in line for line in card.lines())
    v = vd.above(C, s([1, 2, 3.0]), s([0, 0, 0.0]), card=card)
    foot = rg.footer_text([v])
    assert "premise absent: E1" in foot and "seeds 3/20" in foot


def test_verdict_line_and_row():
    v = vd.above(C, s([0.80, 0.81, 0.82]), s([0.70, 0.71, 0.70]), what="A - B final test acc",
                 unit="pp", scale=100, protocol="paper: fixed rates", scope="CNN E=1")
    line = str(v)
    assert line.startswith("E1 (CNN E=1): A - B final test acc: +10.7 [+7.8, +13.5] pp")
    assert "pp, 3 seeds" in line and "-> shows | protocol: paper: fixed rates" in line
    row = v.row()
    assert row["verdict"] == SHOWS and row["claim"] == "E1" and row["paper"] == "Paper"
    assert row["n_seeds"] == 3 and row["seeds"] == "0 1 2"
    with pytest.raises(ValueError):
        vd.Verdict("x", "p", "maybe", "above", "w")


def test_per_seed_and_rounds_to_from_tidy_tables():
    rows = []
    for seed, curve in ((0, [0.1, 0.5, 0.8]), (1, [0.1, 0.4, 0.6]), (2, [0.1, np.nan, np.nan])):
        for r, val in enumerate(curve):
            rows.append({"run": "a", "seed": seed, "round": r, "metric": "test_acc",
                         "value": val, "diverged_at": 1.0 if seed == 2 else np.nan})
    df = pd.DataFrame(rows)
    fin = vd.per_seed(df, "test_acc", "final", run="a")
    assert fin[0] == 0.8 and fin[1] == 0.6 and np.isnan(fin[2])
    assert vd.per_seed(df, "test_acc", "mean", run="a")[0] == pytest.approx(0.65)
    r = vd.rounds_to(df, "test_acc", 0.55, run="a")
    assert r[0] == 2 and r[1] == 2 and np.isnan(r[2])
    assert math.isinf(vd.rounds_to(df, "test_acc", 0.9, run="a")[0])
    # the same run name in two panels: refused unless where= picks one
    two = pd.concat([df.assign(setting="E1"), df.assign(setting="E3", value=df.value / 2)])
    with pytest.raises(ValueError, match="two rows for one seed and round"):
        vd.per_seed(two, "test_acc", "final", run="a")
    assert vd.per_seed(two, "test_acc", "final", run="a", where={"setting": "E3"})[0] == 0.4
    with pytest.raises(ValueError, match="rounds_to: .* two rows for one seed and round"):
        vd.rounds_to(two, "test_acc", 0.55, run="a")

"""DP the way Opacus / dp-accounting users expect: RDP or PLD, noise calibrated to a target
epsilon, the sampling rate derived from / checked against the participation, the fixed-m note,
and ``--dp`` on the commands."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from sims.algorithms.registry import make_algorithm
from sims.core import engine
from sims.core.participation import Participation
from sims.privacy import (EpsilonCurve, Private, PrivacyError, dp_epsilon, epsilon_fixed_size,
                          noise_for_epsilon, sampling_note)
from sims.problems.quadratic import heterogeneous_quadratic


def test_fedada2_point_rdp_is_the_papers_and_pld_is_tighter():
    # FedAda2 Sec. 6.1: q = 0.1, sigma = 1, T = 500, delta = 1/400 -> 13.1 (RDP)
    assert dp_epsilon(0.1, 1.0, 500, 1 / 400)[0] == pytest.approx(13.1236, abs=1e-3)
    assert dp_epsilon(0.1, 1.0, 500, 1 / 400, accountant="pld")[0] == pytest.approx(11.503,
                                                                                    abs=2e-3)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("q, rounds, target, delta", [(0.1, 200, 8.0, 1e-5),
                                                      (0.5, 10, 2.0, 1e-3)])
def test_noise_for_epsilon_reaches_its_target(accountant, q, rounds, target, delta):
    sigma = noise_for_epsilon(q, rounds, target, delta, accountant)
    eps = dp_epsilon(q, sigma, rounds, delta, accountant=accountant)[0]
    assert eps <= target * (1 + 1e-6)          # never over the budget
    assert eps >= target * 0.99                # and not far under it (the calibration's tol)
    # less noise would spend more than the target
    assert dp_epsilon(q, sigma * 0.98, rounds, delta, accountant=accountant)[0] > target


def test_pld_curve_matches_the_one_shot_accountant():
    curve = EpsilonCurve(0.2, 1.2, 1e-4, "pld")
    for t in (1, 2, 7, 15):
        assert curve(t) == pytest.approx(dp_epsilon(0.2, 1.2, t, 1e-4, accountant="pld")[0],
                                         rel=1e-6)
    assert curve(3) == pytest.approx(dp_epsilon(0.2, 1.2, 3, 1e-4, accountant="pld")[0],
                                     rel=1e-6)                # out of order


def test_fixed_size_sampling_epsilon_and_the_note():
    fixed = epsilon_fixed_size(400, 40, 1.0, 500, 1 / 400)
    poisson = dp_epsilon(0.1, 1.0, 500, 1 / 400)[0]
    assert math.isfinite(fixed) and fixed > poisson     # replace-one: about twice the add/remove
    note = sampling_note(400, 40, 1.0, 500, 1 / 400)
    assert "fixed m=40 of N=400" in note and "Poisson" in note
    assert f"{poisson:.4g}" in note and f"{fixed:.4g}" in note and "\n" not in note


def _problem():
    return heterogeneous_quadratic(10, 6, sigma=0.5, local_steps=2, x0=1.0)


def test_sampling_rate_typed_by_hand_is_checked_before_any_work():
    alg = Private(make_algorithm("fedavg"), 1.0, 1.0, delta=1e-3, sampling_rate=0.3)
    with pytest.raises(PrivacyError, match=r"does not match the participation \(m=5 of "
                                           r"N=10 clients: q=0\.5\)") as err:
        engine.run(_problem(), alg, Participation.parse("m=5"), 2, [0])
    assert "\n" not in str(err.value)
    ok = Private(make_algorithm("fedavg"), 1.0, 1.0, delta=1e-3, sampling_rate=0.5)
    engine.run(_problem(), ok, Participation.parse("m=5"), 2, [0])
    # the run's record carries the fixed-m note with epsilon under both samplings
    assert ok.describe()["dp"]["sampling_note"] == sampling_note(10, 5, 1.0, 2, 1e-3)


def test_for_participation_derives_q_and_calibrates():
    private = Private.for_participation(make_algorithm("fedavg"), "m=5", 10, clip=1.0,
                                        epsilon=3.0, delta=1e-3, rounds=4, accountant="pld")
    assert private.sampling_rate == 0.5 and private.accountant == "pld"
    out = engine.run(_problem(), private, Participation.parse("m=5"), 4, [0])
    eps = out.metrics["dp_epsilon"][0]
    assert eps[-1] <= 3.0 * (1 + 1e-6) and eps[-1] >= 3.0 * 0.99
    with pytest.raises(PrivacyError, match="either noise_multiplier"):
        Private.for_participation(make_algorithm("fedavg"), "m=5", 10, clip=1.0)
    with pytest.raises(PrivacyError, match="unknown accountant"):
        Private(make_algorithm("fedavg"), 1.0, 1.0, accountant="prv")


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_dp_flag_on_compare_reaches_its_target(tmp_path, capsys, accountant):
    from sims.experiments.compare import main
    rc = main(["--algorithms", "fedavg", "--problem", "quadratic", "--n-clients", "10",
               "--dim", "6", "--participation", "m=5", "--rounds", "4", "--seeds", "1",
               "--dp", f"clip=1,epsilon=3,delta=1e-3,accountant={accountant}", "--quiet",
               "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "fig")])
    printed = capsys.readouterr().out
    assert rc == 0
    assert f"calibrated to epsilon 3 at delta 0.001 over 4 rounds ({accountant.upper()})" \
        in printed
    assert "DP note: the engine samples a fixed m=5 of N=10" in printed
    csv = next(p for p in (tmp_path / "out").glob("compare_fedavg_T4_*.csv"))
    df = pd.read_csv(csv)
    eps = df[df.metric == "dp_epsilon"].sort_values("round")["value"].to_numpy()
    assert len(eps) == 4 and 3.0 * 0.99 <= eps[-1] <= 3.0 * (1 + 1e-6)


def test_dp_flag_on_sweep_reaches_its_target(tmp_path, capsys):
    from sims.experiments.sweep.cli import main
    rc = main(["--algorithms", "fedavg", "--grid", "eta_l=0.05,0.1", "--problem", "quadratic",
               "--n-clients", "10", "--dim", "6", "--participation", "m=5", "--rounds", "3",
               "--seeds", "1", "--dp", "clip=1,epsilon=2,delta=1e-3", "--quiet",
               "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "fig")])
    printed = capsys.readouterr().out
    assert rc == 0 and "calibrated to epsilon 2" in printed
    table = pd.read_csv(tmp_path / "out" / "sweep" / "table.csv")
    eps = table[(table.metric == "dp_epsilon") & (table["round"] == 3)]["value"]
    assert len(eps) == 2 and ((eps <= 2 * (1 + 1e-6)) & (eps >= 2 * 0.99)).all()


@pytest.mark.parametrize("text, match", [
    ("sigma=1", "needs clip"),
    ("clip=1", "either sigma"),
    ("clip=1,sigma=1,epsilon=2,delta=1e-5", "either sigma"),
    ("clip=1,epsilon=2", "needs delta"),
    ("clip=1,sigma=1,accountant=prv", "accountant must be one of rdp, pld"),
    ("clip=0,sigma=1", "clip must be > 0"),
    ("clip=1,sigma=1,delta=2", "delta must be in"),
    ("clip=1,sgima=1", "unknown key 'sgima'"),
    ("clip=1,sigma=1,delta=1e-3,q=0.1", "--dp q=0.1 does not match the participation "
                                       "(m=3 of N=8 clients: q=0.375)"),
])
def test_bad_dp_flag_is_one_line(tmp_path, capsys, text, match):
    from sims.experiments.compare import main
    rc = main(["--tiny", "--dp", text, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("module", ["compare", "sweep"])
def test_dp_on_an_algorithm_that_cannot_be_private_is_one_line(module, tmp_path, capsys):
    if module == "compare":
        from sims.experiments.compare import main
    else:
        from sims.experiments.sweep.cli import main
    rc = main(["--algorithms", "fedavg,mime", "--tiny", "--dp", "clip=1,sigma=1", "--out",
               str(tmp_path / "o"), "--figures", str(tmp_path / "f")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "mime: needs the engine's mean full gradient" in err and "\n" not in err
    assert not list((tmp_path / "o").rglob("*.csv"))

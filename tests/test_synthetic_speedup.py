"""Fed-EF speedup in n (Corollary 1) and m (Theorem 4.4): fitted log-log slopes."""
import math

import pytest

from reproduce import common
from reproduce import speedup as entry
from sims.synthetic import speedup


@pytest.fixture(scope="module")
def slopes(tmp_path_factory):
    out = tmp_path_factory.mktemp("speedup")
    cfg = entry.Config(seeds=1, rounds=60, ns="2,4,8,16", ms="2,4,8,16", n_partial=16, d=10,
                       out=str(out), figures=str(out), quiet=True)
    return entry.slopes(common.execute(entry, cfg), cfg)


def test_speedup_in_n_under_full_participation(slopes):
    # Theory -1/2 (O(1/sqrt(TKn))). Observed -0.46/-0.47 over three seeds; tolerance 0.2
    # (no speedup would be slope 0; linear-in-n would be -1).
    assert abs(slopes["full"]["avg_grad_norm2"] + 0.5) < 0.2


def test_speedup_in_m_under_partial_participation(slopes):
    # Theory -1 (O(sqrt(n/m)/sqrt(TKm))). Observed -1.05/-1.07; tolerance 0.2 (a speedup
    # only like full participation's would be -1/2).
    assert abs(slopes["partial"]["avg_grad_norm2"] + 1.0) < 0.2
    assert slopes["partial"]["avg_grad_norm2"] < slopes["full"]["avg_grad_norm2"] - 0.3


def test_learning_rates_follow_the_corollaries():
    eta, eta_l = speedup.learning_rates("full", K=2, T=100, n=16)
    assert eta == pytest.approx(math.sqrt(32)) and eta_l == pytest.approx(1 / 20)
    # partial participation with m = n is the full-participation setting
    assert speedup.learning_rates("partial", 2, 100, 16, 16) == pytest.approx((eta, eta_l))
    assert speedup.THEORY_SLOPE == {"full": -0.5, "partial": -1.0}

"""Fed-EF speedup in n (Corollary 1) and m (Theorem 4.4), measured where the corollary's
noise term dominates (homogeneous clients started at the optimum): fitted log-log slopes
with seed intervals."""
import math

import pytest

from reproduce import common
from reproduce import speedup as entry
from sims.experiments.synthetic import speedup


@pytest.fixture(scope="module")
def slopes(tmp_path_factory):
    out = tmp_path_factory.mktemp("speedup")
    # The entry's default problem and populations (n, m in 4..32; with n = 2 the floor is
    # not reached in the rounds), 3 seeds.
    cfg = entry.Config(seeds=3, out=str(out), figures=str(out), quiet=True)
    return entry.slopes(common.execute(entry, cfg), cfg)


def test_noise_floor_falls_like_n_to_the_minus_half_under_full_participation(slopes):
    # Theory -1/2 (O(1/sqrt(TKn))); no speedup would be 0, linear-in-n -1.
    for measure in ("avg_grad_norm2", "late_grad_norm2"):
        mean, lo, hi = slopes["full"][measure]
        assert abs(mean + 0.5) < 0.2 and hi < 0


def test_noise_floor_is_flat_in_m_at_theorem_4_4_rates(slopes):
    # At Thm 4.4's learning rates the first noise term, eta eta_l L sigma^2 / m ~ 1/sqrt(TKn),
    # does not depend on m; the stale-error term that would give -1 does not dominate here.
    mean, lo, hi = slopes["partial"]["avg_grad_norm2"]
    assert abs(mean) < 0.25
    assert slopes["partial"]["avg_grad_norm2"][0] > slopes["full"]["avg_grad_norm2"][0] + 0.25


def test_the_regime_is_noise_dominated():
    const = entry.problem(entry.Config(), 32).constants()
    assert const["sigma_g2"] == 0 and const["f0_minus_fstar"] == 0 and const["sigma2"] > 0


def test_learning_rates_follow_the_corollaries():
    eta, eta_l = speedup.learning_rates("full", K=2, T=100, n=16)
    assert eta == pytest.approx(math.sqrt(32)) and eta_l == pytest.approx(1 / 20)
    # partial participation with m = n is the full-participation setting
    assert speedup.learning_rates("partial", 2, 100, 16, 16) == pytest.approx((eta, eta_l))
    assert speedup.THEORY_SLOPE == {"full": -0.5, "partial": -1.0}

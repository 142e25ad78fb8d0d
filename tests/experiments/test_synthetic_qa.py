"""Fed-EF compression discrepancy q_A (Assumption 3, App. C; spec fed-ef.md 4.10-4.11)."""
import numpy as np
import pytest

from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.experiments.synthetic import qa, torch_threads

# The spec's own reconstruction (2e4 draws, disjoint 5x220 layout): (q_A^2, q_C^2).
SPEC = {("gaussian", 2, "topk-0.1"): (0.469, 0.561), ("gaussian", 2, "sign"): (0.427, 0.363),
        ("gaussian", 100, "topk-0.1"): (0.073, 0.561), ("gaussian", 100, "sign"): (0.862, 0.363),
        ("laplace", 10, "topk-0.1"): (0.071, 0.416), ("laplace", 100, "sign"): (0.891, 0.499)}


@pytest.fixture(scope="module")
def sims():
    with torch_threads(1):
        return {dist: qa.simulate(dist, [2, 10, 100], 400, seed=0) for dist in qa.DISTS}


def test_qa_below_one_in_every_cell(sims):
    # Fig. 18's claim. Tolerance: the mean plus 4 standard errors (s.e. ~1e-3 at 400 draws)
    # must stay below 1; the largest cell is Laplace/Sign/s=100 at 0.89.
    for dist, res in sims.items():
        for (s, comp), val in res.items():
            q = val["qA2"]
            assert q.mean() + 4 * q.std() / np.sqrt(len(q)) < 1, (dist, s, comp)


def test_matches_the_spec_reconstruction(sims):
    # Same construction as the spec's quick reproduction; 0.02 covers the Monte-Carlo error
    # of both (per-draw ratio std <= 0.05) with room, and catches a changed construction.
    for (dist, s, comp), (qa2, qc2) in SPEC.items():
        val = sims[dist][(s, comp)]
        assert abs(val["qA2"].mean() - qa2) < 0.02, (dist, s, comp)
        assert abs(val["qC2"].mean() - qc2) < 0.02, (dist, s, comp)


def test_qc_respects_definition_1(sims):
    # Def. 1: ||C(x) - x||^2 <= q_C^2 ||x||^2 with q_C^2 = 1 - k (TopK), 1 - 1/d (Sign).
    for res in sims.values():
        for (s, comp), val in res.items():
            bound = 1 - 110 / 1100 if comp.startswith("topk") else 1 - 1 / 1100
            assert val["qC2"].max() <= bound + 1e-6


def test_layouts():
    disjoint = qa.strong_mask(5, 1100, "disjoint")
    assert (disjoint.sum(0) == 1).all() and (disjoint.sum(1) == 220).all()
    partial = qa.strong_mask(5, 1100, "partial")
    assert (partial.sum(1) == 100).all() and (partial.sum(0) == 0).sum() == 600


def test_training_time_qa_hook():
    # The engine hook Fig. 19 needs: RunOutput.metrics["qA2"], one value per round and seed.
    prob = heterogeneous_quadratic(10, 50, local_steps=2, seed=0, x0=3.0)
    with torch_threads(1):
        out = engine.run(prob, FedEF(eta=1.0, eta_l=0.1, compressor=TopK(0.1)),
                         Participation("fixed", m=5), 6, [0, 1])
    q = out.metrics["qA2"]
    assert q.shape == (2, 6)
    assert np.isfinite(q).all() and (q > 0).all() and (q < 1).all()

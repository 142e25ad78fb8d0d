"""The client learning-rate warm-up (``local_warmup``; FedAda2 App. H.2, its ViT runs: "linear
warm-up from 0 over the first 10 local backprop steps", read as ``min(1, k / W)`` of the rate
at local step ``k``) on the FedOpt family and FedAda2's joint-adaptive family.

With gradients that do not depend on the model (and no weight decay or proximal term), the
optimizer's moments are the same with and without the warm-up, so each local step's
displacement under the warm-up is exactly ``min(1, k / W)`` times the plain one's."""
from __future__ import annotations

import pytest
import torch

from sims.core import engine
from sims.core.context import RoundContext
from sims.algorithms.registry import AlgorithmError, make_algorithm
from sims.problems.models import MLP
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic

LAYOUT = ParamLayout.from_module(MLP(6, hidden=4, num_classes=3))
B, STEPS, W = 3, 7, 4
FAMILY = ["fedavg", "fedadam", "fedadagrad", "dja", "joint-adaptive", "fedada2",
          "fedada2-adam"]


def _displacements(alg, grads):
    """Each local step's ``theta_k - theta_{k-1}`` over one round of ``B`` participants."""
    rep = torch.zeros(B, dtype=torch.long)
    ctx = RoundContext(0, LAYOUT, rep, torch.arange(B), torch.full((B,), -1))
    server = alg.init_server(torch.zeros(1, LAYOUT.d, dtype=torch.float64))
    bcast = {k: v[rep] for k, v in alg.broadcast(server).items()}
    cstate = {k: torch.zeros((B, LAYOUT.d) if kind == "vector" else (B,), dtype=torch.float64)
              for k, kind in alg.client_state_spec().items()}
    lstate = alg.local_start(bcast, cstate, ctx)
    theta, out = bcast["theta"].clone(), []
    for g in grads:
        new, lstate = alg.local_step(theta, g, lstate, bcast, cstate, None, ctx)
        out.append(new - theta)
        theta = new
    return out


@pytest.mark.parametrize("name", FAMILY)
def test_each_step_moves_min_1_k_over_w_of_the_plain_step(name):
    gen = torch.Generator().manual_seed(len(name))
    grads = [torch.randn(B, LAYOUT.d, generator=gen, dtype=torch.float64) for _ in range(STEPS)]
    plain = _displacements(make_algorithm(name), grads)
    warm = _displacements(make_algorithm(name, local_warmup=W), grads)
    for k, (a, b) in enumerate(zip(warm, plain), start=1):
        assert b.abs().max() > 0
        torch.testing.assert_close(a, min(1.0, k / W) * b, rtol=1e-12, atol=1e-15,
                                   msg=f"{name} step {k}")


@pytest.mark.parametrize("name", ["fedavg", "fedadam", "fedada2"])
def test_engine_runs_the_warm_up_on_every_path(name):
    """The engine's fused local-SGD paths cannot run a rate that changes step by step: with a
    warm-up the run goes step by step (fused or not, the same), and differs from the plain."""
    q = heterogeneous_quadratic(6, 12, local_steps=5, seed=2, sigma=0.1, x0=1.0)
    part = Participation("fixed", m=3)
    warm = {fused: engine.run(q, make_algorithm(name, local_warmup=W), part, 3, [0, 1],
                              fused=fused, eval_every=0).server["theta"]
            for fused in (True, False)}
    plain = engine.run(q, make_algorithm(name), part, 3, [0, 1], eval_every=0).server["theta"]
    torch.testing.assert_close(warm[True], warm[False], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(warm[True], plain)


def test_warm_up_of_one_step_is_no_warm_up():
    q = heterogeneous_quadratic(6, 12, local_steps=4, seed=2, sigma=0.1, x0=1.0)
    part = Participation("fixed", m=3)
    for name in ("fedadam", "dja"):
        one, none = (engine.run(q, make_algorithm(name, local_warmup=w), part, 2, [0],
                                eval_every=0).server["theta"] for w in (1, 0))
        torch.testing.assert_close(one, none, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad", [-1, 2.5])
def test_bad_warm_up_is_a_one_line_error(bad):
    with pytest.raises(AlgorithmError, match="local_warmup must be an integer >= 0"):
        make_algorithm("fedadam", local_warmup=bad)


def test_warm_up_with_an_amended_direction_is_refused():
    with pytest.raises(AlgorithmError, match="amended"):
        make_algorithm("fedcm", local_warmup=10)

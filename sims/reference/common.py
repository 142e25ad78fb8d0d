"""What the sequential references share: the run record, per-round history, the round's
draws and plain means. Nothing here is batched or shared with the engine's fast path except
the round's random draws (:func:`sims.core.engine.draw_round`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.engine import draw_round


@dataclass
class ReferenceRun:
    history: dict
    theta: torch.Tensor
    server: dict = field(default_factory=dict)
    clients: dict = field(default_factory=dict)     # client id -> {name: tensor}


def evaluate(problem, theta) -> dict:
    """The training metrics of one model ``theta[d]``."""
    with torch.no_grad():
        return {k: float(v[0]) for k, v in problem.evaluate(theta.unsqueeze(0),
                                                            test=False).items()}


class History:
    """Per-round training metrics, round 0 the initial model."""

    def __init__(self, problem, theta):
        self.problem = problem
        self.data = {k: [v] for k, v in evaluate(problem, theta).items()}

    def add(self, theta):
        for k, v in evaluate(self.problem, theta).items():
            self.data[k].append(v)

    def arrays(self):
        return {k: np.asarray(v) for k, v in self.data.items()}


def rounds(problem, participation, seed, count):
    """``(t, draw)`` of each of ``count`` rounds: the engine's draws, shared by both paths."""
    for t in range(count):
        yield t, draw_round(problem, participation, False, seed, t)


def mean(vectors):
    """The plain mean of a list of vectors, summed left to right."""
    total = vectors[0].clone()
    for v in vectors[1:]:
        total = total + v
    return total / len(vectors)


def trust_step(alg, layout, x, p):
    """Fed-LAMB Alg. 2 line 13 per layer: ``phi(||x_l||) (p_l + lam x_l) / ||p_l + lam x_l||``."""
    out = torch.zeros_like(x)
    for sl in layout.slices:
        w = p[sl] + alg.lam * x[sl]
        wn = float(torch.linalg.vector_norm(w))
        if wn == 0:
            continue
        if alg.phi == "update_norm":
            scale = float(torch.linalg.vector_norm(p[sl]))
        else:
            scale = float(torch.linalg.vector_norm(x[sl]))
            if alg.phi == "clip":
                scale = min(max(scale, alg.phi_min), alg.phi_max)
        out[sl] = scale * w / wn
    return out


"""Fed-LAMB's layer-wise trust ratio (MAIN Alg. 2 line 13; LAMB, You et al. 2020)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import OptimizerError, Transform

PHI_KINDS = ("clip", "identity", "update_norm")


def layer_norms(x: torch.Tensor, layout) -> torch.Tensor:
    """The Euclidean norm of each layer of each row: ``[B, d] -> [B, L]``."""
    return torch.stack([torch.linalg.vector_norm(x[:, sl], dim=1) for sl in layout.slices], 1)


@dataclass(frozen=True)
class TrustRatio(Transform):
    """For each layer ``l``: ``w_l = u_l + lam theta_l`` and the update becomes
    ``phi(||theta_l||) w_l / ||w_l||``, so a step of size ``lr`` moves every layer by exactly
    ``lr phi(||theta_l||)`` (spec P1; a layer with ``w_l = 0`` does not move). A layer is one
    parameter tensor of ``info.layout`` (weight and bias separately).

    ``phi``: ``"clip"`` (default) ``min(max(z, phi_min), phi_max)`` -- bounded as H4 requires,
    and layers at 0 (biases) still move; ``"identity"`` (the text's "can be set to the
    identity function"; zero layers then never move); ``"update_norm"`` replaces
    ``phi(||theta_l||)`` by ``||u_l||`` (not allowed by H4; with ``lam = 0`` the update is then
    ``u`` itself, which is how Fed-LAMB reduces to Fed-AMS, spec P3)."""
    phi: str = "clip"
    phi_min: float = 1e-3
    phi_max: float = 10.0
    lam: float = 0.0

    def __post_init__(self):
        if self.phi not in PHI_KINDS:
            raise OptimizerError(f"unknown phi {self.phi!r}; choose one of {PHI_KINDS}")
        if not 0 < self.phi_min <= self.phi_max:
            raise OptimizerError(f"need 0 < phi_min <= phi_max, got {self.phi_min}, "
                                 f"{self.phi_max}")
        if self.lam < 0:
            raise OptimizerError(f"lambda must be >= 0, got {self.lam}")

    def update(self, u, state, theta, info):
        layout = info.layout
        w = u + self.lam * theta if self.lam else u
        w_norm = layer_norms(w, layout)
        if self.phi == "update_norm":
            scale = layer_norms(u, layout)
        else:
            scale = layer_norms(theta, layout)
            if self.phi == "clip":
                scale = scale.clamp(self.phi_min, self.phi_max)
        ratio = torch.where(w_norm > 0, scale / torch.where(w_norm > 0, w_norm, 1.0),
                            torch.zeros_like(w_norm))
        out = torch.empty_like(w)
        for i, sl in enumerate(layout.slices):
            out[:, sl] = w[:, sl] * ratio[:, i:i + 1]
        return out, {}

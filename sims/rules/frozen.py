"""A base optimizer's direction from a frozen state (Mime, Karimireddy et al., arXiv 2008.03606)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Transform


@dataclass(frozen=True)
class Frozen(Transform):
    """``U(u; s)``: the direction the transform ``base`` would give from the server's state
    ``s``, which is read from the broadcast (``info.bcast[prefix + key]`` for each of
    ``base``'s state entries) and never advanced locally (Mime and MimeLite's local steps;
    the server advances ``s`` with its own statistics)."""
    base: Transform
    prefix: str = "s_"

    def update(self, u, state, theta, info):
        frozen = {key: info.bcast[self.prefix + key] for key in self.base.keys}
        direction, _ = self.base.update(u, frozen, theta, info)
        return direction, {}

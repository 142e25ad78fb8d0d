"""What a hook is told about its round: :class:`RoundContext`."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..rules.base import READABLE


@dataclass
class RoundContext:
    """The round a hook runs in.

    ``t``: the round (0-based); ``layout``: the layer layout; ``replica`` / ``clients``:
    ``[B]`` each participant's replica and client id (the server hooks get ``replica =
    arange(R)``); ``last_round``: ``[B]`` the round each participant last took part in
    (``-1``: never), for staleness-aware rules (error restarting); ``uniforms``: ``[B, d]``
    randomness for a stochastic compressor; ``extra``: the engine's extras
    (``"anchor_grad"``, ``"epoch_steps"``; on the server ``"seeds"``).

    ``run`` executes the rules (:class:`sims.rules.base.Readable` unless the engine planned
    fast forms for this run, :mod:`sims.accel`) and ``owned`` says whether a local step may
    overwrite the local state it is handed (the engine's own buffers: from a round's second
    step on, what the previous step returned). Neither concerns what a rule computes."""
    t: int
    layout: object
    replica: torch.Tensor
    clients: torch.Tensor | None
    last_round: torch.Tensor | None
    uniforms: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)
    run: object = READABLE
    owned: bool = False

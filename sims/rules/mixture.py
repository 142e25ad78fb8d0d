"""Rows that follow different rules: FedAda2's Federated Blended Optimization (Alg. 5)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Transform


@dataclass(frozen=True)
class Mixture(Transform):
    """Row ``b`` follows ``members[clients[b] mod p]`` (``p = len(members)``), for at most
    ``steps[l]`` local steps of member ``l`` (None: no cap); a row past its cap gets the
    update 0 and keeps its state. State: ``members``, each member's own state dict (a member
    steps only its rows; the others keep theirs)."""
    members: tuple
    steps: tuple

    keys = ("members",)

    def init(self, like, **given) -> dict:
        return {"members": [m.init(like) for m in self.members], **given}

    def assignment(self, info) -> torch.Tensor:
        return torch.remainder(info.clients, len(self.members))

    def rows_of(self, l: int, info) -> torch.Tensor:
        """Member ``l``'s rows this step (``[B]`` bool): its clients with steps left."""
        mine = self.assignment(info) == l
        if self.steps[l] is not None:
            mine = mine & (info.k < self.steps[l])
        return mine

    def update(self, u, state, theta, info):
        """Every member's rule on every row, each row keeping its own member's result (and
        every member's state only on its own rows): the rule as written, not fast."""
        out = torch.zeros_like(u)
        states = []
        for l, (member, st) in enumerate(zip(self.members, state["members"])):
            mine = self.rows_of(l, info).unsqueeze(-1)
            u_l, new = member.update(u, st, theta, info)
            out = torch.where(mine, u_l, out)
            states.append({k: torch.where(mine if st[k].dim() > 1 else mine.squeeze(-1),
                                          new[k], st[k]) if k in new else st[k] for k in st})
        return out, {"members": states}

"""How an algorithm plugs into the engine.

An algorithm is an object with the hooks below. Everything is batched: server tensors
carry a leading replica axis ``R`` (independent seeds of one configuration run side by
side), client tensors a leading participant axis ``B`` (all participating clients of all
replicas in this chunk). The engine (:mod:`sims.engine`) owns the round loop, client
sampling, data, gathering and scattering of per-client state, and the per-replica means;
the algorithm owns the update rules.

Hooks, in the order the engine calls them each round:

``init_server(theta0[R, d]) -> dict``
    Server state; must contain ``"theta"`` (the global model).
``client_state_spec() -> dict[name, "vector" | "scalar"]``
    Persistent per-client state (zeros at start), stored as ``[R, n, d]`` or ``[R, n]``:
    an EF error, a control variate, optimizer moments. Inactive clients' state is untouched.
``broadcast(server) -> dict``
    What the server sends (at least ``"theta"``); each entry is gathered per participant.
``local_start(bcast, cstate, ctx) -> dict``
    Local optimizer state at the start of the round (e.g. moments from the broadcast).
``local_step(theta[B, d], grad[B, d], lstate, bcast, cstate, mask[B], ctx) -> (theta, lstate)``
    One local step. The default is the rule in ``self.local_rule`` (plain SGD for Fed-EF).
``client_message(delta[B, d], lstate, cstate, ctx) -> (message, cstate, aux)``
    What a client sends, given its pseudo-gradient ``delta = theta_start - theta_end``; the
    new persistent state; ``aux``: per-participant tensors the engine sums per replica.
``server_step(server, mean_message[R, d], sums, active[R], ctx) -> (server, metrics)``
    The server update from the mean message over each replica's participants.
``uplink_bits(layout)`` / ``downlink_bits(layout)``
    Bits one participant sends / receives per round.

``ctx`` is a :class:`RoundContext`. The engine adds ``ctx.last_round`` (the round each
participant last took part in, ``-1`` if never) so staleness-aware rules (error restarting)
can use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..params import ParamLayout


@dataclass
class RoundContext:
    t: int                        # round index, 0-based
    layout: ParamLayout
    replica: torch.Tensor         # [B] replica of each participant
    clients: torch.Tensor         # [B] client id of each participant
    last_round: torch.Tensor      # [B] round the participant last took part in (-1: never)
    uniforms: torch.Tensor | None = None   # [B, d] randomness for a stochastic compressor
    extra: dict = field(default_factory=dict)


class Algorithm:
    """Base class with the default hooks (local SGD, no client state, mean aggregation)."""

    name = "algorithm"
    needs_uniforms = False
    local_rule = None

    def init_server(self, theta0: torch.Tensor) -> dict:
        return {"theta": theta0.clone()}

    def client_state_spec(self) -> dict[str, str]:
        return {}

    def broadcast(self, server: dict) -> dict:
        return {"theta": server["theta"]}

    def local_start(self, bcast: dict, cstate: dict, ctx: RoundContext) -> dict:
        return self.local_rule.init(bcast["theta"])

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        return self.local_rule.step(theta, grad, lstate, mask)

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {}

    def server_step(self, server, mean_message, sums, active, ctx):
        raise NotImplementedError

    def uplink_bits(self, layout: ParamLayout) -> int:
        return 32 * layout.d

    def downlink_bits(self, layout: ParamLayout) -> int:
        return 32 * layout.d

    def plain_local_sgd(self) -> float | None:
        """The local learning rate when local work is plain SGD through the default hooks,
        else None. The engine then lets a problem fuse gradient and update
        (``problem.local_sgd``), which is equal to the step-by-step path."""
        from ..optim import SGD
        cls = type(self)
        if (cls.local_step is Algorithm.local_step and cls.local_start is Algorithm.local_start
                and type(self.local_rule) is SGD):
            return self.local_rule.lr
        return None

    def describe(self) -> dict:
        """A JSON-able description for provenance records."""
        return {"name": self.name}


def masked_rows(active: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """Rows of ``new`` where ``active`` else ``old`` (replicas with no participant stand still)."""
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)

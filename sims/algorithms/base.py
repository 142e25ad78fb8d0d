"""How an algorithm plugs into the engine.

An algorithm is an object with the hooks below. Everything is batched: server tensors
carry a leading replica axis ``R`` (independent seeds of one configuration run side by
side), client tensors a leading participant axis ``B`` (all participating clients of all
replicas in this chunk). The engine (:mod:`sims.core.engine`) owns the round loop, client
sampling, data, gathering and scattering of per-client state, and the per-replica means;
the algorithm owns the update rules.

Hooks, in the order the engine calls them each round:

``init_server(theta0[R, d]) -> dict``
    Server state; must contain ``"theta"`` (the global model).
``client_state_spec() -> dict[name, "vector" | "scalar"]``
    Persistent per-client state (zeros at start), stored as ``[R, n, d]`` or ``[R, n]``:
    an EF error, a control variate, optimizer moments. Inactive clients' state is untouched.
``round_gradient(server, mean_grad[R, d], active[R]) -> server``
    Only when ``needs_round_gradient`` is True (default False): after the round's
    participants are drawn and before ``broadcast``, the engine computes every participant's
    full local gradient at the server model ``server["theta"]`` (``problem.full_grad``), in
    the same chunks as the local training, and passes the mean over each replica's
    participants (0 for a replica with none, ``active`` False). The algorithm returns the
    server state to broadcast from (Mime stores ``c`` there). Costs one extra uplink (the
    gradients) and downlink (``c``) per participant, which the algorithm's bit counts state.
``broadcast(server) -> dict``
    What the server sends (at least ``"theta"``); each entry is gathered per participant.
``local_start(bcast, cstate, ctx) -> dict``
    Local optimizer state at the start of the round (e.g. moments from the broadcast).
``local_step(theta[B, d], grad[B, d], lstate, bcast, cstate, mask[B], ctx) -> (theta, lstate)``
    One local step. The default is the rule in ``self.local_rule`` (plain SGD for Fed-EF).
    When ``needs_anchor_grad`` is True (default False) the engine also computes the same
    step's minibatch gradient at the round's start model ``bcast["theta"]`` and passes it as
    ``ctx.extra["anchor_grad"]`` ``[B, d]`` (Mime's SVRG correction
    ``grad f_i(y; z) - grad f_i(x; z) + c``); one more gradient per step.
``client_message(delta[B, d], lstate, cstate, ctx) -> (message, cstate, aux)``
    What a client sends, given its pseudo-gradient ``delta = theta_start - theta_end``; the
    new persistent state; ``aux``: per-participant tensors the engine sums per replica
    (or :class:`sims.row_source.ScaledRows` / row sources, summed without being formed;
    :func:`sims.row_source.materialized` gives the tensor). The new state's entries may be
    the participants' rows in place (:class:`sims.row_source.SlotRows`, from
    ``cstate.rows(key)`` in the engine): nothing is written back for them.
``server_step(server, mean_message[R, d], sums, active[R], ctx) -> (server, metrics)``
    The server update from the mean message over each replica's participants.
``uplink_bits(layout)`` / ``downlink_bits(layout)``
    Bits one participant sends / receives per round.

``ctx`` is a :class:`RoundContext`. The engine adds ``ctx.last_round`` (the round each
participant last took part in, ``-1`` if never) so staleness-aware rules (error restarting)
can use it, and ``ctx.extra["anchor_grad"]`` for ``needs_anchor_grad``. An algorithm with
either flag never takes the engine's fused local-SGD path (:meth:`Algorithm.plain_local_sgd`).

What a ``local_step`` may overwrite in place (:mod:`sims.ownership`): the engine sets
``ctx.extra["owned_theta"]`` (every step: ``theta`` is its own), ``"owned_state"`` (from a
round's second step on: ``lstate`` is what the previous step returned) and ``"owned_start"``
(the first step: ``lstate`` is ``local_start``'s result, unchanged, and the entries named by
:meth:`Algorithm.owned_start_keys` are fresh); any other caller sets none of them and owns
nothing. :func:`sims.ownership.step_owned` reads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..core.params import ParamLayout


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
    needs_round_gradient = False      # engine calls round_gradient before broadcast
    needs_anchor_grad = False         # engine puts ctx.extra["anchor_grad"] in local_step
    # local_step takes a sims.deferred_grad.DeferredGrad (from problems that make one) and
    # materializes it wherever it needs the whole tensor
    takes_deferred_grad = False
    local_rule = None

    def init_server(self, theta0: torch.Tensor) -> dict:
        return {"theta": theta0.clone()}

    def client_state_spec(self) -> dict[str, str]:
        return {}

    def round_gradient(self, server: dict, mean_grad: torch.Tensor,
                       active: torch.Tensor) -> dict:
        raise NotImplementedError(f"{self.name} sets needs_round_gradient but has no "
                                  "round_gradient hook")

    def broadcast(self, server: dict) -> dict:
        return {"theta": server["theta"]}

    def local_start(self, bcast: dict, cstate: dict, ctx: RoundContext) -> dict:
        return self.local_rule.init(bcast["theta"])

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        return self.local_rule.step(theta, grad, lstate, mask)

    def owned_start_keys(self) -> frozenset:
        """The entries of :meth:`local_start`'s state that are fresh tensors of its own
        (zeros, or values computed there), which nothing else reads under another name: a
        round's first local step may overwrite them (:mod:`sims.ownership`). Never an entry
        that is (or aliases) a broadcast row ``bcast[key]``; an entry of the gathered client
        state ``cstate[key]`` only where this algorithm's hooks do not read ``cstate[key]``
        after ``local_start``. Default: none."""
        return frozenset()

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
        (``problem.local_sgd``), which is equal to the step-by-step path. Under per-replica
        hyperparameters the rate is a :class:`~sims.experiments.sweep.per_replica.PerReplica`,
        which the engine binds to each participant's own rate."""
        from ..rules.optim import SGD
        cls = type(self)
        if (cls.local_step is Algorithm.local_step and cls.local_start is Algorithm.local_start
                and type(self.local_rule) is SGD and not self.needs_anchor_grad
                and not self.needs_round_gradient):
            return self.local_rule.lr
        return None

    def describe(self) -> dict:
        """A JSON-able description for provenance records."""
        return {"name": self.name}


def masked_rows(active: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """Rows of ``new`` where ``active`` else ``old`` (replicas with no participant stand still)."""
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)

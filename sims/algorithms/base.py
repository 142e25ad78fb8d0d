"""How an algorithm plugs into the engine, and what every algorithm shares.

An algorithm is an object with the hooks below. Everything is batched: server tensors
carry a leading replica axis ``R`` (independent seeds of one configuration run side by
side), client tensors a leading participant axis ``B`` (all participating clients of all
replicas in this chunk). The engine (:mod:`sims.core.engine`) owns the round loop, client
sampling, data, gathering and scattering of per-client state, the per-replica means and
how the clients' steps are executed; the algorithm owns the update rules.

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
    server state to broadcast from (Mime stores ``c`` there).
``broadcast(server) -> dict``
    What the server sends (at least ``"theta"``); each entry is gathered per participant.
``local_start(bcast, cstate, ctx) -> dict``
    The client's state at the start of the round (:func:`sims.rules.base.start`: its rule's
    state, from zeros unless the paper starts it elsewhere, and ``k``, its step count).
``local_step(theta[B, d], grad[B, d], lstate, bcast, cstate, mask[B], ctx) -> (theta, lstate)``
    One local step: ``theta - lr * rule(grad)`` with the algorithm's client rule
    ``self.local_rule`` (a :func:`sims.rules.base.chain` of transforms) and local rate
    ``self.local_lr(t)``, executed by ``ctx.run`` (the readable rule, or a fast form the
    engine planned for this rule: :mod:`sims.accel`). Algorithms do not override it. When
    ``needs_anchor_grad`` is True (default False) the engine also computes the same step's
    minibatch gradient at the round's start model and passes it as
    ``ctx.extra["anchor_grad"]`` ``[B, d]`` (Mime's SVRG correction).
``client_message(delta[B, d], lstate, cstate, ctx) -> (message, cstate, aux)``
    What a client sends, given its pseudo-gradient ``delta = theta_start - theta_end``; the
    new persistent state; ``aux``: per-participant tensors the engine sums per replica.
``server_step(server, mean_message[R, d], sums, active[R], ctx) -> (server, metrics)``
    The server update from the mean message over each replica's participants.
``uplink_bits(layout)`` / ``downlink_bits(layout)``
    Bits one participant sends / receives per round.

``ctx`` is a :class:`sims.core.context.RoundContext`.

Conventions (DESIGN.md, written once here and cited by every algorithm):

* pseudo-gradient ``delta_i = theta_t - theta_{t,i}^{end}`` (what the engine passes to
  ``client_message``); the server moves against the aggregate, ``theta <- theta - eta * U``.
  Papers printing ``Delta = theta_end - theta_t`` with ``theta + eta * ...`` (FedAda2 SU,
  Adp-Fed line 15) are the same rule with the sign flipped in both places;
* the aggregate is the uniform mean over the round's participants;
* learning-rate decay (FedLADA Sec. 4.1, "0.998 per round"): the local rate of round ``t``
  (0-based) is ``eta_l * lr_decay**t``; the global rate decays too only with
  ``decay_global=True`` (the paper is silent, spec fedlada 5.6: local only);
* weight decay ``wd``: ``"coupled"`` (default) adds ``wd * theta`` to the stochastic gradient
  before anything else (moments, amendment, control variates): L2 regularisation of the local
  objective, the paper's "L-2 weight decay coefficient" and torch.optim's ``weight_decay``;
  ``"decoupled"`` adds it after them (``theta - lr (u + wd theta)``, AdamW style; also what
  FL-Simulator's FedCM amounts to, where the weight decay is not scaled by alpha).
"""
from __future__ import annotations

import dataclasses

import torch

from ..core.batching import per_replica
from ..core.context import RoundContext  # noqa: F401  (the hooks' ctx)
from ..core.params import ParamLayout
from ..rules.base import OptimizerError, Rows, StepInfo, chain, start
from ..rules.terms import AddDecayedWeights

WD_MODES = ("coupled", "decoupled")


class Algorithm:
    """Base class with the default hooks (local SGD, no client state, mean aggregation).

    A subclass sets ``self.local_rule`` (its client rule, a chain of transforms) in
    ``__post_init__`` and defines ``local_lr(t)``, the local rate of round ``t``."""

    name = "algorithm"
    needs_uniforms = False
    needs_round_gradient = False      # engine calls round_gradient before broadcast
    needs_anchor_grad = False         # engine puts ctx.extra["anchor_grad"] in local_step

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

    def rows(self, bcast, ctx) -> Rows:
        """The shape of the chunk's client rows, read from the broadcast model without
        gathering it (:func:`sims.core.batching.per_replica`)."""
        server, rep = per_replica(bcast, "theta")
        return Rows(len(rep), server.shape[-1], server.dtype, server.device, ctx.layout)

    def local_start(self, bcast, cstate, ctx) -> dict:
        return start(self.local_rule, self.rows(bcast, ctx))

    def local_rule_at(self, ctx) -> tuple:
        """``(rule, lr)``: the client rule and the local rate of round ``ctx.t``."""
        return self.local_rule, self.local_lr(ctx.t)

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        rule, lr = self.local_rule_at(ctx)
        info = StepInfo(lstate["k"], ctx.t, ctx.layout, bcast, cstate, ctx.clients, ctx.extra)
        return ctx.run.step(rule, theta, grad, lstate, lr, mask, info, ctx.owned)

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {}

    def server_step(self, server, mean_message, sums, active, ctx):
        raise NotImplementedError

    def uplink_bits(self, layout: ParamLayout) -> int:
        return 32 * layout.d

    def downlink_bits(self, layout: ParamLayout) -> int:
        return 32 * layout.d

    def describe(self) -> dict:
        """A JSON-able description for provenance records."""
        return {"name": self.name}


def masked_rows(active: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """Rows of ``new`` where ``active`` else ``old`` (replicas with no participant stand still)."""
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)


def lr_at(lr: float, decay: float, t: int) -> float:
    """The learning rate of round ``t`` (0-based) under per-round decay."""
    return lr * decay ** t


def weight_decay(alg, *transforms):
    """``chain(*transforms)`` between the weight-decay terms of ``alg`` (fields
    ``weight_decay``, ``wd_mode``): ``wd theta`` added before everything (coupled) or after
    (decoupled)."""
    wd = getattr(alg, "weight_decay", 0.0)
    if not wd:
        return chain(*transforms)
    if alg.wd_mode == "coupled":
        return chain(AddDecayedWeights(wd), *transforms)
    return chain(*transforms, AddDecayedWeights(wd))


def check_common(alg, alpha_max: float = 1.0) -> None:
    """Checks shared by every algorithm with these fields."""
    for key in ("eta", "eta_l"):
        val = getattr(alg, key, None)
        if val is not None and not val > 0:
            raise OptimizerError(f"{key} must be positive, got {val}")
    wd = getattr(alg, "weight_decay", 0.0)
    if wd < 0:
        raise OptimizerError(f"weight_decay must be >= 0, got {wd}")
    mode = getattr(alg, "wd_mode", "coupled")
    if mode not in WD_MODES:
        raise OptimizerError(f"wd_mode must be one of {WD_MODES}, got {mode!r}")
    decay = getattr(alg, "lr_decay", 1.0)
    if not 0 < decay <= 1:
        raise OptimizerError(f"lr_decay must be in (0, 1], got {decay}")
    warm = getattr(alg, "local_warmup", 0)
    if int(warm) != warm or warm < 0:
        raise OptimizerError(f"local_warmup must be an integer >= 0 (local steps), got {warm}")
    alpha = getattr(alg, "alpha", 1.0)
    if not 0 <= alpha <= alpha_max:
        raise OptimizerError(f"alpha must be in [0, {alpha_max:g}], got {alpha}")


def mean_of(sums: dict, key: str, like: torch.Tensor) -> torch.Tensor:
    """A per-replica mean from the engine's ``sums`` (zeros when nobody took part at all)."""
    return sums[key] if key in sums else torch.zeros_like(like)


def bits(layout, vectors: int) -> int:
    """``vectors`` full-precision (32-bit) model-sized vectors."""
    return 32 * vectors * layout.d


def describe_dataclass(alg) -> dict:
    out = {"name": alg.name}
    for f in dataclasses.fields(alg):
        val = getattr(alg, f.name)
        out[f.name] = val if isinstance(val, (int, float, str, bool, type(None))) else repr(val)
    return out


class ParticipantTally:
    """The number of participants of each replica in the round, for rules that need ``|S|``
    itself and not just means (SCAFFOLD's ``c <- c + |S|/N mean dc``; DP's noise scale):
    the hooks only see per-replica means, so the algorithm counts the participants it is
    shown in ``client_message`` (every chunk of a round) and reads the count in
    ``server_step``."""

    def tally_reset(self, R: int) -> None:
        self._tally_R, self._tally = R, None

    def tally_add(self, ctx) -> None:
        c = torch.bincount(ctx.replica, minlength=self._tally_R)
        self._tally = c if self._tally is None else self._tally + c

    def tally_pop(self, like: torch.Tensor) -> torch.Tensor:
        """Participants per replica ``[R]`` in the dtype of ``like`` (zeros if none)."""
        c, self._tally = self._tally, None
        if c is None:
            return torch.zeros(self._tally_R, dtype=like.dtype, device=like.device)
        return c.to(like.dtype)

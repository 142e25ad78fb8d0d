"""User-level differential privacy as one step between the clients' messages and the server.

:class:`Private` wraps any algorithm of the registry (``Private(make_algorithm("fedada2"),
clip=0.1, noise_multiplier=1.0)``) and delegates every hook to it, adding two things
(FedAda2 Sec. 6.1 / App. H.1, read as spec fedada2 4.3: DP-FedAvg-style user-level DP):

1. ``client_message``: each participant's record is clipped in L2 to ``clip`` (``c``):
   ``x <- x * min(1, c / ||x||)``. The record is everything the participant sends that the
   engine aggregates: the message (the update ``delta = theta_start - theta_end`` for every
   FedAda2 method) and every per-participant ``aux`` tensor (SCAFFOLD's ``dc``, FedCM's
   ``g_a``, Fed-LAMB's ``v``, ...), clipped jointly, so that the sensitivity of the sum is
   ``c`` whatever the algorithm sends. For the FedAda2 methods (no ``aux``) this is exactly
   "the update clipped to c". Clipping acts on what the wrapped ``client_message`` returns, so
   client state it keeps (Fed-EF's error) is computed from the unclipped message.
2. ``server_step``: the engine's uniform mean over the ``|S|`` participants gets Gaussian
   noise ``N(0, sigma^2 c^2 I) / |S|`` (``sigma`` = ``noise_multiplier``), and so does every
   aux mean, before the wrapped algorithm's server update (its optimizer) sees them.

``|S|`` is counted over the round's chunks with :class:`sims.algorithms.base.ParticipantTally`
(the hooks only see means). The noise of round ``t`` of the replica with seed ``s`` comes from
``numpy.random.default_rng([s, t, DP_STREAM])`` (:func:`noise_rng`): reproducible from the
run's seed and round, independent of batching, and a stream of its own (the engine's draws of
participants and minibatches use ``[s, t]``). The seeds reach ``server_step`` through
``ctx.extra["seeds"]`` (:func:`sims.core.engine.run` puts them there).

``clip = inf`` and ``noise_multiplier = 0`` leave every message and mean untouched: the run is
bit-for-bit the wrapped algorithm's (tests hold every registry algorithm to this).

Algorithms that need the engine's mean full gradient of the participants before the broadcast
(``needs_round_gradient``: Mime, Mime-LAMB) cannot be made private here: the engine hands
over only the mean, so nobody can clip a participant's contribution. They are refused (one
line) unless the wrapper is the identity.

With ``delta`` and ``sampling_rate`` (``q = m / N``) given, every round records
``dp_epsilon``, the epsilon spent so far (:class:`sims.privacy.accounting.EpsilonCurve`) by
the ``accountant`` chosen (``"rdp"``, default, or ``"pld"``). A ``sampling_rate`` typed by
hand is checked against the run's participation before any work (the engine calls
:meth:`Private.check_population`): ``m / N`` for a fixed ``m``, ``p`` for Bernoulli, 1 for
full participation; a mismatch is a one-line :class:`PrivacyError`.
:meth:`Private.for_participation` derives it instead, and calibrates the noise multiplier
to a target ``epsilon`` when one is given (:func:`sims.privacy.accounting.noise_for_epsilon`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..algorithms.base import Algorithm, ParticipantTally
from .accounting import AccountingError, EpsilonCurve, check_accountant, noise_for_epsilon

#: Entropy tag that separates the DP noise stream from the engine's ``[seed, t]`` draws.
DP_STREAM = 0x0D9_5EED


class PrivacyError(ValueError):
    """Bad DP parameters or an algorithm that cannot be made private (one line)."""


def noise_rng(seed: int, t: int) -> np.random.Generator:
    """The generator of round ``t``'s DP noise for the replica with ``seed``."""
    return np.random.default_rng([int(seed), int(t), DP_STREAM])


def clip_factors(records: list[torch.Tensor], clip: float) -> torch.Tensor:
    """``min(1, clip / ||record_b||)`` per participant ``b``; ``records`` are ``[B, ...]``
    tensors whose rows together form each participant's record (joint L2 norm)."""
    sq = sum(r.reshape(len(r), -1).square().sum(1) for r in records)
    return (clip / sq.sqrt()).clamp(max=1.0)      # norm 0 -> inf -> 1


class Private(Algorithm, ParticipantTally):
    """``inner`` under user-level DP: per-participant L2 clipping to ``clip`` and Gaussian
    noise ``N(0, (noise_multiplier * clip)^2) / |S|`` on the mean (module docstring)."""

    def __init__(self, inner, clip: float = math.inf, noise_multiplier: float = 0.0, *,
                 delta: float | None = None, sampling_rate: float | None = None,
                 accountant: str = "rdp"):
        if isinstance(inner, Private):
            raise PrivacyError("the algorithm is already private; wrap it once")
        try:
            clip, sigma = float(clip), float(noise_multiplier)
        except (TypeError, ValueError):
            raise PrivacyError(f"clip and noise_multiplier must be numbers, got {clip!r}, "
                               f"{noise_multiplier!r}") from None
        if not clip > 0:
            raise PrivacyError(f"clip must be > 0 (inf: no clipping), got {clip}")
        if not (math.isfinite(sigma) and sigma >= 0):
            raise PrivacyError(f"noise_multiplier must be a finite number >= 0, got {sigma}")
        if sigma > 0 and math.isinf(clip):
            raise PrivacyError("noise_multiplier > 0 needs a finite clip (the noise is "
                               "sigma * clip)")
        if (delta is None) != (sampling_rate is None):
            raise PrivacyError("give both delta and sampling_rate (q = m / N) to record "
                               "epsilon, or neither")
        try:
            accountant = check_accountant(accountant)
        except AccountingError as exc:
            raise PrivacyError(str(exc)) from None
        self.inner, self.clip, self.noise_multiplier = inner, clip, sigma
        self.delta, self.sampling_rate, self.accountant = delta, sampling_rate, accountant
        self.note: str | None = None           # set by check_population (fixed m vs Poisson)
        if self.is_private and getattr(inner, "needs_round_gradient", False):
            raise PrivacyError(f"{inner.name}: needs the engine's mean full gradient of the "
                               "participants (needs_round_gradient), which cannot be clipped "
                               "per participant; it cannot run under DP")
        try:
            self.curve = (EpsilonCurve(sampling_rate, sigma, delta, accountant)
                          if delta is not None else None)
        except AccountingError as exc:
            raise PrivacyError(str(exc)) from None
        self.name = f"{inner.name}+dp"
        self.tally_reset(0)

    @classmethod
    def for_participation(cls, inner, participation, n_clients: int, *, clip: float,
                          noise_multiplier: float | None = None, epsilon: float | None = None,
                          delta: float | None = None, rounds: int | None = None,
                          accountant: str = "rdp") -> "Private":
        """``inner`` under DP with the sampling rate derived from ``participation``
        (:class:`sims.core.participation.Participation` or its text, ``"m=10"``) over
        ``n_clients``, and either ``noise_multiplier`` or a target ``epsilon`` (with
        ``delta`` and ``rounds``) that the noise is calibrated to."""
        from ..core.participation import Participation
        if isinstance(participation, str):
            participation = Participation.parse(participation)
        q = sampling_rate_of(participation, n_clients)
        if (noise_multiplier is None) == (epsilon is None):
            raise PrivacyError("give either noise_multiplier (sigma) or a target epsilon")
        if epsilon is not None:
            if delta is None or rounds is None:
                raise PrivacyError("a target epsilon needs delta and rounds")
            try:
                noise_multiplier = noise_for_epsilon(q, int(rounds), float(epsilon),
                                                     float(delta), accountant)
            except AccountingError as exc:
                raise PrivacyError(str(exc)) from None
        return cls(inner, clip, noise_multiplier, delta=delta,
                   sampling_rate=q if delta is not None else None, accountant=accountant)

    def check_population(self, participation, n_clients: int, rounds: int | None = None
                         ) -> None:
        """The typed ``sampling_rate`` against the run's participation (before any work);
        with ``rounds``, :attr:`note` is set to the fixed-``m`` against Poisson note
        (:func:`sims.privacy.accounting.sampling_note`), which :meth:`describe` records."""
        if self.sampling_rate is None:
            return
        q = sampling_rate_of(participation, n_clients)
        if not math.isclose(self.sampling_rate, q, rel_tol=1e-9, abs_tol=1e-12):
            raise PrivacyError(f"sampling_rate {self.sampling_rate:g} does not match the "
                               f"participation ({_participation_text(participation)} of "
                               f"N={n_clients} clients: q={q:g}); use q = m / N, or "
                               "Private.for_participation to derive it")
        if rounds and participation.kind == "fixed" and self.noise_multiplier > 0:
            from .accounting import sampling_note
            self.note = sampling_note(n_clients, participation.m, self.noise_multiplier,
                                      int(rounds), self.delta, self.accountant)

    # ------------------------------------------------------------------ delegation
    @property
    def is_private(self) -> bool:
        return math.isfinite(self.clip) or self.noise_multiplier > 0

    def __getattr__(self, key):
        # only called for attributes Private itself lacks: the wrapped algorithm's fields
        if key.startswith("__") or key == "inner":
            raise AttributeError(key)
        return getattr(self.__dict__["inner"], key)

    @property
    def needs_uniforms(self):
        return self.inner.needs_uniforms

    @property
    def needs_round_gradient(self):
        return getattr(self.inner, "needs_round_gradient", False)

    @property
    def needs_anchor_grad(self):
        return getattr(self.inner, "needs_anchor_grad", False)

    @property
    def local_rule(self):
        return self.inner.local_rule

    def local_rule_at(self, ctx):
        return self.inner.local_rule_at(ctx)

    def init_server(self, theta0):
        self.tally_reset(theta0.shape[0])
        return self.inner.init_server(theta0)

    def client_state_spec(self):
        return self.inner.client_state_spec()

    def round_gradient(self, server, mean_grad, active):
        return self.inner.round_gradient(server, mean_grad, active)

    def broadcast(self, server):
        return self.inner.broadcast(server)

    def local_start(self, bcast, cstate, ctx):
        return self.inner.local_start(bcast, cstate, ctx)

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        return self.inner.local_step(theta, grad, lstate, bcast, cstate, mask, ctx)

    def uplink_bits(self, layout):
        return self.inner.uplink_bits(layout)

    def downlink_bits(self, layout):
        return self.inner.downlink_bits(layout)

    def client_memory(self, layout) -> int:
        from ..algorithms.registry import client_memory
        return client_memory(self.inner, layout)

    def describe(self) -> dict:
        return {**self.inner.describe(), "name": self.name,
                "dp": {"clip": self.clip, "noise_multiplier": self.noise_multiplier,
                       "delta": self.delta, "sampling_rate": self.sampling_rate,
                       "level": "user", "clipped": "message and aux jointly",
                       "accountant": f"dp_accounting {self.accountant.upper()}, Poisson "
                                     "sampling",
                       **({"sampling_note": self.note} if self.note else {})}}

    # ------------------------------------------------------------------ the DP step
    def client_message(self, delta, lstate, cstate, ctx):
        msg, cstate, aux = self.inner.client_message(delta, lstate, cstate, ctx)
        self.tally_add(ctx)
        if math.isfinite(self.clip):
            keys = sorted(aux)
            f = clip_factors([msg, *(aux[k] for k in keys)], self.clip)
            msg = msg * f.view(-1, *([1] * (msg.dim() - 1))).to(msg.dtype)
            aux = {k: aux[k] * f.view(-1, *([1] * (aux[k].dim() - 1))).to(aux[k].dtype)
                   for k in keys}
        return msg, cstate, aux

    def server_step(self, server, mean_message, sums, active, ctx):
        count = self.tally_pop(mean_message)
        if self.noise_multiplier > 0:
            mean_message, sums = self._add_noise(mean_message, sums, count, ctx)
        server, metrics = self.inner.server_step(server, mean_message, sums, active, ctx)
        if self.curve is not None:
            metrics = {**metrics, "dp_epsilon": self.curve(ctx.t + 1)}
        return server, metrics

    def _add_noise(self, mean_message, sums, count, ctx):
        seeds = ctx.extra.get("seeds")
        if seeds is None or len(seeds) != len(mean_message):
            raise PrivacyError("the DP noise needs the run's seeds in ctx.extra['seeds'] "
                               "(sims.core.engine.run provides them)")
        keys = sorted(sums)
        msg = mean_message.clone()
        out = {k: sums[k].clone() for k in keys}
        for r, seed in enumerate(seeds):
            n = int(count[r])
            if n == 0:
                continue                    # nobody took part: the replica stands still
            rng = noise_rng(seed, ctx.t)
            std = self.noise_multiplier * self.clip / n
            msg[r] += _gauss(rng, msg[r], std)
            for k in keys:
                out[k][r] += _gauss(rng, out[k][r], std)
        return msg, out


def sampling_rate_of(participation, n_clients: int) -> float:
    """The per-round sampling rate the accountant assumes: ``m / N`` (fixed ``m``), ``p``
    (Bernoulli) or 1 (full participation)."""
    kind = participation.kind
    if kind == "fixed":
        if participation.m > n_clients:
            raise PrivacyError(f"cannot sample m={participation.m} of N={n_clients} clients")
        return participation.m / n_clients
    if kind == "bernoulli":
        return float(participation.p)
    return 1.0


def _participation_text(participation) -> str:
    return {"fixed": f"m={participation.m}", "bernoulli": f"p={participation.p}"}.get(
        participation.kind, "full participation")


def _gauss(rng: np.random.Generator, like: torch.Tensor, std: float) -> torch.Tensor:
    z = rng.standard_normal(tuple(like.shape)) * std
    return torch.as_tensor(z, dtype=like.dtype, device=like.device)

"""Fed-EF family (Li & Li): compressed federated SGD with and without error feedback.

One readable class covers the paper's Algorithms 1-4; the spec is
``shared/specs/fed-ef.md`` section 1. With the pseudo-gradient convention
``delta_i = theta_t - theta_{t,i}^{(K+1)}`` (spec section 0; the boxes print the opposite
sign) a round is:

* clients (Alg. 2 lines 5-12): ``K`` local SGD steps with ``eta_l``; message
  ``m_i = C(delta_i + e_i)`` and error ``e_i <- e_i + delta_i - m_i`` with error feedback
  (Fed-EF), or ``m_i = C(delta_i)`` without it (Alg. 1 direct compression; Alg. 4 "Stoc"
  with the unbiased quantizer; full precision with the identity);
* server (lines 15-19): ``U = mean_i m_i`` over the participants (``1/m`` under partial
  participation, spec 1.3); Fed-EF-SGD: ``theta <- theta - eta U``; Fed-EF-AMS: AMSGrad on
  ``U`` with epsilon inside the square root and no bias correction (spec 6.3);
  ``ams_convention="torch"`` is ``torch.optim.Adam(amsgrad=True)``'s reading instead (bias
  correction, epsilon outside the root), under which a coordinate moves at most about
  ``eta`` a round (the printed reading can move it several times ``eta`` early on, while
  ``v`` is still ``1 - beta2^t`` of its running scale);
* partial participation (Sec. 4.3): inactive clients keep their error (the paper's
  ``e_{t,i} = e_{t-1,i}`` is an index typo for ``e_{t+1,i} = e_{t,i}``, spec 6.2);
* error restarting (Sec. 5.4): from round ``restart_start`` on, a participant whose error
  was last updated before round ``t - S`` has it zeroed before use (``last < t - S``, spec
  1.4 and 6.6);
* two-way compression (Alg. 3 as corrected in spec 1.5): the server keeps an error
  ``phi`` and broadcasts ``H = C(U + phi)``; ``phi <- phi + U - H``; ``theta <- theta - eta H``.
  Clients apply the same ``H`` to their copies, so every copy equals ``theta``.

``round_metrics`` reports the compression discrepancy ``q_A^2`` of the round (Assumption 3,
App. C.2: ``||mean_i C(x_i) - mean_i x_i||^2 / ||mean_i x_i||^2`` with ``x_i`` the compressor
inputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from ..rules.compress import Identity, error_feedback
from ..rules.optim import SGD, Adam, OptimizerError
from ..row_source import client_rows
from .base import Algorithm, masked_rows


AMS_CONVENTIONS = ("paper", "torch")


@dataclass
class FedEF(Algorithm):
    eta: float
    eta_l: float
    compressor: object = field(default_factory=Identity)
    error_feedback: bool = True
    server: str = "sgd"                 # "sgd" (Fed-EF-SGD) or "amsgrad" (Fed-EF-AMS)
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    restart_period: int | None = None   # S of error restarting; None = off
    restart_start: int = 0              # first (0-based) round at which restarting applies
    two_way: bool = False               # Alg. 3: compress the broadcast too
    ams_convention: str = "paper"       # "paper" (Alg. 2 as printed) or "torch" (see below)

    def __post_init__(self):
        if self.server not in ("sgd", "amsgrad"):
            raise OptimizerError(f"Fed-EF server must be 'sgd' or 'amsgrad', got {self.server!r}")
        if self.two_way and self.compressor.needs_uniforms:
            raise OptimizerError("two-way compression needs a deterministic compressor "
                                 "(Alg. 3 uses the biased C on the broadcast), not Stoc")
        if self.ams_convention not in AMS_CONVENTIONS:
            raise OptimizerError(f"Fed-EF-AMS convention must be one of {AMS_CONVENTIONS}, "
                                 f"got {self.ams_convention!r}")
        if self.restart_period is not None and self.restart_period < 1:
            raise OptimizerError(f"restart period S must be >= 1, got {self.restart_period}")
        self.local_rule = SGD(self.eta_l)
        torch_style = self.ams_convention == "torch"
        self.server_rule = (SGD(self.eta) if self.server == "sgd" else
                            Adam(self.eta, self.beta1, self.beta2, self.eps, amsgrad=True,
                                 eps_inside_sqrt=not torch_style, bias_correction=torch_style))
        self.needs_uniforms = self.compressor.needs_uniforms

    @property
    def name(self) -> str:
        ef = "fed-ef" if self.error_feedback and self.compressor.biased else "fed"
        return f"{ef}-{'sgd' if self.server == 'sgd' else 'ams'}"

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        server = {"theta": theta0.clone(), "opt": self.server_rule.init(theta0)}
        if self.two_way:
            server["phi"] = torch.zeros_like(theta0)
        return server

    def client_state_spec(self):
        return {"error": "vector"} if self.error_feedback else {}

    def server_step(self, server, mean_message, sums, active, ctx):
        """Alg. 2 lines 15-19 (one-way) or Alg. 3 lines 15-21 as corrected (two-way)."""
        direction, opt = self.server_rule.direction(mean_message, server["opt"])
        new = dict(server)
        new["opt"] = {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}
        if self.two_way:
            _, sent, residual = error_feedback(self.compressor, direction, server["phi"],
                                               ctx.layout)
            new["phi"] = masked_rows(active, residual, server["phi"])
            direction = sent
        new["theta"] = masked_rows(active, server["theta"] - self.eta * direction, server["theta"])
        metrics = {}
        if self.compressor.biased or self.error_feedback:
            metrics["qA2"] = torch.full_like(active, float("nan"), dtype=mean_message.dtype)
            if "compress_in" in sums:
                mean_in = sums["compress_in"]
                num = ((mean_message - mean_in) ** 2).sum(-1)
                qa2 = num / (mean_in * mean_in).sum(-1).clamp_min(1e-300)
                metrics["qA2"] = torch.where(active, qa2, metrics["qA2"])
        return new, metrics

    # ------------------------------------------------------------------ clients
    #: the participants' error rows read and written where they are (in the engine's client
    #: state, :class:`sims.row_source.SlotRows`) where TopK's C kernel takes the step; off:
    #: gathered, and the residual written back by the engine (the same bits, tests/test_fed_ef_rows.py)
    error_rows_in_place: ClassVar[bool] = True

    def client_message(self, delta, lstate, cstate, ctx):
        """Alg. 2 lines 11-12: ``m = C(delta + e)``, ``e <- delta + e - m``.

        The error ``e`` is the participants' rows of the engine's client state where they
        are (:func:`sims.row_source.client_rows`): TopK's C kernel reads them through a
        table of row addresses and writes the residual over them in place, the new state
        handing back those rows (the engine writes nothing back); a stale row (error
        restarting) is read as a shared zero row. Anything else (another compressor, the C
        kernels off, a plain-dict ``cstate``) gathers them as before (:func:`sims.rules.compress.
        error_feedback`). Saves a gather and a write-back of ``[B, d]`` a round. Measured on
        the issue-16 benchmark (one thread; machine shared with other jobs): interleaved
        engine runs in one process, in place against gathered (:attr:`error_rows_in_place`),
        the fastest of 6 rounds, medians over 5 and 7 repeats, a Fed-EF-SGD round 41.7 ->
        40.0 ms and 46.5 -> 44.8 ms, Fed-EF-AMS 42.7 -> 40.9 ms and 46.7 -> 44.5 ms (0.93-0.99
        per repeat), ``client_message`` 3.3 -> 2.4 ms and 4.1 -> 2.8 ms;
        ``benchmarks/algorithms_vs_loop.py --threads 1 --repeats 3``, three runs each,
        alternating with the former code: ``speedup_vs_loop`` Fed-EF-SGD 2.03-2.18x ->
        2.22-2.25x, Fed-EF-AMS 2.02-2.17x -> 2.19-2.21x (``ratio_to_fused_fedsgd`` 1.13-1.16
        -> 1.10-1.11 and 1.14-1.18 -> 1.11-1.13; ``compression``'s ``message_seconds``
        3.3-4.1 -> 2.5-2.6 ms)."""
        if not self.error_feedback:
            msg = self.compressor(delta, ctx.layout, ctx.uniforms)
            return msg, cstate, ({"compress_in": delta} if self.compressor.biased else {})
        error = client_rows(cstate, "error", self.error_rows_in_place)
        stale = None
        if self.restart_period is not None and ctx.t >= self.restart_start:
            stale = ctx.last_round < ctx.t - self.restart_period
            if not bool(stale.any()):   # zeroed rows in one pass; none stale: no pass
                stale = None
        target, msg, residual = error_feedback(self.compressor, delta, error, ctx.layout,
                                               ctx.uniforms, zero=stale)
        return msg, {"error": residual}, {"compress_in": target}

    # ------------------------------------------------------------------ accounting
    def uplink_bits(self, layout):
        return self.compressor.bits(layout)

    def downlink_bits(self, layout):
        return self.compressor.bits(layout) if self.two_way else 32 * layout.d

    def describe(self):
        return {"name": self.name, "eta": self.eta, "eta_l": self.eta_l,
                "compressor": repr(self.compressor), "error_feedback": self.error_feedback,
                "server": self.server, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps,
                "restart_period": self.restart_period, "restart_start": self.restart_start,
                "two_way": self.two_way, "ams_convention": self.ams_convention}

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

import torch

from ..rules.base import OptimizerError, chain
from ..rules.compress import Identity
from ..rules.moments import Adaptive
from ..rules.server import SGD
from .base import Algorithm, check_common, masked_rows


AMS_CONVENTIONS = ("paper", "torch")


@dataclass
class FedEF(Algorithm):
    """Fed-EF Alg. 1-4 (module docstring): local SGD, compressed messages with or without
    error feedback, server SGD or AMSGrad.

    Reference: :func:`sims.reference.fed_ef.run_fed_ef_reference`."""
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
        check_common(self)
        if self.server not in ("sgd", "amsgrad"):
            raise OptimizerError(f"Fed-EF server must be 'sgd' or 'amsgrad', got {self.server!r}")
        if self.two_way and self.compressor.needs_uniforms:
            raise OptimizerError("two-way compression needs a deterministic compressor "
                                 "(Alg. 3 uses the biased C on the broadcast), not Stoc")
        if self.ams_convention not in AMS_CONVENTIONS:
            raise OptimizerError(f"Fed-EF-AMS convention must be one of {AMS_CONVENTIONS}, "
                                 f"got {self.ams_convention!r}")
        if self.server == "amsgrad" and not self.eps > 0:
            raise OptimizerError(f"eps must be positive, got {self.eps}")
        if self.restart_period is not None and self.restart_period < 1:
            raise OptimizerError(f"restart period S must be >= 1, got {self.restart_period}")
        self.local_rule = chain()                      # lines 6-9: local SGD
        torch_style = self.ams_convention == "torch"
        self.server_rule = (SGD() if self.server == "sgd" else      # lines 17-19
                            chain(Adaptive("amsgrad", self.beta1, self.beta2, self.eps,
                                           eps_inside=not torch_style,
                                           bias_correction=torch_style)))
        self.needs_uniforms = self.compressor.needs_uniforms

    def local_lr(self, t):
        return self.eta_l

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
        direction, opt = self.server_rule.update(mean_message, server["opt"], server["theta"],
                                                 None)
        new = dict(server)
        new["opt"] = {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}
        if self.two_way:
            _, sent, residual = ctx.run.error_feedback(self.compressor, direction,
                                                       server["phi"], ctx.layout)
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
    def client_message(self, delta, lstate, cstate, ctx):
        """Alg. 2 lines 11-12: ``m = C(delta + e)``, ``e <- delta + e - m`` (with error
        restarting, a stale ``e`` is zero first); without error feedback ``m = C(delta)``."""
        if not self.error_feedback:
            msg = ctx.run.compress(self.compressor, delta, ctx.layout, ctx.uniforms)
            return msg, cstate, ({"compress_in": delta} if self.compressor.biased else {})
        stale = None
        if self.restart_period is not None and ctx.t >= self.restart_start:
            stale = ctx.last_round < ctx.t - self.restart_period
            if not bool(stale.any()):
                stale = None
        target, msg, residual = ctx.run.error_feedback(self.compressor, delta, cstate["error"],
                                                       ctx.layout, ctx.uniforms, zero=stale)
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

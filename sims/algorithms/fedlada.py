"""FedLADA family (Sun, Shen, Sun, Ding, Tao): FedLADA and the baselines it runs against.

Spec: ``shared/specs/fedlada.md`` (section numbers below). Conventions (pseudo-gradient sign,
learning-rate decay, weight decay) are in :mod:`sims.algorithms.adaptive`. The paper's
experimental settings (spec 3.1) are quoted on each class; the defaults here are the paper's
where it gives one, except ``lr_decay = 1`` (no decay) and ``weight_decay = 0``, which a
user sets for a paper-scale run (``lr_decay=0.998``, ``weight_decay=1e-3`` or ``1e-2``).

* :class:`FedAvg` -- local SGD, ``theta <- theta - eta_g mean(delta)`` (McMahan et al.).
* :class:`FedProx` -- local SGD on ``F_i + mu/2 ||x - x^t||^2`` (Li et al.; ``mu`` not
  given by the paper, FL-Simulator's 0.1 used).
* :class:`Scaffold` -- SCAFFOLD option II and the alpha-scaled correction of Eq. (26).
* :class:`FedCM` -- client-level momentum: ``x <- x - eta_l (alpha g + (1 - alpha) g_a)``.
* :class:`FedAdam` -- local SGD, server Adam (Alg. 1; Reddi et al.).
* :class:`FedAdamCM` -- "FedAdam(*)": FedCM local steps with server Adam (Table 3, Fig. 5).
* :class:`FedLADA` -- Alg. 3: local AMSGrad with the amended correction ``g_a``,
  server-averaged ``vhat``, global learning rate ``eta_g``.
* :class:`LocalAdam` -- FedLADA with ``alpha = 1`` (spec 1.3: the paper's LocalAdam).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..rules.optim import OptimizerError, _masked, full_like
from ..ownership import step_owned
from ..row_source import ScaledRows, ZeroRows, server_rows
from .adaptive import (FedOpt, LocalAdaptive, LocalAdaptiveClients, ParticipantTally,
                       ReplicaRows, _affine_sgd, bits, check_common, describe_dataclass,
                       lr_at, mean_of)
from .base import Algorithm, masked_rows


@dataclass
class FedAvg(FedOpt):
    """FedAvg (spec 1.5 table): ``K`` local SGD steps, ``x^{t+1} = x^t - eta_g mean(x^t -
    x^t_{i,K})``. Paper settings: ``eta_l = 0.1``, ``eta_g = 1``, weight decay ``1e-3``, decay
    0.998 per round. Also Fed-LAMB's Fed-SGD (spec fed-lamb 1.4) and FedAda2's FedAvg (no
    server momentum, server rate 1)."""
    name = "fedavg"


@dataclass
class FedProx(FedOpt):
    """FedProx (spec 1.5): local SGD on ``F_i(x) + mu/2 ||x - x^t||^2``, i.e. the gradient
    ``g + mu (x - x^t)``; the paper gives no ``mu``, 0.1 is FL-Simulator's default."""
    name = "fedprox"
    mu: float = 0.1


@dataclass
class FedCM(FedOpt):
    """FedCM (Xu et al. 2021; spec 1.5): ``x <- x - eta_l (alpha g + (1 - alpha) Delta^t)`` with
    ``Delta^t = (x^{t-1} - x^t) / (eta_g eta_l K)``, broadcast with the model (2d down). The
    paper does not state FedCM's ``alpha``; 0.1 (FedCM's and FL-Simulator's default)."""
    name = "fedcm"
    alpha: float = 0.1


@dataclass
class FedAdam(FedOpt):
    """FedAdam (Alg. 1, Reddi et al.): local SGD, server ``m = b1 m + (1 - b1) U``,
    ``v = b2 v + (1 - b2) U^2``, ``x <- x - eta_g m / (sqrt(v) + tau)``, ``v_0 = tau^2``, no
    bias correction (spec 1.2, the standard Reddi form; FL-Simulator adds ``tau = 0.01``).
    Paper settings: ``eta_l = 0.1``, ``eta_g = 0.1``, ``b1 = 0.9``, ``b2 = 0.99``, initial
    second moment ``1e-2``: the default ``tau = 0.1`` (``v0 = tau^2 = 1e-2``) is the paper's
    (FedLADA Sec. 4.1)."""
    name = "fedadam"
    server: str = "adam"
    eta: float = 0.1
    tau: float = 0.1


@dataclass
class FedAdamCM(FedAdam):
    """FedAdam(*) = "amended FedAdam" (Table 3, Fig. 5): FedCM local steps (amended SGD with
    weight ``alpha``) and server Adam. The ``g_a`` the clients receive is the averaged
    pseudo-gradient per local step by default (``ga_source="pseudo"``), or the server's
    actual (preconditioned) step with ``ga_source="global"`` (ambiguity, see
    :class:`sims.algorithms.adaptive.FedOpt`). ``alpha = 1`` is FedAdam."""
    name = "fedadam-cm"
    alpha: float = 0.1


# ------------------------------------------------------------------------------ SCAFFOLD

@dataclass
class Scaffold(ParticipantTally, Algorithm):
    """SCAFFOLD (Karimireddy et al. 2020; spec 1.5) with the alpha-scaled correction (Eq. 26).

    Client ``i`` (control ``c_i``, persistent, zero at start) receives ``x^t`` and ``c``::

        y <- y - eta_l (g + alpha (c - c_i))          (alpha = 1: SCAFFOLD Eq. 22; 0: FedAvg)
        c_i^+ = c_i - c + (x^t - y_K) / (K eta_l)     (option II; option I: c_i^+ = g(x^t))

    and sends ``delta = x^t - y_K`` and ``dc_i = c_i^+ - c_i`` (2d up). Server:
    ``x <- x - eta_g mean(delta)``, ``c <- c + (1/N) sum_{i in S} dc_i`` with ``N =
    n_clients``, the population size, which the run must give: the algorithm cannot see it
    (the hooks get per-replica means), and ``N = |S|`` is wrong under partial participation
    (0.26 relative error in the server model after 30 rounds on a 10%-participation problem),
    so ``n_clients=None`` is refused when the run starts (``init_server``). ``K`` is the number of
    steps the client took and ``eta_l`` the rate of the round (learning-rate decay). Option I
    uses the first local step's stochastic gradient, which is taken at ``x^t``.
    Table 10 sweeps ``alpha`` in ``{0, .25, ..., 1.5}`` (so ``alpha <= 2`` is allowed).
    """
    name = "scaffold"
    eta: float = 1.0
    eta_l: float = 0.1
    alpha: float = 1.0
    control: str = "II"
    n_clients: int | None = None
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    lr_decay: float = 1.0
    decay_global: bool = False

    def __post_init__(self):
        check_common(self, alpha_max=2.0)
        if self.control not in ("I", "II"):
            raise OptimizerError(f"SCAFFOLD control must be 'I' or 'II', got {self.control!r}")
        if self.n_clients is not None and self.n_clients < 1:
            raise OptimizerError(f"n_clients must be >= 1, got {self.n_clients}")

    def init_server(self, theta0):
        if self.n_clients is None:
            raise OptimizerError("scaffold: n_clients (the population size N in c <- c + "
                                 "(1/N) sum_S dc_i) is required; pass n_clients="
                                 "problem.n_clients")
        self._tally_reset(theta0.shape[0])
        return {"theta": theta0.clone(), "c": torch.zeros_like(theta0)}

    def client_state_spec(self):
        return {"c": "vector"}

    def broadcast(self, server):
        return {"theta": server["theta"], "c": server["c"]}

    def local_start(self, bcast, cstate, ctx):
        theta = bcast["theta"]
        out = {"k": torch.zeros(theta.shape[0], dtype=theta.dtype, device=theta.device),
               "c": bcast["c"]}                     # the server control, kept for line c_i^+
        if self.control == "I":
            out["gx"] = torch.zeros_like(theta)
        return out

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
        g = grad
        if self.weight_decay and self.wd_mode == "coupled":
            g = g + self.weight_decay * theta
        new_state = {"k": lstate["k"] + (1 if mask is None else mask.to(theta.dtype)),
                     "c": lstate["c"]}
        if self.control == "I":
            first = (lstate["k"] == 0).unsqueeze(-1)
            new_state["gx"] = _masked(mask, torch.where(first, g, lstate["gx"]), lstate["gx"])
        d = g + self.alpha * (bcast["c"] - cstate["c"]) if self.alpha else g
        new = theta - lr * d
        if self.weight_decay and self.wd_mode == "decoupled":
            new = new - lr * self.weight_decay * theta
        return _masked(mask, new, theta), new_state

    def affine_local_sgd(self, bcast, cstate, ctx, steps):
        """:meth:`local_step` over the whole round as one :class:`sims.rules.optim.AffineSGD`
        (decay ``lr wd``, shift ``-lr alpha (c - c_i)``) for the engine's fused path, and the
        local state it leaves; None for option I (it needs the first step's gradient)."""
        if self.control != "II" or type(self).local_step is not Scaffold.local_step:
            return None
        corr = bcast["c"] - cstate["c"] if self.alpha else None
        return (_affine_sgd(self, bcast, 0.0, 1.0, None, ctx, correction=corr * self.alpha
                            if corr is not None else None),
                {"k": steps, "c": bcast["c"]})

    def client_message(self, delta, lstate, cstate, ctx):
        self._tally_add(ctx)
        c_i = cstate["c"]
        if self.control == "II":
            lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
            c_plus = c_i - lstate["c"] + delta / (lr * lstate["k"].clamp_min(1).unsqueeze(-1))
        else:
            c_plus = lstate["gx"]
        return delta, {"c": c_plus}, {"dc": c_plus - c_i}

    def server_step(self, server, mean_message, sums, active, ctx):
        count = self._tally_pop(mean_message)
        eta = lr_at(self.eta, self.lr_decay, ctx.t) if self.decay_global else self.eta
        frac = count / self.n_clients
        new = {"theta": masked_rows(active, server["theta"] - eta * mean_message, server["theta"]),
               "c": masked_rows(active, server["c"] + frac.unsqueeze(-1)
                                * mean_of(sums, "dc", mean_message), server["c"])}
        return new, {}

    def uplink_bits(self, layout):
        return bits(layout, 2)

    def downlink_bits(self, layout):
        return bits(layout, 2)

    def client_memory(self, layout) -> int:
        """The model, the server control ``c`` and the client's own ``c_i``."""
        return 3 * layout.d

    def describe(self):
        return describe_dataclass(self)


# ------------------------------------------------------------------------------ FedLADA

@dataclass
class FedLADA(LocalAdaptiveClients, Algorithm):
    """FedLADA, Alg. 3 (spec 1.4): local AMSGrad amended by the global direction ``g_a``.

    Round ``t``; every participant receives ``x^t``, ``v^t`` and ``g_a^t`` and, with
    ``lr = eta_l lr_decay^t``, ``m_0 = 0``, ``vhat_0 = v^t``, ``v_0 = v^t`` (``v_init="server"``;
    ``"zero"`` starts the EMA at 0 -- the algorithm never sets ``v_{i,0}``, spec 5.2)::

        for tau = 1..K:                                        (printed "1..K-1": spec 5.1)
            m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  vhat = max(v, vhat)
            x <- x - lr (alpha m / sqrt(vhat) + (1 - alpha) g_a)        (g_a NOT preconditioned)

    and sends ``delta_i = x^t - x_{i,K}`` and ``vhat_{i,K}`` (2d up). Server (lines 16-18)::

        v^{t+1} = mean_i vhat_{i,K};   x^{t+1} = x^t - eta_g mean_i delta_i
        g_a^{t+1} = mean_i delta_i / (lr K_i)     (= (x^t - x^{t+1}) / (eta_g eta_l K) for equal K)

    so ``g_a^{t+1} = alpha mean_i (1/K_i) sum_tau m/sqrt(vhat) + (1 - alpha) g_a^t`` (Eq. 4)
    holds exactly (with decoupled weight decay the decay term joins the average). No epsilon in
    the denominator and no bias correction: ``vhat >= v^0 = eps_v^2`` (the paper's ``1e-8`` is
    ``eps_v``; its text also says "initial second-order momenta 1e-8", ``v0`` overrides).
    Downlink: ``x``, ``v`` and ``g_a`` (3d; Table 11's "2Nd" leaves ``g_a`` out, which a client
    that skipped the previous round cannot rebuild); ``alpha = 1`` needs no ``g_a`` (2d).
    Paper settings: ``eta_l = 1e-3``, ``eta_g = 1``, ``b1 = 0.9``, ``b2 = 0.99``, ``alpha = 0.1``
    (CIFAR-10) / ``0.05``, weight decay ``1e-2``, decay 0.998.
    """
    name = "fedlada"
    eta: float = 1.0
    eta_l: float = 1e-3
    alpha: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    eps_v: float = 1e-8
    v0: float | None = None
    v_init: str = "server"
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    lr_decay: float = 1.0
    decay_global: bool = False

    def __post_init__(self):
        check_common(self)
        if self.v_init not in ("server", "zero"):
            raise OptimizerError(f"v_init must be 'server' or 'zero', got {self.v_init!r}")
        if not (self.v0 if self.v0 is not None else self.eps_v) > 0:
            raise OptimizerError("the initial second moment must be positive")
        self.rule = LocalAdaptive("amsgrad", self.beta1, self.beta2, vhat="step", eps=0.0,
                                  bias_correction=False, alpha=self.alpha,
                                  weight_decay=self.weight_decay, wd_mode=self.wd_mode)

    @property
    def amended(self) -> bool:
        return self.alpha != 1

    @property
    def initial_v(self) -> float:
        return self.eps_v ** 2 if self.v0 is None else self.v0

    def init_server(self, theta0):
        server = {"theta": theta0.clone(), "v": full_like(theta0, self.initial_v)}
        if self.amended:
            server["ga"] = torch.zeros_like(theta0)
        return server

    def broadcast(self, server):
        return dict(server)

    def local_start(self, bcast, cstate, ctx):
        # the broadcast rows themselves, no copies: a round's first local step does not own
        # them and writes none of them (owned_start_keys); where the C kernel takes the
        # steps, the server's rows where they are and zeros never written (sims.row_source)
        sources = self.takes_row_sources
        v = server_rows(bcast, "v", sources)
        n = torch.zeros(v.shape[0], dtype=v.dtype, device=v.device)

        def zeros():
            return (ZeroRows(*v.shape, v.dtype, v.device) if sources
                    else torch.zeros(v.shape, dtype=v.dtype, device=v.device))
        return LocalAdaptive.start(zeros(), v if self.v_init == "server" else zeros(), v, n)

    def owned_start_keys(self):
        """``m`` (zeros made in :meth:`local_start`), and ``v`` where it starts at zero; not
        ``vhat`` nor a ``v`` started from the server's: the broadcast rows ``bcast["v"]``
        themselves (both the same tensor)."""
        return frozenset({"m"} | ({"v"} if self.v_init == "zero" else set()))

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
        ga = ReplicaRows(bcast, "ga") if self.amended else None    # not gathered (issue 16)
        return self.rule.step(theta, grad, lstate, mask, lr, ctx.layout, ga=ga,
                              owned=step_owned(ctx, self.owned_start_keys()),
                              delta_from=ctx.extra.get("delta_from"))

    def client_message(self, delta, lstate, cstate, ctx):
        # the rule's vhat (not the kernel's scaled one) and g_a = delta / (lr K) as scaled
        # rows, summed per replica without forming them (sims.row_source.ScaledRows)
        scale = lstate.get("vhat_scale")
        vhat = lstate["vhat"]
        aux = {"vhat": vhat if scale is None else ScaledRows(vhat, 1 / scale)}
        if self.amended:
            lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
            aux["ga"] = ScaledRows(delta, 1 / (lr * lstate["k"].clamp_min(1).unsqueeze(-1)))
        return delta, cstate, aux

    def server_step(self, server, mean_message, sums, active, ctx):
        eta = lr_at(self.eta, self.lr_decay, ctx.t) if self.decay_global else self.eta
        new = {"theta": masked_rows(active, server["theta"] - eta * mean_message, server["theta"]),
               "v": masked_rows(active, mean_of(sums, "vhat", mean_message), server["v"])}
        if self.amended:
            new["ga"] = masked_rows(active, mean_of(sums, "ga", mean_message), server["ga"])
        metrics = {"vhat_min": server["v"].min(-1).values}
        return new, metrics

    def uplink_bits(self, layout):
        return bits(layout, 2)

    def downlink_bits(self, layout):
        return bits(layout, 3 if self.amended else 2)

    def client_memory(self, layout) -> int:
        """The model, ``m``, ``v``, ``vhat`` and (amended) ``g_a``."""
        return layout.d * (4 + self.amended)

    def describe(self):
        return describe_dataclass(self)


@dataclass
class LocalAdam(FedLADA):
    """LocalAdam as the paper runs it (spec 1.3, Table 5 "alpha = 1.0 represents the
    local-adaptive scene"): FedLADA with ``alpha = 1`` -- local AMSGrad from the averaged
    ``vhat``, momentum reset each round, ``vhat`` averaged by the server (2d up, 2d down)."""
    name = "localadam"
    alpha: float = 1.0

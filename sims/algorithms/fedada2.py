"""FedAda2 (Lee, Sharma, Zaheer, Li): joint server and client adaptivity.

Spec: ``shared/specs/fedada2.md`` (section numbers below). Conventions are in
:mod:`sims.algorithms.base`; the paper's ``Delta = x_K - x_{t-1}`` with ``x + eta
m/(sqrt(v) + tau)`` is our ``delta = -Delta`` with ``x - eta m/(sqrt(v) + tau)``. The
server-only baselines (FedAdaGrad, FedYogi, FedAdam, FedAvg) are in
:mod:`sims.algorithms.baselines`.

:class:`JointAdaptive` is one class for Algorithms 2, 8, 10 and the baselines of Sec. 6: a
server rule on the mean pseudo-gradient (SU, spec 1.1: AdaGrad with momentum ``m = b1 m +
(1 - b1) U``, ``v = v + U^2``, ``x <- x - eta m / (sqrt(v) + tau)``, ``v_0 = tau^2``; or Adam /
Yogi) and a client AdaGrad (AGDU, Alg. 9) or Adam (ADMU, Alg. 7) whose preconditioner is full
or an SM3 cover (SM3-I, Alg. 3; SM3-II, Alg. 4), updated every ``delay`` local steps
(``z``), started at zero every round or from the server's preconditioner (direct joint
adaptivity). Presets:

===================== ========== =============== ========== ===========================
class (registry)       client     preconditioner  init       paper
===================== ========== =============== ========== ===========================
:class:`FedAda2`       AdaGrad    SM3-II          zero       Alg. 2 (FedAda2)
:class:`FedAda2Adam`   Adam       SM3-II          zero       App. C.2, Sec. 6 experiments
:class:`DirectJoint`   AdaGrad    full            server     "Direct Joint Adap." (DJA)
:class:`JointNoPrecond` AdaGrad   full            zero       "Joint Adap. w/o Precond."
:class:`FedAdaAdam`    Adam       full, delay z   zero       Alg. 8 (ADMU clients)
:class:`FedAdaAdagrad` AdaGrad    full, delay z   zero       Alg. 10 (AGDU clients)
:class:`FedAda2Blend`  a mix      per strategy    zero       Alg. 5 (blended clients)
===================== ========== =============== ========== ===========================

Decisions on the spec's ambiguities (section 6), with the option for the other reading:

* SM3 covers (6.1): rows and columns of matrices, one set per axis index of a tensor, full
  accumulators for biases (:class:`sims.rules.sm3.SM3Cover`); SM3-II is the default (the
  analysed one, "empirically better"), ``precond="sm3-i"`` the authors' code's choice.
* SM3-Adam has no pseudo-code: the cover accumulators hold an EMA. SM3-I: ``mu_r = b2 mu_r +
  (1 - b2) max_{j in S_r} g_j^2``, ``nu = min_r mu_r`` (the authors' code); SM3-II:
  ``nu_j = b2 min_{r ∋ j} mu_r + (1 - b2) g_j^2``, ``mu_r = max_{j in S_r} nu_j``. Both are
  bias-corrected like ADMU (``bias_correction``, default on: Alg. 6/7).
* Alg. 2 resets ``mu_k`` to 0 every step but refills it only on update steps (6.2): on
  non-update steps ``mu`` and ``nu`` are carried over unchanged (Alg. 4's ``nu'_t = nu'_{t-1}``;
  SM3-II then needs ``nu`` itself kept between updates, which its memory count includes).
* The clipping threshold ``eps_s`` (``clip``; 0 = off, the experiments' "negligible"): when
  ``0 < ||m_k / (sqrt(v_k) + eps)|| < eps_s`` the step is skipped and (Adam) ``m_k`` zeroed
  (Alg. 8 zeroes ``m_k`` while the update uses ``m_hat_k``: both are zeroed).
* DJA (6.4): the server's second-moment statistic is copied raw into the client's
  accumulator (AdaGrad: ``sum U^2``; Adam: ``v``), as the authors' code does; an SM3 client
  takes its row and column maxima. A client Adam so started debiases its ``v`` as if the
  round index ``t`` earlier updates had happened (the code's counter offset); ``m`` starts at
  0 and is debiased from 0. Only ``v`` is sent for an Adam server (3d per round, not 4d;
  spec 1.14).
* Server Adam has no bias correction and server AdaGrad no momentum by default (6.5, the
  authors' scripts); ``server_bias_correction`` / ``server_beta1`` change that.
* Aggregation is uniform over participants (6.6); client weights ``Xi`` are 1.

Communication (Table 2, per participant and round): the model down, the update up (2d);
DJA also sends the server preconditioner down (3d, 1.5x FedAvg). Client memory: the model
plus the client's optimizer buffers; with SM3 the preconditioner takes ``sum_l (m_l + n_l)``
floats for ``m_l x n_l`` matrices instead of ``d`` (Table 2 prints 2d, the uncompressed count).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..rules.base import OptimizerError, chain, start
from ..rules.mixture import Mixture
from ..rules.server import server_rule
from ..rules.sm3 import SM3
from ..rules.terms import Warmup
from .base import Algorithm, bits, check_common, describe_dataclass, masked_rows

CLIENT_KINDS = ("adagrad", "adam", "sgd")


@dataclass
class JointAdaptive(Algorithm):
    """Server and client adaptivity, FedAda2 Algorithms 2, 8, 10 (see the module docstring).

    Client ``i`` of round ``t`` (``x_{i,0} = x_{t-1}``; ``k = 1..K``, ``upd = (k-1) % z == 0``)::

        AdaGrad (Alg. 2 / 9):  if upd: nu <- accumulate(nu, g^2)   (full: v + g^2; SM3-I/II)
                               u = g / (sqrt(nu) + eps)
        Adam (Alg. 6 / 7):     m = b1 m + (1 - b1) g;  m_hat = m / (1 - b1^k)
                               if upd: nu <- EMA accumulate(nu, g^2)
                               u = m_hat / (sqrt(nu / (1 - b2^(floor((k-1)/z) + 1))) + eps)
        if 0 < ||u|| < eps_s: u = 0                                  (clipping, off by default)
        x <- x - eta_l u            (eta_l min(1, k / local_warmup) with a warm-up)

    then ``delta_i = x_{t-1} - x_{i,K}``; server: ``x_t = x_{t-1} - eta rule(mean delta)``.

    The client rule is ``chain(SM3(client, precond, delay, ...), Warmup(local_warmup))``
    (:class:`sims.rules.sm3.SM3`; an SGD client has no preconditioner).
    ``local_warmup = W > 0``: the ViT runs' client learning-rate warm-up (App. H.2, "linear
    warm-up from 0 over the first 10 local backprop steps"). ``freeze_epochs = F > 0``
    (FedAda2 Fig. 7, App. I.2, whose delay unit is the local epoch, spec 6.3): the
    preconditioner is updated (every ``z``-th step) during one local epoch, then frozen for
    the next ``F`` epochs, periodically within the round; ADMU's debiasing exponent is then
    the number of updates made so far.

    Reference: :func:`sims.reference.fedada2.ref_joint_adaptive`.
    """
    name = "joint-adaptive"
    eta: float = 0.01
    eta_l: float = 0.01
    server: object = "adagrad"
    server_beta1: float = 0.0
    server_beta2: float = 0.999
    tau: float = 1e-3
    v0: float | None = None
    server_bias_correction: bool = False
    client: str = "adagrad"
    precond: str = "full"
    delay: int = 1
    eps: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    bias_correction: bool = True
    clip: float = 0.0
    init: str = "zero"
    freeze_epochs: int = 0
    local_warmup: int = 0

    def __post_init__(self):
        check_common(self)
        if self.client not in CLIENT_KINDS:
            raise OptimizerError(f"client must be one of {CLIENT_KINDS}, got {self.client!r}")
        if self.init not in ("zero", "server"):
            raise OptimizerError(f"init must be 'zero' or 'server', got {self.init!r}")
        if self.init == "server" and self.server == "sgd":
            raise OptimizerError("init='server' needs an adaptive server (no preconditioner "
                                 "to send with server='sgd')")
        self.server_rule = server_rule(self.server, beta1=self.server_beta1,
                                       beta2=self.server_beta2, tau=self.tau, v0=self.v0,
                                       bias_correction=self.server_bias_correction)
        self.sm3 = None
        if self.client != "sgd":
            self.sm3 = SM3(self.client, self.precond, self.delay, self.eps, self.beta1,
                           self.beta2, self.bias_correction, self.clip, self.freeze_epochs,
                           "round" if self.init == "server" else "none")
        elif self.precond not in ("full", "sm3-i", "sm3-ii"):
            raise OptimizerError(f"precond must be one of ('full', 'sm3-i', 'sm3-ii'), got "
                                 f"{self.precond!r}")
        self.local_rule = chain(*([self.sm3] if self.sm3 else []),
                                *([Warmup(self.local_warmup)] if self.local_warmup else []))

    def local_lr(self, t):
        return self.eta_l

    @property
    def needs_epoch_steps(self) -> bool:
        """The engine puts each participant's steps per local epoch in
        ``ctx.extra["epoch_steps"]`` (epoch-wise freezing, ``freeze_epochs > 0``)."""
        return self.freeze_epochs > 0 and self.client != "sgd"

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        return {"theta": theta0.clone(), "opt": self.server_rule.init(theta0)}

    def broadcast(self, server):
        out = {"theta": server["theta"]}
        if self.init == "server":
            out["pre"] = server["opt"]["v"]
        return out

    def server_step(self, server, mean_message, sums, active, ctx):
        direction, opt = self.server_rule.update(mean_message, server["opt"], server["theta"],
                                                 None)
        opt = {**server["opt"], **opt}
        return {"theta": masked_rows(active, server["theta"] - self.eta * direction,
                                     server["theta"]),
                "opt": {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}}, {}

    # ------------------------------------------------------------------ clients
    def local_start(self, bcast, cstate, ctx):
        """The preconditioner starts at zero, or (DJA) from the server's statistic: ``mu`` its
        cover maxima, ``nu`` their cover minima; Adam's ``m`` at zero."""
        rows = self.rows(bcast, ctx)
        if self.init != "server" or self.sm3 is None:
            return start(self.local_rule, rows)
        cover = self.sm3.cover(ctx.layout)
        mu = cover.cover_max(bcast["pre"])
        return start(self.local_rule, rows, mu=mu, nu=cover.cover_min(mu))

    # ------------------------------------------------------------------ accounting
    def uplink_bits(self, layout):
        return bits(layout, 1)

    def downlink_bits(self, layout):
        return bits(layout, 2 if self.init == "server" else 1)

    def client_memory(self, layout) -> int:
        """The model, the preconditioner (``d`` full, the cover size with SM3), Adam's ``m``,
        and SM3-II's ``nu`` kept between delayed updates."""
        if self.sm3 is None:
            return layout.d
        pre = self.sm3.cover(layout).size
        return (layout.d + pre + (layout.d if self.client == "adam" else 0)
                + (layout.d if self.precond == "sm3-ii" and self.delay > 1 else 0))

    def describe(self):
        return describe_dataclass(self)


@dataclass
class FedAda2(JointAdaptive):
    """FedAda2, Alg. 2: server SU (AdaGrad), client AdaGrad with an SM3-II preconditioner
    started at zero every round (no preconditioner sent), delayed updates every ``delay``."""
    name = "fedada2"
    precond: str = "sm3-ii"


@dataclass
class FedAda2Adam(JointAdaptive):
    """FedAda2 as run in Sec. 6 (Tables 4-5: "Adam for all adaptivity"): server Adam
    (``b1 = 0.9``, ``b2 = 0.999``, no bias correction), client SM3-Adam, zero init."""
    name = "fedada2-adam"
    server: object = "adam"
    server_beta1: float = 0.9
    client: str = "adam"
    precond: str = "sm3-ii"


@dataclass
class DirectJoint(JointAdaptive):
    """Direct joint adaptivity (DJA, Sec. 6 / Table 2): the server preconditioner is sent
    every round and used as the client's initial accumulator (3d per round)."""
    name = "dja"
    init: str = "server"


@dataclass
class JointNoPrecond(JointAdaptive):
    """Joint adaptivity without preconditioner communication (Sec. 6): full client AdaGrad
    started at zero every round (2d per round)."""
    name = "joint-adaptive"


@dataclass
class FedAdaAdam(JointAdaptive):
    """FedAdaAdam, Alg. 8: server SU (AdaGrad), clients ADMU (Alg. 7: Adam with delayed
    second-moment updates every ``delay`` steps, debiased by ``1 - b2^(floor((k-1)/z) + 1)``)."""
    name = "fedadaadam"
    client: str = "adam"


@dataclass
class FedAdaAdagrad(JointAdaptive):
    """FedAdaAdagrad, Alg. 10: server SU (AdaGrad), clients AGDU (Alg. 9: AdaGrad with the
    accumulator updated every ``delay`` steps, zero-initialised)."""
    name = "fedadaadagrad"


STRATEGIES = {"sgd": ("sgd", "full"), "adagrad": ("adagrad", "full"), "adam": ("adam", "full"),
              "sm3-adagrad": ("adagrad", "sm3-ii"), "sm3-adam": ("adam", "sm3-ii"),
              "sm3i-adagrad": ("adagrad", "sm3-i"), "sm3i-adam": ("adam", "sm3-i")}


def _csv(text, kind, name):
    if text is None or text == "":
        return None
    try:
        return [kind(v) for v in str(text).split(",")]
    except ValueError:
        raise OptimizerError(f"cannot read {name} {text!r}; give comma-separated values") \
            from None


@dataclass
class FedAda2Blend(JointAdaptive):
    """Federated Blended Optimization, FedAda2 Alg. 5 (spec 1.7).

    ``strategies`` lists the client optimizers ``O_1..O_p`` (``sgd``, ``adagrad``, ``adam``,
    ``sm3-adagrad``, ``sm3-adam``; ``sm3i-*`` for SM3-I), all zero-initialised every round
    and sharing ``eta_l``, ``eps``, ``delay``, betas and clipping. Client ``i`` runs strategy
    ``i mod p`` (the paper leaves the assignment to the clients' resources), for at most
    ``steps[l]`` local steps (``K(O_l)``; default: all the problem gives it) and sends
    ``w(O_l) (x_{t-1} - x_{i,K})`` (``weights``, default 1). The server averages over all
    participants (``S = sum_l |S_l|``) and applies SU (or the chosen server rule).

    The client rule is a :class:`sims.rules.mixture.Mixture` of the strategies' rules.
    """
    name = "fedada2-blend"
    strategies: str = "sm3-adagrad,sm3-adam,sgd"
    weights: str | None = None
    steps: str | None = None

    def __post_init__(self):
        names = [v.strip() for v in str(self.strategies).split(",") if v.strip()]
        bad = [v for v in names if v not in STRATEGIES]
        if not names or bad:
            raise OptimizerError(f"unknown strategy {bad[0] if bad else ''!r}; choose from "
                                 f"{', '.join(STRATEGIES)}")
        self.weight_list = _csv(self.weights, float, "weights") or [1.0] * len(names)
        self.step_list = _csv(self.steps, int, "steps") or [None] * len(names)
        if len(self.weight_list) != len(names) or len(self.step_list) != len(names):
            raise OptimizerError("give one weight and one step count per strategy")
        if any(not w > 0 for w in self.weight_list):
            raise OptimizerError("strategy weights must be positive")
        if any(k is not None and k < 1 for k in self.step_list):
            raise OptimizerError("strategy step counts must be >= 1")
        super().__post_init__()
        shared = {f: getattr(self, f) for f in ("eta", "eta_l", "server", "server_beta1",
                                                "server_beta2", "tau", "v0", "delay", "eps",
                                                "beta1", "beta2", "bias_correction", "clip")}
        self.members = [JointAdaptive(**shared, client=STRATEGIES[v][0],
                                      precond=STRATEGIES[v][1]) for v in names]
        self.local_rule = chain(Mixture(tuple(m.local_rule for m in self.members),
                                          tuple(self.step_list)))

    def local_start(self, bcast, cstate, ctx):
        return start(self.local_rule, self.rows(bcast, ctx))

    def client_message(self, delta, lstate, cstate, ctx):
        w = torch.as_tensor(self.weight_list, dtype=delta.dtype, device=delta.device)
        strategy = torch.remainder(ctx.clients, len(self.members))
        return delta * w[strategy].unsqueeze(-1), cstate, {}

    def client_memory(self, layout) -> int:
        """The largest of the strategies' client memories."""
        return max(m.client_memory(layout) for m in self.members)

    def describe(self):
        return describe_dataclass(self)

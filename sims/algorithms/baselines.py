"""The baselines the four papers run against, in one place.

* :class:`FedOpt` (Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 2): local SGD
  (optionally proximal, FedProx; optionally amended, FedCM) and a server rule
  (:mod:`sims.rules.server`) on the mean pseudo-gradient. Presets: :class:`FedAvg`
  (McMahan et al. 2017; also Fed-LAMB's Fed-SGD), :class:`FedAvgM` (server momentum, Hsu et
  al. 2019), :class:`FedProx` (Li et al. 2020), :class:`FedCM` (Xu et al. 2021),
  :class:`FedAdam`, :class:`FedAdaGrad`, :class:`FedYogi` (Reddi et al.), :class:`FedAdamCM`
  (FedLADA's FedAdam(*)), :class:`AdpFed` (Fed-LAMB SUPP Alg. 1).
* :class:`Scaffold` (Karimireddy et al. 2020), with FedLADA's alpha-scaled correction.
* :class:`LocalYogi`: Yogi clients (Zaheer et al. 2018), FedAvg aggregation.
* :class:`MimeLite` and :class:`Mime` (Karimireddy et al., arXiv 2008.03606), with an
  AMSGrad base optimizer (Fed-LAMB's baselines; their layer-wise variants are in
  :mod:`sims.algorithms.fed_lamb`).

Each is checked against its plain sequential form in :mod:`sims.reference.baselines` (float64,
relative error 1e-10: ``tests/algorithms/test_equivalence.py``). Conventions (pseudo-gradient
sign, decay, weight decay): :mod:`sims.algorithms.base`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..rules.base import OptimizerError, chain, start
from ..rules.frozen import Frozen
from ..rules.moments import Adaptive, Ema
from ..rules.server import Momentum, server_rule
from ..rules.terms import Amend, ControlVariate, FirstGradient, Proximal, SVRG, Warmup
from .base import (Algorithm, ParticipantTally, bits, check_common, describe_dataclass,
                   lr_at, masked_rows, mean_of, weight_decay)


# ------------------------------------------------------------------------------ FedOpt

@dataclass
class FedOpt(Algorithm):
    """Local SGD (proximal and/or amended) and a server rule on the mean pseudo-gradient.

    Client ``i``, local step ``k`` (1-based) with ``g`` the stochastic gradient and ``lr = eta_l
    lr_decay^t`` (times ``min(1, k / local_warmup)`` with a warm-up)::

        d = g + wd theta (coupled) + mu (theta - theta_t)          (FedProx: mu > 0)
        d = alpha d + (1 - alpha) g_a                              (FedCM: alpha < 1)
        theta <- theta - lr d

    Server: ``U = mean_i delta_i``; ``theta <- theta - eta * rule(U)`` with ``rule`` the server
    rule: a rule object (``server=Adam(tau=0.1)``, :mod:`sims.rules.server`) or its name
    (``"sgd"``: the identity, FedAvg with global rate ``eta``; ``"momentum"``, ``"adam"``,
    ``"amsgrad"``, ``"adagrad"``, ``"yogi"``) built from ``beta1``, ``beta2``, ``tau`` (epsilon
    outside the root), ``v0`` (default ``tau^2``), ``eps_inside_sqrt`` and ``bias_correction``.

    The amended direction ``g_a`` (FedCM's ``Delta^t``; FedLADA spec 1.5) is broadcast; after
    the round ``g_a = mean_i delta_i / (lr K_i)`` with ``K_i`` the steps client ``i`` took
    (``ga_source="pseudo"``; equals FedLADA line 18 ``(x^t - x^{t+1}) / (eta_g eta_l K)`` for
    a server SGD and equal ``K``, and keeps the recursion ``g_a^{t+1} = alpha mean(d-bar) +
    (1 - alpha) g_a^t`` exact for unequal ``K_i``). For a server Adam (FedAdam(*)), whether the
    clients are corrected with the averaged pseudo-gradient or with the server's actual step
    is not stated (spec fedlada 1.5, Fig. 6): ``"pseudo"`` is the default (the paper's
    "matching dislocation" is then exactly the mismatch between ``g_a`` and the preconditioned
    step), ``ga_source="global"`` uses ``(theta_t - theta_{t+1}) / (eta lr mean K)``. Before
    the first round ``g_a = 0``.

    Reference: :func:`sims.reference.baselines.ref_fedopt`.
    """
    name = "fedopt"
    eta: float = 1.0
    eta_l: float = 0.1
    server: object = "sgd"
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3
    v0: float | None = None
    eps_inside_sqrt: bool = False
    bias_correction: bool = False
    alpha: float = 1.0
    ga_source: str = "pseudo"
    mu: float = 0.0
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    lr_decay: float = 1.0
    decay_global: bool = False
    local_warmup: int = 0

    def __post_init__(self):
        check_common(self)
        if self.mu < 0:
            raise OptimizerError(f"mu must be >= 0, got {self.mu}")
        if self.local_warmup and self.amended:
            raise OptimizerError("local_warmup with an amended direction (alpha < 1) is not "
                                 "supported: g_a = delta / (lr K) assumes one rate a round")
        if self.ga_source not in ("pseudo", "global"):
            raise OptimizerError(f"ga_source must be 'pseudo' or 'global', got {self.ga_source!r}")
        self.server_rule = self.make_server_rule()
        terms = [Proximal(self.mu)] if self.mu else []
        if self.amended:
            terms.append(Amend(self.alpha))
        self.local_rule = chain(weight_decay(self, *terms),
                            *([Warmup(self.local_warmup)] if self.local_warmup else []))

    def make_server_rule(self):
        return server_rule(self.server, beta1=self.beta1, beta2=self.beta2, tau=self.tau,
                           v0=self.v0, eps_inside_sqrt=self.eps_inside_sqrt,
                           bias_correction=self.bias_correction)

    @property
    def amended(self) -> bool:
        return self.alpha != 1

    def local_lr(self, t):
        return lr_at(self.eta_l, self.lr_decay, t)

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        server = {"theta": theta0.clone(), "opt": self.server_rule.init(theta0)}
        if self.amended:
            server["ga"] = torch.zeros_like(theta0)
        return server

    def broadcast(self, server):
        out = {"theta": server["theta"]}
        if self.amended:
            out["ga"] = server["ga"]
        return out

    def server_step(self, server, mean_message, sums, active, ctx):
        eta = lr_at(self.eta, self.lr_decay, ctx.t) if self.decay_global else self.eta
        direction, opt = self.server_rule.update(mean_message, server["opt"], server["theta"],
                                                 None)
        new = dict(server)
        new["opt"] = {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}
        new["theta"] = masked_rows(active, server["theta"] - eta * direction, server["theta"])
        if self.amended:
            if self.ga_source == "pseudo":
                ga = mean_of(sums, "ga", mean_message)
            else:
                lr = self.local_lr(ctx.t)
                steps = sums["steps"] if "steps" in sums else torch.ones_like(direction[:, :1])
                ga = direction / (lr * steps.clamp_min(1))
            new["ga"] = masked_rows(active, ga, server["ga"])
        return new, {}

    # ------------------------------------------------------------------ clients
    def client_message(self, delta, lstate, cstate, ctx):
        aux = {}
        if self.amended:
            if self.ga_source == "pseudo":
                aux["ga"] = delta / (self.local_lr(ctx.t)
                                     * lstate["k"].clamp_min(1).unsqueeze(-1))
            else:
                aux["steps"] = lstate["k"].unsqueeze(-1)    # [B, 1]: the engine means rows
        return delta, cstate, aux

    # ------------------------------------------------------------------ accounting
    def uplink_bits(self, layout):
        return bits(layout, 1)

    def downlink_bits(self, layout):
        return bits(layout, 2 if self.amended else 1)

    def client_memory(self, layout) -> int:
        """Floats a client holds while training (FedAda2 Table 2 accounting): the model, plus
        the round's starting model for the proximal term, plus ``g_a`` when amended."""
        return layout.d * (1 + (self.mu > 0) + self.amended)

    def describe(self):
        return describe_dataclass(self)


@dataclass
class FedAvg(FedOpt):
    """FedAvg (FedLADA spec 1.5 table): ``K`` local SGD steps, ``x^{t+1} = x^t - eta_g
    mean(x^t - x^t_{i,K})``. Paper settings: ``eta_l = 0.1``, ``eta_g = 1``, weight decay
    ``1e-3``, decay 0.998 per round. Also Fed-LAMB's Fed-SGD (spec fed-lamb 1.4) and FedAda2's
    FedAvg (no server momentum, server rate 1)."""
    name = "fedavg"


@dataclass
class FedAvgM(FedOpt):
    """FedAvgM (Hsu, Qi & Brown 2019, Alg. 1): FedAvg whose server keeps momentum, ``m <- beta
    m + mean_i delta_i``, ``x <- x - eta m`` (:func:`sims.rules.server.Momentum`); their
    experiments use ``beta = 0.9`` with server rate 1."""
    name = "fedavgm"
    server: object = "momentum"
    beta: float = 0.9

    def make_server_rule(self):
        if self.server == "momentum":
            return Momentum(self.beta)
        return super().make_server_rule()


@dataclass
class FedProx(FedOpt):
    """FedProx (FedLADA spec 1.5): local SGD on ``F_i(x) + mu/2 ||x - x^t||^2``, i.e. the
    gradient ``g + mu (x - x^t)``; the paper gives no ``mu``, 0.1 is FL-Simulator's default."""
    name = "fedprox"
    mu: float = 0.1


@dataclass
class FedCM(FedOpt):
    """FedCM (Xu et al. 2021; FedLADA spec 1.5): ``x <- x - eta_l (alpha g + (1 - alpha)
    Delta^t)`` with ``Delta^t = (x^{t-1} - x^t) / (eta_g eta_l K)``, broadcast with the model
    (2d down). FedLADA does not state FedCM's ``alpha``; 0.1 (FedCM's and FL-Simulator's
    default)."""
    name = "fedcm"
    alpha: float = 0.1


@dataclass
class FedAdam(FedOpt):
    """FedAdam (FedLADA Alg. 1, Reddi et al.): local SGD, server ``m = b1 m + (1 - b1) U``,
    ``v = b2 v + (1 - b2) U^2``, ``x <- x - eta_g m / (sqrt(v) + tau)``, ``v_0 = tau^2``, no
    bias correction (FedLADA spec 1.2, the standard Reddi form; FL-Simulator adds ``tau =
    0.01``). Paper settings: ``eta_l = 0.1``, ``eta_g = 0.1``, ``b1 = 0.9``, ``b2 = 0.99``,
    initial second moment ``1e-2``: the default ``tau = 0.1`` (``v0 = tau^2 = 1e-2``) is the
    paper's (FedLADA Sec. 4.1)."""
    name = "fedadam"
    server: object = "adam"
    eta: float = 0.1
    tau: float = 0.1


@dataclass
class FedAdamCM(FedAdam):
    """FedAdam(*) = "amended FedAdam" (FedLADA Table 3, Fig. 5): FedCM local steps (amended
    SGD with weight ``alpha``) and server Adam. The ``g_a`` the clients receive is the averaged
    pseudo-gradient per local step by default (``ga_source="pseudo"``), or the server's
    actual (preconditioned) step with ``ga_source="global"`` (ambiguity, see
    :class:`FedOpt`). ``alpha = 1`` is FedAdam."""
    name = "fedadam-cm"
    alpha: float = 0.1


@dataclass
class FedAdaGrad(FedOpt):
    """FedAdaGrad (Reddi et al.; FedAda2's server-only baseline): SGD clients, server SU
    (AdaGrad, ``v_0 = tau^2``, ``tau`` outside the root, momentum ``beta1``: 0 by default as
    in the FedAda2 authors' code, Reddi et al. use 0.9)."""
    name = "fedadagrad"
    server: object = "adagrad"
    eta: float = 0.01
    beta1: float = 0.0


@dataclass
class FedYogi(FedOpt):
    """FedYogi (Reddi et al. Alg. 2): SGD clients, server Yogi ``v = v - (1 - b2) U^2
    sign(v - U^2)``, ``x <- x - eta m / (sqrt(v) + tau)``, ``v_0 = tau^2``."""
    name = "fedyogi"
    server: object = "yogi"
    eta: float = 0.01


@dataclass
class AdpFed(FedOpt):
    """Adp-Fed, Fed-LAMB SUPP Alg. 1 (FedAdam of Reddi et al.): local SGD (line 8, the gradient
    at the current local iterate, not at ``theta^0`` as printed), ``Delta_bar = mean Delta``
    (line 12), ``m = b1 m + (1 - b1) Delta_bar``, ``v = b2 v + (1 - b2) Delta_bar^2``, ``theta
    <- theta + eta_g m / sqrt(v)`` (lines 13-15; with our sign ``delta = -Delta`` it is ``theta
    - eta_g m / sqrt(v)``), ``v_0 = eps`` and no ``tau``, no max, no bias correction, as printed
    (``tau > 0`` gives Reddi's ``sqrt(v) + tau``). ``lambda`` and ``alpha_t`` are listed as
    inputs but never used, so they are absent. Grids (Table 1): ``eta_l`` 1e-4..0.5, ``eta_g``
    1e-4..0.1."""
    name = "adp-fed"
    server: object = "adam"
    eta: float = 0.01
    eta_l: float = 0.01
    beta2: float = 0.999
    tau: float = 0.0
    v0: float | None = 1e-8


# ------------------------------------------------------------------------------ SCAFFOLD

@dataclass
class Scaffold(ParticipantTally, Algorithm):
    """SCAFFOLD (Karimireddy et al. 2020; FedLADA spec 1.5) with the alpha-scaled correction
    (FedLADA Eq. 26).

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

    Reference: :func:`sims.reference.baselines.ref_scaffold`.
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
        terms = [FirstGradient()] if self.control == "I" else []
        if self.alpha:
            terms.append(ControlVariate(self.alpha))
        self.local_rule = weight_decay(self, *terms)

    def local_lr(self, t):
        return lr_at(self.eta_l, self.lr_decay, t)

    def init_server(self, theta0):
        if self.n_clients is None:
            raise OptimizerError("scaffold: n_clients (the population size N in c <- c + "
                                 "(1/N) sum_S dc_i) is required; pass n_clients="
                                 "problem.n_clients")
        self.tally_reset(theta0.shape[0])
        return {"theta": theta0.clone(), "c": torch.zeros_like(theta0)}

    def client_state_spec(self):
        return {"c": "vector"}

    def broadcast(self, server):
        return {"theta": server["theta"], "c": server["c"]}

    def local_start(self, bcast, cstate, ctx):
        # the server control c is kept for the line c_i^+ = c_i - c + ...
        return {**start(self.local_rule, self.rows(bcast, ctx)), "c": bcast["c"]}

    def client_message(self, delta, lstate, cstate, ctx):
        self.tally_add(ctx)
        c_i = cstate["c"]
        if self.control == "II":
            lr = self.local_lr(ctx.t)
            c_plus = c_i - lstate["c"] + delta / (lr * lstate["k"].clamp_min(1).unsqueeze(-1))
        else:
            c_plus = lstate["gx"]
        return delta, {"c": c_plus}, {"dc": c_plus - c_i}

    def server_step(self, server, mean_message, sums, active, ctx):
        count = self.tally_pop(mean_message)
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


# ------------------------------------------------------------------------------ local Yogi

@dataclass
class LocalYogi(Algorithm):
    """Local Yogi: every participant runs the Yogi optimizer (Zaheer, Reddi, Sachan, Kale &
    Kumar 2018, "Adaptive Methods for Nonconvex Optimization", Alg. 2) for its local steps,
    from a fresh state each round, and the server averages the models (FedAvg)::

        m = b1 m + (1 - b1) g;   v = v - (1 - b2) g^2 sign(v - g^2)
        theta <- theta - eta_l m / (sqrt(v) + eps)          (m_0 = 0, v_0 = v0; no bias correction)
        server: theta <- theta - eta mean_i delta_i         (eta = 1: the average of the models)

    Defaults are the Yogi paper's (``b1 = 0.9``, ``b2 = 0.999``, ``eps = 1e-3``, ``v0 = 1e-6``).

    Reference: :func:`sims.reference.baselines.ref_local_yogi`.
    """
    name = "local-yogi"
    eta: float = 1.0
    eta_l: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-3
    v0: float = 1e-6

    def __post_init__(self):
        check_common(self)
        self.local_rule = chain(Adaptive("yogi", self.beta1, self.beta2, self.eps, eps_inside=False,
                                     v0=self.v0))

    def local_lr(self, t):
        return self.eta_l

    def server_step(self, server, mean_message, sums, active, ctx):
        return {"theta": masked_rows(active, server["theta"] - self.eta * mean_message,
                                     server["theta"])}, {}

    def uplink_bits(self, layout):
        return bits(layout, 1)

    def downlink_bits(self, layout):
        return bits(layout, 1)

    def client_memory(self, layout) -> int:
        """The model, ``m`` and ``v``."""
        return 3 * layout.d

    def describe(self):
        return describe_dataclass(self)


# ------------------------------------------------------------------------------ Mime

MIME_BASES = ("amsgrad", "adam", "sgdm")


@dataclass
class MimeLite(Algorithm):
    """MimeLite (Karimireddy et al., arXiv 2008.03606; Fed-LAMB spec 1.6 [EXT]) with an AMSGrad
    base optimizer.

    The server holds the model ``x`` and the base optimizer's state ``s`` (AMSGrad: ``m, v,
    vhat``; epsilon inside the root, no bias correction, as Fed-EF-AMS) and sends both. A
    client applies the base optimizer with the *frozen* ``s``: each local step's direction is
    the one ``s`` advanced by the step's gradient would give, ``U(g; s)``, and ``s`` is not
    changed locally. The client also sends its gradient at ``x`` (its first local step's
    minibatch gradient, which is taken at ``x``: a stochastic estimate of ``grad f_i(x)``)::

        client i:  y = x;  for each local minibatch z:  y = y - lr U(grad f_i(y; z); s)
                   send delta_i = x - y and g_i(x) (the first step's gradient)
        server:    x <- x - eta mean_i delta_i    (eta = 1: the average of the y_i)
                   s <- V(c, s),  c = mean_i g_i(x)

    ``base="adam"`` / ``"sgdm"`` (``m = b1 m + (1 - b1) g``) are options. Mime's LR grid
    (Fed-LAMB Table 1) equals Fed-AMS's.

    Reference: :func:`sims.reference.baselines.ref_mimelite`.
    """
    name = "mimelite"
    layerwise = False
    eta: float = 1.0
    eta_l: float = 1e-3
    base: str = "amsgrad"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    lr_decay: float = 1.0

    def __post_init__(self):
        check_common(self)
        if self.base not in MIME_BASES:
            raise OptimizerError(f"Mime base must be one of {MIME_BASES}, got {self.base!r}")
        if self.base == "sgdm":
            self.base_rule = Ema(self.beta1)
        else:
            self.base_rule = Adaptive(self.base, self.beta1, self.beta2, self.eps,
                                      eps_inside=True)
        self.local_rule = self.make_client()

    def make_client(self):
        return chain(FirstGradient(), Frozen(self.base_rule), *self.line_13())

    def line_13(self) -> tuple:
        """Transforms after the base direction (none; the LAMB variants' trust ratio,
        Fed-LAMB MAIN Alg. 2 line 13)."""
        return ()

    def local_lr(self, t):
        return lr_at(self.eta_l, self.lr_decay, t)

    def init_server(self, theta0):
        return {"theta": theta0.clone(), "s": self.base_rule.init(theta0)}

    def broadcast(self, server):
        return {"theta": server["theta"], **{f"s_{k}": v for k, v in server["s"].items()}}

    def server_update(self, server, mean_message, stat, active):
        """``x <- x - eta mean(delta)`` and ``s <- V(stat, s)`` for the active replicas."""
        _, s = self.base_rule.update(stat, server["s"], server["theta"], None)
        s = {**server["s"], **s}
        return {"theta": masked_rows(active, server["theta"] - self.eta * mean_message,
                                     server["theta"]),
                "s": {k: masked_rows(active, v, server["s"][k]) for k, v in s.items()}}

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {"gx": lstate["gx"]}

    def server_step(self, server, mean_message, sums, active, ctx):
        stat = mean_of(sums, "gx", mean_message)
        return self.server_update(server, mean_message, stat, active), {}

    @property
    def state_vectors(self) -> int:
        return {"amsgrad": 3, "adam": 2, "sgdm": 1}[self.base]

    def uplink_bits(self, layout):
        return bits(layout, 2)                             # model and gradient at x

    def downlink_bits(self, layout):
        return bits(layout, 1 + self.state_vectors)        # model and the optimizer state

    def client_memory(self, layout) -> int:
        """The model, the frozen server state and the gradient at ``x``."""
        return layout.d * (2 + self.state_vectors)

    def describe(self):
        return describe_dataclass(self)


@dataclass
class Mime(MimeLite):
    """Mime (Karimireddy et al., arXiv 2008.03606, Alg. 1; Fed-LAMB spec 1.6 [EXT]) with the
    AMSGrad base optimizer of :class:`MimeLite` (``base="adam"`` / ``"sgdm"`` as options).

    Round ``t``, server model ``x``, base-optimizer state ``s`` (AMSGrad ``m, v, vhat``),
    participants ``S``, ``lr = eta_l lr_decay^t``::

        c = (1/|S|) sum_{i in S} grad f_i(x)          full-batch client gradients at x
        client i:  y = x
                   for each local minibatch z:
                       g = grad f_i(y; z) - grad f_i(x; z) + c          (SVRG correction)
                       y = y - lr U(g; s)         s frozen (U as in MimeLite)
                   send delta_i = x - y
        server:    x <- x - eta mean_i delta_i    (eta = 1: the average of the y_i)
                   s <- V(c, s)                   statistics from c only, never from deltas

    Engine hooks: ``needs_round_gradient`` (the engine computes ``grad f_i(x)`` for every
    participant before the broadcast and passes the per-replica mean to
    :meth:`round_gradient`, which stores it as ``server["c"]`` and so broadcasts it) and
    ``needs_anchor_grad`` (each step also gets ``grad f_i(x; z)`` on the same minibatch as
    ``ctx.extra["anchor_grad"]``). With one local step ``g = c`` exactly (``y = x``), so the
    first step of every client is the centralized base-optimizer step on ``c``.

    Decisions (the paper and the spec leave them open; options where cheap):

    * ``grad f_i`` is the client's full local gradient (``problem.full_grad``: the
      quadratic's exact gradient, a network's mean loss over the client's whole data) and
      ``c`` is the *unweighted* mean over the round's participants, as every aggregate here
      (``f = (1/n) sum f_i``); FedJAX weights clients by their number of examples (not
      offered). A replica with no participant in a round keeps ``x``, ``s`` and its last ``c``.
    * ``s`` is updated *after* the local work with the round's ``c`` (the clients of round
      ``t`` use ``s_t``), as in MimeLite; the model update is the plain average of the local
      models (``eta = 1``), ``eta != 1`` scales it (server LR).
    * The correction enters the base optimizer (``U(g; s)``); the frozen ``s`` is never
      advanced locally.
    * Models with dropout draw independent masks for ``grad f_i(y; z)`` and ``grad f_i(x; z)``
      (the correction is then not exact at ``y = x``); the papers' test models use none.

    Communication: up, the local model (delta) and ``grad f_i(x)`` (2d, in two phases: the
    gradient before local work, the model after); down, ``x``, the optimizer state ``s`` and
    ``c`` (``(2 + |s|) d``: 5d with AMSGrad). Client memory: ``y``, ``x``, ``c`` and ``s``.

    Reference: :func:`sims.reference.baselines.ref_mime`.
    """
    name = "mime"
    needs_round_gradient = True
    needs_anchor_grad = True

    def make_client(self):
        return chain(SVRG(), Frozen(self.base_rule), *self.line_13())

    def init_server(self, theta0):
        server = super().init_server(theta0)
        server["c"] = torch.zeros_like(theta0)
        return server

    def round_gradient(self, server, mean_grad, active):
        return {**server, "c": masked_rows(active, mean_grad, server["c"])}

    def broadcast(self, server):
        return {**super().broadcast(server), "c": server["c"]}

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {}

    def server_step(self, server, mean_message, sums, active, ctx):
        new = self.server_update(server, mean_message, server["c"], active)
        return {**new, "c": server["c"]}, {}

    def downlink_bits(self, layout):
        return bits(layout, 2 + self.state_vectors)        # model, optimizer state and c

    def client_memory(self, layout) -> int:
        """The local model, the anchor ``x``, ``c`` and the frozen server state."""
        return layout.d * (3 + self.state_vectors)

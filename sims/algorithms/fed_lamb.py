"""Fed-LAMB (Karimi, Li, Li): layer-wise local adaptivity. Fed-AMS and Fed-LAMB, and the
layer-wise variants of Mime.

Spec: ``shared/specs/fed-lamb.md``. MAIN = the ICML draft (Alg. 2 = Fed-LAMB), SUPP = the
UAI supplement. The paper's baselines Fed-SGD (FedAvg with ``eta_g = 1``, spec 1.4), Adp-Fed
(SUPP Alg. 1), MimeLite and Mime are in :mod:`sims.algorithms.baselines`.

Decisions on the spec's ambiguities (section 1.2 choices (a)-(g) and section 5), each with
an option for the other reading:

* (a) one stochastic gradient per local step (line 6 prints one per round);
* (b) bias correction on copies (lines 9, 11): the raw ``m, v`` stay in the recursion.
  ``bias_correction="client"`` (default) counts the steps a client's persistent moments have
  seen over all its rounds (the exact debiasing of a zero-started EMA); ``"round"`` is the
  literal ``t`` of the round's loop; ``"none"`` is AMSGrad as in Alg. 1;
* (c) line 12's ``vhat_{r,i}`` (client-indexed as printed) starts each round at the server's
  ``vhat_r`` and takes the AMSGrad max with the client's (corrected) ``v`` at every local step,
  ``vhat_{r,i} = max(vhat_{r,i}, v_c)`` (``vhat="server"``, default). The proof's reading, a
  single ``vhat_r`` fixed within the round (``vhat="fixed"``), makes every first-round step
  ``m / sqrt(eps)`` (Fed-AMS blows up in its first round on a test quadratic with
  ``eps = 1e-8``; Fed-LAMB survives it through the normalisation). ``vhat="local"`` keeps a
  per-client ``vhat`` across rounds and averages only the models (Fed-AMS's other reading,
  spec 1.3). Epsilon enters once, through ``vhat_0 = eps`` (line 2): ``p = m / sqrt(vhat)``;
  ``eps_again=True`` gives the literal ``sqrt(vhat + eps)`` as well;
* (d) averages over the round's participants ``D^r``; the server rate ``eta`` is 1 (line 17's
  plain average) unless set;
* (e) ``phi(z) = min(max(z, 1e-3), 10)`` (``phi="clip"``; bounded as H4 needs, so layers at 0
  move), ``"identity"`` for the text's suggestion; see :class:`sims.rules.trust.TrustRatio`;
* (f) a layer is one parameter tensor (weight and bias separately), :mod:`sims.core.params`;
* (g) local steps per round are set by the problem (epochs or fixed ``K``);
* ``m`` persists per client across rounds (line 8's ``m_{r-1,i}``), ``persist_m=False``
  restarts it each round (the ablation); ``v`` persists per client (line 10's ``v_{r-1,i}``)
  and the (bias-corrected) ``v^T`` is what the client sends (line 15). A client's ``v``
  starts at 0 (``v_init="zero"``, default: the zero-started EMA that ``"client"`` debiasing
  corrects exactly) or at ``eps`` (``v_init="eps"``: line 2's ``v_0 = eps 1``).

The printed reading. The defaults above are not the algorithm as printed; :data:`PRINTED`
(``FedLAMB(**PRINTED, ...)``, also for :class:`FedAMS`) is MAIN Alg. 2 read literally on the
three points where the defaults differ: ``vhat="fixed"`` (line 12 divides by the round's
``vhat`` as received, line 17's ``vhat_r``, no per-step max), ``bias_correction="round"``
(lines 9 and 11 divide by ``1 - beta^t`` with ``t`` the local index of line 7, restarting
each round), ``v_init="eps"`` (line 2, ``v_0 = eps``), and ``eps_again=True`` (line 12's
``sqrt(vhat + eps)`` on top of ``vhat_0 = eps``). It keeps choices (a), (b), (d)-(g). With
the round-fixed ``vhat``, every first-round step divides by ``sqrt(2 eps)``: Fed-AMS then
moves by ``m / sqrt(2 eps)`` and diverges at ``eps = 1e-8`` on the papers' networks
(measured in ``tests/algorithms/test_fedlamb_readings.py`` and the Fed-LAMB entries); it
needs a larger ``eps``, tuned.

Line 13 (trust ratio): ``theta_l <- theta_l - alpha phi(||theta_l||) (p_l + lam theta_l) /
||p_l + lam theta_l||``; a step moves every layer by exactly ``alpha phi(||theta_l||)`` (P1).
With ``phi="update_norm"`` (``phi`` replaced by ``||p_l||``) and ``lam = 0`` it is Fed-AMS (P3).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..rules.base import OptimizerError, chain, start
from ..rules.moments import Adaptive
from ..rules.trust import TrustRatio
from .base import (Algorithm, bits, check_common, describe_dataclass, lr_at, masked_rows,
                   mean_of)
from .baselines import Mime, MimeLite

BIAS_MODES = ("client", "round", "none")
VHAT_MODES = ("server", "fixed", "local")
V_INITS = ("zero", "eps")

#: MAIN Alg. 2 as printed (module docstring, "The printed reading"): round-fixed ``vhat``
#: (line 12), bias correction over the local index ``t`` (lines 9, 11), client ``v_0 = eps``
#: (line 2) and ``sqrt(vhat + eps)`` (line 12).
PRINTED = {"vhat": "fixed", "bias_correction": "round", "v_init": "eps", "eps_again": True}
#: The registry's default reading, for captions: per-step AMSGrad max from the server's
#: ``vhat``, debiasing over all the client's steps, client ``v_0 = 0``, ``eps`` once.
DEFAULT = {"vhat": "server", "bias_correction": "client", "v_init": "zero", "eps_again": False}


def reading_of(alg) -> str:
    """``"printed"``, ``"default"`` or ``"other"``: which reading ``alg``'s fields are."""
    for name, fields in (("printed", PRINTED), ("default", DEFAULT)):
        if all(getattr(alg, k) == v for k, v in fields.items()):
            return name
    return "other"


@dataclass
class LayerwiseTrust:
    """MAIN Alg. 2 line 13, the layer-wise normalisation the LAMB variants put after their
    base direction ``p``: ``theta_l <- theta_l - lr phi(||theta_l||) (p_l + lam theta_l) /
    ||p_l + lam theta_l||`` (:class:`sims.rules.trust.TrustRatio`; ``phi`` is choice (e)),
    with its settings. Listed first among a variant's bases, so its :meth:`line_13` is the
    one that runs."""
    layerwise = True
    phi: str = "clip"
    phi_min: float = 1e-3
    phi_max: float = 10.0
    lam: float = 0.0

    def line_13(self) -> tuple:
        return (TrustRatio(self.phi, self.phi_min, self.phi_max, self.lam),)


@dataclass
class FedAMS(Algorithm):
    """Fed-AMS (Chen, Li & Li 2020; Fed-LAMB spec 1.3): Fed-LAMB's MAIN Alg. 2 without line 13,
    its local step the plain AMSGrad step ``theta <- theta - alpha m_c / sqrt(vhat)``.
    ``vhat="local"``: each client keeps its own ``vhat`` and only the models are averaged (the
    other reading of "the global model is simply obtained by averaging the local models").
    The box and the decisions: :class:`FedLAMB` and the module docstring.

    Reference: :func:`sims.reference.fed_lamb.ref_fedlamb`.
    """
    name = "fed-ams"
    layerwise = False
    eta: float = 1.0
    eta_l: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    eps_again: bool = False         # True: line 12's sqrt(vhat + eps) as printed
    bias_correction: str = "client"  # "round": lines 9, 11 over the local index t as printed
    persist_m: bool = True
    vhat: str = "server"            # "fixed": line 12's round-fixed vhat as printed
    v_init: str = "zero"            # "eps": line 2's v_0 = eps as printed
    lr_decay: float = 1.0

    def __post_init__(self):
        check_common(self)
        if self.bias_correction not in BIAS_MODES:
            raise OptimizerError(f"bias_correction must be one of {BIAS_MODES}, got "
                                 f"{self.bias_correction!r}")
        if self.vhat not in VHAT_MODES:
            raise OptimizerError(f"vhat must be one of {VHAT_MODES}, got {self.vhat!r}")
        if self.v_init not in V_INITS:
            raise OptimizerError(f"v_init must be one of {V_INITS}, got {self.v_init!r}")
        if not self.eps > 0:
            raise OptimizerError(f"eps must be positive, got {self.eps}")
        # lines 8-12: m, v, the corrected copies, vhat = max(vhat, v_c), p = m_c / sqrt(vhat)
        moments = Adaptive("amsgrad", self.beta1, self.beta2,
                           eps=self.eps if self.eps_again else 0.0,
                           bias_correction=self.bias_correction != "none",
                           vhat="fixed" if self.vhat == "fixed" else "step",
                           correct_before_max=True)
        self.local_rule = chain(moments, *self.line_13())

    def line_13(self) -> tuple:
        """Line 13's transform (Fed-LAMB's trust ratio; none for Fed-AMS)."""
        return ()

    def local_lr(self, t):
        return lr_at(self.eta_l, self.lr_decay, t)

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        server = {"theta": theta0.clone()}
        if self.vhat != "local":
            server["vhat"] = torch.full_like(theta0, 0.0).add_(self.eps)   # line 2: vhat_0 = eps
        return server

    def client_state_spec(self):
        spec = {"v": "vector"}
        if self.persist_m:
            spec["m"] = "vector"
        if self.bias_correction == "client":
            spec["n"] = "scalar"
        if self.vhat == "local":
            spec["vhat"] = "vector"
        return spec

    def broadcast(self, server):
        return dict(server)

    def server_step(self, server, mean_message, sums, active, ctx):
        # line 17: the average of the local models, vhat_{r+1} = max(vhat_r, mean v)
        new = {"theta": masked_rows(active, server["theta"] - self.eta * mean_message,
                                    server["theta"])}
        if self.vhat != "local":
            vbar = torch.maximum(server["vhat"], mean_of(sums, "v", mean_message))
            new["vhat"] = masked_rows(active, vbar, server["vhat"])
        return new, {}

    # ------------------------------------------------------------------ clients
    def local_start(self, bcast, cstate, ctx):
        """Lines 4-5: the local model from the server's, ``m`` and ``v`` the client's own
        (``m = 0`` with ``persist_m=False``; ``v_0 = eps`` for a first-time client with
        ``v_init="eps"``, line 2), ``vhat`` the server's ``vhat_r`` (or the client's, at least
        ``eps``), the bias-correction counts from the client's (``"client"``) or from 0."""
        rows = self.rows(bcast, ctx)
        n = cstate["n"] if self.bias_correction == "client" else rows.counts()
        m = cstate["m"] if self.persist_m else rows.zeros()
        nm = n if self.persist_m else rows.counts()      # a restarted m is debiased from 0
        if self.vhat != "local":
            vhat = bcast["vhat"]
        else:
            vhat = cstate["vhat"].clamp_min(self.eps)                 # vhat_0 = eps
        v = cstate["v"]
        if self.v_init == "eps":                 # line 2: v_0 = eps, for a first-time client
            v = torch.where((ctx.last_round < 0).unsqueeze(-1), torch.full_like(v, self.eps), v)
        return start(self.local_rule, rows, m=m, v=v, vhat=vhat, n=n, nm=nm)

    def client_message(self, delta, lstate, cstate, ctx):
        """Line 15: send ``delta`` and the (bias-corrected) ``v``; keep ``m``, ``v``, ``n``."""
        v_sent = lstate["v"]
        if self.bias_correction != "none":
            v_sent = v_sent / (1 - self.beta2 ** lstate["n"].clamp_min(1).unsqueeze(-1))
        new = {"v": lstate["v"]}
        if self.persist_m:
            new["m"] = lstate["m"]
        if self.bias_correction == "client":
            new["n"] = lstate["n"]
        if self.vhat == "local":
            new["vhat"] = lstate["vhat"]
        aux = {"v": v_sent} if self.vhat != "local" else {}
        return delta, new, aux

    # ------------------------------------------------------------------ accounting
    def uplink_bits(self, layout):
        return bits(layout, 1 if self.vhat == "local" else 2)

    def downlink_bits(self, layout):
        return bits(layout, 1 if self.vhat == "local" else 2)

    def client_memory(self, layout) -> int:
        """The model, ``m`` and ``v`` (persistent) and ``vhat`` (the server's, or the client's)."""
        return 4 * layout.d

    def describe(self):
        return describe_dataclass(self)


@dataclass
class FedLAMB(LayerwiseTrust, FedAMS):
    """Fed-LAMB, MAIN Alg. 2 (decisions in the module docstring).

    Client ``i`` in round ``r`` (lines 4-15), ``lr = eta_l lr_decay^r`` (``alpha_r``)::

        theta = theta_bar; m, v = the client's own (persisting); vhat = server's vhat_r
        for t = 1..T:  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2        (lines 8, 10)
                       vhat = max(vhat, v_c)     (m_c, v_c: bias-corrected copies, lines 9, 11)
                       p = m_c / sqrt(vhat)                                      (line 12)
                       theta_l -= lr phi(||theta_l||) (p_l + lam theta_l) / ||p_l + lam theta_l||
        send delta = theta_bar - theta and v_c                                    (line 15)

    Server (line 17): ``theta_bar <- theta_bar - eta mean(delta)`` (``eta = 1``: the average of
    the local models), ``vhat_{r+1} = max(vhat_r, mean(v_c))``. Communication: model and ``v``
    up, model and ``vhat`` down (2d each way; 1d with ``vhat="local"``).

    The client rule is ``chain(Adaptive("amsgrad", ...), TrustRatio(phi, lam))``: lines 8-12
    (:class:`sims.rules.moments.Adaptive` with the max of the corrected ``v``) and line 13
    (:class:`sims.rules.trust.TrustRatio`).

    Reference: :func:`sims.reference.fed_lamb.ref_fedlamb`.
    """
    name = "fed-lamb"


@dataclass
class MimeLiteLAMB(LayerwiseTrust, MimeLite):
    """Mime-LAMB without the SVRG correction (SUPP Fig. 1, "proposed"; no pseudo-code in
    either file): [OURS] :class:`sims.algorithms.baselines.MimeLite` whose base direction
    (AMSGrad with the frozen server state) goes through Fed-LAMB's layer-wise normalisation
    (MAIN Alg. 2 line 13). LR grid (Table 1) equals Fed-LAMB's.

    Reference: :func:`sims.reference.baselines.ref_mimelite`."""
    name = "mimelite-lamb"
    eta_l: float = 0.01


@dataclass
class MimeLAMB(LayerwiseTrust, Mime):
    """Mime-LAMB (SUPP Fig. 1, "proposed"; no pseudo-code in either file): [OURS] full
    :class:`sims.algorithms.baselines.Mime` whose base direction ``U(g; s)`` (AMSGrad with the
    frozen server state, on the SVRG-corrected ``g``) goes through Fed-LAMB's layer-wise
    normalisation (MAIN Alg. 2 line 13): ``theta_l <- theta_l - lr phi(||theta_l||) (u_l +
    lam theta_l) / ||u_l + lam theta_l||``. The server statistics are those of Mime
    (``V(c, s)``, no trust ratio). LR grid (Table 1) equals Fed-LAMB's.

    Reference: :func:`sims.reference.baselines.ref_mime`."""
    name = "mime-lamb"
    eta_l: float = 0.01

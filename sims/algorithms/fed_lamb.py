"""Fed-LAMB family (Karimi, Li, Li): Fed-LAMB and the baselines it runs against.

Spec: ``shared/specs/fed-lamb.md``. MAIN = the ICML draft (Alg. 2 = Fed-LAMB), SUPP = the
UAI supplement (Alg. 1 = Adp-Fed). Conventions (pseudo-gradient sign, aggregation) are in
:mod:`sims.algorithms.adaptive`.

* Fed-SGD (spec 1.4) is FedAvg with ``eta_g = 1``: :class:`sims.algorithms.fedlada.FedAvg`,
  or ``"fed-sgd"`` in the registry (Fed-EF's uncompressed Fed-SGD, the same rule).
* :class:`FedAMS` -- local AMSGrad, averaged models, server ``vhat`` (spec 1.3).
* :class:`FedLAMB` -- MAIN Alg. 2: Fed-AMS with the layer-wise trust ratio ``phi``, ``lambda``.
* :class:`AdpFed` -- SUPP Alg. 1: local SGD, server Adam (FedAdam of Reddi et al.).
* :class:`MimeLite` / :class:`MimeLiteLAMB` -- Mime without the SVRG correction, with the
  AMSGrad base optimizer, and its layer-wise (LAMB) variant (spec 1.6, [EXT] + [OURS]).
* :class:`Mime` / :class:`MimeLAMB` -- full Mime (SVRG-corrected local steps, server
  statistics from the full-batch gradients) and Mime-LAMB, the paper's "proposed" variant.

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
  ``eps = 1e-8``; Fed-LAMB survives it through the normalisation). ``vhat="local"`` keeps a per-client ``vhat`` across rounds
  and averages only the models (Fed-AMS's other reading, spec 1.3). Epsilon enters once,
  through ``vhat_0 = eps`` (line 2): ``p = m / sqrt(vhat)``; ``eps_again=True`` gives the
  literal ``sqrt(vhat + eps)`` as well;
* (d) averages over the round's participants ``D^r``; the server rate ``eta`` is 1 (line 17's
  plain average) unless set;
* (e) ``phi(z) = min(max(z, 1e-3), 10)`` (``phi="clip"``; bounded as H4 needs, so layers at 0
  move), ``"identity"`` for the text's suggestion; see :class:`sims.rules.optim.TrustRatio`;
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
(measured in ``tests/test_fedlamb_readings.py`` and the Fed-LAMB entries); it needs a
larger ``eps``, tuned.

Line 13 (trust ratio): ``theta_l <- theta_l - alpha phi(||theta_l||) (p_l + lam theta_l) /
||p_l + lam theta_l||``; a step moves every layer by exactly ``alpha phi(||theta_l||)`` (P1).
With ``phi="update_norm"`` (``phi`` replaced by ``||p_l||``) and ``lam = 0`` it is Fed-AMS (P3).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..rules.optim import (AdaptiveRule, OptimizerError, TrustRatio, _is_number, _masked, axpy,
                     full_like, rsqrt_, trust_step, unscaled_vhat)
from .adaptive import (FedOpt, LocalAdaptive, LocalAdaptiveClients, bits, check_common,
                       describe_dataclass, lr_at, mean_of)
from .. import compiled
from ..accel.native import frozen as native_frozen
from ..core.batching import per_replica, replica_runs
from ..ownership import step_owned
from ..deferred_grad import DeferredGrad
from ..accel.native import enabled as native_enabled
from ..row_source import (RowSource, ZeroRows, client_rows, materialized, materialized_state,
                          server_rows)
from .base import Algorithm, masked_rows

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
class FedLAMB(LocalAdaptiveClients, Algorithm):
    """Fed-LAMB, MAIN Alg. 2 (decisions in the module docstring).

    Client ``i`` in round ``r`` (lines 4-15), ``lr = eta_l lr_decay^r`` (``alpha_r``)::

        theta = theta_bar; m, v = the client's own (persisting); vhat = server's vhat_r
        for t = 1..T:  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2        (lines 8, 10)
                       vhat = max(vhat, v_c)     (m_c, v_c: bias-corrected copies, lines 9, 11)
                       p = m_c / sqrt(vhat)                                      (line 12)
                       theta_l -= lr phi(||theta_l||) (p_l + lam theta_l) / ||p_l + lam theta_l||
        send delta = theta_bar - theta and v_c                                    (line 15)

    Server (line 17): ``theta_bar <- theta_bar - eta mean(delta)`` (``eta = 1``: the average of
    the local models), ``vhat_{r+1} = max(vhat_r, mean(v_c))``. Communication: model and
    ``v`` up, model and ``vhat`` down (2d each way; 1d with ``vhat="local"``).
    """
    name = "fed-lamb"
    layerwise = True
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
    phi: str = "clip"
    phi_min: float = 1e-3
    phi_max: float = 10.0
    lam: float = 0.0
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
        trust = (TrustRatio(self.phi, self.phi_min, self.phi_max, self.lam)
                 if self.layerwise else None)
        self.rule = LocalAdaptive("amsgrad", self.beta1, self.beta2,
                                  vhat="round" if self.vhat == "fixed" else "step",
                                  eps=self.eps if self.eps_again else 0.0,
                                  bias_correction=self.bias_correction != "none", trust=trust)

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        server = {"theta": theta0.clone()}
        if self.vhat != "local":
            server["vhat"] = full_like(theta0, self.eps)       # line 2: vhat_0 = eps
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
        eta = self.eta
        new = {"theta": masked_rows(active, server["theta"] - eta * mean_message, server["theta"])}
        if self.vhat != "local":
            vbar = torch.maximum(server["vhat"], mean_of(sums, "v", mean_message))
            new["vhat"] = masked_rows(active, vbar, server["vhat"])
        return new, {}

    # ------------------------------------------------------------------ clients
    def local_start(self, bcast, cstate, ctx):
        server, rep = per_replica(bcast, "theta")     # (no gathered copy of the models)
        B, d, like = len(rep), server.shape[-1], dict(dtype=server.dtype, device=server.device)
        # where the C kernel takes the steps, row sources (sims.row_source): the clients' m
        # and v rows in place (written there: no gather, no write-back), the server's vhat
        # rows, a zero m; else tensors, as the rule is written
        sources = self.takes_row_sources
        zeros_b = torch.zeros(B, **like)
        if self.persist_m:
            m = client_rows(cstate, "m", sources)
        else:
            m = ZeroRows(B, d, **like) if sources else torch.zeros(B, d, **like)
        n = cstate["n"] if self.bias_correction == "client" else zeros_b
        nm = n if self.persist_m else zeros_b        # a restarted m is debiased from 0
        if self.vhat != "local":
            vhat = server_rows(bcast, "vhat", sources)
        else:
            vhat = cstate["vhat"].clamp_min(self.eps)                 # vhat_0 = eps
        if self.v_init == "eps":                 # line 2: v_0 = eps, for a first-time client
            v = cstate["v"]
            v = torch.where((ctx.last_round < 0).unsqueeze(-1), torch.full_like(v, self.eps), v)
        else:
            v = client_rows(cstate, "v", sources)
        return LocalAdaptive.start(m, v, vhat, n, nm)

    def owned_start_keys(self):
        """``m`` and ``v``: the chunk's gathered client rows (the engine's copies, which no hook
        of this class reads after :meth:`local_start`: :meth:`client_message` builds the new
        client state from the local state), or those rows in place (``SlotRows``: the kernel
        steps the clients' own state there, which is what the round ends by writing), a zero
        ``m`` (a ``ZeroRows`` is never written: the step makes a new tensor), or ``v`` made
        by ``where``; a
        client's own ``vhat`` (``vhat="local"``) made by ``clamp_min``. Not the server's
        ``vhat``: the broadcast rows themselves."""
        return frozenset({"m", "v"} | ({"vhat"} if self.vhat == "local" else set()))

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
        # the trust ratio's per-coordinate layer index is built only where the readable
        # rule needs it (a repeat_interleave over d each step: ~1.5 ms a round here)
        return self.rule.step(theta, grad, lstate, mask, lr, ctx.layout,
                              owned=step_owned(ctx, self.owned_start_keys()),
                              delta_from=ctx.extra.get("delta_from"))

    def client_message(self, delta, lstate, cstate, ctx):
        v_sent = self.rule.corrected_v(lstate)
        new = {"v": lstate["v"]}
        if self.persist_m:
            new["m"] = lstate["m"]
        if self.bias_correction == "client":
            new["n"] = lstate["n"]
        if self.vhat == "local":
            new["vhat"] = unscaled_vhat(materialized_state(lstate))["vhat"]   # the rule's
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
class FedAMS(FedLAMB):
    """Fed-AMS (Chen, Li & Li 2020; spec 1.3): Fed-LAMB's state handling (``m`` local, ``v``
    sent, server ``vhat = max(vhat, mean v)``) with line 13 replaced by the plain local
    AMSGrad step ``theta <- theta - alpha m_c / sqrt(vhat)`` (no layer-wise scaling;
    ``phi``/``lam`` are ignored). ``vhat="local"``: each client keeps its own ``vhat`` and only
    the models are averaged (the other reading of "the global model is simply obtained by
    averaging the local models")."""
    name = "fed-ams"
    layerwise = False


@dataclass
class AdpFed(FedOpt):
    """Adp-Fed, SUPP Alg. 1 (FedAdam of Reddi et al.): local SGD (line 8, the gradient at the
    current local iterate, not at ``theta^0`` as printed), ``Delta_bar = mean Delta`` (line
    12), ``m = b1 m + (1 - b1) Delta_bar``, ``v = b2 v + (1 - b2) Delta_bar^2``, ``theta <-
    theta + eta_g m / sqrt(v)`` (lines 13-15; with our sign ``delta = -Delta`` it is ``theta -
    eta_g m / sqrt(v)``), ``v_0 = eps`` and no ``tau``, no max, no bias correction, as printed
    (``tau > 0`` gives Reddi's ``sqrt(v) + tau``). ``lambda`` and ``alpha_t`` are listed as
    inputs but never used, so they are absent. Grids (Table 1): ``eta_l`` 1e-4..0.5, ``eta_g``
    1e-4..0.1."""
    name = "adp-fed"
    server: str = "adam"
    eta: float = 0.01
    eta_l: float = 0.01
    beta2: float = 0.999
    tau: float = 0.0
    v0: float | None = 1e-8


MIME_BASES = ("amsgrad", "adam", "sgdm")


def _version(t: torch.Tensor):
    """``t``'s in-place version counter, or None where it has none (inference tensors)."""
    try:
        return t._version
    except RuntimeError:
        return None


@dataclass
class MimeLite(Algorithm):
    """MimeLite (Karimireddy et al.; spec 1.6 [EXT]) with an AMSGrad base optimizer.

    The server holds the model ``x`` and the base optimizer's state ``s`` (AMSGrad: ``m, v,
    vhat``; epsilon inside the root, no bias correction, as Fed-EF-AMS) and sends both. A
    client applies the base optimizer with the *frozen* ``s``: each local step's direction is
    the one ``s`` advanced by the step's gradient would give, ``U(g; s)``, and ``s`` is not
    changed locally. The client also sends its gradient at ``x`` (its first local step's
    minibatch gradient, which is taken at ``x``: a stochastic estimate of ``grad f_i(x)``).
    Server: ``x <- x - eta mean(delta)`` (``eta = 1``: the average of the local models) and
    ``s <- V(c, s)`` with ``c`` the mean gradient at ``x``.

    Full Mime (:class:`Mime`) adds the SVRG correction ``g = grad f_i(y; z) - grad f_i(x; z)
    + c`` to every local step and builds ``s`` from the full-batch gradients. Mime's LR grid
    (Table 1) equals Fed-AMS's.
    """
    name = "mimelite"
    layerwise = False
    eta: float = 1.0
    eta_l: float = 1e-3
    base: str = "amsgrad"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    phi: str = "clip"
    phi_min: float = 1e-3
    phi_max: float = 10.0
    lam: float = 0.0
    lr_decay: float = 1.0
    #: take :meth:`_frozen_step_fast` where it applies (False: the readable rule, for tests)
    fast_frozen: ClassVar[bool] = True
    #: within the fast form, the C kernel (:mod:`sims.accel.native.frozen`) where it is built
    native_frozen: ClassVar[bool] = True
    #: the fast step's row blocks: about this many bytes of each ``[rows, d]`` operand
    #: (3 rows of the benchmark's float32 MLP; 2 MiB: a block's few operands fit the L3)
    frozen_block_bytes: ClassVar[int] = 2 * 2 ** 20

    def __post_init__(self):
        check_common(self)
        if self.base not in MIME_BASES:
            raise OptimizerError(f"Mime base must be one of {MIME_BASES}, got {self.base!r}")
        if self.base == "sgdm":
            if not 0 <= self.beta1 < 1:
                raise OptimizerError(f"beta1 must be in [0, 1), got {self.beta1}")
            self.base_rule = None
        else:
            self.base_rule = AdaptiveRule(self.eta_l, self.base, self.beta1, self.beta2,
                                          self.eps, 0.0, eps_inside_sqrt=True)
        self.trust = (TrustRatio(self.phi, self.phi_min, self.phi_max, self.lam)
                      if self.layerwise else None)

    def _advance(self, g, s):
        """The base optimizer's direction from state ``s`` and the advanced state."""
        if self.base_rule is None:                        # SGD with momentum
            m = self.beta1 * s["m"] + (1 - self.beta1) * g
            return m, {"m": m}
        return self.base_rule.direction(g, s)

    def init_server(self, theta0):
        state = ({"m": torch.zeros_like(theta0)} if self.base_rule is None
                 else self.base_rule.init(theta0))
        return {"theta": theta0.clone(), "s": state}

    def broadcast(self, server):
        return {"theta": server["theta"], **{f"s_{k}": v for k, v in server["s"].items()}}

    def local_start(self, bcast, cstate, ctx):
        server, rep = per_replica(bcast, "theta")     # the shape only: no gathered copy
        shape = (rep.shape[0], *server.shape[1:])
        return {"k": server.new_zeros(shape[0]), "gx": server.new_zeros(shape)}

    def _frozen_step(self, theta, g, bcast, mask, ctx, anchor=None):
        """``theta - lr U(g; s)`` with the broadcast server state ``s`` frozen (through the
        layer-wise trust ratio for the LAMB variants); masked rows keep ``theta``. Mime
        passes ``anchor`` and the step is on ``g - anchor + c`` (``c = bcast["c"]``).

        Three forms, the first that applies: the compiled one pass (:mod:`sims.compiled`,
        opt-in with ``FEDTOOLKIT_COMPILE=1``, :func:`fused_frozen_step`; the replica's rows
        of ``s`` where the chunk has one replica, :meth:`_compiled_operands`); the eager fast
        form :meth:`_frozen_step_fast` (AMSGrad / Adam base, numeric constants;
        ``fast_frozen``): ``s`` being frozen for the round, ``b2 v + eps`` and ``vhat + eps``
        are formed once per broadcast of the server's ``[R, d]`` rows, and a step is 5
        elementwise passes (Mime: 7) that stream only ``theta`` and ``g`` (Mime: and the
        anchor gradient) from memory, each replica's rows of ``s`` (and Mime's ``c``)
        broadcast over its participants from the cache, on cache-sized blocks of rows; and
        the readable rule :meth:`_frozen_step_reference` (``_advance``, the base rule's
        direction, 8 (10) passes over ``[B, d]`` with ``s`` gathered per participant; SGD
        with momentum, per-replica betas or ``eps``), which the fast form is held to in
        float64 (several steps, several replicas, masks, per-row rates, LAMB, whole engine
        runs) by ``tests/test_mime_fast_step.py``."""
        lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
        request = ctx.extra.get("delta_from")
        if (isinstance(theta, RowSource) or request is not None) and mask is None \
                and self.takes_row_sources:
            # the C kernel from the server rows where they are, or writing the delta
            got = self._frozen_step_fast(theta, g, bcast, None, lr, ctx.layout, anchor,
                                         owned=step_owned(ctx).theta,
                                         delta_from=None if request is None else request.rows)
            if got is not None:
                if request is not None:
                    request.done = True
                return got
        theta = materialized(theta)
        if isinstance(g, DeferredGrad) and not (self.fast_frozen and self._frozen_fast_ok()
                                                and self.native_frozen):
            g = g.materialize()             # (only the C kernel reads a deferred block)
        if self.base_rule is not None and compiled.frozen_usable(self.base_rule, mask, theta):
            frozen, c = self._compiled_operands(bcast, anchor is not None)
            got = compiled.fused_frozen_step(self.base_rule, theta, g, frozen, lr, anchor, c,
                                             self.trust, ctx.layout)
            if got is not None:
                return got
        if self.fast_frozen and self._frozen_fast_ok():
            return self._frozen_step_fast(theta, g, bcast, mask, lr, ctx.layout, anchor,
                                          owned=step_owned(ctx).theta)
        return self._frozen_step_reference(theta, g, bcast, mask, lr, ctx.layout, anchor)

    @staticmethod
    def _compiled_operands(bcast, corrected: bool):
        """The frozen state ``s`` (a dict) and Mime's ``c`` (``corrected``; else None) for the
        compiled kernel: the replica's ``[1, d]`` rows, which the kernel broadcasts, where all
        the chunk's participants belong to one replica; else rows gathered per participant."""
        keys = [k for k in bcast if k.startswith("s_")] + ["c"] * corrected
        server = {k: per_replica(bcast, k) for k in keys}
        runs = replica_runs(server[keys[0]][1])
        if len(runs) == 1:
            r = runs[0][0]
            rows = {k: t[r:r + 1] for k, (t, _) in server.items()}
        else:
            rows = {k: bcast[k] for k in keys}
        return {k[2:]: v for k, v in rows.items() if k.startswith("s_")}, rows.get("c")

    def _frozen_step_reference(self, theta, g, bcast, mask, lr, layout, anchor=None):
        """The readable rule: ``g - anchor + c`` (Mime, ``c = bcast["c"]``), ``u = U(g; s)``
        by :meth:`_advance`, then ``theta - lr u`` (LAMB: :func:`sims.rules.optim.trust_step`);
        masked rows keep ``theta``. ``s`` and ``c`` are read as ``[B, d]`` rows, gathered per
        participant."""
        frozen = {k[2:]: v for k, v in bcast.items() if k.startswith("s_")}
        if anchor is not None:
            g = (g - anchor).add_(bcast["c"])               # SVRG correction
        u, _ = self._advance(g, frozen)
        if self.trust is not None:                 # sims.rules.optim.trust_step: the fast form
            return _masked(mask, trust_step(self.trust, theta, u, layout, lr), theta)
        return _masked(mask, axpy(theta, u, -lr), theta)

    def _frozen_fast_ok(self) -> bool:
        """Whether :meth:`_frozen_step_fast` computes this rule: an Adam / AMSGrad base with
        ``eps`` inside the root, no bias correction and numeric (not per-replica) betas and
        ``eps`` (the learning rate may be per row)."""
        r = self.base_rule
        return (r is not None and r.kind in ("adam", "amsgrad") and r.eps_inside_sqrt
                and not r.bias_correction and _is_number(r.beta1, r.beta2, r.eps))

    def _frozen_terms(self, v: torch.Tensor, vhat):
        """``(b2 v + eps, vhat + eps)`` (``None`` for ``vhat`` without one) of the frozen
        server state (its ``[R, d]`` rows, as the engine broadcasts them), formed once per
        broadcast and reused by every local step of every chunk of the round. Cached on the
        instance against the broadcast tensors themselves: a weak reference to
        each (a tensor that died never matches, even if its id is reused), its in-place
        version counter and the constants, so a new round's (or chunk's, or replica's)
        broadcast, or an in-place change of it, recomputes them."""
        r = self.base_rule
        key = (float(r.beta2), float(r.eps))
        srcs = (v,) if vhat is None else (v, vhat)
        versions = tuple(_version(t) for t in srcs)
        got = self.__dict__.get("_frozen_cache")
        if (got is not None and None not in versions and got[0] == key and got[2] == versions
                and len(got[1]) == len(srcs) and all(w() is t for w, t in zip(got[1], srcs))):
            return got[3]
        terms = (torch.mul(v, r.beta2).add_(r.eps),
                 None if vhat is None else torch.add(vhat, r.eps))
        self._frozen_cache = (key, tuple(weakref.ref(t) for t in srcs), versions, terms)
        return terms

    @property
    def takes_row_sources(self) -> bool:
        """Row sources (:mod:`sims.row_source`): a round's first step reads the server
        models where they are and the last writes the delta, where the C kernel takes the
        step (:mod:`sims.accel.native.frozen`; the opt-in compiled form off). Mime's anchor
        gradient keeps the engine from handing them (``needs_anchor_grad``)."""
        return (self.fast_frozen and self.native_frozen and self._frozen_fast_ok()
                and native_enabled() and not compiled.enabled())

    @property
    def takes_deferred_grad(self) -> bool:
        """A :class:`sims.deferred_grad.DeferredGrad` where the C kernel reads its block in
        place (:attr:`takes_row_sources`' condition; the first step's gradient, kept as
        ``gx``, is materialized: one copy a round where every step had one)."""
        return self.takes_row_sources

    def _frozen_step_fast(self, theta, g, bcast, mask, lr, layout, anchor=None, owned=False,
                          delta_from=None):
        """Fast form of :meth:`_frozen_step_reference` for an AMSGrad / Adam base (``eps``
        inside the root, no bias correction; :meth:`_frozen_fast_ok`). With ``P = b2 v +
        eps`` and ``Q = vhat + eps`` of the frozen state (:meth:`_frozen_terms`, once per
        broadcast) and ``max(vhat, v') + eps = max(Q, P + (1 - b2) g^2)``::

            den = rsqrt(max(P + (1 - b2) g^2, Q))     addcmul, maximum, pow_: 3 passes
            num = b1 m + (1 - b1) g                   lerp: 1 pass
            theta <- theta - lr num den               addcmul: 1 pass (in place when owned)

        (Adam: no maximum, 4 passes); Mime's ``g = grad - anchor + c`` adds 2 (``c`` cannot
        fold into ``P``: ``g`` enters squared; no torch op adds three tensors). LAMB
        variants: ``u = num den`` (1 pass) and :func:`sims.rules.optim.trust_step` on the whole
        ``u`` (two reads for the layer norms, one step pass).

        The server state ``m, P, Q`` (and Mime's ``c``) is one row per *replica*: it is read
        un-gathered (:func:`sims.core.batching.per_replica`, ``[R, d]``) and each replica's row is
        broadcast over its participants' rows (:func:`sims.core.batching.replica_runs`), so a step
        streams only ``theta``, ``g`` (and Mime's anchor gradient) from memory, the replica's
        rows staying in the cache (a plain dict of ``[B, d]`` rows: each row its own replica).
        On the CPU the passes run, within each replica's run, on blocks of rows of about
        :attr:`frozen_block_bytes` each: a block's temporaries (``g``, ``den``, ``num``) stay
        in the cache between its passes. Other devices take one launch per pass: the run's
        row broadcast where the chunk has one replica, else the rows gathered per participant.
        The root is ``pow_(-0.5)``: bit for bit ``rsqrt_``'s, ~2x faster (torch 2.13, CPU).
        Measured on the benchmark's 25 x 159,010 float32, one thread, one replica, a local
        step inside the round: MimeLite 4.6 -> 3.3 ms (Mime 5.5 -> 4.1, MimeLite-LAMB 6.2 ->
        4.8, Mime-LAMB 7.4 -> 6.0) from ``s`` gathered per participant to this form; the
        five passes alone, on a warm block, ~2.2 ms of it. ``owned`` (the engine owns
        ``theta``, :mod:`sims.ownership`) and no mask: ``theta`` is overwritten (a few percent
        faster than a fresh output); else a new tensor, masked rows keeping ``theta``. The
        same arithmetic as the reference up to rounding (``eps`` added before the max)."""
        r = self.base_rule
        b1, b2 = r.beta1, r.beta2
        B = theta.shape[0]
        keys = ["s_m", "s_v"] + ["s_vhat"] * r.amsgrad + ["c"] * (anchor is not None)
        src = {k: per_replica(bcast, k)[0] for k in keys}          # the server's [R, d]
        runs = replica_runs(per_replica(bcast, "s_m")[1])
        in_place = owned and mask is None
        if self.native_frozen and theta.device.type == "cpu":   # one C pass (sims.accel.native)
            p, q = self._frozen_terms(src["s_v"], src["s_vhat"] if r.amsgrad else None)
            got = native_frozen.frozen_step(
                theta, g, src["s_m"], p, q, runs, lr, b1, b2, anchor=anchor, c=src.get("c"),
                trust=self.trust, layout=layout,
                out=theta if in_place and torch.is_tensor(theta) else None,
                delta_from=delta_from)
            if got is not None:
                return got if mask is None else _masked(mask, got, theta)
        if isinstance(theta, RowSource) or delta_from is not None:
            return None                     # (the caller's tensor form from here)
        g = materialized(g)
        blocks = self._frozen_blocks(theta.device.type, B, theta[0].nbytes, runs)
        if blocks is None:                                  # several replicas off the CPU
            src = {k: bcast[k] for k in keys}               # gathered [B, d] rows
            blocks = [(slice(0, B), slice(0, B))]
        m = src["s_m"]
        c = None if anchor is None else src["c"]
        p, q = self._frozen_terms(src["s_v"], src["s_vhat"] if r.amsgrad else None)
        lamb = self.trust is not None
        # LAMB: the blocks write u = num den into one [B, d] buffer and a single trust_step
        # (per-layer norms, then the step) follows: measured ~1% of a round faster than a
        # trust_step per block, whose per-call overhead (~60 us) outweighs its cache reuse
        u = torch.empty_like(theta) if lamb else None
        out = None if lamb else theta if in_place else torch.empty_like(theta)
        per_row = torch.is_tensor(lr) and lr.dim() > 0 and lr.shape[0] == B
        for sl, at in blocks:
            gb, lr_b = g[sl], (lr[sl] if per_row else lr)
            if anchor is not None:
                gb = torch.sub(gb, anchor[sl]).add_(c[at])          # SVRG correction
            den = torch.addcmul(p[at], gb, gb, value=1.0 - b2, out=u[sl] if lamb else None)
            if q is not None:
                torch.maximum(den, q[at], out=den)
            rsqrt_(den)
            num = torch.lerp(m[at], gb, 1.0 - b1) if b1 else gb
            if lamb:
                den.mul_(num)                                        # u's rows
                continue
            if torch.is_tensor(lr_b):                                # a rate per row
                den.mul_(lr_b)
                lr_b = 1.0
            torch.addcmul(theta[sl], num, den, value=-lr_b, out=out[sl])
        if lamb:
            out = trust_step(self.trust, theta, u, layout, lr, out=theta if in_place else None)
        return out if mask is None else _masked(mask, out, theta)

    def _frozen_blocks(self, device_type: str, B: int, row_bytes: int, runs):
        """The fast step's blocks, ``(rows of [B, d], index of the server's [R, d] tensors)``:
        on the CPU each replica's run (``runs``, :func:`sims.core.batching.replica_runs`) in blocks
        of about :attr:`frozen_block_bytes` (``row_bytes`` a row), indexed by the replica;
        other devices one block (one launch per pass): the replica's row where the chunk has
        one, else None (the caller then reads the rows gathered per participant)."""
        if device_type == "cpu":
            rows = max(1, int(self.frozen_block_bytes) // max(1, row_bytes))
            return [(slice(lo, min(lo + rows, run.stop)), rep)
                    for rep, run in runs for lo in range(run.start, run.stop, rows)]
        return [(slice(0, B), runs[0][0])] if len(runs) == 1 else None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_frozen_cache", None)       # weak references (and a per-broadcast cache)
        return state

    def _server_update(self, server, mean_message, stat, active):
        """``x <- x - eta mean(delta)`` and ``s <- V(stat, s)`` for the active replicas."""
        _, s = self._advance(stat, server["s"])
        return {"theta": masked_rows(active, server["theta"] - self.eta * mean_message,
                                     server["theta"]),
                "s": {k: masked_rows(active, v, server["s"][k]) for k, v in s.items()}}

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        first = lstate["k"] == 0
        if not bool(first.any()):           # no row at its first step: gx stays (no pass)
            gx = lstate["gx"]
        elif mask is None and bool(first.all()):    # every row at its first step
            gx = grad = materialized(grad)
        else:
            grad = materialized(grad)
            gx = _masked(mask, torch.where(first.unsqueeze(-1), grad, lstate["gx"]),
                         lstate["gx"])
        new_state = {"k": lstate["k"] + (1 if mask is None else mask.to(theta.dtype)), "gx": gx}
        return self._frozen_step(theta, grad, bcast, mask, ctx), new_state

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {"gx": lstate["gx"]}

    def server_step(self, server, mean_message, sums, active, ctx):
        stat = mean_of(sums, "gx", mean_message)
        return self._server_update(server, mean_message, stat, active), {}

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
class MimeLiteLAMB(MimeLite):
    """Mime-LAMB (SUPP Fig. 1, "proposed"; no pseudo-code in either file): [OURS] MimeLite
    whose base direction (AMSGrad with the frozen server state) goes through Fed-LAMB's
    layer-wise normalisation (MAIN Alg. 2 line 13). LR grid (Table 1) equals Fed-LAMB's."""
    name = "mimelite-lamb"
    layerwise = True
    eta_l: float = 0.01


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
    """
    name = "mime"
    needs_round_gradient = True
    needs_anchor_grad = True

    def init_server(self, theta0):
        server = super().init_server(theta0)
        server["c"] = torch.zeros_like(theta0)
        return server

    def round_gradient(self, server, mean_grad, active):
        return {**server, "c": masked_rows(active, mean_grad, server["c"])}

    def broadcast(self, server):
        return {**super().broadcast(server), "c": server["c"]}

    def local_start(self, bcast, cstate, ctx):
        return {}

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        return self._frozen_step(theta, grad, bcast, mask, ctx,       # SVRG correction
                                 ctx.extra["anchor_grad"]), lstate

    def client_message(self, delta, lstate, cstate, ctx):
        return delta, cstate, {}

    def server_step(self, server, mean_message, sums, active, ctx):
        new = self._server_update(server, mean_message, server["c"], active)
        return {**new, "c": server["c"]}, {}

    def downlink_bits(self, layout):
        return bits(layout, 2 + self.state_vectors)        # model, optimizer state and c

    def client_memory(self, layout) -> int:
        """The local model, the anchor ``x``, ``c`` and the frozen server state."""
        return layout.d * (3 + self.state_vectors)


@dataclass
class MimeLAMB(Mime):
    """Mime-LAMB (SUPP Fig. 1, "proposed"; no pseudo-code in either file): [OURS] full
    :class:`Mime` whose base direction ``U(g; s)`` (AMSGrad with the frozen server state, on
    the SVRG-corrected ``g``) goes through Fed-LAMB's layer-wise normalisation (MAIN Alg. 2
    line 13, the rule of :class:`MimeLiteLAMB`): ``theta_l <- theta_l - lr phi(||theta_l||)
    (u_l + lam theta_l) / ||u_l + lam theta_l||``. The server statistics are those of Mime
    (``V(c, s)``, no trust ratio). LR grid (Table 1) equals Fed-LAMB's."""
    name = "mime-lamb"
    layerwise = True
    eta_l: float = 0.01

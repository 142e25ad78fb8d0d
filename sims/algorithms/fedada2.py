"""FedAda2 family (Lee, Sharma, Zaheer, Li): joint server and client adaptivity.

Spec: ``shared/specs/fedada2.md`` (section numbers below). Conventions are in
:mod:`sims.algorithms.adaptive`; the paper's ``Delta = x_K - x_{t-1}`` with ``x + eta
m/(sqrt(v) + tau)`` is our ``delta = -Delta`` with ``x - eta m/(sqrt(v) + tau)``.

* Server-only adaptivity (FedOpt, Reddi et al.): :class:`FedAdaGrad`, :class:`FedYogi` and
  :class:`sims.algorithms.fedlada.FedAdam`, with SGD clients.
* :class:`JointAdaptive` -- one class for Algorithms 2, 8, 10 and the baselines of Sec. 6:
  a server rule on the mean pseudo-gradient (SU, spec 1.1: AdaGrad with momentum
  ``m = b1 m + (1 - b1) U``, ``v = v + U^2``, ``x <- x - eta m / (sqrt(v) + tau)``,
  ``v_0 = tau^2``; or Adam / Yogi) and a client AdaGrad (AGDU, Alg. 9) or Adam (ADMU, Alg. 7)
  whose preconditioner is full or an SM3 cover (SM3-I, Alg. 3; SM3-II, Alg. 4), updated every
  ``delay`` local steps (``z``), started at zero every round or from the server's
  preconditioner (direct joint adaptivity). Presets:

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
  accumulators for biases (:class:`sims.rules.optim.SM3Cover`); SM3-II is the default (the
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

Alg. 5 (Federated Blended Optimization, :class:`FedAda2Blend`): each participant runs one of
several client strategies (chosen by client id), its local work capped at the strategy's
number of steps, its pseudo-gradient weighted by the strategy's ``w``.

Communication (Table 2, per participant and round): the model down, the update up (2d);
DJA also sends the server preconditioner down (3d, 1.5x FedAvg). Client memory: the model
plus the client's optimizer buffers; with SM3 the preconditioner takes ``sum_l (m_l + n_l)``
floats for ``m_l x n_l`` matrices instead of ``d`` (Table 2 prints 2d, the uncompressed count).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from .. import compiled, torch_fused
from ..accel import native
from ..core.batching import per_replica
from ..deferred_grad import DeferredGrad
from ..accel.native import sm3 as native_sm3
from ..row_source import RowSource, ServerRows, ZeroRows, materialized
from ..ownership import Owned, step_owned
from ..rules.optim import OptimizerError, SM3Cover, _masked, sm3_adagrad_step, sm3_adam_step
from .adaptive import (FedOpt, bits, check_common, describe_dataclass, server_rule,
                       warmup_scale)
from .base import Algorithm, masked_rows

CLIENT_KINDS = ("adagrad", "adam", "sgd")
PRECONDS = ("full", "sm3-i", "sm3-ii")


@dataclass
class FedAdaGrad(FedOpt):
    """FedAdaGrad (Reddi et al.; FedAda2's server-only baseline): SGD clients, server SU
    (AdaGrad, ``v_0 = tau^2``, ``tau`` outside the root, momentum ``beta1``: 0 by default as
    in the FedAda2 authors' code, Reddi et al. use 0.9)."""
    name = "fedadagrad"
    server: str = "adagrad"
    eta: float = 0.01
    beta1: float = 0.0


@dataclass
class FedYogi(FedOpt):
    """FedYogi (Reddi et al. Alg. 2): SGD clients, server Yogi ``v = v - (1 - b2) U^2
    sign(v - U^2)``, ``x <- x - eta m / (sqrt(v) + tau)``, ``v_0 = tau^2``."""
    name = "fedyogi"
    server: str = "yogi"
    eta: float = 0.01


def _row_parts(grad, theta):
    """``(block, pieces)`` of a :class:`sims.deferred_grad.DeferredGrad` whose per-row block
    outputs torch's fused kernels can read where they are
    (:meth:`~sims.deferred_grad.DeferredGrad.parts_for`); else None."""
    parts = grad.parts_for(theta) if isinstance(grad, DeferredGrad) else None
    return None if parts is None else (grad.block, parts)


def _plain(st: dict) -> tuple[dict, frozenset]:
    """``(state, made)``: the local state with every :class:`sims.row_source.RowSource`
    (:meth:`JointAdaptive.local_start`'s, for the C kernel) materialized, an entry that is
    another's row source (the full preconditioner's ``nu``, which is ``mu``) the same tensor
    as that one's, and the keys so made (new tensors, the caller's to write). A state without
    row sources is returned as it is."""
    if not any(isinstance(v, RowSource) for v in st.values()):
        return st, frozenset()
    made, out = {}, {}
    for key, val in st.items():
        if isinstance(val, RowSource):
            if id(val) not in made:
                made[id(val)] = val.materialize()
            val = made[id(val)]
        out[key] = val
    return out, frozenset(k for k, v in st.items() if isinstance(v, RowSource))


def _split_rows(x: torch.Tensor, block: slice, pieces: list | None = None) -> list:
    """Each row of ``x[B, d]`` as its views before, in and after the columns ``block``
    (empty ones left out), in row order (three ``unbind`` calls, not a view per piece:
    ~1.5 ms a round less on the issue-16 benchmark); ``pieces``: row ``i``'s block is
    ``pieces[i]`` instead (a deferred gradient's block)."""
    lo, hi = block.start or 0, block.stop
    columns = [x[:, :lo].unbind(0)] if lo > 0 else []
    columns.append(x[:, lo:hi].unbind(0) if pieces is None else pieces)
    if hi < x.shape[1]:
        columns.append(x[:, hi:].unbind(0))
    return [t for row in zip(*columns) for t in row]


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

    ``local_warmup = W > 0``: the ViT runs' client learning-rate warm-up (App. H.2, "linear
    warm-up from 0 over the first 10 local backprop steps"; :func:`warmup_scale`).

    ``freeze_epochs = F > 0`` (FedAda2 Fig. 7, App. I.2, whose delay unit is the local epoch,
    spec 6.3): the preconditioner is updated (every ``z``-th step) during one local epoch, then
    frozen for the next ``F`` epochs, periodically within the round; ADMU's debiasing exponent
    is then the number of updates made so far.

    then ``delta_i = x_{t-1} - x_{i,K}``; server: ``x_t = x_{t-1} - eta rule(mean delta)``.

    :meth:`reference_local_step` is this rule as written; :meth:`local_step` takes its fast
    forms, each held to it in float64 by the tests: the SM3-II and the full-preconditioner
    step with ``z = 1`` in one C pass (:meth:`_native_rows_step`, :mod:`sims.accel.native.sm3`;
    masks, the round's start and the deferred gradient read where they are:
    ``tests/test_fedada2_fast_step.py``, ``tests/test_fedada2_full_native.py``,
    ``tests/test_sm3_cover.py``), torch's fused CPU kernels on lists of rows
    (:meth:`_kernel_rows_step`; both preconditioners where the C kernels are off:
    ``tests/test_torch_fused.py``, ``tests/test_fedada2_fast_step.py``), the opt-in compiled
    kernels (:mod:`sims.compiled`) and the eager :func:`sims.rules.optim.sm3_adagrad_step` /
    :func:`sims.rules.optim.sm3_adam_step` (``tests/test_fast_adaptive.py``).
    """
    name = "joint-adaptive"
    #: the SM3-II / full-preconditioner client step through the C kernel
    #: (:mod:`sims.accel.native.sm3`) where it applies (:meth:`_native_rule`) and is built (False:
    #: torch's fused kernels / the eager forms)
    native_step: ClassVar[bool] = True
    eta: float = 0.01
    eta_l: float = 0.01
    server: str = "adagrad"
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
        if self.precond not in PRECONDS:
            raise OptimizerError(f"precond must be one of {PRECONDS}, got {self.precond!r}")
        if self.init not in ("zero", "server"):
            raise OptimizerError(f"init must be 'zero' or 'server', got {self.init!r}")
        if self.init == "server" and self.server == "sgd":
            raise OptimizerError("init='server' needs an adaptive server (no preconditioner "
                                 "to send with server='sgd')")
        if int(self.delay) != self.delay or self.delay < 1:
            raise OptimizerError(f"delay z must be an integer >= 1, got {self.delay}")
        if int(self.freeze_epochs) != self.freeze_epochs or self.freeze_epochs < 0:
            raise OptimizerError(f"freeze_epochs must be an integer >= 0, got "
                                 f"{self.freeze_epochs}")
        if not self.eps > 0 or self.clip < 0:
            raise OptimizerError(f"need eps > 0 and clip >= 0, got {self.eps}, {self.clip}")
        for key in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise OptimizerError(f"{key} must be in [0, 1), got {getattr(self, key)}")
        self.server_rule = server_rule(self.server, self.eta, beta1=self.server_beta1,
                                       beta2=self.server_beta2, tau=self.tau, v0=self.v0,
                                       bias_correction=self.server_bias_correction)
        self._covers = {}

    def cover(self, layout) -> SM3Cover:
        if layout not in self._covers:
            self._covers[layout] = SM3Cover(layout, full=self.precond == "full")
        return self._covers[layout]

    @property
    def sm3_ii(self) -> bool:
        return self.precond == "sm3-ii"

    @property
    def needs_epoch_steps(self) -> bool:
        """The engine puts each participant's steps per local epoch in
        ``ctx.extra["epoch_steps"]`` (epoch-wise freezing, ``freeze_epochs > 0``)."""
        return self.freeze_epochs > 0 and self.client != "sgd"

    def _updates(self, k, ctx):
        """``(upd, count)``: whether step ``k`` (1-based, ``[B]``) updates the
        preconditioner, and how many updates steps ``1..k`` have made (ADMU's debiasing
        exponent ``floor((k-1)/z) + 1`` without freezing). With ``freeze_epochs = F``, epoch
        ``e = floor((k-1)/E)`` (``E`` the participant's steps per epoch) updates only when
        ``e mod (F + 1) == 0`` (FedAda2 Fig. 7: one epoch of updates, then ``F`` frozen)."""
        z = self.delay
        if not self.freeze_epochs:
            return (torch.remainder(k - 1, z) == 0,
                    torch.div(k - 1, z, rounding_mode="floor") + 1)
        E = epoch_steps_of(ctx).to(k.dtype)
        P = self.freeze_epochs + 1
        i = k - 1                                    # 0-based step index
        cycle = torch.div(i, P * E, rounding_mode="floor")
        pos = i - cycle * P * E                      # step within the current cycle
        upd = (pos < E) & (torch.remainder(i, z) == 0)
        # updates in the finished cycles' first epochs and in this cycle's (steps j = 0..i
        # with j mod z == 0 and j mod (P E) < E): counted exactly, E and z being small
        j = torch.arange(int(k.max().item()), dtype=k.dtype, device=k.device)
        hit = ((torch.remainder(j, z) == 0).unsqueeze(0)
               & (torch.remainder(j.unsqueeze(0), P * E.unsqueeze(-1)) < E.unsqueeze(-1))
               & (j.unsqueeze(0) <= i.unsqueeze(-1)))
        return upd, hit.sum(-1).to(k.dtype)

    # ------------------------------------------------------------------ server
    def init_server(self, theta0):
        return {"theta": theta0.clone(), "opt": self.server_rule.init(theta0)}

    def broadcast(self, server):
        out = {"theta": server["theta"]}
        if self.init == "server":
            out["pre"] = server["opt"]["v"]
        return out

    def server_step(self, server, mean_message, sums, active, ctx):
        direction, opt = self.server_rule.direction(mean_message, server["opt"])
        return {"theta": masked_rows(active, server["theta"] - self.eta * direction,
                                     server["theta"]),
                "opt": {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}}, {}

    # ------------------------------------------------------------------ clients
    def local_start(self, bcast, cstate, ctx):
        """``k = 0``, the preconditioner's start (zeros, or DJA's server statistic: ``mu``
        its cover maxima, ``nu`` their cover minima) and Adam's ``m = 0``. Where the C kernel
        takes the steps (:meth:`_starts_as_rows`) these are :mod:`sims.row_source` rows read
        where they are (:meth:`_start_rows`), else new tensors. The server models are read
        per replica (never gathered here: the engine's ``bcast["theta"]`` would copy them)."""
        server, rep = per_replica(bcast, "theta")
        B = len(rep)
        state = {"k": torch.zeros(B, dtype=server.dtype, device=server.device)}
        if self.client == "sgd":
            return state
        cover = self.cover(ctx.layout)
        if self._starts_as_rows(cover, server):
            return {**state, **self._start_rows(cover, bcast, B, server)}
        like = dict(dtype=server.dtype, device=server.device)
        if self.init == "server":
            mu = cover.cover_max(bcast["pre"])
            nu = cover.cover_min(mu)
        else:
            mu = torch.zeros(B, cover.size, **like)
            nu = torch.zeros(B, server.shape[1], **like)
        state.update(mu=mu, nu=nu)
        if self.client == "adam":
            state["m"] = torch.zeros(B, server.shape[1], **like)
        return state

    def _starts_as_rows(self, cover, server) -> bool:
        """Whether :meth:`local_start` hands the C kernel its start as row sources: its rule
        (:meth:`_native_rule`) and the kernels built for these tensors."""
        return (self._native_rule() and native_sm3.layer_desc(cover) is not None
                and native.usable(server))

    def _start_rows(self, cover, bcast, B, server) -> dict:
        """The preconditioner's and ``m``'s start as :mod:`sims.row_source` rows, no ``[B, d]``
        tensor made (issue 16): zeros as :class:`~sims.row_source.ZeroRows` (one shared zero
        row); DJA's server statistic ``v`` ``[R, d]`` as :class:`~sims.row_source.ServerRows`
        (each participant its replica's row; SM3-II: the cover maxima and minima of the ``R``
        rows, the same values as of the gathered ones). The full preconditioner's ``nu`` is
        its ``mu`` (the same source). Never written: the first step writes new tensors."""
        dtype, device = server.dtype, server.device
        full = self.precond == "full"
        if self.init == "server":
            pre, rep = per_replica(bcast, "pre")
            if full:
                mu = nu = ServerRows(pre.contiguous(), rep)
            else:
                mu_r = cover.cover_max(pre).contiguous()
                mu = ServerRows(mu_r, rep)
                nu = ServerRows(cover.cover_min(mu_r).contiguous(), rep)
        else:
            mu = ZeroRows(B, cover.size, dtype, device)
            nu = mu if full else ZeroRows(B, server.shape[1], dtype, device)
        out = {"mu": mu, "nu": nu}
        if self.client == "adam":
            out["m"] = ZeroRows(B, server.shape[1], dtype, device)
        return out

    def owned_start_keys(self):
        """Every tensor :meth:`local_start` hands out is made there: zeros, or (DJA) the cover
        maxima of the server's preconditioner and their cover minima (new tensors, never the
        broadcast rows ``bcast["pre"]``). Its row sources (:meth:`_start_rows`) are never
        written, whatever this says: a step writes their new rows into new tensors."""
        return frozenset({"mu", "nu", "m"})

    def _accumulate(self, cover, mu, g2):
        """New ``(mu, nu)`` after one preconditioner update with ``g^2``."""
        ema = self.client == "adam"
        b2 = self.beta2
        if self.sm3_ii:
            prev = cover.cover_min(mu)
            nu = b2 * prev + (1 - b2) * g2 if ema else prev + g2
            return cover.cover_max(nu), nu
        inc = cover.cover_max(g2)
        mu = b2 * mu + (1 - b2) * inc if ema else mu + inc
        return mu, cover.cover_min(mu)

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        # the SM3-II or full-preconditioner step in one C pass (_native_step,
        # sims.accel.native.sm3) first: it reads a DeferredGrad (sims.deferred_grad) and
        # local_start's row sources (sims.row_source) where they are; then torch's
        # fused kernels (_torch_fused_step: in place, no compile; the full preconditioner,
        # and SM3-II with the cover around the kernel where the C kernels are off); the
        # opt-in compiled kernel (_compiled_full_step, FEDTOOLKIT_COMPILE) where neither
        # applies. torch's kernels before the compiled one, measured faster for both
        # preconditioners (README, "Every algorithm": FedAda2 / FedAda2-Adam / blend 2.58x /
        # 2.75x / 2.37x of fused Fed-SGD with torch's kernels, 2.82x / 3.28x / 4.19x when the
        # compiled SM3-II kernel went first)
        if self._native_rule():
            got = self._native_step(theta, grad, lstate, mask, ctx)
            if got is not None:
                return got
        # every other form gets plain tensors: row sources materialized (new tensors)
        lstate, theta = _plain(lstate)[0], materialized(theta)
        if self.local_warmup:                 # the rate changes step by step: the readable rule
            return self.reference_local_step(theta, materialized(grad), lstate, bcast, cstate,
                                             mask, ctx)
        # a DeferredGrad is read where it is by the full preconditioner's row lists
        # (_kernel_rows_step); every other form gets the tensor
        for form in (self._torch_fused_step, self._compiled_full_step):
            parts_ok = form == self._torch_fused_step and self.precond != "sm3-ii"
            got = form(theta, grad if parts_ok else materialized(grad), lstate, mask, ctx)
            if got is not None:
                return got
        grad = materialized(grad)
        if (self.client == "adagrad" and self.delay == 1 and not self.clip
                and not self.freeze_epochs
                and not torch.is_tensor(self.eps)):          # sims.rules.optim.sm3_adagrad_step
            th, mu, nu = sm3_adagrad_step(self.cover(ctx.layout), theta, grad, lstate["mu"],
                                          self.eta_l, self.eps, self.sm3_ii)
            new = {"k": lstate["k"] + 1, "mu": mu, "nu": nu}
            new = {key: _masked(mask, val, lstate[key]) for key, val in new.items()}
            return _masked(mask, th, theta), new
        if (self.client == "adam" and self.delay == 1 and not self.clip
                and not self.freeze_epochs
                and not any(torch.is_tensor(x) for x in (self.eps, self.beta1, self.beta2))):
            k = lstate["k"] + 1                         # sims.rules.optim.sm3_adam_step
            c1 = c2 = None
            if self.bias_correction:
                updates = k + ctx.t if self.init == "server" else k
                c1 = 1 - self.beta1 ** k.unsqueeze(-1)
                c2 = 1 - self.beta2 ** updates.unsqueeze(-1)
            th, m, mu, nu = sm3_adam_step(self.cover(ctx.layout), theta, grad, lstate["m"],
                                          lstate["mu"], self.eta_l, self.eps, self.sm3_ii,
                                          self.beta1, self.beta2, c1, c2)
            new = {"k": k, "mu": mu, "nu": nu, "m": m}
            new = {key: _masked(mask, val, lstate[key]) for key, val in new.items()}
            return _masked(mask, th, theta), new
        return self.reference_local_step(theta, grad, lstate, bcast, cstate, mask, ctx)

    @property
    def _every_step(self) -> bool:
        """An adaptive client whose preconditioner is updated at every step (``z = 1``, no
        freezing, no clipping) with numeric constants: the one-pass kernels' rule."""
        return (self.delay == 1 and not self.freeze_epochs and not self.clip
                and self.client in ("adagrad", "adam")
                and not any(torch.is_tensor(x)
                            for x in (self.eps, self.beta1, self.beta2, self.eta_l)))

    def _kernel_rule(self) -> bool:
        """Whether the client step is the rule of torch's fused kernels (:mod:`sims.torch_fused`,
        :meth:`_kernel_rows_step`): SGD, or AdaGrad / Adam with the full or the SM3-II
        preconditioner updated at every step (``z = 1``, no freezing, no clipping, no warm-up)
        and numeric constants; not DJA's client Adam with bias correction (``v`` debiased by
        ``k + t`` updates and ``m`` by ``k``: two counts where the kernel takes one)."""
        if self.local_warmup or self.clip or torch.is_tensor(self.eta_l):
            return False
        if self.client == "sgd":
            return True
        return (self.precond != "sm3-i" and self._every_step
                and not (self.client == "adam" and self.bias_correction
                         and self.init == "server"))

    @property
    def takes_deferred_grad(self) -> bool:
        """A :class:`sims.deferred_grad.DeferredGrad` is read where it is by the C kernel
        (:meth:`_native_step`: each row's block through its address) and by the full
        preconditioner's row lists through torch's kernels (:meth:`_kernel_rows_step`):
        asked for there only; any other form would copy its block late, from memory
        (measured: the SM3-II step through torch's kernels 10 ms a round slower)."""
        if self.client == "sgd" or self.local_warmup:
            return False
        if self._native_rule() and native.library() is not None:
            return True
        return (self.precond != "sm3-ii" and self._kernel_rule() and torch_fused.enabled())

    @property
    def takes_row_sources(self) -> bool:
        """The engine may hand the round's first step ``theta`` as a
        :class:`sims.row_source.ServerRows` (the server models, not copied) and the last step
        ``ctx.extra["delta_from"]``, where the step then writes the round's ``delta`` (and
        marks the request done): the protocol of :mod:`sims.row_source`, taken by
        the C kernel (:meth:`_native_step`); every other form materializes ``theta`` and
        leaves ``delta`` to the engine."""
        return (self.client != "sgd" and self._native_rule()
                and native.library() is not None)

    def _native_rule(self) -> bool:
        """Whether the client step is :mod:`sims.accel.native.sm3`'s rule: AdaGrad / Adam with the
        SM3-II or the full preconditioner updated at every step (``z = 1``, no freezing, no
        clipping, no warm-up) and numeric constants, with or without bias correction (one
        count for ``m`` and another for ``nu``: DJA's ``k + t`` too), where
        :attr:`native_step` is on.

        The full preconditioner (every layer a vector, :class:`sims.rules.optim.SM3Cover` with
        ``full=True``) alone was measured about as fast through torch's fused kernels (one
        thread, ``[25, 159010]`` float32, in place, caches flushed, fastest of 15: C 1.24 /
        2.04 ms, torch 1.20 / 1.73 ms for AdaGrad / Adam; the C loop now 1.15-1.2 / 1.6-1.7 ms);
        in the round the C kernel wins by what it spares around the step
        (:meth:`_native_rows_step`: the deferred gradient block read where it is, no ``nu``
        written, the round's start read from the server's rows and one zero row, no gathered
        server models in :meth:`local_start`). The issue-16 benchmark's rounds, one process,
        the kernel on and off interleaved (fastest round of 6, three repeats; split medians;
        load < 1): joint-adaptive 61.0 / 63.6 ms (local step 14.2 / 15.9 ms, the rest 4.8 /
        5.8 ms), FedAdaAdagrad 61.7 / 62.4 ms (14.3 / 15.6, 4.9 / 5.8), DJA 60.4 / 67.1 ms
        (14.3 / 16.4, 4.9 / 7.3), FedAdaAdam 65.5 / 68.5 ms (19.0 / 21.4, 4.7 / 6.2); eight
        on/off pairs in alternating order, the round's fastest of 5: off minus on, median
        (range) joint-adaptive 3.4 (1.4-5.7) ms, DJA 6.4 (0.1-13.7), FedAdaAdam 4.2 (3.0-6.6).
        ``benchmarks/algorithms_vs_loop.py --threads 1 --repeats 3``, before and after this
        change, two runs each, alternated, load < 1: ``speedup_vs_loop`` of DJA /
        joint-adaptive / FedAdaAdagrad / FedAdaAdam 1.79, 1.79 / 1.78, 1.85 / 1.80, 1.82 /
        1.90, 2.09x before, 2.08, 1.90 / 2.05, 2.01 / 1.98, 1.99 / 2.15, 2.14x after (local
        step 17.9-18.2 -> 14.4-15.2 ms, the rest 6.9-8.5 -> 4.9-5.3 ms a round; FedAda2 /
        FedAda2-Adam / FedAda2-blend, which read their start and (not the blend) the deferred
        block the same way, 74.5 / 78.0 / 78.3 -> 63.5 / 68.2 / 72.0 ms). SM3-II reading the
        deferred block where it is: within the noise (FedAda2 60.9 / 60.7 ms with and
        without, FedAda2-Adam 64.6 / 66.6 ms, fastest rounds, one process)."""
        return (self.native_step and self.precond in ("sm3-ii", "full") and self._every_step
                and not self.local_warmup)

    def _native_step(self, theta, grad, lstate, mask, ctx):
        """The SM3-II / full-preconditioner client step through :meth:`_native_rows_step` (a
        mask: its rows), into ``theta`` where the engine owns it, else into a new tensor (a
        mask: a copy, its other rows as they were); None where :meth:`_native_rule` does not
        hold or the kernel cannot take the operands (nothing written).

        ``theta`` may be a :class:`sims.row_source.RowSource` (the engine's first step under
        :attr:`takes_row_sources`: the server models, read where they are), ``grad`` a
        :class:`sims.deferred_grad.DeferredGrad`, the state :meth:`local_start`'s row
        sources. With ``ctx.extra["delta_from"]`` (the engine's last step: a
        :class:`sims.row_source.DeltaRequest` over the round's start rows) the result is the
        round's ``delta = start - theta'`` for every row, written in the same pass (a masked
        row, finished earlier: its ``start - theta``), and the request is marked done."""
        source = isinstance(theta, RowSource)
        if (not self._native_rule() or theta.dim() != 2
                or not (source or theta.is_contiguous())):
            return None
        # (the kernel's wrapper checks the operands before anything is written: a new `out`
        # made here is all a decline costs)
        request = ctx.extra.get("delta_from")          # the engine's last step
        delta_from = None if request is None else request.rows
        owned = step_owned(ctx, self.owned_start_keys())
        rows = None if mask is None else mask.nonzero().squeeze(-1)
        if owned.theta and not source:
            out = theta
        elif rows is None:
            out = torch.empty(theta.shape, dtype=theta.dtype, device=theta.device)
        else:                               # the rows not stepped as they were
            out = theta.materialize() if source else theta.clone()
        new = self._native_rows_step(theta if rows is None else out, grad, lstate, rows, owned,
                                     ctx, out=out, delta_from=delta_from)
        if new is None:
            return None
        if delta_from is not None:
            if rows is not None and len(rows) < len(mask):     # finished rows: start - theta
                rest = (~mask).nonzero().squeeze(-1)
                start = materialized(delta_from)     # (a ServerRows: its rows gathered)
                out.index_copy_(0, rest, start.index_select(0, rest)
                                - out.index_select(0, rest))
            request.done = True
        return out, new

    def _native_keys(self) -> tuple:
        """The local state's tensors the C kernel reads and writes (the full
        preconditioner's ``nu`` is its ``mu``: not written)."""
        keys = ("mu",) if self.precond == "full" else ("mu", "nu")
        return keys + ("m",) if self.client == "adam" else keys

    def _native_rows_step(self, theta, grad, st, rows, owned, ctx, out=None, delta_from=None):
        """One SM3-II or full-preconditioner client step of the rows ``rows`` (``[n]``
        indices; None: every row) in one C pass (:func:`sims.accel.native.sm3.sm3_step`, rule in
        ``sims/native/sm3.c``): the fast form of :meth:`reference_local_step` where
        :meth:`_native_rule` holds, held to it in float64 by
        ``tests/test_fedada2_fast_step.py`` and ``tests/test_fedada2_full_native.py``. The
        contract of :meth:`_kernel_rows_step`: ``theta`` (the caller's to write) gets its
        rows ``rows`` stepped in place (``out``: into that ``[B, d]`` tensor instead, its other
        rows left alone), ``owned`` says which of ``st``'s tensors may be written; returns the
        new state (rows outside ``rows`` as they were), or None (nothing written) when the
        kernel is not built or cannot take these operands. ``delta_from``: ``out``'s stepped
        rows get ``delta_from - theta'`` (:meth:`_native_step`).

        Read where they are: ``grad`` a :class:`sims.deferred_grad.DeferredGrad` (each row's
        block through its address); ``theta`` and every row of the state a
        :class:`sims.row_source.RowSource` (:meth:`local_start`'s zeros and server rows,
        through per-row address tables; a subset of rows has them materialized first, its
        other rows' state being theirs).

        SM3-II: each (row, layer) is one loop: ``nu = cover_min(mu) + g^2`` (Adam: ``b2
        cover_min(mu) + (1 - b2) g^2`` and ``m``), the step, and the new ``mu =
        cover_max(nu)`` in registers and a cache-resident scratch; ``nu`` is written too, the
        state carrying it (read by the readable rule and, with ``z > 1``, by the next step;
        with ``z = 1`` nothing reads it). Passes over the rows (Adam / AdaGrad): 4 / 3 reads
        (``g``, ``theta``, ``m``, the small ``mu``), 3 / 2 writes (``theta``, ``m``, ``nu``).
        Measured, one thread, the issue-16 benchmark's ``[25, 159010]`` float32, in place,
        caches flushed, fastest of 15: AdaGrad 1.3 ms, Adam 2.0 ms (without writing ``nu``:
        0.9 / 1.6 ms) against 2.3 / 3.1 ms for torch's kernel with the cover around it
        (:meth:`_kernel_rows_step`); the benchmark's local step
        (``benchmarks/algorithms_vs_loop.py --threads 1``, one run) of FedAda2 /
        FedAda2-Adam / FedAda2-blend went from 28.7 / 33.9 / 34.1 to 16.2 / 24.6 / 21.3 ms a
        round, 2.31 / 2.60 / 2.40x of fused Fed-SGD to 1.97 / 2.18 / 2.17x.

        The full preconditioner (every layer a vector): ``nu = mu + g^2`` (Adam ``b2 mu + (1 -
        b2) g^2``) written into ``mu`` itself, ``nu`` the same tensor (``mu = nu = v``, as the
        torch form's state): reads ``g``, ``theta``, ``mu`` (Adam ``m``), writes ``theta``,
        ``mu`` (``m``), the rule's 5 / 7 streams."""
        if not self._native_rule() or isinstance(out if out is not None else theta, RowSource):
            return None
        cover = self.cover(ctx.layout)
        owned = Owned.of(owned)
        if rows is not None:                # the other rows' state must be in the outputs
            st, made = _plain(st)
            owned = owned.plus(*made)
        adam = self.client == "adam"
        keys = self._native_keys()
        out = theta if out is None else out

        def written(key):                   # the tensor st[key]'s new rows go into
            t = st[key]
            if isinstance(t, RowSource):    # read where it is, never written (rows None)
                return torch.empty(t.shape, dtype=t.dtype, device=t.device)
            if owned(key):
                return t
            return torch.empty_like(t) if rows is None else t.clone()

        new = {key: written(key) for key in keys}
        if rows is None:
            k = kr = st["k"] + 1
        else:
            k = st["k"].index_add(0, rows, torch.ones(len(rows), dtype=st["k"].dtype,
                                                      device=out.device))
            kr = k.index_select(0, rows)
        c1 = c2 = None
        if adam and self.bias_correction:
            c1 = 1 - self.beta1 ** kr
            c2 = 1 - self.beta2 ** (kr + ctx.t if self.init == "server" else kr)
        ok = native_sm3.sm3_step(cover, theta, grad, st["mu"], self.eta_l, self.eps,
                                 m=st["m"] if adam else None, beta1=self.beta1,
                                 beta2=self.beta2, c1=c1, c2=c2, rows=rows, theta_out=out,
                                 mu_out=new["mu"], m_out=new.get("m"), nu_out=new.get("nu"),
                                 delta_from=delta_from)
        if not ok:
            return None
        if "nu" not in keys:                # the full preconditioner: nu is mu
            new["nu"] = new["mu"]
        new["k"] = k
        return new

    def _torch_fused_step(self, theta, grad, lstate, mask, ctx):
        """The AdaGrad / Adam client step (full or SM3-II preconditioner, ``z = 1``) through
        torch's fused CPU kernels, every row at once (:meth:`_kernel_rows_step`), in place on
        the engine's owned state; None where the rule is not the kernels'
        (:meth:`_kernel_rule`), for an SGD client, a mask or per-replica constants. Both
        preconditioners come here only where the C kernel (:meth:`_native_step`, tried
        first) is off or not built.

        The full preconditioner goes before :meth:`_compiled_full_step`, by measurement: one
        thread, the issue-16 benchmark's ``[25, 159010]`` float32 step, fastest of 20, AdaGrad
        1.1 ms (compiled 1.7-2.2 ms, eager 5.6-6.9 ms), Adam 1.7 ms (compiled 3.2-3.3 ms,
        eager 7.6-9.1 ms); whole rounds of the benchmark (``--compile --torch-fused-ab``, one
        run): 1.09-1.25x faster than with the compiled kernel. SM3-II (the opt-in compiled
        kernel first), same shapes, owned state, caches flushed before each call (as a round's
        gradient work leaves them), fastest of 15: AdaGrad 3.4 ms (eager
        :func:`sims.rules.optim.sm3_adagrad_step` 5.9 ms), Adam 4.1 ms (eager
        :func:`sims.rules.optim.sm3_adam_step` 7.7 ms); of which the kernel 1.5 / 2.0 ms,
        ``cover_min`` 0.5 ms and ``cover_max`` 1.3-1.8 ms; ``cover_max`` is now
        :meth:`sims.rules.optim.SM3Cover.cover_max_nonneg` (``nu >= 0``: integer-view maxima, the
        large layer participant by participant), 0.77 ms for the first layer where
        ``cover_max`` took 1.8: the benchmark's FedAda2 / FedAda2-Adam local step went from
        37.5 / 43.1 to 26.9 / 33.8 ms a round."""
        if (self.client == "sgd" or not self._kernel_rule()
                or not torch_fused.usable(mask, theta, self.eta_l)
                or not torch_fused.ready(self.client, theta.dtype)):
            return None
        owned = step_owned(ctx, self.owned_start_keys())
        th = torch_fused.writable(theta, owned.theta)
        new = self._kernel_rows_step(th, grad, lstate, None, owned, ctx)
        return None if new is None else (th, new)

    def _kernel_rows_step(self, theta, grad, st, rows, owned, ctx):
        """One client step of the rows ``rows`` (``[n]`` indices; None: every row) through
        torch's fused kernels on lists of rows, in place: the fast form of
        :meth:`reference_local_step` where :meth:`_kernel_rule` holds (held to it in float64
        by ``tests/test_fedada2_fast_step.py`` and ``tests/test_torch_fused.py``).

        ``theta`` ``[B, d]`` is the caller's to write: its rows ``rows`` are stepped in place,
        the others left alone; ``grad`` and the state ``st`` are over the same ``B`` rows, and
        ``owned`` (a bool, or a :class:`sims.ownership.Owned` over ``"mu"``, ``"nu"``, ``"m"``)
        says which of ``st``'s tensors may be written too (the others written are copied
        first). Returns the new state (rows outside ``rows`` as they were), or None
        when a kernel is not available (known before anything is written).

        The kernels' rules (:mod:`sims.torch_fused`) with ``z = 1``: SGD ``theta - eta_l g``
        (``torch._foreach_add_``); AdaGrad ``v <- v + g^2``, ``theta - eta_l g / (sqrt(v) +
        eps)``; Adam ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``, ``theta - eta_l
        (m / c1) / (sqrt(v / c2) + eps)`` with one count ``k`` for ``c1``, ``c2`` (which
        ``floor((k-1)/z) + 1 = k`` is). The full preconditioner is ``v`` itself (``mu = nu =
        v``). SM3-II (Alg. 4, :meth:`_accumulate`): the kernel is handed ``v = cover_min(mu)``,
        written into the preconditioner's own buffer, and turns it into this step's ``nu``
        (``cover_min(mu) + g^2``; Adam ``b2 cover_min(mu) + (1 - b2) g^2``) as it steps;
        ``mu = cover_max(nu)`` (each layer's row and column maxima, by
        :meth:`sims.rules.optim.SM3Cover.cover_max_nonneg`) follows. Passes over the rows (Adam /
        AdaGrad): ``cover_min`` 1 write, the kernel 4 / 3 reads and 3 / 2 writes, the cover
        maxima 1 read (the large layer's second reduction reads from the cache); a subset of rows adds writing ``nu`` back (1
        read, 1 write)."""
        B = theta.shape[0]
        st, made = _plain(st)               # local_start's row sources as new tensors
        owned = Owned.of(owned).plus(*made)
        idx = range(B) if rows is None else rows.tolist()
        sm3 = self.precond == "sm3-ii"
        parts = _row_parts(grad, theta) if rows is None and not sm3 and \
            self.client != "sgd" else None
        grad = materialized(grad) if parts is None else grad.flat
        t_all, g_all = theta.unbind(0), grad.unbind(0)
        t_rows, g_rows = [t_all[i] for i in idx], [g_all[i] for i in idx]
        if rows is None:
            k = st["k"] + 1
        else:
            k = st["k"].index_add(0, rows, torch.ones(len(idx), dtype=st["k"].dtype,
                                                      device=theta.device))
        new = {"k": k}
        if self.client == "sgd":
            torch._foreach_add_(t_rows, g_rows, alpha=-float(self.eta_l))
            return new
        if not torch_fused.ready(self.client, theta.dtype):
            return None
        if sm3:                                         # v = cover_min(mu), the kernel's input
            cover = self.cover(ctx.layout)
            if rows is None:
                v = cover.cover_min_into(st["mu"], st["nu"] if owned("nu") and st["nu"]
                                         .is_contiguous() else torch.empty_like(theta))
            else:
                v = cover.cover_min_into(st["mu"].index_select(0, rows),
                                         theta.new_empty(len(idx), theta.shape[1]))
            v_rows = list(v.unbind(0))
        else:                                           # the full accumulator itself
            v = torch_fused.writable(st["mu"], owned("mu"))
            v_all = v.unbind(0)
            v_rows = [v_all[i] for i in idx]
        m = m_rows = None
        if self.client == "adam":
            m = torch_fused.writable(st["m"], owned("m"))
            m_all = m.unbind(0)
            m_rows = [m_all[i] for i in idx]
        steps = None
        if self.client == "adam" and self.bias_correction:
            steps = k if rows is None else k.index_select(0, rows)
        if parts is not None:        # each row as its pieces around the deferred block
            block, pieces = parts    # (every row: rows is None, the full preconditioner)
            t_rows, v_rows = _split_rows(theta, block), _split_rows(v, block)
            m_rows = None if m is None else _split_rows(m, block)
            g_rows = _split_rows(grad, block, pieces)
            if steps is not None:
                steps = steps.repeat_interleave(len(t_rows) // len(idx))
        if self.client == "adagrad":
            ok = torch_fused.adagrad_rows(t_rows, g_rows, v_rows, self.eta_l, self.eps)
        else:
            ok = torch_fused.adam_rows(t_rows, g_rows, m_rows, v_rows, steps, self.eta_l,
                                       self.beta1, self.beta2, self.eps)
            new["m"] = m
        if not ok:
            return None
        if not sm3:
            new.update(mu=v, nu=v)
        elif rows is None:
            new.update(mu=cover.cover_max_nonneg(v), nu=v)
        else:
            mu_rows = cover.cover_max_nonneg(v)
            new.update(mu=torch_fused.writable(st["mu"], owned("mu")).index_copy_(0, rows,
                                                                                  mu_rows),
                       nu=torch_fused.writable(st["nu"], owned("nu")).index_copy_(0, rows, v))
        return new

    def _compiled_full_step(self, theta, grad, lstate, mask, ctx):
        """The client AdaGrad / Adam step as one compiled kernel (opt-in): the full
        preconditioner (``mu = nu = v``, :func:`sims.compiled.fused_full_precond_step`) or
        SM3-II (:meth:`_compiled_sm3_step`); None where it does not apply (SM3-I, delay
        ``z > 1``, epoch-wise freezing, clipping, per-replica constants, a mask)."""
        if (self.precond == "sm3-i" or not self._every_step
                or not compiled.full_usable(mask, theta)):
            return None
        k = lstate["k"] + 1
        if self.precond == "sm3-ii":
            return self._compiled_sm3_step(theta, grad, lstate, k, ctx)
        if self.client == "adagrad":
            got = compiled.fused_full_precond_step(theta, grad, lstate["mu"], self.eta_l, self.eps)
            if got is None:
                return None
            th, v = got
            return th, {"k": k, "mu": v, "nu": v}
        c1 = c2 = None
        if self.bias_correction:
            updates = k + ctx.t if self.init == "server" else k
            c1 = 1 - self.beta1 ** k.unsqueeze(-1)
            c2 = 1 - self.beta2 ** updates.unsqueeze(-1)
        got = compiled.fused_full_precond_step(theta, grad, lstate["mu"], self.eta_l, self.eps,
                                               lstate["m"], self.beta1, self.beta2, c1, c2)
        if got is None:
            return None
        th, m, v = got
        return th, {"k": k, "mu": v, "nu": v, "m": m}

    def _bias_corrections(self, k, ctx):
        if not self.bias_correction:
            return None, None
        updates = k + ctx.t if self.init == "server" else k
        return 1 - self.beta1 ** k.unsqueeze(-1), 1 - self.beta2 ** updates.unsqueeze(-1)

    def _compiled_sm3_step(self, theta, grad, lstate, k, ctx):
        """The SM3-II client step as one compiled kernel
        (:func:`sims.compiled.fused_sm3_step`), or None when compiling failed."""
        cover = self.cover(ctx.layout)
        if self.client == "adagrad":
            got = compiled.fused_sm3_step(cover, theta, grad, lstate["mu"], self.eta_l, self.eps)
            if got is None:
                return None
            th, mu, nu = got
            return th, {"k": k, "mu": mu, "nu": nu}
        c1, c2 = self._bias_corrections(k, ctx)
        got = compiled.fused_sm3_step(cover, theta, grad, lstate["mu"], self.eta_l, self.eps,
                                      lstate["m"], self.beta1, self.beta2, c1, c2)
        if got is None:
            return None
        th, mu, nu, m = got
        return th, {"k": k, "mu": mu, "nu": nu, "m": m}

    def reference_local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        """The rule as written in the class docstring (the fast form is tested against it)."""
        theta, lstate = materialized(theta), _plain(lstate)[0]   # row sources as tensors
        k = lstate["k"] + 1
        new = {"k": k}
        if self.client == "sgd":
            u = grad
        else:
            upd, count = self._updates(k, ctx)
            upd = upd.unsqueeze(-1)
            mu_new, nu_new = self._accumulate(self.cover(ctx.layout), lstate["mu"], grad * grad)
            mu = torch.where(upd, mu_new, lstate["mu"])
            nu = torch.where(upd, nu_new, lstate["nu"])
            new.update(mu=mu, nu=nu)
            if self.client == "adagrad":
                u = grad / (torch.sqrt(nu) + self.eps)
            else:
                m = self.beta1 * lstate["m"] + (1 - self.beta1) * grad
                m_hat, nu_hat = m, nu
                if self.bias_correction:
                    updates = count
                    if self.init == "server":
                        updates = updates + ctx.t
                    m_hat = m / (1 - self.beta1 ** k.unsqueeze(-1))
                    nu_hat = nu / (1 - self.beta2 ** updates.unsqueeze(-1))
                u = m_hat / (torch.sqrt(nu_hat) + self.eps)
                new["m"] = m
        if self.clip:
            norm = u.norm(dim=-1, keepdim=True)
            skip = (norm > 0) & (norm < self.clip)
            u = torch.where(skip, torch.zeros_like(u), u)
            if "m" in new:
                new["m"] = torch.where(skip, torch.zeros_like(u), new["m"])
        new = {key: _masked(mask, val, lstate[key]) for key, val in new.items()}
        lr = self.eta_l * warmup_scale(k, self.local_warmup)
        return _masked(mask, theta - lr * u, theta), new

    # ------------------------------------------------------------------ accounting
    def uplink_bits(self, layout):
        return bits(layout, 1)

    def downlink_bits(self, layout):
        return bits(layout, 2 if self.init == "server" else 1)

    def client_memory(self, layout) -> int:
        """The model, the preconditioner (``d`` full, the cover size with SM3), Adam's ``m``,
        and SM3-II's ``nu`` kept between delayed updates."""
        if self.client == "sgd":
            return layout.d
        pre = self.cover(layout).size
        return (layout.d + pre + (layout.d if self.client == "adam" else 0)
                + (layout.d if self.sm3_ii and self.delay > 1 else 0))

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
    server: str = "adam"
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


def epoch_steps_of(ctx) -> torch.Tensor:
    """``[B]`` steps per local epoch of the chunk's participants (set by the engine for an
    algorithm with ``needs_epoch_steps``; a problem without epochs cannot freeze by epoch)."""
    steps = ctx.extra.get("epoch_steps")
    if steps is None:
        raise OptimizerError("freeze_epochs needs a problem with local epochs (its "
                             "epoch_steps(client)); this one has none")
    return steps


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
    """
    name = "fedada2-blend"
    takes_deferred_grad = False     # its members' forms read the whole tensor
    takes_row_sources = False       # its theta is written row group by row group
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

    def _strategy(self, ctx) -> torch.Tensor:
        return torch.remainder(ctx.clients, len(self.members))

    def owned_start_keys(self):
        """None of its own (``k`` and the members' states): each member's state is its own
        :meth:`JointAdaptive.local_start`'s, stepped under that member's declaration."""
        return frozenset()

    def local_start(self, bcast, cstate, ctx):
        server, rep = per_replica(bcast, "theta")           # not the gathered rows
        return {"k": torch.zeros(len(rep), dtype=server.dtype, device=server.device),
                "members": [m.local_start(bcast, cstate, ctx) for m in self.members]}

    def _rows(self, lstate, mask, ctx):
        """Each member's rows this step: its strategy's clients that take a step and have
        steps left in its budget."""
        which = self._strategy(ctx)
        active = torch.ones_like(which, dtype=torch.bool) if mask is None else mask
        out = []
        for l in range(len(self.members)):
            mine = active & (which == l)
            if self.step_list[l] is not None:
                mine = mine & (lstate["k"] < self.step_list[l])
            out.append(mine)
        return active, out

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        """Each member steps its own rows only: the fast form of :meth:`reference_local_step`,
        where every member runs over all rows under a mask (3 strategies: 3 full updates and
        their ``where`` passes a step); held to it in float64 by
        ``tests/test_fedada2_fast_step.py``.

        An SM3-II or full-preconditioner member with ``z = 1``
        (:meth:`JointAdaptive._native_rule`) steps its rows in place in the chunk's ``theta``
        and its own state in one C pass (:meth:`JointAdaptive._native_rows_step`; its
        ``local_start`` row sources read where they are when it has every row, materialized
        for a subset); a member whose rule is torch's fused
        kernels' (SGD, AdaGrad / Adam with the full or SM3-II preconditioner, ``z = 1``:
        :meth:`JointAdaptive._kernel_rule`) through row lists
        (:meth:`JointAdaptive._kernel_rows_step`): no rows gathered or written back, and with
        every row on one strategy the member's whole-tensor form. Any other member (SM3-I,
        delays, clipping, or any member while those kernels are off) is
        handed its rows gathered, steps them through its own :meth:`JointAdaptive.local_step`
        and has them written back. Per-replica hyperparameters (``[B, 1]`` rows bound to the
        whole chunk, :mod:`sims.experiments.sweep.per_replica`) take the reference form."""
        if any(torch.is_tensor(getattr(member, f.name)) for member in self.members
               for f in dataclasses.fields(member)):
            return self.reference_local_step(theta, grad, lstate, bcast, cstate, mask, ctx)
        active, rows = self._rows(lstate, mask, ctx)
        owned_theta = step_owned(ctx).theta
        in_place = torch_fused.usable(None, theta, self.eta_l)
        new_theta, new_states = None, []
        for member, st, mine in zip(self.members, lstate["members"], rows):
            idx = mine.nonzero().squeeze(-1)
            if len(idx) == 0:
                new_states.append(st)
                continue
            if new_theta is None:
                new_theta = torch_fused.writable(theta, owned_theta)
            new = None
            some = None if len(idx) == len(mine) else idx        # None: every row
            # a member's state on a first step is its own local_start's, unchanged
            if member._native_rule():       # SM3-II: one C pass over its rows, in place
                new = member._native_rows_step(new_theta, grad, st, some,
                                               step_owned(ctx, member.owned_start_keys()), ctx)
            if new is None and in_place and member._kernel_rule():
                new = member._kernel_rows_step(new_theta, grad, st, some,
                                               step_owned(ctx, member.owned_start_keys()), ctx)
            if new is None:                 # rows gathered (nothing was written above)
                st = _plain(st)[0]
                sub = dataclasses.replace(ctx, replica=ctx.replica[idx], clients=ctx.clients[idx],
                                          last_round=ctx.last_round[idx], uniforms=None)
                th, sst = member.local_step(new_theta.index_select(0, idx),
                                            grad.index_select(0, idx),
                                            {k: v.index_select(0, idx) for k, v in st.items()},
                                            None, cstate, None, sub)
                new_theta.index_copy_(0, idx, th)
                new = {k: st[k].clone().index_copy_(0, idx, v) for k, v in sst.items()}
            new_states.append(new)
        return (theta if new_theta is None else new_theta,
                {"k": lstate["k"] + active.to(theta.dtype), "members": new_states})

    def reference_local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        """Every member's readable rule (:meth:`JointAdaptive.reference_local_step`) over all
        rows under the mask of its rows (the readable form)."""
        which = self._strategy(ctx)
        active = torch.ones_like(which, dtype=torch.bool) if mask is None else mask
        new_states = []
        for l, (member, st) in enumerate(zip(self.members, lstate["members"])):
            mine = active & (which == l)
            if self.step_list[l] is not None:
                mine = mine & (lstate["k"] < self.step_list[l])
            theta, st = member.reference_local_step(theta, grad, st, bcast, cstate, mine, ctx)
            new_states.append(st)
        return theta, {"k": lstate["k"] + active.to(theta.dtype), "members": new_states}

    def client_message(self, delta, lstate, cstate, ctx):
        w = torch.as_tensor(self.weight_list, dtype=delta.dtype, device=delta.device)
        return delta * w[self._strategy(ctx)].unsqueeze(-1), cstate, {}

    def client_memory(self, layout) -> int:
        """The largest of the strategies' client memories."""
        return max(m.client_memory(layout) for m in self.members)

    def describe(self):
        return describe_dataclass(self)

"""Shared machinery of the adaptive federated algorithms (Fed-LAMB, FedLADA, FedAda2 families).

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
  ``"decoupled"`` subtracts ``lr * wd * theta`` from the step instead (AdamW style; also what
  FL-Simulator's FedCM amounts to, where the weight decay is not scaled by alpha).

Pieces:

* :class:`LocalAdaptive` -- one local AMSGrad / Adam step with the options the papers need:
  the amended correction ``alpha * u + (1 - alpha) * g_a`` (FedLADA Alg. 3), the layer-wise
  trust ratio (Fed-LAMB Alg. 2 line 13, :class:`sims.rules.optim.TrustRatio`), ``vhat`` updated per
  step (AMSGrad) or fixed for the round (Fed-LAMB's server ``vhat``), bias correction on
  copies. It gives Fed-AMS, Fed-LAMB, LocalAdam and FedLADA.
* :class:`FedOpt` -- local SGD (optionally proximal, FedProx; optionally amended, FedCM) and a
  server rule from :func:`server_rule` on the mean pseudo-gradient: FedAvg / Fed-SGD, FedProx,
  FedCM, FedAdam, FedAdam(*), FedAdaGrad, FedYogi, Adp-Fed are presets of it.
* :class:`ParticipantTally` -- the number of participants of each replica in the round, for
  rules that need ``|S|`` itself and not just means (SCAFFOLD's ``c <- c + |S|/N mean dc``):
  the hooks only see per-replica means, so the algorithm counts the participants it is shown
  in ``client_message`` (every chunk of a round) and reads the count in ``server_step``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..rules.optim import (SGD, AdaptiveRule, AffineSGD, OptimizerError, TrustRatio, _masked, axpy,
                     local_adaptive_fast_ok, local_adaptive_step, trust_step,
                     unscaled_vhat)
from .. import compiled, torch_fused
from ..row_source import ScaledRows, materialized, materialized_state
from ..accel.native import adaptive as native_adaptive
from ..accel.native import enabled as native_enabled
from ..ownership import Owned
from ..core.batching import per_replica, replica_runs
from .base import Algorithm, masked_rows

WD_MODES = ("coupled", "decoupled")
SERVER_KINDS = ("sgd", "adam", "amsgrad", "adagrad", "yogi")


def lr_at(lr: float, decay: float, t: int) -> float:
    """The learning rate of round ``t`` (0-based) under per-round decay."""
    return lr * decay ** t


def warmup_scale(k, steps: int):
    """The factor of local step ``k``'s rate (1-based, ``[B]``) under a linear warm-up over
    the first ``steps`` local steps (FedAda2 App. H.2, its ViT runs: "linear warm-up from 0
    over the first 10 local backprop steps", read as ``min(1, k / steps)``, so the first step
    already moves): ``[B, 1]``; 1 when ``steps`` is 0 (no warm-up)."""
    if not steps:
        return 1.0
    return torch.clamp(k / steps, max=1.0).unsqueeze(-1)


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


def server_rule(kind: str, lr: float, *, beta1: float = 0.9, beta2: float = 0.99,
                tau: float = 1e-3, v0: float | None = None, eps_inside_sqrt: bool = False,
                bias_correction: bool = False):
    """The server rule on the mean pseudo-gradient: SGD, or :class:`sims.rules.optim.AdaptiveRule`
    (``v0`` defaults to ``tau**2``, Reddi et al.'s and FedAda2's ``v_{-1} >= tau^2``)."""
    if kind not in SERVER_KINDS:
        raise OptimizerError(f"unknown server rule {kind!r}; choose one of {SERVER_KINDS}")
    if kind == "sgd":
        return SGD(lr)
    return AdaptiveRule(lr, kind, beta1, beta2, tau, tau * tau if v0 is None else v0,
                        eps_inside_sqrt, bias_correction)


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
    """Counts each replica's participants over the chunks of a round (see module doc)."""

    def _tally_reset(self, R: int) -> None:
        self._tally_R, self._tally = R, None

    def _tally_add(self, ctx) -> None:
        c = torch.bincount(ctx.replica, minlength=self._tally_R)
        self._tally = c if self._tally is None else self._tally + c

    def _tally_pop(self, like: torch.Tensor) -> torch.Tensor:
        """Participants per replica ``[R]`` in the dtype of ``like`` (zeros if none)."""
        c, self._tally = self._tally, None
        if c is None:
            return torch.zeros(self._tally_R, dtype=like.dtype, device=like.device)
        return c.to(like.dtype)


# ------------------------------------------------------------------------------ clients

@dataclass(frozen=True)
class LocalAdaptive:
    """One local AMSGrad / Adam step (batched over participants).

    With ``g`` the stochastic gradient (plus ``wd * theta`` when weight decay is coupled)::

        m = beta1 m + (1 - beta1) g            v = beta2 v + (1 - beta2) g^2
        n = n + 1;  m_c = m / (1 - beta1^nm), v_c = v / (1 - beta2^n)  (bias_correction; else m, v)
        vhat = max(vhat, v_c)                  (vhat="step": AMSGrad, FedLADA Alg. 3 line 10)
                                               (vhat="round": the broadcast vhat, fixed; Fed-LAMB)
        u = m_c / sqrt(vhat + eps)             (rule="adam": v_c in place of vhat)
        u = phi(||theta_l||) (u_l + lam theta_l) / ||u_l + lam theta_l||   (trust; Fed-LAMB l.13)
        theta = theta - lr (alpha u + (1 - alpha) g_a)          (FedLADA Alg. 3 line 12)

    ``n`` counts the steps the bias correction has seen (the algorithm decides whether it
    restarts each round). The raw ``m, v`` stay in the recursion; the corrected copies are
    only used for the step (Fed-LAMB spec 1.2 choice (b)).
    """
    rule: str = "amsgrad"
    beta1: float = 0.9
    beta2: float = 0.999
    vhat: str = "step"
    eps: float = 0.0
    bias_correction: bool = False
    alpha: float = 1.0
    trust: TrustRatio | None = None
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    #: take the one-pass C kernel (:mod:`sims.accel.native.adaptive`) where it is built and applies
    #: (False: the torch forms below it, for tests)
    native_step: ClassVar[bool] = True
    #: the torch-fused step with a trust ratio runs in row blocks of about this many bytes of
    #: each ``[rows, d]`` operand (:meth:`_fused_trust_blocks`)
    trust_block_bytes: ClassVar[int] = 4 * 2 ** 20

    def __post_init__(self):
        if self.rule not in ("amsgrad", "adam"):
            raise OptimizerError(f"local rule must be amsgrad or adam, got {self.rule!r}")
        if self.vhat not in ("step", "round"):
            raise OptimizerError(f"vhat must be 'step' or 'round', got {self.vhat!r}")
        for key in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise OptimizerError(f"{key} must be in [0, 1), got {getattr(self, key)}")

    @staticmethod
    def start(m, v, vhat, n, nm=None) -> dict:
        """``n``: steps ``v``'s bias correction has seen; ``nm``: the same for ``m`` (``n``
        unless ``m`` restarted while ``v`` did not)."""
        return {"m": m, "v": v, "vhat": vhat, "n": n, "nm": n if nm is None else nm,
                "k": torch.zeros_like(n)}           # local steps taken this round

    def corrected_v(self, state):
        """``v / c2`` (``c2 = 1 - beta2^n``; ``v`` without bias correction) as a message: a
        :class:`sims.row_source.ScaledRows` (the engine sums ``(1 / c2) v`` per replica without
        forming it; ``v`` may be the participants' state rows in place)."""
        if not self.bias_correction:
            return state["v"]
        c2 = 1 - self.beta2 ** state["n"].clamp_min(1).unsqueeze(-1)      # [B, 1]
        return ScaledRows(state["v"], 1 / c2)

    def reads_row_sources(self) -> bool:
        """Whether :meth:`step` reads row sources (:mod:`sims.row_source`) where they are and
        may write the round's delta: where the C kernel takes the step (the condition of
        :meth:`reads_deferred_grad`)."""
        return self.reads_deferred_grad()

    def step(self, theta, g, state, mask, lr, layout, seg=None, ga=None, owned=False,
             delta_from=None):
        """The step; a fast form where one applies (numeric constants), else
        :meth:`reference_step`. In order: the compiled form (:mod:`sims.compiled`, opt-in; one
        in-place pass); the one-pass C kernel (:mod:`sims.accel.native.adaptive`,
        :attr:`native_step`; every option of the rule, masks too);
        :meth:`_torch_fused_step`; the eager :func:`sims.rules.optim.local_adaptive_step` (fewer
        passes over ``[B, d]`` than the readable rule). ``owned``: what of ``theta`` and the
        state is the caller's to overwrite (a :class:`sims.ownership.Owned` from the engine's
        flags, :func:`sims.ownership.step_owned`; a bool: all or nothing). ``ga``: the
        amendment's ``[B, d]`` rows, or :class:`ReplicaRows` (the C kernel and the
        torch-fused step read them from the server rows per replica run; the other forms
        gather them). ``theta`` and the state's tensors may be row sources
        (:mod:`sims.row_source`): the C kernel reads them where they are, every other form
        gets them materialized. ``delta_from``: the engine's
        :class:`sims.row_source.DeltaRequest` on a last local step; where the C kernel takes
        the step it returns ``server - theta'`` and marks the request done.

        The C kernel against the torch-fused form (``FEDTOOLKIT_NATIVE=0``, or main before
        the kernel), the issue-16 benchmark (``benchmarks/algorithms_vs_loop.py --threads
        1``, ``25 x 159,010`` float32), five runs each, mostly on and off in turn (load
        0.4-1.4): the local step per round of 10 steps, Fed-AMS 29.5-31.7 -> 24.2-26.9 ms
        (9.9-10.7 -> 8.3-9.1 streams; the rule needs 9), Fed-LAMB 53.2-57.2 -> 35.9-38.4 ms
        (18.3-18.9 -> 12.1-12.8), FedLADA 32.9-36.2 -> 25.2-30.4 ms (11.0-11.9 -> 8.5-10.1),
        LocalAdam 25.3-28.4 -> 23.2-26.9 ms (8.7-9.3 -> 8.1-9.1); a round, as a multiple of
        fused Fed-SGD's: Fed-AMS 2.45-2.70 -> 2.22-2.59, Fed-LAMB 3.14-3.25 -> 2.68-2.90,
        FedLADA 2.44-2.69 -> 2.29-2.48, LocalAdam 2.21-2.52 -> 2.11-2.34 (the
        rest of each round is the gradient work). One step alone (cold cache, fastest of
        25): Fed-AMS 2.5 ms (torch-fused 2.8), Fed-LAMB 3.3 ms (5.1: the
        rest of its gap to Fed-AMS is the second read of ``theta`` and ``u`` per layer, from
        the cache, after the layer norms), FedLADA 2.6 ms (3.1), LocalAdam 2.3 ms (2.4).
        Masked steps (the C kernel takes them; the torch-fused form does not): with
        Dirichlet-sized clients (``--uneven``, one run each) a round in lockstep chunks,
        Fed-AMS 1.16 -> 0.34 s, Fed-LAMB 1.62 -> 0.36 s, FedLADA 1.19 -> 0.35 s, LocalAdam
        1.04 -> 0.34 s; in the engine's chunks by step count Fed-AMS 0.154 -> 0.124 s,
        Fed-LAMB 0.272 -> 0.177 s, FedLADA 0.179 -> 0.134 s, LocalAdam 0.135 -> 0.118 s. The
        Fed-EF CNN (``--cnn``, per-client steps of one row): Fed-AMS 0.193 -> 0.185 s a
        round (Fed-SGD 0.165-0.167 s)."""
        if local_adaptive_fast_ok(self) and self.native_step and theta.device.type == "cpu":
            # the C kernel reads a DeferredGrad's block where it is (sims.deferred_grad) and
            # row sources through their addresses (sims.row_source); it may write the delta
            got = None
            if not (compiled.enabled() and mask is None):        # (compiled.usable's rule)
                got = native_adaptive.local_adaptive_step(
                    self, theta, g, state, lr, layout, replica_rows(ga), Owned.of(owned), mask,
                    None if delta_from is None else delta_from.rows)
            if got is not None:
                if delta_from is not None:
                    delta_from.done = True
                return got
        theta, state = materialized(theta), materialized_state(state)
        if local_adaptive_fast_ok(self):
            owned = Owned.of(owned)
            # the compiled kernel (opt-in) first: in the issue-16 benchmark (with and without
            # --compile, one run each) it is as fast as torch's fused one on LocalAdam and
            # FedLADA and ~1.05x faster a round on Fed-AMS and Fed-LAMB (the fused kernel
            # plus one rescale of vhat; Fed-LAMB: plus the trust step's passes)
            if compiled.usable(self, mask, theta):
                got = compiled.fused_local_adaptive_step(self, theta, materialized(g), state,
                                                         lr, gathered(ga), owned, layout)
                if got is not None:
                    return got
            g = materialized(g)
            got = self._torch_fused_step(theta, g, state, mask, lr, ga, owned, layout)
            if got is not None:
                return got
            return local_adaptive_step(self, theta, g, state, mask, lr, layout, gathered(ga),
                                       owned)
        return self.reference_step(theta, materialized(g), state, mask, lr, layout, seg, ga)

    def reads_deferred_grad(self, dtype=None) -> bool:
        """Whether :meth:`step` reads a :class:`sims.deferred_grad.DeferredGrad`'s block
        where it is (the C kernel, :attr:`native_step`, on and built, the opt-in compiled
        form off): an algorithm then asks the engine for one (``takes_deferred_grad``).
        Elsewhere the block would be copied late, from memory instead of from the cache
        as the gradient writes it (measured: FedAda2's SM3-II step 10 ms a round slower)."""
        return (self.native_step and native_enabled() and not compiled.enabled()
                and local_adaptive_fast_ok(self))

    def _torch_fused_step(self, theta, g, state, mask, lr, ga, owned, layout):
        """The step through torch's fused Adam / AMSGrad CPU kernel (:mod:`sims.torch_fused`,
        in place on owned state) where the rule is the kernel's: ``eps = 0`` (the kernel's
        ``eps`` is outside the root, the rule's inside: equal only at 0, the registry's
        default), coupled or no weight decay (the kernel adds ``wd theta`` to ``g``), one
        count for both bias corrections (``n == nm``), AMSGrad's per-step ``vhat`` (a
        round-fixed one is not the kernel's). None otherwise (nothing written).

        Bias-corrected AMSGrad (Fed-AMS, Fed-LAMB): the kernel takes the max of the raw ``v``
        and divides by ``c2 = 1 - b2^n`` after, the rule the max of the corrected ``v``; they
        agree on ``vhat c2`` (``max(vhat, v / c2) = max(vhat c2, v) / c2``, ``c2 > 0``). So
        ``vhat`` stays in the kernel's units across steps: the state keeps ``vhat c2`` and
        ``vhat_scale = c2`` (``[B, 1]``, this step's), and the next step rescales it once, in
        place on owned state, by ``c2' / c2`` (a new tensor on a round's first step, where
        ``vhat`` is the broadcast's, never owned); every other reader unscales it first
        (:func:`sims.rules.optim.unscaled_vhat`).

        The amendment (``alpha != 1``) is the kernel at rate ``lr alpha`` and one more pass
        ``- lr (1 - alpha) g_a`` (from the server rows with :class:`ReplicaRows`: ``theta``
        read and written, ``g_a`` one row per replica). With a trust ratio (Fed-LAMB, line
        13; no amendment or weight decay): :meth:`_fused_trust_blocks`.

        One thread, ``[25, 159010]`` float32, fastest of 20: AMSGrad without bias correction
        2.1 ms (the compiled kernel 2.2 ms, the eager form 4.1 ms); an owned step with a cold
        cache, fastest of 20: LocalAdam 2.2 ms, Fed-AMS 2.5 ms (3.4 ms when ``vhat`` was
        multiplied into a new tensor and divided back each step), Fed-LAMB 4.2 ms (6.2 ms so,
        with ``u`` and the trust step in new whole tensors)."""
        trust = self.trust is not None
        if (self.eps or not torch_fused.usable(mask, theta, lr)
                or (trust and (self.weight_decay or self.alpha != 1))
                or (self.weight_decay and self.wd_mode != "coupled")
                or (self.rule == "amsgrad" and self.vhat != "step")
                or not torch_fused.ready("adam", theta.dtype)):
            return None
        n, nm = state["n"] + 1, state["nm"] + 1
        bc = self.bias_correction
        if bc and not torch.equal(n, nm):
            return None
        vhat, scale = None, None
        if self.rule == "amsgrad":
            if bc:
                scale = 1 - self.beta2 ** n.unsqueeze(-1)      # c2 [B, 1]: the kernel's units
                vhat = _rescaled(state["vhat"], state.get("vhat_scale"), scale, owned("vhat"))
                owned = owned.plus("vhat")                      # owned now, either way
            else:
                vhat = unscaled_vhat(state)["vhat"]
        if trust:
            theta, m, v, vhat = self._fused_trust_blocks(theta, g, state, vhat, scale,
                                                         n if bc else None, lr, owned, layout)
        else:
            a = lr * self.alpha if self.alpha != 1 else lr
            got = torch_fused.adam_step(theta, g, state["m"], state["v"], a, self.beta1,
                                        self.beta2, 0.0, n if bc else None, owned, vhat,
                                        self.weight_decay)
            if got is None:   # the kernel raised (before writing): the eager form from here
                if scale is not None:
                    state = dict(state, vhat=vhat, vhat_scale=scale)
                return local_adaptive_step(self, theta, g, state, mask, lr, layout,
                                           gathered(ga), owned)
            theta, m, v, vhat = got
        if self.alpha != 1:
            if isinstance(ga, ReplicaRows):
                ga.add_to_(theta, -(lr * (1 - self.alpha)))
            else:
                theta.add_(ga, alpha=-(lr * (1 - self.alpha)))
        new = {"m": m, "v": v, "vhat": state["vhat"] if vhat is None else vhat, "n": n,
               "nm": nm, "k": state["k"] + 1}
        if scale is not None:
            new["vhat_scale"] = scale
        return theta, new

    def _fused_trust_blocks(self, theta, g, state, vhat, scale, steps, lr, owned, layout):
        """:meth:`_torch_fused_step` with a trust ratio (Fed-LAMB line 13), one block of rows
        at a time (about :attr:`trust_block_bytes` of each operand): the kernel steps a zeroed
        scratch block at rate ``-1``, leaving ``u = m_c / sqrt(vhat)`` in it, and
        :func:`sims.rules.optim.trust_step` takes the block's layer-wise step from it (in place on
        an owned ``theta``; ``owned`` a :class:`sims.ownership.Owned`, ``vhat`` the one to
        step: ``state["vhat"]`` rescaled, or as is). The scratch block and ``theta``'s block
        stay in the cache between the kernel, the layer norms and the step, so ``u`` never
        streams through memory: in
        the issue-16 benchmark, Fed-LAMB's local step ~52 ms a round against ~60 ms as whole
        ``[B, d]`` passes (blocks of 2-6 MiB measure alike; 1 MiB, one row here, pays the
        per-call overhead). A kernel that raises leaves the rows from its block on to the
        eager form (their ``vhat`` back in the kernel's units). Returns ``(theta, m, v,
        vhat)``."""
        m, v = (torch_fused.writable(state[k], owned(k)) for k in ("m", "v"))
        if vhat is not None:
            vhat = torch_fused.writable(vhat, owned("vhat"))
        out = theta if owned.theta and theta.is_contiguous() else torch.empty_like(theta)
        B, d = theta.shape
        rows = max(1, self.trust_block_bytes // max(1, d * theta.element_size()))
        rows = -(-B // -(-B // rows))                   # equal blocks
        scratch = torch.empty((rows, d), dtype=theta.dtype, device=theta.device)
        g = g.contiguous()
        for lo in range(0, B, rows):
            blk = slice(lo, min(B, lo + rows))
            u = scratch[:blk.stop - lo].zero_()
            if torch_fused.adam_step(u, g[blk], m[blk], v[blk], -1.0, self.beta1, self.beta2,
                                     0.0, None if steps is None else steps[blk], True,
                                     None if vhat is None else vhat[blk], 0.0) is None:
                break
            th = theta[blk]
            trust_step(self.trust, th, u, layout, lr, out=th if out is theta else out[blk])
        else:
            return out, m, v, vhat
        rest = slice(lo, B)                   # the kernel raised: these rows take the eager form
        sub = {"m": m[rest], "v": v[rest], "vhat": state["vhat"][rest] if vhat is None
               else vhat[rest], "n": state["n"][rest], "nm": state["nm"][rest],
               "k": state["k"][rest]}
        if scale is not None:
            sub["vhat_scale"] = scale[rest]
        th, new = local_adaptive_step(self, theta[rest], g[rest], sub, None, lr, layout)
        out[rest], m[rest], v[rest] = th, new["m"], new["v"]
        if vhat is not None:
            vhat[rest] = new["vhat"] if scale is None else new["vhat"] * scale[rest]
        return out, m, v, vhat

    def reference_step(self, theta, g, state, mask, lr, layout, seg=None, ga=None):
        """The rule as written in the class docstring (what the fast form is tested
        against). A ``vhat`` kept scaled by the torch-fused step is unscaled first
        (:func:`sims.rules.optim.unscaled_vhat`)."""
        state, ga = unscaled_vhat(state), gathered(ga)
        if self.weight_decay and self.wd_mode == "coupled":
            g = g + self.weight_decay * theta
        m = self.beta1 * state["m"] + (1 - self.beta1) * g
        v = self.beta2 * state["v"] + (1 - self.beta2) * g * g
        n, nm = state["n"] + 1, state["nm"] + 1
        m_c, v_c = m, v
        if self.bias_correction:
            m_c = m / (1 - self.beta1 ** nm.unsqueeze(-1))
            v_c = v / (1 - self.beta2 ** n.unsqueeze(-1))
        vhat = state["vhat"]
        if self.rule == "amsgrad" and self.vhat == "step":
            vhat = torch.maximum(vhat, v_c)
        second = vhat if self.rule == "amsgrad" else v_c
        u = m_c / torch.sqrt(second + self.eps) if self.eps else m_c / torch.sqrt(second)
        if self.trust is not None:
            u = self.trust(theta, u, layout, seg)
        d = u if self.alpha == 1 else self.alpha * u + (1 - self.alpha) * ga
        new_theta = theta - lr * d
        if self.weight_decay and self.wd_mode == "decoupled":
            new_theta = new_theta - lr * self.weight_decay * theta
        new = {"m": m, "v": v, "vhat": vhat, "n": n, "nm": nm, "k": state["k"] + 1}
        new = {k: _masked(mask, val, state[k]) for k, val in new.items()}
        return _masked(mask, new_theta, theta), new


class LocalAdaptiveClients:
    """For an algorithm whose gradient only reaches ``self.rule``, a :class:`LocalAdaptive`
    (Fed-LAMB / Fed-AMS, FedLADA / LocalAdam): what it asks the engine for is what the
    rule's step reads in place."""

    @property
    def takes_deferred_grad(self) -> bool:
        """A :class:`sims.deferred_grad.DeferredGrad` where ``LocalAdaptive.step`` reads it
        in place (:meth:`LocalAdaptive.reads_deferred_grad`)."""
        return self.rule.reads_deferred_grad()

    @property
    def takes_row_sources(self) -> bool:
        """Row sources (:mod:`sims.row_source`) where ``LocalAdaptive.step`` reads them in
        place (:meth:`LocalAdaptive.reads_row_sources`)."""
        return self.rule.reads_row_sources()


class ReplicaRows:
    """A broadcast entry's participant rows (``bcast[key]``, ``[B, d]``) kept as the server's
    ``[R, d]`` rows and each participant's replica (issue 16): :meth:`add_to_` adds ``a``
    times them to a ``[B, d]`` tensor one run of equal replicas at a time with the server row
    broadcast (FedLADA's amendment: ``g_a`` read as ``R`` rows instead of a gathered ``[B, d]``
    tensor every local step); :meth:`rows` is the gathered tensor, for the other forms.
    ``bcast`` is the engine's lazily gathered broadcast (``sims.core.engine._ParticipantRows``) or a
    plain dict of rows (then both are ``bcast[key]``)."""

    def __init__(self, bcast, key: str):
        self.bcast, self.key = bcast, key

    def rows(self) -> torch.Tensor:
        return self.bcast[self.key]

    def server_rows(self):
        """``(server [R, d], rep [B])`` (:func:`sims.core.batching.per_replica`) from the engine's
        view; None for a plain dict of rows."""
        if getattr(self.bcast, "per_replica", None) is None:
            return None
        return per_replica(self.bcast, self.key)

    def add_to_(self, x: torch.Tensor, a) -> torch.Tensor:
        got = self.server_rows()
        if got is None:                                          # a plain dict of rows
            return x.add_(self.rows(), alpha=a)
        server, rep = got
        for r, rows in replica_runs(rep):
            x[rows].add_(server[r], alpha=a)
        return x


def replica_rows(ga):
    """``ga`` for :func:`sims.accel.native.adaptive.local_adaptive_step`: the server's ``[R, d]``
    rows and each participant's replica for a :class:`ReplicaRows` of the engine's view
    (:func:`sims.core.batching.per_replica`), else the ``[B, d]`` rows (or None)."""
    if isinstance(ga, ReplicaRows):
        got = ga.server_rows()
        return ga.rows() if got is None else got
    return ga


def gathered(ga):
    """``ga``'s ``[B, d]`` rows (:class:`ReplicaRows` gathered; a tensor or None as is)."""
    return ga.rows() if isinstance(ga, ReplicaRows) else ga


def _rescaled(vhat: torch.Tensor, old, new: torch.Tensor, owned: bool) -> torch.Tensor:
    """``vhat`` kept times ``old`` (``[B, 1]``; None: 1) brought to times ``new``: one pass, in
    place when the caller owns it (:meth:`LocalAdaptive._torch_fused_step`)."""
    factor = new if old is None else new / old
    if owned and vhat.is_contiguous():
        return vhat.mul_(factor)
    return torch.mul(vhat, factor)


# ------------------------------------------------------------------------------ FedOpt

@dataclass
class FedOpt(Algorithm):
    """Local SGD (proximal and/or amended) and a server optimizer on the mean pseudo-gradient.

    Client ``i``, local step ``k`` (1-based) with ``g`` the stochastic gradient and ``lr = eta_l
    lr_decay^t`` (times ``min(1, k / local_warmup)`` with a warm-up, :func:`warmup_scale`)::

        d = g + wd theta (coupled) + mu (theta - theta_t)          (FedProx: mu > 0)
        d = alpha d + (1 - alpha) g_a                              (FedCM: alpha < 1)
        theta <- theta - lr d

    Server: ``U = mean_i delta_i``; ``theta <- theta - eta * rule(U)`` with ``rule`` SGD (the
    identity: FedAvg with global rate ``eta``), Adam, AMSGrad, AdaGrad or Yogi
    (:func:`server_rule`; epsilon ``tau`` outside the root, ``v0 = tau^2``, no bias correction
    unless asked).

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
    """
    name = "fedopt"
    eta: float = 1.0
    eta_l: float = 0.1
    server: str = "sgd"
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
        self.server_rule = server_rule(self.server, self.eta, beta1=self.beta1, beta2=self.beta2,
                                       tau=self.tau, v0=self.v0,
                                       eps_inside_sqrt=self.eps_inside_sqrt,
                                       bias_correction=self.bias_correction)

    @property
    def amended(self) -> bool:
        return self.alpha != 1

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
        direction, opt = self.server_rule.direction(mean_message, server["opt"])
        new = dict(server)
        new["opt"] = {k: masked_rows(active, v, server["opt"][k]) for k, v in opt.items()}
        new["theta"] = masked_rows(active, server["theta"] - eta * direction, server["theta"])
        if self.amended:
            if self.ga_source == "pseudo":
                ga = mean_of(sums, "ga", mean_message)
            else:
                lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
                steps = sums["steps"] if "steps" in sums else torch.ones_like(direction[:, :1])
                ga = direction / (lr * steps.clamp_min(1))
            new["ga"] = masked_rows(active, ga, server["ga"])
        return new, {}

    # ------------------------------------------------------------------ clients
    def local_start(self, bcast, cstate, ctx):
        theta = bcast["theta"]
        return {"k": torch.zeros(theta.shape[0], dtype=theta.dtype, device=theta.device)}

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        lr = lr_at(self.eta_l, self.lr_decay, ctx.t) * warmup_scale(lstate["k"] + 1,
                                                                   self.local_warmup)
        d = grad
        if self.weight_decay and self.wd_mode == "coupled":
            d = d + self.weight_decay * theta
        if self.mu:
            d = d + self.mu * (theta - bcast["theta"])
        if self.amended:
            d = self.alpha * d + (1 - self.alpha) * bcast["ga"]
        new = theta - lr * d
        if self.weight_decay and self.wd_mode == "decoupled":
            new = new - lr * self.weight_decay * theta
        k = lstate["k"] + (1 if mask is None else mask.to(theta.dtype))
        return _masked(mask, new, theta), {"k": k}

    def affine_local_sgd(self, bcast, cstate, ctx, steps):
        """:meth:`local_step` over the whole round as one :class:`sims.rules.optim.AffineSGD`
        (decay ``lr (alpha (wd_coupled + mu) + wd_decoupled)``, shift ``lr alpha mu theta_t -
        lr (1 - alpha) g_a``) for the engine's fused path, and the local state it leaves
        (``k`` = ``steps``, each participant's number of steps); None for a subclass that
        changes the local work."""
        cls = type(self)
        if (cls.local_step is not FedOpt.local_step or cls.local_start is not FedOpt.local_start
                or self.local_warmup):           # a rate that changes step by step
            return None
        return _affine_sgd(self, bcast, self.mu, self.alpha if self.amended else 1.0,
                           bcast["ga"] if self.amended else None, ctx), {"k": steps}

    def client_message(self, delta, lstate, cstate, ctx):
        aux = {}
        if self.amended:
            if self.ga_source == "pseudo":
                lr = lr_at(self.eta_l, self.lr_decay, ctx.t)
                aux["ga"] = delta / (lr * lstate["k"].clamp_min(1).unsqueeze(-1))
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


def _affine_sgd(alg, bcast, mu, alpha, ga, ctx, correction=None) -> AffineSGD:
    """The :class:`sims.rules.optim.AffineSGD` of local SGD on ``alpha (g + wd_c theta + mu (theta -
    theta_t) + correction) + (1 - alpha) g_a`` plus decoupled decay ``wd_d`` (FedOpt's and
    SCAFFOLD's local steps, :meth:`FedOpt.local_step`): decay ``lr (alpha (wd_c + mu) +
    wd_d)``, gradient rate ``lr alpha``, shift ``lr alpha mu theta_t - lr alpha correction -
    lr (1 - alpha) g_a``."""
    lr = lr_at(alg.eta_l, alg.lr_decay, ctx.t)
    wd = alg.weight_decay
    coupled = alg.wd_mode == "coupled"
    coef = alpha * ((wd if coupled else 0.0) + mu) + (0.0 if coupled else wd)
    decay = lr * coef if torch.is_tensor(coef) or coef != 0 else 0.0
    shift = None
    for vec, factor in ((bcast["theta"], mu), (correction, -1.0), (ga, None)):
        if vec is None or (not torch.is_tensor(factor) and factor == 0):
            continue
        a = -(lr * (1 - alpha)) if factor is None else lr * alpha * factor
        shift = vec * a if shift is None else axpy(shift, vec, a)
    return AffineSGD(lr * alpha if torch.is_tensor(alpha) or alpha != 1 else lr, decay, shift)

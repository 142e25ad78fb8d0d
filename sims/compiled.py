"""Optional one-pass (compiled) form of the local AMSGrad / Adam step (issue 16).

The eager fast form :func:`sims.rules.optim.local_adaptive_step` takes ~8 passes over the
participants' ``[B, d]`` tensors a step (``m``: 1, ``v``: 2, corrected ``v``: 1, max: 1,
``rsqrt``: 1, scaling: 1, step: 1). At the benchmark's width (25 clients x 159,010
parameters, 16 MB a tensor) the working set is far beyond the caches, so each pass streams
memory and the update costs more than the step's gradient. :func:`fused_local_adaptive_step`
is the same arithmetic written as one elementwise expression and compiled by
``torch.compile`` (inductor: on the CPU, a C++ loop built with the system compiler), which
reads ``theta, g, m, v, vhat`` (and ``g_a``) once and writes ``theta, m, v, vhat`` once, in
place.

Opt-in: set ``FEDTOOLKIT_COMPILE=1`` (or call :func:`enable`). The first compile in a
process takes seconds (about a minute on a cold inductor cache); new shapes or
hyperparameter values recompile. Any failure to compile (no C++ compiler, an unsupported
torch) is reported once as a warning and the eager form is used from then on.

In place means the caller must own the tensors (:mod:`sims.ownership`: the engine owns
``theta`` at every local step, the local state from a round's second step on, and on the first
the entries of ``local_start``'s state the algorithm declares fresh); tensors that are not
owned are copied first (one pass each). Masked steps (a client out of data) take the eager form.
Held to :meth:`sims.algorithms.adaptive.LocalAdaptive.reference_step` in float64 by
``tests/test_compiled_step.py``.
"""
from __future__ import annotations

import os
import warnings

import torch

from .ownership import Owned

_state = {"enabled": os.environ.get("FEDTOOLKIT_COMPILE", "") not in ("", "0"),
          "failed": False}
_kernels: dict = {}


def enable(on: bool = True) -> None:
    """Turn the compiled form on or off for this process (default: ``FEDTOOLKIT_COMPILE``)."""
    _state["enabled"] = bool(on)
    _state["failed"] = False


def enabled() -> bool:
    return _state["enabled"] and not _state["failed"]


def usable(rule, mask, theta: torch.Tensor) -> bool:
    """Whether :func:`fused_local_adaptive_step` applies: compiled form on, no mask, a
    floating ``[B, d]`` on the CPU."""
    return (enabled() and mask is None and theta.dim() == 2
            and theta.device.type == "cpu" and theta.is_floating_point())


def _compile(fn):
    """``torch.compile`` of one kernel. Every option combination's kernel is a closure of the
    same code object, which dynamo counts against one recompile limit (8 by default): raised
    here, so several algorithms, shapes and dtypes in one process do not exhaust it."""
    cfg = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, key) and getattr(cfg, key) < 256:
            setattr(cfg, key, 256)
    return torch.compile(fn, fullgraph=True)


def _trust_update(theta, u, lr, trust):
    """``theta - lr trust(theta, u)`` (:class:`sims.rules.optim.TrustRatio`) inside a compiled
    kernel, layer by layer on static slices ``trust = (phi, phi_min, phi_max, lam,
    slices)``."""
    phi, phi_min, phi_max, lam, slices = trust
    w = u + lam * theta if lam else u
    pieces = []
    for lo, hi in slices:
        wl, tl = w[:, lo:hi], theta[:, lo:hi]
        w_norm = torch.sqrt((wl * wl).sum(1, keepdim=True))
        ref = u[:, lo:hi] if phi == "update_norm" else tl
        scale = torch.sqrt((ref * ref).sum(1, keepdim=True))
        if phi == "clip":
            scale = scale.clamp(phi_min, phi_max)
        ratio = torch.where(w_norm > 0, scale / torch.where(w_norm > 0, w_norm, 1.0), 0.0)
        pieces.append(tl - (lr * ratio) * wl)
    return torch.cat(pieces, 1)


def _trust_key(trust, layout):
    return (trust.phi, float(trust.phi_min), float(trust.phi_max), float(trust.lam),
            tuple((sl.start, sl.stop) for sl in layout.slices))


def _kernel(opts: tuple):
    """The compiled in-place step for one combination of the rule's static options."""
    if opts in _kernels:
        return _kernels[opts]
    ams, vhat_step, bc, eps, alpha, wd, coupled, b1, b2, trust = opts

    def step(theta, g, m, v, vhat, ga, lr, c1, c2):
        if wd and coupled:
            g = g + wd * theta
        m_new = b1 * m + (1 - b1) * g
        v_new = b2 * v + (1 - b2) * g * g
        vc = v_new / c2 if bc else v_new
        if ams:
            vhat_new = torch.maximum(vhat, vc) if vhat_step else vhat
            second = vhat_new
        else:
            vhat_new, second = vhat, vc
        rs = torch.rsqrt(second + eps) if eps else torch.rsqrt(second)
        u = m_new * rs / c1 if bc else m_new * rs
        if trust:                   # Fed-LAMB's layer-wise step (sims.rules.optim.trust_step)
            m.copy_(m_new)
            v.copy_(v_new)
            if ams and vhat_step:
                vhat.copy_(vhat_new)
            return _trust_update(theta, u, lr * alpha if alpha != 1 else lr, trust)
        new = theta - (lr * alpha) * u if alpha != 1 else theta - lr * u
        if alpha != 1:
            new = new - (lr * (1 - alpha)) * ga
        if wd and not coupled:
            new = new - (lr * wd) * theta
        m.copy_(m_new)
        v.copy_(v_new)
        if ams and vhat_step:
            vhat.copy_(vhat_new)
        theta.copy_(new)

    _kernels[opts] = _compile(step)
    return _kernels[opts]


def _ones_and_rate(theta, lr):
    """``(ones [B, 1], lr as [B, 1])`` in ``theta``'s dtype and device: the kernels take rates
    and bias corrections as rows so that one compiled graph serves scalar and per-row ones."""
    one = torch.ones((theta.shape[0], 1), dtype=theta.dtype, device=theta.device)
    return one, (lr.to(theta.dtype).reshape(-1, 1) if torch.is_tensor(lr) else one * lr)


FAILED = object()   # what _call returns when the kernel could not be built or run


def _call(make, opts: tuple, *args):
    """``make(opts)(*args)``: build (or reuse) the kernel for ``opts`` and run it (an in-place
    kernel returns None); :data:`FAILED` after a warning when building or running it failed
    (no compiler, an unsupported torch), and the compiled form is then off."""
    try:
        return make(opts)(*args)
    except Exception as exc:
        _state["failed"] = True
        first = str(exc).splitlines()[0] if str(exc) else ""
        warnings.warn(f"sims.compiled: torch.compile failed ({type(exc).__name__}: {first}); "
                      "using the eager local step", RuntimeWarning, stacklevel=3)
        return FAILED


def _result(out):
    """A value-returning kernel's result, or None (the callers' "take the eager form")."""
    return None if out is FAILED else out


def fused_local_adaptive_step(rule, theta, g, state, lr, ga=None, owned=False,
                              layout=None):
    """:func:`sims.rules.optim.local_adaptive_step` (no mask) as one compiled in-place pass;
    returns ``(theta, state)`` like it, or None when compiling failed (the caller then takes
    the eager form). ``owned`` (a bool, or a :class:`sims.ownership.Owned`): which of
    ``theta`` and ``state``'s ``m, v, vhat`` may be overwritten (the others are copied
    first). With a trust ratio (Fed-LAMB) the kernel also takes the layer-wise step
    (per-layer norms of ``u`` and ``theta`` on static slices) and writes a new ``theta``. A
    ``vhat`` kept scaled by the torch-fused step is unscaled first
    (:func:`sims.rules.optim.unscaled_vhat`, a new tensor the kernel may overwrite)."""
    from .rules.optim import unscaled_vhat
    own = Owned.of(owned)
    ams, vhat_step = rule.rule == "amsgrad", rule.vhat == "step"
    trust = rule.trust is not None
    scaled = "vhat_scale" in state
    state = unscaled_vhat(state)
    if not trust and not own.theta:
        theta = theta.clone()
    state = dict(state, **{k: state[k].clone() for k in ("m", "v") if not own(k)})
    if ams and vhat_step and not scaled and not own("vhat"):
        state["vhat"] = state["vhat"].clone()
    n, nm = state["n"] + 1, state["nm"] + 1
    bc = bool(rule.bias_correction)
    one, lr_t = _ones_and_rate(theta, lr)
    c1 = (1 - rule.beta1 ** nm.unsqueeze(-1)) if bc else one
    c2 = (1 - rule.beta2 ** n.unsqueeze(-1)) if bc else one
    opts = (ams, vhat_step, bc, float(rule.eps), float(rule.alpha), float(rule.weight_decay),
            rule.wd_mode == "coupled", float(rule.beta1), float(rule.beta2),
            _trust_key(rule.trust, layout) if trust else None)
    ga_t = ga if ga is not None and rule.alpha != 1 else theta
    out = _call(_kernel, opts, theta, g, state["m"], state["v"], state["vhat"], ga_t, lr_t,
                c1, c2)
    if out is FAILED:
        return None
    if trust:
        from .rules.optim import axpy
        new_theta = out                 # the kernel wrote a new theta
        if rule.alpha != 1:
            new_theta = axpy(new_theta, ga, -(lr * (1 - rule.alpha)))
        if rule.weight_decay and rule.wd_mode != "coupled":
            new_theta = axpy(new_theta, theta, -(lr * rule.weight_decay))
        theta = new_theta
    return theta, {"m": state["m"], "v": state["v"], "vhat": state["vhat"], "n": n, "nm": nm,
                   "k": state["k"] + 1}


def frozen_usable(rule, mask, theta: torch.Tensor) -> bool:
    """Whether :func:`fused_frozen_step` applies to MimeLite / Mime's base optimizer ``rule``
    (:class:`sims.rules.optim.AdaptiveRule`): compiled form on, no mask, Adam / AMSGrad with
    numeric constants and no bias correction, a floating ``[B, d]`` on the CPU."""
    return (enabled() and mask is None and rule.kind in ("adam", "amsgrad")
            and not rule.bias_correction and not torch.is_tensor(rule.beta1)
            and not torch.is_tensor(rule.beta2) and not torch.is_tensor(rule.eps)
            and theta.dim() == 2 and theta.device.type == "cpu" and theta.is_floating_point())


def _frozen_kernel(opts: tuple):
    if opts in _kernels:
        return _kernels[opts]
    _, ams, inside, corrected, b1, b2, eps, trust = opts

    def step(theta, g, anchor, c, m, v, vhat, lr):
        if corrected:                       # Mime's SVRG correction
            g = g - anchor + c
        m_new = b1 * m + (1 - b1) * g if b1 else g
        second = b2 * v + (1 - b2) * g * g
        if ams:
            second = torch.maximum(vhat, second)
        u = m_new * torch.rsqrt(second + eps) if inside else m_new / (torch.sqrt(second) + eps)
        return _trust_update(theta, u, lr, trust) if trust else theta - lr * u

    _kernels[opts] = _compile(step)
    return _kernels[opts]


def fused_frozen_step(rule, theta, g, s: dict, lr, anchor=None, c=None, trust=None,
                      layout=None):
    """``theta - lr U(g; s)`` with the frozen server state ``s`` (MimeLite / Mime's local step,
    :meth:`sims.algorithms.fed_lamb.MimeLite._frozen_step`; ``U`` the base rule's direction,
    :meth:`sims.rules.optim.AdaptiveRule.reference_direction`), for Mime on the corrected
    ``g - anchor + c``, as one compiled pass that writes a new tensor; None when compiling
    failed (the caller then takes the eager form). ``trust`` (a
    :class:`sims.rules.optim.TrustRatio`, with ``layout``): the LAMB variants' layer-wise step
    ``theta - lr trust(theta, U(g; s))`` instead, in the same kernel."""
    corrected = anchor is not None
    opts = ("frozen", rule.kind == "amsgrad", bool(rule.eps_inside_sqrt), corrected,
            float(rule.beta1), float(rule.beta2), float(rule.eps),
            None if trust is None else _trust_key(trust, layout))
    _, lr_t = _ones_and_rate(theta, lr)
    vhat = s.get("vhat", s["v"])
    return _result(_call(_frozen_kernel, opts, theta, g, anchor if corrected else g,
                         c if corrected else g, s["m"], s["v"], vhat, lr_t))


def full_usable(mask, theta: torch.Tensor) -> bool:
    """Whether :func:`fused_full_precond_step` applies: compiled form on, no mask, a floating
    ``[B, d]`` on the CPU (the caller checks the algorithm's own conditions)."""
    return (enabled() and mask is None and theta.dim() == 2 and theta.device.type == "cpu"
            and theta.is_floating_point())


def _full_kernel(opts: tuple):
    if opts in _kernels:
        return _kernels[opts]
    _, adam, b1, b2, eps = opts

    def step(theta, g, m, v, lr, c1, c2):
        if adam:
            m_new = b1 * m + (1 - b1) * g
            v_new = b2 * v + (1 - b2) * g * g
            return theta - lr * (m_new / c1) / (torch.sqrt(v_new / c2) + eps), m_new, v_new
        v_new = v + g * g
        return theta - lr * g / (torch.sqrt(v_new) + eps), v_new

    _kernels[opts] = _compile(step)
    return _kernels[opts]


def fused_full_precond_step(theta, g, v, lr, eps: float, m=None, beta1: float = 0.9,
                            beta2: float = 0.999, c1=None, c2=None):
    """FedAda2's client AdaGrad (``m is None``) or Adam step with the full (not SM3)
    preconditioner updated every step (Alg. 9 / 7 with ``z = 1``; readable rule
    ``sims.algorithms.fedada2.JointAdaptive.reference_local_step``) as one compiled pass:
    AdaGrad ``v + g^2``, ``theta - lr g / (sqrt(v) + eps)``; Adam ``m, v`` EMAs and ``theta -
    lr (m / c1) / (sqrt(v / c2) + eps)`` (``c1, c2`` ``[B, 1]`` or None: 1). Returns ``(theta,
    v)`` / ``(theta, m, v)`` as new tensors, or None when compiling failed."""
    one, lr_t = _ones_and_rate(theta, lr)
    adam = m is not None
    opts = ("full", adam, float(beta1), float(beta2), float(eps))
    return _result(_call(_full_kernel, opts, theta, g, m if adam else g, v, lr_t,
                         one if c1 is None else c1, one if c2 is None else c2))


def _sm3_kernel(opts: tuple):
    if opts in _kernels:
        return _kernels[opts]
    _, adam, b1, b2, eps, blocks = opts

    def step(theta, g, m, mu, lr, c1, c2):
        B = theta.shape[0]
        th, m_out, mus, nus = [], [], [], []
        for (lo, hi), shape, spans in blocks:
            gl = g[:, lo:hi].reshape(B, *shape)
            prev = None                         # SM3-II: nu = cover_min(mu) (+) g^2
            for a, (o, n) in enumerate(spans):
                view = [B] + [1] * len(shape)
                view[a + 1] = n
                acc = mu[:, o:o + n].reshape(view)
                prev = acc if prev is None else torch.minimum(prev, acc)
            nu = b2 * prev + (1 - b2) * gl * gl if adam else prev + gl * gl
            for a in range(len(shape)):         # mu = cover_max(nu)
                others = tuple(i + 1 for i in range(len(shape)) if i != a)
                mus.append(torch.amax(nu, dim=others) if others else nu)
            if adam:
                ml = b1 * m[:, lo:hi].reshape(B, *shape) + (1 - b1) * gl
                m_out.append(ml.reshape(B, -1))
                u = (ml / c1.view(view[:1] + [1] * len(shape))) / (
                    torch.sqrt(nu / c2.view(view[:1] + [1] * len(shape))) + eps)
            else:
                u = gl / (torch.sqrt(nu) + eps)
            th.append((theta[:, lo:hi].reshape(B, *shape) - lr.view([B] + [1] * len(shape)) * u)
                      .reshape(B, -1))
            nus.append(nu.reshape(B, -1))
        out = (torch.cat(th, 1), torch.cat(mus, 1), torch.cat(nus, 1))
        return out + (torch.cat(m_out, 1),) if adam else out

    _kernels[opts] = _compile(step)
    return _kernels[opts]


def fused_sm3_step(cover, theta, g, mu, lr, eps: float, m=None, beta1: float = 0.9,
                   beta2: float = 0.999, c1=None, c2=None):
    """FedAda2's client AdaGrad (``m is None``) or Adam step with the SM3-II preconditioner
    updated every step (:func:`sims.rules.optim.sm3_adagrad_step` / :func:`sims.rules.optim.sm3_adam_step`
    with ``sm3_ii``; readable rule ``JointAdaptive.reference_local_step``) as one compiled
    kernel over the cover's static blocks: ``nu = cover_min(mu) + g^2`` (Adam: ``b2 cover_min(mu)
    + (1 - b2) g^2``), ``mu = cover_max(nu)`` and the step. Returns ``(theta, mu, nu)`` /
    ``(theta, mu, nu, m)`` as new tensors, or None when compiling failed."""
    one, lr_t = _ones_and_rate(theta, lr)
    adam = m is not None
    blocks = tuple(((sl.start, sl.stop), tuple(shape), tuple(spans))
                   for sl, shape, spans in cover.blocks)
    opts = ("sm3", adam, float(beta1), float(beta2), float(eps), blocks)
    return _result(_call(_sm3_kernel, opts, theta, g, m if adam else g, mu, lr_t,
                         one if c1 is None else c1, one if c2 is None else c2))

"""torch's own fused CPU optimizer kernels as the eager one-pass local step (issue 16).

The CPU build of torch ships one-pass optimizer kernels (what ``torch.optim.Adagrad`` /
``Adam(fused=True)`` call): ``torch._fused_adagrad_`` and ``torch._fused_adam_`` take lists of
tensors and update each in place, reading ``theta, g`` and the moments once. A list entry may
be a row ``theta[i]`` of the participants' ``[B, d]`` tensor, with its own step count, so one
call steps every participant in one pass, with no compile cost (the eager torch form of the
same step takes ~4-8 passes that stream memory at the benchmark's width, ``sims.compiled``'s
docstring). The rules the kernels compute, which the callers check are their algorithm's:

* AdaGrad (``lr_decay = 0``, no weight decay): ``v <- v + g^2``, ``theta <- theta - lr g /
  (sqrt(v) + eps)``; the step count is not read.
* Adam / AMSGrad, ``k`` the row's step count as given (the kernel does not increment it),
  ``c_j = 1 - beta_j^k``: ``g <- g + wd theta``, ``m <- b1 m + (1 - b1) g``, ``v <- b2 v +
  (1 - b2) g^2``, AMSGrad ``vhat <- max(vhat, v)`` (the raw ``v``), ``theta <- theta - (lr /
  c1) m / (sqrt(v or vhat) / sqrt(c2) + eps)``: ``eps`` outside the root, one count for both
  corrections. No bias correction: the count :data:`NO_BIAS_STEP` (``2^62``; the kernel
  computes ``beta^k`` in double precision), where ``1 - beta^k`` is exactly 1 for every double
  ``beta < 1`` (``beta <= 1 - 2^-53``, so ``beta^k <= e^-512``, far below half an ulp of 1;
  re-checked on each call as a guard), so the corrections divide by 1 exactly, in float32
  and float64 alike.

Callers (each checks that its rule is the kernel's, else takes its eager form):
:meth:`sims.algorithms.fedada2.JointAdaptive._torch_fused_step` (DJA, joint-adaptive,
FedAdaAdagrad, FedAdaAdam; FedAda2 and FedAda2-Adam, whose SM3-II preconditioner is handed to
the kernel as ``v = cover_min(mu)``) and ``FedAda2Blend.local_step`` (each member's own rows in
place, through the row-list forms :func:`adagrad_rows` / :func:`adam_rows`), and
:meth:`sims.algorithms.adaptive.LocalAdaptive._torch_fused_step` (Fed-AMS, Fed-LAMB, LocalAdam,
FedLADA).

Each step function returns the new tensors, or None where it does not apply (the caller then
takes its eager form). In place means the caller must own the tensors (:mod:`sims.ownership`):
the engine owns ``theta`` at every local step (``ctx.extra["owned_theta"]``), the local state
from a round's second step on (``"owned_state"``) and, on the first, the entries of
``local_start``'s state that the algorithm declares fresh (``"owned_start"``,
``owned_start_keys``); tensors that are not owned are copied first (one pass each), as
:mod:`sims.compiled` does.

The kernels are private torch API: on first use per kernel and dtype they are run on a tiny
input and held to the rule above (:func:`_probe`); a kernel that is missing, raises or
disagrees is reported once as a warning and not tried again in the process. On by default;
``FEDTOOLKIT_TORCH_FUSED=0`` (or :func:`enable`) turns it off, e.g. to measure the eager forms.
Held to the algorithms' readable rules in float64 by ``tests/test_torch_fused.py`` and
``tests/test_fedada2_fast_step.py``.
"""
from __future__ import annotations

import os
import warnings

import torch

from .ownership import Owned

NO_BIAS_STEP = 2 ** 62      # beta^k underflows: 1 - beta^k == 1.0 exactly (see the docstring)

_state = {"enabled": os.environ.get("FEDTOOLKIT_TORCH_FUSED", "1") != "0", "failed": False}
_probed: set = set()
calls = {"adagrad": 0, "adam": 0}   # successful kernel calls (the tests check the path taken)


def enable(on: bool = True) -> None:
    """Turn the fused kernels on or off for this process (default: ``FEDTOOLKIT_TORCH_FUSED``,
    on unless ``0``); turning on clears an earlier failure."""
    _state["enabled"] = bool(on)
    _state["failed"] = False
    _probed.clear()


def enabled() -> bool:
    return _state["enabled"] and not _state["failed"]


def usable(mask, theta: torch.Tensor, lr=0.0) -> bool:
    """Whether the kernels can take this step: on, no mask, a float32 / float64 ``[B, d]`` on
    the CPU and a numeric rate (per-row rates need one call per row; they take the eager form)."""
    return (enabled() and mask is None and theta.dim() == 2 and theta.device.type == "cpu"
            and theta.dtype in (torch.float32, torch.float64) and not torch.is_tensor(lr))


def _fail(what: str, exc: BaseException | str) -> None:
    _state["failed"] = True
    if not isinstance(exc, str):
        exc = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    warnings.warn(f"sims.torch_fused: {what} failed ({exc}); using the eager local step",
                  RuntimeWarning, stacklevel=4)


def _adagrad(theta, g, v, lr, eps):
    _adagrad_lists(list(theta.unbind(0)), list(g.unbind(0)), list(v.unbind(0)), lr, eps)


def _adagrad_lists(theta, g, v, lr, eps):
    torch._fused_adagrad_(theta, g, v, list(torch.ones(len(theta), dtype=theta[0].dtype)
                                            .unbind(0)),
                          lr=lr, lr_decay=0.0, weight_decay=0.0, eps=eps, maximize=False)


def _adam(theta, g, m, v, vhat, steps, lr, beta1, beta2, eps, wd):
    _adam_lists(list(theta.unbind(0)), list(g.unbind(0)), list(m.unbind(0)),
                list(v.unbind(0)), None if vhat is None else list(vhat.unbind(0)),
                list(steps.unbind(0)), lr, beta1, beta2, eps, wd)


def _adam_lists(theta, g, m, v, vhat, steps, lr, beta1, beta2, eps, wd):
    torch._fused_adam_(theta, g, m, v, [] if vhat is None else vhat, steps, lr=lr,
                       beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps,
                       amsgrad=vhat is not None, maximize=False)


def _probe(kind: str, dtype) -> bool:
    """Run ``kind``'s kernel once on a tiny input against the module docstring's rule
    (AdaGrad; Adam and AMSGrad at step counts 1, 3 and :data:`NO_BIAS_STEP`, with weight
    decay); False (after a warning) when it is missing, raises or disagrees."""
    if (kind, dtype) in _probed:
        return True
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    x = torch.linspace(-1.0, 1.0, 12, dtype=dtype).reshape(3, 4)
    theta, g, v = x + 0.5, torch.cos(3 * x), x * x + 0.1
    try:
        if kind == "adagrad":
            got = [theta.clone(), v.clone()]
            _adagrad(*got[:1], g, got[1], 0.1, 1e-3)
            v2 = v + g * g
            want = [theta - 0.1 * g / (torch.sqrt(v2) + 1e-3), v2]
        else:
            steps = torch.tensor([1, 3, NO_BIAS_STEP], dtype=torch.int64)
            c = torch.tensor([[1.0], [3.0], [float("inf")]], dtype=dtype)
            got, want = [], []
            for ams in (False, True):
                th, m, vv, vh = theta.clone(), torch.sin(x), v.clone(), v + 0.05
                _adam(th, g, m, vv, vh if ams else None, steps, 0.1, 0.9, 0.99, 1e-3, 0.01)
                gw = g + 0.01 * theta
                m2, v2 = 0.9 * torch.sin(x) + 0.1 * gw, 0.99 * v + 0.01 * gw * gw
                sec = torch.maximum(v + 0.05, v2) if ams else v2
                th2 = theta - 0.1 * (m2 / (1 - 0.9 ** c)) / (torch.sqrt(sec / (1 - 0.99 ** c))
                                                            + 1e-3)
                got += [th, m, vv] + ([vh] if ams else [])
                want += [th2, m2, v2] + ([sec] if ams else [])
    except Exception as exc:
        _fail(f"torch._fused_{kind}_", exc)
        return False
    if not all(torch.allclose(a, b, rtol=tol, atol=tol) for a, b in zip(got, want)):
        _fail(f"torch._fused_{kind}_", "it disagrees with the rule it is used for")
        return False
    _probed.add((kind, dtype))
    return True


def _run(kind: str, fn, *args) -> bool:
    """``fn(*args)`` (the kernels check their arguments before writing); False after a
    warning when it raised, and the kernels are then off for the process."""
    try:
        fn(*args)
    except Exception as exc:
        _fail(f"torch._fused_{kind}_", exc)
        return False
    calls[kind] += 1
    return True


def _writable(x: torch.Tensor, owned: bool) -> torch.Tensor:
    return x if owned and x.is_contiguous() else x.clone(memory_format=torch.contiguous_format)


def adagrad_step(theta, g, v, lr: float, eps: float, owned=False):
    """AdaGrad ``v + g^2``, ``theta - lr g / (sqrt(v) + eps)`` (module docstring) in one pass;
    ``(theta, v)``, in place where ``owned`` (a bool, or a :class:`sims.ownership.Owned` over
    ``theta`` and ``"v"``) says so (else on copies), or None (take the eager form)."""
    if not _probe("adagrad", theta.dtype):
        return None
    own = Owned.of(owned)
    theta, v = _writable(theta, own.theta), _writable(v, own("v"))
    if not _run("adagrad", _adagrad, theta, g.contiguous(), v, float(lr), float(eps)):
        return None
    return theta, v


def adam_step(theta, g, m, v, lr: float, beta1: float, beta2: float, eps: float, steps=None,
              owned=False, vhat=None, weight_decay: float = 0.0):
    """Adam (AMSGrad with ``vhat``: the max of the raw ``v``) as in the module docstring, in
    one pass: ``steps`` ``[B]`` each row's count for both bias corrections (after this step's
    increment), None for no bias correction. Returns ``(theta, m, v, vhat)``, each in place
    where ``owned`` (a bool, or a :class:`sims.ownership.Owned` over ``theta`` and ``"m"``,
    ``"v"``, ``"vhat"``) says so, else on a copy; or None (take the eager form)."""
    if steps is None:
        if 1.0 - float(beta1) ** NO_BIAS_STEP != 1.0 or 1.0 - float(beta2) ** NO_BIAS_STEP != 1.0:
            return None
        steps = torch.full((len(theta),), NO_BIAS_STEP, dtype=torch.int64)
    if not _probe("adam", theta.dtype):
        return None
    own = Owned.of(owned)
    theta = _writable(theta, own.theta)
    m, v = _writable(m, own("m")), _writable(v, own("v"))
    vhat = None if vhat is None else _writable(vhat, own("vhat"))
    if not _run("adam", _adam, theta, g.contiguous(), m, v, vhat, steps, float(lr),
                float(beta1), float(beta2), float(eps), float(weight_decay)):
        return None
    return theta, m, v, vhat


# Row lists (issue 16, FedAda2's SM3-II clients and FedAda2-blend's members): the same kernels
# on lists of tensors the caller owns (rows ``x[i]`` of its ``[B, d]`` tensors, or whole
# tensors), written in place; a step over a subset of rows then needs no gather or scatter.

def ready(kind: str, dtype) -> bool:
    """Whether ``kind``'s kernel (``"adagrad"`` / ``"adam"``) is on and agrees with its rule
    for ``dtype`` (probed on first use, :func:`_probe`): a caller about to write several row
    lists in place checks every kernel it needs first."""
    return enabled() and _probe(kind, dtype)


def adagrad_rows(theta: list, g: list, v: list, lr: float, eps: float) -> bool:
    """AdaGrad (module docstring) on lists of tensors, in place; False (nothing written):
    take the eager form."""
    return (ready("adagrad", theta[0].dtype)
            and _run("adagrad", _adagrad_lists, theta, g, v, float(lr), float(eps)))


def adam_rows(theta: list, g: list, m: list, v: list, steps: torch.Tensor, lr: float,
              beta1: float, beta2: float, eps: float) -> bool:
    """Adam (module docstring, no weight decay, no AMSGrad) on lists of tensors, in place;
    ``steps`` ``[n]`` each entry's count (after this step's increment), None for no bias
    correction. False (nothing written): take the eager form."""
    if steps is None:
        if 1.0 - float(beta1) ** NO_BIAS_STEP != 1.0 or 1.0 - float(beta2) ** NO_BIAS_STEP != 1.0:
            return False
        steps = torch.full((len(theta),), NO_BIAS_STEP, dtype=torch.int64)
    return (ready("adam", theta[0].dtype)
            and _run("adam", _adam_lists, theta, g, m, v, None,
                     list(steps.to(torch.int64).unbind(0)), float(lr), float(beta1),
                     float(beta2), float(eps), 0.0))


def writable(x: torch.Tensor, owned: bool) -> torch.Tensor:
    """``x`` itself when the caller owns it (and it is contiguous), else a contiguous copy: a
    tensor the row-list kernels may write in place."""
    return _writable(x, owned)

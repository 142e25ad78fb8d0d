"""oneDNN's matmul for the large per-client products of Linear + ReLU stacks, and the one
rule that decides where it is used (the generic gradient, :mod:`.mlp_grad`; the fused SGD
step, :mod:`.linear_stack`; the Gram path, :mod:`.gram_sgd`).

On this project's CPU (AMD EPYC) MKL's ``sgemm`` / ``bmm`` takes its non-Intel code path and
oneDNN's plain-layout matmul (``torch.ops.mkldnn._linear_pointwise``, no weight reorder) runs
the same products about twice as fast (``docs/speed.md``). oneDNN has no float64 matmul on
the CPU: float64, and every other device, takes ``bmm`` throughout. The choice depends only
on dtype, device and shapes, never on a timing, so a run stays reproducible from its seed.
"""
from __future__ import annotations

import torch

try:                                    # oneDNN's plain-layout matmul (CPU builds with MKL-DNN)
    _ONEDNN_LINEAR = torch.ops.mkldnn._linear_pointwise.default
except (AttributeError, RuntimeError):  # pragma: no cover - builds without oneDNN
    _ONEDNN_LINEAR = None

# Per-client multiply-adds from which a layer's products go through a loop of oneDNN calls
# (the MLP's first layer: 32 * 784 * 200 = 5.0M; its second, 64k, and LogReg's, 251k, stay
# one bmm).
ONEDNN_MIN_MACS = 1 << 20

# Module switch: False sends every product of this module, of the fused local-SGD step
# (:func:`sims.problems.linear_stack.sgd_step_`) and of the Gram path
# (:func:`sims.problems.gram_sgd.gram_sgd_delta`) through the plain ``bmm`` reference.
ONEDNN_ENABLED = True


def onednn_available(t: torch.Tensor) -> bool:
    """Whether products on ``t``'s dtype and device can take oneDNN (float32 on the CPU)."""
    return (_ONEDNN_LINEAR is not None and t.device.type == "cpu" and t.dtype == torch.float32
            and torch.backends.mkldnn.is_available())


def use_onednn(t: torch.Tensor, onednn: bool | None = None) -> bool:
    """The shared rule: oneDNN products on ``t``'s dtype and device where
    :func:`onednn_available`, unless ``onednn`` is False (None: :data:`ONEDNN_ENABLED`).
    Depends on no timing, so runs stay reproducible."""
    return (ONEDNN_ENABLED if onednn is None else onednn) and onednn_available(t)


def onednn_big(macs: int) -> bool:
    """Whether a product of ``macs`` multiply-adds per client takes oneDNN (a per-client
    call costs ~10 us: smaller ones stay one ``bmm``)."""
    return macs >= ONEDNN_MIN_MACS


def _onednn(a: torch.Tensor, b: torch.Tensor, bias=None) -> torch.Tensor:
    """``a @ b^T (+ bias)`` for 2-D ``a[m, k]``, ``b[n, k]`` through oneDNN."""
    return _ONEDNN_LINEAR(a, b, bias, "none", [], "")


def per_client_forward(W: torch.Tensor, bias: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``zT[c] = W[c] h[c]^T + bias[c]`` (``W[B, out, in]``, ``bias[B, out]``, ``h[B, b, in]``
    sample-major and contiguous): ``[B, out, b]``, one oneDNN product per client."""
    zT = torch.stack([_onednn(W[c], h[c]) for c in range(len(W))])
    return zT.add_(bias.unsqueeze(2))

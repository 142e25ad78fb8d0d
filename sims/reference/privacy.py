"""The DP step written plainly, one participant at a time (the reference the batched
:class:`sims.privacy.Private` is held to; it shares only the noise stream
:func:`sims.privacy.noise_rng`)."""
from __future__ import annotations

import math

import torch

from ..privacy.mechanism import noise_rng


def reference_private_mean(records: list[dict], clip: float, sigma: float, seed: int, t: int):
    """``records``: one dict per participant (``"message"`` and aux names -> 1-D or [k]
    tensors). Each participant's record, all entries together, is scaled to L2 norm at most
    ``clip``; the uniform mean of every entry gets ``N(0, sigma^2 clip^2) / |S|``, the
    message first, then the aux names in sorted order (the stream's fixed order)."""
    keys = ["message"] + sorted(k for k in records[0] if k != "message")
    clipped = []
    for rec in records:
        norm = math.sqrt(sum(float((rec[k].double() ** 2).sum()) for k in keys))
        scale = 1.0 if norm <= clip else clip / norm
        clipped.append({k: rec[k] * scale for k in keys})
    n = len(records)
    mean = {k: sum(c[k] for c in clipped) / n for k in keys}
    if sigma > 0:
        rng = noise_rng(seed, t)
        for k in keys:
            z = rng.standard_normal(tuple(mean[k].shape)) * (sigma * clip / n)
            mean[k] = mean[k] + torch.as_tensor(z, dtype=mean[k].dtype)
    return mean

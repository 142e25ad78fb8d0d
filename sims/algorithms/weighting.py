"""Sample-weighted aggregation for any algorithm: the server sees ``sum_i n_i delta_i / sum_i n_i``
over the round's participants instead of the uniform mean (the engine's convention,
:mod:`sims.algorithms.base`).

:class:`SampleWeighted` wraps a registry algorithm (``SampleWeighted(make_algorithm("fedadam"),
sizes)``, ``sizes[i]`` = client ``i``'s number of training samples) and delegates every hook
to it except two:

* ``client_message``: the message and every ``aux`` tensor are multiplied by ``n_i``, and the
  participant adds ``n_i`` itself as the aux ``"_sample_weight"``;
* ``server_step``: the engine's means of those are ``sum n_i x_i / |S|`` and
  ``sum n_i / |S|``; their ratio is the sample-weighted mean the wrapped server step receives.

This is FedAda2's authors' aggregation for adaptive servers in non-private runs
(``models/Fed.py``, ``aggregate`` with ``diff_private == 0``: ``w_avg = sum n_i w_i /
sum n_i``; FedAvg and ``server_opt == "Avg"`` pass ones, ``main_fed.py`` lines 285-293).
Under DP the authors average uniformly (the noise is calibrated to the uniform mean), so do
not combine this with :class:`sims.privacy.Private`.
"""
from __future__ import annotations

import numpy as np
import torch

WEIGHT_KEY = "_sample_weight"


class SampleWeighted:
    """``inner`` with sample-weighted aggregation (module docstring)."""

    def __init__(self, inner, sizes):
        if isinstance(inner, SampleWeighted):
            raise ValueError("the algorithm is already sample-weighted; wrap it once")
        if getattr(inner, "is_private", False):
            raise ValueError("sample weighting under DP is not supported: the DP noise is "
                             "calibrated to the uniform mean")
        sizes = np.asarray(sizes, dtype=float)
        if sizes.ndim != 1 or len(sizes) == 0 or not np.all(np.isfinite(sizes)) \
                or np.any(sizes <= 0):
            raise ValueError("sizes must be one positive number per client")
        self.inner, self.sizes = inner, sizes
        self._w = None
        self.name = f"{inner.name}+weighted"

    def __getattr__(self, key):
        if key.startswith("__") or key in ("inner", "sizes", "_w"):
            raise AttributeError(key)
        return getattr(self.__dict__["inner"], key)

    def _weights(self, clients: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if self._w is None or self._w.device != like.device or self._w.dtype != like.dtype:
            self._w = torch.as_tensor(self.sizes, dtype=like.dtype, device=like.device)
        return self._w.index_select(0, clients)

    def client_message(self, delta, lstate, cstate, ctx):
        msg, cstate, aux = self.inner.client_message(delta, lstate, cstate, ctx)
        w = self._weights(ctx.clients, msg)
        scale = lambda x: x * w.view(-1, *([1] * (x.dim() - 1))).to(x.dtype)   # noqa: E731
        aux = {k: scale(v) for k, v in aux.items()}
        aux[WEIGHT_KEY] = w.unsqueeze(-1)
        return scale(msg), cstate, aux

    def server_step(self, server, mean_message, sums, active, ctx):
        sums = dict(sums)
        w = sums.pop(WEIGHT_KEY, None)
        if w is None:                            # nobody took part in any replica
            return self.inner.server_step(server, mean_message, sums, active, ctx)
        w = w.clamp_min(torch.finfo(mean_message.dtype).tiny)                     # [R, 1]
        msg = mean_message / w
        sums = {k: v / w.view(-1, *([1] * (v.dim() - 1))) for k, v in sums.items()}
        return self.inner.server_step(server, msg, sums, active, ctx)

    def describe(self) -> dict:
        return {**self.inner.describe(), "name": self.name, "aggregation": "sample-weighted"}

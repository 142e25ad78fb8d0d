"""The consistency term of FedLADA Fig. 8(c), recorded every round for any algorithm.

FedLADA (Sun et al., Sec. 4 / App. C.2, Fig. 8(c)) plots the consistency term

    E ||x^t_{i,K} - x^{t+1}||^2  =  (1/S) sum_{i in S^t} ||x^t_{i,K} - x^{t+1}||^2

(the mean over the round's participants of how far each client's last local model lies from
the next server model; FL-Simulator logs the same "divergence"). With ``delta_i = x^t -
x^t_{i,K}`` (the engine's pseudo-gradient) and ``u = x^t - x^{t+1}`` (the server's step)::

    (1/S) sum_i ||u - delta_i||^2 = mean_i ||delta_i||^2 - 2 <mean_i delta_i, u> + ||u||^2

so the clients need only add ``||delta_i||^2`` and ``delta_i`` to the per-replica sums, and
the server step computes the term once ``x^{t+1}`` is known. :class:`TrackConsistency` wraps
any algorithm this way and adds the metric ``consistency`` ``[R]`` (NaN for a replica with
no participant) to the server metrics; the run is otherwise unchanged (same hooks, state,
messages, bits). Why a wrapper and not an engine observer: an observer sees the server after
the round and the draws, not the clients' end models; recomputing them would run every
client twice (and keep the pre-round client state of every client).
"""
from __future__ import annotations

import math

import torch

METRIC = "consistency"
_DSQ, _DELTA = "_consistency_dsq", "_consistency_delta"


class TrackConsistency:
    """``algorithm`` with the consistency term recorded each round (module docstring)."""

    def __init__(self, algorithm):
        if isinstance(algorithm, TrackConsistency):
            algorithm = algorithm.inner
        self.inner = algorithm

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def describe(self) -> dict:
        return {**self.inner.describe(), "records": METRIC}

    def client_message(self, delta, lstate, cstate, ctx):
        own = {_DSQ: (delta.double() ** 2).sum(-1, keepdim=True), _DELTA: delta.clone()}
        msg, c_new, aux = self.inner.client_message(delta, lstate, cstate, ctx)
        return msg, c_new, {**aux, **own}

    def server_step(self, server, mean_message, sums, active, ctx):
        sums = dict(sums)
        like = server["theta"]
        dsq = sums.pop(_DSQ, None)
        dbar = sums.pop(_DELTA, None)
        new, metrics = self.inner.server_step(server, mean_message, sums, active, ctx)
        if dsq is None:                                   # nobody took part anywhere
            cons = torch.full((like.shape[0],), math.nan, dtype=torch.float64)
        else:
            u = (like - new["theta"]).double()
            cons = (dsq[:, 0] - 2 * (dbar.double() * u).sum(-1) + (u * u).sum(-1)).clamp_min(0)
            cons = torch.where(active.to(cons.device), cons, torch.full_like(cons, math.nan))
        return new, {**metrics, METRIC: cons}

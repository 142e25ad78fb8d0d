"""Small helpers for batches of participants that belong to several replicas.

The engine orders each chunk's participants by replica (all of replica 0's, then replica
1's, ...), so a per-replica server tensor ``[R, ...]`` applies to consecutive runs of rows.
Working run by run with the server row broadcast (``expand``) avoids gathering ``[B, d]``
copies of the server model, a full pass over memory.
"""
from __future__ import annotations

import torch


def replica_runs(rep: torch.Tensor) -> list[tuple[int, slice]]:
    """``(replica, rows)`` for each run of equal consecutive entries of ``rep[B]``."""
    runs, lengths = torch.unique_consecutive(rep, return_counts=True)
    out, lo = [], 0
    for r, length in zip(runs.tolist(), lengths.tolist()):
        out.append((r, slice(lo, lo + length)))
        lo += length
    return out


def start_minus(server: torch.Tensor, rep: torch.Tensor, theta: torch.Tensor,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """``server[rep] - theta`` (``[B, d]``) without forming ``server[rep]``; ``out`` may be
    ``theta`` itself (written over in place)."""
    if out is None:
        out = torch.empty_like(theta)
    for r, rows in replica_runs(rep):
        torch.sub(server[r].expand(rows.stop - rows.start, *server.shape[1:]), theta[rows],
                  out=out[rows])
    return out


def start_rows(server: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
    """``server[rep]`` as a new contiguous ``[B, ...]`` tensor, copied run by run from the
    broadcast (expanded) server row: ~1.3x faster than ``index_select`` for a model's worth
    of columns."""
    out = torch.empty((len(rep), *server.shape[1:]), dtype=server.dtype, device=server.device)
    for r, rows in replica_runs(rep):
        out[rows].copy_(server[r].expand(rows.stop - rows.start, *server.shape[1:]))
    return out


def per_replica(bcast, key: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tensor, rep)``: the broadcast entry ``key`` un-gathered, one row per replica, and the
    participant-to-replica map ``rep[B]``, so that participant ``b`` reads ``tensor[rep[b]]``.
    ``bcast`` is the engine's per-participant view (its ``per_replica`` method: the server's
    ``[R, ...]`` tensor, no ``[B, ...]`` copy) or a plain dict of ``[B, ...]`` rows, where
    each row is its own replica (``rep = arange(B)``)."""
    own = getattr(bcast, "per_replica", None)
    if own is not None:
        return own(key)
    rows = bcast[key]
    return rows, torch.arange(rows.shape[0], device=rows.device)

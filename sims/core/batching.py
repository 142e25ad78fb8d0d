"""Small helpers for batches of participants that belong to several replicas.

The engine orders each chunk's participants by replica (all of replica 0's, then replica
1's, ...), so a per-replica server tensor ``[R, ...]`` applies to consecutive runs of rows.
Working run by run with the server row broadcast (``expand``) avoids gathering ``[B, d]``
copies of the server model, a full pass over memory.
"""
from __future__ import annotations

import numpy as np
import torch

# The least share of a chunk's padded local steps (rows x its longest plan) that must be real
# steps: below it the engine starts a new chunk (:func:`plan_chunks`).
CHUNK_FILL = 0.9


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
    broadcast (expanded) server row (faster than ``index_select`` for a model's worth of
    columns: ``docs/speed.md``)."""
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


def plan_chunks(steps, rep, max_batch: int, min_fill: float | None = None) -> list[np.ndarray]:
    """The engine's chunks of a round's participants: lists of positions into the round's
    participant arrays (``steps[i]`` local steps of participant ``i``, of replica ``rep[i]``).

    A chunk runs in lockstep for as many steps as its longest plan, the finished rows masked
    but still computed; with unequal client sizes (Dirichlet splits) one large client would
    make every row of its chunk pay for its steps. So the participants are taken in order of
    decreasing step count (stable), and a chunk closes before the next participant when it
    holds ``max_batch`` rows or when that participant would leave less than ``min_fill`` of
    the chunk's padded steps real (``None``: :data:`CHUNK_FILL`, read at each call; 0: the
    round's order cut every ``max_batch`` whatever the step counts, the engine's chunks
    before this rule); within a chunk the positions are ordered by replica, then
    by position, so replicas stay consecutive runs. Equal step counts (every client the same
    size) give the round's own order cut every ``max_batch``, the chunks the engine always
    made. Which chunk a participant runs in changes nothing it computes (rows are
    independent); the per-replica sums add in another order (rounding)."""
    steps, rep = np.asarray(steps), np.asarray(rep)
    fill = CHUNK_FILL if min_fill is None else min_fill
    if fill <= 0:                              # the round's order, cut every max_batch
        return [np.arange(lo, min(lo + max_batch, len(steps)), dtype=np.int64)
                for lo in range(0, len(steps), max_batch)]
    chunks, cur, real = [], [], 0
    for i in np.argsort(-steps, kind="stable"):
        k = int(steps[i])
        if cur and (len(cur) == max_batch
                    or real + k < fill * int(steps[cur[0]]) * (len(cur) + 1)):
            chunks.append(cur)
            cur, real = [], 0
        cur.append(int(i))
        real += k
    if cur:
        chunks.append(cur)
    return [np.array(sorted(c, key=lambda i: (rep[i], i)), dtype=np.int64) for c in chunks]

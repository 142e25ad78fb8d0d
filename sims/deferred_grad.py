"""A minibatch gradient with one block still in the products' own outputs (issue 16).

The MLP's first-layer weight gradient comes from one oneDNN product per client
(:mod:`sims.problems.mlp_grad`), an op with no ``out=``: each ``[out, in]`` result is a new
tensor, and writing it into the flat ``[B, d]`` gradient is one more read and write of 16 MB a
local step on the issue-16 benchmark (0.54 ms a step, 5.4 ms a round: 7% of Fed-AMS's
round). A C local-step kernel can read those outputs where they are instead. So an algorithm
that declares ``takes_deferred_grad`` gets, from a problem that declares ``defers_grad``, a
:class:`DeferredGrad`: the flat gradient with that block not yet written, and the per-client
block outputs. Whoever needs the whole tensor calls :func:`materialized` (the copy the
problem would have made, once); nothing else is different. Tested in
``tests/test_deferred_grad.py``: the materialized gradient equals the problem's flat one bit
for bit, and whole engine runs with and without deferral are the same bits.
"""
from __future__ import annotations

import torch


class DeferredGrad:
    """``flat[B, d]`` whose columns ``block`` (a slice) are ``parts[c]`` (one contiguous tensor
    per row, ``block``'s length of entries) and not yet written into ``flat``."""

    __slots__ = ("flat", "block", "parts")

    def __init__(self, flat: torch.Tensor, block: slice, parts: list):
        if len(parts) != flat.shape[0]:
            raise ValueError(f"{len(parts)} deferred parts for {flat.shape[0]} rows")
        self.flat, self.block, self.parts = flat, block, parts

    @property
    def shape(self):
        return self.flat.shape

    @property
    def dtype(self):
        return self.flat.dtype

    @property
    def device(self):
        return self.flat.device

    def parts_for(self, like: torch.Tensor) -> list | None:
        """The rows' blocks, flattened, where a step on ``like`` (``[B, d]``) can read them
        as they are (not yet materialized; a plain slice; one contiguous part a row, of
        ``like``'s dtype and device and the block's length); else None."""
        block, parts = self.block, self.parts
        if parts is None or (block.step or 1) != 1 or len(parts) != like.shape[0]:
            return None
        n = block.stop - (block.start or 0)
        if not all(p.dtype == like.dtype and p.device == like.device and p.is_contiguous()
                   and p.numel() == n for p in parts):
            return None
        return [p.view(-1) for p in parts]

    def materialize(self) -> torch.Tensor:
        """The whole gradient: the parts copied into ``flat`` (once) and ``flat`` returned."""
        if self.parts is not None:
            rows = self.flat[:, self.block]
            for c, part in enumerate(self.parts):
                rows[c].copy_(part.reshape(-1))
            self.parts = None
        return self.flat


def materialized(g):
    """``g`` as a tensor: a :class:`DeferredGrad` materialized, anything else as it is."""
    return g.materialize() if isinstance(g, DeferredGrad) else g

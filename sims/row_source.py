"""Rows a C kernel reads where they already are, instead of a gathered ``[B, d]`` copy (issue 16).

A local step works on the chunk's participants' rows ``[B, d]``. Some of those rows exist
elsewhere already: the models a round starts from are the server's rows, one per replica; a
round's fresh optimizer state is zeros; a participant's persisting state is its row of the
engine's client-state tensor. Copying them into a ``[B, d]`` tensor first is one more read
and write of the whole tensor (16 MB a pass on the issue-16 benchmark, ~1.7 ms a round each).
So the engine and an algorithm may hand a step one of these *row sources* instead:

* :class:`ServerRows` -- row ``b`` is ``server[rep[b]]`` (its replica's server row, read-only);
* :class:`ZeroRows` -- every row zeros (read-only);
* :class:`SlotRows` -- row ``b`` is ``storage[slot[b]]`` (a participant's persisting state),
  which a step may also write in place.

Every source has ``shape``, ``dtype``, ``device``, :meth:`~RowSource.materialize` (the
``[B, d]`` tensor it stands for: the copy the caller would otherwise have made) and
:meth:`~RowSource.addresses` (``[B]`` int64: row ``b``'s first element's address, what a C
kernel reads through). :func:`materialized` gives any of them (and a
:class:`sims.deferred_grad.DeferredGrad`) as a tensor; :func:`row_addresses` gives a plain
contiguous ``[B, d]`` tensor's row addresses too, so a kernel takes either through one table.

The engine's side (``sims.engine._run_clients``), for an algorithm whose
``takes_row_sources`` is true:

* the first local step's ``theta`` is a :class:`ServerRows` (the broadcast models, not
  copied; ``ctx.extra["owned_theta"]`` is False then: the step writes a new tensor);
* the last local step (every row's last; rows masked there have finished earlier) has
  ``ctx.extra["delta_from"]``, the :class:`ServerRows` of the round's start: the step may
  return ``server - theta'`` (the round's ``delta``, for every row) in place of ``theta'``
  and then sets ``ctx.extra["wrote_delta"] = True``; otherwise the engine subtracts as
  before. Results are the same bits either way (``tests/test_row_source.py``).
"""
from __future__ import annotations

import torch

from .batching import start_rows


class RowSource:
    """``[B, ...]`` rows not held as a tensor of their own (see the module docstring)."""

    shape: torch.Size
    dtype: torch.dtype
    device: torch.device

    def materialize(self) -> torch.Tensor:
        raise NotImplementedError

    def addresses(self) -> torch.Tensor:
        raise NotImplementedError

    def dim(self) -> int:
        return len(self.shape)


def _row_bytes(t: torch.Tensor) -> int:
    return t.stride(0) * t.element_size()


class ServerRows(RowSource):
    """Row ``b`` is ``server[rep[b]]``: ``server`` ``[R, ...]`` (contiguous rows), ``rep``
    ``[B]`` each participant's replica (the engine orders a chunk by replica)."""

    __slots__ = ("server", "rep", "shape", "dtype", "device")

    def __init__(self, server: torch.Tensor, rep: torch.Tensor):
        self.server, self.rep = server, rep
        self.shape = torch.Size((len(rep), *server.shape[1:]))
        self.dtype, self.device = server.dtype, server.device

    def materialize(self) -> torch.Tensor:
        return start_rows(self.server, self.rep)

    def addresses(self) -> torch.Tensor:
        return self.server.data_ptr() + self.rep.to(torch.int64).cpu() * _row_bytes(self.server)


class ZeroRows(RowSource):
    """``B`` rows of zeros of length ``d``: kernels read one shared zero row (kept per
    ``(d, dtype, device)``), never written."""

    __slots__ = ("shape", "dtype", "device")
    _zero: dict = {}

    def __init__(self, B: int, d: int, dtype: torch.dtype, device):
        self.shape = torch.Size((B, d))
        self.dtype, self.device = dtype, torch.device(device)

    def materialize(self) -> torch.Tensor:
        return torch.zeros(self.shape, dtype=self.dtype, device=self.device)

    def zero_row(self) -> torch.Tensor:
        key = (self.shape[1], self.dtype, self.device)
        row = self._zero.get(key)
        if row is None:
            row = self._zero[key] = torch.zeros(self.shape[1], dtype=self.dtype,
                                                device=self.device)
        return row

    def addresses(self) -> torch.Tensor:
        return torch.full((self.shape[0],), self.zero_row().data_ptr(), dtype=torch.int64)


class SlotRows(RowSource):
    """Row ``b`` is ``storage[slot[b]]``: ``storage`` ``[N, d]`` (contiguous rows, e.g. the
    engine's client state flattened over replicas), ``slot`` ``[B]`` distinct indices. A step
    that owns it may write the rows in place (they are the participants' own state)."""

    __slots__ = ("storage", "slot", "shape", "dtype", "device")

    def __init__(self, storage: torch.Tensor, slot: torch.Tensor):
        self.storage, self.slot = storage, slot
        self.shape = torch.Size((len(slot), *storage.shape[1:]))
        self.dtype, self.device = storage.dtype, storage.device

    def materialize(self) -> torch.Tensor:
        return self.storage.index_select(0, self.slot)

    def addresses(self) -> torch.Tensor:
        return (self.storage.data_ptr()
                + self.slot.to(torch.int64).cpu() * _row_bytes(self.storage))

    def same_rows(self, storage: torch.Tensor, slot: torch.Tensor) -> bool:
        """Whether these are ``storage``'s rows ``slot`` (then nothing needs writing back)."""
        return (self.storage.data_ptr() == storage.data_ptr()
                and self.storage.stride() == storage.stride()
                and (self.slot is slot or torch.equal(self.slot, slot)))


def is_row_source(x) -> bool:
    return isinstance(x, RowSource)


def materialized(x):
    """``x`` as a tensor: a :class:`RowSource` or a :class:`sims.deferred_grad.DeferredGrad`
    materialized, anything else as it is."""
    materialize = getattr(x, "materialize", None)
    return materialize() if materialize is not None and not torch.is_tensor(x) else x


def row_addresses(x) -> torch.Tensor | None:
    """``[B]`` int64 row addresses of a row source, or of a ``[B, d]`` tensor whose rows are
    each contiguous (stride ``(s, 1)``); None for anything else."""
    if isinstance(x, RowSource):
        return x.addresses()
    if not torch.is_tensor(x) or x.dim() != 2 or (x.shape[1] > 1 and x.stride(1) != 1):
        return None
    return x.data_ptr() + torch.arange(x.shape[0], dtype=torch.int64) * _row_bytes(x)

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

The engine's side (``sims.core.engine._run_clients``), for an algorithm whose
``takes_row_sources`` is true:

* the first local step's ``theta`` is a :class:`ServerRows` (the broadcast models, not
  copied; ``ctx.extra["owned_theta"]`` is False then: the step writes a new tensor);
* the last local step (every row's last; rows masked there have finished earlier) has
  ``ctx.extra["delta_from"]``, a :class:`DeltaRequest` over the round's start rows: the step
  may return ``server - theta'`` (the round's ``delta``, for every row) in place of
  ``theta'`` and then marks the request ``done``; otherwise the engine subtracts as before.
  Results are the same bits either way (``tests/test_row_source.py``).
"""
from __future__ import annotations

import torch

from .core.batching import start_rows
from .deferred_grad import DeferredGrad


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


class ScaledRows:
    """Row ``b`` of ``rows`` (a ``[B, ...]`` tensor or row source) times ``scale[b]``: a
    message the engine sums per replica with the scales in the summing product's weights
    (``sims.core.engine._add_per_replica``), never formed (a bias-corrected ``v / c2``, FedLADA's
    ``delta / (lr K)``: one pass over ``[B, d]`` less a round; the sum's rounding is that of
    ``sum_b scale_b rows_b``)."""

    __slots__ = ("rows", "scale")

    def __init__(self, rows, scale: torch.Tensor):
        if scale.numel() != rows.shape[0]:
            raise ValueError(f"{scale.numel()} scales for {rows.shape[0]} rows")
        self.rows, self.scale = rows, scale.reshape(-1)

    @property
    def shape(self):
        return self.rows.shape

    @property
    def dtype(self):
        return self.rows.dtype

    def materialize(self) -> torch.Tensor:
        x = materialized(self.rows)
        return x * self.scale.to(x.dtype).view(-1, *[1] * (x.dim() - 1))


class DeltaRequest:
    """The engine's offer to a last local step (module docstring): return ``rows - theta'``
    (``rows`` a :class:`ServerRows`, the round's start) in place of ``theta'``, and set
    ``done``."""

    __slots__ = ("rows", "done")

    def __init__(self, rows: ServerRows):
        self.rows, self.done = rows, False


def backing(x):
    """The tensor whose memory a kernel reads for ``x`` (its dtype, device and contiguity are
    what the kernels check): a tensor itself; a row source's rows (the server's ``[R, ...]``
    rows, the client-state storage, the shared zero row); a
    :class:`sims.deferred_grad.DeferredGrad`'s flat tensor; None for anything else."""
    if torch.is_tensor(x):
        return x
    if isinstance(x, DeferredGrad):
        return x.flat
    if isinstance(x, ServerRows):
        return x.server
    if isinstance(x, SlotRows):
        return x.storage
    if isinstance(x, ZeroRows):
        return x.zero_row()
    return None


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


def materialized_state(state: dict) -> dict:
    """``state`` with every entry :func:`materialized` (the same dict where none needs it)."""
    if not any(isinstance(v, (RowSource, ScaledRows)) for v in state.values()):
        return state
    return {k: materialized(v) for k, v in state.items()}


def client_rows(cstate, key: str, sources: bool):
    """The participants' client state ``key``: their rows where they are
    (:class:`SlotRows`, from the engine's view's ``rows``) when ``sources``, else (or where
    the view has none) the gathered ``cstate[key]``."""
    rows = getattr(cstate, "rows", None) if sources else None
    got = None if rows is None else rows(key)
    return cstate[key] if got is None else got


def server_rows(bcast, key: str, sources: bool):
    """The broadcast ``key``'s participant rows: a :class:`ServerRows` (the engine's view's
    ``rows``) when ``sources``, else (or for a plain dict) the gathered ``bcast[key]``."""
    rows = getattr(bcast, "rows", None) if sources else None
    return bcast[key] if rows is None else rows(key)

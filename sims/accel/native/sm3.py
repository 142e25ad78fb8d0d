"""FedAda2's client AdaGrad / Adam step with the SM3-II preconditioner in one C pass
(``sm3.c``; :mod:`sims.accel.native`): the fast form of
:meth:`sims.algorithms.fedada2.JointAdaptive.reference_local_step` with ``z = 1``, called by
:meth:`~sims.algorithms.fedada2.JointAdaptive._native_rows_step`.

Each (row, layer) is one loop over the layer's entries that reads ``g``, ``theta`` (Adam:
``m``) and the cover accumulators ``mu`` and writes ``theta`` (``m``), the new ``mu`` (the
rows' and columns' maxima of this step's ``nu``, kept in registers and a cache-resident
scratch) and, when asked, ``nu``: the ``cover_min`` before and the ``cover_max`` after, which
torch's fused kernel needs as passes of their own, are folded into it. A cover whose every
layer is a vector (``SM3Cover(full=True)``) is the full preconditioner (DJA, joint-adaptive,
FedAdaAdagrad, FedAdaAdam): ``nu`` is written into ``mu`` itself (``nu_out`` None: its
``nu`` is its ``mu``).

The operands need not be tensors of their own (:func:`sm3_step`): a round's start is read
where it is (:mod:`sims.row_source`: one shared zero row for zero accumulators and Adam's
zero ``m``, DJA's server statistic as the server's rows per replica, the server models as
``theta``), through per-row address tables; the gradient's deferred block
(:mod:`sims.deferred_grad`) through the rows' part addresses; and the step can write the
round's ``delta = start - theta'`` in place of ``theta'`` (the row-source engine
protocol's last step). For the full preconditioner that is where the kernel wins: its step
alone is about as fast as torch's fused kernel (``25 x 159,010`` float32, one thread,
caches flushed, fastest of 40: AdaGrad 1.15-1.2 ms against 1.1-1.2 ms, Adam 1.6-1.7
against 1.7-1.8 ms), but in the round it spares what surrounds torch's kernel (the zero fills of
the start, DJA's gathered and twice copied server statistic, each row split around the
deferred block into a list of pieces): the issue-16 benchmark's rounds, one process, the
C kernel on and off interleaved (fastest round of 6, three repeats, split medians, load
< 1): joint-adaptive 61.0 against 63.6 ms (local step 14.2 / 15.9 ms, the rest of the round
4.8 / 5.8 ms), DJA 60.4 / 67.1 (14.3 / 16.4, 4.9 / 7.3), FedAdaAdam 65.5 / 68.5 (19.0 /
21.4, 4.7 / 6.2). The row walk (``sm3_row``) is inlined: called, it cost the SM3-II Adam
step 0.25 ms; the loops take 256-bit vectors (``sm3.c``: 0.1-0.15 ms a step less here).

Measured on the issue-16 benchmark's ``25 x 159,010`` float32 (MLP 784-200-10), one
thread, in place, caches flushed before each call, fastest of 15: AdaGrad 1.3 ms, Adam
2.0 ms, against 2.3 / 3.1 ms for torch's fused kernel with ``cover_min_into`` before and
``cover_max_nonneg`` after; without writing ``nu`` (the rule's minimum with ``z = 1``, where
nothing reads it) 0.9 / 1.6 ms. In cache (one row) 0.22 / 0.34 ns an entry, against
0.11 ns for the step's ``sqrt`` and division alone: with the batch the step is bound by
its memory streams. Whole rounds (``benchmarks/algorithms_vs_loop.py --threads 1``): the
local step of FedAda2 / FedAda2-Adam / FedAda2-blend 28.7 / 33.9 / 34.1 ms a round before,
16.2 / 24.6 / 21.3 ms after; 2.31 / 2.60 / 2.40x of fused Fed-SGD before, 1.97 / 2.18 /
2.17x after (two quiet runs); run back to back with ``FEDTOOLKIT_NATIVE=0`` and without
(``--repeats 3``, load ~1): 2.51 / 2.69 / 2.48x and 2.06 / 2.29 / 2.19x, local step 34.4 /
39.2 / 36.5 and 18.0 / 28.1 / 22.5 ms. Writing ``nu`` costs 0.35 / 0.3 ms of the engine's
1.5 / 2.2 ms step (AdaGrad / Adam, medians, one thread).
"""
from __future__ import annotations

import ctypes
import weakref

import torch

from ...deferred_grad import DeferredGrad
from ...row_source import RowSource, backing, row_addresses
from . import count, kernel, ptr, threads, usable

MAX_AXES = 8                     # sm3.c's SM3_MAX_AXES
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
# theta_out, theta, theta_tab, g, g_blk, blk_lo, blk_hi, m_out, m, m_tab, mu_out, mu, mu_tab,
# nu_out, delta_tab, rows, nrows, d, size, nlayers, desc, step_size, rsqrt_c2, lr, eps, adam,
# b1, b2, scratch, nthreads
ARGTYPES = ([_P] * 5 + [_I64, _I64] + [_P] * 9 + [_I64] * 4
            + [_P] * 3 + [_F64, _F64, _I64, _F64, _F64, _P, _I64])
_descs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def layer_desc(cover):
    """``(desc, layers)``: the kernel's description of ``cover`` (:class:`sims.rules.optim.SM3Cover`),
    per layer ``[theta offset, first accumulator, k, n_0, .., n_{k-1}]`` (``k = 1``: a
    vector, one accumulator per entry; empty layers left out), int64, and the number of
    layers in it; None when a layer has more than :data:`MAX_AXES` axes or the layers or
    their accumulators do not tile ``theta`` / ``mu`` in order. Cached per cover."""
    if cover not in _descs:
        _descs[cover] = _describe(cover)
    return _descs[cover]


def _describe(cover):
    out, at, acc, layers = [], 0, 0, 0
    for sl, shape, spans in cover.blocks:
        n = sl.stop - sl.start
        dims = list(shape) if len(shape) > 1 else [n]
        if (sl.start != at or (sl.step or 1) != 1 or len(dims) > MAX_AXES
                or [o for o, _ in spans] != [acc + sum(dims[:a]) for a in range(len(dims))]
                or [s for _, s in spans] != dims):
            return None
        at, acc = sl.stop, acc + sum(dims)
        if n:
            out += [sl.start, spans[0][0], len(dims), *dims]
            layers += 1
    if at != cover.layout.d or acc != cover.size:
        return None
    return torch.tensor(out, dtype=torch.int64), layers


def _rows_ok(x, B: int, width: int) -> bool:
    """Whether the kernel can read ``x`` as ``[B, width]`` rows: a contiguous tensor of that
    shape, or a row source of it whose rows are each contiguous (read through its address
    table)."""
    if torch.is_tensor(x):
        return x.shape == (B, width) and x.is_contiguous()
    if isinstance(x, RowSource):
        t = backing(x)
        return (tuple(x.shape) == (B, width) and t is not None and t.shape[-1] == width
                and (width <= 1 or t.stride(-1) == 1) and x.device.type == "cpu")
    return False


def _arg(x):
    """``(base, table)`` for the kernel: a tensor's base address (no table), or a row source's
    per-row address table (no base)."""
    if x is None:
        return None, None
    if isinstance(x, RowSource):
        return None, x.addresses().contiguous()
    return x, None


def _part_table(g: DeferredGrad, like) -> torch.Tensor | None:
    """``[B]`` int64: each row's deferred block address, where
    :meth:`~sims.deferred_grad.DeferredGrad.parts_for` takes the parts as they are (as
    ``sims.accel.native.adaptive._block_table`` does); None otherwise."""
    parts = g.parts_for(like)
    return None if parts is None else torch.tensor([p.data_ptr() for p in parts],
                                                   dtype=torch.int64)


def applies(cover, theta, *operands) -> bool:
    """Whether :func:`sm3_step` can take ``cover`` and these operands (``theta`` ``[B, d]``
    first): the kernels built, the cover's layers described (:func:`layer_desc`), every
    tensor read (a :class:`sims.row_source.RowSource`'s or a
    :class:`sims.deferred_grad.DeferredGrad`'s own, :func:`sims.row_source.backing`)
    contiguous on the CPU, all float32 or all float64."""
    if theta.dim() != 2 or theta.shape[1] != cover.layout.d or layer_desc(cover) is None:
        return False
    memory = [backing(x) for x in (theta, *operands)]
    sources = [x for x in (theta, *operands) if isinstance(x, RowSource)]
    if (any(b is None for b in memory)
            or not all(_rows_ok(x, theta.shape[0], x.shape[1]) for x in sources)):
        return False
    return usable(*memory)


def sm3_step(cover, theta, g, mu, lr: float, eps: float, *, m=None, beta1: float = 0.9,
             beta2: float = 0.999, c1=None, c2=None, rows=None, theta_out, mu_out,
             m_out=None, nu_out=None, delta_from=None) -> bool:
    """One step of the rows ``rows`` (``[n]`` indices; None: every row) by ``sm3.c``'s rule
    (its header): AdaGrad with ``m`` None, else Adam with the bias corrections ``c1``,
    ``c2`` (``n`` values, one per stepped row in ``rows``' order; None: off). ``theta``,
    ``g``, ``m`` ``[B, d]``, ``mu`` ``[B, cover.size]``; the outputs (contiguous tensors of
    the same shapes; each may be its input, for in place; ``nu_out`` None: ``nu`` not
    written, as for the full preconditioner, whose ``nu`` is ``mu``) get the stepped rows,
    their other rows are not touched. Returns False (nothing written) when the kernels
    cannot take these operands or this cover.

    The inputs need not be ``[B, d]`` tensors of their own (issue 16):

    * ``theta``, ``m``, ``mu`` may each be a :class:`sims.row_source.RowSource` (a round's
      start: the server's rows per replica, one shared zero row), read through its per-row
      address table, never gathered (never written: its outputs are other tensors);
    * ``g`` may be a :class:`sims.deferred_grad.DeferredGrad`: each row's block is read where
      the gradient product left it (the rows' part addresses; materialized first where
      :meth:`~sims.deferred_grad.DeferredGrad.parts_for` declines);
    * ``delta_from`` (a row source or a ``[B, d]`` tensor): ``theta_out`` gets ``delta_from -
      theta'`` (the round's ``delta``) in place of ``theta'``, in the same pass."""
    got = layer_desc(cover)
    if got is None or theta.dim() != 2:
        return False
    desc, layers = got
    adam = m is not None
    B, d = theta.shape
    outs = [theta_out, mu_out] + ([m_out] if adam else []) + (
        [nu_out] if nu_out is not None else [])
    if (d != cover.layout.d or any(not torch.is_tensor(t) for t in outs)
            or mu_out.shape != (B, cover.size)
            or any(t.shape != (B, d) for t in outs if t is not mu_out)):
        return False
    reads = [(theta, d), (mu, cover.size)] + ([(m, d)] if adam else []) + (
        [(delta_from, d)] if delta_from is not None else [])
    if any(not _rows_ok(x, B, w) for x, w in reads):
        return False
    if tuple(g.shape) != (B, d) or not (torch.is_tensor(g) or isinstance(g, DeferredGrad)):
        return False
    g_blk = _part_table(g, theta_out) if isinstance(g, DeferredGrad) else None
    g_flat = g.flat if g_blk is not None else (g.materialize() if isinstance(g, DeferredGrad)
                                               else g)
    if not usable(g_flat, *outs, *(backing(x) for x, _ in reads)):
        return False
    blk_lo, blk_hi = (g.block.start or 0, g.block.stop) if g_blk is not None else (0, 0)
    idx = None if rows is None else rows.to(torch.int64).contiguous()
    n = B if idx is None else len(idx)
    step = rs2 = None
    if c1 is not None:
        step = (float(lr) / c1.reshape(n).to(torch.float64)).contiguous()
    if c2 is not None:
        rs2 = c2.reshape(n).to(torch.float64).rsqrt().contiguous()
    fn = kernel("sm3_step", theta_out.dtype, ARGTYPES)
    (th_b, th_t), (mu_b, mu_t) = _arg(theta), _arg(mu)
    m_b, m_t = _arg(m) if adam else (None, None)
    dl_t = None if delta_from is None else row_addresses(delta_from).contiguous()
    nt = threads()
    scratch = None                          # a layer's maxima, per thread (matrices only)
    if any(len(shape) > 1 for _, shape, _ in cover.blocks):
        scratch = theta_out.new_empty(nt * max(cover.size, 1))
    if n:
        fn(ptr(theta_out), ptr(th_b), ptr(th_t), ptr(g_flat), ptr(g_blk), blk_lo, blk_hi,
           ptr(m_out), ptr(m_b), ptr(m_t), ptr(mu_out), ptr(mu_b), ptr(mu_t), ptr(nu_out),
           ptr(dl_t), ptr(idx), n, d, cover.size, layers, ptr(desc), ptr(step), ptr(rs2),
           float(lr), float(eps), int(adam), float(beta1), float(beta2), ptr(scratch), nt)
    count("sm3_step")
    return True

"""Compressors and their bit cost (Fed-EF spec section 2).

Every compressor maps a batch of flat vectors ``x`` of shape ``[B, d]`` to ``[B, d]``. The
``scope`` says what a block is: ``"layer"`` (each parameter tensor, the papers' experiments;
Fed-EF footnote 2) or ``"model"`` (the whole vector as one block).

* :class:`TopK` -- keep exactly ``max(1, floor(k * d_l))`` largest-magnitude entries per block
  (Fed-EF Sec. 3, footnote 2; exact-count selection; among entries tied at the ``k``-th
  magnitude the lowest indices are kept, so the selection is one function of the input,
  whichever form computes it).
* :class:`Sign` -- grouped sign, ``||x_I||_1 / d_I * sign(x_I)`` per block (Fed-EF Sec. 3).
* :class:`HeavySign` -- Sign applied after TopK (Fed-EF Definition 2). The scale is ambiguous
  (spec section 2.4): ``scale="kept"`` (default) divides the block's l1 norm by the number of
  kept non-zero entries (the error-minimising scale; it is below ``max(1, floor(k d_l))`` only
  when the block has fewer non-zeros than that); ``scale="full"`` divides by the whole block
  size, as the definition is printed.
* :class:`Stoc` -- unbiased stochastic quantization with ``b`` bits (Fed-EF App. A, eq. (4),
  QSGD) with ``s = 2**(b-1)`` levels (the paper leaves ``s`` undefined; the interval definition
  forces this value, spec section 2.5).
* :class:`Identity` -- full precision.

Bit accounting (spec section 2.6, "values-only" reading that reproduces the paper's 100x for
TopK-0.01 and ~300x for heavy-Sign-0.1): full precision ``32 d``; Sign ``d + 32 M``; TopK
``32 sum_l k_l`` plus ``index_bits`` per kept entry (0 by default, or 32, or ``"log2"`` for
``ceil(log2 d_l)``); heavy-Sign ``sum_l k_l + 32 M`` plus index bits; Stoc ``b d + 32`` per
block (dense). ``M`` is the number of blocks.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

# ``ParamLayout`` in the annotations is :class:`sims.core.params.ParamLayout`, named only
# (annotations are postponed): importing it, even under TYPE_CHECKING, would make rules import
# core, which imports rules (tests/core/test_import_cycles.py).
# ruff: noqa: F821


SCOPES = ("layer", "model")


class CompressorError(ValueError):
    """A nonsensical compressor specification."""


def check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise CompressorError(f"unknown compressor scope {scope!r}; use one of {SCOPES}")


def layer_blocks(layout: ParamLayout, scope: str) -> ParamLayout:
    """The compressor's blocks (a :class:`sims.core.params.ParamLayout`): the layers
    (``"layer"``) or the whole vector (``"model"``)."""
    check_scope(scope)
    return layout if scope == "layer" else layout.whole()


def _check_index_bits(index_bits) -> None:
    if index_bits == "log2":
        return
    if isinstance(index_bits, bool) or not isinstance(index_bits, numbers.Integral) \
            or index_bits < 0:
        raise CompressorError(
            f"index_bits must be a non-negative integer or 'log2', got {index_bits!r}")


def _index_cost(index_bits, block_size: int) -> int:
    if index_bits == "log2":
        return max(1, math.ceil(math.log2(block_size)))
    return int(index_bits)


def kept_count(k: float, block_size: int) -> int:
    """Entries TopK keeps in a block: ``max(1, floor(k * d_l))`` (Fed-EF footnote 2)."""
    return max(1, min(block_size, math.floor(k * block_size)))


@dataclass(frozen=True)
class Identity:
    name: str = "full"
    biased = False
    needs_uniforms = False

    def __call__(self, x: torch.Tensor, layout: ParamLayout, u=None) -> torch.Tensor:
        return x

    def bits(self, layout: ParamLayout) -> int:
        return 32 * layout.d

    def q2_bound(self, layout: ParamLayout) -> float:
        return 0.0


# Rows at least this many times longer than (k x the block width) go through
def top_k_keep(block: torch.Tensor, k: int) -> torch.Tensor:
    """Each row of ``block[B, n]`` with all but its ``k`` largest magnitudes zeroed; among
    entries tied at the ``k``-th magnitude, the lowest indices are kept."""
    a = block.abs()
    kth = a.topk(k, dim=1).values[:, -1:]                       # the k-th largest magnitude
    above = a > kth
    tied = a == kth
    need = k - above.sum(1, keepdim=True)
    keep = above | (tied & (torch.cumsum(tied, 1) <= need))
    return torch.where(keep, block, torch.zeros_like(block))


def error_feedback(compressor, x: torch.Tensor, error: torch.Tensor, layout: ParamLayout,
                   u=None, zero=None):
    """Fed-EF Alg. 2 lines 11-12 (and Alg. 3's server side): ``target = x + error``, the
    message ``C(target)`` and the new error ``target - C(target)``, as ``(target, message,
    residual)``. ``zero`` (``[B]`` bool, None: no row): rows whose error counts as zeros
    (error restarting, Sec. 5.4)."""
    if zero is not None:
        error = error.masked_fill(zero.unsqueeze(-1), 0.0)
    target = x + error
    msg = compressor(target, layout, u)
    return target, msg, target - msg


@dataclass(frozen=True)
class TopK:
    k: float
    scope: str = "layer"
    index_bits: int | str = 0
    biased = True
    needs_uniforms = False

    def __post_init__(self):
        if not 0.0 < self.k <= 1.0:
            raise CompressorError(f"TopK fraction k must be in (0, 1], got {self.k}")
        check_scope(self.scope)
        _check_index_bits(self.index_bits)

    @property
    def name(self) -> str:
        return f"topk-{self.k:g}"

    def __call__(self, x: torch.Tensor, layout: ParamLayout, u=None) -> torch.Tensor:
        """Each block's ``kept_count`` largest magnitudes kept, the rest zeroed
        (:func:`top_k_keep`)."""
        out = torch.empty_like(x)
        blocks = layer_blocks(layout, self.scope)
        for sl, size in zip(blocks.slices, blocks.sizes):
            out[:, sl] = top_k_keep(x[:, sl], kept_count(self.k, size))
        return out

    def bits(self, layout: ParamLayout) -> int:
        blocks = layer_blocks(layout, self.scope)
        return sum(kept_count(self.k, s) * (32 + _index_cost(self.index_bits, s)) for s in blocks.sizes)

    def q2_bound(self, layout: ParamLayout) -> float:
        """Worst case ``1 - min_l k_l / d_l`` (Prop. 3.1 with layer-wise flooring, spec 2.2)."""
        sizes = layer_blocks(layout, self.scope).sizes
        return 1.0 - min(kept_count(self.k, s) / s for s in sizes)


def _grouped_sign(x: torch.Tensor, blocks: ParamLayout, divisor=None) -> torch.Tensor:
    """``scale_I * sign(x_I)`` per block with ``scale_I = ||x_I||_1 / divisor_I``, the signs
    written into the output's block and scaled there."""
    out = torch.empty_like(x)
    for sl in blocks.slices:
        block = x[:, sl]
        denom = block.shape[1] if divisor is None else divisor(block)
        scale = block.abs().sum(1, keepdim=True) / denom
        torch.sign(block, out=out[:, sl]).mul_(scale)
    return out


@dataclass(frozen=True)
class Sign:
    scope: str = "layer"
    biased = True
    needs_uniforms = False
    name: str = "sign"

    def __post_init__(self):
        check_scope(self.scope)

    def __call__(self, x: torch.Tensor, layout: ParamLayout, u=None) -> torch.Tensor:
        return _grouped_sign(x, layer_blocks(layout, self.scope))

    def bits(self, layout: ParamLayout) -> int:
        blocks = layer_blocks(layout, self.scope)
        return blocks.d + 32 * len(blocks.sizes)

    def q2_bound(self, layout: ParamLayout) -> float:
        """``1 - min_i 1/d_i`` (Fed-EF Prop. 3.1)."""
        return 1.0 - 1.0 / max(layer_blocks(layout, self.scope).sizes)


@dataclass(frozen=True)
class HeavySign:
    k: float
    scope: str = "layer"
    scale: str = "kept"
    index_bits: int | str = 0
    biased = True
    needs_uniforms = False

    def __post_init__(self):
        if self.scale not in ("kept", "full"):
            raise CompressorError(f"heavy-Sign scale must be 'kept' or 'full', got {self.scale!r}")
        TopK(self.k, self.scope, self.index_bits)  # validates k, scope and index_bits

    @property
    def name(self) -> str:
        return f"hvsign-{self.k:g}"

    def __call__(self, x: torch.Tensor, layout: ParamLayout, u=None) -> torch.Tensor:
        sparse = TopK(self.k, self.scope)(x, layout)
        divisor = None
        if self.scale == "kept":
            divisor = lambda b: (b != 0).sum(1, keepdim=True).clamp_min(1)  # noqa: E731
        return _grouped_sign(sparse, layer_blocks(layout, self.scope), divisor)

    def bits(self, layout: ParamLayout) -> int:
        blocks = layer_blocks(layout, self.scope)
        return sum(kept_count(self.k, s) * (1 + _index_cost(self.index_bits, s)) + 32
                   for s in blocks.sizes)

    def q2_bound(self, layout: ParamLayout) -> float:
        """``1 - min_i (k_i / d_i) / d_i`` with ``k_i = max(1, floor(k d_i))``: Fed-EF Prop. 3.2
        (``1 - min_i k / d_i``) with the layer's kept fraction ``k_i / d_i`` in place of ``k``,
        as for :meth:`TopK.q2_bound`. With flooring ``k_i / d_i`` can be below ``k`` and the
        printed bound fails (e.g. ``d_i = 2, k = 0.9``, ``scale="full"``, ``x = (1, 1)``:
        ``||C(x) - x||^2 / ||x||^2 = 0.625 > 0.55``). Valid for both scale readings."""
        sizes = layer_blocks(layout, self.scope).sizes
        return 1.0 - min(kept_count(self.k, s) / (s * s) for s in sizes)


@dataclass(frozen=True)
class Stoc:
    """QSGD-style quantizer, Fed-EF eq. (4): ``Q_b(x)_i = ||x|| sign(x_i) xi_i``.

    ``a_i = |x_i| / ||x||``, ``l = floor(a_i s)`` (capped at ``s - 1``), and
    ``xi_i = (l + 1)/s`` with probability ``a_i s - l``, else ``l/s``. Unbiased. Needs one
    uniform draw per coordinate (``u``, shape ``[B, d]``), supplied by the round plan so that
    the batched and the sequential paths see the same randomness.
    """

    b: int
    scope: str = "model"
    biased = False
    needs_uniforms = True

    def __post_init__(self):
        if int(self.b) != self.b or self.b < 1:
            raise CompressorError(f"Stoc needs an integer number of bits b >= 1, got {self.b}")
        check_scope(self.scope)

    @property
    def name(self) -> str:
        return f"stoc-{self.b}"

    def __call__(self, x: torch.Tensor, layout: ParamLayout, u=None) -> torch.Tensor:
        if u is None:
            raise CompressorError("Stoc needs uniforms u of the same shape as x")
        s = 2 ** (self.b - 1)
        out = torch.empty_like(x)
        for sl in layer_blocks(layout, self.scope).slices:
            block = x[:, sl]
            norm = block.norm(dim=1, keepdim=True)
            a = block.abs() / torch.where(norm > 0, norm, torch.ones_like(norm))
            level = torch.clamp(torch.floor(a * s), max=s - 1)
            up = (u[:, sl] < a * s - level).to(x.dtype)
            out[:, sl] = norm * torch.sign(block) * (level + up) / s
        return out

    def bits(self, layout: ParamLayout) -> int:
        blocks = layer_blocks(layout, self.scope)
        return self.b * blocks.d + 32 * len(blocks.sizes)

    def q2_bound(self, layout: ParamLayout) -> float:
        return float("nan")  # random and unbiased: not a q-deviate compressor (spec 2.5)


def make_compressor(spec: str, scope: str = "layer", **kw):
    """Parse ``"full"``, ``"sign"``, ``"topk-0.01"``, ``"hvsign-0.1"``, ``"stoc-2"``."""
    name, _, arg = spec.partition("-")
    try:
        if name in ("full", "identity", "none"):
            return Identity()
        if name == "sign":
            return Sign(scope=scope)
        if name == "topk":
            return TopK(float(arg), scope=scope, **kw)
        if name in ("hvsign", "heavysign"):
            return HeavySign(float(arg), scope=scope, **kw)
        if name == "stoc":
            return Stoc(int(arg), **kw)
    except CompressorError:
        raise
    except (ValueError, TypeError) as exc:  # TypeError: an option this compressor lacks
        raise CompressorError(f"bad compressor parameter in {spec!r}: {exc}") from None
    raise CompressorError(
        f"unknown compressor {spec!r}; use full, sign, topk-K, hvsign-K or stoc-B")

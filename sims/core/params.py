"""Flat parameter vectors and their layer layout.

Every model's parameters live in one flat vector ``theta`` (shape ``[..., d]``). A
:class:`ParamLayout` records each parameter tensor's name, shape and slice, so that

* per-layer compressors (Fed-EF footnote 2: TopK and Sign are applied layer-wise) and
  layer-wise rules (Fed-LAMB's trust ratio) see the layers, and
* models are evaluated with ``torch.func.functional_call`` on *views* of the flat vector,
  which keeps the batched fast path free of copies.

A "layer" is one parameter tensor (weight and bias separately), the reading the Fed-EF
spec adopts (section 6, item 9).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch


@dataclass(frozen=True)
class ParamLayout:
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def from_module(cls, module: torch.nn.Module) -> "ParamLayout":
        items = list(module.named_parameters())
        return cls(tuple(n for n, _ in items), tuple(tuple(p.shape) for _, p in items))

    @classmethod
    def single(cls, d: int, name: str = "x") -> "ParamLayout":
        """One layer of ``d`` coordinates (whole-vector compressors, quadratic problems)."""
        return cls((name,), ((d,),))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(prod(s) for s in self.shapes)

    @property
    def offsets(self) -> tuple[int, ...]:
        out, acc = [], 0
        for s in self.sizes:
            out.append(acc)
            acc += s
        return tuple(out)

    @property
    def d(self) -> int:
        return sum(self.sizes)

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(o, o + s) for o, s in zip(self.offsets, self.sizes))

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``flat[..., d]`` as named tensors of shape ``[..., *shape]``."""
        lead = flat.shape[:-1]
        return {n: flat[..., sl].reshape(*lead, *shp)
                for n, sl, shp in zip(self.names, self.slices, self.shapes)}

    def flatten_module(self, module: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in module.parameters()])

    def load_into(self, module: torch.nn.Module, flat: torch.Tensor) -> None:
        """Copy a flat vector into a module's parameters (reference path)."""
        with torch.no_grad():
            for p, sl in zip(module.parameters(), self.slices):
                p.copy_(flat[sl].reshape(p.shape))

    def whole(self) -> "ParamLayout":
        """The same vector seen as a single layer (whole-model compressor scope)."""
        return ParamLayout.single(self.d, "all")

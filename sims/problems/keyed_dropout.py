"""Dropout masks keyed by the minibatch, for the batched (``torch.func``) gradient path.

The engine's randomness contract: a replica's run is a function of its seed alone, whichever
replicas share its chunk and after a resume. Dropout drawn inside ``vmap`` from torch's
global generator (``randomness="different"``) breaks it: a row's masks depend on the rows
before it in the chunk. Here each minibatch row's masks are drawn outside ``vmap`` from a
generator seeded by the row's sample indices (:func:`sims.problems.neural._row_keys`, plus a
salt where the caller gives one) and passed in; the dropout modules multiply by them
(:func:`given_masks`), so ``vmap`` runs with no randomness at all (its default, which raises
on any other random draw).

The draws are the ones ``torch.nn.Dropout`` / ``Dropout2d`` make in training mode from a
generator in that state (``bernoulli_(1 - p)`` over an ``empty_like`` of the input, scaled by
``1 / (1 - p)``; a feature dropout draws one value per channel; nothing is drawn at
``p = 0`` or ``p = 1``), in the memory format the input had in the reference pass (a
channels-last input fills its noise in channels-last order). So on a CPU the batched path's
masks equal those of :class:`sims.problems.conv.ConvProblem`'s per-client loop, which runs
the modules themselves under the same seed (checked in the tests); on a GPU torch's fused
dropout kernel consumes its generator differently, so there the two paths draw different
(each batching-independent) masks.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn

FEATURE = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
SUPPORTED = (nn.Dropout, *FEATURE)


class DropoutSite(NamedTuple):
    """One dropout call of a forward pass: the module's name, its rate, one sample's mask
    shape and whether the noise is filled in channels-last order."""
    name: str
    p: float
    shape: tuple
    channels_last: bool


def dropout_sites(model: nn.Module, sample: torch.Tensor) -> list[DropoutSite]:
    """The dropout calls of ``model``'s forward pass on ``sample`` (a batch of at least 2
    inputs, laid out as the pass that draws the reference masks lays them out), in call
    order; [] without dropout. A dropout module other than ``Dropout`` / ``Dropout1d-3d`` is
    a ValueError (its draws are not reproduced here)."""
    sites, hooks = [], []

    def record(name):
        def hook(module, args):
            x = args[0]
            feature = isinstance(module, FEATURE)
            shape = ((x.shape[1],) + (1,) * (x.dim() - 2)) if feature else tuple(x.shape[1:])
            last = (not feature and x.dim() == 4 and not x.is_contiguous()
                    and x.is_contiguous(memory_format=torch.channels_last))
            sites.append(DropoutSite(name, float(module.p), shape, last))
        return hook

    for name, module in model.named_modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            if type(module) not in SUPPORTED:
                raise ValueError(f"keyed dropout masks: {type(module).__name__} ({name}) is not "
                                 "supported (Dropout, Dropout1d/2d/3d)")
            hooks.append(module.register_forward_pre_hook(record(name)))
    if not hooks:
        return []
    was_training = model.training
    devices = [sample.device] if sample.device.type == "cuda" else []
    try:
        model.train()
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            model(sample)
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    return sites


def draw_masks(sites: list[DropoutSite], keys: list[int | None], valid: torch.Tensor,
               dtype, device) -> list[torch.Tensor]:
    """One ``[B, b, *site.shape]`` mask per site for minibatch rows whose valid entries are
    ``valid[B, b]``: row ``r``'s masks (at its valid entries, in order) drawn from a
    generator seeded with ``keys[r]``, site after site; 1 elsewhere (padding, ``p = 0``, a
    row with key None)."""
    B, b = valid.shape
    masks = [torch.ones((B, b, *s.shape), dtype=dtype, device=device) for s in sites]
    gen = torch.Generator(device=device)
    valid = valid.to(device)
    for r, key in enumerate(keys):
        n = int(valid[r].sum())
        if key is None or n == 0:
            continue
        gen.manual_seed(key)
        for s, m in zip(sites, masks):
            if s.p == 0.0:
                continue
            if s.p == 1.0:
                m[r, valid[r]] = 0.0
                continue
            fmt = torch.channels_last if s.channels_last else torch.contiguous_format
            noise = torch.empty((n, *s.shape), dtype=dtype, device=device, memory_format=fmt)
            m[r, valid[r]] = noise.bernoulli_(1.0 - s.p, generator=gen).div_(1.0 - s.p)
    return masks


@contextmanager
def given_masks(model: nn.Module, masks):
    """Inside, ``model``'s dropout modules multiply their input by the next of ``masks`` (in
    call order, the order :func:`dropout_sites` lists) instead of drawing; restored on
    exit. Running out of masks is a StopIteration (a pass that calls more dropouts than
    the reference pass did)."""
    it = iter(masks)
    patched = [m for m in model.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    for m in patched:
        m.forward = lambda x: x * next(it)
    try:
        yield
    finally:
        for m in patched:
            del m.forward

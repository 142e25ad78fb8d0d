"""Pretrained ViT-S/16 weights from a local safetensors file with timm's parameter names.

Nothing downloads. The file is timm's ``vit_small_patch16_224`` checkpoint in safetensors
format, e.g. ``model.safetensors`` of the Hugging Face repository
``timm/vit_small_patch16_224.augreg_in21k`` (ImageNet-21K pretraining, FedAda2 Sec. 6 / spec
4.1; the authors' ``timm.create_model(..., pretrained=True)`` resolves to
``...augreg_in21k_ft_in1k``, which loads the same way). It is found at the path the user gives
(``weights=PATH``; the entries will expose it as a flag) or at ``DIR/vit/vit_small_patch16_224.safetensors``
(:data:`VIT_WEIGHTS_PATH`, ``DIR`` = ``--data-dir`` / ``$FEDTOOLKIT_DATA``).

Key mapping: the project's :class:`sims.problems.backbones.vit.VisionTransformer` uses timm's names, so
the mapping is the identity after removing a ``module.`` / ``model.`` prefix; the pretrained
classifier (``head.*``, 21,843 or 1,000 classes) is dropped because FedAda2 replaces it. Every
backbone parameter must be present with its shape, and nothing else may be left over.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from ...data.errors import DataError
from ...data.paths import ENV_VAR, resolve_data_dir
from .vit import VisionTransformer, vit_small_patch16_224

VIT_WEIGHTS_PATH = "vit/vit_small_patch16_224.safetensors"
DROPPED_PREFIXES = ("head.", "fc_norm.", "head_drop.")
_STRIP = ("module.", "model.")


def resolve_vit_weights(weights=None, data_dir=None) -> Path:
    """The weights file: ``weights`` if given, else ``DIR/`` :data:`VIT_WEIGHTS_PATH`."""
    if weights is not None and str(weights) != "":
        path = Path(weights).expanduser()
        if not path.is_file():
            raise DataError(f"ViT-S weights: {path} does not exist; put timm's "
                            "vit_small_patch16_224 model.safetensors (e.g. from "
                            "timm/vit_small_patch16_224.augreg_in21k) there")
        return path
    root = resolve_data_dir(data_dir)
    if root is None or not (root / VIT_WEIGHTS_PATH).is_file():
        where = f"{root / VIT_WEIGHTS_PATH} not found" if root else "no data directory set"
        raise DataError(f"ViT-S weights: {where}; put timm's vit_small_patch16_224 "
                        "model.safetensors (e.g. from timm/vit_small_patch16_224.augreg_in21k) "
                        f"at DIR/{VIT_WEIGHTS_PATH} and pass --data-dir DIR (or set {ENV_VAR}), "
                        "or pass the file's path as weights=PATH")
    return root / VIT_WEIGHTS_PATH


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def map_timm_keys(state: dict) -> dict:
    """timm names -> this module's names (identity after prefix removal; head dropped)."""
    out = {}
    for key, val in state.items():
        for p in _STRIP:
            if key.startswith(p):
                key = key[len(p):]
        if key.startswith(DROPPED_PREFIXES):
            continue
        out[key] = val
    return out


def load_backbone_state(model: VisionTransformer, state: dict, source: str = "state") -> None:
    """Load a timm-named state dict into ``model`` (every parameter, shapes checked)."""
    mapped = map_timm_keys(state)
    own = model.state_dict()
    own = {k: v for k, v in own.items() if not k.startswith(DROPPED_PREFIXES)}
    missing = sorted(set(own) - set(mapped))
    extra = sorted(set(mapped) - set(own))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} ({', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''})")
        if extra:
            parts.append(f"unexpected {len(extra)} ({', '.join(extra[:3])}"
                         f"{', ...' if len(extra) > 3 else ''})")
        raise DataError(f"ViT-S weights {source}: not timm's vit_small_patch16_224 "
                        f"parameter names: {'; '.join(parts)}")
    bad = [k for k in own if tuple(mapped[k].shape) != tuple(own[k].shape)]
    if bad:
        k = bad[0]
        raise DataError(f"ViT-S weights {source}: {k} has shape {tuple(mapped[k].shape)}, "
                        f"expected {tuple(own[k].shape)} (not ViT-S/16 at 224)")
    with torch.no_grad():
        for k, v in own.items():
            v.copy_(mapped[k].to(v.dtype))


def load_vit_backbone(weights=None, data_dir=None) -> tuple[VisionTransformer, str]:
    """``(backbone, sha256 of the file)``: ViT-S/16 without head, pretrained, eval mode."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    path = resolve_vit_weights(weights, data_dir)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise DataError(f"ViT-S weights: cannot read {path} as safetensors "
                        f"({' '.join(str(exc).split())})") from None
    model = vit_small_patch16_224()
    load_backbone_state(model, state, str(path))
    return model.eval(), file_sha256(path)

"""ViT-S/16, the backbone of FedAda2's image experiments (spec 4.1: ImageNet-21K-pretrained
ViT-S, images resized to 224 x 224, a new linear head), defined here because timm does not
install beside the CPU torch of this project.

The architecture is timm's ``vit_small_patch16_224`` (Dosovitskiy et al. 2021; Steiner et al.
2022): 16 x 16 patches of a 224 x 224 image (196 tokens) embedded to width 384 by a
convolution, a class token, learned position embeddings (197 x 384), 12 pre-norm blocks
``x + Attn(LN(x))``, ``x + MLP(LN(x))`` with 6 heads of width 64 (qkv with bias, scale
64^-1/2), MLP 384 -> 1536 -> 384 with exact (erf) GELU, LayerNorm eps 1e-6, a final LayerNorm;
the image's feature is the normed class token (timm's ``global_pool="token"``), 384 numbers.
Module and parameter names are timm's, so a timm state dict loads by name
(:mod:`sims.problems.backbones.weights`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: timm's vit_small_patch16_224 hyperparameters
VIT_S16 = {"img_size": 224, "patch_size": 16, "embed_dim": 384, "depth": 12, "num_heads": 6,
           "mlp_ratio": 4.0}


class PatchEmbed(nn.Module):
    def __init__(self, patch_size: int, embed_dim: int, in_chans: int = 3):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)        # [N, tokens, D]


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, t, d = x.shape
        qkv = self.qkv(x).reshape(n, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        out = att.softmax(-1) @ v                              # [N, heads, T, hd]
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """ViT with timm's names; ``num_classes = 0`` gives the 384-number feature
    (``forward_features``), otherwise a linear ``head`` on it."""

    def __init__(self, img_size: int = 224, patch_size: int = 16, embed_dim: int = 384,
                 depth: int = 12, num_heads: int = 6, mlp_ratio: float = 4.0,
                 num_classes: int = 0, in_chans: int = 3):
        super().__init__()
        self.img_size, self.embed_dim = img_size, embed_dim
        self.patch_embed = PatchEmbed(patch_size, embed_dim, in_chans)
        tokens = (img_size // patch_size) ** 2 + 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, tokens, embed_dim) * 0.02)
        self.blocks = nn.ModuleList(Block(embed_dim, num_heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes else nn.Identity()

    def forward_features(self, x):
        """Images ``[N, 3, img_size, img_size]`` (already normalised) -> ``[N, embed_dim]``."""
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], 1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)[:, 0]

    def forward(self, x):
        return self.head(self.forward_features(x))


def vit_small_patch16_224(num_classes: int = 0) -> VisionTransformer:
    """timm's ``vit_small_patch16_224`` architecture (random initialisation)."""
    return VisionTransformer(**VIT_S16, num_classes=num_classes)


#: Input normalisation of timm's pretrained ViT-S/16 weights (augreg: mean = std = 0.5);
#: FedAda2's code normalised with ImageNet's (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225)
#: instead (``IMAGENET_NORM``), an option of :func:`prepare_images`.
VIT_NORM = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def prepare_images(pixels: torch.Tensor, size: int = 224, norm=VIT_NORM) -> torch.Tensor:
    """Images on the [0, 1] scale ``[N, C, H, W]`` -> ``[N, 3, size, size]`` for the ViT:
    grey images repeated to 3 channels, bilinear resize (FedAda2's ``Resize((224, 224))``),
    per-channel normalisation ``(p - mean) / std``."""
    if pixels.dim() != 4 or pixels.shape[1] not in (1, 3):
        raise ValueError(f"expected images [N, 1 or 3, H, W], got {tuple(pixels.shape)}")
    x = pixels.float()
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    mean = torch.tensor(norm[0], dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(norm[1], dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


class ViTClassifier(nn.Module):
    """Full fine-tuning model (FedAda2 Fig. 4 bottom, for a GPU): images at the dataset's
    resolution and normalisation in, resized and renormalised for the ViT inside ``forward``
    (``denorm`` = the dataset's (mean, std) to undo), backbone and a new linear head trained
    together."""

    def __init__(self, backbone: VisionTransformer, num_classes: int, denorm, norm=VIT_NORM):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.embed_dim, num_classes)
        self.denorm, self.norm = denorm, norm

    def forward(self, x):
        mean = torch.tensor(self.denorm[0], dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.denorm[1], dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        pixels = x * std + mean
        return self.head(self.backbone.forward_features(
            prepare_images(pixels, self.backbone.img_size, self.norm).to(x.dtype)))

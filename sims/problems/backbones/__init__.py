"""Pretrained backbones for frozen-feature fine-tuning: ViT-S/16 (:mod:`.vit`), its local
safetensors weights (:mod:`.weights`), cached features and the linear-head problem
(:mod:`.features`)."""
from .features import (backbone_features, cached_features, linear_head_problem,
                       random_features_dataset, vit_feature_dataset)
from .vit import VIT_S16, VisionTransformer, ViTClassifier, prepare_images, vit_small_patch16_224
from .weights import VIT_WEIGHTS_PATH, load_vit_backbone, map_timm_keys, resolve_vit_weights

__all__ = ["VIT_S16", "VisionTransformer", "ViTClassifier", "vit_small_patch16_224",
           "prepare_images", "VIT_WEIGHTS_PATH", "load_vit_backbone", "map_timm_keys",
           "resolve_vit_weights", "backbone_features", "cached_features",
           "vit_feature_dataset", "random_features_dataset", "linear_head_problem"]

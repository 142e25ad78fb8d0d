"""ViT-S/16 (:mod:`sims.problems.backbones`): timm key mapping from a safetensors file, the blocks
against torch's own transformer layer, the feature cache and the linear-head problem."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from sims.problems.backbones import (VisionTransformer, ViTClassifier, cached_features,
                            linear_head_problem, load_vit_backbone, random_features_dataset,
                            vit_feature_dataset, vit_small_patch16_224)
from sims.problems.backbones.weights import VIT_WEIGHTS_PATH, resolve_vit_weights
from sims.data import DataError
from sims.core.engine import run
from sims.algorithms.registry import make_algorithm
from sims.core.participation import Participation

from conftest import random_dataset


def timm_vit_s16_shapes(num_classes: int = 21843) -> dict[str, tuple]:
    """timm's vit_small_patch16_224 state-dict names and shapes, written out independently."""
    D, H = 384, 1536
    shapes = {"cls_token": (1, 1, D), "pos_embed": (1, 197, D),
              "patch_embed.proj.weight": (D, 3, 16, 16), "patch_embed.proj.bias": (D,)}
    for i in range(12):
        b = f"blocks.{i}."
        shapes.update({b + "norm1.weight": (D,), b + "norm1.bias": (D,),
                       b + "attn.qkv.weight": (3 * D, D), b + "attn.qkv.bias": (3 * D,),
                       b + "attn.proj.weight": (D, D), b + "attn.proj.bias": (D,),
                       b + "norm2.weight": (D,), b + "norm2.bias": (D,),
                       b + "mlp.fc1.weight": (H, D), b + "mlp.fc1.bias": (H,),
                       b + "mlp.fc2.weight": (D, H), b + "mlp.fc2.bias": (D,)})
    shapes.update({"norm.weight": (D,), "norm.bias": (D,),
                   "head.weight": (num_classes, D), "head.bias": (num_classes,)})
    return shapes


@pytest.fixture(scope="module")
def timm_file(tmp_path_factory):
    g = torch.Generator().manual_seed(0)
    state = {k: torch.randn(s, generator=g) * 0.02 for k, s in timm_vit_s16_shapes(10).items()}
    path = tmp_path_factory.mktemp("w") / "model.safetensors"
    save_file(state, str(path))
    return path, state


def test_architecture_is_vit_s16():
    m = vit_small_patch16_224()
    backbone = sum(np.prod(s) for k, s in timm_vit_s16_shapes().items() if not k.startswith("head"))
    assert sum(p.numel() for p in m.parameters()) == backbone == 21_665_664
    assert vit_small_patch16_224(1000).head.weight.shape == (1000, 384)


def test_timm_safetensors_loads_every_parameter(timm_file):
    path, state = timm_file
    model, sha = load_vit_backbone(weights=path)
    loaded = model.state_dict()
    assert set(loaded) == {k for k in state if not k.startswith("head.")}
    for k, v in loaded.items():
        assert torch.equal(v, state[k]), k
    assert len(sha) == 64
    torch.manual_seed(0)
    out = model(torch.randn(2, 3, 224, 224))
    assert out.shape == (2, 384) and torch.isfinite(out).all()


def test_prefixed_keys_load(tmp_path, timm_file):
    _, state = timm_file
    path = tmp_path / "prefixed.safetensors"
    save_file({"module." + k: v for k, v in state.items()}, str(path))
    model, _ = load_vit_backbone(weights=path)
    assert torch.equal(model.pos_embed, state["pos_embed"])


@pytest.mark.parametrize("edit, text", [
    (lambda s: s.pop("blocks.3.attn.qkv.bias"), "missing 1 \\(blocks.3.attn.qkv.bias\\)"),
    (lambda s: s.__setitem__("blocks.12.norm1.weight", torch.zeros(384)), "unexpected 1"),
    (lambda s: s.__setitem__("pos_embed", torch.zeros(1, 50, 384)), "pos_embed has shape"),
])
def test_wrong_files_one_line(tmp_path, timm_file, edit, text):
    state = dict(timm_file[1])
    edit(state)
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    with pytest.raises(DataError, match=text) as info:
        load_vit_backbone(weights=path)
    assert "\n" not in str(info.value)


def test_missing_weights_say_where(tmp_path):
    with pytest.raises(DataError, match=VIT_WEIGHTS_PATH) as info:
        resolve_vit_weights(None, tmp_path)
    assert "model.safetensors" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DataError, match="does not exist"):
        resolve_vit_weights(tmp_path / "nope.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(DataError, match="cannot read"):
        load_vit_backbone(weights=junk)
    (tmp_path / "vit").mkdir()
    (tmp_path / VIT_WEIGHTS_PATH).write_bytes(b"x")
    assert resolve_vit_weights(None, tmp_path) == tmp_path / VIT_WEIGHTS_PATH


def _reference_forward(m: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """The same network from torch's TransformerEncoderLayer (pre-norm, GELU, eps 1e-6)."""
    d = m.embed_dim
    tok = nn.functional.conv2d(x, m.patch_embed.proj.weight, m.patch_embed.proj.bias,
                               stride=m.patch_embed.proj.kernel_size)
    tok = tok.flatten(2).transpose(1, 2)
    h = torch.cat([m.cls_token.expand(len(x), -1, -1), tok], 1) + m.pos_embed
    for blk in m.blocks:
        ref = nn.TransformerEncoderLayer(d, blk.attn.num_heads, blk.mlp.fc1.out_features,
                                         dropout=0.0, activation="gelu", layer_norm_eps=1e-6,
                                         batch_first=True, norm_first=True).to(x.dtype)
        with torch.no_grad():
            ref.self_attn.in_proj_weight.copy_(blk.attn.qkv.weight)
            ref.self_attn.in_proj_bias.copy_(blk.attn.qkv.bias)
            ref.self_attn.out_proj.weight.copy_(blk.attn.proj.weight)
            ref.self_attn.out_proj.bias.copy_(blk.attn.proj.bias)
            for a, b in (("linear1", "fc1"), ("linear2", "fc2")):
                getattr(ref, a).weight.copy_(getattr(blk.mlp, b).weight)
                getattr(ref, a).bias.copy_(getattr(blk.mlp, b).bias)
            for a in ("norm1", "norm2"):
                getattr(ref, a).weight.copy_(getattr(blk, a).weight)
                getattr(ref, a).bias.copy_(getattr(blk, a).bias)
        h = ref.eval()(h)
    return nn.functional.layer_norm(h, (d,), m.norm.weight, m.norm.bias, 1e-6)[:, 0]


def test_forward_equals_torch_transformer_reference():
    torch.manual_seed(1)
    m = VisionTransformer(img_size=32, patch_size=8, embed_dim=24, depth=2, num_heads=3).double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)            # LayerNorm weights away from 1
    x = torch.randn(3, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(m.forward_features(x), _reference_forward(m, x),
                                   rtol=1e-10, atol=1e-10)


def _tiny():
    torch.manual_seed(2)
    return VisionTransformer(img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2).eval()


def test_feature_cache_computes_once(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"train": torch.arange(6.0).reshape(3, 2)}
    key = {"weights": "abc", "data": "def"}
    a = cached_features(compute, key, tmp_path)
    b = cached_features(compute, key, tmp_path)
    assert len(calls) == 1 and torch.equal(a["train"], b["train"])
    cached_features(compute, {**key, "data": "xyz"}, tmp_path)
    assert len(calls) == 2
    assert not list(tmp_path.glob(".features-*"))                 # no temporary files left
    # a file whose stored key differs (a hash-prefix collision, a stale file) is recomputed
    stale = tmp_path / "stale"
    cached_features(compute, key, stale)
    (f,) = stale.glob("features-*.safetensors")
    save_file({"train": torch.zeros(1)}, str(f), metadata={"key": "other"})
    out = cached_features(compute, key, stale)
    assert len(calls) == 4 and torch.equal(out["train"], a["train"])


def test_vit_feature_dataset_cached_and_keyed(tmp_path):
    ds = random_dataset(12, 28, seed=3, n_test=4)
    bb = _tiny()
    f1 = vit_feature_dataset(ds, bb, "w1", cache_dir=tmp_path, batch_size=5)
    assert f1.x_train.shape == (12, 16, 1, 1) and f1.x_test.shape == (4, 16, 1, 1)
    assert torch.equal(f1.y_train, ds.y_train)
    files = list(tmp_path.glob("features-*"))
    with torch.no_grad():
        bb.blocks[0].mlp.fc1.weight.mul_(2)          # same key -> the cache answers
    f2 = vit_feature_dataset(ds, bb, "w1", cache_dir=tmp_path)
    assert torch.equal(f1.x_train, f2.x_train) and list(tmp_path.glob("features-*")) == files
    f3 = vit_feature_dataset(ds, bb, "w2", cache_dir=tmp_path)   # new weights hash
    assert not torch.equal(f1.x_train, f3.x_train)


def test_linear_head_on_random_features_trains():
    ds = random_dataset(200, 28, seed=4, n_test=40)
    feats = random_features_dataset(ds, width=384, seed=0)
    assert feats.x_train.shape == (200, 384, 1, 1)
    assert torch.allclose(feats.x_train.mean((0, 2, 3)), torch.zeros(384), atol=1e-4)
    again = random_features_dataset(ds, width=384, seed=0)
    assert torch.equal(feats.x_train, again.x_train)
    parts = np.array_split(np.arange(200), 10)
    prob = linear_head_problem(feats, parts, batch_size=8, dtype=torch.float64)
    assert prob.d == 385 * 10 and prob.fast_path
    out = run(prob, make_algorithm("fedavg", eta_l=0.05), Participation("fixed", 5), 5, [0])
    loss = out.metrics["train_loss"][0]
    assert loss[-1] < loss[0]


def test_full_finetuning_model_runs():
    bb = _tiny()
    m = ViTClassifier(bb, 7, denorm=((0.5,), (0.25,)))
    out = m(torch.randn(2, 1, 28, 28))
    assert out.shape == (2, 7)
    out.sum().backward()
    assert bb.blocks[0].attn.qkv.weight.grad is not None


def test_full_finetuning_problem_keeps_pretrained_weights():
    from sims.problems.finetune import full_finetune_problem
    ds = random_dataset(24, 28, seed=5, n_test=6)
    bb = _tiny()
    pre = {k: v.clone() for k, v in bb.state_dict().items()}
    prob = full_finetune_problem(ds, np.array_split(np.arange(24), 4), bb, batch_size=4,
                                 local_steps=1, eval_train_samples=8)
    t0, t1 = prob.init_theta(0), prob.init_theta(1)
    head = prob.layout.d - (16 * 10 + 10)
    assert torch.equal(t0[:head], t1[:head]) and not torch.equal(t0[head:], t1[head:])
    bb_flat = torch.cat([pre[k].reshape(-1) for k in pre])
    assert torch.equal(t0[:head], bb_flat)                 # pretrained backbone kept
    out = run(prob, make_algorithm("fedavg", eta_l=0.01), Participation("fixed", 2), 1, [0])
    assert np.isfinite(out.metrics["train_loss"]).all()
    assert not torch.equal(out.server["theta"][0, :head], bb_flat)   # the backbone trains

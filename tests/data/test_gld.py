"""GLD-23K split files and images (fixtures in both image layouts), CIFAR-100's LDA split,
and the fine-tuning problems (real path on fixtures, stand-ins)."""
from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from sims.problems.backbones import VisionTransformer
from sims.data import DataError, class_counts
from sims.data.gld import GLD_FILES, load_gld23k
from sims.problems.finetune import (cifar100_parts, finetune_problem,
                                    gld23k_feature_dataset)

TRAIN = [("u2", "a1b2c3", 17), ("u1", "ffe001", 5), ("u2", "0a0b0c", 17), ("u1", "77aa01", 9),
         ("u3", "b0b0b0", 5), ("u2", "c1c1c1", 9)]
TEST = [("d4d4d4", 9), ("e5e5e5", 17)]


def _color(image_id):
    return tuple(int(image_id[i:i + 2], 16) for i in (0, 2, 4))


def make_gld(root, nested=True, size=(40, 30)):
    folder = root / "gld23k"
    (folder / "images").mkdir(parents=True)
    with open(folder / GLD_FILES["train"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user_id", "image_id", "class"])
        w.writerows(TRAIN)
    with open(folder / GLD_FILES["test"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "class"])
        w.writerows(TEST)
    for iid in [r[1] for r in TRAIN] + [r[0] for r in TEST]:
        d = folder / "images" / iid[0] / iid[1] / iid[2] if nested else folder / "images"
        d.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, _color(iid)).save(d / f"{iid}.jpg", quality=100)
    return root


@pytest.mark.parametrize("nested", [True, False])
def test_load_gld23k_natural_clients(tmp_path, nested):
    data = load_gld23k(make_gld(tmp_path, nested))
    assert data.users == ["u1", "u2", "u3"] and data.n_clients == 3
    assert data.classes == [5, 9, 17] and data.num_classes == 3
    # client u1 holds rows 1 and 3 (classes 5, 9), u2 rows 0, 2, 5, u3 row 4
    assert [p.tolist() for p in data.parts] == [[1, 3], [0, 2, 5], [4]]
    assert data.y_train.tolist() == [2, 0, 2, 1, 0, 1] and data.y_test.tolist() == [1, 2]
    px = data.read(data.train_paths[:2], size=16)
    assert px.shape == (2, 3, 16, 16) and 0 <= float(px.min()) and float(px.max()) <= 1
    want = torch.tensor(_color("a1b2c3"), dtype=torch.float32) / 255
    assert torch.allclose(px[0].mean((1, 2)), want, atol=4 / 255)   # JPEG of a flat colour


def _err(root, match):
    with pytest.raises(DataError, match=match) as info:
        load_gld23k(root)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_gld_errors_say_what_to_put_where(tmp_path):
    msg = _err(tmp_path, "gld23k.*not found")
    assert all(f in msg for f in GLD_FILES.values()) and "images/" in msg
    root = make_gld(tmp_path / "a")
    (root / "gld23k" / GLD_FILES["test"]).unlink()
    _err(root, f"lacks {GLD_FILES['test']}")
    root = make_gld(tmp_path / "b")
    next((root / "gld23k" / "images").rglob("ffe001.jpg")).unlink()
    _err(root, "1 image\\(s\\) missing.*ffe001")
    root = make_gld(tmp_path / "c")
    (root / "gld23k" / GLD_FILES["train"]).write_text("user,image_id,class\nu,x,1\n")
    _err(root, "lacks column\\(s\\) user_id")
    root = make_gld(tmp_path / "d")
    with open(root / "gld23k" / GLD_FILES["test"], "a") as f:
        f.write("d4d4d4,99\n")
    _err(root, "absent from training")
    root = make_gld(tmp_path / "e")
    bad = next((root / "gld23k" / "images").rglob("d4d4d4.jpg"))
    bad.write_bytes(b"not a jpeg")
    data = load_gld23k(root)
    with pytest.raises(DataError, match="cannot decode"):
        data.read(data.test_paths)


def test_gld_features_cached_and_equal_to_direct(tmp_path):
    data = load_gld23k(make_gld(tmp_path))
    torch.manual_seed(0)
    bb = VisionTransformer(img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2).eval()
    seen = []
    feats = gld23k_feature_dataset(data, bb, "sha-x", cache_dir=tmp_path / "cache",
                                   batch_size=4, progress=lambda i, n: seen.append(i))
    assert feats.x_train.shape == (6, 16, 1, 1) and feats.num_classes == 3
    from sims.problems.backbones.vit import prepare_images
    with torch.no_grad():
        direct = bb.forward_features(prepare_images(data.read(data.train_paths, 32), 32))
    torch.testing.assert_close(feats.x_train.flatten(1), direct, rtol=1e-5, atol=1e-6)
    n_calls = len(seen)
    again = gld23k_feature_dataset(data, bb, "sha-x", cache_dir=tmp_path / "cache",
                                   progress=lambda i, n: seen.append(i))
    assert len(seen) == n_calls and torch.equal(again.x_train, feats.x_train)


def test_cifar100_lda_split():
    labels = np.repeat(np.arange(100), 500)
    parts = cifar100_parts(labels, seed=0)
    assert len(parts) == 1000 and {len(p) for p in parts} == {50}
    cc = class_counts(parts, labels, 100)
    # alpha = 0.001: each client is dominated by one class (median share >= 80%); classes
    # that more than 10 clients chose run out, so spill-over adds a few minor classes
    assert np.median(cc.max(1) / 50) >= 0.8
    assert np.mean((cc > 0).sum(1)) < 5
    mild = class_counts(cifar100_parts(labels, seed=0, alpha=1.0), labels, 100)
    assert np.mean((mild > 0).sum(1)) > 25
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(50_000))


@pytest.fixture(scope="module")
def fmnist():
    from sims.data import load_dataset
    return load_dataset("fmnist")


def test_standins_keep_the_client_structure(fmnist):
    kw = {"local_steps": 1, "eval_train_samples": 500, "standin_data": fmnist}
    # the composite stand-ins (default): CIFAR-100's 100 classes, 50,000 tuples over 1,000
    # LDA(0.001) clients of 50; GLD-23K's 200 classes, 23,000 tuples over 233 clients
    prob, rec = finetune_problem("cifar100", standin=True, **kw)
    assert rec["standin"] and rec["reason"] == "stand-in requested" and rec["kind"] == "composite"
    assert prob.n_clients == 1000 and prob.d == 385 * 100 and rec["num_classes"] == 100
    assert {len(p) for p in prob.parts} == {50}
    labels = prob.dataset.y_train.numpy()
    assert np.bincount(labels).tolist() == [500] * 100
    main_share = [np.bincount(labels[p]).max() / len(p) for p in prob.parts]
    assert np.median(main_share) >= 0.8                      # LDA(0.001): one class dominates
    prob, rec = finetune_problem("gld23k", standin=True, **kw)
    sizes = np.array([len(p) for p in prob.parts])
    assert prob.n_clients == 233 and sizes.sum() == 23_000 and sizes.max() > 4 * np.median(sizes)
    assert prob.d == 385 * 200 and rec["num_classes"] == 200
    # the former 10-class stand-in, kept selectable
    kw["standin_kind"] = "fmnist"
    prob, rec = finetune_problem("cifar100", standin=True, **kw)
    assert prob.n_clients == 1000 and prob.d == 385 * 10 and rec["kind"] == "fmnist"
    assert {len(p) for p in prob.parts} == {60}
    prob, rec = finetune_problem("gld23k", standin=True, **kw)
    sizes = np.array([len(p) for p in prob.parts])
    assert prob.n_clients == 233 and sizes.sum() == 23_080 and sizes.max() > 4 * np.median(sizes)
    prob, rec = finetune_problem("gld23k", **kw)                   # auto: no data here
    assert rec["standin"] and "gld23k" in rec["reason"]


def test_real_gld_path_with_fixture_weights(tmp_path):
    """The real path end to end: fixture split and images, a timm-named ViT-S/16 file."""
    from test_vit import timm_vit_s16_shapes
    root = make_gld(tmp_path)
    g = torch.Generator().manual_seed(0)
    (root / "vit").mkdir()
    save_file({k: torch.randn(s, generator=g) * 0.02 for k, s in timm_vit_s16_shapes(4).items()},
              str(root / "vit" / "vit_small_patch16_224.safetensors"))
    prob, rec = finetune_problem("gld23k", data_dir=root, cache_dir=tmp_path / "cache",
                                 local_steps=1)
    assert not rec["standin"] and rec["reason"] is None
    assert prob.n_clients == 3 and prob.d == 385 * 3
    assert list((tmp_path / "cache").glob("features-*.safetensors"))
    with pytest.raises(DataError, match="ViT-S weights"):
        (root / "vit" / "vit_small_patch16_224.safetensors").unlink()
        finetune_problem("gld23k", data_dir=root, standin=False)

"""TinyImageNet loader on fixture folders in the standard ``tiny-imagenet-200/`` layout
(written here with Pillow), and FedLADA's LeNet with the smooth activations of Table 8."""
from __future__ import annotations

import math

import pytest
import torch
from PIL import Image

from sims.data import DataError, load_dataset
from sims.data.base import NORMALIZATION
from sims.problems.models import LeNet, SmoothMLP, gelu_tanh, make_model, smu

WNIDS = ["n01443537", "n01629819", "n01641577"]
COLOURS = {"n01443537": (250, 10, 10), "n01629819": (10, 250, 10), "n01641577": (10, 10, 250)}
SIDE = 16


def _jpeg(path, colour, side=SIDE, mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", (side, side), colour)
    (im.convert("L") if mode == "L" else im).save(path, "JPEG", quality=95)


@pytest.fixture
def tiny(tmp_path):
    root = tmp_path / "tiny-imagenet-200"
    root.mkdir()
    (root / "wnids.txt").write_text("\n".join(WNIDS) + "\n")
    for w in WNIDS:
        for j in range(2):
            _jpeg(root / "train" / w / "images" / f"{w}_{j}.JPEG", COLOURS[w])
    lines = []
    for j, w in enumerate([WNIDS[2], WNIDS[0], WNIDS[1], WNIDS[2]]):
        _jpeg(root / "val" / "images" / f"val_{j}.JPEG", COLOURS[w])
        lines.append(f"val_{j}.JPEG\t{w}\t0\t0\t{SIDE}\t{SIDE}")
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def _dominant(x):
    """The channel with the largest raw pixel value of each image (undoing normalisation)."""
    mean, std = NORMALIZATION["tinyimagenet"]
    raw = x * torch.tensor(std)[:, None, None] + torch.tensor(mean)[:, None, None]
    return raw.mean((-2, -1)).argmax(-1)


def test_loads_standard_layout(tiny):
    ds = load_dataset("tiny-imagenet", str(tiny))
    assert ds.name == "tinyimagenet" and ds.num_classes == 3
    assert ds.x_train.shape == (6, 3, SIDE, SIDE) and ds.x_test.shape == (4, 3, SIDE, SIDE)
    assert ds.y_train.tolist() == [0, 0, 1, 1, 2, 2]
    assert ds.y_test.tolist() == [2, 0, 1, 2]
    # class k's images carry class k's colour: labels follow wnids.txt order, per file
    assert torch.equal(_dominant(ds.x_train), ds.y_train)
    assert torch.equal(_dominant(ds.x_test), ds.y_test)
    mean, std = NORMALIZATION["tinyimagenet"]
    red = (250 / 255 - mean[0]) / std[0]
    assert abs(float(ds.x_train[0, 0].mean()) - red) < 0.05


def test_greyscale_images_become_rgb(tiny):
    _jpeg(tiny / "tiny-imagenet-200" / "train" / WNIDS[0] / "images" / "grey.JPEG",
          (128, 128, 128), mode="L")
    ds = load_dataset("tinyimagenet", str(tiny))
    assert ds.x_train.shape == (7, 3, SIDE, SIDE)


@pytest.mark.parametrize("breakage,message", [
    (lambda r: (r / "wnids.txt").unlink(), "wnids.txt is missing"),
    (lambda r: [p.unlink() for p in (r / "train" / WNIDS[1] / "images").glob("*")],
     f"no training images .*{WNIDS[1]}"),
    (lambda r: (r / "val" / "val_annotations.txt").unlink(), "val_annotations.txt is missing"),
    (lambda r: (r / "val" / "images" / "val_1.JPEG").unlink(), "val_1.JPEG .* is missing"),
    (lambda r: (r / "val" / "val_annotations.txt").write_text("val_0.JPEG\tn999\t0\t0\t1\t1\n"),
     "class n999 is not in wnids.txt"),
    (lambda r: (r / "val" / "val_annotations.txt").write_text("garbage line\n"),
     "expected 'file<TAB>wnid"),
    (lambda r: _jpeg(r / "val" / "images" / "val_2.JPEG", (0, 0, 0), side=SIDE + 2),
     "is 18x18, the others 16x16"),
    (lambda r: (r / "train" / WNIDS[2] / "images" / f"{WNIDS[2]}_0.JPEG").write_bytes(b"no"),
     "cannot decode"),
])
def test_one_line_errors(tiny, breakage, message):
    breakage(tiny / "tiny-imagenet-200")
    with pytest.raises(DataError, match=message) as info:
        load_dataset("tinyimagenet", str(tiny))
    assert "\n" not in str(info.value)


def test_missing_folder_and_no_data_dir(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="tiny-imagenet-200 not found"):
        load_dataset("tinyimagenet", str(tmp_path))
    monkeypatch.delenv("FEDTOOLKIT_DATA", raising=False)
    with pytest.raises(DataError, match="no data directory set"):
        load_dataset("tinyimagenet", None)


# ---------------------------------------------------------------------- LeNet (Fig. 7)

def test_smooth_activations_are_table_8():
    x = torch.linspace(-5, 5, 201, dtype=torch.float64)
    want = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert torch.allclose(gelu_tanh(x), want, rtol=0, atol=1e-15)
    mu = 2.0
    want_smu = 0.5 * (x + x * torch.erf(mu * x))
    assert torch.allclose(smu(x, mu), want_smu, rtol=0, atol=1e-15)
    assert torch.allclose(smu(x, 1e4), torch.relu(x), atol=1e-6)      # large mu: ReLU


def test_lenet_shapes_and_activation_choice():
    net = make_model("lenet", (3, 32, 32), 10, activation="gelu")
    # FedDyn's LeNet: 3*64*25+64, 64*64*25+64, 1600*384+384, 384*192+192, 192*10+10
    assert sum(p.numel() for p in net.parameters()) == 797962
    torch.manual_seed(0)
    x = torch.randn(2, 3, 32, 32)
    outs = {a: LeNet(3 * 32 * 32, 10, activation=a) for a in ("relu", "gelu", "smu")}
    for m in outs.values():
        m.load_state_dict(net.state_dict())
    y = {a: m(x) for a, m in outs.items()}
    assert y["relu"].shape == (2, 10)
    assert not torch.allclose(y["relu"], y["gelu"]) and not torch.allclose(y["gelu"], y["smu"])
    assert make_model("lenet", (1, 28, 28), 10).fc1.in_features == 64 * 4 * 4
    with pytest.raises(ValueError, match="unknown activation"):
        LeNet(activation="tanh")


def test_smooth_mlp_is_an_mlp_with_the_chosen_activation():
    torch.manual_seed(0)
    net = make_model("smooth-mlp", (1, 28, 28), 10, hidden=7, activation="smu", mu=2.0)
    x = torch.randn(3, 1, 28, 28)
    want = net.fc2(smu(net.fc1(x.flatten(-3)), 2.0))
    assert torch.equal(net(x), want)
    g = SmoothMLP(784, 10, hidden=7, activation="gelu")
    g.load_state_dict(net.state_dict())
    assert torch.allclose(g(x), g.fc2(gelu_tanh(g.fc1(x.flatten(-3)))))

"""FedLADA's paper-scale path (``--full``) on fixture data the tests write: every entry's
preset is the paper's setting for its figure (spec 3.1), the ResNet-18-GN / LeNet problems
are built with the paper's augmentation (random crop of the 4- or 8-pixel-padded image, no
flip), local epochs (5 on CIFAR-10, 2 on CIFAR-100 / TinyImageNet), weight decay and decay,
and the entries run end to end on fixture CIFAR-10, CIFAR-100 and TinyImageNet folders."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import write_cifar10, write_cifar100
from reproduce import fedlada_common as fc
from reproduce import fedlada_cost as fcost
from sims.data import Dataset
from sims.problems.conv import ConvProblem
from sims.problems.models import make_model


def write_tinyimagenet(root, per_class=4, side=64):
    wnids = ["n01443537", "n01629819", "n01641577"]
    base = root / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    rng = np.random.default_rng(2)

    def jpeg(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path, "JPEG")
    for w in wnids:
        for j in range(per_class):
            jpeg(base / "train" / w / "images" / f"{w}_{j}.JPEG")
    lines = []
    for j, w in enumerate(wnids):
        jpeg(base / "val" / "images" / f"val_{j}.JPEG")
        lines.append(f"val_{j}.JPEG\t{w}\t0\t0\t{side}\t{side}")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")


WRITERS = {"cifar10": write_cifar10, "cifar100": write_cifar100,
           "tinyimagenet": write_tinyimagenet}

#: entry -> the paper's setting of the figure / table it reproduces (spec 3.1-3.3):
#: dataset, model, rounds, local epochs, Dirichlet concentration
PAPER_SETTING = {
    "fedlada_fig2": ("cifar10", "resnet18", 1500, 5, 0.6),
    "fedlada_fig1": ("cifar100", "resnet18", 1500, 2, 0.6),
    "fedlada_alpha": ("tinyimagenet", "resnet18", 1500, 2, 0.6),
    "fedlada_k": ("tinyimagenet", "resnet18", 1500, 2, 0.6),
    "fedlada_participation": ("cifar10", "resnet18", 1500, 5, 0.6),
    "fedlada_fig8": ("cifar10", "resnet18", 1500, 5, 0.6),
    "fedlada_fig7": ("cifar10", "lenet", 4000, 5, 0.3),
    "fedlada_lr": ("cifar10", "resnet18", 1500, 5, 0.6),
}


@pytest.mark.parametrize("name", sorted(PAPER_SETTING))
def test_full_preset_is_the_papers_setting(name):
    entry = importlib.import_module(f"reproduce.{name}")
    cfg = entry.Config(full=True)
    cfg.scale()
    got = (cfg.dataset, cfg.model, cfg.rounds, fc.epochs(cfg), cfg.dirichlet)
    assert got == PAPER_SETTING[name]
    assert (cfg.n_clients, cfg.participation, cfg.batch_size, cfg.paper_lr) == \
        (100, 0.1, 50, True)
    # every entry states what its paper-scale run costs (reproduce.fedlada_cost)
    assert "--full (GPU, estimated)" in entry.DEFAULT_COST and "H100-hours" in entry.DEFAULT_COST


def test_crop_augmentation_draws_crops_only():
    x = torch.randn(12, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    y = torch.arange(12) % 3
    data = Dataset("cifar10", x, y, x[:3], y[:3], 3, "fixture")
    parts = [np.arange(6), np.arange(6, 12)]
    crop = ConvProblem(data, parts, make_model("cnn", (3, 8, 8), 3, dropout=0.0),
                       batch_size=3, augment="crop", pad=2)
    both = ConvProblem(data, parts, make_model("cnn", (3, 8, 8), 3, dropout=0.0),
                       batch_size=3, augment="crop-flip", pad=2)
    codes = np.concatenate([crop.plan_client(np.random.default_rng(s), 0).ravel() // 12
                            for s in range(40)])
    assert (codes % 2 == 0).all() and len(set(codes)) > 5          # crops, never a flip
    assert (codes // 2 < 25).all()                                  # (2 * pad + 1)^2 offsets
    flips = np.concatenate([both.plan_client(np.random.default_rng(s), 0).ravel() // 12
                            for s in range(40)])
    assert (flips % 2 == 1).any()                                   # crop-flip still flips
    centre = 2 * (2 * 5 + 2)                                        # offset (2, 2): the image
    got, _ = crop.fetch(torch.tensor([4 + 12 * centre]))
    torch.testing.assert_close(got[0], x[4])


@pytest.mark.parametrize("dataset,pad,epochs", [("cifar10", 4, 5), ("cifar100", 4, 2),
                                                ("tinyimagenet", 8, 2)])
def test_full_problem_is_resnet18_groupnorm_with_the_papers_crop(tmp_path, dataset, pad, epochs):
    WRITERS[dataset](tmp_path)
    cfg = fc.StandIn(full=True)
    cfg.scale()
    cfg.dataset, cfg.data_dir, cfg.n_clients = dataset, str(tmp_path), 4
    prob = fc.problem(cfg)
    norms = [m for m in prob.model.modules() if isinstance(m, torch.nn.GroupNorm)]
    assert type(prob.model).__name__ == "ResNet18GN" and len(norms) >= 17
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in prob.model.modules())
    assert (prob.augment, prob.pad, prob.local_epochs, prob.batch_size) == \
        ("crop", pad, epochs, 50)
    # the paper-faithful stem by default (torchvision's 7x7 + max-pool), the CIFAR one on ask
    assert prob.model.stem == "torchvision" and prob.model.conv1.kernel_size == (7, 7)
    cfg.resnet_stem = "cifar"
    assert fc.problem(cfg).model.conv1.kernel_size == (3, 3)
    side = 64 if dataset == "tinyimagenet" else 32
    assert tuple(prob.x.shape[1:]) == (3, side, side)
    alpha = 0.1 if dataset == "cifar10" else 0.05
    assert fc.hyper("fedlada", cfg) == {"eta_l": 1e-3, "eta": 1.0, "alpha": alpha,
                                        "weight_decay": 1e-2, "lr_decay": 0.998}
    assert fc.hyper("fedavg", cfg) == {"eta_l": 0.1, "eta": 1.0, "weight_decay": 1e-3,
                                       "lr_decay": 0.998}


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100", "tinyimagenet"])
def test_fig2_full_runs_on_fixture_data(tmp_path, dataset, capsys):
    WRITERS[dataset](tmp_path / "data")
    from reproduce import common, fedlada_fig2
    rc = common.main(fedlada_fig2, [
        "--full", "--dataset", dataset, "--data-dir", str(tmp_path / "data"),
        "--methods", "fedlada", "--rounds", "1", "--n-clients", "4",
        "--participation", "0.25", "--eval-every", "1", "--eval-train-samples", "4",
        "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "fig"), "--quiet",
        "--threads", "1", "--checkpoint-every", "0"])
    assert rc == 0, capsys.readouterr()
    rec = json.loads(next((tmp_path / "out").rglob("fedlada_*.json")).read_text())
    text = json.dumps(rec)
    assert "ResNet18GN" in text and '"augment": "crop"' in text
    assert '"weight_decay": 0.01' in text and '"lr_decay": 0.998' in text
    assert f'"pad": {8 if dataset == "tinyimagenet" else 4}' in text


def test_fig7_full_runs_the_lenet_on_fixture_cifar10(tmp_path, capsys):
    write_cifar10(tmp_path / "data")
    from reproduce import common, fedlada_fig7
    rc = common.main(fedlada_fig7, [
        "--full", "--data-dir", str(tmp_path / "data"), "--rounds", "1", "--n-clients", "4",
        "--participation", "0.25", "--eval-every", "1", "--eval-train-samples", "4",
        "--activations", "smu", "--out", str(tmp_path / "out"),
        "--figures", str(tmp_path / "fig"), "--quiet", "--threads", "1",
        "--checkpoint-every", "0"])
    assert rc == 0, capsys.readouterr()
    text = " ".join(p.read_text() for p in (tmp_path / "out").rglob("*.json"))
    assert "LeNet" in text and '"augment": "crop"' in text


def test_cost_estimate_arithmetic():
    """Steps = seeds x rounds x sum(S x E x batches): CIFAR-10, 100 clients, batch 50 gives
    10 batches an epoch; GPU hours = FLOPs / the assumed rates."""
    cfg = fc.StandIn(full=True)
    cfg.scale()
    cfg.resnet_stem = "cifar"
    w = fcost.workload(cfg, [(10, 5), (20, 2)])
    assert w["steps"] == 1500 * (10 * 5 * 10 + 20 * 2 * 10)
    sec, gflop = fcost.STEP[("resnet18", "cifar10")]
    evals = 2 * (1500 // 10 + 1) * (10_000 + 10_000)
    flop = 1e9 * gflop * (w["steps"] + evals / 150)
    assert w["pflop"] == pytest.approx(flop / 1e15)
    fast, slow = max(fcost.GPU_TFLOPS), min(fcost.GPU_TFLOPS)
    assert w["gpu_hours"] == pytest.approx((flop / (fast * 1e12) / 3600,
                                            flop / (slow * 1e12) / 3600))
    # the LeNet is launch-bound: the floor per batched step (S clients at once) binds
    cfg.model = "lenet"
    w = fcost.workload(cfg, [(10, 5)])
    floor = 1500 * 5 * 10 * fcost.GPU_STEP_FLOOR_S / 3600
    assert w["gpu_hours"][0] == pytest.approx(floor)
    cfg.model = "resnet18"
    cfg.dataset = "tinyimagenet"                       # 1000 images a client: 20 batches
    assert fcost.workload(cfg, [(10, 2)])["steps"] == 1500 * 10 * 2 * 20
    # the torchvision stem (the entries' default) is costed from its own measured step
    cfg.dataset = "cifar10"
    tv = fc.StandIn(full=True)
    tv.scale()
    assert fcost.model_key(tv) == "resnet18-torchvision"
    ratio = fcost.workload(tv, [(10, 5)])["pflop"] / fcost.workload(cfg, [(10, 5)])["pflop"]
    assert ratio == pytest.approx(fcost.STEP[("resnet18-torchvision", "cifar10")][1]
                                  / fcost.STEP[("resnet18", "cifar10")][1])
    assert ratio < 0.1


def test_cost_benchmark_counts_the_mlp_step_exactly():
    """benchmarks/fedlada_paper_cost.py --quick: the 784-50-10 MLP's step at batch 50 is
    forward 2B(784*50 + 50*10), the weight gradients the same again, and the input gradient
    of the second layer 2B*50*10 (none for the data): 7.99 MFLOP."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fedlada_paper_cost.py"
    done = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["models"]
    B = 50
    assert out["mlp50-fmnist"]["gflop_per_step"] * 1e9 == pytest.approx(
        2 * 2 * B * (784 * 50 + 50 * 10) + 2 * B * 50 * 10, rel=1e-12)
    assert out["lenet-fmnist"]["seconds_per_step"] > 0
    bad = subprocess.run([sys.executable, str(script), "--models", "vgg"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: unknown --models vgg")

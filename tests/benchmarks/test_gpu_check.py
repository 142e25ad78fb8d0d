"""benchmarks/gpu_check.py, the command to run when a GPU is lent, on the CPU with --tiny:
every registry algorithm on the device against its CPU float64 reference, ResNet-18-GN rounds
batched and in a plain loop, ViT-S/16 feature extraction, and the one JSON line with the
paper-scale cost each implies."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import load_benchmark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gpu_check():
    return load_benchmark("gpu_check")


def test_tiny_run_on_the_cpu(gpu_check, capsys):
    out = gpu_check.main(["--device", "cpu", "--tiny"])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(line) == json.loads(json.dumps(out))
    ref = out["algorithms_vs_reference"]
    from sims.algorithms.registry import ALGORITHMS
    assert set(ref["relative_error"]) == set(ALGORITHMS) and ref["all_within"]
    res = out["resnet18_gn"]
    assert res["engine_seconds_per_round"] > 0 and res["loop_seconds_per_round"] > 0
    assert out["vit_s16_features"]["images_per_second"] > 0
    scale = out["paper_scale"]
    assert scale["fedlada_fig2_full"]["batched_local_steps"] > 0
    assert set(scale["fedada2_features"]) == {"cifar100", "gld23k"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_no_cuda_is_a_one_line_error(gpu_check, capsys):
    with pytest.raises(SystemExit) as info:
        gpu_check.main(["--device", "cuda"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA device" in err and "\n" not in err


def test_random_cifar10_files_read_as_cifar10(tmp_path):
    """benchmarks/gpu_session.sh times the CIFAR entries on these files: the loader must take
    them as CIFAR-10 (shapes, ten classes, the sizes asked for)."""
    from sims.data.cifar import load_cifar10
    load_benchmark("random_cifar10").main([str(tmp_path), "--per-batch", "7"])
    ds = load_cifar10(tmp_path)
    assert tuple(ds.x_train.shape) == (35, 3, 32, 32) and tuple(ds.x_test.shape) == (7, 3, 32, 32)
    assert set(ds.y_train.tolist()) <= set(range(10))

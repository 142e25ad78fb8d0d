"""Fed-LAMB's consensus bound T5 on a real run, and the Fed-LAMB models (spec 3.2)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reproduce.fedlamb_common import ConsensusObserver
from sims.algorithms.fed_lamb import PRINTED, FedAMS, FedLAMB
from sims.data import load_dataset
from sims.core.engine import run
from sims.problems.models import CifarCNN, MLPDropout, MnistNet, ResNet9GN, make_model
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.problems.image import build_image_problem


@pytest.fixture(scope="module")
def mnist_mlp():
    """20 clients of the embedded MNIST subset's 50-client shard partition (80 samples each,
    3 local steps at batch 32), the 784-200-10 MLP, in float64 (a float32 layer norm summed
    over 157k coordinates is off by ~1e-4 relative, which a tight bound would see)."""
    return build_image_problem("mnist", "mlp", 20, subset_of=50,
                               data=load_dataset("mnist-subset"), batch_size=32,
                               dtype=torch.float64)


@pytest.mark.parametrize("alg", [
    FedLAMB(eta_l=0.05, lam=0.01),
    FedLAMB(eta_l=0.3, eps=1e-4, **PRINTED),
    FedLAMB(eta_l=0.5, phi_max=0.2)])           # phi_M binding: steps of exactly alpha phi_M
def test_t5_consensus_bound_on_a_real_run(mnist_mlp, alg):
    """T5: per-layer drift within a round <= alpha T phi_M, every participant and layer of
    every round of a seeded run (replayed by the observer, whose replay is checked to be the
    run: its mean end model is the server's new model)."""
    obs = ConsensusObserver()
    out = run(mnist_mlp, alg, Participation("fixed", m=10), 4, [0, 1], eval_every=0,
              observers=[obs])
    ratio, steps, err = (out.metrics[k][:, 1:] for k in
                         ("t5_ratio", "t5_steps_ratio", "t5_replay_err"))
    assert np.all(err < 1e-10), err
    assert np.all(ratio <= 1 + 1e-10), ratio
    assert np.all(steps <= 1 + 1e-10) and np.all(steps > 0.5), steps
    if alg.phi_max < 1:                         # every layer's norm is above phi_M: tight
        assert np.all(ratio > 0.5), ratio


def test_t5_observer_can_fail(mnist_mlp):
    """Fed-AMS (no layer-wise normalisation) has no such bound: measured against the same
    ``alpha T phi_M`` with a small ``phi_M``, its drift exceeds it."""
    alg = FedAMS(eta_l=0.01)
    alg.phi_max, alg.phi_min = 1e-3, 1e-4       # read by the observer only
    out = run(mnist_mlp, alg, Participation("fixed", m=10), 2, [0], eval_every=0,
              observers=[ConsensusObserver()])
    assert np.nanmax(out.metrics["t5_ratio"]) > 1


# ----------------------------------------------------------------------------- models
@pytest.mark.parametrize("name, shape, count, tensors, cls", [
    ("mnist-cnn", (1, 28, 28), 21_840, 8, MnistNet),
    ("mlp-dropout", (1, 28, 28), 159_010, 4, MLPDropout),
    ("cifar-cnn", (3, 32, 32), 122_570, 10, CifarCNN),
    ("resnet9", (3, 32, 32), 6_573_120, 25, ResNet9GN)])
def test_fedlamb_models_shapes_and_counts(name, shape, count, tensors, cls):
    kw = {"in_channels": shape[0]} if name == "resnet9" else {}
    model = make_model(name, shape, 10, **kw)
    assert isinstance(model, cls)
    layout = ParamLayout.from_module(model)
    assert layout.d == count and len(layout.sizes) == tensors
    assert model(torch.randn(3, *shape)).shape == (3, 10)


def test_fedlamb_model_details():
    net = make_model("mnist-cnn")
    assert (net.fc1.in_features, net.fc1.out_features) == (320, 50)   # "320 and 50 cells"
    assert net.conv2_drop.p == 0.5 and net.dropout.p == 0.5
    assert make_model("mlp-dropout").fc1.out_features == 200
    res = ResNet9GN(in_channels=3)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in res.modules())
    assert sum(isinstance(m, torch.nn.GroupNorm) for m in res.modules()) == 8
    assert make_model("cifar-cnn", (3, 32, 32), 100)(torch.randn(1, 3, 32, 32)).shape == (1, 100)
    # dropout is live in train mode and off in eval mode
    mlp = make_model("mlp-dropout").train()
    x = torch.randn(4, 1, 28, 28)
    assert not torch.equal(mlp(x), mlp(x))
    mlp.eval()
    assert torch.equal(mlp(x), mlp(x))


def test_fedlamb_models_build_as_problems(tmp_path):
    """The conv nets build as ConvProblems for their datasets' shapes; ResNet-9 reads the
    channel count from the data."""
    from sims.problems.conv import ConvProblem
    from conftest import random_dataset
    data = random_dataset(40, 28, 0)
    for name in ("mnist-cnn", "resnet9"):
        prob = build_image_problem("fixture", name, 4, data=data, scheme="iid", batch_size=8)
        assert isinstance(prob, ConvProblem)
        assert prob.evaluate(prob.init_theta(0).unsqueeze(0))["train_loss"].shape == (1,)

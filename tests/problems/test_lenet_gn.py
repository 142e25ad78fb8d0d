"""``lenet-gn`` (the FedLADA stand-in search's normalised CNN): FedLADA Fig. 7's LeNet with
GroupNorm after each convolution. The plain LeNet keeps its parameters; the normalised one's
convolutions are scale-invariant (what weight decay acts on in the paper's GroupNorm
ResNet-18); both train through the per-client loop of a convolutional problem."""
from __future__ import annotations

import pytest
import torch

from sims.problems.models import make_model

LENET = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias",
         "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]


def test_plain_lenet_keeps_its_parameters_and_gn_adds_the_norms():
    plain, gn = make_model("lenet", (1, 28, 28), 10), make_model("lenet-gn", (1, 28, 28), 10)
    assert [n for n, _ in plain.named_parameters()] == LENET
    assert [n for n, _ in gn.named_parameters()] == LENET + [
        "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    assert gn.norm1.num_groups == 2 and gn.norm1.num_channels == 64
    assert make_model("lenet-gn", (3, 32, 32), 10, groups=4).norm2.num_groups == 4
    for bad in (0, 3):
        with pytest.raises(ValueError, match="groups"):
            make_model("lenet-gn", (1, 28, 28), 10, groups=bad)


@pytest.mark.parametrize("layer", ["conv1", "conv2"])
def test_gn_convolutions_are_scale_invariant_and_plain_ones_are_not(layer):
    torch.manual_seed(0)
    x = torch.randn(6, 1, 28, 28)
    for name, invariant in (("lenet-gn", True), ("lenet", False)):
        net = make_model(name, (1, 28, 28), 10)
        before = net(x)
        with torch.no_grad():
            getattr(net, layer).weight.mul_(3.0)
            getattr(net, layer).bias.mul_(3.0)
        after = net(x)
        assert before.shape == (6, 10)
        assert torch.allclose(after, before, atol=1e-4) == invariant, (name, layer)


def test_lenet_gn_and_a_narrow_resnet_reach_the_fedlada_problem():
    """``--model lenet-gn`` builds a convolutional problem; ``--width`` narrows the ResNet-18
    and is absent from run keys and sweep cells at its default (0: the paper's 64)."""
    from reproduce import common
    from reproduce import fedlada_common as fc
    small = dict(paper_lr=True, dataset="mnist-subset", n_clients=5, batch_size=4,
                 local_steps=2, eval_train_samples=50, test_samples=50)
    cfg = fc.StandIn(model="lenet-gn", **small)
    assert "width" not in cfg.run_key() and "width" not in fc.problem_desc(cfg)
    prob = fc.problem(cfg)
    assert type(prob).__name__ == "ConvProblem" and prob.model.norm1.num_groups == 2
    assert "LeNet with GroupNorm" in fc.setting_text(cfg)
    assert fc.setting_text(cfg).startswith("mnist-subset (stand-in)")     # not the paper's data
    assert fc.setting_text(fc.StandIn(dataset="cifar10")).startswith("cifar10 (paper dataset)")
    cfg = fc.StandIn(model="resnet18", width=8, **small)
    assert cfg.run_key()["width"] == 8 and fc.problem_desc(cfg)["width"] == 8
    net = fc.problem(cfg).model
    assert net.conv1.out_channels == 8 and net.fc.in_features == 64 and net.stem == "torchvision"
    assert "width 8" in fc.setting_text(cfg)
    with pytest.raises(common.EntryError, match="--width"):
        fc.StandIn(model="lenet", width=8).validate()


def test_fedlada_train_accuracy_evaluates_a_groupnorm_net_on_one_channel_images():
    """The one-channel data sets keep an arbitrary stride on their size-1 channel axis (it
    reads as channels_last), which GroupNorm refuses under the vmapped evaluation; the
    FedLADA train-accuracy observer hands it standard strides."""
    from types import SimpleNamespace

    from reproduce import fedlada_common as fc
    cfg = fc.StandIn(model="lenet-gn", paper_lr=True, dataset="mnist-subset", n_clients=5,
                     batch_size=4, local_steps=2, eval_train_samples=50, test_samples=50)
    prob = fc.problem(cfg)
    assert prob.x.is_contiguous(memory_format=torch.channels_last)   # the layout in question
    theta = torch.stack([prob.init_theta(0), prob.init_theta(1)])
    acc = fc.TrainAccuracy(1)(SimpleNamespace(problem=prob, server={"theta": theta}))
    x, y = prob.x[prob.eval_index], prob.y[prob.eval_index]
    with torch.no_grad():                              # the plain reference, one model at a time
        want = torch.stack([(torch.func.functional_call(prob.model, prob.layout.unflatten(t),
                                                        (x.clone(memory_format=torch.contiguous_format),))
                             .argmax(-1) == y).float().mean() for t in theta])
    assert acc["train_acc"].shape == (2,)
    assert torch.allclose(acc["train_acc"], want)

"""Models (spec 4.3 parameter counts), the flat-parameter layout, and the fast linear-stack MLP
gradient / evaluation against the generic torch.func and autograd paths."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from sims.problems.models import CNN, MLP, LogReg, make_model
from sims.core.params import ParamLayout
from sims.problems.neural import NeuralProblem

F64 = torch.float64


# ----------------------------------------------------------------------------- parameter counts

@pytest.mark.parametrize("name, count, tensors", [
    ("mlp", 159_010, 4), ("logreg", 7_850, 2), ("cnn", 1_199_882, 8)])
def test_parameter_counts_match_spec(name, count, tensors):
    model = make_model(name)
    layout = ParamLayout.from_module(model)
    assert layout.d == count == sum(p.numel() for p in model.parameters())
    assert len(layout.sizes) == tensors


def test_model_shapes_and_options():
    x = torch.randn(2, 1, 28, 28)
    for name in ("mlp", "logreg", "cnn"):
        assert make_model(name)(x).shape == (2, 10)
    assert make_model("cnn", (3, 32, 32), 100)(torch.randn(2, 3, 32, 32)).shape == (2, 100)
    assert ParamLayout.from_module(make_model("mlp", hidden=4)).d == 784 * 4 + 4 + 40 + 10
    assert make_model("cnn", dropout=0.0).dropout.p == 0.0
    assert isinstance(make_model("logreg"), LogReg) and isinstance(make_model("mlp"), MLP)
    assert isinstance(make_model("cnn"), CNN)
    with pytest.raises(ValueError, match="unknown model"):
        make_model("resnet1000")


# ----------------------------------------------------------------------------- ParamLayout

def test_layout_geometry():
    layout = ParamLayout.from_module(make_model("mlp", hidden=5))
    assert layout.names == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    assert layout.shapes == ((5, 784), (5,), (10, 5), (10,))
    assert layout.sizes == (3920, 5, 50, 10)
    assert layout.offsets == (0, 3920, 3925, 3975)
    assert layout.slices[2] == slice(3925, 3975)
    assert layout.d == 3985
    whole = layout.whole()
    assert whole.sizes == (3985,) and whole.d == 3985
    assert ParamLayout.single(7).shapes == ((7,),)


def test_layout_round_trip_and_views():
    torch.manual_seed(0)
    model = make_model("cnn", (1, 8, 8), 10, dropout=0.0).double()
    layout = ParamLayout.from_module(model)
    flat = layout.flatten_module(model)
    assert flat.shape == (layout.d,)
    parts = layout.unflatten(flat)
    for (name, p), (key, view) in zip(model.named_parameters(), parts.items()):
        assert name == key and torch.equal(view, p.detach())
    # the unflattened tensors are views of the flat vector
    parts["fc2.bias"][0] = 123.0
    assert flat[layout.slices[-1]][0] == 123.0
    # load_into / flatten_module round trip on a new vector
    new = torch.randn(layout.d, dtype=F64)
    layout.load_into(model, new)
    assert torch.equal(layout.flatten_module(model), new)
    # batched unflatten: leading axes are kept
    batch = torch.randn(3, layout.d, dtype=F64)
    views = layout.unflatten(batch)
    assert views["conv2.weight"].shape == (3, 64, 32, 3, 3)
    assert torch.equal(torch.cat([v.reshape(3, -1) for v in views.values()], 1), batch)
    # functional_call on the views computes the module's forward
    x = torch.randn(4, 1, 8, 8, dtype=F64)
    out = functional_call(model, layout.unflatten(new), (x,))
    assert torch.equal(out, model(x))


# ----------------------------------------------------------------------------- fast MLP gradient

def _payload():
    return torch.tensor([
        [0, 5, 9, 13, 21, 40],
        [3, 7, -1, -1, -1, -1],          # partial last batch
        [-1, 11, -1, 30, 2, -1],         # padding anywhere
        [-1, -1, -1, -1, -1, -1],        # an all-padding row (a masked step)
        [61, 61, 61, 8, 8, 0],           # repeated samples
    ])


@pytest.fixture(scope="module")
def data(image_data):
    return image_data


@pytest.mark.parametrize("model_fn", [lambda: MLP(784, hidden=4), lambda: LogReg(784),
                                      lambda: MLP(784, hidden=200)],
                         ids=["mlp-4", "logreg", "mlp-200"])
def test_fast_mlp_gradient_equals_generic(data, model_fn, parts):
    prob = NeuralProblem(data, parts, model_fn(), dtype=F64)
    assert prob.fast_path
    payload = _payload()
    B = len(payload)
    theta = torch.randn(B, prob.d, generator=torch.Generator().manual_seed(4), dtype=F64) * 0.1
    fast = prob.stoch_grad(theta, torch.arange(B), payload)
    generic = prob.generic_grad(theta, payload)
    assert fast.shape == generic.shape == (B, prob.d)
    for row in range(B):
        if (payload[row] < 0).all():
            assert not fast[row].any() and not generic[row].any()
            continue
        err = float((fast[row] - generic[row]).norm() / generic[row].norm())
        assert err <= 1e-12, (row, err)
        # and the plain autograd gradient of the mean loss over the valid samples
        ref = prob.reference_grad(theta[row], 0, payload[row].numpy())
        assert float((fast[row] - ref).norm() / ref.norm()) <= 1e-12
    # ReLU units actually switch in this draw (so the mask in the backward pass matters)
    if isinstance(prob.model, MLP):
        h = data.x_train[:10].double().flatten(1) @ prob.layout.unflatten(theta[0])["fc1.weight"].T
        assert (h > 0).any() and (h < 0).any()


def test_fast_and_generic_evaluation_agree(data, parts):
    kw = dict(dtype=F64)
    fast = NeuralProblem(data, parts, MLP(784, hidden=4), **kw)
    generic = NeuralProblem(data, parts, MLP(784, hidden=4), fast_path=False, **kw)
    theta = torch.randn(3, fast.d, generator=torch.Generator().manual_seed(5), dtype=F64) * 0.1
    a, b = fast.evaluate(theta), generic.evaluate(theta)
    assert set(a) == set(b) == {"train_loss", "grad_norm2", "test_acc", "test_loss"}
    for key in a:
        np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), rtol=1e-12, atol=0)


def test_evaluation_is_the_uniform_mean_of_client_objectives(data, parts):
    # f = (1/n) sum_i f_i with f_i the mean loss over client i's data (Fed-EF eq. (1)):
    # clients of unequal sizes count equally
    prob = NeuralProblem(data, parts, MLP(784, hidden=4), dtype=F64)
    theta = torch.randn(prob.d, generator=torch.Generator().manual_seed(6), dtype=F64) * 0.1
    model = MLP(784, hidden=4).double()
    prob.layout.load_into(model, theta)
    x, y = data.x_train.double(), data.y_train
    f = sum(F.cross_entropy(model(x[p]), y[p]) for p in parts) / len(parts)
    grad = torch.autograd.grad(f, list(model.parameters()))
    g2 = sum(float((g * g).sum()) for g in grad)
    got = prob.evaluate(theta.unsqueeze(0), test=False)
    assert float(got["train_loss"][0]) == pytest.approx(float(f.detach()), rel=1e-12)
    assert float(got["grad_norm2"][0]) == pytest.approx(g2, rel=1e-12)
    # a pooled mean over all samples is a different number here (unequal client sizes)
    pooled = F.cross_entropy(model(x), y)
    assert abs(float(pooled.detach()) - float(f.detach())) > 1e-6


def test_local_work_plan(data, parts):
    prob = NeuralProblem(data, parts, MLP(784, hidden=4), batch_size=4, dtype=F64)
    rng = np.random.default_rng(0)
    for c, size in enumerate(prob.parts):
        plan = prob.plan_client(rng, c)
        assert plan.shape == (prob.steps_for(c), 4) == (-(-len(size) // 4), 4)
        valid = plan[plan >= 0]
        assert sorted(valid.tolist()) == sorted(prob.parts[c].tolist())   # one epoch, no repeats
    fixed = NeuralProblem(data, parts, MLP(784, hidden=4), batch_size=4, local_steps=6,
                          dtype=F64)
    plan = fixed.plan_client(rng, 0)                                      # 5 samples, K = 6
    assert plan.shape == (6, 4) and (plan >= 0).all()
    assert set(plan.ravel().tolist()) == set(fixed.parts[0].tolist())


@pytest.mark.parametrize("side", [32, 64])
def test_resnet18_stems_torchvision_and_cifar(side):
    """``stem="torchvision"``: a 7x7 stride-2 convolution and a 3x3 stride-2 max-pool before
    the blocks (the blocks see a quarter of the side); ``"cifar"`` (default): a 3x3 stride-1
    convolution; same blocks and head; an unknown stem is refused."""
    from sims.problems.models import ResNet18GN
    torch.manual_seed(0)
    tv = ResNet18GN(3 * side * side, 10, stem="torchvision")
    cf = ResNet18GN(3 * side * side, 10)
    assert cf.stem == "cifar" and cf.conv1.kernel_size == (3, 3)
    assert tv.conv1.kernel_size == (7, 7) and tv.conv1.stride == (2, 2)
    n = lambda m: sum(p.numel() for p in m.parameters())
    assert n(tv) - n(cf) == 64 * 3 * (49 - 9)
    x = torch.randn(2, 3, side, side)
    seen = {}
    tv.blocks[0].register_forward_hook(lambda m, i, o: seen.update(shape=o.shape))
    assert tv(x).shape == (2, 10)
    assert seen["shape"][-1] == side // 4
    with pytest.raises(ValueError, match="stem"):
        ResNet18GN(3 * 32 * 32, 10, stem="imagenet")

"""problem_from_arrays: [N, F] and image arrays, the three losses, partitions, refused layers,
.npz files read without unpickling."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from sims.algorithms.registry import make_algorithm
from sims.core import engine
from sims.core.participation import Participation
from sims.data import DataError
from sims.problems.arrays import load_arrays, problem_from_arrays, problem_from_file


def _tabular(n=240, f=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f)).astype(np.float32)
    w = rng.normal(size=(f, classes))
    return x, (x @ w).argmax(1), x @ w


def _grad_matches_reference(problem, theta, client=0):
    rng = np.random.default_rng(1)
    payload = problem.plan_client(rng, client)[0]
    batched = problem.stoch_grad(theta.unsqueeze(0), torch.tensor([client]),
                                 torch.as_tensor(payload).unsqueeze(0))[0]
    plain = problem.reference_grad(theta, client, payload)
    torch.testing.assert_close(batched, plain, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("loss", ["cross_entropy", "mse", "bce"])
def test_batched_gradient_is_the_plain_autograd_gradient(loss):
    x, labels, scores = _tabular()
    y = {"cross_entropy": labels, "mse": scores, "bce": (scores > 0).astype(np.float32)}[loss]
    problem = problem_from_arrays(x, y, loss=loss, n_clients=4, batch_size=16,
                                  dtype=torch.float64, hidden=8)
    theta = problem.init_theta(3)
    for client in range(4):
        _grad_matches_reference(problem, theta, client)


def test_defaults_pick_the_loss_from_the_targets():
    x, labels, scores = _tabular()
    assert problem_from_arrays(x, labels, n_clients=4).loss == "cross_entropy"
    assert problem_from_arrays(x, scores, n_clients=4).loss == "mse"


def test_tabular_dirichlet_partition_and_metrics_per_loss():
    x, labels, scores = _tabular(n=400)
    ce = problem_from_arrays(x, labels, partition="dirichlet:alpha=0.3", n_clients=10,
                             x_test=x[:80], y_test=labels[:80])
    sizes = sorted(len(p) for p in ce.parts)
    assert len(ce.parts) == 10 and sum(sizes) == 400 and sizes[0] != sizes[-1]
    # label skew: the clients' class mixes differ from the population's
    mix = np.array([np.bincount(labels[p], minlength=3) / len(p) for p in ce.parts])
    assert mix.std(0).max() > 0.15
    out = engine.run(ce, make_algorithm("fedavg", eta_l=0.1), Participation.parse("m=5"), 3, [0])
    assert {"train_loss", "grad_norm2", "test_acc", "test_loss"} <= set(out.metrics)
    mse = problem_from_arrays(x, scores[:, :2], loss="mse", n_clients=10, x_test=x[:80],
                              y_test=scores[:80, :2])
    out = engine.run(mse, make_algorithm("fedavg", eta_l=0.05), Participation.parse("m=5"), 3,
                     [0])
    assert "test_acc" not in out.metrics and "test_loss" in out.metrics
    multi = (scores > 0).astype(np.float32)
    bce = problem_from_arrays(x, multi, loss="bce", n_clients=10, x_test=x[:80],
                              y_test=multi[:80], partition="dirichlet:alpha=1",
                              partition_labels=labels)
    out = engine.run(bce, make_algorithm("fedadam"), Participation.parse("m=5"), 3, [0])
    assert 0 <= out.metrics["test_label_acc"][0, -1] <= 1


def test_regression_trains_to_a_lower_loss():
    """Linear regression through a linear model: FedAvg lowers the MSE well below its start."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5)).astype(np.float32)
    y = x @ rng.normal(size=5) + 0.01 * rng.normal(size=300)
    problem = problem_from_arrays(x, y, loss="mse", hidden=0, n_clients=5, batch_size=20,
                                  dtype=torch.float64)
    out = engine.run(problem, make_algorithm("fedavg", eta_l=0.05), Participation.parse("full"),
                     15, [0])
    loss = out.metrics["train_loss"][0]
    assert loss[-1] < 0.05 * loss[0]


def test_images_with_one_channel_and_a_conv_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8, 8)).astype(np.float32)          # [N, H, W]
    y = rng.integers(0, 4, size=60)
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.GroupNorm(1, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(3 * 6 * 6, 4))
    problem = problem_from_arrays(x, y, model, n_clients=3, partition="shards",
                                  dtype=torch.float64)
    assert tuple(problem.x.shape[1:]) == (1, 8, 8)
    _grad_matches_reference(problem, problem.init_theta(0))


class _Counter(nn.Module):
    """A module whose buffer a forward pass updates in place."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 3)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen += len(x)
        return self.lin(x)


@pytest.mark.parametrize("model, named", [
    (nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)), "'1' (BatchNorm1d)"),
    (_Counter(), "buffer seen"),
])
def test_unsupported_layers_are_one_line_naming_them(model, named):
    x, labels, _ = _tabular()
    with pytest.raises(ValueError) as err:
        problem_from_arrays(x, labels, model, n_clients=4)
    text = str(err.value)
    assert "\n" not in text and named in text and "GroupNorm or LayerNorm" in text


def test_layernorm_and_groupnorm_are_accepted():
    x, labels, _ = _tabular()
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 3))
    problem_from_arrays(x, labels, model, n_clients=4)


@pytest.mark.parametrize("kwargs, match", [
    ({"partition": "dirichlet"}, "needs alpha"),
    ({"partition": "shards", "loss": "mse"}, "pass partition_labels"),
    ({"loss": "hinge"}, "unknown loss"),
    ({"n_clients": 1000}, "1000 clients need"),
    ({"model": nn.Linear(6, 2)}, "does not fit cross_entropy with 3 classes"),
    ({"model": nn.Linear(5, 3)}, "cannot take inputs"),
    ({"x_test": np.zeros((3, 6), np.float32)}, "both x_test and y_test"),
])
def test_bad_input_is_one_line(kwargs, match):
    x, labels, scores = _tabular()
    y = scores if kwargs.get("loss") == "mse" else labels
    with pytest.raises(ValueError, match=match) as err:
        problem_from_arrays(x, y, **{"n_clients": 4, **kwargs})
    assert "\n" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_cuda_without_a_gpu_is_one_line():
    x, labels, _ = _tabular()
    with pytest.raises(ValueError, match="torch sees no GPU") as err:
        problem_from_arrays(x, labels, device="cuda")
    assert "\n" not in str(err.value)


def test_npz_files_are_read_without_unpickling(tmp_path):
    x, labels, _ = _tabular()
    good = tmp_path / "good.npz"
    np.savez(good, x=x, y=labels, x_test=x[:10], y_test=labels[:10])
    assert set(load_arrays(good)) == {"x", "y", "x_test", "y_test"}
    problem = problem_from_file(good, n_clients=4)
    assert problem.dataset.origin == (f"arrays:{good.resolve()}", None)
    planted = tmp_path / "planted.npz"
    np.savez(planted, x=np.array([object()], dtype=object), y=labels)
    with pytest.raises(DataError, match="never unpickled"):
        load_arrays(planted)
    np.savez(tmp_path / "nokeys.npz", a=x)
    with pytest.raises(DataError, match="needs keys x and y"):
        load_arrays(tmp_path / "nokeys.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not an .npz of plain numeric arrays"):
        load_arrays(tmp_path / "junk.npz")
    import pickle
    (tmp_path / "pickle.npz").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(DataError, match="never unpickled"):
        load_arrays(tmp_path / "pickle.npz")
    np.save(tmp_path / "one.npy", x)
    with pytest.raises(DataError, match="one array"):
        load_arrays(tmp_path / "one.npy")


def test_a_changed_file_is_seen_by_the_data_record(tmp_path):
    from sims.store.digest import changed, record_of
    x, labels, _ = _tabular()
    path = tmp_path / "d.npz"
    np.savez(path, x=x, y=labels)
    record = record_of(problem_from_file(path, n_clients=4))
    assert changed(record) is None
    np.savez(path, x=x + 1, y=labels)
    assert "changed" in changed(record)

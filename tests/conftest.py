"""Shared small fixtures for the simulator-core tests (compressors, optimizers, engine, Fed-EF).

Everything here is tiny and seeded: a float64 quadratic with d = 120, a random 28x28
"image" dataset of 62 samples split among 5 clients of unequal sizes (so clients take
different numbers of local steps), a 784-4-10 MLP on it (d = 3,190) through the fast
linear-stack path and through the generic ``torch.func`` path, and a CNN from
:mod:`sims.problems.models` on 6x6 images with dropout 0 (generic path).

``engine_vs_reference`` runs the batched engine once for several seeds and the sequential
reference once per seed and asserts they agree (the core requirement of the suite).
"""
from __future__ import annotations

import math
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sims.data import Dataset
from sims.core.engine import run
from sims.problems.models import MLP, make_model
from sims.problems.neural import NeuralProblem
from sims.problems.quadratic import heterogeneous_quadratic
from sims.reference.fed_ef import run_fed_ef_reference

# The tests mirror the package tree (tests/core, tests/rules, ...); a test module may import
# another's helpers by module name (test names are unique across the folders).
for _folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if _folder.is_dir() and not _folder.name.startswith((".", "_")):
        sys.path.insert(1, str(_folder))

#: Whole folders and modules of seconds-long tests (end-to-end entries, processes killed and
#: resumed, Ray, benchmarks): marked ``slow``, so ``-m "not slow"`` is the fast subset (CI
#: runs it once more with every fast form off). Single slow tests carry the marker themselves.
SLOW_PATHS = ("reproduce/", "benchmarks/", "store/test_results_trust.py",
              "store/test_hostile_probes.py",
              "experiments/test_sweep_ray.py", "experiments/test_sweep_ray_sessions.py",
              "experiments/test_synthetic_entries.py")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(here).as_posix()
        if rel.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


# The test machine has 2 shared cores; torch's intra-op threads spin against other processes
# there and make small ops 10x slower. One thread keeps the suite fast and its timings stable.
torch.set_num_threads(1)

CLIENT_SIZES = (5, 9, 14, 20, 14)          # batch 4 -> 2, 3, 4, 5, 4 local steps
REL_TOL = 1e-10


def random_dataset(n_train: int, side: int, seed: int, n_test: int = 16) -> Dataset:
    g = torch.Generator().manual_seed(seed)
    return Dataset("fixture", torch.randn(n_train, 1, side, side, generator=g),
                   torch.randint(0, 10, (n_train,), generator=g),
                   torch.randn(n_test, 1, side, side, generator=g),
                   torch.randint(0, 10, (n_test,), generator=g), 10, "random fixture")


def unequal_parts(sizes=CLIENT_SIZES) -> list[np.ndarray]:
    perm = np.random.default_rng(7).permutation(sum(sizes))
    return [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]


FIGURES = Path(__file__).resolve().parent.parent / "figures"


def load_script(relpath: str, name: str | None = None):
    """The module of the script at ``relpath`` under the repository root (``benchmarks/``,
    ``docs/...``: scripts, not a package)."""
    import importlib.util
    path = Path(__file__).resolve().parent.parent / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_benchmark(name: str):
    """The module of ``benchmarks/NAME.py``."""
    return load_script(f"benchmarks/{name}.py", f"{name}_bench")


def tiny_uneven_problem(**kw) -> NeuralProblem:
    """A tiny float64 MLP problem on random 4x4 images, 6 clients of 20 samples except one of
    13 (its last local step is masked): the engine-level A/B tests of the fast local steps."""
    gen = torch.Generator().manual_seed(0)
    n, per = 6, 20
    ds = type("DS", (), dict(name="tiny", source="random",
                             x_train=torch.randn(n * per, 1, 4, 4, generator=gen),
                             y_train=torch.randint(0, 3, (n * per,), generator=gen),
                             x_test=torch.randn(5, 1, 4, 4, generator=gen),
                             y_test=torch.randint(0, 3, (5,), generator=gen)))
    parts = list(np.arange(n * per).reshape(n, per))
    parts[0] = parts[0][:13]     # a client with fewer samples: a masked last step
    return NeuralProblem(ds, parts, MLP(16, 8, 3), batch_size=4, dtype=torch.float64, **kw)


@pytest.fixture
def onednn_calls(monkeypatch):
    """Every oneDNN product (``sims.problems.onednn``) counted in the returned list, and
    the size threshold lowered so every layer, however small, takes it."""
    from sims.problems import onednn
    seen = []
    real = onednn._ONEDNN_LINEAR

    def counting(*args):
        seen.append(1)
        return real(*args)

    monkeypatch.setattr(onednn, "_ONEDNN_LINEAR", counting)
    monkeypatch.setattr(onednn, "ONEDNN_MIN_MACS", 0)
    return seen


def _figure_stamps() -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in FIGURES.glob("*")
            if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def figures_folder_untouched():
    """No test writes into the repository's ``figures/`` (entries under test must be given
    ``--figures`` or run ``--tiny``): the committed figures are the CPU defaults' output."""
    before = _figure_stamps()
    yield
    changed = sorted(k for k, v in _figure_stamps().items() if before.get(k) != v)
    assert not changed, f"tests wrote into figures/: {', '.join(changed)}"

@pytest.fixture(scope="session")
def quad():
    """6 clients, d = 120, 3 local steps, Gaussian noise, float64."""
    return heterogeneous_quadratic(6, 120, local_steps=3, seed=1, sigma=0.5, x0=1.0)


@pytest.fixture
def parts() -> list[np.ndarray]:
    """Sample indices of 5 clients of sizes 5, 9, 14, 20, 14 (62 samples)."""
    return unequal_parts()


@pytest.fixture(scope="session")
def image_data() -> Dataset:
    return random_dataset(sum(CLIENT_SIZES), 28, seed=0)


@pytest.fixture(scope="session")
def mlp_problem(image_data):
    """784-4-10 MLP (the fast linear-stack gradient), float64, unequal clients."""
    prob = NeuralProblem(image_data, unequal_parts(), MLP(784, hidden=4), batch_size=4,
                         dtype=torch.float64)
    assert prob.fast_path
    return prob


@pytest.fixture(scope="session")
def mlp_generic(image_data):
    """The same MLP through the generic torch.func (vmap of grad) path."""
    prob = NeuralProblem(image_data, unequal_parts(), MLP(784, hidden=4), batch_size=4,
                         dtype=torch.float64, fast_path=False)
    assert not prob.fast_path
    return prob


@pytest.fixture(scope="session")
def cnn_problem():
    """sims.problems.models CNN on 6x6 images (d = 28,426), dropout 0, generic path, float64."""
    data = random_dataset(sum(CLIENT_SIZES), 6, seed=1)
    model = make_model("cnn", (1, 6, 6), 10, dropout=0.0)
    prob = NeuralProblem(data, unequal_parts(), model, batch_size=4, dtype=torch.float64)
    assert not prob.fast_path
    return prob


def plan_payload(prob, clients, seed: int = 3) -> torch.Tensor:
    """One round's minibatch plans of ``clients`` stacked as the engine does:
    ``[B, max steps, batch]``, -1 = padding."""
    rng = np.random.default_rng(seed)
    plans = [prob.plan_client(rng, c) for c in clients]
    out = np.full((len(plans), max(len(p) for p in plans), plans[0].shape[1]), -1)
    for j, p in enumerate(plans):
        out[j, : len(p)] = p
    return torch.as_tensor(out)


def stepwise_sgd_delta(prob, server, rep, payload, lr):
    """``theta_start - theta_end`` of plain SGD stepped one minibatch at a time through
    ``linear_stack_grad``, participant ``j`` starting from ``server[rep[j]]``."""
    from sims.problems.linear_stack import linear_stack_grad
    start = server[rep]
    theta = start.clone()
    for k in range(payload.shape[1]):
        x, y, w = prob.minibatch(payload[:, k])
        theta = theta - lr * linear_stack_grad(theta, prob.layout, x, y, w)[0]
    return start - theta


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    den = float(b.norm())
    return float((a - b).norm()) / (den if den > 0 else 1.0)


def check_engine_vs_reference(problem, alg, participation, rounds: int, seeds, *,
                              max_batch: int = 2048, tol: float = REL_TOL):
    """Batched engine == sequential reference for every seed (final model, every round's
    grad_norm2 and train_loss, every client's final EF error, every defined q_A^2)."""
    out = run(problem, alg, participation, rounds, seeds, max_batch=max_batch, eval_test=False)
    assert out.seeds == list(seeds)
    for r, seed in enumerate(seeds):
        hist, theta, errors = run_fed_ef_reference(problem, alg, participation, rounds, seed)
        assert torch.isfinite(theta).all()
        err = rel_err(out.server["theta"][r], theta)
        assert err <= tol, f"seed {seed}: final model relative error {err:.3g}"
        for name in ("grad_norm2", "train_loss"):
            fast, ref = out.metrics[name][r], hist[name]
            assert list(out.rounds[name]) == list(range(rounds + 1))
            assert fast.shape == ref.shape
            assert np.all(np.abs(fast - ref) <= tol * np.abs(ref)), (name, seed, fast, ref)
        if alg.error_feedback:
            state = out.client_state["error"][r]
            for c in range(problem.n_clients):
                if c in errors:
                    e = errors[c]
                    assert float((state[c] - e).norm()) <= tol * max(float(e.norm()), 1e-300)
                else:  # never sampled: still exactly zero
                    assert not state[c].any()
        if "qA2" in out.metrics:
            for t, val in zip(out.rounds["qA2"], out.metrics["qA2"][r]):
                ref = hist["qA2"][t - 1]
                if math.isfinite(ref):
                    assert abs(val - ref) <= 1e-9 * max(abs(ref), 1e-12), (t, val, ref)
    return out


@pytest.fixture(scope="session")
def engine_vs_reference():
    return check_engine_vs_reference


def write_cifar_pickle(path: Path, obj: dict) -> None:
    """As the original files: a protocol-2 pickle whose keys are bytes (Python 2 str)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({k.encode(): v for k, v in obj.items()}, protocol=2))


def write_cifar10(root, per_batch=4, n_test=3):
    """Tiny CIFAR-10 python-pickle batches under ``root/cifar-10-batches-py`` (entry smoke tests)."""
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        write_cifar_pickle(d / f"data_batch_{i}",
                           {"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                            "labels": [(i + j) % 10 for j in range(per_batch)]})
    write_cifar_pickle(d / "test_batch",
                       {"data": rng.integers(0, 256, (n_test, 3072), dtype=np.uint8),
                        "labels": list(range(n_test))})
    write_cifar_pickle(d / "batches.meta", {"label_names": [f"c{i}".encode() for i in range(10)]})


def write_cifar100(root, n_train=20, n_test=4):
    """Tiny CIFAR-100 python-pickle files under ``root/cifar-100-python`` (entry smoke tests)."""
    d = root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.default_rng(1)
    write_cifar_pickle(d / "train",
                       {"data": rng.integers(0, 256, (n_train, 3072), dtype=np.uint8),
                        "fine_labels": [j % 100 for j in range(n_train)]})
    write_cifar_pickle(d / "test",
                       {"data": rng.integers(0, 256, (n_test, 3072), dtype=np.uint8),
                        "fine_labels": list(range(n_test))})
    write_cifar_pickle(d / "meta", {"fine_label_names": [f"c{i}".encode() for i in range(100)]})


def assert_same_runs(a, b, metrics: bool = False) -> None:
    """Two engine results (``sims.core.engine.run``) bit for bit: every server leaf and the client
    state; ``metrics``: every metric too but the clocks."""
    for k in b.server:
        for x, y in zip(torch.utils._pytree.tree_leaves(a.server[k]),
                        torch.utils._pytree.tree_leaves(b.server[k])):
            assert torch.equal(x, y), k
    assert set(a.client_state) == set(b.client_state)
    for k in b.client_state:
        assert torch.equal(a.client_state[k], b.client_state[k]), k
    if metrics:
        assert set(a.metrics) == set(b.metrics)
        for k in set(b.metrics) - {"wall_time", "probe_time"}:
            assert np.array_equal(a.metrics[k], b.metrics[k], equal_nan=True), k


def require_accel() -> None:
    """For a test of what :mod:`sims.accel` plans: skipped where the fast forms are turned off
    for the run (``FEDTOOLKIT_ACCEL=0``: the readable rules run, and the rest of the suite
    tests those)."""
    if os.environ.get("FEDTOOLKIT_ACCEL", "1") == "0":
        pytest.skip("the fast forms are turned off (FEDTOOLKIT_ACCEL=0)")


@pytest.fixture(autouse=True)
def _accel_marked(request):
    """Tests marked ``accel`` test the fast forms: skipped with ``FEDTOOLKIT_ACCEL=0``."""
    if request.node.get_closest_marker("accel") is not None:
        require_accel()


def require_native() -> None:
    """For a test of the C kernels (:mod:`sims.accel.native`): skipped where they are turned off
    (``FEDTOOLKIT_NATIVE=0``: the torch forms are what runs then, and the rest of the suite
    tests those); where they are on they must build (a failed build fails the test)."""
    from sims.accel import native
    require_accel()
    if os.environ.get("FEDTOOLKIT_NATIVE", "1") == "0" or not native.enabled():
        pytest.skip("the C kernels are turned off (FEDTOOLKIT_NATIVE=0)")
    assert native.library() is not None, native.failure()


@pytest.fixture(autouse=True)
def clean_plugins():
    """The registries and plug-in records as they were before the test, for every test: a
    test that registers or ``--import``s a plug-in must not leak it into the next."""
    import sys

    import sims  # noqa: F401
    from sims import plugins
    from sims.algorithms import registry
    from sims.problems import models
    from sims.problems import registry as problems
    from sims.store import extensions
    saved = (dict(registry.ALGORITHMS), dict(problems.PROBLEMS), dict(models.MODELS),
             set(models.PLUGIN_MODELS), dict(extensions._LOADED), dict(plugins.ORIGINS),
             dict(plugins._LOOSE), extensions._ENTRY_POINTS_LOADED, dict(sys.modules))
    yield
    for target, old in zip((registry.ALGORITHMS, problems.PROBLEMS, models.MODELS,
                            extensions._LOADED, plugins.ORIGINS, plugins._LOOSE),
                           (saved[0], saved[1], saved[2], saved[4], saved[5], saved[6])):
        target.clear()
        target.update(old)
    models.PLUGIN_MODELS.clear()
    models.PLUGIN_MODELS.update(saved[3])
    extensions._ENTRY_POINTS_LOADED = saved[7]
    for name in set(sys.modules) - set(saved[8]):
        if name.startswith(("lab_", "fedtoolkit_lab", "my_fedavgm", "plugged_")):
            del sys.modules[name]

"""Your own data and model as an engine problem: :func:`problem_from_arrays`.

::

    from sims.problems.arrays import problem_from_arrays
    problem = problem_from_arrays(x, y, model, partition="dirichlet:alpha=0.5", n_clients=20,
                                  loss="cross_entropy")

``x`` is ``[N, F]`` (tabular rows) or images ``[N, C, H, W]`` (``[N, H, W]``: one channel),
any float or integer dtype; ``y`` is

* ``loss="cross_entropy"``: integer class labels ``[N]`` (metrics: train loss, squared
  full-gradient norm, test loss and accuracy);
* ``loss="mse"``: real targets ``[N]`` or ``[N, K]`` (regression; the loss is the mean
  squared error over the targets, metrics: train and test loss);
* ``loss="bce"``: multi-hot targets ``[N, L]`` in ``{0, 1}`` (multi-label: one binary
  cross-entropy per label on the model's logits, averaged over labels; metrics: train and test
  loss, ``test_label_acc``, the share of labels predicted right at threshold 0.5).

``model`` is any ``torch.nn.Module`` mapping a batch of inputs to outputs (logits, or
predictions for MSE), or None: an MLP (one hidden layer of ``hidden`` ReLU units) on the
flattened inputs. The engine runs every client's model through ``torch.func`` on views of one
flat parameter vector, so a module may have no state of its own that a forward pass updates
in place: a BatchNorm (running statistics) or any module whose buffers change in a forward
pass is refused in one line, naming it, with the alternative (``GroupNorm`` / ``LayerNorm``:
normalisation without running statistics).

``partition`` is a scheme text as on the command line (``"iid"``, ``"shards"``,
``"dirichlet:alpha=0.5"``), or the clients' sample indices
(a list of integer arrays; :func:`sims.data.partition.parse_scheme`). Label schemes (``shards``, ``dirichlet``) split by the class
labels; for regression or multi-label targets pass ``partition_labels`` (a class per sample)
or use ``iid``. ``x_test`` / ``y_test``: a held-out set for the test metrics (without one, no
test metrics). Local work, minibatches and evaluation are those of
:class:`sims.problems.neural.NeuralProblem` (one definition of a round everywhere).

The command line reaches this through ``--problem arrays:PATH.npz`` (:func:`load_arrays`:
keys ``x``, ``y`` and optionally ``x_test``, ``y_test``; read with ``allow_pickle=False``,
never unpickled).
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.errors import DataError
from .neural import NeuralProblem

#: The losses :func:`problem_from_arrays` takes.
LOSSES = ("cross_entropy", "mse", "bce")
_ALIASES = {"ce": "cross_entropy", "crossentropy": "cross_entropy", "cross-entropy":
            "cross_entropy", "l2": "mse", "bce_with_logits": "bce", "multilabel": "bce",
            "multi-label": "bce", "binary_cross_entropy": "bce"}


class ArrayData:
    """Arrays as the dataset a :class:`NeuralProblem` reads (``x_train``, ``y_train``,
    ``x_test``, ``y_test``, ``num_classes``, ``name``, ``source``); ``origin`` and
    ``files`` name the file it came from, for the run's data record
    (:mod:`sims.store.digest`)."""

    def __init__(self, x, y, x_test, y_test, num_classes: int, name: str = "arrays",
                 source: str = "arrays", origin: tuple | None = None, files: tuple = ()):
        self.x_train, self.y_train, self.x_test, self.y_test = x, y, x_test, y_test
        self.num_classes, self.name, self.source = num_classes, name, source
        self.origin, self.files = origin, files

    def __repr__(self) -> str:
        return (f"ArrayData(name={self.name!r}, train={len(self.y_train)}, "
                f"test={len(self.y_test)}, input={tuple(self.x_train.shape[1:])})")


def unsupported_layers(model: nn.Module) -> list[str]:
    """``"name (Type)"`` of every module the batched engine cannot run: normalisation with
    running statistics (BatchNorm, InstanceNorm with ``track_running_stats``), and any module
    whose buffers a forward pass would update in place."""
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.batchnorm._NormBase) and (
                isinstance(mod, nn.modules.batchnorm._BatchNorm) or mod.track_running_stats):
            out.append(f"{repr(name) if name else 'the model'} ({type(mod).__name__})")
    return out


def _check_model(model: nn.Module, sample: torch.Tensor) -> None:
    bad = unsupported_layers(model)
    if not bad:                            # any other module whose buffers a forward changes
        before = {k: v.detach().clone() for k, v in model.named_buffers()}
        if before:
            was = model.training
            model.train()
            with torch.no_grad():
                model(sample)
            model.train(was)
            after = dict(model.named_buffers())
            bad = [f"{k.rpartition('.')[0] or 'the model'} (buffer {k})" for k, v in
                   before.items() if not torch.equal(v, after[k].detach())]
            with torch.no_grad():          # put them back as they were
                for k, v in before.items():
                    after[k].copy_(v)
    if bad:
        raise ValueError(f"unsupported layer(s): {', '.join(bad)}: their state (running "
                         "statistics, buffers updated in place) cannot be carried per client by "
                         "the batched engine; use GroupNorm or LayerNorm instead of BatchNorm")


def _loss_name(loss, y: np.ndarray) -> str:
    if loss is None:
        return "cross_entropy" if y.ndim == 1 and y.dtype.kind in "iub" else "mse"
    name = _ALIASES.get(str(loss).strip().lower(), str(loss).strip().lower())
    if name not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; use one of {', '.join(LOSSES)}")
    return name


def _as_array(a, what: str) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{what} must hold numbers, got dtype {a.dtype}")
    return a


def _inputs(x, what: str) -> np.ndarray:
    x = _as_array(x, what)
    if x.ndim == 3:                                     # [N, H, W]: one channel
        x = x[:, None]
    if x.ndim not in (2, 4):
        raise ValueError(f"{what} must be [N, F] rows or [N, C, H, W] images, got shape "
                         f"{x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{what} holds non-finite values")
    return x


def _targets(y, n: int, loss: str, what: str) -> np.ndarray:
    y = _as_array(y, what)
    if len(y) != n:
        raise ValueError(f"{what} has {len(y)} rows, the inputs {n}")
    if loss == "cross_entropy":
        if y.ndim != 1 or y.dtype.kind not in "biu" and not np.array_equal(y, np.round(y)):
            raise ValueError(f"cross_entropy needs integer class labels [N], got {what} of "
                             f"shape {y.shape}, dtype {y.dtype}")
        y = y.astype(np.int64)
        if len(y) and y.min() < 0:
            raise ValueError(f"{what}: class labels must be >= 0, got {int(y.min())}")
        return y
    if not np.isfinite(y).all():
        raise ValueError(f"{what} holds non-finite values")
    if loss == "bce":
        if y.ndim != 2 or not np.isin(y, (0, 1)).all():
            raise ValueError(f"bce (multi-label) needs multi-hot targets [N, L] of 0 and 1, "
                             f"got {what} of shape {y.shape}")
        return y.astype(np.float64)
    if y.ndim not in (1, 2):
        raise ValueError(f"mse needs targets [N] or [N, K], got {what} of shape {y.shape}")
    return y.astype(np.float64).reshape(len(y), -1)


def default_model(in_shape: tuple, out: int, hidden: int = 64) -> nn.Module:
    """An MLP on the flattened inputs: ``Flatten - Linear(F, hidden) - ReLU - Linear(hidden,
    out)`` (``hidden=0``: a linear model)."""
    features = int(np.prod(in_shape))
    if hidden <= 0:
        return nn.Sequential(nn.Flatten(), nn.Linear(features, out))
    return nn.Sequential(nn.Flatten(), nn.Linear(features, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


def _parts(partition, labels: np.ndarray | None, n: int, n_clients: int, seed: int):
    from ..data.partition import iid
    from ..data.partition import partition as split
    if isinstance(partition, str):
        from ..data.partition import parse_scheme
        scheme, kw = parse_scheme(partition)
        if scheme == "iid":
            return iid(n, n_clients, seed)
        if labels is None:
            raise ValueError(f"partition {scheme!r} splits by class labels; these targets have "
                             "none: pass partition_labels (a class per sample) or use iid")
        return split(labels, n_clients, scheme, seed, **kw)
    parts = [np.asarray(p, dtype=np.int64).reshape(-1) for p in partition]
    if not parts:
        raise ValueError("partition: no clients")
    allp = np.concatenate(parts)
    if len(allp) and (allp.min() < 0 or allp.max() >= n):
        raise ValueError(f"partition: sample indices must be in 0..{n - 1}")
    return parts


class ArrayProblem(NeuralProblem):
    """A :class:`NeuralProblem` on arrays with the loss chosen (module docstring)."""

    def __init__(self, data: ArrayData, parts, model: nn.Module, *, loss: str = "cross_entropy",
                 **kw):
        self.loss = loss
        # the hand-batched linear-stack paths compute cross-entropy gradients only
        kw.setdefault("fast_path", loss == "cross_entropy")
        if loss != "cross_entropy":
            kw["gram_path"] = False
        super().__init__(data, parts, model, **kw)
        if loss != "cross_entropy":
            self.y = self.y.to(self.dtype)
            self.y_test = self.y_test.to(self.dtype)

    # ----------------------------------------------------------------- the loss
    def _per_sample(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.loss == "cross_entropy":
            return F.cross_entropy(out, y, reduction="none")
        out = out.reshape(len(out), -1)
        y = y.reshape(len(y), -1).to(out.dtype)
        if self.loss == "mse":
            return (out - y).square().mean(-1)
        return F.binary_cross_entropy_with_logits(out, y, reduction="none").mean(-1)

    def _loss(self, flat, x, y, w):
        losses = self._per_sample(self._logits(flat, x), y)
        return (losses * w).sum() / w.sum().clamp_min(1)

    def _sum_loss(self, flat, x, y, w):
        losses = self._per_sample(self._logits(flat, x), y)
        return (losses * w).sum(), losses.detach()

    def _labels_weights(self, payload: torch.Tensor):
        y = self.y.index_select(0, payload.clamp_min(0).reshape(-1))
        return y.view(*payload.shape, *self.y.shape[1:]), (payload >= 0).to(self.dtype)

    def reference_grad(self, theta: torch.Tensor, client: int, payload: np.ndarray):
        """One client's minibatch gradient with a plain module and autograd."""
        idx = torch.as_tensor(np.asarray(payload)[np.asarray(payload) >= 0],
                              device=self.device)
        self.layout.load_into(self.model, theta)
        self.model.zero_grad()
        self._per_sample(self.model(self.x[idx]), self.y[idx]).mean().backward()
        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    # ----------------------------------------------------------------- evaluation
    def evaluate(self, theta: torch.Tensor, test: bool = True) -> dict[str, torch.Tensor]:
        """Train loss and squared full-gradient norm of the global objective (as
        :meth:`NeuralProblem.evaluate`), and the test metrics of this loss."""
        if self.loss == "cross_entropy":
            return super().evaluate(theta, test)
        out = super().evaluate(theta, test=False)
        if test and len(self.y_test):
            out.update(self._test_metrics(theta))
        return out

    @torch.no_grad()
    def _test_metrics(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        from torch.func import vmap
        logits_fn = vmap(self._logits, in_dims=(0, None))
        R = theta.shape[0]
        loss = torch.zeros(R, dtype=self.dtype, device=self.device)
        right = torch.zeros(R, dtype=self.dtype, device=self.device)
        for s in range(0, len(self.y_test), self.eval_chunk):
            out = logits_fn(theta, self.x_test[s:s + self.eval_chunk])
            yy = self.y_test[s:s + self.eval_chunk]
            for r in range(R):
                loss[r] += self._per_sample(out[r], yy).sum()
                if self.loss == "bce":
                    pred = (out[r].reshape(len(yy), -1) > 0).to(self.dtype)
                    right[r] += (pred == yy.reshape(len(yy), -1)).to(self.dtype).mean(-1).sum()
        n = len(self.y_test)
        metrics = {"test_loss": loss / n}
        if self.loss == "bce":
            metrics["test_label_acc"] = right / n
        return metrics


def problem_from_arrays(x, y, model: nn.Module | None = None, *,
                        partition: str | Sequence = "iid", n_clients: int = 10,
                        loss: str | None = None, x_test=None, y_test=None,
                        partition_labels=None, partition_seed: int = 0, batch_size: int = 32,
                        local_epochs: int = 1, local_steps: int | None = None,
                        eval_train_samples: int | None = None, hidden: int = 64,
                        device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                        name: str = "arrays", origin: tuple | None = None,
                        files: tuple = ()) -> ArrayProblem:
    """An engine problem on ``x`` / ``y`` (module docstring): ``[N, F]`` rows or images,
    losses ``"cross_entropy"`` (default for integer labels), ``"mse"`` (default otherwise) or
    ``"bce"``, a Dirichlet / shards / iid ``partition`` over ``n_clients`` (or the clients'
    index arrays), ``model`` (None: an MLP with ``hidden`` units). ``device="cuda"`` without a
    GPU is a one-line error. Bad input is a one-line ``ValueError`` before any work."""
    from ..core.device import check_device
    dev = check_device(device, "device")
    x = _inputs(x, "x")
    loss_name = _loss_name(loss, _as_array(y, "y"))
    y = _targets(y, len(x), loss_name, "y")
    if (x_test is None) != (y_test is None):
        raise ValueError("give both x_test and y_test, or neither")
    if x_test is not None:
        x_test = _inputs(x_test, "x_test")
        y_test = _targets(y_test, len(x_test), loss_name, "y_test")
        if x_test.shape[1:] != x.shape[1:]:
            raise ValueError(f"x_test rows have shape {x_test.shape[1:]}, x rows {x.shape[1:]}")
        if loss_name != "cross_entropy" and y_test.shape[1:] != y.shape[1:]:
            raise ValueError(f"y_test rows have shape {y_test.shape[1:]}, y rows {y.shape[1:]}")
    else:
        x_test, y_test = x[:0], y[:0]
    if isinstance(n_clients, bool) or int(n_clients) != n_clients or n_clients < 1:
        raise ValueError(f"n_clients must be an integer >= 1, got {n_clients!r}")
    n_clients = int(n_clients)
    if n_clients > len(x):
        raise ValueError(f"{n_clients} clients need at least as many samples, got {len(x)}")
    if loss_name == "cross_entropy":
        classes = int(max(y.max(), y_test.max() if len(y_test) else 0)) + 1
        outputs = classes
        labels = y
    else:
        classes, outputs = 0, y.shape[1]
        labels = None
    if partition_labels is not None:
        labels = _as_array(partition_labels, "partition_labels").astype(np.int64)
        if labels.shape != (len(x),):
            raise ValueError(f"partition_labels must be [N] = [{len(x)}], got {labels.shape}")
    from ..data.errors import PartitionError
    try:
        parts = _parts(partition, labels, len(x), n_clients, partition_seed)
    except PartitionError as exc:
        raise ValueError(str(exc)) from None
    if model is None:
        model = default_model(x.shape[1:], outputs, hidden)
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    xt = torch.as_tensor(np.ascontiguousarray(x), dtype=dtype)
    _check_model(model.to(dtype=dtype), xt[:2])
    with torch.no_grad():
        try:
            probe = model(xt[:2])
        except Exception as exc:  # noqa: BLE001 - the user's module: any error is one line
            raise ValueError(f"the model cannot take inputs of shape {tuple(xt.shape[1:])}: "
                             f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None
    width = int(np.prod(probe.shape[1:])) if probe.dim() > 1 else 1
    if probe.shape[0] != len(xt[:2]) or (loss_name == "cross_entropy" and (
            probe.dim() != 2 or probe.shape[1] < outputs)) or (
            loss_name != "cross_entropy" and width != outputs):
        raise ValueError(f"the model's output {tuple(probe.shape)} for 2 samples does not fit "
                         f"{loss_name} with {outputs} "
                         f"{'classes' if loss_name == 'cross_entropy' else 'targets'}")
    data = ArrayData(xt, torch.as_tensor(y), torch.as_tensor(np.ascontiguousarray(x_test),
                                                             dtype=dtype),
                     torch.as_tensor(y_test), classes, name=name, source=name, origin=origin,
                     files=tuple(files))
    return ArrayProblem(data, parts, model, loss=loss_name, batch_size=batch_size,
                        local_epochs=local_epochs, local_steps=local_steps,
                        eval_train_samples=eval_train_samples, device=dev, dtype=dtype)


#: The keys :func:`load_arrays` reads.
NPZ_KEYS = ("x", "y", "x_test", "y_test")


def load_arrays(path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file (``x``, ``y``, optionally ``x_test``, ``y_test``), read
    with ``allow_pickle=False`` (object arrays are refused, never unpickled); one-line
    :class:`sims.data.DataError` otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"arrays: no file {str(path)!r}")
    try:
        z = np.load(path, allow_pickle=False)
    except ValueError as exc:              # a pickle or object arrays: refused, never loaded
        raise DataError(f"arrays {path}: not an .npz of plain numeric arrays "
                        f"({' '.join(str(exc).split())[:80]}...); pickles and object arrays "
                        "are never unpickled") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"arrays {path}: not a readable .npz file ({type(exc).__name__})") \
            from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise DataError(f"arrays {path}: one array (.npy); save x and y with np.savez")
    try:
        with z:
            keys = set(z.files)
            missing = [k for k in ("x", "y") if k not in keys]
            if missing:
                raise DataError(f"arrays {path}: needs keys x and y (has "
                                f"{', '.join(sorted(keys)) or 'none'})")
            if ("x_test" in keys) != ("y_test" in keys):
                raise DataError(f"arrays {path}: give both x_test and y_test, or neither")
            return {k: z[k] for k in NPZ_KEYS if k in keys}
    except ValueError as exc:              # object arrays: allow_pickle=False refuses them
        raise DataError(f"arrays {path}: {' '.join(str(exc).split())[:80]}... (object arrays "
                        "are never unpickled; save plain numeric arrays)") from None
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"arrays {path}: not a readable .npz file ({type(exc).__name__})") \
            from None


def problem_from_file(path, model: nn.Module | None = None, **kw) -> ArrayProblem:
    """:func:`problem_from_arrays` on the arrays of an ``.npz`` file (:func:`load_arrays`);
    the run's record keeps the file's sha256, so a changed file recomputes saved runs."""
    path = Path(path).resolve()
    arrays = load_arrays(path)
    return problem_from_arrays(arrays["x"], arrays["y"], model, x_test=arrays.get("x_test"),
                               y_test=arrays.get("y_test"), name=f"arrays:{path.name}",
                               origin=(f"arrays:{path}", None), files=(str(path),), **kw)

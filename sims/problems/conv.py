"""Convolutional image problems: a per-client loop for the CPU, and CIFAR augmentation.

:class:`NeuralProblem` runs any module's per-client gradients through ``torch.func``
(``vmap(grad(loss))``). For a convolutional net on a CPU that is the slow way: vmap turns
the batch of per-client weights into grouped convolutions, which oneDNN runs slower than one
ordinary convolution per client (measured here for the Fed-EF CNN, one thread, batch 32:
~0.12 s per client-step through vmap against ~0.08 s with the loop below, 1.4-1.5x; the step
is compute-bound at ~2 GFLOP, so no batching trick on a CPU gains much more). A GPU prefers the
batched form (it has parallelism to spare), so the loop is the default on the CPU only.

:class:`ConvProblem` is a :class:`NeuralProblem` that

* with ``loop=True`` (default on the CPU) runs local SGD, minibatch gradients and the
  evaluation one client (one server model) at a time through a persistent working copy of
  the module and plain autograd, in ``channels_last`` memory format; the results equal the
  batched path's up to floating-point rounding, dropout included. Each minibatch's dropout
  masks come from a generator seeded by its sample indices (:meth:`ConvProblem._masks`), so
  a replica's run is the same whichever replicas share its chunk and after a resume, the
  engine's randomness contract. The batched path draws the same masks outside ``vmap``
  (:meth:`NeuralProblem.keyed_masks`, in the loop's channels-last fill order:
  :meth:`ConvProblem._site_pass`); on a GPU torch's fused dropout kernel draws differently,
  so there the loop's masks differ from the batched path's, each batching-independent;
* with ``augment="crop-flip"`` applies the CIFAR training augmentation of Fed-EF Sec. 5
  (spec 4.1): a random 32x32 crop of the image padded by ``pad`` pixels of black on every side,
  and a random horizontal flip, drawn afresh for every sample of every local minibatch. The
  draw is part of the round's seeded plan (:meth:`plan_client` encodes each sample's crop
  offset and flip in its index), so augmented runs are as reproducible as the rest of the
  engine. Evaluation uses the plain images. ``augment="crop"`` draws the crop alone (no
  flip: FedLADA Sec. 4.1, "random cropping on the extra 4/8-pixel padding images").

* with ``eval_grad=False`` evaluates the train loss, test loss and accuracy but not the
  squared full-gradient norm ``grad_norm2`` (a backward pass over the evaluation samples,
  the costly part of a CNN evaluation, which the Fed-EF image figures do not plot).

:func:`sims.problems.image.build_image_problem` builds it for the convolutional models
(``cnn``, ``resnet18``); :func:`sims.problems.image.build_conv_problem` is that builder with ``conv=True``.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import vmap

from ..data.base import NORMALIZATION, Dataset
from .neural import NeuralProblem, _row_keys

AUGMENTATIONS = (None, "crop-flip", "crop")


class ConvProblem(NeuralProblem):

    def __init__(self, dataset, parts, model, *, loop: bool | None = None,
                 augment: str | None = None, pad: int = 4, eval_chunk: int = 512,
                 eval_grad: bool = True, **kw):
        if augment not in AUGMENTATIONS:
            raise ValueError(f"augment must be one of {AUGMENTATIONS}, got {augment!r}")
        super().__init__(dataset, parts, model, eval_chunk=eval_chunk, **kw)
        self.loop = (self.device.type == "cpu") if loop is None else bool(loop)
        self.eval_grad = bool(eval_grad)
        self.augment, self.pad = augment, int(pad)
        self.n_train = len(self.x)
        if augment:
            self.n_codes = 2 * (2 * self.pad + 1) ** 2     # flip x crop offsets
            mean, std = NORMALIZATION.get(getattr(dataset, "name", ""),
                                          ((0.0,) * self.x.shape[1], (1.0,) * self.x.shape[1]))
            black = [(0.0 - m) / s for m, s in zip(mean, std)]
            self._black = torch.tensor(black, dtype=self.dtype, device=self.device)
        self._work = copy.deepcopy(self.model).to(memory_format=torch.channels_last)
        self._work.train()
        self._params = list(self._work.parameters())
        self._dropout = any(isinstance(m, torch.nn.modules.dropout._DropoutNd)
                            for m in self._work.modules())

    # ----------------------------------------------------------------- augmentation
    def plan_client(self, rng: np.random.Generator, client: int) -> np.ndarray:
        """Minibatch indices as in :class:`NeuralProblem`; with augmentation each index also
        carries its sample's draw: ``index + n_train * code``, ``code = 2 * offset + flip``."""
        plan = super().plan_client(rng, client)
        if not self.augment:
            return plan
        if self.augment == "crop":          # crop only (no flip): even codes
            codes = 2 * rng.integers(0, self.n_codes // 2, size=plan.shape)
        else:
            codes = rng.integers(0, self.n_codes, size=plan.shape)
        return np.where(plan >= 0, plan + self.n_train * codes, plan)

    def fetch(self, payload: torch.Tensor):
        """Images and labels of non-negative plan entries (any shape), augmented if encoded."""
        idx = payload % self.n_train
        x, y = self.x[idx], self.y[idx]
        if not self.augment:
            return x, y
        code = payload // self.n_train
        lead, (C, H, W) = x.shape[:-3], x.shape[-3:]
        x, code = x.reshape(-1, C, H, W), code.reshape(-1)
        M, p, side = len(x), self.pad, 2 * self.pad + 1
        flip, offset = code % 2, code // 2
        oy, ox = offset // side, offset % side
        padded = self._black.view(1, C, 1, 1).expand(M, C, H + 2 * p, W + 2 * p).clone()
        padded[:, :, p:p + H, p:p + W] = x
        rows = (oy[:, None] + torch.arange(H, device=x.device))[:, None, :, None]
        cols = (ox[:, None] + torch.arange(W, device=x.device))[:, None, None, :]
        out = padded[torch.arange(M, device=x.device)[:, None, None, None],
                     torch.arange(C, device=x.device)[None, :, None, None], rows, cols]
        out = torch.where(flip.bool()[:, None, None, None], out.flip(-1), out)
        return out.reshape(*lead, C, H, W), y

    # ----------------------------------------------------------------- per-client loop
    def _load(self, flat: torch.Tensor) -> None:
        with torch.no_grad():
            for p, sl in zip(self._params, self.layout.slices):
                p.copy_(flat[sl].view(p.shape))

    def _flat(self, tensors) -> torch.Tensor:
        return torch.cat([t.reshape(-1) for t in tensors])

    def _masks(self, row: torch.Tensor):
        """The context one minibatch's forward pass runs in: with dropout, torch's generator
        seeded by the row's sample indices (:func:`sims.problems.neural._row_keys`) and
        restored after, so the masks are a function of the minibatch alone, as the engine's
        seeded plan fixes it (not of the process's history: which replicas share the chunk,
        a resume); without dropout nothing."""
        if not self._dropout:
            return nullcontext()
        return _seeded_rng(_row_keys(row[None])[0], self.device)

    def _site_pass(self):
        """The loop's working copy on a channels-last sample: the batched path's masks are
        then drawn in the order the loop's dropout modules fill theirs."""
        return self._work, self.x[:2].contiguous(memory_format=torch.channels_last)

    def _step_grad(self, row: torch.Tensor):
        """Gradient of the mean loss over the valid entries of one minibatch row (the
        working copy holds the parameters), or None when the row is all padding."""
        row = row[row >= 0]
        if len(row) == 0:
            return None
        x, y = self.fetch(row)
        x = x.contiguous(memory_format=torch.channels_last)
        with self._masks(row):
            loss = F.cross_entropy(self._work(x), y)
        return torch.autograd.grad(loss, self._params)

    def stoch_grad(self, theta: torch.Tensor, clients, payload: torch.Tensor):
        if not self.loop:
            x, y = self.fetch(payload.clamp_min(0))
            return self._keyed_grad(theta, x, y, (payload >= 0).to(self.dtype), payload)
        out = torch.empty_like(theta)
        with torch.enable_grad():
            for b in range(theta.shape[0]):
                self._load(theta[b])
                grads = self._step_grad(payload[b])
                if grads is None:
                    out[b].zero_()
                    continue
                with torch.no_grad():           # into the row's slices: no concatenated copy
                    for g, sl in zip(grads, self.layout.slices):
                        out[b, sl].copy_(g.reshape(-1))
        return out

    def local_sgd(self, theta: torch.Tensor, clients, payload: torch.Tensor, lr):
        """All local SGD steps of each client in turn (loop mode); None otherwise, so the
        engine steps through :meth:`stoch_grad` (which augments in both modes)."""
        if not self.loop:
            return None
        out = torch.empty_like(theta)
        with torch.enable_grad():
            for b in range(theta.shape[0]):
                self._load(theta[b])
                lr_b = float(lr[b]) if torch.is_tensor(lr) else lr   # [B, 1]: per replica
                for k in range(payload.shape[1]):
                    grads = self._step_grad(payload[b, k])
                    if grads is None:
                        continue
                    with torch.no_grad():
                        for p, g in zip(self._params, grads):
                            p.sub_(g, alpha=lr_b)
                out[b] = self._flat([p.detach() for p in self._params])
        return out

    def reference_grad(self, theta: torch.Tensor, client: int, payload: np.ndarray):
        valid = torch.as_tensor(payload[payload >= 0], device=self.device)
        x, y = self.fetch(valid)
        self.layout.load_into(self.model, theta)
        self.model.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    @torch.no_grad()
    def _batched_train_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The global objective at each server model (vmap path), forward passes only."""
        logits_fn = vmap(self._logits, in_dims=(0, None))
        loss = torch.zeros(theta.shape[0], dtype=self.dtype, device=self.device)
        for s in range(0, len(self.eval_index), self.eval_chunk):
            idx = self.eval_index[s:s + self.eval_chunk]
            logits = logits_fn(theta, self.x[idx])
            losses = F.cross_entropy(logits.flatten(0, 1), self.y[idx].repeat(theta.shape[0]),
                                     reduction="none").view(theta.shape[0], -1)
            loss += (losses * self._eval_w(s, len(idx))).sum(-1)
        return loss

    def evaluate(self, theta: torch.Tensor, test: bool = True,
                 grad: bool | None = None) -> dict[str, torch.Tensor]:
        """As :meth:`NeuralProblem.evaluate` (train loss and squared full-gradient norm of
        the global objective on the evaluation samples; test loss and accuracy), one server
        model at a time in loop mode. ``grad=False`` (default: ``self.eval_grad``) leaves out
        ``grad_norm2`` and computes the train loss with forward passes only."""
        grad = self.eval_grad if grad is None else bool(grad)
        if not self.loop:
            if grad:
                return super().evaluate(theta, test)
            was_training = self.model.training
            self.model.eval()
            try:
                out = {"train_loss": self._batched_train_loss(theta)}
                if test and len(self.y_test):
                    out["test_acc"], out["test_loss"] = self._accuracy(theta, self.x_test,
                                                                       self.y_test)
            finally:
                self.model.train(was_training)
            return out
        R, n_eval = theta.shape[0], len(self.eval_index)
        out = {k: torch.zeros(R, dtype=self.dtype, device=self.device)
               for k in (("train_loss", "grad_norm2") if grad else ("train_loss",))}
        do_test = test and len(self.y_test)
        if do_test:
            out.update(test_acc=torch.zeros(R, device=self.device),
                       test_loss=torch.zeros(R, dtype=self.dtype, device=self.device))
        self._work.eval()
        try:
            for r in range(R):
                self._load(theta[r])
                g = torch.zeros(self.d, dtype=self.dtype, device=self.device) if grad else None
                for s in range(0, n_eval, self.eval_chunk):
                    idx = self.eval_index[s:s + self.eval_chunk]
                    w = self._eval_w(s, len(idx))
                    x = self.x[idx].contiguous(memory_format=torch.channels_last)
                    with torch.set_grad_enabled(grad):
                        losses = F.cross_entropy(self._work(x), self.y[idx], reduction="none")
                        total = (losses * w).sum()
                    if grad:
                        g += self._flat(torch.autograd.grad(total, self._params))
                    out["train_loss"][r] += total.detach()
                if grad:
                    out["grad_norm2"][r] = (g * g).sum()
                if do_test:
                    correct, loss = 0.0, 0.0
                    with torch.no_grad():
                        for s in range(0, len(self.y_test), self.eval_chunk):
                            x = self.x_test[s:s + self.eval_chunk]
                            yy = self.y_test[s:s + self.eval_chunk]
                            logits = self._work(x.contiguous(memory_format=torch.channels_last))
                            correct += float((logits.argmax(-1) == yy).sum())
                            loss += float(F.cross_entropy(logits, yy, reduction="sum"))
                    out["test_acc"][r] = correct / len(self.y_test)
                    out["test_loss"][r] = loss / len(self.y_test)
        finally:
            self._work.train()
        return out


@contextmanager
def _seeded_rng(key: int, device: torch.device):
    """torch's generator (and ``device``'s, on a GPU) seeded with ``key`` inside, restored on
    exit."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(key)
        yield


def stratified_test_subset(ds: Dataset, size: int | None, seed: int = 0) -> Dataset:
    """``ds`` with its test set cut to ``size`` samples, the same number from each class (as
    near as divisibility allows); ``None`` or a size >= the test set keeps it whole."""
    if size is None or size >= len(ds.y_test):
        return ds
    y = ds.y_test.numpy()
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    per = [size // len(classes) + (i < size % len(classes)) for i in range(len(classes))]
    keep = np.sort(np.concatenate([rng.permutation(np.flatnonzero(y == c))[:k]
                                   for c, k in zip(classes, per)]))
    keep_t = torch.as_tensor(keep)
    return Dataset(ds.name, ds.x_train, ds.y_train, ds.x_test[keep_t], ds.y_test[keep_t],
                   ds.num_classes, ds.source, origin=ds.origin, files=ds.files)

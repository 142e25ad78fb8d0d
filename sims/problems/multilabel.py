"""Multi-label logistic regression on sparse bag-of-words inputs: FedAda2's StackOverflow
task (``nn.Linear(10000, 500)``, spec 4.1) as an engine problem.

Client ``i``'s data are rows of a CSR matrix (kept as CSR tensors, memory ~ non-zeros)
(:class:`sims.data.stackoverflow.StackOverflowData`). The batched path never densifies a
minibatch: it works on the rows' non-zero entries (:func:`row_entries`), gathering the
columns of ``W`` they touch for the logits ``z = x W^T + b`` and scattering ``g_z^T x`` back
into those columns only (a bag of words has about 25 of its 5,000-10,000 words set, so the
dense products did ~200x the arithmetic); :meth:`MultiLabelLinearProblem.reference_grad`
(``nn.Linear`` and autograd on dense rows) is what the tests hold it to. Two losses:

* ``"sigmoid"`` (default; TFF's ``stackoverflow_lr``, "multi-label logistic regression"): one
  binary cross-entropy per tag, averaged over the tags and the minibatch,
  ``mean_t softplus(z_t) - y_t z_t``; gradient ``(sigmoid(z) - y) / T``;
* ``"softmax"`` (the authors' code: ``nn.CrossEntropyLoss`` with the multi-hot vector as
  target): ``-sum_t y_t log softmax(z)_t``; gradient ``(sum_t y_t) softmax(z) - y``.

Metrics: ``test_acc`` is top-1 precision, the share of test examples whose highest-scoring
tag is one of its tags (the accuracy of a single-label task when each example has one tag);
``test_recall5`` the share of an example's kept tags found among its 5 highest (TFF's
recall@5, averaged over examples with a kept tag); ``train_loss`` and ``grad_norm2`` of the
global objective (clients weighted equally) over a fixed subset of ``eval_train_samples``.
Local work, minibatch plans and padding are those of :class:`sims.problems.neural.NeuralProblem`
(its ``plan_client`` is shared).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..core.params import ParamLayout
from .neural import NeuralProblem

LOSSES = ("sigmoid", "softmax")


def csr_tensors(csr, device, dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A scipy CSR matrix as ``(indptr, indices, data)`` tensors (memory ~ non-zeros)."""
    csr = csr.tocsr()
    csr.sum_duplicates()
    return (torch.as_tensor(csr.indptr.astype(np.int64), device=device),
            torch.as_tensor(csr.indices.astype(np.int64), device=device),
            torch.as_tensor(csr.data, device=device).to(dtype))


def row_entries(csr: tuple, rows: torch.Tensor):
    """The non-zero entries of rows ``rows[...]`` of a CSR matrix (:func:`csr_tensors`):
    ``(owner, column, value)``, ``owner`` the entry's position in ``rows.reshape(-1)``, in row
    order; index -1 (padding) has none."""
    indptr, indices, data = csr
    flat = rows.reshape(-1)
    r = flat.clamp_min(0)
    start = indptr.index_select(0, r)
    count = (indptr.index_select(0, r + 1) - start) * (flat >= 0)
    owner = torch.repeat_interleave(torch.arange(len(flat), device=flat.device), count)
    first = torch.repeat_interleave(count.cumsum(0) - count, count)
    pos = start.index_select(0, owner) + torch.arange(len(owner), device=flat.device) - first
    return owner, indices.index_select(0, pos), data.index_select(0, pos)


class MultiLabelLinearProblem:
    """Engine problem: multi-label logistic regression, clients = ``data.parts``."""

    pad_value = -1
    plan_client = NeuralProblem.plan_client
    steps_for = NeuralProblem.steps_for
    _trim = NeuralProblem._trim

    def __init__(self, data, *, loss: str = "sigmoid", batch_size: int = 32,
                 local_epochs: int = 1, local_steps: int | None = None,
                 eval_train_samples: int | None = 10_000, device="cpu", dtype=torch.float32,
                 eval_chunk: int = 1024):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if batch_size < 1 or (local_steps is None and local_epochs < 1) or \
                (local_steps is not None and local_steps < 1):
            raise ValueError("batch_size, local_epochs / local_steps must be >= 1")
        self.loss, self.batch_size = loss, batch_size
        self.local_epochs, self.local_steps = local_epochs, local_steps
        self.device, self.dtype, self.eval_chunk = torch.device(device), dtype, eval_chunk
        self.parts = [np.asarray(p, dtype=np.int64) for p in data.parts]
        if any(len(p) == 0 for p in self.parts):
            raise ValueError("every client needs at least one sample")
        self.n_clients = len(self.parts)
        self.V, self.T = data.x_train.shape[1], data.y_train.shape[1]
        self.model = nn.Linear(self.V, self.T).to(self.device, dtype)
        self.layout = ParamLayout.from_module(self.model)
        self.d = self.layout.d
        self.x = csr_tensors(data.x_train, self.device, dtype)
        self.y = torch.as_tensor(data.y_train, device=self.device)
        self.x_test = csr_tensors(data.x_test, self.device, dtype)
        self.y_test = torch.as_tensor(data.y_test, device=self.device)
        self.batch_width = (batch_size if local_steps is not None else
                            min(batch_size, max(len(p) for p in self.parts)))
        self.max_steps = max(self.steps_for(c) for c in range(self.n_clients))
        population = np.concatenate(self.parts)
        weights = np.concatenate([np.full(len(p), 1.0 / (self.n_clients * len(p)))
                                  for p in self.parts])
        if eval_train_samples is not None and eval_train_samples < len(population):
            pick = np.random.default_rng(12345).choice(len(population), eval_train_samples,
                                                       replace=False)
            population, weights = population[pick], np.full(eval_train_samples,
                                                            1.0 / eval_train_samples)
        self.eval_index = torch.as_tensor(population, device=self.device)
        self.eval_weights = torch.as_tensor(weights, device=self.device, dtype=dtype)

    # ----------------------------------------------------------------- definitions
    def init_theta(self, seed: int) -> torch.Tensor:
        """``nn.Linear``'s default initialisation under ``torch.manual_seed(seed)``."""
        torch.manual_seed(seed)
        self.model.reset_parameters()
        return self.layout.flatten_module(self.model).to(self.device, self.dtype)

    def _split(self, theta: torch.Tensor):
        W = theta[:, : self.T * self.V].view(-1, self.T, self.V)
        return W, theta[:, self.T * self.V:]

    def _grad_logits(self, z: torch.Tensor, y: torch.Tensor):
        """Per-sample loss ``[..., n]`` and its gradient in the logits ``[..., n, T]``."""
        y = y.to(z.dtype)
        if self.loss == "sigmoid":
            loss = (F.softplus(z) - y * z).mean(-1)
            return loss, (torch.sigmoid(z) - y) / self.T
        logp = torch.log_softmax(z, -1)
        return -(y * logp).sum(-1), y.sum(-1, keepdim=True) * logp.exp() - y

    def _entries(self, csr, rows: torch.Tensor, replicas: int = 1):
        """The non-zero entries of a ``[B, n]`` block of rows (``rows`` ``[B, n]``, or ``[n]``
        shared by ``replicas`` rows of ``theta``): ``(row of theta, flat sample position in
        the [B, n] block, column, value)``."""
        owner, col, val = row_entries(csr, rows)
        val = val.to(self.dtype)
        if rows.dim() == 1:                      # the same rows for every replica
            n = len(rows)
            k = torch.arange(replicas, device=owner.device).repeat_interleave(len(owner))
            return k, owner.repeat(replicas) + k * n, col.repeat(replicas), val.repeat(replicas)
        return torch.div(owner, rows.shape[1], rounding_mode="floor"), owner, col, val

    def _logits(self, theta, entries, B: int, n: int) -> torch.Tensor:
        """``z = x W^T + b`` ``[B, n, T]`` from the non-zero entries of ``x`` (:meth:`_entries`):
        the columns of ``W`` the entries touch, weighted and summed per sample."""
        row, owner, col, val = entries
        W, b = self._split(theta)
        z = theta.new_zeros(B * n, self.T)
        z.index_add_(0, owner, W[row, :, col] * val.unsqueeze(-1))
        return z.view(B, n, self.T) + b.unsqueeze(1)

    def _grad(self, theta, entries, y, w):
        """``[B, d]`` gradient of ``sum_n w_n loss_n`` and the weighted losses ``[B]``, ``x``
        given by its non-zero entries (:meth:`_entries`): ``dW = g_z^T x`` is scattered into
        the columns the entries touch, ``db = sum_n g_z``."""
        B, n = w.shape
        row, owner, col, val = entries
        z = self._logits(theta, entries, B, n)
        loss, g = self._grad_logits(z, y)
        g = g * w.unsqueeze(-1)
        out = theta.new_zeros(B, self.d)
        gW = out[:, : self.T * self.V].view(B, self.T, self.V)
        tags = torch.arange(self.T, device=theta.device)
        gW.index_put_((row.unsqueeze(-1), tags, col.unsqueeze(-1)),
                      g.reshape(B * n, self.T).index_select(0, owner) * val.unsqueeze(-1),
                      accumulate=True)
        out[:, self.T * self.V:] = g.sum(1)
        return out, (loss * w).sum(-1)

    # ----------------------------------------------------------------- batched path
    def stoch_grad(self, theta: torch.Tensor, clients, payload: torch.Tensor):
        """Minibatch gradients ``[B, d]`` (mean over each row's valid samples)."""
        payload = self._trim(payload)
        y = self.y.index_select(0, payload.clamp_min(0).reshape(-1)).view(*payload.shape, self.T)
        w = (payload >= 0).to(self.dtype)
        w = w / w.sum(-1, keepdim=True).clamp_min(1)
        return self._grad(theta, self._entries(self.x, payload), y, w)[0]

    # ----------------------------------------------------------------- reference path
    def reference_grad(self, theta: torch.Tensor, client: int, payload: np.ndarray):
        """One client's minibatch gradient with ``nn.Linear`` and autograd on dense rows."""
        rows = payload[payload >= 0]
        x = torch.as_tensor(self._dense_np(rows), dtype=self.dtype, device=self.device)
        y = self.y[torch.as_tensor(rows, device=self.device)].to(self.dtype)
        self.layout.load_into(self.model, theta)
        self.model.zero_grad()
        z = self.model(x)
        if self.loss == "sigmoid":
            loss = F.binary_cross_entropy_with_logits(z, y)
        else:
            loss = F.cross_entropy(z, y)          # probability targets: -sum y log softmax
        loss.backward()
        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    def _dense_np(self, rows) -> np.ndarray:
        """Plain per-entry densification of rows (the reference's own, not :func:`row_entries`)."""
        indptr, indices, data = (t.cpu().numpy() for t in self.x)
        out = np.zeros((len(rows), self.V))
        for j, r in enumerate(rows):
            for k in range(indptr[r], indptr[r + 1]):
                out[j, indices[k]] += data[k]
        return out

    # ----------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, theta: torch.Tensor, test: bool = True) -> dict[str, torch.Tensor]:
        R = theta.shape[0]
        g = torch.zeros_like(theta)
        loss = torch.zeros(R, dtype=self.dtype, device=self.device)
        for s in range(0, len(self.eval_index), self.eval_chunk):
            rows = self.eval_index[s:s + self.eval_chunk]
            y = self.y.index_select(0, rows).expand(R, -1, -1)
            w = self.eval_weights[s:s + self.eval_chunk].expand(R, -1)
            gc, lc = self._grad(theta, self._entries(self.x, rows, R), y, w)
            g += gc
            loss += lc
        out = {"train_loss": loss, "grad_norm2": (g * g).sum(-1)}
        if test and len(self.y_test):
            out.update(self._test(theta))
        return out

    def _test(self, theta):
        R, n = theta.shape[0], len(self.y_test)
        hit = torch.zeros(R, device=self.device)
        rec = torch.zeros(R, device=self.device)
        loss = torch.zeros(R, dtype=self.dtype, device=self.device)
        k = min(5, self.T)
        rows_all = torch.arange(n, device=self.device)
        has = 0
        for s in range(0, n, self.eval_chunk):
            rows = rows_all[s:s + self.eval_chunk]
            y = self.y_test.index_select(0, rows)
            z = self._logits(theta, self._entries(self.x_test, rows, R), R, len(rows))
            loss += self._grad_logits(z, y.expand(R, -1, -1))[0].sum(-1)
            top1 = z.argmax(-1)                                           # [R, n]
            hit += y.expand(R, -1, -1).gather(-1, top1.unsqueeze(-1)).squeeze(-1).sum(-1)
            topk = z.topk(k, -1).indices
            found = y.expand(R, -1, -1).gather(-1, topk).sum(-1).to(z.dtype)   # [R, n]
            nt = y.sum(-1).to(z.dtype)
            keep = nt > 0
            has += int(keep.sum())
            rec += (found[:, keep] / nt[keep]).sum(-1)
        return {"test_acc": hit / n, "test_loss": loss / n,
                "test_recall5": rec / max(has, 1) if has else torch.full((R,), math.nan)}

"""Multi-label logistic regression on sparse bag-of-words inputs: FedAda2's StackOverflow
task (``nn.Linear(10000, 500)``, spec 4.1) as an engine problem.

Client ``i``'s data are rows of a CSR matrix (kept as CSR tensors, memory ~ non-zeros) (:class:`sims.data.stackoverflow.StackOverflowData`);
a minibatch's rows are densified (``[B, batch, V]``; 32 x 10,000 numbers per client) and the
linear map ``z = x W^T + b`` runs batched over the participants. Two losses:

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


def dense_rows(csr: tuple, rows: torch.Tensor, width: int, dtype) -> torch.Tensor:
    """Rows ``rows[...]`` of a CSR matrix (:func:`csr_tensors`) as a dense ``[..., width]``
    tensor; index -1 (padding) gives a row of zeros."""
    indptr, indices, data = csr
    flat = rows.reshape(-1)
    r = flat.clamp_min(0)
    start = indptr.index_select(0, r)
    count = (indptr.index_select(0, r + 1) - start) * (flat >= 0)
    owner = torch.repeat_interleave(torch.arange(len(flat), device=flat.device), count)
    first = torch.repeat_interleave(count.cumsum(0) - count, count)
    pos = start.index_select(0, owner) + torch.arange(len(owner), device=flat.device) - first
    x = torch.zeros(len(flat), width, dtype=dtype, device=flat.device)
    x.index_put_((owner, indices.index_select(0, pos)), data.index_select(0, pos).to(dtype),
                 accumulate=True)
    return x.view(*rows.shape, width)


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

    def _dense(self, csr, rows: torch.Tensor) -> torch.Tensor:
        return dense_rows(csr, rows, self.V, self.dtype)

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

    def _grad(self, theta, x, y, w):
        """``[B, d]`` gradient of ``sum_n w_n loss_n`` and the weighted losses ``[B]``."""
        W, b = self._split(theta)
        z = torch.baddbmm(b.unsqueeze(1), x, W.transpose(1, 2))
        loss, g = self._grad_logits(z, y)
        g = g * w.unsqueeze(-1)
        gW = torch.bmm(g.transpose(1, 2), x)
        return torch.cat([gW.flatten(1), g.sum(1)], 1), (loss * w).sum(-1)

    # ----------------------------------------------------------------- batched path
    def stoch_grad(self, theta: torch.Tensor, clients, payload: torch.Tensor):
        """Minibatch gradients ``[B, d]`` (mean over each row's valid samples)."""
        payload = self._trim(payload)
        x = self._dense(self.x, payload)
        y = self.y.index_select(0, payload.clamp_min(0).reshape(-1)).view(*payload.shape, self.T)
        w = (payload >= 0).to(self.dtype)
        w = w / w.sum(-1, keepdim=True).clamp_min(1)
        return self._grad(theta, x, y, w)[0]

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
        """Plain per-entry densification of rows (the reference's own, not :func:`dense_rows`)."""
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
            x = self._dense(self.x, rows).expand(R, -1, -1)
            y = self.y.index_select(0, rows).expand(R, -1, -1)
            w = self.eval_weights[s:s + self.eval_chunk].expand(R, -1)
            gc, lc = self._grad(theta, x, y, w)
            g += gc
            loss += lc
        out = {"train_loss": loss, "grad_norm2": (g * g).sum(-1)}
        if test and len(self.y_test):
            out.update(self._test(theta))
        return out

    def _test(self, theta):
        R, n = theta.shape[0], len(self.y_test)
        W, b = self._split(theta)
        hit = torch.zeros(R, device=self.device)
        rec = torch.zeros(R, device=self.device)
        loss = torch.zeros(R, dtype=self.dtype, device=self.device)
        k = min(5, self.T)
        rows_all = torch.arange(n, device=self.device)
        has = 0
        for s in range(0, n, self.eval_chunk):
            rows = rows_all[s:s + self.eval_chunk]
            x = self._dense(self.x_test, rows)
            y = self.y_test.index_select(0, rows)
            z = torch.matmul(x, W.transpose(1, 2)) + b.unsqueeze(1)     # [R, n, T]
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

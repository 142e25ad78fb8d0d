"""Per-client minibatch gradients of Linear + ReLU stacks for the generic (adaptive) path.

The adaptive algorithms (Fed-AMS, Fed-LAMB, MimeLite, Mime, FedAda2, ...) get each local
step's gradient ``[B, d]`` from :meth:`sims.problems.NeuralProblem.stoch_grad`; fused SGD never
forms it. The math is that of :func:`sims.problems.linear_stack.linear_stack_grad`, the
readable reference this module is tested against (``z_l = h_{l-1} W_l^T + b_l``,
``dz_L = (softmax(z_L) - onehot(y)) w / sum w``, ``dW_l = dz_l^T h_{l-1}``,
``db_l = sum_s dz_l``, ``dz_{l-1} = (dz_l W_l) * [z_{l-1} > 0]``, no input gradient of the
first layer, every gradient written into its view of the flat output). Two things differ:

* **Large per-client products through oneDNN** (``torch.ops.mkldnn._linear_pointwise``,
  plain row-major layouts, no reorder; the op has no ``out=``, so the weight gradient is
  copied into the flat output; why, measured: ``docs/speed.md``, "oneDNN products").
  Products of fewer than :data:`ONEDNN_MIN_MACS` multiply-adds per client stay one ``bmm``
  (a per-client call costs ~10 us). oneDNN has no float64 matmul on the CPU: float64 (and
  every other device) takes ``bmm`` throughout, held to the reference at 1e-12. The choice
  depends only on dtype, device and shapes, never on a timing, so a run is reproducible
  from its seed (not measured on Intel CPUs, where MKL takes its fast path).
* **Shared weights as one product** (:func:`stack_grad_pair`, Mime's anchor gradient
  ``grad f_i(x; z)``): every participant of a replica evaluates at the same server model, so
  each layer's forward product and input gradient is one ``[rows * b, in] x [in, out]``
  product per replica (as :func:`sims.problems.linear_stack._one_step_delta` does), and the
  minibatch is gathered once for both gradients (the first layer's transposed inputs are
  copied once for both; ``docs/speed.md``). Mime's round gradient likewise (:func:`stack_full_grad_sum`).
"""
from __future__ import annotations

import torch

from ..core.batching import replica_runs
from .linear_stack import _logit_grad, relu_backward
from .onednn import _onednn, onednn_big, per_client_forward, use_onednn

class _Weights:
    """One layer's weights: per client (``W[B, out, in]``, ``bias[B, out]``) or shared by the
    rows of each replica run (``W[R, out, in]`` with ``runs`` from :func:`replica_runs`).
    Activations are feature-major (``hT[B, features, b]``), as in
    :func:`sims.problems.linear_stack.sgd_step_`: the forward product is ``W hT`` with the
    weight as the left operand (the faster order, ``docs/speed.md``), and ``dZ^T`` comes out contiguous for the weight gradient."""

    def __init__(self, W, bias, runs=None):
        self.W, self.bias, self.runs = W, bias, runs

    def big(self, b: int) -> bool:
        return onednn_big(b * self.W.shape[-2] * self.W.shape[-1])

    def forward(self, hT: torch.Tensor, onednn: bool, h=None) -> torch.Tensor:
        """``zT = W hT + bias`` for ``hT[B, in, b]`` (``h``: the same sample-major,
        contiguous, where at hand): ``[B, out, b]``."""
        B, n_in, b = hT.shape
        n_out = self.W.shape[-2]
        if self.runs is not None:             # shared: one [rows * b, in] product per replica
            zT = torch.empty((B, n_out, b), dtype=hT.dtype, device=hT.device)
            hs = hT.transpose(1, 2) if h is None else h
            for r, rows in self.runs:
                flat = hs[rows].reshape(-1, n_in)
                z = (_onednn(flat, self.W[r], self.bias[r]) if onednn
                     else torch.addmm(self.bias[r], flat, self.W[r].T))
                zT[rows] = z.view(-1, b, n_out).transpose(1, 2)
            return zT
        if onednn and h is not None and self.big(b):
            return per_client_forward(self.W, self.bias, h)
        return torch.baddbmm(self.bias.unsqueeze(2), self.W, hT)

    def input_grad(self, dzT: torch.Tensor) -> torch.Tensor:
        """``W^T dzT`` for ``dzT[B, out, b]``: ``[B, in, b]``."""
        if self.runs is None:
            return torch.bmm(self.W.transpose(1, 2), dzT)
        B, n_out, b = dzT.shape
        out = torch.empty((B, self.W.shape[-1], b), dtype=dzT.dtype, device=dzT.device)
        for r, rows in self.runs:
            g = dzT[rows].transpose(1, 2).reshape(-1, n_out) @ self.W[r]
            out[rows] = g.view(-1, b, g.shape[-1]).transpose(1, 2)
        return out


def _layers(params, runs=None):
    return [_Weights(W, b, runs) for W, b in zip(params[0::2], params[1::2])]


def _weight_grad(dzT: torch.Tensor, hT: torch.Tensor, out: torch.Tensor, onednn: bool) -> None:
    """``out[c] = dzT[c] hT[c]^T`` (``dzT[B, out, b]``, ``hT[B, in, b]``, ``out`` a view of
    the flat gradient)."""
    B, n_in, b = hT.shape
    if onednn and onednn_big(b * dzT.shape[1] * n_in):
        # oneDNN reads a transposed view of sample-major inputs as it is (same bits and speed
        # as a contiguous copy: docs/speed.md)
        dzT = dzT.contiguous()
        if hT.stride(2) != n_in or hT.stride(1) != 1:
            hT = hT.contiguous()
        for c in range(B):
            out[c].copy_(_onednn(dzT[c], hT[c]))
    else:
        torch.bmm(dzT, hT.transpose(1, 2), out=out)


def _grad(layers, h: torch.Tensor, hT: torch.Tensor, y, w, out: "_Out", onednn: bool,
          masks=None):
    """The gradient of ``sum_s w_s CE_s / sum_s w_s`` into ``out`` (its flat ``[B, d]`` is
    returned) from the first layer's inputs ``h[B, b, in]`` and ``hT`` (the same,
    feature-major); ``masks``: one dropout mask ``[B, b, width]`` per hidden layer."""
    masksT = None if masks is None else [m.transpose(1, 2) for m in masks]
    inputs, pre = [], []
    for i, layer in enumerate(layers):
        inputs.append(hT)
        zT = layer.forward(hT, onednn, h if i == 0 else None)
        if i < len(layers) - 1:
            pre.append(zT)
            hT = torch.relu(zT)
            if masksT is not None:
                hT = hT.mul_(masksT[i])
    dzT = _logit_grad(zT, y, w / w.sum(1, keepdim=True).clamp_min(1), dim=1)
    views = out.unflattened
    for i in range(len(layers) - 1, -1, -1):
        _weight_grad(dzT, inputs[i], views[2 * i], onednn)
        torch.sum(dzT, 2, out=views[2 * i + 1])
        if i > 0:
            dhT = layers[i].input_grad(dzT)
            if masksT is not None:
                dhT = dhT.mul_(masksT[i - 1])
            dzT = relu_backward(dhT, pre[i - 1])
    return out.flat


def _inputs(x: torch.Tensor, B: int):
    """The first layer's inputs sample-major ``[B, b, in]`` and feature-major (a transposed
    view: the products read it as it is; a contiguous copy cost time, ``docs/speed.md``)."""
    h = x.reshape(B, x.shape[1], -1)
    return h, h.transpose(1, 2)


class _Out:
    def __init__(self, layout, B, like):
        self.flat = torch.empty((B, layout.d), dtype=like.dtype, device=like.device)
        self.unflattened = list(layout.unflatten(self.flat).values())


def stack_grad(theta: torch.Tensor, layout, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
               onednn: bool | None = None, masks=None):
    """Per-client gradients ``[B, d]`` at ``theta[B, d]`` of the mean weighted cross-entropy on
    inputs ``x[B, b, ...]``, labels ``y[B, b]``, weights ``w[B, b]`` (0 = padding; all-padding
    rows give 0): :func:`sims.problems.linear_stack.linear_stack_grad` without the losses
    (``masks`` as there: dropout after the hidden layers).
    ``onednn`` None (default) takes oneDNN by :func:`use_onednn`; False never."""
    B = theta.shape[0]
    use = use_onednn(theta, onednn)
    layers = _layers(list(layout.unflatten(theta).values()))
    return _grad(layers, *_inputs(x, B), y, w, _Out(layout, B, theta), use, masks)


def stack_grad_pair(theta: torch.Tensor, server: torch.Tensor, rep: torch.Tensor, layout,
                    x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                    onednn: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad at theta[B, d], grad at server[rep])`` on the same minibatch (Mime's
    ``grad f_i(y; z)`` and ``grad f_i(x; z)``, Karimireddy et al. Alg. 1): the second with each
    replica's weights shared by its rows (``rep`` in runs), one product per replica.
    ``theta`` None: the anchor only (``(None, anchor)``)."""
    B = len(rep)
    use = use_onednn(server, onednn)
    h, hT = _inputs(x, B)
    g = None if theta is None else _grad(_layers(list(layout.unflatten(theta).values())), h,
                                         hT, y, w, _Out(layout, B, theta), use)
    anchor = _grad(_layers(list(layout.unflatten(server).values()), replica_runs(rep)), h, hT,
                   y, w, _Out(layout, B, server), use)
    return g, anchor


def stack_full_grad_sum(model: torch.Tensor, layout, x_flat: torch.Tensor, y: torch.Tensor,
                        index: torch.Tensor, weight: torch.Tensor, block: int = 4096,
                        onednn: bool | None = None) -> torch.Tensor:
    """``sum_s weight_s grad CE(model; x_s, y_s)`` ``[d]`` over the samples ``index[N]`` (rows
    of ``x_flat[n, in]`` and ``y[n]``) at one model ``model[d]``: Mime's
    ``sum_{i in S} grad f_i(x)`` for one replica with ``weight_s = 1 / |D_i|`` (Karimireddy
    et al. Alg. 1, ``c``), as one product per layer over all the replica's participants'
    samples (``block`` samples at a time) instead of a ``[B, d]`` gradient per participant:
    every sample is evaluated at the same ``x``, so the forward products and the summed
    weight gradient ``dZ^T H`` are single large products."""
    use = use_onednn(model, onednn)
    params = list(layout.unflatten(model).values())
    weights, biases = params[0::2], params[1::2]
    out = torch.zeros_like(model)
    views = list(layout.unflatten(out).values())
    for s in range(0, len(index), block):
        rows = index[s:s + block]
        h = x_flat.index_select(0, rows)
        big = use and onednn_big(len(rows) * weights[0].shape[0] * weights[0].shape[1])
        inputs, pre = [], []
        for i, (W, b) in enumerate(zip(weights, biases)):
            inputs.append(h)
            z = _onednn(h, W, b) if big else torch.addmm(b, h, W.T)
            if i < len(weights) - 1:
                pre.append(z)
                h = torch.relu(z)
        dz = _logit_grad(z, y.index_select(0, rows), weight[s:s + block], dim=-1)
        for i in range(len(weights) - 1, -1, -1):
            W = weights[i]
            if use and onednn_big(len(rows) * W.shape[0] * W.shape[1]):
                views[2 * i].add_(_onednn(dz.T, inputs[i].T))
            else:
                views[2 * i].addmm_(dz.T, inputs[i])
            views[2 * i + 1].add_(dz.sum(0))
            if i > 0:
                dz = relu_backward(dz @ W, pre[i - 1])
    return out

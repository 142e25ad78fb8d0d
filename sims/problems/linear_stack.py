"""Hand-batched gradients for stacks of Linear layers with ReLU between them.

Logistic regression and the papers' MLP are such stacks. For them the engine skips
``torch.func`` and autograd and computes every client's minibatch gradient with batched
matrix products (``torch.baddbmm`` / ``torch.bmm``), in the layouts that need no transposed
copies, and without the input-gradient of the first layer that autograd would also form.
The generic autograd path (:meth:`sims.problems.NeuralProblem.generic_grad`) is the
reference this path is tested against.

For client ``c``, layer ``l`` with weight ``W_l`` (``out x in``) and bias ``b_l``:
``z_l = h_{l-1} W_l^T + b_l``, ``h_l = relu(z_l)`` (no ReLU after the last layer); loss
``sum_s w_s CE(z_L[s], y_s) / sum_s w_s``; then ``dz_L = (softmax(z_L) - onehot(y)) w / sum w``,
``dW_l = dz_l^T h_{l-1}``, ``db_l = sum_s dz_l``, ``dz_{l-1} = (dz_l W_l) * [z_{l-1} > 0]``.
"""
from __future__ import annotations

import torch
from torch import nn


def is_linear_stack(model: nn.Module) -> bool:
    """True for modules whose parameters are (weight, bias) pairs of Linear layers applied
    in order with ReLU between (``sims.models.LogReg`` and ``sims.models.MLP``)."""
    from ..models import MLP, LogReg
    return type(model) in (LogReg, MLP)


def _forward(theta, layout, x):
    params = list(layout.unflatten(theta).values())
    return _forward_params(params[0::2], params[1::2], x)


def _forward_params(weights, biases, x):
    B = weights[0].shape[0]
    h = x.reshape(B, x.shape[1], -1)
    inputs, pre = [], []
    for i, (W, b) in enumerate(zip(weights, biases)):
        inputs.append(h)
        z = torch.baddbmm(b.unsqueeze(1), h, W.transpose(1, 2))
        if i < len(weights) - 1:
            pre.append(z)
            h = torch.relu(z)
    return z, weights, inputs, pre


def linear_stack_logits(theta: torch.Tensor, layout, x: torch.Tensor) -> torch.Tensor:
    """Logits ``[B, b, classes]`` of every client's model on its inputs ``x[B, b, ...]``."""
    return _forward(theta, layout, x)[0]


def linear_stack_grad(theta: torch.Tensor, layout, x: torch.Tensor, y: torch.Tensor,
                      w: torch.Tensor, normalize: bool = True):
    """Per-client gradients ``[B, d]`` and losses ``[B]`` for inputs ``x[B, b, ...]``, labels
    ``y[B, b]`` and sample weights ``w[B, b]`` (0 = padding). The loss is
    ``sum_s w_s CE_s / sum_s w_s``, or ``sum_s w_s CE_s`` with ``normalize=False``."""
    B = theta.shape[0]
    z, weights, inputs, pre = _forward(theta, layout, x)
    log_p = torch.log_softmax(z, dim=-1)
    if normalize:
        w = w / w.sum(1, keepdim=True).clamp_min(1)
    loss = -(log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1) * w).sum(1)
    dz = log_p.exp_()
    dz.scatter_add_(-1, y.unsqueeze(-1), -torch.ones_like(y, dtype=dz.dtype).unsqueeze(-1))
    dz.mul_(w.unsqueeze(-1))
    # Gradients go to fresh contiguous tensors and are concatenated once: a batched product
    # written straight into a strided slice of the flat output takes a slow fallback path.
    grads = [None] * (2 * len(weights))
    for i in range(len(weights) - 1, -1, -1):
        grads[2 * i] = torch.bmm(dz.transpose(1, 2), inputs[i]).view(B, -1)
        grads[2 * i + 1] = dz.sum(1)
        if i > 0:
            dz = torch.bmm(dz, weights[i]).mul_(pre[i - 1] > 0)
    return torch.cat(grads, dim=1), loss


def linear_stack_sgd(theta: torch.Tensor, layout, batches, lr: float) -> torch.Tensor:
    """Local SGD fused with the gradient: every client's minibatch steps, returning the final
    parameters ``[B, d]``.

    ``batches`` yields ``(x[B, b, ...], y[B, b], w[B, b])`` per local step; a client whose
    weights are all 0 at a step takes no step (its gradient is 0). Equivalent to
    ``theta <- theta - lr * linear_stack_grad(theta, ...)`` per step, but the weight update
    ``W <- W - lr dz^T h`` is one in-place batched product on contiguous per-layer copies,
    so no gradient vector is formed and no flat vector is rewritten each step.
    """
    B = theta.shape[0]
    # copies (never views of theta, which the caller still needs), contiguous per layer
    params = [p.clone(memory_format=torch.contiguous_format)
              for p in layout.unflatten(theta).values()]
    weights, biases = params[0::2], params[1::2]
    for x, y, w in batches:
        z, _, inputs, pre = _forward_params(weights, biases, x)
        log_p = torch.log_softmax(z, dim=-1)
        dz = log_p.exp_()
        dz.scatter_add_(-1, y.unsqueeze(-1), -torch.ones_like(y, dtype=dz.dtype).unsqueeze(-1))
        dz.mul_((w / w.sum(1, keepdim=True).clamp_min(1)).unsqueeze(-1))
        for i in range(len(weights) - 1, -1, -1):
            below = torch.bmm(dz, weights[i]).mul_(pre[i - 1] > 0) if i > 0 else None
            weights[i].baddbmm_(dz.transpose(1, 2), inputs[i], alpha=-lr)
            biases[i].sub_(dz.sum(1), alpha=lr)
            dz = below
    return torch.cat([p.reshape(B, -1) for p in params], dim=1)

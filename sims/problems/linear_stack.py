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

Dropout after a hidden layer (``MLPDropout``, Fed-LAMB's MLP) is a given mask ``m_l`` (0 or
``1 / (1 - p)`` per sample and unit, drawn by the caller): ``h_l = relu(z_l) * m_l`` and
``dz_{l-1} = (dz_l W_l) * m_{l-1} * [z_{l-1} > 0]``. Only the gradient paths take masks; the
fused SGD paths run models without dropout (:func:`hidden_dropout`).
"""
from __future__ import annotations

import torch
from torch import nn

from ..core.batching import replica_runs, start_minus, start_rows


def is_linear_stack(model: nn.Module) -> bool:
    """True for modules whose parameters are (weight, bias) pairs of Linear layers applied
    in order with ReLU between (``sims.problems.models.LogReg`` and ``sims.problems.models.MLP``),
    or with dropout after the ReLU as well (``sims.problems.models.MLPDropout``)."""
    from .models import MLP, LogReg, MLPDropout
    return type(model) in (LogReg, MLP, MLPDropout)


def hidden_dropout(model: nn.Module) -> float:
    """The dropout rate after the hidden ReLU of a linear stack (``MLPDropout``), else 0."""
    from .models import MLPDropout
    return float(model.dropout.p) if type(model) is MLPDropout else 0.0


def relu_backward(grad: torch.Tensor, pre: torch.Tensor,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """``grad * (pre > 0)`` as one fused kernel (several times faster than forming the mask),
    into ``out`` when given."""
    if out is None:
        return torch.ops.aten.threshold_backward(grad, pre, 0)
    return torch.ops.aten.threshold_backward.grad_input(grad, pre, 0, grad_input=out)


def _logit_grad(z: torch.Tensor, y: torch.Tensor, scale: torch.Tensor, dim: int) -> torch.Tensor:
    """The weighted cross-entropy gradient with respect to logits ``z`` whose class axis is
    ``dim``: ``(softmax(z) - onehot(y)) * scale``, with labels ``y`` and per-sample factors
    ``scale`` shaped like ``z`` without that axis."""
    dz = torch.softmax(z, dim=dim)
    y = y.unsqueeze(dim)
    dz.scatter_add_(dim, y, -torch.ones(y.shape, dtype=dz.dtype, device=dz.device))
    return dz.mul_(scale.unsqueeze(dim))


def _forward(theta, layout, x, masks=None):
    params = list(layout.unflatten(theta).values())
    return _forward_params(params[0::2], params[1::2], x, masks)


def _forward_params(weights, biases, x, masks=None):
    """Logits, weights, each layer's inputs and pre-activations; ``masks[l]`` (``[B, b,
    width]``, optional) multiplies hidden layer ``l``'s ReLU output (dropout)."""
    B = weights[0].shape[0]
    h = x.reshape(B, x.shape[1], -1)
    inputs, pre = [], []
    for i, (W, b) in enumerate(zip(weights, biases)):
        inputs.append(h)
        z = torch.baddbmm(b.unsqueeze(1), h, W.transpose(1, 2))
        if i < len(weights) - 1:
            pre.append(z)
            h = torch.relu(z)
            if masks is not None:
                h = h * masks[i]
    return z, weights, inputs, pre


def linear_stack_logits(theta: torch.Tensor, layout, x: torch.Tensor) -> torch.Tensor:
    """Logits ``[B, b, classes]`` of every client's model on its inputs ``x[B, b, ...]``."""
    return _forward(theta, layout, x)[0]


def linear_stack_grad(theta: torch.Tensor, layout, x: torch.Tensor, y: torch.Tensor,
                      w: torch.Tensor, normalize: bool = True, masks=None):
    """Per-client gradients ``[B, d]`` and losses ``[B]`` for inputs ``x[B, b, ...]``, labels
    ``y[B, b]`` and sample weights ``w[B, b]`` (0 = padding). The loss is
    ``sum_s w_s CE_s / sum_s w_s``, or ``sum_s w_s CE_s`` with ``normalize=False``.
    ``masks``: one dropout mask ``[B, b, width]`` per hidden layer (module docstring)."""
    B = theta.shape[0]
    z, weights, inputs, pre = _forward(theta, layout, x, masks)
    log_p = torch.log_softmax(z, dim=-1)
    if normalize:
        w = w / w.sum(1, keepdim=True).clamp_min(1)
    loss = -(log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1) * w).sum(1)
    dz = log_p.exp_()
    dz.scatter_add_(-1, y.unsqueeze(-1), -torch.ones_like(y, dtype=dz.dtype).unsqueeze(-1))
    dz.mul_(w.unsqueeze(-1))
    # Each layer's gradient is written straight into its slice of the flat output (a view
    # whose batch stride is d; no concatenation: docs/speed.md).
    out = torch.empty((B, layout.d), dtype=theta.dtype, device=theta.device)
    views = list(layout.unflatten(out).values())
    for i in range(len(weights) - 1, -1, -1):
        torch.bmm(dz.transpose(1, 2), inputs[i], out=views[2 * i])
        torch.sum(dz, 1, out=views[2 * i + 1])
        if i > 0:
            dh = torch.bmm(dz, weights[i])
            if masks is not None:
                dh = dh * masks[i - 1]
            dz = relu_backward(dh, pre[i - 1])
    return out, loss


def linear_stack_sgd_(theta: torch.Tensor, layout, minibatch, steps: int,
                      lr: float, decay=0.0, shift: torch.Tensor | None = None,
                      step_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Local SGD fused with the gradient, in place: ``steps`` minibatch steps of every client
    applied to ``theta[B, d]`` (contiguous), which is returned.

    ``minibatch(k)`` gives step ``k``'s ``(x[B, b, ...], y[B, b], w[B, b])``; a client whose
    weights are all 0 at a step takes no step (its gradient is 0). Equivalent to
    ``theta <- theta - lr * linear_stack_grad(theta, ...)`` per step, but the weight update
    ``W <- W - lr dz^T h`` is one in-place batched product on each layer's view of the flat
    vector (a view whose batch stride is ``d`` runs as fast as a contiguous copy), so no
    gradient vector, per-layer copy or concatenation is formed. (Running all steps of a few
    clients at a time, so their weights stay in L2, was measured: no faster, since a
    32 MiB chunk of clients stays in this machine's L3 between steps.)

    Local SGD with linear extras (issue 16: weight decay, FedProx's proximal term, SCAFFOLD's
    and FedCM's corrections, :class:`sims.rules.terms.AffineSGD`): each step is
    ``theta <- (1 - decay) theta - lr g(theta) + shift``, ``decay`` a number or ``[B, 1]``,
    ``shift`` ``[B, d]``; the decay rides on the weight update (``baddbmm_``'s ``beta``) and
    the shift is one more pass. ``step_mask[B, steps]`` (False: the client takes no step)
    is needed then, since decay and shift would move a client whose step is all padding.
    """
    if not theta.is_contiguous():
        raise ValueError("linear_stack_sgd_ needs a contiguous [B, d] parameter tensor")
    params = list(layout.unflatten(theta).values())      # views into theta
    weights, biases = params[0::2], params[1::2]
    affine = shift is not None or torch.is_tensor(decay) or decay != 0
    for k in range(steps):
        x, y, w = minibatch(k)
        B, b = y.shape
        keep, valid = None, None
        if affine:
            valid = None if step_mask is None or bool(step_mask[:, k].all()) else step_mask[:, k]
            keep = 1 - decay
            if valid is not None:
                keep = torch.where(valid.unsqueeze(-1),
                                   torch.as_tensor(keep, dtype=theta.dtype), 1.0)
        sgd_step_(weights, biases, x.reshape(B, b, -1).transpose(1, 2), y, lr_scale(w, lr),
                  keep=keep)
        if shift is not None:
            if valid is None:
                theta.add_(shift)
            else:
                theta.addcmul_(shift, valid.unsqueeze(-1).to(theta.dtype))
    return theta


def lr_scale(w: torch.Tensor, lr: float) -> torch.Tensor:
    """Per-sample factors ``lr * w_s / sum_s w_s`` of a minibatch's weights ``w[..., b]``: the
    mean over valid samples with the step size folded in (all-zero weights give zeros).
    ``lr`` may be a tensor with one rate per client (``[B, 1]``, a per-replica rate)."""
    if torch.is_tensor(lr):
        lr = lr.reshape(lr.shape[0], *([1] * (w.dim() - 1)))
    return w * (lr / w.sum(-1, keepdim=True).clamp_min(1))


def sgd_step_(weights, biases, hT, y, scale, input_grad: bool = False, keep=None,
              onednn: bool | None = None):
    """One minibatch step on per-client weights, in place, from inputs ``hT[B, in, b]``
    (feature-major), labels ``y[B, b]`` and per-sample factors ``scale[B, b]`` that include
    the step size (:func:`lr_scale`); a step whose factors are all 0 leaves the weights
    exactly as they were. With ``input_grad``, returns ``lr`` times the loss gradient with
    respect to the inputs, sample-major (``[B, b, in]``, taken before the update), else None.

    Activations are kept feature-major (``[B, features, b]``): every product is then
    ``W @ H`` with the weight as the left operand, ``[out, in] x [in, b]``, which MKL runs
    faster than ``H @ W^T`` for the first layer's shapes (``docs/speed.md``);
    the weight update ``W -= dZ H^T`` takes ``dZ`` ``[out, b]`` as it comes.

    ``keep`` (a number or ``[B, 1]``; None: 1) scales the weights before the update,
    ``W <- keep W - dZ H^T`` (weight decay / proximal shrinkage, :func:`linear_stack_sgd_`).

    Large layers in float32 on the CPU (the MLP's first layer, ``[200, 784] x [784, 32]``)
    run the forward product and the weight update as one oneDNN product per client, by the
    rule and wrapper of :mod:`sims.problems.onednn` (``onednn``: None follows
    :func:`sims.problems.onednn.use_onednn`, False is the ``bmm`` reference; oneDNN has no
    ``out=``: the product is subtracted; measured: ``docs/speed.md``)."""
    from . import onednn as dnn    # the shared oneDNN wrapper and rule
    use = dnn.use_onednn(hT, onednn)
    B, b = hT.shape[0], hT.shape[2]
    inputs, pre, big = [], [], []
    for i, (W, bias) in enumerate(zip(weights, biases)):
        fast = use and dnn.onednn_big(b * W.shape[1] * W.shape[2])
        if fast:        # zT[c] = W[c] h[c]^T with h sample-major and hT feature-major, contiguous
            h = hT.transpose(1, 2).contiguous()
            zT = dnn.per_client_forward(W, bias, h)
            hT = hT.contiguous()
        else:
            zT = torch.baddbmm(bias.unsqueeze(2), W, hT)     # [B, out, b]
        inputs.append(hT)
        big.append(fast)
        if i < len(weights) - 1:
            pre.append(zT)
            hT = torch.relu(zT)
    dzT = _logit_grad(zT, y, scale, dim=1)               # lr * dLoss/dz
    grad_in = torch.bmm(dzT.transpose(1, 2), weights[0]) if input_grad else None
    for i in range(len(weights) - 1, -1, -1):
        below = (relu_backward(torch.bmm(weights[i].transpose(1, 2), dzT), pre[i - 1])
                 if i > 0 else None)
        if big[i]:
            if keep is not None:
                tensor = torch.is_tensor(keep)
                weights[i].mul_(keep.view(-1, 1, 1) if tensor else keep)
                biases[i].mul_(keep.view(-1, 1) if tensor else keep)
            dzT = dzT.contiguous()
            for c in range(B):
                weights[i][c].sub_(dnn._onednn(dzT[c], inputs[i][c]))
            biases[i].sub_(dzT.sum(2))
        elif keep is None:
            weights[i].baddbmm_(dzT, inputs[i].transpose(1, 2), alpha=-1)
            biases[i].sub_(dzT.sum(2))
        elif torch.is_tensor(keep):
            weights[i].mul_(keep.view(-1, 1, 1)).baddbmm_(dzT, inputs[i].transpose(1, 2),
                                                          alpha=-1)
            biases[i].mul_(keep.view(-1, 1)).sub_(dzT.sum(2))
        else:
            weights[i].baddbmm_(dzT, inputs[i].transpose(1, 2), beta=keep, alpha=-1)
            biases[i].mul_(keep).sub_(dzT.sum(2))
        dzT = below
    return grad_in


def linear_stack_sgd_delta(server: torch.Tensor, rep: torch.Tensor, layout, minibatch,
                           steps: int, lr: float, one_step: bool | None = None) -> torch.Tensor:
    """``theta_start - theta_end`` ``[B, d]`` of ``steps`` fused local SGD steps, where
    participant ``b`` starts from ``server[rep[b]]`` (``server[R, d]``, ``rep`` in runs) and
    ``minibatch(k)`` is as in :func:`linear_stack_sgd_`.

    One step (a client with at most one minibatch, e.g. the embedded-MNIST default of 20-25
    samples per client) is the common case and gets its own path: the forward pass runs with
    the replica's shared weights as one large product, and the delta, ``lr`` times the
    gradient, is written straight into the output, so no ``[B, d]`` copy of the server model
    is formed at all. More steps train gathered copies in place (:func:`linear_stack_sgd_`)
    and subtract at the end. The two paths round differently, so a caller that batches
    clients in chunks passes ``one_step`` decided for the whole problem (every client takes
    at most one step), not per chunk; None decides by ``steps``.
    """
    if one_step is None:
        one_step = steps == 1
    if one_step:
        if steps != 1:
            raise ValueError(f"one_step needs steps == 1, got {steps}")
        return _one_step_delta(server, rep, layout, *minibatch(0), lr)
    theta = start_rows(server, rep)
    linear_stack_sgd_(theta, layout, minibatch, steps, lr)
    return start_minus(server, rep, theta, out=theta)


def _one_step_delta(server, rep, layout, x, y, w, lr):
    B, b = y.shape
    out = torch.empty((B, layout.d), dtype=server.dtype, device=server.device)
    scale = lr_scale(w, lr)
    for r, rows in replica_runs(rep):
        params = list(layout.unflatten(server[r]).values())
        weights, biases = params[0::2], params[1::2]
        nb = rows.stop - rows.start
        h = x[rows].reshape(nb * b, -1)
        inputs, pre = [], []
        for i, (W, bias) in enumerate(zip(weights, biases)):
            inputs.append(h)
            z = torch.addmm(bias, h, W.T)         # every client shares the weights: one product
            if i < len(weights) - 1:
                pre.append(z)
                h = torch.relu(z)
        dz = _logit_grad(z, y[rows].reshape(-1), scale[rows].reshape(-1), dim=-1)
        delta = list(layout.unflatten(out[rows]).values())
        for i in range(len(weights) - 1, -1, -1):
            below = relu_backward(dz @ weights[i], pre[i - 1]) if i > 0 else None
            dz3 = dz.view(nb, b, -1)
            torch.bmm(dz3.transpose(1, 2), inputs[i].view(nb, b, -1), out=delta[2 * i])
            torch.sum(dz3, 1, out=delta[2 * i + 1])
            dz = below
    return out

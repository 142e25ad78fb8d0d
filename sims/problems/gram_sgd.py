"""Local SGD of a Linear-ReLU stack without per-client copies of the first layer.

The first layer (weight ``W`` ``out x in``, bias ``b``) holds nearly all of an MLP's
parameters and FLOPs, and local SGD changes it by rank-``batch`` updates. With ``G_r`` the
step size times step ``r``'s loss gradient with respect to the first layer's
pre-activations (``[out, batch]``) and ``X_r`` the step's inputs (``[in, batch]``), a client's
first layer after ``t`` steps is ``W_t = W_0 - sum_{r<t} G_r X_r^T``, ``b_t = b_0 - sum_{r<t} G_r 1``,
so step ``t``'s pre-activations are

    Z_t = W_0 X_t + b_0 - sum_{r<t} G_r (X_r^T X_t + 1)

and the round's first-layer delta is ``W_0 - W_T = sum_t G_t X_t^T`` (bias: ``sum_t G_t 1``).
``W_0 X`` is the replica's shared server model applied to the client's whole data, and
``X_r^T X_t + 1`` are entries of the client's Gram matrix (inputs with the bias's constant
feature), which never changes and is computed once per problem (:class:`ClientGram`). The
per-step work on the first layer shrinks to the Gram correction (``out x t*batch`` times
``t*batch x batch``), and the two big products, ``W_0 X`` and ``sum_t G_t X_t^T``, have inner
dimensions ``in`` and the client's sample count instead of ``batch``: on the Fed-EF Figure 8
MLP with 300 samples per client they run near the machine's large-matmul rate, where the
per-step products of direct training (inner dimension 32) run well below it. The layers
above the first train directly (:func:`sims.problems.linear_stack.sgd_step_`).

The same arithmetic as :func:`sims.problems.linear_stack.linear_stack_sgd_delta` in exact
arithmetic; the two round differently (tests hold both to step-by-step SGD in float64).
It pays while the correction stays small next to the products it replaces
(``steps * batch`` well below ``in``) and the Gram matrices fit in memory;
:meth:`sims.problems.neural.NeuralProblem` decides once per problem.
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.batching import start_minus, start_rows
from .linear_stack import lr_scale, relu_backward, sgd_step_
from .onednn import _onednn, onednn_big, use_onednn


class ClientGram:
    """Every client's inputs client-major with the bias's constant feature appended
    (``x[n, n_max, in + 1]``: rows ``[x_i, 1]``, zero rows as padding), their Gram matrices
    (``gram[n, n_max, n_max]``: ``x_i . x_j + 1`` for valid pairs, 0 elsewhere), and each
    sample's position in its client's rows (``local_pos[N]``; the partition must use each
    sample at most once)."""

    def __init__(self, x: torch.Tensor, parts: list[np.ndarray], chunk: int = 64):
        flat = x.reshape(len(x), -1)
        n, n_max = len(parts), max(len(p) for p in parts)
        self.x = flat.new_zeros((n, n_max, flat.shape[1] + 1))
        self.local_pos = torch.full((len(flat),), -1, dtype=torch.long, device=flat.device)
        for c, p in enumerate(parts):
            idx = torch.as_tensor(p, device=flat.device)
            self.x[c, : len(p), :-1] = flat.index_select(0, idx)
            self.x[c, : len(p), -1] = 1
            self.local_pos[idx] = torch.arange(len(p), device=flat.device)
        self.gram = flat.new_empty((n, n_max, n_max))
        for lo in range(0, n, chunk):
            xs = self.x[lo:lo + chunk]
            torch.bmm(xs, xs.transpose(1, 2), out=self.gram[lo:lo + chunk])

        self._xT = None

    def xT(self) -> torch.Tensor:
        """The inputs feature-major without the constant feature (``[n, in, n_max]``,
        contiguous), the right operand of the oneDNN delta product; made once, on first use."""
        if self._xT is None:
            self._xT = self.x[:, :, :-1].transpose(1, 2).contiguous()
        return self._xT

    @staticmethod
    def nbytes(parts: list[np.ndarray], in_features: int, itemsize: int,
               feature_major: bool = False) -> int:
        """Bytes of the Gram data; ``feature_major``: with :meth:`xT` (the oneDNN path)."""
        n_max = max(len(p) for p in parts)
        extra = in_features if feature_major else 0
        return len(parts) * n_max * (n_max + in_features + 1 + extra) * itemsize


def gram_sgd_delta(server: torch.Tensor, rep: torch.Tensor, clients: torch.Tensor, layout,
                   cg: ClientGram, payload: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                   lr: float, onednn: bool | None = None) -> torch.Tensor:
    """``theta_start - theta_end`` ``[B, d]`` of all local SGD steps, participant ``j``
    (client ``clients[j]``) starting from ``server[rep[j]]`` (``rep`` in runs of replicas).

    ``payload[B, S, b]`` holds step ``s``'s sample indices (-1 = padding), ``y`` and ``w``
    (0 = padding) the labels and weights in the same shape; every sample of row ``j`` must
    belong to client ``clients[j]``. The model is a stack of at least two Linear layers
    with ReLU between them (``sims.problems.models.MLP``).

    The two per-client products with the client's whole data (``X [W_0, b_0]^T`` and
    ``G^T X``) go through oneDNN in float32 on the CPU (the rule and wrapper of
    :mod:`sims.problems.mlp_grad`; ``onednn`` False: ``mm``, the reference), the second
    with the feature-major copy :meth:`ClientGram.xT`; the Gram corrections
    (``[32, 32t] x [32t, 200]``) stay ``baddbmm`` (measured: ``docs/speed.md``). The Gram matrices themselves are computed
    once per problem (:class:`ClientGram`, cached by the problem), not per round."""
    B, S, b = payload.shape
    n_max = cg.x.shape[1]
    server_params = list(layout.unflatten(server).values())
    W0, b0 = server_params[0], server_params[1]               # [R, out, in], [R, out]
    out_dim, in_dim = W0.shape[1:]
    cl, rp = clients.tolist(), rep.tolist()
    # every step's samples as rows of the clients' local data, in step order
    # (padding reads position 0: its weight is 0, so it adds nothing)
    pos = cg.local_pos.index_select(0, payload.clamp_min(0).reshape(-1)).view(B, S * b)
    pos = pos.masked_fill_(payload.reshape(B, S * b) < 0, 0)
    local_rows = (torch.arange(B, device=pos.device).unsqueeze(1) * n_max + pos).view(-1)
    # shared-model pre-activations W_0 X + b_0 of each client's data (local order), then
    # gathered into step order; the Gram rows of the steps' samples, in step order
    fast = use_onednn(server, onednn) and onednn_big(n_max * (in_dim + 1) * out_dim)
    wb = {r: torch.cat([W0[r], b0[r].unsqueeze(1)], 1) for r in set(rp)}  # [W_0, b_0]
    if fast:
        z0 = torch.stack([_onednn(cg.x[cl[j]], wb[rp[j]]) for j in range(B)])
    else:
        z0 = server.new_empty((B, n_max, out_dim))
        for j in range(B):
            torch.mm(cg.x[cl[j]], wb[rp[j]].T, out=z0[j])
    z0 = z0.view(B * n_max, out_dim).index_select(0, local_rows).view(B, S * b, out_dim)
    gram_rows = cg.gram.view(-1, n_max).index_select(
        0, (clients.unsqueeze(1) * n_max + pos).view(-1)).view(B, S * b, n_max)
    # the layers above the first train directly, on contiguous per-client copies
    tail = [start_rows(p, rep) for p in server_params[2:]]
    scale = lr_scale(w, lr)
    g = server.new_empty((B, S * b, out_dim))                 # G_t, sample-major
    for t in range(S):
        cols = slice(t * b, (t + 1) * b)
        z = z0[:, cols]
        if t:   # Gram entries of this step's samples with all earlier steps' samples
            gram = gram_rows[:, cols].gather(2, pos[:, : t * b].unsqueeze(1).expand(B, b, t * b))
            z = torch.baddbmm(z, gram, g[:, : t * b], alpha=-1)
        dh = sgd_step_(tail[0::2], tail[1::2], torch.relu(z).transpose(1, 2), y[:, t],
                       scale[:, t], input_grad=True, onednn=onednn)
        relu_backward(dh, z, out=g[:, cols])
    out = server.new_empty((B, layout.d))
    delta = list(layout.unflatten(out).values())
    # back to local order (a sample drawn twice in a round adds up), then one product per
    # client with its whole data
    g_local = server.new_zeros((B * n_max, out_dim))
    g_local.index_add_(0, local_rows, g.view(-1, out_dim))
    g_local = g_local.view(B, n_max, out_dim)
    if fast:
        xT = cg.xT()
        for j in range(B):
            delta[0][j].copy_(_onednn(g_local[j].T.contiguous(), xT[cl[j]]))
    else:
        for j in range(B):
            torch.mm(g_local[j].T, cg.x[cl[j], :, :in_dim], out=delta[0][j])
    torch.sum(g, 1, out=delta[1])
    for sl, p_end in zip(layout.slices[2:], tail):
        start_minus(server[:, sl], rep, p_end.flatten(1), out=out[:, sl])
    return out


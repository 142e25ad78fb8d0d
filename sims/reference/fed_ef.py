"""Sequential reference path: the papers' algorithms written plainly, one client at a time.

Nothing here is batched or shared with the fast path except the round's random draws
(:func:`sims.core.engine.draw_round`) and the problem's per-client gradient
(``problem.reference_grad``: a plain module with autograd for networks). The compressors are
re-implemented naively per vector (sorting, loops over layers), so tests holding the engine
to this path check the fast compressors, the batched optimizer rules, the gathering and
scattering of client state and the per-replica aggregation all at once.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..rules import compress as C
from ..core.engine import draw_round


def _layer_slices(layout, scope):
    return layout.slices if scope == "layer" else (slice(0, layout.d),)


def reference_compress(comp, x: torch.Tensor, layout, u=None) -> torch.Tensor:
    """One vector through ``comp``, written the slow obvious way (Fed-EF spec section 2)."""
    if isinstance(comp, C.Identity):
        return x.clone()
    out = torch.zeros_like(x)
    for sl in _layer_slices(layout, comp.scope):
        block = x[sl]
        size = block.numel()
        if isinstance(comp, (C.TopK, C.HeavySign)):
            keep = max(1, math.floor(comp.k * size))
            order = torch.argsort(block.abs(), descending=True, stable=True)[:keep]
            sparse = torch.zeros_like(block)
            sparse[order] = block[order]
            if isinstance(comp, C.TopK):
                out[sl] = sparse
                continue
            # "kept": the mean |value| of the kept non-zero entries (spec 2.4, the nnz version;
            # fewer than ``keep`` when the block has fewer non-zeros than ``keep``)
            divisor = max(1, int((sparse != 0).sum())) if comp.scale == "kept" else size
            out[sl] = sparse.abs().sum() / divisor * torch.sign(sparse)
        elif isinstance(comp, C.Sign):
            out[sl] = block.abs().mean() * torch.sign(block)
        elif isinstance(comp, C.Stoc):
            s = 2 ** (comp.b - 1)
            norm = block.norm()
            vals = torch.zeros_like(block)
            for i in range(size):
                a = (block[i].abs() / norm).item() if norm > 0 else 0.0
                level = min(math.floor(a * s), s - 1)
                up = 1 if u[sl][i] < a * s - level else 0
                vals[i] = norm * torch.sign(block[i]) * (level + up) / s
            out[sl] = vals
        else:
            raise TypeError(f"no reference for {comp!r}")
    return out


def run_fed_ef_reference(problem, alg, participation, rounds: int, seed: int):
    """Fed-EF Alg. 1-4 for one seed; returns per-round metric lists and the final model.

    Follows spec section 1 line by line: local SGD, ``delta = theta - theta_end``,
    ``m = C(delta + e)``, ``e <- delta + e - m`` (or ``m = C(delta)`` without EF), the mean
    over participants, then SGD or AMSGrad (epsilon inside the root, no bias correction),
    with two-way compression and error restarting as options.
    """
    theta = problem.init_theta(seed).clone()
    layout = problem.layout
    errors: dict[int, torch.Tensor] = {}
    last: dict[int, int] = {}
    m = torch.zeros_like(theta)
    v = torch.zeros_like(theta)
    vhat = torch.zeros_like(theta)
    phi = torch.zeros_like(theta)
    history = {k: [float(x)] for k, x in _evaluate(problem, theta).items()}
    history["qA2"] = []
    for t in range(rounds):
        draw = draw_round(problem, participation, alg.needs_uniforms, seed, t)
        messages, inputs = [], []
        for j, client in enumerate(draw.clients):
            client = int(client)
            local = theta.clone()
            for batch in draw.payloads[j]:
                local = local - alg.eta_l * problem.reference_grad(local, client, batch)
            delta = theta - local
            u = None
            if draw.uniforms is not None:
                u = torch.as_tensor(draw.uniforms[j], dtype=theta.dtype)
            if alg.error_feedback:
                e = errors.get(client, torch.zeros_like(theta))
                if (alg.restart_period is not None and t >= alg.restart_start
                        and last.get(client, -1) < t - alg.restart_period):
                    e = torch.zeros_like(theta)
                target = delta + e
                msg = reference_compress(alg.compressor, target, layout, u)
                errors[client] = target - msg
            else:
                target = delta
                msg = reference_compress(alg.compressor, target, layout, u)
            messages.append(msg)
            inputs.append(target)
            last[client] = t
        if messages:
            mean = torch.stack(messages).mean(0)
            mean_in = torch.stack(inputs).mean(0)
            history["qA2"].append(float(((mean - mean_in) ** 2).sum() / (mean_in ** 2).sum()))
            direction = mean
            if alg.server == "amsgrad":
                m = alg.beta1 * m + (1 - alg.beta1) * mean
                v = alg.beta2 * v + (1 - alg.beta2) * mean * mean
                vhat = torch.maximum(vhat, v)
                direction = m / torch.sqrt(vhat + alg.eps)
            if alg.two_way:
                sent = reference_compress(alg.compressor, direction + phi, layout)
                phi = phi + direction - sent
                direction = sent
            theta = theta - alg.eta * direction
        else:
            history["qA2"].append(float("nan"))
        for k, x in _evaluate(problem, theta).items():
            history[k].append(float(x))
    return {k: np.asarray(v) for k, v in history.items()}, theta, errors


def _evaluate(problem, theta):
    with torch.no_grad():
        return {k: v[0] for k, v in problem.evaluate(theta.unsqueeze(0), test=False).items()}

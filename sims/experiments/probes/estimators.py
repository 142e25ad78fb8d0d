"""The estimators behind :class:`sims.experiments.probes.Probe`, each usable on its own.

Everything is batched over rows: ``theta[B, d]`` and ``clients[B]`` pair a model with a
client (the probe uses one row per (replica, sampled client)).

* :func:`client_full_grads` -- ``grad f_i(theta)``: the quadratic's exact gradient (its
  noise is additive and mean zero), or a neural problem's client loss over the client's
  whole data as one padded minibatch (``f_i`` = mean loss over the client's samples, the
  ``f_i`` of Fed-EF eq. (1)); a problem may also offer ``full_grad(theta, clients)``.
* :func:`hvp_operator` -- Hessian-vector products of ``f_i``: ``a_i * v`` on the quadratic,
  ``torch.func`` reverse-over-reverse products of the client loss on a neural problem; a
  problem may also offer ``hvp(theta, clients, v)``.
* :func:`lanczos_extremes` -- the extreme eigenvalues of each row's Hessian from ``k``
  Hessian-vector products (Lanczos with full re-orthogonalisation: the same products as
  ``k`` steps of power iteration, with Chebyshev-fast convergence).
* :func:`hill` (re-exported from :mod:`sims.experiments.synthetic.tails`) and :func:`hill_k`.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ...core.malloc import CHUNK_BYTES
from ..synthetic.tails import hill  # noqa: F401  (re-exported)


class ProbeError(ValueError):
    """A probe asked of a problem or algorithm that cannot answer it (one line)."""


def chunk_rows(d: int, element_size: int, factor: int = 1) -> int:
    """Rows per chunk that keep ``factor`` tensors of ``[rows, d]`` near the engine's chunk
    budget (:data:`sims.core.malloc.CHUNK_BYTES`)."""
    return int(max(1, min(4096, CHUNK_BYTES // (max(1, factor) * d * element_size))))


def _is_quadratic(problem) -> bool:
    from ...problems.quadratic import QuadraticProblem
    return isinstance(problem, QuadraticProblem)


def _client_batch(problem, clients: torch.Tensor) -> torch.Tensor:
    """Each client's whole data as one index row, padded with -1: ``[B, max size]``."""
    parts = [problem.parts[int(c)] for c in clients.tolist()]
    width = max(len(p) for p in parts)
    out = np.full((len(parts), width), -1, dtype=np.int64)
    for j, p in enumerate(parts):
        out[j, : len(p)] = p
    return torch.as_tensor(out, device=clients.device)


def client_full_grads(problem, theta: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """``grad f_i(theta_b)`` for every row ``b`` (client ``i = clients[b]``): ``[B, d]``."""
    if hasattr(problem, "full_grad"):
        return problem.full_grad(theta, clients)
    if _is_quadratic(problem):
        return problem.stoch_grad(theta, clients, torch.zeros_like(theta))
    if hasattr(problem, "parts"):
        out = torch.empty_like(theta)
        step = chunk_rows(problem.d, theta.element_size(), 2)
        for lo in range(0, len(clients), step):
            cl = clients[lo:lo + step]
            out[lo:lo + step] = problem.stoch_grad(theta[lo:lo + step], cl,
                                                   _client_batch(problem, cl))
        return out
    raise ProbeError(f"{type(problem).__name__} offers no full client gradient (give it "
                     "full_grad(theta, clients), or parts for a data problem)")


def hvp_operator(problem):
    """``bind(theta[B, d], clients[B]) -> matvec`` with ``matvec(v[B, d])`` the Hessian of
    ``f_i`` at ``theta_b`` times ``v_b``; None when the problem offers no way to form one."""
    if hasattr(problem, "hvp"):
        return lambda theta, clients: (lambda v: problem.hvp(theta, clients, v))
    if _is_quadratic(problem):
        return lambda theta, clients: (lambda v: problem.a[clients] * v)
    if hasattr(problem, "_loss") and hasattr(problem, "parts"):
        return _NeuralHVP(problem)
    return None


class _NeuralHVP:
    """Hessian-vector products of each client's full-data loss, reverse over reverse
    (``grad`` of ``<grad loss, v>``, vmapped over clients). Forward over reverse
    (``jvp`` of ``grad``) costs the same here but loads torch's forward-AD decompositions
    through the deprecated ``torch.jit.script`` on first use.

    With dropout in training mode each bound operator uses one fixed set of masks, keyed by
    the client's samples (:meth:`sims.problems.NeuralProblem.keyed_masks`; on the generic
    path the client's full gradient draws the same ones, the dropout MLP's fast path draws
    its own): a fresh draw per product would make Lanczos iterate on a different matrix at
    every step."""

    def __init__(self, problem):
        from torch.func import grad, vmap
        self.problem = problem
        loss = problem._loss

        def one(flat, x, y, w, v):
            return grad(lambda p: (grad(loss)(p, x, y, w) * v).sum())(flat)
        self._batched = vmap(one, randomness="different")
        if hasattr(problem, "_masked_loss"):
            masked = problem._masked_loss

            def one_masked(flat, x, y, w, v, masks):
                return grad(lambda p: (grad(masked)(p, x, y, w, masks) * v).sum())(flat)
            self._masked = vmap(one_masked)

    def __call__(self, theta, clients):
        idx = _client_batch(self.problem, clients)
        safe = idx.clamp_min(0)
        x, y = self.problem.x[safe], self.problem.y[safe]
        w = (idx >= 0).to(self.problem.dtype)
        keyed = getattr(self.problem, "keyed_masks", None)
        masks = keyed(idx, theta.dtype) if keyed is not None else None
        if masks is not None:
            return lambda v: self._masked(theta, x, y, w, v, masks)
        return lambda v: self._batched(theta, x, y, w, v)


def lanczos_extremes(matvec, v0: torch.Tensor, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Smallest and largest Ritz values ``[B]`` of each row's symmetric operator after
    ``iters`` Lanczos steps from the start vectors ``v0[B, d]``.

    Full re-orthogonalisation against all previous vectors (``iters`` vectors of ``[B, d]``
    are kept). A row whose Krylov space closes early (breakdown, e.g. ``iters > d``) continues
    with zero vectors, which adds Ritz values 0 and leaves the others exact. The Ritz values
    lie inside the spectrum, so ``max |Ritz|`` is a lower bound on the spectral norm that
    converges like ``exp(-4 k sqrt(gap))`` (Kaniel-Paige) for a relative gap ``gap``.
    """
    if iters < 1:
        raise ProbeError(f"Lanczos needs iters >= 1, got {iters}")
    B, d = v0.shape
    basis = torch.empty((B, iters, d), dtype=v0.dtype, device=v0.device)
    q = v0 / v0.norm(dim=1, keepdim=True).clamp_min(1e-300)
    basis[:, 0] = q
    alphas, betas = [], []
    prev, beta_prev = torch.zeros_like(q), torch.zeros(B, dtype=q.dtype, device=q.device)
    for j in range(iters):
        w = matvec(q)
        alpha = (w * q).sum(1)
        alphas.append(alpha)
        if j == iters - 1:
            break
        w = w - alpha[:, None] * q - beta_prev[:, None] * prev
        done = basis[:, : j + 1]                    # full re-orthogonalisation (one pass
        w = w - torch.bmm(torch.bmm(done, w.unsqueeze(-1)).transpose(1, 2), done).squeeze(1)
        beta = w.norm(dim=1)                        # after the three-term recurrence)
        scale = torch.maximum(alpha.abs(), beta).clamp_min(1e-300)
        alive = beta > 1e-10 * scale
        betas.append(torch.where(alive, beta, torch.zeros_like(beta)))
        prev, beta_prev = q, betas[-1]
        q = torch.where(alive[:, None], w / beta.clamp_min(1e-300)[:, None], torch.zeros_like(w))
        basis[:, j + 1] = q
    a = torch.stack(alphas, 1).double()
    T = torch.diag_embed(a)
    if betas:
        b = torch.stack(betas, 1).double()
        T = T + torch.diag_embed(b, 1) + torch.diag_embed(b, -1)
    ritz = torch.linalg.eigvalsh(T)
    return ritz[:, 0].to(v0.dtype), ritz[:, -1].to(v0.dtype)


def hill_k(count: int) -> int:
    """Order statistics the probe's Hill estimate uses: ``round(sqrt(count))``, at least 10
    and at most ``count - 1`` (0 when ``count < 11``: too few values)."""
    if count < 11:
        return 0
    return int(min(count - 1, max(10, round(math.sqrt(count)))))


def hill_stderr(alpha: float, k: int) -> float:
    """Asymptotic standard error ``alpha / sqrt(k)`` of Hill's estimate (exact Pareto tail;
    a slowly varying tail adds a bias this does not include)."""
    return alpha / math.sqrt(k) if k > 0 else math.nan

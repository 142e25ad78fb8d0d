"""FedAda2's client preconditioners: AdaGrad / Adam with a full or an SM3 accumulator.

FedAda2 (Lee, Sharma, Zaheer, Li), spec ``shared/specs/fedada2.md``: Alg. 2 (client AdaGrad
with SM3-II), Alg. 3 / 4 (SM3-I / SM3-II), Alg. 6-10 (ADMU / AGDU: Adam / AdaGrad with the
preconditioner updated every ``z`` steps). :class:`SM3Cover` is the cover, :class:`SM3` the
client transform.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .base import OptimizerError, Rows, Transform, check_beta

CLIENTS = ("adagrad", "adam")
PRECONDS = ("full", "sm3-i", "sm3-ii")


class SM3Cover:
    """The SM3 cover of a flat parameter vector, layer by layer (FedAda2 Alg. 2-4, spec 1.6).

    FedAda2 gives only the abstract cover ``{S_1..S_q}``; the standard SM3 choice (Anil et
    al. 2019, and the authors' code) is used: a tensor with two or more axes gets one set per
    index of each axis (the rows and the columns of a matrix: ``m + n`` accumulators instead
    of ``m n``); a 1-D tensor (a bias) or a scalar gets one set per coordinate (a full
    accumulator). ``full=True`` gives singletons everywhere (plain AdaGrad/Adam memory).

    ``cover_max(x)[r] = max_{j in S_r} x(j)`` and ``cover_min(mu)(j) = min_{r: S_r ∋ j} mu(r)``
    on batches ``[B, d]`` / ``[B, size]``; accumulators are laid out layer by layer, axis by
    axis.
    """

    def __init__(self, layout, full: bool = False):
        self.layout, self.full = layout, full
        self.blocks = []            # (slice into theta, shape, [(offset, size)] per axis)
        offset = 0
        for sl, shape in zip(layout.slices, layout.shapes):
            axes = list(shape) if (len(shape) >= 2 and not full) else [sl.stop - sl.start]
            shp = tuple(shape) if (len(shape) >= 2 and not full) else (sl.stop - sl.start,)
            spans = []
            for n in axes:
                spans.append((offset, n))
                offset += n
            self.blocks.append((sl, shp, spans))
        self.size = offset

    def cover_max(self, x: torch.Tensor) -> torch.Tensor:
        if self.full:                   # every set a singleton: the max is the entry itself
            return x
        out = []
        B = x.shape[0]
        for sl, shape, spans in self.blocks:
            block = x[:, sl].reshape(B, *shape)
            if len(shape) == 1:
                out.append(block)
                continue
            for a in range(len(shape)):
                others = tuple(i + 1 for i in range(len(shape)) if i != a)
                out.append(torch.amax(block, dim=others))
        return torch.cat(out, dim=1)

    def cover_min(self, mu: torch.Tensor) -> torch.Tensor:
        if self.full:
            return mu
        out = []
        B = mu.shape[0]
        for sl, shape, spans in self.blocks:
            if len(shape) == 1:
                o, n = spans[0]
                out.append(mu[:, o:o + n])
                continue
            nu = None
            for a, (o, n) in enumerate(spans):
                view = [B] + [1] * len(shape)
                view[a + 1] = n
                acc = mu[:, o:o + n].reshape(view)
                nu = acc if nu is None else torch.minimum(nu, acc)
            out.append(nu.expand(B, *shape).reshape(B, -1))
        return torch.cat(out, dim=1)


@functools.lru_cache(maxsize=64)
def cover_of(layout, full: bool) -> SM3Cover:
    """The cover of ``layout`` (one object per layout, so what is derived from it is kept)."""
    return SM3Cover(layout, full)


@dataclass(frozen=True)
class SM3(Transform):
    """A FedAda2 client's AdaGrad (AGDU, Alg. 9) or Adam (ADMU, Alg. 7) step direction with a
    full or an SM3 preconditioner. At local step ``k = info.k + 1`` (1-based), ``upd`` when
    the preconditioner is updated (every ``delay``-th step, ``(k - 1) % z == 0``; with
    ``freeze_epochs = F`` only in the epochs ``0, F + 1, 2 (F + 1), ...``, FedAda2 Fig. 7)::

        AdaGrad:  if upd: mu, nu <- accumulate(mu, g^2)              u = g / (sqrt(nu) + eps)
        Adam:     m = b1 m + (1 - b1) g;  if upd: mu, nu <- EMA accumulate(mu, g^2)
                  u = (m / (1 - b1^k)) / (sqrt(nu / (1 - b2^c)) + eps)   (bias_correction)
        if 0 < ||u|| < clip: u = 0 (and Adam's m = 0)                  (clip > 0)

    ``c`` is the number of preconditioner updates so far (``floor((k - 1) / z) + 1`` without
    freezing), plus the round ``t`` with ``count_offset="round"`` (direct joint adaptivity's
    client Adam started from the server's ``v``, debiased as if ``t`` earlier updates had
    happened: the authors' code's counter offset). ``accumulate`` (:meth:`accumulate`):

    * full (``mu = nu``, one accumulator per coordinate): ``nu = nu + g^2`` (Adam: ``b2 nu +
      (1 - b2) g^2``);
    * SM3-I (Alg. 3): ``mu_r = mu_r + max_{j in S_r} g_j^2`` (Adam: the EMA of it),
      ``nu = cover_min(mu)``;
    * SM3-II (Alg. 4): ``nu_j = cover_min(mu)_j + g_j^2`` (Adam: ``b2 cover_min(mu)_j + (1 -
      b2) g_j^2``), ``mu_r = max_{j in S_r} nu_j``.

    On steps without an update ``mu`` and ``nu`` are carried over unchanged (Alg. 4's ``nu'_t
    = nu'_{t-1}``). State: ``mu`` (``[B, cover size]``), ``nu`` (``[B, d]``) and Adam's ``m``,
    zeros unless given (DJA: the server's statistic)."""
    client: str = "adagrad"
    precond: str = "sm3-ii"
    delay: int = 1
    eps: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    bias_correction: bool = True
    clip: float = 0.0
    freeze_epochs: int = 0
    count_offset: str = "none"

    def __post_init__(self):
        if self.client not in CLIENTS:
            raise OptimizerError(f"client must be one of {CLIENTS + ('sgd',)}, got "
                                 f"{self.client!r}")
        if self.precond not in PRECONDS:
            raise OptimizerError(f"precond must be one of {PRECONDS}, got {self.precond!r}")
        if int(self.delay) != self.delay or self.delay < 1:
            raise OptimizerError(f"delay z must be an integer >= 1, got {self.delay}")
        if int(self.freeze_epochs) != self.freeze_epochs or self.freeze_epochs < 0:
            raise OptimizerError(f"freeze_epochs must be an integer >= 0, got "
                                 f"{self.freeze_epochs}")
        if not self.eps > 0 or self.clip < 0:
            raise OptimizerError(f"need eps > 0 and clip >= 0, got {self.eps}, {self.clip}")
        check_beta(beta1=self.beta1, beta2=self.beta2)
        if self.count_offset not in ("none", "round"):
            raise OptimizerError(f"count_offset must be 'none' or 'round', got "
                                 f"{self.count_offset!r}")

    @property
    def adam(self) -> bool:
        return self.client == "adam"

    @property
    def keys(self) -> tuple:
        return ("mu", "nu", "m") if self.adam else ("mu", "nu")

    def cover(self, layout) -> SM3Cover:
        return cover_of(layout, self.precond == "full")

    def init(self, like, **given) -> dict:
        rows = Rows.of(like)
        state = {"mu": rows.zeros(self.cover(rows.layout).size), "nu": rows.zeros()}
        if self.adam:
            state["m"] = rows.zeros()
        state.update(given)
        return state

    def accumulate(self, cover: SM3Cover, mu, g2):
        """The new ``(mu, nu)`` after one preconditioner update with ``g^2``."""
        b2 = self.beta2
        if self.precond == "sm3-ii":
            prev = cover.cover_min(mu)
            nu = b2 * prev + (1 - b2) * g2 if self.adam else prev + g2
            return cover.cover_max(nu), nu
        inc = cover.cover_max(g2)
        mu = b2 * mu + (1 - b2) * inc if self.adam else mu + inc
        return mu, cover.cover_min(mu)

    def updates(self, k, info):
        """``(upd, count)``: whether step ``k`` (1-based, ``[B]``) updates the
        preconditioner, and how many updates steps ``1..k`` have made. With ``freeze_epochs =
        F``, epoch ``e = floor((k-1)/E)`` (``E`` the row's steps per epoch,
        ``info.extra["epoch_steps"]``) updates only when ``e mod (F + 1) == 0``."""
        z = self.delay
        if not self.freeze_epochs:
            return (torch.remainder(k - 1, z) == 0,
                    torch.div(k - 1, z, rounding_mode="floor") + 1)
        E = info.extra.get("epoch_steps")
        if E is None:
            raise OptimizerError("freeze_epochs needs a problem with local epochs (its "
                                 "epoch_steps(client)); this one has none")
        E = E.to(k.dtype)
        P = self.freeze_epochs + 1
        i = k - 1                                    # 0-based step index
        cycle = torch.div(i, P * E, rounding_mode="floor")
        pos = i - cycle * P * E                      # step within the current cycle
        upd = (pos < E) & (torch.remainder(i, z) == 0)
        # updates in the finished cycles' first epochs and in this cycle's (steps j = 0..i
        # with j mod z == 0 and j mod (P E) < E), counted exactly, E and z being small
        j = torch.arange(int(k.max().item()), dtype=k.dtype, device=k.device)
        hit = ((torch.remainder(j, z) == 0).unsqueeze(0)
               & (torch.remainder(j.unsqueeze(0), P * E.unsqueeze(-1)) < E.unsqueeze(-1))
               & (j.unsqueeze(0) <= i.unsqueeze(-1)))
        return upd, hit.sum(-1).to(k.dtype)

    def update(self, u, state, theta, info):
        g = u
        k = info.k + 1
        upd, count = self.updates(k, info)
        upd = upd.unsqueeze(-1)
        mu_new, nu_new = self.accumulate(self.cover(info.layout), state["mu"], g * g)
        mu = torch.where(upd, mu_new, state["mu"])
        nu = torch.where(upd, nu_new, state["nu"])
        new = {"mu": mu, "nu": nu}
        if not self.adam:
            out = g / (torch.sqrt(nu) + self.eps)
        else:
            m = self.beta1 * state["m"] + (1 - self.beta1) * g
            m_hat, nu_hat = m, nu
            if self.bias_correction:
                c = count + info.t if self.count_offset == "round" else count
                m_hat = m / (1 - self.beta1 ** k.unsqueeze(-1))
                nu_hat = nu / (1 - self.beta2 ** c.unsqueeze(-1))
            out = m_hat / (torch.sqrt(nu_hat) + self.eps)
            new["m"] = m
        if self.clip:
            norm = out.norm(dim=-1, keepdim=True)
            skip = (norm > 0) & (norm < self.clip)
            out = torch.where(skip, torch.zeros_like(out), out)
            if self.adam:
                new["m"] = torch.where(skip, torch.zeros_like(out), new["m"])
        return out, new

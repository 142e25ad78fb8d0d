"""Functional, batched update rules (optax-style ``init`` / ``step`` pairs).

Every rule works on a batch of flat parameter vectors ``theta`` of shape ``[B, d]`` with
explicit state (a dict of tensors), so one call advances many clients (or many seeds'
servers) at once and state can be checkpointed. ``step(theta, g, state, mask)`` returns the
new ``(theta, state)``; rows where the boolean ``mask`` is False are left untouched (a
client with no data left in its epoch takes no step).

Conventions are per paper and written on each rule:

* :class:`SGD` -- ``theta - lr * g``.
* :func:`AMSGrad` -- Fed-EF Alg. 2 lines 17-19 (and Fed-LAMB/FedLADA local AMSGrad):
  ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``, ``vhat = max(vhat, v)``,
  ``theta - lr * m / sqrt(vhat + eps)``: epsilon *inside* the square root and no bias
  correction by default (Fed-EF spec 6.3); ``eps_inside_sqrt=False`` gives
  ``m / (sqrt(vhat) + eps)`` and ``bias_correction=True`` the torch.optim convention.
* :func:`Adam` -- the same without the max (``amsgrad=False`` reading of the above).

Both are presets of :class:`AdaptiveRule` (Adam / AMSGrad / AdaGrad / Yogi with every
placement option the papers use), defined below with the other adaptive rules.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def full_like(x: torch.Tensor, value) -> torch.Tensor:
    """``torch.full_like``, also for a tensor ``value`` broadcast over ``x`` (a per-replica
    hyperparameter bound to ``[R, 1]`` rows, :mod:`sims.algorithms.per_replica`)."""
    if torch.is_tensor(value):
        return torch.zeros_like(x).add_(value)
    return torch.full_like(x, value)


def _masked(mask, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    if mask is None:
        return new
    return torch.where(mask.view(-1, *([1] * (new.dim() - 1))), new, old)


class OptimizerError(ValueError):
    """A nonsensical optimizer hyperparameter."""


def _check_positive(**values):
    for key, val in values.items():
        if not val > 0:
            raise OptimizerError(f"{key} must be positive, got {val}")


@dataclass(frozen=True)
class SGD:
    lr: float

    def __post_init__(self):
        _check_positive(lr=self.lr)

    def init(self, theta: torch.Tensor) -> dict:
        return {}

    def direction(self, g: torch.Tensor, state: dict):
        return g, state

    def step(self, theta, g, state, mask=None):
        if torch.is_tensor(self.lr):        # one rate per row ([B, 1], sims.algorithms.per_replica)
            return _masked(mask, theta - self.lr * g, theta), state
        return _masked(mask, torch.add(theta, g, alpha=-self.lr), theta), state


# ---------------------------------------------------------------------------------------
# Appended for the synthetic experiments (FedAda2 heavy-tail section, spec fedada2.md 1.1,
# 1.11 and 2.8). Same ``init`` / ``step`` / ``direction`` protocol as the rules above.

@dataclass(frozen=True)
class AdaGrad:
    """AdaGrad with optional momentum: FedAda2's server update (SU, spec 1.1) and its client
    AGDU with delay ``z = 1`` (Alg. 9, spec 1.11).

    ``v = v + g^2`` (started at ``v0``), ``m = beta1 m + (1 - beta1) g`` and
    ``theta - lr * m / (sqrt(v) + eps)``: epsilon *outside* the square root, no bias
    correction. Client AdaGrad in FedAda2 restarts from ``v0 = 0`` every round (the engine
    or runner calls ``init`` per round); with one local step the step is then the
    normalized gradient ``lr * g / (|g| + eps)``, at most ``lr`` per coordinate. The server
    rule of FedAda2 uses ``v0 >= tau^2`` and ``eps = tau``; each step is then also at most
    ``lr`` per coordinate (FedAda2 Lemma 16).
    """
    lr: float
    eps: float = 1e-8
    beta1: float = 0.0
    v0: float = 0.0

    def __post_init__(self):
        _check_positive(lr=self.lr, eps=self.eps)
        if not 0.0 <= self.beta1 < 1.0:
            raise OptimizerError(f"beta1 must be in [0, 1), got {self.beta1}")
        if self.v0 < 0:
            raise OptimizerError(f"v0 must be >= 0, got {self.v0}")

    def init(self, theta: torch.Tensor) -> dict:
        return {"m": torch.zeros_like(theta), "v": full_like(theta, self.v0)}

    def direction(self, g: torch.Tensor, state: dict):
        v = state["v"] + g * g
        m = self.beta1 * state["m"] + (1 - self.beta1) * g if self.beta1 else g
        return m / (torch.sqrt(v) + self.eps), {"m": m, "v": v}

    def step(self, theta, g, state, mask=None):
        u, new = self.direction(g, state)
        new = {k: _masked(mask, v, state[k]) for k, v in new.items()}
        return _masked(mask, theta - self.lr * u, theta), new


@dataclass(frozen=True)
class ClippedSGD:
    """SGD on the gradient clipped to norm at most ``clip`` (per row): ``theta - lr * g *
    min(1, clip / ||g||)``; the "clipping" control of FedAda2 spec 2.8 (``clip = 1``)."""
    lr: float
    clip: float = 1.0

    def __post_init__(self):
        _check_positive(lr=self.lr, clip=self.clip)

    def init(self, theta: torch.Tensor) -> dict:
        return {}

    def direction(self, g: torch.Tensor, state: dict):
        norm = g.norm(dim=-1, keepdim=True)
        return g * torch.clamp(self.clip / norm.clamp_min(1e-300), max=1.0), state

    def step(self, theta, g, state, mask=None):
        u, _ = self.direction(g, state)
        return _masked(mask, theta - self.lr * u, theta), state


# ---------------------------------------------------------------------------------------
# Appended for the adaptive federated algorithms (sims.algorithms.fed_lamb / fedlada /
# fedada2): a general second-moment rule (Adam / AMSGrad / AdaGrad / Yogi with an initial
# ``v0`` and either epsilon placement), SM3 covers (FedAda2 Alg. 2-4) and the layer-wise
# trust ratio (Fed-LAMB Alg. 2 line 13). Same batched ``[B, d]`` conventions as above.

ADAPTIVE_KINDS = ("adam", "amsgrad", "adagrad", "yogi")


@dataclass(frozen=True)
class AdaptiveRule:
    """Adam / AMSGrad / AdaGrad / Yogi with the options where the papers disagree.

    ``m = beta1 m + (1 - beta1) g`` (``m = g`` when ``beta1 = 0``) and, by ``kind``:

    * ``adam``: ``v = beta2 v + (1 - beta2) g^2`` (FedAdam, Reddi et al. Alg. 2; FedLADA
      Alg. 1; Fed-LAMB Adp-Fed, SUPP Alg. 1 lines 13-15);
    * ``amsgrad``: the same and ``vhat = max(vhat, v)``, used in place of ``v``;
    * ``adagrad``: ``v = v + g^2`` (FedAda2's server update SU, spec 1.1; FedAdaGrad);
    * ``yogi``: ``v = v - (1 - beta2) g^2 sign(v - g^2)`` (FedYogi, Reddi et al. Alg. 2).

    ``v`` (and ``vhat``) start at ``v0`` (Reddi et al. and FedAda2: ``v_{-1} = tau^2``;
    Adp-Fed: ``v_0 = epsilon``). The direction is ``m / (sqrt(v) + eps)`` (``eps = tau``,
    the FedOpt/FedAda2 placement) or ``m / sqrt(v + eps)`` with ``eps_inside_sqrt``;
    ``eps = 0`` is allowed when ``v0 > 0`` (Adp-Fed's literal ``m / sqrt(v)``).
    ``bias_correction`` divides ``m`` by ``1 - beta1^t`` and ``v`` by ``1 - beta2^t``
    (adam / amsgrad / yogi only; off by default as in every paper's server rule).
    """
    lr: float
    kind: str = "adam"
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-3
    v0: float = 0.0
    eps_inside_sqrt: bool = False
    bias_correction: bool = False

    def __post_init__(self):
        _check_positive(lr=self.lr)
        if self.kind not in ADAPTIVE_KINDS:
            raise OptimizerError(f"unknown adaptive rule {self.kind!r}; choose one of "
                                 f"{ADAPTIVE_KINDS}")
        for key in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise OptimizerError(f"{key} must be in [0, 1), got {getattr(self, key)}")
        if self.eps < 0 or self.v0 < 0:
            raise OptimizerError(f"eps and v0 must be >= 0, got eps={self.eps}, v0={self.v0}")
        if self.eps == 0 and self.v0 == 0:
            raise OptimizerError("eps = 0 needs v0 > 0 (the denominator could vanish)")

    @property
    def amsgrad(self) -> bool:
        return self.kind == "amsgrad"

    def init(self, theta: torch.Tensor) -> dict:
        state = {"m": torch.zeros_like(theta), "v": full_like(theta, self.v0),
                 "t": torch.zeros(theta.shape[0], dtype=theta.dtype, device=theta.device)}
        if self.kind == "amsgrad":
            state["vhat"] = full_like(theta, self.v0)
        return state

    def direction(self, g: torch.Tensor, state: dict):
        m = self.beta1 * state["m"] + (1 - self.beta1) * g if self.beta1 else g
        g2 = g * g
        v = state["v"]
        if self.kind == "adagrad":
            v = v + g2
        elif self.kind == "yogi":
            v = v - (1 - self.beta2) * g2 * torch.sign(v - g2)
        else:
            v = self.beta2 * v + (1 - self.beta2) * g2
        t = state["t"] + 1
        new = {"m": m, "v": v, "t": t}
        second = v
        if self.kind == "amsgrad":
            second = new["vhat"] = torch.maximum(state["vhat"], v)
        if self.bias_correction and self.kind != "adagrad":
            t1 = t.unsqueeze(-1)
            m = m / (1 - self.beta1 ** t1)
            second = second / (1 - self.beta2 ** t1)
        if self.eps_inside_sqrt:
            denom = torch.sqrt(second + self.eps)
        else:
            denom = torch.sqrt(second) + self.eps
        return m / denom, new

    def step(self, theta, g, state, mask=None):
        u, new = self.direction(g, state)
        new = {k: _masked(mask, v, state[k]) for k, v in new.items()}
        return _masked(mask, theta - self.lr * u, theta), new


def Adam(lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
         eps_inside_sqrt: bool = True, bias_correction: bool = False,
         amsgrad: bool = False) -> "AdaptiveRule":
    """Adam / AMSGrad with Fed-EF's conventions as defaults (Alg. 2 lines 17-19, spec 6.3):
    epsilon inside the square root, no bias correction, ``v0 = 0``. The torch.optim reading
    is ``eps_inside_sqrt=False, bias_correction=True``."""
    return AdaptiveRule(lr, "amsgrad" if amsgrad else "adam", beta1, beta2, eps, 0.0,
                        eps_inside_sqrt, bias_correction)


def AMSGrad(lr: float, **kw) -> "AdaptiveRule":
    """AMSGrad as in Fed-EF Alg. 2 lines 17-19 (see the module docstring)."""
    return Adam(lr, amsgrad=True, **kw)


SERVER_RULES = {"sgd": SGD, "adam": Adam, "amsgrad": AMSGrad}


def make_rule(name: str, lr: float, **kw):
    if name not in SERVER_RULES:
        raise OptimizerError(f"unknown optimizer {name!r}; choose one of {sorted(SERVER_RULES)}")
    return SERVER_RULES[name](lr, **kw)


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


def layer_segments(layout, device=None) -> torch.Tensor:
    """``seg[j]`` = the layer of coordinate ``j`` (for per-layer sums without a loop)."""
    return torch.repeat_interleave(torch.arange(len(layout.sizes), device=device),
                                   torch.as_tensor(layout.sizes, device=device))


def layer_norms(x: torch.Tensor, layout, seg: torch.Tensor | None = None) -> torch.Tensor:
    """Euclidean norm of each layer of each row: ``[B, d] -> [B, L]``."""
    seg = layer_segments(layout, x.device) if seg is None else seg
    sq = torch.zeros(x.shape[0], len(layout.sizes), dtype=x.dtype, device=x.device)
    return torch.sqrt(sq.index_add_(1, seg, x * x))


PHI_KINDS = ("clip", "identity", "update_norm")


@dataclass(frozen=True)
class TrustRatio:
    """Fed-LAMB's layer-wise normalisation (MAIN Alg. 2 line 13; LAMB, You et al. 2020).

    For each layer ``l``: ``w_l = u_l + lam theta_l`` and the step direction becomes
    ``phi(||theta_l||) w_l / ||w_l||``, so a step of size ``lr`` moves every layer by exactly
    ``lr * phi(||theta_l||)`` (spec P1; a layer with ``w_l = 0`` does not move).

    ``phi``: ``"clip"`` (default) ``min(max(z, phi_min), phi_max)`` -- bounded as H4 requires,
    and layers at 0 (biases) still move; ``"identity"`` (the text's "can be set to the identity
    function"; zero layers then never move); ``"update_norm"`` replaces ``phi(||theta_l||)`` by
    ``||u_l||`` (not allowed by H4; with ``lam = 0`` the step is then ``u`` itself, which is how
    Fed-LAMB reduces to Fed-AMS, spec P3).
    """
    phi: str = "clip"
    phi_min: float = 1e-3
    phi_max: float = 10.0
    lam: float = 0.0

    def __post_init__(self):
        if self.phi not in PHI_KINDS:
            raise OptimizerError(f"unknown phi {self.phi!r}; choose one of {PHI_KINDS}")
        if not 0 < self.phi_min <= self.phi_max:
            raise OptimizerError(f"need 0 < phi_min <= phi_max, got {self.phi_min}, "
                                 f"{self.phi_max}")
        if self.lam < 0:
            raise OptimizerError(f"lambda must be >= 0, got {self.lam}")

    def __call__(self, theta: torch.Tensor, u: torch.Tensor, layout,
                 seg: torch.Tensor | None = None) -> torch.Tensor:
        seg = layer_segments(layout, theta.device) if seg is None else seg
        w = u + self.lam * theta if self.lam else u
        w_norm = layer_norms(w, layout, seg)
        if self.phi == "update_norm":
            scale = layer_norms(u, layout, seg)
        else:
            scale = layer_norms(theta, layout, seg)
            if self.phi == "clip":
                scale = scale.clamp(self.phi_min, self.phi_max)
        ratio = torch.where(w_norm > 0, scale / torch.where(w_norm > 0, w_norm, 1.0),
                            torch.zeros_like(w_norm))
        return w * ratio[:, seg]

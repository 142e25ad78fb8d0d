"""Small transforms that add a term to the update or rescale it.

* :class:`AddDecayedWeights` -- ``u + wd theta`` (L2 weight decay: before the moments it is
  "coupled", torch.optim's ``weight_decay``; after them "decoupled", AdamW's);
* :class:`Proximal` -- ``u + mu (theta - theta_t)``, FedProx's proximal term (Li et al. 2020);
* :class:`Amend` -- ``alpha u + (1 - alpha) g_a`` with the broadcast global direction ``g_a``
  (FedCM, Xu et al. 2021; FedLADA Alg. 3 line 12);
* :class:`ControlVariate` -- ``u + alpha (c - c_i)``, SCAFFOLD's correction (Karimireddy et
  al. 2020, Eq. 22; FedLADA's alpha-scaled Eq. 26);
* :class:`SVRG` -- ``u - grad f_i(x; z) + c``, Mime's correction (Karimireddy et al.,
  arXiv 2008.03606, Alg. 1), with the engine's anchor gradient;
* :class:`FirstGradient` -- keeps the round's first update (the gradient at the round's start
  model: MimeLite's and SCAFFOLD option I's ``g(x^t)``) as state ``gx``;
* :class:`Warmup` -- ``min(1, k / steps) u`` at local step ``k``: a linear warm-up of the local
  rate (FedAda2 App. H.2);
* :class:`ClipByNorm` -- ``u min(1, clip / ||u||)`` per row (FedAda2 spec 2.8's clipped SGD).

:class:`AffineSGD` is local SGD with only such linear terms written as one affine step per
round, the form the problems' fused local-SGD kernels take.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import OptimizerError, Rows, Transform, check_positive


@dataclass(frozen=True)
class AddDecayedWeights(Transform):
    weight_decay: float = 0.0

    def update(self, u, state, theta, info):
        return u + self.weight_decay * theta, {}


@dataclass(frozen=True)
class Proximal(Transform):
    """``u + mu (theta - theta_t)``: the gradient of FedProx's ``F_i(x) + mu/2 ||x - x^t||^2``
    with ``theta_t = info.bcast["theta"]``, the round's start model."""
    mu: float = 0.0

    def update(self, u, state, theta, info):
        return u + self.mu * (theta - info.bcast["theta"]), {}


@dataclass(frozen=True)
class Amend(Transform):
    """``alpha u + (1 - alpha) g_a`` with ``g_a = info.bcast[key]``, the broadcast global
    direction (not preconditioned)."""
    alpha: float = 1.0
    key: str = "ga"

    def update(self, u, state, theta, info):
        return self.alpha * u + (1 - self.alpha) * info.bcast[self.key], {}


@dataclass(frozen=True)
class ControlVariate(Transform):
    """``u + alpha (c - c_i)``: the server control ``c = info.bcast["c"]`` and the client's own
    ``c_i = info.cstate["c"]``."""
    alpha: float = 1.0

    def update(self, u, state, theta, info):
        return u + self.alpha * (info.bcast["c"] - info.cstate["c"]), {}


@dataclass(frozen=True)
class SVRG(Transform):
    """``(u - grad f_i(x; z)) + c``: the anchor gradient at the round's start model ``x`` on
    this step's minibatch (``info.extra["anchor_grad"]``, which the engine computes for an
    algorithm with ``needs_anchor_grad``) and the broadcast ``c = info.bcast["c"]``."""

    def update(self, u, state, theta, info):
        return (u - info.extra["anchor_grad"]) + info.bcast["c"], {}


@dataclass(frozen=True)
class FirstGradient(Transform):
    """The update unchanged; state ``gx`` is the update of each row's first local step."""

    keys = ("gx",)

    def init(self, like, **given) -> dict:
        return {"gx": Rows.of(like).zeros(), **given}

    def update(self, u, state, theta, info):
        first = (info.k == 0).unsqueeze(-1)
        return u, {"gx": torch.where(first, u, state["gx"])}


@dataclass(frozen=True)
class Warmup(Transform):
    """``min(1, k / steps) u`` at local step ``k = info.k + 1`` (1-based): a linear warm-up
    from 0 over the first ``steps`` local steps, read so that the first step already moves
    (FedAda2 App. H.2, its ViT runs: "linear warm-up from 0 over the first 10 local backprop
    steps"); ``steps = 0``: no warm-up."""
    steps: int = 0

    def __post_init__(self):
        if int(self.steps) != self.steps or self.steps < 0:
            raise OptimizerError(f"local_warmup must be an integer >= 0 (local steps), got "
                                 f"{self.steps}")

    def update(self, u, state, theta, info):
        if not self.steps:
            return u, {}
        return torch.clamp((info.k + 1) / self.steps, max=1.0).unsqueeze(-1) * u, {}


@dataclass(frozen=True)
class ClipByNorm(Transform):
    """``u min(1, clip / ||u||)`` per row."""
    clip: float = 1.0

    def __post_init__(self):
        check_positive(clip=self.clip)

    def update(self, u, state, theta, info):
        norm = u.norm(dim=-1, keepdim=True)
        return u * torch.clamp(self.clip / norm.clamp_min(1e-300), max=1.0), {}


@dataclass(frozen=True)
class AffineSGD:
    """Local SGD with linear terms only, one valid step being ``theta <- (1 - decay) theta -
    lr g(theta) + shift``: weight decay, FedProx's proximal term, FedCM's amendment and
    SCAFFOLD's correction all take this form, so the problems' fused local-SGD kernels run
    them (:func:`sims.problems.linear_stack.linear_stack_sgd_`). ``lr`` and ``decay`` are
    numbers or ``[B, 1]`` tensors, ``shift`` ``[B, d]`` or None. :meth:`step` is the readable
    step the fused kernels are tested against."""
    lr: object
    decay: object = 0.0
    shift: torch.Tensor | None = None

    @property
    def plain(self) -> bool:
        """Plain SGD (no decay, no shift): the problems' plain fused paths apply."""
        return self.shift is None and not torch.is_tensor(self.decay) and self.decay == 0

    def step(self, theta, g, mask=None):
        new = (1 - self.decay) * theta - self.lr * g
        if self.shift is not None:
            new = new + self.shift
        if mask is None:
            return new
        return torch.where(mask.view(-1, 1), new, theta)

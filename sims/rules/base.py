"""Update rules as small composable transforms (in the spirit of optax's ``GradientTransformation``).

Everything is batched: ``theta`` and the update ``u`` are ``[B, d]`` (one row per participant
of a chunk, or per replica on the server), and a rule's state is a dict of ``[B, ...]``
tensors, so checkpointing is saving a dict. A **transform** has two methods:

``init(like, **given) -> dict``
    Its state at the start (a client's round, or a run on the server): zeros unless the
    transform says otherwise; ``given`` entries (the paper's own start, e.g. FedLADA's
    ``v_0 = vhat_0 = v^t``) replace the defaults of those names. ``like`` is a
    :class:`Rows` (or a ``[B, d]`` tensor): the number of rows, ``d``, dtype and device.
``update(u, state, theta, info) -> (u, new)``
    The transformed update and the transform's new state entries (``new`` holds only its
    own keys). ``theta`` is the current ``[B, d]`` model, ``info`` a :class:`StepInfo`
    (round, step counts, layer layout, the broadcast and client state rows) or None
    where the transform needs none of it.

:func:`chain` composes transforms left to right (their state is one flat dict; a key belongs
to one transform). A client rule is a chain; one local step of it is :func:`local_step`::

    u, state = rule.update(g, state, theta, info)      # g: the stochastic gradient
    theta    = theta - lr * u                           # rows where mask is False keep theta

with ``lr`` the round's local rate (a number, or ``[B, 1]`` per-replica rates). So Fed-LAMB's
client is ``chain(Adaptive("amsgrad", ...), TrustRatio(...))`` and FedLADA's
``chain(Adaptive("amsgrad", ...), Amend(alpha))``: a researcher's twist is one new transform.

How the steps are executed is not a rule's business: an algorithm's local step hands its rule
to the round's executor (:attr:`sims.core.context.RoundContext.run`), which is
:data:`READABLE` (:func:`local_step` itself) unless the engine planned a fast form for that
rule (:mod:`sims.accel`); every fast form is held to :func:`local_step` by the tests.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch


class OptimizerError(ValueError):
    """A nonsensical rule hyperparameter (one line)."""


def check_positive(**values) -> None:
    for key, val in values.items():
        if not val > 0:
            raise OptimizerError(f"{key} must be positive, got {val}")


def check_beta(**values) -> None:
    for key, val in values.items():
        if not 0.0 <= val < 1.0:
            raise OptimizerError(f"{key} must be in [0, 1), got {val}")


@dataclass(frozen=True)
class Rows:
    """The shape of a rule's rows: ``B`` rows of length ``d``, dtype and device (and the
    layer layout, for rules whose state is per layer)."""
    B: int
    d: int
    dtype: torch.dtype
    device: torch.device
    layout: object = None

    @classmethod
    def of(cls, like, layout=None) -> "Rows":
        if isinstance(like, Rows):
            return like
        return cls(like.shape[0], like.shape[-1], like.dtype, like.device, layout)

    def zeros(self, width: int | None = None) -> torch.Tensor:
        return torch.zeros(self.B, self.d if width is None else width, dtype=self.dtype,
                           device=self.device)

    def full(self, value) -> torch.Tensor:
        """``[B, d]`` filled with ``value`` (a number, or a tensor broadcast over the rows:
        a per-replica hyperparameter bound to ``[B, 1]``)."""
        if torch.is_tensor(value):
            return self.zeros().add_(value)
        return torch.full((self.B, self.d), value, dtype=self.dtype, device=self.device)

    def counts(self) -> torch.Tensor:
        """``[B]`` zeros: a count per row."""
        return torch.zeros(self.B, dtype=self.dtype, device=self.device)


@dataclass
class StepInfo:
    """What a transform may read besides the update, its state and ``theta``.

    ``k``: ``[B]`` local steps each row has taken this round before this one (so this step
    is number ``k + 1``); ``t``: the round (0-based); ``layout``: the layer layout
    (:class:`sims.core.params.ParamLayout`); ``bcast`` / ``cstate``: the rows' broadcast
    and client state (mappings of ``[B, ...]`` rows); ``clients``: ``[B]`` client ids;
    ``extra``: the engine's per-step extras (``"anchor_grad"``: Mime's gradient at the
    round's start model on the same minibatch; ``"epoch_steps"``: steps per local epoch)."""
    k: torch.Tensor
    t: int = 0
    layout: object = None
    bcast: Mapping = field(default_factory=dict)
    cstate: Mapping = field(default_factory=dict)
    clients: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)

    def rows(self, idx: torch.Tensor) -> "StepInfo":
        """The same for the rows ``idx`` only (a mixture's member, :mod:`.mixture`)."""
        def pick(x):
            return x.index_select(0, idx) if torch.is_tensor(x) and x.dim() > 0 else x
        return StepInfo(pick(self.k), self.t, self.layout, _Picked(self.bcast, idx),
                        _Picked(self.cstate, idx), pick(self.clients),
                        {key: pick(val) for key, val in self.extra.items()})


class _Picked(Mapping):
    """Rows ``idx`` of a mapping of ``[B, ...]`` rows, each picked on first use."""

    def __init__(self, rows: Mapping, idx: torch.Tensor):
        self._rows, self._idx, self._got = rows, idx, {}

    def __getitem__(self, key):
        if key not in self._got:
            self._got[key] = self._rows[key].index_select(0, self._idx)
        return self._got[key]

    def __iter__(self):
        return iter(self._rows)

    def __len__(self):
        return len(self._rows)


class Transform:
    """Base class of the transforms (see the module docstring): no state, ``u`` unchanged."""

    #: the state entries this transform owns
    keys: tuple = ()

    def init(self, like, **given) -> dict:
        return {}

    def update(self, u, state, theta, info):
        return u, {}


@dataclass(frozen=True)
class Chain(Transform):
    """Transforms applied left to right; their states as one flat dict (see :func:`chain`)."""
    transforms: tuple

    def __post_init__(self):
        seen = set()
        for tr in self.transforms:
            clash = seen & set(tr.keys)
            if clash:
                raise OptimizerError(f"two transforms of one chain keep {sorted(clash)}")
            seen |= set(tr.keys)

    @property
    def keys(self) -> tuple:
        return tuple(k for tr in self.transforms for k in tr.keys)

    def init(self, like, **given) -> dict:
        unknown = set(given) - set(self.keys)
        if unknown:
            raise OptimizerError(f"no transform of this chain keeps {sorted(unknown)}")
        state = {}
        for tr in self.transforms:
            state.update(tr.init(like, **{k: v for k, v in given.items() if k in tr.keys}))
        return state

    def update(self, u, state, theta, info):
        new = {}
        for tr in self.transforms:
            u, got = tr.update(u, state, theta, info)
            if got:
                state = {**state, **got}
                new.update(got)
        return u, new

    def __iter__(self):
        return iter(self.transforms)

    def __len__(self):
        return len(self.transforms)


def chain(*transforms) -> Chain:
    """``transforms`` applied left to right, nested chains flattened (``chain()``: plain SGD,
    the update is the gradient)."""
    flat = []
    for tr in transforms:
        flat.extend(tr.transforms if isinstance(tr, Chain) else (tr,))
    return Chain(tuple(flat))


def masked(mask, new, old):
    """Rows of ``new`` where ``mask`` ([B] bool; None: all) else ``old``; dicts and lists of
    tensors entry by entry."""
    if mask is None:
        return new
    if isinstance(new, dict):
        return {k: masked(mask, v, old[k]) for k, v in new.items()}
    if isinstance(new, list):
        return [masked(mask, v, o) for v, o in zip(new, old)]
    if not torch.is_tensor(new) or new.dim() == 0:
        return new
    return torch.where(mask.view(-1, *([1] * (new.dim() - 1))), new, old)


def start(rule: Chain, like, **given) -> dict:
    """A client's state at the start of its round: ``rule.init(like, **given)`` and ``k``,
    the local steps taken so far (zeros)."""
    return {"k": Rows.of(like).counts(), **rule.init(like, **given)}


def local_step(rule: Chain, theta, g, state, lr, mask=None, info=None):
    """One local step of ``rule`` (module docstring): ``theta - lr * rule(g)`` and the new
    state, ``k`` counted; rows where ``mask`` is False keep ``theta`` and their state."""
    u, new = rule.update(g, state, theta, info)
    k = state["k"] + (1 if mask is None else mask.to(state["k"].dtype))
    new_theta = theta - lr * u
    return masked(mask, new_theta, theta), {**state, **masked(mask, new, state), "k": k}


class Readable:
    """The executor of the readable rules: every step is :func:`local_step` (the default of
    every round context; :mod:`sims.accel` plans fast forms behind the same methods)."""

    name = "readable"

    def step(self, rule, theta, g, state, lr, mask, info, owned=False):
        return local_step(rule, theta, g, state, lr, mask, info)

    def local_round(self, rule, lr, problem, bcast, b_cast, c_state, ctx, payload, mask):
        """A whole local round at once: none here (the engine steps through the rule)."""
        return None

    def error_feedback(self, compressor, x, error, layout, u=None, zero=None):
        from .compress import error_feedback
        return error_feedback(compressor, x, error, layout, u, zero)

    def compress(self, compressor, x, layout, u=None):
        return compressor(x, layout, u)


READABLE = Readable()


@dataclass(frozen=True)
class Optimizer:
    """A rule with its learning rate, for loops outside the engine (the Monte-Carlo runner):
    ``state = opt.init(theta)``, ``theta, state = opt.step(theta, g, state)``."""
    rule: Chain
    lr: float

    def init(self, theta) -> dict:
        return start(self.rule, theta)

    def step(self, theta, g, state, mask=None, info=None):
        if info is None:
            info = StepInfo(state["k"])
        return local_step(self.rule, theta, g, state, self.lr, mask, info)

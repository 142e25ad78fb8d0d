"""Which tensors a local step may overwrite in place (issue 16): the engine's contract.

The in-place fast local steps (:mod:`sims.torch_fused`'s kernels, :mod:`sims.compiled`,
:func:`sims.rules.optim.local_adaptive_step`, the algorithms' ``_torch_fused_step`` forms) write
``theta`` and the local state into the tensors they are handed when the caller owns them,
and copy them first (one read and one write of ``[B, d]`` each) when it does not. The engine
(:func:`sims.core.engine._run_clients`) says what it owns in ``ctx.extra``, every local step:

* ``"owned_theta"`` True: ``theta`` is the engine's own at every step: at a round's first
  step the chunk's fresh copy of the server models (``start_rows``; the broadcast
  ``bcast["theta"]`` is another tensor), after it what the previous step returned;
* ``"owned_state"`` True from a round's second step on: the local state is what the
  previous step returned, held by no one else (and ``theta`` too);
* ``"owned_start"`` True on a round's first step: the local state is what the algorithm's
  ``local_start`` returned, handed on unchanged. Which of its entries are fresh tensors that
  nothing else reads is the algorithm's to say (:meth:`sims.algorithms.base.Algorithm.
  owned_start_keys`): zeros made there, or values computed from the broadcast, are; the
  broadcast's gathered rows (``bcast[key]``, the engine's cache for the whole chunk) never
  are; the chunk's gathered client state (``cstate[key]``, a copy the engine writes back
  only from ``client_message``'s result) is where the algorithm's own hooks read it through
  no other name.

A caller that says nothing (the readable reference runs, probes, tests) owns nothing: every
fast path then copies what it writes. :func:`step_owned` reads the flags into an
:class:`Owned`, the one value the fast paths take (a plain bool still means "everything" or
"nothing", as before this module).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Owned:
    """What a step may overwrite: ``theta`` (``theta``) and the local state's entries
    (``state``: True for all of them, else the set of their keys). Not a bool (``bool()``
    raises): ask :attr:`theta` or ``own(key)``."""
    theta: bool = False
    state: bool | frozenset = frozenset()

    def __call__(self, key: str) -> bool:
        """Whether the state's entry ``key`` may be overwritten."""
        return self.state is True or (self.state is not False and key in self.state)

    def __bool__(self):
        raise TypeError("an Owned is not a bool: ask .theta or own(key)")

    def plus(self, *keys: str) -> "Owned":
        """The same, and ``keys`` owned too (e.g. a tensor the step just made itself)."""
        if self.state is True:
            return self
        return Owned(self.theta, frozenset(self.state or ()) | frozenset(keys))

    @classmethod
    def of(cls, owned) -> "Owned":
        """``owned`` as an :class:`Owned`: a bool means ``theta`` and every state entry (or
        none of them), the contract of ``owned_state`` alone."""
        if isinstance(owned, Owned):
            return owned
        return cls(True, True) if owned else cls()


NOTHING = Owned()
EVERYTHING = Owned(True, True)


def step_owned(ctx, fresh=frozenset()) -> Owned:
    """The ownership of this local step from the engine's flags in ``ctx.extra`` (module
    docstring) and ``fresh``, the keys of ``local_start``'s state that the algorithm declares
    its own (read only on a first step, ``"owned_start"``). Absent flags: nothing owned."""
    extra = ctx.extra
    if extra.get("owned_state", False):
        return EVERYTHING
    theta = bool(extra.get("owned_theta", False))
    state = frozenset(fresh) if extra.get("owned_start", False) else frozenset()
    return Owned(theta, state)

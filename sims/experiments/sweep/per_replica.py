"""Hyperparameters with one value per replica: grid points as replicas of one batched run.

The engine runs replicas (independent seeds of one configuration) side by side. Grid points
of a sweep that differ only in *numeric* hyperparameters (learning rates, betas,
epsilon/tau, alpha, lambda, weight decay, ...) can run the same way when every replica also
has its own values. This module does that for every registry algorithm with one mechanism
and no per-algorithm code:

* :class:`PerReplica` holds one float per replica. An algorithm is built with it in place of
  a float (``make_algorithm("fed-lamb", eta_l=PerReplica([1e-3, 1e-2]))``); its
  ``__post_init__`` checks and sub-rules (``SGD(self.eta_l)``, ``LocalAdaptive(beta1=...)``,
  ``tau * tau``) run on it unchanged: arithmetic is elementwise, and a comparison or truth
  test gives the common answer of all replicas (raising :class:`MixedReplicaValues` with
  the replicas' split when they disagree, e.g. ``alpha`` 1 and 0.5 give FedLADA different
  state: such points are run as separate batches).
* :class:`ReplicaAlgorithm` wraps the algorithm and, around every hook the engine calls,
  binds each :class:`PerReplica` (also inside sub-rules and member lists) to a tensor of the
  replicas' values: ``[R, 1]`` for the server hooks (``init_server``, ``round_gradient``,
  ``broadcast``, ``server_step``) and ``[B, 1]``, participant ``b``'s own replica's value,
  for the client hooks (``local_start``, ``local_step``, ``client_message``, from
  ``ctx.replica``). Every rule written as ``hyper * tensor[.., d]`` then runs per replica.
  The bound tensor keeps truth tests defined (common answer, or :class:`MixedReplicaValues`).
* The fused local-SGD rounds get the client rule and rate from ``local_rule_at`` (a client
  hook, so bound to ``[B, 1]``) and the problems' fused kernels scale each participant's
  step by its own rate.

:func:`batched_algorithm` builds the wrapper from a list of per-replica settings (each one
validated as a separate algorithm first, so a bad value fails with the registry's one-line
error). Held to separate runs in float64 by ``tests/test_sweep_replicas.py`` for all
registry algorithms (a rule written as ``hyper ** n`` with ``n`` a ``[B]`` step count must
unsqueeze ``n`` first, which the algorithms here do).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import operator

import numpy as np
import torch


class MixedReplicaValues(ValueError):
    """A truth test on a per-replica hyperparameter whose replicas disagree (their
    computations would take different branches). ``pattern[r]`` is replica ``r``'s answer;
    the caller runs the two groups separately."""

    def __init__(self, pattern, what: str = "a per-replica hyperparameter"):
        self.pattern = np.asarray(pattern, dtype=bool)
        super().__init__(f"{what} takes different branches across replicas "
                         f"({int(self.pattern.sum())} of {len(self.pattern)} true); run them "
                         "as separate batches")


def _decide(pattern: np.ndarray, what: str) -> bool:
    if pattern.all():
        return True
    if not pattern.any():
        return False
    raise MixedReplicaValues(pattern, what)


class PerReplica:
    """One float per replica, standing in for a float hyperparameter (see module doc)."""

    __slots__ = ("values", "_tensors")

    def __init__(self, values):
        vals = tuple(float(v) for v in values)
        if not vals:
            raise ValueError("PerReplica needs at least one value")
        self.values = vals
        self._tensors = {}

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"PerReplica({list(self.values)!r})"

    def __reduce__(self):
        return (PerReplica, (self.values,))

    def __hash__(self):
        return hash(("PerReplica", self.values))

    # ------------------------------------------------------------- arithmetic (elementwise)
    def _other(self, other):
        if isinstance(other, PerReplica):
            if len(other) != len(self):
                raise ValueError(f"PerReplica lengths differ: {len(self)} and {len(other)}")
            return other.values
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return (float(other),) * len(self)
        return None

    def _op(self, other, fn, reflected=False):
        vals = self._other(other)
        if vals is None:
            return NotImplemented
        pairs = zip(vals, self.values) if reflected else zip(self.values, vals)
        return PerReplica(fn(a, b) for a, b in pairs)

    def __add__(self, o): return self._op(o, operator.add)
    def __radd__(self, o): return self._op(o, operator.add, True)
    def __sub__(self, o): return self._op(o, operator.sub)
    def __rsub__(self, o): return self._op(o, operator.sub, True)
    def __mul__(self, o): return self._op(o, operator.mul)
    def __rmul__(self, o): return self._op(o, operator.mul, True)
    def __truediv__(self, o): return self._op(o, operator.truediv)
    def __rtruediv__(self, o): return self._op(o, operator.truediv, True)
    def __pow__(self, o): return self._op(o, operator.pow)
    def __rpow__(self, o): return self._op(o, operator.pow, True)
    def __neg__(self): return PerReplica(-v for v in self.values)
    def __pos__(self): return self
    def __abs__(self): return PerReplica(abs(v) for v in self.values)

    # ------------------------------------------------------------- truth (common answer)
    def _cmp(self, other, fn, name):
        vals = self._other(other)
        if vals is None:
            return NotImplemented
        return _decide(np.array([fn(a, b) for a, b in zip(self.values, vals)]),
                       f"comparison {name} {other!r}")

    def __eq__(self, o): return self._cmp(o, operator.eq, "==")
    def __ne__(self, o): return self._cmp(o, operator.ne, "!=")
    def __lt__(self, o): return self._cmp(o, operator.lt, "<")
    def __le__(self, o): return self._cmp(o, operator.le, "<=")
    def __gt__(self, o): return self._cmp(o, operator.gt, ">")
    def __ge__(self, o): return self._cmp(o, operator.ge, ">=")

    def __bool__(self):
        return _decide(np.array([v != 0 for v in self.values]), f"truth of {self!r}")

    def __float__(self):
        if len(set(self.values)) == 1:
            return self.values[0]
        raise MixedReplicaValues(np.array(self.values) != self.values[0],
                                 f"float({self!r})")

    def __int__(self):
        return int(float(self))

    def is_integer(self):
        return all(float(v).is_integer() for v in self.values)

    # ------------------------------------------------------------- binding to tensors
    def tensor(self, like: torch.Tensor) -> torch.Tensor:
        """The values as a ``[R]`` tensor of ``like``'s dtype and device (cached)."""
        key = (like.dtype, like.device)
        if key not in self._tensors:
            self._tensors[key] = torch.tensor(self.values, dtype=like.dtype, device=like.device)
        return self._tensors[key]

    def rows(self, replica: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
        """``[B, 1]`` values of the replicas ``replica[B]`` (``None``: all, ``[R, 1]``)."""
        vals = self.tensor(like)
        index = (torch.arange(len(self), device=like.device) if replica is None
                 else replica.to(like.device))
        out = vals.index_select(0, index).unsqueeze(-1).as_subclass(Bound)
        out._replicas = index
        out._n_replicas = len(self)
        return out


_COMPARISONS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                "eq", "ne", "lt", "le", "gt", "ge"}


class Bound(torch.Tensor):
    """A :class:`PerReplica` bound to rows (``[B, 1]``): a plain tensor in arithmetic (the
    results are plain tensors), with truth tests that give the rows' common answer."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _COMPARISONS and isinstance(out, torch.Tensor):
                src = next(a for a in args if isinstance(a, Bound))
                out = out.as_subclass(Bound)
                out._replicas, out._n_replicas = src._replicas, src._n_replicas
        return out

    def __bool__(self):
        with torch._C.DisableTorchFunctionSubclass():
            rows = (self != 0).reshape(self.shape[0], -1).all(1).cpu().numpy()
            if rows.all() or not rows.any():
                return bool(rows.all())
            pattern = np.zeros(self._n_replicas, dtype=bool)
            pattern[self._replicas.cpu().numpy()[rows]] = True
        raise MixedReplicaValues(pattern, "a truth test on a per-replica hyperparameter")


# ----------------------------------------------------------------------------- the wrapper

def _is_ours(obj) -> bool:
    mod = type(obj).__module__ or ""
    return mod == "sims" or mod.startswith("sims.")


def _contains(obj, seen=None) -> bool:
    """Whether ``obj`` (an attribute value) holds a :class:`PerReplica` anywhere inside."""
    if isinstance(obj, PerReplica):
        return True
    if isinstance(obj, (torch.Tensor, str, bytes, int, float, type(None))):
        return False
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        return any(_contains(v, seen) for v in obj)
    if isinstance(obj, dict):
        return any(_contains(v, seen) for v in obj.values())
    if _is_ours(obj) and hasattr(obj, "__dict__"):
        return any(_contains(v, seen) for v in vars(obj).values())
    return False


def _bind(obj, replica, like):
    """A copy of ``obj`` with every :class:`PerReplica` inside bound to rows (shallow copies
    of the containers and objects on the way; everything else shared)."""
    if isinstance(obj, PerReplica):
        return obj.rows(replica, like)
    if not _contains(obj):
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_bind(v, replica, like) for v in obj)
    if isinstance(obj, dict):
        return {k: _bind(v, replica, like) for k, v in obj.items()}
    new = copy.copy(obj)
    for k, v in vars(obj).items():
        if _contains(v):
            object.__setattr__(new, k, _bind(v, replica, like))
    return new


def _plain(obj):
    """``obj`` with :class:`PerReplica` values written as lists (for ``describe``)."""
    if isinstance(obj, PerReplica):
        return list(obj.values)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


class ReplicaAlgorithm:
    """``inner`` with its :class:`PerReplica` hyperparameters bound around every hook (see the
    module docstring). Everything else (flags, bit counts, ``client_state_spec``,
    ``local_rule``) is the inner algorithm's."""

    def __init__(self, inner, n_replicas: int):
        self.inner = inner
        self.n_replicas = int(n_replicas)
        self._originals = {k: v for k, v in vars(inner).items() if _contains(v)}
        lengths = {len(p) for p in _walk(self._originals)}
        if lengths - {self.n_replicas}:
            raise ValueError(f"per-replica values of lengths {sorted(lengths)} for "
                             f"{self.n_replicas} replicas")
        self._like = None
        self._cache_key, self._cache = None, None

    def __getattr__(self, name):
        return getattr(self.__dict__["inner"], name)

    def _attrs(self, replica):
        if self._cache_key is not replica:
            self._cache = {k: _bind(v, replica, self._like) for k, v in self._originals.items()}
            self._cache_key = replica
        return self._cache

    def _call(self, hook, replica, *args):
        inner = self.inner
        for k, v in self._attrs(replica).items():
            object.__setattr__(inner, k, v)
        try:
            return getattr(inner, hook)(*args)
        finally:
            for k, v in self._originals.items():
                object.__setattr__(inner, k, v)

    # ------------------------------------------------------------- server hooks: [R, 1]
    def init_server(self, theta0):
        if theta0.shape[0] != self.n_replicas:
            raise ValueError(f"{self.n_replicas} per-replica settings for {theta0.shape[0]} "
                             "replicas (give one seed per setting)")
        self._like = theta0
        self._server_key = torch.arange(self.n_replicas, device=theta0.device)
        self._cache_key = None
        return self._call("init_server", self._server_key, theta0)

    def round_gradient(self, server, mean_grad, active):
        return self._call("round_gradient", self._server_key, server, mean_grad, active)

    def broadcast(self, server):
        return self._call("broadcast", self._server_key, server)

    def server_step(self, server, mean_message, sums, active, ctx):
        return self._call("server_step", self._server_key, server, mean_message, sums, active,
                          ctx)

    # ------------------------------------------------------------- client hooks: [B, 1]
    def local_start(self, bcast, cstate, ctx):
        return self._call("local_start", ctx.replica, bcast, cstate, ctx)

    def local_rule_at(self, ctx):
        return self._call("local_rule_at", ctx.replica, ctx)

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        return self._call("local_step", ctx.replica, theta, grad, lstate, bcast, cstate, mask,
                          ctx)

    def client_message(self, delta, lstate, cstate, ctx):
        return self._call("client_message", ctx.replica, delta, lstate, cstate, ctx)

    def describe(self) -> dict:
        return {**_plain(self.inner.describe()), "per_replica": sorted(self._originals)}


def _walk(obj, seen=None):
    """Every :class:`PerReplica` inside ``obj``."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, PerReplica):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _walk(v, seen)
    elif _is_ours(obj) and hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            yield from _walk(v, seen)


# ----------------------------------------------------------------------------- building

def _field_types(name: str) -> dict[str, str]:
    from ...algorithms.fed_ef import FedEF
    from ...algorithms.registry import lookup
    make = lookup(name)
    cls = FedEF if getattr(make, "fed_ef_fields", False) else make
    if not dataclasses.is_dataclass(cls):           # a plug-in's plain factory
        import inspect
        return {k: str(p.annotation) for k, p in inspect.signature(cls).parameters.items()}
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def numeric_hyperparameters(name: str) -> set[str]:
    """The hyperparameters of ``name`` that can differ per replica: those whose default is a
    float, or None with a float annotation (``v0: float | None``). Integers (``delay``,
    ``restart_period``), flags and strings change the computation's structure."""
    from ...algorithms.registry import hyperparameters
    types = _field_types(name)
    out = set()
    for key, default in hyperparameters(name).items():
        if isinstance(default, float) or (default is None and "float" in types.get(key, "")):
            out.add(key)
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and math.isfinite(float(v))


def batched_algorithm(name: str, settings: list[dict]):
    """One algorithm running ``len(settings)`` replicas, replica ``r`` with hyperparameters
    ``settings[r]``: a :class:`ReplicaAlgorithm` when they differ in numeric hyperparameters,
    the plain algorithm when they are all equal. Every setting is first built on its own
    (the registry's one-line errors); settings that differ in anything not numeric raise
    :class:`sims.algorithms.registry.AlgorithmError`."""
    from ...algorithms.registry import (AlgorithmError, canonical, hyperparameters, lookup,
                                       make_algorithm)
    if not settings:
        raise AlgorithmError("batched_algorithm needs at least one setting")
    for s in settings:
        make_algorithm(name, **s)
    defaults = hyperparameters(name)
    numeric = numeric_hyperparameters(name)
    keys = sorted(set().union(*settings))
    merged = {}
    for key in keys:
        vals = [s.get(key, defaults.get(key)) for s in settings]
        if all(v == vals[0] and type(v) is type(vals[0]) for v in vals):
            merged[key] = vals[0]
        elif key in numeric and all(_is_number(v) for v in vals):
            merged[key] = PerReplica(vals)
        else:
            raise AlgorithmError(f"{canonical(name)}: {key} differs across the batch "
                                 f"({vals}) and is not a numeric hyperparameter; run such "
                                 "settings separately")
    if not any(isinstance(v, PerReplica) for v in merged.values()):
        return make_algorithm(name, **merged)
    # the maker itself: a MixedReplicaValues from a check must reach the caller as such
    alg = lookup(name)(**merged)
    return ReplicaAlgorithm(alg, len(settings))

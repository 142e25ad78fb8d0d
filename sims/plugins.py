"""Your own algorithms, problems and models, from outside the package.

::

    import sims
    from dataclasses import dataclass
    from sims.algorithms.baselines import FedOpt

    @dataclass
    class MyFedAvgM(FedOpt):
        name = "my-fedavgm"
        ...

    sims.register("algorithm", "my-fedavgm", MyFedAvgM, description="FedAvg + momentum")

* :func:`register` puts a factory into the registry of its kind: ``"algorithm"``
  (:mod:`sims.algorithms.registry`; every command, sweep and grid then takes the name),
  ``"problem"`` (:mod:`sims.problems.registry`; ``--problem NAME``) or ``"model"``
  (:data:`sims.problems.models.MODELS`; ``--problem DATASET-NAME``). A name already taken is
  a one-line :class:`PluginError` unless ``replace=True``.
* :func:`import_modules` imports modules (dotted names, or paths to ``.py`` files or
  package folders) that register things when imported: what ``--import MODULE`` does.
  Their sources are hashed into every run's code digest (:func:`plugin_sources`,
  :func:`sims.store.identity.code_digest`), so editing a plug-in recomputes its runs, and
  they are imported on every Ray worker before a sweep's cell runs there.
* Installed packages declare plug-in modules in the entry-point group
  ``fedtoolkit.plugins`` (``[project.entry-points."fedtoolkit.plugins"] mylab =
  "mylab.fedtoolkit_plugin"``); the registries import them once, on first use.

An algorithm factory is best a ``@dataclass`` subclass of
:class:`sims.algorithms.base.Algorithm`: its fields are its hyperparameters (``--algorithms
NAME:key=value``, ``--grid``, per-replica batched sweeps of its float fields), and its
``describe()`` should return them (:func:`sims.algorithms.base.describe_dataclass`), so the
run's record says what ran. Any other callable works too: its keyword parameters with their
defaults are then the hyperparameters (no batched sweeps of them).
"""
from __future__ import annotations

import inspect
import re
from typing import Callable

from .store import extensions
from .store.extensions import (ENTRY_POINT_GROUP, PluginError, import_modules,  # noqa: F401
                         load_entry_points, plugin_sources)

KINDS = ("algorithm", "problem", "model")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.+-]*")

#: ``(kind, name) -> the module (or entry point) whose import registered it``
ORIGINS: dict[tuple[str, str], str] = {}
#: registrations made outside any imported module (a notebook's, a script's ``__main__``),
#: hashed into the code digest by their source and carried to Ray workers by value
_LOOSE = extensions.LOOSE


def _describe(factory, description: str | None) -> str:
    if description:
        return " ".join(str(description).split())
    doc = inspect.getdoc(factory) or ""
    first = doc.strip().split("\n")[0].strip()
    return first or f"{getattr(factory, '__qualname__', factory)!s} (plug-in)"


def register(kind: str, name: str, factory: Callable, *, description: str | None = None,
             replace: bool = False) -> str:
    """Register ``factory`` under ``name`` in the registry of ``kind`` (``"algorithm"``,
    ``"problem"`` or ``"model"``; see the module docstring); returns the registered name.

    * algorithm: a class (best a ``@dataclass`` :class:`sims.algorithms.base.Algorithm`) or
      callable building one from keyword hyperparameters; the name is lower case
      (``make_algorithm`` accepts any case and ``_`` for ``-``);
    * problem: a callable returning a problem, called with the command's problem settings it
      names (:data:`sims.problems.registry.SETTINGS`: ``n_clients``, ``batch_size``, ...);
    * model: ``factory(in_shape=(C, H, W), num_classes=K, **kw)`` returning a
      ``torch.nn.Module`` (no BatchNorm or other in-place buffers: GroupNorm / LayerNorm).

    A name already registered (built in or not) is a one-line :class:`PluginError` unless
    ``replace=True``."""
    if kind not in KINDS:
        raise PluginError(f"register: unknown kind {kind!r}; choose one of "
                          f"{', '.join(KINDS)}")
    if not callable(factory):
        raise PluginError(f"register {kind} {name!r}: the factory must be callable (a class or "
                          f"a function), got {type(factory).__name__}")
    replace = replace or bool(extensions.mirroring)
    desc = _describe(factory, description)
    if kind == "algorithm":
        from .algorithms import registry
        key = registry.canonical(name)
        _check_name(kind, name, key)
        if key in registry.ALGORITHMS and not replace:
            raise PluginError(f"register: algorithm {key!r} is already registered "
                              f"({registry.ALGORITHMS[key][1]}); pass replace=True to "
                              "replace it")
        try:
            registry.signature_defaults(factory) if not _is_dataclass(factory) else None
        except (TypeError, ValueError) as exc:
            raise PluginError(f"register algorithm {key!r}: cannot read its hyperparameters "
                              f"from its signature ({exc})") from None
        registry.ALGORITHMS[key] = (factory, desc)
        registry.UNAVAILABLE.pop(key, None)
    elif kind == "problem":
        from .problems import registry as problems
        key = problems.canonical(name)
        _check_name(kind, name, key)
        if key == "quadratic" or "-" in key and _builtin_problem(key):
            raise PluginError(f"register: problem {key!r} is a built-in problem's name; "
                              "choose another")
        if key in problems.PROBLEMS and not replace:
            raise PluginError(f"register: problem {key!r} is already registered; pass "
                              "replace=True to replace it")
        problems.PROBLEMS[key] = (factory, desc)
    else:
        from .problems import models
        key = str(name).strip().lower()
        _check_name(kind, name, key)
        if key in models.MODELS and not replace:
            raise PluginError(f"register: model {key!r} is already registered; pass "
                              "replace=True to replace it")
        models.MODELS[key] = factory
        models.PLUGIN_MODELS.add(key)
    origin = extensions.importing[-1] if extensions.importing else None
    if origin is None and extensions.mirroring:
        origin = "shipped"
    ORIGINS[(kind, key)] = origin or getattr(factory, "__module__", None) or "?"
    if origin is None:
        _LOOSE[(kind, key)] = (kind, key, factory, desc)
    else:
        _LOOSE.pop((kind, key), None)
    return key


def _is_dataclass(obj) -> bool:
    import dataclasses
    return dataclasses.is_dataclass(obj)


def _check_name(kind: str, given, key: str) -> None:
    if not isinstance(given, str) or not _NAME.fullmatch(key):
        raise PluginError(f"register: bad {kind} name {given!r}; use lower-case letters, "
                          "digits and - _ . +, starting with a letter or digit")


def _builtin_problem(key: str) -> bool:
    from .data import DATASETS
    from .problems.models import MODELS
    return any(key[:i] in DATASETS and key[i + 1:] in MODELS
               for i in range(len(key)) if key[i] == "-")


def registered() -> dict[tuple[str, str], str]:
    """Every plug-in registration: ``{(kind, name): the module that made it}``."""
    return dict(ORIGINS)


def shipment() -> dict:
    """What a Ray task carries so that a worker has this process's plug-ins: the imported
    modules' sources, and the registrations made outside them (pickled by value)."""
    loose = b""
    if _LOOSE:                     # __main__'s classes travel by value, others by reference
        from ray import cloudpickle
        loose = cloudpickle.dumps(list(_LOOSE.values()))
    return {"modules": extensions.shipment(), "loose": loose}


def ensure(shipped: dict | None) -> None:
    """On a Ray worker, before a task's cell runs: import the shipped plug-in modules (unless
    the same sources are imported already) and redo the loose registrations."""
    if not shipped:
        return
    extensions.ensure_shipped(shipped.get("modules"))
    if shipped.get("loose"):
        from ray import cloudpickle
        for kind, name, factory, desc in cloudpickle.loads(shipped["loose"]):
            register(kind, name, factory, description=desc, replace=True)

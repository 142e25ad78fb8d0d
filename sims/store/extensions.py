"""Plug-in modules: importing them, what their sources hash to, and carrying them to Ray
workers. The public interface is :mod:`sims.plugins`; this module imports nothing of the
toolkit, so the registries can load the installed plug-ins lazily without an import cycle.

* :func:`import_modules` imports modules by dotted name (``mylab.algorithms``) or by path
  (``./my_alg.py``, or a package folder holding ``__init__.py``), each with a one-line
  :class:`PluginError` when it cannot be imported, and records them.
* :func:`load_entry_points` imports, once, every installed package's entry point in the group
  ``fedtoolkit.plugins`` (:mod:`importlib.metadata`); an entry point naming a callable
  (``mylab.plugin:register_all``) is called with no arguments after its module is imported.
  The registries (:mod:`sims.algorithms.registry`, :mod:`sims.problems.registry`,
  :func:`sims.problems.models.make_model`) call it before they answer.
* :func:`plugin_sources` is ``{module name: sha256 of its source}`` of every recorded module
  (a package: all its ``.py`` files), hashed when the module was imported (the code that
  runs); :func:`sims.store.identity.code_digest` folds it in.
* :func:`shipment` / :func:`ensure_shipped`: the recorded modules' sources, carried with a
  Ray task, and imported on the worker before the task runs (from the source text: a worker
  on another machine needs no copy of the files), unless the worker already holds the same
  source.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Sequence

ENTRY_POINT_GROUP = "fedtoolkit.plugins"


class PluginError(ValueError):
    """A plug-in that cannot be imported or registered (one line)."""


@dataclass
class Loaded:
    """A recorded plug-in module: its name, where it came from (the text given, or the entry
    point), its source files ``{relative path: bytes}`` and their sha256."""
    name: str
    origin: str
    files: dict
    sha256: str
    package: bool = False


_LOADED: dict[str, Loaded] = {}
_ENTRY_POINTS_LOADED = False
#: the module being imported by :func:`import_modules` (registrations made meanwhile are its)
importing: list[str] = []
#: true while :func:`ensure_shipped` imports: registrations replace older ones (the worker
#: mirrors the driver's registries)
mirroring: list[bool] = []


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    tb = exc.__traceback__
    where = ""
    while tb is not None:                  # the innermost frame of the plug-in's own code
        name = tb.tb_frame.f_code.co_filename
        if "importlib" not in name:
            where = f" ({name}, line {tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {text}{where}"


def _source_files(module: ModuleType) -> tuple[dict, bool]:
    """``({relative path: bytes}, is a package)`` of a module's source."""
    path = getattr(module, "__file__", None)
    if not path:
        return {}, False
    path = Path(path)
    if path.name == "__init__.py":
        root = path.parent
        files = {p.relative_to(root).as_posix(): p.read_bytes()
                 for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}
        return files, True
    try:
        return {path.name: path.read_bytes()}, False
    except OSError:
        return {}, False


def _digest(files: dict) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel] + b"\0")
    return h.hexdigest()


def record(module: ModuleType, origin: str) -> Loaded:
    """Record ``module`` as a plug-in (hashing its source now)."""
    files, package = _source_files(module)
    item = Loaded(module.__name__, origin, files, _digest(files), package)
    _LOADED[module.__name__] = item
    return item


def _is_path(text: str) -> bool:
    return text.endswith(".py") or os.sep in text or "/" in text or Path(text).is_dir()


def _import_path(text: str) -> ModuleType:
    path = Path(text).expanduser()
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise PluginError(f"--import {text}: a folder without __init__.py is not a "
                              "Python package")
        name, location, search = path.resolve().name, init, [str(path.resolve())]
    elif path.is_file():
        if path.suffix != ".py":
            raise PluginError(f"--import {text}: not a .py file")
        name, location, search = path.stem, path, None
    else:
        raise PluginError(f"--import {text}: no such file or folder")
    if not name.isidentifier():
        raise PluginError(f"--import {text}: {name!r} is not a valid module name; rename "
                          "the file")
    old = sys.modules.get(name)
    if old is not None:
        if Path(getattr(old, "__file__", "") or "").resolve() == Path(location).resolve():
            return old
        raise PluginError(f"--import {text}: a module named {name!r} is already imported "
                          f"from {getattr(old, '__file__', None) or 'elsewhere'}; rename "
                          "the file")
    spec = importlib.util.spec_from_file_location(name, location,
                                                  submodule_search_locations=search)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_modules(names: Sequence[str]) -> list[ModuleType]:
    """Import each of ``names`` (a dotted module name, a path to a ``.py`` file or a package
    folder) and record it as a plug-in (its source in :func:`plugin_sources`, carried to Ray
    workers). A module already imported is not imported again. One-line
    :class:`PluginError` when one cannot be imported (the modules before it stay imported)."""
    if isinstance(names, str):
        names = [names]
    out = []
    for text in names:
        text = str(text).strip()
        if not text:
            raise PluginError("--import needs a module name or a path to a .py file")
        importing.append(text)
        try:
            if _is_path(text):
                module = _import_path(text)
            else:
                module = importlib.import_module(text)
        except PluginError:
            raise
        except ModuleNotFoundError as exc:
            if exc.name and (text == exc.name or text.startswith(exc.name + ".")):
                raise PluginError(f"--import {text}: no module named {exc.name!r} (give a "
                                  "module on the Python path, or a path to a .py file)") \
                    from None
            raise PluginError(f"--import {text}: importing it failed: {_one_line(exc)}") \
                from None
        except Exception as exc:  # noqa: BLE001 - whatever the user's module raises
            raise PluginError(f"--import {text}: importing it failed: {_one_line(exc)}") \
                from None
        finally:
            importing.pop()
        if module.__name__ not in _LOADED:
            record(module, text)
        out.append(module)
    return out


def load_entry_points() -> None:
    """Import the installed plug-ins (entry-point group ``fedtoolkit.plugins``), once per
    process. A failing entry point is a one-line :class:`PluginError` naming it."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        importing.append(f"entry point {ep.name}")
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, ModuleType):
                obj()
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"installed plug-in {ep.name} ({ep.value}, entry point group "
                              f"{ENTRY_POINT_GROUP}) failed to load: {_one_line(exc)}") \
                from None
        finally:
            importing.pop()
        module = sys.modules.get(ep.module)
        if module is not None and module.__name__ not in _LOADED:
            record(module, f"entry point {ep.name} = {ep.value}")


#: registrations made outside any recorded module (a notebook's, a script's ``__main__``):
#: ``(kind, name) -> (kind, name, factory, description)`` (kept by :mod:`sims.plugins`)
LOOSE: dict[tuple[str, str], tuple] = {}


def factory_digest(factory) -> str:
    """sha256 of a loose registration's code: its source where Python can find it (a file,
    a notebook cell), else its pickled-by-value bytes (Ray's cloudpickle), else its name."""
    import inspect
    try:
        blob = inspect.getsource(factory).encode()
    except (OSError, TypeError):
        try:
            from ray import cloudpickle
            blob = cloudpickle.dumps(factory)
        except Exception:  # noqa: BLE001 - no Ray, or not picklable
            blob = repr(getattr(factory, "__qualname__", factory)).encode()
    return hashlib.sha256(blob).hexdigest()


def plugin_sources() -> dict[str, str]:
    """``{module name: sha256 of its source file(s)}`` of every plug-in module imported in
    this process, the installed ones included (:func:`load_entry_points`), and
    ``{"<kind name>": sha256 of its code}`` of every registration made outside them (empty
    when none)."""
    load_entry_points()
    out = {name: item.sha256 for name, item in sorted(_LOADED.items())}
    for (kind, name), (_, _, factory, _) in sorted(LOOSE.items()):
        out[f"<{kind} {name}>"] = factory_digest(factory)
    return out


def loaded() -> dict[str, Loaded]:
    return dict(_LOADED)


def shipment() -> list[dict]:
    """The recorded modules' sources, for a Ray task (see :func:`ensure_shipped`)."""
    return [{"name": it.name, "files": it.files, "sha256": it.sha256, "package": it.package,
             "origin": it.origin} for it in _LOADED.values() if it.files]


def ensure_shipped(items: Sequence[dict] | None) -> None:
    """On a worker: import each shipped module unless one with the same source is already
    imported (a package is written to a temporary folder first; a single module is run from
    its source text). Then its registrations are in this process's registries."""
    for it in items or ():
        have = _LOADED.get(it["name"])
        if have is not None and have.sha256 == it["sha256"]:
            continue
        if it["package"]:
            root = Path(tempfile.gettempdir()) / f"fedtoolkit-plugin-{it['sha256'][:16]}"
            target = root / it["name"]
            if not target.exists():
                tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".fedtoolkit-plugin-"))
                for rel, data in it["files"].items():
                    (tmp / it["name"] / rel).parent.mkdir(parents=True, exist_ok=True)
                    (tmp / it["name"] / rel).write_bytes(data)
                try:
                    os.replace(tmp, root)
                except OSError:                   # another worker wrote it meanwhile
                    import shutil
                    shutil.rmtree(tmp, ignore_errors=True)
            for name in [m for m in sys.modules
                         if m == it["name"] or m.startswith(it["name"] + ".")]:
                del sys.modules[name]             # an older version's modules
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            mirroring.append(True)
            try:
                importlib.import_module(it["name"])
            finally:
                mirroring.pop()
        else:
            (rel, data), = it["files"].items()
            module = ModuleType(it["name"])
            module.__file__ = rel
            sys.modules[it["name"]] = module
            importing.append(it["origin"])
            mirroring.append(True)
            try:
                exec(compile(data, f"<plug-in {it['origin']}>", "exec"), module.__dict__)
            except BaseException:
                sys.modules.pop(it["name"], None)
                raise
            finally:
                importing.pop()
                mirroring.pop()
        _LOADED[it["name"]] = Loaded(it["name"], it["origin"], it["files"], it["sha256"],
                                     it["package"])

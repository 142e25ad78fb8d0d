"""What data a run read, so that a saved run is reused only while reading its data again
would read the same bytes.

A loaded :class:`sims.data.base.Dataset` knows what it was asked for (``origin``: the
dataset's name and the ``data_dir`` argument) and which files it read (``files``). A run's
record keeps, for every dataset its problem holds (:func:`sources_of`), that origin, the
data directory in force (``--data-dir``, else ``$FEDTOOLKIT_DATA``) and each file's sha256
(:func:`record_of`). Before a saved run is reused, :func:`changed` resolves the same origin
again under the present settings (:func:`sims.data.datasets.dataset_files`, which finds the
files without reading them) and compares: another data directory (a changed environment
variable), another file set (a dataset added where a fallback was used) or other contents
(a file replaced) make the run stale, and it is recomputed.

File hashes are cached per file by its path, size, modification time and inode under
``$XDG_CACHE_HOME/fedtoolkit/file-sha256.json`` (default ``~/.cache``), so a rerun hashes
only what changed; the cache is advisory (a lost or corrupt cache costs a rehash).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..data.errors import DataError

_MEMO: dict[str, str] = {}
_loaded = False


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fedtoolkit" / "file-sha256.json"


def _load_cache() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    try:
        data = json.loads(_cache_path().read_text())
        if isinstance(data, dict):
            _MEMO.update({str(k): str(v) for k, v in data.items()})
    except (OSError, ValueError):
        pass


def _save_cache() -> None:
    from .results import atomic_write_bytes
    try:
        atomic_write_bytes(_cache_path(), json.dumps(_MEMO).encode())
    except OSError:
        pass                                  # advisory: the next run hashes again


def file_sha256(path, *, save: bool = True) -> str:
    """The sha256 of the file at ``path`` (cached by path, size, mtime and inode; ``save``:
    write the cache now when this file was new to it)."""
    path = Path(path).resolve()
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
    _load_cache()
    if key not in _MEMO:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _MEMO[key] = h.hexdigest()
        if save:
            _save_cache()
    return _MEMO[key]


def files_digest(paths) -> dict[str, str]:
    """``{absolute path: sha256}`` of ``paths`` (the cache written once at the end)."""
    before = len(_MEMO)
    out = {str(Path(p).resolve()): file_sha256(p, save=False) for p in sorted(map(str, paths))}
    if len(_MEMO) != before:
        _save_cache()
    return out


def _data_dir_in_force(data_dir) -> str | None:
    from ..data.paths import resolve_data_dir
    try:
        root = resolve_data_dir(data_dir)
    except DataError:
        return None
    return None if root is None else str(root.resolve())


def sources_of(problem) -> list:
    """The datasets a problem holds that know their origin and files (its ``dataset``, and
    any in ``data_sources``)."""
    found = [getattr(problem, "dataset", None), *getattr(problem, "data_sources", ())]
    return [d for d in found if d is not None and getattr(d, "origin", None)]


def record_of(problem) -> list[dict]:
    """The data part of a run's record: per dataset, its origin, the data directory in
    force and ``{path: sha256}`` of the files read (empty for a synthetic problem)."""
    out = []
    for ds in sources_of(problem):
        name, data_dir = ds.origin
        out.append({"dataset": name, "data_dir": data_dir,
                    "resolved_dir": _data_dir_in_force(data_dir),
                    "files": files_digest(ds.files)})
    return out


def changed(data: list | None) -> str | None:
    """Why the data a saved run read (its record's ``data``) is no longer what a rerun would
    read, in a few words; None when it is the same (or the run read no dataset)."""
    from ..data.datasets import dataset_files
    for item in data or ():
        name = item.get("dataset")
        now_dir = _data_dir_in_force(item.get("data_dir"))
        if now_dir != item.get("resolved_dir") and not str(name).startswith("arrays:"):
            return f"{name}: the data directory is now {now_dir}, was {item.get('resolved_dir')}"
        try:
            now = {str(Path(p).resolve()) for p in dataset_files(name, item.get("data_dir"))}
        except (DataError, OSError) as exc:
            return f"{name}: its data cannot be found now ({' '.join(str(exc).split())[:100]})"
        was = dict(item.get("files") or {})
        if now != set(was):
            return f"{name}: other files would be read now"
        try:
            current = files_digest(was)
        except OSError as exc:
            return f"{name}: {exc.filename or 'a file'} is gone"
        for path, sha in was.items():
            if current[path] != sha:
                return f"{name}: {path} changed"
    return None

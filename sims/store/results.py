"""Tidy results with provenance, written atomically.

A run's curves become a long table, one row per (run, seed, round, metric), with the run's
parameters as extra columns, so plotting is a ``groupby``. Every results file has a JSON
record beside it with the config, seeds, package versions, git commit and wall time.
Files are written to a temporary name and renamed into place, so an interrupted run never
leaves a half-written file that a later run could mistake for a result.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import socket
import sys
import tempfile
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .identity import code_identity, package_versions, source_commit

PACKAGES = ("torch", "numpy", "scipy", "sympy", "pandas", "matplotlib", "seaborn")


class ResultsError(ValueError):
    """A saved results file that cannot be trusted (one line, naming the file)."""


def tidy(output, run: str, params: dict | None = None) -> pd.DataFrame:
    """A :class:`sims.core.engine.RunOutput` as a long table (``diverged_at``: the replica's
    divergence round from ``output.diverged_at``, NaN when it stayed healthy)."""
    frames = []
    diverged = getattr(output, "diverged_at", None) or [None] * len(output.seeds)
    for name, values in output.metrics.items():
        rounds = output.rounds[name]
        for r, seed in enumerate(output.seeds):
            frames.append(pd.DataFrame({"run": run, "seed": seed, "round": rounds,
                                        "metric": name, "value": values[r],
                                        "diverged_at": (np.nan if diverged[r] is None
                                                        else float(diverged[r]))}))
    df = pd.concat(frames, ignore_index=True)
    for key, val in (params or {}).items():
        df[key] = val if np.isscalar(val) or val is None else str(val)
    return df


def versions() -> dict[str, str]:
    return {**package_versions(PACKAGES), "platform": platform.platform()}


def rerunnable_command(argv=None, main_module=None) -> str:
    """The command line that started this process, in a form that runs again from its
    working directory: ``python3 -m sims.compare ...`` for a module run with ``-m`` (its
    ``__main__``'s package), ``python3 path/script.py ...`` for a script, the console
    command's name otherwise; the interpreter as it is named here (``python3``, a venv's
    ``python``), arguments quoted for a POSIX shell."""
    argv = list(sys.argv if argv is None else argv)
    main = sys.modules.get("__main__") if main_module is None else main_module
    spec = getattr(main, "__spec__", None)
    python = os.path.basename(sys.executable) or "python"
    args = argv[1:]
    if spec is not None and getattr(spec, "name", None):
        name = spec.name[:-len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        return shlex.join([python, "-m", name, *args])
    first = argv[0] if argv else ""
    if first.endswith(".py"):
        return shlex.join([python, first, *args])
    return shlex.join([os.path.basename(first) or python, *args])


def worker_context() -> dict:
    """Where a computation ran: host, process id, torch's intra-op threads, the fast forms
    (:mod:`sims.accel`) and the allocator tuning (:mod:`sims.core.malloc`) in that process:
    on a Ray worker, the worker's."""
    import torch

    from .. import accel
    malloc = sys.modules.get("sims.core.malloc")     # never imported: never applied
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "threads": torch.get_num_threads(), "accel": accel.status(),
            "malloc_tuning": bool(malloc and malloc.applied())}


def run_context(started: float | None = None) -> dict:
    """Where and how a run was computed: command line (:func:`rerunnable_command`) and the
    working directory it runs from, start time (UTC, ISO 8601), host, torch's intra-op thread
    count, which fast local-step forms were on (:mod:`sims.accel` and its C kernels: they
    change results at the rounding level only), process id, whether the allocator tuning
    was on (:mod:`sims.core.malloc`), and the GPU libraries that change numerics on a GPU
    (CUDA, cuDNN, the GPU's name; None on a CPU-only build). The package versions that
    change numerics everywhere are in the code identity (:mod:`sims.store.identity`)."""
    import torch

    started = time.time() if started is None else started
    libs = {"cuda": torch.version.cuda, "cudnn": (torch.backends.cudnn.version()
                                                  if torch.backends.cudnn.is_available() else None),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    return {"command": rerunnable_command(), "cwd": os.getcwd(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            **worker_context(), "device_libraries": libs}


def wall_time_fields(this_process: float, resumed_from: list, before: float) -> dict:
    """What a run's ``wall_time_s`` covers: the whole run's seconds (``this_process`` plus the
    engine seconds ``before`` a checkpoint it resumed from, at rounds ``resumed_from``), each
    part, and a sentence saying so."""
    resumed = [int(r) for r in resumed_from if r]
    if not resumed:
        covers = "every round, computed in this process"
    else:
        covers = (f"every round: the engine seconds up to the checkpoint at round(s) "
                  f"{', '.join(map(str, resumed))} (wall_time_before_resume_s, the interrupted "
                  "process) plus this process's seconds (wall_time_this_process_s)")
    return {"wall_time_s": round(this_process + before, 3),
            "wall_time_this_process_s": round(this_process, 3),
            "wall_time_before_resume_s": round(before, 3), "wall_time_covers": covers}


def provenance(config, seeds, wall_time: float, extra: dict | None = None,
               started: float | None = None) -> dict:
    """The JSON record of a run: config, seeds, package versions, commit, code identity
    (:func:`sims.store.identity.code_identity`), :func:`run_context` and ``extra``. ``started``
    (a ``time.time()``) defaults to now minus ``wall_time``."""
    cfg = asdict(config) if is_dataclass(config) else dict(config)
    started = time.time() - wall_time if started is None else started
    return {"config": _jsonable(cfg), "seeds": [int(s) for s in seeds],
            "versions": versions(), "commit": source_commit(), "code": code_identity(),
            **run_context(started), "wall_time_s": round(wall_time, 3),
            **_jsonable(extra or {})}


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)


def _umask() -> int:
    """The process's file-creation mask (read without changing it where Linux allows)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def group_readable(path) -> None:
    """Give a file made by :func:`tempfile.mkstemp` (mode 0600) the mode a plain ``open``
    would have given it (``0666`` less the umask), so collaborators can read results."""
    os.chmod(path, 0o666 & ~_umask())


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write) -> None:
    """``write(tmp)`` fills a temporary file beside ``path``; it is fsynced, made
    group-readable, renamed into place and the folder fsynced: ``path`` is either the old
    file or the whole new one, also after a crash or power loss."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        group_readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def os_error_text(exc: OSError) -> str:
    """An OSError in a few words: ``PATH: reason`` (e.g. a full disk, a read-only folder)."""
    where = exc.filename or ""
    reason = exc.strerror or " ".join(str(exc).split())
    return f"{where}: {reason}" if where else reason


def table_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_run(df: pd.DataFrame, record: dict, path: Path) -> None:
    """Write ``path`` (CSV) and ``path.with_suffix('.json')``; the JSON goes last, and a
    results file counts as finished only when its JSON record exists. The record gains
    ``table: {rows, sha256}`` of the CSV as written."""
    path = Path(path)
    data = df.to_csv(index=False).encode()
    record = {**record, "table": {"file": path.name, "rows": int(len(df)),
                                  "sha256": table_digest(data)}}
    path.with_suffix(".json").unlink(missing_ok=True)   # the old record no longer vouches
    atomic_write_bytes(path, data)
    atomic_write_bytes(path.with_suffix(".json"), json.dumps(record, indent=1).encode())


#: Columns that name things (runs, sweep points and their labels) and are read back as text:
#: a sweep point's hexadecimal key such as ``6075e12879`` would otherwise be read as a number
#: (``inf``) where a table holds that one point, and two such points would merge.
TEXT_COLUMNS = ("run", "point", "label", "sweep", "panel")


def load_run(path: Path) -> tuple[pd.DataFrame, dict] | None:
    """A finished run, or None when it is absent or incomplete (no record, or a record that
    is not JSON). A record without the table's checksum, or a table that does not match its
    record's row count and checksum, raises :class:`ResultsError` (one line naming the
    file): it is never read as a result."""
    path = Path(path)
    meta = path.with_suffix(".json")
    for p in (path, meta):
        if p.exists() and not p.is_file():
            raise ResultsError(f"{p}: a folder (or other non-file) where a results file goes; "
                               "remove it")
    if not (path.exists() and meta.exists()):
        return None
    try:
        record = json.loads(meta.read_text())
        data = path.read_bytes()
    except (ValueError, OSError):
        return None
    table = record.get("table") if isinstance(record, dict) else None
    if not (isinstance(table, dict) and isinstance(table.get("sha256"), str)
            and isinstance(table.get("rows"), int)):
        raise ResultsError(f"{path}: its record {meta.name} holds no checksum of the table "
                           "(edited, or written by other code); delete both files to "
                           "recompute the run")
    if table_digest(data) != table["sha256"]:
        raise ResultsError(f"{path}: the table does not match its record {meta.name} "
                           "(truncated or edited; checksum differs); delete both files to "
                           "recompute the run")
    try:
        df = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS})
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise ResultsError(f"{path}: cannot read the table ({' '.join(str(exc).split())}); "
                           "delete it and its record to recompute the run") from None
    if len(df) != table["rows"]:
        raise ResultsError(f"{path}: {len(df)} rows, its record {meta.name} says "
                           f"{table['rows']}; delete both files to recompute the run")
    return df, record

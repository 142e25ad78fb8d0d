"""Tidy results with provenance, written atomically.

A run's curves become a long table, one row per (run, seed, round, metric), with the run's
parameters as extra columns, so plotting is a ``groupby``. Every results file has a JSON
record beside it with the config, seeds, package versions, git commit and wall time.
Files are written to a temporary name and renamed into place, so an interrupted run never
leaves a half-written file that a later run could mistake for a result.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

PACKAGES = ("torch", "numpy", "scipy", "sympy", "pandas", "matplotlib", "seaborn")


def tidy(output, run: str, params: dict | None = None) -> pd.DataFrame:
    """A :class:`sims.engine.RunOutput` as a long table."""
    frames = []
    for name, values in output.metrics.items():
        rounds = output.rounds[name]
        for r, seed in enumerate(output.seeds):
            frames.append(pd.DataFrame({"run": run, "seed": seed, "round": rounds,
                                        "metric": name, "value": values[r]}))
    df = pd.concat(frames, ignore_index=True)
    for key, val in (params or {}).items():
        df[key] = val if np.isscalar(val) or val is None else str(val)
    return df


def git_commit(cwd: str | os.PathLike | None = None) -> str:
    root = Path(cwd or Path(__file__).resolve().parent)
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout
        return commit + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def provenance(config, seeds, wall_time: float, extra: dict | None = None) -> dict:
    cfg = asdict(config) if is_dataclass(config) else dict(config)
    return {"config": _jsonable(cfg), "seeds": [int(s) for s in seeds],
            "versions": versions(), "commit": git_commit(), "wall_time_s": round(wall_time, 3),
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_run(df: pd.DataFrame, record: dict, path: Path) -> None:
    """Write ``path`` (CSV) and ``path.with_suffix('.json')``; the JSON goes last, and a
    results file counts as finished only when its JSON record exists."""
    path = Path(path)
    path.with_suffix(".json").unlink(missing_ok=True)   # the old record no longer vouches
    atomic_write_bytes(path, df.to_csv(index=False).encode())
    atomic_write_bytes(path.with_suffix(".json"), json.dumps(record, indent=1).encode())


def load_run(path: Path) -> tuple[pd.DataFrame, dict] | None:
    """A finished run, or None when it is absent or incomplete."""
    path = Path(path)
    meta = path.with_suffix(".json")
    if not (path.exists() and meta.exists()):
        return None
    try:
        return pd.read_csv(path), json.loads(meta.read_text())
    except (ValueError, OSError, pd.errors.ParserError):
        return None

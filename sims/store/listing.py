"""The saved runs under a results folder, as a table: ``python -m sims.results ls``.

Every finished run is a CSV with a JSON record beside it (:func:`sims.store.results.save_run`:
the record names its table and the table's checksum); :func:`saved_runs` reads the records
only (JSON, never the tables, never anything pickled) of every such pair under a folder
(``python -m sims.compare`` runs, ``python -m sims.sweep`` cells, ``reproduce`` entries'
runs), and :func:`table` makes one row per run:

``path`` (the CSV, relative to the folder), ``kind`` (``compare``, ``sweep cell``,
``entry``), ``run`` (its label), ``algorithm``, ``problem``, ``rounds``, ``seeds``,
``started`` (UTC), ``wall_s``, ``host``, ``commit``, ``current`` (whether this checkout's
code, with the plug-ins imported here, would compute the same: ``yes``; else ``no``) and
``diverged`` (seeds that diverged).

:func:`in_flight` (``ls --in-flight``) adds one row per run stopped or running mid-way: a
checkpoint under a ``.checkpoints`` folder (an engine run's, a sweep unit's), kind ``in
flight``, ``rounds`` the rounds its checkpoint has done, ``started`` when it was saved; read
from the checkpoint file's header only (no tensor, nothing unpickled), so a long run's
progress shows without touching it.

:func:`apply_filters` keeps the rows matching every ``KEY=VALUE``: ``KEY`` is a column or a
dotted path into the record (``config.n_clients``, ``algorithm.eta_l``,
``code.plugins``), ``VALUE`` a shell-style pattern (``fed*``, ``0.0?``) matched against the
value's text.
"""
from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pandas as pd

COLUMNS = ("path", "kind", "run", "algorithm", "problem", "rounds", "seeds", "started",
           "wall_s", "host", "commit", "current", "diverged")
SKIP = (".checkpoints", ".locks")


class ListingError(ValueError):
    """A folder or filter that cannot be used (one line)."""


def saved_runs(folder) -> list[tuple[Path, dict]]:
    """``[(csv path, record)]`` of every finished run under ``folder`` (sorted by path)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ListingError(f"{folder}: no such folder")
    out = []
    for meta in sorted(folder.rglob("*.json")):
        if any(part in SKIP for part in meta.relative_to(folder).parts):
            continue
        csv = meta.with_suffix(".csv")
        if not csv.is_file():
            continue
        try:
            record = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("table"), dict):
            out.append((csv, record))
    return out


def _kind(record: dict) -> str:
    if "point" in record:
        return "sweep cell"
    if "entry" in record:
        return "entry"
    return "compare" if "label" in record else "run"


def _problem_name(desc) -> str | None:
    """``quadratic``, ``DATASET-MODEL`` or a registered name, from a problem's description
    (a compare setting, a sweep's problem dict, an entry's described problem)."""
    if isinstance(desc, str):
        return desc
    if not isinstance(desc, dict):
        return None
    if isinstance(desc.get("problem"), str):
        return desc["problem"]
    if desc.get("dataset") and desc.get("model"):
        return f"{desc['dataset']}-{desc['model']}"
    return desc.get("name") or desc.get("type")


def _problem(record: dict) -> str | None:
    cfg = record.get("config") or {}
    for desc in (cfg.get("problem"), record.get("problem"), record.get("params")):
        name = _problem_name(desc)
        if name:
            return str(name)
    return None


def _digest(record: dict) -> str | None:
    return record.get("code_digest") or (record.get("code") or {}).get("code_digest")


def row(path: Path, record: dict, folder: Path, digest: str) -> dict:
    """One row of the table (module docstring)."""
    alg = record.get("algorithm")
    cfg = record.get("config") or {}
    diverged = record.get("diverged_at", record.get("diverged_at_round"))
    if not isinstance(diverged, list):
        diverged = [diverged]
    commit = (record.get("code") or {}).get("commit") or record.get("commit") or ""
    if len(commit) >= 40:
        commit = commit[:10] + commit[40:]
    return {"path": path.relative_to(folder).as_posix(), "kind": _kind(record),
            "run": record.get("label") or record.get("run"),
            "algorithm": (alg.get("name") if isinstance(alg, dict) else alg)
            or (record.get("params") or {}).get("method"),
            "problem": _problem(record), "rounds": cfg.get("rounds"),
            "seeds": ",".join(str(s) for s in record.get("seeds") or []),
            "started": str(record.get("started") or "")[:16].replace("T", " "),
            "wall_s": record.get("wall_time_s"), "host": record.get("host"),
            "commit": commit, "current": "yes" if _digest(record) == digest else "no",
            "diverged": sum(d is not None for d in diverged)}


def lookup(record: dict, key: str):
    """The value at dotted ``key`` in ``record`` (``KeyError`` when absent)."""
    value = record
    for part in key.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(key)
    return value


def _text(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def parse_filters(items) -> list[tuple[str, str]]:
    out = []
    for item in items or ():
        key, sep, pattern = str(item).partition("=")
        if not sep or not key.strip():
            raise ListingError(f"--filter {item!r}: expected KEY=VALUE (KEY a column or a "
                               "dotted path into the record, e.g. config.n_clients=50)")
        out.append((key.strip(), pattern.strip()))
    return out


def apply_filters(rows: list[dict], records: list[dict], filters) -> list[int]:
    """The indices of the rows matching every filter (module docstring); a ``KEY`` that is
    neither a column nor in any record is a one-line :class:`ListingError`."""
    keep = list(range(len(rows)))
    for key, pattern in filters:
        found, kept = False, []
        for i in keep:
            if key in rows[i]:
                value, found = rows[i][key], True
            else:
                try:
                    value, found = lookup(records[i], key), True
                except KeyError:
                    continue
            if fnmatch.fnmatchcase(_text(value), pattern):
                kept.append(i)
        if not found and rows:
            raise ListingError(f"--filter {key}={pattern}: {key!r} is neither a column "
                               f"({', '.join(COLUMNS)}) nor a key of any run's record")
        keep = kept
    return keep


def in_flight(folder) -> list[dict]:
    """One row per checkpoint under ``folder``'s ``.checkpoints`` folders (module
    docstring); a file that is not a readable checkpoint is left out."""
    import time

    from .checkpoint import CheckpointError, header_round, read_header
    folder = Path(folder)
    out = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if not path.is_file() or ".checkpoints" not in parts[:-1]:
            continue
        try:
            done = header_round(read_header(path))
        except CheckpointError:
            continue
        saved = time.strftime("%Y-%m-%d %H:%M", time.gmtime(path.stat().st_mtime))
        out.append({**{c: None for c in COLUMNS}, "path": path.relative_to(folder).as_posix(),
                    "kind": "in flight", "run": path.name.split(".")[0], "rounds": done,
                    "started": saved, "current": "", "diverged": 0})
    return out


def _rows(folder: Path, include_in_flight: bool) -> tuple[list, list[dict], list[dict]]:
    """``(paths, rows, records)`` of the saved runs under ``folder`` (and, with
    ``include_in_flight``, the checkpointed ones: no path, an empty record)."""
    from .identity import code_digest
    found = saved_runs(folder)
    digest = code_digest()
    paths = [p for p, _ in found]
    rows = [row(p, r, folder, digest) for p, r in found]
    records = [r for _, r in found]
    if include_in_flight:
        flying = in_flight(folder)
        paths += [None for _ in flying]
        rows += flying
        records += [{} for _ in flying]
    return paths, rows, records


def matching_runs(folder, filters=()) -> list[Path]:
    """The CSV paths of the saved runs under ``folder`` that :func:`table` lists for
    ``filters`` (``python -m sims.results pack`` carries these)."""
    paths, rows, records = _rows(Path(folder), False)
    return [paths[i] for i in apply_filters(rows, records, filters)]


def table(folder, filters=(), include_in_flight: bool = False) -> pd.DataFrame:
    """The saved runs under ``folder`` matching ``filters`` (``[(KEY, PATTERN)]``); with
    ``include_in_flight``, also the runs checkpointed mid-way (:func:`in_flight`)."""
    _, rows, records = _rows(Path(folder), include_in_flight)
    keep = apply_filters(rows, records, filters)
    return pd.DataFrame([rows[i] for i in keep], columns=list(COLUMNS))

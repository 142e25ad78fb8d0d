"""Finished runs carried between machines: ``python -m sims.results pack`` / ``unpack``.

A long sweep is resumable cell by cell (:mod:`sims.experiments.sweep.execute`), but its cells
live under a results folder that a fresh machine does not have. :func:`pack` writes the
finished runs under a folder (each CSV with its JSON record, :func:`sims.store.results.save_run`;
optionally filtered as ``ls`` filters) into one gzipped tar, byte-for-byte the same for the
same runs (sorted members, no times or owners), small enough to commit; :func:`unpack` puts
them back under another machine's folder, where the sweep reuses them as it reuses its own
(a cell of other code only with ``--reuse-stale``, said at reuse). Checkpoints of unfinished
runs are not carried.

Nothing in an archive is trusted: only plain ``.csv`` / ``.json`` members at relative paths
inside the folder are accepted, each table must match the checksum its record holds, and the
whole archive is checked before anything is written. A file already in the folder is never
replaced: the same bytes count as already there, different bytes are kept as they are and
counted (a result computed on this machine wins).
"""
from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path, PurePosixPath

from .listing import matching_runs
from .results import atomic_write_bytes, load_run, ResultsError, table_digest

#: The most an archive may unpack to (a guard against a planted archive that expands without
#: bound); far above any ledger's cells (a 100-round cell is a few tens of kB).
MAX_BYTES = 1 << 30


class CarryError(ValueError):
    """An archive or folder that cannot be packed or unpacked (one line)."""


def pack(folder, archive, filters=()) -> int:
    """Write the finished runs under ``folder`` (those matching ``filters``, ``[(KEY,
    PATTERN)]`` as ``ls --filter``) to the gzipped tar ``archive``; returns how many runs. A
    run whose table does not match its record is an error, not left out silently."""
    folder = Path(folder)
    members = {}
    for csv in matching_runs(folder, filters):
        try:
            load_run(csv)
        except ResultsError as exc:
            raise CarryError(str(exc)) from None
        for path in (csv, csv.with_suffix(".json")):
            members[path.relative_to(folder).as_posix()] = path.read_bytes()
    if not members:
        raise CarryError(f"{folder}: no finished runs" + (" match the filters" if filters
                                                           else "") + "; nothing to pack")
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    zipped = io.BytesIO()
    with gzip.GzipFile(fileobj=zipped, mode="wb", mtime=0, filename="") as gz:
        gz.write(tar_bytes.getvalue())
    atomic_write_bytes(Path(archive), zipped.getvalue())
    return len(members) // 2


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (path.is_absolute() or ".." in path.parts or not path.parts
            or path.suffix not in (".csv", ".json")):
        raise CarryError(f"member {name!r}: not a results file at a relative path inside the "
                         "folder; the archive was not written by pack")
    return path


def read_archive(archive) -> dict[PurePosixPath, bytes]:
    """The archive's members as ``{relative path: bytes}``, every one checked (module
    docstring), or :class:`CarryError`."""
    archive = Path(archive)
    if not archive.is_file():
        raise CarryError(f"{archive}: no such file")
    out, total = {}, 0
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for info in tar:
                if not info.isfile():
                    raise CarryError(f"member {info.name!r}: not a plain file (a link, a "
                                     "folder or a device); the archive was not written by pack")
                path = _member_path(info.name)
                total += info.size
                if total > MAX_BYTES:
                    raise CarryError(f"{archive}: unpacks to more than {MAX_BYTES >> 20} MiB")
                out[path] = tar.extractfile(info).read()
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CarryError(f"{archive}: not a readable gzipped tar "
                         f"({' '.join(str(exc).split())})") from None
    for path, data in out.items():
        if path.suffix != ".json":
            continue
        csv = path.with_suffix(".csv")
        try:
            record = json.loads(data)
            want = record["table"]["sha256"]
        except (ValueError, TypeError, KeyError):
            raise CarryError(f"{path}: not a run's record (no table checksum)") from None
        if csv not in out:
            raise CarryError(f"{path}: its table {csv.name} is not in the archive")
        if table_digest(out[csv]) != want:
            raise CarryError(f"{csv}: does not match its record's checksum; the archive is "
                             "damaged or edited")
    lone = [p for p in out if p.suffix == ".csv" and p.with_suffix(".json") not in out]
    if lone:
        raise CarryError(f"{lone[0]}: a table without its record in the archive")
    return out


def unpack(archive, folder) -> dict[str, int]:
    """Put the runs of ``archive`` (written by :func:`pack`) under ``folder``; returns the
    counts of runs ``added``, ``already`` there (same bytes) and ``kept`` (a different result
    already there, left as it is). Nothing is written unless the whole archive checks."""
    members = read_archive(archive)
    folder = Path(folder)
    counts = {"added": 0, "already": 0, "kept": 0}
    for csv in sorted(p for p in members if p.suffix == ".csv"):
        meta = csv.with_suffix(".json")
        dest_csv, dest_meta = folder / csv, folder / meta
        if dest_csv.exists() or dest_meta.exists():
            same = (dest_csv.is_file() and dest_meta.is_file()
                    and dest_csv.read_bytes() == members[csv]
                    and dest_meta.read_bytes() == members[meta])
            counts["already" if same else "kept"] += 1
            continue
        atomic_write_bytes(dest_csv, members[csv])      # the record last, as save_run
        atomic_write_bytes(dest_meta, members[meta])
        counts["added"] += 1
    return counts

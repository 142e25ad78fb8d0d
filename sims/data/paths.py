"""Where data is looked up: the user data directory and file-set discovery.

The data directory comes from the ``--data-dir`` flag if given, otherwise from
the environment variable ``FEDTOOLKIT_DATA``; the flag wins.  Nothing is ever
downloaded or written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError

__all__ = ["ENV_VAR", "resolve_data_dir", "find_file_set", "FileSet"]

ENV_VAR = "FEDTOOLKIT_DATA"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """The user data directory: ``data_dir`` (the flag) beats ``$FEDTOOLKIT_DATA``.

    Returns ``None`` if neither is set (empty strings count as unset).  A
    directory that is named but does not exist is an error, not silently
    ignored.
    """
    if data_dir is not None and str(data_dir) != "":
        path, origin = Path(data_dir).expanduser(), "--data-dir"
    elif os.environ.get(ENV_VAR):
        path, origin = Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}"
    else:
        return None
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise DataError(f"data directory {path} (from {origin}) {what}")
    return path


@dataclass(frozen=True)
class FileSet:
    """A directory holding all files of one dataset; ``files`` maps role -> path."""

    directory: Path
    files: dict[str, Path]


def _existing(directory: Path, name: str, allow_gz: bool) -> Path | None:
    for candidate in (name, name + ".gz") if allow_gz else (name,):
        p = directory / candidate
        if p.is_file():
            return p
    return None


def find_file_set(
    candidates: list[Path], names: dict[str, str], dataset: str, allow_gz: bool = False
) -> FileSet | None:
    """First candidate directory containing every file in ``names`` (role -> file name).

    With ``allow_gz`` each file may also be present as ``name.gz``.  A
    directory holding only *some* of the files raises :class:`DataError`
    listing the missing ones (a half-copied dataset should not be skipped
    silently).  Returns ``None`` if no candidate holds any of the files.
    """
    for directory in candidates:
        if not directory.is_dir():
            continue
        found = {role: _existing(directory, fname, allow_gz) for role, fname in names.items()}
        present = {r: p for r, p in found.items() if p is not None}
        if len(present) == len(names):
            return FileSet(directory, present)  # type: ignore[arg-type]
        if present:
            missing = ", ".join(names[r] + ("[.gz]" if allow_gz else "") for r in names if r not in present)
            raise DataError(f"{dataset}: incomplete dataset in {directory}: missing {missing}")
    return None

"""What computed a result: the code identity that every saved run carries in its fingerprint.

A run's numbers depend on its config *and* on the code and libraries that computed it. A
saved result may be reused only when both match, so a run's fingerprint includes
:func:`code_digest`: a hash of the project's source (Python and the C kernels; ``sims/``,
``reproduce/`` and ``theory/``, which ``sims.experiments.probes`` reads bounds from) and of the versions
of the packages that change numerics (Python, torch, numpy, scipy). Hashing the files'
contents (not the git commit) makes the identity the same in any clone or checkout of the
same code, and different after any edit, committed or not.

What is hashed: every source file of ``sims/`` and ``reproduce/``, and of ``theory/`` only
``theory/bounds.py`` (:data:`SOURCE_FILES`), the one theory module that ``sims`` or
``reproduce`` import (``sims.experiments.probes`` evaluates the papers' bounds with it; a
test fails if they import another), so editing the symbolic audit does not make saved
simulation runs stale. Plug-in modules (:mod:`sims.plugins`: ``--import MODULE``, the
``fedtoolkit.plugins`` entry points) are folded in by their sources' sha256
(:func:`sims.store.extensions.plugin_sources`), so editing an external algorithm recomputes the
runs it computed. :data:`SHIPPED_PACKAGES` are the packages a Ray cluster receives: all of
``theory/`` travels (``from theory import bounds`` runs ``theory/__init__``).

:func:`code_identity` adds what a person wants to read back (the commit, whether the tree was
dirty, the digest's parts); it is recorded in every results file's JSON.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_PACKAGES = ("sims", "reproduce")        # hashed whole
SOURCE_FILES = ("theory/bounds.py",)           # hashed file by file
SHIPPED_PACKAGES = ("sims", "reproduce", "theory")   # what a Ray cluster receives
SOURCE_SUFFIXES = (".py", ".c", ".h")
NUMERIC_PACKAGES = ("torch", "numpy", "scipy")


@lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over every source file of :data:`SOURCE_PACKAGES` (``.py`` and the C kernels'
    ``.c`` / ``.h``, :mod:`sims.accel.native`) and the files :data:`SOURCE_FILES` (path and
    contents, sorted). The checkout's commit is read at the same moment
    (:func:`source_commit`), so the two describe the same code."""
    source_commit()
    h = hashlib.sha256()
    paths = set()
    for pkg in SOURCE_PACKAGES:
        paths |= {p for p in (ROOT / pkg).rglob("*") if p.suffix in SOURCE_SUFFIXES}
    paths |= {ROOT / f for f in SOURCE_FILES if (ROOT / f).is_file()}
    for path in sorted(paths):
        rel = path.relative_to(ROOT).as_posix()
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def package_versions(packages) -> dict[str, str]:
    """Python's version and each installed package's (``"absent"`` where not installed)."""
    out = {"python": sys.version.split()[0]}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


@lru_cache(maxsize=1)
def numeric_versions() -> dict[str, str]:
    """Versions of what changes floating-point results: Python and the numeric packages."""
    return package_versions(NUMERIC_PACKAGES)


def plugin_sources() -> dict[str, str]:
    """The imported plug-in modules, ``{module name: sha256 of its source}``
    (:func:`sims.store.extensions.plugin_sources`)."""
    from .extensions import plugin_sources as sources
    return sources()


def code_digest() -> str:
    """The short identity of the code that computes a run: the project's source, the
    numeric packages' versions and the imported plug-ins' sources."""
    blob = source_hash() + "".join(f"|{k}={v}" for k, v in sorted(numeric_versions().items()))
    blob += "".join(f"|plugin:{k}={v}" for k, v in sorted(plugin_sources().items()))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def code_identity() -> dict:
    """The code identity as recorded beside results (digest, its parts, the git commit of
    the code the process read, the plug-ins' sources)."""
    return {"code_digest": code_digest(), "source_hash": source_hash()[:16],
            "numeric_versions": numeric_versions(), "plugins": plugin_sources(),
            "commit": source_commit()}


@lru_cache(maxsize=1)
def source_commit() -> str:
    """:func:`git_commit` when this process first read its source (:func:`source_hash`): a
    run saved after the checkout moved on (a commit made while it ran) records the commit
    of the code that computed it, not the checkout's at save time."""
    return git_commit()


def git_commit(cwd: str | os.PathLike | None = None) -> str:
    """The checkout's commit (``-dirty`` with uncommitted changes to tracked files), or
    ``"unknown"`` outside a git checkout."""
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

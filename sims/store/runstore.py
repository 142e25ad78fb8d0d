"""A folder of saved runs that are reused only when they are current: the discipline shared by
the ``reproduce`` entries (:func:`reproduce.common.execute`) and ``python -m sims.compare``.

A run has two fingerprints:

* its *config fingerprint*: a hash of everything in its settings that changes results (the
  caller's ``key``); it names the run's files (``STEM.csv`` + ``STEM.json``), so runs with
  other settings never overwrite each other;
* its *fingerprint*: the config fingerprint plus the code identity
  (:func:`sims.store.identity.code_digest`: the project's source and the numeric packages'
  versions).

A saved run whose record lists the data it read (``data``, :mod:`sims.store.digest`) is
reused only while a rerun would read the same files with the same contents from the same
data directory; otherwise it is recomputed, and the console says why.

A saved run is reused when its record's fingerprint equals the run's: every reuse is said
("reused N saved runs (from commit X, DATE)"). One whose config matches but whose code does
not is *stale*: it is recomputed (and its files replaced), and the console says so, unless
``reuse_stale`` (the ``--reuse-stale`` flag), which reuses it and says that it does.

Computing a run takes its lock (:mod:`sims.store.locks`), so a second process on the same folder
waits for the first and then reuses its result (and says so). Long engine runs checkpoint
into ``FOLDER/.checkpoints/`` (:mod:`sims.store.checkpoint`), removed once the results are saved.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .checkpoint import SUFFIX as CHECKPOINT_SUFFIX
from .checkpoint import Checkpointer
from .digest import changed as data_changed
from . import identity
from .locks import RunLock
from .results import load_run, save_run


class FolderError(ValueError):
    """An output folder that cannot be used (one line)."""


def check_folder(path, flag: str = "--out") -> Path:
    """Make sure ``path`` is a folder we can write to (creating it), before any work: a
    one-line :class:`FolderError` otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FolderError(f"{flag} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-test.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise FolderError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") \
            from None
    for sub in (".locks", ".checkpoints"):          # what the run store makes inside it
        if (path / sub).exists() and not (path / sub).is_dir():
            raise FolderError(f"{flag} {path}: {path / sub} is a file where the run store "
                              "keeps a folder; remove it")
    return path


def config_fingerprint(key: dict) -> str:
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: the fingerprint of a run that resumed a checkpoint of other code (never current)
OTHER_CODE = "resumed-from-a-checkpoint-of-other-code"


def full_fingerprint(config_fp: str) -> str:
    """The config fingerprint joined with the code that computes the run."""
    return hashlib.sha256(f"{config_fp}|{identity.code_digest()}".encode()).hexdigest()[:16]


@dataclass
class Saved:
    df: pd.DataFrame
    record: dict
    stale: bool = False


def _origin(record: dict, path: Path) -> tuple[str, str]:
    """``(commit, date)`` a saved run came from, for the console."""
    commit = (record.get("code") or {}).get("commit") or record.get("commit") or "unknown"
    if commit not in ("unknown",) and len(commit) >= 40:
        commit = commit[:10] + commit[40:]           # short hash, keeping "-dirty"
    date = record.get("started")
    if not date:
        try:
            date = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                 time.gmtime(path.with_suffix(".json").stat().st_mtime))
        except OSError:
            date = "unknown date"
    return commit, str(date)[:16].replace("T", " ")


def _count(dates: list) -> str:
    return f"{len(dates)} saved run{'s' if len(dates) != 1 else ''}"


def _span(dates: list) -> str:
    """The dates runs of one commit were made: one date, or the first to the last (runs of
    one sweep straddle minutes; the console groups them by commit, not by minute)."""
    first, last = min(dates), max(dates)
    return first if first == last else f"{first} to {last}"


class RunStore:
    """The saved runs in ``folder`` (see the module docstring). ``say`` prints a console
    line; ``checkpoint_every``: seconds between checkpoints of a long run (0: none)."""

    def __init__(self, folder, *, reuse_stale: bool = False, say=print,
                 checkpoint_every: float = 600.0):
        self.folder = Path(folder)
        self.reuse_stale = reuse_stale
        self.say = say
        self.checkpoint_every = checkpoint_every
        self.reused: dict = {}                     # (commit, stale) -> dates of the runs
        self.outdated: dict = {}                   # commit -> dates of stale runs recomputed
        self.data_changed: Counter = Counter()     # reason -> runs whose data changed

    def path(self, stem: str) -> Path:
        return self.folder / f"{stem}.csv"

    def lookup(self, stems, config_fp: str, accept=None, note: bool = True) -> Saved | None:
        """The saved run under the first of ``stems`` whose config fingerprint matches and
        that ``accept(record)`` takes: current code, or stale with ``reuse_stale``. A
        mismatching table raises :class:`sims.store.results.ResultsError`."""
        fp = full_fingerprint(config_fp)
        for stem in ([stems] if isinstance(stems, str) else stems):
            found = load_run(self.path(stem))
            if found is None:
                continue
            df, record = found
            if record.get("config_fingerprint", record.get("fingerprint")) != config_fp:
                continue
            if accept is not None and not accept(record):
                continue
            origin = _origin(record, self.path(stem))
            why = data_changed(record.get("data"))
            if why is not None:                # the data it read is not what a rerun reads
                if note:
                    self.data_changed[why] += 1
                continue
            stale = record.get("fingerprint") != fp
            if stale and not self.reuse_stale:
                if note:
                    self.outdated.setdefault(origin[0], []).append(origin[1])
                continue
            if note:
                self.reused.setdefault((origin[0], stale), []).append(origin[1])
            return Saved(df, record, stale)
        return None

    def report(self, recompute: bool = True) -> None:
        """Say what was reused, and which saved runs are being recomputed (other code; with
        ``recompute=False``, as for ``--plot-only``: which are left out)."""
        for (commit, stale), dates in sorted(self.reused.items()):
            runs, date = _count(dates), _span(dates)
            if stale:
                self.say(f"reused {runs} (from commit {commit}, {date}) computed by OTHER code "
                         "than this checkout's (--reuse-stale)")
            else:
                self.say(f"reused {runs} (from commit {commit}, {date})")
        for commit, dates in sorted(self.outdated.items()):
            runs = f"{_count(dates)} (from commit {commit}, {_span(dates)})"
            if recompute:
                self.say(f"recomputing {runs}: the code or numeric packages changed since; "
                         "--reuse-stale reuses them instead")
            else:
                self.say(f"not using {runs}: computed by other code than this checkout's; "
                         "--reuse-stale uses them")
        for why, n in sorted(self.data_changed.items()):
            runs = f"{n} saved run{'s' if n != 1 else ''}"
            self.say(f"{'recomputing' if recompute else 'not using'} {runs}: the data "
                     f"{'they' if n != 1 else 'it'} read changed ({why})")
        self.reused.clear()
        self.outdated.clear()
        self.data_changed.clear()

    def lock(self, stem: str, label: str | None = None) -> RunLock:
        """The run's lock, taken; when another process holds it, say so and wait."""
        return RunLock(self.folder / ".locks" / f"{stem}.lock").take(
            f"run {label or stem}", self.say, FolderError)

    def checkpointer(self, stem: str, config_fp: str, part: str = "") -> Checkpointer | None:
        """The run's checkpointer (None with ``checkpoint_every`` 0). Its key is the config,
        the part (a chunk of seeds) and the code: a checkpoint of other code is not resumed,
        except with ``reuse_stale`` (said, and recorded by the caller from
        ``Checkpointer.other_code``)."""
        if not self.checkpoint_every or self.checkpoint_every <= 0:
            return None
        name = f"{stem}{'_' + part if part else ''}{CHECKPOINT_SUFFIX}"
        ckpt = Checkpointer(self.folder / ".checkpoints" / name,
                            every_seconds=self.checkpoint_every,
                            key=f"{config_fp}|{part}|{identity.code_digest()}", say=self.say)
        if self.reuse_stale:
            ckpt.adopt_other_code(f"{config_fp}|{part}|")
        return ckpt

    def save(self, df: pd.DataFrame, record: dict, stem: str, config_fp: str) -> Path:
        """Save a computed run with both fingerprints and the code digest in its record. A
        run that resumed a checkpoint of other code (``record["resumed_from_other_code"]``)
        is saved as of other code (fingerprint :data:`OTHER_CODE`): part of it was computed
        by that code, so it is never current, and only ``reuse_stale`` reads it back."""
        mixed = bool(record.get("resumed_from_other_code"))
        record = {**record, "config_fingerprint": config_fp,
                  "fingerprint": OTHER_CODE if mixed else full_fingerprint(config_fp),
                  "code_digest": identity.code_digest()}
        path = self.path(stem)
        save_run(df, record, path)
        return path

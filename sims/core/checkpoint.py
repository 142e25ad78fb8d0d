"""Checkpoints of a running engine run, so a long run that is stopped resumes where it was.

``engine.run(..., checkpoint=Checkpointer(path, every_seconds=600))`` saves, at the end of a
round once ``every_seconds`` have passed since the last save (or every ``every_rounds``
rounds), everything the rest of the run depends on: the server state, the per-client state,
each client's last round, the curves and draws recorded so far, the cumulative bits, the
divergence flags, the round index and torch's random state (dropout draws from it; the
engine's own draws are a pure function of ``(seed, round)``, :func:`sims.core.engine.draw_round`,
so they need no saving). A later ``engine.run`` with the same checkpointer and the same
``key`` starts from the saved round, and its output equals that of an uninterrupted run
exactly (``wall_time`` continues from the time already spent).

On disk: one file, replaced atomically (written beside it, fsynced, renamed), so there is
only ever the latest checkpoint (bounded disk) and a run killed while saving leaves the
previous one intact. :meth:`Checkpointer.clear` removes it once the run's results are saved.
A checkpoint whose ``key`` differs (another config, other code, other seeds) is ignored.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

FORMAT = 1


class Checkpointer:
    """Where and how often to checkpoint one run (see the module docstring).

    ``key``: what the checkpoint must match to be resumed from (the caller's fingerprint of
    the run, e.g. config, code identity and seeds); the engine adds its own shape checks.
    ``every_seconds``: save at the first round end at least this long after the run started
    or last saved (0: every round). ``every_rounds``: instead, every this many rounds.
    ``final``: also save after the last round (a caller that runs several engine runs before
    it saves results, e.g. chunks of seeds, so a finished chunk is not run again).
    """

    def __init__(self, path, every_seconds: float = 600.0, every_rounds: int | None = None,
                 key: str = "", final: bool = False):
        if every_seconds < 0:
            raise ValueError(f"every_seconds must be >= 0, got {every_seconds}")
        if every_rounds is not None and every_rounds < 1:
            raise ValueError(f"every_rounds must be >= 1, got {every_rounds}")
        self.path = Path(path)
        self.every_seconds = float(every_seconds)
        self.every_rounds = every_rounds
        self.key = str(key)
        self.final = final
        self._last = time.monotonic()
        self.saves = 0
        self.resumed_from: int | None = None
        self._loaded: dict | None = None

    def due(self, t: int) -> bool:
        """Whether to save after ``t`` rounds."""
        if self.every_rounds is not None:
            return t % self.every_rounds == 0
        return time.monotonic() - self._last >= self.every_seconds

    def save(self, state: dict) -> None:
        """Write ``state`` (plus the key) atomically over the previous checkpoint."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save({"format": FORMAT, "key": self.key, "state": state}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._last = time.monotonic()
        self.saves += 1

    def saved_round(self) -> int:
        """The round the saved checkpoint is at (0: none usable); the state read stays
        cached for the :meth:`load` that follows."""
        self._loaded = self.load()
        return int(self._loaded["t"]) if self._loaded else 0

    def _read(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            # our own file (written by save above): it holds numpy arrays and lists too
            blob = torch.load(self.path, map_location="cpu", weights_only=False)
        except Exception:  # noqa: BLE001 - a damaged checkpoint is ignored, never trusted
            return None
        return blob if isinstance(blob, dict) and blob.get("format") == FORMAT else None

    def saved_key(self) -> str | None:
        """The key the checkpoint on disk was saved with (None: none readable)."""
        blob = self._read()
        return None if blob is None else blob.get("key")

    def load(self) -> dict | None:
        """The saved state, or None when there is none, it is unreadable or its key differs."""
        if self._loaded is not None:
            state, self._loaded = self._loaded, None
            return state
        blob = self._read()
        if blob is None or blob.get("key") != self.key:
            return None
        return blob["state"]

    def clear(self) -> None:
        """Remove the checkpoint (the run's results are saved)."""
        self.path.unlink(missing_ok=True)
        for tmp in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------- the engine's state

def to(obj, device):
    """``obj`` (nested dicts/lists of tensors) with every tensor moved to ``device``."""
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to(v, device) for v in obj)
    return obj


def snapshot(*, observers=(), **state) -> dict:
    """The engine's state after ``state["t"]`` rounds, with torch's random streams and the
    observers' state, for :meth:`Checkpointer.save` to write at once (it is not a copy:
    the run goes on changing the tensors in place)."""
    out = {k: to(v, "cpu") for k, v in state.items()}
    out["torch_rng"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_rng"] = torch.cuda.get_rng_state_all()
    out["observers"] = [to(obs.state_dict(), "cpu") for obs in observers]
    return out


def restore_streams(state: dict, observers=()) -> None:
    """Put torch's random streams and the observers back as they were at the checkpoint."""
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    for obs, st in zip(observers, state["observers"]):
        obs.load_state_dict(st)


def check_observers(checkpoint, observers) -> None:
    if checkpoint is None:
        return
    lacking = [type(o).__name__ for o in observers
               if not (hasattr(o, "state_dict") and hasattr(o, "load_state_dict"))]
    if lacking:
        raise ValueError(f"cannot checkpoint a run with observer(s) {', '.join(lacking)}: "
                         "they have no state_dict/load_state_dict")


def check_shape(state: dict, checkpoint, **expected) -> None:
    """A checkpoint whose key matched must be of this very run (seeds, rounds, sizes)."""
    for name, value in expected.items():
        if state.get(name) != value:
            raise ValueError(f"checkpoint {checkpoint.path} was saved by another run "
                             f"({name} {state.get(name)!r}, this run {value!r}); delete it")

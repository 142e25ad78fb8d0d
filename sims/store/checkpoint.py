"""Checkpoints of a running engine run, so a long run that is stopped resumes where it was.

``engine.run(..., checkpoint=Checkpointer(path, every_seconds=600))`` saves, at the end of a
round once ``every_seconds`` have passed since the last save (or every ``every_rounds``
rounds), everything the rest of the run depends on: the server state, the per-client state,
each client's last round, the curves and draws recorded so far, the cumulative bits, the
divergence flags, the round index and torch's random state (dropout draws from it; the
engine's own draws are a pure function of ``(seed, round)``, :func:`sims.core.engine.draw_round`,
so they need no saving). A later ``engine.run`` with the same checkpointer and the same
``key`` starts from the saved round, and its output equals that of an uninterrupted run
exactly (``wall_time`` continues from the time already spent). A run stopped by SIGINT
finishes its round and saves a checkpoint before it stops (:func:`sims.core.engine.run`).

On disk: one safetensors file (tensors, and numpy arrays as tensors) whose metadata holds the
format, the key and a JSON skeleton of the nested state (dicts, lists, tuples, numbers,
strings). Nothing is unpickled: a planted or damaged file can at worst be refused. The key
is read from the header first, before any tensor. The file is replaced atomically (written
beside it, fsynced, renamed), so there is only ever the latest checkpoint and a run killed
while saving leaves the previous one intact. :meth:`Checkpointer.clear` removes it once the
run's results are saved. A checkpoint whose ``key`` differs (another config, other code,
other seeds) is not resumed; one that cannot be read is said and ignored. A save that fails
(a full disk, an unwritable folder) is said once and the run goes on without it.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

FORMAT = "fedtoolkit-checkpoint-2"
SUFFIX = ".safetensors"


class CheckpointError(ValueError):
    """A state that cannot be written as a checkpoint, or a file that is not one (one line)."""


def _say_stderr(line: str) -> None:
    print(line, file=sys.stderr)


# ------------------------------------------------------------------ the file format

def _encode(obj, tensors: dict):
    """``obj`` as a JSON skeleton; its tensors and arrays go into ``tensors`` by name."""
    def put(t: torch.Tensor) -> str:
        name = f"t{len(tensors)}"
        tensors[name] = t.detach().to("cpu").contiguous().clone()
        return name

    if torch.is_tensor(obj):
        return {"__tensor__": put(obj)}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise CheckpointError("cannot checkpoint a numpy array of Python objects")
        return {"__ndarray__": put(torch.from_numpy(np.ascontiguousarray(obj)))}
    if isinstance(obj, np.generic):
        return _encode(obj.item(), tensors)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        packed = _packed_arrays(obj)
        if packed is not None:
            flat, lengths = packed
            return {"__arrays__": put(torch.from_numpy(flat)), "lengths": lengths,
                    "tuple": isinstance(obj, tuple)}
        items = [_encode(v, tensors) for v in obj]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    raise CheckpointError(f"cannot checkpoint a {type(obj).__name__}")


def _packed_arrays(seq):
    """A non-empty sequence of 1-D numpy arrays of one dtype as ``(concatenated, lengths)``
    (the per-round draws: one tensor instead of thousands); None otherwise."""
    if not seq or not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in seq):
        return None
    dtypes = {a.dtype for a in seq}
    if len(dtypes) != 1 or next(iter(dtypes)) == object:
        return None
    return np.ascontiguousarray(np.concatenate(seq)), [int(len(a)) for a in seq]


def _decode(node, tensors: dict):
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        return tensors[node["__tensor__"]]
    if "__ndarray__" in node:
        return tensors[node["__ndarray__"]].numpy()
    if "__float__" in node:
        return float(node["__float__"])
    if "__tuple__" in node:
        return tuple(_decode(v, tensors) for v in node["__tuple__"])
    if "__dict__" in node:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in node["__dict__"]}
    if "__arrays__" in node:
        flat = tensors[node["__arrays__"]].numpy()
        out, lo = [], 0
        for n in node["lengths"]:
            out.append(flat[lo:lo + n].copy())
            lo += n
        return tuple(out) if node.get("tuple") else out
    raise CheckpointError(f"unknown node {sorted(node)}")


def write_state(path: Path, state: dict, key: str) -> None:
    """Write ``state`` with ``key`` as a checkpoint file at ``path``, atomically."""
    from safetensors.torch import save_file
    from .results import atomic_write
    tensors: dict = {}
    skeleton = json.dumps(_encode(state, tensors))
    atomic_write(path, lambda tmp: save_file(
        tensors, tmp, metadata={"format": FORMAT, "key": key, "skeleton": skeleton}))


def read_header(path: Path) -> dict:
    """The checkpoint's metadata (format, key, skeleton), reading no tensor; raises
    :class:`CheckpointError` for a file that is not a checkpoint of this format."""
    from safetensors import safe_open
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as exc:  # noqa: BLE001 - any unreadable file is refused, never trusted
        raise CheckpointError(f"not a checkpoint ({' '.join(str(exc).split())[:120]})") \
            from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"not a checkpoint of this format ({meta.get('format')!r})")
    return meta


def header_round(header: dict) -> int | None:
    """The rounds done by the state a checkpoint's header describes (its top-level ``t``),
    from the skeleton alone (no tensor read); None where it has none."""
    try:
        node = json.loads(header.get("skeleton") or "null")
    except ValueError:
        return None
    pairs = node.get("__dict__") if isinstance(node, dict) else None
    for pair in pairs if isinstance(pairs, list) else ():
        if isinstance(pair, list) and len(pair) == 2 and pair[0] == "t":
            t = pair[1]
            return t if isinstance(t, int) and not isinstance(t, bool) else None
    return None


def read_state(path: Path, header: dict) -> dict:
    """The state of the checkpoint at ``path`` whose header is ``header``."""
    from safetensors.torch import load_file
    try:
        tensors = load_file(str(path))
        state = _decode(json.loads(header["skeleton"]), tensors)
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CheckpointError(f"damaged checkpoint ({' '.join(str(exc).split())[:120]})") \
            from None
    if not isinstance(state, dict):
        raise CheckpointError("damaged checkpoint (its state is not a mapping)")
    return state


class Checkpointer:
    """Where and how often to checkpoint one run (see the module docstring).

    ``key``: what the checkpoint must match to be resumed from (the caller's fingerprint of
    the run, e.g. config, code identity and seeds); the engine adds its own shape checks.
    ``every_seconds``: save at the first round end at least this long after the run started
    or last saved (0: every round). ``every_rounds``: instead, every this many rounds.
    ``final``: also save after the last round (a caller that runs several engine runs before
    it saves results, e.g. chunks of seeds, so a finished chunk is not run again).
    ``say``: prints a console line (a checkpoint that cannot be read or written).
    """

    def __init__(self, path, every_seconds: float = 600.0, every_rounds: int | None = None,
                 key: str = "", final: bool = False, say=_say_stderr):
        if not every_seconds >= 0:          # also refuses NaN
            raise ValueError(f"every_seconds must be >= 0, got {every_seconds}")
        if every_rounds is not None and every_rounds < 1:
            raise ValueError(f"every_rounds must be >= 1, got {every_rounds}")
        self.path = Path(path)
        self.every_seconds = float(every_seconds)
        self.every_rounds = every_rounds
        self.key = str(key)
        self.final = final
        self.say = say
        self._last = time.monotonic()
        self.saves = 0
        self.failed_saves = 0
        self.resumed_from: int | None = None
        self.other_code = False                 # resuming a checkpoint of other code
        self.resumed_elapsed: float = 0.0       # engine seconds before the resume
        self._loaded: dict | None = None
        self._told: set = set()

    def due(self, t: int) -> bool:
        """Whether to save after ``t`` rounds."""
        if self.every_rounds is not None:
            return t % self.every_rounds == 0
        return time.monotonic() - self._last >= self.every_seconds

    def save(self, state: dict) -> bool:
        """Write ``state`` (plus the key) atomically over the previous checkpoint; whether it
        was written (a failure, e.g. a full disk, is said once and the run goes on)."""
        try:
            write_state(self.path, state, self.key)
        except (OSError, RuntimeError, CheckpointError) as exc:
            self.failed_saves += 1
            if self.failed_saves == 1:
                reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:160]
                self.say(f"warning: checkpoint {self.path} not written ({reason}); the run goes "
                         "on without it")
            return False
        except Exception as exc:  # noqa: BLE001 - safetensors' own errors
            self.failed_saves += 1
            if self.failed_saves == 1:
                self.say(f"warning: checkpoint {self.path} not written "
                         f"({' '.join(str(exc).split())[:160]}); the run goes on without it")
            return False
        self._last = time.monotonic()
        self.saves += 1
        return True

    def saved_round(self) -> int:
        """The round the saved checkpoint is at (0: none usable); the state read stays
        cached for the :meth:`load` that follows."""
        self._loaded = self.load()
        return int(self._loaded["t"]) if self._loaded else 0

    def _header(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            return read_header(self.path)
        except CheckpointError as exc:
            self._tell(f"checkpoint {self.path} ignored: {exc}")
            return None

    def _tell(self, line: str) -> None:
        if line not in self._told:
            self._told.add(line)
            self.say(line)

    def saved_key(self) -> str | None:
        """The key the checkpoint on disk was saved with (None: none readable)."""
        header = self._header()
        return None if header is None else header.get("key")

    def adopt_other_code(self, prefix: str) -> bool:
        """Resume the saved checkpoint although its code differs (``--reuse-stale``): where
        its key differs from this one's but starts with ``prefix`` (the run's own part of
        the key, without the code), take its key, set ``other_code`` and say so."""
        saved = self.saved_key() if self.path.exists() else None
        if not saved or saved == self.key or not saved.startswith(prefix):
            return False
        self.say(f"{self.path.name}: resuming a checkpoint of OTHER code (--reuse-stale)")
        self.key, self.other_code = saved, True
        return True

    def load(self) -> dict | None:
        """The saved state, or None when there is none, it is unreadable (said) or its key
        differs. The key is compared before any tensor is read."""
        if self._loaded is not None:
            state, self._loaded = self._loaded, None
            return state
        header = self._header()
        if header is None or header.get("key") != self.key:
            return None
        try:
            return read_state(self.path, header)
        except CheckpointError as exc:
            self._tell(f"checkpoint {self.path} ignored: {exc}")
            return None

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


def write_failed_message(exc: OSError, unit: str = "runs") -> str:
    """The console line for a command stopped by an output it cannot write (a full disk, a
    read-only folder): what is kept, and what to do."""
    from .results import os_error_text
    return (f"{os_error_text(exc)}; finished {unit} are saved (and a run in progress keeps "
            "its last checkpoint): free the space or fix the folder, then run the same "
            "command again")


def interrupted_message(exc: BaseException, unit: str = "runs") -> str:
    """The console line for an interrupted command: whether the run in progress has a
    checkpoint to resume from (``exc`` a :class:`sims.core.engine.Interrupted`) or may have one
    (a plain KeyboardInterrupt: stopped at once, mid-round)."""
    done = f"finished {unit} are saved"
    again = "run the same command again to continue"
    if getattr(exc, "round", None) is not None:
        if getattr(exc, "checkpoint", None) is not None:
            return (f"interrupted after round {exc.round}: {done} and the run in progress "
                    f"resumes from its checkpoint at round {exc.round}; {again}")
        return (f"interrupted after round {exc.round}: {done}; the run in progress has no "
                f"checkpoint (checkpoints off, or not writable) and starts again; {again}")
    return (f"interrupted: {done}; a run in progress resumes from its last checkpoint if one "
            f"was written (every --checkpoint-every seconds), else it starts again; {again}")

"""One-pass CPU kernels in C for the local steps torch cannot fuse.

Each local adaptive step is a few elementwise operations per parameter. In eager torch each
operation is its own pass over the participants' ``[B, d]`` tensors; here it is one C loop
per row. The kernels are plain C (no torch headers), compiled once per machine with the
system's C compiler (``$CC``, else ``cc``) in about a second and loaded with :mod:`ctypes`;
each is written in its own source file beside the Python wrapper that checks its operands
and returns None where the kernel cannot take them: :mod:`.adaptive` (the local AMSGrad /
Adam step: Fed-AMS, Fed-LAMB, LocalAdam, FedLADA), :mod:`.frozen` (the frozen-state step:
MimeLite / Mime and their LAMB variants), :mod:`.sm3` (FedAda2's full and SM3-II clients),
:mod:`.topk` (TopK compression). Which rule each serves is decided in :mod:`sims.accel`
(the plans); what each measured to save is in ``docs/speed.md``.

* **Build.** Every ``*.c`` in this folder into one shared library, ``-O3 -march=native
  -fno-math-errno`` (``sqrt`` vectorizes; no fast-math: each operation rounds as IEEE says,
  up to the compiler's fused multiply-adds), cached under :func:`cache_dir` by a digest of
  the sources, the compiler's version, the flags and the CPU's feature flags (a library
  built for another CPU is never loaded). Compiling holds a file lock and renames the
  finished file into place, so concurrent processes build it once and never load half a
  file.
* **Fallback.** No compiler, a failed build or load, or ``FEDTOOLKIT_NATIVE=0``
  (:func:`enable`): :func:`library` returns None, the reason is warned once, and every
  rule takes its readable form.
* **Threads.** A kernel splits its rows over :func:`threads` (torch's intra-op count)
  with OpenMP on torch's own thread pool (the library names ``libgomp.so.1``, which torch
  has already loaded).

Tested by ``tests/accel/test_native.py`` (build, cache, fallback, threads) and by the
harness that holds every planned form to its rule (``tests/accel/test_forms.py``).
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch


SOURCE_DIR = Path(__file__).resolve().parent
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fopenmp", "-fPIC", "-shared",
         "-std=c11")

_state = {"enabled": os.environ.get("FEDTOOLKIT_NATIVE", "1") != "0", "lib": None,
          "failed": None}
calls: dict[str, int] = {}          # successful kernel calls by name (tests check the path)


def enable(on: bool = True) -> None:
    """Turn the kernels on or off for this process (default: ``FEDTOOLKIT_NATIVE``, on
    unless ``0``); turning on retries a build that failed."""
    _state["enabled"] = bool(on)
    if on:
        _state["failed"] = None


def enabled() -> bool:
    return _state["enabled"]


def cache_dir() -> Path:
    """Where built libraries are kept: ``FEDTOOLKIT_NATIVE_CACHE``, else
    ``$XDG_CACHE_HOME/fedtoolkit/native`` (``~/.cache/fedtoolkit/native``)."""
    got = os.environ.get("FEDTOOLKIT_NATIVE_CACHE")
    if got:
        return Path(got)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fedtoolkit" / "native"


def _compiler() -> str | None:
    cc = os.environ.get("CC") or "cc"
    return shutil.which(cc)


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.glob("*.c")) + sorted(SOURCE_DIR.glob("*.h"))


def build_key(cc: str) -> str:
    """The digest naming the library: sources, compiler version, flags, machine, CPU."""
    h = hashlib.sha256()
    for path in sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    for part in (version, " ".join(FLAGS), platform.machine(), _cpu_flags()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive ``flock`` on ``path`` while building (released however the build ends)."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(cc: str) -> Path:
    out_dir = cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"fedtoolkit_native_{build_key(cc)}.so"
    if target.exists():
        return target
    with _locked(out_dir / ".build.lock"):
        if target.exists():                      # another process built it meanwhile
            return target
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
        os.close(fd)
        try:
            c_files = [str(p) for p in sources() if p.suffix == ".c"]
            done = subprocess.run([cc, *FLAGS, "-o", tmp, *c_files], capture_output=True,
                                  text=True, timeout=300)
            if done.returncode:
                first = (done.stderr.strip().splitlines() or ["no message"])[0]
                raise RuntimeError(f"{cc} failed ({done.returncode}): {first}")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target


def library():
    """The loaded kernels (a :class:`ctypes.CDLL`), built on first use; None when turned
    off or when the build or load failed (warned once, with the reason)."""
    if not _state["enabled"] or _state["failed"]:
        return None
    if _state["lib"] is None:
        try:
            cc = _compiler()
            if cc is None:
                raise RuntimeError(f"no C compiler ({os.environ.get('CC') or 'cc'}) on PATH")
            _state["lib"] = ctypes.CDLL(str(_build(cc)))
        except (OSError, RuntimeError, subprocess.SubprocessError) as err:
            _state["failed"] = str(err)
            warnings.warn(f"sims.accel.native: C kernels unavailable, using the torch forms "
                          f"({err})", RuntimeWarning, stacklevel=2)
            return None
    return _state["lib"]


def failure() -> str | None:
    """Why :func:`library` returned None after a failed build (None otherwise)."""
    return _state["failed"]


def status() -> str:
    """For a run's provenance, without building anything: ``"off"``, ``"failed: REASON"``,
    ``"loaded NAME"`` (the library file) or ``"on, not loaded"`` (no kernel used yet)."""
    if not _state["enabled"]:
        return "off"
    if _state["failed"]:
        return f"failed: {_state['failed']}"
    if _state["lib"] is not None:
        return f"loaded {Path(_state['lib']._name).name}"
    return "on, not loaded"


def ptr(t: torch.Tensor | None, offset: int = 0):
    """The address of ``t``'s element ``offset`` (counted in its elements from its first, as
    the kernels index a contiguous tensor: ``row * d`` for a row of a ``[B, d]`` tensor) for
    a kernel argument (None: a null pointer)."""
    if t is None:
        return None
    return ctypes.c_void_p(t.data_ptr() + offset * t.element_size())


def rows_of(x, B: int, dtype: torch.dtype):
    """A per-row tensor (``[B]`` or ``[B, 1]``) as the kernels read it, a contiguous ``[B]``
    of ``dtype``; None when ``x`` is not a tensor of ``B`` values."""
    if not torch.is_tensor(x) or x.numel() != B:
        return None
    return x.reshape(B).to(dtype).contiguous()


def rate(lr, B: int, dtype: torch.dtype):
    """A learning rate as the kernels take it, ``(number, rows)``: a number (``rows`` None),
    or one per row (``rows`` :func:`rows_of`, ``number`` 0); None when ``lr`` is a tensor of
    neither 1 nor ``B`` values."""
    if not torch.is_tensor(lr):
        return float(lr), None
    if lr.numel() == 1:
        return float(lr), None
    rows = rows_of(lr, B, dtype)
    return None if rows is None else (0.0, rows)


def usable(*tensors) -> bool:
    """Whether the kernels can take these tensors: on, built, every tensor (None skipped)
    contiguous on the CPU, all float32 or all float64."""
    ts = [t for t in tensors if t is not None]
    if not ts or not _state["enabled"] or _state["failed"]:
        return False
    dtype = ts[0].dtype
    if dtype not in (torch.float32, torch.float64):
        return False
    if not all(t.device.type == "cpu" and t.dtype == dtype and t.is_contiguous() for t in ts):
        return False
    return library() is not None


def kernel(name: str, dtype: torch.dtype, argtypes: list):
    """The C function ``{name}_f32`` / ``{name}_f64`` for ``dtype``, taking ``argtypes`` and
    returning nothing (every kernel writes its outputs)."""
    fn = getattr(library(), f"{name}_{'f32' if dtype == torch.float32 else 'f64'}")
    fn.argtypes, fn.restype = argtypes, None
    return fn


def threads() -> int:
    """The OpenMP threads a kernel call splits its rows over: torch's intra-op count."""
    return max(1, torch.get_num_threads())


def count(name: str) -> None:
    calls[name] = calls.get(name, 0) + 1

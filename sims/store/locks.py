"""A per-run lock, so two processes writing into one results folder never compute one run
twice: the first takes the run's lock and computes; the second sees it taken, says so,
waits for it, and then finds the run saved.

The lock is ``fcntl.flock`` on a small file (``OUT/.../.locks/STEM.lock``) that names its
holder (pid, host). The operating system releases it when the holder exits in any way
(also SIGKILL), so a crashed run leaves no lock behind. ``flock`` is advisory and local:
processes on one machine (or a file system that honours it) see each other's locks.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path


class RunLock:
    """An exclusive lock on ``path`` (created if needed). ``acquire(blocking)`` returns
    whether it was taken; a context manager waits for it."""

    def __init__(self, path):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        self._fd = fd
        return True

    def take(self, what: str, say, error=ValueError) -> "RunLock":
        """Take the lock, waiting for it; when another process holds it, ``say`` so first
        (``"WHAT: being computed by another process (HOLDER); waiting for it"``). A lock
        file that cannot be made raises ``error`` (one line)."""
        try:
            taken = self.acquire(blocking=False)
        except OSError as exc:
            raise error(f"{self.path}: cannot take the lock ({exc.strerror or exc})") \
                from None
        if not taken:
            say(f"{what}: being computed by another process ({self.holder()}); waiting for it")
            self.acquire()
        return self

    def busy(self) -> bool:
        """Whether another open lock on ``path`` holds it now, found without taking it or
        writing anything (no file: not held)."""
        if self._fd is not None:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def holder(self) -> str:
        """Who holds the lock, as its file says (best effort)."""
        try:
            return self.path.read_text().strip() or "another process"
        except OSError:
            return "another process"

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

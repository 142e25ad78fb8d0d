"""Ctrl-C while a command is still starting (importing torch takes seconds): one line and
exit status 130, never a traceback from the middle of an import.

``python -m PACKAGE.MODULE`` imports the package before the module, while ``sys.argv[0]``
is still ``"-m"``: :func:`quiet_while_starting`, called from ``sims/__init__.py`` and
``reproduce/__init__.py``, installs the quiet handler only then (a library import, a
notebook or the tests never see it). Each command's ``main`` calls :func:`restore` first,
after which Ctrl-C raises KeyboardInterrupt as usual and the command's own handling applies.
"""
from __future__ import annotations

import os
import signal
import sys
import threading


def _quit(signum, frame):
    sys.stderr.write("interrupted while starting: nothing was run\n")
    sys.stderr.flush()
    os._exit(130)


def quiet_while_starting() -> None:
    if (sys.argv[:1] == ["-m"] and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, _quit)


def restore() -> None:
    """Ctrl-C raises KeyboardInterrupt again (where :func:`quiet_while_starting` set it)."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is _quit):
        signal.signal(signal.SIGINT, signal.default_int_handler)

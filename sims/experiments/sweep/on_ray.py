"""Sweep units as Ray tasks (:func:`sims.experiments.sweep.run_sweep` with ``executor="ray"``).

:func:`ray_init` connects to the cluster at an address (or ``RAY_ADDRESS``), shipping the
project's packages (``sims``, ``reproduce``, ``theory``) with the tasks, or starts Ray on this
machine with one CPU per core. :func:`run_ray` submits one task per unit (one CPU, one torch
thread; a GPU per task when the sweep's device is cuda), gathers the results here as they
finish (this process writes them), counts progress through a small actor every round, and
records a failed task (exception or killed worker) and submits it once more. Every task
carries this process's plug-ins (:func:`sims.plugins.shipment`), imported on the worker
before its cells run.

Authentication (Ray 2.60 turns on token authentication for clusters it starts): a cluster
started with token authentication accepts a connection only with ``RAY_AUTH_MODE=token``
and its token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) in the
connecting process; Ray never turns it on by itself for an explicit address.
:func:`ray_init` forwards ``RAY_AUTH_MODE`` to the connection (also when it was set after
Ray was imported, as in a notebook), and a cluster that does not answer is a one-line
:class:`~sims.experiments.sweep.grid.GridError` naming the address as given and what to
check.
"""
from __future__ import annotations

import logging
import os
import re
import socket

from ...store.identity import ROOT, SHIPPED_PACKAGES
from .grid import GridError


def _ray_task(payload, unit, counter, threads, run_unit):
    """A unit on a Ray worker (``run_unit``: :func:`sims.experiments.sweep.execute.run_unit`):
    this process's plug-ins imported first, one torch thread, progress to the shared
    counter, the allocator tuned as in a command (:mod:`sims.core.malloc`)."""
    from ... import plugins
    from ...core import malloc
    malloc.tune_for_command()
    plugins.ensure(payload.get("plugins"))

    def progress(n):
        counter.add.remote(n)
    return run_unit(payload, unit, progress=progress, threads=threads)


def forward_auth() -> str | None:
    """Make this process's Ray connection use ``RAY_AUTH_MODE`` as now set (Ray reads its
    configuration once, when it is imported; a mode set later, e.g. in a notebook, is
    applied here). Returns the mode (None when unset)."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode:
        try:
            from ray._raylet import Config
            Config.initialize("")
        except (ImportError, AttributeError, RuntimeError):   # another Ray: env only
            pass
    return mode


def _where(address: str, given: str | None) -> str:
    return f"{address} ({'--ray-address' if given else 'RAY_ADDRESS'})"


def connection_hint(address: str, given: str | None, reason: str) -> str:
    """The one-line error for a cluster that cannot be reached at ``address``."""
    mode = os.environ.get("RAY_AUTH_MODE")
    auth = ("RAY_AUTH_MODE=token is set here; check that this machine has the cluster's token "
            "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
            if mode == "token" else
            "a cluster started by Ray 2.60 uses token authentication: set RAY_AUTH_MODE=token "
            "and the cluster's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token) here and on every node")
    return (f"cannot connect to the Ray cluster at {_where(address, given)}: {reason}; "
            f"check that `ray start --head` runs there and the port is the head's; {auth}")


def _probe(address: str, given: str | None) -> None:
    """A quick TCP check of a ``HOST:PORT`` address (Ray itself retries for minutes)."""
    m = re.fullmatch(r"\[?([^\]/]+?)\]?:(\d+)", address.strip())
    if not m or "://" in address:           # ray://, auto, local: Ray's own handling
        return
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=10).close()
    except OSError as exc:
        raise GridError(connection_hint(address, given, exc.strerror or str(exc) or
                                        "no answer")) from None


def ray_init(address: str | None = None, workers: int | None = None) -> bool:
    """Connect to Ray: the cluster at ``address`` (or ``RAY_ADDRESS``), which receives the
    project's packages, else a local instance with ``workers`` CPUs (default: every core).
    Returns whether this call started it (the caller then shuts it down)."""
    try:
        import ray
    except ImportError:
        raise GridError("the ray executor needs Ray: pip install -c constraints.txt ray") \
            from None
    given = address
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        _probe(address, given)             # also when connected: a typo is said, not ignored
    if ray.is_initialized():
        return False
    if address:
        forward_auth()
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR,
                     runtime_env={"py_modules": [str(ROOT / p) for p in SHIPPED_PACKAGES]})
        except (ConnectionError, RuntimeError, TimeoutError, ray.exceptions.RayError) as exc:
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            chain, cause = [], exc
            while cause is not None:
                chain.append(f"{type(cause).__name__} {cause}")
                cause = cause.__cause__ or cause.__context__
            if any("InvalidAuthToken" in t or "AuthenticationError" in t for t in chain):
                reason += (" (the cluster refused this process's authentication: RAY_AUTH_MODE "
                           "is not token here, or the token differs from the cluster's)")
            raise GridError(connection_hint(address, given, reason)) from None
    else:
        path = os.pathsep.join([str(ROOT)] + [p for p in
                                              [os.environ.get("PYTHONPATH", "")] if p])
        # Ray starts its workers at nice 15 by default; on cores shared with other jobs
        # they then get a fraction of a core each, so they run at the driver's priority.
        ray.init(num_cpus=int(workers or os.cpu_count() or 1), include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR,
                 _system_config={"worker_niceness": 0}, runtime_env={"env_vars": {
                     "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}})
    return True


class _Counter:
    """Cell-rounds reported by the running tasks (one small actor per Ray session)."""

    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k

    def get(self):
        return self.n

    def reset(self):
        self.n = 0


_COUNTERS: dict = {}


def _counter(ray):
    """The session's counter, reset; created once per Ray session (an actor is a process,
    and starting one per sweep costs a second or two on a busy machine). A session is the
    job on this node: a Ray started again (each sweep of a multi-panel entry starts and shuts
    down its own) numbers its first job as the last one did, so the job id alone would hand
    back the dead session's actor."""
    context = ray.get_runtime_context()
    session = (context.get_job_id(), context.get_node_id())
    if session not in _COUNTERS:
        _COUNTERS.clear()
        _COUNTERS[session] = ray.remote(num_cpus=0)(_Counter).remote()
    counter = _COUNTERS[session]
    ray.get(counter.reset.remote())
    return counter


def run_ray(spec, plan_units, save, failed, bar, address, workers, threads, payload, run_unit):
    """The units as Ray tasks (module docstring): ``plan_units(slots)`` plans them for the
    session's ``slots`` (its CPUs, or GPUs on a GPU: one task each; the caller has cells to
    run), ``payload`` what every task needs
    (:func:`~sims.experiments.sweep.execute.payload_of`), ``run_unit`` what each runs."""
    import ray
    started_here = ray_init(address, workers)
    try:
        counter = _counter(ray)
        gpu = 1 if str(spec.device).startswith("cuda") else 0     # a GPU per task there
        slots = int(ray.cluster_resources().get("GPU" if gpu else "CPU", 1))
        units = plan_units(max(1, slots))
        task = ray.remote(num_cpus=1, num_gpus=gpu, max_retries=0)(_ray_task)
        from ... import plugins
        payload = ray.put({**payload, "plugins": plugins.shipment()})
        pending = {task.remote(payload, u, counter, threads, run_unit): (u, 0) for u in units}
        finished_rounds = 0
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            seen = ray.get(counter.get.remote())
            bar.update(max(0, min(seen, bar.total) - bar.n))
            for ref in done:
                unit, attempt = pending.pop(ref)
                try:
                    results = ray.get(ref)
                except Exception as exc:              # task error or killed worker
                    failed(unit, attempt, exc)
                    if attempt == 0:
                        pending[task.remote(payload, unit, counter, threads,
                                            run_unit)] = (unit, 1)
                    continue
                save(results)
                finished_rounds += len(unit) * spec.rounds
        bar.n = finished_rounds                       # what finished, failed attempts aside
        bar.refresh()
    finally:
        if started_here:
            _COUNTERS.clear()                        # its actor goes with the session
            ray.shutdown()

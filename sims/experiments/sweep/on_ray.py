"""Sweep units as Ray tasks (:func:`sims.experiments.sweep.run_sweep` with ``executor="ray"``).

:func:`ray_init` connects to the cluster at an address (or ``RAY_ADDRESS``), shipping the
project's packages (``sims``, ``reproduce``, ``theory``) with the tasks, or starts Ray on this
machine with one CPU per core. :func:`run_ray` submits one task per unit (one CPU, one torch
thread; a GPU per task when the sweep's device is cuda), gathers the results here as they
finish (this process writes them), counts progress through a small actor every round, and
records a failed task (exception or killed worker) and submits it once more.
"""
from __future__ import annotations

import logging
import os

from ...store.identity import ROOT, SOURCE_PACKAGES
from .grid import GridError


def _ray_task(payload, unit, counter, threads, run_unit):
    """A unit on a Ray worker (``run_unit``: :func:`sims.experiments.sweep.execute.run_unit`):
    one torch thread, progress to the shared counter."""
    def progress(n):
        counter.add.remote(n)
    return run_unit(payload, unit, progress=progress, threads=threads)


def ray_init(address: str | None = None, workers: int | None = None) -> bool:
    """Connect to Ray: the cluster at ``address`` (or ``RAY_ADDRESS``), which receives the
    project's packages, else a local instance with ``workers`` CPUs (default: every core).
    Returns whether this call started it (the caller then shuts it down)."""
    try:
        import ray
    except ImportError:
        raise GridError("the ray executor needs Ray: pip install -c constraints.txt ray") \
            from None
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, runtime_env={
            "py_modules": [str(ROOT / p) for p in SOURCE_PACKAGES]})
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
    and starting one per sweep costs a second or two on a busy machine)."""
    session = ray.get_runtime_context().get_job_id()
    if session not in _COUNTERS:
        _COUNTERS.clear()
        _COUNTERS[session] = ray.remote(num_cpus=0)(_Counter).remote()
    counter = _COUNTERS[session]
    ray.get(counter.reset.remote())
    return counter


def run_ray(spec, units, save, failed, bar, address, workers, threads, payload, run_unit):
    """The units as Ray tasks (module docstring): ``payload`` what every task needs
    (:func:`~sims.experiments.sweep.execute.payload_of`), ``run_unit`` what each runs."""
    if not units:
        return
    import ray
    started_here = ray_init(address, workers)
    try:
        counter = _counter(ray)
        gpu = 1 if str(spec.device).startswith("cuda") else 0     # a GPU per task there
        task = ray.remote(num_cpus=1, num_gpus=gpu, max_retries=0)(_ray_task)
        payload = ray.put(payload)
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
            ray.shutdown()

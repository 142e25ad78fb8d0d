"""A sweep on a Ray cluster started by ``ray start --head`` (Ray 2.60: token authentication
on), reached by its address: the driver sets ``RAY_AUTH_MODE=token`` after importing Ray (as a
notebook does) and the sweep forwards it to the connection; a plugged algorithm imported by
the driver runs on the cluster's workers, which never saw its file. Without the setting, the
command says in one line what to set. The cluster is this test's own process group, ended by
its id."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from test_sweep import QUAD
from test_sweep_ray import PLUGIN

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, os, sys
import ray                                   # imported before the mode is set, as in a notebook
if {auth!r}:
    os.environ["RAY_AUTH_MODE"] = "token"
import sims
sims.import_modules([{plugin!r}])
from sims.experiments.sweep import Grid, GridError, SweepSpec, cli, run_sweep
spec = SweepSpec("cluster", Grid.from_specs("ray-lab-fedavgm", ["beta=0.5,0.9"]), {quad!r},
                 cli.build_compare_problem, participation="m=3", rounds=3, seeds=[0],
                 out={out!r})
try:
    res = run_sweep(spec, executor="ray", ray_address={address!r}, quiet=True)
except GridError as exc:
    print("ERROR", exc)
    sys.exit(2)
print(json.dumps({{"ran": res.ran, "failures": res.failures, "pid": os.getpid()}}))
"""


@pytest.fixture
def cluster():
    short = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))      # Unix socket paths are short
    token = short / "token"
    token.write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
                             f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                             "--block", f"--temp-dir={short / 't'}"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.25)
        else:
            pytest.fail("the Ray head did not start")
        yield f"127.0.0.1:{port}", {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"}
    finally:
        os.killpg(head.pid, signal.SIGKILL)          # the group this test started
        head.wait(30)
        shutil.rmtree(short, ignore_errors=True)


def drive(tmp_path, address, env, auth):
    plugin = tmp_path / "ray_lab_plugin.py"
    plugin.write_text(PLUGIN)
    code = DRIVER.format(auth=auth, plugin=str(plugin), quad=QUAD, address=address,
                         out=str(tmp_path / "out"))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=300)


def test_sweep_on_a_started_cluster_with_token_authentication(tmp_path, cluster):
    address, env = cluster
    refused = drive(tmp_path, address, env, auth=False)
    assert refused.returncode == 2, refused.stderr[-3000:]
    line = refused.stdout.strip().splitlines()[-1]
    assert line.startswith(f"ERROR cannot connect to the Ray cluster at {address}")
    assert "RAY_AUTH_MODE=token" in line and "refused this process's authentication" in line
    done = drive(tmp_path, address, env, auth=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ran"] == 2 and not result["failures"], result
    cells = [json.loads(p.read_text())
             for p in (tmp_path / "out" / "cluster" / "cells").glob("*.json")]
    assert len(cells) == 2
    for rec in cells:                       # computed by the cluster's workers, not the driver
        assert rec["pid"] != result["pid"] and rec["driver"]["pid"] == result["pid"]
        assert set(rec["code"]["plugins"]) == {"ray_lab_plugin"}

"""The allocator tuning (sims.core.malloc) is process-wide: importing the toolkit or running
the engine from a program of one's own leaves malloc alone unless asked; the commands apply it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, torch
import sims.core.engine as engine, sims.core.malloc as malloc
from sims.algorithms.registry import make_algorithm
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
print("import", malloc.applied())
p = heterogeneous_quadratic(4, 3, seed=0, local_steps=1, dtype=torch.float64)
engine.run(p, make_algorithm("fedavg"), Participation.parse("full"), 1, [0])
print("run", malloc.applied())
os.environ["FEDTOOLKIT_MALLOC_TUNING"] = "1"
engine.run(p, make_algorithm("fedavg"), Participation.parse("full"), 1, [0])
print("asked", malloc.applied())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_library_use_leaves_malloc_alone_unless_asked():
    env = {k: v for k, v in os.environ.items() if "MALLOC_TUNING" not in k}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["import", "False", "run", "False", "asked", "True"]


def test_commands_tune_unless_turned_off(monkeypatch):
    from sims.core import malloc
    monkeypatch.setenv("FEDTOOLKIT_MALLOC_TUNING", "0")
    assert not malloc.wanted(True) and malloc.tune_for_command() is False
    monkeypatch.delenv("FEDTOOLKIT_MALLOC_TUNING")
    monkeypatch.setenv("FEDTOOLKIT_NO_MALLOC_TUNING", "1")
    assert not malloc.wanted(True)
    monkeypatch.delenv("FEDTOOLKIT_NO_MALLOC_TUNING")
    assert malloc.wanted(True) and not malloc.wanted(False)
    monkeypatch.setenv("FEDTOOLKIT_MALLOC_TUNING", "1")
    assert malloc.wanted(False)

"""python -m sims.results ls: the saved runs of a folder as a table, filtered; and what a
run's record says about its command, its wall time and a resume."""
from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from sims.experiments import compare
from sims.results import main as results_main
from sims.store import listing
from sims.store.checkpoint import Checkpointer
from sims.store.results import rerunnable_command, wall_time_fields


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("listing") / "res"
    assert compare.main(["--algorithms", "fedavg,fedadam", "--problem", "quadratic", "--tiny",
                         "--quiet", "--out", str(out / "compare")]) == 0
    assert compare.main(["--algorithms", "fedavg", "--problem", "quadratic", "--tiny",
                         "--quiet", "--n-clients", "6", "--out", str(out / "other")]) == 0
    return out


def test_ls_lists_every_saved_run(folder, capsys):
    df = listing.table(folder)
    assert list(df.columns) == list(listing.COLUMNS)
    assert len(df) == 3 and set(df.algorithm) == {"fedavg", "fedadam"}
    assert set(df.kind) == {"compare"} and (df.current == "yes").all()
    assert set(df.problem) == {"quadratic"} and set(df.rounds) == {3}
    assert results_main(["ls", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "3 run(s)" in out and "compare/compare_fedadam_T3_" in out


def test_ls_filters_on_columns_and_record_keys(folder, capsys):
    assert set(listing.table(folder, [("algorithm", "fed*")]).algorithm) == {"fedavg",
                                                                              "fedadam"}
    only = listing.table(folder, [("algorithm", "fedavg"), ("config.n_clients", "6")])
    assert len(only) == 1 and only.path.iloc[0].startswith("other/")
    assert listing.table(folder, [("algorithm.eta_l", "nothing")]).empty
    assert results_main(["ls", str(folder), "--filter", "algorithm=fedadam", "--format",
                         "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in rows] == ["fedadam"]


@pytest.mark.parametrize("args, message", [
    (["--filter", "nokey=1"], "'nokey' is neither a column"),
    (["--filter", "algorithm"], "expected KEY=VALUE"),
    (["--sort", "nope"], "--sort nope: not a column"),
])
def test_ls_errors_are_one_line(folder, capsys, args, message):
    assert results_main(["ls", str(folder), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_ls_of_a_missing_folder(tmp_path, capsys):
    assert results_main(["ls", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert results_main(["ls", str(tmp_path)]) == 0
    assert "no saved runs under" in capsys.readouterr().out


def test_recorded_command_runs_again_as_written(tmp_path):
    import os
    import subprocess
    import sys
    python = os.path.basename(sys.executable)
    mod = types.SimpleNamespace(__spec__=types.SimpleNamespace(name="sims.compare.__main__"))
    argv = ["/x/sims/compare/__main__.py", "--algorithms", "fedavg,fedadam", "--hp", "a b"]
    assert rerunnable_command(argv, mod) == (f"{python} -m sims.compare --algorithms "
                                             "fedavg,fedadam --hp 'a b'")
    script = types.SimpleNamespace(__spec__=None)
    assert rerunnable_command(["benchmarks/x.py", "--quick"], script) \
        == f"{python} benchmarks/x.py --quick"
    assert rerunnable_command(["/usr/bin/fedtoolkit", "sweep"], script) == "fedtoolkit sweep"
    # what a command records runs again in a shell, from the recorded folder
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out dir"
    cmd = [sys.executable, "-m", "sims.compare", "--algorithms", "fedavg", "--tiny", "--quiet",
           "--out", str(out)]
    assert subprocess.run(cmd, cwd=root, capture_output=True, timeout=300).returncode == 0
    (rec,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert rec["command"].startswith(f"{python} -m sims.compare --algorithms fedavg")
    assert rec["cwd"] == str(root)
    again = subprocess.run(rec["command"], shell=True, cwd=rec["cwd"], capture_output=True,
                           text=True, timeout=300,
                           env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                     f"{os.environ.get('PATH', '')}"})
    assert again.returncode == 0, again.stderr[-2000:]
    assert "reused 1 saved run" in again.stdout


def test_wall_time_says_what_it_covers():
    plain = wall_time_fields(2.0, [], 0.0)
    assert plain["wall_time_s"] == 2.0 and "this process" in plain["wall_time_covers"]
    resumed = wall_time_fields(2.0, [4], 3.0)
    assert resumed["wall_time_s"] == 5.0 and resumed["wall_time_before_resume_s"] == 3.0
    assert "round(s) 4" in resumed["wall_time_covers"]


def test_a_resumed_compare_run_records_the_round_and_both_times(tmp_path, monkeypatch):
    real_save, saves = Checkpointer.save, []

    def save_then_stop(self, state):
        real_save(self, state)
        saves.append(state["t"])
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpointer, "save", save_then_stop)
    args = ["--algorithms", "fedavg", "--problem", "quadratic", "--tiny", "--rounds", "5",
            "--quiet", "--checkpoint-every", "1e-9", "--out", str(tmp_path)]
    assert compare.main(args) == 130
    monkeypatch.undo()
    assert compare.main(args) == 0
    (rec,) = [json.loads(p.read_text()) for p in tmp_path.glob("compare_fedavg_*.json")]
    assert rec["resumed_from_round"] == 2
    assert rec["wall_time_before_resume_s"] > 0
    assert rec["wall_time_s"] == pytest.approx(rec["wall_time_this_process_s"]
                                               + rec["wall_time_before_resume_s"], abs=2e-3)
    assert "round(s) 2" in rec["wall_time_covers"]
    assert rec["command"] == rerunnable_command() and rec["cwd"]


def test_ls_in_flight_lists_checkpointed_runs_with_their_rounds(folder, tmp_path, capsys):
    """``ls --in-flight``: a run checkpointed mid-way (a sweep unit's or an engine run's
    checkpoint under ``.checkpoints``) is a row of kind ``in flight`` with the rounds its
    checkpoint has done, read from the file's header; a file that is not a checkpoint is left
    out; without the flag the listing is the saved runs only."""
    import shutil

    import torch
    out = tmp_path / "res"
    shutil.copytree(folder, out)
    ckpt = out / "sweeps" / "s" / ".checkpoints" / "unit_0123456789abcdef.ckpt"
    ckpt.parent.mkdir(parents=True)
    assert Checkpointer(ckpt, key="k").save({"t": 37, "theta": torch.zeros(2, 3)})
    (ckpt.parent / "junk.ckpt").write_bytes(b"not a checkpoint")
    assert len(listing.table(out)) == 3
    df = listing.table(out, include_in_flight=True)
    flying = df[df.kind == "in flight"]
    assert len(df) == 4 and len(flying) == 1
    assert flying.iloc[0].rounds == 37 and flying.iloc[0].run == "unit_0123456789abcdef"
    assert flying.iloc[0].path == "sweeps/s/.checkpoints/unit_0123456789abcdef.ckpt"
    assert results_main(["ls", str(out), "--in-flight", "--filter", "kind=in*"]) == 0
    text = capsys.readouterr().out
    assert "in flight" in text and "1 run(s)" in text

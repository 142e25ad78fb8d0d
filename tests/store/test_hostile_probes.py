"""Hostile probes as regression tests: saved state you can trust and commands that fail in
one line before any work. Each test is named after the behaviour it holds; each failed on
the code before it (NaN crossing replicas: ``test_replica_isolation.py``).

The small entry of ``test_results_trust.py`` (a quadratic, seconds) drives the shared
machinery of :mod:`reproduce.common`; the real commands are used where their own handling is
tested.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import sims.store.identity
from reproduce import common
from sims.core import engine
from sims.experiments import compare
from sims.algorithms.fed_ef import FedEF
from sims.store.checkpoint import Checkpointer, write_state
from sims.rules.compress import TopK
from sims.core.participation import Participation
from sims.experiments.sweep import cli as sweep_cli

from test_data import make_mnist_like
from test_results_trust import ROOT, make_entry, quadratic, records, run_entry

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _sweep(tmp_path, *args, out="sw"):
    return sweep_cli.main(["--quiet", "--out", str(tmp_path / out), "--figures",
                           str(tmp_path / out / "fig"), *args])


def _compare(tmp_path, *args, out="cmp"):
    return compare.main(["--quiet", "--out", str(tmp_path / out), "--figures",
                         str(tmp_path / out / "fig"), *args])


def _one_line_error(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert lines and "Traceback" not in text, text
    return lines[-1]


# ------------------------------------------------------------------ 1: replicas never mix

def test_batched_sweep_selects_the_healthy_point_beside_a_diverging_one(tmp_path, capsys):
    """The issue's probe on a quadratic: eta_l = 1e30 diverges in the same batched run as
    eta_l = 0.05; the healthy point keeps the score of its own separate run and is selected."""
    args = ("--algorithms", "fedavg", "--problem", "quadratic", "--rounds", "4", "--seeds", "1",
            "--n-clients", "6", "--participation", "m=3", "--rule", "final-train-loss")
    assert _sweep(tmp_path, *args, "--grid", "eta_l=0.05,1e30", "--plan", "batched",
                  out="batched") == 0
    assert _sweep(tmp_path, *args, "--grid", "eta_l=0.05", "--plan", "separate",
                  out="alone") == 0
    grid = pd.read_csv(tmp_path / "batched" / "sweep" / "grid.csv")
    alone = pd.read_csv(tmp_path / "alone" / "sweep" / "grid.csv")
    healthy = grid[grid.eta_l == 0.05].iloc[0]
    assert healthy.selected and not healthy.diverged
    assert grid[grid.eta_l == 1e30].iloc[0].diverged
    assert healthy.score == pytest.approx(alone.iloc[0].score, rel=1e-12)


# ------------------------------------------------------------------ 2: nothing is unpickled

class _Plant:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_planted_pickle_checkpoint_never_runs_code(tmp_path, capsys):
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "c.safetensors"
    torch.save({"format": 1, "key": "k", "state": _Plant(marker)}, ckpt)
    said = []
    out = engine.run(quadratic(), FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=2), 3,
                     [0], checkpoint=Checkpointer(ckpt, every_rounds=1, key="k", say=said.append))
    assert not marker.exists()
    assert len(out.participants[0]) == 3                       # ran from round 0
    assert said and "ignored" in said[0] and "not a checkpoint" in said[0]


def test_planted_checkpoint_in_an_entry_folder_is_ignored_with_a_word(tmp_path, capsys):
    """A pickle planted where an entry's run keeps its checkpoint: a plain rerun runs no code
    from it, says it ignored it, and computes the run from round 0."""
    entry = make_entry()
    cfg = entry.Config(ms="2")
    stem = common.run_stem(cfg, entry.runs(cfg)[0])
    plant = tmp_path / "res" / "trust_entry" / ".checkpoints" / f"{stem}_s0-1.safetensors"
    plant.parent.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save({"format": 1, "key": "x", "state": _Plant(marker)}, plant)
    assert run_entry(entry, tmp_path, "--ms", "2") == 0
    assert not marker.exists()
    out = capsys.readouterr().out
    assert "ignored: not a checkpoint" in out and "resuming" not in out


def test_checkpoint_key_is_read_before_any_tensor(tmp_path):
    """A safetensors file of the right format whose key differs is not resumed, and its
    (here malformed) state is never decoded."""
    path = tmp_path / "c.safetensors"
    write_state(path, {"t": 3}, "other-run")
    from safetensors.torch import load_file, save_file
    save_file(load_file(str(path)), str(path), metadata={
        "format": "fedtoolkit-checkpoint-2", "key": "other-run", "skeleton": "{not json"})
    said = []
    ck = Checkpointer(path, key="this-run", say=said.append)
    assert ck.load() is None and said == []                  # key differs: nothing read
    assert Checkpointer(path, key="other-run", say=said.append).load() is None
    assert said and "damaged" in said[0]


def test_checkpoint_round_trips_the_engine_state_exactly(tmp_path):
    """Stopped after round 3 of 6 and resumed from the safetensors checkpoint, the run
    equals an uninterrupted one bit for bit (models, metrics, draws)."""
    args = (quadratic(), FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=3), 6, [0, 1])
    ref = engine.run(*args)
    cut = Checkpointer(tmp_path / "c.safetensors", every_rounds=1, key="k")
    real = cut.save

    def save_then_stop(state):
        ok = real(state)
        if state["t"] == 3:
            raise KeyboardInterrupt
        return ok
    cut.save = save_then_stop
    with pytest.raises(KeyboardInterrupt):
        engine.run(*args, checkpoint=cut)
    again = Checkpointer(tmp_path / "c.safetensors", every_rounds=100, key="k")
    resumed = engine.run(*args, checkpoint=again)
    assert again.resumed_from == 3
    assert torch.equal(resumed.server["theta"], ref.server["theta"])
    assert torch.equal(resumed.client_state["error"], ref.client_state["error"])
    for k in ref.metrics:
        if k != "wall_time":
            np.testing.assert_array_equal(resumed.metrics[k], ref.metrics[k], err_msg=k)
    for a, b in zip(resumed.participants, ref.participants):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


# ------------------------------------------------------------------ 3: data is part of a run

def _mnist_compare(tmp_path, monkeypatch, data: Path, *extra):
    monkeypatch.setenv("FEDTOOLKIT_DATA", str(data))
    return _compare(tmp_path, "--algorithms", "fedavg", "--problem", "mnist-mlp",
                    "--n-clients", "4", "--participation", "m=2", "--rounds", "2", "--seeds",
                    "1", "--eval-train-samples", "40", *extra)


def test_other_data_directory_recomputes_a_saved_run(tmp_path, monkeypatch, capsys):
    make_mnist_like(tmp_path / "A", seed=1)
    make_mnist_like(tmp_path / "B", seed=2)
    assert _mnist_compare(tmp_path, monkeypatch, tmp_path / "A") == 0
    assert _mnist_compare(tmp_path, monkeypatch, tmp_path / "A") == 0
    assert "reused 1 saved run" in capsys.readouterr().out
    assert _mnist_compare(tmp_path, monkeypatch, tmp_path / "B") == 0
    out = capsys.readouterr().out
    assert "reused" not in out and "the data it read changed" in out


def test_replaced_data_file_recomputes_a_saved_run(tmp_path, monkeypatch, capsys):
    make_mnist_like(tmp_path / "A", seed=1)
    assert _mnist_compare(tmp_path, monkeypatch, tmp_path / "A") == 0
    make_mnist_like(tmp_path / "A", seed=3)                   # same names, other contents
    capsys.readouterr()
    assert _mnist_compare(tmp_path, monkeypatch, tmp_path / "A") == 0
    out = capsys.readouterr().out
    assert "reused" not in out and "changed" in out
    rec = next(iter(records(tmp_path / "cmp").values()))
    files = rec["data"][0]["files"]
    assert len(files) == 4 and all(len(sha) == 64 for sha in files.values())


# ------------------------------------------------------------------ 4: records must vouch

def test_record_without_a_checksum_is_refused_in_one_line(tmp_path, capsys):
    entry = make_entry()
    assert run_entry(entry, tmp_path, "--ms", "2") == 0
    folder = tmp_path / "res" / "trust_entry"
    csv = next(folder.glob("m2_*.csv"))
    df = pd.read_csv(csv)
    df.loc[df.metric == "grad_norm2", "value"] *= 100             # edited numbers
    csv.write_text(df.to_csv(index=False))
    meta = csv.with_suffix(".json")
    rec = json.loads(meta.read_text())
    del rec["table"]                                             # and the checksum removed
    meta.write_text(json.dumps(rec))
    capsys.readouterr()
    assert run_entry(entry, tmp_path, "--ms", "2") == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "no checksum" in err and csv.name in err


# ------------------------------------------------------------------ 6: no traceback, work kept

def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/full/disk")


def test_full_disk_while_saving_results_is_one_line_and_keeps_the_checkpoint(
        tmp_path, capsys, monkeypatch):
    entry = make_entry()
    monkeypatch.setattr("sims.store.runstore.save_run", _enospc)
    assert run_entry(entry, tmp_path, "--ms", "2", "--checkpoint-every", "1e-9") == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "No space left on device" in err and "keeps its last checkpoint" in err
    ckpts = list((tmp_path / "res" / "trust_entry" / ".checkpoints").glob("*.safetensors"))
    assert len(ckpts) == 1                                       # the computed work is kept
    monkeypatch.undo()
    assert run_entry(entry, tmp_path, "--ms", "2", "--checkpoint-every", "1e-9") == 0
    assert "from its checkpoint at round 8" in capsys.readouterr().out


def test_failed_checkpoint_warns_once_and_the_run_goes_on(tmp_path):
    said = []
    ck = Checkpointer(tmp_path / "c.safetensors", every_rounds=1, key="k", say=said.append)
    import sims.store.checkpoint as ckmod
    real = ckmod.write_state
    ckmod.write_state = _enospc
    try:
        out = engine.run(quadratic(), FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=2),
                         5, [0], checkpoint=ck)
    finally:
        ckmod.write_state = real
    assert len(out.participants[0]) == 5 and ck.failed_saves == 4 and ck.saves == 0
    assert len(said) == 1 and "not written" in said[0] and "goes on" in said[0]


def test_failed_figure_write_is_one_line_after_the_results_are_saved(tmp_path, capsys,
                                                                     monkeypatch):
    entry = make_entry()
    monkeypatch.setattr(entry, "plot", lambda df, cfg: _enospc())
    assert run_entry(entry, tmp_path, "--ms", "2") == 2
    assert "No space left on device" in _one_line_error(capsys.readouterr().err)
    assert len(list((tmp_path / "res" / "trust_entry").glob("*.csv"))) == 1


@pytest.mark.parametrize("where", ["out", "figures"])
def test_sweep_with_a_file_as_output_folder_fails_before_any_cell(tmp_path, capsys, where,
                                                                  monkeypatch):
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a cell ran"))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    args = ["--quiet", "--algorithms", "fedavg", "--rounds", "2",
            "--out", str(blocker if where == "out" else tmp_path / "o"),
            "--figures", str(blocker if where == "figures" else tmp_path / "f")]
    assert sweep_cli.main(args) == 2
    assert "is a file" in _one_line_error(capsys.readouterr().err)


def test_sweep_with_an_unwritable_output_fails_before_any_cell(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a cell ran"))
    import tempfile as tf

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(tf, "mkstemp", refuse)
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--rounds", "2") == 2
    assert "cannot write there" in _one_line_error(capsys.readouterr().err)


def test_hand_edited_sweep_cell_is_one_line(tmp_path, capsys):
    args = ("--algorithms", "fedavg", "--rounds", "2", "--grid", "eta_l=0.05")
    assert _sweep(tmp_path, *args) == 0
    cell = next((tmp_path / "sw" / "sweep" / "cells").glob("*.csv"))
    cell.write_text(cell.read_text().replace("fedavg", "fedxxx"))
    capsys.readouterr()
    assert _sweep(tmp_path, *args) == 2
    assert "checksum differs" in _one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("flag,value", [("--workers", "-1"), ("--threads", "-1"),
                                        ("--max-replicas", "0")])
def test_bad_sweep_counts_fail_before_any_cell(tmp_path, capsys, monkeypatch, flag, value):
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a cell ran"))
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--rounds", "2", "--executor", "ray",
                  flag, value) == 2
    assert flag in _one_line_error(capsys.readouterr().err)


def test_ctrl_c_while_starting_is_one_line(tmp_path):
    child = subprocess.Popen([sys.executable, "-m", "reproduce.fig8", "--tiny", "--out",
                              str(tmp_path)], cwd=tmp_path, env=ENV, stderr=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(0.4)           # past Python's own start-up, within the imports (seconds)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err


def test_file_where_the_lock_folder_goes_fails_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a run was computed"))
    folder = tmp_path / "res" / "trust_entry"
    folder.mkdir(parents=True)
    (folder / ".locks").write_text("x")
    assert run_entry(make_entry(), tmp_path, "--ms", "2") == 2
    assert ".locks is a file" in _one_line_error(capsys.readouterr().err)


def test_folder_at_a_results_path_fails_before_any_run(tmp_path, capsys, monkeypatch):
    entry = make_entry()
    stem = common.run_stem(entry.Config(ms="2"), entry.runs(entry.Config(ms="2"))[0])
    (tmp_path / "res" / "trust_entry" / f"{stem}.csv").mkdir(parents=True)
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a run was computed"))
    assert run_entry(entry, tmp_path, "--ms", "2") == 2
    assert "a folder" in _one_line_error(capsys.readouterr().err)


# ------------------------------------------------------------------ 7: sweeps' discipline

def test_two_identical_sweeps_compute_each_cell_once(tmp_path):
    """The second of two identical sweeps on one folder waits for the first (its lock) and
    reuses every cell it computed."""
    script = (
        "import sys; from sims.experiments.sweep import cli; "
        "sys.exit(cli.main(['--quiet','--algorithms','fedavg','--grid','eta_l=0.01,0.02',"
        "'--seeds','1','--rounds','2500','--dim','200','--eval-every','100',"
        f"'--out',{str(tmp_path / 'o')!r},'--figures',{str(tmp_path / 'f')!r}]))")

    def start():
        return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = start()
    from sims.store.locks import RunLock
    lock = RunLock(tmp_path / "o" / "sweep" / ".locks" / "sweep.lock")
    deadline = time.time() + 120
    while time.time() < deadline and first.poll() is None:      # until the first holds it
        if not lock.acquire(blocking=False):
            break
        lock.release()
        time.sleep(0.05)
    second = start()
    outs = [k.communicate(timeout=300) for k in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    counts = [line for out, _ in outs for line in out.splitlines() if line.startswith("cells:")]
    assert counts == ["cells: 2 run, 0 reused, 0 missing", "cells: 0 run, 2 reused, 0 missing"]
    assert "being computed by another process" in outs[1][1]


def test_code_change_recomputes_cells_says_so_and_leaves_no_stale_files(tmp_path, capsys,
                                                                        monkeypatch):
    args = ("--algorithms", "fedavg", "--rounds", "2", "--grid", "eta_l=0.05,0.1", "--seeds",
            "1")
    assert _sweep(tmp_path, *args) == 0
    cells = tmp_path / "sw" / "sweep" / "cells"
    before = sorted(p.name for p in cells.glob("*.csv"))
    monkeypatch.setattr(sims.store.identity, "code_digest", lambda: "edited-code")
    capsys.readouterr()
    assert _sweep(tmp_path, *args, "--reuse-stale") == 0
    io = capsys.readouterr()
    assert "reused 2 saved cell(s) computed by OTHER code" in io.err
    assert "cells: 0 run, 2 reused" in io.out
    assert _sweep(tmp_path, *args) == 0
    io = capsys.readouterr()
    assert "recomputing 2 saved cell(s): the code" in io.err
    assert "cells: 2 run, 0 reused" in io.out
    assert sorted(p.name for p in cells.glob("*.csv")) == before        # replaced in place
    for p in cells.glob("*.json"):
        assert json.loads(p.read_text())["code"]["code_digest"] == "edited-code"


def test_old_named_stale_cells_are_removed(tmp_path, capsys):
    args = ("--algorithms", "fedavg", "--rounds", "2", "--grid", "eta_l=0.05", "--seeds", "1")
    assert _sweep(tmp_path, *args) == 0
    cells = tmp_path / "sw" / "sweep" / "cells"
    cur = next(cells.glob("*.csv"))
    old = cur.with_name(cur.name.rsplit("_", 1)[0] + "_0123456789.csv")
    old.write_bytes(cur.read_bytes())
    cur.with_suffix(".json").rename(old.with_suffix(".json"))
    cur.unlink()
    capsys.readouterr()
    assert _sweep(tmp_path, *args) == 0
    assert "removed 1 superseded cell file" in capsys.readouterr().err
    assert [p.name for p in cells.glob("*.csv")] == [cur.name]


def test_console_names_an_algorithm_with_no_selectable_point(tmp_path, capsys):
    assert _sweep(tmp_path, "--algorithms", "fedavg,fedprox", "--rounds", "3",
                  "--grid", "fedavg.eta_l=1e30", "--grid", "fedprox.eta_l=0.05",
                  "--rule", "final-train-loss") == 0
    out = capsys.readouterr().out
    assert "no selectable point for fedavg: 1 of 1 point(s) diverged" in out
    assert "no selectable point for fedprox" not in out


# ------------------------------------------------------------------ 8: errors before work

def test_default_sweep_command_picks_a_rule_the_problem_can_score(tmp_path, capsys):
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--grid", "eta_l=0.1",
                  "--rounds", "2") == 0
    assert "rule: final-train-loss" in capsys.readouterr().out


def test_rule_the_problem_cannot_score_fails_before_any_cell(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a cell ran"))
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--rule", "final-acc") == 2
    assert "needs the metric 'test_acc'" in _one_line_error(capsys.readouterr().err)


def test_participation_larger_than_the_population_fails_before_any_run(tmp_path, capsys,
                                                                       monkeypatch):
    entry = make_entry()
    monkeypatch.setattr(engine, "run", lambda *a, **k: pytest.fail("a run was computed"))
    assert run_entry(entry, tmp_path, "--ms", "2,500") == 2
    assert "cannot sample m=500 of n=8" in _one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("args,words", [(["--ns", "0,10"], "--ns must list client counts"),
                                        (["--ms", "500"], "cannot sample more than"),
                                        (["--ns", "a"], "comma-separated integers")])
def test_fig8_client_counts_are_checked_before_any_run(tmp_path, capsys, args, words):
    from reproduce import fig8
    assert common.main(fig8, ["--tiny", "--quiet", "--out", str(tmp_path), *args]) == 2
    assert words in _one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "fig8").exists() or not list((tmp_path / "fig8").glob("*.csv"))


# ------------------------------------------------------------------ 9: the minor items

def test_compare_tiny_keeps_explicit_flags(tmp_path, capsys):
    assert _compare(tmp_path, "--tiny", "--participation", "m=0") == 2
    assert "m >= 1, got 0" in _one_line_error(capsys.readouterr().err)
    assert _compare(tmp_path, "--tiny", "--algorithms", "fedavg", "--rounds", "5") == 0
    df = pd.read_csv(next((tmp_path / "cmp").glob("*_T5_*.csv")))
    assert df["round"].max() == 5


def test_fedlada_participation_zero_is_refused(tmp_path, capsys):
    from reproduce import fedlada_fig2
    assert common.main(fedlada_fig2, ["--tiny", "--quiet", "--out", str(tmp_path),
                                      "--participation", "0"]) == 2
    assert "fraction of clients" in _one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("make", [lambda t: run_entry(make_entry(), t, "--checkpoint-every",
                                                      "nan"),
                                  lambda t: _compare(t, "--tiny", "--checkpoint-every", "nan")])
def test_checkpoint_every_nan_is_refused(tmp_path, capsys, make):
    assert make(tmp_path) == 2
    assert "--checkpoint-every must be >= 0" in _one_line_error(capsys.readouterr().err)


def test_sweep_by_an_unknown_column_is_refused(tmp_path, capsys):
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--by", "bogus") == 2
    assert "--by bogus: not a column" in _one_line_error(capsys.readouterr().err)


def test_compare_tag_cannot_leave_the_output_folder(tmp_path, capsys):
    assert _compare(tmp_path, "--tiny", "--tag", "../../x") == 2
    assert "--tag must be a plain file-name stem" in _one_line_error(capsys.readouterr().err)
    assert not (tmp_path.parent / "x_summary").exists()


def test_non_numeric_grid_value_names_the_hyperparameter(tmp_path, capsys):
    assert _sweep(tmp_path, "--algorithms", "fedavg", "--grid", "eta_l=abc") == 2
    assert "eta_l must be a number, got 'abc'" in _one_line_error(capsys.readouterr().err)


def test_result_files_are_readable_by_the_group(tmp_path):
    entry = make_entry()
    os.umask(old := os.umask(0o022))
    try:
        assert run_entry(entry, tmp_path, "--ms", "2") == 0
    finally:
        os.umask(old)
    for p in (tmp_path / "res" / "trust_entry").glob("m2_*"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p


def test_entry_without_its_data_fails_before_any_work_not_as_failed_cells(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.delenv("FEDTOOLKIT_DATA", raising=False)
    from reproduce import fedlamb_cifar
    assert common.main(fedlamb_cifar, ["--tiny", "--quiet", "--out", str(tmp_path)]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "cifar10" in err and "failed twice" not in err


def test_sigint_writes_a_checkpoint_and_says_so(tmp_path):
    """SIGINT stops the run at the end of its round, writes a checkpoint (also with the
    default --checkpoint-every 600) and says where it resumes; the rerun resumes there."""
    script = (
        "import sys, time; from reproduce import common; "
        "sys.path.insert(0, 'tests/store'); from test_results_trust import make_entry; "
        "e = make_entry(); real = e.runs\n"
        "def slow(cfg):\n"
        "    out = real(cfg)\n"
        "    for r in out:\n"
        "        b = r.build\n"
        "        def build(b=b):\n"
        "            p, a, q = b(); f = p.evaluate\n"
        "            def ev(*x, **k):\n"
        "                print('round', flush=True); time.sleep(0.05); return f(*x, **k)\n"
        "            p.evaluate = ev; return p, a, q\n"
        "        r.build = build\n"
        "    return out\n"
        "e.runs = slow\n"
        f"sys.exit(common.main(e, ['--quiet', '--rounds', '400', '--ms', '2', '--out', "
        f"{str(tmp_path / 'res')!r}, '--figures', {str(tmp_path / 'fig')!r}]))")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = 0
    for line in child.stdout:
        seen += line.startswith("round")
        if seen == 5:
            child.send_signal(signal.SIGINT)
            break
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "resumes from its checkpoint at round" in err and "Traceback" not in err
    ckpts = list((tmp_path / "res" / "trust_entry" / ".checkpoints").glob("*.safetensors"))
    assert len(ckpts) == 1

"""Results you can trust (issue 14): code-aware reuse, divergence reported, checkpointed runs,
settings and folders validated before work, partial results, checksummed tables, smoke
figures kept apart and labelled, the comparison command's results discipline, per-run locks
and provenance. Each test is named after the behaviour; most fail on the code before #14.

A small entry module (:func:`make_entry`, a quadratic, seconds) drives the shared machinery
of :mod:`reproduce.common`; the real entries are used where their own handling is tested.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import sims.store.identity
from reproduce import common, plotting
from sims.experiments import compare
from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.store.checkpoint import Checkpointer
from sims.rules.compress import Identity, TopK
from sims.store.locks import RunLock
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.store.results import ResultsError, load_run, provenance, save_run

ROOT = Path(__file__).resolve().parents[2]


def quadratic():
    return heterogeneous_quadratic(8, 20, local_steps=2, seed=1, sigma=0.5, x0=1.0)


def make_entry():
    """A two-run entry on a quadratic (Fed-EF TopK, m in {2, 4}), shaped like every entry."""
    mod = types.ModuleType("trust_entry")
    mod.PAPER, mod.TARGET, mod.TITLE, mod.DEFAULT_COST = "Test", "Entry", "quadratic", "1 s"

    @dataclass
    class Config(common.EntryConfig):
        seeds: int = 2
        rounds: int = 8
        eta_l: float = 0.05
        ms: str = "2,4"
        eval_every: int = 1

    def runs(cfg):
        return [common.Run(f"m{m}", {"m": m}, eval_every=cfg.eval_every,
                           build=lambda m=m: (quadratic(), FedEF(1.0, cfg.eta_l, TopK(0.2)),
                                              Participation("fixed", m=m)))
                for m in [int(v) for v in cfg.ms.split(",")]]

    def plot(df, cfg):
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        plotting.band_plot(ax, df, "grad_norm2", "m", logy=True)
        return plotting.save(fig, cfg.figures, "trust")

    def check(df, cfg):
        return [f"healthy replicas: {common.healthy(df).groupby(['run', 'seed']).ngroups}"]

    mod.Config, mod.runs, mod.plot, mod.check = Config, runs, plot, check
    return mod


def run_entry(entry, tmp_path, *args):
    return common.main(entry, ["--quiet", "--out", str(tmp_path / "res"), "--figures",
                               str(tmp_path / "fig"), *args])


def records(folder: Path) -> dict:
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


# ------------------------------------------------------------------ 1: code-aware reuse

def test_rerun_after_code_change_recomputes(tmp_path, capsys, monkeypatch):
    entry = make_entry()
    folder = tmp_path / "res" / "trust_entry"
    assert run_entry(entry, tmp_path) == 0
    first = records(folder)
    assert len(first) == 2 and all(r["code_digest"] == sims.store.identity.code_digest()
                                   for r in first.values())
    capsys.readouterr()
    assert run_entry(entry, tmp_path) == 0                   # same code: reused, and said
    out = capsys.readouterr().out
    assert "reused 2 saved runs (from commit " in out
    assert records(folder) == first
    monkeypatch.setattr(sims.store.identity, "code_digest", lambda: "edited-code")
    assert run_entry(entry, tmp_path) == 0                   # other code: recomputed
    out = capsys.readouterr().out
    assert "recomputing 2 saved runs" in out and "reused" not in out
    assert {r["code_digest"] for r in records(folder).values()} == {"edited-code"}
    monkeypatch.undo()
    assert run_entry(entry, tmp_path, "--reuse-stale") == 0  # explicit: reused, and said
    out = capsys.readouterr().out
    assert "reused 2 saved runs" in out and "OTHER code" in out and "--reuse-stale" in out
    assert {r["code_digest"] for r in records(folder).values()} == {"edited-code"}


def test_runs_of_one_commit_made_in_different_minutes_are_reported_on_one_line(tmp_path,
                                                                                capsys):
    entry = make_entry()
    folder = tmp_path / "res" / "trust_entry"
    assert run_entry(entry, tmp_path) == 0
    for i, path in enumerate(sorted(folder.glob("*.json"))):   # a sweep straddling a minute
        record = json.loads(path.read_text())
        record["started"] = f"2026-01-0{i + 1}T10:0{i}:00Z"
        path.write_text(json.dumps(record))
    capsys.readouterr()
    assert run_entry(entry, tmp_path) == 0
    reused = [line for line in capsys.readouterr().out.splitlines() if "reused" in line]
    assert len(reused) == 1 and reused[0].startswith("reused 2 saved runs (from commit ")
    assert reused[0].endswith(", 2026-01-01 10:00 to 2026-01-02 10:01)")


# ------------------------------------------------------------------ 2: divergence

def test_blown_up_loss_is_recorded_as_divergence_while_parameters_are_finite():
    out = engine.run(quadratic(), FedEF(1.0, 3.0, Identity()), Participation("fixed", m=4),
                     12, [0, 1])
    loss = out.metrics["train_loss"]
    assert torch.isfinite(out.server["theta"]).all()         # parameters never went non-finite
    assert out.diverged_at == [6, 6]                          # loss > 1e6 x its start at round 6
    assert (loss[:, 6] > engine.BLOWUP * loss[:, 0]).all()
    assert (loss[:, 5] <= engine.BLOWUP * loss[:, 0]).all()
    healthy = engine.run(quadratic(), FedEF(1.0, 0.05, Identity()),
                         Participation("fixed", m=4), 12, [0])
    assert healthy.diverged_at == [None]


def test_compare_counts_an_infinite_loss_as_diverged(tmp_path, capsys):
    rc = compare.main(["--quiet", "--algorithms", "fedavg:eta_l=1e3,fedavg", "--rounds", "6",
                       "--seeds", "2", "--n-clients", "8", "--dim", "10",
                       "--participation", "m=4", "--out", str(tmp_path / "r"),
                       "--figures", str(tmp_path / "f")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "diverged: fedavg:eta_l=1e3 in 2 of 2 seed(s)" in out
    summary = pd.read_csv(next((tmp_path / "r").glob("compare_summary_*.csv")))
    assert list(summary.diverged) == [2, 0]
    assert summary.final_train_loss.isna().tolist() == [True, False]   # no evidence from it
    df = pd.concat(pd.read_csv(p) for p in (tmp_path / "r").glob("compare_fedavg_T*.csv"))
    assert df["diverged_at"].isna().all()


def test_diverged_entry_runs_are_printed_marked_and_dropped_from_the_check(tmp_path, capsys):
    entry = make_entry()
    assert run_entry(entry, tmp_path, "--eta-l", "3.0", "--ms", "2") == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("diverged: run m2"))
    assert "seed 0 at round" in line and "seed 1 at round" in line
    assert "healthy replicas: 0" in out                       # the check saw none as evidence
    df = pd.read_csv(next((tmp_path / "res" / "trust_entry").glob("m2_*.csv")))
    assert df["diverged_at"].notna().all()
    note = common.scale_note(entry, common.parse_config(entry, ["--ms", "2"]), df)
    assert "DIVERGED" in note and "m2 seed 0" in note


def test_figure_marks_diverged_replicas_without_bending_healthy_curves():
    import matplotlib.pyplot as plt
    rows = []
    for seed, values, at in ((0, [1.0, 0.5, 0.25], np.nan), (1, [1.0, 1e9, np.inf], 1.0)):
        rows += [{"run": "a", "seed": seed, "round": r, "metric": "loss", "value": v,
                  "diverged_at": at, "m": 1} for r, v in enumerate(values)]
    fig, ax = plt.subplots()
    plotting.band_plot(ax, pd.DataFrame(rows), "loss", "m", logy=True)
    mean = ax.get_lines()[0]
    np.testing.assert_array_equal(mean.get_ydata(), [1.0, 0.5, 0.25])   # healthy seed only
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert labels.count("1: seed 1 diverged at round 1") == 1
    assert ax.get_ylim()[1] < 10                                        # 1e9 not drawn
    plt.close(fig)


def test_diverged_seeds_share_one_legend_entry_and_long_footers_wrap():
    import matplotlib.pyplot as plt
    rows = []
    for seed, at in ((0, 2.0), (1, np.nan), (2, 1.0)):
        rows += [{"run": "a", "seed": seed, "round": r, "metric": "loss", "value": 1.0 / (r + 1),
                  "diverged_at": at, "m": 1} for r in range(3)]
    fig, ax = plt.subplots(figsize=(4, 3))
    plotting.band_plot(ax, pd.DataFrame(rows), "loss", "m")
    handles, labels = ax.get_legend_handles_labels()
    assert labels == ["1", "1: seeds 0, 2 diverged at rounds 2, 1"]   # mean + one x entry
    assert sum(ln.get_marker() == "x" for ln in ax.get_lines()) == 2   # an x per seed
    plt.close(fig)
    text = plotting.wrap_footer("a " * 200 + "\nshort", 4)
    lines = text.split("\n")
    assert max(map(len, lines)) <= 64 and lines[-1] == "short" and len(lines) > 3


# ------------------------------------------------------------------ 3: checkpoints

KILL_CHILD = r"""
import sys, time, numpy as np, torch
torch.set_num_threads(1)
from sims.core.engine import run
from sims.store.checkpoint import Checkpointer
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
ck = Checkpointer(sys.argv[1], every_rounds=1, key="kill-test")
q = heterogeneous_quadratic(8, 20, local_steps=2, seed=1, sigma=0.5, x0=1.0)
def progress(t):
    print(t, flush=True)
    time.sleep(0.03)
out = run(q, FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=3), 30, [0, 1],
          eval_every=2, checkpoint=ck, progress=progress)
print("resumed", ck.resumed_from, flush=True)
np.savez(sys.argv[2], theta=out.server["theta"].numpy(), error=out.client_state["error"].numpy(),
         **{k: v for k, v in out.metrics.items() if k != "wall_time"})
"""


def test_killed_run_resumes_from_checkpoint_and_equals_uninterrupted(tmp_path):
    """Fault injection: SIGKILL the run at random rounds (possibly mid-save) three times, then
    let it finish; its curves and final state equal an uninterrupted run's exactly."""
    ckpt, result = tmp_path / "run.pt", tmp_path / "out.npz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", KILL_CHILD, str(ckpt), str(result)]
    rng, resumed = random.Random(14), []
    for _ in range(3):
        kill_at = rng.randint(3, 25)
        child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            if line.strip().isdigit() and int(line) >= kill_at:
                child.send_signal(signal.SIGKILL)
                break
        child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL and not result.exists()
        assert ckpt.exists()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resumed = [line for line in done.stdout.splitlines() if line.startswith("resumed")]
    assert resumed and int(resumed[0].split()[1]) >= 3       # it did resume, from round >= 3
    ref = engine.run(quadratic(), FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=3), 30,
                     [0, 1], eval_every=2)
    got = np.load(result)
    np.testing.assert_array_equal(got["theta"], ref.server["theta"].numpy())
    np.testing.assert_array_equal(got["error"], ref.client_state["error"].numpy())
    for name, values in ref.metrics.items():
        if name != "wall_time":
            np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_entry_resumes_an_interrupted_run_from_its_checkpoint(tmp_path, capsys, monkeypatch):
    entry = make_entry()
    assert run_entry(entry, tmp_path / "plain", "--ms", "2") == 0
    saves = []
    real_save = Checkpointer.save

    def save_then_stop(self, state):
        real_save(self, state)
        saves.append(state["t"])
        if len(saves) == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpointer, "save", save_then_stop)
    args = ("--ms", "2", "--checkpoint-every", "1e-9")
    assert run_entry(entry, tmp_path / "cut", *args) == 130
    assert "resumes from its last checkpoint" in capsys.readouterr().err
    monkeypatch.undo()
    ckpts = list((tmp_path / "cut" / "res" / "trust_entry" / ".checkpoints").glob("*.safetensors"))
    assert len(ckpts) == 1                                     # only the latest is kept
    assert run_entry(entry, tmp_path / "cut", *args) == 0
    assert "resuming seeds 0-1 from its checkpoint at round 4" in capsys.readouterr().out
    assert not ckpts[0].exists()                               # removed once results are saved
    plain, cut = (pd.read_csv(next((tmp_path / d / "res" / "trust_entry").glob("m2_*.csv")))
                  for d in ("plain", "cut"))
    keep = lambda df: df[df.metric != "wall_time"].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(keep(cut), keep(plain))
    rec = next(iter(records(tmp_path / "cut" / "res" / "trust_entry").values()))
    assert rec["resumed_from_round"] == [4]


def _interrupt_after(monkeypatch, n_saves: int):
    real_save, saves = Checkpointer.save, []

    def save_then_stop(self, state):
        real_save(self, state)
        saves.append(state["t"])
        if len(saves) == n_saves:
            raise KeyboardInterrupt
    monkeypatch.setattr(Checkpointer, "save", save_then_stop)


def test_checkpoint_of_other_code_is_resumed_only_with_reuse_stale(tmp_path, capsys,
                                                                    monkeypatch):
    entry = make_entry()
    args = ("--ms", "2", "--checkpoint-every", "1e-9")
    for where in ("strict", "stale"):
        _interrupt_after(monkeypatch, 3)
        assert run_entry(entry, tmp_path / where, *args) == 130
        monkeypatch.undo()
    monkeypatch.setattr(sims.store.identity, "code_digest", lambda: "edited-code")
    capsys.readouterr()
    assert run_entry(entry, tmp_path / "strict", *args) == 0
    assert "resuming" not in capsys.readouterr().out            # started again from round 0
    assert run_entry(entry, tmp_path / "stale", *args, "--reuse-stale") == 0
    out = capsys.readouterr().out
    assert "resuming a checkpoint of OTHER code (--reuse-stale)" in out
    assert "from its checkpoint at round 3" in out
    strict, stale = (next(iter(records(tmp_path / d / "res" / "trust_entry").values()))
                     for d in ("strict", "stale"))
    assert strict["resumed_from_round"] == [] and not strict["resumed_from_other_code"]
    assert stale["resumed_from_round"] == [3] and stale["resumed_from_other_code"]
    # part of it was computed by other code: never read back as current (the same code
    # recomputes it without --reuse-stale; --reuse-stale reuses it and says so)
    assert run_entry(entry, tmp_path / "strict", *args) == 0
    assert "reused 1 saved run" in capsys.readouterr().out
    assert run_entry(entry, tmp_path / "stale", *args, "--reuse-stale") == 0
    assert "computed by OTHER code" in capsys.readouterr().out
    assert run_entry(entry, tmp_path / "stale", *args) == 0
    assert "recomputing 1 saved run" in capsys.readouterr().out


def test_finished_run_with_a_final_checkpoint_is_not_run_again(tmp_path):
    """A caller that saves results after several engine runs (chunks of seeds) keeps each
    finished one in a final checkpoint: resuming it runs no round and returns the same."""
    args = (quadratic(), FedEF(1.0, 0.05, TopK(0.2)), Participation("fixed", m=3), 6, [0, 1])
    first = engine.run(*args, checkpoint=Checkpointer(tmp_path / "c.pt", every_rounds=100,
                                                      final=True))
    again, rounds_run = Checkpointer(tmp_path / "c.pt", every_rounds=100, final=True), []
    second = engine.run(*args, checkpoint=again, progress=rounds_run.append)
    assert again.resumed_from == 6 and rounds_run == []
    for name, values in first.metrics.items():
        np.testing.assert_array_equal(second.metrics[name], values)


def test_checkpointer_is_time_based_atomic_and_keyed(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("sims.store.checkpoint.time.monotonic", lambda: clock[0])
    ck = Checkpointer(tmp_path / "c.pt", every_seconds=60, key="a")
    assert not ck.due(1)
    clock[0] += 61
    assert ck.due(2)
    ck.save({"t": 2})
    assert not ck.due(3)                                       # the clock restarts at a save
    ck.save({"t": 3})
    assert ck.load() == {"t": 3} and [p.name for p in tmp_path.iterdir()] == ["c.pt"]
    assert Checkpointer(tmp_path / "c.pt", key="b").load() is None   # another run's
    (tmp_path / "c.pt").write_bytes(b"truncated")
    assert ck.load() is None                                   # damaged: never trusted
    ck.clear()
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="every_seconds"):
        Checkpointer(tmp_path / "c.pt", every_seconds=-1)


# ------------------------------------------------------------------ 4: validate before work

def _no_engine(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a run was computed before the input was validated")
    monkeypatch.setattr(engine, "run", boom)


@pytest.mark.parametrize("make_args,words", [
    (lambda t: ["--out", str(t / "afile")], "is a file, not a folder"),
    (lambda t: ["--out", str(t / "afile" / "sub")], "cannot write there"),
    (lambda t: ["--figures", str(t / "afile")], "--figures"),
    (lambda t: ["--eval-every", "0"], "--eval-every"),
    (lambda t: ["--device", "foo"], "--device 'foo'"),
    (lambda t: ["--seed0", "-5"], "--seed0"),
    (lambda t: ["--checkpoint-every", "-1"], "--checkpoint-every"),
])
def test_bad_settings_and_output_folders_fail_before_any_run(make_args, words, tmp_path,
                                                             capsys, monkeypatch):
    (tmp_path / "afile").write_text("not a folder")
    _no_engine(monkeypatch)
    entry = make_entry()
    rc = common.main(entry, ["--quiet", "--out", str(tmp_path / "res"), "--figures",
                             str(tmp_path / "fig"), *make_args(tmp_path)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:") and words in err[0], err


@pytest.mark.parametrize("name", ["stale_error", "heavy_tails", "speedup"])
def test_cpu_only_entries_refuse_another_device(name, tmp_path, capsys):
    entry = importlib.import_module(f"reproduce.{name}")
    rc = common.main(entry, ["--tiny", "--quiet", "--device", "cuda", "--out",
                             str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "runs on cpu only" in err and "\n" not in err


# ------------------------------------------------------------------ 5: partial results

def test_partial_results_name_missing_runs_and_withhold_verdicts(tmp_path, capsys):
    stale = importlib.import_module("reproduce.stale_error")
    args = ["--tiny", "--quiet", "--out", str(tmp_path / "r"), "--figures",
            str(tmp_path / "f")]
    assert common.main(stale, args) == 0
    for path in (tmp_path / "r" / "stale_error").glob("ef_m*"):
        path.unlink()
    capsys.readouterr()
    assert common.main(stale, [*args, "--plot-only", "--available"]) == 0
    out = capsys.readouterr().out
    assert "missing: 2 of 5 runs have no results (ef_m2, ef_m10)" in out
    from verdict_util import saved
    assert saved(tmp_path / "r", "stale_error") == {            # every claim needs them
        "S1": "inconclusive: missing", "S2": "inconclusive: missing",
        "S3": "inconclusive: missing"}
    assert "staleness m=" not in out
    assert (tmp_path / "f" / "fedef_stale_error.png").stat().st_size > 1000


def test_heavy_tails_gives_no_verdict_for_a_missing_noise(tmp_path, capsys):
    heavy = importlib.import_module("reproduce.heavy_tails")
    args = ["--tiny", "--quiet", "--out", str(tmp_path / "r"), "--figures",
            str(tmp_path / "f"), "--methods", "fedavg,client_adagrad", "--paths", "500"]
    assert common.main(heavy, args) == 0
    for path in (tmp_path / "r" / "heavy_tails").glob("cauchy*"):
        path.unlink()
    capsys.readouterr()
    assert common.main(heavy, [*args, "--plot-only", "--available"]) == 0
    out = capsys.readouterr().out
    from verdict_util import saved
    assert saved(tmp_path / "r", "heavy_tails") == {"1 [cauchy]": "inconclusive: missing",
                                                     "1 [student_t]": "premise absent"}
    assert "1 (cauchy): FedAvg grows, client AdaGrad flat -> inconclusive: missing" in out


# ------------------------------------------------------------------ 6: checksums

def test_truncated_results_file_is_refused_naming_it(tmp_path, capsys):
    entry = make_entry()
    assert run_entry(entry, tmp_path) == 0
    victim = next((tmp_path / "res" / "trust_entry").glob("m2_*.csv"))
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) * 2 // 3])              # cut mid-table
    with pytest.raises(ResultsError, match=str(victim.name)):
        load_run(victim)
    capsys.readouterr()
    assert run_entry(entry, tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(victim) in err and "checksum" in err


def test_results_are_fsynced_before_the_atomic_rename(tmp_path, monkeypatch):
    import sims.store.results as results
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(results.os, "fsync", lambda fd: (events.append("fsync"),
                                                          real_fsync(fd))[1])
    monkeypatch.setattr(results.os, "replace", lambda a, b: (events.append("replace"),
                                                              real_replace(a, b))[1])
    save_run(pd.DataFrame({"run": ["a"], "value": [1.0]}), {}, tmp_path / "x.csv")
    first = events.index("replace")
    assert "fsync" in events[:first]                            # data on disk, then renamed
    assert events.count("replace") == 2


# ------------------------------------------------------------------ 7: smoke figures

def test_tiny_figures_go_outside_the_committed_figures_and_carry_their_scale(tmp_path):
    fig9 = importlib.import_module("reproduce.fig9")
    cfg = common.parse_config(fig9, ["--tiny", "--out", str(tmp_path / "r")])
    assert Path(cfg.figures) == tmp_path / "r" / "figures"
    assert common.ROOT / "figures" not in Path(cfg.figures).resolve().parents
    cfg = common.parse_config(fig9, ["--tiny"])                  # the default --out too
    assert Path(cfg.figures).resolve() != (common.ROOT / "figures").resolve()
    assert Path(cfg.figures).resolve().parent == (common.ROOT / "results").resolve()
    note = common.scale_note(fig9, cfg)
    assert "--tiny smoke scale" in note and f"{cfg.rounds} rounds" in note and "seed" in note
    assert f"data {cfg.dataset_title()}" in note                 # the data the run resolved to
    import matplotlib.pyplot as plt
    fig, _ = plt.subplots()
    with plotting.footer(note):
        plotting.save(fig, tmp_path / "f", "x")
    assert [t.get_text() for t in fig.texts] == [note]
    fig, _ = plt.subplots()
    plotting.save(fig, tmp_path / "f", "y")                      # outside the block: none
    assert not fig.texts


# ------------------------------------------------------------------ 8: the comparison command

COMPARE = ["--quiet", "--rounds", "3", "--seeds", "1", "--n-clients", "6",
           "--participation", "m=3", "--dim", "4"]


def test_compare_keeps_other_comparisons_and_reuses_its_own(tmp_path, capsys):
    out = ["--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    assert compare.main([*COMPARE, "--algorithms", "fedavg", *out]) == 0
    first = sorted(p.name for p in (tmp_path / "r").glob("compare_*"))
    assert compare.main([*COMPARE, "--algorithms", "fedavg", "--sigma", "0.5", *out]) == 0
    both = sorted(p.name for p in (tmp_path / "r").glob("compare_*"))
    assert set(first) < set(both) and len(both) == 2 * len(first)   # nothing overwritten
    capsys.readouterr()
    assert compare.main([*COMPARE, "--algorithms", "fedavg", *out]) == 0
    assert "reused 1 saved run (from commit" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "r").glob("compare_*")) == both


def test_compare_interrupt_is_one_line(tmp_path, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(engine, "run", interrupted)
    rc = compare.main([*COMPARE, "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")])
    err = capsys.readouterr().err.strip()
    assert rc == 130 and err.startswith("interrupted:") and "\n" not in err


@pytest.mark.parametrize("args,text", [
    (["--sigma", "-1"], "--sigma must be >= 0"),
    (["--seed0", "-5"], "--seed0 must be >= 0"),
    (["--hp", "eta_l=abc"], "eta_l takes a number, got 'abc'"),
    (["--eval-train-samples", "0"], "--eval-train-samples must be >= 1"),
    (["--out", "/dev/null"], "is a file, not a folder"),
])
def test_compare_bad_values_are_one_line_errors(tmp_path, capsys, args, text):
    rc = compare.main([*COMPARE, "--out", str(tmp_path / "r"), "--figures",
                       str(tmp_path / "f"), *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and text in err, err


def test_compare_tiny_figures_go_next_to_its_results(tmp_path):
    assert compare.main(["--tiny", "--quiet", "--algorithms", "fedavg", "--out",
                         str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "figures" / "compare.png").exists()


def test_benchmark_rejects_negative_rounds_in_one_line():
    done = subprocess.run([sys.executable, "benchmarks/engine_vs_loop.py", "--rounds", "-1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "--rounds must be >= 1" in done.stderr


def test_reproduce_help_lists_the_entries(capsys):
    from reproduce.__main__ import main as reproduce_main
    assert reproduce_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "fig8" in out and "unknown entry" not in out


# ------------------------------------------------------------------ 9: locks and provenance

def test_second_process_waits_for_a_run_being_computed_and_reuses_it(tmp_path, capsys):
    """Another process holds run m2's lock; this one computes m4, waits for m2 (and says
    so), and takes the other process's result instead of computing m2 again."""
    entry = make_entry()
    assert run_entry(entry, tmp_path / "donor") == 0           # the other process's result
    donor = tmp_path / "donor" / "res" / "trust_entry"
    folder = tmp_path / "res" / "trust_entry"
    cfg = common.parse_config(entry, [])
    run = entry.runs(cfg)[0]
    stem = common.run_stem(cfg, run)
    held = RunLock(folder / ".locks" / f"{stem}.lock")
    assert held.acquire(blocking=False)
    said = []

    def other_process():
        deadline = time.monotonic() + 60
        while not any("waiting" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.02)
        for ext in ("csv", "json"):
            (folder / f"{stem}.{ext}").write_bytes((donor / f"{stem}.{ext}").read_bytes())
        held.release()

    helper = threading.Thread(target=other_process)
    helper.start()
    cfg.out, cfg.figures, cfg.quiet = str(tmp_path / "res"), str(tmp_path / "fig"), True
    df = common.execute(entry, cfg, say=said.append)
    helper.join(timeout=30)
    assert any(f"run {run.name}: being computed by another process (pid" in s for s in said)
    assert f"run {run.name}: computed meanwhile by another process; reused" in said
    donor_rec = json.loads((donor / f"{stem}.json").read_text())
    assert json.loads((folder / f"{stem}.json").read_text()) == donor_rec   # not recomputed
    assert set(df.run) == {"m2", "m4"}
    assert RunLock(folder / ".locks" / f"{stem}.lock").acquire(blocking=False)   # released


@pytest.mark.parametrize("reuse_stale", [True, False], ids=["reuse-stale", "strict"])
def test_a_run_computed_meanwhile_on_other_code_follows_reuse_stale(tmp_path, reuse_stale):
    """The result another process saved while this one waited, computed by other code (a
    process started before a commit): reused and said so under --reuse-stale, recomputed
    without it (the rule of the runs found at the start)."""
    entry = make_entry()
    assert run_entry(entry, tmp_path / "donor") == 0
    donor = tmp_path / "donor" / "res" / "trust_entry"
    folder = tmp_path / "res" / "trust_entry"
    cfg = common.parse_config(entry, ["--reuse-stale"] if reuse_stale else [])
    run = entry.runs(cfg)[0]
    stem = common.run_stem(cfg, run)
    held = RunLock(folder / ".locks" / f"{stem}.lock")
    assert held.acquire(blocking=False)
    said = []
    rec = json.loads((donor / f"{stem}.json").read_text())
    rec["fingerprint"] = "0" * len(rec["fingerprint"])         # as computed by other code

    def other_process():
        deadline = time.monotonic() + 60
        while not any("waiting" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.02)
        (folder / f"{stem}.csv").write_bytes((donor / f"{stem}.csv").read_bytes())
        (folder / f"{stem}.json").write_text(json.dumps(rec))
        held.release()

    helper = threading.Thread(target=other_process)
    helper.start()
    cfg.out, cfg.figures, cfg.quiet = str(tmp_path / "res"), str(tmp_path / "fig"), True
    common.execute(entry, cfg, say=said.append)
    helper.join(timeout=30)
    now = json.loads((folder / f"{stem}.json").read_text())
    if reuse_stale:
        assert (f"run {run.name}: computed meanwhile by another process on OTHER code than "
                "this checkout's; reused (--reuse-stale)") in said
        assert now == rec                                             # not recomputed
    else:
        assert not any("computed meanwhile" in line for line in said)
        assert now["fingerprint"] != rec["fingerprint"]               # recomputed here
        assert now["pid"] == os.getpid()


def test_two_processes_on_one_out_compute_each_run_once(tmp_path):
    cmd = [sys.executable, "-m", "reproduce.stale_error", "--tiny", "--quiet", "--threads", "1",
           "--out", str(tmp_path / "r"), "--figures", str(tmp_path / "f")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    folder = tmp_path / "r" / "stale_error"
    pids = [json.loads(p.read_text())["pid"] for p in folder.glob("*.json")]
    assert len(pids) == 5
    text = "\n".join(outs)
    reused = sum(int(w.split()[1]) for w in text.splitlines() if w.startswith("reused "))
    meanwhile = text.count("computed meanwhile by another process")
    # every run was computed by exactly one process; the other reused it
    assert reused + meanwhile == 5, text


def test_provenance_records_command_start_host_threads_and_versions():
    rec = provenance({"a": 1}, [0], 2.0)
    for key in ("command", "started", "host", "threads", "pid"):
        assert rec[key] not in (None, "")
    assert rec["threads"] == torch.get_num_threads()
    from sims import accel
    assert rec["accel"] == accel.status()
    accel.enable(False)
    try:
        assert provenance({"a": 1}, [0], 2.0)["accel"] == "off"
    finally:
        accel.enable(True)
    assert rec["code"]["code_digest"] == sims.store.identity.code_digest()
    assert set(rec["code"]["numeric_versions"]) >= {"python", "torch", "numpy", "scipy"}
    assert time.strptime(rec["started"], "%Y-%m-%dT%H:%M:%SZ")

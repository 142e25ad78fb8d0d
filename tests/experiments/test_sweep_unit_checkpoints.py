"""A sweep's running unit is checkpointed (``SweepSpec.checkpoint_every``,
``--checkpoint-every``): an interrupted sweep resumes mid-unit and ends where an
uninterrupted one does."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from sims.experiments.sweep import Grid, SweepSpec, run_sweep
from sims.experiments.sweep.cli import build_compare_problem

PROBLEM = {"problem": "quadratic", "n_clients": 8, "dim": 5}


def _spec(out, every):
    return SweepSpec("ck", Grid.from_specs("fedadam", ["eta_l=0.05,0.1"]), PROBLEM,
                     build_compare_problem, participation="m=3", rounds=6, seeds=[0],
                     out=str(out), checkpoint_every=every)


def test_interrupted_sweep_resumes_from_its_unit_checkpoint(tmp_path):
    whole = run_sweep(_spec(tmp_path / "whole", 0.0), quiet=True).table
    seen = [0]

    def stop(k):
        seen[0] += k
        if seen[0] >= 4:                                   # mid-way through the first cell
            raise KeyboardInterrupt

    spec = _spec(tmp_path / "cut", 1e-9)                   # a checkpoint every round
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, quiet=True, progress=stop)
    assert list((spec.folder / ".checkpoints").glob("unit_*.ckpt"))
    resumed = run_sweep(spec, quiet=True).table
    records = [json.loads(p.read_text()) for p in (spec.folder / "cells").glob("*.json")]
    assert sorted(r["resumed_from_round"] or 0 for r in records)[-1] >= 3
    assert not list((spec.folder / ".checkpoints").glob("unit_*.ckpt"))   # cleared
    cols = ["run", "seed", "round", "metric", "value"]
    keep = lambda t: t[t.metric != "wall_time"][cols].sort_values(cols[:4]).reset_index(  # noqa
        drop=True)
    pd.testing.assert_frame_equal(keep(resumed), keep(whole))


def _cut(spec, after=4):
    """Run ``spec`` until ``after`` cell-rounds are done, then stop (a checkpoint remains)."""
    seen = [0]

    def stop(k):
        seen[0] += k
        if seen[0] >= after:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, quiet=True, progress=stop)
    assert list((spec.folder / ".checkpoints").glob("unit_*.ckpt"))


@pytest.mark.parametrize("reuse_stale", [False, True], ids=["strict", "reuse-stale"])
def test_a_unit_checkpoint_of_other_code_is_resumed_only_with_reuse_stale(
        tmp_path, monkeypatch, capsys, reuse_stale):
    """After a code change, an unfinished unit starts again from round 0; with
    ``reuse_stale`` it resumes the other code's checkpoint, says so, and its cells are
    saved as of other code: a later sweep without ``reuse_stale`` recomputes them."""
    import sims.store.identity
    spec = _spec(tmp_path / "cut", 1e-9)
    _cut(spec)
    monkeypatch.setattr(sims.store.identity, "code_digest", lambda: "edited-code")
    capsys.readouterr()
    result = run_sweep(spec, quiet=True, reuse_stale=reuse_stale)
    said = capsys.readouterr().err
    records = {r["point"]: r for r in (json.loads(p.read_text())
                                       for p in (spec.folder / "cells").glob("*.json"))}
    resumed = [r for r in records.values() if r["resumed_from_round"]]
    if not reuse_stale:
        assert not resumed and "OTHER code" not in said
        assert not any(r["resumed_from_other_code"] for r in records.values())
        assert result.reused == 0 and not list((spec.folder / ".checkpoints").iterdir())
        return
    assert len(resumed) == 1 and resumed[0]["resumed_from_round"] >= 3
    assert resumed[0]["resumed_from_other_code"]
    assert "resuming a checkpoint of OTHER code (--reuse-stale)" in said
    # the resumed cell is of other code: recomputed without reuse_stale, the other reused
    again = run_sweep(spec, quiet=True)
    assert again.reused == 1 and again.recomputed_stale == 1


def test_bad_checkpoint_every_is_refused():
    from sims.experiments.sweep import GridError
    with pytest.raises(GridError, match="checkpoint_every must be >= 0"):
        _spec("x", float("nan"))

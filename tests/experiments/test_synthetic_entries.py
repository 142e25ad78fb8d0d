"""``--tiny`` smoke runs of the synthetic entries: results, provenance and figures written."""
import json

import pytest

from reproduce import common, heavy_tails, qa_sim, speedup, stale_error

ENTRIES = {"heavy_tails": (heavy_tails, "fedada2_heavy_tails"),
           "qa_sim": (qa_sim, "fedef_qa_sim"),
           "stale_error": (stale_error, "fedef_stale_error"),
           "speedup": (speedup, "fedef_speedup")}
U, PA = "inconclusive: underpowered", "premise absent"
AVG, LATE = "(1/T) sum_t ||grad f||^2", "late floor (second half)"
#: What the --tiny runs decide (every claim, its label exactly).
LABELS = {
    # 4,000 paths where the growth needs decades of them
    "heavy_tails": {"1 [student_t]": PA, "1 [cauchy]": PA},
    # 200 draws a cell decide q_A^2 < 1; training runs 10 clients a round of the paper's 100
    "qa_sim": {"E12": "shows", "E13x": PA},
    # the staleness law holds; 12 rounds reach the target at one n/m only; 1 seed
    "stale_error": {"S1": "shows", "S2": U, "S3 [S=5, m=2]": U},
    # two seeds: T1's slopes straddle the prediction's band; T2's lie outside it (m flat)
    "speedup": {f"T1 [{AVG}]": U, f"T1 [{LATE}]": U, f"T2 [{AVG}]": "does not show",
                f"T2 [{LATE}]": "does not show"},
}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_tiny_run_writes_results_and_figures(name, tmp_path, capsys):
    module, stem = ENTRIES[name]
    out, figs = tmp_path / "results", tmp_path / "figures"
    argv = ["--tiny", "--quiet", "--out", str(out), "--figures", str(figs)]
    assert common.main(module, argv) == 0
    printed = capsys.readouterr().out
    assert f"figure: {figs / (stem + '.png')}" in printed
    for ext in ("png", "pdf"):
        assert (figs / f"{stem}.{ext}").stat().st_size > 0
    from verdict_util import saved
    assert saved(out, name) == LABELS[name]
    records = sorted((out / name).glob("*.json"))
    assert records and len(records) == len(list((out / name).glob("*.csv")))
    meta = json.loads(records[0].read_text())
    assert meta["entry"] == name and "fingerprint" in meta and meta["seeds"]
    # the saved runs are found again (resumable; what --plot-only redraws from)
    cfg = common.parse_config(module, argv + ["--plot-only"])
    assert len(common.execute(module, cfg)) > 0

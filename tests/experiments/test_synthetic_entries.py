"""``--tiny`` smoke runs of the synthetic entries: results, provenance and figures written."""
import json

import pytest

from reproduce import common, heavy_tails, qa_sim, speedup, stale_error

ENTRIES = {"heavy_tails": (heavy_tails, "fedada2_heavy_tails"),
           "qa_sim": (qa_sim, "fedef_qa_sim"),
           "stale_error": (stale_error, "fedef_stale_error"),
           "speedup": (speedup, "fedef_speedup")}


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
    records = sorted((out / name).glob("*.json"))
    assert records and len(records) == len(list((out / name).glob("*.csv")))
    meta = json.loads(records[0].read_text())
    assert meta["entry"] == name and "fingerprint" in meta and meta["seeds"]
    # the saved runs are found again (resumable; what --plot-only redraws from)
    cfg = common.parse_config(module, argv + ["--plot-only"])
    assert len(common.execute(module, cfg)) > 0

"""A figure's footer never calls a changed run the CPU default: ``scale_note`` names the
options that differ from the entry's defaults (a 100-round run of a 10-round default once
carried "CPU default scale")."""
from __future__ import annotations

from reproduce import common, fedlamb_supp1


def test_default_run_is_called_the_default(tmp_path):
    cfg = common.parse_config(fedlamb_supp1, ["--out", str(tmp_path)])
    note = common.scale_note(fedlamb_supp1, cfg)
    assert "CPU default scale," in note and " with " not in note.split(",")[0]


def test_changed_options_are_named(tmp_path):
    cfg = common.parse_config(fedlamb_supp1, ["--rounds", "100", "--seeds", "3", "--no-printed",
                                              "--out", str(tmp_path), "--threads", "1"])
    head = common.scale_note(fedlamb_supp1, cfg).split("\n")[0]
    assert "CPU default scale with" in head
    assert "--rounds 100" in head and "--seeds 3" in head and "--no-printed True" in head
    assert "--out" not in head and "--threads" not in head       # not part of the run's key

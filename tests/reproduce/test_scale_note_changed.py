"""A figure's footer never calls a changed run the CPU default: ``scale_note`` names the
options that differ from the entry's defaults (a 100-round run of a 10-round default once
carried "CPU default scale")."""
from __future__ import annotations

from reproduce import common, fedlamb_supp1, fig8


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


def test_footer_names_the_stand_in_the_title_names(tmp_path):
    """Fig. 8 without ``--data-dir`` runs on Fashion-MNIST; its footer once said "data mnist"
    under a title saying "Fashion-MNIST (stand-in for MNIST)"."""
    cfg = common.parse_config(fig8, ["--out", str(tmp_path)])
    note = common.scale_note(fig8, cfg)
    assert f"data {cfg.dataset_title()}" in note
    if cfg.data_dir is None:
        assert "data Fashion-MNIST (stand-in for MNIST)" in note and "data mnist" not in note

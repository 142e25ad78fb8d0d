"""The reproduce entries: listing, tiny runs, files, provenance, resuming, plot-only, errors."""
from __future__ import annotations

import importlib
import json
import math

import pandas as pd
import pytest

import reproduce
from reproduce import common
from reproduce.__main__ import listing
from reproduce.__main__ import main as reproduce_main


def _run(name, tmp_path, *extra):
    entry = importlib.import_module(f"reproduce.{name}")
    out, figs = tmp_path / "results", tmp_path / "figures"
    rc = common.main(entry, ["--tiny", "--quiet", "--out", str(out), "--figures", str(figs),
                             *extra])
    return rc, out / name, figs


def test_listing_names_every_entry_with_paper_and_cost():
    text = listing()
    for name, module in reproduce.ENTRIES.items():
        mod = importlib.import_module(module)
        assert name in text and mod.TARGET in text and mod.DEFAULT_COST in text
        for attr in ("Config", "runs", "plot", "check"):
            assert hasattr(mod, attr), f"{module} lacks {attr}"
    assert "cannot import" not in text


def _check_outputs(results, figs, stem):
    for ext in ("png", "pdf"):
        assert (figs / f"{stem}.{ext}").stat().st_size > 1000
    csvs = sorted(results.glob("*.csv"))
    assert csvs
    for path in csvs:
        df = pd.read_csv(path)
        assert set(df.columns) >= {"run", "seed", "round", "metric", "value"}
        main = df[df.metric.isin(["train_loss", "grad_norm2"])]
        assert len(main) and main.value.map(math.isfinite).all()
        record = json.loads(path.with_suffix(".json").read_text())
        assert record["seeds"] and record["versions"]["torch"] and record["commit"]
        assert record["config"]["tiny"] is True and record["fingerprint"]
        if record["problem"]["type"] == "NeuralProblem":    # which fused path ran
            assert record["problem"]["local_sgd_path"] in ("gram", "direct")


@pytest.mark.parametrize("name,stem,labels", [
    # 4 (fig8) and 8 (fig9) rounds of the paper's 100, on the 4,000-image subset (1-4 local
    # steps an epoch instead of 10): every claim's regime card fails
    ("fig8", "fedef_fig8", {f"{c} [{m}]": "premise absent" for c in ("E10a", "E10b", "E10c")
                            for m in ("grad_norm2, mean over rounds 1..T",
                                      "grad_norm2, late level (rounds >= 0.6 T)",
                                      "train_loss, mean over rounds 1..T")}),
    ("fig9", "fedef_fig9", {"E11 [logreg, m=10]": "premise absent"}),
])
def test_tiny_entry_writes_figures_results_and_provenance(name, stem, labels, tmp_path):
    from verdict_util import saved
    rc, results, figs = _run(name, tmp_path)
    assert rc == 0
    _check_outputs(results, figs, stem)
    assert saved(results.parent, name) == labels


def test_fig1_full_precision_beats_direct_sign(tmp_path):
    """The claim's direction on the tiny run: direct Sign (no error feedback) ends with a
    higher training loss than full precision."""
    rc, results, figs = _run("fig1", tmp_path)
    assert rc == 0
    _check_outputs(results, figs, "fedef_fig1")
    df = pd.concat(pd.read_csv(p) for p in results.glob("*.csv"))
    last = df[(df.metric == "train_loss") & (df["round"] == df["round"].max())]
    loss = last.groupby("method")["value"].mean()
    assert loss["full precision"] < loss["Sign, no EF (Alg. 1)"]
    from verdict_util import saved
    assert saved(results.parent, "fig1") == {"E1": "premise absent"}   # 5 of 100 rounds


def test_interrupted_entry_resumes_only_unfinished_runs(tmp_path):
    rc, results, _ = _run("fig9", tmp_path)
    assert rc == 0
    csvs = sorted(results.glob("*.csv"))
    stamps = {p.name: p.stat().st_mtime_ns for p in csvs}
    victim = csvs[0]
    victim.with_suffix(".json").unlink()          # as if interrupted before its record
    rc, _, _ = _run("fig9", tmp_path)
    assert rc == 0
    assert victim.with_suffix(".json").exists()
    for p in csvs[1:]:
        assert p.stat().st_mtime_ns == stamps[p.name], f"{p.name} was recomputed"
    assert victim.stat().st_mtime_ns != stamps[victim.name]


def test_changed_settings_are_not_mistaken_for_saved_runs(tmp_path):
    """Runs at another round count are run again, into files of their own: the file names
    carry the round count (and a fingerprint), so the earlier results are kept."""
    rc, results, _ = _run("fig9", tmp_path)
    stamps = {p.name: p.stat().st_mtime_ns for p in results.glob("*.csv")}
    rc, _, _ = _run("fig9", tmp_path, "--rounds", "5")
    assert rc == 0
    after = {p.name: p.stat().st_mtime_ns for p in results.glob("*.csv")}
    new = set(after) - set(stamps)
    assert len(new) == len(stamps) and all("_T5_" in name for name in new)
    assert all(after[name] == stamp for name, stamp in stamps.items())


def test_threads_flag_reuses_saved_runs_and_sets_torch_threads(tmp_path):
    """``--threads`` does not change results, so it is not part of the fingerprint."""
    import torch
    before = torch.get_num_threads()
    try:
        assert _run("fig9", tmp_path)[0] == 0
        results = tmp_path / "results" / "fig9"
        stamps = {p.name: p.stat().st_mtime_ns for p in results.glob("*.csv")}
        assert _run("fig9", tmp_path, "--threads", "2")[0] == 0
        assert torch.get_num_threads() == 2
        assert {p.name: p.stat().st_mtime_ns for p in results.glob("*.csv")} == stamps
    finally:
        torch.set_num_threads(before)


def test_plot_only_redraws_or_says_what_is_missing(tmp_path, capsys):
    rc, _, figs = _run("fig9", tmp_path, "--plot-only")
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--plot-only" in err[0]
    assert _run("fig9", tmp_path)[0] == 0
    (figs / "fedef_fig9.png").unlink()
    assert _run("fig9", tmp_path, "--plot-only")[0] == 0
    assert (figs / "fedef_fig9.png").exists()


@pytest.mark.parametrize("name, extra", [("fedada2_choices", ("--tuning", "two-step")),
                                         ("fedlada_k", ("--tuned",))],
                         ids=["fedada2-two-step", "fedlada-tuned-picks"])
def test_plot_only_computes_no_tuning_either(name, extra, tmp_path, capsys):
    """Entries whose runs rest on a tuning made while listing their runs (FedAda2's two-step
    picks; FedLADA's base picks where no filed record is at the run's scale): under
    ``--plot-only`` with the tuning's cells not saved, a one-line error naming the flag, and
    no cell computed."""
    rc, out, _ = _run(name, tmp_path, *extra, "--plot-only")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("error: --plot-only: sweep ") and "no saved result" in err[0]
    assert not list((tmp_path / "results").rglob("*.csv"))


@pytest.mark.parametrize("args,words", [
    (["--seeds", "0"], "--seeds"),
    (["--partition", "halves"], "partition"),
    (["--data-dir", "/nonexistent/dir"], "/nonexistent/dir"),
    (["--threads", "-1"], "--threads"),
])
def test_bad_input_is_one_line(args, words, tmp_path, capsys):
    rc, _, _ = _run("fig8", tmp_path, *args)
    assert rc == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and words in err[0]


@pytest.mark.parametrize("name, flag, value, noun", [
    ("speedup", "--ns", "4,x", "integers"), ("stale_error", "--ms", "y", "integers"),
    ("fedlamb_theory", "--rs", "x", "integers"), ("fedlada_k", "--ks", "x", "integers"),
    ("fedlada_participation", "--rates", "x", "numbers"),
    ("fedlada_alpha", "--cm-alphas", "x", "numbers"),
    ("fedlada_fig8", "--scaffold-alphas", "x", "numbers"),
    ("fedlada_synthetic", "--ks", "x", "integers"), ("fedada2_theory", "--ts-rate", "x", "integers"),
    ("fig8", "--ms", "x", "integers"), ("fig9", "--ms", "x", "integers"),
    ("qa_sim", "--scales", "x", "numbers"),
    ("fedef_images", "--ps", "x", "numbers"), ("fedlamb_fig12", "--epochs", "x", "integers"),
])
def test_unreadable_list_flag_is_one_line_naming_the_flag(name, flag, value, noun, tmp_path,
                                                         capsys):
    """Every entry reads its comma-separated flags through ``common.items``: a part it cannot
    read is one line naming the flag and the part, before any run is written."""
    rc, out, _ = _run(name, tmp_path, flag, value)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert rc == 2 and err == [f"error: {flag}: cannot read '{value.split(',')[-1]}'; give "
                               f"comma-separated {noun}"], err
    assert not list(tmp_path.rglob("*.csv"))


@pytest.mark.parametrize("flags, needle", [(("--noises", ","), "the flags select no runs"),
                                           (("--methods", ","), "--methods must name one")])
def test_empty_lists_are_one_line_before_any_run(flags, needle, tmp_path, capsys):
    rc, _, _ = _run("heavy_tails", tmp_path, *flags)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1 and needle in err[0], err
    assert not list(tmp_path.rglob("*.csv"))


def test_reproduce_main_dispatches_and_rejects_unknown(capsys):
    assert reproduce_main([]) == 0
    assert "fig8" in capsys.readouterr().out
    assert reproduce_main(["nonsense"]) == 2


@pytest.mark.parametrize("name", ["fedef_cifar", "fedlamb_cifar"])
def test_gpu_entries_refuse_their_cpu_default_in_one_line(name, tmp_path, capsys):
    import importlib
    entry = importlib.import_module(f"reproduce.{name}")
    rc = common.main(entry, ["--quiet", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--cpu-ok" in err and "--tiny" in err and "\n" not in err
    assert not (tmp_path / "r" / name).exists() or not any((tmp_path / "r" / name).iterdir())

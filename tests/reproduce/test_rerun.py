"""The committed profile (``python -m reproduce rerun``, :mod:`reproduce.rerun`): it reruns the
commands the ledger's rows were filed from, computing (no read-back flags), each checked by its
entry's parser before anything runs; a filed command survives values with spaces."""
from __future__ import annotations

import json
import shlex

import pytest

from reproduce import common, ledger, rerun, speedup


@pytest.fixture(scope="module")
def spaced(tmp_path_factory):
    """A scratch ledger holding a --tiny speedup run whose folders have spaces in their names
    (a value with a space, as ``--axes "a=1 b=2"``, must survive the filed command)."""
    tmp = tmp_path_factory.mktemp("rerun") / "a folder"
    out, figs, led = tmp / "the results", tmp / "figures", tmp / "ledger"
    argv = ["--tiny", "--quiet", "--out", str(out), "--figures", str(figs)]
    assert common.main(speedup, argv) == 0
    assert ledger.main(["speedup", "--out", str(out), "--ledger", str(led), "--allow-tiny"]) == 0
    return argv, out, led


def test_a_filed_command_splits_back_into_its_arguments(spaced):
    argv, _, led = spaced
    rec = ledger.entry_record("speedup", led)
    assert shlex.split(rec["command"]) == ["python3", "-m", "reproduce.speedup", *argv]


def test_the_profile_computes_what_the_filing_read_back(spaced):
    argv, _, led = spaced
    rec = ledger.entry_record("speedup", led)
    filed = dict(rec, command=rec["command"] + " --plot-only --reuse-stale")
    assert rerun.profile_argv(filed) == argv
    assert rerun.profile_argv(filed, reuse_stale=True) == argv + ["--reuse-stale"]
    assert rerun.profile_argv(rec, reuse_stale=True) == argv + ["--reuse-stale"]
    with pytest.raises(rerun.ProfileError, match="does not start with"):
        rerun.profile_argv(dict(rec, command="python3 -m reproduce.fig8 --tiny"))


def test_a_rerun_runs_the_filed_command_and_reports_its_cost(spaced, monkeypatch, capsys):
    argv, out, led = spaced
    record = out / "speedup" / "ledger" / "verdicts.json"
    before = record.stat().st_mtime_ns
    plan = rerun.steps(entries=["speedup"], ledger=led)
    assert plan == [("speedup", argv)]
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(led))
    assert rerun.main(["speedup"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "python3 " + shlex.join(["-m", "reproduce.speedup", *argv])
    assert "speedup: " in text and "CPU-s" in text and "min of wall" in text
    assert record.stat().st_mtime_ns > before             # it ran and recorded again


def test_a_command_that_no_longer_parses_is_refused_before_any_step_runs(tmp_path, monkeypatch,
                                                                         capsys):
    """A record filed before commands were quoted (``--axes a=1 b=2`` unquoted) is a one-line
    error naming the entry, and nothing runs, not even the entries before it."""
    led = tmp_path / "ledger"
    (led / "entries").mkdir(parents=True)
    for entry, flags in (("fig8", "--tiny --seeds 1"),
                         ("fedlamb_supp1", "--tiny --axes fed-lamb.lam=0 mime-lamb.lam=0")):
        (led / "entries" / f"{entry}.json").write_text(json.dumps(
            {"entry": entry, "paper": "X", "command": f"python3 -m reproduce.{entry} {flags}"}))
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(led))
    ran = []
    monkeypatch.setattr(rerun.subprocess, "call", lambda cmd: ran.append(cmd) or 0)
    assert rerun.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fedlamb_supp1" in err and "mime-lamb.lam=0" in err
    assert ran == []
    (led / "entries" / "fig8.json").write_text(json.dumps(
        {"entry": "fig8", "paper": "X", "command": "python3 -m reproduce.fig8 --seeds many"}))
    assert rerun.main(["fig8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: fig8: its filed command does not parse:") and "many" in err
    assert ran == []


def test_papers_and_entries_select_the_steps_and_bad_names_are_one_line_errors(monkeypatch,
                                                                                capsys):
    records = rerun.filed()
    lada = rerun.select(records, papers=["fedlada"])
    assert lada and all(records[e]["paper"] == "FedLADA" for e in lada)
    assert rerun.select(records, papers=["FedLADA"]) == lada
    assert set(rerun.select(records, papers=["fed-ef"], entries=["fedlada_theory"])) == (
        {e for e, r in records.items() if r["paper"] == "Fed-EF"} | {"fedlada_theory"})
    assert rerun.select(records) == list(records)
    ran = []
    monkeypatch.setattr(rerun.subprocess, "call", lambda cmd: ran.append(cmd) or 0)
    for args, needle in ((["--paper", "FedNope"], "no filed entry; one of"),
                         (["nope_entry"], "not filed in the ledger: nope_entry")):
        assert rerun.main(args) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert ran == []


def test_every_committed_entry_is_rerunnable_and_fedlada_runs_both_protocols(monkeypatch,
                                                                              capsys):
    """Every command in the committed ledger parses with its entry's parser (the profile's
    ``--dry-run`` runs nothing); FedLADA's filed commands are the paper protocol and the
    tuned comparison together, at the seeds its results doc states."""
    ran = []
    monkeypatch.setattr(rerun.subprocess, "call", lambda cmd: ran.append(cmd) or 0)
    assert rerun.main(["--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(rerun.filed()) and ran == []
    assert not any("--plot-only" in s or "--reuse-stale" in s for s in lines)
    lada = {e: argv for e, argv in rerun.steps(papers=["FedLADA"])}
    for entry in ("fedlada_fig1", "fedlada_fig2", "fedlada_fig7", "fedlada_fig8",
                  "fedlada_alpha", "fedlada_k", "fedlada_participation"):
        assert {"--paper-lr", "--tuned"} <= set(lada[entry]), entry
    for entry in ("fedlada_fig2", "fedlada_fig8"):
        seeds = lada[entry][lada[entry].index("--seeds") + 1]
        assert seeds == "5", (entry, seeds)


def test_a_failing_step_stops_the_profile_and_ledger_files_each_step(monkeypatch, capsys):
    calls = []

    def fake(cmd):           # an entry's run: -m reproduce.ENTRY; its filing: -m reproduce ledger ENTRY
        calls.append(("run", cmd[2].split(".")[1]) if cmd[2] != "reproduce" else
                     (cmd[3], cmd[4]))
        return 3 if calls[-1] == ("run", "fedlada_k") else 0

    monkeypatch.setattr(rerun.subprocess, "call", fake)
    assert rerun.main(["--paper", "FedLADA", "--ledger"]) == 3
    steps = [e for e, _ in rerun.steps(papers=["FedLADA"])]
    stop = steps.index("fedlada_k")
    assert 0 < stop < len(steps) - 1
    assert calls == [c for e in steps[:stop] for c in (("run", e), ("ledger", e))] + [
        ("run", "fedlada_k")]
    assert "fedlada_k exited 3; rerun this profile to continue" in capsys.readouterr().err

"""The results ledger and the report (:mod:`reproduce.ledger`, :mod:`reproduce.report`): the
committed docs, README and figures agree with the committed ledger; an entry's saved run files
into a ledger and redraws from it; the docs' blocks follow the ledger and a tampered number or
figure is caught; the report renders in a real headless browser with every image loaded and
every claim given a verdict."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from reproduce import common, ledger, report, speedup
from reproduce.verdicts import LABELS, claim_key

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ committed
def test_committed_docs_readme_and_figures_agree_with_the_ledger():
    """Every generated block of README.md and docs/*.md, every inline ledger value, and every
    figure the ledger filed equal what the committed ledger says (run ``python -m reproduce
    report`` after ``python -m reproduce ledger ENTRY``)."""
    assert report.stale(ledger.LEDGER, ROOT) == []
    blocks = [p for p in report.doc_paths(ROOT) if "<!-- ledger-claims" in p.read_text()]
    assert {p.name for p in blocks} >= {"fedef_results.md", "fedlada_results.md",
                                        "fedada2_results.md", "claims.md"}
    assert "<!-- ledger-summary -->" in (ROOT / "README.md").read_text()


def test_committed_ledger_has_the_schema_and_the_vocabulary():
    v = ledger.verdicts(ledger.LEDGER)
    assert {"paper", "claim", "verdict"} <= set(v.columns)
    assert list(v.columns) == list(ledger.VERDICT_COLUMNS)
    assert set(v["verdict"]) <= set(LABELS)
    assert list(ledger.values(ledger.LEDGER).columns) == list(ledger.VALUE_COLUMNS)


def test_one_entry_decides_each_claim():
    """A claim two entries measure is decided by one of them (FedAda2 claims 15 and 16 once
    contradicted each other across fedada2_fig1, fedada2_fig5 and fedada2_epochs); T5, a
    deterministic invariant, is checked on each Fed-LAMB entry's own runs."""
    cl = report.claims()
    dup = cl[cl.duplicated(["paper", "claim"], keep=False)]
    assert set(zip(dup.paper, dup.claim)) <= {("Fed-LAMB", "T5")}, dup
    assert cl.statement.str.len().min() > 10 and cl.definition.notna().all()
    assert set(cl.paper) == set(report.PAPERS)


# ------------------------------------------------------------------------------ a ledger
@pytest.fixture(scope="module")
def filed(tmp_path_factory):
    """A scratch ledger holding a --tiny run of the speedup entry."""
    tmp = tmp_path_factory.mktemp("ledger")
    out, figs, led = tmp / "results", tmp / "figures", tmp / "ledger"
    assert common.main(speedup, ["--tiny", "--quiet", "--out", str(out), "--figures",
                                 str(figs)]) == 0
    assert ledger.main(["speedup", "--out", str(out), "--ledger", str(led),
                        "--allow-tiny"]) == 0
    return tmp, out, figs, led


def test_an_entry_run_files_into_the_ledger(filed):
    tmp, out, figs, led = filed
    v = ledger.verdicts(led)
    assert set(v.entry) == {"speedup"} and set(v.paper) == {"Fed-EF"}
    assert sorted(v.claim) == ["T1", "T1", "T2", "T2"]
    assert set(v.verdict) <= set(LABELS) and (v.n_seeds == "2").all()
    assert v.command.str.startswith("python3 -m reproduce.speedup --tiny").all()
    assert (v.code_digest.str.len() == 16).all() and v.commit.str.len().min() >= 7
    vals = ledger.values(led)
    assert {"card", "evidence", "final"} <= set(vals.kind)
    ev = vals[(vals.kind == "evidence") & (vals.claim == "T1")]
    assert len(ev) == 4 and ev.seed.isin(["0", "1"]).all()       # 2 seeds x 2 scopes
    fig = ledger.figures(led)
    assert len(fig) == 1 and fig.figure.iloc[0].endswith("fedef_speedup.png")
    assert fig.sha256.iloc[0] == hashlib.sha256(Path(fig.figure.iloc[0]).read_bytes()).hexdigest()
    rec = ledger.entry_record("speedup", led)
    assert rec["tiny"] is True and rec["config"]["rounds"] == rec["rounds"]


def test_tiny_runs_never_enter_the_committed_ledger(filed, capsys):
    tmp, out, figs, led = filed
    assert ledger.main(["speedup", "--out", str(out), "--allow-tiny"]) == 2
    assert "--allow-tiny needs another --ledger" in capsys.readouterr().err
    assert ledger.main(["speedup", "--out", str(out), "--ledger", str(tmp / "l2")]) == 2
    assert "--tiny smoke run" in capsys.readouterr().err
    assert ledger.main(["nosuch", "--ledger", str(tmp / "l2")]) == 2
    assert "unknown entry nosuch" in capsys.readouterr().err


def test_plot_only_from_the_ledger_redraws_and_rechecks(filed, monkeypatch, capsys):
    """``--plot-only --from-ledger`` reads the ledger's table and settings (no results
    folder), draws the figure and prints the same verdicts as the filed run."""
    tmp, out, figs, led = filed
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(led))
    capsys.readouterr()
    rc = common.main(speedup, ["--plot-only", "--from-ledger", "--quiet", "--out",
                               str(tmp / "empty"), "--figures", str(tmp / "redrawn")])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert (tmp / "redrawn" / "fedef_speedup.png").stat().st_size > 1000
    rec = ledger.entry_record("speedup", led)
    lines = [ln for ln in rec["check"].splitlines() if ln.startswith(("T1 ", "T2 "))]
    assert lines and all(ln in text for ln in lines)
    assert common.main(speedup, ["--from-ledger"]) == 2          # only with --plot-only
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(tmp / "nothing"))
    assert common.main(speedup, ["--plot-only", "--from-ledger", "--out", str(tmp / "e")]) == 2
    assert "has no results of speedup" in capsys.readouterr().err


def test_from_the_ledger_never_builds_the_run_list(filed, monkeypatch, capsys, tmp_path):
    """A tuned entry's run list needs its tuning's cells, which the ledger does not carry
    (``fedada2_fig1 --tuning two-step`` once failed ``--from-ledger`` for that reason): the
    redraw takes the run names from the filed record, and a run the record names but its table
    lacks is still reported missing."""
    tmp, out, figs, led = filed
    rec = ledger.entry_record("speedup", led)
    assert rec["runs"] == [r.name for r in speedup.runs(common.parse_config(
        speedup, ["--tiny"]))]

    def needs_cells(cfg):
        raise common.EntryError("--plot-only: sweep s: 3 of 3 cell(s) have no saved result")
    monkeypatch.setattr(speedup, "runs", needs_cells)
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(led))
    capsys.readouterr()
    argv = ["--plot-only", "--from-ledger", "--quiet", "--out", str(tmp_path / "e"),
            "--figures", str(tmp_path / "f")]
    assert common.main(speedup, argv) == 0, capsys.readouterr()
    assert "missing" not in capsys.readouterr().out
    copy = tmp_path / "led"
    shutil.copytree(led, copy)
    path = copy / "entries" / "speedup.json"
    rec["runs"] = rec["runs"] + ["a run never computed"]
    path.write_text(__import__("json").dumps(rec))
    monkeypatch.setenv("FEDTOOLKIT_LEDGER", str(copy))
    assert common.main(speedup, argv) == 0
    assert f"missing: 1 of {len(rec['runs'])} runs have no results (a run never computed)" \
        in capsys.readouterr().out


def test_filed_block_returns_a_heading_and_its_rows_as_filed(filed, tmp_path):
    """``ledger.filed_block``: the block under a heading (also after a caller's prefix), its
    two-space rows up to the next unindented or deeper-indented line; a record filed under an
    older wording by its one line of the heading's family; nothing where that is ambiguous or
    absent."""
    tmp, out, figs, led = filed
    copy = tmp_path / "led"
    shutil.copytree(led, copy)
    rec = ledger.entry_record("speedup", copy)
    rec["check"] = "\n".join([
        "data: x", "1 epoch(s): tuning (rule r, from T1):", "  A: pick 1", "  B: pick 2",
        "    detail", "tuning (rule r, from T2):", "  C: pick 3", "next line", "old tuning (w):",
        "  D: pick 4"])
    (copy / "entries" / "speedup.json").write_text(__import__("json").dumps(rec))
    block = lambda *a, **k: ledger.filed_block(speedup, *a, ledger=copy, **k)  # noqa: E731
    assert block("tuning (rule r, from T1):") == ["tuning (rule r, from T1):", "  A: pick 1",
                                                  "  B: pick 2"]
    assert block("tuning (rule r, from T2):") == ["tuning (rule r, from T2):", "  C: pick 3"]
    assert block("tuning (rule r, from T3):") == []
    assert block("tuning (rule r, from T3):", family="old tuning") == ["old tuning (w):",
                                                                     "  D: pick 4"]
    assert block("tuning (rule r, from T3):", family="tuning (") == []     # three candidates


def test_recheck_holds_the_rederived_verdicts_to_the_filed_ones(filed, tmp_path, capsys):
    """``python -m reproduce recheck`` re-derives a filed entry from the ledger alone: the
    filed labels pass; a filed label that the check does not give (a tampered row) and an
    entry that cannot re-derive (its curves gone) are reported and fail."""
    from reproduce import recheck
    tmp, out, figs, led = filed
    good = recheck.recheck("speedup", led)
    assert good.ok and len(good.now) == 4 and good.now == good.filed, good.line()
    assert good.drift <= recheck.ROUNDING
    copy = tmp_path / "led"
    shutil.copytree(led, copy)
    rows = copy / "verdicts" / "speedup.csv"
    v = ledger.verdicts(copy)
    flip = "does not show" if v.verdict.iloc[0] != "does not show" else "shows"
    text = rows.read_text().replace(f",{v.verdict.iloc[0]},", f",{flip},", 1)
    rows.write_text(text)
    bad = recheck.recheck("speedup", copy)
    key = claim_key(v.claim.iloc[0], v.scope.iloc[0])
    assert not bad.ok and bad.differences == [f"{key}: filed {flip!r}, now "
                                              f"{v.verdict.iloc[0]!r}"]
    capsys.readouterr()
    assert recheck.main(["speedup", "--ledger", str(copy)]) == 1
    assert "speedup: DIFFERS (1 of 4)" in capsys.readouterr().out
    (copy / "curves" / "speedup.csv.gz").unlink()
    gone = recheck.recheck("speedup", copy)
    assert not gone.ok and "has no results of speedup" in gone.line()
    assert recheck.main(["nosuch", "--ledger", str(led)]) == 2


def test_the_checked_table_reads_back_to_the_same_floats():
    """``--from-ledger`` re-derives verdicts from the filed table: it must read back exactly
    (at 8 significant digits the probes' recovered constants, relative error 1e-15 against a
    1e-9 tolerance, read back 2e-8 off and flipped to NOT recovered)."""
    import io

    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"run": ["a"] * 50, "value": 10.48651 * (1 + rng.normal(0, 1e-12, 50))})
    back = pd.read_csv(io.BytesIO(ledger._gz_csv(df)), compression="gzip")
    assert (back["value"].to_numpy() == df["value"].to_numpy()).all()
    assert ledger._gz_csv(df) == ledger._gz_csv(df.copy())      # same bytes for same data


def _docs_copy(tmp: Path) -> Path:
    root = tmp / "root"
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    for p in (ROOT / "docs").glob("*.md"):
        shutil.copy(p, root / "docs" / p.name)
    return root


def test_docs_follow_the_ledger_and_catch_a_tampered_number(filed):
    tmp, out, figs, led = filed
    root = _docs_copy(tmp)
    doc = root / "docs" / "fedef_results.md"
    row = ledger.verdicts(led).iloc[0]
    doc.write_text(doc.read_text() + f'\nThe slope: <!-- ledger speedup {row.claim} '
                   f'"{row.scope}" estimate -->?<!-- /ledger -->.\n')
    assert report.stale(led, root)                                # blocks and value stale
    report.update_docs(led, root)
    assert report.stale(led, root) == []
    text = doc.read_text()
    scope = row.scope.replace("|", "\\|")                 # Markdown cells escape "|"
    assert f"| {row.claim} ({scope}) |" in text and f"**{row.verdict}**" in text
    est = float(row.estimate) * float(row.scope and row.scale or 1)
    assert f'estimate -->{est:.3g}<!-- /ledger -->' in text
    assert "not yet rerun on the ledger" in text                 # the other Fed-EF claims
    assert "| Fed-EF | " in (root / "README.md").read_text()
    # a number edited by hand, a verdict, or the filed figure: each is caught
    doc.write_text(text.replace(f'estimate -->{est:.3g}', 'estimate -->0.5'))
    assert any("inline value" in p for p in report.stale(led, root))
    block = text.index("<!-- ledger-claims Fed-EF -->")         # the prose may bold a label too
    doc.write_text(text[:block] + text[block:].replace(f"**{row.verdict}**",
                                                       "**shows in the mean**", 1))
    assert any("block ledger-claims Fed-EF" in p for p in report.stale(led, root))
    doc.write_text(text)
    fig = Path(ledger.figures(led).figure.iloc[0])
    original = fig.read_bytes()
    fig.write_bytes(original + b"x")
    assert any("differs from the figure the ledger filed" in p for p in report.stale(led, root))
    fig.write_bytes(original)
    assert report.stale(led, root) == []


# ------------------------------------------------------------------------------ browser
def _browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    if not (chromium and driver):
        return None
    return chromium, driver


def test_report_renders_in_headless_chromium_with_images_and_verdicts(filed, tmp_path):
    found = _browser()
    if found is None:
        pytest.skip("no Chromium, chromedriver or selenium here (setup.sh installs them)")
    chromium, driver_path = found
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    _, out, figs, led = filed
    page = tmp_path / "report.html"
    assert report.main(["--ledger", str(led), "--out", str(page)]) == 0
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        drv.set_page_load_timeout(60)
        drv.get(page.as_uri())
        assert drv.execute_script("return document.readyState") == "complete"
        assert "claims" in drv.title
        images = drv.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete,"
            " i.naturalWidth])")
        assert images, "the report shows no figure"
        broken = [src for src, done, width in images if not (done and width > 0)]
        assert broken == []
        claims = drv.execute_script(
            "return Array.from(document.querySelectorAll('.claim')).map(c => "
            "[c.dataset.claim, Array.from(c.querySelectorAll('.label')).map(l => "
            "l.dataset.verdict)])")
        cl = report.claims()
        assert len(claims) == len(cl.drop_duplicates(["paper", "claim", "entry"]))
        allowed = set(LABELS) | {report.NOT_YET, report.GPU_ONLY}
        assert all(labels and set(labels) <= allowed for _, labels in claims), claims
        filed_labels = [lab for name, labels in claims if name.startswith("Fed-EF T")
                        for lab in labels]
        assert set(filed_labels) <= set(LABELS) and report.NOT_YET not in filed_labels
        text = drv.find_element("tag name", "body").text
        assert "python3 -m reproduce.speedup --tiny" in text and "regime variable" in text
    finally:
        drv.quit()


def test_report_html_names_every_claim_without_a_browser(filed, tmp_path):
    _, out, figs, led = filed
    page = report.html_page(led, tmp_path / "r.html")
    cl = report.claims()
    for c in cl.itertuples():
        assert f'data-claim="{c.paper} {c.claim}"' in page
    assert page.count("data-verdict=") >= len(cl)


def test_a_gpu_only_entrys_claims_say_so_and_cpu_entries_say_not_yet(tmp_path):
    """Without ledger rows, a claim only a GPU-only entry checks reads "not run here: GPU
    only", every other claim "not yet rerun on the ledger"; the README summary counts both."""
    t = report.table(tmp_path)
    assert set(t[t.entry == "fedef_cifar"].verdict) == {report.GPU_ONLY}
    assert set(t[t.entry == "fedada2_full"].verdict) == {report.GPU_ONLY}
    assert set(t[t.entry == "fig8"].verdict) == {report.NOT_YET}
    assert report.GPU_ONLY in report.summary(tmp_path).splitlines()[0]


def test_declared_unrun_settings_get_rows_with_their_cost_until_the_ledger_files_them(
        filed, tmp_path, monkeypatch):
    """An entry's ``NOT_RUN`` settings each get a row (GPU only or not yet rerun, by ``gpu``)
    with the cost in the claims table and the page; a setting the ledger has a row of shows
    that row alone; an item naming a claim the entry does not check is an error."""
    from reproduce.verdicts import NotRun
    _, _, _, led = filed
    v = ledger.verdicts(led)
    done = v[(v.entry == "speedup") & (v.claim == "T1")].scope.iloc[0]
    monkeypatch.setattr(speedup, "NOT_RUN", raising=False, value=(
        NotRun("T1", done, "already filed"),
        NotRun("T1", "n up to 1000", "about 3 CPU-hours here", gpu=False),
        NotRun("T2", "the paper's d", "a GPU-day")))
    t = report.table(led)
    mine = t[t.entry == "speedup"]
    t1 = mine[mine.claim == "T1"]
    assert list(t1[t1.scope == done].verdict) == list(v[(v.entry == "speedup") & (v.claim == "T1")
                                                         & (v.scope == done)].verdict)
    assert list(t1[t1.scope == "n up to 1000"].verdict) == [report.NOT_YET]
    t2 = mine[(mine.claim == "T2") & (mine.scope == "the paper's d")]
    assert list(t2.verdict) == [report.GPU_ONLY] and list(t2.cost) == ["a GPU-day"]
    md = report.markdown("Fed-EF", led)
    assert "| T1 (n up to 1000) |" in md and "not run: about 3 CPU-hours here" in md
    assert "already filed" not in md
    assert "not run: a GPU-day" in report.html_page(led, tmp_path / "r.html")
    # on an empty ledger the claim's declared settings stand in for its "not yet" row
    empty = report.table(tmp_path)
    t1e = empty[(empty.entry == "speedup") & (empty.claim == "T1")]
    assert sorted(t1e.scope) == sorted([done, "n up to 1000"])
    monkeypatch.setattr(speedup, "NOT_RUN", (NotRun("Z9", "x", "y"),), raising=False)
    with pytest.raises(ValueError, match="speedup.NOT_RUN names claim 'Z9'"):
        report.table(led)


def test_the_committed_unrun_settings_name_claims_their_entries_check():
    u = report.not_run()
    assert {"fedlamb_fig12", "fedef_images"} <= set(u.entry)
    assert (u.cost.str.len() > 20).all()


def test_final_values_keep_a_run_name_that_recurs_across_panels_apart():
    """A run name repeated across panels (the same grid point in two sweeps) gets one final
    row per panel, each with its own last value; the table's runs are then all named with the
    column that tells them apart (the collapse this replaces kept one panel's value under the
    bare name). Rows no column tells apart are an error."""
    import pandas as pd
    rows = []
    for sweep, acc in (("E1_fed-sgd", 0.81), ("E3_fed-sgd", 0.83)):
        for rnd, frac in ((0, 0.1), (100, 1.0)):
            rows.append({"run": "fed-sgd eta_l=0.1", "seed": 0, "round": rnd, "metric": "test_acc",
                         "value": acc * frac, "sweep": sweep, "flag": "x"})
    rows.append({"run": "alone", "seed": 0, "round": 100, "metric": "test_acc", "value": 0.5,
                 "sweep": "E1_other", "flag": "x"})
    df = pd.DataFrame(rows)
    assert ledger.run_keys(df) == ["sweep"]
    got = {r["name"]: float(r["value"]) for r in ledger.final_rows({"entry": "e", "paper": "p"},
                                                                     df)}
    assert got == {"fed-sgd eta_l=0.1 [sweep=E1_fed-sgd]:test_acc": 0.81,
                   "fed-sgd eta_l=0.1 [sweep=E3_fed-sgd]:test_acc": 0.83,
                   "alone [sweep=E1_other]:test_acc": 0.5}
    with pytest.raises(ledger.LedgerError, match="no column tells apart"):
        ledger.final_rows({}, pd.concat([df, df.iloc[:1]]))


def test_the_committed_final_values_are_the_committed_curves_last_rounds(tmp_path):
    """Every filed entry's final values rows are what filing writes from its committed curves
    (a scratch copy of the ledger is refreshed and must come out byte-identical)."""
    copy = tmp_path / "ledger"
    shutil.copytree(ledger.LEDGER, copy)
    assert ledger.refresh_finals(copy, say=lambda *_: None) == []

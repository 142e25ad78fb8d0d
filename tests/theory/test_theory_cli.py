"""CLI of the audit (python -m theory) and the committed report docs/theory_audit.md."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from theory.__main__ import main
from theory.core import PAPERS, SEVERITIES, STATUSES, run_all
from theory.report import GENERATE_CMD, README_BEGIN, README_CMD, README_END, render_markdown, render_readme

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "theory_audit.md"
README = ROOT / "README.md"


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_table_format_has_columns_and_counts(capsys):
    out = _run(capsys)
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["paper", "check", "kind", "label", "verdict", "evidence"]
    rows = run_all()
    n_paper = sum(1 for c, _ in rows if c.kind == "paper")
    assert lines[-1].startswith(f"{n_paper} claims of the papers checked: ") and lines[-1].endswith(f"({len(rows)} checks in all)")
    for paper in PAPERS:
        assert any(line.startswith(paper + " ") for line in lines)
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize("paper", PAPERS)
def test_json_paper_filter(capsys, paper):
    data = json.loads(_run(capsys, "--format", "json", "--paper", paper))
    assert data["checks"] and {c["paper"] for c in data["checks"]} == {paper}
    assert set(data["counts"]) == {paper, "total"}
    assert sum(data["counts"]["total"].values()) == len(data["checks"])
    for c in data["checks"]:
        assert c["status"] in STATUSES and c["evidence"] and c["claim"]
        if c["status"] in ("refuted", "outside"):  # the counterexample and its evaluated hypotheses are in the JSON
            assert c["counterexample"] and c["hypotheses"]
            assert all(h["holds"] for h in c["hypotheses"]) == (c["status"] == "refuted")


@pytest.mark.parametrize("spelling,paper", [("fed_lamb", "fed-lamb"), ("Fed-LAMB", "fed-lamb"), ("Fed-EF", "fed-ef"),
                                             ("FEDEF", "fed-ef"), ("FedLADA", "fedlada"), ("fed-ada2", "fedada2")])
def test_paper_aliases(capsys, spelling, paper):
    a = _run(capsys, "--paper", spelling, "--format", "json")
    b = _run(capsys, "--paper", paper, "--format", "json")
    assert a == b


@pytest.mark.parametrize("label", sorted(SEVERITIES))
def test_label_filter(capsys, label):
    data = json.loads(_run(capsys, "--label", label, "--format", "json"))
    assert data["checks"], label
    assert all(c["status"] == "refuted" and c["severity"] == label for c in data["checks"])
    everything = json.loads(_run(capsys, "--format", "json"))
    assert len(data["checks"]) == sum(1 for c in everything["checks"] if c["status"] == "refuted" and c["severity"] == label)


def test_label_counts_per_paper(capsys):
    """Per-label counts per paper in the JSON agree with the rows, kinds kept apart."""
    data = json.loads(_run(capsys, "--format", "json"))
    for kind, table in data["refutations_by_label"].items():
        for paper, cnt in table.items():
            for label, k in cnt.items():
                assert k == sum(1 for c in data["checks"] if c["status"] == "refuted" and c["severity"] == label
                                and c["kind"] == kind and paper in ("total", c["paper"]))


def test_kind_filter(capsys):
    data = json.loads(_run(capsys, "--kind", "spec", "--format", "json"))
    assert data["checks"] and {c["kind"] for c in data["checks"]} == {"spec"}


def test_markdown_format(capsys):
    out = _run(capsys, "--format", "markdown")
    assert out.startswith("# Theory audit")
    assert "## Findings (refuted claims)" in out
    for paper in PAPERS:
        assert f"## {paper}:" in out


def test_unknown_paper_is_rejected(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--paper", "fedavg"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown paper 'fedavg'" in err and "Traceback" not in err


def test_cli_subprocess_exit_code():
    res = subprocess.run([sys.executable, "-m", "theory", "--paper", "fed-lamb"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "checks in all" in res.stdout.splitlines()[-1]


def test_committed_report_is_fresh():
    expected = render_markdown(run_all())
    assert DOC.exists(), f"docs/theory_audit.md is missing; generate it with: {GENERATE_CMD}"
    assert DOC.read_text() == expected, f"docs/theory_audit.md is stale; regenerate it with: {GENERATE_CMD}"


def test_readme_summary_is_fresh():
    text = README.read_text()
    assert README_BEGIN in text and README_END in text, "README.md lacks the theory-summary block"
    block = text[text.index(README_BEGIN): text.index(README_END) + len(README_END)] + "\n"
    assert block == render_readme(run_all()), f"README.md's theory summary is stale; replace the block with: {README_CMD}"


def test_report_is_deterministic():
    rows = run_all()
    assert render_markdown(rows) == render_markdown(rows)


def test_headline_counts_paper_claims_apart_from_supporting_kinds(capsys):
    """The headline tallies only the papers' own claims; textbook premises, derived results and spec readings are counted
    apart, each kind with its number of checks."""
    from theory.core import SUPPORTING_KINDS
    from theory.report import headline

    rows = run_all()
    line = headline(rows)
    paper_rows = [r for r in rows if r[0].kind == "paper"]
    assert line.startswith(f"{len(paper_rows)} claims of the papers checked: ")
    for kind in SUPPORTING_KINDS:
        n = sum(1 for c, _ in rows if c.kind == kind)
        assert n > 0 and f"{n} " in line.split("tallied apart: ")[1]
    assert sum(1 for c, _ in rows if c.kind in SUPPORTING_KINDS) + len(paper_rows) == len(rows)


def test_coverage_flag(capsys):
    """python -m theory --coverage prints per result and per paper the fraction of displayed steps checked."""
    from theory.steps import GOAL, coverage, paper_coverage

    out = _run(capsys, "--coverage")
    per = paper_coverage(coverage())
    for paper in PAPERS:
        a, b = per[paper]
        assert f"{paper}" in out and f"{a}/{b} displayed steps checked" in out
        assert a / b >= GOAL
    data = json.loads(_run(capsys, "--coverage", "--format", "json"))
    assert {r["paper"] for r in data["results"]} == set(PAPERS)
    md = _run(capsys, "--coverage", "--format", "markdown")
    assert "| paper | displayed steps | checked | fraction |" in md

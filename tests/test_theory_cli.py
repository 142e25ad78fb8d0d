"""CLI of the audit (python -m theory) and the committed report docs/theory_audit.md."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from theory.__main__ import main
from theory.core import PAPERS, run_all
from theory.report import GENERATE_CMD, render_markdown

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "theory_audit.md"


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_table_format_has_columns_and_counts(capsys):
    out = _run(capsys)
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["paper", "check", "status", "evidence"]
    assert lines[-1].startswith(f"{len(run_all())} checks: ")
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
        assert c["status"] in ("verified", "refuted", "inconclusive") and c["evidence"] and c["claim"]


def test_paper_aliases(capsys):
    a = _run(capsys, "--paper", "fed_lamb", "--format", "json")
    b = _run(capsys, "--paper", "fed-lamb", "--format", "json")
    assert a == b


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


def test_cli_subprocess_exit_code():
    res = subprocess.run([sys.executable, "-m", "theory", "--paper", "fed-lamb"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "checks:" in res.stdout.splitlines()[-1]


def test_committed_report_is_fresh():
    expected = render_markdown(run_all())
    assert DOC.exists(), f"docs/theory_audit.md is missing; generate it with: {GENERATE_CMD}"
    assert DOC.read_text() == expected, f"docs/theory_audit.md is stale; regenerate it with: {GENERATE_CMD}"


def test_report_is_deterministic():
    rows = run_all()
    assert render_markdown(rows) == render_markdown(rows)

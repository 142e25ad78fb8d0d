"""The report: every paper's claims with their verdicts, regime cards, figures and commands,
generated from the results ledger (:mod:`reproduce.ledger`) and from nothing else.

``python -m reproduce report`` writes

* ``docs/report.html``: one static page to browse (per paper, per claim: the paper's
  statement, each verdict with its statistic and the protocol it rests on, the regime card,
  the figure beside it and the command that reproduces it);
* ``docs/claims.md``: the same claims as Markdown tables, the blocks the docs embed;

and regenerates the generated blocks of the docs (:func:`update_docs`), so every verdict or
number in them is the ledger's:

* ``<!-- ledger-claims PAPER -->`` ... ``<!-- end ledger-claims -->``: the paper's "claims at a
  glance" table;
* ``<!-- ledger-summary -->`` ... ``<!-- end ledger-summary -->``: the README's count of
  verdicts per paper;
* ``<!-- ledger ENTRY CLAIM "SCOPE" FIELD -->VALUE<!-- /ledger -->``: one number of one ledger
  row inline in prose (``FIELD``: a column of the ``verdicts`` table, e.g. ``estimate``, ``lo``,
  ``hi``, ``verdict``; printed as the row prints it).

A claim with no ledger row says ``not yet rerun on the ledger`` (no number is invented); a
setting an entry declares in ``NOT_RUN`` (:class:`reproduce.verdicts.NotRun`) has a row of its
own saying what it would cost, until the ledger files it.
:func:`stale` lists every block, inline value and ledger figure that disagrees with the
ledger; ``tests/test_ledger.py`` fails on any.
"""
from __future__ import annotations

import html
import importlib
import os
import re
import shlex
from pathlib import Path

import pandas as pd

from . import ENTRIES
from . import ledger as lg
from .verdicts import LABELS

ROOT = lg.ROOT
NOT_YET = "not yet rerun on the ledger"
#: A claim only a GPU-only entry (``GPU_ONLY = True``) checks, with no ledger row: it was never
#: run on this project's CPU machines, not merely not yet refiled.
GPU_ONLY = "not run here: GPU only"
PAPERS = ("Fed-EF", "FedLADA", "FedAda2", "Fed-LAMB")
#: Which results doc carries each paper's claims table.
DOCS = {"Fed-EF": "docs/fedef_results.md", "FedLADA": "docs/fedlada_results.md",
        "FedAda2": "docs/fedada2_results.md", "Fed-LAMB": "docs/claims.md"}
CLAIMS_MD = "docs/claims.md"
REPORT_HTML = "docs/report.html"


# ------------------------------------------------------------------------------ claims
def claims() -> pd.DataFrame:
    """Every claim every entry checks: ``paper, claim, statement, definition, source, entry,
    figures`` (the entry's committed figures), in the entries' order."""
    rows = []
    for name, module in ENTRIES.items():
        mod = importlib.import_module(module)
        figs = [f"figures/{s}.png" for s in getattr(mod, "FIGURES", ())]
        for c in getattr(mod, "CLAIMS", {}).values():
            rows.append({"paper": c.paper, "claim": c.id, "statement": c.statement,
                         "definition": c.definition, "source": c.source, "entry": name,
                         "figures": " ".join(figs),
                         "gpu_only": bool(getattr(mod, "GPU_ONLY", False))})
    return pd.DataFrame(rows, columns=["paper", "claim", "statement", "definition", "source",
                                       "entry", "figures", "gpu_only"])


def not_run() -> pd.DataFrame:
    """The settings entries declare they have not run (their ``NOT_RUN``): ``entry, claim,
    scope, cost, gpu``; an item naming a claim its entry does not check is an error."""
    rows = []
    for name, module in ENTRIES.items():
        mod = importlib.import_module(module)
        ids = set(getattr(mod, "CLAIMS", {}))
        for item in getattr(mod, "NOT_RUN", ()):
            if item.claim not in ids:
                raise ValueError(f"{name}.NOT_RUN names claim {item.claim!r}, which the entry "
                                 f"does not check (its claims: {', '.join(sorted(ids))})")
            rows.append({"entry": name, "claim": item.claim, "scope": item.scope,
                         "cost": item.cost, "gpu": item.gpu})
    return pd.DataFrame(rows, columns=["entry", "claim", "scope", "cost", "gpu"])


def _claim_order(claim: str):
    m = re.match(r"([A-Za-z]*)(\d*)(.*)", claim)
    return (m.group(1), int(m.group(2)) if m.group(2) else -1, m.group(3))


def table(ledger: Path | None = None) -> pd.DataFrame:
    """One row per (claim, entry, scope) with a ledger verdict, one per claim without any
    (``verdict`` = :data:`NOT_YET`, or :data:`GPU_ONLY` for a GPU-only entry's claim), and one
    per declared :func:`not_run` setting the ledger has no row of (:data:`GPU_ONLY` or
    :data:`NOT_YET` by its ``gpu``, its ``cost`` beside it)."""
    ledger = Path(ledger or lg.ledger_dir())
    cl = claims()
    v = lg.verdicts(ledger)
    unrun = not_run()
    rows = []
    for c in cl.itertuples(index=False):
        got = v[(v.entry == c.entry) & (v.claim == c.claim)] if len(v) else v
        todo = unrun[(unrun.entry == c.entry) & (unrun.claim == c.claim)
                     & ~unrun.scope.isin(got.scope)]
        if not len(got) and not len(todo):
            rows.append({**c._asdict(), "scope": "", "cost": "",
                         "verdict": GPU_ONLY if c.gpu_only else NOT_YET, "row": None})
        for r in got.to_dict("records"):
            rows.append({**c._asdict(), "scope": r["scope"], "cost": "",
                         "verdict": r["verdict"], "row": r})
        for u in todo.itertuples(index=False):
            rows.append({**c._asdict(), "scope": u.scope, "cost": u.cost,
                         "verdict": GPU_ONLY if u.gpu else NOT_YET, "row": None})
    out = pd.DataFrame(rows)
    if len(out):
        out["_p"] = out.paper.map({p: i for i, p in enumerate(PAPERS)}).fillna(99)
        out["_c"] = out.claim.map(_claim_order)
        out = out.sort_values(["_p", "_c", "entry", "scope"], kind="stable").drop(
            columns=["_p", "_c"]).reset_index(drop=True)
    return out


def _statistic(row: dict | None) -> str:
    if not row:
        return ""
    line = row.get("line", "")
    m = re.search(r": ([^:]*?\d[^:]*?) \(decides: ", line)
    return m.group(1) if m else ""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(paper: str, ledger: Path | None = None) -> str:
    """The paper's claims at a glance (Markdown), from the ledger."""
    t = table(ledger)
    t = t[t.paper == paper]
    lines = ["| claim | the paper says | entry | verdict | statistic (95 % interval) | "
             "regime | protocol |", "|---|---|---|---|---|---|---|"]
    for r in t.itertuples(index=False):
        row = r.row or {}
        scope = f" ({r.scope})" if r.scope else ""
        regime = "" if not row else ("card ok" if row.get("card_ok") == "True" else
                                     "card FAILS: " + row.get("reason", "").replace(
                                         "regime card fails: ", "")
                                     if r.verdict == "premise absent" else
                                     "card fails" if row.get("card_ok") == "False" else "")
        protocol = row.get("protocol", "") if row else (f"not run: {r.cost}" if r.cost else "")
        lines.append(f"| {r.claim}{_cell(scope)} | {_cell(r.statement)} | `{r.entry}` | "
                     f"**{r.verdict}** | {_cell(_statistic(row))} | {_cell(regime)} | "
                     f"{_cell(protocol)} |")
    counts = t.verdict.value_counts()
    lines.append("")
    lines.append(f"{len(t)} rows over {t.claim.nunique()} claims: "
                 f"{int(t.row.notna().sum())} ledger verdicts, "
                 f"{int(counts.get(NOT_YET, 0))} not yet rerun on the ledger, "
                 f"{int(counts.get(GPU_ONLY, 0))} not run here (GPU only) (`docs/ledger/`; "
                 "`python -m reproduce report` regenerates this table).")
    return "\n".join(lines)


def summary(ledger: Path | None = None) -> str:
    """The README's summary: verdict labels per paper (rows of the ledger), and the claims
    not yet rerun on it."""
    t = table(ledger)
    cols = list(LABELS) + [NOT_YET, GPU_ONLY]
    lines = ["| paper | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for p in PAPERS:
        sub = t[t.paper == p]
        counts = sub.verdict.value_counts()
        lines.append(f"| {p} | " + " | ".join(str(int(counts.get(c, 0))) for c in cols) + " |")
    lines.append("")
    lines.append(f"{len(t)} rows over {t.drop_duplicates(['paper', 'claim']).shape[0]} claims "
                 f"of {t.entry.nunique()} entries; every claim and its card: "
                 "[docs/claims.md](docs/claims.md), browsable: `docs/report.html`.")
    return "\n".join(lines)


def claims_doc(ledger: Path | None = None) -> str:
    parts = ["# Claims at a glance", "",
             "Generated from the results ledger (`docs/ledger/`) by `python -m reproduce "
             "report`; a test fails when it is stale. Vocabulary and definitions: README, "
             "\"Verdicts, regime cards and the ledger\".", ""]
    for p in PAPERS:
        parts += [f"## {p}", "", block("claims", p, markdown(p, ledger)), ""]
    return "\n".join(parts)


# ------------------------------------------------------------------------------ blocks
BLOCK = re.compile(r"(<!-- ledger-(claims|summary)( [^>]*?)? -->\n)(.*?)(\n<!-- end ledger-\2 -->)",
                   re.S)
INLINE = re.compile(r"<!-- ledger (.*?) -->(.*?)<!-- /ledger -->", re.S)


def block(kind: str, arg: str, body: str) -> str:
    head = f"<!-- ledger-{kind}{' ' + arg if arg else ''} -->"
    return f"{head}\n{body}\n<!-- end ledger-{kind} -->"


def _inline_value(spec: str, v: pd.DataFrame) -> str | None:
    try:
        entry, claim, scope, field = shlex.split(spec)
    except ValueError:
        return None
    row = v[(v.entry == entry) & (v.claim == claim) & (v.scope == scope)]
    if len(row) != 1 or field not in row.columns:
        return None
    val = row.iloc[0][field]
    try:
        x = float(val) * (float(row.iloc[0]["scale"] or 1) if field in ("estimate", "lo", "hi")
                          else 1.0)
        return f"{x:.3g}" if field in ("estimate", "lo", "hi") else val
    except ValueError:
        return val


def render(text: str, ledger: Path | None = None) -> str:
    """``text`` with every generated block and inline ledger value regenerated."""
    ledger = Path(ledger or lg.ledger_dir())
    v = lg.verdicts(ledger)

    def fill(m):
        kind, arg = m.group(2), (m.group(3) or "").strip()
        body = (markdown(arg, ledger) if kind == "claims" else summary(ledger))
        return m.group(1) + body + m.group(5)

    def value(m):
        got = _inline_value(m.group(1), v)
        return f"<!-- ledger {m.group(1)} -->{NOT_YET if got is None else got}<!-- /ledger -->"
    return INLINE.sub(value, BLOCK.sub(fill, text))


def doc_paths(root: Path = ROOT) -> list[Path]:
    """The files that carry generated blocks: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def update_docs(ledger: Path | None = None, root: Path = ROOT) -> list[Path]:
    """Regenerate ``docs/claims.md``, ``docs/report.html`` and every block of the docs from
    the ledger; returns the files changed."""
    write = lg.write_file
    changed = []
    claims_path = root / CLAIMS_MD
    new = claims_doc(ledger) + "\n"
    if not claims_path.exists() or claims_path.read_text() != new:
        write(claims_path, new.encode())
        changed.append(claims_path)
    for path in doc_paths(root):
        text = path.read_text()
        out = render(text, ledger)
        if out != text:
            write(path, out.encode())
            changed.append(path)
    html_path = root / REPORT_HTML
    page = html_page(ledger, html_path)
    if not html_path.exists() or html_path.read_text() != page:
        write(html_path, page.encode())
        changed.append(html_path)
    return changed


def stale(ledger: Path | None = None, root: Path = ROOT) -> list[str]:
    """Everything the committed docs and figures say that the ledger does not: generated
    blocks or inline values that differ from their regeneration, a missing
    ``docs/claims.md``, a ledger figure whose file changed since it was filed."""
    import hashlib
    ledger = Path(ledger or lg.ledger_dir())
    problems = []
    claims_path = root / CLAIMS_MD
    if not claims_path.exists() or claims_path.read_text() != claims_doc(ledger) + "\n":
        problems.append(f"{CLAIMS_MD} differs from the ledger")
    for path in doc_paths(root):
        text = path.read_text()
        for m in BLOCK.finditer(text):
            kind, arg = m.group(2), (m.group(3) or "").strip()
            want = markdown(arg, ledger) if kind == "claims" else summary(ledger)
            if m.group(4) != want:
                problems.append(f"{path.relative_to(root)}: block ledger-{kind} {arg} differs "
                                "from the ledger")
        v = lg.verdicts(ledger)
        for m in INLINE.finditer(text):
            got = _inline_value(m.group(1), v)
            if (NOT_YET if got is None else got) != m.group(2):
                problems.append(f"{path.relative_to(root)}: inline value [{m.group(1)}] is "
                                f"{m.group(2)!r}, the ledger says {got or NOT_YET!r}")
    for r in lg.figures(ledger).itertuples(index=False):
        path = root / r.figure
        if not path.exists():
            problems.append(f"{r.figure}: in the ledger, not in the checkout")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != r.sha256:
            problems.append(f"{r.figure}: differs from the figure the ledger filed "
                            f"(rerun {r.entry} and python -m reproduce ledger {r.entry})")
    return problems


# ------------------------------------------------------------------------------ HTML
CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em} h2{border-bottom:2px solid #ccc;margin-top:2em}
.claim{display:flex;gap:1.5em;border:1px solid #ddd;border-radius:6px;padding:1em;margin:1em 0}
.text{flex:1 1 55%} .fig{flex:0 0 40%} .fig img{max-width:100%;border:1px solid #eee}
.label{font-weight:bold;padding:.1em .5em;border-radius:4px;white-space:nowrap}
.shows{background:#d4edda} .does-not-show{background:#f8d7da}
.inconclusive{background:#fff3cd} .premise-absent{background:#e2e3e5}
.not-yet{background:#eee;color:#555}
table.card{border-collapse:collapse;font-size:.85em;margin:.4em 0}
table.card td,table.card th{border:1px solid #ddd;padding:.15em .4em}
code{background:#f4f4f4;padding:.1em .3em} .fail{color:#a00;font-weight:bold}
.stat{font-family:monospace;font-size:.85em}
"""


def _css_class(label: str) -> str:
    if label.startswith("inconclusive"):
        return "inconclusive"
    return {"shows": "shows", "does not show": "does-not-show",
            "premise absent": "premise-absent"}.get(label, "not-yet")


def _card_html(vals: pd.DataFrame, entry: str, claim: str, scope: str) -> str:
    sub = vals[(vals.entry == entry) & (vals.claim == claim) & (vals.scope == scope)
               & (vals.kind == "card")] if len(vals) else vals
    if not len(sub):
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.value)}</td>"
        f"<td>{html.escape(r.paper_value)}</td><td>{html.escape(r.tolerance)}</td>"
        f"<td class=\"{'fail' if r.ok == 'False' else ''}\">"
        f"{'ok' if r.ok == 'True' else 'FAILS' if r.ok == 'False' else ''}</td>"
        f"<td>{html.escape(r.source)}</td></tr>" for r in sub.itertuples(index=False))
    return ("<table class=\"card\"><tr><th>regime variable</th><th>run</th><th>paper</th>"
            f"<th>tolerance</th><th></th><th>source</th></tr>{rows}</table>")


def html_page(ledger: Path | None = None, out: Path | None = None) -> str:
    """The report page; image paths are relative to ``out`` (default ``docs/report.html``)."""
    ledger = Path(ledger or lg.ledger_dir())
    out = Path(out or ROOT / REPORT_HTML)
    t = table(ledger)
    vals = lg.values(ledger)
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<title>fedtoolkit: claims, verdicts and regimes</title>"
             f"<style>{CSS}</style></head><body>",
             "<h1>fedtoolkit: the four papers' claims, decided</h1>",
             "<p>Generated from the results ledger (<code>docs/ledger/</code>) by "
             "<code>python -m reproduce report</code>. Verdicts: <i>shows</i>, <i>does not "
             "show</i>, <i>inconclusive</i> (underpowered: the seeds that would decide it; "
             "diverged; missing), <i>premise absent</i> (the regime card fails: the claim was "
             f"not tested); <i>{NOT_YET}</i> where the ledger has no row yet; <i>{GPU_ONLY}</i> "
             "for a claim only a GPU entry checks (never run on this project's CPU machines).</p>"]
    for paper in PAPERS:
        sub = t[t.paper == paper]
        parts.append(f"<h2 id=\"{paper}\">{html.escape(paper)}</h2>")
        for (claim, entry), grp in sub.groupby(["claim", "entry"], sort=False):
            first = grp.iloc[0]
            filed = {}
            for r in grp.itertuples(index=False):
                for f in str((r.row or {}).get("figures", "")).split():
                    filed.setdefault(f, True)
            figs = [f for f in filed if (ROOT / f).exists() or Path(f).exists()] + \
                [f for f in str(first.figures).split() if (ROOT / f).exists()]
            img = ""
            if figs:
                rel = os.path.relpath(ROOT / figs[0], out.parent)
                when = ("drawn by the ledger's run" if figs[0] in filed else
                        "the committed figure; it predates the ledger")
                img = (f"<div class=\"fig\"><a href=\"{html.escape(rel)}\"><img src=\""
                       f"{html.escape(rel)}\" alt=\"{html.escape(figs[0])}\"></a>"
                       f"<br><small>{html.escape(figs[0])}: {when}</small></div>")
            items = []
            for r in grp.itertuples(index=False):
                row = r.row or {}
                scope = f" <i>({html.escape(r.scope)})</i>" if r.scope else ""
                detail = ""
                if row:
                    detail = (f"<div class=\"stat\">{html.escape(row.get('line', ''))}</div>"
                              + _card_html(vals, entry, claim, r.scope))
                elif r.cost:
                    detail = f"<div class=\"stat\">not run: {html.escape(r.cost)}</div>"
                items.append(f"<li><span class=\"label {_css_class(r.verdict)}\" "
                             f"data-verdict=\"{html.escape(r.verdict)}\">"
                             f"{html.escape(r.verdict)}</span>{scope}{detail}</li>")
            command = next((r.row["command"] for r in grp.itertuples() if r.row),
                           f"python3 -m reproduce.{entry}")
            parts.append(
                f"<div class=\"claim\" data-claim=\"{html.escape(paper)} {html.escape(claim)}\">"
                f"<div class=\"text\"><h3>{html.escape(claim)}: "
                f"{html.escape(first.statement)}</h3>"
                f"<p><small>{html.escape(first.source)}; decided by <i>{first.definition}</i>"
                f"</small></p><ul>{''.join(items)}</ul>"
                f"<p>Reproduce: <code>{html.escape(command)}</code></p></div>{img}</div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def main(argv=None) -> int:
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="python -m reproduce report",
                                description="Write docs/report.html and docs/claims.md and "
                                            "regenerate the docs' ledger blocks from the ledger.")
    p.add_argument("--ledger", default=None, help="the ledger folder (default docs/ledger/)")
    p.add_argument("--out", default=None, help="write only the HTML page here (the docs are "
                   "left as they are)")
    args = p.parse_args(argv)
    ledger = Path(args.ledger) if args.ledger else lg.ledger_dir()
    if not ledger.is_dir() and args.ledger:
        print(f"error: --ledger {ledger}: no such folder", file=sys.stderr)
        return 2
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html_page(ledger, out))
        print(f"report: {out}")
        return 0
    for path in update_docs(ledger):
        print(f"updated {path.relative_to(ROOT)}")
    print(f"report: {ROOT / REPORT_HTML}")
    return 0

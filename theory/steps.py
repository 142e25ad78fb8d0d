"""Proof-step map: every numbered result of the four papers, its proof's displayed steps, and the checks covering each.

A *numbered result* is a theorem, lemma, corollary or proposition of a paper's main text or appendix/supplement
(:func:`result`).  Its *steps* are the displayed equations of its statement and its proof, one :class:`Step` per display (a run of
consecutive display lines, or one ``$$ ... $$`` environment), named by the lines it occupies in the paper text
``/work/shared/papers/<file>`` (:func:`display_blocks` finds them; a test holds every map to the text).  A result
whose proof the paper does not display (a lemma cited from elsewhere, a corollary stated without proof, a main-text
restatement of an appendix theorem) lists the displays of its statement instead, and says so in ``note``.

Each step names the checks that evaluate its algebra: the relation the display states (its equalities and
inequalities, with the display's constants) computed symbolically, exactly, or on seeded instances that satisfy the
statement's hypotheses.  A step with no such check is listed with ``checks=()`` and counts as unchecked.  A check
that covers a step cites the step's first line in its docstring (a test enforces it), so every claim of coverage can
be traced to the code that evaluates it.

Coverage (:func:`coverage`) is the fraction of a result's steps that have at least one registered covering check
whose verdict is not "inconclusive"; a step's status is the most serious verdict among its checks
(refuted > outside > conditional > verified).  ``python -m theory --coverage`` prints it per result and per paper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

#: where the paper texts live (the step map's line numbers refer to these files)
PAPER_DIR = Path("/work/shared/papers")

#: coverage the audit aims at, per paper (a test fails below it)
GOAL = 0.9


@dataclass(frozen=True)
class Step:
    """One displayed step of a proof: its lines in the paper text, what it states, the checks that evaluate it."""

    lines: str
    what: str
    checks: tuple[str, ...] = ()

    @property
    def first(self) -> int:
        return int(self.lines.split("-")[0])

    @property
    def last(self) -> int:
        return int(self.lines.split("-")[-1])


@dataclass(frozen=True)
class Numbered:
    """A numbered result (theorem, lemma, corollary, proposition) and its proof's displayed steps."""

    paper: str
    label: str
    file: str
    #: first and last line of the statement in ``file``
    statement: tuple[int, int]
    #: (first, last) line ranges of the proof in ``file`` (several when another result's statement and proof sit inside it);
    #: None: the paper displays no proof, the steps are the statement's
    proof: tuple[tuple[int, int], ...] | None
    steps: tuple[Step, ...]
    note: str = ""
    #: where the proof is given when it is elsewhere (e.g. "Theorem 20" for the main text's Theorem 6)
    proved_in: str = ""

    @property
    def key(self) -> str:
        return f"{self.paper}:{self.label}"

    def covers_line(self, line: int) -> bool:
        """Whether a display starting at ``line`` lies in the statement or the proof."""
        return self.statement[0] <= line <= self.statement[1] or any(a <= line <= b for a, b in (self.proof or ()))

    @property
    def proof_text(self) -> str:
        return ", ".join(f"{a}-{b}" for a, b in self.proof) if self.proof else ""


_RESULTS: dict[str, Numbered] = {}


def S(lines: str | int, what: str, *checks: str) -> Step:
    """A step: ``S("677-683", "theta' recursion", "check_a", "check_b")``; no checks = unchecked."""
    return Step(str(lines), " ".join(what.split()), tuple(checks))


def result(paper: str, label: str, file: str, statement: tuple[int, int] | int, proof: tuple[int, int] | None, steps,
           note: str = "", proved_in: str = "") -> Numbered:
    """Register a numbered result with its steps (called by the paper modules, beside their checks).

    ``statement`` and ``proof`` are (first, last) lines in ``file``; the steps are the displays of both."""
    st = (statement, statement) if isinstance(statement, int) else tuple(statement)
    if proof is not None and isinstance(proof[0], int):
        proof = (tuple(proof),)
    r = Numbered(paper, label, file, st, tuple(tuple(x) for x in proof) if proof else None, tuple(steps), " ".join(note.split()),
                 proved_in)
    if r.key in _RESULTS:
        raise ValueError(f"duplicate numbered result {r.key}")
    _RESULTS[r.key] = r
    return r


def results(paper: str | None = None) -> list[Numbered]:
    """Registered numbered results in registration order (paper modules are imported first)."""
    from .core import load_all

    load_all(paper)
    return [r for r in _RESULTS.values() if paper is None or r.paper == paper]


# ---------------------------------------------------------------------------
# status and coverage
# ---------------------------------------------------------------------------

_SEVERITY_ORDER = ("refuted", "outside", "conditional", "verified", "inconclusive")


def _check_key(paper: str, name: str) -> str:
    return name if ":" in name else f"{paper}:{name}"


def step_status(paper: str, step: Step) -> str:
    """'unchecked', or the most serious tally among the step's covering checks (inconclusive ones do not cover)."""
    from .core import _REGISTRY, resolve

    tallies = []
    for name in step.checks:
        key = _check_key(paper, name)
        if key not in _REGISTRY:
            continue
        res = resolve(key)
        t = res.tally
        own = dict(res.steps).get(step.lines)
        if own == "verified" and t in ("refuted", "outside", "inconclusive"):
            t = "verified"  # this display held; another display of the same check failed
        if t != "inconclusive":
            tallies.append(t)
    if not tallies:
        return "unchecked"
    return min(tallies, key=_SEVERITY_ORDER.index)


@dataclass(frozen=True)
class Coverage:
    """Coverage of one numbered result: (step, status) pairs and the checked fraction."""

    result: Numbered
    statuses: tuple[tuple[Step, str], ...] = field(default=())

    @property
    def total(self) -> int:
        return len(self.statuses)

    @property
    def checked(self) -> int:
        return sum(1 for _, s in self.statuses if s != "unchecked")

    @property
    def fraction(self) -> float:
        return self.checked / self.total if self.total else 0.0


def coverage(paper: str | None = None) -> list[Coverage]:
    """Coverage of every numbered result (of one paper)."""
    return [Coverage(r, tuple((s, step_status(r.paper, s)) for s in r.steps)) for r in results(paper)]


def paper_coverage(rows: list[Coverage]) -> dict[str, tuple[int, int]]:
    """paper -> (checked steps, total steps), plus 'total'."""
    out: dict[str, tuple[int, int]] = {}
    for c in rows:
        a, b = out.get(c.result.paper, (0, 0))
        out[c.result.paper] = (a + c.checked, b + c.total)
    out["total"] = (sum(v[0] for v in out.values()), sum(v[1] for v in out.values()))
    return out


# ---------------------------------------------------------------------------
# the paper texts: display blocks and numbered results (used by the tests to hold the map to the papers)
# ---------------------------------------------------------------------------

_CONT = re.compile(r"\$\$")


def display_blocks(path: str | Path) -> list[tuple[int, int]]:
    """(first, last) line of every display in a paper text.

    Two text layouts occur: LaTeXML exports (one ``\\displaystyle`` line per display row; consecutive rows form one
    display) and markdown exports (``$$ ... $$`` environments, on one line or over several; each environment is one
    display)."""
    lines = Path(path).read_text().split("\n")
    out: list[list[int]] = []
    inside = False
    for i, s in enumerate(lines, 1):
        st = s.strip()
        if inside:
            out[-1][1] = i
            if st.endswith("$$"):
                inside = False
            continue
        if st.startswith("$$"):
            out.append([i, i])
            inside = not (len(st) > 2 and st.endswith("$$"))
            continue
        if "\\displaystyle" in s:
            if out and out[-1][1] == i - 1 and "\\displaystyle" in lines[i - 2]:
                out[-1][1] = i
            else:
                out.append([i, i])
    return [(a, b) for a, b in out]


NUMBERED_RE = re.compile(r"^(?:\*\*)?(Theorem|Lemma|Corollary|Proposition) ([A-Z]?\.?[0-9]+(?:\.[0-9]+)?)\b")


def numbered_in_text(path: str | Path) -> list[tuple[str, int]]:
    """('Theorem 4.3', line) for every numbered result stated in a paper text (statement lines only)."""
    out = []
    for i, s in enumerate(Path(path).read_text().split("\n"), 1):
        m = NUMBERED_RE.match(s.strip())
        if m:
            out.append((f"{m.group(1)} {m.group(2)}", i))
    return out

"""Regime cards: the regime variables a claim depends on, the paper's value, the run's value and
a stated tolerance. A claim whose card fails was not tested: its verdict is ``premise absent``
(:mod:`reproduce.verdicts`), never ``does not show``.

An entry builds one card per claim (or per claim and panel) from its run::

    card = RegimeCard([
        steps_per_epoch(3, paper=38, source="MAIN Sec. 4: 60,000 / 50 clients, batch 32"),
        clients_per_round(25, paper=25, source="MAIN Sec. 4: 0.5 of 50"),
        horizon(12, paper=100, source="MAIN Figs. 1-2"),
        seeds(3, paper=3, source="MAIN Sec. 4"),
    ])
    verdicts.above(claim, a, b, card=card, ...)

Each :class:`Item` is ``name``, ``paper`` (the paper's value, cited in ``source``),
``measured`` (this run's), ``tolerance`` (:class:`Tolerance`: within a factor, within an
absolute distance, at least / at most a value, equal, or information only) and ``unit``. The
named constructors below fix the vocabulary of the variables the issues ask for (local steps
per epoch, clients per round, train accuracy reached by the fastest method, DP noise per round
relative to the clip, headroom at the horizon, fraction of the paper's horizon, seeds), so
every entry names them alike.

``card.lines()`` prints the card with the check, ``card.compact()`` is its one-line form for
figure footers and ledger rows, :func:`footer_text` the merged form of an entry's cards.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """How far the run's value may sit from the paper's: ``kind`` is ``factor`` (within a
    factor ``value`` either way), ``within`` (absolute distance), ``at least`` / ``at most``
    (an absolute bound on the run's value), ``equal`` or ``info`` (shown, never failing)."""
    kind: str
    value: float | None = None

    def ok(self, paper, measured) -> bool:
        if self.kind == "info":
            return True
        if measured is None or (isinstance(measured, float) and not math.isfinite(measured)):
            return False
        if self.kind == "equal":
            return measured == paper
        if self.kind == "factor":
            if not (paper and measured) or paper <= 0 or measured <= 0:
                return paper == measured
            return 1 / self.value <= measured / paper <= self.value
        if self.kind == "within":
            return abs(measured - paper) <= self.value
        if self.kind == "at least":
            return measured >= self.value
        if self.kind == "at most":
            return measured <= self.value
        raise ValueError(f"unknown tolerance kind {self.kind!r}")

    def describe(self) -> str:
        if self.kind in ("equal", "info"):
            return self.kind
        return {"factor": f"within x{self.value:g}", "within": f"within +-{self.value:g}",
                "at least": f">= {self.value:g}", "at most": f"<= {self.value:g}"}[self.kind]


def factor(f: float) -> Tolerance:
    return Tolerance("factor", float(f))


def within(d: float) -> Tolerance:
    return Tolerance("within", float(d))


def at_least(v: float) -> Tolerance:
    return Tolerance("at least", float(v))


def at_most(v: float) -> Tolerance:
    return Tolerance("at most", float(v))


def equal() -> Tolerance:
    return Tolerance("equal")


def info() -> Tolerance:
    return Tolerance("info")


@dataclass(frozen=True)
class Item:
    """One regime variable (see the module docstring)."""
    name: str
    paper: object
    measured: object
    tolerance: Tolerance
    source: str = ""
    unit: str = ""

    @property
    def ok(self) -> bool:
        return self.tolerance.ok(self.paper, self.measured)

    @property
    def checked(self) -> bool:
        return self.tolerance.kind != "info"

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        state = "" if not self.checked else (" ok" if self.ok else " FAILS")
        return (f"{self.name} {_fmt(self.measured)}{unit} (paper {_fmt(self.paper)}; "
                f"{self.tolerance.describe()}){state}")

    def short(self) -> str:
        mark = "" if not self.checked else ("" if self.ok else " X")
        return f"{self.name} {_fmt(self.measured)}/{_fmt(self.paper)}{mark}"

    def row(self) -> dict:
        return {"item": self.name, "paper": _fmt(self.paper), "measured": _fmt(self.measured),
                "tolerance": self.tolerance.describe(), "ok": self.ok if self.checked else "",
                "unit": self.unit, "source": self.source}


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}" if abs(int(x)) >= 10_000 else str(int(x))
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(x):
            return str(x)
        return f"{x:.3g}"
    return str(x)


@dataclass(frozen=True)
class RegimeCard:
    """The regime variables of one claim (on one panel). ``ok`` when every checked item is
    within its tolerance."""
    items: tuple = ()

    def __init__(self, items=()):
        object.__setattr__(self, "items", tuple(i for i in items if i is not None))

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    def failing(self) -> list[Item]:
        return [i for i in self.items if not i.ok]

    def failures(self) -> str:
        return "; ".join(f"{i.name} {_fmt(i.measured)}{(' ' + i.unit) if i.unit else ''} vs "
                         f"paper {_fmt(i.paper)} ({i.tolerance.describe()})"
                         for i in self.failing())

    def plus(self, *items) -> "RegimeCard":
        return RegimeCard(self.items + tuple(items))

    def lines(self) -> list[str]:
        return [f"regime card: {'ok' if self.ok else 'FAILS'}"] + [
            f"  {i.text()}" + (f" [{i.source}]" if i.source else "") for i in self.items]

    def compact(self) -> str:
        return ("ok" if self.ok else "FAILS") + ": " + ", ".join(i.short() for i in self.items)

    def rows(self) -> list[dict]:
        return [i.row() for i in self.items]


def footer_text(verdict_list, width: int = 150) -> str:
    """The regime of an entry's verdicts for a figure footer: every distinct item once
    (measured / paper, X where it fails) and the claims whose card fails (``premise absent``)."""
    seen, items = set(), []
    for v in verdict_list:
        card = getattr(v, "card", None)
        for i in (card.items if card is not None else ()):
            key = (i.name, _fmt(i.measured), _fmt(i.paper))
            if key not in seen:
                seen.add(key)
                items.append(i)
    if not items:
        return ""
    absent = [v.key for v in verdict_list if v.label == "premise absent"]
    text = "regime (run/paper, X fails): " + ", ".join(i.short() for i in items)
    if absent:
        text += "; premise absent: " + ", ".join(dict.fromkeys(absent))
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


# ------------------------------------------------------------------------------ vocabulary
# The regime variables by name (every entry names them alike). ``source`` cites the paper.
def steps_per_epoch(measured, paper, tol: Tolerance | None = None, source: str = "") -> Item:
    """Local steps per epoch (samples per client / batch): the amount of local work the
    local-adaptivity claims act on."""
    return Item("local steps/epoch", paper, measured, tol or factor(2), source)


def local_steps(measured, paper, tol: Tolerance | None = None, source: str = "") -> Item:
    """Local steps per round (epochs x steps per epoch)."""
    return Item("local steps/round", paper, measured, tol or factor(2), source)


def clients_per_round(measured, paper, tol: Tolerance | None = None, source: str = "") -> Item:
    return Item("clients/round", paper, measured, tol or factor(2), source)


def clients(measured, paper, tol: Tolerance | None = None, source: str = "") -> Item:
    return Item("clients", paper, measured, tol or factor(2), source)


def horizon(rounds, paper_rounds, least: float = 0.5, source: str = "") -> Item:
    """The fraction of the paper's horizon run (a claim about round ``T`` read at ``0.1 T``
    is not tested); at least ``least`` of it by default."""
    frac = rounds / paper_rounds if paper_rounds else math.nan
    return Item("horizon fraction", 1.0, float(frac), at_least(least), source or
                f"{rounds} of the paper's {paper_rounds} rounds")


def seeds(n, paper, source: str = "") -> Item:
    """Seeds (information: too few seeds make a verdict underpowered, not premise absent)."""
    return Item("seeds", paper, n, info(), source)


def train_acc_reached(measured, target, source: str = "") -> Item:
    """The train accuracy the fastest method reaches at the horizon, against the paper's
    absolute target (FedLADA's 98 %): claims about fitting fast need the fit."""
    return Item("train acc of the fastest", target, float(measured), at_least(target), source)


def dp_noise_ratio(sigma, d, m, paper, tol: Tolerance | None = None, source: str = "") -> Item:
    """DP noise per round relative to the clip: ``sigma sqrt(d) / m`` (the noise's norm on the
    mean of ``m`` clipped updates, in units of the clip)."""
    return Item("DP noise/clip per round", paper, float(sigma * math.sqrt(d) / m),
                tol or factor(2), source)


def headroom(best, ceiling, least: float, source: str = "") -> Item:
    """How far the best method is from its ceiling at the horizon (accuracy points): methods
    cannot be ordered on a saturated task."""
    return Item("headroom (pp)", f">= {100 * least:g}", float(100 * (ceiling - best)),
                at_least(100 * least), source)


def premise(name: str, holds: bool, source: str = "") -> Item:
    """A qualitative premise measured on the run (e.g. "local Adam fits fastest")."""
    return Item(name, True, bool(holds), equal(), source)


def value(name, measured, paper, tol: Tolerance, source: str = "", unit: str = "") -> Item:
    """Any other regime variable."""
    return Item(name, paper, measured, tol, source, unit)

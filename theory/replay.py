"""Evaluate a proof's displayed relations on seeded instances (the machinery of the proof-step checks).

A :class:`Rel` is one displayed relation of a paper's proof, transcribed as a function of an *instance* (a small
seeded realisation of the algorithm inside the statement's hypotheses, with exact expectations over a finite noise
law where the display takes one) returning ``(lhs, op, rhs)`` floats, ``op`` in ``"<=", "=", ">="``.
:func:`relations_result` evaluates every relation on every instance and turns the outcome into a check
:class:`~theory.core.Result`: verified (method "numeric": the relation held on every instance, with its smallest
margin reported) or refuted at the first instance where a relation fails, with that instance as the counterexample.

A relation that holds on instances is not proved; the evidence says so ("on N seeded instances").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from .algebra import fmt
from .core import Result, refuted, verified


@dataclass(frozen=True)
class Rel:
    """A displayed relation: its lines in the paper, what it states, and its two sides on an instance."""

    lines: str
    what: str
    fn: Callable[[object], Sequence[tuple[float, str, float]]]


def _holds(lhs: float, op: str, rhs: float, rtol: float, atol: float) -> bool:
    tol = atol + rtol * max(abs(lhs), abs(rhs))
    if op == "<=":
        return lhs <= rhs + tol
    if op == ">=":
        return lhs >= rhs - tol
    if op == "=":
        return abs(lhs - rhs) <= tol
    raise ValueError(f"unknown relation {op!r}")


def evaluate(rels: Iterable[Rel], instances: Sequence, rtol: float = 1e-9, atol: float = 1e-12):
    """For each relation: (rel, failing instance index or None, (lhs, op, rhs) of the failure or of the tightest case)."""
    out = []
    for rel in rels:
        fail, tight, tight_gap = None, None, float("inf")
        for k, inst in enumerate(instances):
            rows = list(rel.fn(inst))
            for j, (lhs, op, rhs) in enumerate(rows):
                lhs, rhs = float(lhs), float(rhs)
                if not _holds(lhs, op, rhs, rtol, atol):
                    fail = (k, (lhs, op, rhs), j, len(rows))
                    break
                gap = abs(rhs - lhs) / max(1e-300, abs(lhs) + abs(rhs))
                if gap < tight_gap:
                    tight, tight_gap = (lhs, op, rhs), gap
            if fail:
                break
        out.append((rel, fail, tight))
    return out


def relations_result(rels: Sequence[Rel], instances: Sequence, what: str, point: Callable[[object], dict],
                     rtol: float = 1e-9, atol: float = 1e-12, describe: Callable[[object], str] = str) -> Result:
    """Verified when every relation holds on every instance; else refuted at the first failure (its instance's point)."""
    res = evaluate(rels, instances, rtol, atol)
    steps = tuple((rel.lines, "refuted" if fail else "verified") for rel, fail, _ in res)
    failed = [(rel, fail) for rel, fail, _ in res if fail]
    if failed:
        rel, (k, (lhs, op, rhs), j, nrel) = failed[0]
        inst = instances[k]
        which = f" (relation {j + 1} of {nrel} evaluated for it)" if nrel > 1 else ""
        held = [r.lines for r, f, _ in res if not f]
        more = "; ".join(f"line {r.lines} ({r.what}) fails too: {fmt(f[1][0], 6)} vs {fmt(f[1][2], 6)} on instance {f[0]}"
                         for r, f in failed[1:])
        res_ = refuted(f"line {rel.lines} ({rel.what}) fails{which} on {describe(inst)}: left side {fmt(lhs, 6)} vs right side "
                       f"{fmt(rhs, 6)} (the display states {op})" + (f"; {more}" if more else "")
                       + (f"; lines {', '.join(held)} hold on all {len(instances)} instances" if held else ""),
                       "numeric", at=point(inst))
        return dataclasses.replace(res_, steps=steps)
    notes = "; ".join(f"line {rel.lines} ({rel.what}) holds" + (f", tightest {fmt(t[0], 4)} {t[1]} {fmt(t[2], 4)}" if t else "")
                      for rel, _, t in res)
    return dataclasses.replace(verified(f"{what}, on {len(instances)} seeded instances: {notes}", "numeric"), steps=steps)

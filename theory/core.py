"""Check registry of the symbolic audit.

A *check* is a small function that tests one claim of one paper (a constant,
a learning-rate condition, a rate obtained by substitution, a lemma, or a
place where the specs report an error) and returns a :class:`Result`:

* ``verified``      the claim holds (exact symbolic proof, or an exhaustive /
  seeded random numeric search, in which case the evidence says "numeric");
* ``refuted``       the claim is false; the evidence carries the concrete
  counterexample values or the simplified counter-expression;
* ``inconclusive``  neither could be established.

Checks are registered with the :func:`check` decorator::

    @check(paper="fed-ef", name="C1_sgd_definition",
           claim="C1 = 2 + 4q^2/(1-q^2)^2 ...", spec=("V2",))
    def _c1():
        ...
        return verified("...")

Results are cached per process (:func:`run_check`), so the CLI, the report
generator and the test-suite evaluate every check at most once.
"""

from __future__ import annotations

import functools
import importlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

STATUSES = ("verified", "refuted", "inconclusive")

#: Paper identifiers, in report order, mapped to the module holding their checks.
PAPER_MODULES = {
    "fed-ef": "theory.fed_ef",
    "fedlada": "theory.fedlada",
    "fedada2": "theory.fedada2",
    "fed-lamb": "theory.fed_lamb",
}
PAPERS = tuple(PAPER_MODULES)

#: Human-readable paper titles used by the report.
PAPER_TITLES = {
    "fed-ef": "Fed-EF: error feedback in federated non-convex optimization with biased compression (Li & Li)",
    "fedlada": "FedLADA: local adaptive amended optimizer with linear speedup (Sun et al.)",
    "fedada2": "FedAda2: efficient adaptive federated optimization (Lee et al.)",
    "fed-lamb": "Fed-LAMB: layer-wise and dimension-wise locally adaptive FL (Karimi, Li & Li)",
}


@dataclass(frozen=True)
class Result:
    """Outcome of one check.

    ``evidence`` is a single line of plain language: the simplified expression,
    the counterexample values, or the numeric search that was run.
    ``method`` is one of ``symbolic``, ``numeric`` or ``exact`` (exact rational
    arithmetic on concrete values).
    """

    status: str
    evidence: str
    method: str = "symbolic"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        # One line, no trailing blanks: reports are line oriented.
        object.__setattr__(self, "evidence", " ".join(self.evidence.split()))


def verified(evidence: str, method: str = "symbolic") -> Result:
    return Result("verified", evidence, method)


def refuted(evidence: str, method: str = "symbolic") -> Result:
    return Result("refuted", evidence, method)


def inconclusive(evidence: str, method: str = "symbolic") -> Result:
    return Result("inconclusive", evidence, method)


@dataclass(frozen=True)
class Check:
    """A registered check: which paper, its name, the claim and the spec items it covers."""

    paper: str
    name: str
    claim: str
    func: Callable[[], Result] = field(compare=False, repr=False)
    spec: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.paper}:{self.name}"

    @property
    def source(self) -> str:
        """First paragraph of the check's docstring (its paper citation)."""
        doc = (self.func.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def run(self) -> Result:
        try:
            res = self.func()
        except Exception as exc:  # pragma: no cover - a crash must not kill the audit
            return inconclusive(f"check raised {type(exc).__name__}: {exc}", "error")
        if not isinstance(res, Result):  # pragma: no cover
            return inconclusive(f"check returned {type(res).__name__}, not Result", "error")
        return res


_REGISTRY: dict[str, Check] = {}


def check(paper: str, name: str, claim: str, spec: Iterable[str] = ()) -> Callable:
    """Decorator registering a check function under ``paper:name``."""
    if paper not in PAPER_MODULES:
        raise ValueError(f"unknown paper {paper!r}")

    def deco(func: Callable[[], Result]) -> Callable[[], Result]:
        c = Check(paper=paper, name=name, claim=" ".join(claim.split()), func=func, spec=tuple(spec))
        if c.key in _REGISTRY:
            raise ValueError(f"duplicate check {c.key}")
        _REGISTRY[c.key] = c
        return func

    return deco


def load_all(paper: str | None = None) -> None:
    """Import the paper modules (all, or only ``paper``'s) so that their checks register themselves."""
    for name, mod in PAPER_MODULES.items():
        if paper is None or name == paper:
            importlib.import_module(mod)


def all_checks(paper: str | None = None) -> list[Check]:
    """Registered checks in report order (paper order, then registration order)."""
    if paper is not None and paper not in PAPER_MODULES:
        raise ValueError(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)}")
    load_all(paper)
    order = {p: i for i, p in enumerate(PAPERS)}
    checks = [c for c in _REGISTRY.values() if paper is None or c.paper == paper]
    return sorted(checks, key=lambda c: order[c.paper])  # stable: keeps registration order


def get_check(key: str) -> Check:
    load_all(key.split(":")[0])
    return _REGISTRY[key]


_TIMINGS: dict[str, float] = {}


@functools.lru_cache(maxsize=None)
def run_check(key: str) -> Result:
    """Run one check (cached for the lifetime of the process)."""
    start = time.perf_counter()
    res = get_check(key).run()
    _TIMINGS[key] = time.perf_counter() - start
    return res


def run_all(paper: str | None = None) -> list[tuple[Check, Result]]:
    """Run (or fetch cached) results for all checks, optionally of one paper."""
    return [(c, run_check(c.key)) for c in all_checks(paper)]


def timings() -> dict[str, float]:
    """Wall-clock seconds spent in each check run so far (not part of any report)."""
    return dict(_TIMINGS)

"""Check registry of the symbolic audit.

A *check* is a small function that tests one claim of one paper (a constant,
a learning-rate condition, a rate obtained by substitution, a lemma, or a
place where the specs report an error) and returns a :class:`Result`:

* ``verified``      the claim holds (exact symbolic proof, or an exhaustive /
  seeded random numeric search, in which case the evidence says "numeric");
* ``refuted``       the claim is false; the evidence carries the concrete
  counterexample values or the simplified counter-expression;
* ``inconclusive``  neither could be established;
* ``outside``       the check's counterexample violates a hypothesis of the paper's statement: it is not an
  error of the paper (when the hypothesis is one the spec's reading drops, it refutes the spec's reading only).

A refutation must be tested against the statement's hypotheses (issue 18): every check that can refute declares
them (``hypotheses=``: :class:`Hypothesis` objects, each a predicate or a sympy condition on the counterexample
point, citing the paper's line), and every refuted result carries its counterexample point (``refuted(..., at=)``).
:meth:`Check.run` evaluates each hypothesis at that point and keeps "refuted" only when all of them hold; a point
that violates one becomes ``outside``; a refutation without a point or without declared hypotheses, or with a
hypothesis that cannot be decided at the point, becomes ``inconclusive`` (the audit refuses to report it refuted).

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

import dataclasses
import functools
import importlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

STATUSES = ("verified", "refuted", "outside", "inconclusive")

#: What a refutation breaks (issue 18), most to least serious.  Every check that can be refuted carries one.
SEVERITIES = {
    "rate": "the rate or convergence itself",
    "constant": "a learning-rate condition or constant (rate intact)",
    "proof": "the statement differs from its proof",
    "typo": "a typo or label with no effect",
}
#: Whose claim a check tests: the paper's own text, a claim the toolkit derives from it, or the spec's reading.
KINDS = {
    "paper": "the papers' own claims",
    "textbook": "textbook premises the proofs use (standard facts, not claims of the papers under test)",
    "derived": "claims the toolkit derives (consequences, sharper forms, simulations)",
    "spec": "the specs' readings of the papers (specs/*.md)",
}
#: the kinds that are not a paper claim under test: tallied apart from the headline
SUPPORTING_KINDS = ("textbook", "derived", "spec")

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
    #: refuted checks this (verified) result relies on, filled in by :func:`run_all` from the dependencies
    conditional_on: tuple[str, ...] = ()
    #: the counterexample of a refutation: variable name -> value (numbers, or short strings for discrete choices)
    point: tuple[tuple[str, object], ...] = ()
    #: the check's hypotheses evaluated at ``point`` by :meth:`Check.run`: (statement, held, paper line) triples
    hypotheses: tuple[tuple[str, bool, str], ...] = ()
    #: per displayed step the check evaluated: (paper lines, "verified" or "refuted"); a check that evaluates several
    #: displays reports each one's own outcome here (theory.steps reads it)
    steps: tuple[tuple[str, str], ...] = ()

    @property
    def verdict(self) -> str:
        """Status as reported: 'verified, conditional on X, Y' when a dependency is refuted."""
        if self.status == "verified" and self.conditional_on:
            return "verified, conditional on " + ", ".join(self.conditional_on)
        return self.status

    @property
    def tally(self) -> str:
        """Column the result is counted in: a status, or 'conditional' for a verified result on a refuted step."""
        return "conditional" if self.status == "verified" and self.conditional_on else self.status

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        # One line, no trailing blanks: reports are line oriented.
        object.__setattr__(self, "evidence", " ".join(self.evidence.split()))


def verified(evidence: str, method: str = "symbolic") -> Result:
    return Result("verified", evidence, method)


def refuted(evidence: str, method: str = "symbolic", at: dict | None = None) -> Result:
    """A refutation whose counterexample is ``at`` (variable -> value); :meth:`Check.run` tests the hypotheses there."""
    return Result("refuted", evidence, method, point=tuple((at or {}).items()))


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis of the paper's statement that a counterexample must satisfy.

    ``cond`` is a callable of the point (a dict name -> value) returning a truth value, or a sympy relational /
    boolean whose free symbols are named like the point's variables. ``line`` cites the paper (file and line).
    ``spec`` (optional) says how the spec's reading differs on this hypothesis: a counterexample that violates it
    then refutes the spec's reading only.
    """

    text: str
    cond: object
    line: str
    spec: str | None = None

    def holds(self, point: dict) -> bool:
        """True / False at ``point``; raises ValueError when the point does not decide it (a missing variable)."""
        import sympy as sp

        if isinstance(self.cond, sp.Basic):
            subs = {}
            for sym in self.cond.free_symbols:
                if sym.name not in point:
                    raise ValueError(f"the counterexample gives no value for {sym.name}")
                subs[sym] = point[sym.name]
            val = self.cond.subs(subs)
        else:
            try:
                val = self.cond(point)
            except KeyError as exc:
                raise ValueError(f"the counterexample gives no value for {exc.args[0]}") from None
        if val is sp.true or val is sp.false:
            return bool(val)
        if isinstance(val, (bool, int)) or type(val).__name__ == "bool_":
            return bool(val)
        raise ValueError(f"not decided at the counterexample ({val})")


def H(text: str, cond, line: str, spec: str | None = None) -> Hypothesis:
    """Shorthand for :class:`Hypothesis`."""
    return Hypothesis(text, cond, line, spec)


def judge(res: Result, hypotheses: tuple[Hypothesis, ...]) -> Result:
    """Test a refutation's counterexample against every hypothesis: keep "refuted" only when all hold.

    A violated hypothesis turns it into "outside" (not an error of the paper; the spec's reading only, where the
    hypothesis says the spec drops it); a missing point, no declared hypotheses or an undecidable hypothesis turn
    it into "inconclusive". Other statuses pass through unchanged.
    """
    if res.status != "refuted":
        return res
    if not hypotheses:
        return dataclasses.replace(res, status="inconclusive", evidence="refutation not reported: the check declares no "
                                   "hypotheses to test its counterexample against; " + res.evidence)
    if not res.point:
        return dataclasses.replace(res, status="inconclusive", evidence="refutation not reported: it carries no "
                                   "counterexample point to test the hypotheses at; " + res.evidence)
    point = dict(res.point)
    evaluated = []
    for h in hypotheses:
        try:
            ok = h.holds(point)
        except ValueError as exc:
            return dataclasses.replace(res, status="inconclusive", evidence=f"refutation not reported: hypothesis "
                                       f"'{h.text}' ({h.line}) undecided: {exc}; " + res.evidence)
        evaluated.append((h.text, ok, h.line))
    res = dataclasses.replace(res, hypotheses=tuple(evaluated))
    failed = [h for h, (_, ok, _) in zip(hypotheses, evaluated) if not ok]
    if not failed:
        return res
    why = "; ".join(f"'{h.text}' ({h.line}) fails" + (f" (the spec's reading: {h.spec})" if h.spec else "") for h in failed)
    whose = "refutes the spec's reading only, not the paper" if all(h.spec for h in failed) else "not an error of the paper"
    return dataclasses.replace(res, status="outside", evidence=f"counterexample outside the hypotheses ({whose}): {why}; "
                               + res.evidence)


def inconclusive(evidence: str, method: str = "symbolic") -> Result:
    return Result("inconclusive", evidence, method)


@dataclass(frozen=True)
class Check:
    """A registered check: which paper, its name, the claim and the spec items it covers."""

    paper: str
    name: str
    claim: str
    func: Callable[..., Result] = field(compare=False, repr=False)
    spec: tuple[str, ...] = ()
    #: what a refutation of this claim breaks (a key of SEVERITIES)
    severity: str | None = None
    #: whose claim it is (a key of KINDS)
    kind: str = "paper"
    #: names (same paper) or keys (paper:name) of the checks whose claims this one relies on (a step whose printed
    #: form is wrong but whose corrected form the claim uses, e.g. a typo with no effect, is not a dependency)
    depends: tuple[str, ...] = ()
    #: keyword arguments that replace the paper's printed expression by the correct one; with them the check
    #: must return "verified" (evidence that a refuted verdict is computed, not fixed)
    corrected: dict | None = field(default=None, compare=False)
    #: the hypotheses of the paper's statement a counterexample must satisfy (tested by :meth:`run` via :func:`judge`)
    hypotheses: tuple[Hypothesis, ...] = field(default=(), compare=False)

    @property
    def dependency_keys(self) -> tuple[str, ...]:
        return tuple(d if ":" in d else f"{self.paper}:{d}" for d in self.depends)

    @property
    def key(self) -> str:
        return f"{self.paper}:{self.name}"

    @property
    def source(self) -> str:
        """First paragraph of the check's docstring (its paper citation)."""
        doc = (self.func.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def run(self, **kwargs) -> Result:
        try:
            res = self.func(**kwargs)
        except Exception as exc:  # pragma: no cover - a crash must not kill the audit
            return inconclusive(f"check raised {type(exc).__name__}: {exc}", "error")
        if not isinstance(res, Result):  # pragma: no cover
            return inconclusive(f"check returned {type(res).__name__}, not Result", "error")
        return judge(res, self.hypotheses)


_REGISTRY: dict[str, Check] = {}


def check(paper: str, name: str, claim: str, spec: Iterable[str] = (), severity: str | None = None,
          kind: str = "paper", depends: Iterable[str] = (), corrected: dict | None = None,
          hypotheses: Iterable[Hypothesis] = ()) -> Callable:
    """Decorator registering a check function under ``paper:name``.

    ``severity``: what a refutation breaks (:data:`SEVERITIES`); ``kind``: whose claim (:data:`KINDS`);
    ``depends``: the checks whose claims this one uses; ``corrected``: keyword arguments with which the
    function must verify (the paper's printed expression replaced by the correct one); ``hypotheses``: the
    statement's hypotheses a counterexample must satisfy for the check to report "refuted".
    """
    if paper not in PAPER_MODULES:
        raise ValueError(f"unknown paper {paper!r}")
    if severity is not None and severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")

    def deco(func: Callable[..., Result]) -> Callable[..., Result]:
        c = Check(paper=paper, name=name, claim=" ".join(claim.split()), func=func, spec=tuple(spec),
                  severity=severity, kind=kind, depends=tuple(depends), corrected=corrected,
                  hypotheses=tuple(hypotheses))
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


def refuted_dependencies(key: str, _seen: frozenset = frozenset()) -> tuple[str, ...]:
    """Refuted checks that ``key`` relies on, directly or through verified dependencies (sorted keys)."""
    out: set[str] = set()
    for dep in get_check(key).dependency_keys:
        if dep in _seen:
            continue
        if run_check(dep).status == "refuted":
            out.add(dep)
        else:
            out.update(refuted_dependencies(dep, _seen | {key}))
    return tuple(sorted(out))


def resolve(key: str) -> Result:
    """A check's result with ``conditional_on`` filled from its (transitive) refuted dependencies."""
    res = run_check(key)
    if res.status != "verified":
        return res
    deps = refuted_dependencies(key)
    return dataclasses.replace(res, conditional_on=deps) if deps else res


def run_all(paper: str | None = None, label: str | None = None, kind: str | None = None) -> list[tuple[Check, Result]]:
    """Run (or fetch cached) results for all checks, optionally of one paper, one severity label or one kind.

    With ``label`` only refuted checks of that severity are returned."""
    rows = [(c, resolve(c.key)) for c in all_checks(paper)]
    if label is not None:
        rows = [(c, r) for c, r in rows if r.status == "refuted" and c.severity == label]
    if kind is not None:
        rows = [(c, r) for c, r in rows if c.kind == kind]
    return rows


def timings() -> dict[str, float]:
    """Wall-clock seconds spent in each check run so far (not part of any report)."""
    return dict(_TIMINGS)


# ---------------------------------------------------------------------------
# corrections: the corrected expression must differ from the printed one
# ---------------------------------------------------------------------------


def printed_arguments(c: Check) -> dict:
    """The printed values of the arguments a check's correction replaces (the function's defaults)."""
    import inspect

    params = inspect.signature(c.func).parameters
    return {k: params[k].default if k in params else inspect.Parameter.empty for k in (c.corrected or {})}


def _probe_values(arity: int):

    import sympy as sp

    grid = (sp.Rational(3, 10), sp.Rational(7, 10), sp.Integer(2), sp.Integer(3), sp.Integer(5), sp.Rational(-1, 2))
    total = len(grid) ** arity
    step = max(1, total // 40)
    out = []
    for idx in range(0, total, step):   # every step-th point of the grid^arity, decoded without enumerating it
        digits = []
        for _ in range(arity):
            idx, r = divmod(idx, len(grid))
            digits.append(grid[r])
        out.append(tuple(reversed(digits)))
    return out


def _same_value(a, b) -> bool:
    import sympy as sp

    try:
        d = sp.nsimplify(sp.sympify(a) - sp.sympify(b)) if not isinstance(a, (float, int)) else a - b
        d = sp.simplify(d) if isinstance(d, sp.Basic) else d
        return d == 0 or (isinstance(d, (float, int)) and abs(d) < 1e-12)
    except (TypeError, ValueError, sp.SympifyError, AttributeError):
        return a == b


def expressions_differ(printed, corrected) -> tuple[bool, str]:
    """Whether a correction changes the expression it replaces: (differs, why).

    Flags (bool or str values) are rejected: a correction is a formula, a number, a dict or tuple of them, or a
    function, never a switch; functions are compared on a grid of probe arguments."""
    import inspect

    if isinstance(corrected, (bool, str)) or isinstance(printed, (bool, str)):
        return False, f"a flag ({printed!r} -> {corrected!r}), not an expression"
    if printed is inspect.Parameter.empty or printed is None:
        return False, "the printed value is not spelled out as the function's default"
    if isinstance(corrected, dict) and isinstance(printed, dict):
        if set(printed) != set(corrected):
            return True, f"terms {sorted(set(printed) ^ set(corrected))} added or removed"
        for k in printed:
            ok, why = expressions_differ(printed[k], corrected[k])
            if ok:
                return True, f"{k}: {why}"
        return False, "every entry equal"
    if isinstance(corrected, (tuple, list)) and isinstance(printed, (tuple, list)):
        if len(printed) != len(corrected):
            return True, "different lengths"
        for i, (a, b) in enumerate(zip(printed, corrected)):
            ok, why = expressions_differ(a, b)
            if ok:
                return True, f"entry {i}: {why}"
        return False, "every entry equal"
    if callable(corrected) and callable(printed):
        try:
            probes = _probe_values(len(inspect.signature(corrected).parameters))
        except ValueError:  # a builtin such as min / max: probe it on sequences
            probes = [(tuple(p),) for p in _probe_values(3)]
        tried = 0
        for args in probes:
            try:
                a, b = printed(*args), corrected(*args)
            except Exception:  # noqa: BLE001 - a probe outside the function's domain
                continue
            tried += 1
            if not _same_value(a, b):
                return True, f"at {tuple(str(x) for x in args)}: {a} vs {b}"
        return False, f"equal at all {tried} probe points"
    if _same_value(printed, corrected):
        return False, f"{printed} equals {corrected}"
    return True, f"{printed} -> {corrected}"

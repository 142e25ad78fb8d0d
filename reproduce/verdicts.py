"""One verdict vocabulary and one definition of each comparison, for every entry's check.

A reproduction decides a claim, or says why it cannot. Every check in ``reproduce/`` speaks
this vocabulary (:data:`LABELS`):

``shows``
    the claim's statistic decides in the claim's favour (its interval lies on the claimed side
    of the boundary, or inside the claimed band);
``does not show``
    it decides against the claim (the interval lies on the other side, or outside the band);
``inconclusive: underpowered``
    the interval straddles the boundary; the verdict says how many seeds would decide it at the
    observed spread (:meth:`Estimate.seeds_to_decide`);
``inconclusive: diverged`` / ``inconclusive: missing``
    no healthy evidence: every replica that would decide it diverged (a diverged run is never
    evidence), or its runs have no results;
``premise absent``
    the claim's regime card fails (:mod:`reproduce.regime`): the run is not in the regime the
    claim is about, so the claim was not tested, whatever the statistic says.

**Intervals.** Every interval is the two-sided 95 % Student-t interval of a mean over units
(seeds, or Monte-Carlo draws), from :func:`scipy.stats.t.interval`. One boundary decides
one-sided claims; a band decides two-sided ones by two one-sided tests (TOST), each at 2.5 %,
i.e. the same 95 % interval inside the band.

**Definitions** (one each, used everywhere):

* :func:`above` -- "A above B": the per-seed paired difference ``A - B`` (the seeds of one
  configuration share their draws), interval above ``by`` (0 unless the paper gives a size);
  it does not show when the interval lies below ``by + margin`` (``margin``: the smallest
  difference the claim counts, stated by the entry; 0 asks for the opposite order);
* :func:`faster` -- "A reaches the target before B": rounds to a common *absolute* target,
  paired by seed, as the log-ratio ``log(R_B / R_A)`` (a speed-up); a seed that never reaches
  the target within the horizon is censored at the horizon, and a verdict that censoring
  could flip is inconclusive; sizes ("1.5-2x") are a band on the ratio;
* :func:`about_equal` -- "A about equal to B": an equivalence test with a stated margin: the
  interval of ``A - B`` inside ``[-margin, margin]`` shows it, an interval wholly outside does
  not; an interval that merely contains 0 decides nothing;
* :func:`ordering` -- "A > B > C ...": every adjacent pair decided by :func:`above`;
* :func:`slope` -- a fitted slope (per seed) against the predicted value: the interval inside
  ``predicted +- margin`` shows it, wholly outside does not; ``[-2.01, 1.20]`` against -0.5 is
  underpowered, never "shows";
* :func:`size` / :func:`exceeds` -- a per-seed quantity inside a band / beyond a boundary
  (the sizes a paper gives: "1.5-2x", "within 1 point");
* :func:`exact` / :func:`holds` -- deterministic properties (a bit count, an invariant over
  every round of a run): no seed statistics, shows or does not show;
* :func:`every` -- a claim that is the conjunction of decided parts.

A :class:`Verdict` is a small record: the claim, the label, the statistic with its interval,
the seeds, the decision rule, the tuning protocol the comparison rests on and the regime card.
``str(verdict)`` is its one printed line; :meth:`Verdict.row` is its ledger row.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

SHOWS = "shows"
NOT = "does not show"
UNDERPOWERED = "inconclusive: underpowered"
DIVERGED = "inconclusive: diverged"
MISSING = "inconclusive: missing"
PREMISE = "premise absent"
LABELS = (SHOWS, NOT, UNDERPOWERED, DIVERGED, MISSING, PREMISE)

LEVEL = 0.95
MAX_SEEDS = 100_000          # beyond this, "no practical number of seeds decides it"

#: The definitions (the ``definition`` field of a verdict).
DEFINITIONS = ("above", "faster", "about equal", "ordering", "slope", "size", "exceeds",
               "exact", "holds", "every")


# ------------------------------------------------------------------------------ claims
@dataclass(frozen=True)
class Claim:
    """A paper's claim as an entry checks it: ``id`` as the spec numbers it (``"E1"``,
    ``"14b"``), the ``paper``, the paper's ``statement`` (short, in the paper's words where it
    has them), the ``definition`` it is decided by, and ``source`` (the paper's section / the
    spec's item)."""
    id: str
    paper: str
    statement: str
    definition: str
    source: str = ""

    def __post_init__(self):
        if self.definition not in DEFINITIONS:
            raise ValueError(f"claim {self.id}: unknown definition {self.definition!r}; one of "
                             f"{', '.join(DEFINITIONS)}")


@dataclass(frozen=True)
class NotRun:
    """A setting the paper tests a claim on that the entry has not run, and what running it
    would take: ``claim`` (an id of the entry's ``CLAIMS``), ``scope`` (the setting, named as
    the entry's ledger rows name it once run), ``cost`` (measured or extrapolated here, with
    its source) and ``gpu`` (True: beyond this project's CPU machines, reported "not run
    here: GPU only"; False: within them, reported "not yet rerun on the ledger"). An
    entry's ``NOT_RUN`` lists them; the report (:func:`reproduce.report.table`) shows one row
    each until the ledger files a row of that scope."""
    claim: str
    scope: str
    cost: str
    gpu: bool = True


def claims(*items: Claim) -> dict[str, Claim]:
    """An entry's ``CLAIMS``: ``{id: Claim}`` (ids unique)."""
    out = {}
    for c in items:
        if c.id in out:
            raise ValueError(f"claim {c.id} declared twice")
        out[c.id] = c
    return out


# ------------------------------------------------------------------------------ estimates
@dataclass(frozen=True)
class Estimate:
    """The mean of a per-unit quantity with its spread: ``values`` (per seed) or, for a
    Monte-Carlo mean, ``mean``, ``sd`` and ``n`` directly. ``diverged`` counts the units left
    out because their run diverged; ``censored`` notes censoring (see :func:`faster`)."""
    mean: float
    sd: float
    n: int
    values: tuple = ()
    seeds: tuple = ()
    unit: str = "seed"
    diverged: int = 0
    missing: int = 0

    @classmethod
    def of(cls, values, unit: str = "seed", diverged: int = 0) -> "Estimate":
        """From per-unit values: a :class:`pandas.Series` indexed by seed (NaN: a diverged
        unit, counted in ``diverged``), or any sequence (non-finite values counted as
        diverged)."""
        if isinstance(values, pd.Series):
            seeds = tuple(values.index.tolist())
            v = values.to_numpy(dtype=float)
        else:
            v = np.asarray(list(values), dtype=float)
            seeds = tuple(range(len(v)))
        ok = np.isfinite(v)
        v, seeds = v[ok], tuple(s for s, k in zip(seeds, ok) if k)
        n = len(v)
        return cls(float(v.mean()) if n else math.nan,
                   float(v.std(ddof=1)) if n >= 2 else math.nan, n, tuple(map(float, v)),
                   seeds, unit, diverged + int((~ok).sum()))

    @classmethod
    def summary(cls, mean: float, sd: float, n: int, unit: str = "draw") -> "Estimate":
        """From a mean, the units' standard deviation and their number (Monte-Carlo)."""
        return cls(float(mean), float(sd), int(n), (), (), unit)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The two-sided Student-t ``level`` interval of the mean (``scipy.stats.t``); one
        unit: ``(-inf, inf)`` (no spread to judge by); zero spread: the point."""
        from scipy import stats
        if self.n < 1:
            return math.nan, math.nan
        if self.n < 2 or not np.isfinite(self.sd):
            return -math.inf, math.inf
        if self.sd == 0:
            return self.mean, self.mean
        lo, hi = stats.t.interval(level, self.n - 1, loc=self.mean,
                                  scale=self.sd / math.sqrt(self.n))
        return float(lo), float(hi)

    def seeds_to_decide(self, distance: float, level: float = LEVEL) -> int | None:
        """The fewest units whose ``level`` interval, at this spread, has a half-width below
        ``distance`` (the mean's distance to the boundary it would cross): how many seeds
        would decide the verdict if the mean and spread stayed as observed. None when no
        number up to :data:`MAX_SEEDS` would (``distance <= 0``), or with one unit (no
        spread observed)."""
        from scipy import stats
        if not (np.isfinite(distance) and distance > 0) or self.n < 2 or not np.isfinite(self.sd):
            return None
        if self.sd == 0:
            return self.n

        def half(k):
            return stats.t.ppf(0.5 + level / 2, k - 1) * self.sd / math.sqrt(k)
        if half(MAX_SEEDS) >= distance:
            return None
        lo, hi = 2, 2
        while half(hi) >= distance:
            lo, hi = hi, hi * 2
        while lo < hi:                         # the smallest k with half(k) < distance
            mid = (lo + hi) // 2
            if half(mid) < distance:
                hi = mid
            else:
                lo = mid + 1
        return int(hi)


def paired(a, b) -> Estimate:
    """The per-seed difference ``a - b`` over the seeds both have (Series indexed by seed;
    NaN in either: that seed diverged, left out and counted)."""
    a, b = _series(a), _series(b)
    seeds = a.index.union(b.index)
    both = a.index.intersection(b.index)
    d = a.reindex(both) - b.reindex(both)
    est = Estimate.of(d)
    return replace(est, missing=len(seeds) - len(both))


def _series(x) -> pd.Series:
    if isinstance(x, pd.Series):
        return x.astype(float)
    if isinstance(x, Mapping):
        return pd.Series(x, dtype=float)
    return pd.Series(list(x), dtype=float)


# ------------------------------------------------------------------------------ verdicts
def claim_key(claim: str, scope: str = "") -> str:
    """``"E1 [scope]"``: a verdict's claim and scope as one key (a ledger row's too)."""
    return f"{claim}" + (f" [{scope}]" if scope else "")


@dataclass(frozen=True)
class Verdict:
    """A decided (or undecided) claim: see the module docstring. ``rule`` states the decision
    boundary (``"> 0"``, ``"inside [-1, 1]"``), ``display`` how the statistic is printed
    (``scale`` times the value, then ``unit``), ``parts`` the sub-verdicts of an ordering or
    a conjunction."""
    claim: str
    paper: str
    label: str
    definition: str
    what: str
    estimate: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    n: int = 0
    seeds: tuple = ()
    unit: str = ""
    scale: float = 1.0
    rule: str = ""
    reason: str = ""
    seeds_needed: int | None = None
    diverged: int = 0
    protocol: str = ""
    scope: str = ""
    card: object = None                 # reproduce.regime.RegimeCard
    parts: tuple = ()
    values: tuple = ()                  # the per-seed evidence (for the ledger)

    def __post_init__(self):
        if self.label not in LABELS:
            raise ValueError(f"verdict label {self.label!r} is not in the vocabulary")

    @property
    def key(self) -> str:
        return claim_key(self.claim, self.scope)

    def statistic(self) -> str:
        """``"+0.40 [-1.20, 2.00] pp, 3 seeds"`` (the estimate, its 95 % interval, units)."""
        if not np.isfinite(self.estimate):
            return ""
        s = self.scale
        trio = [s * x for x in (self.estimate, self.lo, self.hi)]
        signed = self.definition in ("above", "about equal", "slope", "ordering")
        est, lo, hi = _fmt_group(trio, signed)
        iv = ("" if not (np.isfinite(self.lo) or np.isfinite(self.hi)) or
              (self.lo == self.hi == self.estimate and self.n == 0) else
              " (1 seed: no interval)" if self.lo == -math.inf or (self.n == 1 and
                                                              self.hi == math.inf)
              else f" [{lo}, {hi}]")
        unit = f" {self.unit}" if self.unit else ""
        n = (f", {self.n} seed{'s' if self.n != 1 else ''}" if self.n else "")
        return f"{est}{iv}{unit}{n}"

    def __str__(self) -> str:
        head = f"{self.claim}" + (f" ({self.scope})" if self.scope else "")
        stat = self.statistic()
        body = f"{head}: {self.what}" + (f": {stat}" if stat else "")
        if self.rule:
            body += f" (decides: {self.rule})"
        tail = f" -> {self.label}"
        if self.reason:
            tail += f" ({self.reason})"
        if self.protocol:
            tail += f" | protocol: {self.protocol}"
        if self.card is not None and self.label != PREMISE:
            tail += f" | regime {'ok' if self.card.ok else 'FAILS'}"
        return body + tail

    def lines(self) -> list[str]:
        """The verdict's line, then its parts' lines (indented) and its regime card."""
        out = [str(self)]
        out += ["    " + str(p) for p in self.parts]
        if self.card is not None and self.card.items:
            out += ["    " + line for line in self.card.lines()]
        return out

    def row(self) -> dict:
        """The ledger row (:mod:`reproduce.ledger`)."""
        return {"paper": self.paper, "claim": self.claim, "scope": self.scope,
                "verdict": self.label, "definition": self.definition, "what": self.what,
                "estimate": self.estimate, "lo": self.lo, "hi": self.hi, "n_seeds": self.n,
                "seeds": " ".join(str(s) for s in self.seeds), "unit": self.unit,
                "scale": self.scale, "rule": self.rule, "reason": self.reason,
                "seeds_needed": self.seeds_needed if self.seeds_needed is not None else "",
                "diverged": self.diverged, "protocol": self.protocol,
                "card_ok": "" if self.card is None else bool(self.card.ok),
                "card": "" if self.card is None else self.card.compact(),
                "parts": json.dumps([p.row_brief() for p in self.parts]) if self.parts else "",
                "line": str(self)}

    def row_brief(self) -> dict:
        return {"what": self.what, "verdict": self.label, "estimate": _round(self.estimate),
                "lo": _round(self.lo), "hi": _round(self.hi), "n": self.n}


def _round(x):
    return None if x is None or not np.isfinite(x) else float(f"{x:.6g}")


def _fmt_group(values, signed: bool = True) -> list[str]:
    """Numbers printed alike: three significant digits of the largest finite one."""
    finite = [abs(v) for v in values if np.isfinite(v)]
    top = max(finite, default=0.0)
    if 0 < top < 1e-3 or top >= 1e6:
        return [f"{v:+.2e}" if signed else f"{v:.2e}" for v in values]
    digits = max(0, 2 - int(math.floor(math.log10(top)))) if top > 0 else 2
    return [(f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}") if np.isfinite(v) else str(v)
            for v in values]


def _fmt_number(x: float, signed: bool = True) -> str:
    if not np.isfinite(x):
        return f"{x}"
    a = abs(x)
    digits = 3 if a < 10 else 2 if a < 100 else 1 if a < 1000 else 0
    if 0 < a < 0.01:
        text = f"{x:.2e}"
        return ("+" + text) if signed and x > 0 else text
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def is_verdict(x) -> bool:
    return isinstance(x, Verdict)


def text(lines) -> str:
    """A check's lines as text (verdicts printed with their parts and regime cards)."""
    out = []
    for x in lines:
        out += x.lines() if isinstance(x, Verdict) else [str(x)]
    return "\n".join(out)


def verdicts_of(lines) -> list[Verdict]:
    return [x for x in lines if isinstance(x, Verdict)]


# ------------------------------------------------------------------------------ deciding
def _premise(card) -> str | None:
    if card is not None and not card.ok:
        return "regime card fails: " + card.failures()
    return None


def _no_evidence(est: Estimate) -> tuple[str, str] | None:
    """``(label, reason)`` when ``est`` has no healthy unit at all."""
    if est.n >= 1:
        return None
    if est.diverged:
        return DIVERGED, f"all {est.diverged} replica(s) of its evidence diverged"
    return MISSING, "no results for its runs"


def _needed_text(k: int | None, est: Estimate) -> str:
    if est.n < 2:
        return f"{est.n} {est.unit}: no spread to judge by; at least 2, better 5"
    sd = _fmt_number(est.sd, signed=False)
    if k is None:
        return (f"the mean sits on the boundary: no number of {est.unit}s up to "
                f"{MAX_SEEDS:,} decides it at sd {sd}")
    return f"about {k:,} {est.unit}s would decide it at the observed spread (sd {sd})"


def _make(claim, label, definition, what, est: Estimate | None, *, lo=math.nan, hi=math.nan,
          rule="", reason="", needed=None, protocol="", scope="", card=None, unit="",
          scale=1.0, parts=(), estimate=None) -> Verdict:
    premise = _premise(card)
    if premise is not None:
        label, reason = PREMISE, premise
        needed = None
    cid, paper = (claim.id, claim.paper) if isinstance(claim, Claim) else (str(claim), "")
    return Verdict(cid, paper, label, definition, what,
                   estimate if estimate is not None else (est.mean if est else math.nan),
                   lo, hi, est.n if est else 0, est.seeds if est else (), unit, scale, rule,
                   reason, needed, est.diverged if est else 0, _protocol_text(protocol),
                   scope, card, tuple(parts), est.values if est else ())


def _protocol_text(protocol) -> str:
    if protocol is None:
        return ""
    return protocol if isinstance(protocol, str) else protocol.describe()


def decide_exceeds(est: Estimate, boundary: float, direction: int = 1,
                   margin: float = 0.0) -> tuple[str, float, float, int | None, str]:
    """The one-sided decision: ``(label, lo, hi, seeds_needed, reason)``. With
    ``direction = +1`` the claim is "the mean is above ``boundary``": the interval above it
    shows, an interval below ``boundary + margin`` does not; ``-1`` mirrors it."""
    lo, hi = est.interval()
    if est.n < 1:
        return MISSING, lo, hi, None, ""
    s = direction
    near, far = (lo, hi) if s > 0 else (-hi, -lo)        # in the claim's orientation
    m, b = s * est.mean, s * boundary
    if near > b:
        return SHOWS, lo, hi, None, ""
    if far < b + margin:
        return NOT, lo, hi, None, ""
    # undecided: the nearer decision at the observed mean
    dist = max(m - b, (b + margin) - m)
    k = est.seeds_to_decide(dist)
    return UNDERPOWERED, lo, hi, k, _needed_text(k, est)


def decide_inside(est: Estimate, low: float, high: float):
    """The band decision (TOST): inside ``[low, high]`` shows, wholly outside does not."""
    lo, hi = est.interval()
    if est.n < 1:
        return MISSING, lo, hi, None, ""
    if low <= lo and hi <= high:
        return SHOWS, lo, hi, None, ""
    if lo > high or hi < low:
        return NOT, lo, hi, None, ""
    m = est.mean
    dist = min(m - low, high - m) if low <= m <= high else max(low - m, m - high)
    k = est.seeds_to_decide(dist)
    return UNDERPOWERED, lo, hi, k, _needed_text(k, est)


def _verdict_from(claim, definition, what, est, decision, *, rule, **kw) -> Verdict:
    empty = _no_evidence(est)
    if empty is not None:
        return _make(claim, empty[0], definition, what, est, reason=empty[1], rule=rule, **kw)
    label, lo, hi, needed, reason = decision
    return _make(claim, label, definition, what, est, lo=lo, hi=hi, needed=needed,
                 reason=reason, rule=rule, **kw)


def _fmt_rule(x: float, scale: float, unit: str) -> str:
    return f"{scale * x:.4g}" + (f" {unit}" if unit else "")


# ------------------------------------------------------------------------------ definitions
def exceeds(claim, values, boundary: float = 0.0, *, direction: int = 1, margin: float = 0.0,
            what: str = "", unit: str = "", scale: float = 1.0, card=None, protocol="",
            scope="") -> Verdict:
    """A per-seed quantity (or a Monte-Carlo :class:`Estimate`) beyond ``boundary``:
    ``direction = +1`` "above", ``-1`` "below"; it does not show when the interval lies on
    the other side of ``boundary +- margin``."""
    est = values if isinstance(values, Estimate) else Estimate.of(values)
    side = ">" if direction > 0 else "<"
    rule = f"interval {side} {_fmt_rule(boundary, scale, unit)}"
    if margin:
        other = "<" if direction > 0 else ">"
        rule += f"; against: interval {other} {_fmt_rule(boundary + direction * margin, scale, unit)}"
    return _verdict_from(claim, "exceeds", what, est,
                         decide_exceeds(est, boundary, direction, margin), rule=rule,
                         card=card, protocol=protocol, scope=scope, unit=unit, scale=scale)


def above(claim, a, b, *, by: float = 0.0, margin: float = 0.0, what: str = "",
          unit: str = "", scale: float = 1.0, card=None, protocol="", scope="",
          lower_is_better: bool = False) -> Verdict:
    """"A above B" (:func:`paired` difference ``a - b``, interval above ``by``); with
    ``lower_is_better`` (losses, rounds) "A below B". It does not show when the interval lies
    below ``by + margin`` (the smallest difference the claim counts)."""
    est = paired(a, b)
    d = -1 if lower_is_better else 1
    side = "<" if lower_is_better else ">"
    rule = f"interval {side} {_fmt_rule(d * by, scale, unit)}"
    other = ">=" if lower_is_better else "<"
    rule += f"; against: interval {other} {_fmt_rule(d * (by + margin), scale, unit)}"
    return _verdict_from(claim, "above", what or "A - B", est,
                         decide_exceeds(est, d * by, d, margin), rule=rule, card=card,
                         protocol=protocol, scope=scope, unit=unit, scale=scale)


def not_below(claim, a, b, margin: float, *, what: str = "", unit: str = "",
              scale: float = 1.0, card=None, protocol="", scope="",
              lower_is_better: bool = False) -> Verdict:
    """"A not below B" (no degradation beyond ``margin``; ">=" in an ordering): the paired
    difference's interval above ``-margin`` shows it, an interval below ``-margin`` does not."""
    return above(claim, a, b, by=-margin, margin=0.0, what=what, unit=unit, scale=scale,
                 card=card, protocol=protocol, scope=scope, lower_is_better=lower_is_better)


def about_equal(claim, a, b, margin: float, *, what: str = "", unit: str = "",
                scale: float = 1.0, card=None, protocol="", scope="") -> Verdict:
    """"A about equal to B": the paired difference's interval inside ``[-margin, margin]``
    (an equivalence test; a wide interval that contains 0 decides nothing)."""
    if not margin > 0:
        raise ValueError("about_equal needs a margin > 0")
    est = paired(a, b)
    rule = f"interval inside +-{_fmt_rule(margin, scale, unit)}"
    return _verdict_from(claim, "about equal", what or "A - B", est,
                         decide_inside(est, -margin, margin), rule=rule, card=card,
                         protocol=protocol, scope=scope, unit=unit, scale=scale)


def size(claim, values, low: float, high: float, *, what: str = "", unit: str = "",
         scale: float = 1.0, card=None, protocol="", scope="", definition: str = "size"
         ) -> Verdict:
    """A per-seed quantity inside the band ``[low, high]`` the paper gives."""
    est = values if isinstance(values, Estimate) else Estimate.of(values)
    rule = f"interval inside [{scale * low:.4g}, {scale * high:.4g}]" + (f" {unit}" if unit else "")
    return _verdict_from(claim, definition, what, est, decide_inside(est, low, high),
                         rule=rule, card=card, protocol=protocol, scope=scope, unit=unit,
                         scale=scale)


def slope(claim, slopes, predicted: float, margin: float, *, what: str = "", card=None,
          protocol="", scope="") -> Verdict:
    """A fitted slope (one per seed) against the ``predicted`` value: inside ``predicted +-
    margin`` shows, wholly outside does not, else underpowered."""
    return size(claim, slopes, predicted - margin, predicted + margin,
                what=what or f"slope (predicted {predicted:g} +- {margin:g})", card=card,
                protocol=protocol, scope=scope, definition="slope")


def faster(claim, rounds_a, rounds_b, *, horizon: float, by: float = 1.0,
           band: tuple[float, float] | None = None, what: str = "", card=None, protocol="",
           scope="") -> Verdict:
    """"A reaches the common absolute target before B": per seed the speed-up
    ``R_B / R_A`` of the rounds to the target (Series indexed by seed; ``inf``: never
    reached within ``horizon``, censored there; NaN: diverged), tested as a log-ratio above
    ``log(by)``, or inside ``band`` (a size, e.g. ``(1.5, 2)``). Seeds where neither reaches
    the target carry no information and are left out; when censoring could flip the
    decision (A censored behind a "shows", B censored behind a "does not show") the verdict is
    inconclusive."""
    a, b = _series(rounds_a), _series(rounds_b)
    both = a.index.intersection(b.index)
    a, b = a.reindex(both), b.reindex(both)
    bad = a.isna() | b.isna()
    never_a, never_b = np.isinf(a) & ~bad, np.isinf(b) & ~bad
    neither = never_a & never_b
    cap = float(horizon) + 1.0
    keep = ~bad & ~neither
    ra, rb = a[keep].clip(upper=cap), b[keep].clip(upper=cap)
    ratio = np.log(rb.clip(lower=1e-12) / ra.clip(lower=1e-12))
    est = replace(Estimate.of(ratio), diverged=int(bad.sum()))
    note = []
    if neither.any():
        note.append(f"{int(neither.sum())} seed(s) where neither reaches the target left out")
    if (never_a & keep).any() or (never_b & keep).any():
        note.append(f"censored at the horizon {horizon:g}: A in {int((never_a & keep).sum())}, "
                    f"B in {int((never_b & keep).sum())} seed(s)")
    shown = "speed-up R_B/R_A"
    if est.n == 0 and neither.any() and not bad.all():
        return _make(claim, UNDERPOWERED, "faster", what or shown, est,
                     reason="neither reaches the target within the horizon in any seed",
                     protocol=protocol, scope=scope, card=card, unit="x")
    if band is not None:
        lo_b, hi_b = band
        decision = decide_inside(est, math.log(lo_b), math.log(hi_b))
        rule = f"speed-up interval inside [{lo_b:g}, {hi_b:g}]x"
    else:
        decision = decide_exceeds(est, math.log(by), 1, 0.0)
        rule = f"speed-up interval > {by:g}x; against: < {by:g}x"
    label, lo, hi, needed, reason = decision if est.n else (MISSING, math.nan, math.nan, None, "")
    if label == SHOWS and (never_a & keep).any() and band is None:
        label, reason = UNDERPOWERED, "A censored in some seed: its speed-up is overstated there"
    if label == NOT and (never_b & keep).any() and band is None:
        label, reason = UNDERPOWERED, "B censored in some seed: its speed-up is understated there"
    if (never_a | never_b)[keep].any() and band is not None and label != UNDERPOWERED:
        label, reason = UNDERPOWERED, "censored seeds: the ratio is only bounded there"
    reason = "; ".join([r for r in [reason] + note if r])
    v = _verdict_from(claim, "faster", what or shown, est, (label, lo, hi, needed, reason),
                      rule=rule, card=card, protocol=protocol, scope=scope, unit="x")
    # printed as ratios, not log-ratios
    return replace(v, estimate=math.exp(v.estimate) if np.isfinite(v.estimate) else v.estimate,
                   lo=math.exp(v.lo) if np.isfinite(v.lo) else (0.0 if v.lo == -math.inf
                                                                else v.lo),
                   hi=math.exp(v.hi) if np.isfinite(v.hi) else v.hi)


def ordering(claim, named: list[tuple[str, object]], *, margin: float = 0.0,
             what: str = "", unit: str = "", scale: float = 1.0, card=None, protocol="",
             scope="", lower_is_better: bool = False, strict: Iterable[bool] | None = None
             ) -> Verdict:
    """"A > B > C ...": ``named`` is ``[(name, per-seed values)]`` in the claimed order, best
    first; every adjacent pair is decided by :func:`above` (a pair marked non-strict, ``A >=
    B``, by :func:`not_below`: the interval of ``A - B`` above ``-margin``). The order shows when
    every pair shows, does not show when any pair does not; otherwise the first undecided
    pair's state (seeds: the most any pair needs)."""
    if len(named) < 2:
        raise ValueError("an ordering needs at least two members")
    strict = list(strict) if strict is not None else [True] * (len(named) - 1)
    parts = []
    for (na, a), (nb, b), st in zip(named, named[1:], strict):
        rel = ("<" if lower_is_better else ">") if st else ("<=" if lower_is_better else ">=")
        if st:
            parts.append(above(claim, a, b, margin=margin, what=f"{na} {rel} {nb}", unit=unit,
                               scale=scale, lower_is_better=lower_is_better))
        else:
            parts.append(above(claim, a, b, by=-margin, margin=0.0, what=f"{na} {rel} {nb}", unit=unit, scale=scale,
                               lower_is_better=lower_is_better))
    order = (" < " if lower_is_better else " > ").join(n for n, _ in named)
    return every(claim, parts, what=what or order, card=card, protocol=protocol, scope=scope,
                 definition="ordering")


def every(claim, parts: list[Verdict], *, what: str = "", card=None, protocol="", scope="",
          definition: str = "every") -> Verdict:
    """The conjunction of decided parts: does not show if any part does not; shows if all
    show; else missing, diverged, underpowered, in that order (seeds: the most any part
    needs); premise absent where the card (or a part's) fails."""
    parts = list(parts)
    if not parts:
        return _make(claim, MISSING, definition, what, None, reason="nothing to decide",
                     card=card, protocol=protocol, scope=scope)
    labels = [p.label for p in parts]
    reason, needed = "", None
    if PREMISE in labels:
        label = PREMISE
        reason = "; ".join(p.reason for p in parts if p.label == PREMISE)
    elif NOT in labels:
        label = NOT
        reason = "; ".join(p.what for p in parts if p.label == NOT) + ": does not show"
    elif all(lab == SHOWS for lab in labels):
        label = SHOWS
    else:
        for lab in (MISSING, DIVERGED, UNDERPOWERED):
            if lab in labels:
                label = lab
                break
        open_ = [p for p in parts if p.label == label]
        reason = "undecided: " + ", ".join(p.what for p in open_)
        if label == UNDERPOWERED:
            ks = [p.seeds_needed for p in open_]
            if all(k is not None for k in ks):
                needed = max(ks)
                reason += f"; about {needed:,} seeds would decide every part"
    n = max((p.n for p in parts), default=0)
    seeds = max((p.seeds for p in parts), key=len, default=())
    premise = _premise(card)
    if premise is not None:
        label, reason, needed = PREMISE, premise, None
    cid, paper = (claim.id, claim.paper) if isinstance(claim, Claim) else (str(claim), "")
    return Verdict(cid, paper, label, definition, what, n=n, seeds=seeds, reason=reason,
                   seeds_needed=needed, diverged=sum(p.diverged for p in parts),
                   protocol=_protocol_text(protocol), scope=scope, card=card, parts=tuple(parts))


def exact(claim, measured: float, expected: float, *, tol: float = 0.0, what: str = "",
          unit: str = "", card=None, protocol="", scope="") -> Verdict:
    """A deterministic quantity equal to ``expected`` within ``tol`` (a bit count, a memory
    size, an accountant's epsilon): no seeds, shows or does not show."""
    ok = np.isfinite(measured) and abs(measured - expected) <= tol
    return _make(claim, SHOWS if ok else NOT, "exact", what, None,
                 estimate=float(measured), lo=float(measured), hi=float(measured),
                 rule=f"= {expected:g}" + (f" +- {tol:g}" if tol else "") + (f" {unit}" if unit else ""),
                 unit=unit, card=card, protocol=protocol, scope=scope,
                 reason="" if np.isfinite(measured) else "not measured")


def holds(claim, values, limit: float, *, side: str = "<=", what: str = "", unit: str = "",
          card=None, protocol="", scope="") -> Verdict:
    """A deterministic bound over every unit (every round, replica or cell): shows when every
    finite value is on ``side`` of ``limit``; a non-finite value (a diverged unit) is no
    evidence, and all non-finite is inconclusive."""
    v = np.asarray(list(values), dtype=float)
    ok = np.isfinite(v)
    if not ok.any():
        lab = DIVERGED if len(v) else MISSING
        return _make(claim, lab, "holds", what, None, reason="no finite value" if len(v)
                     else "no results", card=card, protocol=protocol, scope=scope)
    worst = float(v[ok].max() if side in ("<=", "<") else v[ok].min())
    good = {"<=": worst <= limit, "<": worst < limit, ">=": worst >= limit,
            ">": worst > limit}[side]
    return _make(claim, SHOWS if good else NOT, "holds", what, None, estimate=worst,
                 lo=worst, hi=worst, rule=f"every value {side} {limit:g}", unit=unit,
                 card=card, protocol=protocol, scope=scope,
                 reason=f"worst of {int(ok.sum())}" + (f"; {int((~ok).sum())} non-finite left out"
                                                       if (~ok).any() else ""))


def missing(claim, what: str, reason: str = "runs missing", *, card=None, protocol="",
            scope="", definition: str | None = None) -> Verdict:
    """A claim whose evidence is absent (runs not run, a setting left out)."""
    d = definition or (claim.definition if isinstance(claim, Claim) else "every")
    return _make(claim, MISSING, d, what, None, reason=reason, card=card, protocol=protocol,
                 scope=scope)


def undecided(claim, what: str, reason: str, *, label: str = UNDERPOWERED, card=None,
              protocol="", scope="", definition: str | None = None) -> Verdict:
    """A claim its evidence cannot decide for a stated reason that is neither missing runs nor
    divergence (e.g. no seed reaches the target the statistic needs): underpowered."""
    d = definition or (claim.definition if isinstance(claim, Claim) else "every")
    return _make(claim, label, d, what, None, reason=reason, card=card, protocol=protocol,
                 scope=scope)


# ------------------------------------------------------------------------------ evidence
def _one_run(df: pd.DataFrame, metric: str, run, where, who: str) -> pd.DataFrame:
    """The rows of ``metric`` of one run (``run`` and ``where`` select it): an error where
    they hold two rows for one seed and round, a run name shared by panels or sweeps, whose
    rows would otherwise be read as one run's."""
    sub = df[df["metric"] == metric]
    if run is not None:
        sub = sub[sub["run"] == run]
    for k, v in (where or {}).items():
        sub = sub[sub[k] == v]
    if sub.duplicated(["seed", "round"]).any():
        raise ValueError(f"{who}: {metric!r}{f' of run {run!r}' if run is not None else ''} "
                         "has two rows for one seed and round (a run name shared by panels or "
                         "sweeps); pick one with where=")
    return sub


def per_seed(df: pd.DataFrame, metric: str, how: str = "final", *, run=None,
             where: dict | None = None) -> pd.Series:
    """Per seed, one number from a tidy results table (``run``, ``seed``, ``round``,
    ``metric``, ``value`` and, when recorded, ``diverged_at``): ``"final"`` the last evaluated
    value, ``"mean"`` the mean over the evaluated rounds after 0 (area under the curve per
    round), ``"last10"`` the mean of the last 10 evaluations, ``"max"`` / ``"min"``. A seed
    recorded as diverged is NaN (never evidence, counted by :class:`Estimate`)."""
    sub = _one_run(df, metric, run, where, "per_seed")
    if sub.empty:
        return pd.Series(dtype=float)
    sub = sub.sort_values("round")
    g = sub.groupby("seed")["value"]
    if how == "final":
        out = g.last()
    elif how == "mean":
        out = sub[sub["round"] > 0].groupby("seed")["value"].mean()
    elif how == "last10":
        out = g.apply(lambda v: v.iloc[-10:].mean())
    elif how == "max":
        out = g.max()
    elif how == "min":
        out = g.min()
    else:
        raise ValueError(f"unknown per-seed statistic {how!r}")
    if "diverged_at" in sub:
        div = sub.groupby("seed")["diverged_at"].apply(lambda v: v.notna().any())
        out = out.where(~div.reindex(out.index).fillna(False))
    return out.astype(float)


def rounds_to(df: pd.DataFrame, metric: str, target: float, *, run=None, higher: bool = True,
              where: dict | None = None) -> pd.Series:
    """Per seed, the first evaluated round whose ``metric`` reaches the absolute ``target``
    (``>=`` with ``higher``, else ``<=``); ``inf`` if never (censored at the horizon), NaN if
    the seed diverged."""
    sub = _one_run(df, metric, run, where, "rounds_to")
    out = {}
    for seed, g in sub.sort_values("round").groupby("seed"):
        if "diverged_at" in g and g["diverged_at"].notna().any():
            out[seed] = math.nan
            continue
        hit = g[g["value"] >= target] if higher else g[g["value"] <= target]
        out[seed] = float(hit["round"].iloc[0]) if len(hit) else math.inf
    return pd.Series(out, dtype=float)

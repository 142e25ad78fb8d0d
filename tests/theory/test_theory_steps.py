"""The proof-step map (theory.steps): every numbered result of the four papers, every displayed step of its statement and
proof, the checks that evaluate each step, and the coverage goal.

* a result listed with no step is an error; every step's checks exist and cite the step's first line;
* the map is complete: the displays the paper text has inside a result's statement and proof are exactly its steps,
  and every numbered result the text states is listed (when the paper texts are present);
* coverage is at least the goal in every paper and every result is at least partly covered;
* a check that reports per-step outcomes reports only steps of the map;
* every correction is an expression that differs from the printed one (no flag), and re-run with it the check verifies.
"""

from __future__ import annotations

import re

import pytest

from theory.core import PAPERS, _REGISTRY, all_checks, expressions_differ, get_check, printed_arguments, run_check
from theory.steps import GOAL, PAPER_DIR, S, coverage, display_blocks, numbered_in_text, paper_coverage, results, step_status

RESULTS = results()
COVERAGE = coverage()
HAVE_TEXTS = all((PAPER_DIR / r.file).exists() for r in RESULTS)


def _key(r, name):
    return name if ":" in name else f"{r.paper}:{name}"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_paper_has_numbered_results(paper):
    assert [r for r in RESULTS if r.paper == paper], f"{paper}: no numbered result in the step map"


@pytest.mark.parametrize("res", RESULTS, ids=lambda r: r.key)
def test_result_has_steps_and_valid_checks(res):
    assert res.steps, f"{res.key} is listed with no step"
    lines = [s.lines for s in res.steps]
    assert len(lines) == len(set(lines)), f"{res.key}: duplicate steps"
    for s in res.steps:
        assert re.fullmatch(r"[0-9]+(-[0-9]+)?", s.lines) and s.first <= s.last, (res.key, s.lines)
        assert s.what, (res.key, s.lines)
        for name in s.checks:
            key = _key(res, name)
            assert key in _REGISTRY, f"{res.key} line {s.lines}: unknown check {name}"
            doc = _REGISTRY[key].func.__doc__ or ""
            assert re.search(rf"(?<![0-9]){s.first}(?![0-9])", doc), \
                f"{res.key} line {s.lines}: {name} does not cite line {s.first} in its docstring"


def test_a_result_without_steps_is_an_error():
    from theory.steps import Numbered

    bad = Numbered("fed-ef", "Lemma X", "fed-ef.txt", (1, 1), None, ())
    with pytest.raises(AssertionError):
        test_result_has_steps_and_valid_checks(bad)


@pytest.mark.skipif(not HAVE_TEXTS, reason="paper texts not present")
@pytest.mark.parametrize("res", RESULTS, ids=lambda r: r.key)
def test_steps_are_the_papers_displays(res):
    """The steps are exactly the displays the paper text has inside the result's statement and proof; a result with no
    display there lists inline formulas of its statement (lines inside the statement)."""
    blocks = display_blocks(PAPER_DIR / res.file)
    inside = {f"{a}-{b}" if a != b else str(a) for a, b in blocks if res.covers_line(a)}
    have = {s.lines for s in res.steps}
    if not inside:
        a, b = res.statement
        assert all(a <= s.first <= s.last <= b for s in res.steps), f"{res.key}: an inline step lies outside the statement {a}-{b}"
        return
    assert inside - have == set(), f"{res.key}: displays not in the map: {sorted(inside - have)}"
    assert have - inside == set(), f"{res.key}: steps that are no display of its statement or proof: {sorted(have - inside)}"


@pytest.mark.skipif(not HAVE_TEXTS, reason="paper texts not present")
def test_every_numbered_result_of_the_texts_is_mapped():
    files = {r.file for r in RESULTS}
    listed = {(r.file, r.label.split(" (")[0]) for r in RESULTS}
    for f in sorted(files):
        for label, line in numbered_in_text(PAPER_DIR / f):
            assert (f, label) in listed, f"{f} line {line}: {label} is not in the step map"


@pytest.mark.parametrize("paper", PAPERS)
def test_coverage_goal_per_paper(paper):
    a, b = paper_coverage([c for c in COVERAGE if c.result.paper == paper])[paper]
    assert b and a / b >= GOAL, f"{paper}: {a}/{b} displayed steps checked, below the goal {GOAL:.0%}"


@pytest.mark.parametrize("cov", COVERAGE, ids=lambda c: c.result.key)
def test_every_result_partly_covered(cov):
    assert cov.checked >= 1, f"{cov.result.key}: no step is checked"


def test_coverage_drops_when_a_step_loses_its_check():
    """The goal test can fail: a paper whose steps lose their checks falls below it."""
    cov = COVERAGE[0]
    stripped = [S(s.lines, s.what) for s in cov.result.steps]
    assert all(step_status(cov.result.paper, s) == "unchecked" for s in stripped)
    assert step_status(cov.result.paper, S("1", "x", "no_such_check")) == "unchecked"


def test_reported_steps_belong_to_the_map():
    mapped = {}
    for r in RESULTS:
        for s in r.steps:
            for name in s.checks:
                mapped.setdefault(_key(r, name), set()).add(s.lines)
    for c in all_checks():
        for lines, _ in run_check(c.key).steps:
            assert lines in mapped.get(c.key, set()), f"{c.key} reports line {lines}, which the map does not give it"


# --------------------------------------------------------------------------- corrections


CORRECTED = [c for c in all_checks() if c.corrected is not None]


@pytest.mark.parametrize("key", [c.key for c in CORRECTED])
def test_correction_is_an_expression_that_differs(key):
    """No verdict can flip by a flag that equates both sides: each corrected argument is a formula, number or function that
    differs from the printed one (compared symbolically, or on probe arguments for functions)."""
    c = get_check(key)
    printed = printed_arguments(c)
    for name, value in c.corrected.items():
        ok, why = expressions_differ(printed[name], value)
        assert ok, f"{key}: correction of {name} does not change the printed expression ({why})"


@pytest.mark.parametrize("printed, corrected, differs", [
    (True, False, False), ("upper", "lower", False), (1, 1, False), (1, 2, True),
    (lambda x: x, lambda x: abs(x), True), (lambda x: 2 * x, lambda x: x + x, False),
    ({"a": 1}, {"a": 1}, False), ({"a": 1}, {"a": 2}, True), (None, 3, False),
])
def test_expressions_differ_rejects_flags_and_equal_forms(printed, corrected, differs):
    assert expressions_differ(printed, corrected)[0] is differs

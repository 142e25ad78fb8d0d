"""No import cycle inside ``sims``: between modules (every import statement, those inside
functions too) and between its packages (core, rules, algorithms, accel, reference, problems,
data, store, experiments, privacy, ...: a package imports another only if that one never
imports it back, through any of their modules). The graph is read from the source, so a
cycle fails here before it bites at import time."""
from __future__ import annotations

import ast
from pathlib import Path

SIMS = Path(__file__).resolve().parents[2] / "sims"


def modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in SIMS.rglob("*.py"):
        parts = list(path.relative_to(SIMS.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph() -> dict[str, set[str]]:
    """``module -> the sims modules it imports`` (``from pkg import name`` where ``name`` is a
    module counts as importing that module)."""
    mods = modules()
    edges = {m: set() for m in mods}
    for module, (path, package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges[module] |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                target = (_absolute(module, package, node.level, node.module) if node.level
                          else node.module or "")
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in mods:
                        edges[module].add(sub)
                    elif target in mods:
                        edges[module].add(target)
        edges[module].discard(module)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def package_of(module: str) -> str:
    """The top-level group a module belongs to (``sims.core.engine`` -> ``core``); the root
    package's own modules are ``sims``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "sims"


def test_no_module_imports_itself_back():
    found = cycles(import_graph())
    assert not found, "import cycles between modules: " + "; ".join(" <-> ".join(c)
                                                                     for c in found)


def test_no_package_imports_itself_back():
    graph = import_graph()
    groups: dict[str, set[str]] = {}
    for module, targets in graph.items():
        groups.setdefault(package_of(module), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(module))
    for g in list(groups.values()):
        for t in g:
            groups.setdefault(t, set())
    found = cycles(groups)
    assert not found, "import cycles between packages: " + "; ".join(" <-> ".join(c)
                                                                      for c in found)


def test_the_checker_finds_a_cycle():
    """The checker itself: a planted two-module cycle and a three-package one are found."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == [["x", "y", "z"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_algorithm_files_do_not_import_the_acceleration_package():
    graph = import_graph()
    bad = sorted(m for m, targets in graph.items() if m.startswith("sims.algorithms")
                 and any(t == "sims.accel" or t.startswith("sims.accel.") for t in targets))
    assert not bad, bad

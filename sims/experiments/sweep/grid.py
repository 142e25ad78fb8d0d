"""A sweep's grid: algorithms x hyperparameter axes (log-spaced ranges or explicit lists) x seeds.

An :class:`Axis` sweeps one hyperparameter, for every algorithm of the grid that has it or
for one algorithm only (``fed-lamb.lam=0,0.01,0.1``). Each algorithm's grid points are the
Cartesian product of the axes that apply to it, on top of its fixed settings
(``fedlada:alpha=0.05``). Every point is built once before anything runs, so a bad value
fails at once with the registry's one-line error.

Text forms (the command line and :func:`parse_axis`):

* ``eta_l=0.001,0.003,0.01`` -- explicit values;
* ``eta_l=log:1e-4:1:5`` -- 5 log-spaced values from 1e-4 to 1 (both ends included);
* ``fed-lamb.lam=0,0.01,0.1`` -- an axis for one algorithm only.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field

import numpy as np

from ...algorithms.registry import AlgorithmError, canonical, hyperparameters, make_algorithm


class GridError(ValueError):
    """A one-line error about a grid specification."""


def logspace(lo: float, hi: float, n: int) -> tuple[float, ...]:
    """``n`` log-spaced values from ``lo`` to ``hi`` (both included), rounded to 12
    significant digits so that values read back from files compare equal."""
    if not (lo > 0 and hi > 0) or n < 1:
        raise GridError(f"log range needs lo, hi > 0 and n >= 1, got {lo}, {hi}, {n}")
    vals = np.logspace(np.log10(lo), np.log10(hi), int(n)) if n > 1 else np.array([lo])
    return tuple(float(f"{v:.12g}") for v in vals)


def _value(text: str):
    from ..compare import parse_value
    return parse_value(text)


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple
    algorithm: str | None = None          # None: every algorithm that has ``key``

    def __post_init__(self):
        if not self.values:
            raise GridError(f"axis {self.key} has no values")
        if len(set(map(repr, self.values))) != len(self.values):
            raise GridError(f"axis {self.key} repeats a value: {list(self.values)}")


def parse_axis(text: str) -> Axis:
    """An :class:`Axis` from ``[ALG.]KEY=SPEC`` (see the module docstring)."""
    key, sep, spec = str(text).partition("=")
    if not sep or not key.strip() or not spec.strip():
        raise GridError(f"cannot read grid axis {text!r}; expected [ALG.]KEY=v1,v2,... or "
                        "[ALG.]KEY=log:LO:HI:N")
    alg, dot, name = key.strip().rpartition(".")
    spec = spec.strip()
    if spec.startswith("log:"):
        parts = spec.split(":")
        try:
            lo, hi, n = float(parts[1]), float(parts[2]), int(parts[3])
        except (IndexError, ValueError):
            raise GridError(f"cannot read log range {spec!r}; expected log:LO:HI:N") from None
        values = logspace(lo, hi, n)
    else:
        values = tuple(_value(v) for v in spec.split(",") if v.strip())
    return Axis(name.strip(), values, canonical(alg) if dot else None)


@dataclass(frozen=True)
class Point:
    """One grid point: an algorithm and its full hyperparameter settings (fixed + swept)."""
    algorithm: str
    hyper: tuple                      # sorted (key, value) pairs
    swept: tuple                      # the swept keys, in axis order

    @property
    def settings(self) -> dict:
        return dict(self.hyper)

    @property
    def values(self) -> dict:
        """The swept hyperparameters' values (the grid columns)."""
        h = self.settings
        return {k: h[k] for k in self.swept}

    @property
    def label(self) -> str:
        vals = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in self.values.items())
        return f"{self.algorithm} {vals}".strip()

    @property
    def key(self) -> str:
        """A short stable id of the point (algorithm and every setting)."""
        blob = json.dumps([self.algorithm, [[k, v] for k, v in self.hyper]], default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


@dataclass
class Grid:
    """Algorithms (registry names, each with fixed settings) x axes. ``points()`` lists
    every point; :attr:`columns` are the swept hyperparameters (the table's grid columns)."""
    algorithms: dict[str, dict]            # name -> fixed hyperparameters
    axes: list[Axis] = field(default_factory=list)

    @classmethod
    def from_specs(cls, algorithms: str | list, axes=(), hp=()) -> "Grid":
        """From ``"fedlada:alpha=0.05,fedavg"`` (or a list of such names), axis texts or
        :class:`Axis` objects, and fixed ``[ALG.]KEY=VALUE`` settings (``--hp``)."""
        from ..compare import CompareError, parse_algorithms
        text = algorithms if isinstance(algorithms, str) else ",".join(algorithms)
        try:
            specs = parse_algorithms(text, hp)
        except CompareError as exc:
            raise GridError(str(exc)) from None
        algs = {}
        for _, name, hyper in specs:
            if name in algs:
                raise GridError(f"algorithm {name} listed twice; sweep its settings with an "
                                "axis instead")
            algs[name] = hyper
        return cls(algs, [a if isinstance(a, Axis) else parse_axis(a) for a in axes])

    def __post_init__(self):
        if not self.algorithms:
            raise GridError("the grid has no algorithms")
        for ax in self.axes:
            if ax.algorithm is not None and ax.algorithm not in self.algorithms:
                raise GridError(f"axis {ax.algorithm}.{ax.key}: {ax.algorithm} is not in the "
                                f"grid's algorithms ({', '.join(self.algorithms)})")
            if not any(ax.key in self._valid(a) for a in self._targets(ax)):
                raise GridError(f"no algorithm of the grid has a hyperparameter {ax.key!r}")
        keys = [(ax.algorithm, ax.key) for ax in self.axes]
        if len(set(keys)) != len(keys):
            raise GridError("an axis is given twice")

    def _targets(self, ax: Axis):
        return [ax.algorithm] if ax.algorithm else list(self.algorithms)

    @staticmethod
    def _valid(name):
        try:
            return hyperparameters(name)
        except AlgorithmError as exc:
            raise GridError(str(exc)) from None

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(ax.key for ax in self.axes))

    def points(self) -> list[Point]:
        out = []
        for name, fixed in self.algorithms.items():
            valid = self._valid(name)
            axes = [ax for ax in self.axes if ax.key in valid
                    and (ax.algorithm is None or ax.algorithm == name)]
            swept = tuple(ax.key for ax in axes)
            if len(set(swept)) != len(swept):
                raise GridError(f"{name}: {swept} sweeps a hyperparameter twice")
            for combo in itertools.product(*(ax.values for ax in axes)):
                hyper = {**fixed, **dict(zip(swept, combo))}
                out.append(Point(name, tuple(sorted(hyper.items())), swept))
        return out

    def check(self) -> list[Point]:
        """Every point, each built once (one-line errors before any work)."""
        pts = self.points()
        for p in pts:
            try:
                make_algorithm(p.algorithm, **p.settings)
            except AlgorithmError as exc:
                raise GridError(f"grid point {p.label}: {exc}") from None
        return pts

    def describe(self) -> dict:
        return {"algorithms": self.algorithms,
                "axes": [{"key": a.key, "values": list(a.values), "algorithm": a.algorithm}
                         for a in self.axes]}

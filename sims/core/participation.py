"""Client sampling schemes; the run records which one it used and every round's draw.

* ``full`` -- every client every round (Fed-EF Alg. 2 as printed).
* ``fixed`` -- ``m`` clients uniformly without replacement (Fed-EF Sec. 4.3, FedAda2).
* ``bernoulli`` -- each client independently with probability ``p`` (FL-Simulator style);
  the number of participants varies, possibly 0, in which case the server stands still.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np


class ParticipationError(ValueError):
    pass


@dataclass(frozen=True)
class Participation:
    kind: str = "full"
    m: int | None = None
    p: float | None = None

    def __post_init__(self):
        if self.kind not in ("full", "fixed", "bernoulli"):
            raise ParticipationError(
                f"unknown participation {self.kind!r}; use full, fixed or bernoulli")
        if self.kind == "fixed" and (isinstance(self.m, bool) or not isinstance(self.m, Integral)
                                     or self.m < 1):
            raise ParticipationError(f"fixed participation needs an integer m >= 1, got {self.m}")
        if self.kind == "bernoulli" and not (self.p is not None and 0 < self.p <= 1):
            raise ParticipationError(f"bernoulli participation needs 0 < p <= 1, got {self.p}")

    def check(self, n: int) -> None:
        if self.kind == "fixed" and self.m > n:
            raise ParticipationError(f"cannot sample m={self.m} of n={n} clients")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Sorted ids of this round's participants."""
        if self.kind == "full":
            return np.arange(n)
        if self.kind == "fixed":
            return np.sort(rng.choice(n, self.m, replace=False))
        return np.flatnonzero(rng.random(n) < self.p)

    def expected(self, n: int) -> float:
        return {"full": n, "fixed": self.m, "bernoulli": (self.p or 0) * n}[self.kind]

    def describe(self) -> dict:
        return {"kind": self.kind, "m": self.m, "p": self.p}

    @classmethod
    def parse(cls, text: str) -> "Participation":
        """``"full"``, ``"m=20"`` / ``"fixed:20"``, ``"p=0.5"`` / ``"bernoulli:0.5"``."""
        text = text.strip()
        try:
            if text == "full":
                return cls("full")
            key, _, val = text.replace(":", "=").partition("=")
            if key in ("m", "fixed"):
                return cls("fixed", m=int(val))
            if key in ("p", "bernoulli"):
                return cls("bernoulli", p=float(val))
        except ParticipationError:
            raise  # a readable spec with a bad value: keep the specific message
        except ValueError:
            pass
        raise ParticipationError(f"cannot read participation {text!r}; use full, m=M or p=P")

"""What a plan is (:class:`Plan`) and which rules can have one (:func:`numeric`)."""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Plan:
    """A rule's fast form (module docstring)."""
    name: str
    step: Callable | None = None
    round: Callable | None = None


def numeric(obj) -> bool:
    """Whether a rule's constants are all numbers (no tensor: a per-replica hyperparameter
    bound to rows takes the readable rule)."""
    if torch.is_tensor(obj):
        return False
    if isinstance(obj, (list, tuple)):
        return all(numeric(v) for v in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        return all(numeric(getattr(obj, f.name)) for f in fields(obj))
    return True

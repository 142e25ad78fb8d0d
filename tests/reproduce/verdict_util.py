"""Reading the verdicts an entry run saved (``OUT/ENTRY/ledger/verdicts.json``, :mod:`reproduce.ledger`),
so entry tests assert each claim's label exactly."""
from __future__ import annotations

import json
from pathlib import Path


def saved(out, entry: str) -> dict:
    """``{claim or "claim [scope]": label}`` of the last run of ``entry`` under ``out``."""
    rec = json.loads((Path(out) / entry / "ledger" / "verdicts.json").read_text())
    return {(v["claim"] + (f" [{v['scope']}]" if v["scope"] else "")): v["verdict"]
            for v in rec["verdicts"]}


def labels(lines) -> dict:
    """The same from a check's returned lines."""
    from reproduce.verdicts import verdicts_of
    return {v.key: v.label for v in verdicts_of(lines)}


def part_labels(verdict) -> list[str]:
    return [p.label for p in verdict.parts]

"""``python -m reproduce recheck``: every filed entry's verdicts re-derived from the committed
ledger alone, and held to the filed ones.

The ledger promises that ``python -m reproduce.ENTRY --plot-only --from-ledger`` redraws an
entry's figures and prints its verdicts from ``docs/ledger/`` with no results folder and no
computing. This command keeps that promise checkable: for every filed entry (or one paper's,
``--paper``, or named ones) it runs the entry's check on the filed table and settings
(figures to a scratch folder), then compares each verdict, keyed by claim and scope, with the
entry's filed verdict rows:

- a different label, a filed verdict the check no longer gives, or a new one: the entry
  differs (exit 1);
- the same labels: the entry agrees, with the largest relative change of an estimate printed
  where it exceeds the rows' own rounding (records filed before the checked table kept full
  precision were rounded to 8 significant digits, so a last digit may move);
- an entry that cannot re-derive at all (its run list or settings need results the ledger
  does not carry): a one-line failure (exit 1).

Two defects this would have caught at once: ``fedada2_fig1 --tuning two-step`` could not
redraw (its run list needed its tuning's cells), and ``probes`` re-derived two recovered
constants as NOT recovered (the table was rounded). A whole recheck is about 15 min on one
core; the tests recheck a scratch ledger.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from . import ENTRIES
from .ledger import ledger_dir
from .ledger import verdicts as filed_verdicts


#: the relative rounding of a filed estimate (the verdict rows keep 8 significant digits)
ROUNDING = 1e-7


@dataclass
class Recheck:
    """One entry's recheck: the filed and re-derived labels by claim key, and any failure."""
    entry: str
    filed: dict = field(default_factory=dict)      # {key: label}
    now: dict = field(default_factory=dict)        # {key: label}
    drift: float = 0.0                             # largest relative change of an estimate
    failure: str = ""

    @property
    def differences(self) -> list[str]:
        out = []
        for key in sorted(set(self.filed) | set(self.now)):
            was, now = self.filed.get(key), self.now.get(key)
            if was == now:
                continue
            out.append(f"{key}: filed {was!r}, now {now!r}" if was and now else
                       f"{key}: filed {was!r}, not given now" if was else
                       f"{key}: not filed, now {now!r}")
        return out

    @property
    def ok(self) -> bool:
        return not self.failure and not self.differences

    def line(self) -> str:
        if self.failure:
            return f"{self.entry}: FAILS to re-derive: {self.failure}"
        diff = self.differences
        if diff:
            return f"{self.entry}: DIFFERS ({len(diff)} of {len(self.filed)}): " + "; ".join(diff)
        moved = (f"largest relative change of an estimate {self.drift:.1e}"
                 if self.drift > ROUNDING else "estimates as filed (to the rows' 8 digits)")
        return f"{self.entry}: {len(self.now)} verdict(s), the filed labels; {moved}"


def _relative(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def recheck(name: str, ledger: Path | None = None) -> Recheck:
    """Re-derive entry ``name``'s verdicts from ``ledger`` (default the committed one) and
    compare them with its filed verdict rows."""
    from . import common
    from .plotting import plt
    from .verdicts import claim_key, verdicts_of
    ledger = Path(ledger or ledger_dir())
    rows = filed_verdicts(ledger)
    rows = rows[rows.entry == name]
    result = Recheck(name, {claim_key(r.claim, r.scope): r.verdict for r in rows.itertuples()})
    estimates = {claim_key(r.claim, r.scope): float(r.estimate) if r.estimate else math.nan
                 for r in rows.itertuples()}
    mod = importlib.import_module(ENTRIES[name])
    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch.dict(os.environ, {"FEDTOOLKIT_LEDGER": str(ledger)}), \
            contextlib.redirect_stdout(io.StringIO()):
        try:
            cfg = common.parse_config(mod, ["--plot-only", "--from-ledger", "--quiet",
                                            "--out", f"{tmp}/out", "--figures", f"{tmp}/fig"])
            lines, _ = common.check_and_plot(mod, cfg, common.execute(mod, cfg))
        except (common.EntryError, ValueError, KeyError, OSError) as exc:
            result.failure = " ".join(f"{type(exc).__name__}: {exc}".split())
            return result
        finally:
            plt.close("all")
    for v in verdicts_of(lines):
        result.now[v.key] = v.label
        result.drift = max(result.drift, _relative(estimates.get(v.key, math.nan), v.estimate))
    return result


def main(argv=None) -> int:
    from .rerun import ProfileError, filed, select
    ap = argparse.ArgumentParser(prog="python -m reproduce recheck",
                                 description="Re-derive every filed entry's verdicts from the "
                                             "committed ledger alone and hold them to the "
                                             "filed ones (exit 1 if any differ).")
    ap.add_argument("entries", nargs="*", help="filed entries (default: all, or --paper's)")
    ap.add_argument("--paper", action="append", default=[],
                    help="this paper's filed entries (repeatable)")
    ap.add_argument("--ledger", default=None, help="the ledger folder (default docs/ledger/, "
                    "or $FEDTOOLKIT_LEDGER)")
    args = ap.parse_args(argv)
    ledger = Path(args.ledger) if args.ledger else ledger_dir()
    try:
        names = select(filed(ledger), args.paper, args.entries)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bad = 0
    for name in names:
        result = recheck(name, ledger)
        bad += not result.ok
        print(result.line(), flush=True)
    print(f"{len(names) - bad} of {len(names)} filed entries re-derive their filed verdicts "
          "from the ledger alone")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m reproduce``: list every entry (or ``python -m reproduce NAME [flags]`` to run one;
``python -m reproduce ledger ENTRY ...`` files entries' saved runs into the results ledger,
``python -m reproduce report`` writes the report and the docs' claims tables from it,
``python -m reproduce rerun`` reruns the filed entries from their ledger commands,
``python -m reproduce recheck`` re-derives their verdicts from the ledger alone)."""
from __future__ import annotations

import importlib
import sys

from . import ENTRIES
from .common import main as run_entry


def listing() -> str:
    rows = [("entry", "reproduces", "what", "CPU default here")]
    for name, module in ENTRIES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:  # an entry that cannot load is reported, not hidden
            rows.append((name, "?", f"cannot import: {exc}", "-"))
            continue
        rows.append((name, f"{mod.PAPER} {mod.TARGET}", mod.TITLE, mod.DEFAULT_COST))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append("")
    lines.append("Run one: python -m reproduce.NAME [--full] [--seeds N] [--rounds T] [--data-dir DIR]"
                 " [--device cuda] [--out DIR] [--figures DIR] [--plot-only]; --help lists all flags.")
    lines.append("File its saved run into the results ledger: python -m reproduce ledger NAME ...; "
                 "the report and the docs' claims tables: python -m reproduce report; rerun "
                 "the filed entries from their ledger commands: python -m reproduce rerun "
                 "[--paper P] [--dry-run]; re-derive their verdicts from the ledger alone: "
                 "python -m reproduce recheck [--paper P].")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-l", "--list", "list", "-h", "--help", "help"):
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    if name == "ledger":
        from .ledger import main as ledger_main
        return ledger_main(rest)
    if name == "report":
        from .report import main as report_main
        return report_main(rest)
    if name == "rerun":
        from .rerun import main as rerun_main
        return rerun_main(rest)
    if name == "recheck":
        from .recheck import main as recheck_main
        return recheck_main(rest)
    if name not in ENTRIES:
        print(f"error: unknown entry {name!r}; python -m reproduce lists them", file=sys.stderr)
        return 2
    return run_entry(importlib.import_module(ENTRIES[name]), rest)


if __name__ == "__main__":
    raise SystemExit(main())

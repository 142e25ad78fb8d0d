"""``python -m reproduce rerun``: the committed set, rerun from the commands its ledger rows
were filed from.

Every filed entry's record (``docs/ledger/entries/ENTRY.json``) holds the command its rows came
from. This profile runs those commands one after another, for every filed entry or for one
paper's (``--paper Fed-EF|FedLADA|FedAda2|Fed-LAMB``) or for named entries, so rerunning it
reproduces the ledger on the current code:

- ``--plot-only`` and ``--from-ledger`` are dropped (the profile computes), and so is
  ``--reuse-stale`` unless this command is given it (by default nothing computed by other code
  is read back);
- every step is resumable (engine runs checkpoint; sweep and tuning cells persist under the
  entries' results folders), so an interrupted profile is continued by running it again;
- ``--dry-run`` prints the commands; ``--ledger`` files each entry after its run
  (``python -m reproduce ledger ENTRY``); each step prints the CPU and wall time it took;
- every command is parsed by its entry's own argument parser before any step runs: a record
  that no longer parses is a one-line error, not a failure an hour in.

The measured cost of each paper's set is in its results doc (FedLADA: ``docs/
fedlada_results.md``, "the committed profile"; FedAda2: ``docs/fedada2_results.md``; Fed-LAMB
and Fed-EF: ``docs/fedlamb_results.md``, ``docs/fedef_results.md``).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from . import ENTRIES
from .ledger import entry_record, ledger_dir

#: flags of a filing that read saved results instead of computing them
READ_BACK = ("--plot-only", "--from-ledger")


class ProfileError(Exception):
    """A one-line error for the command line."""


def _key(paper: str) -> str:
    return "".join(ch for ch in paper.lower() if ch.isalnum())


def filed(ledger: Path | None = None) -> dict[str, dict]:
    """``{entry: record}`` for every entry filed in the ledger, in the registry's order."""
    folder = Path(ledger or ledger_dir())
    records = {}
    for path in sorted((folder / "entries").glob("*.json")):
        try:
            records[path.stem] = entry_record(path.stem, folder)
        except (OSError, ValueError) as exc:
            raise ProfileError(f"{path}: not a ledger record ({exc})") from None
    order = {name: i for i, name in enumerate(ENTRIES)}
    return {k: records[k] for k in sorted(records, key=lambda k: (order.get(k, len(order)), k))}


def profile_argv(record: dict, reuse_stale: bool = False) -> list[str]:
    """The entry's flags from its record's command, without the read-back flags (and without
    ``--reuse-stale`` unless ``reuse_stale``)."""
    words = shlex.split(record["command"])
    head = ["python3", "-m", f"reproduce.{record['entry']}"]
    if words[:3] != head:
        raise ProfileError(f"{record['entry']}: its filed command does not start with "
                           f"{' '.join(head)!r}: {record['command']!r}")
    drop = set(READ_BACK) | (set() if reuse_stale else {"--reuse-stale"})
    argv = [w for w in words[3:] if w not in drop]
    if reuse_stale and "--reuse-stale" not in argv:
        argv.append("--reuse-stale")
    return argv


def check_parses(entry: str, argv: list[str]) -> None:
    """Parse ``argv`` with the entry's own parser (no work done): a one-line
    :class:`ProfileError` if it does not."""
    from .common import _parser
    mod = importlib.import_module(ENTRIES[entry])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _, extra = _parser(mod, mod.Config).parse_known_args(argv)
    except SystemExit:
        last = (err.getvalue().strip().splitlines() or ["does not parse"])[-1]
        raise ProfileError(f"{entry}: its filed command does not parse: {last}") from None
    if extra:
        raise ProfileError(f"{entry}: its filed command does not parse: unrecognized "
                           f"arguments {' '.join(extra)!r} (a value with spaces filed unquoted? "
                           f"re-file the entry)")


def select(records: dict[str, dict], papers=(), entries=()) -> list[str]:
    """The entries of ``papers`` (names as the ledger spells them, any case or hyphenation)
    and the named ``entries``; every filed entry when both are empty."""
    known = {_key(r.get("paper", "")): r.get("paper", "") for r in records.values()}
    for p in papers:
        if _key(p) not in known:
            raise ProfileError(f"--paper {p!r}: no filed entry; one of "
                               f"{', '.join(sorted(set(known.values())))}")
    unknown = [e for e in entries if e not in records]
    if unknown:
        raise ProfileError(f"not filed in the ledger: {', '.join(unknown)} (filed: "
                           f"{', '.join(records)})")
    want = {_key(p) for p in papers}
    if not want and not entries:
        return list(records)
    return [e for e, r in records.items() if e in entries or _key(r.get("paper", "")) in want]


def steps(papers=(), entries=(), reuse_stale=False, out=None, ledger=None):
    """``[(entry, argv)]`` of the profile, every command checked to parse."""
    records = filed(ledger)
    chosen = select(records, papers, entries)
    plan = []
    for entry in chosen:
        argv = profile_argv(records[entry], reuse_stale)
        if out:
            argv += ["--out", str(out)]
        check_parses(entry, argv)
        plan.append((entry, argv))
    return plan


def _cpu_children() -> float:
    t = os.times()
    return t.children_user + t.children_system


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce rerun",
                                 description=__doc__.split("\n\n")[0].replace("``", ""))
    ap.add_argument("entries", nargs="*", help="filed entries to rerun (default: all, or "
                    "--paper's)")
    ap.add_argument("--paper", action="append", default=[],
                    help="rerun this paper's filed entries (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--ledger", action="store_true", help="file each entry after its run")
    ap.add_argument("--reuse-stale", action="store_true",
                    help="pass --reuse-stale: read back cells computed by other code")
    ap.add_argument("--out", default=None, help="results folder (default the entries')")
    args = ap.parse_args(argv)
    try:
        plan = steps(args.paper, args.entries, args.reuse_stale, args.out)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for entry, flags in plan:
        cmd = [sys.executable, "-m", f"reproduce.{entry}", *flags]
        print(f"python3 {shlex.join(cmd[1:])}", flush=True)
        if args.dry_run:
            continue
        cpu0, wall0 = _cpu_children(), time.monotonic()
        rc = subprocess.call(cmd)
        print(f"{entry}: {_cpu_children() - cpu0:,.0f} CPU-s, "
              f"{(time.monotonic() - wall0) / 60:.1f} min of wall", flush=True)
        if rc != 0:
            print(f"error: {entry} exited {rc}; rerun this profile to continue",
                  file=sys.stderr)
            return rc
        if args.ledger:
            filing = [sys.executable, "-m", "reproduce", "ledger", entry]
            rc = subprocess.call(filing + (["--out", args.out] if args.out else []))
            if rc != 0:
                return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

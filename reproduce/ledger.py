"""The results ledger: every number behind a committed figure or docs line, as tidy CSV under
``docs/ledger/``, rebuilt from an entry's saved results without rerunning anything.

An entry run (:func:`reproduce.common.main`) leaves, beside its results,
``OUT/ENTRY/ledger/verdicts.json`` (its verdicts with their regime cards and evidence, the
command, settings, seeds, code digest, commit and the figures it drew) and
``OUT/ENTRY/ledger/checked.csv.gz`` (the tidy table its check and figures read)
(:func:`record`).
``python -m reproduce ledger ENTRY ...`` (:func:`build`) files them into the ledger:

The three tables are kept one file per entry (``docs/ledger/verdicts/ENTRY.csv``, likewise
``values/`` and ``figures/``), so entries rerun apart (on different branches, by different
people) never touch each other's rows; :func:`verdicts`, :func:`values` and :func:`figures`
read them as one table each.

``verdicts``
    one row per (entry, claim, scope): ``paper``, ``claim``, ``scope``, ``entry``,
    ``statement``, ``verdict`` (a label of :data:`reproduce.verdicts.LABELS`), ``definition``,
    the statistic (``estimate``, ``lo``, ``hi``, ``unit``, ``scale``), ``n_seeds``, ``seeds``,
    ``seeds_needed``, ``rule``, ``reason``, ``protocol``, ``card_ok``, ``card``, ``command``,
    ``settings`` (JSON), ``rounds``, ``code_digest``, ``commit``, ``date``, ``figures``;
``values``
    tidy, one row per number: ``entry, paper, claim, scope, kind, name, seed, value, paper_value,
    tolerance, ok, source`` with ``kind`` one of ``card`` (a regime-card item: paper value,
    measured value, tolerance), ``evidence`` (the per-seed values a verdict rests on) and
    ``final`` (every run's final value of every metric, per seed; ``name`` = ``RUN:METRIC``,
    or ``RUN [KEY=VALUE, ...]:METRIC`` where run names recur across panels, :func:`final_rows`);
``figures``
    every figure an entry drew for the ledger, with the sha256 of the committed file;
``docs/ledger/entries/ENTRY.json`` and ``docs/ledger/curves/ENTRY.csv.gz``
    the run's record (config, command, provenance) and the table it checked and drew, so
    ``python -m reproduce.ENTRY --plot-only --from-ledger`` redraws its figures and prints its
    verdicts from the committed ledger alone.

The docs' claim tables, the README's summary and the report (:mod:`reproduce.report`) are
generated from these files; ``tests/test_ledger.py`` fails when a committed figure, a docs
block or a README block disagrees with them. A ``--tiny`` run is never filed into the
committed ledger (``--allow-tiny`` only with another ``--ledger`` folder, for tests).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import shlex
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "docs" / "ledger"


def ledger_dir() -> Path:
    """The ledger folder: ``docs/ledger/``, or ``$FEDTOOLKIT_LEDGER`` (tests, scratch ledgers)."""
    import os
    return Path(os.environ.get("FEDTOOLKIT_LEDGER") or LEDGER)

VERDICT_COLUMNS = ("paper", "claim", "scope", "entry", "statement", "verdict", "definition",
                   "what", "estimate", "lo", "hi", "unit", "scale", "n_seeds", "seeds",
                   "seeds_needed", "rule", "reason", "protocol", "card_ok", "card", "command",
                   "settings", "rounds", "code_digest", "commit", "date", "figures", "line")
VALUE_COLUMNS = ("entry", "paper", "claim", "scope", "kind", "name", "seed", "value",
                 "paper_value", "tolerance", "ok", "source")
FIGURE_COLUMNS = ("entry", "figure", "sha256", "code_digest", "commit")


class LedgerError(ValueError):
    """A one-line error about the ledger or an entry's saved verdicts."""


# ------------------------------------------------------------------------------ recording
def _rel(path) -> str:
    p = Path(path).resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return str(p)


def _gz_csv(df: pd.DataFrame) -> bytes:
    """The checked table as gzipped CSV, floats at full precision (the shortest text that reads
    back to the same float): ``--from-ledger`` re-derives the filed verdicts from it, and a check
    at a tolerance of 1e-9 (the probes' recovered constants) flipped on 8 significant digits."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as fh:   # same bytes for same data
        fh.write(df.to_csv(index=False).encode())
    return buf.getvalue()


def record(entry, cfg, argv, df: pd.DataFrame, lines, paths) -> Path:
    """Save what an entry run checked and drew beside its results (``verdicts.json`` and
    ``checked.csv.gz`` in ``OUT/ENTRY/ledger``, written atomically; see the module
    docstring)."""
    from sims.store.identity import code_identity
    from sims.store.results import atomic_write_bytes

    from . import common
    from .verdicts import text, verdicts_of
    folder = common.results_dir(entry, cfg) / "ledger"
    name = common.entry_name(entry)
    table = _gz_csv(df)
    ident = code_identity()
    found = verdicts_of(lines)
    claims = getattr(entry, "CLAIMS", {})
    rec = {"entry": name, "paper": entry.PAPER, "target": entry.TARGET, "title": entry.TITLE,
           "command": shlex.join(["python3", "-m", f"reproduce.{name}", *map(str, argv)]),
           "config": _json(cfg.run_key()), "tiny": bool(cfg.tiny), "full": bool(cfg.full),
           "seeds": list(cfg.seed_list), "rounds": int(cfg.rounds),
           "runs": [r.name for r in entry.runs(cfg)],
           "code_digest": ident["code_digest"], "commit": ident["commit"],
           "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "figures": [_rel(p) for p in paths if str(p).endswith(".png")],
           "checked": {"file": "checked.csv.gz", "rows": int(len(df)),
                       "sha256": hashlib.sha256(table).hexdigest()},
           "verdicts": [{**v.row(), "statement": getattr(claims.get(v.claim), "statement", ""),
                         "card_items": v.card.rows() if v.card is not None else [],
                         "evidence": {str(s): x for s, x in zip(v.seeds, v.values)}}
                        for v in found],
           "check": text(lines)}
    atomic_write_bytes(folder / "checked.csv.gz", table)
    atomic_write_bytes(folder / "verdicts.json", json.dumps(rec, indent=1, default=str).encode())
    return folder / "verdicts.json"


def _json(obj):
    return json.loads(json.dumps(obj, default=str))


def read_record(folder: Path) -> tuple[dict, pd.DataFrame]:
    """An entry's saved ``ledger/verdicts.json`` and its checked table (checksum verified);
    ``folder`` is ``OUT/ENTRY``."""
    folder = Path(folder) / "ledger"
    path = folder / "verdicts.json"
    if not path.exists():
        raise LedgerError(f"{path}: no saved verdicts; run the entry first (python -m "
                          f"reproduce.{Path(folder).parent.name} ...)")
    try:
        rec = json.loads(path.read_text())
    except ValueError:
        raise LedgerError(f"{path}: not JSON; rerun the entry") from None
    data = (Path(folder) / "checked.csv.gz").read_bytes()
    if hashlib.sha256(data).hexdigest() != rec.get("checked", {}).get("sha256"):
        raise LedgerError(f"{folder}/checked.csv.gz does not match its record verdicts.json "
                          "(edited or from another run); rerun the entry")
    return rec, pd.read_csv(io.BytesIO(data), compression="gzip", low_memory=False)


# ------------------------------------------------------------------------------ reading
TABLES = {"verdicts": VERDICT_COLUMNS, "values": VALUE_COLUMNS, "figures": FIGURE_COLUMNS}


def read_table(name: str, ledger: Path | None = None) -> pd.DataFrame:
    """Ledger table ``name`` (``verdicts``, ``values``, ``figures``): every entry's file of
    it, as one table of strings (as committed), in a fixed order."""
    columns = list(TABLES[name])
    folder = Path(ledger or ledger_dir()) / name
    parts = [pd.read_csv(p, dtype=str, keep_default_na=False)
             for p in sorted(folder.glob("*.csv"))] if folder.is_dir() else []
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=columns)
    return _sorted(pd.concat(parts, ignore_index=True), columns)


def verdicts(ledger: Path | None = None) -> pd.DataFrame:
    """The ledger's verdict rows (all strings, as committed)."""
    return read_table("verdicts", ledger)


def values(ledger: Path | None = None) -> pd.DataFrame:
    return read_table("values", ledger)


def figures(ledger: Path | None = None) -> pd.DataFrame:
    return read_table("figures", ledger)


def entry_record(name: str, ledger: Path | None = None) -> dict | None:
    path = Path(ledger or ledger_dir()) / "entries" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _no_results(name: str, ledger: Path):
    from . import common
    return common.EntryError(f"--from-ledger: the ledger ({_rel(ledger)}) has no results of "
                             f"{name}; run it, then python -m reproduce ledger {name}")


def _entry_record_or_error(entry, ledger: Path | None = None) -> dict:
    """``--from-ledger``: the entry's filed record, or a one-line :class:`EntryError`."""
    from . import common
    name = common.entry_name(entry)
    ledger = Path(ledger or ledger_dir())
    rec = entry_record(name, ledger)
    if rec is None:
        raise _no_results(name, ledger)
    return rec


def filed_runs(entry, ledger: Path | None = None) -> list[str] | None:
    """``--from-ledger``: the runs the filed check was made for (the record's ``runs``),
    without building them: a tuned entry's run list needs its tuning cells, which the ledger
    does not carry. None for a record filed before runs were recorded: its table's runs stand
    for them (every such record was filed from a complete run: none of their checks names a
    missing run)."""
    runs = _entry_record_or_error(entry, ledger).get("runs")
    return None if runs is None else list(runs)


def filed_block(entry, heading: str, family: str | None = None,
                ledger: Path | None = None) -> list[str]:
    """``--from-ledger``: what the filed check printed under ``heading``, for a table it made
    from work the ledger does not carry (a tuning's cells): the first line ending with
    ``heading`` (a caller may prefix it) and the two-space-indented lines below it, as
    ``[heading, *lines]``. A record filed while the heading read otherwise: the one line
    containing ``family`` (the heading's stable start), as filed. [] where there is none."""
    lines = _entry_record_or_error(entry, ledger).get("check", "").splitlines()
    at = [i for i, line in enumerate(lines) if line.endswith(heading)]
    if at:
        block = [heading]
    else:
        at = [i for i, line in enumerate(lines) if family and family in line]
        if len(at) != 1:
            return []
        block = [lines[at[0]]]
    for below in lines[at[0] + 1:]:
        if not below.startswith("  ") or below.startswith("   "):
            break
        block.append(below)
    return block


def filed_table(name: str, ledger: Path | None = None) -> tuple[dict, pd.DataFrame] | None:
    """Entry ``name``'s filed record and the table its ledger rows were checked on (its
    committed curves, checksum verified: :class:`LedgerError` if they differ), or None where
    the ledger has none."""
    ledger = Path(ledger or ledger_dir())
    path = ledger / "curves" / f"{name}.csv.gz"
    rec = entry_record(name, ledger)
    if rec is None or not path.exists():
        return None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != rec["checked"]["sha256"]:
        raise LedgerError(f"{_rel(path)} does not match its record; rebuild it with python -m "
                          f"reproduce ledger {name}")
    return rec, pd.read_csv(io.BytesIO(data), compression="gzip", low_memory=False)


def load_results(entry, ledger: Path | None = None) -> pd.DataFrame:
    """``--plot-only --from-ledger``: the table an entry's ledger rows were checked on."""
    from . import common
    name = common.entry_name(entry)
    ledger = Path(ledger or ledger_dir())
    try:
        filed = filed_table(name, ledger)
    except LedgerError as exc:
        raise common.EntryError(f"--from-ledger: {exc}") from None
    if filed is None:
        raise _no_results(name, ledger)
    return filed[1]


def apply_config(entry, cfg, ledger: Path | None = None) -> None:
    """Set ``cfg`` to the settings the ledger's results of ``entry`` were computed with (the
    output folders and execution flags stay as given)."""
    import dataclasses

    from . import common
    rec = _entry_record_or_error(entry, ledger)
    fields = {f.name for f in dataclasses.fields(cfg)}
    for key, val in rec["config"].items():
        if key in fields and key not in common.PLACE_FIELDS:
            setattr(cfg, key, val)


# ------------------------------------------------------------------------------ building
def _values_rows(rec: dict, df: pd.DataFrame) -> list[dict]:
    rows = []
    base = {"entry": rec["entry"], "paper": rec["paper"]}
    for v in rec["verdicts"]:
        key = {**base, "claim": v["claim"], "scope": v["scope"]}
        for item in v.get("card_items", []):
            rows.append({**key, "kind": "card", "name": item["item"], "seed": "",
                         "value": item["measured"], "paper_value": item["paper"],
                         "tolerance": item["tolerance"], "ok": item["ok"],
                         "source": item["source"]})
        for seed, x in v.get("evidence", {}).items():
            rows.append({**key, "kind": "evidence", "name": v["what"], "seed": seed,
                         "value": _num(x), "paper_value": "", "tolerance": "", "ok": "",
                         "source": v["definition"]})
    return rows + final_rows(base, df)


#: The columns of a tidy table that are not what tells one run's rows from another's.
_MEASURED = ("run", "seed", "round", "metric", "value", "diverged_at")
#: Columns that name a run's part for a reader (a sweep point's settings, its sweep), tried
#: before the others (hashes, flags) when one column tells the rows apart.
_READABLE = ("label", "sweep", "setting")


def run_keys(df: pd.DataFrame) -> list[str]:
    """The columns beside ``run`` that tell apart rows sharing ``(run, seed, metric, round)``
    (a run name repeated across panels, sweeps or protocols): the fewest, in the table's
    column order, that make those rows unique; ``[]`` where ``run`` alone does."""
    key = ["run", "seed", "metric", "round"]
    if not df.duplicated(key).any():
        return []
    dup = df[df.duplicated(key, keep=False)]
    groups = dup.groupby(key, dropna=False, sort=False)
    vary = [c for c in df.columns if c not in _MEASURED
            and (groups[c].nunique(dropna=False) > 1).any()]
    vary.sort(key=lambda c: c not in _READABLE)     # a readable name first where one does
    for c in vary:                          # one column that tells them apart, if any does
        if not df.duplicated(key + [c]).any():
            return [c]
    out = []
    for c in vary:                          # else the columns in order until they do
        out.append(c)
        if not df.duplicated(key + out).any():
            return out
    raise LedgerError("the checked table has rows that no column tells apart (the same run, "
                      "seed, metric and round twice)")


def final_rows(base: dict, df: pd.DataFrame) -> list[dict]:
    """The ``final`` rows of the values table: every run's last value of every metric, per
    seed, named ``RUN:METRIC``; where run names recur across panels or sweeps, every run is
    named ``RUN [KEY=VALUE, ...]:METRIC`` with the columns that tell them apart
    (:func:`run_keys`; a key a row leaves empty is not named)."""
    if not ({"run", "seed", "round", "metric", "value"} <= set(df.columns) and len(df)):
        return []
    keys = run_keys(df)
    last = df.sort_values("round", kind="stable").groupby(
        ["run", *keys, "seed", "metric"], sort=True, dropna=False).tail(1)
    rows = []
    for r in last.to_dict("records"):
        if r["metric"] in ("wall_time",):
            continue
        where = ", ".join(f"{k}={_num(r[k]) if isinstance(r[k], float) else r[k]}"
                          for k in keys if not pd.isna(r[k]) and str(r[k]) != "")
        run = f"{r['run']} [{where}]" if where else str(r["run"])
        rows.append({**base, "claim": "", "scope": "", "kind": "final",
                     "name": f"{run}:{r['metric']}", "seed": str(r["seed"]),
                     "value": _num(r["value"]), "paper_value": "", "tolerance": "",
                     "ok": "", "source": f"round {r['round']}"})
    return rows


def _num(x) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    return "" if not math.isfinite(x) and math.isnan(x) else f"{x:.8g}"


def _verdict_rows(rec: dict) -> list[dict]:
    rows = []
    for v in rec["verdicts"]:
        row = {k: v.get(k, "") for k in VERDICT_COLUMNS}
        row.update(entry=rec["entry"], command=rec["command"],
                   settings=json.dumps(rec["config"], sort_keys=True),
                   rounds=rec["rounds"], code_digest=rec["code_digest"],
                   commit=rec["commit"], date=rec["date"], figures=" ".join(rec["figures"]))
        for k in ("estimate", "lo", "hi", "scale"):
            row[k] = _num(row[k])
        rows.append(row)
    return rows


def write_file(path: Path, data: bytes) -> None:
    """A committed file (atomically, readable by all: ``0644``)."""
    import os

    from sims.store.results import atomic_write_bytes
    atomic_write_bytes(path, data)
    os.chmod(path, 0o644)


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    write_file(path, df.to_csv(index=False).encode())


def ensure(ledger: Path | None = None) -> Path:
    """The ledger folder with its per-entry table folders."""
    ledger = Path(ledger or ledger_dir())
    for sub in ("entries", "curves", *TABLES):
        (ledger / sub).mkdir(parents=True, exist_ok=True)
    return ledger


def _sorted(df: pd.DataFrame, columns) -> pd.DataFrame:
    sort = [c for c in ("paper", "entry", "claim", "scope", "kind", "name", "seed", "figure")
            if c in df.columns]
    return df.sort_values(sort, kind="stable").reset_index(drop=True)[list(columns)]


def _write_table(name: str, entry: str, rows: list[dict], ledger: Path) -> None:
    """Entry ``entry``'s rows of table ``name``, replacing what it had."""
    columns = TABLES[name]
    frame = pd.DataFrame(rows, columns=list(columns)).astype(str).replace({"nan": ""})
    _write_csv(_sorted(frame, columns), ledger / name / f"{entry}.csv")


def file_entry(name: str, folder: Path, ledger: Path | None = None, allow_tiny: bool = False,
               say=print) -> dict:
    """File one entry's saved run (``folder`` = ``OUT/ENTRY``) into the ledger."""
    rec, df = read_record(folder)
    if rec["entry"] != name:
        raise LedgerError(f"{folder}/verdicts.json is {rec['entry']}'s, not {name}'s")
    if rec.get("tiny") and not allow_tiny:
        raise LedgerError(f"{name}: the saved run is a --tiny smoke run; the ledger records "
                          "real runs only (rerun without --tiny)")
    ledger = ensure(ledger)
    data = (Path(folder) / "ledger" / "checked.csv.gz").read_bytes()
    write_file(ledger / "curves" / f"{name}.csv.gz", data)
    entry_rec = {k: v for k, v in rec.items() if k not in ("verdicts",)}
    write_file(ledger / "entries" / f"{name}.json",
               json.dumps(entry_rec, indent=1, sort_keys=True).encode())
    _write_table("verdicts", name, _verdict_rows(rec), ledger)
    _write_table("values", name, _values_rows(rec, df), ledger)
    figs = []
    for fig in rec["figures"]:
        path = ROOT / fig if not Path(fig).is_absolute() else Path(fig)
        if not path.exists():
            raise LedgerError(f"{name}: its figure {fig} is gone; rerun the entry (or "
                              "--plot-only) to redraw it")
        figs.append({"entry": name, "figure": fig,
                     "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                     "code_digest": rec["code_digest"], "commit": rec["commit"]})
    _write_table("figures", name, figs, ledger)
    say(f"ledger: {name}: {len(rec['verdicts'])} verdict(s), {len(figs)} figure(s) from "
        f"{_rel(folder)} (code {rec['code_digest']}, commit {rec['commit'][:12]})")
    return rec


def refresh_finals(ledger: Path | None = None, say=print) -> list[str]:
    """Rewrite every filed entry's ``final`` values rows from its committed curves (the table
    it was checked on), its other rows as they are: the rows :func:`file_entry` writes now,
    without rerunning (``python -m reproduce ledger --refresh-finals``). Returns the entries
    whose rows changed."""
    ledger = Path(ledger or ledger_dir())
    changed = []
    for path in sorted((ledger / "curves").glob("*.csv.gz")):
        name = path.name[:-len(".csv.gz")]
        values_path = ledger / "values" / f"{name}.csv"
        filed = filed_table(name, ledger) if values_path.exists() else None
        if filed is None:
            continue
        rec, df = filed
        kept = pd.read_csv(values_path, dtype=str, keep_default_na=False)
        kept = kept[kept.kind != "final"].to_dict("records")
        rows = kept + final_rows({"entry": name, "paper": rec["paper"]}, df)
        before = values_path.read_bytes()
        _write_table("values", name, rows, ledger)
        if values_path.read_bytes() != before:
            changed.append(name)
            say(f"ledger: {name}: final values rewritten from {_rel(path)}")
    return changed


def build(names, out: Path, ledger: Path | None = None, allow_tiny: bool = False,
          docs: bool = True, say=print) -> None:
    """``python -m reproduce ledger``: file each entry's saved run from ``out`` into the
    ledger, then regenerate the docs' blocks and the report from it."""
    from . import ENTRIES
    bad = [n for n in names if n not in ENTRIES]
    if bad:
        raise LedgerError(f"unknown entr{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)}; "
                          "python -m reproduce lists them")
    ledger = Path(ledger or ledger_dir())
    for name in names:
        file_entry(name, Path(out) / name, ledger, allow_tiny, say)
    if docs and ledger.resolve() == LEDGER.resolve():   # the docs follow the committed ledger
        from . import report
        for path in report.update_docs(ledger):
            say(f"updated {_rel(path)}")


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m reproduce ledger",
                                description="File entries' saved runs into the results ledger "
                                            "(docs/ledger/) and regenerate the docs from it.")
    p.add_argument("entries", nargs="*", help="entries whose saved runs to file (none: only "
                   "regenerate the docs from the ledger)")
    p.add_argument("--out", default=str(ROOT / "results"),
                   help="where the runs saved their results (default results/)")
    p.add_argument("--ledger", default=None, help="the ledger folder (default docs/ledger/, "
                   "or $FEDTOOLKIT_LEDGER)")
    p.add_argument("--allow-tiny", action="store_true",
                   help="file --tiny runs (tests; never into the committed ledger)")
    p.add_argument("--no-docs", action="store_true", help="leave the docs as they are")
    p.add_argument("--refresh-finals", action="store_true",
                   help="first rewrite every filed entry's final values rows from its committed "
                        "curves (no rerun)")
    args = p.parse_args(argv)
    try:
        ledger = Path(args.ledger) if args.ledger else ledger_dir()
        if args.allow_tiny and ledger.resolve() == LEDGER.resolve():
            raise LedgerError("--allow-tiny needs another --ledger folder: --tiny runs never "
                              "enter the committed ledger")
        if args.refresh_finals:
            refresh_finals(ledger)
        build(args.entries, Path(args.out), ledger, args.allow_tiny, docs=not args.no_docs)
    except (LedgerError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=__import__("sys").stderr)
        return 2
    return 0

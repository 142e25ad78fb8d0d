"""``python -m sims.results``: the saved runs of a results folder (:mod:`sims.store.listing`).

::

    python -m sims.results ls results/compare --filter algorithm=fed* --filter current=yes
    python -m sims.results ls results/sweeps/NAME --in-flight     # a long sweep's progress
    python -m sims.results pack results runs.tar.gz --filter path=sweeps/NAME/*
    python -m sims.results unpack runs.tar.gz results             # on another machine

``pack`` / ``unpack`` carry finished runs between machines (:mod:`sims.store.carry`): a long
sweep resumed on a fresh machine reuses the cells another one finished.
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sims.results",
                                description="The saved runs of a results folder.")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("ls", help="list the saved runs under a folder as a table")
    ls.add_argument("folder", nargs="?", default="results",
                    help="results folder, searched recursively (default %(default)s)")
    ls.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                    help="keep runs whose column or dotted record key (config.n_clients, "
                         "algorithm.eta_l) matches the shell-style pattern VALUE (repeatable)")
    ls.add_argument("--in-flight", action="store_true",
                    help="also list runs checkpointed mid-way (kind 'in flight', rounds done)")
    ls.add_argument("--sort", default="path", help="column to sort by (default %(default)s)")
    ls.add_argument("--format", default="table", choices=("table", "csv", "json"))
    ls.add_argument("--import", dest="imports", action="append", default=[],
                    metavar="MODULE", help="plug-in module whose source counts in the "
                    "'current' column, as in the run that saved them (repeatable)")
    pk = sub.add_parser("pack", help="write the finished runs under a folder to a gzipped "
                        "tar (checkpoints of unfinished runs are not carried)")
    pk.add_argument("folder", help="results folder, searched recursively")
    pk.add_argument("archive", help="the .tar.gz to write")
    pk.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                    help="keep runs matching, as for ls (repeatable)")
    up = sub.add_parser("unpack", help="put the runs of a packed archive under a folder "
                        "(never replaces a file already there)")
    up.add_argument("archive", help="a .tar.gz written by pack")
    up.add_argument("folder", help="results folder to put them under")
    return p


def _carry(args) -> int:
    from ..store.carry import pack, unpack
    from ..store.listing import parse_filters
    if args.command == "pack":
        n = pack(args.folder, args.archive, parse_filters(args.filter))
        print(f"packed {n} run(s) from {args.folder} into {args.archive}")
    else:
        c = unpack(args.archive, args.folder)
        print(f"unpacked {args.archive} into {args.folder}: {c['added']} run(s) added, "
              f"{c['already']} already there, {c['kept']} kept as they were (a different "
              "result already there)")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from ..plugins import PluginError, import_modules
    from ..store.carry import CarryError
    from ..store.listing import COLUMNS, ListingError, parse_filters, table
    from ..store.results import ResultsError
    if args.command in ("pack", "unpack"):
        try:
            return _carry(args)
        except (CarryError, ListingError, ResultsError) as exc:
            print(f"python -m sims.results {args.command}: error: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        except OSError as exc:
            from ..store.results import os_error_text
            print(f"python -m sims.results {args.command}: error: {os_error_text(exc)}",
                  file=sys.stderr)
            return 2
    try:
        if args.imports:
            import_modules(args.imports)
        if args.sort not in COLUMNS:
            raise ListingError(f"--sort {args.sort}: not a column; choose one of "
                               f"{', '.join(COLUMNS)}")
        df = table(args.folder, parse_filters(args.filter), include_in_flight=args.in_flight)
    except (ListingError, PluginError) as exc:
        print(f"python -m sims.results: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    df = df.sort_values(args.sort, kind="stable", na_position="last")
    if args.format == "csv":
        sys.stdout.write(df.to_csv(index=False))
    elif args.format == "json":
        sys.stdout.write(df.to_json(orient="records", indent=1) + "\n")
    elif df.empty:
        print(f"no saved runs under {args.folder}"
              + (" match the filters" if args.filter else ""))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_columns", 20,
                               "display.max_colwidth", 60):
            print(df.to_string(index=False))
        print(f"{len(df)} run(s)")
    return 0

"""``python -m theory [--format table|json|markdown] [--paper NAME]``: print the symbolic audit."""

from __future__ import annotations

import argparse
import sys

from .core import PAPERS, run_all
from .report import RENDERERS

ALIASES = {p.replace("-", "_"): p for p in PAPERS} | {p.replace("-", ""): p for p in PAPERS} | {p: p for p in PAPERS}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m theory", description="Symbolic audit of the four papers' convergence bounds.")
    ap.add_argument("--format", choices=sorted(RENDERERS), default="table", help="output format (default: table)")
    ap.add_argument("--paper", choices=sorted(ALIASES), default=None, metavar="NAME",
                    help=f"only one paper: {', '.join(PAPERS)}")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paper = ALIASES[args.paper] if args.paper else None
    sys.stdout.write(RENDERERS[args.format](run_all(paper)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

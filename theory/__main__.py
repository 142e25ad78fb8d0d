"""``python -m theory [--format table|json|markdown|readme] [--paper NAME] [--label LABEL] [--kind KIND] [--coverage]``: print the audit.

Paper names are case- and hyphen-insensitive (``Fed-EF``, ``fed_ef``, ``fedef`` all name fed-ef).
``--label`` keeps the refuted checks of one severity (rate, constant, proof, typo); ``--kind`` keeps the
paper's own claims, the textbook premises, the toolkit's derived claims or the spec's readings.  ``--coverage`` prints,
per numbered result and per paper, the fraction of the proof's displayed steps that a check evaluates (theory.steps).
"""

from __future__ import annotations

import argparse
import sys

from .core import KINDS, PAPERS, SEVERITIES, run_all
from .report import RENDERERS, coverage_json, coverage_markdown, render_coverage_table


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


PAPER_KEYS = {_key(p): p for p in PAPERS}


def paper_name(text: str) -> str:
    """Canonical paper id of a user's spelling (argparse type)."""
    try:
        return PAPER_KEYS[_key(text)]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown paper {text!r}; choose from {', '.join(PAPERS)}") from None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m theory", description="Symbolic audit of the four papers' convergence bounds.")
    ap.add_argument("--format", choices=sorted(RENDERERS), default="table",
                    help="output format (default: table; readme = the summary block of README.md)")
    ap.add_argument("--paper", type=paper_name, default=None, metavar="NAME",
                    help=f"only one paper: {', '.join(PAPERS)} (case and hyphens ignored)")
    ap.add_argument("--label", choices=sorted(SEVERITIES), default=None,
                    help="only the refuted checks with this severity: " + "; ".join(f"{k}: {v}" for k, v in SEVERITIES.items()))
    ap.add_argument("--kind", choices=sorted(KINDS), default=None,
                    help="only one kind of claim: " + "; ".join(f"{k}: {v}" for k, v in KINDS.items()))
    ap.add_argument("--coverage", action="store_true",
                    help="print the proof-step coverage (per numbered result and per paper) instead of the checks")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.coverage:
        from .steps import coverage

        cov = coverage(args.paper)
        if args.format == "json":
            sys.stdout.write(coverage_json(cov))
        elif args.format in ("markdown", "readme"):
            sys.stdout.write("\n".join(coverage_markdown(cov)) + "\n")
        else:
            sys.stdout.write(render_coverage_table(cov))
        return 0
    sys.stdout.write(RENDERERS[args.format](run_all(args.paper, label=args.label, kind=args.kind)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

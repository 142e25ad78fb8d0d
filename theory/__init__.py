"""Symbolic audit of the convergence bounds of Fed-EF, FedLADA, FedAda2 and Fed-LAMB.

* ``theory.core``: the check registry (``check`` decorator, ``Result``, ``run_all``).
* ``theory.fed_ef``, ``theory.fedlada``, ``theory.fedada2``, ``theory.fed_lamb``: one module per paper with its
  constants, learning-rate conditions and bounds as sympy expressions, and its checks.
* ``theory.bounds``: plain-float bound evaluators for the simulator (no sympy import).
* ``python -m theory``: prints the audit (``--format table|json|markdown|readme``, ``--paper NAME``,
  ``--label rate|constant|proof|typo``, ``--kind paper|derived|spec``).

Every check computes its verdict; a refutation carries a severity label (``core.SEVERITIES``), every check a
kind (``core.KINDS``) and the checks it relies on (a verified check on a refuted step is "verified, conditional
on ..."); ``Check.corrected`` holds the correct expression with which a refuted check verifies.

Importing ``theory`` is cheap; the paper modules (and sympy) load on first use of the registry.
"""

from .core import PAPERS, Check, Result, all_checks, run_all, run_check

__all__ = ["PAPERS", "Check", "Result", "all_checks", "run_all", "run_check"]

"""Symbolic audit of the convergence bounds of Fed-EF, FedLADA, FedAda2 and Fed-LAMB.

* ``theory.core``: the check registry (``check`` decorator, ``Result``, ``run_all``).
* ``theory.fed_ef``, ``theory.fedlada``, ``theory.fedada2``, ``theory.fed_lamb``: one module per paper with its
  constants, learning-rate conditions and bounds as sympy expressions, and its checks.
* ``theory.steps``: the proof-step map: every numbered theorem, lemma, corollary and proposition of the four papers,
  its displayed steps (paper lines) and the checks that evaluate each; ``theory.replay`` evaluates a proof's displayed
  relations on seeded instances (``*_steps`` modules: the instances and step checks of each paper).
* ``theory.bounds``: plain-float bound evaluators for the simulator (no sympy import).
* ``python -m theory``: prints the audit (``--format table|json|markdown|readme``, ``--paper NAME``,
  ``--label rate|constant|proof|typo``, ``--kind paper|textbook|derived|spec``, ``--coverage`` for the per-result and
  per-paper fraction of displayed steps checked).

Every check computes its verdict; a refutation carries a severity label (``core.SEVERITIES``), every check a
kind (``core.KINDS``: the papers' own claims, textbook premises, the toolkit's derived results, the specs' readings; the
headline counts only the papers' claims) and the checks it relies on (a verified check on a refuted step is "verified, conditional
on ..."); ``Check.corrected`` holds the correct expression with which a refuted check verifies.

Importing ``theory`` is cheap; the paper modules (and sympy) load on first use of the registry.
"""

from .core import PAPERS, Check, Result, all_checks, run_all, run_check

__all__ = ["PAPERS", "Check", "Result", "all_checks", "run_all", "run_check"]

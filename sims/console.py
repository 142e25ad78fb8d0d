"""``fedtoolkit``: one console command beside the ``python -m`` forms.

::

    fedtoolkit compare --algorithms fedavg,fedadam --problem mnist-mlp   # python -m sims.compare
    fedtoolkit sweep --algorithms fed-lamb --grid eta_l=log:1e-4:0.5:9   # python -m sims.sweep
    fedtoolkit reproduce fig8 --tiny                                     # python -m reproduce fig8
    fedtoolkit reproduce                                                 # the entries
    fedtoolkit theory --paper Fed-EF                                     # python -m theory
    fedtoolkit results ls results/                                       # python -m sims.results

Each subcommand takes the flags of its ``python -m`` form (the shared ones from
:mod:`sims.cli`); ``fedtoolkit SUBCOMMAND --help`` lists them.
"""
from __future__ import annotations

import sys

COMMANDS = {
    "compare": "run algorithms on one problem, curves against rounds and bits (sims.compare)",
    "sweep": "a hyperparameter grid over algorithms and seeds, selected by a paper's rule "
             "(sims.sweep)",
    "reproduce": "list the figure entries, or run one: fedtoolkit reproduce fig8 (reproduce)",
    "theory": "the symbolic audit of the papers' bounds (theory)",
    "results": "list and filter saved runs: fedtoolkit results ls FOLDER (sims.results)",
}


def usage() -> str:
    lines = ["usage: fedtoolkit COMMAND [flags]   (fedtoolkit COMMAND --help for its flags)",
             "", "commands:"]
    lines += [f"  {name:10s} {what}" for name, what in COMMANDS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name == "compare":
        from .experiments.compare import main as run
        return run(rest, prog="fedtoolkit compare")
    if name == "sweep":
        from .experiments.sweep.cli import main as run
        return run(rest, prog="fedtoolkit sweep")
    if name == "reproduce":
        from reproduce.__main__ import main as run
        return run(rest)
    if name == "theory":
        from theory.__main__ import main as run
        return run(rest)
    if name == "results":
        import importlib
        try:
            results = importlib.import_module("sims.results")
        except ModuleNotFoundError as exc:
            if exc.name != "sims.results":
                raise
            print("fedtoolkit: error: results needs sims.results, which this installation "
                  "lacks", file=sys.stderr)
            return 2
        return results.main(rest)
    print(f"fedtoolkit: error: unknown command {name!r}; choose one of "
          f"{', '.join(COMMANDS)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

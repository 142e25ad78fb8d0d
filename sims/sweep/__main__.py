"""``python -m sims.sweep``: the sweep command (:mod:`sims.experiments.sweep.cli`)."""
import sys

from sims.experiments.sweep.cli import main

sys.exit(main())

"""``python -m sims.compare``: the comparison command (:mod:`sims.experiments.compare`)."""
import sys

from sims.experiments.compare import main

sys.exit(main())

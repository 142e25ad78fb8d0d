"""``python -m sims.results``: the saved runs of a results folder (:mod:`sims.results`)."""
import sys

from sims.results import main

sys.exit(main())

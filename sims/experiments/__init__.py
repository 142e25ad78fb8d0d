"""Experiments built on the engine: comparisons (:mod:`.compare`, ``python -m sims.compare``),
sweeps (:mod:`.sweep`, ``python -m sims.sweep``), assumption probes (:mod:`.probes`), the
synthetic experiments (:mod:`.synthetic`), the Monte-Carlo runner (:mod:`.montecarlo`) and
the measured communication and memory of an algorithm (:mod:`.footprint`)."""

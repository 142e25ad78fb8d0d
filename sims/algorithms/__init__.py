"""The algorithms: each paper's box as a rule and its hooks, one file per paper family.

:mod:`.base` (the hooks, the conventions every algorithm shares), :mod:`.fed_ef`,
:mod:`.fed_lamb`, :mod:`.fedlada`, :mod:`.fedada2` (the four papers' own algorithms),
:mod:`.baselines` (everything they run against), :mod:`.registry` (every algorithm by name;
``registry.source_of(name)`` names its file). No file here imports :mod:`sims.accel`.
"""

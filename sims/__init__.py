"""Batched federated-optimization simulator.

Data flows one way: a config is built (by `reproduce` or `sims.experiments.synthetic`), the engine
(`sims.core.engine`) runs it and writes results (`sims.store.results`), plotting reads results.

Conventions pinned for every algorithm (see each docstring for the paper's equation):

* parameters are flat vectors ``theta`` of length ``d``; a :class:`sims.core.params.ParamLayout`
  names the layers (slices) so per-layer compressors and layer-wise rules can see them;
* a client's update is the pseudo-gradient ``delta = theta_start - theta_end`` and the
  server moves ``theta <- theta - eta * aggregate`` (Fed-EF spec section 0: the paper's
  boxes print the opposite sign, its proofs use this one);
* aggregation is the uniform mean over the participating clients.

Your own algorithms, problems and models plug in from outside the package:
``sims.register(kind, name, factory)`` and ``sims.import_modules([...])`` (:mod:`sims.plugins`).
"""

from .core.interrupts import quiet_while_starting as _quiet_while_starting
from .plugins import import_modules, register  # noqa: F401  (plug-ins: sims.plugins)

__all__ = ["__version__", "register", "import_modules"]
__version__ = "0.1.0"
_quiet_while_starting()

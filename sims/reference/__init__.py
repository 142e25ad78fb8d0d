"""The sequential references: every algorithm written plainly from its paper's pseudo-code,
one client at a time, sharing nothing with the batched engine except the round's random
draws (:func:`sims.core.engine.draw_round`), the problem's per-client gradient
(``problem.reference_grad``) and the algorithm object's hyperparameters. The tests hold the
engine (every executor form) to these in float64.

* :mod:`.fed_ef` -- Fed-EF Alg. 1-4 (:func:`~.fed_ef.run_fed_ef_reference`), with the
  compressors re-implemented naively per vector;
* :mod:`.baselines` -- FedOpt and its presets, SCAFFOLD, local Yogi, MimeLite and Mime;
* :mod:`.fed_lamb` -- Fed-LAMB and Fed-AMS; :mod:`.fedlada` -- FedLADA and LocalAdam;
  :mod:`.fedada2` -- FedAda2's joint adaptivity and blended clients;
* :mod:`.privacy` -- the user-level DP step one participant at a time
  (:class:`sims.privacy.Private`'s reference).

:func:`run_reference` runs the reference of any algorithm but Fed-EF and returns a
:class:`~.common.ReferenceRun`: per-round ``train_loss`` and ``grad_norm2`` (round 0 = the
initial model), the final model, the final server state and every client's persistent state.
"""
from __future__ import annotations

from .common import ReferenceRun


def run_reference(problem, alg, participation, rounds: int, seed: int) -> ReferenceRun:
    """The reference run of any algorithm of the registry but Fed-EF's (by class)."""
    from ..algorithms.baselines import FedOpt, LocalYogi, Mime, MimeLite, Scaffold
    from ..algorithms.fed_lamb import FedAMS
    from ..algorithms.fedada2 import JointAdaptive
    from ..algorithms.fedlada import FedLADA
    from .baselines import ref_fedopt, ref_local_yogi, ref_mime, ref_mimelite, ref_scaffold
    from .fed_lamb import ref_fedlamb
    from .fedada2 import ref_joint_adaptive
    from .fedlada import ref_fedlada
    for cls, fn in ((FedAMS, ref_fedlamb), (Mime, ref_mime), (MimeLite, ref_mimelite),
                    (FedLADA, ref_fedlada), (Scaffold, ref_scaffold),
                    (JointAdaptive, ref_joint_adaptive), (FedOpt, ref_fedopt),
                    (LocalYogi, ref_local_yogi)):
        if isinstance(alg, cls):
            return fn(problem, alg, participation, rounds, seed)
    raise TypeError(f"no sequential reference for {type(alg).__name__}")

"""Synthetic experiments on problems whose constants are known (the theorems made visible).

Each experiment is a library module here and a command, figure and results entry in
:mod:`reproduce` (``python -m reproduce.<name>``; ``--full`` for the thorough setting,
``--tiny`` for a seconds-long smoke run; results under ``results/<name>/``, figures under
``figures/``):

==================  =============================================  ===========================
command             what                                           library
==================  =============================================  ===========================
``heavy_tails``     FedAda2 Props. 2/9, 10, 5/14, Thm 4/13:         :mod:`.heavy_tails`,
                    heavy-tailed client noise, Monte Carlo          :mod:`.tails`,
                                                                    :mod:`sims.experiments.montecarlo`
``qa_sim``          Fed-EF Assumption 3, Figs. 16-18 (and 19's      :mod:`.qa`
                    training-time q_A through the engine hook)
``stale_error``     Fed-EF Sec. 4.3 / Thm 4.4 / Remark 5: stale     :mod:`.stats`
                    error, staleness law, error restarting
``speedup``         Fed-EF Cor. 1 and Thm 4.4: speedup in n         :mod:`.speedup`
                    (full) and m (partial), fitted slopes
==================  =============================================  ===========================
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int = 1):
    """Run the enclosed code with ``n`` torch threads, then restore the previous number.

    The synthetic problems are small; on a loaded machine with few cores torch's parallel
    kernels (e.g. the engine's ``index_add_``) can wait milliseconds for a descheduled worker
    per call, thousands of times slower than one thread."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)

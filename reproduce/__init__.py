"""One entry point per paper figure or table: ``python -m reproduce`` lists them.

Every entry has the same shape (see :mod:`reproduce.common`): a ``Config`` dataclass with a
CPU default, ``--full`` for the paper's scale, the shared flags (``--seeds``, ``--rounds``,
``--data-dir``, ``--device``, ``--out``, ``--figures``, ``--plot-only``, ``--tiny``), a list of
runs, a plot and a check that decides each of the paper's claims in one vocabulary
(:mod:`reproduce.verdicts`, with regime cards from :mod:`reproduce.regime` and tuning
protocols from :mod:`reproduce.protocols`). ``python -m reproduce ledger ENTRY`` files an
entry's saved run into the results ledger (:mod:`reproduce.ledger`), ``python -m reproduce
report`` writes the report and the docs' claims tables from it (:mod:`reproduce.report`).
"""
from sims.core.interrupts import quiet_while_starting as _quiet_while_starting

_quiet_while_starting()

ENTRIES = {
    "fig1": "reproduce.fig1",
    "fig8": "reproduce.fig8",
    "fig9": "reproduce.fig9",
    "heavy_tails": "reproduce.heavy_tails",
    "fedada2_theory": "reproduce.fedada2_theory",
    "qa_sim": "reproduce.qa_sim",
    "stale_error": "reproduce.stale_error",
    "speedup": "reproduce.speedup",
    "fedef_images": "reproduce.fedef_images",
    "fedef_qa_train": "reproduce.fedef_qa_train",
    "fedef_cifar": "reproduce.fedef_cifar",
    "probes": "reproduce.probes",
    "fedlamb_fig12": "reproduce.fedlamb_fig12",
    "fedlamb_supp1": "reproduce.fedlamb_supp1",
    "fedlamb_cifar": "reproduce.fedlamb_cifar",
    "fedlamb_theory": "reproduce.fedlamb_theory",
    "fedlada_fig1": "reproduce.fedlada_fig1",
    "fedlada_fig2": "reproduce.fedlada_fig2",
    "fedlada_alpha": "reproduce.fedlada_alpha",
    "fedlada_fig8": "reproduce.fedlada_fig8",
    "fedlada_fig7": "reproduce.fedlada_fig7",
    "fedlada_k": "reproduce.fedlada_k",
    "fedlada_participation": "reproduce.fedlada_participation",
    "fedlada_lr": "reproduce.fedlada_lr",
    "fedlada_fedadam": "reproduce.fedlada_fedadam",
    "fedlada_synthetic": "reproduce.fedlada_synthetic",
    "fedlada_theory": "reproduce.fedlada_theory",
    "fedada2_fig1": "reproduce.fedada2_fig1",
    "fedada2_dp": "reproduce.fedada2_dp",
    "fedada2_epochs": "reproduce.fedada2_epochs",
    "fedada2_sweeps": "reproduce.fedada2_sweeps",
    "fedada2_fig5": "reproduce.fedada2_fig5",
    "fedada2_fig6": "reproduce.fedada2_fig6",
    "fedada2_fig7": "reproduce.fedada2_fig7",
    "fedada2_choices": "reproduce.fedada2_choices",
    "fedada2_full": "reproduce.fedada2_full",
}

"""FedAda2's best hyperparameters (Tables 3-6) as data: the defaults of the FedAda2 entries.

Spec fedada2 4.2 (verbatim tables). Every cell becomes a registry algorithm and its
hyperparameters (:func:`best`, :func:`build`); the StackOverflow cells also carry the DP clip
``c`` (Table 3, noise multiplier sigma = 1 there).

Mapping of the paper's columns to the registry (spec 4.1: StackOverflow uses AdaGrad on both
sides, the image datasets Adam on both sides, except FedAdaGrad = server AdaGrad + SGD clients):

==================================  ==========================  ==============================
paper column                        StackOverflow (AdaGrad)      CIFAR-100 / GLD-23K (Adam)
==================================  ==========================  ==============================
FedAvg                              ``fedavg`` (eta = 1)         ``fedavg`` (eta = 1)
FedAdaGrad                          ``fedadagrad``               ``fedadagrad``
FedAdam                             --                           ``fedadam`` (beta2 0.999)
Direct Joint Adap.                  ``dja``                      ``dja`` server/client Adam
Joint Adap. w/o Precond. Commu.     ``joint-adaptive``           ``joint-adaptive`` Adam/Adam
FedAda2                             ``fedada2`` (SM3 AdaGrad)    ``fedada2-adam`` (SM3 Adam)
==================================  ==========================  ==============================

Symbols: ``eta_s -> eta``, ``eta_l -> eta_l``, ``tau_s -> tau`` (server epsilon, outside the
root), ``tau_l -> eps`` (client epsilon) for the jointly adaptive classes. Adam's
``beta1 = 0.9, beta2 = 0.999`` on server and client (spec 4.1); FedAda2's FedAdam is therefore
not FedLADA's (``beta2 = 0.999`` here, not the registry's 0.99). "N/A" cells keep the registry
default of a parameter the method does not use (FedAvg's server rate is 1). Bias corrections
stay at the registry's defaults (server Adam none, client Adam on; spec 6.5 says the authors'
CIFAR-100 scripts turned the client's off as well: pass ``bias_correction=False`` to follow
them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sims.algorithms.registry import make_algorithm

METHODS = ("fedavg", "fedadagrad", "fedadam", "dja", "joint-no-precond", "fedada2")

LABELS = {"fedavg": "FedAvg", "fedadagrad": "FedAdaGrad", "fedadam": "FedAdam",
          "dja": "Direct Joint Adap.", "joint-no-precond": "Joint Adap. w/o Precond. Commu.",
          "fedada2": "FedAda2"}

_ADAGRAD = {"fedavg": "fedavg", "fedadagrad": "fedadagrad", "dja": "dja",
            "joint-no-precond": "joint-adaptive", "fedada2": "fedada2"}
_ADAM = {"fedavg": "fedavg", "fedadagrad": "fedadagrad", "fedadam": "fedadam", "dja": "dja",
         "joint-no-precond": "joint-adaptive", "fedada2": "fedada2-adam"}
# fixed settings of each column under Adam everywhere (spec 4.1)
_ADAM_FIXED = {"fedadam": {"beta1": 0.9, "beta2": 0.999},
               "dja": {"server": "adam", "client": "adam", "server_beta1": 0.9,
                       "server_beta2": 0.999, "beta1": 0.9, "beta2": 0.999},
               "joint-no-precond": {"server": "adam", "client": "adam", "server_beta1": 0.9,
                                    "server_beta2": 0.999, "beta1": 0.9, "beta2": 0.999},
               "fedada2": {"server_beta1": 0.9, "server_beta2": 0.999, "beta1": 0.9,
                           "beta2": 0.999}}


class TableError(ValueError):
    """Unknown table or method (one line)."""


@dataclass(frozen=True)
class Best:
    """One cell of Tables 3-6: the registry algorithm and its hyperparameters."""
    algorithm: str
    hyper: dict = field(default_factory=dict)
    dp_clip: float | None = None      # Table 3's c (StackOverflow under DP)
    source: str = ""


def _cells(adaptivity: str, etas: dict, taus: dict, source: str, clips=None) -> dict:
    """``etas[m] = (eta_s, eta_l)``, ``taus[m] = (tau_s, tau_l)`` (None = N/A)."""
    names = _ADAGRAD if adaptivity == "adagrad" else _ADAM
    out = {}
    for m, (eta_s, eta_l) in etas.items():
        hyper = {"eta_l": eta_l}
        if eta_s is not None:
            hyper["eta"] = eta_s
        tau_s, tau_l = taus.get(m, (None, None))
        if tau_s is not None:
            hyper["tau"] = tau_s
        if tau_l is not None:
            hyper["eps"] = tau_l
        if adaptivity == "adam":
            hyper.update(_ADAM_FIXED.get(m, {}))
        out[m] = Best(names[m], hyper, None if clips is None else clips[m], source)
    return out


_NA = (None, None)

#: dataset setting -> method -> :class:`Best`
TABLES: dict[str, dict[str, Best]] = {
    # Table 3: DP StackOverflow, sigma = 1, AdaGrad everywhere
    "stackoverflow-dp": _cells(
        "adagrad",
        {"fedavg": (None, 20.0), "fedadagrad": (1.0, 1.0), "dja": (1.0, 1.0),
         "joint-no-precond": (1.0, 0.1), "fedada2": (1.0, 0.1)},
        {"fedavg": _NA, "fedadagrad": (1e-3, None), "dja": (1e-3, 1e-3),
         "joint-no-precond": (1e-5, 1e-3), "fedada2": (1e-5, 1e-3)},
        "Table 3",
        clips={"fedavg": 1.0, "fedadagrad": 0.1, "dja": 0.5, "joint-no-precond": 0.5,
               "fedada2": 0.1}),
    # Tables 4 (eta_s / eta_l) and 5 (tau_s / tau_l): Adam everywhere, 5 local epochs
    "cifar100": _cells(
        "adam",
        {"fedavg": (None, 1e-1), "fedadagrad": (1e-2, 1e-5), "fedadam": (1e-3, 1e-3),
         "dja": (1e-3, 1e-2), "joint-no-precond": (1e-3, 1e-2), "fedada2": (1e-3, 1e-2)},
        {"fedavg": _NA, "fedadagrad": (1e-10, None), "fedadam": (1e-5, None),
         "dja": (1e-5, 1.0), "joint-no-precond": (1e-5, 1.0), "fedada2": (1e-5, 1.0)},
        "Tables 4-5"),
    "gld23k": _cells(
        "adam",
        {"fedavg": (None, 0.04), "fedadagrad": (1e-2, 1e-2), "fedadam": (1e-3, 1e-2),
         "dja": (1e-3, 1e-2), "joint-no-precond": (1e-3, 1e-2), "fedada2": (1e-3, 1e-2)},
        {"fedavg": _NA, "fedadagrad": (1e-5, None), "fedadam": (1e-5, None),
         "dja": (1e-5, 0.1), "joint-no-precond": (1e-5, 0.1), "fedada2": (1e-5, 0.1)},
        "Tables 4-5"),
    "gld23k-full": _cells(
        "adam",
        {"fedavg": (None, 0.02), "fedadagrad": (1e-4, 1e-2), "fedadam": (1e-4, 1e-2),
         "dja": (1e-4, 1e-4), "joint-no-precond": (1e-4, 1e-2), "fedada2": (1e-4, 1e-4)},
        {"fedavg": _NA, "fedadagrad": (1e-2, None), "fedadam": (1e-5, None),
         "dja": (1e-5, 1e-3), "joint-no-precond": (1e-5, 1.0), "fedada2": (1e-5, 1e-3)},
        "Tables 4-5 (full fine-tuning)"),
    # Table 6: GLD-23K with 1 / 20 local epochs
    "gld23k-1epoch": _cells(
        "adam",
        {"fedavg": (None, 7e-2), "fedadagrad": (1e-2, 1e-2), "fedadam": (1e-3, 1e-1),
         "dja": (1e-3, 1e-2), "joint-no-precond": (1e-3, 1e-2), "fedada2": (1e-3, 1e-1)},
        {"fedavg": _NA, "fedadagrad": (1e-9, None), "fedadam": (1e-5, None),
         "dja": (1e-5, 1e-3), "joint-no-precond": (1e-5, 1e-3), "fedada2": (1e-5, 1e-1)},
        "Table 6 (1 local epoch)"),
    "gld23k-20epoch": _cells(
        "adam",
        {"fedavg": (None, 1e-2), "fedadagrad": (1e-2, 1e-2), "fedadam": (1e-3, 1e-2),
         "dja": (1e-3, 1e-3), "joint-no-precond": (1e-3, 1e-3), "fedada2": (1e-3, 1e-3)},
        {"fedavg": _NA, "fedadagrad": (1e-7, None), "fedadam": (1e-7, None),
         "dja": (1e-7, 1e-1), "joint-no-precond": (1e-7, 1e-1), "fedada2": (1e-7, 1e-1)},
        "Table 6 (20 local epochs)"),
}


def best(setting: str, method: str) -> Best:
    """The cell of ``setting`` (a key of :data:`TABLES`) for ``method`` (:data:`METHODS`)."""
    if setting not in TABLES:
        raise TableError(f"unknown FedAda2 table {setting!r}; choose one of "
                         f"{', '.join(TABLES)}")
    if method not in TABLES[setting]:
        raise TableError(f"{setting}: no entry for {method!r}; choose one of "
                         f"{', '.join(TABLES[setting])}")
    return TABLES[setting][method]


def build(setting: str, method: str, **override):
    """``make_algorithm`` of the cell, with ``override`` on top of the table's values."""
    cell = best(setting, method)
    return make_algorithm(cell.algorithm, **{**cell.hyper, **override})


def build_private(setting: str, method: str, noise_multiplier: float = 1.0, *,
                  delta: float | None = None, sampling_rate: float | None = None,
                  **override):
    """The cell's algorithm under user-level DP with the table's clip ``c`` (Table 3;
    sigma = 1 in the paper): :class:`sims.privacy.Private`."""
    from sims.privacy import Private
    cell = best(setting, method)
    if cell.dp_clip is None:
        raise TableError(f"{setting}: the table gives no DP clip for {method!r}")
    return Private(build(setting, method, **override), clip=cell.dp_clip,
                   noise_multiplier=noise_multiplier, delta=delta, sampling_rate=sampling_rate)


#: The experiments' settings (spec 4.1 / 4.3, Table 1); ``None``: not stated by the paper
#: (spec 6.9), the entry decides and says so. ``m`` follows the authors' code,
#: ``max(int(q N), 1)`` clients a round without replacement.
SETTINGS = {
    "stackoverflow-dp": {"n_clients": 400, "q": 0.1, "m": 40, "rounds": 500,
                         "local_epochs": None, "batch_size": None, "adaptivity": "adagrad",
                         "noise_multiplier": 1.0, "delta": 1 / 400, "seeds": 20},
    "cifar100": {"n_clients": 1000, "q": None, "m": None, "rounds": None, "local_epochs": 5,
                 "batch_size": 32, "adaptivity": "adam", "lda_alpha": 0.001, "seeds": 20},
    "gld23k": {"n_clients": 233, "q": 0.01, "m": 2, "rounds": None, "local_epochs": 5,
               "batch_size": 32, "adaptivity": "adam", "seeds": 20},
}
SETTINGS["gld23k-full"] = dict(SETTINGS["gld23k"])
SETTINGS["gld23k-1epoch"] = {**SETTINGS["gld23k"], "local_epochs": 1}
SETTINGS["gld23k-20epoch"] = {**SETTINGS["gld23k"], "local_epochs": 20}

"""Every algorithm by name: ``make_algorithm(name, **hyper)``.

Names (``list_algorithms()`` prints them with their papers):

* Fed-EF (Li & Li; :class:`sims.algorithms.fed_ef.FedEF`): ``fed-ef-sgd``, ``fed-ef-ams``
  (error feedback), ``fed-direct-sgd``, ``fed-direct-ams`` (compression without error
  feedback, Alg. 1), ``fed-sgd`` (full precision, server SGD with ``eta = 1``: FedAvg, also
  Fed-LAMB's Fed-SGD). ``compressor`` is a :func:`sims.rules.compress.make_compressor` spec
  (``"topk-0.01"``, ``"sign"``, ``"hvsign-0.1"``, ``"stoc-2"``, ``"full"``) and ``scope``
  its block (``"layer"`` or ``"model"``).
* Fed-LAMB family: ``fed-ams``, ``fed-lamb``, ``adp-fed``, ``mimelite``, ``mimelite-lamb``,
  ``mime`` and ``mime-lamb`` (full Mime with the SVRG correction, and its layer-wise
  variant; they use the engine's ``needs_round_gradient`` / ``needs_anchor_grad`` hooks, so
  the problem must offer ``full_grad``, and cost one more gradient per local step).
* FedLADA family: ``fedavg``, ``fedprox``, ``scaffold`` (``alpha`` scales the correction,
  Eq. 26), ``fedcm``, ``fedadam``, ``fedadam-cm`` (FedAdam(*)), ``fedlada``, ``localadam``.
* FedAda2 family: ``fedadagrad``, ``fedyogi`` (and ``fedadam``), ``fedada2``,
  ``fedada2-adam``, ``dja``, ``joint-adaptive``, ``fedadaadam``, ``fedadaadagrad``,
  ``fedada2-blend``.
* Other baselines: ``fedavgm`` (FedAvg with server momentum), ``local-yogi`` (Yogi clients,
  FedAvg aggregation).

Each name's rule is in one file: the paper's own algorithms in
:mod:`sims.algorithms.fed_ef`, :mod:`~sims.algorithms.fed_lamb`, :mod:`~sims.algorithms.fedlada`
and :mod:`~sims.algorithms.fedada2`, every baseline in :mod:`sims.algorithms.baselines`
(:func:`source_of` names the file).

Name clash: Fed-EF's paper calls uncompressed Fed-EF-AMS "Fed-AMS" (server AMSGrad); here
``fed-ams`` is Fed-LAMB's Fed-AMS (local AMSGrad), and the server-AMSGrad rule without
compression is ``fed-ef-ams`` with ``compressor="full"`` (error feedback is then a no-op).
"""
from __future__ import annotations

import dataclasses
import inspect

from ..store.extensions import load_entry_points
from ..rules.base import OptimizerError
from ..rules.compress import CompressorError, make_compressor
from .baselines import (AdpFed, FedAdaGrad, FedAdam, FedAdamCM, FedAvg, FedAvgM, FedCM,
                        FedProx, FedYogi, LocalYogi, Mime, MimeLite, Scaffold)
from .fed_ef import FedEF
from .fed_lamb import FedAMS, FedLAMB, MimeLAMB, MimeLiteLAMB
from .fedada2 import (DirectJoint, FedAda2, FedAda2Adam, FedAda2Blend, FedAdaAdagrad,
                      FedAdaAdam, JointNoPrecond)
from .fedlada import FedLADA, LocalAdam


class AlgorithmError(ValueError):
    """An unknown algorithm name or a bad hyperparameter (one line)."""


def _fed_ef(server: str, error_feedback: bool, compressor: str, eta: float):
    def make(eta: float = eta, eta_l: float = 0.1, compressor: str | object = compressor,
             scope: str = "layer", **kw):
        comp = make_compressor(compressor, scope) if isinstance(compressor, str) else compressor
        return FedEF(eta=eta, eta_l=eta_l, compressor=comp, error_feedback=error_feedback,
                     server=server, **kw)
    make.fed_ef_fields = True
    return make


_FED_EF_FIXED = ("error_feedback", "server")

ALGORITHMS = {
    # Fed-EF (Li & Li)
    "fed-ef-sgd": (_fed_ef("sgd", True, "topk-0.01", 1.0), "Fed-EF Alg. 2, server SGD"),
    "fed-ef-ams": (_fed_ef("amsgrad", True, "topk-0.01", 0.01), "Fed-EF Alg. 2, server AMSGrad"),
    "fed-direct-sgd": (_fed_ef("sgd", False, "sign", 1.0), "Fed-EF Alg. 1 (no EF), server SGD"),
    "fed-direct-ams": (_fed_ef("amsgrad", False, "sign", 0.01),
                       "Fed-EF Alg. 1 (no EF), server AMSGrad"),
    "fed-sgd": (_fed_ef("sgd", False, "full", 1.0), "full-precision Fed-SGD (= FedAvg)"),
    # Fed-LAMB (Karimi, Li, Li)
    "fed-ams": (FedAMS, "Fed-LAMB paper: local AMSGrad, averaged models, server vhat"),
    "fed-lamb": (FedLAMB, "Fed-LAMB MAIN Alg. 2"),
    "adp-fed": (AdpFed, "Fed-LAMB SUPP Alg. 1 (local SGD, server Adam)"),
    "mimelite": (MimeLite, "MimeLite with an AMSGrad base (Fed-LAMB baseline)"),
    "mimelite-lamb": (MimeLiteLAMB, "MimeLite + layer-wise trust ratio (Mime-LAMB, no SVRG)"),
    "mime": (Mime, "Mime (SVRG-corrected local steps, frozen server AMSGrad state)"),
    "mime-lamb": (MimeLAMB, "Mime-LAMB (Mime + layer-wise trust ratio)"),
    # FedLADA (Sun et al.)
    "fedavg": (FedAvg, "FedAvg"),
    "fedprox": (FedProx, "FedProx"),
    "scaffold": (Scaffold, "SCAFFOLD option II; alpha-scaled (FedLADA Eq. 26)"),
    "fedcm": (FedCM, "FedCM (client-level momentum)"),
    "fedadam": (FedAdam, "FedAdam (FedLADA Alg. 1; Reddi et al.)"),
    "fedadam-cm": (FedAdamCM, "FedAdam(*): FedCM local steps, server Adam"),
    "fedlada": (FedLADA, "FedLADA Alg. 3"),
    "localadam": (LocalAdam, "LocalAdam (FedLADA with alpha = 1)"),
    # FedAda2 (Lee et al.)
    "fedadagrad": (FedAdaGrad, "FedAdaGrad (server AdaGrad, SGD clients)"),
    "fedyogi": (FedYogi, "FedYogi (server Yogi, SGD clients)"),
    "fedada2": (FedAda2, "FedAda2 Alg. 2 (client SM3-II AdaGrad, zero init)"),
    "fedada2-adam": (FedAda2Adam, "FedAda2 with server Adam and client SM3-Adam"),
    "dja": (DirectJoint, "direct joint adaptivity (server preconditioner sent)"),
    "joint-adaptive": (JointNoPrecond, "joint adaptivity without preconditioner transmission"),
    "fedadaadam": (FedAdaAdam, "FedAda2 Alg. 8 (client ADMU)"),
    "fedadaadagrad": (FedAdaAdagrad, "FedAda2 Alg. 10 (client AGDU)"),
    "fedada2-blend": (FedAda2Blend, "FedAda2 Alg. 5 (blended client optimizers)"),
    # other baselines
    "fedavgm": (FedAvgM, "FedAvgM (FedAvg with server momentum, Hsu et al. 2019)"),
    "local-yogi": (LocalYogi, "local Yogi (Yogi clients, FedAvg aggregation)"),
}

UNAVAILABLE: dict[str, str] = {}   # names refused with a one-line reason (none at present)


def canonical(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def list_algorithms() -> dict[str, str]:
    load_entry_points()
    return {name: desc for name, (_, desc) in ALGORITHMS.items()}


def hyperparameters(name: str) -> dict:
    """The hyperparameters ``name`` accepts, with their defaults."""
    make = lookup(name)
    if getattr(make, "fed_ef_fields", False):
        out = {k: p.default for k, p in inspect.signature(make).parameters.items()
               if p.kind is p.POSITIONAL_OR_KEYWORD}
        for f in dataclasses.fields(FedEF):
            if f.name not in out and f.name not in _FED_EF_FIXED:
                out[f.name] = (f.default if f.default is not dataclasses.MISSING
                               else f.default_factory())
        return out
    if dataclasses.is_dataclass(make):
        return {f.name: f.default for f in dataclasses.fields(make)}
    return signature_defaults(make)


def signature_defaults(make) -> dict:
    """The keyword parameters of a plain callable factory (a plug-in's function or a class
    that is not a dataclass) with their defaults (None where it has none)."""
    out = {}
    for k, p in inspect.signature(make).parameters.items():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            out[k] = None if p.default is p.empty else p.default
    return out


def source_of(name: str) -> str:
    """The module that holds the rule of algorithm ``name``."""
    make = lookup(name)
    return FedEF.__module__ if getattr(make, "fed_ef_fields", False) else make.__module__


def lookup(name: str):
    """The constructor registered under ``name`` (any spelling :func:`canonical` accepts)."""
    key = canonical(name)
    load_entry_points()
    if key in UNAVAILABLE:
        raise AlgorithmError(f"{key}: {UNAVAILABLE[key]}")
    if key not in ALGORITHMS:
        raise AlgorithmError(f"unknown algorithm {name!r}; choose one of "
                             f"{', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[key][0]


def make_algorithm(name: str, **hyper):
    """Build algorithm ``name`` with hyperparameters ``hyper`` (one-line errors)."""
    make = lookup(name)
    key = canonical(name)
    valid = hyperparameters(key)
    unknown = sorted(set(hyper) - set(valid))
    if unknown:
        raise AlgorithmError(f"{key}: unknown hyperparameter(s) {', '.join(unknown)}; valid: "
                             f"{', '.join(sorted(valid))}")
    for k, v in hyper.items():
        default = valid[k]
        number = isinstance(default, (int, float)) and not isinstance(default, bool)
        if number and not (isinstance(v, (int, float)) and not isinstance(v, bool)) \
                and not hasattr(v, "values"):            # a PerReplica holds numbers
            raise AlgorithmError(f"{key}: {k} must be a number, got {v!r}")
    try:
        return make(**hyper)
    except (OptimizerError, CompressorError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        raise AlgorithmError(f"{key}: {msg}") from None


def with_population(name: str, hyper: dict, n_clients: int) -> dict:
    """``hyper`` with ``n_clients`` (the population size) filled in where algorithm ``name``
    takes it and it is not given: SCAFFOLD's control-variate update averages over all N
    clients (``c <- c + (1/N) sum_S dc_i``) and refuses to run without N."""
    if "n_clients" in hyperparameters(name) and "n_clients" not in hyper:
        return {**hyper, "n_clients": int(n_clients)}
    return dict(hyper)


def make_for_problem(name: str, problem, **hyper):
    """:func:`make_algorithm` with the problem's population size filled in
    (:func:`with_population`)."""
    return make_algorithm(name, **with_population(name, hyper, problem.n_clients))


def client_memory(alg, layout) -> int:
    """Floats a client holds while training (FedAda2 Table 2 accounting), for every
    algorithm: its own ``client_memory`` or, for Fed-EF, the model plus its error."""
    if hasattr(alg, "client_memory"):
        return int(alg.client_memory(layout))
    if isinstance(alg, FedEF):
        return layout.d * (1 + bool(alg.error_feedback))
    return layout.d

"""Fed-EF Figures 2-5 and 10-15, Tables 2-5: the CNN on MNIST and Fashion-MNIST.

The paper's setting (Sec. 5, spec 4.2-4.6): the CNN of spec 4.3 (1,199,882 parameters),
label-shard clients (two single-class shards of 150 samples, so 300 samples and 10 local
steps of batch 32 per client and round), ``n = 200``, participation ``p = 0.5`` and
``p = 0.1`` (``m = 100`` / ``20`` clients sampled per round), 100 rounds; Fed-EF-SGD and
Fed-EF-AMS with layer-wise Sign, TopK ``k in {0.001, 0.01, 0.05}`` and heavy-Sign
``k in {0.01, 0.05, 0.1}``; without error feedback, Stoc ``b in {1, 2, 4}`` and full
precision, each with the SGD and the AMSGrad server; Table 1's learning rates per dataset
and server (the same for every compressor, spec 6.17).

What is plotted (spec 4.7): test accuracy against rounds (Figs. 2, 3, 14, 15) and training
loss against rounds (Figs. 10-13), one figure per dataset and participation, rows SGD / AMS,
one panel per compressor family with full precision dashed in each; test accuracy and
training loss against accumulated uplink bits (Figs. 4, 5; values-only accounting, spec
2.6) with one curve per method chosen by the paper's rule (spec 4.4): the highest compression
whose final test accuracy is within 0.1 points of full precision, else the most accurate
setting. Tables 2-5 (final test accuracy, ours beside the paper's) are generated from the
saved results as markdown: written to ``results/fedef_images/tables.md``, printed by the
check, and with ``--write-docs FILE`` put between the markers of ``FILE`` (the repository's
``docs/fedef_results.md``).

Scale. The CNN costs about 2 GFLOP per local step; one client's round (10 steps) takes about
0.65-0.85 s on one core here (measured: a round of 20 clients 14-17 s on this shared
machine), against 100 clients x 100 rounds per configuration in the paper (about 2 CPU-hours
per configuration and seed). The CPU default is therefore a small slice: Fashion-MNIST (full
size here), a population of ``--n 10`` clients taken from the paper's 200-client partition
(so every client has the paper's 300 samples, two classes and 10 local steps), ``p = 0.5`` (5
clients per round), 15 rounds, one seed, full precision and one setting per error-feedback
compressor (Sign, TopK-0.01, heavy-Sign-0.1; add Stoc and more settings with
``--compressors``), evaluation every 5 rounds on 500 training samples (train loss, forward
passes only: the squared gradient norm is not plotted and costs a backward pass, ``--grad-norm``
adds it) and a stratified 1,000-image test subset. The largest setting run here is the paper's
own population at ``p = 0.1`` for 50 rounds (``--n 200 --ps 0.1 --rounds 50``; ~15 s a
round, see ``docs/fedef_results.md``).
MNIST here is the embedded 4,000-image subset (13 clients of 300 samples, of which ``n`` are
used); full MNIST is used when ``--data-dir`` holds it. ``--full`` is the paper's scale (all
grids, both participations, 3 seeds; for a GPU: ``--device cuda``). The population is always
cut from the partition into ``N_train // samples_per_client`` clients (200 for full MNIST /
Fashion-MNIST), keeping ``n`` of them (spec 4.8's "subset of 200" construction); with
``p = 0.1`` and ``n = 10`` one client is sampled per round, which keeps the paper's expected
staleness ``n / m = 10``.

The problem is built by the shared builder (:func:`reproduce.common.cached_problem`, i.e.
:func:`sims.problems.image.build_image_problem`), which makes the CNN a
:class:`sims.problems.conv.ConvProblem`: on the CPU its per-client loop (equal to the batched
``torch.func`` path, about 1.5x faster here), on a GPU the batched path with every
participant of a round in one engine chunk (``--max-batch`` sets the chunk). A run whose model
becomes non-finite is reported as diverged (no final accuracy), in the tables and the figure
legends. Besides the final accuracy the tables give the "tail" accuracy (mean over the
evaluations in the last 20% of rounds), steadier than one evaluation when few non-iid clients
a round swing the model.

Fed-EF-AMS follows Alg. 2 as printed (epsilon inside the square root, no bias correction);
``--ams-reading torch`` uses ``torch.optim``'s AMSGrad conventions instead (bias correction,
epsilon outside), which keeps every coordinate's step near ``eta`` in the first rounds (see
:func:`fed_ef` and ``docs/fedef_results.md``: the printed reading diverges at Table 1's
learning rate with few clients a round).

Sweeps resume: every (dataset, p, server, compressor) run is saved when it finishes (in a
file named by the run, its round count and its fingerprint, so runs of different lengths
coexist), and the grid flags (``--datasets``, ``--ps``, ``--servers``, ``--compressors``) are
not part of a run's fingerprint, so widening the grid reuses the runs already done;
``--plot-only --available`` draws whatever part of a grid has results.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import HeavySign, make_compressor
from sims.core.participation import Participation

from . import common, plotting
from .common import items  # noqa: F401  (the entries read it from here too)
from . import verdicts as vd
from .protocols import split_tuned

PAPER, TARGET = "Fed-EF", "Figures 2-5, 10-15 and Tables 2-5"
TITLE = ("CNN on MNIST / Fashion-MNIST: Fed-EF-SGD and -AMS with Sign, TopK, heavy-Sign; "
         "Stoc and full precision")
DEFAULT_COST = ("6.5 min measured (Fashion-MNIST, 10 clients of the 200-client split, p=0.5 "
                "(5 per round), 15 rounds, 1 seed, full/Sign/TopK-0.01/hv-Sign-0.1 x SGD/AMS: "
                "8 runs of ~45 s); largest run here --n 200 --ps 0.1 --rounds 50: ~10 min per "
                "run; --full: paper scale, for a GPU")

#: Table 1: (eta, eta_l) per dataset and server.
LRS = {("mnist", "sgd"): (10.0, 1e-3), ("mnist", "ams"): (1e-3, 1e-2),
       ("fmnist", "sgd"): (1.0, 1e-1), ("fmnist", "ams"): (1e-2, 1e-1),
       ("cifar10", "sgd"): (1.0, 1e-1), ("cifar10", "ams"): (1e-3, 1e-2)}
FULL_GRID = ("full,sign,topk-0.001,topk-0.01,topk-0.05,hvsign-0.01,hvsign-0.05,hvsign-0.1,"
             "stoc-1,stoc-2,stoc-4")
DEFAULT_GRID = "full,sign,topk-0.01,hvsign-0.1"
FAMILIES = ("sign", "topk", "hvsign", "stoc", "full")
FAMILY_LABEL = {"sign": "Sign", "topk": "TopK", "hvsign": "Hv-Sign", "stoc": "Stoc",
                "full": "Full-precision"}
EF_FAMILIES = ("sign", "topk", "hvsign")
SERVER_LABEL = {"sgd": "Fed-EF-SGD", "ams": "Fed-EF-AMS"}
DATASET_LABEL = {"mnist": "MNIST", "fmnist": "FMNIST", "cifar10": "CIFAR-10"}
SELECT_TOL = 0.1   # percentage points: "within 0.1%" (spec 6.12 reading)
TAIL = 0.2         # "tail" accuracy: mean over the evaluations in the last 20% of rounds

#: Tables 2-5 verbatim (spec 4.6): {(p, server): {dataset: {family: (mean, std)}}}.
PAPER_TABLES = {
    (0.5, "sgd"): {"mnist": {"sign": (90.87, 0.84), "topk": (91.04, 1.05),
                             "hvsign": (91.18, 1.10), "stoc": (90.16, 0.96), "full": (90.85, 0.89)},
                   "fmnist": {"sign": (71.13, 0.68), "topk": (71.16, 0.77),
                              "hvsign": (71.07, 0.83), "stoc": (71.26, 0.87),
                              "full": (71.20, 0.71)}},
    (0.5, "ams"): {"mnist": {"sign": (92.32, 0.98), "topk": (92.74, 0.84),
                             "hvsign": (91.77, 1.22), "stoc": (92.36, 0.93), "full": (92.23, 0.73)},
                   "fmnist": {"sign": (71.35, 0.61), "topk": (71.90, 0.78),
                              "hvsign": (70.73, 1.03), "stoc": (71.94, 0.95),
                              "full": (71.97, 0.86)}},
    (0.1, "sgd"): {"mnist": {"sign": (90.15, 1.06), "topk": (90.61, 0.93),
                             "hvsign": (90.42, 1.09), "stoc": (90.27, 1.18), "full": (90.22, 0.82)},
                   "fmnist": {"sign": (67.69, 0.73), "topk": (67.47, 0.80),
                              "hvsign": (67.72, 0.55), "stoc": (67.71, 0.78),
                              "full": (67.50, 0.85)}},
    (0.1, "ams"): {"mnist": {"sign": (88.67, 1.11), "topk": (88.97, 1.16),
                             "hvsign": (77.49, 1.53), "stoc": (88.76, 1.22), "full": (89.05, 1.04)},
                   "fmnist": {"sign": (57.60, 2.34), "topk": (64.09, 0.91),
                              "hvsign": (50.77, 2.87), "stoc": (64.35, 1.06),
                              "full": (64.18, 0.90)}},
}
TABLE_NUMBER = {(0.5, "sgd"): 2, (0.5, "ams"): 3, (0.1, "sgd"): 4, (0.1, "ams"): 5}
FIG_ACC = {("mnist", 0.5): 2, ("fmnist", 0.5): 3, ("mnist", 0.1): 14, ("fmnist", 0.1): 15}
FIG_LOSS = {("mnist", 0.5): 10, ("fmnist", 0.5): 11, ("mnist", 0.1): 12, ("fmnist", 0.1): 13}
FIG_BITS = {0.5: 4, 0.1: 5}
DOCS_START, DOCS_END = "<!-- fedef-tables:start -->", "<!-- fedef-tables:end -->"


@dataclass
class Config(common.EntryConfig):
    seeds: int = 1
    rounds: int = 15
    datasets: str = "fmnist"
    ps: str = "0.5"
    servers: str = "sgd,ams"
    compressors: str = DEFAULT_GRID
    n: int = 10                       # clients in the population (paper: 200)
    samples_per_client: int = 300     # two shards of 150 (paper)
    eval_every: int = 5
    eval_train: int = 500             # training samples for the train loss (0: all)
    test_samples: int = 1000          # stratified test subset (0: the whole test set)
    hv_scale: str = "kept"            # heavy-Sign scale reading (spec 2.4)
    ams_reading: str = "literal"      # AMSGrad as printed, or "torch" (bias correction)
    threads: int = 1                  # torch threads on the CPU (0: leave torch's choice)
    write_docs: str = ""              # markdown file whose generated tables to replace
    docs_block: str = ""              # name of the marked block there ("": the unnamed one)
    grad_norm: bool = False           # also evaluate grad_norm2 (a backward pass; not plotted)
    tuned: str = ""                   # SERVER@P panels of the tuned comparison ("ams@0.1")
    tuned_compressors: str = DEFAULT_GRID   # the settings tuned in each --tuned panel

    def scale(self):
        if self.full:
            self.seeds, self.rounds, self.n = 3, 100, 200
            self.datasets, self.ps, self.compressors = "mnist,fmnist", "0.5,0.1", FULL_GRID
            self.eval_every, self.eval_train, self.test_samples = 1, 0, 0
        if self.tiny:
            self.seeds, self.rounds, self.n, self.samples_per_client = 1, 2, 4, 64
            self.datasets, self.ps, self.compressors = "fmnist", "0.5", "full,sign,topk-0.01"
            self.eval_every, self.eval_train, self.test_samples = 1, 64, 100

    def run_key(self):
        key = super().run_key()
        for k in ("datasets", "ps", "servers", "compressors", "write_docs", "docs_block",
                  "grad_norm", "tuned", "tuned_compressors"):
            key.pop(k, None)
        if key.get("ams_reading") == "literal":   # runs saved before the option keep matching
            key.pop("ams_reading")
        return key


# ---------------------------------------------------------------------------- building blocks
def family(spec: str) -> str:
    name = spec.split("-")[0]
    return {"identity": "full", "none": "full", "heavysign": "hvsign"}.get(name, name)


def param_of(spec: str) -> float:
    """The compressor's parameter (k or b; nan for Sign / full)."""
    tail = spec.partition("-")[2]
    return float(tail) if tail else math.nan


def compressor(spec: str, hv_scale: str = "kept"):
    if family(spec) == "hvsign":
        return HeavySign(param_of(spec), scale=hv_scale)
    return make_compressor(spec)


def dataset_key(name: str) -> str:
    return {"fashion-mnist": "fmnist", "fashion_mnist": "fmnist", "cifar-10": "cifar10"}.get(
        name.lower(), name.lower())


def participations(text) -> list[float]:
    """``--ps``: participation fractions in (0, 1] (one-line error otherwise)."""
    ps = items(text, float, "--ps")
    for p in ps:
        if not 0 < p <= 1:
            raise common.EntryError(f"--ps: participation {p:g} is not in (0, 1]")
    return ps


def clients_per_round(p: float, n: int) -> int:
    return max(1, min(n, int(round(p * n))))


def conv_problem(dataset: str, model: str, n: int, samples_per_client: int, data_dir, device,
                 eval_train: int, test_samples: int, augment=None):
    """The image problem of a population of ``n`` clients cut from the paper's partition
    (``N_train // samples_per_client`` clients of two single-class shards), built by the
    shared builder (:func:`reproduce.common.cached_problem`, so once per process; a ``cnn`` or
    ``resnet18`` is a :class:`sims.problems.conv.ConvProblem` for the dataset's image shape);
    ``n`` is capped at the number of such clients the data allows."""
    return build_problem(image_desc(dataset, model, n, samples_per_client, data_dir, device,
                                    eval_train, test_samples, augment))


def image_desc(dataset: str, model: str, n: int, samples_per_client: int, data_dir, device,
               eval_train: int, test_samples: int, augment=None) -> dict:
    """The JSON description of :func:`conv_problem`'s problem (:func:`build_problem` builds
    it; a tuning cell's fingerprint holds it)."""
    ds = common.cached_dataset(dataset, data_dir)
    total = len(ds.y_train) // samples_per_client
    if total < 1:
        raise common.EntryError(f"{dataset}: {len(ds.y_train)} training samples cannot make a "
                                f"client of {samples_per_client}")
    return {"dataset": dataset, "data_dir": data_dir, "model": model,
            "n_clients": min(n, total), "subset_of": total,
            "eval_train_samples": eval_train or None, "test_samples": test_samples or None,
            "augment": augment, "device": device}


def build_problem(desc: dict):
    """The problem of a description :func:`image_desc` wrote (module level, so Ray can ship
    a tuning's cells)."""
    return common.cached_problem(**desc)


def gpu_max_batch(cfg, clients: int) -> int | None:
    """The engine chunk for a run on a GPU: every participant of a round at once, up to
    ``clients`` (the engine's 32 MiB default caps CNN and ResNet-18 chunks at 8 clients,
    which leaves a GPU idle); None (the engine's rule) on the CPU, where the per-client loop
    does not batch. ``--max-batch`` overrides it."""
    return clients if str(cfg.device).startswith("cuda") else None


def population(dataset: str, n: int, samples_per_client: int, data_dir) -> int:
    """Clients actually simulated: ``n``, capped at ``N_train // samples_per_client``."""
    total = len(common.cached_dataset(dataset, data_dir).y_train) // samples_per_client
    return max(1, min(n, total))


AMS_READINGS = ("literal", "torch")


def check_ams_reading(reading: str) -> None:
    """A one-line error for an ``--ams-reading`` that is not one of :data:`AMS_READINGS`."""
    if reading not in AMS_READINGS:
        raise common.EntryError(f"--ams-reading must be one of {AMS_READINGS}, got {reading!r}")


def fed_ef(dataset: str, server: str, spec: str, hv_scale: str = "kept", lrs=None,
           ams_reading: str = "literal") -> FedEF:
    """Fed-EF with Table 1's learning rates. ``ams_reading`` (AMS server only): ``literal``
    is Alg. 2 as printed (epsilon inside the square root, no bias correction; spec 6.3);
    ``torch`` is ``torch.optim.Adam(amsgrad=True)``'s convention (bias correction, epsilon
    outside), under which no coordinate moves more than about ``eta`` a round. Without bias
    correction ``v`` is ``1 - beta2^t`` (~t/1000) of its running scale early on, so a
    coordinate's step can reach several times ``eta`` in the first rounds (measured: up to
    5.5x on FMNIST with TopK-0.01 and 5 clients a round, docs/fedef_results.md)."""
    check_ams_reading(ams_reading)
    eta, eta_l = (lrs or LRS)[(dataset, server)]
    fam = family(spec)
    return FedEF(eta=eta, eta_l=eta_l, compressor=compressor(spec, hv_scale),
                 error_feedback=fam in EF_FAMILIES,
                 server="sgd" if server == "sgd" else "amsgrad",
                 ams_convention="torch" if ams_reading == "torch" else "paper")


def _check_grid(cfg, allowed_datasets=("mnist", "fmnist")):
    for ds in items(cfg.datasets):
        if dataset_key(ds) not in allowed_datasets:
            raise common.EntryError(f"--datasets: {ds!r} is not one of {allowed_datasets}")
    for s in items(cfg.servers):
        if s not in SERVER_LABEL:
            raise common.EntryError(f"--servers: {s!r} is not sgd or ams")
    participations(cfg.ps)
    docs_markers(cfg.docs_block)
    for spec in items(cfg.compressors):
        if family(spec) not in FAMILIES:
            raise common.EntryError(f"--compressors: unknown {spec!r}")
        compressor(spec, cfg.hv_scale)
    check_ams_reading(cfg.ams_reading)


def runs(cfg):
    _check_grid(cfg)
    out = []
    for ds in map(dataset_key, items(cfg.datasets)):
        for p in participations(cfg.ps):
            n = population(ds, cfg.n, cfg.samples_per_client, cfg.data_dir)
            m = clients_per_round(p, n)
            for server in items(cfg.servers):
                for spec in items(cfg.compressors):
                    def build(ds=ds, p=p, server=server, spec=spec):
                        prob = conv_problem(ds, "cnn", cfg.n, cfg.samples_per_client,
                                            cfg.data_dir, cfg.device, cfg.eval_train,
                                            cfg.test_samples)
                        part = Participation("fixed", m=clients_per_round(p, prob.n_clients))
                        return prob, fed_ef(ds, server, spec, cfg.hv_scale,
                                            ams_reading=cfg.ams_reading), part
                    eta, eta_l = LRS[(ds, server)]
                    params = {"dataset": ds, "p": p, "n": n, "m": m, "server": server,
                              "compressor": spec,
                              "family": family(spec), "param": param_of(spec),
                              "eta": eta, "eta_l": eta_l}
                    if server == "ams" and cfg.ams_reading != "literal":
                        params["ams_reading"] = cfg.ams_reading
                    out.append(common.Run(f"{ds}_p{p:g}_{server}_{spec}", params, build,
                                          eval_every=cfg.eval_every, eval_grad=cfg.grad_norm,
                                          max_batch=gpu_max_batch(cfg, m)))
    return out + tuned_runs(cfg)


# ---------------------------------------------------------------------------- tuned comparison
#: The symmetric tuned comparison's sweeps end in this (``--tuned``; rows' ``sweep``).
TUNED_SUFFIX = "-tuned"
#: ... and their verdicts' scopes in this.
TUNED_SCOPE = ", tuned comparison"
TUNED_TEXT = ("symmetric: each setting from Table 1's (eta, eta_l) and its App. B.1 grid "
              "neighbours, extended along App. B.1's grid while a pick sits on an edge, "
              "highest final test accuracy")


def tuned_panels(text: str) -> list[tuple[str, float]]:
    """``--tuned``: ``SERVER@P`` panels (``"ams@0.1,sgd@0.5"``); a one-line error otherwise."""
    out = []
    for item in items(text):
        server, at, p = item.partition("@")
        if not at or server not in SERVER_LABEL:
            raise common.EntryError(f"--tuned: {item!r} is not SERVER@P with SERVER sgd or ams "
                                    "(e.g. ams@0.1)")
        out.append((server, participations(p)[0]))
    return out


def problem_desc(cfg, ds: str) -> dict:
    """The tuned comparison's problem: Table 1's runs' (:func:`image_desc`), its evaluation
    of the gradient norm as ``--grad-norm`` says."""
    return {**image_desc(ds, "cnn", cfg.n, cfg.samples_per_client, cfg.data_dir, cfg.device,
                         cfg.eval_train, cfg.test_samples), "eval_grad": bool(cfg.grad_norm)}


def tuned_method(ds: str, server: str, spec: str):
    """The tuned comparison's :class:`reproduce.protocols.Method` for one setting:
    ``fed-ef-SERVER`` with compressor ``spec`` over ``eta`` and ``eta_l``, each bracket Table
    1's value and its neighbours in App. B.1's grid, climbing that grid (its ladder) off an
    edge. Full precision is Fed-EF with the identity compressor: its error stays 0, so error
    feedback is a no-op (the registry's ``fed-ef-*`` keep it on)."""
    from . import protocols as pr
    from .sweeps import FED_EF_TABLE1
    start = dict(zip(("eta", "eta_l"), LRS[(ds, server)]))
    return pr.Method(spec, f"fed-ef-{server}", {"compressor": spec}, tuple(
        pr.Bracket(k, pr.neighbours(FED_EF_TABLE1[k], start[k]), ladder=FED_EF_TABLE1[k])
        for k in ("eta", "eta_l")))


def tuned_runs(cfg) -> list:
    """The symmetric tuned comparison beside Table 1's rates (``--tuned SERVER@P``): per
    dataset, panel and ``--tuned-compressors`` setting one :func:`reproduce.sweeps.tuning_run`
    (:func:`reproduce.protocols.tune`) of ``fed-ef-SERVER`` with that compressor over
    ``(eta, eta_l)``: Table 1's point and its neighbours in App. B.1's grid (spec 4.5:
    ``eta`` in 1e-4 .. 10, ``eta_l`` in 1e-4 .. 1), a rate's bracket extended to App. B.1's
    next value while the pick sits on an edge the grid goes past; selected by the highest
    final test accuracy (App. B.1: "to attain highest test accuracy") at the plotted horizon
    over every seed. A pruned local search on App. B.1's grid, not its whole-grid search (the
    card's protocol says so). Cells are saved and resumed under
    ``OUT/sweeps/DS_pP_SERVER_SETTING-tuned-SETTING``."""
    if not cfg.tuned:
        return []
    from .sweeps import tuning_run
    if cfg.hv_scale != "kept" or cfg.ams_reading != "literal":
        raise common.EntryError("--tuned runs the paper's readings only (--hv-scale kept, "
                                "--ams-reading literal)")
    specs = items(cfg.tuned_compressors)
    for spec in specs:
        if family(spec) not in FAMILIES:
            raise common.EntryError(f"--tuned-compressors: unknown {spec!r}")
        if family(spec) == "stoc":
            raise common.EntryError("--tuned-compressors: Stoc (no error feedback) is not "
                                    "tuned here")
        try:
            compressor(spec)
        except ValueError as exc:
            raise common.EntryError(f"--tuned-compressors: {exc}") from None
    panels = tuned_panels(cfg.tuned)
    out = []
    for ds in map(dataset_key, items(cfg.datasets)):
        desc = problem_desc(cfg, ds)
        n = desc["n_clients"]
        for server, p in panels:
            m = clients_per_round(p, n)
            for spec in specs:
                name = f"{ds}_p{p:g}_{server}_{spec}{TUNED_SUFFIX}"
                out.append(tuning_run(
                    name, [tuned_method(ds, server, spec)], desc, build_problem, f"m={m}",
                    rule="final-acc",
                    kind="tuned", eval_every=cfg.eval_every, text=TUNED_TEXT,
                    params={"dataset": ds, "p": p, "n": n, "m": m, "server": server,
                            "compressor": spec, "family": family(spec),
                            "param": param_of(spec)}))
    return out


def tuned_picks(tuned: pd.DataFrame, rounds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each tuning's selected point read again from its rows (the highest final test accuracy
    at round ``rounds``, :func:`reproduce.protocols.select`): ``(rows, picks)``, the rows
    of the picked points named as Table 1's runs are (``DS_pP_SERVER_SPEC``), so the tables,
    the figures' helpers and the verdicts read them alike, and one row per tuning with
    ``eta``, ``eta_l``, its score, ``interior`` and the grid it searched."""
    from . import protocols as pr
    rows, picks = [], []
    for sweep, sub in tuned.groupby("sweep", sort=False):
        summary = pr.select(sub, "final-acc", at=rounds)
        chosen = summary[summary["selected"]]
        r0 = sub.iloc[0]
        proto = pr.protocol_of(sub)
        pick = {"sweep": sweep, "dataset": r0["dataset"], "p": float(r0["p"]),
                "server": r0["server"], "compressor": r0["compressor"],
                "points": int(sub["point"].nunique()),
                "etas": sorted(set(sub["eta"].astype(float))),
                "eta_ls": sorted(set(sub["eta_l"].astype(float))),
                "interior": None if proto is None else proto.interior,
                "eta": math.nan, "eta_l": math.nan, "score": math.nan}
        if len(chosen):
            c = chosen.iloc[0]
            at = sub[sub["point"] == c["point"]]
            pick.update(eta=float(at["eta"].iloc[0]), eta_l=float(at["eta_l"].iloc[0]),
                        score=float(c["score"]))
            name = f"{r0['dataset']}_p{float(r0['p']):g}_{r0['server']}_{r0['compressor']}"
            rows.append(at.assign(run=name))
        picks.append(pick)
    table = pd.concat(rows, ignore_index=True) if rows else tuned.iloc[:0]
    return table, pd.DataFrame(picks)


# ---------------------------------------------------------------------------- results
def finals(df: pd.DataFrame, rounds: int | None = None) -> pd.DataFrame:
    """One row per run: final test accuracy (percent, mean and std over seeds), final train
    loss, uplink bits per client and round (``bits``), the round count and divergence;
    ``acc_tail``: the test accuracy averaged over the evaluations in the last :data:`TAIL`
    of the rounds (e.g. rounds 40, 45, 50 of 50), steadier than one round's value when a
    round's few non-iid clients swing the model.

    A seed whose model became non-finite (the engine stops a run when all its seeds have; a
    diverged seed's train loss is NaN) counts as diverged; a run with a diverged seed gets
    no final accuracy (NaN) and ``diverged`` = the number of such seeds, ``diverged_at`` the
    first round without a finite model. ``rounds`` is the planned length (default: the
    longest run in ``df``)."""
    keys = ["dataset", "p", "server", "compressor", "family", "param"]
    planned = int(df["round"].max()) if rounds is None else int(rounds)
    rows = []
    for key, grp in df.groupby(keys, dropna=False):
        row = dict(zip(keys, key))
        bits = grp[grp.metric == "bits_up"]
        loss = grp[grp.metric == "train_loss"]
        bad = {}
        for seed, s_bits in bits.groupby("seed"):
            end = int(s_bits["round"].max())
            s_loss = loss[loss.seed == seed].sort_values("round")
            nonfinite = s_loss[~np.isfinite(s_loss.value)]
            if len(nonfinite):
                bad[seed] = int(nonfinite["round"].min())
            elif end < planned:
                bad[seed] = end
        for metric, col, scale in (("test_acc", "acc", 100.0), ("train_loss", "loss", 1.0)):
            sub = grp[grp.metric == metric]
            if not len(sub) or bad:
                row[col], row[col + "_std"] = math.nan, math.nan
                continue
            last_round = int(sub["round"].max())
            last = sub[sub["round"] == last_round]
            vals = last.groupby("seed")["value"].mean() * scale
            row[col] = float(vals.mean())
            row[col + "_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
            if col == "acc":
                tail = sub[sub["round"] >= last_round - math.ceil(TAIL * last_round)]
                row["acc_tail"] = float(tail.groupby("seed")["value"].mean().mean() * scale)
        row.setdefault("acc_tail", math.nan)
        per_round = bits[bits["round"] == 1].value
        row["bits"] = float(per_round.mean()) if len(per_round) else math.nan
        row["rounds"] = int(grp["round"].max())
        row["seeds"] = int(grp["seed"].nunique())
        row["diverged"] = len(bad)
        row["diverged_at"] = min(bad.values()) if bad else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def select(final: pd.DataFrame, tol: float = SELECT_TOL) -> pd.DataFrame:
    """The paper's rule (spec 4.4) per (dataset, p, server) and family: the setting with the
    fewest uplink bits whose final accuracy is at least full precision's minus ``tol``
    points, else the most accurate setting. Full precision and Sign have one setting each.
    Adds ``rule`` ('matches FP' / 'best, below FP' / 'reference') and ``fp_acc``."""
    chosen = []
    for (ds, p, server), grp in final.groupby(["dataset", "p", "server"]):
        fp = grp[grp.family == "full"]
        fp_acc = float(fp.acc.iloc[0]) if len(fp) else math.nan
        fp_tail = float(fp.acc_tail.iloc[0]) if len(fp) and "acc_tail" in fp else math.nan
        for fam, sub in grp.groupby("family"):
            if fam == "full":
                row = sub.iloc[0].copy()
                row["rule"] = "reference"
            else:
                ok = sub[sub.acc >= fp_acc - tol - 1e-9] if len(fp) else sub.iloc[:0]
                if len(ok):
                    row = ok.sort_values(["bits", "acc"], ascending=[True, False]).iloc[0].copy()
                    row["rule"] = "matches FP"
                else:
                    late = sub["diverged_at"] if "diverged_at" in sub else math.nan
                    late = pd.Series(late, index=sub.index).fillna(np.inf)
                    row = sub.assign(_late=late).sort_values(
                        ["acc", "_late", "bits"], ascending=[False, False, True]).iloc[0].copy()
                    row = row.drop("_late")
                    row["rule"] = "diverged" if math.isnan(row.acc) else "best, below FP"
            row["fp_acc"] = fp_acc
            row["fp_tail"] = fp_tail
            chosen.append(row)
    out = pd.DataFrame(chosen).reset_index(drop=True)
    if len(out):
        out["order"] = out.family.map({f: i for i, f in enumerate(FAMILIES)})
        out["ds_order"] = out.dataset.map({"mnist": 0, "fmnist": 1}).fillna(2)
        out = out.sort_values(["p", "server", "ds_order", "order"],
                              ascending=[False, False, True, True])
        out = out.drop(columns=["order", "ds_order"]).reset_index(drop=True)
    return out


def _fmt(mean, std):
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    return f"{mean:.2f}" + (f" (±{std:.2f})" if std is not None and not math.isnan(std) else "")


def _signed(v):
    return "-" if v is None or math.isnan(v) else f"{v:+.2f}"


def setting_label(spec: str, hv_scale: str = "kept") -> str:
    fam, prm = family(spec), param_of(spec)
    if fam == "full":
        return "full precision"
    if fam == "sign":
        return FAMILY_LABEL[fam]
    if fam == "stoc":
        return f"Stoc b={prm:g}"
    return f"{FAMILY_LABEL[fam]} k={prm:g}"


def tables_markdown(final: pd.DataFrame, scale_note: str = "", tol: float = SELECT_TOL,
                    label: str = "") -> str:
    """Tables 2-5 as markdown: for each (p, server) present, one row per dataset and method
    with the setting the rule chose, our final accuracy, the paper's, the difference, and
    both gaps to full precision (the comparison that survives a change of scale);
    ``label`` follows each table's title (e.g. the tuned comparison's)."""
    chosen = select(final, tol)
    lines = []
    if scale_note:
        lines += [scale_note, ""]
    for (p, server), grp in chosen.groupby(["p", "server"], sort=False):
        num = TABLE_NUMBER.get((float(p), server))
        title = ((f"Table {num}" if num else "Table") + f": p = {p:g}, {SERVER_LABEL[server]}"
                 + (f", {label}" if label else ""))
        lines += [f"**{title}** (final test accuracy, %; Sign / TopK / Hv-Sign with error "
                  f"feedback, Stoc and full precision without; \"tail\": our mean over the "
                  f"evaluations in the last {TAIL:.0%} of rounds)", "",
                  "| dataset | method | setting (rule) | ours | paper | ours − paper | "
                  "ours − our FP | paper − paper FP | ours, tail | tail − our FP tail |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        paper = PAPER_TABLES.get((float(p), server), {})
        for _, r in grp.iterrows():
            pv = paper.get(r.dataset, {}).get(r.family)
            pfp = paper.get(r.dataset, {}).get("full")
            pm, ps = (pv if pv else (math.nan, math.nan))
            diff = r.acc - pm if pv else math.nan
            ours_gap = r.acc - r.fp_acc if r.family != "full" else math.nan
            tail = r.get("acc_tail", math.nan)
            tail_gap = (tail - r.get("fp_tail", math.nan) if r.family != "full"
                        else math.nan)
            paper_gap = pm - pfp[0] if (pv and pfp and r.family != "full") else math.nan
            rule = "" if r.rule == "reference" else f" ({r.rule})"
            ours = (f"diverged ({int(r.diverged)}/{int(r.seeds)} seeds, round "
                    f"{int(r.diverged_at)})" if r.get("diverged", 0) else _fmt(r.acc, r.acc_std))
            lines.append(f"| {DATASET_LABEL.get(r.dataset, r.dataset)} | "
                         f"{FAMILY_LABEL[r.family]} | {setting_label(r.compressor)}{rule} | "
                         f"{ours} | {_fmt(pm, ps)} | {_signed(diff)} | "
                         f"{_signed(ours_gap)} | {_signed(paper_gap)} | "
                         f"{'-' if r.get('diverged', 0) else _fmt(tail, math.nan)} | "
                         f"{_signed(tail_gap)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def scale_note(df: pd.DataFrame, cfg) -> str:
    parts = []
    for ds in sorted(df.dataset.unique()):
        sub = df[df.dataset == ds]
        n = int(sub["n"].iloc[0]) if "n" in sub else cfg.n
        ms = ", ".join(f"p={p:g}: m={clients_per_round(p, n)}" for p in sorted(sub.p.unique(),
                                                                             reverse=True))
        parts.append(f"{DATASET_LABEL.get(ds, ds)} n={n} ({ms})")
    rounds = int(df["round"].max())
    seeds = int(df["seed"].nunique())
    return (f"Scale: {'; '.join(parts)}; {rounds} rounds; {seeds} seed(s); "
            f"selection tolerance {SELECT_TOL:g} points.")


def docs_markers(name: str = "") -> tuple[str, str]:
    """The markers of a generated-tables block: ``<!-- fedef-tables:start -->`` /
    ``...:end -->``, or with a name ``<!-- fedef-tables:NAME:start -->`` (one file can hold the
    tables of several scales)."""
    if not name:
        return DOCS_START, DOCS_END
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise common.EntryError(f"--docs-block: {name!r} (letters, digits, '_', '.', '-')")
    return f"<!-- fedef-tables:{name}:start -->", f"<!-- fedef-tables:{name}:end -->"


def write_docs(path, markdown: str, name: str = "") -> Path:
    """Replace the text between the generated-tables markers of ``path`` (named ``name``,
    see :func:`docs_markers`), appending the marked block when the file has none."""
    path = Path(path)
    start, end = docs_markers(name)
    block = f"{start}\n{markdown.rstrip()}\n{end}"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else (
        text + ("\n\n" if text and not text.endswith("\n\n") else "") + block + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- figures
def _palette(k):
    import seaborn as sns
    return sns.color_palette("viridis", max(k, 1))


TUNED_COLORS = {"full": "black", "sign": "tab:red", "topk": "tab:blue", "hvsign": "tab:green"}


def plot_tuned(paper: pd.DataFrame, tuned: pd.DataFrame, cfg) -> list:
    """``fedef_tuned_DS_pP_SERVER``: test accuracy and train loss against rounds of each
    tuned setting at its pick (solid, the pick in the legend) and at Table 1's rates (dashed,
    where those runs are in the table), one figure per tuned panel."""
    rows, picks = tuned_picks(tuned, cfg.rounds)
    paths = []
    for (ds, p, server), keep in picks.groupby(["dataset", "p", "server"]):
        fig, axes = plt.subplots(1, 2, figsize=(13.5, 3.8), squeeze=False)
        for ax, metric in zip(axes[0], ("test_acc", "train_loss")):
            for _, k in keep.iterrows():
                run = f"{ds}_p{float(p):g}_{server}_{k.compressor}"
                color = [TUNED_COLORS.get(family(k.compressor), "tab:gray")]
                mine = rows[rows.run == run]
                if len(mine):
                    plotting.band_plot(ax, mine, metric, "run", palette=color, label=lambda _, k=k:
                                       f"{setting_label(k.compressor)}, tuned "
                                       f"(eta {k.eta:g}, eta_l {k.eta_l:g})")
                base = paper[paper.run == run] if "run" in paper else paper.iloc[:0]
                if len(base):
                    eta, eta_l = LRS[(ds, server)]
                    plotting.band_plot(ax, base, metric, "run", palette=color, linestyle="--",
                                       label=lambda _, k=k: f"{setting_label(k.compressor)}, "
                                       f"Table 1 (eta {eta:g}, eta_l {eta_l:g})")
            if metric == "train_loss":
                clip_loss(ax, rows)
            ax.set_xlabel("round")
            ax.set_ylabel("test accuracy" if metric == "test_acc" else "train loss")
            if metric == "train_loss":              # one legend, beside the panels
                ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        n = int(tuned.loc[tuned.dataset == ds, "n"].iloc[0])
        fig.suptitle(f"{DATASET_LABEL[ds]} CNN, {SERVER_LABEL[server]}, n={n}, p={float(p):g} "
                     f"(m={clients_per_round(float(p), n)}), {cfg.seeds} seed(s): each setting "
                     "at its tuned (eta, eta_l)\n(App. B.1 grid, bracketed from Table 1, highest "
                     f"final test accuracy at round {cfg.rounds}) and at Table 1's", fontsize=9)
        paths += plotting.save(fig, cfg.figures, f"fedef_tuned_{ds}_p{float(p):g}_{server}",
                               figure_scope(p, [ds], [server], tuple(keep.compressor)))
    return paths


def claim_scope(ds: str, p, server: str, suffix: str = "") -> str:
    """A verdict's scope: one dataset, participation and server (``suffix``: the tuned
    comparison's, a family's)."""
    return f"{DATASET_LABEL[ds]}, p={float(p):g}, {SERVER_LABEL[server]}{suffix}"


def figure_scope(p, datasets, servers, compressors=None) -> common.FigureScope:
    """What a figure of ``datasets`` x ``servers`` at participation ``p`` draws, for its
    footer: with ``compressors``, the tuned comparison's panel of those settings (and Table
    1's runs of them, drawn dashed); without, Table 1's runs."""
    where = {"p": float(p), "dataset": tuple(datasets), "server": tuple(servers)}
    tuned = compressors is not None
    if tuned:
        where["compressor"] = tuple(compressors)
    prefixes = [claim_scope(ds, p, server, TUNED_SCOPE if tuned else "")
                for ds in datasets for server in servers]

    def claims(v) -> bool:
        return ((TUNED_SCOPE in v.scope) == tuned and
                any(v.scope == pre or v.scope.startswith(pre + ", ") for pre in prefixes))
    return common.FigureScope(where, None if tuned else "paper", claims)


def _family_panel(ax, sub, metric, fam, x="round", logx=False):
    fp = sub[sub.family == "full"]
    grp = sub[sub.family == fam].copy()
    if len(grp):
        settings = sorted(grp.compressor.unique(), key=lambda s: param_of(s) if
                          not math.isnan(param_of(s)) else 0)
        grp["label"] = grp.compressor.map({s: i for i, s in enumerate(settings)})
        plotting.band_plot(ax, grp, metric, "label", x=x, palette=_palette(len(settings)),
                           label=lambda i: setting_label(settings[int(i)]))
    if len(fp) and fam != "full":
        plotting.band_plot(ax, fp, metric, "family", x=x, palette=["black"], linestyle="--",
                           label=lambda _: setting_label(fp.compressor.iloc[0]))
    if logx:
        log_x(ax)


def clip_loss(ax, df):
    """Cap a train-loss axis at 1.3x the initial loss, so that a diverging run does not
    flatten the others (its legend entry says it diverged)."""
    start = df[(df.metric == "train_loss") & (df["round"] == 0)].value
    if len(start) and np.isfinite(start).all():
        lo, hi = ax.get_ylim()
        ax.set_ylim(max(0.0, lo), min(hi, 1.3 * float(start.mean())))


def log_x(ax):
    """A log x axis with plain-text tick labels (mathtext labels are slow to lay out)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0e}".replace("e+0", "e")))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _with_bits(df):
    """Rows of test_acc / train_loss with the cumulative uplink bits of their round as x."""
    bits = df[df.metric == "bits_up"][["run", "seed", "round", "value"]].rename(
        columns={"value": "bits"})
    ev = df[df.metric.isin(["test_acc", "train_loss"]) & (df["round"] > 0)]
    return ev.merge(bits, on=["run", "seed", "round"], how="inner")


def plot(df, cfg):
    df, tuned = split_tuned(df)
    paths = plot_tuned(df, tuned, cfg) if len(tuned) else []
    if not len(df):
        return paths
    servers = [s for s in ("sgd", "ams") if s in set(df.server)]
    fams = [f for f in FAMILIES[:4] if f in set(df.family)] or ["full"]
    for (ds, p), sub in df.groupby(["dataset", "p"]):
        n = int(sub["n"].iloc[0])
        for metric, figs, ylabel in (("test_acc", FIG_ACC, "test accuracy"),
                                     ("train_loss", FIG_LOSS, "train loss")):
            fig, axes = plt.subplots(len(servers), len(fams), squeeze=False,
                                     figsize=(4.2 * len(fams), 3.3 * len(servers)))
            for i, server in enumerate(servers):
                for j, fam in enumerate(fams):
                    ax = axes[i][j]
                    _family_panel(ax, sub[sub.server == server], metric, fam)
                    ran = ((sub.server == server) & (sub.family == fam)).any()
                    ax.set_title(f"{SERVER_LABEL[server]}: {FAMILY_LABEL[fam]}"
                                 f"{' (no EF)' if fam == 'stoc' else ''}"
                                 f"{'' if ran else ' (not run)'}", fontsize=10)
                    ax.set_ylabel(ylabel)
                    if metric == "train_loss":
                        clip_loss(ax, sub)
                    ax.legend(fontsize=7)
            num = figs.get((ds, float(p)))
            fig.suptitle(f"{'Fig. ' + str(num) + ': ' if num else ''}{DATASET_LABEL[ds]} CNN "
                         f"{ylabel}, n={n}, p={p:g} (m={clients_per_round(p, n)}), "
                         f"{cfg.seeds} seed(s)")
            stem = f"fedef_fig{num}" if num else f"fedef_{metric}_{ds}_p{p:g}"
            paths += plotting.save(fig, cfg.figures, stem, figure_scope(p, [ds], servers))
    final = finals(df, cfg.rounds)
    chosen = select(final)
    for p, sub in df.groupby("p"):
        datasets = [d for d in ("mnist", "fmnist") if d in set(sub.dataset)]
        cols = [(d, m) for d in datasets for m in ("train_loss", "test_acc")]
        fig, axes = plt.subplots(len(servers), len(cols), squeeze=False,
                                 figsize=(4.2 * len(cols), 3.3 * len(servers)))
        bits = _with_bits(sub)
        for i, server in enumerate(servers):
            keep = chosen[(chosen.p == p) & (chosen.server == server)]
            for j, (ds, metric) in enumerate(cols):
                ax = axes[i][j]
                picked = keep[keep.dataset == ds].compressor.tolist()
                rows = bits[(bits.server == server) & (bits.dataset == ds)
                            & bits.compressor.isin(picked)].copy()
                colors = {"sign": "tab:red", "topk": "tab:blue", "hvsign": "tab:green",
                          "stoc": "tab:purple", "full": "black"}
                for fam in FAMILIES:
                    f_rows = rows[rows.family == fam]
                    if not len(f_rows):
                        continue
                    spec = f_rows.compressor.iloc[0]
                    plotting.band_plot(ax, f_rows, metric, "family", x="bits",
                                       palette=[colors[fam]],
                                       linestyle="--" if fam == "full" else "-",
                                       label=lambda _, s=spec: setting_label(s))
                log_x(ax)
                if metric == "train_loss":
                    clip_loss(ax, sub[sub.dataset == ds])
                ax.set_xlabel("uplink bits per client (cumulative)")
                ax.set_ylabel("train loss" if metric == "train_loss" else "test accuracy")
                ax.set_title(f"{SERVER_LABEL[server]}: {DATASET_LABEL[ds]}", fontsize=10)
                ax.legend(fontsize=7)
        num = FIG_BITS.get(float(p))
        fig.suptitle(f"{'Fig. ' + str(num) + ': ' if num else ''}loss and accuracy against "
                     f"uplink bits, p={p:g}\n(one setting per method, by the paper's rule)")
        paths += plotting.save(fig, cfg.figures, f"fedef_fig{num}" if num else
                               f"fedef_bits_p{p:g}", figure_scope(p, datasets, servers))
    md = tables_markdown(final, scale_note(df, cfg))
    if len(tuned):
        picked, _ = tuned_picks(tuned, cfg.rounds)
        md += "\n" + tables_markdown(finals(picked, cfg.rounds), label="tuned comparison")
    out = common.results_dir(sys.modules[__name__], cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tables.md").write_text(md)
    if cfg.write_docs:
        write_docs(cfg.write_docs, md, cfg.docs_block)
    return paths


# ---------------------------------------------------------------------------- claims
#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedef_fig15",
           "fedef_fig5",
           "fedef_fig13",
           "fedef_fig4",
           "fedef_fig2",
           "fedef_fig3",
           "fedef_fig10",
           "fedef_fig11",
           "fedef_fig12",
           "fedef_fig14",
           "fedef_tuned_fmnist_p0.1_ams",
           "fedef_tuned_fmnist_p0.1_sgd")
CLAIMS = vd.claims(
    vd.Claim("E2", "Fed-EF", "p = 0.5, Fed-EF-SGD: Sign, TopK and hv-Sign end within about 1 "
             "point of full precision (Table 2)", "about equal", "Table 2; spec 5 E2"),
    vd.Claim("E3", "Fed-EF", "p = 0.5, Fed-EF-AMS: Sign and TopK within about 0.6 points of full "
             "precision, hv-Sign slightly lower (Table 3)", "about equal", "Table 3; spec 5 E3"),
    vd.Claim("E4", "Fed-EF", "p = 0.1, Fed-EF-SGD: all three compressors within about 0.5 "
             "points of full precision (Table 4)", "about equal", "Table 4; spec 5 E4"),
    vd.Claim("E5", "Fed-EF", "p = 0.1, Fed-EF-AMS: TopK matches full precision; the sign-based "
             "compressors are outperformed by TopK (Table 5)", "every", "Table 5; spec 5 E5"),
    vd.Claim("E6", "Fed-EF", "the matching curves use >= 100x fewer uplink bits than full "
             "precision for TopK and hv-Sign, about 32x for Sign", "every",
             "Figs. 4-5; spec 5 E6"),
    vd.Claim("E7", "Fed-EF", "accuracy generally decreases as compression increases", "ordering",
             "Figs. 2-3, 10-15; spec 5 E7"),
)
_CELL = ("about 2.5 CPU-min a cell (one seed, 50 rounds, 10 clients a round; a point that "
         "diverges stops early), measured on the tuned comparison's Fed-EF-AMS cells")


def _tuned_cost(server: str, p: float, settings: str, cells: str, hours: str) -> str:
    return (f"the tuned comparison (--tuned {server}@{p:g} --tuned-compressors {settings}; "
            f"{cells}; {_CELL}{' x 5 for 50 clients a round' if p == 0.5 else ''}): {hours} "
            "(docs/fedef_results.md, \"The tuned comparison\")")


#: The paper's settings of these claims not run here, with their cost (the report lists them).
NOT_RUN = (
    *(vd.NotRun(c, f"FMNIST, p=0.5, {SERVER_LABEL[server]}, tuned comparison",
                _tuned_cost(server, 0.5, "full,sign,topk-0.01,hvsign-0.1",
                            "4 settings x at least 3 x 3 points x 3 seeds",
                            "about 20-25 CPU-hours"), gpu=False)
      for c, server in (("E2", "sgd"), ("E3", "ams"))),
)
MATCH = 0.01             # "within about 1 point" (spec 5: ~1 pooled std of the paper's)
CLAIM_OF = {(0.5, "sgd"): "E2", (0.5, "ams"): "E3", (0.1, "sgd"): "E4", (0.1, "ams"): "E5"}


def _acc_seeds(df, ds, p, server, spec):
    return vd.per_seed(df, "test_acc", "final", run=f"{ds}_p{p:g}_{server}_{spec}")


def check(df, cfg):
    """Table 1's rates (the paper's protocol as run here) and, with ``--tuned`` rows, the
    symmetric tuned comparison beside it (each setting at its own pick, verdicts scoped
    ``tuned comparison``)."""
    paper, tuned = split_tuned(df)
    lines = [scale_note(paper if len(paper) else df, cfg)]
    out = []
    final = None
    if len(paper):
        final = finals(paper, cfg.rounds)
        out += _verdicts(paper, final, cfg, lines,
                         "paper: Table 1's rates (the paper tuned each compressor over App. B.1)")
    if len(tuned):
        from . import protocols as pr
        rows, picks = tuned_picks(tuned, cfg.rounds)
        lines.append("the symmetric tuned comparison (" + TUNED_TEXT + "):")
        for _, k in picks.iterrows():
            where = (f"pick eta={k.eta:g}, eta_l={k.eta_l:g} (final test accuracy "
                     f"{100 * k.score:.2f})" if np.isfinite(k.eta) else "no healthy point")
            lines.append(f"  {DATASET_LABEL[k.dataset]} p={k.p:g} {SERVER_LABEL[k.server]} "
                         f"{setting_label(k.compressor)}: {where}; {k.points} points, eta "
                         f"{', '.join(f'{v:g}' for v in k.etas)} x eta_l "
                         f"{', '.join(f'{v:g}' for v in k.eta_ls)}"
                         + ("" if k.interior is not False else "; pick on an edge"))
        from dataclasses import replace
        for _, panel in picks.groupby(["dataset", "p", "server"]):
            keep = rows[rows["sweep"].isin(panel["sweep"])]
            if not len(keep):
                continue
            # the panel's protocol: interior only if every one of its picks is
            proto = pr.protocol_of(tuned[tuned["sweep"].isin(panel["sweep"])])
            interior = [v for v in panel["interior"] if v is not None]
            if proto is not None and interior:
                proto = replace(proto, interior=all(bool(v) for v in interior))
            out += _verdicts(keep, finals(keep, cfg.rounds), cfg, lines, proto,
                             suffix=TUNED_SCOPE, bits=False)
        if len(rows):
            lines += ["", tables_markdown(finals(rows, cfg.rounds), label="tuned comparison")]
    if final is not None:
        lines += ["", tables_markdown(final, scale_note(paper, cfg))]
    return lines + out


def _verdicts(df, final, cfg, lines, proto, suffix: str = "", bits: bool = True) -> list:
    """The verdicts of E2-E7 on ``df``'s runs (one per dataset, p, server and setting) at the
    rates they ran, resting on ``proto`` (a protocol's text or its
    :class:`reproduce.protocols.Protocol`); ``suffix`` ends each scope; ``bits``: E6 too
    (the bit counts do not depend on the rates, so one protocol files them)."""
    chosen = select(final)
    from . import regime as rg
    out = []
    for (ds, p, server), grp in final.groupby(["dataset", "p", "server"]):
        fp = grp[grp.family == "full"]
        accs = ", ".join(f"{r.compressor} " + (f"diverged at round {int(r.diverged_at)}"
                                                 if r.diverged else f"{r.acc:.2f}")
                         for _, r in grp.iterrows())
        lines.append(f"{DATASET_LABEL[ds]} p={p:g} {SERVER_LABEL[server]}{suffix}: final test "
                     f"accuracy (%) {accs}")
        n = int(df.loc[df.dataset == ds, "n"].iloc[0])
        m = clients_per_round(float(p), n)
        card = rg.RegimeCard([rg.clients(n, 200, source="Sec. 5: n = 200"),
                              rg.clients_per_round(m, int(round(float(p) * 200)),
                                                   source=f"Sec. 5: p = {p:g} of 200"),
                              rg.horizon(cfg.rounds, 100, source="100 rounds"),
                              rg.seeds(cfg.seeds, 3, "Tables 2-5: mean (std)")])
        if not isinstance(proto, str):        # a tuning: its conformance joins the card
            card = card.plus(*proto.card_items())
        scope = claim_scope(ds, p, server, suffix)
        if not len(fp):
            continue
        fp_bits = float(fp.bits.iloc[0])
        sel = chosen[(chosen.dataset == ds) & (chosen.p == p) & (chosen.server == server)]
        paper = PAPER_TABLES.get((float(p), server), {}).get(ds, {})
        fp_seeds = _acc_seeds(df, ds, p, server, fp.compressor.iloc[0])
        cid = CLAIM_OF.get((float(p), server))
        parts, bit_parts = [], []
        for _, r in sel.iterrows():
            if r.family == "full":
                continue
            pv = paper.get(r.family)
            pgap = f"; paper {pv[0] - paper['full'][0]:+.2f}" if pv else ""
            lines.append(f"  {setting_label(r.compressor)} ({r.rule}): "
                         + (f"diverged at round {int(r.diverged_at)}" if r.diverged else
                            f"{r.acc - float(fp.acc.iloc[0]):+.2f} points vs full precision")
                         + f"{pgap}; {fp_bits / r.bits:.0f}x fewer uplink bits")
            if r.family in EF_FAMILIES:
                parts.append(vd.about_equal(CLAIMS[cid] if cid else CLAIMS["E2"],
                                            _acc_seeds(df, ds, p, server, r.compressor),
                                            fp_seeds, MATCH, unit="pp", scale=100,
                                            what=f"{setting_label(r.compressor)} - full "
                                                 "precision final test accuracy"))
                need = 32 if r.family == "sign" else 100
                bit_parts.append(vd.holds(CLAIMS["E6"], [fp_bits / r.bits], need * 0.95,
                                          side=">=", what=f"{setting_label(r.compressor)}: "
                                          "uplink bits of full precision / its bits "
                                          f"(>= {need}x, within 5 %)"))
        if cid and parts and cid != "E5":
            out.append(vd.every(CLAIMS[cid], parts, what="every Fed-EF compressor within "
                                f"{100 * MATCH:g} point of full precision", card=card,
                                protocol=proto, scope=scope))
        if cid == "E5":
            topk = [v for v in parts if "TopK" in v.what]
            fam = sel.set_index("family")
            extra = []
            if "topk" in fam.index:
                tk = _acc_seeds(df, ds, p, server, fam.loc["topk", "compressor"])
                extra = [vd.above(CLAIMS["E5"], tk, _acc_seeds(df, ds, p, server,
                                                               fam.loc[f, "compressor"]),
                                  unit="pp", scale=100, margin=0.005,
                                  what=f"TopK above {FAMILY_LABEL[f]}")
                         for f in ("sign", "hvsign") if f in fam.index]
            signs = any(f in fam.index for f in ("sign", "hvsign"))
            out.append(vd.every(CLAIMS["E5"], topk + extra, what="TopK matches full "
                                "precision" + (", sign-based compressors below TopK" if signs
                                               else " (no sign-based setting compared)"),
                                card=card, protocol=proto, scope=scope))
        if bits and bit_parts:
            out.append(vd.every(CLAIMS["E6"], bit_parts, what="fewer uplink bits at the "
                                "selected settings", scope=scope))
        for fam in ("topk", "hvsign", "stoc"):
            sub = grp[grp.family == fam].sort_values("bits", ascending=False)
            if len(sub) >= 2:
                out.append(vd.ordering(CLAIMS["E7"], [
                    (setting_label(c), _acc_seeds(df, ds, p, server, c)) for c in sub.compressor],
                    margin=0.005, unit="pp", scale=100, card=card, protocol=proto,
                    scope=f"{scope}, {FAMILY_LABEL[fam]}",
                    what="final test accuracy falls as compression rises"))
    return out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))

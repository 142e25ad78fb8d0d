"""Fed-LAMB main Figures 1-2: MNIST, non-iid, CNN and MLP: Fed-SGD, Fed-AMS, Fed-LAMB.

The paper's setting (MAIN Sec. 4, spec 3.1-3.3): MNIST split non-iid over 50 clients, half of
them (25, drawn without replacement) active each round, local batch 32, beta = (0.9, 0.999);
the CNN of the classic example net (``mnist-cnn``) and the MLP with one hidden layer of 200
and dropout (``mlp-dropout``, :mod:`sims.problems.models`); each method at its best learning rate
from SUPP Table 1, Fed-LAMB also at its best lambda in {0, 0.01, 0.1}; 3 runs; test
accuracy against rounds; several numbers of local epochs, not named (spec 5.17). Decisions
(spec 5, 6): the non-iid split is two single-class label shards per client
(``scheme="shards"``); ``phi`` is clipped to [1e-3, 10]; the best point is the highest final
test accuracy averaged over seeds among runs with no diverged seed (:func:`select_best`).

Local epochs: E = 1 and 2 in the default, E = 1, 3, 5 with ``--full`` (spec 6's suggestion).

Readings (module :mod:`sims.algorithms.fed_lamb`): Fed-AMS and Fed-LAMB run the registry's
default reading (per-step AMSGrad max from the server's ``vhat``, bias correction over all of
a client's steps, ``v_0 = 0``) and, dashed, MAIN Alg. 2's printed reading (``vhat`` fixed
within the round, correction over the local ``t``, ``v_0 = eps``, ``sqrt(vhat + eps)``) at
its piloted eps (:data:`reproduce.fedlamb_common.PILOT`: the eps pilot over eps in {1e-8,
1e-6, 1e-5, 1e-4, 1e-3, 1e-2}, docs/fedlamb_pilot.md). At ``eps = 1e-8`` the printed Fed-AMS
does not train at any Table 1 rate on either model (recorded as diverged at the rates >=
0.005 on the CNN and >= 0.01 on the MLP, at or near chance, <= 12.5 %, at the others; loss
2.30 -> 13.1 in one round, ``tests/test_fedlamb_readings.py``); at E = 1 its best eps is
1e-4 on the CNN and, over two pilot seeds, 1e-5 on the MLP (its best rate grows with eps
and its best accuracy is nearly flat along that diagonal). The printed Fed-LAMB trains at
every eps (its steps are normalised per layer); its eps changes its accuracy by at most 2.3
points at its best rate. ``--printed-eps`` sets one eps, or sweeps a comma list as a grid
axis of the printed pair; ``--axes METHOD.KEY=v1,v2`` replaces a method's values (pilots),
``--axes PANEL:METHOD.KEY=...`` in one panel only (``mlp-dropout_E5:fed-lamb.lam=0,0.01,0.1``:
the ledger's lambda at E = 5, where its pilot's best lambda is 0.01; a later part replaces an
earlier one); ``--no-printed`` leaves the printed runs out.

Data (``--dataset``): ``mnist``, full MNIST from ``--data-dir``, without it the embedded
4,000-image subset (80 training images per client instead of 1,200: 3 local steps per epoch
instead of 38), named as such in the figure title and the summary; or ``fmnist``, full
Fashion-MNIST (60,000 training images: 1,200 a client, 38 local steps an epoch at batch 32,
the paper's local-step regime; a stand-in for MNIST, named as such). Fashion-MNIST panels
have their own pilot (:data:`FMNIST_PILOT_ROUND`, docs/fedlamb_pilot.md): Table 1's whole
grids (Fed-LAMB over every lambda) on one seed, read at round 10; ``--grid sub`` then runs
each method's pilot best and its better Table 1 neighbour on every seed (``--grid near``: the
pilot best and both its Table 1 neighbours, a bracket; the ledger's run), each rate
climbing Table 1's grid while its pick sits on an edge of the bracket that is not Table 1's
(:func:`reproduce.fedlamb_common.make_tuning_runs`), and the paper's rule selects among them
at the plotted horizon (the protocol of "a one-seed pilot over the whole grid may pick the
candidates"; :func:`protocol`).

Tuning. The CPU default (``--grid sub``) runs each method over a two-rate sub-grid from a
recorded pilot (:data:`reproduce.fedlamb_common.PILOT`, docs/fedlamb_pilot.md: Table 1's
whole rate grids, Fed-LAMB over every lambda, one seed, 15 rounds, both models, read at
round 12; one pilot at E = 1 and one at E = 2, each panel takes its own E's,
:func:`reproduce.fedlamb_common.pilot_key`): the pilot's best rate and its better Table 1
neighbour, Fed-LAMB at the pilot's best lambda (E = 1: 0.01 and rate 0.1 for both models,
E = 2: 0 and rates 0.05 / 0.03, one Table 1 step lower; the three lambdas were within 1.2 points of each
other at every rate up to 0.1; past the best, at 0.3-0.5 on the MLP, lambda = 0.1 was up to
20 points better but still far below the best), the printed pair at its pilot best point;
selection over 3 seeds by the paper's rule. 3 seeds, **12 rounds** (evaluated every 2), E =
1 and 2. ``--grid near`` runs each rate's
Table 1 neighbours and every lambda; ``--full``: the whole Table 1 grids (Fed-LAMB over
lambda too), 3 seeds, 100 rounds (the paper does not state its rounds), E = 1, 3, 5: its
cost, extrapolated from the measured per-round times, is printed by the check (one slice of
it was run and timed: docs/fedlamb_pilot.md; ``--methods``, ``--models`` and ``--epochs``
narrow ``--full`` to a slice). T5 (the
consensus bound) is printed by the check on a real run
(:func:`reproduce.fedlamb_common.consensus_lines`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial

from . import common
from . import fedlamb_common as fl
from . import verdicts as vd

PAPER, TARGET = "Fed-LAMB", "Figures 1-2"
TITLE = "MNIST non-iid, CNN and MLP: Fed-LAMB vs Fed-AMS and Fed-SGD (test accuracy)"
DEFAULT_COST = ("4.1 CPU-min, 4.5 min of wall time in a heavy slot on the shared 2-core machine "
                "(embedded MNIST subset, 2 models x E in {1, 2}, the sub-grid's 8 points per "
                "panel, 3 seeds, 12 rounds)")

METHODS = ("fed-sgd", "fed-ams", "fed-lamb")
MODEL_LABEL = {"mnist-cnn": "CNN (example net)", "mlp-dropout": "MLP 200 + dropout"}


@dataclass
class Config(fl.Config):
    seeds: int = 3
    rounds: int = 12
    grid: str = "sub"
    models: str = "mnist-cnn,mlp-dropout"
    epochs: str = "1,2"
    m: int = 25
    eval_every: int = 2
    dataset: str = "mnist"            # or fmnist: full Fashion-MNIST, the paper's local steps

    def scale(self):
        if self.full:
            self.rounds, self.epochs, self.grid, self.eval_every = 100, "1,3,5", "table1", 1
        if self.tiny:
            self.seeds, self.rounds, self.epochs, self.n, self.m, self.eval_every = \
                2, 2, "1", 10, 5, 1


DATASETS = ("mnist", "fmnist")
#: The reading round of the Fashion-MNIST pilots (:data:`reproduce.fedlamb_common.PILOT`'s
#: ``fmnist-MODEL`` keys): they pick two candidates a method; the selection between them is
#: made at the plotted horizon on every seed (:func:`protocol`).
FMNIST_PILOT_ROUND = 10


def settings(cfg) -> list[fl.Setting]:
    if cfg.dataset not in DATASETS:
        raise common.EntryError(f"--dataset must be one of {', '.join(DATASETS)}, "
                                f"got {cfg.dataset!r}")
    return fl.model_epoch_settings(cfg, MODEL_LABEL, cfg.dataset, "shards",
                                   fl.dataset_label(cfg.dataset, cfg.data_dir))


def pilot_of(cfg, s: fl.Setting) -> str:
    """The :data:`reproduce.fedlamb_common.PILOT` key of panel ``s``: the MNIST-subset pilot
    of its model and E, or Fashion-MNIST's ``fmnist-MODEL`` (E = 1's; a one-line error where
    a grid needs a pilot that was not recorded)."""
    if s.dataset == "mnist":
        return fl.pilot_key(s.model, s.epochs)
    key = fl.pilot_key(f"fmnist-{s.model}", s.epochs)
    needs = cfg.grid in ("sub", "best", "near") or (runs_printed(cfg) and not cfg.printed_eps)
    if key not in fl.PILOT and needs:
        raise common.EntryError(
            f"--dataset fmnist: no recorded pilot for {s.model}; run --grid table1 (with "
            "--no-printed, or --printed-eps) or record one in fedlamb_common.PILOT")
    return key


def protocol(cfg):
    """The protocol the comparison rests on. Fashion-MNIST at ``--grid sub`` or ``near``: the
    paper's (Table 1's grids and lambda; a one-seed pilot over the whole grid, read at
    :data:`FMNIST_PILOT_ROUND`, picks the candidates: ``sub`` its best point and better Table
    1 neighbour, ``near`` its best point and both neighbours in the rate, a bracket; the
    paper's rule selects between them at the plotted horizon on every seed, and the card
    checks the seeds); otherwise :func:`reproduce.fedlamb_common.protocol`."""
    if cfg.dataset == "fmnist" and cfg.grid in ("sub", "near"):
        return fl.pruned_paper_protocol(
            cfg, FMNIST_PILOT_ROUND, grids=" and lambda: a one-seed pilot over the whole grid",
            each="the rate",
            after_picks=f" (values replaced by --axes {cfg.axes})" if cfg.axes else "",
            source="SUPP Table 1, MAIN Sec. 4; pilot: docs/fedlamb_pilot.md")
    return fl.protocol(cfg, FMNIST_PILOT_ROUND if cfg.dataset == "fmnist" else PILOT_ROUND)


def methods(cfg) -> list[str]:
    return fl.chosen_methods(cfg, METHODS)


def runs_printed(cfg) -> bool:
    """Whether MAIN Alg. 2's printed pair is among the methods run."""
    return bool(set(methods(cfg)) & set(fl.PRINTED_PAIR))


def runs(cfg):
    if not 1 <= cfg.m <= cfg.n:
        raise common.EntryError(f"--m must be in [1, --n], got m={cfg.m}, n={cfg.n}")
    keys = {s.key: pilot_of(cfg, s) for s in settings(cfg)}
    best = lambda s, m: fl.PILOT.get(keys[s.key], {}).get(m, ({},))[0]     # noqa: E731
    sub = lambda s, m: fl.pilot_subgrid(keys[s.key], m)                     # noqa: E731
    out = fl.make_tuning_runs(cfg, settings(cfg), methods(cfg), best, protocol(cfg), sub=sub)
    if cfg.tuned:               # the symmetric tuned comparison beside the paper's protocol
        out += fl.tuned_runs(cfg, settings(cfg), methods(cfg), best, sub=sub)
    return out


def plot(df, cfg):
    return fl.plot_protocols(df, cfg, "fedlamb_fig12", _plot)


def _plot(df, cfg, stem, protocol_text):
    data = fl.dataset_label(cfg.dataset, cfg.data_dir)
    if cfg.dataset == "fmnist":
        data = f"full {data} (stand-in for the paper's MNIST)"
    note = (fl.READINGS_NOTE if runs_printed(cfg) else
            "Fed-AMS/Fed-LAMB default reading (MAIN Alg. 2's printed reading not run)")
    title = (f"Fed-LAMB Figs. 1-2: {data}, non-iid (2 label shards/client), n={cfg.n}, "
             f"{cfg.m} per round, batch {cfg.batch}; {protocol_text}, {cfg.seeds} seed(s), "
             f"mean and seed range\n" + note)
    return fl.plot_panels(df, cfg, settings(cfg), methods(cfg), title, stem)


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlamb_fig12", "fedlamb_fig12_tuned")
CLAIMS = vd.claims(
    vd.Claim("E1", "Fed-LAMB", "MNIST non-iid, MLP and CNN: Fed-LAMB has higher test accuracy "
             "across rounds and higher or equal final accuracy than Fed-AMS and Fed-SGD, each at "
             "its best Table 1 point", "every", "MAIN Sec. 4, Figs. 1-2; spec 4 E1"),
    vd.Claim("E3", "Fed-LAMB", "the E1 ordering holds at every number of local epochs tested",
             "every", "MAIN Sec. 4; spec 4 E3"),
    fl._t5(),
)
_CNN_COST = ("the example CNN on full Fashion-MNIST is about 14 CPU-s a round a cell at E = 1, "
             "9x the dropout MLP (timed 2026-11-30): a 30-cell bracket about 12 CPU-hours at "
             "E = 1 and, a round's cost growing about linearly in E, about 100 CPU-hours for "
             "E = 1, 3 and 5 (docs/fedlamb_results.md)")
_E5_COST = ("the E = 5 bracket with its climb along Table 1 and its tuned extensions, about "
            "65-75 cells at about 640 s each (about 12 CPU-hours); resumable and carried "
            "between sessions (docs/fedlamb_pilot.md, \"Fashion-MNIST pilot at E = 5\")")
#: The paper's settings of E1 not run here, with their cost (the report lists them).
NOT_RUN = (
    *(vd.NotRun("E1", f"{MODEL_LABEL['mnist-cnn']}, Fashion-MNIST, E={e}", _CNN_COST)
      for e in (1, 3, 5)),
    vd.NotRun("E1", f"{MODEL_LABEL['mlp-dropout']}, Fashion-MNIST, E=5", _E5_COST, gpu=False),
)
PILOT_ROUND = 12          # the recorded pilot's reading round (docs/fedlamb_pilot.md)


def check(df, cfg):
    lines = fl.header_lines(sys.modules[__name__], cfg, df, cfg.dataset, cfg.n, cfg.batch)
    if cfg.dataset == "fmnist":
        lines.append("data: full Fashion-MNIST stands in for the paper's MNIST (the same "
                     "image size and 10 classes; 1,200 training images a client, the paper's "
                     "local steps)")
    out, sel, paper, chosen = fl.both_protocols(cfg, df, partial(_verdicts, cfg),
                                                protocol(cfg), CLAIMS["E1"])
    lines += sel
    mlp = [s for s in settings(cfg) if s.model.startswith("mlp")] or settings(cfg)
    out += fl.consensus_lines(cfg, chosen, paper, mlp[0])
    lines += fl.cost_lines(df, cfg, full_seeds=3, full_rounds=100, full_epochs=(1, 3, 5),
                           methods=methods(cfg))
    return lines + out


def _verdicts(cfg, df, chosen, proto_of, scope: str) -> list:
    """E1 per panel (and the printed pair's, where it runs) and E3 over the panels, on one
    protocol's rows ``df`` and selections ``chosen``; ``proto_of(setting)`` its protocol."""
    out, per_e = [], []
    for s in settings(cfg):
        proto = proto_of(s)
        edges = fl.pruned_edge_picks(chosen, df, s.key) if proto.kind == "paper" else None
        card = fl.card(cfg, s, proto, steps_paper=38, clients_paper=25, edges=edges)
        v = fl.compare(chosen, df, s.key, ["fed-lamb"], ["fed-ams", "fed-sgd"], CLAIMS["E1"],
                       card=card, protocol=proto, scope=s.title + scope)
        out.append(v)
        per_e.append(v)
        if "fed-lamb-printed" in methods(cfg):
            out.append(fl.compare(chosen, df, s.key, ["fed-lamb-printed"], ["fed-ams-printed"],
                                  CLAIMS["E1"], card=card, protocol=proto,
                                  scope=f"{s.title}, printed reading ("
                                        + fl.printed_eps_text(df, chosen, s.key) + ")"
                                        + scope))
    epochs = sorted({s.epochs for s in settings(cfg)})
    proto = per_e[0].protocol if per_e else None
    if len(epochs) > 1:
        out.append(vd.every(CLAIMS["E3"], per_e, what="E1 at every E tested",
                            card=per_e[0].card if per_e else None, protocol=proto,
                            scope=scope.lstrip(", ")))
    else:
        out.append(vd.missing(CLAIMS["E3"], "E1 at every E tested",
                              f"one number of local epochs run (E = {epochs[0]}); E3 needs "
                              "two or more (--epochs)", protocol=proto,
                              scope=scope.lstrip(", ")))
    return out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))

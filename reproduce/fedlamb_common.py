"""What the Fed-LAMB entries share: supplement Table 1's grids, the methods by name (with the
registry's default reading and MAIN Alg. 2's printed one), and the consensus observer (T5).

Spec: ``shared/specs/fed-lamb.md`` (sections 1, 3-6).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from sims.core.context import RoundContext
from sims.algorithms.fed_lamb import PRINTED
from sims.algorithms.registry import make_algorithm
from sims.rules.trust import layer_norms
from sims.core.participation import Participation
from sims.experiments.sweep import Axis, Grid
from sims.experiments.sweep.grid import GridError, parse_axis

from . import common, protocols
from .common import items  # noqa: F401  (the entries read it from here too)
from .protocols import split_tuned
from .sweeps import FED_LAMB_TABLE1, sweep_run

#: SUPP Table 1, "Search grids of the learning rate" (spec 3.4), and MAIN Sec. 4's lambda:
#: the sweep API's table (:data:`reproduce.sweeps.FED_LAMB_TABLE1`), one copy for the project.
GRIDS = {m: FED_LAMB_TABLE1[m] for m in ("fed-sgd", "fed-ams", "fed-lamb", "adp-fed", "mime",
                                         "mime-lamb")}
#: Mime-LAMB's lambda: Table 1 lists its rates only; MAIN Sec. 4 tunes lambda in {0, 0.01, 0.1}
#: for the layer-wise methods, and Mime-LAMB's rule has the same decay term (Fed-LAMB's l. 13).
GRIDS["mime-lamb"] = {**GRIDS["mime-lamb"], "lam": FED_LAMB_TABLE1["fed-lamb"]["lam"]}
LABELS = {"fed-sgd": "Fed-SGD", "fed-ams": "Fed-AMS", "fed-lamb": "Fed-LAMB",
          "adp-fed": "Adp-Fed", "mime": "Mime", "mime-lamb": "Mime-LAMB",
          "fed-ams-printed": "Fed-AMS (printed)", "fed-lamb-printed": "Fed-LAMB (printed)"}

#: The recorded pilot sweeps (docs/fedlamb_pilot.md: commands, every point's final accuracy):
#: one seed, ``--grid pilot`` (Table 1's rate grids; Fed-LAMB over every lambda in main
#: Figs. 1-2, at lambda 0 in the supplement's; Adp-Fed over :data:`PILOT_AXES`), in each
#: entry's own setting at E = 1 (main Figs. 1-2: 15 rounds, read at 12; supplement Fig. 1:
#: 6 rounds), and main Figs. 1-2 again at E = 2 (keys ``MODEL_E2``, :func:`pilot_key`).
#: Per pilot key (a model of main Figs. 1-2, a dataset of the supplement's) and method: the
#: pilot's best point, and the runner-up among its Table 1 neighbours in the rate (Adp-Fed:
#: in one of its two rates, as a dict) (the default's sub-grid is these two rates, at the
#: best lambda; :func:`pilot_subgrid`).
#: The printed pair (``*-printed``, MAIN Alg. 2 as printed) runs only its pilot best point
#: in the default, eps included: its eps is tuned like a rate by the eps pilot
#: (docs/fedlamb_pilot.md, "eps pilot": eps in :data:`PRINTED_EPS`, one seed, the same
#: settings and reading rounds; printed Fed-AMS over its whole Table 1 rate grid, printed
#: Fed-LAMB at lambda 0 over the earlier pilot's best rate and its Table 1 neighbours), its
#: lambda by the lambda pilot (docs/fedlamb_pilot.md: lambda in {0, 0.01, 0.1} at that eps,
#: over the best rate and its Table 1 neighbours; lambda 0 stays except on Fashion-MNIST).
PILOT = {
    # main Figs. 1-2: embedded MNIST subset, 50 clients, 25 a round, batch 32, E = 1; read at
    # round 12, the default's horizon (docs/fedlamb_pilot.md has round 15 too)
    "mnist-cnn": {"fed-sgd": ({"eta_l": 0.1}, 0.05),            # 56.1 %, 0.05: 51.3 %
                  "fed-ams": ({"eta_l": 0.01}, 0.005),          # 74.1 %, 0.005: 53.7 %
                  "fed-lamb": ({"eta_l": 0.1, "lam": 0.01}, 0.05),  # 71.4 %, 0.05: 51.3 %
                  "fed-ams-printed": ({"eta_l": 0.005, "eps": 1e-4}, None),       # 43.8 %
                  "fed-lamb-printed": ({"eta_l": 0.1, "lam": 0.0, "eps": 1e-8}, None)},  # 84.9
    "mlp-dropout": {"fed-sgd": ({"eta_l": 0.1}, 0.05),          # 85.0 %, 0.05: 81.6 %
                    "fed-ams": ({"eta_l": 0.01}, 0.005),        # 86.6 %, 0.005: 85.9 %
                    "fed-lamb": ({"eta_l": 0.1, "lam": 0.01}, 0.05),  # 82.5 %, 0.05: 82.4 %
                    # two pilot seeds (docs/fedlamb_pilot.md, "second seed"): 80.55 % mean
                    # (78.1, 83.0); seed 0 alone had picked 0.03 at 1e-2 (78.8, 77.5)
                    "fed-ams-printed": ({"eta_l": 0.001, "eps": 1e-5}, None),
                    "fed-lamb-printed": ({"eta_l": 0.1, "lam": 0.0, "eps": 1e-6}, None)},  # 87.0
    # main Figs. 1-2 at E = 2 (:func:`pilot_key`): the E = 2 pilot (docs/fedlamb_pilot.md), the
    # same protocol, read at round 12; the printed pair at its E = 1 eps, over Table 1's rates
    # (and every lambda). Fed-SGD and Fed-AMS confirm E = 1; Fed-LAMB's best rate drops a step.
    "mnist-cnn_E2": {"fed-sgd": ({"eta_l": 0.1}, 0.05),         # 75.7 %, 0.05: 67.1 %
                     "fed-ams": ({"eta_l": 0.01}, 0.005),       # 86.7 %, 0.005: 77.7 %
                     "fed-lamb": ({"eta_l": 0.05, "lam": 0.0}, 0.03),  # 80.2 %, 0.03: 71.7 %
                     "fed-ams-printed": ({"eta_l": 0.003, "eps": 1e-4}, None),       # 49.5 %
                     "fed-lamb-printed": ({"eta_l": 0.05, "lam": 0.01, "eps": 1e-8}, None)},  # 85.3
    "mlp-dropout_E2": {"fed-sgd": ({"eta_l": 0.1}, 0.05),       # 83.6 %, 0.05: 80.6 %
                       "fed-ams": ({"eta_l": 0.01}, 0.005),     # 87.0 %, 0.005: 85.6 %
                       "fed-lamb": ({"eta_l": 0.03, "lam": 0.0}, 0.05),  # 81.3 %, 0.05: 78.2 %
                       "fed-ams-printed": ({"eta_l": 0.03, "eps": 1e-2}, None),      # 85.2 %
                       "fed-lamb-printed": ({"eta_l": 0.1, "lam": 0.01, "eps": 1e-6}, None)},  # 85.7
    # main Figs. 1-2 on full Fashion-MNIST (``fedlamb_fig12 --dataset fmnist``): 50 clients
    # of 1,200 images, 25 a round, batch 32 (38 local steps an epoch, the paper's), E = 1;
    # Table 1's whole grids (Fed-LAMB over every lambda), one seed, read at round 10
    # (docs/fedlamb_pilot.md, "Fashion-MNIST pilot"); no printed pair
    "fmnist-mlp-dropout": {"fed-sgd": ({"eta_l": 0.1}, 0.05),          # 74.7 %, 0.05: 74.3 %
                           "fed-ams": ({"eta_l": 0.0003}, 0.0005),     # 73.1 %, 0.0005: 72.4 %
                           "fed-lamb": ({"eta_l": 0.003, "lam": 0.0}, 0.005)},  # 72.0, 70.7 %
    # the same at E = 3 (114 local steps a round; docs/fedlamb_pilot.md, "Fashion-MNIST pilot at
    # E = 3"): Table 1's whole grids, Fed-LAMB over every lambda, one seed, read at round 10
    "fmnist-mlp-dropout_E3": {"fed-sgd": ({"eta_l": 0.1}, 0.05),       # 75.8 %, 0.05: 75.2 %
                              "fed-ams": ({"eta_l": 0.0003}, 0.0001),  # 74.0 %, 0.0001: 73.6
                              "fed-lamb": ({"eta_l": 0.003, "lam": 0.0}, 0.001)},  # 72.7, 71.4
    # the same at E = 5 (190 local steps a round; docs/fedlamb_pilot.md, "Fashion-MNIST pilot
    # at E = 5"); Fed-LAMB's best lambda here is 0.01 (0.003/0: 64.8 %, one seed)
    "fmnist-mlp-dropout_E5": {"fed-sgd": ({"eta_l": 0.1}, 0.05),       # 76.5 %, 0.05: 76.0 %
                              "fed-ams": ({"eta_l": 0.0003}, 0.0001),  # 74.6 %, 0.0001: 74.2
                              "fed-lamb": ({"eta_l": 0.003, "lam": 0.01}, 0.001)},  # 72.9, 72.0
    # supplement Fig. 1: 200 clients, all active, batch 64, E = 1, the 784-200-10 MLP, round 6.
    # (a) eta_l = 0.5 is Table 1's top; its lower global rates (1e-4 .. 5e-4) do worse (the
    # edge pilot); (b) Table 1's top; one point beyond it, eta_l = 1, does worse (the extra).
    "mnist": {"fed-sgd": ({"eta_l": 0.1}, 0.05),                # 77.7 %, 0.05: 68.4 %
              "fed-ams": ({"eta_l": 0.03}, 0.01),               # 87.8 %, 0.01: 86.0 %
              "fed-lamb": ({"eta_l": 0.5, "lam": 0.0}, 0.3),    # 86.5 % (b), 0.3: 85.6
              "adp-fed": ({"eta_l": 0.5, "eta": 0.001}, {"eta_l": 0.3}),  # 88.2 %, 86.6 % (a)
              "mime": ({"eta_l": 0.001}, 0.0005),               # 85.9 %, 0.0005: 85.8 %
              "mime-lamb": ({"eta_l": 0.05}, 0.03),             # 85.0 %, 0.03: 81.2 %
              "fed-ams-printed": ({"eta_l": 0.03, "eps": 1e-4}, None),       # 82.3 %
              "fed-lamb-printed": ({"eta_l": 0.5, "lam": 0.0, "eps": 1e-5}, None)},  # 88.3
    "fmnist": {"fed-sgd": ({"eta_l": 0.1}, 0.05),               # 72.8 %, 0.05: 72.3 %
               "fed-ams": ({"eta_l": 0.01}, 0.005),             # 77.1 %, 0.005: 76.3 %
               "fed-lamb": ({"eta_l": 0.1, "lam": 0.0}, 0.05),  # 77.1 %, 0.05: 76.4 %
               "adp-fed": ({"eta_l": 0.1, "eta": 0.003}, {"eta_l": 0.03}),  # 75.4 %, 74.8 %
               "mime": ({"eta_l": 0.0003}, 0.0005),             # 76.2 %, 0.0005: 73.6 %
               "mime-lamb": ({"eta_l": 0.03}, 0.01),             # 75.1 %, 0.01: 72.4 %
               "fed-ams-printed": ({"eta_l": 0.03, "eps": 1e-2}, None),      # 72.9 %
               # the lambda pilot: 0.1 78.89 %, 0 78.87 %, 0.01 78.86 % (a tie the rule breaks)
               "fed-lamb-printed": ({"eta_l": 0.1, "lam": 0.1, "eps": 1e-8}, None)},  # 78.9
}

#: The single point per method of ``--grid best`` and the centre of ``--grid near`` where an
#: entry has no pilot of its own (CIFAR-10): the main-figure CNN pilot's best points.
PILOT_BEST = {m: p for m, (p, _) in PILOT["mnist-cnn"].items()}


def pilot_key(key: str, epochs: int = 1) -> str:
    """The :data:`PILOT` entry of a panel with ``epochs`` local epochs: ``KEY_E{epochs}``
    where a pilot was recorded at that number of epochs (main Figs. 1-2 at E = 2), else
    ``KEY``, the E = 1 pilot (e.g. the embedded subset at E = 3 and 5, not piloted)."""
    own = f"{key}_E{epochs}"
    return own if own in PILOT else key


def pilot_best(key: str, method: str) -> dict:
    return PILOT[key][method][0]


def pilot_subgrid(key: str, method: str) -> dict:
    """``--grid sub``'s values of one method: the pilot's best rate and its better Table 1
    neighbour (one rate for the printed pair), at the pilot's best lambda."""
    best, second = PILOT[key][method]
    if second is not None and not isinstance(second, dict):
        second = {"eta_l": second}
    axes = {k: (v,) for k, v in best.items()}
    for k, v in (second or {}).items():
        axes[k] = tuple(sorted((best[k], v)))
    return axes


READINGS_NOTE = ("Fed-AMS/Fed-LAMB default reading: per-step AMSGrad max from the server's "
                 "vhat, bias correction over all a client's steps, client v_0 = 0; printed "
                 "reading (MAIN Alg. 2; dashed, its tuned eps in the legend): vhat fixed "
                 "within the round (l. 12), correction over the local t (l. 9, 11), v_0 = eps "
                 "(l. 2), sqrt(vhat + eps)")


def grid_size(method: str) -> int:
    return math.prod(len(v) for v in GRIDS[method].values())


def algorithm(method: str, **hyper):
    """A method of the figures by name: the registry's (``fed-sgd`` is Fed-EF's full-precision
    Fed-SGD = FedAvg), or ``fed-ams-printed`` / ``fed-lamb-printed``: the printed reading
    (:data:`sims.algorithms.fed_lamb.PRINTED`), whose ``eps`` must be passed."""
    if method.endswith("-printed"):
        return make_algorithm(method[: -len("-printed")], **PRINTED, **hyper)
    return make_algorithm(method, **hyper)


# ------------------------------------------------------------------------------ T5
def _t5():
    from . import verdicts as vd
    return vd.Claim("T5", "Fed-LAMB", "consensus: within a round every client's layer ends at "
                    "most alpha T phi_M from the round's start model", "holds",
                    "MAIN Lemma / spec 4 T5")


class ConsensusObserver:
    """T5 on a live run (spec 4 T5, property P1): within a round, every client's layer ``l``
    ends at most ``alpha T phi_M`` from the round's start model, ``T`` = its local steps.

    Engine observer (``engine.run(..., observers=[obs])``, ``at_start``): it keeps the server
    and client state it saw after the previous round and replays this round's local work of
    every participant from it with the round's own minibatches (``view.draws``) through the
    algorithm's hooks, recording per layer the drift ``||theta_l^T - theta_l^0||``, the sum
    of the steps' lengths ``sum_t alpha phi(||theta_l^{t-1}||)`` (P1: each step moves the
    layer by exactly that, so the drift is at most the sum) and ``alpha T phi_M``. The replay
    is checked against the run: the mean of the replayed end models is the server's new model
    (Fed-LAMB's ``eta = 1``), up to rounding on a model without dropout. Fed-LAMB family
    (``layerwise`` algorithms with a clipped ``phi`` and ``local_start``/``local_step``) only.

    Metrics per replica: ``t5_ratio`` = max over participants and layers of drift / (alpha T
    phi_M) (T5 holds iff <= 1), ``t5_steps_ratio`` = max of drift / the sum of the step
    lengths (<= 1 by the triangle inequality, = 1 when a layer's steps are aligned),
    ``t5_replay_err`` = relative distance of the replayed mean from the server's model.
    """
    every = 1
    at_start = True

    def __init__(self):
        self._prev = None

    def __call__(self, view) -> dict:
        R = view.server["theta"].shape[0]
        nan = np.full(R, math.nan)
        prev, self._prev = self._prev, ({k: v.clone() for k, v in view.server.items()
                                         if torch.is_tensor(v)},
                                        {k: v.clone() for k, v in view.client_state.items()})
        if prev is None or view.t == 0:
            return {"t5_ratio": nan, "t5_steps_ratio": nan.copy(), "t5_replay_err": nan.copy()}
        return self._replay(view, *prev)

    def _replay(self, view, server, cstate):
        from sims.core.engine import stack_payloads
        alg, problem = view.algorithm, view.problem
        layout, theta_prev = problem.layout, server["theta"]
        dev, dtype = theta_prev.device, theta_prev.dtype
        lr = alg.eta_l * alg.lr_decay ** (view.t - 1)
        R = theta_prev.shape[0]
        out = {k: np.full(R, math.nan) for k in ("t5_ratio", "t5_steps_ratio", "t5_replay_err")}
        bcast = alg.broadcast(server)
        for r in range(R):
            clients = view.draws[r].clients
            if len(clients) == 0:
                continue
            cli = torch.as_tensor(np.asarray(clients, dtype=np.int64), device=dev)
            rep = torch.full_like(cli, r)
            b_cast = {k: v[rep] for k, v in bcast.items()}
            c_state = {k: v[rep, cli] for k, v in cstate.items()}
            payload, mask = stack_payloads(problem, list(view.draws[r].payloads), dev, dtype)
            ctx = RoundContext(view.t - 1, layout, rep, cli, view.last_round_before[rep, cli])
            lstate = alg.local_start(b_cast, c_state, ctx)
            start = b_cast["theta"]
            th = start.clone()
            walked = torch.zeros(len(cli), len(layout.sizes), dtype=torch.float64, device=dev)
            for k in range(payload.shape[1]):
                m = mask[:, k]
                phi = layer_norms(th, layout).clamp(alg.phi_min, alg.phi_max)
                walked += (lr * phi * m.unsqueeze(-1)).double()
                g = problem.stoch_grad(th, cli, payload[:, k])
                th, lstate = alg.local_step(th, g, lstate, b_cast, c_state,
                                            None if bool(m.all()) else m, ctx)
            drift = layer_norms(th - start, layout).double()
            steps = mask.sum(1).double().unsqueeze(-1)
            out["t5_ratio"][r] = float((drift / (lr * steps * alg.phi_max)).max())
            out["t5_steps_ratio"][r] = float((drift / walked.clamp_min(1e-300)).max())
            mean_end = th.double().mean(0)
            new = view.server["theta"][r].double()
            out["t5_replay_err"][r] = float((mean_end - new).norm() / new.norm())
        return out


def point_values(df, setting: str, method: str, point) -> dict:
    """The swept values (``eta_l``, ``lam``, ...) of one selected point of a results table."""
    row = df[(df.setting == setting) & (df.method == method) & (df.point == point)].iloc[0]
    return {k: float(row[k]) for k in ("eta_l", "lam", "eta", "eps")
            if k in row.index and np.isfinite(row[k])}


def printed_eps_text(df, chosen, setting: str) -> str:
    """The printed pair's selected eps in ``setting`` (each may differ: the eps axis is tuned
    like a rate), for the claim lines: ``"eps: Fed-AMS 0.001, Fed-LAMB 0.0001"``."""
    parts = []
    for method in PRINTED_PAIR:
        row = chosen[(chosen.setting == setting) & (chosen.method == method)]
        if len(row) and row.iloc[0]["point"] is not None:
            eps = point_values(df, setting, method, row.iloc[0]["point"]).get("eps")
            if eps is not None:
                parts.append(f"{LABELS[method].split(' ')[0]} {eps:g}")
    return "eps: " + (", ".join(parts) or "none selected")


#: Clients per round of the T5 run (the bound is per client; the float64 replay of 200 clients
#: of Fashion-MNIST costs a minute here).
T5_CLIENTS = 20


def consensus_lines(cfg, chosen, df, s: "Setting", rounds: int = 2) -> list:
    """T5 (spec 4, property P1) decided on a real run (:func:`reproduce.verdicts.holds`: every
    round's ratio at most 1, the replay within 1e-8 of the run): Fed-LAMB at the selected point
    of setting ``s`` (and its printed reading's), ``rounds`` rounds of seed ``seed0`` on the
    setting's data and partition, at most :data:`T5_CLIENTS` clients a round, replayed round by
    round by :class:`ConsensusObserver`. The run uses the setting's MLP without dropout in
    float64 (``mlp``; a dropout mask cannot be replayed, so on the dropout nets the replay would
    not be the run). States max drift / (alpha T phi_M) (T5 holds iff <= 1) and the replay's
    error against the run's server model."""
    import torch as _torch

    from sims.core.engine import run
    from sims.problems.image import build_image_problem

    from . import common
    out, T5 = [], _t5()
    for method in ("fed-lamb", "fed-lamb-printed"):
        row = chosen[(chosen.setting == s.key) & (chosen.method == method)]
        if not len(row) or row.iloc[0]["point"] is None:
            continue
        hyper = point_values(df, s.key, method, row.iloc[0]["point"])
        problem = build_image_problem(s.dataset, "mlp", s.n, scheme=s.scheme,
                                      data=common.cached_dataset(s.dataset, cfg.data_dir),
                                      batch_size=s.batch, local_epochs=s.epochs,
                                      dtype=_torch.float64, **init_kw(cfg))
        alg = algorithm(method, **hyper)
        part = Participation("fixed", m=min(s.m or s.n, T5_CLIENTS))
        res = run(problem, alg, part, rounds, [cfg.seed0], eval_every=0,
                  observers=[ConsensusObserver()])
        ratio, steps, err = (np.nanmax(res.metrics[k]) for k in
                             ("t5_ratio", "t5_steps_ratio", "t5_replay_err"))
        what = ", ".join(f"{k}={v:g}" for k, v in hyper.items())
        from . import verdicts as vd
        out.append(vd.every(T5, [
            vd.holds(T5, res.metrics["t5_ratio"][0][1:], 1.0 + 1e-9,
                     what="max per-layer drift / (alpha T phi_M), every round (<= 1)"),
            vd.holds(T5, res.metrics["t5_replay_err"][0][1:], 1e-8,
                     what="replay error against the run's server model (< 1e-8)")],
            what=f"{LABELS[method]} {what}; {s.dataset} {s.n} clients, {part.m} a round, "
                 f"E={s.epochs}, MLP without dropout, float64, {rounds} rounds, seed "
                 f"{cfg.seed0}; drift / sum of step lengths <= {steps:.4f}",
            scope=f"{s.key} {'printed' if method.endswith('-printed') else 'default'}"))
    return out


# ------------------------------------------------------------------------------ entries
@dataclass
class Config(common.EntryConfig):
    """The settings every Fed-LAMB entry shares; each entry's ``Config`` overrides defaults
    and adds its own."""
    seeds: int = 2
    n: int = 50
    batch: int = 32
    grid: str = "best"                # one of GRID_MODES
    no_printed: bool = False          # leave out MAIN Alg. 2's printed reading
    printed_eps: str = ""             # the printed reading's eps: "" each setting's pilot
                                      # eps (PILOT), or a comma list: an eps axis (swept)
    axes: str = ""                    # overrides: "[SETTING:][METHOD.]KEY=v1,v2 ..." (axes_parts)
    eval_every: int = 1
    threads: int = 1
    executor: str = "inprocess"       # or ray (the sweep API's executors)
    methods: str = ""                 # comma list: only these of the entry's methods ("": all)
    init_seed: int = 0                # the one initialisation every seed and method shares
                                      # (the paper's setup); -1: each seed draws its own
    tuned: bool = False               # also the symmetric tuned comparison (tuned_runs)

    def validate(self):
        eps_values(self.printed_eps)
        axes_parts(self.axes)
        if self.init_seed < -1:
            raise common.EntryError(f"--init-seed must be >= 0 (one shared initialisation) or "
                                    f"-1 (each seed its own), got {self.init_seed}")


GRID_MODES = ("sub", "best", "near", "table1", "pilot")

#: The printed reading's eps values piloted (docs/fedlamb_pilot.md, "eps pilot"): the paper
#: gives no number (spec 1.7); MAIN Alg. 2 puts it in ``v_0`` (line 2) and ``sqrt(vhat +
#: eps)`` (line 12).
PRINTED_EPS = (1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)


def eps_values(text) -> tuple:
    """``--printed-eps``: "" (each setting's pilot eps) or a comma list of positive numbers
    (one: that eps; several: an eps axis of the printed pair); one-line error otherwise."""
    try:
        values = tuple(items(text, float))
    except ValueError:
        raise common.EntryError(f"--printed-eps must be positive numbers separated by commas, "
                                f"got {text!r}") from None
    if any(not (v > 0 and math.isfinite(v)) for v in values) or len(set(values)) < len(values):
        raise common.EntryError(f"--printed-eps must be distinct positive numbers, got {text!r}")
    return values


def axes_parts(text) -> list[tuple]:
    """``--axes``: space-separated ``[SETTING:][METHOD.]KEY=SPEC`` -> ``(setting or None,
    method or None, key, values)``: the values a method's ``KEY`` runs, replacing what ``--grid``
    gives (any values, Table 1's or beyond it: for pilots; a method not named: every method
    with ``KEY``; a setting not named: every panel, a panel's key such as ``mlp-dropout_E5``:
    that panel only). ``KEY=SPEC`` is read by the sweep grid's
    :func:`sims.experiments.sweep.grid.parse_axis` (values or ``log:LO:HI:N``); the setting and
    the method are split off first, since the entry's methods include the printed pair, which
    is no registry name. The values must be numbers."""
    out = []
    for part in str(text).split():
        key, sep, spec = part.partition("=")
        setting, _, key = key.rpartition(":") if ":" in key else ("", "", key)
        method, _, key = key.rpartition(".")
        try:
            values = parse_axis(f"{key}={spec}").values if sep and key else ()
        except GridError:
            values = ()
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                 for v in values) or ":" in setting:
            raise common.EntryError(f"--axes: cannot read {part!r}; expected "
                                    "[SETTING:][METHOD.]KEY=v1,v2,...")
        out.append((setting or None, method or None, key, tuple(float(v) for v in values)))
    return out


def parse_axes(text, setting: str | None = None) -> list[tuple]:
    """The ``(method or None, key, values)`` overrides of ``--axes`` (:func:`axes_parts`) that
    apply to the panel ``setting``: those naming no setting and those naming it, in the order
    given (a later one replaces an earlier one's values: ``lam=0 mlp-dropout_E5:lam=0,0.01``
    pins lambda at 0 except at E = 5). ``setting=None``: only those naming no setting."""
    return [(m, k, v) for s, m, k, v in axes_parts(text) if s is None or s == setting]

#: ``--grid pilot``: the pilot sweeps' grids (docs/fedlamb_pilot.md): Table 1's rate grids,
#: Fed-LAMB at lambda 0 only, Adp-Fed over the region of its 12 x 10 grid where an earlier
#: 15-round pilot put its best point (eta_l in {0.03 .. 0.5} x eta_g in {1e-3 .. 0.03}).
PILOT_AXES = {"fed-lamb": {"lam": (0.0,)}, "mime-lamb": {"lam": (0.0,)},
              "adp-fed": {"eta_l": (0.03, 0.1, 0.3, 0.5), "eta": (0.001, 0.003, 0.01, 0.03)}}


PRINTED_PAIR = ("fed-ams-printed", "fed-lamb-printed")


def chosen_methods(cfg, base) -> list[str]:
    """The entry's methods: ``base`` and the printed pair (:data:`PRINTED_PAIR`, unless
    ``--no-printed``), narrowed to ``--methods`` when given (one-line error for a name the
    entry does not run)."""
    every = [*base, *([] if cfg.no_printed else PRINTED_PAIR)]
    if not cfg.methods:
        return every
    want = items(cfg.methods)
    bad = [m for m in want if m not in every]
    if bad:
        raise common.EntryError(f"--methods: {', '.join(bad)} not among {', '.join(every)}")
    return [m for m in every if m in want]


def base_method(method: str) -> str:
    return method[: -len("-printed")] if method.endswith("-printed") else method


def grid_axes(method: str, mode: str, best: dict, sub: dict | None = None,
              eps: tuple = (), overrides: list | None = None) -> dict:
    """The values one method runs, per hyperparameter: ``"table1"`` the whole Table 1 grid
    (and lambda's three values), ``"sub"`` the default's sub-grid ``sub`` (values per
    hyperparameter, chosen from the recorded pilot; a key it leaves out at ``best``),
    ``"best"`` the single point ``best``, ``"near"`` ``best`` with its Table 1 neighbours in
    each rate (and every lambda), ``"pilot"`` the pilot sweeps' grid (:data:`PILOT_AXES`).
    The printed pair (``*-printed``) also has an ``eps`` axis: ``eps`` (``--printed-eps``)
    when given, else ``sub``'s or ``best``'s eps (the pilot's, :data:`PILOT`).
    ``overrides`` (:func:`parse_axes`, ``--axes``) then replace the values of the keys they
    name (a key the method does not sweep: one-line error)."""
    if mode not in GRID_MODES:
        raise ValueError(f"--grid must be one of {', '.join(GRID_MODES)}, got {mode!r}")
    axes = {}
    for key, values in GRIDS[base_method(method)].items():
        values = tuple(values)
        if mode == "sub":
            if sub is None:
                raise ValueError(f"--grid sub: no sub-grid for {method} here")
            axes[key] = tuple(sub.get(key, (best.get(key, values[0]),)))
        elif mode == "pilot":
            axes[key] = PILOT_AXES.get(base_method(method), {}).get(key, values)
        elif mode == "table1" or key == "lam" and mode == "near":
            axes[key] = values
        elif mode == "best":
            axes[key] = (best.get(key, values[0]),)     # a key the pilot left out: lambda 0
        else:                         # "near": a bracket of one Table 1 step either side
            axes[key] = protocols.neighbours(values, best[key])
    if method.endswith("-printed"):
        if eps:
            axes["eps"] = tuple(eps)
        elif sub and "eps" in sub:
            axes["eps"] = tuple(sub["eps"])
        elif "eps" in best:
            axes["eps"] = (best["eps"],)
        else:
            raise ValueError(f"{method}: no eps (pass --printed-eps)")
    for name, key, values in overrides or ():
        if name not in (None, method):
            continue
        if key not in axes:
            if name is None:
                continue
            raise common.EntryError(f"--axes: {method} has no {key!r} (it sweeps "
                                    f"{', '.join(axes)})")
        axes[key] = values
    return axes


def method_grid(method: str, mode: str, best: dict, printed_eps=(),
                sub: dict | None = None, overrides: list | None = None) -> Grid:
    """The :class:`sims.experiments.sweep.Grid` of one method: its registry algorithm, fixed settings
    (the printed reading for ``*-printed``) and :func:`grid_axes` (``printed_eps``: a number
    or a sequence, the printed pair's eps axis; empty: the pilot's)."""
    base = base_method(method)
    fixed = dict(PRINTED) if method.endswith("-printed") else {}
    eps = (printed_eps,) if isinstance(printed_eps, (int, float)) else tuple(printed_eps or ())
    return Grid({base: fixed}, [Axis(k, v, base) for k, v in
                                grid_axes(method, mode, best, sub, eps, overrides).items()])


def grid_points(method: str, mode: str, best: dict, printed_eps=(),
                sub: dict | None = None, overrides: list | None = None) -> list[dict]:
    """The swept values of every point of :func:`method_grid` (printed: with ``eps``)."""
    return [dict(p.values) for p in
            method_grid(method, mode, best, printed_eps, sub, overrides).points()]


def point_name(point: dict) -> str:
    return "_".join(f"{k}{v:g}" for k, v in point.items())


def dataset_label(name: str, data_dir) -> str:
    """The dataset as a figure title names it; the embedded MNIST subset says so."""
    from . import common
    ds = common.cached_dataset(name, data_dir)
    if ds.name == "mnist-subset":
        return "MNIST (embedded 4,000-image subset)"
    return {"mnist": "MNIST", "fmnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}.get(ds.name,
                                                                                  ds.name)


def select_best(df, rounds: int):
    """The paper's rule ("we take the model performance with the best alpha and lambda",
    MAIN Sec. 4; SUPP A.2 "such that the best performance is achieved"): the sweep API's
    ``fed-lamb`` rule (:func:`sims.experiments.sweep.select`: highest final test accuracy averaged over
    seeds; a point any of whose seeds diverged is never selected) within each sweep, i.e. per
    (setting, method) (a point's id names its algorithm and settings, not its problem, so
    sweeps are selected one at a time).
    Selection by :func:`reproduce.protocols.select` (the protocols' one mechanism), read at
    round ``rounds`` (the plotted horizon).
    Returns one row per (setting, method): ``point``, ``label``, ``mean``, ``lo``, ``hi``
    (final test accuracy over seeds), ``auc`` (mean accuracy over the evaluated rounds after
    0, averaged over seeds: "across rounds"), ``seeds``, ``points`` (grid points that
    competed) and ``diverged_points``. A selected curve that stops before ``rounds`` (every
    replica diverged) or has a diverged replica is dropped (:func:`reproduce.common.healthy`)."""
    import pandas as pd

    from . import common
    rows = []
    for name, table in df.groupby("sweep", sort=False):    # points are unique within a sweep
        summary = protocols.select(table, "fed-lamb", at=rounds)
        chosen_points = set(summary.loc[summary["selected"], "point"])
        curves = common.healthy(table[table["point"].isin(chosen_points)])
        setting, method = table["setting"].iloc[0], table["method"].iloc[0]
        row = {"setting": setting, "method": method, "points": len(summary),
               "diverged_points": int(summary["diverged"].sum()), "point": None,
               "label": None, "mean": np.nan, "lo": np.nan, "hi": np.nan, "auc": np.nan,
               "seeds": 0, "ranking": ranking(summary)}
        sel = summary[summary["selected"]]
        if len(sel):
            point = sel.iloc[0]["point"]
            c = curves[curves.point == point]
            acc = c[(c.metric == "test_acc") & (c["round"] > 0)].sort_values("round")
            last = acc.groupby("seed").tail(1)
            if len(last) and int(last["round"].min()) >= rounds:
                row.update(point=point, label=str(c["run"].iloc[0]),
                           mean=float(last.value.mean()), lo=float(last.value.min()),
                           hi=float(last.value.max()),
                           auc=float(acc.groupby("seed").value.mean().mean()),
                           seeds=int(last.seed.nunique()))
        rows.append(row)
    return pd.DataFrame(rows)


def ranking(summary) -> str:
    """Every competing point of a sweep's :func:`sims.experiments.sweep.select` summary, best first: its
    swept values and its score (final test accuracy, mean over seeds); "div" if diverged."""
    keys = [k for k in ("eta_l", "eta", "lam", "eps") if k in summary]
    parts = []
    for _, r in summary.sort_values("rank").iterrows():
        what = "/".join(f"{r[k]:g}" for k in keys if np.isfinite(r[k]))
        parts.append(f"{what} " + ("div" if r["diverged"] or not np.isfinite(r["score"])
                                   else f"{100 * r['score']:.1f}"))
    return ", ".join(parts)


def selected_seeds(df, chosen, setting: str, method: str, how: str = "final"):
    """Per seed, the selected point's final test accuracy (``how="final"``) or its mean over
    the evaluated rounds after 0 (``"mean"``: "across rounds") (NaN: a diverged seed)."""
    import pandas as pd

    from .verdicts import per_seed
    row = chosen[(chosen.setting == setting) & (chosen.method == method)]
    if not len(row) or row.iloc[0]["point"] is None:
        return pd.Series(dtype=float)
    sub = df[(df.setting == setting) & (df.method == method) & (df.point == row.iloc[0]["point"])]
    return per_seed(sub, "test_acc", how)


def compare(chosen, df, setting, winners, losers, claim, *, card=None, protocol=None,
            scope: str = "", what: str = ""):
    """"Every method of ``winners`` above every method of ``losers``, at the end and across
    rounds" (Fed-LAMB E1, E2, E4, E5): for each pair, the selected points' final test accuracy
    not below by more than half a point (:func:`reproduce.verdicts.not_below`: "higher or
    equal") and the mean accuracy over the evaluated rounds above (:func:`reproduce.verdicts.
    above`: "higher test accuracy across rounds"), paired by seed."""
    from . import verdicts as vd
    parts = []
    for w in winners:
        for lo in losers:
            names = f"{LABELS.get(w, w)} vs {LABELS.get(lo, lo)}"
            parts.append(vd.not_below(claim, selected_seeds(df, chosen, setting, w),
                                      selected_seeds(df, chosen, setting, lo), MARGIN,
                                      unit="pp", scale=100,
                                      what=f"{names}: final test accuracy (higher or equal)"))
            parts.append(vd.above(claim, selected_seeds(df, chosen, setting, w, "mean"),
                                  selected_seeds(df, chosen, setting, lo, "mean"), unit="pp",
                                  scale=100, what=f"{names}: accuracy across rounds"))
    return vd.every(claim, parts, what=what or ", ".join(LABELS.get(w, w) for w in winners)
                    + " above " + ", ".join(LABELS.get(x, x) for x in losers), card=card,
                    protocol=protocol, scope=scope)


MARGIN = 0.005      # "higher or equal": not below by more than half a point
#: The paper's regime (spec 3.1-3.3): main Figs. 1-2, 60,000 MNIST images over 50 clients at
#: batch 32 (about 38 local steps an epoch), 25 a round; supplement Fig. 1, 200 clients at
#: batch 64 (300 images, 5 steps an epoch), all of them a round; 100 rounds; 3 runs; each
#: method selected from its Table 1 grid (and lambda) at round 100.
PAPER_ROUNDS, PAPER_SEEDS = 100, 3


def protocol(cfg, pilot_round: int):
    """The protocol a Fed-LAMB comparison rests on: ``--grid table1`` is the paper's (supp.
    Table 1's grids and lambda, the fed-lamb rule at the plotted horizon; the paper's 3
    seeds); the other grids come from the recorded one-seed pilot read at ``pilot_round``."""
    if cfg.grid == "table1":
        return protocols.Protocol("paper", "supplement Table 1 grids and lambda", rule="fed-lamb",
                                  seeds=cfg.seeds, horizon=cfg.rounds, plotted=cfg.rounds,
                                  required_seeds=PAPER_SEEDS, source="SUPP Table 1, MAIN Sec. 4")
    return protocols.pilot(f"grid '{cfg.grid}' from the recorded pilot (docs/fedlamb_pilot.md), "
                           "fed-lamb rule over the seeds", seeds=1, horizon=pilot_round,
                           plotted=cfg.rounds, source="docs/fedlamb_pilot.md")


def pruned_paper_protocol(cfg, pilot_round: int, *, grids: str, each: str, after_picks: str,
                          source: str):
    """The paper's protocol on a pilot-pruned grid (``--grid sub`` or ``near``): a one-seed
    pilot over Table 1's grids (``grids`` says which), read at ``pilot_round``, picks each
    method's candidates (``sub``: its best point and its better neighbour; ``near``: the best
    point and its neighbours either side, a bracket, in ``each``), ``after_picks`` follows the
    picks (what ``--axes`` or the pilot fixed); each rate's bracket climbs Table 1's grid
    while its pick sits on a pruned edge (:func:`make_tuning_runs`); the paper's rule selects
    among them at the plotted horizon on every seed, and the card checks the seeds and the
    edges (:func:`pruned_edge_picks`; lambda does not climb, so a lambda pick on a pruned
    edge fails the card)."""
    picks = ("its best point and its better Table 1 neighbour" if cfg.grid == "sub" else
             f"its best point and its Table 1 neighbours either side in {each}")
    return protocols.Protocol(
        "paper", f"supplement Table 1 grids{grids} read at round {pilot_round} picks {picks} "
        f"per method{after_picks}, each rate climbing Table 1's grid while its pick sits on a "
        "pruned edge; the paper's rule selects among them at the plotted horizon on every seed",
        rule="fed-lamb", seeds=cfg.seeds, horizon=cfg.rounds,
        plotted=cfg.rounds, required_seeds=PAPER_SEEDS, source=source)


def pruned_edge_picks(chosen, df, setting: str) -> list[str]:
    """The selected points of panel ``setting`` that sit on an edge of the grid the run swept
    (an axis of two or more values) that is not an edge of the method's Table 1 grid
    (:data:`GRIDS`): there the paper's selection over the whole grid may have picked a value
    the pruned grid left out. Returns ``"METHOD key=value"`` for each such pick."""
    out = []
    for _, r in chosen[chosen.setting == setting].iterrows():
        if r["point"] is None:
            continue
        ran = df[(df.setting == setting) & (df.method == r["method"])]
        picked = ran[ran.point == r["point"]].iloc[0]
        for key, table in GRIDS.get(base_method(r["method"]), {}).items():
            values = sorted(ran[key].dropna().unique()) if key in ran else []
            if len(values) < 2:                 # a value pinned by hand: nothing selected
                continue
            v = float(picked[key])
            if (np.isclose(v, values[0]) and not np.isclose(v, min(table))
                    or np.isclose(v, values[-1]) and not np.isclose(v, max(table))):
                out.append(f"{LABELS.get(r['method'], r['method'])} {key}={v:g}")
    return out


def card(cfg, s: "Setting", proto, *, steps_paper: int, clients_paper: int,
         per_round: bool = False, edges: list | None = None):
    """The regime card of a Fed-LAMB comparison on panel ``s``: local steps an epoch (with
    ``per_round``: local steps a round, epochs x steps an epoch, against the paper's
    ``steps_paper`` a round), clients a round, the fraction of the paper's 100 rounds, seeds,
    and the protocol's conformance (:meth:`reproduce.protocols.Protocol.card_items`); with
    ``edges`` (:func:`pruned_edge_picks` of the paper's protocol on a pruned grid) the item
    that every pick sits inside the grid run or on Table 1's own edge."""
    from . import regime as rg
    prob = problem_of(s, cfg)
    per_client = float(np.mean([len(p) for p in prob.parts]))
    steps = int(math.ceil(per_client / s.batch))
    source = f"{per_client:.0f} images a client at batch {s.batch}"
    return rg.RegimeCard([
        rg.local_steps(steps * s.epochs, steps_paper, source=f"{source}, E={s.epochs}")
        if per_round else rg.steps_per_epoch(steps, steps_paper, source=source),
        rg.clients_per_round(s.m or s.n, clients_paper, source="MAIN Sec. 4 / SUPP A.2"),
        rg.horizon(cfg.rounds, PAPER_ROUNDS, source="100 rounds"),
        rg.seeds(cfg.seeds, PAPER_SEEDS, "3 runs"), *proto.card_items(),
        *([] if edges is None else [rg.premise(
            "picks inside the grid run or on Table 1's edge", not edges,
            "paper protocol on a pilot-pruned grid"
            + (": on a pruned edge " + ", ".join(edges) if edges else ""))])])


@dataclass(frozen=True)
class Setting:
    """One panel: a dataset, a model and the federated regime."""
    key: str
    dataset: str
    model: str
    n: int
    m: int | None           # clients per round (None: full participation)
    batch: int
    epochs: int
    scheme: str             # "shards" (non-iid) or "iid"
    title: str


def model_epoch_settings(cfg, model_labels: dict, dataset: str, scheme: str,
                         label: str) -> list[Setting]:
    """One panel per ``--models`` x ``--epochs`` (main Figs. 1-4): ``dataset`` split by
    ``scheme`` with the entry's ``n``, ``m`` and batch; one-line error for an unknown model."""
    out = []
    for model in items(cfg.models):
        if model not in model_labels:
            raise common.EntryError(f"--models: {model!r} is not one of {', '.join(model_labels)}")
        for e in items(cfg.epochs, int, "--epochs"):
            if e < 1:
                raise common.EntryError(f"--epochs: local epochs must be >= 1, got {e}")
            out.append(Setting(f"{model}_E{e}", dataset, model, cfg.n, cfg.m, cfg.batch, e,
                               scheme, f"{model_labels[model]}, {label}, E={e}"))
    if not out:
        raise common.EntryError("--models and --epochs must each name at least one")
    return out


def participation(s: Setting) -> Participation:
    return Participation("full") if s.m is None else Participation("fixed", m=s.m)


def problem_of(s: Setting, cfg, **extra):
    """The setting's problem, built once per process (:func:`reproduce.common.cached_problem`);
    convolutional nets evaluate without the gradient norm (not plotted)."""
    from sims.problems.image import CONV_MODELS

    from . import common
    kw = dict(extra)
    if s.model in CONV_MODELS:
        kw["eval_grad"] = False
    return common.cached_problem(dataset=s.dataset, model=s.model, n_clients=s.n,
                                 scheme=s.scheme, batch_size=s.batch, local_epochs=s.epochs,
                                 data_dir=cfg.data_dir, device=cfg.device, **kw)


def build_problem(desc: dict):
    """A sweep's problem from its JSON description (module level, so Ray can ship it)."""
    from . import common
    return common.cached_problem(**desc)


def check_axes(cfg, methods, settings) -> None:
    """``--axes`` may name only methods and panels (settings' keys) that run (a one-line error
    otherwise)."""
    parts = axes_parts(cfg.axes)
    named = {m for _, m, _, _ in parts if m is not None}
    if named - set(methods):
        raise common.EntryError(f"--axes: {', '.join(sorted(named - set(methods)))} not among "
                                f"the methods run ({', '.join(methods)})")
    panels = {s for s, _, _, _ in parts if s is not None}
    keys = [s.key for s in settings]
    if panels - set(keys):
        raise common.EntryError(f"--axes: {', '.join(sorted(panels - set(keys)))} not among "
                                f"the panels run ({', '.join(keys)})")


def make_runs(cfg, settings, methods, best, problem_kw=None, sub=None) -> list:
    """One sweep (:func:`reproduce.sweeps.sweep_run`) per (setting, method) over the method's
    :func:`method_grid` and every seed; ``best(setting, method) -> point`` is the single
    point of ``--grid best`` (and the centre of ``near``), ``sub(setting, method) -> axes``
    the sub-grid of ``--grid sub``; ``--printed-eps`` and ``--axes`` as :func:`grid_axes`.
    Every cell is saved and resumed by the sweep API under ``OUT/sweeps/``."""
    check_axes(cfg, methods, settings)
    out = []
    for s in settings:
        desc = problem_desc(cfg, s, problem_kw)
        part = "full" if s.m is None else f"m={s.m}"
        for method in methods:
            grid = method_grid(method, cfg.grid, best(s, method), eps_values(cfg.printed_eps),
                               sub(s, method) if sub and cfg.grid == "sub" else None,
                               parse_axes(cfg.axes, s.key))
            name = f"{s.key}_{method}"
            params = {"setting": s.key, "dataset": s.dataset, "model": s.model,
                      "epochs": s.epochs, "method": method, "sweep": name}
            out.append(sweep_run(name, grid, desc, build_problem, part,
                                 eval_every=cfg.eval_every, params=params))
    return out


def problem_desc(cfg, s: "Setting", problem_kw=None) -> dict:
    """The JSON description of setting ``s``'s problem (:func:`build_problem` builds it; part
    of every sweep cell's fingerprint): data, model, split, batch, epochs, ``--init-seed``."""
    from sims.problems.image import CONV_MODELS
    desc = {"dataset": s.dataset, "model": s.model, "n_clients": s.n, "scheme": s.scheme,
            "batch_size": s.batch, "local_epochs": s.epochs, "data_dir": cfg.data_dir,
            "device": cfg.device, **init_kw(cfg), **(problem_kw or {})}
    if s.model in CONV_MODELS:
        desc["eval_grad"] = False
    return desc


def _method_cells(cfg, settings, methods, best, sub, problem_kw):
    """Per (setting, method) of a tuning: ``(setting, method, registry algorithm, its fixed
    settings, problem description, participation, grid axes)``: the values the paper's
    protocol runs (:func:`grid_axes` of ``--grid``, ``--printed-eps`` and ``--axes``
    applied), the one source of both protocols' starting grids."""
    check_axes(cfg, methods, settings)
    for s in settings:
        desc = problem_desc(cfg, s, problem_kw)
        part = "full" if s.m is None else f"m={s.m}"
        for method in methods:
            base = base_method(method)
            axes = grid_axes(method, cfg.grid, best(s, method),
                             sub=sub(s, method) if sub and cfg.grid == "sub" else None,
                             eps=eps_values(cfg.printed_eps),
                             overrides=parse_axes(cfg.axes, s.key))
            yield (s, method, base, dict(PRINTED) if method != base else {}, desc, part, axes)


def _params(s: "Setting", method: str) -> dict:
    return {"setting": s.key, "dataset": s.dataset, "model": s.model, "epochs": s.epochs,
            "method": method}


def make_tuning_runs(cfg, settings, methods, best, proto, problem_kw=None, sub=None) -> list:
    """:func:`make_runs` on the protocols' mechanism: one :func:`reproduce.sweeps.tuning_run`
    per (setting, method), kind ``paper`` (the method's :func:`grid_axes` as brackets,
    selected by the ``fed-lamb`` rule at the run's horizon on every seed). On a pilot-pruned
    grid (``--grid sub`` / ``near``) each rate's bracket climbs Table 1's grid (its ladder,
    :class:`reproduce.protocols.Bracket`) while the pick sits on an edge the paper's whole
    grid goes past, so the pick is the one its whole-grid selection would reach from there
    and the card's pruned-edge item (:func:`pruned_edge_picks`) holds. The table
    records ``proto`` (:class:`reproduce.protocols.Protocol`: where the grid came from) in its
    protocol columns, and ``run`` names each row's grid point, as a sweep's rows do. Every
    cell is saved and resumed under ``OUT/sweeps/SETTING_METHOD``, the folder
    :func:`make_runs` and :func:`tuned_runs` use, so the protocols share the cells they both
    run."""
    from .sweeps import tuning_run
    out = []
    pruned = cfg.grid in ("sub", "near")
    for s, method, base, fixed, desc, part, axes in _method_cells(cfg, settings, methods, best,
                                                                  sub, problem_kw):
        table1 = GRIDS[base_method(method)]
        spec = protocols.Method(method, base, fixed, tuple(
            protocols.Bracket(k, v, ladder=table1[k] if pruned and k in RATE_KEYS
                              and k in table1 else None) for k, v in axes.items()),
            folder=f"{s.key}_{method}")
        run = tuning_run(f"{s.key}_{method}", [spec], desc, build_problem, part,
                         rule="fed-lamb", kind="paper", eval_every=cfg.eval_every,
                         params=_params(s, method), required_seeds=PAPER_SEEDS,
                         text=proto.text, source=proto.source)
        run.params["grid"] = spec.grid().describe()
        if any(b.ladder for b in spec.brackets):     # part of the run's identity
            run.params["edges"] = "extended along Table 1"
        out.append(_recorded_as(run, proto, sorted(axes)))
    return out


def _recorded_as(run, proto, keys, sweep: str | None = None):
    """``run`` whose table carries ``proto``'s columns (``None``: the protocol the tuning
    itself recorded) and names each row's grid point in ``run`` (``ALGORITHM k=v ...``, as
    :func:`reproduce.sweeps.sweep_run`'s rows) and, given ``sweep``, its sweep so."""
    inner = run.execute

    def execute(cfg, seeds, progress):
        table, record = inner(cfg, seeds, progress)
        label = table["algorithm"].astype(str)
        for k in keys:
            label = label + f" {k}=" + table[k].map(lambda v: f"{float(v):g}")
        cols = {} if proto is None else protocols.protocol_columns(proto)
        if sweep is not None:
            cols["sweep"] = sweep
        return table.assign(run=label, **cols), record
    run.execute = execute
    return run


#: The symmetric tuned comparison's rate brackets (:func:`tuned_runs`) extend off an edge by
#: this factor: supp. Table 1's rate grids step by 1.7-3.3x (0.001, 0.003, 0.005, 0.01, ...),
#: and a factor 2 continues them below 0.001 as 0.0005 (a value of Fed-AMS's Table 1 grid).
RATE_STEP = 2.0
RATE_KEYS = ("eta_l", "eta")
#: The suffix of a tuned comparison's sweeps (``SETTING_METHOD-tuned``: its rows' ``sweep``).
TUNED_SUFFIX = "-tuned"


def tuned_runs(cfg, settings, methods, best, sub=None, problem_kw=None) -> list:
    """The symmetric tuned comparison beside the paper's protocol (``--tuned``): per
    (setting, method) one :func:`reproduce.sweeps.tuning_run` of kind ``tuned``
    (:func:`reproduce.protocols.tune`) that starts from the values the paper's protocol runs
    (:func:`grid_axes` of ``--grid``, ``--axes`` applied), its rates as brackets extended by
    :data:`RATE_STEP` while the pick sits on an edge (past Table 1's grid where it must), the
    other axes (lambda, the printed pair's eps) held to their values; selected by the
    ``fed-lamb`` rule at the plotted horizon on every seed. Rows name their sweep
    ``SETTING_METHOD-tuned`` and carry the tuning's protocol columns (``protocol_kind``
    ``tuned``, ``picks_interior``); cells are saved and resumed under
    ``OUT/sweeps/SETTING_METHOD``, the paper protocol's sweep (:func:`make_runs`), so the
    values both run are computed once and the tuning computes only its extensions."""
    from .sweeps import tuning_run
    out = []
    for s, method, base, fixed, desc, part, axes in _method_cells(cfg, settings, methods, best,
                                                                  sub, problem_kw):
        name = f"{s.key}_{method}"
        spec = protocols.Method(
            TUNED_SUFFIX[1:], base, fixed,
            tuple(protocols.Bracket(k, v, RATE_STEP if k in RATE_KEYS else None)
                  for k, v in axes.items()), folder=name)
        run = tuning_run(name, [spec], desc, build_problem, part, rule="fed-lamb",
                         kind="tuned", eval_every=cfg.eval_every, params=_params(s, method),
                         text="symmetric: each method from the paper protocol's values, "
                              f"its rates extended by {RATE_STEP:g}x off an edge")
        run.name = run.params["sweep"] = name + TUNED_SUFFIX
        out.append(_recorded_as(run, None, sorted(axes), sweep=run.name))
    return out


def both_protocols(cfg, df, verdicts, paper_protocol, missing_claim):
    """An entry's verdicts under the paper's protocol and, with ``--tuned``, the symmetric
    tuned comparison beside it: ``verdicts(rows, chosen, protocol_of, scope)`` gives one
    protocol's verdicts on its rows and selections (:func:`select_best`); the tuned ones are
    scoped ``tuned comparison`` and rest on each panel's :func:`tuned_protocol`; with
    ``--tuned`` and no tuned rows, ``missing_claim`` reads missing. Returns ``(verdicts,
    selection lines, the paper protocol's rows, its selections)``."""
    from . import verdicts as vd
    paper, tuned = split_tuned(df)
    chosen = select_best(paper, cfg.rounds)
    out = verdicts(paper, chosen, lambda s: paper_protocol, "")
    lines = selection_lines(chosen)
    if cfg.tuned and len(tuned):
        chosen_t = select_best(tuned, cfg.rounds)
        out += verdicts(tuned, chosen_t,
                        lambda s: tuned_protocol(tuned[tuned.setting == s.key], cfg),
                        ", tuned comparison")
        lines += ["the symmetric tuned comparison (rates bracketed from the paper protocol's "
                  f"values, extended {RATE_STEP:g}x off an edge):", *selection_lines(chosen_t)]
    elif cfg.tuned:
        out.append(vd.missing(missing_claim, f"{missing_claim.id} under the symmetric tuned "
                              "comparison", "no results of the tuned comparison (--tuned)"))
    return out, lines, paper, chosen


def plot_protocols(df, cfg, stem: str, draw):
    """The paper protocol's figure ``stem`` and, where tuned rows exist, the tuned
    comparison's ``STEM_tuned``: ``draw(rows, cfg, stem, protocol text)`` draws one."""
    paper, tuned = split_tuned(df)
    paths = draw(paper, cfg, stem, f"grid '{cfg.grid}'")
    if len(tuned):
        paths += draw(tuned, cfg, f"{stem}_tuned", "symmetric tuned comparison (rates "
                      f"bracketed, extended {RATE_STEP:g}x off an edge)")
    return paths


def tuned_protocol(tuned, cfg) -> protocols.Protocol:
    """One :class:`reproduce.protocols.Protocol` for a setting's tuned comparison: the
    tunings' text, rule, seeds and horizon (:func:`reproduce.protocols.protocol_of`), picks
    interior only when every method's are."""
    from dataclasses import replace
    per = [protocols.protocol_of(t) for _, t in tuned.groupby("sweep", sort=False)]
    per = [p for p in per if p is not None and p.kind == "tuned"]
    if not per:
        raise ValueError("tuned_protocol: no tuned rows")
    return replace(per[0], interior=all(bool(p.interior) for p in per),
                   seeds=min(p.seeds for p in per if p.seeds is not None))


def init_kw(cfg) -> dict:
    """The problem option of ``--init-seed`` (:meth:`sims.problems.neural.NeuralProblem.
    seed_of_init`): ``{"init_seed": K}``, one initialisation shared by every seed and method
    (MAIN Sec. 4 compares the methods from one initialisation), part of every sweep cell's
    fingerprint and provenance; ``{}`` at -1 (each seed draws its own, as before)."""
    k = getattr(cfg, "init_seed", -1)
    return {} if k is None or k < 0 else {"init_seed": int(k)}


def missing(entry, cfg, df) -> list[str]:
    """:func:`reproduce.common.missing_runs` (which reads a sweep's name from ``sweep``)."""
    from . import common
    return common.missing_runs(entry, cfg, df)


def plot_panels(df, cfg, settings, methods, suptitle: str, stem: str):
    """Test accuracy against rounds, one panel per setting, each method at its selected
    point (:func:`select_best`): mean over seeds, band from the lowest to the highest seed."""
    import textwrap

    import matplotlib.pyplot as plt

    from . import plotting
    chosen = select_best(df, cfg.rounds)
    present = [s for s in settings if s.key in set(df.setting)]
    cols = (2 if len(present) == 4 else min(len(present), 3)) or 1
    rows = -(-len(present) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    colors = dict(zip(METHOD_ORDER, plt.get_cmap("tab10").colors))
    for ax, s in zip(axes.flat, present):
        for method in methods:
            row = chosen[(chosen.setting == s.key) & (chosen.method == method)]
            if not len(row) or row.iloc[0]["point"] is None:
                continue
            r = row.iloc[0]
            sub = df[(df.setting == s.key) & (df.method == method) & (df.point == r["point"])]
            point = r["label"].split(" ", 1)[-1]
            plotting.band_plot(ax, sub.assign(method=method), "test_acc", "method",
                               palette=[colors.get(base_method(method), "gray")],
                               linestyle="--" if method.endswith("-printed") else "-",
                               label=lambda _, m=method, p=point, a=r["mean"]:
                               f"{LABELS.get(m, m)} ({p}): {100 * a:.1f}%")
        ax.set_title(s.title, fontsize=9)
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[len(present):]:
        ax.axis("off")
    fig.suptitle("\n".join(textwrap.fill(part, 60 + 45 * cols)
                           for part in suptitle.split("\n")), fontsize=9)
    return plotting.save(fig, cfg.figures, stem)


METHOD_ORDER = ("fed-sgd", "fed-ams", "fed-lamb", "adp-fed", "mime", "mime-lamb",
                "fed-ams-printed", "fed-lamb-printed")


RANK_KEYS = {"adp-fed": ("eta_l", "eta"), "fed-lamb": ("eta_l", "lam")}
RANK_KEYS.update({m: ("eta_l",) for m in ("fed-sgd", "fed-ams", "mime", "mime-lamb")})
RANK_KEYS.update({"fed-ams-printed": ("eta_l", "eps"),
                  "fed-lamb-printed": ("eta_l", "lam", "eps")})


def selection_lines(chosen) -> list[str]:
    """Which point each method's curve is (and how many competed / diverged)."""
    out = []
    for _, r in chosen.iterrows():
        what = r["label"] if r["point"] is not None else "none (no healthy point)"
        out.append(f"  selected {r['setting']} {LABELS.get(r['method'], r['method'])}: {what} "
                   f"(best of {r['points']} point(s), {r['diverged_points']} diverged)"
                   + (f"; ranked ({'/'.join(RANK_KEYS.get(r['method'], ()))}: "
                      f"final acc %): {r['ranking']}" if r["points"] > 1 else ""))
    return out


def header_lines(entry, cfg, df, dataset: str, clients: int, batch: int) -> list[str]:
    """The data the check ran on (the embedded MNIST subset named, with what it changes) and
    the runs that have no results (:func:`reproduce.common.missing_runs`)."""
    lines = []
    label = dataset_label(dataset, cfg.data_dir)
    if "subset" in label:
        per, full = 4000 // clients, 60000 // clients
        lines.append(f"data: {label}, NOT full MNIST (--data-dir DIR with the MNIST IDX files "
                     f"for it): {per} training images per client instead of {full}, so each "
                     f"client takes {-(-per // batch)} local step(s) of batch {batch} per epoch "
                     f"instead of {-(-full // batch)} (less local drift, less for local "
                     "adaptivity to act on), and the test set is 1,000 images (accuracy steps "
                     "of 0.1 points)")
    else:
        lines.append(f"data: {label}")
    gone = missing(entry, cfg, df)
    if gone:
        lines.append(f"missing runs ({len(gone)}; no verdict uses them): "
                     + ", ".join(gone[:8]) + (" ..." if len(gone) > 8 else ""))
    return lines


def round_seconds(per_epoch_cells):
    """Seconds a round at each local-epoch count, fitted to measured cells: ``per_epoch_cells``
    maps E to the mean measured seconds per round at E. With two or more E, the least-squares
    line ``a + b E`` (a round's fixed part ``a``: aggregation, evaluation; ``b`` per epoch,
    both clipped at 0); with one E, proportional to E. Returns a function of E."""
    es = sorted(per_epoch_cells)
    if len(es) == 1:
        unit = per_epoch_cells[es[0]] / es[0]
        return lambda e: unit * e
    x = np.array(es, float)
    y = np.array([per_epoch_cells[e] for e in es], float)
    b = max(float(np.polyfit(x, y, 1)[0]), 0.0)
    a = max(float(np.mean(y - b * x)), 0.0)
    return lambda e: a + b * e


def cost_lines(df, cfg, *, full_seeds: int, full_rounds: int, full_epochs, methods) -> list[str]:
    """``--full``'s cost, extrapolated from this run's measured seconds per round (the
    engine's ``wall_time`` of each cell, evaluation included) per seed: per model/dataset and
    method a line ``a + b E`` through the measured E (:func:`round_seconds`; proportional to E
    when one E was run), summed over the ``full_epochs``, times Table 1's grid sizes,
    ``full_seeds`` and ``full_rounds``. docs/fedlamb_pilot.md ("A measured slice of --full")
    holds it to a measured cell."""
    wall = df[df.metric == "wall_time"]
    if not len(wall):
        return []
    keys = ["setting", "method", "point", "seed", "epochs"]
    per = wall.groupby(keys).agg(t=("value", "max"), rounds=("round", "max")).reset_index()
    per["round_s"] = per.t / per.rounds                  # s per round, seed (cell)
    per["unit"] = per.round_s / per.epochs               # ... and per local epoch
    per["group"] = per.setting.str.replace(r"_E\d+$", "", regex=True)
    units = per.groupby(["group", "method"]).unit.mean()
    total = 0.0
    for (group, method), cells in per.groupby(["group", "method"]):
        fit = round_seconds(cells.groupby("epochs").round_s.mean().to_dict())
        total += (sum(fit(e) for e in full_epochs) * grid_size(base_method(method))
                  * full_seeds * full_rounds)
    measured = ", ".join(f"{LABELS.get(m, m)} {1000 * u:.0f}" for m, u in
                         units.groupby(level=1).mean().items())
    return [f"cost: measured ms per round per seed per local epoch (mean over settings): "
            f"{measured}; --full (Table 1 grids: "
            + ", ".join(f"{LABELS.get(m, m)} {grid_size(base_method(m))}" for m in methods)
            + f" points; {full_seeds} seeds, {full_rounds} rounds, E in "
            f"{tuple(full_epochs)}; a round's cost fitted as a + b E over the measured E) "
            f"extrapolates to {total / 3600:.1f} h of this machine "
            f"({total / 86400:.2f} days)"]

"""What the Fed-LAMB entries share: supplement Table 1's grids, the methods by name (with the
registry's default reading and MAIN Alg. 2's printed one), and the consensus observer (T5).

Spec: ``shared/specs/fed-lamb.md`` (sections 1, 3-6).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from sims.algorithms.base import RoundContext
from sims.algorithms.fed_lamb import PRINTED
from sims.algorithms.registry import make_algorithm
from sims.optim import layer_norms, layer_segments

#: SUPP Table 1, "Search grids of the learning rate" (spec 3.4), verbatim. Adp-Fed has two:
#: the local ``eta_l`` and the global ``eta_g``; Fed-LAMB's ``lambda`` is MAIN Sec. 4's.
SGD_GRID = (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)
AMS_GRID = (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)
GRIDS = {
    "fed-sgd": {"eta_l": SGD_GRID},
    "fed-ams": {"eta_l": AMS_GRID},
    "fed-lamb": {"eta_l": SGD_GRID, "lam": (0.0, 0.01, 0.1)},
    "adp-fed": {"eta_l": AMS_GRID + (0.3, 0.5), "eta": AMS_GRID},
    "mime": {"eta_l": AMS_GRID},
    "mime-lamb": {"eta_l": SGD_GRID},
}
LABELS = {"fed-sgd": "Fed-SGD", "fed-ams": "Fed-AMS", "fed-lamb": "Fed-LAMB",
          "adp-fed": "Adp-Fed", "mime": "Mime", "mime-lamb": "Mime-LAMB",
          "fed-ams-printed": "Fed-AMS (printed)", "fed-lamb-printed": "Fed-LAMB (printed)"}

READINGS_NOTE = ("Fed-AMS/Fed-LAMB default reading: per-step AMSGrad max from the server's "
                 "vhat, bias correction over all a client's steps, client v_0 = 0; printed "
                 "reading (MAIN Alg. 2): vhat fixed within the round (l. 12), correction over "
                 "the local t (l. 9, 11), v_0 = eps (l. 2), sqrt(vhat + eps)")


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
        from sims.engine import _stack_payloads
        alg, problem = view.algorithm, view.problem
        layout, theta_prev = problem.layout, server["theta"]
        dev, dtype = theta_prev.device, theta_prev.dtype
        seg = layer_segments(layout, dev)
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
            payload, mask = _stack_payloads(problem, list(view.draws[r].payloads), dev, dtype)
            ctx = RoundContext(view.t - 1, layout, rep, cli, view.last_round_before[rep, cli])
            lstate = alg.local_start(b_cast, c_state, ctx)
            start = b_cast["theta"]
            th = start.clone()
            walked = torch.zeros(len(cli), len(layout.sizes), dtype=torch.float64, device=dev)
            for k in range(payload.shape[1]):
                m = mask[:, k]
                phi = layer_norms(th, layout, seg).clamp(alg.phi_min, alg.phi_max)
                walked += (lr * phi * m.unsqueeze(-1)).double()
                g = problem.stoch_grad(th, cli, payload[:, k])
                th, lstate = alg.local_step(th, g, lstate, b_cast, c_state,
                                            None if bool(m.all()) else m, ctx)
            drift = layer_norms(th - start, layout, seg).double()
            steps = mask.sum(1).double().unsqueeze(-1)
            out["t5_ratio"][r] = float((drift / (lr * steps * alg.phi_max)).max())
            out["t5_steps_ratio"][r] = float((drift / walked.clamp_min(1e-300)).max())
            mean_end = th.double().mean(0)
            new = view.server["theta"][r].double()
            out["t5_replay_err"][r] = float((mean_end - new).norm() / new.norm())
        return out

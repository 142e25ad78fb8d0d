"""Every registry algorithm in the engine against a plain per-client PyTorch loop.

Workload: MLP 784-200-10, n = 50 clients of 300 samples (random data with MNIST's shapes),
m = 25 participants a round, one local epoch of batch 32 (10 steps a client, 250
client-steps a round). For each algorithm: the engine's seconds per round
(``sims.core.engine.run`` with the registry's default hyperparameters); for each whose local
optimizer ``torch.optim`` has (SGD, Adam, AMSGrad, AdaGrad: :data:`LOOP_OPTIMIZER`), the same
local work as a plain loop: one ``nn.Module``, each participant loads the global model, makes
its optimizer afresh and trains one local epoch (the issue's baseline). Full-precision Fed-SGD
(``fed-sgd``, which takes the fused local-SGD / Gram path) is the reference every algorithm is
held to: ``ratio_to_fused_fedsgd``.

Everything is measured in this one run, interleaved per repeat (fused Fed-SGD, then each
algorithm and its loop); a measurement is the fastest of ``--rounds`` rounds (the least
disturbed by other jobs), and each ratio is the median over repeats of the ratio within a
repeat: the machine is shared, so only ratios taken close together mean much. The load
average (``os.getloadavg``) at start and end is recorded with the numbers.

Prints one JSON line: ``seconds_per_round[alg] = {"engine", "loop"}``, ``speedup_vs_loop``
(loop / engine, algorithms with a loop), ``ratio_to_fused_fedsgd`` (engine / fused Fed-SGD),
``min_speedup_vs_loop``, and ``goals`` (every algorithm >= 1.6x its loop and within 3x of
fused Fed-SGD; Mime / Mime-LAMB, two gradients a step, within 5x), and ``accounting``:
for each algorithm off the fused paths, one more (instrumented, untimed) run per repeat splits
its round into the gradient calls, the local step and the rest (:func:`split_seconds`), and
sets it against a floor: the round's gradient work measured alone (:func:`gradient_seconds`)
plus ``local steps x`` the rule's minimum
number of ``[m, d]`` tensor streams (:data:`RULE_STREAMS`) ``x`` one stream's measured seconds
(:func:`stream_seconds`). ``goal_reachable_at_floor`` False means the gradient and the
rule's own memory traffic alone exceed the goal; ``engine_over_floor`` is what the engine
spends beyond that floor. The split also times ``client_message``; for the fused-path
algorithms that compress (Fed-EF), key ``compression`` gives that time (the compressor and
the error update, which the plain SGD loop does not do) and the loop speedup without it.

``python benchmarks/algorithms_vs_loop.py [--rounds R] [--repeats K] [--threads N]
[--algorithms a,b,...] [--quick] [--accel-ab] [--native-ab] [--cnn] [--uneven]
[--clock wall|cpu]``; ``--clock cpu`` times the engine's rounds and the loops by this
process's CPU time instead of the wall clock (key ``clock``: on a machine shared with other
jobs, the time other jobs held the cores is left out; the accounting split stays on the
wall clock);
``--accel-ab`` also measures each algorithm's engine run with every fast form off
(:mod:`sims.accel`, on by default; ``FEDTOOLKIT_ACCEL=0`` turns it off for a whole run: the
readable rules), interleaved with the run with them on (key ``without_accel``: its
seconds, ratios and ``gain`` = off / on); ``--native-ab`` the same with the C kernels off
(:mod:`sims.accel.native`, ``FEDTOOLKIT_NATIVE=0``; key ``without_native``; key
``native``: the kernels' status). Keys ``compiled`` and ``torch_fused`` are kept, always
False: those forms were removed (``docs/speed.md``);
``--quick`` is a
seconds-long smoke run on a tiny workload (6 clients of 40 samples, 3 a round), for the
test; ``--cnn`` adds the Fed-EF CNN (which runs clients one at a time on the CPU,
``sims.problems.conv``): Fed-AMS against Fed-SGD in the engine and against plain SGD /
AMSGrad loops (key ``cnn``); ``--uneven`` times a Dirichlet-sized federation with the
engine's chunks by step count against lockstep chunks (key ``uneven``,
:func:`uneven_measurement`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import types

from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's sims
from sims import accel  # noqa: E402
from sims.accel import native  # noqa: E402
from sims.core import batching, engine  # noqa: E402
from sims.algorithms.registry import (AlgorithmError, list_algorithms, make_algorithm,  # noqa: E402
                                      make_for_problem)
from sims.problems.models import CNN, MLP  # noqa: E402
from sims.core.participation import Participation  # noqa: E402
from sims.problems.conv import ConvProblem  # noqa: E402
from sims.problems.neural import NeuralProblem  # noqa: E402
from sims.core import malloc as _malloc  # noqa: E402

_malloc.tune_for_command()     # a benchmark is a command (sims.core.malloc)

WORKLOAD = {"n_clients": 50, "per_client": 300, "m": 25, "batch": 32}
QUICK = {"n_clients": 6, "per_client": 40, "m": 3, "batch": 16}
CNN_WORKLOAD = {"n_clients": 8, "per_client": 64, "m": 4, "batch": 32}   # Fed-EF CNN, 2 steps

# The torch.optim optimizer whose local work each algorithm's clients do (None: torch.optim
# has no such optimizer: proximal/corrected SGD, LAMB, FedLADA's amended AMSGrad, SM3, Mime).
LOOP_OPTIMIZER = {
    "fed-sgd": "sgd", "fed-ef-sgd": "sgd", "fed-ef-ams": "sgd", "fed-direct-sgd": "sgd",
    "fed-direct-ams": "sgd", "fedavg": "sgd", "adp-fed": "sgd", "fedadam": "sgd",
    "fedadagrad": "sgd", "fedyogi": "sgd", "fedavgm": "sgd",
    "fed-ams": "amsgrad", "localadam": "amsgrad",
    "fedadaadam": "adam",
    "dja": "adagrad", "joint-adaptive": "adagrad", "fedadaadagrad": "adagrad",
}
# Where a generic-path round's time goes (key ``accounting``): the least number of ``[B, d]``
# tensor streams (one read or one write of a participants-by-parameters tensor) a local step
# of each rule needs in one fused pass, the broadcast server state (one row per replica, here
# one) staying in the cache. The floor of a round is then the measured gradient work plus
# ``local steps x streams x`` the measured seconds of one stream (:func:`stream_seconds`).
RULE_STREAMS = {
    # local AMSGrad (Fed-LAMB Alg. 2 without line 13; FedLADA Alg. 3, its amendment g_a
    # broadcast): read theta, g, m, v, vhat; write theta, m, v, vhat
    "fed-ams": 9, "localadam": 9, "fedlada": 9,
    # + Alg. 2 line 13's layer norms, complete before any coordinate of a client moves: in
    # blocks of whole clients' rows that stay in the cache (the engine's blocked step) the
    # direction u and the second pass over theta never reach memory: AMSGrad's 9
    "fed-lamb": 9,
    # a step on the frozen server state: read theta, g; write theta (LAMB: the same, its
    # norms within a cached block of rows); Mime also reads its anchor gradient
    "mimelite": 3, "mimelite-lamb": 3, "mime": 4, "mime-lamb": 4,
    # SM3-II (FedAda2 Alg. 4): the covers are [B, rows + cols], small: read theta, g; write
    # theta (Adam: and m)
    "fedada2": 3, "fedada2-adam": 5,
    # the full preconditioner: AdaGrad reads theta, g, v, writes theta, v; Adam adds m
    "dja": 5, "joint-adaptive": 5, "fedadaadagrad": 5, "fedadaadam": 7,
    # Yogi (Zaheer et al. Alg. 2): read theta, g, m, v; write theta, m, v
    "local-yogi": 7,
}   # FedAda2-blend (members of both kinds, rows re-grouped per member) is not modelled
TWO_GRADIENTS = ("mime", "mime-lamb")     # two gradients per local step: goal 5x, not 2.5x
GOAL_LOOP, GOAL_FUSED, GOAL_FUSED_TWO = 1.6, 3.0, 5.0


def random_dataset(n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return types.SimpleNamespace(
        name="random-mnist-shaped", source="random",
        x_train=torch.randn(n, 1, 28, 28, generator=gen),
        y_train=torch.randint(0, 10, (n,), generator=gen),
        x_test=torch.randn(10, 1, 28, 28, generator=gen),
        y_test=torch.randint(0, 10, (10,), generator=gen))


def make_problem(w: dict, cnn: bool = False) -> NeuralProblem:
    ds = random_dataset(w["n_clients"] * w["per_client"])
    parts = np.arange(w["n_clients"] * w["per_client"]).reshape(w["n_clients"], -1)
    if cnn:     # the Fed-EF CNN through the CPU's per-client loop (sims.problems.conv)
        return ConvProblem(ds, parts, CNN(), batch_size=w["batch"], eval_grad=False)
    return NeuralProblem(ds, parts, MLP(), batch_size=w["batch"])


#: what a measurement reads (``--clock``): ``"wall"`` (default) the elapsed time, ``"cpu"``
#: this process's CPU time (``time.process_time``: every thread of the process; on a machine
#: shared with other jobs, the time the work took while it ran, without the time other jobs
#: held the cores; their use of the memory bus and caches still counts)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
CLOCK = "wall"


def clock() -> float:
    return CLOCKS[CLOCK]()


def engine_seconds(problem, name: str, w: dict, rounds: int) -> float:
    """The fastest round's seconds after the first (which builds caches): on a machine
    shared with other jobs the fastest of a few rounds is the least disturbed estimate.
    Read on :data:`CLOCK` (the wall clock: the run's own ``wall_time`` metric)."""
    alg = make_for_problem(name, problem)
    marks = []
    out = engine.run(problem, alg, Participation("fixed", m=w["m"]), rounds + 1, [0],
                     eval_every=0, progress=lambda t: marks.append(clock()))
    if CLOCK == "wall":
        return float(np.min(np.diff(out.metrics["wall_time"][0])))
    return float(np.min(np.diff(marks)))


def make_optimizer(kind: str, params, lr: float):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if kind in ("adam", "amsgrad"):
        return torch.optim.Adam(params, lr=lr, amsgrad=kind == "amsgrad")
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    raise ValueError(kind)


def loop_seconds(problem, kind: str, w: dict, rounds: int, lr: float = 0.01,
                 model_fn=MLP) -> float:
    """A plain simulator's round: one module, each participant loads the global model, makes
    its optimizer afresh and trains one local epoch; the mean delta updates the global model."""
    x, y = problem.x, problem.y
    model, global_model = model_fn(), model_fn()
    rng = np.random.default_rng(0)
    n, per, m, batch = w["n_clients"], w["per_client"], w["m"], w["batch"]
    times = []
    for _ in range(rounds + 1):
        start = clock()
        clients = rng.choice(n, m, replace=False)
        global_state = global_model.state_dict()
        deltas = [torch.zeros_like(p) for p in global_model.parameters()]
        for c in clients:
            model.load_state_dict(global_state)
            opt = make_optimizer(kind, model.parameters(), lr)
            idx = int(c) * per + torch.as_tensor(rng.permutation(per))
            for s in range(0, per, batch):
                b = idx[s:s + batch]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x[b]), y[b]).backward()
                opt.step()
            with torch.no_grad():
                for dlt, p0, p in zip(deltas, global_model.parameters(), model.parameters()):
                    dlt += (p0 - p) / m
        with torch.no_grad():
            for p, dlt in zip(global_model.parameters(), deltas):
                p -= dlt
        times.append(clock() - start)
    return float(np.min(times[1:]))


def cnn_measurement(rounds: int, repeats: int) -> dict:
    """The Fed-EF CNN (per-client loop on the CPU): Fed-AMS against Fed-SGD in the engine
    and against plain torch.optim loops (SGD, AMSGrad), interleaved; the issue's check that
    the adaptive update adds no per-step overhead there."""
    w = CNN_WORKLOAD
    problem = make_problem(w, cnn=True)
    got = {"fed-sgd": [], "fed-ams": [], "loop_sgd": [], "loop_amsgrad": []}
    for _ in range(repeats):
        for name in ("fed-sgd", "fed-ams"):
            got[name].append(engine_seconds(problem, name, w, rounds))
        for kind in ("sgd", "amsgrad"):
            got[f"loop_{kind}"].append(loop_seconds(problem, kind, w, rounds, model_fn=CNN))
    med = {k: statistics.median(v) for k, v in got.items()}
    return {"seconds_per_round": {k: round(v, 6) for k, v in med.items()},
            "fed_ams_over_fed_sgd": round(med["fed-ams"] / med["fed-sgd"], 2),
            "speedup_vs_loop": {"fed-sgd": round(med["loop_sgd"] / med["fed-sgd"], 2),
                                "fed-ams": round(med["loop_amsgrad"] / med["fed-ams"], 2)},
            "workload": (f"Fed-EF CNN, n={w['n_clients']} clients of {w['per_client']} "
                         f"samples, m={w['m']}, 1 local epoch of batch {w['batch']}")}


def stream_seconds(w: dict, repeats: int = 7) -> float:
    """Seconds of one ``[m, d]`` float32 tensor stream of the MLP (a read or a write), timed as
    in-place ``addcmul_`` (3 reads, 1 write) over a rotating pool of 12 such tensors, far more
    than a cache holds: the fastest of ``repeats``, divided by 4."""
    d = sum(p.numel() for p in MLP().parameters())
    pool = [torch.rand(w["m"], d) for _ in range(12)]
    best = math.inf
    for i in range(repeats):
        a, b, c = (pool[(3 * i + j) % 12] for j in range(3))
        start = time.perf_counter()
        a.addcmul_(b, c, value=1e-3)
        best = min(best, time.perf_counter() - start)
    return best / 4


def gradient_seconds(problem, w: dict, pair: bool = False, repeats: int = 3) -> float:
    """The floor's first term: one round's gradient work alone, outside any algorithm, as the
    engine asks for it (one call a local step over the ``m`` participants at their own
    models: ``stoch_grad``; ``pair``, Mime's: ``stoch_grad_pair`` and the round's
    full-batch gradient at the server model, ``full_grad_sum``), on the benchmark's own draw
    of round 0; the fastest of ``repeats`` rounds."""
    draw = engine.draw_round(problem, Participation("fixed", m=w["m"]), False, 0, 0)
    payload, _ = engine.stack_payloads(problem, draw.payloads, "cpu", torch.float32)
    clients = torch.as_tensor(draw.clients)
    rep = torch.zeros(len(clients), dtype=torch.long)
    server = problem.init_theta(0).unsqueeze(0)
    gen = torch.Generator().manual_seed(0)
    theta = server + 0.01 * torch.randn(len(clients), server.shape[1], generator=gen)
    best = math.inf
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            if pair:
                problem.full_grad_sum(server, rep, clients)
            for k in range(payload.shape[1]):
                if pair:
                    problem.stoch_grad_pair(theta, server, rep, clients, payload[:, k])
                else:
                    problem.stoch_grad(theta, clients, payload[:, k])
            best = min(best, time.perf_counter() - start)
    return best


def split_seconds(problem, name: str, w: dict, rounds: int) -> dict:
    """One instrumented engine run (not the timed one): seconds per round inside the problem's
    gradient calls (``stoch_grad``, ``stoch_grad_pair``, ``full_grad``, ``full_grad_sum``:
    the gradients the rule needs), inside the algorithm's ``local_step``, inside its
    ``client_message`` (Fed-EF: the compression and the error update), and the rest (local
    start, state gathers and writes, sums of the messages, server step), averaged over the
    rounds after the first."""
    alg = make_for_problem(name, problem)
    spent = {"gradient": 0.0, "local_step": 0.0, "message": 0.0}
    depth = [0]

    def timed(fn, key):
        def call(*args, **kwargs):
            depth[0] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:            # a gradient call inside another counts once
                    spent[key] += time.perf_counter() - start
        return call

    grads = [m for m in ("stoch_grad", "stoch_grad_pair", "full_grad", "full_grad_sum")
             if hasattr(problem, m)]
    for m in grads:
        setattr(problem, m, timed(getattr(problem, m), "gradient"))
    alg.local_step = timed(alg.local_step, "local_step")
    alg.client_message = timed(alg.client_message, "message")
    began = {}

    def progress(t):
        if t == 1:                           # the first round builds caches: not counted
            spent.update(gradient=0.0, local_step=0.0, message=0.0)
            began["t"] = time.perf_counter()

    try:
        engine.run(problem, alg, Participation("fixed", m=w["m"]), rounds + 1, [0],
                   eval_every=0, progress=progress)
    finally:
        for m in grads:
            delattr(problem, m)              # the class's method again
    total = (time.perf_counter() - began["t"]) / rounds
    out = {k: v / rounds for k, v in spent.items()}
    out["other"] = total - out["gradient"] - out["local_step"] - out["message"]
    out["round"] = total
    return out


def accounting(splits: dict, engine_s: dict, fused_s: float, stream_s: float, w: dict,
               loop_s: dict | None = None, grad_s: dict | None = None) -> dict:
    """Each generic-path algorithm's round split (:func:`split_seconds`, medians over repeats)
    against its floor: the gradient work alone (``grad_s``: ``"one"`` a gradient a step,
    ``"pair"`` Mime's, from :func:`gradient_seconds`; without it the gradient measured in the
    algorithm's own round) plus ``local steps x`` :data:`RULE_STREAMS` ``x stream_s``. ``goal_reachable_at_floor``: whether that floor is inside the algorithm's
    goal of fused Fed-SGD; where it is not, the work the rule must do explains the gap.
    With the algorithm's plain loop (``loop_s``): ``floor_speedup_vs_loop`` (loop / floor),
    the most the engine could gain on the loop at its floor, against the 2x goal."""
    steps = math.ceil(w["per_client"] / w["batch"])
    med = statistics.median
    per = {}
    for name, runs in splits.items():
        row = {k: round(med(r[k] for r in runs), 6)
               for k in ("gradient", "local_step", "message", "other", "round")}
        row["gradient_over_fused_fedsgd"] = round(row["gradient"] / fused_s, 2)
        row["local_step_over_fused_fedsgd"] = round(row["local_step"] / fused_s, 2)
        row["local_step_streams"] = round(row["local_step"] / (steps * stream_s), 1)
        streams = RULE_STREAMS.get(name)
        row["rule_streams"] = streams
        if streams is not None:
            grad = (row["gradient"] if not grad_s
                    else grad_s["pair" if name in TWO_GRADIENTS else "one"])
            floor = grad + steps * streams * stream_s
            limit = GOAL_FUSED_TWO if name in TWO_GRADIENTS else GOAL_FUSED
            row["floor_seconds"] = round(floor, 6)
            row["floor_ratio_to_fused_fedsgd"] = round(floor / fused_s, 2)
            row["engine_over_floor"] = round(engine_s[name] / floor, 2)
            row["goal_reachable_at_floor"] = floor / fused_s <= limit
            if loop_s and name in loop_s:
                row["floor_speedup_vs_loop"] = round(loop_s[name] / floor, 2)
        per[name] = row
    out = {"stream_seconds": round(stream_s, 7), "local_steps": steps, "per_algorithm": per}
    if grad_s:
        out["gradient_seconds"] = {k: round(v, 6) for k, v in grad_s.items()}
        out["gradient_over_fused_fedsgd"] = {k: round(v / fused_s, 2) for k, v in grad_s.items()}
    return out


# --uneven: the same 15,000 samples split over the 50 clients by Dirichlet(0.5) weights (a
# non-iid-sized federation: here 31 to ~2,600 samples a client)
UNEVEN_ALPHA, UNEVEN_SEED = 0.5, 0
UNEVEN_DEFAULT = ("fed-sgd", "scaffold", "fed-ams", "fed-lamb", "fedlada", "mimelite", "mime",
                  "fedada2")


def uneven_problem(w: dict) -> NeuralProblem:
    """The workload's samples over its clients in Dirichlet(:data:`UNEVEN_ALPHA`) sizes (at
    least one sample each), seeded: the clients' local step counts then differ by up to two
    orders of magnitude."""
    n, total = w["n_clients"], w["n_clients"] * w["per_client"]
    weights = np.random.default_rng(UNEVEN_SEED).dirichlet(np.full(n, UNEVEN_ALPHA))
    sizes = np.maximum(1, np.floor(weights * (total - n)).astype(int) + 1)
    parts = np.split(np.arange(sizes.sum()), np.cumsum(sizes)[:-1])
    return NeuralProblem(random_dataset(total), parts, MLP(), batch_size=w["batch"])


def uneven_measurement(names, w: dict, rounds: int, repeats: int) -> dict:
    """The engine's chunks by step count (:func:`sims.core.batching.plan_chunks`, the default)
    against lockstep chunks in the round's order (``CHUNK_FILL = 0``, the engine before),
    on :func:`uneven_problem`, interleaved: each algorithm's mean seconds per round over the
    same ``rounds`` rounds (after the first; the participants, and so the work, differ from
    round to round, alike in both arms), medians over repeats; ``gain`` = lockstep /
    grouped."""
    problem = uneven_problem(w)
    sizes = np.array([len(p) for p in problem.parts])
    got = {n: {"grouped": [], "lockstep": []} for n in names}

    def mean_round(name):
        alg = make_for_problem(name, problem)
        out = engine.run(problem, alg, Participation("fixed", m=w["m"]), rounds + 1, [0],
                         eval_every=0)
        return float(np.mean(np.diff(out.metrics["wall_time"][0])[1:] if rounds > 1 else
                             np.diff(out.metrics["wall_time"][0])))

    fill = batching.CHUNK_FILL
    for _ in range(repeats):
        for name in names:
            got[name]["grouped"].append(mean_round(name))
            batching.CHUNK_FILL = 0.0
            try:
                got[name]["lockstep"].append(mean_round(name))
            finally:
                batching.CHUNK_FILL = fill
    med = statistics.median
    sec = {n: {k: round(med(v), 6) for k, v in arms.items()} for n, arms in got.items()}
    return {"seconds_per_round": sec,
            "gain": {n: round(r["lockstep"] / r["grouped"], 2) for n, r in sec.items()},
            "client_samples": {"min": int(sizes.min()), "median": float(np.median(sizes)),
                               "max": int(sizes.max())},
            "chunk_fill": fill,
            "workload": (f"MLP 784-200-10, {w['n_clients'] * w['per_client']} samples over "
                         f"n={w['n_clients']} clients in Dirichlet({UNEVEN_ALPHA}) sizes, "
                         f"m={w['m']}, 1 local epoch of batch {w['batch']}")}


def compresses(name: str) -> bool:
    """Whether the algorithm compresses its messages (Fed-EF's TopK, Sign, ...)."""
    comp = getattr(make_algorithm(name), "compressor", None)
    return comp is not None and getattr(comp, "name", "") != "full"


def compression(splits: dict, engine_s: dict, loop_s: dict) -> dict:
    """For the fused-path algorithms that compress (key ``compression``): the seconds a round
    spends in ``client_message`` (the compressor and Fed-EF's error update, work the plain
    SGD loop does not do; median over the instrumented runs, :func:`split_seconds`), the
    engine's round, and ``speedup_vs_loop_without_message``: the loop against the engine's
    round less that time."""
    med = statistics.median
    out = {}
    for name, runs in splits.items():
        msg = med(r["message"] for r in runs)
        row = {"message_seconds": round(msg, 6), "engine_seconds": round(engine_s[name], 6)}
        if name in loop_s:
            row["speedup_vs_loop_without_message"] = round(loop_s[name]
                                                           / (engine_s[name] - msg), 2)
        out[name] = row
    return out


#: the fast forms an A/B run turns off (``--accel-ab``, ``--native-ab``): each
#: algorithm's seconds with the form off, measured right after its seconds with it on
SWITCHES = {"accel": (accel.enabled, accel.enable),
            "native": (native.enabled, native.enable)}


def seconds_without(form: str, problem, name: str, w: dict, rounds: int) -> float:
    """:func:`engine_seconds` with the fast form ``form`` (:data:`SWITCHES`) off, then back
    as it was."""
    is_on, enable = SWITCHES[form]
    was = is_on()
    enable(False)
    try:
        return engine_seconds(problem, name, w, rounds)
    finally:
        enable(was)


def fused_path(name: str, problem=None) -> bool:
    """Whether the algorithm's local work runs as fused local-SGD rounds (plain SGD, or SGD
    with linear terms; SCAFFOLD's default option II): its client rule planned as a round
    (:mod:`sims.accel.sgd`)."""
    alg = make_algorithm(name)
    got = accel.plan(alg.local_rule, problem if problem is not None else make_problem(QUICK))
    return got is not None and got.round is not None


def goals(speedup: dict, ratio: dict) -> dict:
    out = {}
    for name, r in ratio.items():
        limit = GOAL_FUSED_TWO if name in TWO_GRADIENTS else GOAL_FUSED
        s = speedup.get(name)
        out[name] = {"within_fused_goal": r <= limit, "fused_goal": limit,
                     "loop_goal_met": None if s is None else s >= GOAL_LOOP}
    return out


def _error(msg: str):
    print(f"algorithms_vs_loop.py: error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="timed rounds per measurement")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved repeats")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--algorithms", default="all",
                    help="comma-separated registry names (default: every one)")
    ap.add_argument("--quick", action="store_true", help="a tiny smoke workload")
    ap.add_argument("--accel-ab", action="store_true",
                    help="also each algorithm with every fast form off (sims.accel: the "
                         "readable rules), interleaved")
    ap.add_argument("--native-ab", action="store_true",
                    help="also each algorithm with the C kernels off (sims.accel.native), "
                         "interleaved")
    ap.add_argument("--cnn", action="store_true",
                    help="also the Fed-EF CNN: Fed-AMS against Fed-SGD and plain loops")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="what the engine and loop times read: wall (default) or this "
                         "process's CPU time (a machine shared with other jobs)")
    ap.add_argument("--uneven", action="store_true",
                    help="also Dirichlet-sized clients: the engine's chunks by step count "
                         "against lockstep chunks (algorithms: --algorithms, or a default set)")
    args = ap.parse_args(argv)
    for flag, value, least in (("--rounds", args.rounds, 1), ("--repeats", args.repeats, 1),
                               ("--threads", args.threads, 0)):
        if value < least:
            _error(f"{flag} must be >= {least}, got {value}")
    names = (list(list_algorithms()) if args.algorithms == "all"
             else [a.strip() for a in args.algorithms.split(",") if a.strip()])
    for name in names:
        try:
            make_algorithm(name)
        except AlgorithmError as exc:
            _error(str(exc))
    if args.threads:
        torch.set_num_threads(args.threads)
    global CLOCK
    CLOCK = args.clock
    w = QUICK if args.quick else WORKLOAD
    problem = make_problem(w)
    load_start = os.getloadavg()
    eng = {name: [] for name in names}
    loops = {kind: [] for kind in {LOOP_OPTIMIZER[n] for n in names if n in LOOP_OPTIMIZER}}
    fused, ratios, speedups = [], {n: [] for n in names}, {n: [] for n in names}
    forms = [form for form, flag in (("accel", args.accel_ab),
                                     ("native", args.native_ab)) if flag]
    off = {form: {n: {"engine": [], "ratio": [], "speedup": [], "gain": []} for n in names}
           for form in forms}
    fused_names = {n for n in names if fused_path(n, problem)}
    generic = [n for n in names if n not in fused_names]
    compressing = [n for n in names if n in fused_names and compresses(n)]
    splits = {n: [] for n in generic + compressing}
    for _ in range(args.repeats):
        fused.append(engine_seconds(problem, "fed-sgd", w, args.rounds))
        loop_now = {}
        for name in names:
            eng[name].append(engine_seconds(problem, name, w, args.rounds))
            ratios[name].append(eng[name][-1] / fused[-1])
            for form in forms:
                o = off[form][name]
                o["engine"].append(seconds_without(form, problem, name, w, args.rounds))
                o["ratio"].append(o["engine"][-1] / fused[-1])
                o["gain"].append(o["engine"][-1] / eng[name][-1])
            kind = LOOP_OPTIMIZER.get(name)
            if kind is not None:
                if kind not in loop_now:      # one loop per optimizer and repeat
                    loop_now[kind] = loop_seconds(problem, kind, w, args.rounds)
                    loops[kind].append(loop_now[kind])
                speedups[name].append(loop_now[kind] / eng[name][-1])
                for form in forms:
                    off[form][name]["speedup"].append(loop_now[kind]
                                                      / off[form][name]["engine"][-1])
        for name in generic + compressing:
            splits[name].append(split_seconds(problem, name, w, args.rounds))
    stream_s = stream_seconds(w)
    grad_s = {}
    if generic:
        grad_s["one"] = gradient_seconds(problem, w)
        if any(n in TWO_GRADIENTS for n in generic):
            grad_s["pair"] = gradient_seconds(problem, w, pair=True)
    med = statistics.median
    speedup = {n: round(med(v), 2) for n, v in speedups.items() if v}
    ratio = {n: round(med(v), 2) for n, v in ratios.items()}
    out = {
        "seconds_per_round": {n: {"engine": round(med(eng[n]), 6),
                                  "loop": (round(med(loops[LOOP_OPTIMIZER[n]]), 6)
                                           if n in LOOP_OPTIMIZER else None),
                                  "loop_optimizer": LOOP_OPTIMIZER.get(n),
                                  "fused_path": n in fused_names} for n in names},
        "fused_fedsgd_seconds": round(med(fused), 6),
        "speedup_vs_loop": speedup,
        "ratio_to_fused_fedsgd": ratio,
        "min_speedup_vs_loop": min(speedup.values()) if speedup else None,
        "goals": goals(speedup, ratio),
        "accounting": accounting({n: splits[n] for n in generic},
                                 {n: med(eng[n]) for n in names}, med(fused), stream_s,
                                 w, {n: med(loops[LOOP_OPTIMIZER[n]]) for n in names
                                     if n in LOOP_OPTIMIZER}, grad_s),
        "compression": compression({n: splits[n] for n in compressing},
                                   {n: med(eng[n]) for n in compressing},
                                   {n: med(loops[LOOP_OPTIMIZER[n]]) for n in compressing
                                    if n in LOOP_OPTIMIZER}),
        "threads": torch.get_num_threads(),
        "clock": CLOCK,
        "compiled": False,                     # (removed: docs/speed.md)
        "torch_fused": False,                  # (removed: docs/speed.md)
        "native": native.status(),
        "accel": accel.status(),
        "rounds": args.rounds, "repeats": args.repeats,
        "load_average_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "workload": (f"MLP 784-200-10, n={w['n_clients']} clients of {w['per_client']} "
                     f"samples, m={w['m']}, 1 local epoch of batch {w['batch']}"),
    }
    for form in forms:
        o = off[form]
        out[f"without_{form}"] = {
            "seconds_per_round": {n: round(med(o[n]["engine"]), 6) for n in names},
            "ratio_to_fused_fedsgd": {n: round(med(o[n]["ratio"]), 2) for n in names},
            "speedup_vs_loop": {n: round(med(o[n]["speedup"]), 2) for n in names
                                if o[n]["speedup"]},
            "gain": {n: round(med(o[n]["gain"]), 2) for n in names}}
        sp = out[f"without_{form}"]["speedup_vs_loop"]
        out[f"without_{form}"]["min_speedup_vs_loop"] = min(sp.values()) if sp else None
    if args.cnn:
        out["cnn"] = cnn_measurement(1 if args.quick else args.rounds, args.repeats)
        out["load_average_start_end"][1] = round(os.getloadavg()[0], 2)
    if args.uneven:
        picked = list(UNEVEN_DEFAULT) if args.algorithms == "all" else names
        out["uneven"] = uneven_measurement(picked, w, args.rounds, args.repeats)
        out["load_average_start_end"][1] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

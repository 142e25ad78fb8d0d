"""Engine against a plain per-client PyTorch loop on the Fed-EF Figure 8 workload.

MLP 784-200-10, n = 200 clients, m = 100 participants a round, one local epoch of batch
32, random data with MNIST's shapes, full-precision Fed-SGD (the same local work on both
sides: the loop baseline keeps one model and one ``torch.optim.SGD`` per client, as a
straightforward simulator does, and trains the participants one after the other). Two client sizes: 25 samples (the embedded-MNIST scale)
and 300 (full MNIST). Also measures the machine's float32 matrix-multiply rate and the
engine's useful FLOP rate as a fraction of it. Everything is measured in this one run,
interleaved (engine, loop, engine, loop, ...), and reported as medians and ratios: these
machines are noisy, so only the ratios mean much. It also times the workload's own products
alone (per-client batched products of the first layer, inner dimension 32) and reports the
engine's rate as a fraction of that: the part of the gap to the square-matmul peak that is
the products' shape rather than the engine's overhead. At 300 samples per client the engine
takes its Gram path (``sims.problems.gram_sgd``), whose big products have inner dimensions
784 and 300; the direct path is timed too (``speedup_gram_vs_direct_full``).

The fractions of the matmul rate are taken per repeat against the rate measured right before
and right after that engine measurement (the rate of these virtual machines drifts by tens of
percent within minutes), and their median is reported, with their range over the repeats
(``fraction_of_matmul_peak_full_range``): the engine's small memory-bound operations and the
large product behind the peak feel other tenants' load differently, so the fraction moves
by more than the peak does.

Useful FLOPs per sample and local step count the products the computation needs: the
forward pass (2 FLOPs per weight: a multiply and an add), the weight gradients (2 per weight) and
the input gradients of every layer but the first (2 per weight of those layers).

Prints one JSON line. ``python benchmarks/engine_vs_loop.py [--rounds R] [--repeats K]
[--threads N] [--profile]``. On a machine shared with other jobs, ``--threads 1`` avoids
measuring OpenMP threads waiting for a busy core; ``--profile`` adds, on stderr, the operator
table of two 300-sample engine rounds (where the time goes).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types

import numpy as np
import torch

from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.problems.models import MLP
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem
from sims.core import malloc as _malloc  # noqa: E402

_malloc.tune_for_command()     # a benchmark is a command (sims.core.malloc)

N_CLIENTS, M, BATCH = 200, 100, 32


def random_dataset(per_client: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    n = N_CLIENTS * per_client
    return types.SimpleNamespace(
        name="random-mnist-shaped", source="random",
        x_train=torch.randn(n, 1, 28, 28, generator=gen),
        y_train=torch.randint(0, 10, (n,), generator=gen),
        x_test=torch.randn(10, 1, 28, 28, generator=gen),
        y_test=torch.randint(0, 10, (10,), generator=gen))


def engine_workload(per_client: int, gram_path: bool | None = None):
    """The engine's side of the workload: problem, algorithm (full-precision Fed-SGD) and
    participation; ``gram_path`` as in ``NeuralProblem`` (None: the problem's own choice)."""
    ds = random_dataset(per_client)
    parts = np.arange(N_CLIENTS * per_client).reshape(N_CLIENTS, per_client)
    problem = NeuralProblem(ds, parts, MLP(), batch_size=BATCH, gram_path=gram_path)
    return problem, FedEF(eta=1.0, eta_l=0.05, error_feedback=False), Participation("fixed", m=M)


def engine_round_seconds(per_client: int, rounds: int,
                         gram_path: bool | None = None) -> tuple[float, bool]:
    """Median seconds a round, and whether the Gram path ran."""
    problem, alg, part = engine_workload(per_client, gram_path)
    out = engine.run(problem, alg, part, rounds + 1, [0], eval_every=0)
    wall = np.diff(out.metrics["wall_time"][0])
    return float(np.median(wall)), problem.gram_path   # the diff leaves the set-up round out


def operator_profile(per_client: int = 300, rounds: int = 2, rows: int = 15) -> str:
    """Where an engine round's time goes: ``torch.profiler``'s operator table (self CPU
    time, summed over ``rounds`` rounds after a warm-up run that also builds the Gram data)."""
    from torch.profiler import ProfilerActivity, profile
    problem, alg, part = engine_workload(per_client)
    engine.run(problem, alg, part, 2, [0], eval_every=0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.run(problem, alg, part, rounds, [0], eval_every=0)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def loop_round_seconds(per_client: int, rounds: int) -> float:
    """A plain simulator: one model and one optimizer per client (built once), each
    participant loads the global model and trains one local epoch."""
    ds = random_dataset(per_client)
    x, y = ds.x_train, ds.y_train
    global_model = MLP()
    models = [MLP() for _ in range(N_CLIENTS)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    rng = np.random.default_rng(0)
    times = []
    for _ in range(rounds + 1):
        start = time.perf_counter()
        clients = rng.choice(N_CLIENTS, M, replace=False)
        global_state = global_model.state_dict()
        deltas = [torch.zeros_like(p) for p in global_model.parameters()]
        for c in clients:
            model, opt = models[c], optimizers[c]
            model.load_state_dict(global_state)
            idx = c * per_client + torch.as_tensor(rng.permutation(per_client))
            for s in range(0, per_client, BATCH):
                b = idx[s:s + BATCH]
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
                loss.backward()
                opt.step()
            for dlt, p0, p in zip(deltas, global_model.parameters(), model.parameters()):
                dlt += (p0.detach() - p.detach()) / M
        with torch.no_grad():
            for p, dlt in zip(global_model.parameters(), deltas):
                p -= dlt
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


def matmul_gflops(size: int = 2048, reps: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best.append(time.perf_counter() - t)
    return 2 * size ** 3 / statistics.median(best) / 1e9


def batched_product_gflops(clients: int = 50, batch: int = BATCH, reps: int = 5) -> float:
    """The rate of the products direct local training is made of, on their own and in the
    form the direct path runs them (feature-major, see ``sims.problems.linear_stack``; the
    Gram path, ``sims.problems.gram_sgd``, replaces them with larger ones): the first layer's
    per-client forward ``[200, 784] x [784, batch]`` and weight update
    ``W += [200, batch] x [batch, 784]`` for a chunk of clients (the engine's 32 MiB chunk of
    the 784-200-10 MLP holds about 50). Small per-client matrices with an inner dimension of
    ``batch`` run well below a large square product: this is the ceiling the engine works
    under."""
    w = torch.randn(clients, 200, 784) * 0.01
    x = torch.randn(clients, batch, 784)
    bias = torch.zeros(clients, 200, 1)

    def step():
        z = torch.baddbmm(bias, w, x.transpose(1, 2))
        w.baddbmm_(z, x, alpha=-1e-6)
    step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return 2 * 2 * clients * batch * 784 * 200 / statistics.median(times) / 1e9


def useful_flops_per_round(per_client: int) -> float:
    w1, w2 = 784 * 200 + 200, 200 * 10 + 10
    per_sample = 2 * (w1 + w2) + 2 * (w1 + w2) + 2 * w2
    return per_sample * per_client * M


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads for every measurement (0: torch's default)")
    ap.add_argument("--profile", action="store_true",
                    help="also print the operator table of two 300-sample engine rounds "
                         "(torch.profiler, self CPU time) to stderr")
    args = ap.parse_args(argv)
    for flag, value, least in (("--rounds", args.rounds, 1), ("--repeats", args.repeats, 1),
                               ("--threads", args.threads, 0)):
        if value < least:
            print(f"engine_vs_loop.py: error: {flag} must be >= {least}, got {value}",
                  file=sys.stderr)
            raise SystemExit(2)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = {"small": {"engine": [], "loop": []},
           "full": {"engine": [], "loop": [], "engine_direct": []}}
    peaks, batched, paths, fractions = [], [], {}, {"engine": [], "engine_direct": []}
    useful = useful_flops_per_round(300) / 1e9
    for _ in range(args.repeats):
        for key, per in (("small", 25), ("full", 300)):
            before = matmul_gflops()
            seconds, paths[key] = engine_round_seconds(per, args.rounds)
            res[key]["engine"].append(seconds)
            if key == "full":   # the peak measured right before and after, as the VM drifts
                peaks += [before, matmul_gflops()]
                fractions["engine"].append(useful / seconds / statistics.mean(peaks[-2:]))
            res[key]["loop"].append(loop_round_seconds(per, args.rounds))
        seconds = engine_round_seconds(300, args.rounds, False)[0]
        peaks.append(matmul_gflops())
        res["full"]["engine_direct"].append(seconds)
        fractions["engine_direct"].append(useful / seconds / statistics.mean(peaks[-2:]))
        batched.append(batched_product_gflops())
    med = {k: {s: statistics.median(v) for s, v in d.items()} for k, d in res.items()}
    peak = statistics.median(peaks)
    batched_rate = statistics.median(batched)
    engine_gflops = useful / med["full"]["engine"]
    out = {
        "speedup_vs_loop_small": round(med["small"]["loop"] / med["small"]["engine"], 2),
        "speedup_vs_loop_full": round(med["full"]["loop"] / med["full"]["engine"], 2),
        "gram_path_full": paths["full"],
        "speedup_gram_vs_direct_full": round(med["full"]["engine_direct"] / med["full"]["engine"], 2),
        "fraction_of_matmul_peak_full": round(statistics.median(fractions["engine"]), 3),
        "fraction_of_matmul_peak_full_range": [round(min(fractions["engine"]), 3),
                                               round(max(fractions["engine"]), 3)],
        "seconds_per_round": {k: {s: round(v, 4) for s, v in d.items()} for k, d in med.items()},
        "engine_useful_gflops_full": round(engine_gflops, 1),
        "matmul_peak_gflops": round(peak, 1),
        "batched_product_gflops": round(batched_rate, 1),
        "fraction_of_batched_product_rate_full": round(engine_gflops / batched_rate, 3),
        "fraction_of_matmul_peak_full_direct": round(
            statistics.median(fractions["engine_direct"]), 3),
        "threads": torch.get_num_threads(),
        "workload": "MLP 784-200-10, n=200, m=100, 1 local epoch, batch 32, 25 / 300 samples per client",
    }
    print(json.dumps(out))
    if args.profile:
        print(operator_profile(), file=sys.stderr)
    return out


if __name__ == "__main__":
    main()

"""The one command to run when a GPU is lent: correctness and speed of the simulator on it.

``python benchmarks/gpu_check.py [--device cuda] [--tiny]`` checks, on one device:

(a) **every registry algorithm against its CPU float64 reference**: a few rounds of the
    batched engine on the device in float64 (the readable rules: no fast form is planned off
    the CPU) against the algorithm's plain sequential reference (``sims.reference``) on the
    CPU, on a small MLP problem with clients of unequal sizes; the relative error of the final
    model (goal: <= 1e-9);
(b) **ResNet-18 with GroupNorm rounds** on CIFAR-shaped synthetic data (3x32x32, 10 classes):
    the engine's batched round (``ConvProblem`` with the clients as one vmapped batch) against a
    plain per-client loop (one ``nn.Module``, SGD, client after client) on the same device,
    seconds a round and their ratio;
(c) **ViT-S/16 feature extraction** (random weights, 224x224 inputs): images a second;
(d) **one JSON line** with the per-round and per-image times and the paper-scale cost each
    implies: FedLADA Figure 2's ``--full`` run (ResNet-18-GN on CIFAR-10, 1500 rounds,
    ``reproduce.fedlada_fig2``) from (b)'s seconds per batched local step, and FedAda2's
    frozen-backbone features (CIFAR-100's 60,000 images and GLD-23K's 23,080 a setting)
    from (c).

Sized to take under 8 minutes on one GPU; ``--tiny`` (e.g. ``--device cpu --tiny``, what the
tests run) shrinks every part to seconds: the quadratic and a two-round MLP for (a), two
clients of four images for (b), two images for (c). The load average and the device's name
are recorded.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's sims

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from sims.algorithms.fed_ef import FedEF  # noqa: E402
from sims.algorithms.registry import ALGORITHMS, make_for_problem  # noqa: E402
from sims.core.engine import run  # noqa: E402
from sims.core.participation import Participation  # noqa: E402
from sims.problems.backbones.vit import vit_small_patch16_224  # noqa: E402
from sims.problems.conv import ConvProblem  # noqa: E402
from sims.problems.models import MLP, make_model  # noqa: E402
from sims.problems.neural import NeuralProblem  # noqa: E402
from sims.problems.quadratic import heterogeneous_quadratic  # noqa: E402
from sims.reference import run_reference  # noqa: E402
from sims.reference.fed_ef import run_fed_ef_reference  # noqa: E402
from sims.core import malloc as _malloc  # noqa: E402

_malloc.tune_for_command()     # a benchmark is a command (sims.core.malloc)

TOL = 1e-9
#: FedAda2's frozen-backbone feature extraction at paper scale: every image once per setting
FEATURE_IMAGES = {"cifar100": 60_000, "gld23k": 23_080}


def _dataset(n, shape, classes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return type("DS", (), dict(
        name="synthetic", source="random", num_classes=classes,
        x_train=torch.randn(n, *shape, generator=g), y_train=torch.randint(0, classes, (n,),
                                                                             generator=g),
        x_test=torch.randn(16, *shape, generator=g),
        y_test=torch.randint(0, classes, (16,), generator=g)))()


def _rel(a, b) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def reference_check(device, tiny: bool) -> dict:
    """(a): each registry algorithm on ``device`` (float64) against its CPU reference."""
    sizes = (5, 9, 14, 20, 14)                        # batch 4: 2-5 local steps, masked
    perm = np.random.default_rng(7).permutation(sum(sizes))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]
    ds = _dataset(sum(sizes), (1, 28, 28), 10)

    def problems(dev):
        if tiny:
            return heterogeneous_quadratic(6, 12, local_steps=3, seed=1, sigma=0.5, x0=1.0,
                                           device=dev)
        return NeuralProblem(ds, parts, MLP(784, hidden=8), batch_size=4,
                             dtype=torch.float64, device=dev)
    dev_prob, cpu_prob = problems(device), problems("cpu")
    part = Participation("fixed", m=3)
    rounds = 2 if tiny else 3
    errors = {}
    for name in ALGORITHMS:
        alg = make_for_problem(name, dev_prob)
        out = run(dev_prob, alg, part, rounds, [0], eval_test=False)
        ref_alg = make_for_problem(name, cpu_prob)
        if isinstance(ref_alg, FedEF):
            theta = run_fed_ef_reference(cpu_prob, ref_alg, part, rounds, 0)[1]
        else:
            theta = run_reference(cpu_prob, ref_alg, part, rounds, 0).theta
        errors[name] = _rel(out.server["theta"][0], theta)
    return {"relative_error": {k: float(f"{v:.3g}") for k, v in errors.items()},
            "max_relative_error": max(errors.values()), "tolerance": TOL,
            "all_within": all(v <= TOL for v in errors.values()),
            "problem": "quadratic" if tiny else "MLP 784-8-10, 5 clients of 5-20 samples"}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def resnet_rounds(device, tiny: bool) -> dict:
    """(b): ResNet-18-GN rounds, the engine's batched clients against a per-client loop."""
    clients, per, batch, rounds = (2, 4, 4, 0) if tiny else (10, 100, 50, 3)
    ds = _dataset(clients * per, (3, 32, 32), 10)
    ds.x_train, ds.y_train = ds.x_train.to(device), ds.y_train.to(device)
    parts = list(np.arange(clients * per).reshape(clients, per))
    model = make_model("resnet18", (3, 32, 32), 10)
    prob = ConvProblem(ds, parts, model, batch_size=batch, device=device, loop=False,
                       eval_grad=False)
    part = Participation("full")
    out = run(prob, make_for_problem("fedavg", prob), part, rounds + 1, [0], eval_every=0)
    _sync(device)
    per_round = np.diff(np.concatenate([[0.0], out.metrics["wall_time"][0]]))
    engine_s = float(np.min(per_round[1:] if rounds else per_round))   # the first: warm-up
    net = make_model("resnet18", (3, 32, 32), 10).to(device)
    start_state = {k: v.clone() for k, v in net.state_dict().items()}
    times = []
    for _ in range(rounds + 1):
        _sync(device)
        t0 = time.perf_counter()
        for c in range(clients):
            net.load_state_dict(start_state)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            idx = torch.as_tensor(parts[c], device=device)
            for s in range(0, per, batch):
                b = idx[s:s + batch]
                opt.zero_grad()
                F.cross_entropy(net(ds.x_train[b]), ds.y_train[b]).backward()
                opt.step()
        _sync(device)
        times.append(time.perf_counter() - t0)
    loop_s = float(min(times[1:] if rounds else times))
    steps = math.ceil(per / batch)
    return {"engine_seconds_per_round": round(engine_s, 5), "loop_seconds_per_round":
            round(loop_s, 5), "speedup_vs_loop": round(loop_s / engine_s, 2),
            "seconds_per_batched_step": engine_s / steps,
            "workload": f"{clients} clients of {per} images, batch {batch}, {steps} step(s) a "
                        "round, FedAvg"}


def vit_features(device, tiny: bool) -> dict:
    """(c): ViT-S/16 (random weights) feature extraction, images a second."""
    n, batch = (2, 2) if tiny else (1024, 256)
    net = vit_small_patch16_224().to(device).eval()
    x = torch.randn(batch, 3, 224, 224, device=device)
    with torch.no_grad():
        net(x[:min(2, batch)])                                     # warm-up
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(max(1, n // batch)):
            net(x)
        _sync(device)
    seconds = time.perf_counter() - t0
    images = max(1, n // batch) * batch
    return {"images_per_second": round(images / seconds, 1), "images": images}


def paper_scale(resnet: dict, vit: dict) -> dict:
    """(d): what (b)'s and (c)'s times imply at paper scale."""
    from reproduce import fedlada_cost, fedlada_fig2
    cfg = fedlada_fig2.Config(full=True)
    cfg.scale()
    work = fedlada_fig2.full_work(cfg)
    batches = math.ceil(fedlada_cost.TRAIN_IMAGES[cfg.dataset] / cfg.n_clients / cfg.batch_size)
    batched_steps = cfg.seeds * cfg.rounds * sum(e * batches for _, e in work)
    hours = batched_steps * resnet["seconds_per_batched_step"] / 3600
    return {"fedlada_fig2_full": {
                "batched_local_steps": batched_steps, "implied_hours": round(hours, 2),
                "note": (f"{len(work)} runs x {cfg.seeds} seed(s) x {cfg.rounds} rounds of "
                         f"ResNet-18-GN on {cfg.dataset}, {work[0][0]} participants, "
                         f"{work[0][1]} local epochs of batch {cfg.batch_size}; at (b)'s "
                         "seconds per batched step, which grow with the participants")},
            "fedada2_features": {k: round(v / vit["images_per_second"], 1)
                                 for k, v in FEATURE_IMAGES.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--tiny", action="store_true", help="seconds-long parts (the tests)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: a,b,c")
    args = ap.parse_args(argv)
    try:
        device = torch.device(args.device)
    except RuntimeError:
        print(f"gpu_check.py: error: unknown device {args.device!r}", file=sys.stderr)
        raise SystemExit(2) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check.py: error: no CUDA device here (use --device cpu --tiny for a smoke "
              "run)", file=sys.stderr)
        raise SystemExit(2)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    started, load = time.perf_counter(), os.getloadavg()
    out = {"device": str(device),
           "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                           else "cpu"),
           "torch": torch.__version__, "tiny": args.tiny}
    if "a" not in skip:
        out["algorithms_vs_reference"] = reference_check(device, args.tiny)
    if "b" not in skip:
        out["resnet18_gn"] = resnet_rounds(device, args.tiny)
    if "c" not in skip:
        out["vit_s16_features"] = vit_features(device, args.tiny)
    if not {"b", "c"} & skip:
        out["paper_scale"] = paper_scale(out["resnet18_gn"], out["vit_s16_features"])
    out["wall_seconds"] = round(time.perf_counter() - started, 1)
    out["load_average_start_end"] = [round(load[0], 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

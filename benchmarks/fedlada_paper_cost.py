"""What one local step of FedLADA's paper-scale models costs on this CPU: seconds and FLOPs
per training step of batch 50 (issue 20: each entry states what a full GPU reproduction
costs, estimated from the real model's measured step).

Models (``sims.problems.models``, as the entries build them): ResNet-18 with GroupNorm on CIFAR-10
(3x32x32, 10 classes), CIFAR-100 (100 classes) and TinyImageNet (3x64x64, 200 classes), with
the CIFAR stem (``resnet18-*``) and torchvision's (``resnet18tv-*``); the
Figure 7 LeNet with GeLU on CIFAR-10 and on the Fashion-MNIST stand-in's 1x28x28; the
stand-in's 784-50-10 MLP. A step is what a client does per minibatch: forward, cross-entropy,
backward, an SGD update of the parameters. FLOPs are counted by PyTorch's own
``torch.utils.flop_counter.FlopCounterMode`` (matrix products and convolutions, forward and
backward; elementwise work not counted); the time is the median of ``--steps`` steps after
two warm-up steps on one thread (``--threads``), random inputs. The load average at start
and end is recorded (the machine is shared).

Prints one JSON line: per model ``{"seconds_per_step", "gflop_per_step",
"gflop_per_second"}``. ``reproduce.fedlada_cost`` holds the numbers of a run of this script
and turns them into each entry's paper-scale cost.

``python benchmarks/fedlada_paper_cost.py [--steps N] [--threads N] [--models a,b] [--quick]
[--lenet-round]`` (``--quick``: the MLP and LeNet only, one step: the test's smoke run;
``--lenet-round``: also one engine round of FedLADA with the LeNet on the Figure 7 stand-in's
problem, which decides the stand-in's model).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from sims.problems.models import make_model  # noqa: E402
from sims.core import malloc as _malloc  # noqa: E402

_malloc.tune_for_command()     # a benchmark is a command (sims.core.malloc)

#: name -> (model, input shape, classes, model keywords)
WORKLOADS = {
    "resnet18-cifar10": ("resnet18", (3, 32, 32), 10, {}),
    "resnet18-cifar100": ("resnet18", (3, 32, 32), 100, {}),
    "resnet18-tinyimagenet": ("resnet18", (3, 64, 64), 200, {}),
    "resnet18tv-cifar10": ("resnet18", (3, 32, 32), 10, {"stem": "torchvision"}),
    "resnet18tv-cifar100": ("resnet18", (3, 32, 32), 100, {"stem": "torchvision"}),
    "resnet18tv-tinyimagenet": ("resnet18", (3, 64, 64), 200, {"stem": "torchvision"}),
    "lenet-cifar10": ("lenet", (3, 32, 32), 10, {"activation": "gelu"}),
    "lenet-fmnist": ("lenet", (1, 28, 28), 10, {"activation": "gelu"}),
    "mlp50-fmnist": ("mlp", (1, 28, 28), 10, {"hidden": 50}),
}
BATCH = 50


def step_fn(name: str):
    model_name, shape, classes, kw = WORKLOADS[name]
    torch.manual_seed(0)
    net = make_model(model_name, shape, classes, **kw)
    x = torch.randn(BATCH, *shape)
    y = torch.randint(0, classes, (BATCH,))
    params = list(net.parameters())

    def step():
        loss = F.cross_entropy(net(x), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(0.01 * g)
    return step


def measure(name: str, steps: int) -> dict:
    step = step_fn(name)
    with FlopCounterMode(display=False) as counter:
        step()
    flops = counter.get_total_flops()
    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    return {"seconds_per_step": sec, "gflop_per_step": flops / 1e9,
            "gflop_per_second": flops / 1e9 / sec}


def lenet_round(rounds: int = 1) -> dict:
    """Seconds per engine round of FedLADA on the Figure 7 entry's problem with the LeNet in
    place of the stand-in's MLP (Fashion-MNIST, 100 clients Dir-0.3, 10 a round, 2 local
    epochs of batch 50 = 24 steps a client): what a LeNet CPU stand-in would cost."""
    from reproduce import fedlada_common as fc
    from reproduce import fedlada_fig7 as fig7
    from sims.core import engine
    cfg = fig7.Config(model="lenet")
    prob = fig7.problem(cfg, "gelu")
    alg, part = fc.algorithm("fedlada", cfg), fc.participation(cfg)
    t0 = time.perf_counter()
    engine.run(prob, alg, part, rounds, [0], eval_every=10 ** 9)
    sec = (time.perf_counter() - t0) / rounds
    steps = part.m * fc.epochs(cfg) * int(np.ceil(60_000 / cfg.n_clients / cfg.batch_size))
    return {"seconds_per_round": sec, "client_steps_per_round": steps,
            "seconds_per_step": sec / steps}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default=",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lenet-round", action="store_true",
                    help="also time one engine round of FedLADA with the LeNet (Fig. 7)")
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in names if m not in WORKLOADS]
    if bad:
        print(f"error: unknown --models {', '.join(bad)} (known: {', '.join(WORKLOADS)})",
              file=sys.stderr)
        return 2
    if a.steps < 1 or a.threads < 1:
        print("error: --steps and --threads must be >= 1", file=sys.stderr)
        return 2
    if a.quick:
        names, a.steps = ["mlp50-fmnist", "lenet-fmnist"], 1
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()[0]
    out = {name: measure(name, a.steps) for name in names}
    extra = {"lenet_round_fmnist": lenet_round()} if a.lenet_round else {}
    print(json.dumps({**extra, "threads": a.threads, "steps": a.steps, "batch": BATCH,
                      "torch": torch.__version__, "load_start": load0,
                      "load_end": os.getloadavg()[0], "models": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

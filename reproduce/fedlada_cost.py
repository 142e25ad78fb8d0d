"""What a FedLADA entry's ``--full`` (paper-scale) run costs: training steps, FLOPs, core-days
on this CPU and an estimate of GPU-hours.

How it is estimated. One local step (batch 50: forward, backward, update) of each paper
model was measured on this CPU by ``benchmarks/fedlada_paper_cost.py`` (one thread; FLOPs
counted by ``torch.utils.flop_counter``): :data:`STEP`. An entry's ``--full`` run does

    steps = sum over its runs and seeds of  rounds x S x E x ceil((N / n_clients) / 50)

(S participants a round, E local epochs, N training images, balanced clients), plus an
evaluation every ``eval_every`` rounds (a forward pass, a third of a step's FLOPs per image,
over the evaluation subset of the training set and the test set). CPU time is steps x the
measured seconds per step (one core); GPU time is the FLOPs over :data:`GPU_TFLOPS`, an
*assumed* sustained rate for one H100 on these small models (no GPU was lent to measure
it), given as a range, and at least :data:`GPU_STEP_FLOOR_S` per batched step (assumed).
"""
from __future__ import annotations

import math

#: Seconds and GFLOP per training step of batch 50 on one core of this machine (AMD EPYC,
#: torch 2.13 CPU, one thread): ``benchmarks/fedlada_paper_cost.py --steps 3``, 2026-11-24,
#: load average 4.5 (other jobs on the 2 cores). That is 47-106 GFLOP/s a core (the 64x64
#: ResNet the most efficient); the stand-in's MLP step is 0.28 ms, 8 MFLOP.
STEP = {
    ("resnet18", "cifar10"): (2.96, 166.45),
    ("resnet18", "cifar100"): (3.55, 166.46),
    ("resnet18", "tinyimagenet"): (6.29, 665.82),
    ("lenet", "cifar10"): (0.060, 4.032),
    # torchvision's stem (7x7 stride 2 + max-pool; the FedLADA entries' default,
    # ``--resnet-stem``): ``--models resnet18tv-*``, 2026-11-29, load average 3.7-3.8 (the CIFAR
    # stem measured 1.91 s in the same run, against 2.96 s at load 4.5 above)
    ("resnet18-torchvision", "cifar10"): (0.168, 10.86),
    ("resnet18-torchvision", "cifar100"): (0.192, 10.88),
    ("resnet18-torchvision", "tinyimagenet"): (0.741, 43.48),
}


def model_key(cfg) -> str:
    """The :data:`STEP` key of a config's model: ResNet-18 by its stem."""
    if cfg.model == "resnet18" and getattr(cfg, "resnet_stem", "cifar") == "torchvision":
        return "resnet18-torchvision"
    return cfg.model

TRAIN_IMAGES = {"cifar10": 50_000, "cifar100": 50_000, "tinyimagenet": 100_000}
TEST_IMAGES = {"cifar10": 10_000, "cifar100": 10_000, "tinyimagenet": 10_000}

#: Assumed sustained training throughput of one H100 on these models, TFLOP/s (low, high):
#: 15-60 % of its FP32 peak (67 TFLOP/s, SXM) or 2-8 % of its dense TF32 tensor peak; small
#: images, batch 50 and GroupNorm keep such models far from peak. An assumption, not a
#: measurement.
GPU_TFLOPS = (10.0, 40.0)

#: Assumed floor on one batched local step on the GPU (the engine runs a round's S clients
#: as one batch there): kernel launches of a forward, backward and update, about 3 ms. It
#: binds only for the LeNet (4 GFLOP a client-step); an assumption, not a measurement.
GPU_STEP_FLOOR_S = 3e-3


def workload(cfg, work) -> dict:
    """Steps, evaluation images and FLOPs of a ``--full`` run. ``work``: one ``(S, E)``
    (participants a round, local epochs) per run; seeds multiply it."""
    key = (model_key(cfg), cfg.dataset)
    if key not in STEP or STEP[key][0] is None:
        raise KeyError(f"no measured step for {key}")
    sec, gflop = STEP[key]
    per_client = TRAIN_IMAGES[cfg.dataset] / cfg.n_clients
    batches = math.ceil(per_client / cfg.batch_size)
    steps = cfg.seeds * cfg.rounds * sum(s * e * batches for s, e in work)
    evals = len(work) * cfg.seeds * (cfg.rounds // cfg.eval_every + 1)
    eval_images = evals * ((cfg.eval_train_samples or TRAIN_IMAGES[cfg.dataset])
                           + (cfg.test_samples or TEST_IMAGES[cfg.dataset]))
    flop = 1e9 * gflop * (steps + eval_images / (3 * cfg.batch_size))
    cpu_s = sec * (steps + eval_images / (3 * cfg.batch_size))
    batched = cfg.seeds * cfg.rounds * sum(e * batches for _, e in work)
    floor = batched * GPU_STEP_FLOOR_S
    return {"runs": len(work) * cfg.seeds, "steps": steps, "pflop": flop / 1e15,
            "cpu_core_days": cpu_s / 86400,
            "gpu_hours": tuple(max(flop / (t * 1e12), floor) / 3600
                               for t in sorted(GPU_TFLOPS, reverse=True))}


def text(cfg, work) -> str:
    """One line for an entry's ``DEFAULT_COST``: the ``--full`` run's size and cost."""
    w = workload(cfg, work)
    lo, hi = w["gpu_hours"]
    digits = 0 if lo >= 10 else 1
    return (f"--full (GPU, estimated): {w['runs']} run(s) of {model_key(cfg)} on {cfg.dataset}, "
            f"{cfg.rounds} rounds, {w['steps']:.3g} local steps, {w['pflop']:.3g} PFLOP: "
            f"about {lo:.{digits}f}-{hi:.{digits}f} H100-hours (assuming "
            f"{min(GPU_TFLOPS):g}-{max(GPU_TFLOPS):g} TFLOP/s sustained), "
            f"{w['cpu_core_days']:.0f} core-days on this CPU (reproduce.fedlada_cost)")


def entry_text(entry) -> str:
    """:func:`text` for an entry module's ``Config`` under ``--full`` and its ``full_work``."""
    cfg = entry.Config(full=True)
    cfg.scale()
    return text(cfg, entry.full_work(cfg))

"""Sequential reference of FedLADA (:mod:`sims.algorithms.fedlada`), Alg. 3 line by line."""
from __future__ import annotations

import torch

from .common import History, ReferenceRun, mean, rounds


def ref_fedlada(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """FedLADA Alg. 3 (spec 1.4) line by line; LocalAdam is ``alpha = 1``."""
    theta = problem.init_theta(seed).clone()
    v_glob = torch.full_like(theta, alg.initial_v)
    ga = torch.zeros_like(theta)
    hist = History(problem, theta)
    b1, b2 = alg.beta1, alg.beta2
    for t, draw in rounds(problem, participation, seed, rounds_):
        lr = alg.eta_l * alg.lr_decay ** t
        deltas, vhats, gas = [], [], []
        for j, client in enumerate(draw.clients):
            x = theta.clone()
            m = torch.zeros_like(theta)
            v = v_glob.clone() if alg.v_init == "server" else torch.zeros_like(theta)
            vhat = v_glob.clone()
            K = 0
            for batch in draw.payloads[j]:
                g = problem.reference_grad(x, int(client), batch)
                if alg.weight_decay and alg.wd_mode == "coupled":
                    g = g + alg.weight_decay * x
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                vhat = torch.maximum(v, vhat)
                theta_dir = 1.0 / torch.sqrt(vhat)
                x_new = x - lr * (alg.alpha * m * theta_dir + (1 - alg.alpha) * ga)
                if alg.weight_decay and alg.wd_mode == "decoupled":
                    x_new = x_new - lr * alg.weight_decay * x
                x = x_new
                K += 1
            deltas.append(theta - x)
            vhats.append(vhat)
            gas.append((theta - x) / (lr * K))
        if deltas:
            eta = alg.eta * (alg.lr_decay ** t if alg.decay_global else 1.0)
            v_glob = mean(vhats)
            theta = theta - eta * mean(deltas)
            ga = mean(gas)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"v": v_glob, **({"ga": ga} if alg.alpha != 1 else {})})

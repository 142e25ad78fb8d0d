"""Sequential reference of FedAda2's joint adaptivity (:mod:`sims.algorithms.fedada2`): Alg. 2,
5, 8, 10 and the joint-adaptive baselines, with the SM3 covers written plainly per layer."""
from __future__ import annotations

import math

import torch

from .baselines import server_rule_of
from .common import History, ReferenceRun, mean, rounds


def _blocks(layout, full):
    """Per layer: (slice, shape of the accumulator block) -- SM3 sets per axis for tensors
    with two or more axes, one per coordinate otherwise (or everywhere when ``full``)."""
    out = []
    for sl, shape in zip(layout.slices, layout.shapes):
        if len(shape) >= 2 and not full:
            out.append((sl, tuple(shape)))
        else:
            out.append((sl, (sl.stop - sl.start,)))
    return out


def _ref_sm3_max(x, layout, full):
    """Accumulator values ``max_{j in S_r} x(j)``: per layer, a list of per-axis vectors."""
    acc = []
    for sl, shape in _blocks(layout, full):
        block = x[sl].reshape(shape)
        if len(shape) == 1:
            acc.append([block.clone()])
            continue
        per_axis = []
        for a in range(len(shape)):
            moved = block.movedim(a, 0).reshape(shape[a], -1)
            per_axis.append(moved.max(dim=1).values)
        acc.append(per_axis)
    return acc


def _ref_sm3_min(acc, layout, full):
    """``nu(j) = min over the sets containing j`` as a flat vector."""
    parts = []
    for (sl, shape), per_axis in zip(_blocks(layout, full), acc):
        if len(shape) == 1:
            parts.append(per_axis[0].clone())
            continue
        nu = torch.full(shape, math.inf, dtype=per_axis[0].dtype)
        for a, vec in enumerate(per_axis):
            view = [1] * len(shape)
            view[a] = shape[a]
            nu = torch.minimum(nu, vec.reshape(view))
        parts.append(nu.reshape(-1))
    return torch.cat(parts)


def _acc_map(f, *accs):
    return [[f(*vals) for vals in zip(*layers)] for layers in zip(*accs)]


def _ref_joint_client(problem, alg, theta, payloads, client, t, server_v, max_steps=None):
    """One FedAda2 client (Alg. 2 / 6-10 client loop): AdaGrad, Adam or SGD with a full or
    SM3 preconditioner, delayed updates, clipping; returns the final local model."""
    layout = problem.layout
    full = alg.precond == "full"
    b1, b2, z = alg.beta1, alg.beta2, alg.delay
    ema = alg.client == "adam"
    x = theta.clone()
    if alg.init == "server":
        mu = _ref_sm3_max(server_v, layout, full)
        nu = _ref_sm3_min(mu, layout, full)
    else:
        mu = _ref_sm3_max(torch.zeros_like(theta), layout, full)
        nu = torch.zeros_like(theta)
    m = torch.zeros_like(theta)
    F = getattr(alg, "freeze_epochs", 0)
    E = problem.epoch_steps(client) if F else 1
    updates = 0
    for k, batch in enumerate(payloads, start=1):
        if max_steps is not None and k > max_steps:
            break
        g = problem.reference_grad(x, client, batch)
        if alg.client == "sgd":
            u = g
        else:
            # an update every z-th step, only in epochs 0, F+1, 2(F+1), ... (Fig. 7 freezing)
            if (k - 1) % z == 0 and ((k - 1) // E) % (F + 1) == 0:
                updates += 1
                if alg.precond == "sm3-ii":
                    prev = _ref_sm3_min(mu, layout, full)
                    nu = b2 * prev + (1 - b2) * g * g if ema else prev + g * g
                    mu = _ref_sm3_max(nu, layout, full)
                else:
                    inc = _ref_sm3_max(g * g, layout, full)
                    if ema:
                        mu = _acc_map(lambda a, b: b2 * a + (1 - b2) * b, mu, inc)
                    else:
                        mu = _acc_map(lambda a, b: a + b, mu, inc)
                    nu = _ref_sm3_min(mu, layout, full)
            if alg.client == "adagrad":
                u = g / (torch.sqrt(nu) + alg.eps)
            else:
                m = b1 * m + (1 - b1) * g
                m_hat, nu_hat = m, nu
                if alg.bias_correction:
                    n_upd = updates + (t if alg.init == "server" else 0)
                    m_hat = m / (1 - b1 ** k)
                    nu_hat = nu / (1 - b2 ** n_upd)
                u = m_hat / (torch.sqrt(nu_hat) + alg.eps)
        if alg.clip:
            norm = float(torch.linalg.vector_norm(u))
            if 0 < norm < alg.clip:
                u = torch.zeros_like(u)
                m = torch.zeros_like(m)
        x = x - alg.eta_l * u
    return x


def ref_joint_adaptive(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """FedAda2 Alg. 2, 5, 8, 10 and the joint-adaptive baselines (spec 1.3-1.13)."""
    theta = problem.init_theta(seed).clone()
    rule = server_rule_of(alg, alg.server, alg.server_beta1, alg.server_beta2, alg.tau,
                           alg.v0, False, alg.server_bias_correction)
    rule_v = torch.full_like(theta, alg.tau ** 2 if alg.v0 is None else alg.v0)
    members = getattr(alg, "members", None)          # Alg. 5: strategy i mod p
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        deltas = []
        for j, client in enumerate(draw.clients):
            client = int(client)
            if members is None:
                x = _ref_joint_client(problem, alg, theta, draw.payloads[j], client, t, rule_v)
                deltas.append(theta - x)
            else:
                l = client % len(members)
                x = _ref_joint_client(problem, members[l], theta, draw.payloads[j], client,
                                      t, rule_v, alg.step_list[l])
                deltas.append(alg.weight_list[l] * (theta - x))
        if deltas:
            theta = theta - alg.eta * rule.direction(mean(deltas))
            if rule.v is not None:
                rule_v = rule.v
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {"v": rule_v})

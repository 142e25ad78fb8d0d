"""Sequential references of the baselines (:mod:`sims.algorithms.baselines`): FedOpt and its
presets (FedAvg, FedAvgM, FedProx, FedCM, FedAdam, FedAdam(*), FedAdaGrad, FedYogi, Adp-Fed),
SCAFFOLD, local Yogi, MimeLite and Mime (and their layer-wise variants), written from the
papers' pseudo-code one client at a time."""
from __future__ import annotations

import numpy as np
import torch

from .common import History, ReferenceRun, mean, rounds, trust_step


class ServerRule:
    """The server update on the mean pseudo-gradient ``U``, written out per rule."""

    def __init__(self, kind, lr, beta1=0.9, beta2=0.99, eps=1e-3, v0=0.0, inside=False,
                 bias_correction=False):
        self.kind, self.lr, self.b1, self.b2 = kind, lr, beta1, beta2
        self.eps, self.v0, self.inside, self.bc = eps, v0, inside, bias_correction
        self.m = self.v = self.vhat = None
        self.t = 0

    def direction(self, U):
        if self.kind == "sgd":
            return U
        if self.kind == "momentum":                  # FedAvgM: m = beta m + U
            self.m = U.clone() if self.m is None else self.b1 * self.m + U
            return self.m
        if self.m is None:
            self.m = torch.zeros_like(U)
            self.v = torch.full_like(U, self.v0)
            self.vhat = torch.full_like(U, self.v0)
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * U
        if self.kind == "adagrad":
            self.v = self.v + U * U
        elif self.kind == "yogi":
            self.v = self.v - (1 - self.b2) * U * U * torch.sign(self.v - U * U)
        else:
            self.v = self.b2 * self.v + (1 - self.b2) * U * U
        second = self.v
        if self.kind == "amsgrad":
            self.vhat = torch.maximum(self.vhat, self.v)
            second = self.vhat
        m = self.m
        if self.bc and self.kind != "adagrad":
            m = m / (1 - self.b1 ** self.t)
            second = second / (1 - self.b2 ** self.t)
        if self.inside:
            return m / torch.sqrt(second + self.eps)
        return m / (torch.sqrt(second) + self.eps)


def server_rule_of(alg, kind, beta1, beta2, tau, v0, inside=False, bc=False):
    """The server rule named ``kind`` with ``v0 = tau^2`` unless given (Reddi et al.)."""
    return ServerRule(kind, alg.eta, beta1, beta2, tau, tau * tau if v0 is None else v0,
                      inside, bc)


def ref_fedopt(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """FedAvg / FedProx / FedCM / FedAdam / FedAdam(*) / FedAdaGrad / FedYogi / Adp-Fed.

    FedLADA spec 1.2 and 1.5, Fed-LAMB SUPP Alg. 1, FedAda2 spec 1.13: ``K`` local steps of
    ``x <- x - lr (alpha (g + wd x + mu (x - x^t)) + (1 - alpha) g_a)``, then the server rule on
    ``U = mean_i (x^t - x_i)``; ``g_a = mean_i (x^t - x_i) / (lr K_i)``.
    """
    theta = problem.init_theta(seed).clone()
    rule = server_rule_of(alg, alg.server, getattr(alg, "beta", alg.beta1), alg.beta2, alg.tau,
                          alg.v0, alg.eps_inside_sqrt, alg.bias_correction)
    ga = torch.zeros_like(theta)
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        lr = alg.eta_l * alg.lr_decay ** t
        deltas, gas, steps = [], [], []
        for j, client in enumerate(draw.clients):
            x = theta.clone()
            K = 0
            for batch in draw.payloads[j]:
                g = problem.reference_grad(x, int(client), batch)
                if alg.weight_decay and alg.wd_mode == "coupled":
                    g = g + alg.weight_decay * x
                if alg.mu:
                    g = g + alg.mu * (x - theta)
                if alg.alpha != 1:
                    g = alg.alpha * g + (1 - alg.alpha) * ga
                x_new = x - lr * g
                if alg.weight_decay and alg.wd_mode == "decoupled":
                    x_new = x_new - lr * alg.weight_decay * x
                x = x_new
                K += 1
            deltas.append(theta - x)
            gas.append((theta - x) / (lr * K))
            steps.append(K)
        if deltas:
            U = mean(deltas)
            eta = alg.eta * (alg.lr_decay ** t if alg.decay_global else 1.0)
            direction = rule.direction(U)
            theta = theta - eta * direction
            if alg.alpha != 1:
                ga = mean(gas) if alg.ga_source == "pseudo" else \
                    direction / (lr * float(np.mean(steps)))
        hist.add(theta)
    server = {"ga": ga} if alg.alpha != 1 else {}
    if rule.m is not None:
        server["m"] = rule.m
    if rule.v is not None:
        server["v"] = rule.v
    return ReferenceRun(hist.arrays(), theta, server)


def ref_scaffold(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """SCAFFOLD option II / I with the alpha-scaled correction (FedLADA spec 1.5, Eq. 26)."""
    theta = problem.init_theta(seed).clone()
    c = torch.zeros_like(theta)
    controls: dict[int, torch.Tensor] = {}
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        lr = alg.eta_l * alg.lr_decay ** t
        deltas, dcs = [], []
        for j, client in enumerate(draw.clients):
            client = int(client)
            c_i = controls.get(client, torch.zeros_like(theta))
            y = theta.clone()
            K, g_at_x = 0, None
            for batch in draw.payloads[j]:
                g = problem.reference_grad(y, client, batch)
                if alg.weight_decay and alg.wd_mode == "coupled":
                    g = g + alg.weight_decay * y
                if K == 0:
                    g_at_x = g
                y_new = y - lr * (g + alg.alpha * (c - c_i))
                if alg.weight_decay and alg.wd_mode == "decoupled":
                    y_new = y_new - lr * alg.weight_decay * y
                y = y_new
                K += 1
            if alg.control == "II":
                c_plus = c_i - c + (theta - y) / (K * lr)
            else:
                c_plus = g_at_x
            deltas.append(theta - y)
            dcs.append(c_plus - c_i)
            controls[client] = c_plus
        if deltas:
            eta = alg.eta * (alg.lr_decay ** t if alg.decay_global else 1.0)
            theta = theta - eta * mean(deltas)
            N = alg.n_clients if alg.n_clients else len(deltas)
            total = dcs[0].clone()
            for dc in dcs[1:]:
                total = total + dc
            c = c + total / N
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {"c": c},
                        {k: {"c": v} for k, v in controls.items()})


def ref_local_yogi(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """Local Yogi: every participant runs Yogi (Zaheer et al. 2018, Alg. 2) from ``m = 0``,
    ``v = v0`` for its local steps; the server averages the models (``eta = 1``)."""
    theta = problem.init_theta(seed).clone()
    b1, b2 = alg.beta1, alg.beta2
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        deltas = []
        for j, client in enumerate(draw.clients):
            x = theta.clone()
            m = torch.zeros_like(theta)
            v = torch.full_like(theta, alg.v0)
            for batch in draw.payloads[j]:
                g = problem.reference_grad(x, int(client), batch)
                m = b1 * m + (1 - b1) * g
                v = v - (1 - b2) * g * g * torch.sign(v - g * g)
                x = x - alg.eta_l * m / (torch.sqrt(v) + alg.eps)
            deltas.append(theta - x)
        if deltas:
            theta = theta - alg.eta * mean(deltas)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta)


def _mime_advance(alg):
    """The base optimizer ``(direction, new state) = U/V(g; s)`` of Mime / MimeLite, plainly."""
    b1, b2 = alg.beta1, alg.beta2

    def advance(g, s):
        m = b1 * s["m"] + (1 - b1) * g
        if alg.base == "sgdm":
            return m, {"m": m, "v": s["v"], "vhat": s["vhat"]}
        v = b2 * s["v"] + (1 - b2) * g * g
        vhat = torch.maximum(s["vhat"], v) if alg.base == "amsgrad" else s["vhat"]
        second = vhat if alg.base == "amsgrad" else v
        return m / torch.sqrt(second + alg.eps), {"m": m, "v": v, "vhat": vhat}
    return advance


_MIME_KEPT = {"sgdm": ("m",), "adam": ("m", "v"), "amsgrad": ("m", "v", "vhat")}


def ref_mimelite(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """MimeLite / MimeLite-LAMB (Fed-LAMB spec 1.6): local steps with the frozen server state."""
    theta = problem.init_theta(seed).clone()
    s = {"m": torch.zeros_like(theta), "v": torch.zeros_like(theta),
         "vhat": torch.zeros_like(theta)}
    advance = _mime_advance(alg)
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        lr = alg.eta_l * alg.lr_decay ** t
        deltas, gxs = [], []
        for j, client in enumerate(draw.clients):
            y = theta.clone()
            gx = None
            for batch in draw.payloads[j]:
                g = problem.reference_grad(y, int(client), batch)
                if gx is None:
                    gx = g
                u, _ = advance(g, s)                 # frozen: the state is not kept
                if alg.layerwise:
                    u = trust_step(alg, problem.layout, y, u)
                y = y - lr * u
            deltas.append(theta - y)
            gxs.append(gx)
        if deltas:
            theta = theta - alg.eta * mean(deltas)
            _, s = advance(mean(gxs), s)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {k: s[k] for k in _MIME_KEPT[alg.base]})


def ref_mime(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """Mime / Mime-LAMB (Karimireddy et al. Alg. 1; Fed-LAMB spec 1.6), one client at a time:
    ``c`` = mean of the participants' full gradients at ``x``; local steps
    ``y <- y - lr U(grad f_i(y; z) - grad f_i(x; z) + c; s)`` with ``s`` frozen (the trust
    ratio per layer for Mime-LAMB); ``x <- x - eta mean(x - y_i)``, ``s <- V(c, s)``."""
    theta = problem.init_theta(seed).clone()
    s = {"m": torch.zeros_like(theta), "v": torch.zeros_like(theta),
         "vhat": torch.zeros_like(theta)}
    c = torch.zeros_like(theta)
    advance = _mime_advance(alg)
    hist = History(problem, theta)
    for t, draw in rounds(problem, participation, seed, rounds_):
        if len(draw.clients) == 0:
            hist.add(theta)
            continue
        lr = alg.eta_l * alg.lr_decay ** t
        c = mean([problem.reference_full_grad(theta, int(client))
                   for client in draw.clients])
        deltas = []
        for j, client in enumerate(draw.clients):
            y = theta.clone()
            for batch in draw.payloads[j]:
                g = (problem.reference_grad(y, int(client), batch)
                     - problem.reference_grad(theta, int(client), batch) + c)
                u, _ = advance(g, s)                 # frozen: the state is not kept
                if alg.layerwise:
                    u = trust_step(alg, problem.layout, y, u)
                y = y - lr * u
            deltas.append(theta - y)
        theta = theta - alg.eta * mean(deltas)
        _, s = advance(c, s)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"c": c, **{k: s[k] for k in _MIME_KEPT[alg.base]}})

"""Sequential reference implementations of the Fed-LAMB, FedLADA and FedAda2 families.

Plain code, one client at a time, written from the papers' pseudo-code (spec sections in each
function) and sharing nothing with the batched algorithms in :mod:`sims.algorithms` except
the round's random draws (:func:`sims.core.engine.draw_round`), the problem's per-client gradient
(``problem.reference_grad``) and the algorithm object's hyperparameters. Tests hold the
batched engine to these functions in float64.

:func:`run_reference` dispatches on the algorithm's class and returns a
:class:`ReferenceRun`: per-round ``train_loss`` and ``grad_norm2`` (round 0 = the initial
model), the final model, the final server state and every client's persistent state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.engine import draw_round


@dataclass
class ReferenceRun:
    history: dict
    theta: torch.Tensor
    server: dict = field(default_factory=dict)
    clients: dict = field(default_factory=dict)     # client id -> {name: tensor}


def _evaluate(problem, theta):
    with torch.no_grad():
        return {k: float(v[0]) for k, v in problem.evaluate(theta.unsqueeze(0),
                                                            test=False).items()}


class _History:
    def __init__(self, problem, theta):
        self.problem = problem
        self.data = {k: [v] for k, v in _evaluate(problem, theta).items()}

    def add(self, theta):
        for k, v in _evaluate(self.problem, theta).items():
            self.data[k].append(v)

    def arrays(self):
        return {k: np.asarray(v) for k, v in self.data.items()}


def _rounds(problem, participation, seed, rounds):
    for t in range(rounds):
        yield t, draw_round(problem, participation, False, seed, t)


def _mean(vectors):
    total = vectors[0].clone()
    for v in vectors[1:]:
        total = total + v
    return total / len(vectors)


# ------------------------------------------------------------------------------ server rules

class _ServerRule:
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


def _server_rule_of(alg, kind, beta1, beta2, tau, v0, inside=False, bc=False):
    return _ServerRule(kind, alg.eta, beta1, beta2, tau, tau * tau if v0 is None else v0,
                       inside, bc)


# ------------------------------------------------------------------------------ FedOpt family

def ref_fedopt(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """FedAvg / FedProx / FedCM / FedAdam / FedAdam(*) / FedAdaGrad / FedYogi / Adp-Fed.

    FedLADA spec 1.2 and 1.5, Fed-LAMB SUPP Alg. 1, FedAda2 spec 1.13: ``K`` local steps of
    ``x <- x - lr (alpha (g + wd x + mu (x - x^t)) + (1 - alpha) g_a)``, then the server rule on
    ``U = mean_i (x^t - x_i)``; ``g_a = mean_i (x^t - x_i) / (lr K_i)``.
    """
    theta = problem.init_theta(seed).clone()
    rule = _server_rule_of(alg, alg.server, alg.beta1, alg.beta2, alg.tau, alg.v0,
                           alg.eps_inside_sqrt, alg.bias_correction)
    ga = torch.zeros_like(theta)
    hist = _History(problem, theta)
    for t, draw in _rounds(problem, participation, seed, rounds):
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
            U = _mean(deltas)
            eta = alg.eta * (alg.lr_decay ** t if alg.decay_global else 1.0)
            direction = rule.direction(U)
            theta = theta - eta * direction
            if alg.alpha != 1:
                ga = _mean(gas) if alg.ga_source == "pseudo" else \
                    direction / (lr * float(np.mean(steps)))
        hist.add(theta)
    server = {"ga": ga} if alg.alpha != 1 else {}
    if rule.m is not None:
        server.update(m=rule.m, v=rule.v)
    return ReferenceRun(hist.arrays(), theta, server)


def ref_scaffold(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """SCAFFOLD option II / I with the alpha-scaled correction (FedLADA spec 1.5, Eq. 26)."""
    theta = problem.init_theta(seed).clone()
    c = torch.zeros_like(theta)
    controls: dict[int, torch.Tensor] = {}
    hist = _History(problem, theta)
    for t, draw in _rounds(problem, participation, seed, rounds):
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
            theta = theta - eta * _mean(deltas)
            N = alg.n_clients if alg.n_clients else len(deltas)
            total = dcs[0].clone()
            for dc in dcs[1:]:
                total = total + dc
            c = c + total / N
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {"c": c},
                        {k: {"c": v} for k, v in controls.items()})


def ref_fedlada(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """FedLADA Alg. 3 (spec 1.4) line by line; LocalAdam is ``alpha = 1``."""
    theta = problem.init_theta(seed).clone()
    v_glob = torch.full_like(theta, alg.initial_v)
    ga = torch.zeros_like(theta)
    hist = _History(problem, theta)
    b1, b2 = alg.beta1, alg.beta2
    for t, draw in _rounds(problem, participation, seed, rounds):
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
            v_glob = _mean(vhats)
            theta = theta - eta * _mean(deltas)
            ga = _mean(gas)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"v": v_glob, **({"ga": ga} if alg.alpha != 1 else {})})


# ------------------------------------------------------------------------------ Fed-LAMB

def _trust_step(alg, layout, x, p):
    """Fed-LAMB Alg. 2 line 13 per layer: ``phi(||x_l||) (p_l + lam x_l) / ||p_l + lam x_l||``."""
    out = torch.zeros_like(x)
    for sl in layout.slices:
        w = p[sl] + alg.lam * x[sl]
        wn = float(torch.linalg.vector_norm(w))
        if wn == 0:
            continue
        if alg.phi == "update_norm":
            scale = float(torch.linalg.vector_norm(p[sl]))
        else:
            scale = float(torch.linalg.vector_norm(x[sl]))
            if alg.phi == "clip":
                scale = min(max(scale, alg.phi_min), alg.phi_max)
        out[sl] = scale * w / wn
    return out


def ref_fedlamb(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """Fed-LAMB MAIN Alg. 2 / Fed-AMS (spec 1.2, 1.3) with the decisions of
    :mod:`sims.algorithms.fed_lamb`."""
    theta = problem.init_theta(seed).clone()
    vhat_glob = torch.full_like(theta, alg.eps)
    state: dict[int, dict] = {}
    hist = _History(problem, theta)
    b1, b2 = alg.beta1, alg.beta2
    for t, draw in _rounds(problem, participation, seed, rounds):
        lr = alg.eta_l * alg.lr_decay ** t
        deltas, vs = [], []
        for j, client in enumerate(draw.clients):
            client = int(client)
            st = state.setdefault(client, {"m": torch.zeros_like(theta),
                                           "v": torch.zeros_like(theta), "n": 0,
                                           "vhat": torch.zeros_like(theta)})
            x = theta.clone()
            m = st["m"].clone() if alg.persist_m else torch.zeros_like(theta)
            v = st["v"].clone()
            n = st["n"] if alg.bias_correction == "client" else 0
            nm = n if alg.persist_m else 0
            vhat = vhat_glob.clone() if alg.vhat != "local" else torch.maximum(
                st["vhat"], torch.full_like(theta, alg.eps))
            for batch in draw.payloads[j]:
                g = problem.reference_grad(x, client, batch)
                m = b1 * m + (1 - b1) * g                                    # line 8
                v = b2 * v + (1 - b2) * g * g                                # line 10
                n += 1
                nm += 1
                if alg.bias_correction != "none":
                    m_c, v_c = m / (1 - b1 ** nm), v / (1 - b2 ** n)        # lines 9, 11
                else:
                    m_c, v_c = m, v
                if alg.vhat != "fixed":
                    vhat = torch.maximum(vhat, v_c)
                denom = torch.sqrt(vhat + alg.eps) if alg.eps_again else torch.sqrt(vhat)
                p = m_c / denom                                              # line 12
                if alg.layerwise:
                    step = _trust_step(alg, problem.layout, x, p)           # line 13
                else:
                    step = p
                x = x - lr * step
            v_sent = v / (1 - b2 ** n) if alg.bias_correction != "none" else v
            deltas.append(theta - x)
            vs.append(v_sent)
            st.update(m=m, v=v, n=n, vhat=vhat)
        if deltas:
            theta = theta - alg.eta * _mean(deltas)                          # line 17
            if alg.vhat != "local":
                vhat_glob = torch.maximum(vhat_glob, _mean(vs))
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"vhat": vhat_glob} if alg.vhat != "local" else {}, state)


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


def ref_mimelite(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """MimeLite / MimeLite-LAMB (Fed-LAMB spec 1.6): local steps with the frozen server state."""
    theta = problem.init_theta(seed).clone()
    s = {"m": torch.zeros_like(theta), "v": torch.zeros_like(theta),
         "vhat": torch.zeros_like(theta)}
    advance = _mime_advance(alg)
    hist = _History(problem, theta)
    for t, draw in _rounds(problem, participation, seed, rounds):
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
                    u = _trust_step(alg, problem.layout, y, u)
                y = y - lr * u
            deltas.append(theta - y)
            gxs.append(gx)
        if deltas:
            theta = theta - alg.eta * _mean(deltas)
            _, s = advance(_mean(gxs), s)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {k: s[k] for k in _MIME_KEPT[alg.base]})


def ref_mime(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """Mime / Mime-LAMB (Karimireddy et al. Alg. 1; Fed-LAMB spec 1.6), one client at a time:
    ``c`` = mean of the participants' full gradients at ``x``; local steps
    ``y <- y - lr U(grad f_i(y; z) - grad f_i(x; z) + c; s)`` with ``s`` frozen (the trust
    ratio per layer for Mime-LAMB); ``x <- x - eta mean(x - y_i)``, ``s <- V(c, s)``."""
    theta = problem.init_theta(seed).clone()
    s = {"m": torch.zeros_like(theta), "v": torch.zeros_like(theta),
         "vhat": torch.zeros_like(theta)}
    c = torch.zeros_like(theta)
    advance = _mime_advance(alg)
    hist = _History(problem, theta)
    for t, draw in _rounds(problem, participation, seed, rounds):
        if len(draw.clients) == 0:
            hist.add(theta)
            continue
        lr = alg.eta_l * alg.lr_decay ** t
        c = _mean([problem.reference_full_grad(theta, int(client))
                   for client in draw.clients])
        deltas = []
        for j, client in enumerate(draw.clients):
            y = theta.clone()
            for batch in draw.payloads[j]:
                g = (problem.reference_grad(y, int(client), batch)
                     - problem.reference_grad(theta, int(client), batch) + c)
                u, _ = advance(g, s)                 # frozen: the state is not kept
                if alg.layerwise:
                    u = _trust_step(alg, problem.layout, y, u)
                y = y - lr * u
            deltas.append(theta - y)
        theta = theta - alg.eta * _mean(deltas)
        _, s = advance(c, s)
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"c": c, **{k: s[k] for k in _MIME_KEPT[alg.base]}})


# ------------------------------------------------------------------------------ FedAda2

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


def ref_joint_adaptive(problem, alg, participation, rounds, seed) -> ReferenceRun:
    """FedAda2 Alg. 2, 5, 8, 10 and the joint-adaptive baselines (spec 1.3-1.13)."""
    theta = problem.init_theta(seed).clone()
    rule = _server_rule_of(alg, alg.server, alg.server_beta1, alg.server_beta2, alg.tau,
                           alg.v0, False, alg.server_bias_correction)
    rule_v = torch.full_like(theta, alg.tau ** 2 if alg.v0 is None else alg.v0)
    members = getattr(alg, "members", None)          # Alg. 5: strategy i mod p
    hist = _History(problem, theta)
    for t, draw in _rounds(problem, participation, seed, rounds):
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
            theta = theta - alg.eta * rule.direction(_mean(deltas))
            if rule.v is not None:
                rule_v = rule.v
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta, {"v": rule_v})


def run_reference(problem, alg, participation, rounds: int, seed: int) -> ReferenceRun:
    """The reference run of any algorithm of the three families (by class)."""
    from ..algorithms.adaptive import FedOpt
    from ..algorithms.fed_lamb import FedLAMB, Mime, MimeLite
    from ..algorithms.fedada2 import JointAdaptive
    from ..algorithms.fedlada import FedLADA, Scaffold
    for cls, fn in ((FedLAMB, ref_fedlamb), (Mime, ref_mime), (MimeLite, ref_mimelite),
                    (FedLADA, ref_fedlada), (Scaffold, ref_scaffold),
                    (JointAdaptive, ref_joint_adaptive), (FedOpt, ref_fedopt)):
        if isinstance(alg, cls):
            return fn(problem, alg, participation, rounds, seed)
    raise TypeError(f"no sequential reference for {type(alg).__name__}")

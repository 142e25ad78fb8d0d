"""Sequential reference of Fed-LAMB and Fed-AMS (:mod:`sims.algorithms.fed_lamb`), MAIN Alg. 2
line by line."""
from __future__ import annotations

import torch

from .common import History, ReferenceRun, mean, rounds, trust_step


def ref_fedlamb(problem, alg, participation, rounds_, seed) -> ReferenceRun:
    """Fed-LAMB MAIN Alg. 2 / Fed-AMS (spec 1.2, 1.3) with the decisions of
    :mod:`sims.algorithms.fed_lamb`."""
    theta = problem.init_theta(seed).clone()
    vhat_glob = torch.full_like(theta, alg.eps)
    state: dict[int, dict] = {}
    hist = History(problem, theta)
    b1, b2 = alg.beta1, alg.beta2
    for t, draw in rounds(problem, participation, seed, rounds_):
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
                    step = trust_step(alg, problem.layout, x, p)           # line 13
                else:
                    step = p
                x = x - lr * step
            v_sent = v / (1 - b2 ** n) if alg.bias_correction != "none" else v
            deltas.append(theta - x)
            vs.append(v_sent)
            st.update(m=m, v=v, n=n, vhat=vhat)
        if deltas:
            theta = theta - alg.eta * mean(deltas)                          # line 17
            if alg.vhat != "local":
                vhat_glob = torch.maximum(vhat_glob, mean(vs))
        hist.add(theta)
    return ReferenceRun(hist.arrays(), theta,
                        {"vhat": vhat_glob} if alg.vhat != "local" else {}, state)

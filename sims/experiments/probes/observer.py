"""The probe: an engine observer that measures the theorems' constants on a live run.

``probe = Probe(every=5)``; ``engine.run(..., observers=probe.observers())``. Every
``every`` rounds (and after the last) it measures at each replica's server model ``theta``
(the model the next round broadcasts); a companion :class:`StalenessTracker` runs every
round (bookkeeping only). All values are ordinary metrics ``[R]`` (so they land in the tidy
results tables with the run's provenance); the probe never changes the run: it draws from
its own generator ``default_rng([seed, t, SALT])``, writes no state, and restores torch's
global generator after each call. A run without the probe executes no probe code.

Metrics (``*`` = over this call's sampled clients ``S``, ``n_clients_sampled`` per replica):

===========================  ===================================================================
``probe_L_hvp``              ``max_i ||hess f_i(theta)||_2`` by Lanczos (``hvp_iters`` steps)
                             over ``hvp_clients`` random clients of ``S``
``probe_L_secant``           ``||grad f(theta) - grad f(theta')|| / ||theta - theta'||``,
                             ``theta'`` = the model at the previous probe call
``probe_L_secant_client``    the same for each ``f_i``, max over ``S``
``probe_sigma2_max/_mean``   ``sigma_i^2 = mean_j ||g_i(theta; xi_j) - grad f_i(theta)||^2``
                             over ``minibatches`` draws of the client's own local-step
                             minibatch (or noise) law, max / mean over ``S``
``probe_sigma_g2_mean``      ``(1/n) sum_i ||grad f_i - grad f||^2`` over *all* clients
                             (Fed-EF A2(iii))
``probe_sigma_g2_max``       ``max_{i in S} ||grad f_i - grad f||^2``
``probe_grad_norm2``         ``||grad f(theta)||^2`` (all clients)
``probe_G_full``             ``max_i ||grad f_i(theta)||`` over all clients
``probe_G``                  max of ``probe_G_full`` and of ``||g||`` over the minibatch
                             gradients drawn (Fed-EF A4 bounds stochastic gradients)
``probe_G_inf``              the same for the largest coordinate ``|g_j|`` (FedLADA A3.3,
                             FedAda2 A2)
``probe_qC2_max/_mean``      ``||C(x_i) - x_i||^2 / ||x_i||^2`` on the compressor inputs a
                             dry run of the next round produces for the clients of ``S``
``probe_qA2``                ``||mean C(x_i) - mean x_i||^2 / ||mean x_i||^2`` over a random
                             subset of ``S`` as large as the round's participant count (the
                             same dry run; the engine's ``qA2`` is the round's real one)
``probe_tail_index``         Hill's estimate from the top ``k = round(sqrt(M))`` of the ``M``
                             pooled ``|noise coordinates|`` drawn for ``sigma^2``
``probe_time``               seconds this call took
``probe_staleness_max``      (tracker, every round) max over this round's participants of the
                             rounds since their error was last updated
``probe_error_age_max``      (tracker) the oldest stored client state after the round
===========================  ===================================================================
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ...core.context import RoundContext
from .estimators import (ProbeError, chunk_rows, client_full_grads, hill, hill_k,
                         hvp_operator, lanczos_extremes)

SALT = 0x9E0B5  # separates the probe's random stream from the engine's rng([seed, t])


class StalenessTracker:
    """Every round: how stale the participants' errors were (their previous participation).

    The engine updates ``last_round`` for this round's participants before observers run, so
    the staleness of the round's participants needs the previous values; this tracker keeps
    them (one ``[R, n]`` integer array), which is why it must see every round."""

    every = 1

    def __init__(self):
        self._last = None
        self._t = None

    def __call__(self, view) -> dict:
        t = view.t - 1                       # this round's 0-based index
        R, n = len(view.seeds), view.problem.n_clients
        if self._last is None or t == 0 or self._t is None or t != self._t + 1 \
                or self._last.shape != (R, n):
            self._last = np.full((R, n), -1, dtype=np.int64)
        self._t = t
        stale_max = np.full(R, math.nan)
        for r, draw in enumerate(view.draws):
            last = self._last[r, draw.clients]
            seen = last[last >= 0]
            if len(seen):
                stale_max[r] = t - seen.min()
            self._last[r, draw.clients] = t
        lr = view.last_round.cpu().numpy()
        age = np.where(lr >= 0, t - lr, -1).max(1).astype(float)
        age[age < 0] = math.nan
        return {"probe_staleness_max": stale_max, "probe_error_age_max": age}

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the last participation round per client, and the round."""
        return {"last": None if self._last is None else torch.from_numpy(self._last.copy()),
                "t": self._t}

    def load_state_dict(self, state: dict) -> None:
        self._last = None if state["last"] is None else state["last"].numpy().copy()
        self._t = state["t"]


@dataclass
class Probe:
    """Opt-in measurement of the assumption constants (see the module docstring)."""

    every: int = 5
    n_clients_sampled: int | None = 16   # clients per replica for the per-client estimates
    minibatches: int = 8                 # minibatch (noise) draws per sampled client
    hvp_iters: int = 20                  # Lanczos steps for the Hessian norm (0: off)
    hvp_clients: int | None = 4          # of the sampled clients, how many get Lanczos
    hill_coords: int = 4096              # coordinates per noise draw pooled for Hill
    secant: bool = True
    compression: bool = True             # dry-run q_C / q_A
    lanczos_budget_bytes: int = 256 * 1024 * 1024
    _state: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        if int(self.every) < 1:
            raise ProbeError(f"probe every must be >= 1, got {self.every}")
        if self.n_clients_sampled is not None and int(self.n_clients_sampled) < 1:
            raise ProbeError(f"n_clients_sampled must be >= 1 or None (all), got "
                             f"{self.n_clients_sampled}")
        if int(self.minibatches) < 2:
            raise ProbeError(f"minibatches must be >= 2, got {self.minibatches}")
        if int(self.hvp_iters) < 0:
            raise ProbeError(f"hvp_iters must be >= 0, got {self.hvp_iters}")
        if self.hvp_clients is not None and int(self.hvp_clients) < 1:
            raise ProbeError(f"hvp_clients must be >= 1 or None, got {self.hvp_clients}")
        if int(self.hill_coords) < 1:
            raise ProbeError(f"hill_coords must be >= 1, got {self.hill_coords}")
        self.tracker = StalenessTracker()

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the secants' previous model and gradient (and their round
        and seeds); every other measurement is drawn afresh from ``rng([seed, t, SALT])``."""
        return dict(self._state)

    def load_state_dict(self, state: dict) -> None:
        self._state.clear()
        self._state.update(state)

    def observers(self) -> list:
        """What to pass as ``engine.run(..., observers=...)``: the tracker and the probe."""
        return [self.tracker, self]

    def describe(self) -> dict:
        return {"every": self.every, "n_clients_sampled": self.n_clients_sampled,
                "minibatches": self.minibatches, "hvp_iters": self.hvp_iters,
                "hvp_clients": self.hvp_clients, "hill_coords": self.hill_coords,
                "secant": self.secant, "compression": self.compression,
                "hill_k": "round(sqrt(M)), M = pooled noise coordinates",
                "zero_noise_tol": "256 ulp of ||grad f_i||", "salt": SALT}

    # ------------------------------------------------------------------ entry point
    def __call__(self, view) -> dict:
        started = time.perf_counter()
        cpu_state = torch.get_rng_state()
        try:
            out = self._measure(view)
        finally:
            torch.set_rng_state(cpu_state)
        out["probe_time"] = np.full(len(view.seeds), time.perf_counter() - started)
        return out

    # ------------------------------------------------------------------ measurement
    def _measure(self, view) -> dict:
        problem, theta = view.problem, view.server["theta"]
        R, n = theta.shape[0], problem.n_clients
        dev = theta.device
        key = tuple(view.seeds)
        st = self._state
        if st.get("key") != key or st.get("t", -1) >= view.t:
            st.clear()
            st["key"] = key
        rngs = [np.random.default_rng([int(s), int(view.t), SALT]) for s in view.seeds]
        s = n if self.n_clients_sampled is None else min(n, int(self.n_clients_sampled))
        sample = np.stack([np.sort(g.choice(n, s, replace=False)) if s < n else np.arange(n)
                           for g in rngs])                                        # [R, s]
        rep_s = torch.as_tensor(np.repeat(np.arange(R), s), device=dev)
        cli_s = torch.as_tensor(sample.reshape(-1), device=dev)
        out = {}

        # 1. every client's full gradient: grad f, sigma_g^2 (mean form), G over all clients
        gbar, g_s, extra = self._full_gradients(problem, theta, sample)
        out.update(extra)
        dev_s = ((g_s - gbar[rep_s].to(g_s.dtype)) ** 2).sum(-1).view(R, s)
        out["probe_sigma_g2_max"] = dev_s.max(1).values

        # 2. minibatch draws: sigma_i^2, G of stochastic gradients, Hill tail index
        out.update(self._noise(problem, theta, rngs, sample, g_s, out))

        # 3. smoothness: Lanczos on each sampled client's Hessian, secants along the path
        h = s if self.hvp_clients is None else min(s, int(self.hvp_clients))
        pick = np.stack([np.sort(np.random.default_rng([int(sd), int(view.t), SALT, 2])
                                 .permutation(s)[:h]) for sd in view.seeds])
        pick = torch.as_tensor((np.arange(R)[:, None] * s + pick).reshape(-1), device=dev)
        out["probe_L_hvp"] = self._lanczos(problem, theta, rep_s[pick], cli_s[pick], rngs,
                                           R, h)
        out.update(self._secants(problem, theta, gbar, rep_s, cli_s, g_s, R, s, view.t))

        # 4. compression: a dry run of the next round for the sampled clients
        out.update(self._compression(view, rngs, sample, rep_s, cli_s, R, s))
        st["t"] = view.t
        return out

    def _full_gradients(self, problem, theta, sample):
        R, d = theta.shape
        n, s = problem.n_clients, sample.shape[1]
        dev = theta.device
        rep = np.repeat(np.arange(R), n)
        cli = np.tile(np.arange(n), R)
        pos = np.full((R, n), -1)
        for r in range(R):
            pos[r, sample[r]] = np.arange(s)
        gsum = torch.zeros((R, d), dtype=torch.float64, device=dev)
        sq = torch.zeros(R, dtype=torch.float64, device=dev)
        g_full = torch.zeros(R, dtype=theta.dtype, device=dev)
        g_inf = torch.zeros(R, dtype=theta.dtype, device=dev)
        g_s = torch.empty((R * s, d), dtype=theta.dtype, device=dev)
        step = chunk_rows(d, theta.element_size(), 2)
        for lo in range(0, len(rep), step):
            rr = torch.as_tensor(rep[lo:lo + step], device=dev)
            cc = torch.as_tensor(cli[lo:lo + step], device=dev)
            g = client_full_grads(problem, theta[rr], cc)
            gsum.index_add_(0, rr, g.double())
            norms2 = (g.double() ** 2).sum(-1)
            sq.index_add_(0, rr, norms2)
            g_full = g_full.scatter_reduce(0, rr, norms2.sqrt().to(theta.dtype), "amax")
            g_inf = g_inf.scatter_reduce(0, rr, g.abs().amax(-1), "amax")
            keep = pos[rep[lo:lo + step], cli[lo:lo + step]]
            sel = np.flatnonzero(keep >= 0)
            if len(sel):
                dest = torch.as_tensor(rep[lo:lo + step][sel] * s + keep[sel], device=dev)
                g_s[dest] = g[torch.as_tensor(sel, device=dev)]
        gbar = gsum / n
        gn2 = (gbar ** 2).sum(-1)
        return gbar, g_s, {"probe_sigma_g2_mean": (sq / n - gn2).clamp_min(0),
                           "probe_grad_norm2": gn2, "probe_G_full": g_full,
                           "probe_G_inf_full": g_inf}

    def _draw_rows(self, problem, rng, client: int, count: int) -> np.ndarray:
        rows, have = [], 0
        while have < count:
            plan = np.asarray(problem.plan_client(rng, client))
            rows.append(plan)
            have += len(plan)
        return np.concatenate(rows)[:count]

    def _noise(self, problem, theta, rngs, sample, g_s, out):
        R, d = theta.shape
        s, N = sample.shape[1], int(self.minibatches)
        dev, dtype = theta.device, theta.dtype
        payload = np.stack([self._draw_rows(problem, rngs[r], int(c), N)
                            for r in range(R) for c in sample[r]])         # [R*s, N, ...]
        rep_of = np.repeat(np.arange(R), s)                                # per sampled client
        cli_of = sample.reshape(-1)
        coords = min(d, int(self.hill_coords))
        pick = None
        if coords < d:   # one random coordinate subset per call, shared by every draw
            pick = torch.as_tensor(np.sort(rngs[0].choice(d, coords, replace=False)),
                                   device=dev)
        k = hill_k(s * N * coords)
        tol = 256 * torch.finfo(dtype).eps     # below: roundoff (the batch was all the data)
        sq = torch.zeros(R * s, dtype=torch.float64, device=dev)
        g_max = out["probe_G_full"].clone()
        g_inf = out.pop("probe_G_inf_full").clone()
        ref_norm = torch.linalg.vector_norm(g_s, dim=-1)
        tops = [[] for _ in range(R)]
        step = max(1, chunk_rows(d, theta.element_size(), 3) // N)       # clients per chunk
        for lo in range(0, R * s, step):
            hi = min(R * s, lo + step)
            b = hi - lo
            rr = torch.as_tensor(np.repeat(rep_of[lo:hi], N), device=dev)
            pay = torch.as_tensor(payload[lo:hi].reshape(b * N, *payload.shape[2:]),
                                  device=dev)
            if pay.is_floating_point():
                pay = pay.to(dtype)
            cl = torch.as_tensor(np.repeat(cli_of[lo:hi], N), device=dev)
            g = problem.stoch_grad(theta[rr], cl, pay)                        # [b*N, d]
            noise = g.view(b, N, d) - g_s[lo:hi].unsqueeze(1)
            nn2 = (noise * noise).sum(-1, dtype=torch.float64)                # [b, N]
            real = nn2.sqrt() > tol * ref_norm[lo:hi, None].double()
            sq[lo:hi] = torch.where(real, nn2, torch.zeros_like(nn2)).sum(1)
            g_max = g_max.scatter_reduce(0, rr, torch.linalg.vector_norm(g, dim=-1), "amax")
            g_inf = g_inf.scatter_reduce(0, rr, g.abs().amax(-1), "amax")
            if k and bool(real.any()):
                pooled = noise if pick is None else noise[..., pick]
                for r in np.unique(rep_of[lo:hi]):
                    keep = torch.as_tensor(rep_of[lo:hi] == r, device=dev)[:, None] & real
                    vals = pooled[keep].abs().reshape(-1)
                    if vals.numel():
                        tops[r].append(vals.topk(min(k + 1, vals.numel())).values)
        sigma2 = (sq / N).view(R, s)
        tail = np.full(R, math.nan)
        if k:
            for r in range(R):
                if not tops[r]:
                    continue      # no noise at all (every draw was the client's whole data)
                top = np.sort(torch.cat(tops[r]).double().cpu().numpy())[::-1]
                if len(top) > k and top[k] > 0:
                    tail[r] = hill(top[: k + 1], k)
        return {"probe_sigma2_max": sigma2.max(1).values, "probe_sigma2_mean": sigma2.mean(1),
                "probe_G": g_max, "probe_G_inf": g_inf, "probe_tail_index": tail}

    def _lanczos(self, problem, theta, rep_s, cli_s, rngs, R, s):
        out = torch.full((R,), math.nan, dtype=torch.float64)
        bind = hvp_operator(problem) if self.hvp_iters else None
        if bind is None:
            return out
        d = theta.shape[1]
        seed = int(rngs[0].integers(2 ** 62))
        gen = torch.Generator(device="cpu").manual_seed(seed)
        v0 = torch.randn(len(rep_s), d, generator=gen, dtype=torch.float64).to(theta)
        per_row = (self.hvp_iters + 6) * d * theta.element_size()
        step = max(1, int(self.lanczos_budget_bytes // per_row))
        norms = torch.empty(len(rep_s), dtype=torch.float64)
        for lo in range(0, len(rep_s), step):
            th = theta[rep_s[lo:lo + step]]
            matvec = bind(th, cli_s[lo:lo + step])
            lo_eig, hi_eig = lanczos_extremes(matvec, v0[lo:lo + step], int(self.hvp_iters))
            norms[lo:lo + step] = torch.maximum(lo_eig.abs(), hi_eig.abs()).double().cpu()
        return norms.view(R, s).amax(1)

    def _secants(self, problem, theta, gbar, rep_s, cli_s, g_s, R, s, t):
        st = self._state
        out = {"probe_L_secant": np.full(R, math.nan),
               "probe_L_secant_client": np.full(R, math.nan)}
        if self.secant and "theta" in st:
            prev, gprev = st["theta"], st["gbar"]
            step = (theta - prev).double().norm(dim=-1)
            moved = step > 0
            ratio = (gbar - gprev).norm(dim=-1) / step.clamp_min(1e-300)
            out["probe_L_secant"] = torch.where(moved, ratio, torch.nan)
            g_prev = client_full_grads(problem, prev[rep_s], cli_s)
            num = (g_s - g_prev).double().norm(dim=-1).view(R, s)
            out["probe_L_secant_client"] = torch.where(
                moved, (num / step.clamp_min(1e-300)[:, None]).amax(1), torch.nan)
        if self.secant:
            st["theta"], st["gbar"] = theta.clone(), gbar.clone()
        return out

    def _compression(self, view, rngs, sample, rep_s, cli_s, R, s):
        nan = np.full(R, math.nan)
        out = {"probe_qC2_max": nan, "probe_qC2_mean": nan, "probe_qA2": nan.copy()}
        alg, problem = view.algorithm, view.problem
        if not self.compression or getattr(alg, "compressor", None) is None:
            return out                          # nothing compresses: q_C, q_A undefined
        from ...core.engine import stack_payloads
        theta = view.server["theta"]
        dev, dtype, d = theta.device, theta.dtype, theta.shape[1]
        layout = problem.layout
        plans = [problem.plan_client(rngs[r], int(c)) for r in range(R) for c in sample[r]]
        uni = None
        if getattr(alg, "needs_uniforms", False):
            uni = np.concatenate([rngs[r].random((s, d)) for r in range(R)])
        bcast = alg.broadcast(view.server)
        sum_msg = torch.zeros((R, d), dtype=torch.float64, device=dev)
        sum_in = torch.zeros((R, d), dtype=torch.float64, device=dev)
        # q_A over as many of the sampled clients as this round had participants (a random
        # subset, from a stream of its own so the other estimates do not move)
        in_qa = np.zeros(R * s, dtype=bool)
        for r in range(R):
            m_r = max(1, min(s, len(view.draws[r].clients)))
            own = np.random.default_rng([int(view.seeds[r]), int(view.t), SALT, 1])
            pick = own.permutation(s)
            in_qa[r * s + pick[:m_r]] = True
        in_qa_t = torch.as_tensor(in_qa, device=dev)
        qc2 = torch.empty(R * s, dtype=torch.float64, device=dev)
        step = chunk_rows(d, theta.element_size(), 8)
        for lo in range(0, R * s, step):
            hi = min(R * s, lo + step)
            rep, cli = rep_s[lo:hi], cli_s[lo:hi]
            b_cast = {k: v[rep] for k, v in bcast.items()}
            c_state = {k: v[rep, cli] for k, v in view.client_state.items()}
            payload, mask = stack_payloads(problem, plans[lo:hi], dev, dtype)
            u = None if uni is None else torch.as_tensor(uni[lo:hi], device=dev, dtype=dtype)
            ctx = RoundContext(view.t, layout, rep, cli, view.last_round[rep, cli], u)
            start = b_cast["theta"]
            lstate = alg.local_start(b_cast, c_state, ctx)
            end = None
            rule, lr = alg.local_rule_at(ctx)
            if len(rule) == 0 and hasattr(problem, "local_sgd"):     # plain local SGD
                end = problem.local_sgd(start, cli, payload, lr)
            th = start.clone() if end is None else end
            for k in range(payload.shape[1] if end is None else 0):
                g = problem.stoch_grad(th, cli, payload[:, k])
                m = mask[:, k]
                th, lstate = alg.local_step(th, g, lstate, b_cast, c_state,
                                            None if bool(m.all()) else m, ctx)
            msg, _, aux = alg.client_message(start - th, lstate, c_state, ctx)
            x = aux.get("compress_in")
            if x is None:
                x = start - th        # no error feedback: the message is C(delta)
            err = ((msg - x).double() ** 2).sum(-1)
            qc2[lo:hi] = err / (x.double() ** 2).sum(-1).clamp_min(1e-300)
            w = in_qa_t[lo:hi].to(torch.float64)[:, None]
            sum_msg.index_add_(0, rep, msg.double() * w)
            sum_in.index_add_(0, rep, x.double() * w)
        q = qc2.view(R, s)
        qa2 = ((sum_msg - sum_in) ** 2).sum(-1) / (sum_in ** 2).sum(-1).clamp_min(1e-300)
        return {"probe_qC2_max": q.amax(1), "probe_qC2_mean": q.mean(1), "probe_qA2": qa2}

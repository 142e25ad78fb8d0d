"""The round engine: client sampling, batched client execution, server updates, metrics.

What a client computes is the algorithm's business (:mod:`sims.algorithms.base`); how the
clients are executed is the engine's. All participating clients of all replicas (independent
seeds of one configuration) run together as one batch of flat parameter vectors, split in
chunks of at most ``max_batch`` clients to bound memory. :mod:`sims.reference` runs the same
rounds one client at a time with plain code; tests hold this path to it in float64.

Execution: once per run the engine asks :func:`sims.accel.executor` for the run's executor
(the readable rules, or fast forms planned per rule on the CPU) and hands it to every hook
as ``ctx.run``. The engine owns the buffers a local step writes: ``theta`` is the chunk's
own copy of the server models, and from a round's second local step on the local state is
what the previous step returned (``ctx.owned``); the first step's state is the algorithm's
``local_start``, which a step never overwrites.

Randomness: round ``t`` of the replica with seed ``s`` draws everything it needs (the
participants, every participant's minibatches or noise, a stochastic compressor's uniforms)
from ``numpy.random.default_rng([s, t])`` in a fixed order (:func:`draw_round`), so a run is
reproducible from its seed, independent of batching, and two configurations that share a
seed see the same participants and data (used to branch Fed-EF Fig. 9's restarting run).

Divergence: a replica is recorded as diverged (``RunOutput.diverged_at[r]``: the first round
at which it was seen) when its server parameters become non-finite (checked every round), or
when its training loss at an evaluation round is non-finite or exceeds ``blowup`` times
``max(1, |its loss at round 0|)`` (default ``BLOWUP = 1e6``). The run stops early once every
replica has diverged.

Checkpoints: ``checkpoint=Checkpointer(...)`` (:mod:`sims.store.checkpoint`) saves the run's state
every so often and resumes from it; the resumed output equals the uninterrupted one.
"""
from __future__ import annotations

import math
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import accel
from ..store import checkpoint as _ckpt
from . import malloc as _malloc
from .batching import plan_chunks, replica_runs, start_minus, start_rows
from .context import RoundContext
from .participation import Participation


@dataclass
class RoundDraw:
    clients: np.ndarray
    payloads: list[np.ndarray]
    uniforms: np.ndarray | None



BLOWUP = 1e6      # a training loss above BLOWUP * max(1, |initial loss|) counts as diverged


def draw_round(problem, participation: Participation, needs_uniforms: bool, seed: int,
               t: int) -> RoundDraw:
    """All randomness of round ``t`` for the replica with ``seed`` (shared by both paths)."""
    rng = np.random.default_rng([seed, t])
    clients = participation.sample(rng, problem.n_clients)
    payloads = [problem.plan_client(rng, int(c)) for c in clients]
    uniforms = rng.random((len(clients), problem.d)) if needs_uniforms else None
    return RoundDraw(clients, payloads, uniforms)


@dataclass
class RunOutput:
    """Per-replica metric curves and what the run drew.

    ``metrics[name]`` is an array ``[R, len(rounds[name])]``; ``rounds[name]`` the round
    numbers (0 = the initial model, ``t`` = after ``t`` rounds).
    """
    seeds: list[int]
    metrics: dict[str, np.ndarray]
    rounds: dict[str, np.ndarray]
    participants: list[list[np.ndarray]]          # [replica][round] -> client ids
    staleness: list[np.ndarray]                   # [replica] -> rounds since last update
    diverged_at: list[int | None]
    server: dict = field(repr=False, default_factory=dict)
    client_state: dict = field(repr=False, default_factory=dict)
    wall_time: float = 0.0
    forms: dict = field(default_factory=dict)    # fast forms taken (sims.accel): name -> count


@dataclass
class RoundView:
    """What an observer sees after round ``t`` (``t`` rounds done): the problem, the
    algorithm, the server state (``server["theta"]`` is ``[R, d]``), the per-client state
    ``[R, n, ...]``, the round's draws per replica, each client's last round (``[R, n]``,
    this round's participants already set to ``t - 1``), ``last_round_before`` (the same as
    it was before this round's update) and ``server_metrics`` (what ``server_step`` returned
    this round). At ``t = 0`` (observers with ``at_start = True``): no draws, both
    last-round tensors all -1, no server metrics."""
    t: int
    problem: object
    algorithm: object
    server: dict
    client_state: dict
    draws: list
    last_round: torch.Tensor
    seeds: list
    server_metrics: dict = field(default_factory=dict)
    last_round_before: torch.Tensor | None = None


class _Curves:
    def __init__(self, n_replicas: int):
        self.values: dict[str, list] = {}
        self.rounds: dict[str, list] = {}
        self.R = n_replicas

    def add(self, t: int, metrics: dict):
        for name, val in metrics.items():
            val = val.detach().double().cpu().numpy() if torch.is_tensor(val) else np.asarray(val)
            self.values.setdefault(name, []).append(np.broadcast_to(val, (self.R,)).astype(float))
            self.rounds.setdefault(name, []).append(t)

    def arrays(self):
        return ({k: np.stack(v, 1) for k, v in self.values.items()},
                {k: np.asarray(v) for k, v in self.rounds.items()})


def _alloc_client_state(spec: dict, R: int, n: int, d: int, like: torch.Tensor) -> dict:
    out = {}
    for name, kind in spec.items():
        shape = (R, n, d) if kind == "vector" else (R, n)
        out[name] = torch.zeros(shape, dtype=like.dtype, device=like.device)
    return out


def stack_payloads(problem, payloads: list[np.ndarray], device, dtype):
    """Pad each client's ``[K_i, ...]`` plan to ``[b, K_max, ...]`` and build the step mask."""
    steps = np.array([len(p) for p in payloads])
    k_max = int(steps.max())
    tail = payloads[0].shape[1:]
    out = np.full((len(payloads), k_max, *tail), problem.pad_value, dtype=payloads[0].dtype)
    for j, p in enumerate(payloads):
        out[j, : len(p)] = p
    payload = torch.as_tensor(out, device=device)
    if payload.is_floating_point():
        payload = payload.to(dtype)
    mask = torch.as_tensor(np.arange(k_max)[None, :] < steps[:, None], device=device)
    return payload, mask


def run(problem, algorithm, participation: Participation, rounds: int, seeds, *,
        eval_every: int = 1, eval_test: bool = True, max_batch: int | None = None,
        fused: bool = True, progress=None, observers=(), blowup: float = BLOWUP,
        checkpoint=None) -> RunOutput:
    """Run ``rounds`` rounds of ``algorithm`` on ``problem`` for every seed, batched.

    With ``fused`` (default), a local round of SGD, plain or with linear terms (weight
    decay, proximal term, SCAFFOLD / FedCM corrections), runs gradient and update fused on a
    problem that offers it (``local_sgd_delta``, ``local_sgd_affine``; for stacks of Linear
    layers :func:`sims.problems.linear_stack.linear_stack_sgd_delta`), where the run's
    executor plans it (:mod:`sims.accel`); ``fused=False`` always steps through
    ``stoch_grad`` and the algorithm's ``local_step``.
    ``observers`` are callables ``obs(view: RoundView) -> dict[name, values[R]]`` run every
    ``obs.every`` rounds (default 1) and after the last, and once at ``t = 0`` before the
    first round when ``obs.at_start`` is true (default false); their values become metrics
    (an observer that is not passed costs nothing).
    An algorithm with ``needs_round_gradient`` gets each replica's mean full local gradient
    of the round's participants before the broadcast (``round_gradient`` hook), one with
    ``needs_anchor_grad`` each step's minibatch gradient at the start model as well
    (:mod:`sims.algorithms.base`); a problem may compute these together
    (``stoch_grad_pair``, and ``full_grad_sum`` per replica, or None to decline:
    :class:`sims.problems.neural.NeuralProblem`).
    Participants run in chunks of at most ``max_batch`` clients (default: as many as keep a
    ``[chunk, d]`` tensor under 32 MiB, see :mod:`sims.core.malloc`), grouped by their number of
    local steps where clients differ in size (:func:`sims.core.batching.plan_chunks`).
    The server models are evaluated every ``eval_every`` rounds and after the last one
    (``eval_every=0``: never). ``progress`` is called as ``progress(t)`` after each round.
    ``blowup``: the divergence threshold on the training loss (module docstring).
    ``checkpoint``: a :class:`sims.store.checkpoint.Checkpointer`; the run resumes from its saved
    state when there is one (observers then need ``state_dict``/``load_state_dict``).
    """
    _malloc.tune_for_library()      # process-wide: only when asked (sims.core.malloc)
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0 (0: no evaluation), got {eval_every}")
    participation.check(problem.n_clients)
    if hasattr(algorithm, "check_population"):   # e.g. a DP wrapper's sampling rate = m / N
        algorithm.check_population(participation, problem.n_clients, rounds)
    seeds = [int(s) for s in seeds]
    R, n, d, layout = len(seeds), problem.n_clients, problem.d, problem.layout
    started = time.perf_counter()
    theta0 = torch.stack([problem.init_theta(s) for s in seeds])
    device, dtype = theta0.device, theta0.dtype
    if max_batch is None:  # keep a [chunk, d] tensor under glibc's mmap threshold
        max_batch = int(min(4096, max(8, _malloc.CHUNK_BYTES // (d * theta0.element_size()))))
    executor = accel.executor(problem, device)       # how the rules run: chosen once
    server = algorithm.init_server(theta0)
    cstate = _alloc_client_state(algorithm.client_state_spec(), R, n, d, theta0)
    last_round = torch.full((R, n), -1, dtype=torch.long, device=device)
    up_bits, down_bits = algorithm.uplink_bits(layout), algorithm.downlink_bits(layout)
    curves = _Curves(R)
    participants = [[] for _ in range(R)]
    staleness = [[] for _ in range(R)]
    diverged_at: list[int | None] = [None] * R
    cum_up = np.zeros(R)
    cum_down = np.zeros(R)
    loss0 = None

    def evaluate(t):
        nonlocal loss0
        with torch.no_grad():
            metrics = problem.evaluate(server["theta"], test=eval_test)
        curves.add(t, metrics)
        if "train_loss" in metrics:
            loss = np.broadcast_to(_numpy(metrics["train_loss"]), (R,))
            if loss0 is None:
                loss0 = np.maximum(1.0, np.abs(np.nan_to_num(loss, nan=0.0, posinf=0.0)))
            bad = ~np.isfinite(loss) | (loss > blowup * loss0)
            for r in np.flatnonzero(bad):
                if diverged_at[r] is None:
                    diverged_at[r] = t

    _ckpt.check_observers(checkpoint, observers)
    saved = checkpoint.load() if checkpoint is not None else None
    t0 = 0
    if saved is not None:
        _ckpt.check_shape(saved, checkpoint, seeds=seeds, rounds=rounds, n=n, d=d,
                          eval_every=eval_every)
        t0, server, cstate, last_round = (saved["t"], _ckpt.to(saved["server"], device),
                                          _ckpt.to(saved["cstate"], device),
                                          saved["last_round"].to(device))
        curves.values, curves.rounds = saved["curves"]
        participants, staleness, diverged_at = (saved["participants"], saved["staleness"],
                                                saved["diverged_at"])
        cum_up, cum_down, loss0 = saved["cum_up"], saved["cum_down"], saved["loss0"]
        started = time.perf_counter() - saved["elapsed"]
        _ckpt.restore_streams(saved, observers)
        checkpoint.resumed_from = t0
        checkpoint.resumed_elapsed = float(saved["elapsed"])
    else:
        if eval_every:
            evaluate(0)
        for obs in observers:
            if getattr(obs, "at_start", False):
                with torch.no_grad():
                    curves.add(0, obs(RoundView(0, problem, algorithm, server, cstate, [],
                                                last_round, seeds, {}, last_round.clone())))
    with _GracefulStop() as stop:
        for t in range(t0, rounds):
            draws = [draw_round(problem, participation, algorithm.needs_uniforms, s, t)
                     for s in seeds]
            rep_np = np.concatenate([np.full(len(dr.clients), r) for r, dr in enumerate(draws)])
            cli_np = np.concatenate([dr.clients for dr in draws]).astype(np.int64)
            payloads = [p for dr in draws for p in dr.payloads]
            counts = np.array([len(dr.clients) for dr in draws])
            for r, dr in enumerate(draws):
                participants[r].append(dr.clients)
            sums: dict[str, torch.Tensor] = {}
            if getattr(algorithm, "needs_round_gradient", False):
                salt = np.array([draw_salt(seeds[r], t) for r in rep_np], dtype=np.int64)
                mean_grad = _round_gradient(problem, server["theta"], rep_np, cli_np, counts,
                                            max_batch, salt)
                server = algorithm.round_gradient(server, mean_grad,
                                                  torch.as_tensor(counts > 0, device=device))
            bcast = algorithm.broadcast(server)
            all_u = (np.concatenate([dr.uniforms for dr in draws]) if algorithm.needs_uniforms
                     else None)
            for idx in plan_chunks([len(p) for p in payloads], rep_np, max_batch):
                rep = torch.as_tensor(rep_np[idx], device=device)
                cli = torch.as_tensor(cli_np[idx], device=device)
                uniforms = None
                if all_u is not None:
                    uniforms = torch.as_tensor(all_u[idx], device=device, dtype=dtype)
                ctx = RoundContext(t, layout, rep, cli, last_round[rep, cli], uniforms,
                                   run=executor)
                if getattr(algorithm, "needs_epoch_steps", False):   # FedAda2 epoch-wise freezing
                    ctx.extra["epoch_steps"] = epoch_steps(problem, cli_np[idx], device)
                _run_clients(problem, algorithm, bcast, cstate, [payloads[i] for i in idx], ctx,
                             sums, R, fused)
            last_before = last_round.clone() if observers else None
            for r in range(R):
                last = last_round[r, torch.as_tensor(draws[r].clients, device=device)]
                stale = (t - last[last >= 0]).cpu().numpy()
                staleness[r].append(stale)
            last_round[torch.as_tensor(rep_np, device=device),
                       torch.as_tensor(cli_np, device=device)] = t
            counts_t = torch.as_tensor(counts, device=device, dtype=dtype)
            means = {k: v / counts_t.clamp_min(1).unsqueeze(-1) for k, v in sums.items()}
            active = counts_t > 0
            msg = means.pop("message", torch.zeros_like(server["theta"]))
            server_ctx = RoundContext(t, layout, torch.arange(R, device=device), None, None,
                                      extra={"seeds": seeds},  # per-seed streams (DP noise)
                                      run=executor)
            server, extra = algorithm.server_step(server, msg, means, active, server_ctx)
            cum_up += counts * up_bits / n
            cum_down += counts * down_bits / n
            stale_mean = [float(np.mean(s[-1])) if len(s[-1]) else math.nan for s in staleness]
            curves.add(t + 1, {"bits_up": cum_up, "bits_down": cum_down, "participants": counts,
                               "staleness_mean": np.asarray(stale_mean),
                               "wall_time": np.full(R, time.perf_counter() - started), **extra})
            finite = torch.isfinite(server["theta"]).all(-1).cpu().numpy()
            for r in np.flatnonzero(~finite):
                if diverged_at[r] is None:
                    diverged_at[r] = t + 1
            if eval_every and ((t + 1) % eval_every == 0 or t + 1 == rounds):
                evaluate(t + 1)
            for obs in observers:
                if (t + 1) % getattr(obs, "every", 1) == 0 or t + 1 == rounds:
                    with torch.no_grad():
                        curves.add(t + 1, obs(RoundView(t + 1, problem, algorithm, server, cstate,
                                                        draws, last_round, seeds, extra,
                                                        last_before)))
            if all(x is not None for x in diverged_at):
                if progress is not None:
                    progress(t + 1)
                break
            stopping = stop.requested and t + 1 < rounds
            if checkpoint is not None and (stopping or (checkpoint.due(t + 1) if t + 1 < rounds
                                                        else checkpoint.final)):
                written = checkpoint.save(_ckpt.snapshot(
                    t=t + 1, seeds=seeds, rounds=rounds, n=n, d=d, eval_every=eval_every,
                    server=server, cstate=cstate, last_round=last_round,
                    curves=(curves.values, curves.rounds), participants=participants,
                    staleness=staleness, diverged_at=diverged_at, cum_up=cum_up,
                    cum_down=cum_down, loss0=loss0, elapsed=time.perf_counter() - started,
                    observers=observers))
                if stopping and written:
                    stop.checkpoint = checkpoint.path
            if progress is not None:
                progress(t + 1)
            if stopping:
                raise Interrupted(t + 1, stop.checkpoint)
    metrics, rounds_of = curves.arrays()
    return RunOutput(seeds, metrics, rounds_of, participants,
                     [np.concatenate(s) if s else np.zeros(0) for s in staleness], diverged_at,
                     server, cstate, time.perf_counter() - started,
                     dict(getattr(executor, "used", {})))


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT / SIGTERM at the end of round ``round``; ``checkpoint``: the
    checkpoint written there (None: the run had no checkpointer, or writing it failed)."""

    def __init__(self, round: int, checkpoint=None):
        super().__init__(round, checkpoint)
        self.round, self.checkpoint = round, checkpoint


class _GracefulStop:
    """While a run is in progress (in the main thread), SIGINT and SIGTERM ask it to stop at
    the end of the current round, where it saves a checkpoint (if it has a checkpointer) and
    raises :class:`Interrupted`; a second signal stops it at once (KeyboardInterrupt)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.checkpoint = None
        self._old: dict = {}

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("stopping at the end of this round (press Ctrl-C again to stop at once)",
              file=sys.stderr)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                try:
                    self._old[sig] = signal.signal(sig, self._handler)
                except (ValueError, OSError):      # not settable here (an embedded interpreter)
                    pass
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        return False


def _numpy(val) -> np.ndarray:
    return val.detach().double().cpu().numpy() if torch.is_tensor(val) else np.asarray(val, float)


class _ParticipantRows(Mapping):
    """The broadcast gathered per participant (``bcast[k][rep]``), each entry on first use:
    a fused local-SGD chunk never reads the gathered server model, so it is never built."""

    def __init__(self, bcast: dict, rep: torch.Tensor):
        self._bcast, self._rep, self._rows = bcast, rep, {}

    def __getitem__(self, key):
        if key not in self._rows:
            self._rows[key] = start_rows(self._bcast[key], self._rep)
        return self._rows[key]

    def per_replica(self, key):
        """``(bcast[key] [R, ...], rep [B])``, no gathered copy: for a step that broadcasts
        each replica's row over its participants' rows (:func:`sims.core.batching.per_replica`)."""
        return self._bcast[key], self._rep

    def __iter__(self):
        return iter(self._bcast)

    def __len__(self):
        return len(self._bcast)


class _ClientRows(Mapping):
    """The chunk's participants' client state (``cstate[k]``'s rows ``slot`` of ``[R * n,
    ...]``), each entry gathered on first use (a copy: the state itself changes only when the
    engine writes ``client_message``'s new state back)."""

    def __init__(self, cstate: dict, slot: torch.Tensor):
        self._cstate, self._slot, self._rows = cstate, slot, {}

    def __getitem__(self, key):
        if key not in self._rows:
            self._rows[key] = self._cstate[key].flatten(0, 1).index_select(0, self._slot)
        return self._rows[key]

    def __iter__(self):
        return iter(self._cstate)

    def __len__(self):
        return len(self._cstate)


def epoch_steps(problem, clients, device) -> torch.Tensor:
    """``[B]`` local steps per epoch of ``clients`` (``problem.epoch_steps(c)``)."""
    if not hasattr(problem, "epoch_steps"):
        raise ValueError(f"{type(problem).__name__} has no local epochs (epoch_steps); "
                         "freezing a preconditioner by epochs needs them")
    return torch.as_tensor([problem.epoch_steps(int(c)) for c in clients], device=device)


def _run_clients(problem, algorithm, bcast, cstate, payloads, ctx: RoundContext, sums, R,
                 fused=True):
    """Local training and messages of one chunk of participants, summed per replica."""
    rep, cli = ctx.replica, ctx.clients
    device, dtype = rep.device, bcast["theta"].dtype
    b_cast = _ParticipantRows(bcast, rep)
    slot = rep * problem.n_clients + cli          # row of (replica, client) in [R * n, ...]
    c_state = _ClientRows(cstate, slot)
    payload, step_mask = stack_payloads(problem, payloads, device, dtype)
    with torch.no_grad():
        lstate = algorithm.local_start(b_cast, c_state, ctx)
        delta = None
        if fused and not algorithm.needs_anchor_grad:   # the whole round at once, if planned
            rule, lr = algorithm.local_rule_at(ctx)
            delta = ctx.run.local_round(rule, lr, problem, bcast, b_cast, c_state, ctx,
                                        payload, step_mask)
            if delta is not None:
                lstate = {**lstate, "k": step_mask.sum(1).to(dtype)}
        if delta is None:
            theta = start_rows(bcast["theta"], rep)          # the engine's own copy
            anchored = algorithm.needs_anchor_grad
            for k in range(payload.shape[1]):
                mask = step_mask[:, k]
                ctx.owned = k > 0         # the state is what the previous step returned
                if not anchored:
                    g = problem.stoch_grad(theta, cli, payload[:, k])
                elif hasattr(problem, "stoch_grad_pair"):   # both on one gathered minibatch
                    g, ctx.extra["anchor_grad"] = problem.stoch_grad_pair(
                        theta, bcast["theta"], rep, cli, payload[:, k], at_start=k == 0)
                else:                                       # same minibatch at the start
                    g = problem.stoch_grad(theta, cli, payload[:, k])
                    ctx.extra["anchor_grad"] = problem.stoch_grad(b_cast["theta"], cli,
                                                                  payload[:, k])
                theta, lstate = algorithm.local_step(theta, g, lstate, b_cast, c_state,
                                                     None if bool(mask.all()) else mask, ctx)
            ctx.owned = False
            delta = start_minus(bcast["theta"], rep, theta)
        msg, c_new, aux = algorithm.client_message(delta, lstate, c_state, ctx)
    # the chunk's own view handed back: only entries gathered may have changed
    for k, v in (c_new._rows if c_new is c_state else c_new).items():
        rows = cstate[k].flatten(0, 1)
        if v.shape == (len(slot), *rows.shape[1:]) and v.dtype == rows.dtype:
            rows.index_copy_(0, slot, v)
        else:                                       # a broadcastable value
            cstate[k][rep, cli] = v
    for k, v in {"message": msg, **aux}.items():
        if k not in sums:
            sums[k] = torch.zeros((R, *v.shape[1:]), dtype=v.dtype, device=device)
        _add_per_replica(sums[k], rep, v)


def _add_per_replica(total: torch.Tensor, rep: torch.Tensor, v: torch.Tensor) -> None:
    """``total[r] += sum of v[b] over the rows b with rep[b] == r`` (``total`` is ``[R, ...]``).

    Each replica's rows are summed on their own (the participants of one replica are
    consecutive rows, :func:`sims.core.batching.replica_runs`), so one replica's non-finite
    values never reach another's total (a one-hot product would: ``0 * nan = nan``)."""
    for r, rows in replica_runs(rep):
        total[r] += v[rows].sum(0)


def draw_salt(seed: int, t: int) -> int:
    """A 63-bit key of (run seed, round) that :func:`_round_gradient` hands to
    ``problem.full_grad`` for whatever the full gradient draws (a dropout MLP's masks): fresh
    each round and seed, the same on a rerun and after a resume."""
    return ((int(seed) + 1) * 0x9E3779B97F4A7C15 + int(t) + 1) & 0x7FFFFFFFFFFFFFFF


def _round_gradient(problem, theta, rep_np, cli_np, counts, max_batch, salt):
    """Each replica's mean over its participants of the full local gradient at its server
    model ``theta[R, d]`` (``problem.full_grad``, row ``b`` with key ``salt[b]``), in chunks
    of ``max_batch`` participants like the local training; ``[R, d]``, 0 for a replica
    without participants."""
    if not hasattr(problem, "full_grad"):
        raise ValueError(f"{type(problem).__name__} has no full_grad(theta, clients): the "
                         "algorithm needs each participant's full local gradient")
    device = theta.device
    total = torch.zeros_like(theta)
    with torch.no_grad():
        for lo in range(0, len(cli_np), max_batch):
            rep = torch.as_tensor(rep_np[lo:lo + max_batch], device=device)
            cli = torch.as_tensor(cli_np[lo:lo + max_batch], device=device)
            summed = (problem.full_grad_sum(theta, rep, cli)     # per replica, or None
                      if hasattr(problem, "full_grad_sum") else None)
            if summed is None:
                key = torch.as_tensor(salt[lo:lo + max_batch])
                _add_per_replica(total, rep,
                                 problem.full_grad(start_rows(theta, rep), cli, salt=key))
            else:
                total += summed
    counts_t = torch.as_tensor(counts, device=device, dtype=theta.dtype)
    return total / counts_t.clamp_min(1).unsqueeze(-1)

"""What an algorithm actually sends and keeps on a client, measured through its hooks.

FedAda2's Table 2 (spec 1.14) compares methods by communication per round and client memory
in units of the model size ``d``. :func:`measure_footprint` measures both on the algorithm's
own objects instead of reading its declared counts (``uplink_bits`` / ``downlink_bits`` /
``client_memory``, which the engine uses for its ``bits_up`` / ``bits_down`` columns):

* **downlink**: the floats per participant in what ``broadcast`` returns (the model, plus
  the server preconditioner for direct joint adaptivity);
* **uplink**: the floats per participant in what ``client_message`` returns (the message
  and every ``aux`` tensor);
* **client memory**: the model (``d``) plus every local optimizer-state tensor the client must
  *carry* between local steps. A state tensor counts when changing it changes the client's
  next local steps: the client runs ``warmup`` steps on random gradients, then, for each
  state entry, the same ``probe`` further steps from a perturbed copy of that entry (scaled by
  1.7, plus 0.3); entries whose perturbation leaves the end model unchanged are derived
  (recomputed from the others, e.g. the SM3 per-coordinate ``nu = min_r mu_r`` when
  preconditioners update every step) and take no memory. Per-participant scalars (a step
  counter) are reported apart (``scalars``).

Everything is float counts per participant; bits are ``32 x floats`` (full precision, as the
engine's counts). Differential privacy (:class:`sims.privacy.Private`) changes neither:
the wrapped algorithm is measured.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.context import RoundContext


@dataclass(frozen=True)
class Footprint:
    d: int
    downlink: int        # floats received per participant and round
    uplink: int          # floats sent per participant and round
    state: dict          # state entry -> floats it carries (0: derived, not carried)
    scalars: int         # per-participant scalars carried (step counters)

    @property
    def communication(self) -> int:
        return self.downlink + self.uplink

    @property
    def memory(self) -> int:
        """The model plus the carried optimizer state (floats, scalars left out)."""
        return self.d + sum(self.state.values())


def _rows(value) -> list[torch.Tensor]:
    """The tensors of a (possibly nested) hook output, each with a leading participant
    axis."""
    if torch.is_tensor(value):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _rows(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _rows(v)]
    return []


def _floats(value) -> int:
    return sum(t[0].numel() for t in _rows(value) if t.dim() >= 1)


def _perturbed(state, key):
    out = dict(state)
    out[key] = state[key] * 1.7 + 0.3
    return out


def measure_footprint(algorithm, layout, *, warmup: int = 2, probe: int = 2,
                      seed: int = 0) -> Footprint:
    """Measure ``algorithm`` on a model of ``layout`` (module docstring); float64, one
    replica, one participant, round ``t = 1`` (so a server preconditioner exists)."""
    alg = getattr(algorithm, "inner", algorithm)          # DP wrapper: same payloads
    g = torch.Generator().manual_seed(seed)
    d = layout.d
    theta0 = torch.randn(1, d, generator=g, dtype=torch.float64)
    server = alg.init_server(theta0)
    if "opt" in server:                   # a server statistic as after some rounds
        server = {**server, "opt": {k: (v.abs() + torch.rand(v.shape, generator=g,
                                                              dtype=v.dtype)
                                        if torch.is_tensor(v) and v.shape == theta0.shape
                                        else v) for k, v in server["opt"].items()}}
    bcast = alg.broadcast(server)
    one = torch.zeros(1, dtype=torch.long)
    ctx = RoundContext(t=1, layout=layout, replica=one, clients=one,
                       last_round=-torch.ones(1, dtype=torch.long))
    grads = [torch.randn(1, d, generator=g, dtype=torch.float64) for _ in range(warmup + probe)]

    def steps(theta, lstate, gs):
        for grad in gs:
            theta, lstate = alg.local_step(theta, grad, lstate, bcast, {}, None, ctx)
        return theta, lstate

    theta, lstate = steps(bcast["theta"].clone(), alg.local_start(bcast, {}, ctx),
                          grads[:warmup])
    end, _ = steps(theta, lstate, grads[warmup:])
    state, scalars = {}, 0
    for key, val in (lstate.items() if isinstance(lstate, dict) else ()):
        if not torch.is_tensor(val):
            continue
        if val.dim() <= 1:
            scalars += 1
            continue
        moved, _ = steps(theta, _perturbed(lstate, key), grads[warmup:])
        state[key] = int(val[0].numel()) if not torch.equal(moved, end) else 0
    message, _, aux = alg.client_message(bcast["theta"] - end, lstate, {}, ctx)
    return Footprint(d=d, downlink=_floats(bcast), uplink=_floats(message) + _floats(aux),
                     state=state, scalars=scalars)

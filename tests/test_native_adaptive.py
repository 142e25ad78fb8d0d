"""The one-pass C kernel of the local AMSGrad / Adam step (``sims.accel.native.adaptive``, issue 16)
equals the readable rule (``LocalAdaptive.reference_step``) in float64 at 1e-12, several steps
in a row (the state recursion, the first step not owned and left as it was, later ones owned
and written in place): AMSGrad with ``vhat`` per step or fixed for the round, Adam; bias
correction on and off, with separate counts for ``m`` and ``v``; ``eps`` inside the root;
coupled and decoupled weight decay; FedLADA's amendment from a ``[B, d]`` tensor and from the
server's rows per replica run (never gathered); Fed-LAMB's trust ratio with each ``phi`` and
``lam > 0``; one rate per row; masks; float32 against the rule at float32's precision; rows split
over OpenMP threads; ``vhat`` kept in the torch-fused step's units across steps taken by the
kernel, torch's fused kernel and the eager form in turn; what falls back (a
non-contiguous operand, the kernels off); whole engine runs of Fed-AMS, Fed-LAMB, FedLADA
and LocalAdam through the kernel against the readable rule. Every kernel step is counted
(``sims.accel.native.calls``)."""
from __future__ import annotations

import itertools

import pytest
import torch

from sims import torch_fused
from sims.core import engine
from sims.accel import native
from sims.algorithms.adaptive import LocalAdaptive, ReplicaRows
from sims.algorithms.registry import make_for_problem
from sims.problems.models import MLP
from sims.rules.optim import TrustRatio
from sims.core.params import ParamLayout
from sims.core.participation import Participation

from local_adaptive_steps import assert_step, reference_as_step, steps_against_reference
from conftest import require_native

B = 4
LAYOUT = ParamLayout.from_module(MLP(6, 5, 3))
STEPS = torch.tensor([0.0, 1.0, 3.0, 7.0], dtype=torch.float64)     # rows' steps so far
TOL = {"rtol": 1e-12, "atol": 1e-12}


def _assert_step(th_f, st_f, th_r, st_r, tol=TOL):
    assert_step(th_f, st_f, th_r, st_r, tol)
ROW_RATE = torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)
MASK = torch.tensor([True, False, True, True])
TRUSTS = [None, TrustRatio(), TrustRatio("identity", lam=0.1), TrustRatio("update_norm"),
          TrustRatio("update_norm", lam=0.05), TrustRatio(phi_min=0.5, phi_max=0.6, lam=0.01)]
WDS = [(0.0, "coupled"), (0.01, "coupled"), (0.02, "decoupled")]


# torch's fused kernels on (the forms the kernel takes turns with) and the compiled form off
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


@pytest.fixture(autouse=True)
def kernel_built():
    require_native()


def _calls():
    return native.calls.get("adaptive_step", 0)


def _rand(gen, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=gen, dtype=dtype)


def _start(gen, nm=None, dtype=torch.float64):
    theta = _rand(gen, B, LAYOUT.d, dtype=dtype)
    v = torch.rand(B, LAYOUT.d, generator=gen, dtype=dtype)
    st = LocalAdaptive.start(0.1 * _rand(gen, B, LAYOUT.d, dtype=dtype), v,
                             v + torch.rand(B, LAYOUT.d, generator=gen, dtype=dtype),
                             STEPS.clone().to(dtype), nm)
    return theta, st


def _run(rule, gen, lr=0.05, ga=None, ga_ref=None, nm=None, steps=3, mask=None):
    """``steps`` kernel steps (the first not owned, its inputs left alone; later ones owned)
    against the readable rule; returns the number of kernel calls."""
    theta, st = _start(gen, nm)
    if ga is None and rule.alpha != 1:
        ga = _rand(gen, B, LAYOUT.d)
    before = _calls()
    th_f = steps_against_reference(rule, theta, st, LAYOUT, lr, ga=ga, ga_ref=ga_ref, mask=mask,
                                   steps=steps, scale=3.0, tol=TOL)
    assert not torch.equal(th_f, theta)
    return _calls() - before


@pytest.mark.parametrize("rv,bc", itertools.product(
    [("amsgrad", "step"), ("amsgrad", "round"), ("adam", "step")], [False, True]))
@pytest.mark.parametrize("trust", range(len(TRUSTS)))
def test_kernel_equals_reference(rv, bc, trust):
    """Every option of the rule through the kernel: eps, amendment, weight decay, rates,
    masks (the masked rows keep theta and their state: copied when not owned)."""
    gen = torch.Generator().manual_seed(hash((rv, bc, trust)) % 2 ** 31)
    for eps, alpha, wd, lr, mask in itertools.product([0.0, 1e-8], [1.0, 0.3], WDS,
                                                      [0.05, ROW_RATE], [None, MASK]):
        rule = LocalAdaptive(rv[0], 0.9, 0.99, vhat=rv[1], eps=eps, bias_correction=bc,
                             alpha=alpha, trust=TRUSTS[trust], weight_decay=wd[0],
                             wd_mode=wd[1])
        assert _run(rule, gen, lr, mask=mask) == 3


@pytest.mark.parametrize("rule", [LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True),
                                  LocalAdaptive("adam", 0.8, 0.95, bias_correction=True,
                                                trust=TrustRatio(lam=0.1))])
def test_two_bias_correction_counts(rule):
    """``m`` restarted while ``v`` was not: ``nm`` and ``n`` differ row by row."""
    assert _run(rule, torch.Generator().manual_seed(1), nm=torch.zeros(B,
                                                                       dtype=torch.float64)) == 3


def test_registry_rules():
    from sims.algorithms.registry import make_algorithm
    for name, hyper in [("fed-ams", {}), ("fed-lamb", {}), ("fed-lamb", {"lam": 0.1}),
                        ("fedlada", {}), ("fedlada", {"weight_decay": 0.01}),
                        ("localadam", {}), ("fed-ams", {"bias_correction": "none"})]:
        rule = make_algorithm(name, **hyper).rule
        assert _run(rule, torch.Generator().manual_seed(2)) == 3, name


#: participant -> replica maps: runs as the engine orders a chunk, a replica in two runs
REPS = {"runs": [0, 0, 1, 2], "split": [1, 0, 0, 1], "one": [0, 0, 0, 0]}


@pytest.mark.parametrize("reps", list(REPS))
@pytest.mark.parametrize("trust", [None, TrustRatio(lam=0.1)])
def test_amendment_from_server_rows(reps, trust):
    """FedLADA's ``g_a`` read from the server's ``[R, d]`` rows per replica run (through the
    engine's view, never gathered) equals the rule on the gathered rows; so does a plain dict
    of rows."""
    gen = torch.Generator().manual_seed(3)
    server = _rand(gen, 3, LAYOUT.d)
    rep = torch.tensor(REPS[reps])
    rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True, alpha=0.2,
                         weight_decay=0.01, trust=trust)
    view = engine._ParticipantRows({"ga": server}, rep)
    for mask in (None, MASK):                      # the mask's rows offset per run too
        assert _run(rule, gen, ga=ReplicaRows(view, "ga"), ga_ref=server[rep], mask=mask) == 3
    assert not view._rows                          # read per replica, never gathered
    assert _run(rule, gen, ga=ReplicaRows({"ga": server[rep]}, "ga"), ga_ref=server[rep]) == 3


def test_float32_equals_the_rule_at_its_precision():
    """The float kernel (every other test runs the double one) against the readable rule in
    float32 and in float64 from the same float32 inputs."""
    gen = torch.Generator().manual_seed(4)
    for trust, alpha, wd, mask in itertools.product(TRUSTS[:3], [1.0, 0.3], WDS, [None, MASK]):
        for rv, bc in itertools.product([("amsgrad", "step"), ("amsgrad", "round"),
                                         ("adam", "step")], [False, True]):
            rule = LocalAdaptive(rv[0], 0.9, 0.99, vhat=rv[1], eps=1e-8, bias_correction=bc,
                                 alpha=alpha, trust=trust, weight_decay=wd[0], wd_mode=wd[1])
            theta, st = _start(gen, dtype=torch.float32)
            ga = _rand(gen, B, LAYOUT.d, dtype=torch.float32)
            th_f, st_f = theta, st
            th_r, st_r = theta.double(), {k: v.double() for k, v in st.items()}
            before = _calls()
            for step in range(3):
                g = torch.sin(3 * th_f + step)
                th_f, st_f = rule.step(th_f, g, st_f, mask, 0.05, LAYOUT, ga=ga,
                                       owned=step > 0)
                th_r, st_r = rule.reference_step(th_r, g.double(), st_r, mask, 0.05, LAYOUT,
                                                 ga=ga.double())
                assert th_f.dtype == torch.float32
            assert _calls() - before == 3
            _assert_step(th_f.double(), {k: v.double() for k, v in st_f.items()}, th_r,
                         st_r, {"rtol": 2e-5, "atol": 2e-5})


def test_rows_over_threads_equal_one_thread():
    """The rows split over 2 and 3 OpenMP threads (each with its own trust scratch): bit
    for bit one thread."""
    rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True, alpha=0.5,
                         trust=TrustRatio(lam=0.1))
    gen = torch.Generator().manual_seed(5)
    theta, st = _start(gen)
    g, ga = _rand(gen, B, LAYOUT.d), _rand(gen, B, LAYOUT.d)
    was = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = rule.step(theta, g, st, None, ROW_RATE, LAYOUT, ga=ga)
        for nt in (2, 3):
            torch.set_num_threads(nt)
            two = rule.step(theta, g, st, None, ROW_RATE, LAYOUT, ga=ga)
            assert torch.equal(one[0], two[0])
            assert all(torch.equal(one[1][k], two[1][k]) for k in one[1])
    finally:
        torch.set_num_threads(was)


def test_owned_in_place_not_owned_new():
    """Owned: ``theta``, ``m``, ``v``, ``vhat`` written in place (the tensors returned are the
    ones given); not owned: every one new, the inputs untouched; the same numbers."""
    rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True)
    gen = torch.Generator().manual_seed(6)
    theta, st = _start(gen)
    g = _rand(gen, B, LAYOUT.d)
    th_a, st_a = rule.step(theta.clone(), g, {k: v.clone() for k, v in st.items()}, None,
                           0.05, LAYOUT)
    mine = (theta.clone(), {k: v.clone() for k, v in st.items()})
    th_b, st_b = rule.step(mine[0], g, mine[1], None, 0.05, LAYOUT, owned=True)
    assert th_b is mine[0] and all(st_b[k] is mine[1][k] for k in ("m", "v", "vhat"))
    assert torch.equal(th_a, th_b) and all(torch.equal(st_a[k], st_b[k]) for k in st_a)
    copy = (theta.clone(), {k: v.clone() for k, v in st.items()})
    th_c, st_c = rule.step(theta, g, st, None, 0.05, LAYOUT)
    assert th_c is not theta and all(st_c[k] is not st[k] for k in ("m", "v", "vhat"))
    assert torch.equal(theta, copy[0]) and all(torch.equal(st[k], copy[1][k]) for k in st)


@pytest.mark.parametrize("alias", ["same", "view"])
def test_owned_alias_is_not_written_through(alias):
    """FedLADA's first step hands ``v`` and ``vhat`` as one tensor (the broadcast rows): even
    declared owned, neither is written in place (``v'`` and ``vhat'`` would land in one
    memory); a view of the same storage is not either."""
    rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True)
    gen = torch.Generator().manual_seed(7)
    theta, st = _start(gen)
    if alias == "same":
        st["vhat"] = st["v"]
    else:
        both = torch.rand(2 * B, LAYOUT.d, generator=gen, dtype=torch.float64)
        st["v"], st["vhat"] = both[:B], both[B:]
    g = _rand(gen, B, LAYOUT.d)
    want = rule.reference_step(theta, g, {k: v.clone() for k, v in st.items()}, None, 0.05,
                               LAYOUT)
    keep = {k: v.clone() for k, v in st.items()}
    before = _calls()
    got = rule.step(theta.clone(), g, st, None, 0.05, LAYOUT, owned=True)
    assert _calls() - before == 1
    _assert_step(*got, *want)
    assert torch.equal(st["v"], keep["v"]) and torch.equal(st["vhat"], keep["vhat"])
    assert got[1]["m"] is st["m"]                       # m shares with nothing: in place


# ---------------------------------------------------------------- vhat in the kernel's units

SCALED = {"fed-ams": LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True),
          "fed-lamb": LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True,
                                    trust=TrustRatio(lam=0.1)),
          "amended": LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True, alpha=0.3,
                                   weight_decay=0.01)}
#: (form, mask, lr) per step: the C kernel (with and without a mask), torch's fused kernel
#: (the C one off), the eager form (the C one off, a mask): each reads the state the one
#: before left (vhat scaled or not)
SCHEDULE = [("native", None, 0.05), ("torch", None, 0.05), ("native", None, 0.05),
            ("native", None, ROW_RATE), ("eager", MASK, 0.05), ("native", MASK, 0.05),
            ("native", None, 0.05), ("torch", None, 0.05), ("eager", MASK, 0.05),
            ("native", MASK, 0.05), ("torch", None, 0.05), ("native", None, 0.05)]


@pytest.mark.parametrize("name", list(SCALED))
def test_scaled_vhat_across_forms(monkeypatch, name):
    """A round mixing the C kernel, torch's fused kernel and the eager form, against the
    readable rule throughout; the kernel keeps the state in the torch-fused units
    (``vhat_scale``) and rescales ``vhat`` in place on owned steps; then the readable rule
    itself reads the state the kernel left."""
    rule, gen = SCALED[name], torch.Generator().manual_seed(8)
    theta, st = _start(gen)
    ga = _rand(gen, B, LAYOUT.d)
    th_f, st_f, th_r, st_r = theta, st, theta, st
    for step, (form, mask, lr) in enumerate(SCHEDULE):
        monkeypatch.setattr(LocalAdaptive, "native_step", form == "native")
        scaled_before = "vhat_scale" in st_f
        g = torch.sin(3 * th_r + step)
        before, fused, vhat_in = _calls(), sum(torch_fused.calls.values()), st_f["vhat"]
        th_f, st_f = rule.step(th_f, g, st_f, mask, lr, LAYOUT, ga=ga, owned=step > 0)
        assert (_calls() > before) == (form == "native")
        assert (sum(torch_fused.calls.values()) > fused) == (form == "torch")
        assert ("vhat_scale" in st_f) == (form != "eager")
        if form == "native" and step > 0 and (mask is None or scaled_before):
            assert st_f["vhat"] is vhat_in                     # rescaled in place
        th_r, st_r = rule.reference_step(th_r, g, st_r, mask, lr, LAYOUT, ga=ga)
        _assert_step(th_f, st_f, th_r, st_r)
    g = torch.cos(th_r)
    _assert_step(*rule.reference_step(th_f, g, st_f, None, 0.05, LAYOUT, ga=ga),
                 *rule.reference_step(th_r, g, st_r, None, 0.05, LAYOUT, ga=ga))


# ---------------------------------------------------------------- what falls back

def test_what_falls_back(monkeypatch):
    """A non-contiguous gradient, a mask that is not ``[B]`` bool, the kernels off: the torch
    forms (no kernel call), the same rule."""
    rule = LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True, alpha=0.5)
    gen = torch.Generator().manual_seed(9)
    theta, st = _start(gen)
    ga = _rand(gen, B, LAYOUT.d)
    g_t = _rand(gen, LAYOUT.d, B)
    for kw, calls in [({}, 1), ({"g": g_t.T}, 0), ({"mask": MASK.view(B, 1)}, 0),
                      ({"off": True}, 0)]:
        if kw.get("off"):
            monkeypatch.setattr(native, "_state", dict(native._state, enabled=False))
        mask = kw.get("mask")
        g = kw.get("g", g_t.T.contiguous())
        before = _calls()
        got = rule.step(theta, g, st, mask, 0.05, LAYOUT, ga=ga)
        assert _calls() - before == calls, kw
        _assert_step(*got, *rule.reference_step(theta, g, st, mask, 0.05, LAYOUT, ga=ga))


def test_masked_row_of_a_scaled_state_without_correction_falls_back():
    """A state whose ``vhat`` is kept scaled reaching a rule without bias correction (the
    kernel would leave a masked row's ``vhat`` scaled in an unscaled state): the eager form,
    the rule's result."""
    rule = LocalAdaptive("amsgrad", 0.9, 0.99)
    gen = torch.Generator().manual_seed(10)
    theta, st = _start(gen)
    st = dict(st, vhat=st["vhat"] * 0.5, vhat_scale=torch.full((B, 1), 0.5,
                                                                 dtype=torch.float64))
    g = _rand(gen, B, LAYOUT.d)
    before = _calls()
    got = rule.step(theta, g, st, MASK, 0.05, LAYOUT)
    assert _calls() == before
    _assert_step(*got, *rule.reference_step(theta, g, st, MASK, 0.05, LAYOUT))
    got = rule.step(theta, g, st, None, 0.05, LAYOUT)               # no mask: the kernel
    assert _calls() == before + 1
    _assert_step(*got, *rule.reference_step(theta, g, st, None, 0.05, LAYOUT))


# ---------------------------------------------------------------- the engine

@pytest.mark.parametrize("name,hyper,seeds", [
    ("fed-ams", {}, [0, 1]), ("fed-ams", {"bias_correction": "none"}, [0]),
    ("fed-ams", {"vhat": "local"}, [0]), ("fed-lamb", {}, [0]),
    ("fed-lamb", {"lam": 0.1, "phi": "identity"}, [0, 1]),
    ("fedlada", {}, [0]), ("fedlada", {}, [0, 1]),      # two replicas: g_a per replica run
    ("fedlada", {"v_init": "zero", "weight_decay": 0.01}, [0, 1]), ("localadam", {}, [0, 1])])
def test_engine_kernel_equals_readable_rule(mlp_problem, monkeypatch, name, hyper, seeds):
    """Whole runs (unequal clients: masked last steps take the eager form from the kernel's
    state; first steps in place on what the engine owns) with the kernel against the readable
    local rule: the models and the clients' kept state."""
    out = {}
    for form in ("native", "reference"):
        alg = make_for_problem(name, mlp_problem, **hyper)
        if form == "reference":
            monkeypatch.setattr(LocalAdaptive, "step", reference_as_step)
        before = _calls()
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=3), 3, seeds,
                               eval_every=0)
        used = _calls() - before
        assert used > 0 if form == "native" else used == 0
    fast, ref = out["native"], out["reference"]
    assert not torch.equal(fast.server["theta"][0], mlp_problem.init_theta(0))
    torch.testing.assert_close(fast.server["theta"], ref.server["theta"], **TOL)
    assert set(fast.client_state) == set(ref.client_state)
    for k in ref.client_state:
        torch.testing.assert_close(fast.client_state[k], ref.client_state[k], **TOL)

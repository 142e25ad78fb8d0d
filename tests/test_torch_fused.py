"""torch's fused CPU optimizer kernels as the local step (``sims.torch_fused``, issue 16) equal
the readable rules in float64: FedAda2's full-preconditioner clients (DJA, joint-adaptive,
FedAdaAdagrad, FedAdaAdam: ``JointAdaptive.reference_local_step``) and LocalAdam / FedLADA
(``LocalAdaptive.reference_step``), on a round's first step (inputs not owned: left as they
were) and later ones (owned: written in place), rows at different step counts, bias
correction on and off; the rules the kernels do not compute fall back to the eager forms; a
kernel that raises or disagrees falls back with one warning; through the engine. Fed-AMS /
Fed-LAMB's ``vhat`` kept in the kernel's units (``vhat_scale``) is what every other reader
(eager, compiled and readable steps, ``vhat="local"`` messages) sees unscaled; FedLADA's
amendment from the server rows per replica run equals the gathered rows."""
from __future__ import annotations

import warnings

import pytest
import torch

from sims import torch_fused
from sims.core import engine
from sims.algorithms.adaptive import LocalAdaptive
from sims.algorithms.fedada2 import JointAdaptive
from sims.algorithms.registry import make_algorithm, make_for_problem
from sims.problems.models import MLP
from sims.rules.optim import TrustRatio, unscaled_vhat
from sims.core.params import ParamLayout
from sims.core.participation import Participation

from fedada2_clients import B, STEPS, kernel_calls
from fedada2_clients import steps_against_reference as _fedada2_run
from local_adaptive_steps import assert_step as _assert_step
from local_adaptive_steps import reference_as_step, steps_against_reference


# every test with torch's kernels on and the compiled form (opt-in, which goes first where
# it is on) off, both restored after
pytestmark = pytest.mark.usefixtures("torch_kernels_eager")


@pytest.fixture(autouse=True)
def torch_fused_before_native(monkeypatch):
    """LocalAdaptive's and FedAda2's one-pass C kernels (:mod:`sims.accel.native.adaptive`,
    :mod:`sims.accel.native.sm3`, which go first where they are built) off: these tests hold
    torch's kernel to the rule; the C kernels' own tests, and their turns with this one, are
    in ``tests/test_native_adaptive.py``, ``tests/test_fedada2_fast_step.py`` and
    ``tests/test_fedada2_full_native.py``."""
    monkeypatch.setattr(LocalAdaptive, "native_step", False)
    monkeypatch.setattr(JointAdaptive, "native_step", False)


@pytest.fixture(scope="module")
def layout():
    return ParamLayout.from_module(MLP(6, 5, 3))


def _rand(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


FEDADA2_KERNEL = [("dja", {}), ("joint-adaptive", {}), ("fedadaadagrad", {}),
                  ("fedadaadam", {}), ("fedadaadam", {"bias_correction": False}),
                  ("joint-adaptive", {"client": "adam"}),
                  ("dja", {"client": "adam", "server": "adam", "bias_correction": False})]


@pytest.mark.parametrize("name,hyper", FEDADA2_KERNEL)
def test_fedada2_full_preconditioner_kernel_equals_reference(layout, name, hyper):
    """torch's kernel (the C kernel, :mod:`sims.accel.native.sm3`, off here: it goes first where
    it is on)."""
    alg = make_algorithm(name, **hyper)
    before = kernel_calls()
    assert _fedada2_run(alg, layout, torch.Generator().manual_seed(len(name))) == 3
    assert kernel_calls()[0] - before[0] == 3


@pytest.mark.parametrize("name,hyper,mask,row_rate", [
    ("dja", {"client": "adam", "server": "adam"}, False, False),   # m, v: two counts
    ("fedadaadagrad", {"delay": 2}, False, False),
    ("fedadaadam", {"clip": 50.0}, False, False),
    ("fedada2", {"precond": "sm3-i"}, False, False),               # SM3-I cover (SM3-II:
    ("fedada2-adam", {"precond": "sm3-i"}, False, False),          # test_fedada2_fast_step)
    ("fedadaadagrad", {}, True, False),                            # a client out of data
    ("fedadaadam", {}, False, True)])                              # per-replica eta_l
def test_fedada2_other_rules_fall_back(layout, name, hyper, mask, row_rate):
    alg = make_algorithm(name, **hyper)
    if row_rate:
        alg.eta_l = torch.tensor([[0.01], [0.02], [0.005], [0.03]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(11)
    assert _fedada2_run(alg, layout, gen, torch.tensor([True, False, True, True])
                        if mask else None) == 0             # nor the C kernel (off here)


def _local_run(rule, layout, gen, mask=None, lr=0.05, nm=None):
    """As :func:`_fedada2_run` for ``rule.step`` against ``rule.reference_step``."""
    theta, ga = _rand(gen, B, layout.d), _rand(gen, B, layout.d)
    v = torch.rand(B, layout.d, generator=gen, dtype=torch.float64)
    st = LocalAdaptive.start(0.1 * _rand(gen, B, layout.d), v,
                             v + torch.rand(B, layout.d, generator=gen, dtype=torch.float64),
                             STEPS.clone(), nm)
    before = sum(torch_fused.calls.values())
    steps_against_reference(rule, theta, st, layout, lr, ga=ga, mask=mask)
    return sum(torch_fused.calls.values()) - before


LOCAL_KERNEL = {   # the registry's rules, and the options the kernel takes
    "localadam": make_algorithm("localadam").rule,
    "fedlada": make_algorithm("fedlada").rule,            # amended: alpha = 0.1
    "fedlada-wd": make_algorithm("fedlada", weight_decay=0.01).rule,   # coupled decay
    "adam-bc": LocalAdaptive("adam", 0.9, 0.99, bias_correction=True, weight_decay=0.01),
    "adam": LocalAdaptive("adam", 0.8, 0.95, bias_correction=False, alpha=0.3),
    "fed-ams": make_algorithm("fed-ams").rule,      # vhat: the max of the corrected v
    "ams-bc-amended": LocalAdaptive("amsgrad", 0.9, 0.99, bias_correction=True, alpha=0.3,
                                    weight_decay=0.01),
    "fed-lamb": make_algorithm("fed-lamb").rule,    # trust ratio: the kernel gives u
    "fed-lamb-lam": make_algorithm("fed-lamb", lam=0.1).rule,
    "lamb-clip-nobc": LocalAdaptive("adam", 0.9, 0.99, trust=TrustRatio("clip", 0.2, 2.0, 0.01)),
}


@pytest.mark.parametrize("name", list(LOCAL_KERNEL))
def test_local_adaptive_kernel_equals_reference(layout, name):
    assert _local_run(LOCAL_KERNEL[name], layout, torch.Generator().manual_seed(3)) == 3


LOCAL_FALLBACK = {
    "lamb-amended": LocalAdaptive("amsgrad", 0.9, 0.99, alpha=0.5, trust=TrustRatio()),
    "lamb-decay": LocalAdaptive("amsgrad", 0.9, 0.99, weight_decay=0.01, trust=TrustRatio()),
    "eps-inside": LocalAdaptive("adam", 0.9, 0.99, eps=1e-8),
    "vhat-round": LocalAdaptive("amsgrad", 0.9, 0.99, vhat="round"),
    "decoupled": LocalAdaptive("amsgrad", 0.9, 0.99, weight_decay=0.02, wd_mode="decoupled"),
}


@pytest.mark.parametrize("name", list(LOCAL_FALLBACK) + ["mask", "row-rate", "two-counts"])
def test_local_adaptive_other_rules_fall_back(layout, name):
    rule = LOCAL_FALLBACK.get(name, LOCAL_KERNEL["adam-bc"])
    kw = {"mask": torch.tensor([True, False, True, True])} if name == "mask" else {}
    if name == "row-rate":
        kw["lr"] = torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)
    if name == "two-counts":        # m restarted, v not: two bias-correction counts
        kw["nm"] = torch.zeros(B, dtype=torch.float64)
    assert _local_run(rule, layout, torch.Generator().manual_seed(5), **kw) == 0


def test_no_bias_correction_step_is_exact():
    """The count standing for "no bias correction" makes both corrections exactly 1 for every
    double ``beta < 1``, the largest (``1 - 2^-53``) included; the readable rule without
    correction then equals the kernel's (``test_local_adaptive_kernel_equals_reference``)."""
    for beta in (0.0, 0.5, 0.9, 0.99, 0.999, 0.999999, 1 - 2 ** -40, 1 - 2 ** -53):
        assert 1.0 - beta ** torch_fused.NO_BIAS_STEP == 1.0


@pytest.mark.parametrize("where", ["probe", "call"])
def test_raising_kernel_falls_back_with_one_warning(layout, monkeypatch, where):
    """A kernel that raises (a torch build without it), in the first-use probe or on the real
    call: one warning, the eager form's result, and the kernel not tried again."""
    real, tries = torch._fused_adagrad_, []

    def broken(*args, **kw):
        tries.append(1)
        raise RuntimeError("no such kernel here")
    if where == "call":
        torch_fused._probe("adagrad", torch.float64)      # passes with the real kernel
    monkeypatch.setattr(torch, "_fused_adagrad_", broken)
    alg = make_algorithm("fedadaadagrad")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert _fedada2_run(alg, layout, torch.Generator().manual_seed(2)) == 0
    assert [str(w.message) for w in seen if "torch_fused" in str(w.message)] == [
        "sims.torch_fused: torch._fused_adagrad_ failed (RuntimeError: no such kernel here); "
        "using the eager local step"]
    assert len(tries) == 1 and not torch_fused.enabled()
    monkeypatch.setattr(torch, "_fused_adagrad_", real)


def test_disagreeing_kernel_is_caught_by_the_probe(layout, monkeypatch):
    """A kernel with another rule (here: one that does nothing) is not used."""
    monkeypatch.setattr(torch, "_fused_adam_", lambda *a, **kw: None)
    with pytest.warns(RuntimeWarning, match="disagrees with the rule"):
        assert _local_run(LOCAL_KERNEL["localadam"], layout,
                          torch.Generator().manual_seed(4)) == 0
    assert not torch_fused.enabled()


@pytest.mark.parametrize("name,hyper,seeds", [
    ("fedadaadam", {}, [0, 1]), ("dja", {}, [0, 1]), ("localadam", {}, [0, 1]),
    ("fedlada", {}, [0]),
    ("fedlada", {}, [0, 1]),                  # two replicas: g_a added per replica run
    ("fedlada", {"v_init": "zero"}, [0, 1]),  # v its own from the first step
    ("fed-ams", {}, [0, 1]), ("fed-ams", {"bias_correction": "none"}, [0, 1]),
    ("fed-lamb", {}, [0]), ("fed-lamb", {"lam": 0.1}, [0, 1]),
    ("fed-ams", {"vhat": "local"}, [0]), ("fed-lamb", {"vhat": "local"}, [0]),
    ("fed-lamb", {"block_rows": 2}, [0])])    # 3 participants: blocks of 2 and 1 rows
def test_engine_fused_equals_readable_rule(mlp_problem, monkeypatch, name, hyper, seeds):
    """Whole runs (unequal clients: masked last steps, which take the eager form from the
    kernel's scaled state; each round's first step in place on the engine's ``theta`` and
    the state the algorithm declares its own, ``tests/test_ownership.py``) with the kernels
    against the readable local rule: the models and the clients' kept state (``vhat="local"``:
    their own ``vhat``)."""
    hyper = dict(hyper)
    if "block_rows" in hyper:
        monkeypatch.setattr(LocalAdaptive, "trust_block_bytes",
                            hyper.pop("block_rows") * mlp_problem.d * 8)
    out = {}
    for form in ("fused", "reference"):
        alg = make_for_problem(name, mlp_problem, **hyper)
        if form == "reference":
            if isinstance(getattr(alg, "rule", None), LocalAdaptive):
                monkeypatch.setattr(LocalAdaptive, "step", reference_as_step)
            else:
                monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        before = sum(torch_fused.calls.values())
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=3), 3, seeds,
                               eval_every=0)
        used = sum(torch_fused.calls.values()) - before
        assert used > 0 if form == "fused" else used == 0
    fused, ref = out["fused"], out["reference"]
    assert not torch.equal(fused.server["theta"][0], mlp_problem.init_theta(0))
    torch.testing.assert_close(fused.server["theta"], ref.server["theta"], rtol=1e-12,
                               atol=1e-12)
    assert set(fused.client_state) == set(ref.client_state)
    assert ("vhat" in fused.client_state) == (hyper.get("vhat") == "local")
    for k in ref.client_state:
        torch.testing.assert_close(fused.client_state[k], ref.client_state[k], rtol=1e-12,
                                   atol=1e-12)


def test_blend_full_members_take_the_kernel(mlp_problem, monkeypatch):
    """FedAda2-blend's full AdaGrad / Adam members step their own rows through the kernels
    (in place on the chunk's rows; the SM3-II member too, the C kernel being off here: with
    it on, ``tests/test_fedada2_fast_step.py``) and equal the masked readable form."""
    from sims.algorithms.fedada2 import FedAda2Blend
    out = {}
    for form in ("fast", "reference"):
        alg = FedAda2Blend(eta=0.05, strategies="adagrad,adam,sm3-adagrad", steps="2,3,1")
        if form == "reference":
            monkeypatch.setattr(alg, "local_step", alg.reference_local_step)
        before = kernel_calls()
        out[form] = engine.run(mlp_problem, alg, Participation("fixed", m=4), 3, [0],
                               eval_every=0).server["theta"]
        t, n = (a - b for a, b in zip(kernel_calls(), before))
        assert (t > 0) == (form == "fast") and n == 0
    torch.testing.assert_close(out["fast"], out["reference"], rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(__import__("shutil").which("g++") is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
def test_priority_with_the_compiled_form_on(layout, monkeypatch):
    """With ``FEDTOOLKIT_COMPILE`` on, FedAda2's full-preconditioner step still takes torch's
    fused kernel (measured faster) and LocalAdaptive the compiled kernel (as fast or faster)."""
    from sims import compiled
    monkeypatch.setattr(compiled, "_kernels", {})
    was = compiled.enabled()
    compiled.enable(True)
    try:
        assert _fedada2_run(make_algorithm("fedadaadam"), layout,
                            torch.Generator().manual_seed(6), steps=2) == 2
        assert compiled._kernels == {}
        assert _local_run(LOCAL_KERNEL["localadam"], layout,
                          torch.Generator().manual_seed(6)) == 0
        assert len(compiled._kernels) == 1 and compiled.enabled()
    finally:
        compiled.enable(was)


# ---------------------------------------------------------------- vhat kept in kernel units
# With bias correction the fused AMSGrad step keeps vhat times c2 = 1 - b2^n (state
# "vhat_scale"); every other reader unscales it first (sims.rules.optim.unscaled_vhat).

SCALED = {k: LOCAL_KERNEL[k] for k in ("fed-ams", "fed-lamb", "fed-lamb-lam", "ams-bc-amended")}
ROW_RATE = torch.tensor([[0.05], [0.01], [0.2], [0.1]], dtype=torch.float64)
#: (mask, lr, takes the kernel) per local step: the first not owned, later ones owned; a
#: masked step and a per-row rate mid-round take the eager form from the scaled state, and
#: the kernel then starts again from an unscaled one
SCHEDULE = [(None, 0.05, True), (None, 0.05, True), (torch.tensor([True, False, True, True]),
            0.05, False), (None, 0.05, True), (None, 0.05, True), (None, ROW_RATE, False),
            (None, 0.05, True)]


def _scaled_start(layout, gen):
    theta, ga = _rand(gen, B, layout.d), _rand(gen, B, layout.d)
    v = torch.rand(B, layout.d, generator=gen, dtype=torch.float64)
    st = LocalAdaptive.start(0.1 * _rand(gen, B, layout.d), v,
                             v + torch.rand(B, layout.d, generator=gen, dtype=torch.float64),
                             STEPS.clone())          # rows at steps 0, 1, 3 and 7
    return theta, ga, st


def _block_rows(monkeypatch, layout, rows):
    """Fed-LAMB's fused step in blocks of ``rows`` float64 rows (None: the default size, one
    block here); ``B = 4`` rows: 3 gives two blocks of 2, 2 of 3 rows gives 2 and 1."""
    if rows is not None:
        monkeypatch.setattr(LocalAdaptive, "trust_block_bytes", rows * layout.d * 8)


@pytest.mark.parametrize("name,rows", [(name, None) for name in SCALED]
                         + [("fed-lamb", 1), ("fed-lamb", 3), ("fed-lamb-lam", 1)])
def test_scaled_vhat_through_fused_and_eager_steps(layout, monkeypatch, name, rows):
    """Several steps of a round mixing the kernel (vhat scaled, rescaled in place on owned
    steps) with eager steps that read the scaled state, against the readable rule throughout;
    then the readable rule itself reads the fused state. Fed-LAMB also in row blocks."""
    _block_rows(monkeypatch, layout, rows)
    rule, gen = SCALED[name], torch.Generator().manual_seed(21)
    theta, ga, st = _scaled_start(layout, gen)
    inputs = (theta.clone(), {k: v.clone() for k, v in st.items()})
    th_f, st_f, th_r, st_r = theta, st, theta, st
    for step, (mask, lr, kernel) in enumerate(SCHEDULE):
        g = torch.sin(3 * th_r + step)
        before, vhat_in = torch_fused.calls["adam"], st_f["vhat"]
        th_f, st_f = rule.step(th_f, g, st_f, mask, lr, layout, ga=ga, owned=step > 0)
        assert (torch_fused.calls["adam"] > before) == kernel     # one call a block
        assert ("vhat_scale" in st_f) == kernel                 # the kernel's units
        if kernel and step > 0:                                 # rescaled in place
            assert st_f["vhat"] is vhat_in
        th_r, st_r = rule.reference_step(th_r, g, st_r, mask, lr, layout, ga=ga)
        _assert_step(th_f, st_f, th_r, st_r)
    assert torch.equal(theta, inputs[0])
    assert all(torch.equal(st[k], inputs[1][k]) for k in st)
    g = torch.cos(th_r)
    _assert_step(*rule.reference_step(th_f, g, st_f, None, 0.05, layout, ga=ga),
                 *rule.reference_step(th_r, g, st_r, None, 0.05, layout, ga=ga))


def test_unscaled_vhat():
    v = torch.tensor([[2.0, 4.0], [3.0, 9.0]], dtype=torch.float64)
    plain = {"vhat": v, "n": torch.ones(2)}
    assert unscaled_vhat(plain) is plain
    scaled = {"vhat": v, "vhat_scale": torch.tensor([[2.0], [3.0]], dtype=torch.float64),
              "n": plain["n"]}
    got = unscaled_vhat(scaled)
    assert set(got) == {"vhat", "n"} and got["n"] is plain["n"]
    assert torch.equal(got["vhat"], torch.tensor([[1.0, 2.0], [1.0, 3.0]], dtype=torch.float64))
    assert torch.equal(scaled["vhat"], v)                       # left as it was


def test_kernel_raising_after_the_rescale_falls_back_exactly(layout, monkeypatch):
    """The kernel raising on an owned step, after vhat was rescaled in place: the eager form
    takes the step from the rescaled state (one warning, the readable rule's result)."""
    rule, gen = SCALED["fed-ams"], torch.Generator().manual_seed(22)
    theta, ga, st = _scaled_start(layout, gen)
    th_f, st_f = rule.step(theta, torch.sin(theta), st, None, 0.05, layout, owned=False)
    th_r, st_r = rule.reference_step(theta, torch.sin(theta), st, None, 0.05, layout)
    assert "vhat_scale" in st_f

    def broken(*args, **kw):
        raise RuntimeError("no such kernel here")
    monkeypatch.setattr(torch, "_fused_adam_", broken)
    with pytest.warns(RuntimeWarning, match="_fused_adam_ failed"):
        th_f, st_f = rule.step(th_f, torch.cos(th_f), st_f, None, 0.05, layout, owned=True)
    th_r, st_r = rule.reference_step(th_r, torch.cos(th_r), st_r, None, 0.05, layout)
    _assert_step(th_f, st_f, th_r, st_r)
    assert not torch_fused.enabled()


@pytest.mark.parametrize("fail_at", [0, 2])
def test_kernel_raising_in_a_row_block_leaves_the_rest_to_the_eager_form(layout, monkeypatch,
                                                                         fail_at):
    """Fed-LAMB in one-row blocks, the kernel raising on the first or the third block (after
    the rescale, and after two blocks were stepped in place): the remaining rows take the
    eager form and the step equals the readable rule (one warning)."""
    _block_rows(monkeypatch, layout, 1)
    rule, gen = SCALED["fed-lamb"], torch.Generator().manual_seed(26)
    theta, ga, st = _scaled_start(layout, gen)
    th_f, st_f = rule.step(theta, torch.sin(theta), st, None, 0.05, layout, owned=False)
    th_r, st_r = rule.reference_step(theta, torch.sin(theta), st, None, 0.05, layout)
    real, calls = torch._fused_adam_, []

    def flaky(*args, **kw):
        calls.append(1)
        if len(calls) > fail_at:
            raise RuntimeError("no such kernel here")
        return real(*args, **kw)
    monkeypatch.setattr(torch, "_fused_adam_", flaky)
    with pytest.warns(RuntimeWarning, match="_fused_adam_ failed"):
        th_f, st_f = rule.step(th_f, torch.cos(th_f), st_f, None, 0.05, layout, owned=True)
    th_r, st_r = rule.reference_step(th_r, torch.cos(th_r), st_r, None, 0.05, layout)
    assert len(calls) == fail_at + 1
    _assert_step(th_f, st_f, th_r, st_r)


@pytest.mark.skipif(__import__("shutil").which("g++") is None,
                    reason="torch.compile's CPU backend needs a C++ compiler")
def test_compiled_step_reads_the_scaled_state(layout, monkeypatch):
    """The compiled form (opt-in) taking over from a state the kernel left scaled."""
    from sims import compiled
    rule, gen = SCALED["fed-ams"], torch.Generator().manual_seed(23)
    theta, ga, st = _scaled_start(layout, gen)
    th_f, st_f = rule.step(theta, torch.sin(theta), st, None, 0.05, layout, owned=False)
    th_r, st_r = rule.reference_step(theta, torch.sin(theta), st, None, 0.05, layout)
    assert "vhat_scale" in st_f
    monkeypatch.setattr(compiled, "_kernels", {})
    was = compiled.enabled()
    compiled.enable(True)
    try:
        for owned in (True, False):
            th_f, st_f = rule.step(th_f, torch.cos(th_f), st_f, None, 0.05, layout,
                                   owned=owned)
            th_r, st_r = rule.reference_step(th_r, torch.cos(th_r), st_r, None, 0.05, layout)
            _assert_step(th_f, st_f, th_r, st_r)
        assert len(compiled._kernels) == 1 and compiled.enabled()
    finally:
        compiled.enable(was)


@pytest.mark.parametrize("name", ["fed-ams", "fed-lamb"])
def test_local_vhat_message_is_the_rules(layout, name):
    """``vhat="local"``: the ``vhat`` a client keeps (its message's state) is the rule's,
    not the kernel's scaled one."""
    from fedada2_clients import client_ctx
    msgs = {}
    for form in ("fused", "reference"):
        alg, gen = make_algorithm(name, vhat="local"), torch.Generator().manual_seed(24)
        theta = _rand(gen, B, layout.d)
        v = torch.rand(B, layout.d, generator=gen, dtype=torch.float64)
        cstate = {"v": v, "m": 0.1 * _rand(gen, B, layout.d), "n": STEPS.clone(),
                  "vhat": v + torch.rand(B, layout.d, generator=gen, dtype=torch.float64)}
        ctx = client_ctx(layout, False)
        lstate, th = alg.local_start({"theta": theta}, cstate, ctx), theta
        for step in range(3):
            ctx.extra["owned_state"] = step > 0
            g = torch.sin(th + step)
            if form == "fused":
                th, lstate = alg.local_step(th, g, lstate, {"theta": theta}, cstate, None, ctx)
                assert "vhat_scale" in lstate
            else:
                th, lstate = alg.rule.reference_step(th, g, lstate, None, alg.eta_l,
                                                     layout)
        msgs[form] = alg.client_message(theta - th, lstate, cstate, ctx)[1]
    assert set(msgs["fused"]) == set(msgs["reference"]) >= {"vhat", "v", "n"}
    for k in msgs["reference"]:
        torch.testing.assert_close(msgs["fused"][k], msgs["reference"][k], rtol=1e-12,
                                   atol=1e-13)


def test_replica_rows_add_equals_the_gathered_rows():
    """FedLADA's amendment from the server rows per replica run equals adding the gathered
    rows (runs out of order, a replica in two runs), and a plain dict of rows works too."""
    from sims.algorithms.adaptive import ReplicaRows
    from sims.core.engine import _ParticipantRows
    gen = torch.Generator().manual_seed(25)
    server = _rand(gen, 3, 7)
    rep = torch.tensor([2, 2, 0, 1, 1, 0])
    x = _rand(gen, 6, 7)
    want = x + 0.3 * server[rep]
    view = _ParticipantRows({"ga": server}, rep)
    rows = ReplicaRows(view, "ga")
    torch.testing.assert_close(rows.add_to_(x.clone(), 0.3), want, rtol=0, atol=1e-15)
    assert not view._rows                      # the server rows were read, never gathered
    torch.testing.assert_close(rows.rows(), server[rep], rtol=0, atol=0)
    plain = ReplicaRows({"ga": server[rep]}, "ga")
    torch.testing.assert_close(plain.add_to_(x.clone(), 0.3), want, rtol=0, atol=1e-15)

"""sims.deferred_grad: the MLP gradient with its first weight's block left in the per-client
oneDNN outputs. Materialized it is the problem's gradient bit for bit; LocalAdaptive's C
kernel reads the block where it is (never materializing it) and steps exactly as on the
materialized gradient; every other form materializes first; whole engine runs of the
algorithms that take it are the same bits with and without deferral."""
import pytest
import torch

from sims.core import engine
from sims.accel import native
from sims.algorithms.adaptive import LocalAdaptive
from sims.algorithms.fed_lamb import MimeLite
from sims.algorithms.registry import make_for_problem
from sims.deferred_grad import DeferredGrad, materialized
from sims.problems.models import MLP
from sims.rules.optim import TrustRatio
from sims.core.participation import Participation
from sims.problems.mlp_grad import onednn_available, stack_grad

from test_generic_grad_fast import SIZES, _payload, _problem, _thetas
from conftest import require_native

pytestmark = pytest.mark.skipif(not onednn_available(torch.zeros(1)),
                                reason="no oneDNN on this build")


def _grads(prob, B=len(SIZES)):
    theta = _thetas(prob, B)
    x, y, w = prob.minibatch(_payload(prob))
    return theta, stack_grad(theta, prob.layout, x, y, w, defer=True), \
        stack_grad(theta, prob.layout, x, y, w)


def test_materialized_is_the_gradient_bit_for_bit(onednn_calls):
    prob = _problem(MLP(784, hidden=6), dtype=torch.float32)
    _, deferred, plain = _grads(prob)
    assert isinstance(deferred, DeferredGrad) and deferred.block == prob.layout.slices[0]
    assert deferred.shape == plain.shape and deferred.dtype == plain.dtype
    flat = materialized(deferred)
    assert torch.equal(flat, plain) and deferred.parts is None
    assert materialized(deferred) is flat                   # once
    assert materialized(plain) is plain


def test_no_deferral_where_no_per_client_products():
    """float64 (no oneDNN) and a first layer below the oneDNN threshold: a plain tensor."""
    for dtype in (torch.float64, torch.float32):
        prob = _problem(MLP(784, hidden=6), dtype=dtype)
        assert torch.is_tensor(_grads(prob)[1])


def test_parts_must_match_the_rows():
    with pytest.raises(ValueError, match="2 deferred parts for 3 rows"):
        DeferredGrad(torch.zeros(3, 4), slice(0, 2), [torch.zeros(2)] * 2)


RULES = {
    "fed-ams": dict(rule="amsgrad", bias_correction=True),
    "fed-lamb": dict(rule="amsgrad", bias_correction=True, trust=TrustRatio(lam=0.01)),
    "fedlada": dict(rule="amsgrad", beta2=0.99, alpha=0.3, weight_decay=0.01),
    "adam-decoupled": dict(rule="adam", bias_correction=True, weight_decay=0.01,
                           wd_mode="decoupled"),
}


@pytest.mark.parametrize("native_on", [True, False], ids=["native", "torch"])
@pytest.mark.parametrize("name", list(RULES))
def test_step_on_deferred_equals_step_on_materialized(name, native_on, onednn_calls,
                                                      monkeypatch):
    """Three steps of each rule on the deferred gradient and on its materialized copy:
    the same bits; with the C kernel on, the block was read where it is (never copied)."""
    if native_on:
        require_native()
    monkeypatch.setattr(LocalAdaptive, "native_step", native_on)
    prob = _problem(MLP(784, hidden=6), dtype=torch.float32)
    rule = LocalAdaptive(**RULES[name])
    B, d = len(SIZES), prob.d
    theta, _, _ = _grads(prob)
    zeros = torch.zeros(B, d)
    ga = torch.randn(B, d, generator=torch.Generator().manual_seed(1)) if rule.alpha != 1 \
        else None
    runs = {}
    for defer in (True, False):
        th = theta.clone()
        st = rule.start(zeros.clone(), zeros + 0.01, zeros + 0.01, torch.zeros(B))
        for step in range(3):
            x, y, w = prob.minibatch(_payload(prob))
            g = stack_grad(th, prob.layout, x, y, w, defer=defer)
            before = native.calls.get("adaptive_step", 0)
            th, st = rule.step(th, g, st, None, 0.01, prob.layout, ga=ga, owned=step > 0)
            if defer:
                assert isinstance(g, DeferredGrad)
                in_c = native.calls.get("adaptive_step", 0) > before
                assert in_c == native_on
                assert (g.parts is not None) == native_on     # the C kernel never copied it
        runs[defer] = (th, st)
    assert torch.equal(runs[True][0], runs[False][0])
    for k in runs[False][1]:
        assert torch.equal(runs[True][1][k], runs[False][1][k]), k


@pytest.mark.parametrize("native_on", [True, False], ids=["native", "torch"])
@pytest.mark.parametrize("name", ["dja", "fedadaadam", "fedada2"])
def test_full_preconditioner_reads_the_block_where_it_is(name, onednn_calls, native_on,
                                                         monkeypatch):
    """FedAda2's clients step on the deferred gradient without materializing it and give the
    bits of a step on the materialized one: through the C kernel (:mod:`sims.accel.native.sm3`,
    the rows' block addresses; SM3-II and the full preconditioner), and with it off the full
    preconditioner through torch's fused kernels on row lists (each row split around its
    block); SM3-II then materializes."""
    if native_on:
        require_native()
    from sims.algorithms.fedada2 import JointAdaptive
    monkeypatch.setattr(JointAdaptive, "native_step", native_on)
    prob = _problem(MLP(784, hidden=6), dtype=torch.float32)
    alg = make_for_problem(name, prob)
    B = len(SIZES)
    theta, _, _ = _grads(prob)
    ctx = engine.RoundContext(0, prob.layout, torch.zeros(B, dtype=torch.long),
                              torch.arange(B), torch.full((B,), -1))
    bcast = alg.broadcast(alg.init_server(theta[:1].clone()))
    rows = {k: v.expand(B, *v.shape[1:]).clone() for k, v in bcast.items()}
    results = {}
    for defer in (True, False):
        x, y, w = prob.minibatch(_payload(prob))
        g = stack_grad(theta, prob.layout, x, y, w, defer=defer)
        lstate = alg.local_start(rows, {}, ctx)
        results[defer] = alg.local_step(theta.clone(), g, lstate, rows, {}, None, ctx)
        if defer:
            assert (g.parts is not None) == (native_on or name != "fedada2")
    assert torch.equal(results[True][0], results[False][0])
    for k in results[False][1]:
        assert torch.equal(results[True][1][k], results[False][1][k]), k


@pytest.mark.parametrize("name", ["fed-ams", "fed-lamb", "fedlada", "localadam", "mimelite",
                                  "mimelite-lamb", "dja", "joint-adaptive", "fedadaadam", "fedadaadagrad",
                                  "fedada2", "fedada2-adam", "fedada2-blend"])
def test_engine_runs_equal_with_and_without_deferral(name, onednn_calls, monkeypatch):
    """Whole runs (unequal clients, partial participation): deferral changes no bit. The
    algorithms that take it were handed DeferredGrads; the others (FedAda2-blend, whose
    forms would copy the block late) never."""
    handed = []
    real = engine._run_clients

    def spy(problem, algorithm, *a, **k):
        orig = algorithm.local_step

        def local_step(theta, grad, *rest):
            handed.append(isinstance(grad, DeferredGrad))
            return orig(theta, grad, *rest)
        algorithm.local_step = local_step
        try:
            return real(problem, algorithm, *a, **k)
        finally:
            del algorithm.local_step
    monkeypatch.setattr(engine, "_run_clients", spy)
    out = {}
    for defer in (True, False):
        prob = _problem(MLP(784, hidden=6), dtype=torch.float32)
        alg = make_for_problem(name, prob)
        takes = alg.takes_deferred_grad
        monkeypatch.setattr(type(alg), "takes_deferred_grad", defer and takes)
        handed.clear()
        res = engine.run(prob, alg, Participation("fixed", m=3), 3, [0], eval_every=0)
        out[defer] = res.server
        assert handed and all(handed) == (defer and takes) and any(handed) == (defer and takes)
    def leaves(state, prefix=""):
        for k, v in state.items():
            yield from (leaves(v, f"{prefix}{k}.") if isinstance(v, dict)
                        else [(prefix + k, v)])
    got, want = dict(leaves(out[True])), dict(leaves(out[False]))
    assert got.keys() == want.keys()
    for k in want:
        assert torch.equal(got[k], want[k]), k


def test_asked_for_only_where_read_in_place(monkeypatch):
    """Fed-AMS / FedLADA ask for a deferred gradient only while the C kernel (which reads it
    in place) is on and the compiled form off; MimeLite likewise (its frozen C kernel);
    FedAda2's clients while their C kernel is on (SM3-II and the full preconditioner), the
    full preconditioner also while torch's kernels are on; the blend never (it would copy
    late)."""
    require_native()
    from sims import compiled, torch_fused
    from sims.algorithms.fedada2 import JointAdaptive
    from sims.algorithms.registry import make_algorithm
    takes = lambda n: make_algorithm(n).takes_deferred_grad       # noqa: E731
    assert takes("fed-ams") and takes("fedlada") and takes("fedadaadagrad") and takes("dja")
    assert takes("mimelite") and takes("mimelite-lamb")
    assert takes("fedada2") and takes("fedada2-adam")
    assert not takes("fedada2-blend")
    monkeypatch.setattr(LocalAdaptive, "native_step", False)
    assert not takes("fed-ams") and not takes("localadam")
    monkeypatch.setattr(JointAdaptive, "native_step", False)
    assert not takes("fedada2") and takes("dja")
    monkeypatch.undo()
    monkeypatch.setattr(MimeLite, "native_frozen", False)
    assert not takes("mimelite")
    monkeypatch.undo()
    for switch, on, name in ((compiled, True, "fed-lamb"), (compiled, True, "mimelite"),
                             (torch_fused, False, "fedada2")):
        was = switch.enabled()
        try:
            switch.enable(on)
            assert takes(name) == (switch is torch_fused)      # the C kernel reads it
            monkeypatch.setattr(JointAdaptive, "native_step", False)
            assert not takes(name) and (switch is compiled or not takes("dja"))
            monkeypatch.undo()
        finally:
            switch.enable(was)
    assert takes("fed-ams") and takes("dja")

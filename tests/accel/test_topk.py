"""TopK's C kernel (sims.accel.native.topk): exactly k kept per row, ties at the k-th
magnitude lowest index first (the readable compressor's rule), special values, any layer
offset and size; the run's executor takes it for TopK and Fed-EF's error feedback, and its
results are the readable compressor's bit for bit."""
import pytest
import torch

from sims import accel
from sims.accel import native
from sims.rules.base import Readable
from sims.rules.compress import TopK, kept_count
from sims.accel.native.topk import topk_keep
from sims.core.params import ParamLayout


needs_kernel = pytest.mark.skipif(native.library() is None,
                                  reason="C kernels off (FEDTOOLKIT_NATIVE=0) or not built")
EX = accel.Executor()             # the executor a run on the CPU gets


def _check(x, out, sl, k):
    """out[:, sl] keeps exactly k entries of x per row (x's values), every kept magnitude
    >= every dropped one, ties at the k-th magnitude the lowest indices; columns outside
    sl untouched (NaN sentinels)."""
    xs, os_ = x[:, sl], out[:, sl]
    for row_x, row_o in zip(xs, os_):
        mag = row_x.abs()
        kth = torch.sort(torch.nan_to_num(mag, nan=float("inf")), descending=True).values
        order = torch.argsort(-torch.nan_to_num(mag, nan=float("inf")), stable=True)[:k]
        want = torch.zeros_like(row_x)
        want[order] = row_x[order]
        assert torch.equal(torch.nan_to_num(row_o, nan=7.0), torch.nan_to_num(want, nan=7.0)), \
            (k, kth[:k + 2])


def _with_sentinels(x):
    return torch.full_like(x, float("nan"))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,k", [(1, 1), (5, 2), (17, 16), (300, 3), (4000, 40), (4000, 4000),
                                 (2049, 1)])
def test_keeps_the_k_largest_lowest_index_among_ties(dtype, n, k):
    g = torch.Generator().manual_seed(n * 31 + k)
    cases = [torch.randn(4, n, generator=g, dtype=dtype),
             torch.randint(-3, 4, (4, n), generator=g).to(dtype),          # many ties, zeros
             torch.randn(4, n, generator=g, dtype=dtype) * 1e-30]         # tiny magnitudes
    for x in cases:
        out = _with_sentinels(x)
        assert topk_keep(x, out, slice(0, n), k) is out
        _check(x, out, slice(0, n), k)


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_values_and_layer_offsets(dtype):
    """inf, -inf, NaN (ranked above inf, as torch.topk ranks it), -0.0 and denormals, in a
    layer that starts inside the row: the other columns are not written."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 120, generator=g, dtype=dtype)
    x[0, 20] = float("inf")
    x[0, 21] = -float("inf")
    x[1, 30] = float("nan")
    x[2, 40:60] = -0.0
    x[2, 60] = torch.finfo(dtype).tiny / 4                                # a denormal
    out = _with_sentinels(x)
    sl = slice(10, 90)
    for k in (1, 2, 3, 79, 80):
        topk_keep(x, out, sl, k)
        _check(x, out, sl, k)
        assert torch.isnan(out[:, :10]).all() and torch.isnan(out[:, 90:]).all()


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_split_over_threads_agree(threads, monkeypatch):
    g = torch.Generator().manual_seed(9)
    x = torch.randint(-50, 50, (7, 5000), generator=g).float()
    one = topk_keep(x, torch.empty_like(x), slice(0, 5000), 100)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    assert torch.equal(topk_keep(x, torch.empty_like(x), slice(0, 5000), 100), one)


@needs_kernel
@pytest.mark.parametrize("scope", ["layer", "model"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compressor_forms_agree(scope, dtype):
    """The compressor's C form equals its readable form exactly, with ties too; the C form
    was the one taken."""
    layout = ParamLayout(("w", "b", "v"), ((40, 200), (40,), (3000,)))
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, layout.d, generator=g, dtype=dtype)
    x[0, 100:400] = 0.5                                      # ties at the threshold
    comp = TopK(0.01, scope=scope)
    before = native.calls.get("topk_keep", 0)
    got = EX.compress(comp, x, layout)
    assert native.calls.get("topk_keep", 0) > before
    want = comp(x, layout)
    assert torch.equal(got, want)
    sizes = layout.sizes if scope == "layer" else (layout.d,)
    assert int((got != 0).sum()) == 6 * sum(kept_count(0.01, s) for s in sizes)


def test_unusable_inputs_fall_back():
    x = torch.randn(3, 50)
    assert topk_keep(x.half(), torch.empty(3, 50).half(), slice(0, 50), 5) is None
    assert topk_keep(x, torch.empty(3, 50, dtype=torch.float64), slice(0, 50), 5) is None
    assert topk_keep(x.t(), torch.empty(50, 3), slice(0, 3), 1) is None     # not contiguous
    layout = ParamLayout.single(50)
    torch.testing.assert_close((TopK(0.1)(x.half(), layout) != 0).sum(1),
                               torch.full((3,), 5))


@needs_kernel
@pytest.mark.parametrize("scope", ["layer", "model"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_error_feedback_in_one_kernel_equals_the_three_steps(scope, dtype):
    """Error feedback with TopK (Fed-EF Alg. 2 lines 11-12) through the one C kernel gives
    the bits of ``target = x + e``, the selection, ``target - msg``; with ties too
    (integer-valued entries)."""
    from sims.rules.compress import Sign, error_feedback
    layout = ParamLayout(("w", "b", "v"), ((40, 200), (40,), (3000,)))
    g = torch.Generator().manual_seed(4)
    comp = TopK(0.01, scope=scope)
    for x, e in ((torch.randn(5, layout.d, generator=g, dtype=dtype),
                  torch.randn(5, layout.d, generator=g, dtype=dtype)),
                 (torch.randint(-3, 4, (5, layout.d), generator=g).to(dtype),
                  torch.randint(-3, 4, (5, layout.d), generator=g).to(dtype))):
        before = native.calls.get("ef_topk", 0)
        fused = EX.error_feedback(comp, x, e, layout)
        assert native.calls.get("ef_topk", 0) == before + 1
        target = x + e
        msg = comp(target, layout)
        for got, want in zip(fused, (target, msg, target - msg)):
            assert torch.equal(got, want)
        for got, want in zip(fused, error_feedback(comp, x, e, layout)):
            assert torch.equal(got, want)
    sign = EX.error_feedback(Sign(), x, e, layout)          # no fast form: the three steps
    assert torch.equal(sign[1], Sign()(x + e, layout))


@pytest.mark.accel
@needs_kernel
@pytest.mark.parametrize("name", ["fed-ef-sgd", "fed-ef-ams"])
def test_fed_ef_runs_equal_with_the_fused_error_feedback(name, monkeypatch):
    """Whole Fed-EF runs (TopK-0.01, error feedback) with the one-kernel error feedback and
    with the three steps: the same bits."""
    from sims.core import engine
    from sims.algorithms.registry import make_for_problem
    from sims.problems.models import MLP
    from sims.core.participation import Participation
    from test_generic_grad_fast import _problem
    out = {}
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(accel.Executor, "error_feedback", Readable.error_feedback)
        prob = _problem(MLP(784, hidden=6), dtype=torch.float32)
        before = native.calls.get("ef_topk", 0)
        res = engine.run(prob, make_for_problem(name, prob), Participation("fixed", m=3), 3,
                         [0], eval_every=0)
        assert (native.calls.get("ef_topk", 0) > before) == fused
        out[fused] = res.server
    assert torch.equal(out[True]["theta"], out[False]["theta"])

"""TopK's C kernel on rows long enough for its sampled threshold (sims/accel/native/topk.c
steps 1-4), in every form: AVX-512, AVX2 or no vector forms (as many as are compiled in),
sampling on and off (every row then histograms its whole first bits). Each form keeps
exactly the k largest magnitudes with ties lowest index first (the readable rule: a stable
sort, test_topk._check), and Fed-EF's one-kernel error feedback gives target = x + e, that
selection of it, and target - msg bit for bit."""
import itertools

import pytest
import torch

from sims import accel
from sims.accel import native
from sims.rules.compress import TopK, error_feedback, kept_count
from sims.accel.native import topk as native_topk
from sims.core.params import ParamLayout
from test_topk import _check, _with_sentinels

SIMD = native_topk.configure() if native.library() is not None else None   # level built
FORMS = list(itertools.product(range((SIMD or 0) + 1), (True, False)))
EX = accel.Executor()             # the executor a run on the CPU gets


@pytest.fixture
def form(request):
    simd, sampling = request.param
    native_topk.configure(simd=simd, sampling=sampling)
    yield simd, sampling
    native_topk.configure(simd=SIMD, sampling=True)


needs_kernel = pytest.mark.skipif(SIMD is None, reason="C kernels off or not built")


def with_forms(test):
    return needs_kernel(pytest.mark.parametrize(
        "form", FORMS, indirect=True, ids=[f"simd{a}-sample{int(b)}" for a, b in FORMS])(test))


def _sample_positions(n):
    """topk.c's sample (TOPK_SAMPLE_RUNS = 128 runs of TOPK_SAMPLE_LEN = 16 at TOPK_RUN)."""
    return torch.cat([torch.arange(r * (n - 16) // 127, r * (n - 16) // 127 + 16)
                      for r in range(128)])


def _rows(n, dtype, g):
    """Rows that stress each step: continuous, heavy ties, tiny and special values, mostly
    zeros, and one whose sample misleads (large exactly where step 1 looks)."""
    gauss = torch.randn(3, n, generator=g, dtype=dtype)
    ties = torch.randint(-3, 4, (3, n), generator=g).to(dtype)
    tiny = torch.randn(2, n, generator=g, dtype=dtype) * 1e-30
    special = torch.randn(2, n, generator=g, dtype=dtype)
    special[0, ::997] = float("inf")
    special[0, 5::1009] = -float("inf")
    special[1, 3::1013] = float("nan")
    special[1, 100:3000] = -0.0
    special[1, 7::503] = torch.finfo(dtype).tiny / 4                      # denormals
    sparse = torch.zeros(2, n, dtype=dtype)
    sparse[:, torch.randperm(n, generator=g)[:50]] = 1.0 + torch.rand(50, generator=g,
                                                                         dtype=dtype)
    misled = torch.randn(2, n, generator=g, dtype=dtype) * 1e-3
    pos = _sample_positions(n)
    misled[:, pos] = 10 + torch.rand(2, len(pos), generator=g, dtype=dtype)
    return torch.cat([gauss, ties, tiny, special, sparse, misled])


@with_forms
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,k", [(40000, 400), (40000, 1), (40001, 3000), (16390, 1000),
                                 (40000, 9000)])
def test_long_rows_keep_the_k_largest_lowest_index_among_ties(form, dtype, n, k):
    g = torch.Generator().manual_seed(n + k)
    x = _rows(n, dtype, g)
    before = native_topk.misled_rows()
    out = _with_sentinels(x)
    assert native_topk.topk_keep(x, out, slice(0, n), k) is out
    _check(x, out, slice(0, n), k)
    misled = native_topk.misled_rows() - before
    sampled = form[1] and 4 * (int(1.5 * k * 2048 / n + 3 * (k * 2048 / n) ** 0.5) + 16) <= 2048
    assert (misled > 0) == (sampled and k > 100), misled     # the misleading rows fall back


@with_forms
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_long_rows_inside_a_wider_tensor(form, dtype):
    """A layer that starts and ends inside the row, not a multiple of 16 long: the columns
    outside it are not written."""
    g = torch.Generator().manual_seed(3)
    x = _rows(20000 + 37, dtype, g)
    sl = slice(13, 20000 + 13 + 5)
    out = _with_sentinels(x)
    native_topk.topk_keep(x, out, sl, 211)
    _check(x, out, sl, 211)
    assert torch.isnan(out[:, :13]).all() and torch.isnan(out[:, sl.stop:]).all()


@with_forms
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_error_feedback_on_long_rows_is_the_rule(form, dtype):
    """Fed-EF Alg. 2 lines 11-12 through the one kernel on a layout with long layers:
    target = x + e exactly, msg the k largest of target (ties lowest index first), residual
    = target - msg exactly (NaN where inf was kept, as the subtraction gives)."""
    layout = ParamLayout(("w", "b", "v"), ((100, 200), (37,), (17000,)))
    g = torch.Generator().manual_seed(11)
    x = _rows(layout.d, dtype, g)
    e = torch.randn(x.shape, generator=g, dtype=dtype) * 1e-2
    e[4:7] = torch.randint(-2, 3, (3, layout.d), generator=g).to(dtype)  # ties after the sum
    comp = TopK(0.01)
    before = native.calls.get("ef_topk", 0)
    target, msg, res = EX.error_feedback(comp, x, e, layout)
    assert native.calls.get("ef_topk", 0) == before + 1
    assert torch.equal(target.nan_to_num(7.0), (x + e).nan_to_num(7.0))
    for sl, size in zip(layout.slices, layout.sizes):
        _check(target, msg, sl, kept_count(0.01, size))
    assert torch.equal(res.nan_to_num(7.0), (target - msg).nan_to_num(7.0))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_form_selects_the_same(dtype):
    """The four forms, on the same long rows: the same messages and residuals."""
    layout = ParamLayout(("w", "v"), ((50, 400), (1000,)))
    g = torch.Generator().manual_seed(12)
    x = _rows(layout.d, dtype, g)
    e = torch.randn(x.shape, generator=g, dtype=dtype)
    got = []
    try:
        for simd, sampling in FORMS:
            native_topk.configure(simd=simd, sampling=sampling)
            got.append([t.nan_to_num(7.0) for t in EX.error_feedback(TopK(0.02), x, e, layout)]
                       + [EX.compress(TopK(0.02), x, layout).nan_to_num(7.0)])
    finally:
        native_topk.configure(simd=SIMD, sampling=True)
    for other in got[1:]:
        assert all(torch.equal(a, b) for a, b in zip(got[0], other))


@needs_kernel
@pytest.mark.parametrize("threads", [2, 3])
def test_long_rows_split_over_threads_agree(threads, monkeypatch):
    """Rows split over OpenMP threads (each its own workspace): the same bits as one."""
    layout = ParamLayout(("w", "v"), ((60, 400), (900,)))
    g = torch.Generator().manual_seed(13)
    x = _rows(layout.d, torch.float32, g)
    e = torch.randn(x.shape, generator=g)
    one = [t.nan_to_num(7.0) for t in EX.error_feedback(TopK(0.01), x, e, layout)]
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    many = [t.nan_to_num(7.0) for t in EX.error_feedback(TopK(0.01), x, e, layout)]
    assert all(torch.equal(a, b) for a, b in zip(one, many))


@pytest.mark.parametrize("native_on", [True, False])
def test_error_feedback_readable_form_is_the_rule(native_on):
    """The readable error feedback (x + e, the lowest-index-among-ties selection, target -
    msg) and the executor's (the C kernel where it is built; FEDTOOLKIT_NATIVE=0 runs this
    with the library off) both keep the rule on long rows."""
    layout = ParamLayout(("w", "v"), ((60, 400), (900,)))
    g = torch.Generator().manual_seed(14)
    x = torch.randn(4, layout.d, generator=g, dtype=torch.float64)
    e = torch.randn(4, layout.d, generator=g, dtype=torch.float64) * 0.1
    before = native.calls.get("ef_topk", 0)
    run_ef = EX.error_feedback if native_on else error_feedback
    target, msg, res = run_ef(TopK(0.01), x, e, layout)
    assert (native.calls.get("ef_topk", 0) > before) == (native_on and SIMD is not None)
    assert torch.equal(target, x + e) and torch.equal(res, target - msg)
    for sl, size in zip(layout.slices, layout.sizes):
        _check(target, msg, sl, kept_count(0.01, size))

"""``SM3Cover.cover_max_nonneg`` (the fused FedAda2 client step's cover maxima, issue 16) is
``SM3Cover.cover_max`` exactly on the non-negative inputs it is used for: a large layer
reduced participant by participant over the integer view, small layers over the whole
batch, vectors copied, float types without an integer view of their width falling back.

The SM3-II step in one C pass (:func:`sims.accel.native.sm3.sm3_step`, which takes the cover
minimum, the step and the cover maxima per row and layer) on the same covers: equal to the
eager :func:`sims.rules.optim.sm3_adagrad_step` / :func:`sims.rules.optim.sm3_adam_step` in float64 at
1e-12 (and to rounding in float32), its new accumulators exactly ``cover_max`` of its own
``nu`` (a NaN propagated as there), in place and into new tensors, on a subset of rows, on
several threads as on one, the full cover (every layer a vector); its layer description and
the covers it declines."""
from __future__ import annotations

import pytest
import torch

from sims.accel import native
from sims.accel.native import sm3
from sims.rules.optim import SM3Cover, sm3_adagrad_step, sm3_adam_step
from sims.core.params import ParamLayout
from conftest import require_native


class _Net(torch.nn.Module):
    """A layer above the blocking threshold (260 x 130 = 33,800 coordinates), a small matrix,
    a 3-axis tensor and biases."""

    def __init__(self):
        super().__init__()
        self.big = torch.nn.Linear(130, 260)
        self.small = torch.nn.Linear(260, 7)
        self.cube = torch.nn.Parameter(torch.zeros(3, 4, 5))


@pytest.fixture
def layout():
    lay = ParamLayout.from_module(_Net())
    assert max(sl.stop - sl.start for sl in lay.slices) >= SM3Cover._BLOCK_MIN   # blocked
    return lay


def _nonneg(B, d, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(B, d, generator=gen, dtype=torch.float64).to(dtype) * 3
    x[:, ::7] = 0.0                                             # ties at zero
    x[:, 1::11] = torch.finfo(dtype).tiny / 4                   # subnormals
    x[:, 2::13] = torch.finfo(dtype).max
    x[0, 5] = float("inf")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B", [1, 3])
def test_equals_cover_max_on_nonnegative_inputs(layout, dtype, B):
    for full in (False, True):
        cover = SM3Cover(layout, full=full)
        x = _nonneg(B, layout.d, dtype, seed=B)
        got = cover.cover_max_nonneg(x)
        assert got.dtype == dtype and got.shape == (B, cover.size)
        assert torch.equal(got, cover.cover_max(x))


def test_a_nan_propagates_as_through_amax(layout):
    cover = SM3Cover(layout)
    x = _nonneg(2, layout.d, torch.float32, seed=7)
    x[1, 3] = float("nan")                                      # in the big layer
    x[0, layout.d - 1] = float("nan")                           # in a vector
    want, got = cover.cover_max(x), cover.cover_max_nonneg(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.isnan(got).any()
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want))


def test_types_without_an_integer_view_and_strided_inputs_fall_back(layout):
    cover = SM3Cover(layout)
    x = _nonneg(2, layout.d, torch.float32, seed=3)
    half = x.to(torch.bfloat16)
    assert torch.equal(cover.cover_max_nonneg(half), cover.cover_max(half))
    wide = torch.cat([x, x], 1)[:, layout.d:]                   # not contiguous
    assert not wide.is_contiguous()
    assert torch.equal(cover.cover_max_nonneg(wide), cover.cover_max(wide))


# ------------------------------------------------------------------------------ C kernel

@pytest.fixture
def built():
    require_native()


def _kernel_inputs(cover, B, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    d = cover.layout.d

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    mu = torch.rand(B, cover.size, generator=gen, dtype=torch.float64).to(dtype)
    mu[:, ::5] = 0.0                                           # zero accumulators, ties
    return rand(B, d), rand(B, d), 0.1 * rand(B, d), mu


def _c_step(cover, theta, g, m, mu, adam, c1, c2, rows=None, in_place=False):
    """The kernel's step into new tensors (``in_place``: into clones of the inputs, passed
    as their own outputs); returns ``(theta, m, mu, nu)`` (``m`` None for AdaGrad)."""
    if in_place:
        outs = [theta.clone(), m.clone() if adam else None, mu.clone()]
        ins = outs
    else:
        outs = [theta.clone(), m.clone() if adam else None, mu.clone()]
        ins = [theta, m if adam else None, mu]
    nu = torch.full_like(theta, -1.0)
    assert sm3.sm3_step(cover, ins[0], g, ins[2], 0.05, 1e-3, m=ins[1], beta1=0.9,
                        beta2=0.99, c1=c1, c2=c2, rows=rows, theta_out=outs[0],
                        mu_out=outs[2], m_out=outs[1], nu_out=nu)
    return outs[0], outs[1], outs[2], nu


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("adam", [False, True])
def test_kernel_equals_the_eager_sm3_step(layout, built, adam, full, in_place):
    """float64, three rows, bias corrections per row (Adam; and off): theta, m, nu at 1e-12,
    the accumulators exactly the cover maxima of the kernel's nu."""
    cover = SM3Cover(layout, full=full)
    theta, g, m, mu = _kernel_inputs(cover, 3, torch.float64, seed=1)
    for c1, c2 in ([None, None], [torch.tensor([0.1, 0.5, 1.0], dtype=torch.float64),
                                  torch.tensor([0.002, 0.3, 1.0], dtype=torch.float64)]):
        if not adam and c1 is not None:
            continue
        before = native.calls.get("sm3_step", 0)
        th, m_new, mu_new, nu = _c_step(cover, theta, g, m, mu, adam, c1, c2,
                                        in_place=in_place)
        assert native.calls["sm3_step"] == before + 1
        if adam:
            want = sm3_adam_step(cover, theta, g, m, mu, 0.05, 1e-3, not full, 0.9, 0.99,
                                 None if c1 is None else c1[:, None],
                                 None if c2 is None else c2[:, None])
            th_r, m_r, mu_r, nu_r = want
            torch.testing.assert_close(m_new, m_r, rtol=1e-12, atol=1e-12)
        else:
            th_r, mu_r, nu_r = sm3_adagrad_step(cover, theta, g, mu, 0.05, 1e-3, not full)
        torch.testing.assert_close(th, th_r, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(nu, nu_r, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(mu_new, mu_r, rtol=1e-12, atol=1e-12)
        assert torch.equal(mu_new, cover.cover_max(nu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_on_a_subset_of_rows_and_on_threads(layout, built, dtype):
    """Rows 3, 0 of four (in that order, their own bias corrections): those rows as the
    whole-batch step of them, the others untouched; two threads equal one bit for bit."""
    cover = SM3Cover(layout)
    theta, g, m, mu = _kernel_inputs(cover, 4, dtype, seed=2)
    rows = torch.tensor([3, 0])
    c1, c2 = torch.tensor([0.2, 0.7], dtype=dtype), torch.tensor([0.01, 0.4], dtype=dtype)
    got = _c_step(cover, theta, g, m, mu, True, c1, c2, rows=rows)
    alone = _c_step(cover, theta[rows], g[rows], m[rows], mu[rows], True, c1, c2)
    for x, y, src in zip(got, alone, (theta, m, mu, None)):
        assert torch.equal(x[rows], y)
        if src is not None:
            assert torch.equal(x[[1, 2]], src[[1, 2]])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = _c_step(cover, theta, g, m, mu, True, None, None)
        torch.set_num_threads(1)
        one = _c_step(cover, theta, g, m, mu, True, None, None)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(x, y) for x, y in zip(one, two))


def test_kernel_in_float32_is_the_eager_step_to_rounding(layout, built):
    cover = SM3Cover(layout)
    theta, g, m, mu = _kernel_inputs(cover, 3, torch.float32, seed=3)
    th, m_new, mu_new, nu = _c_step(cover, theta, g, m, mu, True, None, None)
    th_r, m_r, mu_r, nu_r = sm3_adam_step(cover, theta, g, m, mu, 0.05, 1e-3, True, 0.9,
                                          0.99)
    for x, y in ((th, th_r), (m_new, m_r), (nu, nu_r), (mu_new, mu_r)):
        torch.testing.assert_close(x, y)
    assert torch.equal(mu_new, cover.cover_max(nu))


def test_kernel_propagates_a_nan_to_the_maxima(layout, built):
    cover = SM3Cover(layout)
    theta, g, m, mu = _kernel_inputs(cover, 2, torch.float32, seed=4)
    g[1, 3] = float("nan")                                      # in the big layer
    g[0, layout.d - 1] = float("nan")                           # in a vector
    _, _, mu_new, nu = _c_step(cover, theta, g, m, mu, False, None, None)
    want = cover.cover_max(nu)
    assert torch.equal(torch.isnan(mu_new), torch.isnan(want)) and torch.isnan(want).any()
    assert torch.equal(torch.nan_to_num(mu_new), torch.nan_to_num(want))


def test_layer_description_and_declined_covers(layout, built):
    small = ParamLayout(("w", "b", "t"), ((2, 3), (3,), (2, 1, 2)))
    desc, layers = sm3.layer_desc(SM3Cover(small))
    assert layers == 3
    assert desc.tolist() == [0, 0, 2, 2, 3,   6, 5, 1, 3,   9, 8, 3, 2, 1, 2]
    full, n = sm3.layer_desc(SM3Cover(small, full=True))
    assert n == 3 and full.tolist() == [0, 0, 1, 6,   6, 6, 1, 3,   9, 9, 1, 4]
    deep = SM3Cover(ParamLayout(("x",), ((2,) * 9,)))          # 9 axes: more than the C side
    assert sm3.layer_desc(deep) is None
    x = torch.zeros(1, deep.layout.d, dtype=torch.float64)
    mu = torch.zeros(1, deep.size, dtype=torch.float64)
    assert not sm3.applies(deep, x, x, mu)
    assert not sm3.sm3_step(deep, x, x, mu, 0.1, 1e-3, theta_out=x, mu_out=mu)
    cover = SM3Cover(layout)
    theta, g, m, mu = _kernel_inputs(cover, 2, torch.float64, seed=5)
    assert not sm3.applies(cover, theta, g.float(), mu)         # mixed types
    assert not sm3.applies(cover, theta, g.t().contiguous().t(), mu)   # strided
    native.enable(False)
    try:
        assert not sm3.applies(cover, theta, g, mu)
    finally:
        native.enable(True)

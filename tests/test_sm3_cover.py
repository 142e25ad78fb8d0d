"""``SM3Cover.cover_max_nonneg`` (the fused FedAda2 client step's cover maxima, issue 16) is
``SM3Cover.cover_max`` exactly on the non-negative inputs it is used for: a large layer
reduced participant by participant over the integer view, small layers over the whole
batch, vectors copied, float types without an integer view of their width falling back."""
from __future__ import annotations

import pytest
import torch

from sims.optim import SM3Cover
from sims.params import ParamLayout


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

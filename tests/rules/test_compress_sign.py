"""Fed-EF's grouped Sign (and heavy-Sign through it), written into its output block by block
(sims.rules.compress._grouped_sign), equals the form ``||x_I||_1 / divisor_I * sign(x_I)``
formed per block and copied in, bit for bit, with zeros, a zero block, inf and NaN."""
import pytest
import torch

from sims.rules.compress import HeavySign, Sign, TopK, layer_blocks
from sims.core.params import ParamLayout

LAYOUT = ParamLayout(("w", "b", "v"), ((30, 50), (30,), (700,)))


def _readable(x, blocks, divisor=None):
    parts = []
    for sl in blocks.slices:
        block = x[:, sl]
        denom = block.shape[1] if divisor is None else divisor(block)
        parts.append(block.abs().sum(1, keepdim=True) / denom * torch.sign(block))
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("scope", ["layer", "model"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grouped_sign_in_place_is_the_readable_form(scope, dtype):
    g = torch.Generator().manual_seed(21)
    x = torch.randn(5, LAYOUT.d, generator=g, dtype=dtype)
    x[0, :1500] = 0.0                                         # a zero layer
    x[1, 7] = float("inf")
    x[2, 1600] = float("nan")
    x[3, ::3] = -0.0
    blocks = layer_blocks(LAYOUT, scope)
    got = Sign(scope=scope)(x, LAYOUT)
    assert torch.equal(got.nan_to_num(7.0, 8.0, 9.0), _readable(x, blocks).nan_to_num(7.0, 8.0, 9.0))
    for scale in ("kept", "full"):
        sparse = TopK(0.1, scope=scope)(x, LAYOUT)
        div = (None if scale == "full"
               else lambda b: (b != 0).sum(1, keepdim=True).clamp_min(1))
        want = _readable(sparse, blocks, div)
        got = HeavySign(0.1, scope=scope, scale=scale)(x, LAYOUT)
        assert torch.equal(got.nan_to_num(7.0, 8.0, 9.0), want.nan_to_num(7.0, 8.0, 9.0))

"""Compressors (Fed-EF spec section 2): selection, scales, unbiasedness, the q_C bound, bit
accounting, parsing, and equality of the fast batched compressors with the naive reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sims.rules import compress as C
from sims.rules.compress import CompressorError, HeavySign, Identity, Sign, Stoc, TopK, kept_count, make_compressor
from sims.problems.models import make_model
from sims.core.params import ParamLayout
from sims.reference.fed_ef import reference_compress

# blocks of 63, 3, 1 and 150 coordinates: flooring, a single-coordinate block, a big block
LAYOUT = ParamLayout(("w", "b", "c", "v"), ((7, 9), (3,), (1,), (150,)))
D = LAYOUT.d
F64 = torch.float64


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=gen(seed), dtype=F64)


def assert_rel_close(a, b, rtol=1e-15):
    """Element-wise ``|a - b| <= rtol |b|`` (b broadcast), without torch.testing's import cost."""
    b = torch.as_tensor(b, dtype=a.dtype).expand_as(a)
    assert bool(((a - b).abs() <= rtol * b.abs()).all()), (a, b)


def blocks(layout, scope):
    return layout.slices if scope == "layer" else (slice(0, layout.d),)


# ----------------------------------------------------------------------------- TopK

@pytest.mark.parametrize("scope", ["layer", "model"])
@pytest.mark.parametrize("k", [0.001, 0.01, 0.1, 0.37, 0.5, 1.0])
def test_topk_keeps_exact_count_of_largest(scope, k):
    x = randn(5, D, seed=1) * torch.rand(5, D, generator=gen(2), dtype=F64).pow(3)
    out = TopK(k, scope=scope)(x, LAYOUT)
    assert out.shape == x.shape and out.dtype == x.dtype
    for sl in blocks(LAYOUT, scope):
        size = sl.stop - sl.start
        keep = max(1, math.floor(k * size))
        for row in range(x.shape[0]):
            xb, ob = x[row, sl], out[row, sl]
            kept = ob != 0
            assert int(kept.sum()) == keep                       # exactly max(1, floor(k d_l))
            assert torch.equal(ob[kept], xb[kept])               # values copied unchanged
            if keep < size:                                      # and they are the largest
                assert xb[kept].abs().min() >= xb[~kept].abs().max()


def test_kept_count_formula():
    assert kept_count(0.01, 150) == 1          # max(1, floor(1.5))
    assert kept_count(0.001, 150) == 1         # the max(1, .) guard
    assert kept_count(0.1, 63) == 6
    assert kept_count(1.0, 7) == 7
    assert kept_count(0.5, 1) == 1


def test_topk_layer_scope_keeps_every_layer_alive():
    # one huge layer next to tiny ones: per-layer TopK still sends something from every layer,
    # a whole-model TopK does not (footnote 2's reason for the max(1, .))
    x = torch.cat([torch.full((1, 63), 1e6, dtype=F64), torch.ones(1, D - 63, dtype=F64)], 1)
    per_layer = TopK(0.01)(x, LAYOUT)
    whole = TopK(0.01, scope="model")(x, LAYOUT)
    for sl in LAYOUT.slices:
        assert per_layer[0, sl].count_nonzero() >= 1
    assert whole[0, 63:].count_nonzero() == 0


# ----------------------------------------------------------------------------- Sign / hv-Sign

@pytest.mark.parametrize("scope", ["layer", "model"])
def test_sign_scale_is_block_mean_abs_and_signs_match(scope):
    x = randn(4, D, seed=3)
    x[0, 5] = 0.0                              # a zero stays zero and counts in d_l
    out = Sign(scope=scope)(x, LAYOUT)
    for sl in blocks(LAYOUT, scope):
        for row in range(4):
            xb, ob = x[row, sl], out[row, sl]
            scale = xb.abs().sum() / xb.numel()
            assert_rel_close(ob.abs()[xb != 0], scale)
            assert torch.equal(torch.sign(ob), torch.sign(xb))
    assert out[0, 5] == 0


@pytest.mark.parametrize("scope", ["layer", "model"])
@pytest.mark.parametrize("scale", ["kept", "full"])
@pytest.mark.parametrize("k", [0.01, 0.1, 0.5])
def test_heavy_sign_both_scale_readings(scope, scale, k):
    x = randn(3, D, seed=4)
    out = HeavySign(k, scope=scope, scale=scale)(x, LAYOUT)
    sparse = TopK(k, scope=scope)(x, LAYOUT)
    for sl in blocks(LAYOUT, scope):
        size = sl.stop - sl.start
        for row in range(3):
            sb, ob = sparse[row, sl], out[row, sl]
            kept = sb != 0
            assert torch.equal(ob != 0, kept)                    # support of TopK
            assert torch.equal(torch.sign(ob), torch.sign(sb))
            l1 = sb.abs().sum()
            expected = l1 / int(kept.sum()) if scale == "kept" else l1 / size
            assert_rel_close(ob.abs()[kept], expected)


def test_heavy_sign_kept_scale_with_fewer_nonzeros_than_k():
    # a block with fewer non-zeros than max(1, floor(k d)) (dead units in a network): the
    # "kept" scale is the mean |value| of the kept non-zero entries, and the reference agrees
    layout = ParamLayout.single(40)
    x = torch.zeros(1, 40, dtype=F64)
    x[0, [3, 17, 29]] = torch.tensor([2.0, -1.0, 0.5], dtype=F64)   # 3 non-zeros, keep = 20
    out = HeavySign(0.5)(x, layout)
    expected = torch.zeros_like(x)
    expected[0, [3, 17, 29]] = torch.tensor([1.0, -1.0, 1.0], dtype=F64) * 3.5 / 3
    assert_rel_close(out, expected)
    assert torch.equal(reference_compress(HeavySign(0.5), x[0], layout), out[0])
    full = HeavySign(0.5, scale="full")
    assert_rel_close(full(x, layout), expected * 3 / 40)
    assert torch.equal(reference_compress(full, x[0], layout), full(x, layout)[0])


# ----------------------------------------------------------------------------- Stoc

@pytest.mark.parametrize("b", [1, 2, 4])
def test_stoc_levels_and_signs(b):
    s = 2 ** (b - 1)
    x = randn(1, 30, seed=5)
    x[0, 7] = 0.0
    layout = ParamLayout.single(30)
    u = torch.rand(500, 30, generator=gen(6), dtype=F64)
    q = Stoc(b)(x.expand(500, -1), layout, u)
    norm = x.norm()
    levels = q.abs() / norm * s                                   # must be integers l
    assert torch.allclose(levels, levels.round(), atol=1e-12, rtol=0)
    a = x.abs() / norm
    lo = torch.clamp(torch.floor(a * s), max=s - 1)
    assert ((levels.round() == lo) | (levels.round() == lo + 1)).all()   # neighbouring levels
    nz = q != 0
    assert torch.equal(torch.sign(q)[nz], torch.sign(x).expand_as(q)[nz])
    assert not q[:, 7].any()                                      # zero maps to zero


@pytest.mark.parametrize("b", [1, 2, 3])
def test_stoc_is_unbiased(b):
    # mean of N independent quantizations is within 6 standard errors of x, coordinate-wise,
    # with the variance of eq. (4): ||x||^2 g(1-g)/s^2, g = a s - l
    s, N, d = 2 ** (b - 1), 20000, 12
    layout = ParamLayout.single(d)
    x = randn(1, d, seed=7) * 3
    u = torch.rand(N, d, generator=gen(8), dtype=F64)
    q = Stoc(b)(x.expand(N, -1), layout, u)
    norm = float(x.norm())
    a = x.abs() / norm
    g = a * s - torch.clamp(torch.floor(a * s), max=s - 1)
    var = norm ** 2 * g * (1 - g) / s ** 2
    se = (var / N).sqrt()
    assert ((q.mean(0) - x[0]).abs() <= 6 * se[0] + 1e-12).all()
    # and the empirical variance is the predicted one (so the test above is not vacuous)
    np.testing.assert_allclose(q.var(0).numpy(), var[0].numpy(), rtol=0.1, atol=1e-9)
    assert float(var.sum()) > 0


def test_stoc_needs_uniforms():
    with pytest.raises(CompressorError):
        Stoc(2)(randn(1, 5), ParamLayout.single(5))


# ----------------------------------------------------------------------------- q_C bound

def _families(d: int, seed: int) -> list[torch.Tensor]:
    g = gen(seed)
    gauss = torch.randn(300, d, generator=g, dtype=F64)
    cauchy = torch.distributions.Cauchy(0.0, 1.0).sample((300, d)).to(F64)
    student = torch.distributions.StudentT(1.5).sample((300, d)).to(F64)
    sparse = gauss * (torch.rand(300, d, generator=g, dtype=F64) < 0.1)
    sparse[sparse.abs().sum(1) == 0, 0] = 1.0
    scales = torch.logspace(-3, 3, 300, dtype=F64).unsqueeze(1)
    equal = torch.sign(torch.randn(20, d, generator=g, dtype=F64))            # TopK worst case
    one_hot = torch.zeros(d, d, dtype=F64)
    one_hot[range(d), range(d)] = 1.0                                          # 1-sparse
    near_one = torch.full((d, d), 1e-9, dtype=F64) + one_hot                   # Sign worst case
    return [gauss, cauchy, student, sparse, gauss * scales, equal, one_hot, near_one]


def _ratios(comp, x, layout):
    return ((comp(x, layout) - x) ** 2).sum(1) / (x ** 2).sum(1)


BOUND_LAYOUTS = [LAYOUT, ParamLayout(("a", "b"), ((2,), (5,))), ParamLayout.single(40)]
BOUND_COMPRESSORS = (
    [TopK(k, scope=s) for k in (0.01, 0.1, 0.3, 0.9) for s in ("layer", "model")]
    + [Sign(), Sign(scope="model")]
    + [HeavySign(k, scale=sc, scope=s) for k in (0.01, 0.1, 0.5, 0.9)
       for sc in ("kept", "full") for s in ("layer", "model")])


@pytest.mark.parametrize("li", range(len(BOUND_LAYOUTS)))
def test_q2_bound_holds_on_many_vectors(li):
    layout = BOUND_LAYOUTS[li]
    torch.manual_seed(li)
    xs = torch.cat(_families(layout.d, seed=10 + li))
    # whole vectors built from blocks that are individually 1-sparse / equal-magnitude
    per_block = torch.zeros(layout.d, layout.d, dtype=F64)
    for i in range(layout.d):
        for sl in layout.slices:
            per_block[i, sl.start + i % (sl.stop - sl.start)] = 1.0 + i
    xs = torch.cat([xs, per_block])
    for comp in BOUND_COMPRESSORS:
        bound = comp.q2_bound(layout)
        assert 0.0 <= bound < 1.0, comp
        worst = float(_ratios(comp, xs, layout).max())
        assert worst <= bound * (1 + 1e-12), (comp, worst, bound)


def test_q2_bounds_are_tight_where_the_paper_says():
    layout = ParamLayout.single(50)
    # TopK: equal magnitudes attain 1 - k_l/d_l
    x = torch.ones(1, 50, dtype=F64)
    comp = TopK(0.1)
    assert _ratios(comp, x, layout).item() == pytest.approx(comp.q2_bound(layout), abs=1e-15)
    assert comp.q2_bound(layout) == pytest.approx(1 - 5 / 50)
    # Sign: a nearly 1-sparse block attains 1 - 1/d in the limit; exactly 1-sparse gives (1-1/d)^2
    near = torch.full((1, 50), 1e-9, dtype=F64)
    near[0, 0] = 2.0
    assert _ratios(Sign(), near, layout).item() == pytest.approx(1 - 1 / 50, abs=1e-6)
    one = torch.zeros(1, 50, dtype=F64)
    one[0, 0] = 2.0
    assert _ratios(Sign(), one, layout).item() == pytest.approx((1 - 1 / 50) ** 2, rel=1e-14)
    assert Sign().q2_bound(LAYOUT) == pytest.approx(1 - 1 / 150)
    assert TopK(0.1).q2_bound(LAYOUT) == pytest.approx(1 - 6 / 63)  # min_l k_l/d_l: 6 of 63
    assert Identity().q2_bound(LAYOUT) == 0.0
    assert math.isnan(Stoc(2).q2_bound(LAYOUT))


def test_heavy_sign_bound_accounts_for_flooring():
    # Prop. 3.2's printed 1 - k/d fails when flooring keeps fewer than k d entries:
    # d = 2, k = 0.9 keeps 1 entry; x = (1, 1) with the literal ("full") scale gives 0.625 > 0.55
    layout = ParamLayout.single(2)
    x = torch.ones(1, 2, dtype=F64)
    comp = HeavySign(0.9, scale="full")
    ratio = _ratios(comp, x, layout).item()
    assert ratio == pytest.approx(0.625)
    assert ratio > 1 - 0.9 / 2
    assert ratio <= comp.q2_bound(layout)
    # where k d_l is an integer the bound is the paper's 1 - min_l k/d_l
    assert HeavySign(0.1).q2_bound(ParamLayout.single(50)) == pytest.approx(1 - 0.1 / 50)


# ----------------------------------------------------------------------------- bits

def test_bit_counts_follow_the_spec_table():
    sizes = LAYOUT.sizes                                 # 63, 3, 1, 150
    d, M = LAYOUT.d, len(sizes)
    k_l = [max(1, math.floor(0.1 * s)) for s in sizes]   # 6, 1, 1, 15
    assert k_l == [6, 1, 1, 15]
    assert Identity().bits(LAYOUT) == 32 * d
    assert Sign().bits(LAYOUT) == d + 32 * M
    assert Sign(scope="model").bits(LAYOUT) == d + 32
    assert TopK(0.1).bits(LAYOUT) == 32 * sum(k_l)
    assert TopK(0.1, index_bits=32).bits(LAYOUT) == 64 * sum(k_l)
    assert TopK(0.1, scope="model").bits(LAYOUT) == 32 * math.floor(0.1 * d)
    assert HeavySign(0.1).bits(LAYOUT) == sum(k_l) + 32 * M
    assert HeavySign(0.1, index_bits=32).bits(LAYOUT) == 33 * sum(k_l) + 32 * M
    assert HeavySign(0.1, scale="full").bits(LAYOUT) == sum(k_l) + 32 * M
    for b in (1, 2, 4):
        assert Stoc(b).bits(LAYOUT) == b * d + 32
        assert Stoc(b, scope="layer").bits(LAYOUT) == b * d + 32 * M


def test_log2_index_bits():
    layout = ParamLayout(("a", "b"), ((100,), (1000,)))   # ceil(log2) = 7 and 10
    assert TopK(0.1, index_bits="log2").bits(layout) == 10 * (32 + 7) + 100 * (32 + 10)
    assert HeavySign(0.1, index_bits="log2").bits(layout) == 10 * (1 + 7) + 100 * (1 + 10) + 64


def test_paper_compression_ratios_on_the_mlp():
    # spec 2.6: values-only accounting gives ~32x Sign, ~100x TopK-0.01, ~320x hv-Sign-0.1
    layout = ParamLayout.from_module(make_model("mlp"))
    full = Identity().bits(layout)
    assert full == 32 * 159_010
    assert full / Sign().bits(layout) == pytest.approx(32, rel=0.01)
    assert full / TopK(0.01).bits(layout) == pytest.approx(100, rel=0.01)
    assert full / HeavySign(0.1).bits(layout) == pytest.approx(320, rel=0.01)
    assert full / Stoc(2).bits(layout) == pytest.approx(16, rel=1e-3)


# ----------------------------------------------------------------------------- parsing / errors

@pytest.mark.parametrize("spec, cls, attrs", [
    ("full", Identity, {}),
    ("identity", Identity, {}),
    ("sign", Sign, {"scope": "layer"}),
    ("topk-0.01", TopK, {"k": 0.01, "scope": "layer"}),
    ("hvsign-0.1", HeavySign, {"k": 0.1, "scale": "kept"}),
    ("heavysign-0.05", HeavySign, {"k": 0.05}),
    ("stoc-2", Stoc, {"b": 2, "scope": "model"}),
])
def test_make_compressor_parses(spec, cls, attrs):
    comp = make_compressor(spec)
    assert type(comp) is cls
    for key, val in attrs.items():
        assert getattr(comp, key) == val


def test_make_compressor_options():
    assert make_compressor("topk-0.1", scope="model").scope == "model"
    assert make_compressor("sign", scope="model").scope == "model"
    assert make_compressor("topk-0.1", index_bits=32).index_bits == 32
    assert make_compressor("hvsign-0.1", scale="full").scale == "full"
    assert make_compressor("topk-0.05").name == "topk-0.05"
    assert make_compressor("hvsign-0.1").name == "hvsign-0.1"
    assert make_compressor("stoc-4").name == "stoc-4"


@pytest.mark.parametrize("spec, kw, words", [
    ("gzip", {}, "unknown compressor"),
    ("", {}, "unknown compressor"),
    ("topk-0", {}, "(0, 1]"),
    ("topk-1.5", {}, "(0, 1]"),
    ("topk--0.1", {}, "(0, 1]"),
    ("topk-abc", {}, "topk-abc"),
    ("topk", {}, "topk"),
    ("topk-nan", {}, "(0, 1]"),
    ("hvsign-0", {}, "(0, 1]"),
    ("hvsign-2", {}, "(0, 1]"),
    ("stoc-0", {}, "b >= 1"),
    ("stoc--3", {}, "b >= 1"),
    ("stoc-1.5", {}, "stoc-1.5"),
    ("stoc-x", {}, "stoc-x"),
    ("topk-0.1", {"scope": "network"}, "scope"),
    ("sign", {"scope": "network"}, "scope"),
    ("hvsign-0.1", {"scale": "median"}, "scale"),
    ("topk-0.1", {"index_bits": "log3"}, "index_bits"),
    ("topk-0.1", {"index_bits": -1}, "index_bits"),
    ("topk-0.1", {"scale": "full"}, "topk-0.1"),      # an option TopK does not have
])
def test_make_compressor_errors_are_one_line(spec, kw, words):
    with pytest.raises(CompressorError) as info:
        make_compressor(spec, **kw)
    msg = str(info.value)
    assert "\n" not in msg and words in msg
    assert isinstance(info.value, ValueError)


def test_direct_construction_errors():
    for bad in (lambda: TopK(0.0), lambda: TopK(1.01), lambda: HeavySign(-0.1),
                lambda: Stoc(0), lambda: Stoc(2.5), lambda: HeavySign(0.1, scale="nnz"),
                lambda: TopK(0.1, index_bits="bogus"), lambda: HeavySign(0.1, index_bits=1.5)):
        with pytest.raises(CompressorError):
            bad()


# ----------------------------------------------------------------------------- fast == reference

REFERENCE_CASES = [
    Identity(), TopK(0.1), TopK(0.01), TopK(0.37, scope="model"), TopK(1.0), Sign(),
    Sign(scope="model"), HeavySign(0.1), HeavySign(0.3, scale="full"),
    HeavySign(0.05, scope="model"), HeavySign(0.5, scale="full", scope="model"),
    Stoc(1), Stoc(2), Stoc(4, scope="layer"),
]


@pytest.mark.parametrize("comp", REFERENCE_CASES, ids=repr)
def test_fast_compressors_equal_reference_exactly(comp):
    g = gen(11)
    for trial in range(3):
        x = torch.randn(4, D, generator=g, dtype=F64) * 10.0 ** (trial - 1)
        if trial == 2:   # heavy tails and exact zeros
            x = x ** 3 * (torch.rand(4, D, generator=g, dtype=F64) < 0.7)
        u = torch.rand(4, D, generator=g, dtype=F64)
        fast = comp(x, LAYOUT, u)
        for i in range(4):
            ref = reference_compress(comp, x[i], LAYOUT, u[i])
            assert torch.equal(fast[i], ref), (comp, trial, i, float((fast[i] - ref).abs().max()))


def test_identity_returns_input():
    x = randn(2, D)
    assert torch.equal(Identity()(x, LAYOUT), x)
    assert not Identity().biased and TopK(0.1).biased and Sign().biased and not Stoc(2).biased
    assert Stoc(2).needs_uniforms and not TopK(0.1).needs_uniforms


def test_compressors_work_in_float32_and_keep_dtype():
    x = torch.randn(3, D, generator=gen(12))
    u = torch.rand(3, D, generator=gen(13))
    for comp in (TopK(0.1), Sign(), HeavySign(0.1), Stoc(2)):
        out = comp(x, LAYOUT, u)
        assert out.dtype == torch.float32 and out.shape == x.shape
        assert torch.isfinite(out).all()
    zero = torch.zeros(2, D)
    for comp in (TopK(0.1), Sign(), HeavySign(0.1), Stoc(2)):   # a zero update stays zero
        assert not comp(zero, LAYOUT, u[:2]).any()


def test_module_exports():
    assert C.SCOPES == ("layer", "model")


# ----------------------------------------------------------------------------- top_k_keep

def _check_keep(a, k):
    """``top_k_keep``: the k largest magnitudes kept, and among entries tied at the k-th the
    lowest indices (the rule the C kernel keeps too), everything else zeroed."""
    from sims.rules.compress import top_k_keep
    out = top_k_keep(a, k)
    for row, orig in zip(out, a):
        order = torch.argsort(orig.abs(), descending=True, stable=True)[:k]   # ties: low index
        want = torch.zeros_like(orig)
        want[order] = orig[order]
        assert torch.equal(row, want) and int((row != 0).sum()) <= k


@pytest.mark.parametrize("n", [8 * 400, 8 * 400 + 5, 3001])
@pytest.mark.parametrize("k", [1, 7, 100])
def test_top_k_keep_selects_the_k_largest(n, k):
    g = torch.Generator().manual_seed(n + k)
    a = torch.randn(6, n, generator=g) * torch.rand(1, n, generator=g)
    _check_keep(a, k)


def test_top_k_keep_with_ties_zeros_and_clusters():
    g = torch.Generator().manual_seed(0)
    n, k = 8 * 500 + 3, 60
    ties = torch.randint(-3, 4, (3, n), generator=g).double()      # few distinct values
    zeros = torch.zeros(3, n, dtype=torch.float64)
    zeros[:, ::97] = torch.rand(3, len(range(0, n, 97)), generator=g, dtype=torch.float64)
    cluster = torch.rand(3, n, generator=g, dtype=torch.float64) * 1e-3
    cluster[0, 800:880] = 1.0                                       # all large ones together
    cluster[1, -3:] = -2.0                                          # large ones in the tail
    cluster[2, 0:k] = 5.0                                           # exactly k at the start
    for a in (ties, zeros, cluster):
        _check_keep(a, k)

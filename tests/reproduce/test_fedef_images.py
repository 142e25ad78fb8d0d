"""Fed-EF image entries (Figs. 2-7, 10-15, 19; Tables 2-5): the per-client conv path, CIFAR
augmentation, the paper's selection rule, the generated tables, and ``--tiny`` runs of
each entry (the CIFAR one on fixture pickle files)."""
from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from reproduce import common, fedef_cifar, fedef_images, fedef_qa_train
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.data import Dataset
from sims.core.engine import run
from sims.problems.models import make_model
from sims.core.participation import Participation
from sims.problems.conv import ConvProblem, stratified_test_subset
from sims.problems.neural import NeuralProblem
from conftest import write_cifar10

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- conv problem
def _fixture(side=6, n_train=40, seed=1, channels=1):
    g = torch.Generator().manual_seed(seed)
    return Dataset("fixture", torch.randn(n_train, channels, side, side, generator=g),
                   torch.randint(0, 10, (n_train,), generator=g),
                   torch.randn(12, channels, side, side, generator=g),
                   torch.randint(0, 10, (12,), generator=g), 10, "random fixture")


def _parts(n_train=40, sizes=(6, 9, 11, 14)):
    perm = np.random.default_rng(3).permutation(n_train)[:sum(sizes)]
    return [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]


def test_conv_loop_equals_batched_path():
    """The per-client loop (local SGD, gradients, evaluation) equals the vmap path."""
    data = _fixture()
    model = make_model("cnn", (1, 6, 6), 10, dropout=0.0)
    kw = dict(batch_size=4, dtype=torch.float64)
    generic = NeuralProblem(data, _parts(), model, **kw)
    loop = ConvProblem(data, _parts(), model, loop=True, **kw)
    alg = FedEF(eta=0.7, eta_l=0.05, compressor=TopK(0.1))
    part = Participation("fixed", m=3)
    a = run(generic, alg, part, 2, [0, 1], eval_every=1)
    b = run(loop, alg, part, 2, [0, 1], eval_every=1)
    torch.testing.assert_close(b.server["theta"], a.server["theta"], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(b.client_state["error"], a.client_state["error"],
                               rtol=1e-10, atol=1e-12)
    for name in ("train_loss", "grad_norm2", "test_acc", "test_loss", "qA2"):
        np.testing.assert_allclose(b.metrics[name], a.metrics[name], rtol=1e-9, atol=1e-12)
    theta = a.server["theta"]
    payload = torch.as_tensor(np.stack([loop.plan_client(np.random.default_rng(c), c)[0]
                                        for c in range(2)]))
    torch.testing.assert_close(loop.stoch_grad(theta, None, payload),
                               generic.stoch_grad(theta, None, payload), rtol=1e-10, atol=1e-12)
    payload[1] = -1                      # an all-padding row: a zero gradient
    got = loop.stoch_grad(theta, None, payload)
    assert torch.equal(got[1], torch.zeros_like(got[1])) and got[0].abs().sum() > 0


@pytest.mark.parametrize("name", ["cnn", "mnist-cnn"])
def test_conv_dropout_draws_do_not_depend_on_batching(name, monkeypatch):
    """With dropout on, the loop path's replica 0 is the same run alone and batched with
    another seed, with the process's generator disturbed in between (its masks are keyed by
    each minibatch's samples): the engine's "reproducible from its seed, independent of
    batching". Drawn from torch's global generator instead, they are not."""
    side = 28 if name == "mnist-cnn" else 6
    data = _fixture(side=side)
    model = make_model(name, (1, side, side), 10)
    assert any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in model.modules())
    prob = ConvProblem(data, _parts(), model, loop=True, batch_size=4, dtype=torch.float64)
    alg = FedEF(eta=0.7, eta_l=0.05, compressor=TopK(0.1))
    part = Participation("fixed", m=3)

    def replica0_gap():
        alone = run(prob, alg, part, 2, [0], eval_every=1)
        torch.rand(7)                       # the global generator moves on between runs
        both = run(prob, alg, part, 2, [0, 1], eval_every=1)
        np.testing.assert_allclose(both.metrics["train_loss"][0],
                                   alone.metrics["train_loss"][0], rtol=1e-12)
        return float((both.server["theta"][0] - alone.server["theta"][0]).abs().max())
    assert replica0_gap() < 1e-15          # batched vs alone: floating-point rounding only
    from contextlib import nullcontext
    monkeypatch.setattr(prob, "_masks", lambda row: nullcontext())
    with pytest.raises(AssertionError):
        assert replica0_gap() < 1e-6


@pytest.mark.parametrize("name", ["cnn", "mnist-cnn"])
def test_conv_batched_path_draws_the_loops_dropout_masks(name, monkeypatch):
    """With dropout on, the batched (vmap) path draws each minibatch's masks keyed by its
    samples as the loop path's modules do (``Dropout`` in the loop's channels-last order,
    ``Dropout2d`` per channel): the two paths' runs agree to rounding, and the batched
    path's replica 0 is the same run alone and beside another seed. With vmap's own draws
    (torch's global generator) neither holds."""
    side = 28 if name == "mnist-cnn" else 6
    data = _fixture(side=side)
    model = make_model(name, (1, side, side), 10)
    kw = dict(batch_size=4, dtype=torch.float64, eval_grad=False)   # no vmap backward
    loop = ConvProblem(data, _parts(), model, loop=True, **kw)
    batched = ConvProblem(data, _parts(), model, loop=False, **kw)
    assert [s.p for s in batched.dropout_sites] == (
        [0.25] if name == "cnn" else [0.5, 0.5])
    alg = FedEF(eta=0.7, eta_l=0.05, compressor=TopK(0.1))
    part = Participation("fixed", m=3)

    def gaps():
        a = run(loop, alg, part, 1, [0, 1], eval_every=1)
        torch.rand(7)                       # the global generator moves on between runs
        b = run(batched, alg, part, 1, [0, 1], eval_every=1)
        torch.rand(5)
        alone = run(batched, alg, part, 1, [0], eval_every=1)
        return (float((a.server["theta"] - b.server["theta"]).abs().max()),
                float((b.server["theta"][0] - alone.server["theta"][0]).abs().max()))
    paths, replica0 = gaps()
    assert paths < 1e-10 and replica0 < 1e-12
    monkeypatch.setattr(batched, "keyed_masks", lambda *a, **k: None)
    paths, replica0 = gaps()
    assert paths > 1e-6 and replica0 > 1e-6


def test_keyed_masks_follow_the_rows_samples_and_salt():
    """The generic path's masks: a row's are a function of its valid samples (and the
    salt) alone, 1 at padding, 0 or 1 / (1 - p) elsewhere; a module the keyed draws do not
    reproduce is refused in one line."""
    from sims.problems.keyed_dropout import dropout_sites
    data = _fixture()
    prob = ConvProblem(data, _parts(), make_model("cnn", (1, 6, 6), 10), loop=False,
                       batch_size=4, dtype=torch.float64)
    rows = torch.tensor([[3, 7, 1, -1], [5, 2, 8, 9], [3, 7, 1, -1]])
    m = prob.keyed_masks(rows, torch.float64)[0]
    assert m.shape == (3, 4, *prob.dropout_sites[0].shape)
    assert torch.equal(m[0], m[2]) and not torch.equal(m[0], m[1])
    assert torch.equal(m[0, 3], torch.ones_like(m[0, 3]))
    assert set(m[:, :3].unique().tolist()) == {0.0, 1 / 0.75}
    alone = prob.keyed_masks(rows[1:2], torch.float64)[0]
    assert torch.equal(alone[0], m[1])
    salted = prob.keyed_masks(rows, torch.float64, torch.tensor([1, 1, 2]))[0]
    assert not torch.equal(salted[0], salted[2]) and not torch.equal(salted[0], m[0])
    prob.model.eval()
    assert prob.keyed_masks(rows, torch.float64) is None
    prob.model.train()
    with pytest.raises(ValueError, match="AlphaDropout.*not supported"):
        dropout_sites(torch.nn.Sequential(torch.nn.AlphaDropout(0.1)), torch.zeros(2, 3))


def test_crop_flip_augmentation_is_encoded_in_the_plan():
    data = _fixture(side=8, channels=3)
    data = Dataset("cifar10", data.x_train, data.y_train, data.x_test, data.y_test, 10, "fx")
    prob = ConvProblem(data, _parts(), make_model("cnn", (3, 8, 8), 10, dropout=0.0),
                       batch_size=4, augment="crop-flip", pad=2)
    N, x = prob.n_train, prob.x
    side = 5                                    # 2 * pad + 1 offsets per axis
    centre = 2 * (2 * side + 2)                 # offset (2, 2), no flip: the image itself
    got, y = prob.fetch(torch.tensor([7 + N * centre, 7 + N * (centre + 1)]))
    torch.testing.assert_close(got[0], x[7])
    torch.testing.assert_close(got[1], x[7].flip(-1))
    assert y.tolist() == [int(prob.y[7])] * 2
    corner, _ = prob.fetch(torch.tensor([3]))   # code 0: offset (0, 0) -> shifted down-right
    torch.testing.assert_close(corner[0, :, 2:, 2:], x[3, :, :-2, :-2])
    black = prob._black.view(3, 1)
    torch.testing.assert_close(corner[0, :, :2, :].reshape(3, -1),
                               black.expand(3, 2 * 8))
    plan = prob.plan_client(np.random.default_rng(5), 1)
    again = prob.plan_client(np.random.default_rng(5), 1)
    np.testing.assert_array_equal(plan, again)
    valid = plan[plan >= 0]
    assert set(valid % N) == set(prob.parts[1]) and (valid // N < prob.n_codes).all()
    assert len(set(valid // N)) > 1


def test_augmented_batched_path_equals_loop():
    """The GPU (vmap) path decodes the same augmentation as the CPU loop."""
    data = _fixture(side=8, channels=3)
    data = Dataset("cifar10", data.x_train, data.y_train, data.x_test, data.y_test, 10, "fx")
    model = make_model("resnet18", (3, 8, 8), 10, width=4)
    kw = dict(batch_size=4, dtype=torch.float64, augment="crop-flip")
    loop = ConvProblem(data, _parts(), model, loop=True, **kw)
    batched = ConvProblem(data, _parts(), model, loop=False, **kw)
    theta = torch.stack([loop.init_theta(s) for s in (0, 1)])
    plans = [loop.plan_client(np.random.default_rng(c), c) for c in (1, 3)]
    payload = torch.as_tensor(np.stack([plans[0][0], plans[1][-1]]))   # the last is padded
    assert (payload < 0).any()
    torch.testing.assert_close(batched.stoch_grad(theta, None, payload),
                               loop.stoch_grad(theta, None, payload), rtol=1e-9, atol=1e-12)


def test_stratified_test_subset():
    ds = _fixture(n_train=20)
    ds = Dataset("f", ds.x_train, ds.y_train, torch.zeros(40, 1, 6, 6),
                 torch.arange(40) % 4, 10, "f")
    sub = stratified_test_subset(ds, 8)
    assert len(sub.y_test) == 8 and np.bincount(sub.y_test.numpy()).tolist() == [2, 2, 2, 2]
    assert stratified_test_subset(ds, None) is ds


# ----------------------------------------------------------------------------- selection rule
def _final(rows):
    return pd.DataFrame([dict(dataset=d, p=p, server=s, compressor=c,
                              family=fedef_images.family(c), param=fedef_images.param_of(c),
                              acc=a, acc_std=0.5, bits=b, loss=1.0, loss_std=0.1,
                              rounds=100, seeds=3)
                         for d, p, s, c, a, b in rows])


def test_selection_rule_picks_highest_matching_compression_else_best():
    final = _final([
        ("mnist", 0.5, "sgd", "full", 90.00, 3200),
        ("mnist", 0.5, "sgd", "sign", 89.95, 100),       # within 0.1 -> matches
        ("mnist", 0.5, "sgd", "topk-0.001", 88.00, 3),   # heaviest, too low
        ("mnist", 0.5, "sgd", "topk-0.01", 89.91, 32),   # heaviest matching
        ("mnist", 0.5, "sgd", "topk-0.05", 90.50, 160),
        ("mnist", 0.5, "sgd", "hvsign-0.01", 85.0, 1),   # none matches -> best
        ("mnist", 0.5, "sgd", "hvsign-0.1", 87.0, 10),
        ("mnist", 0.5, "sgd", "hvsign-0.05", 86.0, 5),
        ("mnist", 0.5, "sgd", "stoc-1", 89.5, 100),
        ("mnist", 0.5, "sgd", "stoc-2", 89.89, 200),     # 0.11 below -> not matching
        ("mnist", 0.5, "sgd", "stoc-4", 91.0, 400),
    ])
    sel = fedef_images.select(final).set_index("family")
    assert sel.loc["topk", "compressor"] == "topk-0.01"
    assert sel.loc["topk", "rule"] == "matches FP"
    assert sel.loc["sign", "rule"] == "matches FP"
    assert sel.loc["hvsign", "compressor"] == "hvsign-0.1"
    assert sel.loc["hvsign", "rule"] == "best, below FP"
    assert sel.loc["stoc", "compressor"] == "stoc-4"
    assert sel.loc["full", "rule"] == "reference"
    assert list(sel.index) == ["sign", "topk", "hvsign", "stoc", "full"]
    # per (dataset, p, server): another server's full precision is not the reference
    other = pd.concat([final, _final([("mnist", 0.5, "ams", "full", 80.0, 3200),
                                      ("mnist", 0.5, "ams", "topk-0.001", 79.95, 3)])])
    ams = fedef_images.select(other)
    ams = ams[ams.server == "ams"].set_index("family")
    assert ams.loc["topk", "compressor"] == "topk-0.001"
    # a diverged setting (no final accuracy) never matches; if all diverged, the latest is shown
    div = _final([("fmnist", 0.5, "ams", "full", 70.0, 3200),
                  ("fmnist", 0.5, "ams", "topk-0.001", np.nan, 3),
                  ("fmnist", 0.5, "ams", "topk-0.01", 60.0, 32),
                  ("fmnist", 0.5, "ams", "hvsign-0.01", np.nan, 1),
                  ("fmnist", 0.5, "ams", "hvsign-0.1", np.nan, 10)])
    div["diverged"] = div.acc.isna().astype(int)
    div["diverged_at"] = [np.nan, 13, np.nan, 9, 14]
    sel = fedef_images.select(div).set_index("family")
    assert (sel.loc["topk", "compressor"], sel.loc["topk", "rule"]) == ("topk-0.01",
                                                                       "best, below FP")
    assert (sel.loc["hvsign", "compressor"], sel.loc["hvsign", "rule"]) == ("hvsign-0.1",
                                                                           "diverged")
    assert "diverged (1/3 seeds, round 14)" in fedef_images.tables_markdown(
        div.assign(seeds=3))


def test_finals_marks_runs_that_stopped_or_went_non_finite():
    rows = []
    for comp, last, nan_at in (("full", 4, None), ("sign", 2, None), ("topk-0.01", 4, 4)):
        for t in range(0, last + 1):
            loss = np.nan if nan_at is not None and t >= nan_at else 2.0 - 0.1 * t
            rows += [dict(metric="train_loss", value=loss), dict(metric="test_acc", value=0.1 * t)]
            rows[-2].update(round=t)
            rows[-1].update(round=t)
            if t:
                rows.append(dict(metric="bits_up", value=100.0 * t, round=t))
        for r in rows:
            r.setdefault("compressor", comp)
    df = pd.DataFrame(rows).assign(dataset="fmnist", p=0.5, server="sgd", seed=0)
    df["family"] = df.compressor.map(fedef_images.family)
    df["param"] = df.compressor.map(fedef_images.param_of)
    fin = fedef_images.finals(df, rounds=4).set_index("compressor")
    assert fin.loc["full", "diverged"] == 0 and fin.loc["full", "acc"] == pytest.approx(40.0)
    # tail: the evaluations in the last 20% of the rounds (rounds 3 and 4 of 4)
    assert fin.loc["full", "acc_tail"] == pytest.approx(35.0)
    assert fin.loc["sign", "diverged"] == 1 and fin.loc["sign", "diverged_at"] == 2
    assert fin.loc["topk-0.01", "diverged_at"] == 4 and np.isnan(fin.loc["topk-0.01", "acc"])
    assert fin.bits.tolist() == [100.0] * 3          # per round, not cumulative


def test_tables_markdown_and_docs_block(tmp_path):
    final = _final([("fmnist", 0.5, "sgd", "full", 70.20, 3200),
                    ("fmnist", 0.5, "sgd", "sign", 70.00, 100),
                    ("fmnist", 0.1, "ams", "full", 60.00, 3200),
                    ("fmnist", 0.1, "ams", "topk-0.01", 61.00, 32)])
    md = fedef_images.tables_markdown(final, "Scale: test")
    assert md.startswith("Scale: test")
    assert "**Table 2: p = 0.5, Fed-EF-SGD**" in md and "**Table 5: p = 0.1, Fed-EF-AMS**" in md
    row = next(line for line in md.splitlines() if line.startswith("| FMNIST | Sign |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # ours, paper (71.13 +/- 0.68), ours - paper, ours - our FP, paper - paper FP
    assert cells[3] == "70.00 (±0.50)" and cells[4] == "71.13 (±0.68)"
    assert cells[5] == "-1.13" and cells[6] == "-0.20" and cells[7] == "-0.07"
    assert cells[8] == "-" and cells[9] == "-"          # no tail accuracy in this fixture
    assert "TopK k=0.01 (matches FP)" in md
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nintro\n\n" + fedef_images.DOCS_START + "\nold\n"
                   + fedef_images.DOCS_END + "\n\noutro\n")
    fedef_images.write_docs(doc, md)
    text = doc.read_text()
    assert "old" not in text and "intro" in text and "outro" in text and "Table 5" in text
    assert text.count(fedef_images.DOCS_START) == 1
    fresh = fedef_images.write_docs(tmp_path / "new.md", md).read_text()
    assert fresh.startswith(fedef_images.DOCS_START) and fresh.rstrip().endswith(
        fedef_images.DOCS_END)
    # a named block (another scale's tables) lives beside the unnamed one
    fedef_images.write_docs(doc, "named v1", "n200")
    fedef_images.write_docs(doc, "named v2", "n200")
    text = doc.read_text()
    start, _ = fedef_images.docs_markers("n200")
    assert text.count(start) == 1 and "named v2" in text and "named v1" not in text
    assert "Table 5" in text and text.count(fedef_images.DOCS_START) == 1
    with pytest.raises(common.EntryError):
        fedef_images.docs_markers("bad name -->")


@pytest.mark.parametrize("ps, message", [("0.1,x", "--ps: cannot read 'x'; give comma-separated numbers"),
                                         ("2", "--ps: participation 2 is not in (0, 1]")])
def test_bad_participation_is_one_line_before_any_work(ps, message, tmp_path, capsys):
    write_cifar10(tmp_path / "data")
    for entry in (fedef_images, fedef_cifar):
        assert common.main(entry, ["--tiny", "--ps", ps, "--out", str(tmp_path / "r"),
                                   "--data-dir", str(tmp_path / "data")]) == 2
        err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
        assert err == [f"error: {message}"], err
    assert not list((tmp_path / "r").rglob("*.csv"))


# ----------------------------------------------------------------------------- entries
def _records(out, name):
    records = sorted((out / name).glob("*.json"))
    assert records and len(records) == len(list((out / name).glob("*.csv")))
    return [json.loads(r.read_text()) for r in records]


def _figures(figs, stems):
    for stem in stems:
        for ext in ("png", "pdf"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 0


def test_images_tiny_entry(tmp_path, capsys):
    out, figs = tmp_path / "results", tmp_path / "figures"
    argv = ["--tiny", "--quiet", "--datasets", "mnist", "--servers", "sgd", "--compressors",
            "full,topk-0.01",
            "--out", str(out), "--figures", str(figs), "--write-docs", str(tmp_path / "r.md")]
    assert common.main(fedef_images, argv) == 0
    printed = capsys.readouterr().out
    _figures(figs, ["fedef_fig2", "fedef_fig10", "fedef_fig4"])
    meta = _records(out, "fedef_images")
    assert {m["run"] for m in meta} == {"mnist_p0.5_sgd_full", "mnist_p0.5_sgd_topk-0.01"}
    problem = meta[0]["problem"]
    assert problem["local_steps"] is None and set(problem["client_sizes"]) <= {64, 65}
    assert "**Table 2: p = 0.5, Fed-EF-SGD**" in printed
    from verdict_util import saved
    scope = "MNIST, p=0.5, Fed-EF-SGD"
    assert saved(out, "fedef_images") == {f"E2 [{scope}]": "premise absent",   # 2 rounds of 4
                                          f"E6 [{scope}]": "shows"}             # 100x fewer bits
    assert "Table 2" in (out / "fedef_images" / "tables.md").read_text()
    assert fedef_images.DOCS_START in (tmp_path / "r.md").read_text()
    # resumable: the grid flags are not in the fingerprint, so a narrower grid reuses runs
    cfg = common.parse_config(fedef_images, argv[:-2] + ["--compressors", "topk-0.01",
                                                        "--plot-only"])
    assert set(common.execute(fedef_images, cfg).compressor) == {"topk-0.01"}
    # --available draws what a wider grid has on disk instead of refusing
    cfg = common.parse_config(fedef_images, argv[:-2] + ["--compressors", "full,sign,topk-0.01",
                                                        "--plot-only", "--available"])
    assert set(common.execute(fedef_images, cfg).compressor) == {"full", "topk-0.01"}


def test_qa_train_tiny_entry(tmp_path, capsys):
    out, figs = tmp_path / "results", tmp_path / "figures"
    assert common.main(fedef_qa_train, ["--tiny", "--quiet", "--out", str(out),
                                        "--figures", str(figs)]) == 0
    printed = capsys.readouterr().out
    _figures(figs, ["fedef_fig19"])
    from verdict_util import saved
    # 2 clients a round where the paper's Fig. 19 averages about 100: the claim is not tested
    assert saved(out, "fedef_qa_train") == {"E13": "premise absent"}
    assert "clients/round 2 (paper 100" in printed
    df = common.execute(fedef_qa_train, common.parse_config(
        fedef_qa_train, ["--tiny", "--out", str(out), "--plot-only"]))
    qa = df[df.metric == "qA2"]
    assert len(qa) == 2 * 2 and qa.value.between(0, 1.5).all()


def test_cifar_one_round_on_fixture_files(tmp_path, capsys):
    write_cifar10(tmp_path / "data")
    out, figs = tmp_path / "results", tmp_path / "figures"
    argv = ["--tiny", "--quiet", "--compressors", "sign", "--data-dir", str(tmp_path / "data"),
            "--out", str(out), "--figures", str(figs)]
    assert common.main(fedef_cifar, argv) == 0
    _figures(figs, ["fedef_fig6"])
    (meta,) = _records(out, "fedef_cifar")
    assert meta["problem"]["d"] == 11_173_962 and meta["problem"]["model"] == "ResNet18GN"
    assert meta["algorithm"]["eta"] == 1.0 and meta["algorithm"]["eta_l"] == 0.1
    df = common.execute(fedef_cifar, common.parse_config(fedef_cifar, argv + ["--plot-only"]))
    assert np.isfinite(df[df.metric == "test_acc"].value).all()
    assert df[df.metric == "bits_up"].value.max() > 0


def test_cifar_refuses_the_gpu_default_on_cpu(tmp_path, capsys):
    assert common.main(fedef_cifar, ["--out", str(tmp_path)]) == 2
    assert "--device cuda" in capsys.readouterr().err


# ----------------------------------------------------------------------------- shared builder
def test_conv_models_go_through_the_shared_builder():
    from sims.problems.image import build_conv_problem
    from sims.problems.image import build_image_problem
    data = _fixture(side=6, n_train=40, channels=4)
    # 4 x 6 x 6 = 144 = 12^2 input features: guessing channels from the flat size would say 1
    res = build_image_problem("fixture", "resnet18", 4, data=data, scheme="iid",
                              model_kw={"width": 4}, batch_size=4)
    assert isinstance(res, ConvProblem) and res.model.conv1.in_channels == 4
    cnn = build_image_problem("fixture", "cnn", 4, data=data, scheme="iid", batch_size=4,
                              test_samples=4)
    assert isinstance(cnn, ConvProblem) and cnn.model.conv1.in_channels == 4
    assert len(cnn.y_test) == 4
    mlp = build_image_problem("fixture", "mlp", 4, data=data, scheme="iid")
    assert type(mlp) is NeuralProblem
    with pytest.raises(ValueError):
        build_image_problem("fixture", "mlp", 4, data=data, scheme="iid", augment="crop-flip")
    wrapped = build_conv_problem("fixture", "cnn", 4, data=data, scheme="iid", batch_size=4)
    torch.testing.assert_close(wrapped.init_theta(0), cnn.init_theta(0))


def test_entry_problems_are_the_cached_shared_problem(monkeypatch):
    calls = []
    real = common.cached_problem

    def spy(*args, **kw):
        calls.append((args, kw))
        return real(*args, **kw)
    monkeypatch.setattr(common, "cached_problem", spy)
    a = fedef_images.conv_problem("mnist", "cnn", 3, 64, None, "cpu", 32, 20)
    b = fedef_images.conv_problem("mnist", "cnn", 3, 64, None, "cpu", 32, 20)
    assert a is b and isinstance(a, ConvProblem) and a.n_clients == 3
    assert [kw["model"] for _, kw in calls] == ["cnn", "cnn"]
    assert calls[0][1]["subset_of"] == len(common.cached_dataset("mnist", None).y_train) // 64


@pytest.mark.parametrize("loop", [True, False])
def test_evaluation_without_the_gradient_norm(loop):
    data = _fixture()
    prob = ConvProblem(data, _parts(), make_model("cnn", (1, 6, 6), 10, dropout=0.0),
                       batch_size=4, dtype=torch.float64, loop=loop)
    theta = torch.stack([prob.init_theta(s) for s in (0, 1)])
    full = prob.evaluate(theta)
    lean = prob.evaluate(theta, grad=False)
    assert "grad_norm2" in full and "grad_norm2" not in lean
    for k in lean:
        torch.testing.assert_close(lean[k], full[k], rtol=1e-10, atol=1e-12)
    prob.eval_grad = False
    assert "grad_norm2" not in prob.evaluate(theta)


# ----------------------------------------------------------------------------- common options
_TINY = ["--tiny", "--quiet", "--datasets", "mnist", "--servers", "sgd", "--compressors",
         "topk-0.01", "--rounds", "1"]


def _tiny_args(tmp_path, *extra):
    return _TINY + ["--out", str(tmp_path / "results"), "--figures", str(tmp_path / "figs"),
                    *extra]


def _exec(tmp_path, *extra):
    """Run (or resume) the tiny entry without drawing: the saved results as one table."""
    return common.execute(fedef_images, common.parse_config(fedef_images,
                                                            _tiny_args(tmp_path, *extra)))


def _spy_engine(monkeypatch):
    seen = []
    real = common.engine.run

    def spy(*args, **kw):
        seen.append(kw.get("max_batch"))
        return real(*args, **kw)
    monkeypatch.setattr(common.engine, "run", spy)
    return seen


def test_max_batch_reaches_the_engine(tmp_path, monkeypatch):
    seen = _spy_engine(monkeypatch)
    _exec(tmp_path, "--max-batch", "1")
    assert seen == [1]
    (meta,) = _records(tmp_path / "results", "fedef_images")
    assert meta["max_batch"] == 1
    # not part of the fingerprint: a different chunk reuses the saved run
    _exec(tmp_path, "--max-batch", "2")
    assert seen == [1]
    # a Run's own chunk is used unless the flag is given; the flag wins
    cfg = common.parse_config(fedef_images, _tiny_args(tmp_path / "b"))
    assert fedef_images.runs(cfg)[0].max_batch is None          # CPU: the engine's rule
    assert fedef_images.gpu_max_batch(SimpleNamespace(device="cuda:0"), 20) == 20
    real_runs = fedef_images.runs
    monkeypatch.setattr(fedef_images, "runs",
                        lambda c: [dataclasses.replace(r, max_batch=3) for r in real_runs(c)])
    common.execute(fedef_images, cfg)
    assert seen[-1] == 3
    _exec(tmp_path / "c", "--max-batch", "2")
    assert seen[-1] == 2


def test_result_files_are_named_by_round_count_and_resume(tmp_path, monkeypatch):
    seen = _spy_engine(monkeypatch)
    out = tmp_path / "results" / "fedef_images"
    _exec(tmp_path)
    _exec(tmp_path, "--rounds", "2")
    names = sorted(p.name for p in out.glob("*.csv"))
    assert len(names) == 2 and len(seen) == 2
    assert names[0].startswith("mnist_p0.5_sgd_topk-0.01_T1_")
    assert names[1].startswith("mnist_p0.5_sgd_topk-0.01_T2_")
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.csv")}
    # running either again resumes (nothing recomputed, nothing overwritten)
    assert int(_exec(tmp_path)["round"].max()) == 1
    assert int(_exec(tmp_path, "--rounds", "2")["round"].max()) == 2
    assert len(seen) == 2
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.csv")} == stamps
    # results saved under the earlier naming (the bare run name) are still found
    t1 = out / names[0]
    for ext in (".csv", ".json"):
        t1.with_suffix(ext).rename(out / f"mnist_p0.5_sgd_topk-0.01{ext}")
    assert int(_exec(tmp_path, "--plot-only")["round"].max()) == 1 and len(seen) == 2
    # an interrupted run (record missing) is run again
    (out / "mnist_p0.5_sgd_topk-0.01.json").unlink()
    _exec(tmp_path)
    assert len(seen) == 3


def test_gradient_evaluation_is_skipped_unless_asked(tmp_path, monkeypatch):
    seen = _spy_engine(monkeypatch)
    df = _exec(tmp_path)
    assert "grad_norm2" not in set(df.metric) and "train_loss" in set(df.metric)
    assert {"test_acc", "bits_up"} <= set(df.metric)
    # --grad-norm needs the metric, so the lean run is not reused; then it is saved and reused
    df = _exec(tmp_path, "--grad-norm")
    assert len(seen) == 2 and np.isfinite(df[df.metric == "grad_norm2"].value).all()
    assert len(_exec(tmp_path, "--grad-norm", "--plot-only"))
    # ... and serves the lean configuration too (a superset)
    _exec(tmp_path)
    assert len(seen) == 2


def test_ams_reading_option(tmp_path):
    literal = fedef_images.fed_ef("fmnist", "ams", "topk-0.01")
    rule = literal.server_rule.transforms[0]
    assert not rule.bias_correction and rule.eps_inside and rule.kind == "amsgrad"
    torch_rule = fedef_images.fed_ef("fmnist", "ams", "topk-0.01", ams_reading="torch")
    rule = torch_rule.server_rule.transforms[0]
    assert rule.bias_correction and not rule.eps_inside and rule.kind == "amsgrad"
    assert torch_rule.eta == 1e-2
    assert fedef_images.fed_ef("fmnist", "sgd", "full", ams_reading="torch").server == "sgd"
    with pytest.raises(common.EntryError):
        fedef_images.fed_ef("fmnist", "ams", "full", ams_reading="adam")
    # the printed reading keeps the fingerprints of runs saved before the option existed
    cfg = common.parse_config(fedef_images, _tiny_args(tmp_path))
    assert "ams_reading" not in cfg.run_key()
    cfg = common.parse_config(fedef_images, _tiny_args(tmp_path, "--ams-reading", "torch",
                                                       "--servers", "ams"))
    assert cfg.run_key()["ams_reading"] == "torch"
    assert fedef_images.runs(cfg)[0].params["ams_reading"] == "torch"

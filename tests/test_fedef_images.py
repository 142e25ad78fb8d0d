"""Fed-EF image entries (Figs. 2-7, 10-15, 19; Tables 2-5): the per-client conv path, CIFAR
augmentation, the paper's selection rule, the generated tables, and ``--tiny`` runs of
each entry (the CIFAR one on fixture pickle files)."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from reproduce import common, fedef_cifar, fedef_images, fedef_qa_train
from sims.algorithms.fed_ef import FedEF
from sims.compress import TopK
from sims.data import Dataset
from sims.engine import run
from sims.models import make_model
from sims.participation import Participation
from sims.problems.conv import ConvProblem, stratified_test_subset
from sims.problems.neural import NeuralProblem

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
    assert "q_A^2 < 1 throughout training" in printed
    df = common.execute(fedef_qa_train, common.parse_config(
        fedef_qa_train, ["--tiny", "--out", str(out), "--plot-only"]))
    qa = df[df.metric == "qA2"]
    assert len(qa) == 2 * 2 and qa.value.between(0, 1.5).all()


def _write_cifar(root, per_batch=4, n_test=3):
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def dump(name, obj):
        (d / name).write_bytes(pickle.dumps({k.encode(): v for k, v in obj.items()}, protocol=2))
    for i in range(1, 6):
        dump(f"data_batch_{i}", {"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                                 "labels": [(i + j) % 10 for j in range(per_batch)]})
    dump("test_batch", {"data": rng.integers(0, 256, (n_test, 3072), dtype=np.uint8),
                        "labels": list(range(n_test))})
    dump("batches.meta", {"label_names": [f"c{i}".encode() for i in range(10)]})


def test_cifar_one_round_on_fixture_files(tmp_path, capsys):
    _write_cifar(tmp_path / "data")
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

"""StackOverflow loader on fixture files in TFF's layout, the natural-like partition and
the Fashion-MNIST stand-in problem."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from sims.data import DataError, PartitionError
from sims.data.natural import natural_like
from sims.data.stackoverflow import STACKOVERFLOW_FILES, load_stackoverflow
from sims.problems.stackoverflow import stackoverflow_standin

from conftest import random_dataset

WORDS = ["the", "css", "sql", "a", "median", "rare"]
TAGS = {"css": 50, "sql": 70, "android": 20, "git": 5}      # by count: sql, css, android, git
TRAIN = {
    "u1": [("the css the", "css|html"), ("sql median", "sql")],
    "u2": [("a a b c", "android|css"), ("zzz", "git")],
    "u3": [("the", "sql|css"), ("css css rare", "html"), ("median", "android")],
    "u4": [("a", "css")],
    "u5": [("sql sql sql the", "sql|android")],
}
TEST = {"t1": [("the sql", "sql")], "t2": [("css", "css|android")], "t3": [("a", "git")]}


def _write_h5(path, users, vlen: bool):
    with h5py.File(path, "w") as f:
        for cid, rows in users.items():
            g = f.create_group(f"examples/{cid}")
            for key, col in (("tokens", 0), ("tags", 1)):
                vals = [r[col].encode() for r in rows]
                if vlen:
                    g.create_dataset(key, data=np.array(vals, dtype=object),
                                     dtype=h5py.string_dtype())
                else:
                    g.create_dataset(key, data=np.array(vals, dtype="S"))
            g.create_dataset("score", data=np.zeros(len(rows), dtype=np.int64))


@pytest.fixture(params=[True, False], ids=["vlen", "fixed"])
def so_dir(tmp_path, request):
    d = tmp_path / "stackoverflow"
    d.mkdir()
    _write_h5(d / "stackoverflow_train.h5", TRAIN, request.param)
    _write_h5(d / "stackoverflow_test.h5", TEST, request.param)
    (d / "stackoverflow.word_count").write_text("".join(f"{w} {100 - i}\n" for i, w in enumerate(WORDS)))
    (d / "stackoverflow.tag_count").write_text(json.dumps(TAGS))
    return tmp_path


def _expected(rows, vocab, tags):
    x = np.zeros((len(rows), len(vocab)), np.float32)
    y = np.zeros((len(rows), len(tags)), bool)
    for r, (text, tg) in enumerate(rows):
        toks = text.split(" ")
        for t in toks:
            if t in vocab:
                x[r, vocab.index(t)] += 1 / len(toks)
        for t in tg.split("|"):
            if t in tags:
                y[r, tags.index(t)] = True
    return x, y


def test_loads_bag_of_words_and_multi_hot(so_dir):
    data = load_stackoverflow(so_dir, n_clients=3, vocab_size=5, num_tags=3, seed=4)
    vocab, tags = WORDS[:5], ["sql", "css", "android"]
    assert data.words == vocab and data.tags == tags
    assert data.n_clients == 3 and len(set(data.clients)) == 3
    assert set(data.clients) <= set(TRAIN)
    for cid, part in zip(data.clients, data.parts):
        x, y = _expected(TRAIN[cid], vocab, tags)
        np.testing.assert_allclose(data.x_train[part].toarray(), x, rtol=1e-6)
        np.testing.assert_array_equal(data.y_train[part], y)
    assert data.x_test.shape == (3, 5) and data.y_test.shape == (3, 3)
    x, y = _expected(TEST["t1"] + TEST["t2"] + TEST["t3"], vocab, tags)
    np.testing.assert_allclose(data.x_test.toarray(), x, rtol=1e-6)
    np.testing.assert_array_equal(data.y_test, y)


def test_client_choice_is_seeded(so_dir):
    a = load_stackoverflow(so_dir, n_clients=2, vocab_size=5, num_tags=3, seed=1)
    b = load_stackoverflow(so_dir, n_clients=2, vocab_size=5, num_tags=3, seed=1)
    assert a.clients == b.clients
    picks = {tuple(load_stackoverflow(so_dir, n_clients=2, n_test_clients=1, vocab_size=5,
                                      num_tags=3, seed=s).clients) for s in range(8)}
    assert len(picks) > 1
    capped = load_stackoverflow(so_dir, n_clients=5, n_test_clients=2, vocab_size=5, num_tags=3,
                                max_examples=1)
    assert [len(p) for p in capped.parts] == [1] * 5


def _one_line_error(match, **kw):
    with pytest.raises(DataError, match=match) as info:
        load_stackoverflow(**kw)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_missing_files_name_them(tmp_path, so_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    msg = _one_line_error("not found", data_dir=empty)
    for f in STACKOVERFLOW_FILES.values():
        assert f in msg
    (so_dir / "stackoverflow" / "stackoverflow.tag_count").unlink()
    msg = _one_line_error("incomplete", data_dir=so_dir)
    assert "stackoverflow.tag_count" in msg


def test_bad_contents_one_line(so_dir):
    _one_line_error("fewer than vocab_size", data_dir=so_dir, vocab_size=50, n_clients=2)
    _one_line_error("fewer than n_clients", data_dir=so_dir, n_clients=9, vocab_size=5, num_tags=3)
    (so_dir / "stackoverflow" / "stackoverflow_test.h5").write_bytes(b"not hdf5")
    _one_line_error("cannot read", data_dir=so_dir, n_clients=2, vocab_size=5, num_tags=3)


def test_natural_like_partition():
    y = np.repeat(np.arange(10), 500)
    parts = natural_like(y, 100, seed=3, size_sigma=1.0, alpha=0.5, min_size=10)
    sizes = np.array([len(p) for p in parts])
    assert sizes.sum() == len(y) and sizes.min() >= 10
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(y)))
    assert sizes.max() > 4 * np.median(sizes)                  # skewed sizes
    top = np.array([np.bincount(y[p], minlength=10).max() / len(p) for p in parts])
    assert top.mean() > 0.3                                     # skewed label mixes (iid: ~0.1-0.2)
    again = natural_like(y, 100, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    flat = natural_like(y, 100, seed=3, size_sigma=0.0)
    assert np.ptp([len(p) for p in flat]) <= 1
    with pytest.raises(PartitionError, match="min_size"):
        natural_like(y, 100, seed=0, min_size=60)


def test_standin_problem_builds_and_trains():
    ds = random_dataset(3000, 28, seed=2, n_test=50)
    prob = stackoverflow_standin(40, data=ds, eval_train_samples=None)
    assert prob.n_clients == 40 and prob.d == 7850
    sizes = [len(p) for p in prob.parts]
    assert sum(sizes) == 3000 and max(sizes) > 3 * np.median(sizes)
    theta = prob.init_theta(0).unsqueeze(0)
    assert torch.isfinite(prob.evaluate(theta)["test_loss"]).all()

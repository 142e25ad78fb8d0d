"""The FedLADA stand-in search's label-noise lever (``docs/fedlada_standin_search/label_noise.py``):
the stated fraction of training labels moves to another class, seeded, the test set untouched."""
from __future__ import annotations

import torch

from sims.data.base import Dataset
from conftest import load_script


def _module():
    return load_script("docs/fedlada_standin_search/label_noise.py")


def _dataset(n=1000, k=10):
    g = torch.Generator().manual_seed(0)
    return Dataset(name="toy", x_train=torch.randn(n, 1, 2, 2, generator=g),
                   y_train=torch.randint(0, k, (n,), generator=g),
                   x_test=torch.randn(5, 1, 2, 2), y_test=torch.arange(5), num_classes=k,
                   source="test", origin="test", files=())


def test_noise_moves_the_fraction_to_other_classes_seeded():
    mod, ds = _module(), _dataset()
    out = mod.noisy(ds, 0.3, seed=0)
    changed = out.y_train != ds.y_train
    assert int(changed.sum()) == 300                      # every flipped label changed class
    assert int(out.y_train.min()) >= 0 and int(out.y_train.max()) < 10
    assert torch.equal(out.y_test, ds.y_test) and torch.equal(out.x_train, ds.x_train)
    assert torch.equal(mod.noisy(ds, 0.3, seed=0).y_train, out.y_train)
    assert not torch.equal(mod.noisy(ds, 0.3, seed=1).y_train, out.y_train)
    assert torch.equal(ds.y_train, _dataset().y_train)    # the original is left alone


def test_bad_fraction_is_a_one_line_error(capsys):
    mod = _module()
    try:
        mod.main(["--noise", "1.5", "--", "--tiny"])
    except SystemExit as e:
        assert e.code == 2
    assert "--noise must lie in (0, 1)" in capsys.readouterr().err

"""Multi-label logistic regression on sparse inputs (StackOverflow's model) against a plain
``nn.Linear`` + autograd reference, its metrics, and a private engine run on it."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from reproduce.fedada2_tables import build_private
from sims.data.stackoverflow import StackOverflowData
from sims.core.engine import run
from sims.core.participation import Participation
from sims.problems.multilabel import MultiLabelLinearProblem, csr_tensors, row_entries
from sims.problems.stackoverflow import stackoverflow_problem


def _data(seed=0, V=40, T=7, sizes=(5, 9, 3, 12), n_test=20):
    rng = np.random.default_rng(seed)
    n = sum(sizes)

    def x(rows):
        m = sp.random(rows, V, density=0.15, random_state=rng, format="csr", dtype=np.float32)
        m.data[:] = rng.random(m.nnz).astype(np.float32)
        return m
    y = rng.random((n, T)) < 0.25
    y_test = rng.random((n_test, T)) < 0.25
    y_test[0] = False                                   # an example with no kept tag
    parts = np.split(np.arange(n), np.cumsum(sizes)[:-1])
    return StackOverflowData(x(n), y, list(parts), x(n_test), y_test, [], [], list(range(len(sizes))),
                             "fixture")


def test_row_entries_match_scipy():
    d = _data()
    csr = csr_tensors(d.x_train, "cpu", torch.float64)
    rows = torch.tensor([[3, -1, 0], [27, 5, -1]])
    owner, col, val = row_entries(csr, rows)
    got = np.zeros((6, d.x_train.shape[1]))
    np.add.at(got, (owner.numpy(), col.numpy()), val.numpy())
    want = np.zeros((6, d.x_train.shape[1]))
    for j, r in enumerate(rows.reshape(-1).tolist()):
        if r >= 0:
            want[j] = d.x_train[r].toarray()[0]
    assert (owner.diff() >= 0).all()                     # in row order
    np.testing.assert_allclose(got, want, rtol=1e-7)


@pytest.mark.parametrize("loss", ["sigmoid", "softmax"])
def test_batched_gradient_equals_autograd_reference(loss):
    prob = MultiLabelLinearProblem(_data(), loss=loss, batch_size=4, dtype=torch.float64)
    theta = torch.stack([prob.init_theta(s) for s in (0, 1, 2, 3)])
    theta += 0.3 * torch.randn_like(theta)
    rng = np.random.default_rng(5)
    plans = [prob.plan_client(rng, c) for c in range(4)]
    payload = torch.as_tensor(np.stack([p[0] for p in plans]))   # first step of each client
    got = prob.stoch_grad(theta, torch.arange(4), payload)
    for b in range(4):
        ref = prob.reference_grad(theta[b], b, plans[b][0])
        torch.testing.assert_close(got[b], ref, rtol=1e-10, atol=1e-12)


def test_metrics_against_plain_computation():
    d = _data()
    prob = MultiLabelLinearProblem(d, dtype=torch.float64, eval_train_samples=None)
    theta = torch.stack([prob.init_theta(s) for s in (0, 1)]) * 5
    out = prob.evaluate(theta)
    xt, yt = torch.as_tensor(d.x_test.toarray(), dtype=torch.float64), torch.as_tensor(d.y_test)
    for r in range(2):
        W = theta[r, : prob.T * prob.V].view(prob.T, prob.V)
        z = xt @ W.T + theta[r, prob.T * prob.V:]
        top1 = z.argmax(1)
        acc = yt[torch.arange(len(yt)), top1].double().mean()
        keep = yt.sum(1) > 0
        top5 = z.topk(5, 1).indices
        rec = (yt.gather(1, top5).sum(1)[keep] / yt.sum(1)[keep]).mean()
        bce = torch.nn.functional.binary_cross_entropy_with_logits(z, yt.double())
        assert float(out["test_acc"][r]) == pytest.approx(float(acc))
        assert float(out["test_recall5"][r]) == pytest.approx(float(rec))
        assert float(out["test_loss"][r]) == pytest.approx(float(bce))
        # the global objective: clients weighted equally, each the mean over its samples
        th = theta[r].clone().requires_grad_(True)
        Wr, br = th[: prob.T * prob.V].view(prob.T, prob.V), th[prob.T * prob.V:]
        x = torch.as_tensor(d.x_train.toarray(), dtype=torch.float64)
        per = torch.nn.functional.binary_cross_entropy_with_logits(
            x @ Wr.T + br, torch.as_tensor(d.y_train).double(), reduction="none").mean(1)
        f = sum(per[torch.as_tensor(p)].mean() for p in d.parts) / len(d.parts)
        f.backward()
        assert float(out["train_loss"][r]) == pytest.approx(f.item(), rel=1e-12)
        assert float(out["grad_norm2"][r]) == pytest.approx(float((th.grad ** 2).sum()),
                                                            rel=1e-10)


def test_private_fedada2_runs_and_learns():
    prob = MultiLabelLinearProblem(_data(), batch_size=4, local_epochs=2)
    alg = build_private("stackoverflow-dp", "fedada2", 0.5, delta=1e-3, sampling_rate=0.5)
    out = run(prob, alg, Participation("fixed", 2), 15, [0, 1])
    assert np.isfinite(out.metrics["train_loss"]).all()
    assert (out.metrics["train_loss"][:, -1] < out.metrics["train_loss"][:, 0]).all()
    assert out.metrics["dp_epsilon"][0, -1] > 0


def test_problem_falls_back_to_standin(tmp_path):
    from conftest import random_dataset
    prob, rec = stackoverflow_problem(data_dir=tmp_path, n_clients=30,
                                      standin_data=random_dataset(900, 28, seed=1))
    assert rec["standin"] and "stackoverflow" in rec["reason"] and prob.n_clients == 30

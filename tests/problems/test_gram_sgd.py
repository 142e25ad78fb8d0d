"""Local SGD through the clients' Gram matrices (``sims.problems.gram_sgd``) against plain
step-by-step SGD, the direct fused path and the unfused engine, in float64."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.engine import run
from sims.problems.models import MLP, LogReg
from sims.core.participation import Participation
from sims.problems.gram_sgd import ClientGram
from sims.problems.neural import NeuralProblem

from conftest import plan_payload, random_dataset, stepwise_sgd_delta, unequal_parts


def _problem(image_data, gram_path=True, parts=None, **kw):
    kw = {"batch_size": 4, **kw}
    return NeuralProblem(image_data, unequal_parts() if parts is None else parts,
                         MLP(784, hidden=6), dtype=torch.float64, gram_path=gram_path, **kw)


# a partition that leaves samples out (sample 0 among them: padding must not read it)
SUBSET = [np.arange(1, 6), np.arange(10, 19), np.arange(20, 34), np.arange(40, 60),
          np.arange(61, 62)]


@pytest.mark.parametrize("rep", [[0, 0, 1, 1, 1], [1, 0, 0, 1, 0]])
@pytest.mark.parametrize("work", [{}, {"local_epochs": 2}, {"local_steps": 7},
                                  {"batch_size": 3, "local_steps": 4}, {"parts": SUBSET}])
def test_gram_delta_equals_step_by_step(image_data, rep, work):
    """Unequal clients (2-5 steps of batch 4, padded), two replicas in runs or interleaved,
    two epochs, a fixed step count whose stream repeats samples within a round, and a
    partition that leaves samples out."""
    prob = _problem(image_data, **work)
    assert prob.gram_path
    clients = [4, 0, 2, 3, 1]
    server = torch.stack([prob.init_theta(s) for s in range(2)])
    payload = plan_payload(prob, clients)
    rep = torch.as_tensor(rep)
    got = prob.local_sgd_delta(server, rep, torch.as_tensor(clients), payload, 0.3)
    want = stepwise_sgd_delta(prob, server, rep, payload, 0.3)
    assert want.abs().max() > 0
    assert torch.allclose(got, want, rtol=0, atol=1e-12 * want.abs().max())
    direct = _problem(image_data, gram_path=False, **work)
    assert not direct.gram_path
    assert torch.allclose(direct.local_sgd_delta(server, rep, torch.as_tensor(clients), payload, 0.3),
                          got, rtol=0, atol=1e-12 * want.abs().max())


def test_client_gram_holds_inner_products_and_positions(image_data):
    parts = unequal_parts()
    cg = ClientGram(image_data.x_train.double(), parts)
    flat = image_data.x_train.double().reshape(len(image_data.x_train), -1)
    c = 3
    p = parts[c]
    want = flat[p] @ flat[p].T + 1
    assert torch.allclose(cg.gram[c, : len(p), : len(p)], want, rtol=1e-13)
    assert not cg.gram[0, len(parts[0]):].any() and not cg.gram[0, :, len(parts[0]):].any()
    assert torch.equal(cg.x[c, : len(p), :-1], flat[p]) and (cg.x[c, : len(p), -1] == 1).all()
    assert not cg.x[0, len(parts[0]):].any()
    assert cg.local_pos[p].tolist() == list(range(len(p)))
    assert ClientGram.nbytes(parts, 784, 8) == 5 * 20 * (20 + 785) * 8


def test_engine_runs_agree_through_gram_direct_and_unfused_paths(image_data):
    """Whole runs (2 replicas, partial participation, EF with TopK) through the Gram path,
    in one chunk and in chunks of one client, the direct fused path and step by step."""
    alg = FedEF(eta=1.0, eta_l=0.05, compressor=TopK(0.1))
    part = Participation("fixed", m=3)
    gram = run(_problem(image_data), alg, part, 3, [0, 1], eval_every=0)
    ref = run(_problem(image_data, gram_path=False), alg, part, 3, [0, 1], eval_every=0,
              fused=False)
    err = (gram.server["theta"] - ref.server["theta"]).abs().max() / ref.server["theta"].abs().max()
    assert err <= 1e-12
    assert torch.allclose(gram.client_state["error"], ref.client_state["error"], rtol=0, atol=1e-12)
    alone = run(_problem(image_data), alg, part, 3, [0, 1], eval_every=0, max_batch=1)
    assert torch.allclose(alone.server["theta"], gram.server["theta"], rtol=1e-13, atol=0)


def test_gram_path_is_chosen_where_it_pays():
    data = random_dataset(4 * 300, 28, seed=2, n_test=2)
    parts = list(np.arange(4 * 300).reshape(4, 300))
    # the Fed-EF Figure 8 MLP with 300 samples per client: 10 steps of 32 <= 785 / 2
    assert NeuralProblem(data, parts, MLP(), batch_size=32).gram_path
    # too wide a round (600 samples: 19 steps of 32), a narrow first layer, one step,
    # logistic regression: the direct path
    assert not NeuralProblem(data, list(np.arange(1200).reshape(2, 600)), MLP(),
                             batch_size=32).gram_path
    assert not NeuralProblem(data, parts, MLP(784, hidden=16), batch_size=32).gram_path
    assert not NeuralProblem(data, parts, MLP(), batch_size=300).gram_path
    assert not NeuralProblem(data, parts, LogReg(), batch_size=32).gram_path
    assert not NeuralProblem(data, parts, MLP(), batch_size=32, gram_path=False).gram_path


def test_gram_path_refused_where_it_cannot_run(image_data):
    shared = [np.arange(0, 10), np.arange(5, 15)]          # samples 5-9 in both clients
    prob = NeuralProblem(image_data, shared, MLP(784, hidden=6), batch_size=4)
    assert not prob.gram_path
    with pytest.raises(ValueError, match="each sample at most once"):
        NeuralProblem(image_data, shared, MLP(784, hidden=6), batch_size=4, gram_path=True)
    with pytest.raises(ValueError, match="gram_path=True needs"):
        NeuralProblem(image_data, unequal_parts(), LogReg(784), batch_size=4, gram_path=True)


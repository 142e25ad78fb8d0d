"""FedLADA reproduction entries at their ``--tiny`` scale (seconds), and the rounds-to-target
arithmetic of Tables 1 / 7 / 12 on hand-made curves."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from reproduce import common
from reproduce import fedlada_common as fc


def _curve(run, seed, values, metric="test_acc", every=5):
    return pd.DataFrame({"run": run, "seed": seed, "metric": metric,
                         "round": [every * i for i in range(len(values))], "value": values})


def test_rounds_to_target_and_paper_multipliers():
    df = pd.concat([
        _curve("a", 0, [0.1, 0.5, 0.8, 0.9]), _curve("a", 1, [0.1, 0.8, 0.9, 0.9]),
        _curve("b", 0, [0.1, 0.2, 0.3, 0.8]), _curve("b", 1, [0.1, 0.2, 0.8, 0.9]),
        _curve("c", 0, [0.1, 0.2, 0.3, 0.4]), _curve("c", 1, [0.1, 0.9, 0.9, 0.9])])
    out = fc.rounds_summary(df, "test_acc", 0.8)
    assert out.loc["a", "rounds"] == 7.5 and (out.loc["a", "lo"], out.loc["a", "hi"]) == (5, 10)
    assert out.loc["b", "rounds"] == 12.5
    assert math.isinf(out.loc["c", "rounds"])         # one seed never: inf, as Table 7's mean
    assert out.loc["a", "multiplier"] == 1.0
    assert out.loc["b", "multiplier"] == 1.66          # 12.5 / 7.5 = 1.666.. truncated
    assert fc.fmt_rounds(out.loc["b"]) == "12 [10-15] (1.66x)"
    assert fc.fmt_rounds(out.loc["c"]) == "inf"
    fin = fc.final_by_seed(df, "test_acc")
    assert fin.loc["c", "mean"] == pytest.approx(0.65)
    assert fc.best_by_seed(df, "test_acc").loc["b", "min"] == 0.8


def test_paper_hyperparameters_and_standin_rates():
    cfg = fc.StandIn(paper_lr=True)
    assert fc.hyper("fedadam", cfg) == {"eta_l": 0.1, "eta": 0.1, "tau": 0.1,
                                        "weight_decay": 1e-3, "lr_decay": 0.998}
    assert fc.hyper("fedlada", cfg)["weight_decay"] == 1e-2
    assert fc.hyper("scaffold", cfg)["n_clients"] == 100
    assert fc.hyper("fedlada", fc.StandIn(paper_lr=True, dataset="tinyimagenet"))["alpha"] == 0.05
    assert fc.hyper("fedlada", fc.StandIn())["eta_l"] == fc.CPU_LR["fedlada"]
    assert fc.participation(cfg).m == 10
    full = fc.StandIn(full=True)
    full.scale()
    assert (full.dataset, full.model, full.rounds, fc.epochs(full), full.paper_lr) == \
        ("cifar10", "resnet18", 1500, 5, True)
    # spec 3.1: 5 local epochs on CIFAR-10, 2 on CIFAR-100 and TinyImageNet; a flag wins
    for dataset, epochs in (("cifar100", 2), ("tinyimagenet", 2)):
        full.dataset = dataset
        assert fc.epochs(full) == epochs and fc.problem_desc(full)["local_epochs"] == epochs
    full.local_epochs = 3
    assert fc.epochs(full) == 3 and fc.problem_desc(full)["local_epochs"] == 3


def test_standin_search_options_keep_default_keys_and_reach_the_problem():
    """``--lr-decay`` / ``--subset-of`` / ``--depth`` (the stand-in search's options): absent
    from run keys and sweep cells at their defaults, passed to the rule and the problem
    when set."""
    cfg = fc.StandIn(paper_lr=True)
    assert not {"lr_decay", "subset_of", "depth"} & set(cfg.run_key())
    assert not {"subset_of", "depth"} & set(fc.problem_desc(cfg))
    cfg = fc.StandIn(paper_lr=True, lr_decay=0.99, subset_of=600, depth=3, hidden=4,
                     n_clients=5, eval_train_samples=50, test_samples=50)
    assert {"lr_decay", "subset_of", "depth"} <= set(cfg.run_key())
    assert fc.hyper("localadam", cfg)["lr_decay"] == 0.99
    prob = fc.problem(cfg)
    assert prob.n_clients == 5 and {len(p) for p in prob.parts} == {100}   # 60000 / 600
    assert len(prob.layout.shapes) == 8                                    # 3 hidden layers


PA = "premise absent"


@pytest.mark.parametrize("entry,expect", [
    # the --tiny runs are 3 rounds of 3 local steps: every claim's regime card fails
    ("fedlada_fig2", ({"E1": PA, "E2": PA, "E3": PA, "E4": PA, "E5": PA, "E12": PA},
                      ["Table 1", "Table 7", "Table 6"])),
    ("fedlada_fig1", ({"F1a": PA, "F1b": PA, "F1c": PA}, ["training loss averaged over rounds"])),
    ("fedlada_fig8", ({"E10": PA, "E11": "inconclusive: missing"}, [])),
    ("fedlada_alpha", ({"E6": PA, "E9a": PA, "E9b": PA, "E9c": PA, "E9": PA, "T3": PA},
                       ["Table 5", "Table 3"])),
    ("fedlada_k", ({"E7": PA}, ["Table 4"])),
    ("fedlada_participation", ({"E8": PA}, [])),
    ("fedlada_fig7", ({"E13 [gelu]": PA, "E13 [smu]": PA}, [])),
])
def test_entry_tiny_runs_and_checks(entry, expect, tmp_path, capsys):
    import importlib

    from verdict_util import saved
    mod = importlib.import_module(f"reproduce.{entry}")
    torch.set_num_threads(1)
    rc = common.main(mod, ["--tiny", "--quiet", "--out", str(tmp_path / "res"),
                           "--figures", str(tmp_path / "fig")])
    out = capsys.readouterr().out
    assert rc == 0, out
    labels, texts = expect
    assert saved(tmp_path / "res", entry) == labels      # every claim, its label exactly
    for text in texts:
        assert text in out, (text, out)
    assert "regime card: FAILS" in out and "lr decay reached 0.994 (paper 0.0496" in out
    assert "missing:" not in out                 # every run has results (sweeps included)
    assert (tmp_path / "fig" / f"{entry}.png").stat().st_size > 0
    # a second call reuses the saved results (nothing runs) and prints the same check
    rc = common.main(mod, ["--tiny", "--quiet", "--plot-only", "--out", str(tmp_path / "res"),
                           "--figures", str(tmp_path / "fig")])
    assert rc == 0 and capsys.readouterr().out.split("results:")[1] == out.split("results:")[1]


def test_bad_methods_is_a_one_line_error(capsys):
    from reproduce import fedlada_fig2
    rc = common.main(fedlada_fig2, ["--tiny", "--methods", "fedavg,nope", "--plot-only"])
    assert rc == 2 and "unknown nope" in capsys.readouterr().err


def test_train_accuracy_observer_equals_direct_evaluation():
    """The Table 1 "TRAIN" accuracy the entries record: the server model's accuracy on the
    problem's evaluation subset of the training set, against torch.func on the flat vector."""
    import numpy as np
    from torch.func import functional_call

    from sims.core.engine import run
    from sims.problems.models import MLP
    from sims.problems.neural import NeuralProblem
    from conftest import random_dataset, unequal_parts
    prob = NeuralProblem(random_dataset(62, 28, 0), unequal_parts(), MLP(784, hidden=4),
                         batch_size=4, dtype=torch.float64)
    alg = fc.make_algorithm("fedavg", eta_l=0.05)
    out = run(prob, alg, fc.Participation("fixed", m=3), 4, [0, 1], eval_every=2,
              observers=[fc.TrainAccuracy(2)])
    assert list(out.rounds["train_acc"]) == [0, 2, 4]
    for r in range(2):
        params = prob.layout.unflatten(out.server["theta"][r])
        logits = functional_call(prob.model, params, (prob.x[prob.eval_index],))
        acc = float((logits.argmax(-1) == prob.y[prob.eval_index]).double().mean())
        # (the count is float32 in the problem; one sample is 1/62)
        assert np.isclose(out.metrics["train_acc"][r, -1], acc, rtol=0, atol=1e-6)


def _table5(finals):
    """A Table 5 sweep's rows: ``finals[alpha] = (seed 0, seed 1)`` final test accuracy."""
    import pandas as pd
    rows = []
    for a, accs in finals.items():
        for seed, acc in enumerate(accs):
            rows.append({"run": f"fedlada_a{a:g}", "seed": seed, "round": 70,
                         "metric": "test_acc", "value": acc, "panel": "table5",
                         "sweep": "table5", "algorithm": "fedlada", "alpha": a})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("finals,interior,at005", [
    # an interior peak at 0.05, both ends below it beyond the seed spread: the paper's E6
    ({0.01: (.70, .71, .70), 0.05: (.80, .81, .805), 1.0: (.75, .76, .755)}, "shows", "shows"),
    # an interior peak at 0.1 (not 0.05)
    ({0.01: (.70, .71, .70), 0.05: (.72, .73, .72), 0.1: (.80, .81, .805), 1.0: (.75, .76, .755)},
     "shows", "does not show"),
    # interior by the mean, but the seeds spread too widely to decide it
    ({0.01: (.70, .71, .70), 0.05: (.70, .90, .72), 1.0: (.75, .79, .70)},
     "inconclusive: underpowered", "inconclusive: underpowered"),
    # monotone: the best interior point is below the upper end
    ({0.01: (.70, .71, .70), 0.05: (.75, .76, .755), 1.0: (.80, .81, .805)},
     "does not show", "does not show"),
])
def test_e6_verdict_is_the_full_claim(finals, interior, at005):
    """E6: an interior peak above both ends (paired by seed, 95 % intervals), and at 0.05
    (above every other alpha), each part decided; the claim's card is the stand-in's (it
    fails at the stand-in's decay), so the parts carry the statistics."""
    from reproduce import fedlada_alpha
    lines = fedlada_alpha.check(_table5(finals), fedlada_alpha.Config())
    e6 = next(v for v in lines if getattr(v, "claim", None) == "E6")
    assert e6.label == "premise absent"
    order = ["does not show", "inconclusive: underpowered", "shows"].index
    ends = [p.label for p in e6.parts if "both ends" in p.what]
    at = [p.label for p in e6.parts if p.what.startswith("alpha 0.05 above")]
    assert min(ends, key=order) == interior, e6.lines()
    assert min(at, key=order) == at005, e6.lines()


def _k_rows(loss_hit, best_at):
    """Rows of the K entry: for each K, a training loss that falls from 1 to 0.4 (K=2 at its
    last round 60; the others reach 0.4 at ``loss_hit[K]``) and a test accuracy peaking at
    ``best_at[K]``."""
    import pandas as pd
    rows = []
    for k in (2, 4):
        for seed in (0, 1):
            for r in range(0, 65, 5):
                hit = 60 if k == 2 else loss_hit[k]
                loss = max(0.4, 1 - 0.6 * r / hit) if r < hit else 0.4 - 1e-3 * (k == 4)
                acc = 0.8 - 0.001 * abs(r - best_at[k])
                for metric, val in (("train_loss", loss), ("test_acc", acc)):
                    rows.append({"run": f"K{k}", "K": k, "seed": seed, "round": r,
                                 "metric": metric, "value": val})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("hit4,best,speed_ok,best_ok", [
    (25, {2: 50, 4: 30}, "shows", "shows"),              # 60/25 = 2.4x; K=4 best first
    (40, {2: 50, 4: 30}, "does not show", "shows"),      # 1.5x: faster, not about 2.2x
    (25, {2: 30, 4: 50}, "shows", "does not show"),      # K=2 reaches its best first
])
def test_e7_verdicts_are_the_full_claim(hit4, best, speed_ok, best_ok):
    from reproduce import fedlada_k
    cfg = fedlada_k.Config(ks="2,4")
    lines = fedlada_k.check(_k_rows({4: hit4}, best), cfg)
    e7 = next(v for v in lines if getattr(v, "claim", None) == "E7")
    speed = next(p for p in e7.parts if p.definition == "faster")
    assert speed.label == speed_ok, e7.lines()
    when = next(p for p in e7.parts if "reaches its best before" in p.what)
    assert when.label == best_ok, e7.lines()

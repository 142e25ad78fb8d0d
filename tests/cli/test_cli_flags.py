"""One command-line shape: the shared flags of sims.compare, sims.sweep and the entries
(sims.cli), the console command, and the end-to-end route to a user's arrays."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sims import cli
from sims.algorithms.registry import hyperparameters, list_algorithms

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")


def _run(args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=300)


# ------------------------------------------------------------------------------ parsing

def test_partition_options():
    assert cli.parse_partition("shards") == ("shards", {})
    assert cli.parse_partition("dirichlet:alpha=0.5") == ("dirichlet", {"alpha": 0.5})
    assert cli.parse_partition("dirichlet:alpha=0.1,variant=per_client,min_size=2") == (
        "dirichlet", {"alpha": 0.1, "variant": "per_client", "min_size": 2})
    assert cli.parse_partition("dirichlet:alpha=1:self_balancing=true")[1] == {
        "alpha": 1, "self_balancing": True}
    for text, match in (("dirichlet", "needs alpha: e.g. --partition dirichlet:alpha=0.5"),
                        ("dirichlet:beta=1", "unknown option"),
                        ("zipf", "unknown scheme"), ("dirichlet:alpha", "cannot read")):
        with pytest.raises(cli.CLIError, match=match):
            cli.parse_partition(text)


def test_dp_options():
    assert cli.parse_dp(None) is None
    dp = cli.parse_dp("clip=1,sigma=0.8")
    assert (dp.clip, dp.sigma, dp.epsilon, dp.accountant) == (1.0, 0.8, None, "rdp")
    dp = cli.parse_dp("clip=0.5,epsilon=8,delta=1e-5,accountant=PLD")
    assert (dp.epsilon, dp.delta, dp.accountant) == (8.0, 1e-5, "pld")


@NO_GPU
def test_check_device():
    assert cli.check_device("cpu").type == "cpu"
    with pytest.raises(cli.CLIError, match="torch sees no GPU"):
        cli.check_device("cuda")
    with pytest.raises(cli.CLIError, match="not a device torch knows"):
        cli.check_device("gpu0")


def test_import_of_a_missing_module_is_one_line():
    with pytest.raises(cli.CLIError) as err:
        cli.import_plugins(["no_such_module_for_fedtoolkit"])
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------ commands

@NO_GPU
@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["-m", "sims.compare", "--device", "cuda", "--tiny"],
    ["-m", "sims.sweep", "--device", "cuda", "--tiny"],
    ["-m", "reproduce.fig8", "--device", "cuda", "--tiny"],
    ["-m", "sims.console", "reproduce", "fig1", "--device", "cuda", "--tiny"],
    ["-m", "sims.console", "compare", "--device", "cuda"],
])
def test_cuda_without_a_gpu_is_one_line_in_every_command(args, tmp_path):
    res = _run(args + ["--out", str(tmp_path)], cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device cuda: torch sees no GPU here" in lines[0]
    assert not any(tmp_path.rglob("*.csv"))                     # before any work


@NO_GPU
def test_cuda_without_a_gpu_from_python_is_one_line():
    from sims.experiments.sweep import Grid, GridError, SweepSpec
    from sims.problems.image import build_image_problem
    with pytest.raises(GridError, match="torch sees no GPU") as err:
        SweepSpec("x", Grid.from_specs("fedavg"), {}, None, device="cuda")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="torch sees no GPU"):
        build_image_problem("mnist-subset", "mlp", 4, device="cuda")


def test_sweep_refuses_a_problem_built_elsewhere_than_its_device(tmp_path):
    """A spec whose builder puts the problem on another device than the spec's is refused
    (the API's guard against a silent run elsewhere); here: a 'meta' problem for a CPU
    sweep."""
    from sims.experiments.sweep import Grid, GridError, SweepSpec, run_sweep
    from sims.problems.quadratic import heterogeneous_quadratic

    class Elsewhere:
        def __init__(self, problem):
            self._p = problem
            self.device = torch.device("meta")

        def __getattr__(self, name):
            return getattr(self._p, name)

    def build(desc):
        return Elsewhere(heterogeneous_quadratic(4, 3))

    spec = SweepSpec("elsewhere", Grid.from_specs("fedavg"), {"k": 1}, build, rounds=1,
                     out=str(tmp_path))
    with pytest.raises(GridError, match="built the problem on meta"):
        run_sweep(spec, quiet=True)


@pytest.mark.parametrize("module", ["sims.compare", "sims.sweep"])
def test_help_lists_problems_algorithms_and_their_hyperparameters(module):
    res = _run(["-m", module, "--help"])
    assert res.returncode == 0
    text = res.stdout
    for flag in ("--device", "--dp", "--import", "--hp", "--partition", "--reuse-stale",
                 "--tag", "--loss"):
        assert flag in text
    assert "quadratic" in text and "arrays:PATH.npz" in text and "mnist" in text
    assert "dirichlet:alpha=" in text
    for name in list_algorithms():
        assert f"\n  {name} " in text
    # hyperparameters with their defaults, e.g. fedadam's eta=0.1 and tau=0.1
    block = text.split("\n  fedadam ", 1)[1].split("\n  fedadam-cm", 1)[0]
    hp = hyperparameters("fedadam")
    assert f"eta={hp['eta']}" in " ".join(block.split())
    assert f"tau={hp['tau']}" in " ".join(block.split())


def test_console_command_is_declared_and_dispatches(capsys):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fedtoolkit"] == "sims.console:main"
    assert (ROOT / "sims" / "py.typed").is_file()
    from sims.console import main
    assert main([]) == 0 and "compare" in capsys.readouterr().out
    assert main(["nonsense"]) == 2
    assert "unknown command" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["sweep", "--help"])
    assert done.value.code == 0 and "fedtoolkit sweep" in capsys.readouterr().out
    assert main(["reproduce"]) == 0 and "fig8" in capsys.readouterr().out


def test_sweep_takes_hp_and_tag(tmp_path, capsys):
    from sims.experiments.sweep.cli import main
    rc = main(["--tag", "tagged", "--algorithms", "fedavg,fedadam", "--grid", "eta_l=0.05,0.1",
               "--hp", "eta=0.5", "--hp", "fedadam.tau=0.01", "--problem", "quadratic",
               "--n-clients", "6", "--dim", "4", "--participation", "m=3", "--rounds", "2",
               "--seeds", "1", "--quiet", "--out", str(tmp_path / "out"), "--figures",
               str(tmp_path / "fig")])
    assert rc == 0
    grid = pd.read_csv(tmp_path / "out" / "tagged" / "grid.csv")
    assert len(grid) == 4
    cells = list((tmp_path / "out" / "tagged" / "cells").glob("fedadam_*.json"))
    settings = json.loads(cells[0].read_text())["settings"]
    assert settings["eta"] == 0.5 and settings["tau"] == 0.01


def test_compare_run_keys_are_unchanged_at_the_new_flags_defaults():
    """Runs saved before --device/--dp/--loss/--model/--import existed keep their keys."""
    from sims.experiments.compare import Config, run_key
    key = run_key(Config(), "fedavg", "fedavg", {})
    assert not {"device", "dp", "loss", "model", "imports"} & set(key["settings"])
    assert run_key(Config(dp="clip=1,sigma=1"), "fedavg", "fedavg", {})["settings"]["dp"]


# ------------------------------------------------------------------------------ your data

@pytest.fixture
def tabular_npz(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 7)).astype(np.float32)
    y = (x @ rng.normal(size=(7, 4))).argmax(1)
    path = tmp_path / "tab.npz"
    np.savez(path, x=x[:400], y=y[:400], x_test=x[400:], y_test=y[400:])
    return path


@pytest.mark.slow
def test_arrays_problem_with_a_dirichlet_partition_end_to_end(tabular_npz, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["-m", "sims.compare", "--problem", f"arrays:{tabular_npz}", "--partition",
            "dirichlet:alpha=0.5", "--n-clients", "12", "--participation", "m=4",
            "--algorithms", "fedavg,fedadam", "--rounds", "3", "--seeds", "2", "--quiet",
            "--out", str(out), "--figures", str(tmp_path / "fig")]
    res = _run(args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    csvs = sorted(out.glob("compare_fedavg_T3_*.csv"))
    assert len(csvs) == 1
    df = pd.read_csv(csvs[0])
    assert {"train_loss", "test_acc", "test_loss"} <= set(df.metric)
    assert sorted(df.seed.unique()) == [0, 1]
    record = json.loads(csvs[0].with_suffix(".json").read_text())
    assert record["config"]["partition"] == "dirichlet:alpha=0.5"
    data = record["data"][0]
    assert data["dataset"] == f"arrays:{tabular_npz.resolve()}" and len(data["files"]) == 1
    summary = pd.read_csv(next(out.glob("compare_summary_*.csv")))
    assert set(summary.algorithm) == {"fedavg", "fedadam"}
    # rerun (in this process): reused; a changed file: recomputed
    from sims.experiments.compare import main
    assert main(args[2:]) == 0
    assert "reused 2 saved run" in capsys.readouterr().out
    arrays = dict(np.load(tabular_npz))
    arrays["x"] = arrays["x"] * 2
    np.savez(tabular_npz, **arrays)
    assert main(args[2:]) == 0
    assert "reused" not in capsys.readouterr().out


def test_arrays_problem_in_a_sweep_with_mse(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    path = tmp_path / "reg.npz"
    np.savez(path, x=x, y=x @ rng.normal(size=5))
    from sims.experiments.sweep.cli import main
    rc = main(["--problem", f"arrays:{path}", "--loss", "mse", "--model", "logreg",
               "--partition", "iid", "--algorithms", "fedavg", "--grid", "eta_l=0.01,0.05",
               "--n-clients", "5", "--participation", "full", "--rounds", "2", "--seeds", "1",
               "--quiet", "--out", str(tmp_path / "out"), "--figures", str(tmp_path / "f")])
    assert rc == 0
    grid = pd.read_csv(tmp_path / "out" / "sweep" / "grid.csv")
    assert len(grid) == 2 and grid["score"].notna().all()


@pytest.mark.parametrize("extra, match", [
    (["--partition", "dirichlet"], "--partition dirichlet needs alpha"),
    (["--loss", "hinge"], "unknown loss"),
    (["--model", "resnet"], "arrays problems take mlp or logreg"),
])
def test_arrays_problem_bad_flags_are_one_line(tabular_npz, tmp_path, capsys, extra, match):
    from sims.experiments.compare import main
    rc = main(["--problem", f"arrays:{tabular_npz}", "--n-clients", "4", "--rounds", "1",
               "--seeds", "1", "--quiet", "--out", str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1


def test_partition_option_reaches_an_image_problem(tmp_path, capsys):
    from sims.experiments.compare import main
    rc = main(["--problem", "mnist-subset-logreg", "--partition", "dirichlet:alpha=0.3",
               "--n-clients", "6", "--participation", "m=2", "--algorithms", "fedavg",
               "--rounds", "1", "--seeds", "1", "--eval-train-samples", "100", "--quiet",
               "--out", str(tmp_path / "o"), "--figures", str(tmp_path / "f")])
    assert rc == 0, capsys.readouterr().err


PLUGIN = '''
from dataclasses import dataclass
import sims
from sims.algorithms.baselines import FedOpt


@dataclass
class PluggedAvg(FedOpt):
    name = "plugged-avg"


sims.register("algorithm", "plugged-avg", PluggedAvg, description="FedAvg from a plug-in")
'''


def test_import_flag_reaches_the_plugins_or_says_what_is_missing(tmp_path, capsys):
    """``--import`` goes through sims.plugins.import_modules: where that module exists, a
    plugged algorithm is listed by --help and runs in compare and sweep; where it does not,
    the flag is one line saying so."""
    import importlib.util
    from sims.experiments.compare import main as compare_main
    from sims.experiments.sweep.cli import main as sweep_main
    module = tmp_path / "plugged_for_cli_test.py"
    module.write_text(PLUGIN)
    common = ["--import", str(module), "--tiny", "--quiet", "--out", str(tmp_path / "o"),
              "--figures", str(tmp_path / "f")]
    if importlib.util.find_spec("sims.plugins") is None:
        assert compare_main(["--algorithms", "fedavg", *common]) == 2
        err = capsys.readouterr().err.strip()
        assert "--import needs sims.plugins" in err and "\n" not in err
        return
    with pytest.raises(SystemExit):
        compare_main(["--import", str(module), "--help"])
    assert "\n  plugged-avg " in capsys.readouterr().out
    assert compare_main(["--algorithms", "plugged-avg,fedavg", *common]) == 0
    assert sweep_main(["--algorithms", "plugged-avg", "--grid", "eta_l=0.05,0.1",
                       *common]) == 0
    assert compare_main(["--import", "no_such_plugin_module_xyz", "--tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_plugin_module_xyz" in err[0]

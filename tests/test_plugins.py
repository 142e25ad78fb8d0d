"""Plug-ins (sims.plugins): an external module registers an algorithm, a problem and a model
that the commands run; its source is in the run's code digest, so an edit recomputes;
installed packages' entry points are loaded lazily; bad plug-ins fail in one line.

(The commands' ``--import MODULE`` flag calls :func:`sims.plugins.import_modules`; these
tests call it directly, then the command's ``main``.)"""
from __future__ import annotations

import importlib.metadata
import json
import sys
import textwrap

import pytest
import torch

import sims
from sims import plugins
from sims.algorithms import registry
from sims.experiments import compare
from sims.problems import models
from sims.problems import registry as problems
from sims.store import extensions, identity

ALGORITHM = '''
"""A user's FedAvgM, outside the package."""
from dataclasses import dataclass

import sims
from sims.algorithms.baselines import FedOpt
from sims.rules.server import Momentum


@dataclass
class {cls}(FedOpt):
    """FedAvg with server momentum (a plug-in)."""
    name = "{name}"
    beta: float = {beta}

    def make_server_rule(self):
        return Momentum(self.beta)


sims.register("algorithm", "{name}", {cls})
'''


def write_plugin(folder, module="lab_alg", name="lab-fedavgm", beta=0.9, cls="LabFedAvgM"):
    path = folder / f"{module}.py"
    path.write_text(ALGORITHM.format(name=name, beta=beta, cls=cls))
    return path


def run_compare(out, *extra):
    return compare.main(["--algorithms", "lab-fedavgm:beta=0.5,fedavg", "--problem", "quadratic",
                         "--tiny", "--quiet", "--out", str(out), *extra])


def records(folder, pattern="*lab-fedavgm*.json"):
    return [json.loads(p.read_text()) for p in sorted(folder.glob(pattern))]


def test_external_algorithm_runs_in_compare_and_an_edit_recomputes(tmp_path, capsys,
                                                                     clean_plugins):
    path = write_plugin(tmp_path, beta=0.9)
    (module,) = sims.import_modules([str(path)])
    assert module.__name__ == "lab_alg" and "lab-fedavgm" in registry.list_algorithms()
    assert registry.hyperparameters("lab-fedavgm")["beta"] == 0.9
    sha = plugins.plugin_sources()["lab_alg"]
    assert len(sha) == 64
    assert run_compare(tmp_path / "out") == 0
    (rec,) = records(tmp_path / "out")
    assert rec["algorithm"]["name"] == "lab-fedavgm" and rec["algorithm"]["beta"] == 0.5
    assert rec["code"]["plugins"] == {"lab_alg": sha}
    capsys.readouterr()
    assert run_compare(tmp_path / "out") == 0                  # same source: reused
    assert "reused 2 saved runs" in capsys.readouterr().out
    # the user edits the plug-in; a new process imports the new source
    path.write_text(path.read_text().replace("return Momentum(self.beta)",
                                             "return Momentum(self.beta * 0.5)"))
    del sys.modules["lab_alg"]
    del extensions._LOADED["lab_alg"]
    registry.ALGORITHMS.pop("lab-fedavgm")
    sims.import_modules([str(path)])
    assert plugins.plugin_sources()["lab_alg"] != sha
    assert run_compare(tmp_path / "out") == 0
    said = capsys.readouterr().out
    assert "recomputing 2 saved runs" in said and "reused" not in said
    (again,) = records(tmp_path / "out")
    assert again["code"]["plugins"]["lab_alg"] != sha
    assert again["fingerprint"] != rec["fingerprint"]


def test_registered_problem_and_model(tmp_path, clean_plugins):
    from conftest import random_dataset
    from sims.problems.image import build_image_problem
    from sims.problems.quadratic import heterogeneous_quadratic

    def lab_quadratic(n_clients, dim, local_steps=None):
        """A fixed quadratic (a plug-in problem)."""
        return heterogeneous_quadratic(n_clients, dim, seed=7, local_steps=local_steps or 2,
                                       dtype=torch.float64)

    def lab_net(in_shape, num_classes, hidden=6):
        c, h, w = in_shape
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(c * h * w, hidden),
                                   torch.nn.GELU(), torch.nn.Linear(hidden, num_classes))

    assert sims.register("problem", "lab-quad", lab_quadratic) == "lab-quad"
    assert sims.register("model", "lab-net", lab_net) == "lab-net"
    assert problems.list_problems() == {"lab-quad": "A fixed quadratic (a plug-in problem)."}
    cfg = compare.Config(problem="lab-quad", n_clients=6, dim=4)
    assert compare.build_problem(cfg).n_clients == 6
    assert compare.main(["--algorithms", "fedavg", "--problem", "lab-quad", "--tiny",
                         "--quiet", "--out", str(tmp_path / "q")]) == 0
    net = models.make_model("lab-net", (1, 6, 6), 10, hidden=3)
    assert net[1].out_features == 3
    problem = build_image_problem("fixture", "lab-net", 4, scheme="iid",
                                  data=random_dataset(40, 6, 0), batch_size=5)
    assert problem.n_clients == 4 and problem.d == 36 * 6 + 6 + 6 * 10 + 10


def test_plain_callable_factory_takes_its_signature_as_hyperparameters(clean_plugins):
    from sims.algorithms.baselines import FedAvg

    def lab_fedavg(eta_l: float = 0.05, eta: float = 1.0):
        return FedAvg(eta=eta, eta_l=eta_l)

    sims.register("algorithm", "lab-plain", lab_fedavg)
    assert registry.hyperparameters("lab-plain") == {"eta_l": 0.05, "eta": 1.0}
    assert registry.make_algorithm("lab_plain", eta_l=0.2).eta_l == 0.2
    with pytest.raises(registry.AlgorithmError, match="unknown hyperparameter"):
        registry.make_algorithm("lab-plain", beta=1)


def test_register_errors_are_one_line(clean_plugins):
    with pytest.raises(plugins.PluginError, match="unknown kind 'optimizer'"):
        plugins.register("optimizer", "x", dict)
    with pytest.raises(plugins.PluginError, match="'fedavg' is already registered"):
        plugins.register("algorithm", "fedavg", dict)
    with pytest.raises(plugins.PluginError, match="already registered"):
        plugins.register("model", "mlp", dict)
    with pytest.raises(plugins.PluginError, match="built-in problem"):
        plugins.register("problem", "fmnist-mlp", dict)
    with pytest.raises(plugins.PluginError, match="must be callable"):
        plugins.register("problem", "lab-x", 3)
    with pytest.raises(plugins.PluginError, match="bad algorithm name"):
        plugins.register("algorithm", "Lab alg!", dict)
    from sims.algorithms.baselines import FedAvg
    plugins.register("algorithm", "fedavg", FedAvg, description="replaced", replace=True)
    assert registry.list_algorithms()["fedavg"] == "replaced"


@pytest.mark.parametrize("text, message", [
    ("lab_no_such_module", "no module named 'lab_no_such_module'"),
    ("{tmp}/missing.py", "no such file or folder"),
    ("{tmp}/lab_syntax.py", "SyntaxError: "),
    ("{tmp}/lab_raises.py", "ZeroDivisionError: division by zero"),
])
def test_import_errors_are_one_line(tmp_path, text, message, clean_plugins):
    (tmp_path / "lab_syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "lab_raises.py").write_text("x = 1\ny = x / 0\n")
    with pytest.raises(plugins.PluginError) as err:
        sims.import_modules([text.format(tmp=tmp_path)])
    line = str(err.value)
    assert message in line and "\n" not in line and line.startswith("--import ")
    if "raises" in text:
        assert "lab_raises.py, line 2" in line


def test_import_by_dotted_name_and_package_folder(tmp_path, monkeypatch, clean_plugins):
    pkg = tmp_path / "lab_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import algs\n")
    write_plugin(pkg, "algs", name="lab-pkg-alg")
    (mod,) = sims.import_modules([str(pkg)])
    assert mod.__name__ == "lab_pkg" and "lab-pkg-alg" in registry.ALGORITHMS
    sha = plugins.plugin_sources()["lab_pkg"]
    (pkg / "algs.py").write_text((pkg / "algs.py").read_text() + "\n# edited\n")
    assert extensions._digest(extensions._source_files(mod)[0]) != sha   # a file of it counts
    monkeypatch.syspath_prepend(str(tmp_path))
    write_plugin(tmp_path, "lab_dotted", name="lab-dotted")
    assert sims.import_modules(["lab_dotted"])[0].__name__ == "lab_dotted"
    assert set(plugins.plugin_sources()) >= {"lab_pkg", "lab_dotted"}
    assert plugins.registered()[("algorithm", "lab-dotted")] == "lab_dotted"


def test_plugin_sources_are_in_the_code_digest(monkeypatch, clean_plugins):
    before = identity.code_digest()
    monkeypatch.setitem(extensions._LOADED, "lab_x",
                        extensions.Loaded("lab_x", "lab_x.py", {"lab_x.py": b"a = 1"}, "ab" * 32))
    with_plugin = identity.code_digest()
    extensions._LOADED["lab_x"].sha256 = "cd" * 32
    assert len({before, with_plugin, identity.code_digest()}) == 3
    assert identity.code_identity()["plugins"] == {"lab_x": "cd" * 32}


def test_entry_points_are_loaded_once_lazily(tmp_path, monkeypatch, clean_plugins):
    write_plugin(tmp_path, "fedtoolkit_lab_ep", name="lab-ep")
    (tmp_path / "fedtoolkit_lab_call.py").write_text(textwrap.dedent('''
        import sims
        from sims.algorithms.baselines import FedAvg
        def register_all():
            sims.register("algorithm", "lab-called", FedAvg)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [importlib.metadata.EntryPoint("lab", "fedtoolkit_lab_ep", plugins.ENTRY_POINT_GROUP),
           importlib.metadata.EntryPoint("lab2", "fedtoolkit_lab_call:register_all",
                                         plugins.ENTRY_POINT_GROUP)]
    calls = []

    def entry_points(group=None):
        calls.append(group)
        return eps if group == plugins.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(extensions, "_ENTRY_POINTS_LOADED", False)
    assert "lab-ep" not in registry.ALGORITHMS                 # nothing loaded until asked
    assert registry.make_algorithm("lab-ep", beta=0.3).beta == 0.3
    assert "lab-called" in registry.list_algorithms()
    assert calls == [plugins.ENTRY_POINT_GROUP]                # once
    assert {"fedtoolkit_lab_ep", "fedtoolkit_lab_call"} <= set(plugins.plugin_sources())


def test_a_failing_entry_point_is_one_line(tmp_path, monkeypatch, clean_plugins):
    (tmp_path / "fedtoolkit_lab_bad.py").write_text("raise RuntimeError('broken plug-in')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("bad", "fedtoolkit_lab_bad", plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == plugins.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(extensions, "_ENTRY_POINTS_LOADED", False)
    with pytest.raises(plugins.PluginError, match="installed plug-in bad .* RuntimeError: "
                                                  "broken plug-in"):
        registry.lookup("fedavg")


def test_shipped_module_is_imported_from_its_source(tmp_path, clean_plugins):
    """What a Ray worker does with a task's plug-ins (the Ray test runs it on workers)."""
    path = write_plugin(tmp_path, "lab_shipped", name="lab-shipped")
    sims.import_modules([str(path)])
    shipped = plugins.shipment()
    # a fresh worker: neither the module nor its registration
    del sys.modules["lab_shipped"], extensions._LOADED["lab_shipped"]
    registry.ALGORITHMS.pop("lab-shipped")
    path.unlink()                                   # the worker has no copy of the file
    plugins.ensure(shipped)
    assert "lab-shipped" in registry.ALGORITHMS
    assert plugins.plugin_sources()["lab_shipped"] == shipped["modules"][0]["sha256"]
    plugins.ensure(shipped)                         # the same source again: nothing to do


def readme_blocks():
    """The README plug-in section's two Python blocks: the module and its run."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Plug-ins: your own algorithm, problem and model", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) == 2
    return blocks


def test_readme_worked_example_runs_as_written(tmp_path, monkeypatch, capsys, clean_plugins):
    module, run = readme_blocks()
    (tmp_path / "my_fedavgm.py").write_text(module)
    monkeypatch.chdir(tmp_path)
    exec(compile(run.replace('"--rounds", "20"', '"--rounds", "3", "--quiet"'), "README", "exec"),
         {})
    assert "my-fedavgm" in registry.ALGORITHMS
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "results/mine").glob("*my-fed*.json")]
    assert rec["algorithm"] == {"name": "my-fedavgm", "eta": 1.0, "eta_l": 0.05, "beta": 0.8}
    assert set(rec["code"]["plugins"]) == {"my_fedavgm"}
    # the same rule through the package's FedAvgM: identical curves
    from sims.algorithms.baselines import FedAvgM
    from sims.core import engine
    from sims.core.participation import Participation
    problem = compare.build_problem(compare.Config(problem="quadratic"))
    runs = [engine.run(problem, alg, Participation.parse("m=10"), 3, [0])
            for alg in (registry.make_algorithm("my-fedavgm", beta=0.8),
                        FedAvgM(eta=1.0, eta_l=0.05, beta=0.8))]
    assert (runs[0].metrics["train_loss"] == runs[1].metrics["train_loss"]).all()


def test_a_broken_installed_plugin_is_one_line_in_the_commands(tmp_path, monkeypatch, capsys,
                                                                 clean_plugins):
    from sims.experiments.sweep import cli
    (tmp_path / "fedtoolkit_lab_broken.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("broken", "fedtoolkit_lab_broken",
                                       plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == plugins.ENTRY_POINT_GROUP else [])
    for main in (compare.main, cli.main):
        monkeypatch.setattr(extensions, "_ENTRY_POINTS_LOADED", False)
        assert main(["--algorithms", "fedavg", "--tiny", "--quiet",
                     "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip()
        assert "installed plug-in broken" in err and "no_such_dependency_here" in err
        assert "\n" not in err


def test_a_registration_outside_any_module_is_in_the_digest_by_its_code(clean_plugins):
    """A notebook's registration (no module to hash): its code is hashed instead."""
    from sims.algorithms.baselines import FedAvg

    def first(eta_l: float = 0.1):
        return FedAvg(eta_l=eta_l)

    def second(eta_l: float = 0.1):
        return FedAvg(eta_l=eta_l * 0.5)

    before = identity.code_digest()
    sims.register("algorithm", "lab-notebook", first)
    one = identity.code_digest()
    sims.register("algorithm", "lab-notebook", second, replace=True)
    two = identity.code_digest()
    assert len({before, one, two}) == 3
    assert "<algorithm lab-notebook>" in plugins.plugin_sources()


def test_shipped_package_is_written_and_imported(tmp_path, clean_plugins):
    pkg = tmp_path / "lab_shipped_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import algs\n")
    write_plugin(pkg, "algs", name="lab-shipped-pkg")
    sims.import_modules([str(pkg)])
    shipped = plugins.shipment()
    for name in ("lab_shipped_pkg", "lab_shipped_pkg.algs"):
        sys.modules.pop(name, None)
    del extensions._LOADED["lab_shipped_pkg"]
    registry.ALGORITHMS.pop("lab-shipped-pkg")
    (pkg / "algs.py").unlink()
    (pkg / "__init__.py").unlink()
    plugins.ensure(shipped)
    assert "lab-shipped-pkg" in registry.ALGORITHMS
    assert plugins.plugin_sources()["lab_shipped_pkg"] == shipped["modules"][0]["sha256"]
    assert "fedtoolkit-plugin-" in sys.modules["lab_shipped_pkg"].__file__

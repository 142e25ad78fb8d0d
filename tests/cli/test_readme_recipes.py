"""The README's "Use it from Python" recipes run as written (in order, one namespace), and the
command-line recipe for your arrays runs on the file they write."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.slow
def test_use_it_from_python_recipes_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", _section("Use it from Python"), re.S)
    assert len(blocks) == 4                      # engine, sweep, DP, your data
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)   # noqa: S102 - our README
    printed = capsys.readouterr().out
    assert "13.12" in printed and "11.50" in printed and "DP note" in printed
    assert namespace["out"].metrics["test_acc"].shape[0] == 1
    eps = namespace["private"]
    assert eps.sampling_rate == 0.25
    assert (tmp_path / "mydata.npz").is_file()
    # the command-line recipe on the file the last recipe wrote
    cmd = re.search(r"```bash\n(python3 -m sims.compare --problem arrays:mydata.npz.*?)```",
                    _section("One command-line shape"), re.S).group(1)
    args = cmd.replace("\\\n", " ").split()[3:]
    args[args.index("--rounds") + 1] = "2"       # the recipe's 50 rounds, shortened
    from sims.experiments.compare import main
    assert main(args + ["--quiet", "--out", "o", "--figures", "f"]) == 0


@pytest.mark.parametrize("flag", ["--device", "--dp", "--import", "--hp", "--partition"])
def test_the_shape_section_names_the_shared_flags(flag):
    assert f"`{flag}" in _section("One command-line shape")

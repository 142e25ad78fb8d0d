"""python -m sims.results pack / unpack (sims.store.carry): finished runs carried to a fresh
machine, where a sweep reuses them; an archive that was not written by pack (a path outside the
folder, a link, an edited table) is refused before anything is written."""
from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile

import pytest

from sims.experiments.sweep import Grid, SweepSpec, cli, run_sweep
from sims.results import main as results_main
from sims.store import carry

QUAD = {"problem": "quadratic", "n_clients": 6, "dim": 8, "local_steps": 2, "local_epochs": 1,
        "batch_size": 32, "partition": "shards", "noise": "gaussian", "df": None,
        "sigma": 0.5, "heterogeneity": 1.0, "dtype": "float64", "data_dir": None,
        "eval_train_samples": None}


def spec(out, name="s") -> SweepSpec:
    grid = Grid.from_specs("fedavg,fedadam", ["eta_l=0.05,0.1"])
    return SweepSpec(name, grid, QUAD, cli.build_compare_problem, participation="m=3",
                     rounds=3, seeds=[0, 1], out=str(out))


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory):
    """A results folder with one finished sweep (8 cells) and an unfinished unit's checkpoint."""
    out = tmp_path_factory.mktemp("a") / "results"
    assert run_sweep(spec(out), quiet=True).ran == 8
    ckpt = out / "s" / ".checkpoints" / "unit_0.ckpt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"an unfinished unit")
    return out


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file() and ".checkpoints" not in p.parts}


def test_a_fresh_machine_resumes_a_sweep_from_the_packed_cells(machine_a, tmp_path, capsys):
    archive = tmp_path / "carry.tar.gz"
    assert results_main(["pack", str(machine_a), str(archive)]) == 0
    assert "packed 8 run(s)" in capsys.readouterr().out
    first = archive.read_bytes()
    assert results_main(["pack", str(machine_a), str(archive)]) == 0
    assert archive.read_bytes() == first             # the same runs, the same bytes (git)
    assert first[4:8] == bytes(4)                     # no time in the gzip header either
    with tarfile.open(archive) as tar:
        assert not any(".checkpoints" in n for n in tar.getnames())
    fresh = tmp_path / "b" / "results"
    assert results_main(["unpack", str(archive), str(fresh)]) == 0
    assert "8 run(s) added, 0 already there" in capsys.readouterr().out
    assert _files(fresh) == {k: v for k, v in _files(machine_a).items() if "/cells/" in k}
    again = run_sweep(spec(fresh), quiet=True)
    assert again.ran == 0 and again.reused == 8
    assert results_main(["unpack", str(archive), str(fresh)]) == 0
    assert "0 run(s) added, 8 already there, 0 kept" in capsys.readouterr().out


def test_a_result_already_on_the_machine_is_never_replaced(machine_a, tmp_path, capsys):
    archive = tmp_path / "carry.tar.gz"
    carry.pack(machine_a, archive)
    local = tmp_path / "results"
    shutil.copytree(machine_a, local)
    cell = sorted((local / "s" / "cells").glob("*.json"))[0]
    record = json.loads(cell.read_text())
    record["host"] = "this machine"
    cell.write_text(json.dumps(record))
    assert carry.unpack(archive, local) == {"added": 0, "already": 7, "kept": 1}
    assert json.loads(cell.read_text())["host"] == "this machine"


def test_pack_filters_and_refuses_an_edited_table(machine_a, tmp_path, capsys):
    archive = tmp_path / "carry.tar.gz"
    assert carry.pack(machine_a, archive, [("algorithm", "fedadam*")]) == 4
    assert results_main(["pack", str(machine_a), str(archive), "--filter",
                         "algorithm=nothing"]) == 2
    assert "no finished runs match the filters" in capsys.readouterr().err
    edited = tmp_path / "edited"
    shutil.copytree(machine_a, edited)
    table = sorted((edited / "s" / "cells").glob("*.csv"))[0]
    table.write_text(table.read_text() + "0\n")
    assert results_main(["pack", str(edited), str(tmp_path / "x.tar.gz")]) == 2
    err = capsys.readouterr().err
    assert "checksum" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.tar.gz").exists()


def _archive(path, members):
    """A gzipped tar of ``[(TarInfo, bytes)]`` as a planted archive would be."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


def _pair(name, table=b"a\n1\n", checksum=None):
    from sims.store.results import table_digest
    record = {"table": {"file": name, "rows": 1, "sha256": checksum or table_digest(table)}}
    return [(tarfile.TarInfo(f"{name}.csv"), table),
            (tarfile.TarInfo(f"{name}.json"), json.dumps(record).encode())]


def _link(name):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return [(info, b"")]


@pytest.mark.parametrize("members,message", [
    (_pair("../outside"), "relative path inside the folder"),
    (_pair("/abs/run"), "relative path inside the folder"),
    (_pair("ok") + [(tarfile.TarInfo("run.pkl"), b"x")], "relative path inside the folder"),
    (_pair("ok") + _link("link.csv"), "not a plain file"),
    (_pair("ok") + _pair("bad", checksum="0" * 64), "does not match its record's checksum"),
    (_pair("ok")[:1], "a table without its record"),
    (_pair("ok")[1:], "is not in the archive"),
])
def test_a_planted_archive_is_refused_before_anything_is_written(tmp_path, capsys, members,
                                                                   message):
    archive = _archive(tmp_path / "planted.tar.gz", members)
    dest = tmp_path / "results"
    assert results_main(["unpack", str(archive), str(dest)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not dest.exists() and not (tmp_path / "outside.csv").exists()


def test_an_archive_that_is_not_a_tar_is_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not gzip at all")
    for archive in (junk, tmp_path / "absent.tar.gz"):
        assert results_main(["unpack", str(archive), str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("python -m sims.results unpack: error:")
        assert len(err.strip().splitlines()) == 1
    good = _archive(tmp_path / "good.tar.gz", _pair("sweeps/x/cells/c"))
    assert carry.unpack(good, tmp_path / "r") == {"added": 1, "already": 0, "kept": 0}

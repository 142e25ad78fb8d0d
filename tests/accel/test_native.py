"""sims.accel.native: the C kernels' build (once per machine, cached by a digest, atomic under a
lock), the fallback to the readable rules when there is no compiler or the build fails, the
switches, and the row split over threads. What each kernel computes is held to its rule in
test_forms.py."""
import subprocess
import sys
import textwrap

import pytest
import torch

from sims.accel import native
from sims.accel.native import frozen
from conftest import require_native


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A clean loader state with the cache in ``tmp_path/cache``; the process's own state
    (and its loaded library) put back afterwards."""
    saved = dict(native._state)
    monkeypatch.setenv("FEDTOOLKIT_NATIVE_CACHE", str(tmp_path / "cache"))
    native._state.update(enabled=True, lib=None, failed=None)
    yield tmp_path / "cache"
    native._state.clear()
    native._state.update(saved)


def _copy_sources(tmp_path, monkeypatch, edit=None):
    """The kernels' sources copied to ``tmp_path/src`` (``edit(name, text)`` may change a
    file's text) and the loader pointed at them."""
    src = tmp_path / "src"
    src.mkdir()
    for path in native.sources():
        text = path.read_text()
        (src / path.name).write_text(edit(path.name, text) if edit else text)
    monkeypatch.setattr(native, "SOURCE_DIR", src)
    return src


def _step_inputs(dtype=torch.float64, B=6, d=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=dtype)  # noqa: E731
    theta, g = r(B, d), r(B, d)
    m, p, q = r(2, d), r(2, d).abs() + 0.5, r(2, d).abs() + 0.5
    runs = [(0, slice(0, 2)), (1, slice(2, B))]
    return theta, g, m, p, q, runs


def _rule(theta, g, m, p, q, runs, lr, b1, b2):
    """The frozen step written out (frozen.c's header), rows of each replica's run."""
    out = theta.clone()
    for r, rows in runs:
        den = torch.maximum(p[r] + (1 - b2) * g[rows] ** 2, q[r])
        out[rows] = theta[rows] - lr * (b1 * m[r] + (1 - b1) * g[rows]) / den.sqrt()
    return out


@pytest.mark.slow
def test_builds_once_into_the_cache_and_reuses_it(fresh, monkeypatch):
    lib = native.library()
    assert lib is not None, native.failure()
    built = list(fresh.glob("fedtoolkit_native_*.so"))
    assert len(built) == 1 and built[0].name == f"fedtoolkit_native_{native.build_key(native._compiler())}.so"
    assert native.status() == f"loaded {built[0].name}"
    assert not [p for p in fresh.iterdir() if p.suffix == ".so" and p not in built]
    # a new process state finds the file and compiles nothing
    native._state.update(lib=None)
    seen = []
    real_run = subprocess.run
    monkeypatch.setattr(native.subprocess, "run",
                        lambda args, **k: seen.append(args) or real_run(args, **k))
    assert native.library() is not None
    assert not any("-shared" in a for a in seen)
    theta, g, m, p, q, runs = _step_inputs()
    got = frozen.frozen_step(theta, g, m, p, q, runs, 0.1, 0.9, 0.99)
    torch.testing.assert_close(got, _rule(theta, g, m, p, q, runs, 0.1, 0.9, 0.99),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_build_key_follows_sources_and_cpu(fresh, tmp_path, monkeypatch):
    cc = native._compiler()
    base = native.build_key(cc)
    monkeypatch.setattr(native, "_cpu_flags", lambda: "flags : sse2")
    assert native.build_key(cc) != base                      # another CPU: another library
    monkeypatch.undo()
    _copy_sources(tmp_path, monkeypatch, lambda name, text: text + "\n/* edited */\n")
    assert native.build_key(cc) != base


def test_no_compiler_falls_back_with_one_warning(fresh, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    theta, g, m, p, q, runs = _step_inputs()
    with pytest.warns(RuntimeWarning, match="no C compiler") as record:
        assert frozen.frozen_step(theta, g, m, p, q, runs, 0.1, 0.9, 0.99) is None
        assert native.library() is None                   # warned once, not again
    assert len(record) == 1 and "\n" not in str(record[0].message)
    assert native.status().startswith("failed: no C compiler")
    assert not fresh.exists() or not list(fresh.glob("*.so"))


@pytest.mark.slow
def test_failed_build_leaves_no_file_and_falls_back(fresh, tmp_path, monkeypatch):
    _copy_sources(tmp_path, monkeypatch,
                  lambda name, text: text + "\nthis is not C;\n" if name == "frozen.c" else text)
    with pytest.warns(RuntimeWarning, match="failed"):
        assert native.library() is None
    assert not list(fresh.glob("*.so")) and not list(fresh.glob("tmp*"))
    assert not native.usable(torch.zeros(2, 2))


def test_without_kernels_no_c_form_is_planned(fresh, monkeypatch):
    """With the kernels off, the rules they serve take the readable form (no plan), and the
    run with them off is the readable run."""
    from sims import accel
    from sims.algorithms.registry import make_algorithm
    native.enable(False)
    for name in ("fed-lamb", "mimelite", "fedada2", "fedada2-blend"):
        assert accel.plan(make_algorithm(name).local_rule, None, "cpu") is None, name
    assert native.status() == "off"


@pytest.mark.slow
def test_switch_from_the_environment():
    code = "from sims.accel import native; print(native.enabled(), native.status())"
    for value, want in (("0", "False off"), ("1", "True on, not loaded")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**__import__("os").environ, "FEDTOOLKIT_NATIVE": value},
                             check=True).stdout.strip()
        assert out == want
    code = "from sims import accel; print(accel.enabled(), accel.status())"
    for value, want in (("0", "False off"), ("1", "True on (C kernels: on, not loaded)")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**__import__("os").environ, "FEDTOOLKIT_ACCEL": value,
                                  "FEDTOOLKIT_NATIVE": "1"},
                             check=True).stdout.strip()
        assert out == want


@pytest.mark.slow
def test_concurrent_builds_make_one_library(fresh, tmp_path):
    """Two processes building into one empty cache at once: both load, one file, no
    temporaries left (the lock and the atomic rename)."""
    require_native()
    code = textwrap.dedent("""
        from sims.accel import native
        assert native.library() is not None, native.failure()
        print("ok")
    """)
    env = {**__import__("os").environ, "FEDTOOLKIT_NATIVE_CACHE": str(fresh)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o[0].strip() for o in outs] == ["ok", "ok"], outs
    assert len(list(fresh.glob("*.so"))) == 1 and not list(fresh.glob("tmp*"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_threads_split_rows_without_changing_a_bit(dtype, monkeypatch):
    """Rows are independent: the step split over 2 or 3 OpenMP threads (each with its own
    trust scratch) equals the one-thread step exactly, with and without a trust ratio."""
    require_native()
    from sims.rules.trust import TrustRatio
    from sims.core.params import ParamLayout
    theta, g, m, p, q, runs = _step_inputs(dtype, B=9, d=300)
    layout = ParamLayout(("a", "b", "c"), ((10, 20), (50,), (50,)))
    for trust in (None, TrustRatio(lam=0.01)):
        got = {}
        for nt in (1, 2, 3):
            monkeypatch.setattr(torch, "get_num_threads", lambda nt=nt: nt)
            got[nt] = frozen.frozen_step(theta, g, m, p, q, runs, 0.05, 0.9, 0.99,
                                         trust=trust, layout=layout)
        assert torch.equal(got[1], got[2]) and torch.equal(got[1], got[3])
    monkeypatch.undo()
    torch.testing.assert_close(
        frozen.frozen_step(theta, g, m, p, q, runs, 0.05, 0.9, 0.99),
        _rule(theta, g, m, p, q, runs, 0.05, 0.9, 0.99),
        **({"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {}))


def test_kernels_share_torchs_openmp_runtime():
    """The library's OpenMP is the runtime torch loaded (one thread pool): the process maps
    one libgomp."""
    require_native()
    maps = open("/proc/self/maps").read().splitlines()
    gomp = {line.split()[-1] for line in maps if "libgomp" in line}
    assert len(gomp) == 1, gomp


def test_unusable_inputs_return_none_and_write_nothing():
    theta, g, m, p, q, runs = _step_inputs()
    before = theta.clone()
    for args in ((theta.float(), g), (theta, g.t().contiguous().t()), (theta, g.half())):
        assert frozen.frozen_step(args[0], args[1], m, p, q, runs, 0.1, 0.9, 0.99,
                                  out=theta) is None
    assert torch.equal(theta, before)

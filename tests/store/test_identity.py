"""The code identity changes with the source and with numeric package versions."""
import sims.store.identity as identity


def test_code_digest_changes_when_a_source_file_changes(tmp_path, monkeypatch):
    pkg = tmp_path / "sims"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(identity, "ROOT", tmp_path)
    monkeypatch.setattr(identity, "SOURCE_PACKAGES", ("sims",))
    identity.source_hash.cache_clear()
    before = identity.code_digest()
    (pkg / "a.py").write_text("x = 2\n")
    identity.source_hash.cache_clear()
    after = identity.code_digest()
    identity.source_hash.cache_clear()
    assert before != after


def test_code_digest_changes_with_numeric_versions(monkeypatch):
    before = identity.code_digest()
    real = identity.numeric_versions()
    monkeypatch.setattr(identity, "numeric_versions", lambda: {**real, "torch": "0.0"})
    assert identity.code_digest() != before


def test_code_identity_records_commit_and_digest():
    rec = identity.code_identity()
    assert rec["code_digest"] == identity.code_digest()
    assert set(rec["numeric_versions"]) >= {"python", "torch", "numpy"}


def test_code_digest_changes_when_a_c_kernel_changes(tmp_path, monkeypatch):
    """The C kernels (sims.accel.native) change numerics: their sources are in the digest."""
    pkg = tmp_path / "sims" / "native"
    pkg.mkdir(parents=True)
    (pkg / "k.c").write_text("int f(void) { return 1; }\n")
    (pkg / "k.h").write_text("#define A 1\n")
    monkeypatch.setattr(identity, "ROOT", tmp_path)
    monkeypatch.setattr(identity, "SOURCE_PACKAGES", ("sims",))
    digests = []
    for name, text in (("k.c", None), ("k.c", "int f(void) { return 2; }\n"),
                       ("k.h", "#define A 2\n")):
        if text is not None:
            (pkg / name).write_text(text)
        identity.source_hash.cache_clear()
        digests.append(identity.code_digest())
    identity.source_hash.cache_clear()
    assert len(set(digests)) == 3


def test_digest_covers_theory_bounds_only(tmp_path, monkeypatch):
    """sims/ and reproduce/ are hashed whole, theory/ only through theory/bounds.py."""
    for rel in ("sims/a.py", "reproduce/b.py", "theory/bounds.py", "theory/core.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    monkeypatch.setattr(identity, "ROOT", tmp_path)
    digests = {}
    for rel in (None, "theory/core.py", "theory/bounds.py", "reproduce/b.py"):
        if rel:
            (tmp_path / rel).write_text((tmp_path / rel).read_text() + "y = 2\n")
        identity.source_hash.cache_clear()
        digests[rel] = identity.code_digest()
    identity.source_hash.cache_clear()
    assert digests["theory/core.py"] == digests[None]          # the audit is not hashed
    assert len({digests[None], digests["theory/bounds.py"], digests["reproduce/b.py"]}) == 3


def _theory_imports(path):
    """The theory modules a source file imports (``theory`` itself counts as its __init__)."""
    import ast
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "theory"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "theory":
            if node.module == "theory":
                out |= {f"theory.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    return out


def test_sims_and_reproduce_import_no_theory_module_but_bounds():
    """The digest hashes theory/bounds.py alone (SOURCE_FILES): if sims/ or reproduce/ used
    another theory module, editing it would not recompute their runs."""
    found = {}
    # the console command only hands `fedtoolkit theory` to theory's own CLI: no run of sims
    # or reproduce is computed there, so nothing saved depends on what it imports
    launchers = {"sims/console.py"}
    # FedLADA's T4 is the symbolic audit itself, run by the entry's check on every call (never
    # part of a saved run); its line names the audit sources' hash (reproduce.fedlada_theory)
    launchers |= {"reproduce/fedlada_theory.py"}
    for pkg in ("sims", "reproduce"):
        for path in sorted((identity.ROOT / pkg).rglob("*.py")):
            if path.relative_to(identity.ROOT).as_posix() in launchers:
                continue
            other = _theory_imports(path) - {"theory.bounds"}
            if other:
                found[str(path.relative_to(identity.ROOT))] = sorted(other)
    assert not found, f"theory modules outside the digest: {found}"
    assert "theory/bounds.py" in identity.SOURCE_FILES
    assert _theory_imports(identity.ROOT / "sims/experiments/probes/bounds.py") \
        == {"theory.bounds"}                                   # the checker sees the one use
    assert set(identity.SHIPPED_PACKAGES) >= {"sims", "reproduce", "theory"}


def test_recorded_commit_is_the_one_whose_source_the_process_read(monkeypatch):
    """A run saved after the checkout moved on (a commit made while it ran) records the
    commit of the code that computed it: the commit is read with the source, once a process,
    and the results' provenance records that one."""
    from sims.store import results
    commits = iter(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(identity, "git_commit", lambda cwd=None: next(commits))
    identity.source_hash.cache_clear()
    identity.source_commit.cache_clear()
    try:
        identity.code_digest()                      # the process reads its source: "aaaa"
        rec = results.provenance({"a": 1}, [0], 1.0)     # saved later, after a commit
        assert rec["commit"] == "aaaa" and rec["code"]["commit"] == "aaaa"
    finally:
        identity.source_hash.cache_clear()
        identity.source_commit.cache_clear()

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

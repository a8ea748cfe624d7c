"""Failure paths of the build machinery that must never turn into a silent success: a corrupt
cache entry, a component script that dies before recording its status, malformed arguments to
a component script, an unknown package in a lock."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import BUILD_DIR, CACHE_DIR, REPO, SYSTEM_PYTHON, base_env, describe, run


@pytest.mark.slow
def test_a_corrupt_cache_entry_is_detected_not_restored(tmp_path, compile_guard_dir):
    """Every core entry of a copied cache has one file truncated: the restore must refuse it
    (and then, with the compile guard in place, the build fails instead of shipping it)."""
    cache = tmp_path / "cache"
    shutil.copytree(CACHE_DIR / "core", cache / "core", symlinks=True)
    corrupted = 0
    for entry in (cache / "core").iterdir():
        lib = entry / "install" / "hyper_parallel" / "core" / "lib" / "libhyper_parallel_platform.so"
        if lib.is_file():
            lib.write_bytes(lib.read_bytes()[:100])
            corrupted += 1
    assert corrupted, f"no core entries in {CACHE_DIR}: run ./build.sh first"
    env = base_env(HP_BUILD_DIR=str(tmp_path / "b"), HP_CACHE_DIR=str(cache), HP_PAYLOAD_DIR=None,
                   PATH=f"{compile_guard_dir}:{base_env()['PATH']}")
    result = run([REPO / "build.sh", "--multicore", "off", "--shmem", "off", "--custom-ops", "off"],
                 env=env, timeout=300)
    assert result.returncode != 0, describe(result)
    assert "restored from cache" not in result.stdout, describe(result)
    assert "HP-BUILD-CORE-FAILED" in result.stderr, describe(result)
    log = (tmp_path / "b" / "native" / "core" / "log" / "build.log").read_text()
    assert "failed verification" in log, log[-2000:]
    assert not list((tmp_path / "b").glob("dist/*.whl"))


def assemble(native: Path, strict: str, *components: str):
    return run([SYSTEM_PYTHON, REPO / "scripts" / "assemble_payload.py", "assemble",
                "--native-dir", native, "--strict", strict, "--python", SYSTEM_PYTHON,
                *[native / c / "status.tsv" for c in components]], timeout=120)


@pytest.fixture
def native_with_core(tmp_path) -> Path:
    """A native dir holding the main build's core install and an 'ok' status for it."""
    native = tmp_path / "native"
    install = BUILD_DIR / "native" / "core" / "install"
    if not install.is_dir():
        pytest.fail(f"no core install at {install}: run ./build.sh first")
    shutil.copytree(install, native / "core" / "install", symlinks=True)
    (native / "core" / "status.tsv").write_text("core\tok\t-\t-\tbuilt\t-\n")
    return native


@pytest.mark.parametrize("content", ["", "custom_ops.torch\tfailed\tX\t-\tadapter\t-\n"])
def test_a_component_without_its_own_status_line_fails_strict(native_with_core, content):
    (native_with_core / "custom_ops").mkdir()
    (native_with_core / "custom_ops" / "status.tsv").write_text(content)
    result = assemble(native_with_core, "on", "core", "custom_ops")
    assert result.returncode == 1, describe(result)
    assert "HP-BUILD-NO-STATUS" in result.stdout, describe(result)
    assert not (native_with_core / "payload").exists()


def test_a_component_without_its_own_status_line_is_reported_when_not_strict(native_with_core):
    (native_with_core / "custom_ops").mkdir()
    (native_with_core / "custom_ops" / "status.tsv").write_text("")
    result = assemble(native_with_core, "off", "core", "custom_ops")
    assert result.returncode == 0, describe(result)
    manifest = json.loads((native_with_core / "payload" / "hyper_parallel" / "manifest.json").read_text())
    assert manifest["components"] == ["core"]
    part = [p for p in manifest["parts"] if p["part"] == "custom_ops"]
    assert part and part[0]["status"] == "failed" and part[0]["reason"] == "HP-BUILD-NO-STATUS"


@pytest.mark.parametrize("frameworks", ["torch mindspore", "tor", "torch,mindsp"])
def test_component_scripts_reject_framework_lists_that_are_not_exact(tmp_path, frameworks):
    result = run([REPO / "scripts" / "build_symmetric_memory.sh", "--frameworks", frameworks],
                 env=base_env(HP_BUILD_DIR=str(tmp_path / "b")), timeout=60)
    assert result.returncode == 2, describe(result)
    assert "HP-BUILD-USAGE" in result.stderr


def test_prepare_reports_an_unknown_package_as_missing(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("no-such-package-hp-test 1.0 never exists\n")
    result = run([REPO / "scripts" / "prepare_host.sh", "--check", "--lock", lock],
                 env=base_env(), timeout=60)
    assert result.returncode == 3, describe(result)
    assert "HP-PREPARE-PACKAGES-MISSING" in result.stderr

"""Real ./build.sh runs in scratch build dirs (the core restored from the main build's cache):
the union rule, --strict off/on, SoC targets, the default run's outputs and --clean."""
from __future__ import annotations

import json
import zipfile

import pytest

from conftest import (REPO, SYSTEM_PYTHON, describe, expected_wheel_name, run, selection_line,
                      summary_rows)
import soc_targets  # scripts/soc_targets.py

pytestmark = pytest.mark.slow

NO_OPTIONAL = ("--multicore", "off", "--shmem", "off", "--custom-ops", "off")


def manifest(runner) -> dict:
    return json.loads((runner.payload / "manifest.json").read_text())


def test_multicore_torch_selects_torch_symmetric_memory_by_the_union_rule(build_runner):
    result = build_runner("--multicore", "torch", "--shmem", "off", "--custom-ops", "off")
    assert result.returncode == 0, describe(result)
    line = selection_line(result.stdout)
    assert " multicore=torch " in line and " shmem=torch " in line, line
    assert "custom-ops=off" in line, line
    rows = summary_rows(result.stdout)
    assert "symmetric_memory.torch" in rows, result.stdout
    assert "multicore.torch" in rows, result.stdout
    assert not [p for p in rows if "mindspore" in p], f"mindspore rows: {sorted(rows)}"
    assert not [p for p in rows if p.startswith("custom_ops")], f"custom_ops rows: {sorted(rows)}"
    assert manifest(build_runner)["selection"] == "multicore=torch shmem=torch custom-ops=off"


def test_shmem_mindspore_plus_multicore_torch_resolves_shmem_to_both(build_runner):
    result = build_runner("--multicore", "torch", "--shmem", "mindspore", "--custom-ops", "off")
    assert result.returncode == 0, describe(result)
    line = selection_line(result.stdout)
    assert " shmem=torch,mindspore " in line, line
    assert "--shmem mindspore + what --multicore torch needs" in line, line
    rows = summary_rows(result.stdout)
    assert {"symmetric_memory.torch", "symmetric_memory.mindspore", "multicore.torch"} <= set(rows)
    assert "multicore.mindspore" not in rows


def test_strict_off_leaves_a_failed_optional_component_out_and_still_builds_the_wheel(build_runner):
    result = build_runner("--multicore", "mindspore", "--shmem", "off", "--custom-ops", "off")
    assert result.returncode == 0, describe(result)
    assert [w.name for w in build_runner.wheels()] == [expected_wheel_name()], describe(result)

    rows = summary_rows(result.stdout)
    assert rows["core"][0] == "ok"
    for part in ("multicore.mindspore", "symmetric_memory.mindspore"):
        status, reason, log = rows[part]
        assert (status, reason) == ("failed", "HP-BUILD-FRAMEWORK-UNAVAILABLE"), rows[part]
        assert log.startswith(str(build_runner.native)) and log.endswith(".log"), log
    assert "    recover: " in result.stdout, result.stdout
    assert "    why: " in result.stdout, result.stdout

    info = manifest(build_runner)
    # The union rule selected mindspore's symmetric memory: the libraries of symmetric memory and
    # multicore build (restored from the main cache), their mindspore adapters cannot.
    assert sorted(info["components"]) == ["core", "multicore", "symmetric_memory"]
    for slice_ in ("symmetric_memory", "multicore"):
        assert not list((build_runner.payload / slice_).rglob("*mindspore*"))
    failed = {p["part"] for p in info["parts"] if p["status"] == "failed"}
    assert {"multicore.mindspore", "symmetric_memory.mindspore"} <= failed


def test_strict_on_with_a_failed_component_stops_without_a_wheel(build_runner):
    result = build_runner("--multicore", "mindspore", "--shmem", "off", "--custom-ops", "off",
                          "--strict", "on")
    assert result.returncode != 0, describe(result)
    assert "HP-BUILD-STRICT-FAILED" in result.stderr, describe(result)
    assert build_runner.wheels() == [], describe(result)
    assert not (build_runner.payload / "manifest.json").exists(), \
        "a strict failure in a fresh build dir assembled a payload anyway"
    assert "[hp] wheel:" not in result.stdout


def test_strict_on_failure_leaves_the_previous_payload_and_wheel_unchanged(build_runner):
    first = build_runner("--multicore", "mindspore", "--shmem", "off", "--custom-ops", "off")
    assert first.returncode == 0, describe(first)
    manifest_bytes = (build_runner.payload / "manifest.json").read_bytes()
    payload_files = sorted(p.relative_to(build_runner.payload)
                           for p in build_runner.payload.rglob("*"))
    wheels_before = {w: w.read_bytes() for w in build_runner.wheels()}

    second = build_runner("--multicore", "mindspore", "--shmem", "off", "--custom-ops", "off",
                          "--strict", "on")
    assert second.returncode != 0, describe(second)
    assert "HP-BUILD-STRICT-FAILED" in second.stderr, describe(second)
    assert "[hp] wheel:" not in second.stdout, "a wheel was built despite --strict on"
    assert (build_runner.payload / "manifest.json").read_bytes() == manifest_bytes
    assert sorted(p.relative_to(build_runner.payload)
                  for p in build_runner.payload.rglob("*")) == payload_files
    # No new wheel: whatever dist held before is byte-identical (nothing was repackaged).
    assert {w: w.read_bytes() for w in build_runner.wheels()} == wheels_before


def test_strict_on_with_no_optional_component_builds_the_wheel(build_runner):
    result = build_runner(*NO_OPTIONAL, "--strict", "on")
    assert result.returncode == 0, describe(result)
    assert [w.name for w in build_runner.wheels()] == [expected_wheel_name()]
    rows = summary_rows(result.stdout)
    assert list(rows) == ["core"], rows
    assert manifest(build_runner)["components"] == ["core"]


def test_sm_90_target_fails_the_multicore_vendor_part(build_runner):
    result = build_runner("--soc-list", "x86_64_v3,sm_90", "--multicore", "torch",
                          "--shmem", "off", "--custom-ops", "off")
    assert result.returncode == 0, describe(result)
    assert "soc-list=x86_64_v3,sm_90" in selection_line(result.stdout)
    rows = summary_rows(result.stdout)
    assert rows.get("multicore.vendor.sm_90", (None, None))[:2] == \
        ("failed", "HP-BUILD-SOC-UNSUPPORTED"), rows
    unsupported = [p for p, r in rows.items() if r[1] == "HP-BUILD-SOC-UNSUPPORTED"]
    assert unsupported == ["multicore.vendor.sm_90"], rows


def test_default_run_prints_the_payload_and_the_exact_wheel_path(build_runner):
    result = build_runner()
    assert result.returncode == 0, describe(result)
    line = selection_line(result.stdout)
    assert "multicore=torch,mindspore shmem=torch,mindspore custom-ops=on" in line, line
    assert f"soc-list={','.join(soc_targets.names('default'))} strict=off" in line, line

    payload_lines = [l for l in result.stdout.splitlines() if l.startswith("[hp] payload: ")]
    wheel_lines = [l for l in result.stdout.splitlines() if l.startswith("[hp] wheel: ")]
    assert payload_lines == [f"[hp] payload: {build_runner.payload}"], result.stdout
    wheel = build_runner.dist / expected_wheel_name()
    assert wheel_lines == [f"[hp] wheel: {wheel}"], result.stdout
    assert (build_runner.payload / "manifest.json").is_file()
    assert wheel.is_file()
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None

    check = run([SYSTEM_PYTHON, REPO / "scripts" / "check_elf.py", build_runner.payload,
                 build_runner.native / "tests"])
    assert check.returncode == 0, describe(check)
    elf_files = [p for p in build_runner.payload.rglob("*.so")]
    assert elf_files, "the payload holds no shared library"


def test_clean_removes_only_the_selected_components_work_and_install(build_runner):
    first = build_runner(*NO_OPTIONAL)
    assert first.returncode == 0, describe(first)
    core_install = build_runner.native / "core" / "install"
    stale = core_install / "stale-marker"
    stale.write_text("from before --clean")
    keep_work = build_runner.native / "multicore" / "work" / "keep"
    keep_cache = build_runner.native / "cache" / "something"
    keep_work.parent.mkdir(parents=True)
    keep_work.write_text("not selected: --clean must not touch it")
    keep_cache.parent.mkdir(parents=True)
    keep_cache.write_text("caches are kept")

    result = build_runner("--clean", *NO_OPTIONAL)
    assert result.returncode == 0, describe(result)
    assert "clean=1" in selection_line(result.stdout)
    assert "core: --clean: removing work and install" in result.stdout, result.stdout
    assert keep_work.read_text() == "not selected: --clean must not touch it"
    assert keep_cache.read_text() == "caches are kept"
    assert not stale.exists(), "core's install dir was not cleaned"
    assert (core_install / "hyper_parallel" / "core" / "lib" /
            "libhyper_parallel_common.so").is_file(), "core's install was not recreated"
    assert [w.name for w in build_runner.wheels()] == [expected_wheel_name()]

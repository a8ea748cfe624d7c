"""The custom_ops component: the operator registry's checks, the op selection (candidates ->
family rule -> SHMEM filter -> registry order), the SHMEM SDK's include directories, and op
packages built by scripts/build_custom_ops.sh in scratch build dirs that hold the main build's
installs (the op objects restored from its cache: a package is a link, never a compile)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, CACHE_DIR, PAYLOAD_DIR, REPO, SYSTEM_PYTHON, activated, base_env, describe, ops_builder, run
import soc_targets  # scripts/soc_targets.py


SELECT = REPO / "scripts" / "select_ops.py"
REGISTRY = REPO / "native" / "ops" / "operator_registry.json"
SOCS = ",".join(soc_targets.names("all"))
ALL_OPS = ["dispatch_layout", "notify_dispatch", "moe_dispatch_normal", "moe_combine_normal",
           "moe_dispatch_low_latency", "moe_combine_low_latency", "fused_deep_moe", "fused_deep_moe_w4a8",
           "fused_deep_moe_shmem", "fused_deep_moe_grad"]
COMMON = [op for op in ALL_OPS if not op.startswith("fused_deep_moe") or op == "fused_deep_moe_grad"]


def select(*args: str, sdk: str | None = str(PAYLOAD_DIR / "symmetric_memory"), env=None):
    cmd = [SYSTEM_PYTHON, SELECT, "select", "--known-socs", SOCS, *args]
    if sdk is not None:
        cmd += ["--shmem-sdk", sdk]
    return run(cmd, env=env or base_env(HP_SHMEM_HOME=None))


def selected(result) -> list[str]:
    assert result.returncode == 0, describe(result)
    return result.stdout.split()


def error_line(result) -> str:
    lines = [l for l in result.stderr.splitlines() if l.startswith("[hp] ERROR ")]
    assert lines, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    return lines[0]


# ---- the selection pipeline ----------------------------------------------------------------

def test_every_op_the_issue_names_is_in_the_registry_in_order():
    registry = json.loads(REGISTRY.read_text())
    assert list(registry["operator_meta"]) == ALL_OPS
    result = run([SYSTEM_PYTHON, SELECT, "check", "--known-socs", SOCS])
    assert result.returncode == 0, describe(result)


def test_default_selection_keeps_base_and_drops_the_other_variants():
    assert selected(select()) == [op for op in ALL_OPS if op not in ("fused_deep_moe_w4a8", "fused_deep_moe_shmem")]


def test_w4a8_replaces_base():
    ops = selected(select("--w4a8"))
    assert "fused_deep_moe_w4a8" in ops and "fused_deep_moe" not in ops and "fused_deep_moe_shmem" not in ops
    assert [o for o in ops if o != "fused_deep_moe_w4a8"] == COMMON


def test_shmem_variant_replaces_base_only_when_asked_for():
    ops = selected(select("--shmem-variant"))
    assert "fused_deep_moe_shmem" in ops and "fused_deep_moe" not in ops and "fused_deep_moe_w4a8" not in ops


def test_without_shmem_an_op_that_requires_it_is_dropped_with_a_note():
    result = select("--shmem-variant", sdk="none")
    assert selected(result) == COMMON
    assert "NOTE: dropping fused_deep_moe_shmem (requires SHMEM, which is not installed)" in result.stderr.splitlines()
    # no NOTE when nothing that needs SHMEM was a candidate
    assert "NOTE" not in select(sdk="none").stderr


def test_a_user_list_is_put_in_registry_order_and_is_deterministic():
    first = selected(select("--ops", "fused_deep_moe_grad,dispatch_layout,moe_combine_normal"))
    assert first == ["dispatch_layout", "moe_combine_normal", "fused_deep_moe_grad"]
    assert selected(select("--ops", "moe_combine_normal,fused_deep_moe_grad,dispatch_layout")) == first
    # a user list naming one variant takes it (the family rule keeps what was asked for)
    assert selected(select("--ops", "fused_deep_moe_w4a8")) == ["fused_deep_moe_w4a8"]
    result = select("--ops", "dispatch_layout,fused_deep_moe_shmem", sdk="none")
    assert selected(result) == ["dispatch_layout"]
    assert "NOTE: dropping fused_deep_moe_shmem" in result.stderr


@pytest.mark.parametrize("args, reason, words", [
    (("--ops", "dispatch_layout,no_such_op"), "HP-BUILD-OPS-UNKNOWN", ["no_such_op", "fused_deep_moe_grad"]),
    (("--ops", "fused_deep_moe,fused_deep_moe_w4a8"), "HP-BUILD-OPS-CONFLICT", ["mutually exclusive"]),
    (("--ops", "fused_deep_moe", "--w4a8"), "HP-BUILD-OPS-CONFLICT", ["variant w4a8"]),
    (("--w4a8", "--shmem-variant"), "HP-BUILD-USAGE", ["choose one"]),
    (("--soc-list", "sm_90"), "HP-BUILD-OPS-EMPTY", ["empty"]),
    (("--ops", ","), "HP-BUILD-USAGE", ["names no op"]),
])
def test_bad_selections_are_named_errors(args, reason, words):
    result = select(*args)
    assert result.returncode != 0, describe(result)
    line = error_line(result)
    assert line.startswith(f"[hp] ERROR {reason}: "), line
    for w in words:
        assert w in line, line


# ---- a corrupt registry ------------------------------------------------------------------

def corrupt(tmp_path: Path, name: str, change) -> Path:
    data = json.loads(REGISTRY.read_text())
    path = tmp_path / f"{name}.json"
    if isinstance(change, str):
        path.write_text(change)
    else:
        change(data)
        path.write_text(json.dumps(data, indent=2))
    return path


def set_field(op, field, value):
    def change(d):
        d["operator_meta"][op][field] = value
    return change


def drop_field(op, field):
    def change(d):
        del d["operator_meta"][op][field]
    return change


def set_symbol(op, kind, value):
    def change(d):
        d["operator_meta"][op]["symbols"][kind] = value
    return change


@pytest.mark.parametrize("name, change, op, field", [
    ("bad_json", '{"format": 1,\n  "library": ,\n}', "-", "line 2"),
    ("unknown_field", set_field("notify_dispatch", "colour", "red"), "notify_dispatch", "colour"),
    ("duplicate_symbol", set_symbol("moe_combine_normal", "execute", "hpMoeDispatchNormal"), "moe_combine_normal",
     "symbols.execute"),
    ("variant_without_family", drop_field("fused_deep_moe_w4a8", "family"), "fused_deep_moe_w4a8", "family"),
    ("variant_in_no_family_order", set_field("fused_deep_moe_shmem", "variant", "w2a8"), "fused_deep_moe_shmem",
     "variant"),
    ("unknown_family", set_field("fused_deep_moe_w4a8", "family", "fused_moe"), "fused_deep_moe_w4a8", "family"),
    ("unknown_soc", set_field("dispatch_layout", "socs", ["ascend910b"]), "dispatch_layout", "socs"),
])
def test_a_corrupt_registry_names_file_op_and_field(tmp_path, name, change, op, field):
    path = corrupt(tmp_path, name, change)
    result = select("--registry", str(path))
    assert result.returncode == 1, describe(result)
    line = error_line(result)
    assert line.startswith(f"[hp] ERROR HP-BUILD-REGISTRY-INVALID: {path}: op '{op}' field '{field}': "), line


# ---- the SHMEM SDK's include directories ---------------------------------------------------

def sdk_dirs(result, out: Path) -> list[str]:
    assert result.returncode == 0, describe(result)
    return json.loads(out.read_text())["shmem_include_dirs"]


def test_the_sdk_include_dirs_are_joined_as_paths_with_or_without_a_trailing_slash(tmp_path):
    root = PAYLOAD_DIR / "symmetric_memory"
    out = tmp_path / "selection.json"
    got = [sdk_dirs(select("--shmem-variant", "--out", str(out), sdk=None,
                           env=base_env(HP_SHMEM_HOME=home)), out)
           for home in (str(root), str(root) + "/", str(root) + "//")]
    assert got[0] == got[1] == got[2] == [str(root / "include"), str(root / "include" / "hyper_parallel")]
    assert all(Path(d).is_dir() for d in got[0])


def test_a_wrong_sdk_root_is_a_named_failure_naming_the_directory(tmp_path):
    result = select("--shmem-variant", sdk=None, env=base_env(HP_SHMEM_HOME=str(tmp_path)))
    assert result.returncode == 1, describe(result)
    line = error_line(result)
    assert line.startswith("[hp] ERROR HP-BUILD-SHMEM-SDK-INVALID: "), line
    assert str(tmp_path / "include") in line, line


# ---- op packages from scripts/build_custom_ops.sh -------------------------------------------

@pytest.fixture(scope="module")
def scratch(tmp_path_factory, compile_guard_dir):
    return ops_builder(tmp_path_factory.mktemp("ops") / "b", compile_guard_dir)


def exported(library: Path) -> set[str]:
    out = run(["nm", "--dynamic", "--defined-only", "--extern-only", library]).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split() and line.split()[-1].startswith("hp")}


def keep_package(scratch, tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(scratch.package, dest)
    return dest


def run_variants(*vendors: Path, ranks: int = 2) -> subprocess.CompletedProcess:
    """The payload's op-variant test under hprun, with these packages on HP_VENDOR_PATH."""
    test = BUILD_DIR / "native" / "tests" / "custom_ops" / "bin" / "test_ops_variants"
    return run(activated([PAYLOAD_DIR / "symmetric_memory" / "bin" / "hprun", "-n", str(ranks), "--heap-size", "64M",
                          test], *vendors),
               env=base_env(HP_VENDOR_PATH=None, HP_ACTIVATED=None, HP_SHMEM_HOME=None), timeout=300)


def assert_package(result, package: Path, has: list[str], lacks: list[str]):
    assert result.returncode == 0, describe(result)
    assert "objects restored from cache" in result.stdout, describe(result)
    ops = json.loads((package / "ops.json").read_text())
    names = [o["name"] for o in ops["ops"]]
    for op in has:
        assert op in names, names
    for op in lacks:
        assert op not in names, names
    symbols = exported(package / "lib" / "libhyper_parallel_op_api.so")
    assert symbols == set(ops["exported_symbols"]), symbols ^ set(ops["exported_symbols"])
    return ops, symbols


@pytest.mark.slow
def test_w4a8_and_shmem_packages_ship_their_variant_and_run_it(scratch, tmp_path):
    result = scratch("--w4a8")
    ops, symbols = assert_package(result, scratch.package, ["fused_deep_moe_w4a8", "fused_deep_moe_grad"],
                                  ["fused_deep_moe", "fused_deep_moe_shmem"])
    assert "hpHyperMegaMoeW4A8" in symbols and "hpHyperMegaMoe" not in symbols
    assert "hpHyperMegaMoeShmem" not in symbols and "hpDispatchLayout" in symbols
    assert set(ops["targets"]) <= {"x86_64_v3", "x86_64_v4", "x86_64_amx"} and ops["targets"]
    w4a8 = keep_package(scratch, tmp_path, "w4a8")
    # The SHMEM SDK from HP_SHMEM_HOME, written with a trailing slash.
    result = scratch("--shmem-variant", HP_SHMEM_HOME=str(PAYLOAD_DIR / "symmetric_memory") + "/")
    ops, symbols = assert_package(result, scratch.package, ["fused_deep_moe_shmem"],
                                  ["fused_deep_moe", "fused_deep_moe_w4a8"])
    # Named relative to the checkout (it is outside this build's dir): no build machine path ships.
    assert ops["selection"]["shmem_sdk"] == str((PAYLOAD_DIR / "symmetric_memory").relative_to(REPO))
    shmem = keep_package(scratch, tmp_path, "shmem")
    # Every variant from its package: base from the payload, the others from HP_VENDOR_PATH.
    for ranks in (2, 4):
        result = run_variants(w4a8, shmem, ranks=ranks)
        assert result.returncode == 0, describe(result)
        assert "SKIPPED" not in result.stdout, describe(result)
        assert result.stdout.count("[       OK ] Family/OpVariant.MatchesTheLayer/") >= 6, describe(result)


@pytest.mark.slow
def test_a_registry_symbol_the_objects_do_not_define_fails_the_build(scratch, tmp_path):
    bad = corrupt(tmp_path, "missing_symbol", set_symbol("moe_dispatch_low_latency", "execute", "hpMoeDispatchLowLatncy"))
    result = scratch("--registry", str(bad))
    assert result.returncode == 1, describe(result)
    status = (scratch.build / "native" / "custom_ops" / "status.tsv").read_text()
    assert "custom_ops\tfailed\tHP-BUILD-REGISTRY-INVALID\t" in status, status
    assert "op 'moe_dispatch_low_latency' field 'symbols.execute'" in status, status
    assert "hpMoeDispatchLowLatncy" in status and str(bad) in status, status
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_corrupt_registry_fails_the_component_before_anything_is_built(scratch, tmp_path):
    bad = corrupt(tmp_path, "bad", set_field("notify_dispatch", "colour", "red"))
    result = scratch("--registry", str(bad))
    assert result.returncode == 1, describe(result)
    assert "HP-BUILD-REGISTRY-INVALID" in result.stderr and "field 'colour'" in result.stderr, describe(result)
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_wrong_shmem_home_fails_the_component(scratch, tmp_path):
    result = scratch("--shmem-variant", HP_SHMEM_HOME=str(tmp_path / "sdk"))
    assert result.returncode == 1, describe(result)
    assert "HP-BUILD-SHMEM-SDK-INVALID" in result.stderr, describe(result)
    assert str(tmp_path / "sdk" / "include") in result.stderr, describe(result)


def test_without_symmetric_memory_the_shmem_variant_is_dropped_with_the_note(tmp_path):
    """A build dir without the symmetric-memory component (nor, therefore, multicore): the
    selection drops the op that requires SHMEM with the NOTE line, then the component fails
    with the dependency it lacks, named, before anything compiles."""
    env = base_env(HP_BUILD_DIR=str(tmp_path / "b"), HP_SHMEM_HOME=None, HP_PAYLOAD_DIR=None)
    result = run([REPO / "scripts" / "build_custom_ops.sh", "--no-payload", "--ops",
                  "dispatch_layout,fused_deep_moe_shmem"], env=env)
    assert result.returncode == 1, describe(result)
    assert "NOTE: dropping fused_deep_moe_shmem (requires SHMEM, which is not installed)" in result.stderr
    status = (tmp_path / "b" / "native" / "custom_ops" / "status.tsv").read_text()
    assert "custom_ops\tfailed\tHP-BUILD-DEPENDENCY-MISSING\t" in status, status


# ---- the component in ./build.sh ---------------------------------------------------------

def test_the_main_build_has_every_part_but_the_mindspore_adapters():
    """The build this test run made (./build.sh, the default selection): every part is ok but
    the MindSpore adapters, which cannot be (MindSpore does not install on Debian 12)."""
    info = json.loads((PAYLOAD_DIR / "manifest.json").read_text())
    failed = {p["part"]: p["reason"] for p in info["parts"] if p["status"] != "ok"}
    assert failed == {"symmetric_memory.mindspore": "HP-BUILD-FRAMEWORK-UNAVAILABLE",
                      "multicore.mindspore": "HP-BUILD-FRAMEWORK-UNAVAILABLE"}, failed
    assert "custom_ops" in info["components"] and (PAYLOAD_DIR / "custom_ops" / "ops.json").is_file()


@pytest.mark.slow
def test_custom_ops_off_leaves_the_component_out_of_payload_and_wheel(build_runner):
    import zipfile
    result = build_runner("--multicore", "torch", "--shmem", "torch", "--custom-ops", "off")
    assert result.returncode == 0, describe(result)
    assert not (build_runner.payload / "custom_ops").exists()
    names = zipfile.ZipFile(build_runner.wheels()[0]).namelist()
    assert not [n for n in names if "/custom_ops/" in n], [n for n in names if "custom_ops" in n][:5]
    result = build_runner("--multicore", "torch", "--shmem", "torch")
    assert result.returncode == 0, describe(result)
    assert "[hp] custom_ops: objects restored from cache" in result.stdout, describe(result)
    names = zipfile.ZipFile(build_runner.wheels()[0]).namelist()
    assert "hyper_parallel/custom_ops/ops.json" in names and \
        "hyper_parallel/custom_ops/lib/libhyper_parallel_op_api.so" in names, names[:20]
    assert not [n for n in names if n.endswith(".a")], "the op objects are shipped"

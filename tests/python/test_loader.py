"""The native loader (hyper_parallel.native) and its HP-NATIVE-* reason codes, the native core
module, and the settings table. Scenarios that depend on the environment or on the payload run
in a fresh interpreter (the loader caches the manifest per process)."""
from __future__ import annotations

import json
import re
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO, SYSTEM_PYTHON, VERSION, base_env, describe, python_code, run

# Runs `expr` in a fresh interpreter; prints the outcome as one JSON object.
SCENARIO = """
import json, sys
import hyper_parallel.native as n
from hyper_parallel import NativeLoadError, HpError
try:
    value = {expr}
    print(json.dumps({{"ok": True, "value": str(value)}}))
except NativeLoadError as e:
    print(json.dumps({{"ok": False, "reason": e.reason, "detail": e.detail,
                      "recovery": e.recovery, "text": str(e),
                      "is_import_error": isinstance(e, ImportError)}}))
"""


def scenario(expr: str, **env) -> dict:
    result = python_code(SCENARIO.format(expr=expr), env_overrides=env)
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout.strip().splitlines()[-1])


def fake_payload(tmp_path: Path, real: Path, **changes) -> Path:
    """A payload dir with the real manifest (changed) and `core` symlinked to the real core."""
    payload = tmp_path / "payload" / "hyper_parallel"
    payload.mkdir(parents=True)
    info = json.loads((real / "manifest.json").read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            info[key] = {**info.get(key, {}), **value}
        else:
            info[key] = value
    (payload / "manifest.json").write_text(json.dumps(info, indent=2))
    (payload / "core").symlink_to(real / "core", target_is_directory=True)
    return payload


# --- HP-NATIVE-PAYLOAD-MISSING ---------------------------------------------------------------

def test_empty_payload_dir_raises_payload_missing_with_a_recovery(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(empty))
    assert out["ok"] is False, out
    assert out["is_import_error"] is True
    assert out["reason"] == "HP-NATIVE-PAYLOAD-MISSING"
    assert str(empty) in out["detail"] and "override" in out["detail"], out
    assert out["recovery"] == f"cd {REPO} && ./build.sh", out
    assert "recover: " in out["text"]


def test_missing_development_payload_names_the_build_dir(tmp_path):
    out = scenario("n.manifest()", HP_BUILD_DIR=str(tmp_path / "nobuild"))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PAYLOAD-MISSING", out
    assert str(tmp_path / "nobuild" / "native" / "payload" / "hyper_parallel") in out["detail"]
    assert "development" in out["detail"]


def test_failed_component_explains_the_build_reason_and_recovery(main_payload):
    info = json.loads((main_payload / "manifest.json").read_text())
    if "multicore" in info["components"]:
        pytest.skip("the development payload has multicore")
    parts = [p for p in info["parts"] if p["part"] == "multicore"]
    if not parts or parts[0]["status"] != "failed":
        pytest.skip(f"multicore was not selected in the development payload ({info['selection']})")
    part = parts[0]
    out = scenario("n.component_dir('multicore')")
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PAYLOAD-MISSING", out
    assert part["reason"] in out["detail"], out
    assert part["reason"] == "HP-BUILD-SOURCES-MISSING"
    assert part["message"] in out["detail"] and part["log"] in out["detail"], out
    assert out["recovery"] == part["recovery"], out


def test_component_never_selected_names_what_was_built(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload, components=["core"],
                           parts=[{"part": "core", "status": "ok", "reason": "-", "log": "-",
                                   "message": "built", "recovery": "-"}],
                           selection="multicore=off shmem=off custom-ops=off")
    out = scenario("n.component_dir('custom_ops')", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PAYLOAD-MISSING", out
    assert "built: core" in out["detail"] and "custom-ops=off" in out["detail"], out


def test_corrupt_manifest_raises_payload_missing_unreadable(tmp_path):
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "manifest.json").write_text('{"format": 1, "components": [')
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PAYLOAD-MISSING", out
    assert "unreadable" in out["detail"], out
    assert str(payload / "manifest.json") in out["detail"]


# --- HP-NATIVE-PYTHON-ABI-MISMATCH and HP-NATIVE-ISA-UNSUPPORTED ------------------------------

def test_payload_for_another_python_abi_is_named_before_any_import(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload,
                           python={"soabi": "cpython-399-x86_64-linux-gnu",
                                   "executable": "/opt/other/python3.99"})
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PYTHON-ABI-MISMATCH", out
    running = sysconfig.get_config_var("SOABI")
    assert "cpython-399-x86_64-linux-gnu" in out["detail"] and running in out["detail"], out
    assert re.fullmatch(r"PYTHON=\S+ \./build\.sh", out["recovery"]), out
    assert out["recovery"] == "PYTHON=/usr/bin/python3 ./build.sh", out


def test_fake_payload_with_the_real_abi_loads(tmp_path, main_payload):
    """The control of the scenario above: the same fake payload unchanged loads fine."""
    payload = fake_payload(tmp_path, main_payload)
    out = scenario("n.core().version()", HP_PAYLOAD_DIR=str(payload))
    assert out == {"ok": True, "value": VERSION}


def test_payload_needing_a_newer_glibc_raises_system_too_old_before_loading(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload,
                           abi={"glibc": "99.1", "needed_by": {"glibc": "core/lib/libhyper_parallel_common.so"}})
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-SYSTEM-TOO-OLD", out
    assert "99.1" in out["detail"] and "core/lib/libhyper_parallel_common.so" in out["detail"], out
    assert "./build.sh" in out["recovery"], out
    doctor = run([SYSTEM_PYTHON, "-m", "hyper_parallel", "doctor"],
                 env=base_env(HP_PAYLOAD_DIR=str(payload), PYTHONPATH=str(REPO / "python")))
    assert doctor.returncode != 0 and "HP-NATIVE-SYSTEM-TOO-OLD" in doctor.stdout, describe(doctor)


def test_a_truncated_adapter_library_is_vendor_load_failed(tmp_path, main_payload):
    """A damaged library of the payload (here the multicore torch adapter, cut short) is named
    before dlopen maps it (the process would die of SIGBUS touching the missing pages)."""
    pytest.importorskip("torch")
    payload = fake_payload(tmp_path, main_payload)
    lib = payload / "multicore" / "lib"
    lib.mkdir(parents=True)
    real = main_payload / "multicore" / "lib" / "libhyper_parallel_multicore_torch.so"
    (lib / real.name).write_bytes(real.read_bytes()[:4096])
    out = scenario('n.torch_ops("multicore")', HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-VENDOR-LOAD-FAILED", out
    assert str(lib / real.name) in out["detail"] and "its headers need" in out["detail"], out
    assert "./build.sh" in out["recovery"], out


def test_a_payload_of_another_version_is_stale(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload, version="0.0.1")
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-PAYLOAD-STALE", out
    assert "version 0.0.1" in out["detail"] and VERSION in out["detail"], out
    assert "./build.sh" in out["recovery"], out


# --- HP-NATIVE-ACTIVATION-TOO-LATE ------------------------------------------------------------

@pytest.mark.parametrize("variable", ["HP_VENDOR_PATH", "HP_CHIP_CPUS", "HP_ACTIVATED"])
def test_an_activation_variable_set_inside_the_process_is_too_late(variable):
    out = scenario(f'(__import__("os").environ.__setitem__("{variable}", "0"), n.core())[1]',
                   HP_VENDOR_PATH=None, HP_CHIP_CPUS=None, HP_ACTIVATED=None)
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-ACTIVATION-TOO-LATE", out
    assert variable in out["detail"] and "'unset' at start, '0' now" in out["detail"], out
    assert out["recovery"].startswith("source ") and "set_env.bash" in out["recovery"], out


def test_activation_variables_from_the_start_load_and_so_does_an_unchanged_one():
    out = scenario('(__import__("os").environ.__setitem__("HP_CHIP_CPUS", "0"), n.core().version())[1]',
                   HP_CHIP_CPUS="0", HP_VENDOR_PATH=None, HP_ACTIVATED="x:y")
    assert out == {"ok": True, "value": VERSION}, out


def test_payload_with_only_unrunnable_targets_raises_isa_unsupported(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload, soc_list=["sm_90"])
    out = scenario("n.require_runnable_soc()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False and out["reason"] == "HP-NATIVE-ISA-UNSUPPORTED", out
    assert "sm_90" in out["detail"]
    assert out["recovery"].startswith("./build.sh --soc-list ")


def test_runnable_soc_prefers_the_best_target(tmp_path, main_payload):
    payload = fake_payload(tmp_path, main_payload, soc_list=["x86_64_v3", "x86_64_v4", "sm_90"])
    code = ("import json, hyper_parallel.native as n; f = n.core().cpu_features(); "
            "print(json.dumps([n.runnable_socs(f), f]))")
    result = python_code(code, env_overrides={"HP_PAYLOAD_DIR": str(payload)})
    assert result.returncode == 0, describe(result)
    runnable, features = json.loads(result.stdout)
    assert "sm_90" not in runnable
    if features["avx512f"] and features["avx512_vnni"] and features["avx512bw"] \
            and features["avx512vl"]:
        assert runnable[0] == "x86_64_v4"
    if features["avx2"] and features["fma"]:
        assert "x86_64_v3" in runnable


# --- errors ------------------------------------------------------------------------------------

def test_native_load_error_rejects_unknown_reason_codes():
    from hyper_parallel.errors import NativeLoadError
    with pytest.raises(ValueError, match="HP-NATIVE-NO-SUCH-THING"):
        NativeLoadError("HP-NATIVE-NO-SUCH-THING", "message", "recovery")
    with pytest.raises(ValueError):
        NativeLoadError("HP-BUILD-SOURCES-MISSING", "message", "recovery")


def test_every_reason_code_is_an_hp_native_code_with_a_description():
    from hyper_parallel.errors import REASONS, NativeLoadError
    assert REASONS
    for reason, meaning in REASONS.items():
        assert re.fullmatch(r"HP-NATIVE-[A-Z]+(-[A-Z]+)*", reason), reason
        assert meaning.strip(), reason
        e = NativeLoadError(reason, "what happened", "how to recover")
        assert isinstance(e, ImportError)
        assert (e.reason, e.detail, e.recovery) == (reason, "what happened", "how to recover")
        assert str(e).startswith(f"[{reason}] what happened") and "recover: how to recover" in str(e)


def test_native_py_raises_only_known_reason_codes():
    from hyper_parallel.errors import REASONS
    source = (REPO / "python" / "hyper_parallel" / "native.py").read_text()
    used = set(re.findall(r'"(HP-NATIVE-[A-Z-]+)"', source))
    assert used and used <= set(REASONS), used - set(REASONS)


# --- the core module, in this process on the development payload -------------------------------

@pytest.fixture(scope="module")
def core(main_payload):
    import os
    if os.environ.get("HP_PAYLOAD_DIR"):
        pytest.skip("HP_PAYLOAD_DIR is set: the in-process tests use the development payload")
    import hyper_parallel.native as native
    return native.core()


def test_core_version_matches_the_version_file(core):
    assert core.version() == VERSION


def test_package_version_matches_the_version_file():
    import hyper_parallel
    assert hyper_parallel.__version__ == VERSION


def test_error_codes_are_numbered_densely_from_zero(core):
    codes = core.error_codes()
    assert (0, "OK") in codes
    assert (6, "TIMEOUT") in codes
    assert (11, "INVALID_SETTING") in codes
    assert [number for number, _ in codes] == list(range(len(codes)))
    names = [name for _, name in codes]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[A-Z][A-Z_]*", n) for n in names), names


def test_the_python_side_numbers_no_error_code_itself(core):
    """Python raises native codes by name (errors.hp_error, numbered from the core's table)."""
    names = {name for _, name in core.error_codes()}
    for source in sorted((REPO / "python" / "hyper_parallel").glob("*.py")):
        text = source.read_text()
        assert not re.search(r"HpError\(\s*\d", text), f"{source.name} numbers an error code itself"
        for name in re.findall(r'hp_error\("([A-Z_]+)"', text):
            assert name in names, f"{source.name}: {name} is not a native error code"
    from hyper_parallel.errors import hp_error
    e = hp_error("DTYPE_MISMATCH", "x")
    assert (e.code, e.name) == (dict((n, c) for c, n in core.error_codes())["DTYPE_MISMATCH"], "DTYPE_MISMATCH")


def test_platform_selftest_rejects_zero_cores_with_an_hp_error(core):
    import hyper_parallel
    with pytest.raises(hyper_parallel.HpError) as info:
        core.platform_selftest(0, 0)
    assert info.value.code == 1
    assert info.value.name == "INVALID_ARGUMENT"
    assert str(info.value).startswith("INVALID_ARGUMENT (1): ")
    assert info.value.message


def test_platform_selftest_runs_one_cube_and_two_vector_cores(core):
    chip = core.platform_selftest(1, 2)
    assert chip["num_cube"] == 1
    assert chip["num_vector"] == 2
    assert chip["cpus"] and all(isinstance(c, int) and c >= 0 for c in chip["cpus"])
    assert isinstance(chip["pinned"], bool) and isinstance(chip["oversubscribed"], bool)
    assert chip["launch_us"] > 0


def test_sha256_hex_of_abc(core):
    assert core.sha256_hex(b"abc") == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert core.sha256_hex(b"") == \
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_loading_the_core_twice_returns_the_same_module(core):
    import hyper_parallel.native as native
    assert native.core() is core


# --- settings ------------------------------------------------------------------------------------

def test_invalid_setting_is_reported_by_settings_error_and_hp_config(tmp_path):
    result = python_code("import hyper_parallel.native as n; print(n.core().settings_error())",
                         env_overrides={"HP_WAIT_TIMEOUT_S": "soon"})
    assert result.returncode == 0, describe(result)
    assert "HP_WAIT_TIMEOUT_S" in result.stdout and "soon" in result.stdout, result.stdout
    assert "INVALID_SETTING" in result.stdout

    env = base_env(HP_WAIT_TIMEOUT_S="soon", HP_PAYLOAD_DIR=None)
    config = run([REPO / "hp", "config"], env=env)
    assert config.returncode == 1, describe(config)
    assert "ERROR" in config.stdout and "HP_WAIT_TIMEOUT_S='soon'" in config.stdout, \
        describe(config)
    doctor = run([REPO / "hp", "doctor"], env=env)
    assert doctor.returncode != 0, describe(doctor)
    assert "HP_WAIT_TIMEOUT_S" in doctor.stdout, describe(doctor)
    assert "Traceback" not in doctor.stderr + config.stderr


def test_valid_settings_report_no_error():
    result = python_code("import hyper_parallel.native as n; print(n.core().settings_error())",
                         env_overrides={"HP_WAIT_TIMEOUT_S": "2.5", "HP_LOG_LEVEL": "error",
                                        "HP_CHIP_CPUS": "0", "HP_PIN_THREADS": "off",
                                        "HP_SPIN_BEFORE_BLOCK": "0"})
    assert result.returncode == 0, describe(result)
    assert result.stdout.strip() == "None"


SOURCE_DIRS = ["native", "python", "scripts", "cmake"]
SOURCE_FILES = ["build.sh", "hp", "setup.py", "CMakeLists.txt"]
TEXT_SUFFIXES = {".cpp", ".cc", ".h", ".hpp", ".py", ".sh", ".cmake", ".txt", ".in", ""}


def repo_sources() -> list[Path]:
    """The checkout's code (no tests, no build output)."""
    files = [REPO / f for f in SOURCE_FILES if (REPO / f).is_file()]
    for d in SOURCE_DIRS:
        files += [p for p in (REPO / d).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                  and "__pycache__" not in p.parts]
    return files


READ_PATTERNS = [
    re.compile(r'getenv\(\s*"(HP_[A-Z0-9_]+)"'),                       # C++
    re.compile(r'(?:find_setting|SettingSpec\{)\s*\(?\s*"(HP_[A-Z0-9_]+)"'),  # settings specs
    re.compile(r'\$ENV\{(HP_[A-Z0-9_]+)\}'),                            # CMake
    re.compile(r'os\.environ\.get\(\s*["\'](HP_[A-Z0-9_]+)["\']'),      # Python
    re.compile(r'os\.environ\[\s*["\'](HP_[A-Z0-9_]+)["\']\s*\]'),
    re.compile(r'os\.getenv\(\s*["\'](HP_[A-Z0-9_]+)["\']'),
    re.compile(r'\$\{(HP_[A-Z0-9_]+):[-=]'),                            # shell ${HP_X:-...}
]


def environment_reads() -> dict[str, set[str]]:
    reads: dict[str, set[str]] = {}
    for path in repo_sources():
        text = path.read_text(errors="replace")
        for pattern in READ_PATTERNS:
            for name in pattern.findall(text):
                reads.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return reads


def test_every_hp_variable_the_code_reads_is_in_the_settings_table(core):
    specs = {s["name"] for s in core.setting_specs()}
    reads = environment_reads()
    assert {"HP_PAYLOAD_DIR", "HP_BUILD_DIR", "HP_CACHE_DIR", "HP_WERROR"} <= set(reads), \
        "the scan of the sources found too little"
    missing = {name: sorted(files) for name, files in reads.items() if name not in specs}
    assert missing == {}, f"HP_* variables read but not in hp::setting_specs(): {missing}"


def test_every_setting_is_used_outside_the_settings_table(core):
    others = [p for p in repo_sources() + list((REPO / "docs").rglob("*"))
              if p.is_file() and p != REPO / "native" / "common" / "settings.cpp"]
    texts = [p.read_text(errors="replace") for p in others]
    unused = [s["name"] for s in core.setting_specs()
              if not any(re.search(rf"\b{s['name']}\b", t) for t in texts)]
    assert unused == [], f"settings referenced nowhere but native/common/settings.cpp: {unused}"


def test_setting_specs_are_well_formed(core):
    specs = core.setting_specs()
    names = [s["name"] for s in specs]
    assert len(set(names)) == len(names)
    for s in specs:
        assert re.fullmatch(r"HP_[A-Z0-9_]+", s["name"]), s
        assert s["type"] in {"bool", "int", "double", "string", "enum", "cpulist", "path", "size"}, s
        assert s["scope"] in {"runtime", "python", "build"}, s
        assert s["description"].strip(), s
        if s["type"] == "enum":
            assert s["default"] in s["choices"].split("|"), s


# --- regressions -----------------------------------------------------------------------------

def test_a_payload_missing_a_native_library_is_adapter_load_failed(tmp_path, main_payload):
    """dlopen fails inside module_from_spec: still a NativeLoadError, never a bare ImportError."""
    payload = tmp_path / "payload" / "hyper_parallel"
    payload.mkdir(parents=True)
    (payload / "manifest.json").write_text((main_payload / "manifest.json").read_text())
    (payload / "core" / "python").mkdir(parents=True)
    (payload / "core" / "lib").mkdir()
    for ext in (main_payload / "core" / "python").iterdir():
        (payload / "core" / "python" / ext.name).symlink_to(ext)
    (payload / "core" / "lib" / "libhyper_parallel_common.so").symlink_to(
        main_payload / "core" / "lib" / "libhyper_parallel_common.so")  # platform is missing
    out = scenario("n.core()", HP_PAYLOAD_DIR=str(payload))
    assert out["ok"] is False, out
    assert out["reason"] == "HP-NATIVE-ADAPTER-LOAD-FAILED", out
    assert "libhyper_parallel_platform.so" in out["detail"], out


def test_errors_survive_pickling():
    import pickle
    from hyper_parallel import HpError, NativeLoadError
    e = pickle.loads(pickle.dumps(HpError(6, "TIMEOUT", "waited too long")))
    assert (e.code, e.name, e.message) == (6, "TIMEOUT", "waited too long")
    n = pickle.loads(pickle.dumps(NativeLoadError("HP-NATIVE-PAYLOAD-MISSING", "gone", "./build.sh")))
    assert (n.reason, n.detail, n.recovery) == ("HP-NATIVE-PAYLOAD-MISSING", "gone", "./build.sh")


def test_a_failing_selftest_launch_raises_instead_of_crashing():
    """launch() fails while the GIL is released (a mix launch of more groups than cube cores):
    the error must be raised after the GIL is back (raising without it crashed)."""
    code = """
import hyper_parallel.native as n
from hyper_parallel import HpError
try:
    n.core().platform_selftest(1, 2, groups=2)
except HpError as e:
    print("raised", e.name)
"""
    result = python_code(code)
    assert result.returncode == 0, describe(result)
    assert result.stdout.strip() == "raised INVALID_ARGUMENT", describe(result)

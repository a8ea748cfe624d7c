"""setup.py only packages: it refuses to compile, packages a core-only wheel without a payload
(running no compiler, writing nothing into the checkout), and the real wheel holds the payload."""
from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import (REPO, SYSTEM_PYTHON, VERSION, base_env, describe, expected_wheel_name,
                      make_executable, run)

FAKE_TOOLS = ["gcc", "g++", "cc", "c++", "cmake", "ninja", "x86_64-linux-gnu-gcc",
              "x86_64-linux-gnu-g++"]


def fake_toolchain(tmp_path: Path) -> tuple[Path, Path]:
    """A dir of compiler/build-tool stand-ins that record being run and fail."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    marker = tmp_path / "a-compiler-ran"
    for tool in FAKE_TOOLS:
        make_executable(bin_dir / tool, f'#!/bin/sh\necho "{tool} $*" >> "{marker}"\nexit 1\n')
    return bin_dir, marker


def no_compile_env(tmp_path: Path, **extra) -> tuple[dict, Path]:
    bin_dir, marker = fake_toolchain(tmp_path)
    env = base_env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                   CC=str(bin_dir / "gcc"), CXX=str(bin_dir / "g++"), LDSHARED=None,
                   PYTHONPATH=None, **extra)
    return env, marker


def new_untracked_paths(before: set[str], after: set[str]) -> list[str]:
    """Untracked (??) and ignored (!!) entries of `git status` that appeared."""
    return sorted(l for l in after - before if l[:2] in ("??", "!!"))


def git_status() -> set[str]:
    result = run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"])
    assert result.returncode == 0, describe(result)
    return set(result.stdout.splitlines())


def remove_setup_outputs(entries: list[str]) -> None:
    """Removes what setup.py wrote into the checkout (only typical setuptools outputs)."""
    for entry in entries:
        rel = entry[3:].strip().strip('"')
        path = REPO / rel
        if re.search(r"(\.egg-info|^build/(lib|bdist|temp)[^/]*|^dist)(/|$)", rel) and \
                path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_build_ext_refuses_to_compile(tmp_path):
    env, marker = no_compile_env(tmp_path)
    result = run([SYSTEM_PYTHON, "setup.py", "build_ext", "--build-temp", tmp_path / "t",
                  "--build-lib", tmp_path / "l"], env=env)
    assert result.returncode != 0, describe(result)
    assert "HP-SETUP-NO-COMPILE" in result.stdout + result.stderr, describe(result)
    assert not marker.exists(), f"a compiler ran: {marker.read_text()}"


def test_without_a_payload_setup_py_packages_a_core_only_wheel_and_compiles_nothing(tmp_path):
    empty_payload = tmp_path / "empty-payload"
    empty_payload.mkdir()
    out = tmp_path / "T"
    out.mkdir()
    env, marker = no_compile_env(tmp_path, HP_PAYLOAD_DIR=str(empty_payload))
    before = git_status()
    try:
        result = run([SYSTEM_PYTHON, "setup.py",
                      "egg_info", "--egg-base", out,
                      "build", "--build-base", out / "b",
                      "bdist_wheel", "--bdist-dir", out / "bd", "--dist-dir", out / "dist"],
                     env=env, timeout=300)
    finally:
        written = new_untracked_paths(before, git_status())
        remove_setup_outputs(written)
    assert result.returncode == 0, describe(result)
    assert not marker.exists(), f"setup.py ran a compiler/build tool: {marker.read_text()}"
    assert written == [], f"setup.py wrote into the checkout: {written}"
    assert "core-only wheel" in result.stdout, describe(result)

    wheels = sorted((out / "dist").glob("*.whl"))
    assert [w.name for w in wheels] == [expected_wheel_name()]
    assert wheels[0].name == f"hyper_parallel-{VERSION}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheels[0]) as zf:
        names = zf.namelist()
        tags = zf.read(f"hyper_parallel-{VERSION}.dist-info/WHEEL").decode()
    installed = [installed_path(n) for n in names]
    assert not [n for n in names if ".so" in Path(n).name], names
    assert "hyper_parallel/manifest.json" not in installed
    for module in ["__init__.py", "__main__.py", "cli.py", "errors.py", "native.py"]:
        assert f"hyper_parallel/{module}" in installed, names
    assert "Tag: cp311-cp311-linux_x86_64" in tags, tags
    assert "Root-Is-Purelib: false" in tags, tags


def installed_path(arcname: str) -> str:
    """Where a wheel member lands relative to site-packages (strips .data/<scheme>/)."""
    m = re.match(r"[^/]+\.data/(purelib|platlib)/(.*)", arcname)
    return m.group(2) if m else arcname


@pytest.fixture(scope="module")
def real_wheel_members(main_wheel) -> tuple[list[str], dict[str, bytes]]:
    with zipfile.ZipFile(main_wheel) as zf:
        return zf.namelist(), {n: zf.read(n) for n in zf.namelist()
                               if n.endswith((".txt", "WHEEL", "RECORD", "METADATA"))}


def test_real_wheel_is_tagged_for_this_interpreter(main_wheel):
    assert main_wheel.name == expected_wheel_name()


def test_real_wheel_holds_the_package_and_the_core_payload(real_wheel_members):
    names, _ = real_wheel_members
    installed = {installed_path(n) for n in names}
    for expected in ["hyper_parallel/__init__.py", "hyper_parallel/cli.py",
                     "hyper_parallel/native.py", "hyper_parallel/errors.py",
                     "hyper_parallel/manifest.json",
                     "hyper_parallel/core/lib/libhyper_parallel_common.so",
                     "hyper_parallel/core/lib/libhyper_parallel_platform.so"]:
        assert expected in installed, f"{expected} missing from the wheel: {sorted(installed)}"
    extensions = [n for n in installed
                  if re.fullmatch(r"hyper_parallel/core/python/_hp_core\.cpython-311-[^/]+\.so", n)]
    assert extensions, f"no _hp_core extension module in the wheel: {sorted(installed)}"


def test_real_wheel_puts_the_package_at_the_wheel_root(real_wheel_members):
    """A platform wheel (Root-Is-Purelib: false) holding a CPython extension must put the
    package at the archive root (installed to platlib), not under .data/purelib/."""
    names, _ = real_wheel_members
    for expected in ["hyper_parallel/__init__.py", "hyper_parallel/manifest.json",
                     "hyper_parallel/core/lib/libhyper_parallel_common.so"]:
        assert expected in names, (
            f"{expected} is not at the wheel root; the package is under: "
            f"{sorted({n.split('/hyper_parallel/')[0] for n in names if '/hyper_parallel/' in n})}")
    assert not [n for n in names if ".data/purelib/" in n], \
        "native code packaged as purelib"


def test_real_wheel_has_the_hp_console_script(real_wheel_members):
    names, texts = real_wheel_members
    entry_points = texts[f"hyper_parallel-{VERSION}.dist-info/entry_points.txt"].decode()
    assert "[console_scripts]" in entry_points
    assert re.search(r"^hp = hyper_parallel\.cli:main$", entry_points, re.M), entry_points


def test_real_wheel_ships_no_tests(real_wheel_members):
    names, _ = real_wheel_members
    tests = [n for n in names if re.search(r"(^|/)tests?/", n) or Path(n).name.startswith("test_")
             or "CTestTestfile" in n]
    assert tests == [], tests


def test_real_wheel_record_lists_every_member(real_wheel_members):
    names, texts = real_wheel_members
    record = texts[f"hyper_parallel-{VERSION}.dist-info/RECORD"].decode()
    recorded = {line.split(",")[0] for line in record.splitlines() if line}
    assert recorded == set(names)

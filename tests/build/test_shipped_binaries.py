"""The payload's and the wheel's binaries ship without debug info and without the build
machine's paths; their debug info stays beside the build, found by build ID
(scripts/split_debug.py, the BUILD-PATH rule of scripts/check_elf.py); the oldest system they
run on is read from them (scripts/abi_floor.py) and tags the wheel."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import zipfile
from pathlib import Path

from conftest import BUILD_DIR, PAYLOAD_DIR, REPO, SYSTEM_PYTHON, base_env, describe, run

SPLIT = REPO / "scripts" / "split_debug.py"
CHECK = REPO / "scripts" / "check_elf.py"
NATIVE = BUILD_DIR / "native"


def sections(path: Path) -> str:
    return subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                          check=True).stdout


def debug_bytes(path: Path) -> int:
    """Total size of the file's .debug_* sections (readelf -S -W: the size is the 6th field)."""
    return sum(int(line.split("]", 1)[1].split()[4], 16) for line in sections(path).splitlines()
               if "] .debug_" in line)


def build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    return out.split("Build ID:")[1].split()[0]


def elf_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
            and p.read_bytes()[:4] == b"\x7fELF"]


def test_every_payload_elf_is_stripped_and_its_debug_info_is_found_by_build_id(main_payload):
    files = elf_files(main_payload)
    assert len(files) > 20, files
    for f in files:
        s = sections(f)
        assert ".debug_info" not in s, f"{f} still carries its debug info"
        assert ".symtab" in s, f"{f} lost its symbol table (profiles need the names)"
        assert ".gnu_debuglink" in s, f"{f} has no debuglink"
        bid = build_id(f)
        debug = NATIVE / "debug" / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
        assert debug.is_file(), f"{f}: its debug info {debug} is missing"
        assert ".debug_info" in sections(debug), debug


def test_no_shipped_file_names_the_build_paths(main_payload, main_wheel, tmp_path):
    check = run([SYSTEM_PYTHON, CHECK, "--build-path", REPO, "--build-path", NATIVE, main_payload])
    assert check.returncode == 0, describe(check)
    with zipfile.ZipFile(main_wheel) as zf:
        zf.extractall(tmp_path / "wheel")
    check = run([SYSTEM_PYTHON, CHECK, "--build-path", REPO, tmp_path / "wheel"])
    assert check.returncode == 0, describe(check)


def test_the_build_path_rule_names_the_file_and_the_path(tmp_path):
    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "data.json").write_text('{"log": "/srv/build/here/native/core/log/build.log"}')
    (tree / "clean.txt").write_text("nothing absolute here: build/native/core/log/build.log")
    check = run([SYSTEM_PYTHON, CHECK, "--build-path", "/srv/build/here", tree])
    assert check.returncode == 1, describe(check)
    lines = check.stdout.splitlines()
    assert len(lines) == 1, lines
    assert "lib/data.json: BUILD-PATH" in lines[0] and "/srv/build/here/native/core/log/build.log" in lines[0], lines


def test_split_debug_strips_once_and_keeps_the_debug_info_by_build_id(tmp_path):
    # A test executable: built with debug info (line tables) like every shipped file was, never
    # stripped.
    source = NATIVE / "tests" / "core" / "bin" / "tests_common"
    assert source.is_file() and ".debug_info" in sections(source), source
    tree = tmp_path / "tree" / "bin"
    tree.mkdir(parents=True)
    binary = tree / "tests_common"
    shutil.copy2(source, binary)
    debug_dir = tmp_path / "debug"
    result = run([SYSTEM_PYTHON, SPLIT, tmp_path / "tree", debug_dir])
    assert result.returncode == 0, describe(result)
    bid = build_id(binary)
    debug = debug_dir / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    assert debug.is_file() and ".debug_info" in sections(debug), debug
    assert ".debug_info" not in sections(binary) and ".gnu_debuglink" in sections(binary)
    assert source.stat().st_size - binary.stat().st_size >= 0.9 * debug_bytes(source)
    stripped = binary.read_bytes()
    again = run([SYSTEM_PYTHON, SPLIT, tmp_path / "tree", debug_dir])
    assert again.returncode == 0, describe(again)
    assert binary.read_bytes() == stripped, "a second run changed a stripped file"
    # Still runs (its RUNPATH is relative to the tests tree: the payload's libraries given here).
    listed = run([binary, "--gtest_list_tests"],
                 env={**base_env(), "LD_LIBRARY_PATH": str(PAYLOAD_DIR / "core" / "lib")})
    assert listed.returncode == 0 and listed.stdout.strip(), describe(listed)


def test_the_manifest_records_the_system_floor_the_binaries_need(main_payload, main_wheel):
    manifest = json.loads((main_payload / "manifest.json").read_text())
    floor = run([SYSTEM_PYTHON, REPO / "scripts" / "abi_floor.py", main_payload])
    assert floor.returncode == 0, describe(floor)
    assert manifest["abi"] == json.loads(floor.stdout)
    abi = manifest["abi"]
    # The file named for the floor really asks for that version.
    versions = subprocess.run(["readelf", "-V", "-W", str(main_payload / abi["needed_by"]["glibc"])],
                              capture_output=True, text=True, check=True).stdout
    assert f"GLIBC_{abi['glibc']}" in versions, abi
    running = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    assert tuple(map(int, abi["glibc"].split("."))) <= tuple(map(int, running.split("."))), abi
    # Debian's libraries keep the wheel off manylinux, and the build says which.
    assert "libfmt.so.9" in abi["manylinux_blockers"], abi
    assert abi["platform_tag"] == f"linux_{platform.machine()}"
    assert main_wheel.name.endswith(f"-{abi['platform_tag']}.whl"), main_wheel.name


def test_an_older_glibc_is_named_before_anything_fails_to_load():
    from hyper_parallel import native
    info = {"abi": {"glibc": "2.34", "needed_by": {"glibc": "core/bin/hp-dump"}}}
    why = native.glibc_shortfall(info, running="2.31")
    assert why is not None and "2.34" in why and "2.31" in why and "core/bin/hp-dump" in why, why
    assert native.glibc_shortfall(info, running="2.34") is None
    assert native.glibc_shortfall(info, running="2.36") is None
    assert native.glibc_shortfall({}, running="2.17") is None  # a manifest from before the floor

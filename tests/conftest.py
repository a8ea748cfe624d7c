"""Shared fixtures and helpers of the Python test suites (tests/python, tests/build).

Tests never compile. The build-script tests run ./build.sh in a scratch build dir
(HP_BUILD_DIR=<tmp>/b) with HP_CACHE_DIR pointing at the main build's component cache, so the
core component is restored from that cache. A guard `cmake` first on PATH lets
`cmake --version` (part of the cache key) through and refuses everything else, so a cache miss
fails fast instead of compiling.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_DIR = Path(os.path.abspath(os.environ.get("HP_BUILD_DIR") or REPO / "build"))
CACHE_DIR = BUILD_DIR / "native" / "cache"
PAYLOAD_DIR = BUILD_DIR / "native" / "payload" / "hyper_parallel"
DIST_DIR = BUILD_DIR / "dist"
VERSION = (REPO / "VERSION").read_text().strip()
SYSTEM_PYTHON = "/usr/bin/python3"

# The package under test, from the checkout (the documented command also sets PYTHONPATH).
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))
# The build scripts' Python modules (soc_targets: the SoC target table's reader).
if str(REPO / "scripts") not in sys.path:
    sys.path.append(str(REPO / "scripts"))

# One summary row of assemble_payload.py: "[hp] <part> <status> <reason> <log>".
SUMMARY_ROW = re.compile(r"^\[hp\] (\S+)\s+(ok|failed|skipped)\s+(\S+)\s+(\S+)\s*$", re.M)
CORE_FROM_CACHE = "[hp] core: restored from cache"


def base_env(**overrides: str | None) -> dict[str, str]:
    """The test's environment (HP_WERROR and friends pass through) with overrides; None
    removes a variable."""
    env = dict(os.environ)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def activated(cmd, *vendors) -> list[str]:
    """`cmd` in a shell that sourced the payload's activation first (multicore/lib/set_env.bash,
    with these vendor directories), as a user starts a process that uses another vendor."""
    script = PAYLOAD_DIR / "multicore" / "lib" / "set_env.bash"
    # No positional parameters in the shell: `source` without arguments would pass them on.
    line = shlex.join(["source", str(script), *map(str, vendors)]) + " && exec " + shlex.join(map(str, cmd))
    return ["bash", "-c", line]


def run(cmd, *, env: dict | None = None, cwd: Path | str = REPO, timeout: float = 120,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Runs a command (list, or a string for bash -c), text output captured."""
    if isinstance(cmd, str):
        cmd = ["bash", "-c", cmd]
    return subprocess.run([str(c) for c in cmd], env=env if env is not None else base_env(),
                          cwd=str(cwd), capture_output=True, text=True, timeout=timeout,
                          input=input)


def describe(result: subprocess.CompletedProcess) -> str:
    """Everything about a finished process, for assertion messages."""
    return (f"command: {result.args}\nexit: {result.returncode}\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}")


def python_code(code: str, *, env_overrides: dict | None = None, cwd: Path | str = REPO,
                python: str = SYSTEM_PYTHON, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs `python -c code` with PYTHONPATH=<repo>/python (a fresh interpreter: the loader
    caches the manifest per process)."""
    env = base_env(PYTHONPATH=str(REPO / "python"), HP_PAYLOAD_DIR=None)
    env.update(env_overrides or {})
    env = {k: v for k, v in env.items() if v is not None}
    return run([python, "-c", code], env=env, cwd=cwd, timeout=timeout)


def make_executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def summary_rows(output: str) -> dict[str, tuple[str, str, str]]:
    """{part: (status, reason, log)} from build.sh's summary table."""
    return {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in SUMMARY_ROW.finditer(output)}


def selection_line(output: str) -> str:
    lines = [l for l in output.splitlines() if l.startswith("[hp] selection:")]
    assert len(lines) == 1, f"expected one selection line in:\n{output}"
    return lines[0]


class BuildRunner:
    """Runs ./build.sh in one scratch build dir with the core restored from the main cache."""

    def __init__(self, build_dir: Path, guard_dir: Path):
        self.build_dir = build_dir
        self.guard_dir = guard_dir

    @property
    def native(self) -> Path:
        return self.build_dir / "native"

    @property
    def payload(self) -> Path:
        return self.native / "payload" / "hyper_parallel"

    @property
    def dist(self) -> Path:
        return self.build_dir / "dist"

    def wheels(self) -> list[Path]:
        return sorted(self.dist.glob("hyper_parallel-*.whl")) if self.dist.is_dir() else []

    def env(self) -> dict[str, str]:
        return base_env(HP_BUILD_DIR=str(self.build_dir), HP_CACHE_DIR=str(CACHE_DIR),
                        HP_PAYLOAD_DIR=None,
                        PATH=f"{self.guard_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def __call__(self, *args: str, timeout: float = 300,
                 expect_core_from_cache: bool = True) -> subprocess.CompletedProcess:
        result = run([REPO / "build.sh", *args], env=self.env(), timeout=timeout)
        if expect_core_from_cache:
            assert CORE_FROM_CACHE in result.stdout, (
                "the core component was not restored from the main build's cache "
                f"({CACHE_DIR}): this test would have compiled. Run ./build.sh (with the same "
                "HP_WERROR/HP_SANITIZE) so the cache matches the current sources.\n"
                + describe(result))
        return result


def ops_builder(build: Path, compile_guard_dir: Path):
    """A build dir `build` holding (hard links of) the main build's core, symmetric_memory and
    multicore installs, and a function running scripts/build_custom_ops.sh --no-payload in it
    with the main cache and the compile guard. Its .package is the op package, .build the dir."""
    for c in ("core", "symmetric_memory", "multicore"):
        src = BUILD_DIR / "native" / c
        if not (src / "install").is_dir():
            pytest.fail(f"no {c} install at {src}: run ./build.sh first")
        (build / "native" / c).mkdir(parents=True)
        subprocess.run(["cp", "-al", str(src / "install"), str(build / "native" / c / "install")], check=True)
        shutil.copy(src / "status.tsv", build / "native" / c / "status.tsv")
    env = base_env(HP_BUILD_DIR=str(build), HP_CACHE_DIR=str(CACHE_DIR), HP_PAYLOAD_DIR=None, HP_SHMEM_HOME=None,
                   HP_VENDOR_PATH=None, PATH=f"{compile_guard_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def build_ops(*args: str, **env_overrides) -> subprocess.CompletedProcess:
        e = dict(env)
        e.update({k: v for k, v in env_overrides.items() if v is not None})
        return run([REPO / "scripts" / "build_custom_ops.sh", "--no-payload", *args], env=e, timeout=300)

    build_ops.package = build / "native" / "custom_ops" / "install" / "hyper_parallel" / "custom_ops"
    build_ops.build = build
    return build_ops


@pytest.fixture(scope="session")
def compile_guard_dir(tmp_path_factory) -> Path:
    """A directory to put first on PATH: its `cmake` answers --version (the cache key asks)
    and refuses to configure or build, so a test can never compile."""
    guard = tmp_path_factory.mktemp("compile-guard")
    real_cmake = None
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(d) / "cmake"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            real_cmake = candidate
            break
    make_executable(guard / "cmake", f"""#!/bin/sh
if [ "$1" = --version ]; then exec {real_cmake or 'false'} "$@"; fi
echo "tests/conftest.py compile guard: refusing 'cmake $*' (tests never compile)" >&2
exit 97
""")
    return guard


@pytest.fixture
def build_runner(tmp_path, compile_guard_dir) -> BuildRunner:
    """./build.sh in a fresh scratch build dir <tmp>/b (not created until build.sh runs)."""
    return BuildRunner(tmp_path / "b", compile_guard_dir)


@pytest.fixture(scope="session")
def main_payload() -> Path:
    if not (PAYLOAD_DIR / "manifest.json").is_file():
        pytest.fail(f"no payload at {PAYLOAD_DIR}: run ./build.sh first")
    return PAYLOAD_DIR


@pytest.fixture(scope="session")
def main_wheel(tmp_path_factory) -> Path:
    """A private copy of the main build's wheel (a concurrent ./build.sh replaces dist/)."""
    wheels = sorted(DIST_DIR.glob("hyper_parallel-*.whl"))
    if len(wheels) != 1:
        pytest.fail(f"expected one wheel in {DIST_DIR}, found {wheels}: run ./build.sh first")
    copy = tmp_path_factory.mktemp("wheel") / wheels[0].name
    copy.write_bytes(wheels[0].read_bytes())
    return copy


def expected_wheel_name() -> str:
    import sysconfig
    abi = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"hyper_parallel-{VERSION}-{abi}-{abi}-{plat}.whl"

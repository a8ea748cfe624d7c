"""scripts/prepare_host.sh: locked Debian packages, the chosen interpreter, the lock files."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, base_env, describe, run

PREPARE = REPO / "scripts" / "prepare_host.sh"
PYTHON_LOCK = REPO / "deps" / "python-packages.lock"
HOST_LOCK = REPO / "deps" / "host-packages.lock"
REQUIRED_MODULES = ["setuptools", "wheel", "numpy", "pytest", "pytest_timeout", "xdist", "venv"]


def prepare(tmp_path, *args, **env):
    return run([PREPARE, *args],
               env=base_env(HP_BUILD_DIR=str(tmp_path / "b"), HP_PAYLOAD_DIR=None, **env),
               timeout=120)


def installed_version(package: str) -> str | None:
    out = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}", package],
                         capture_output=True, text=True).stdout
    status, _, version = out.partition("|")
    return version if status.startswith("ii") else None


def test_a_different_installed_version_is_only_a_warning(tmp_path):
    have = installed_version("cmake")
    if have is None:
        pytest.skip("cmake is not installed from Debian")
    lock = tmp_path / "lock"
    lock.write_text("# a test lock\ncmake 0.0-fake   build system\n")
    result = prepare(tmp_path, "--lock", str(lock))
    assert result.returncode == 0, describe(result)
    warnings = [l for l in result.stderr.splitlines() if "WARNING" in l and "cmake" in l]
    assert warnings, describe(result)
    assert have in warnings[0] and "0.0-fake" in warnings[0], warnings[0]
    assert "1 locked, all present" in result.stdout, describe(result)


def test_check_reports_a_missing_package_with_the_exact_command_and_installs_nothing(tmp_path):
    if installed_version("hello") is not None:
        pytest.skip("the Debian package 'hello' is installed on this host")
    lock = tmp_path / "lock"
    lock.write_text("hello 2.10-3 a package this host does not have\n")
    result = prepare(tmp_path, "--check", "--lock", str(lock))
    assert result.returncode == 3, describe(result)
    assert "HP-PREPARE-PACKAGES-MISSING" in result.stderr, describe(result)
    assert "apt-get install -y --no-install-recommends hello" in result.stderr, describe(result)
    assert installed_version("hello") is None, "prepare_host.sh --check installed 'hello'"


def test_lock_option_accepts_the_equals_form(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("cmake 0.0-fake\n")
    result = prepare(tmp_path, "--check", f"--lock={lock}")
    assert result.returncode == 0, describe(result)
    assert "(lock)" in result.stdout


def test_unreadable_lock_and_unknown_argument_exit_2(tmp_path):
    result = prepare(tmp_path, "--check", "--lock", str(tmp_path / "no-such-lock"))
    assert result.returncode == 2, describe(result)
    assert "HP-PREPARE-USAGE" in result.stderr
    result = prepare(tmp_path, "--bogus")
    assert result.returncode == 2, describe(result)
    assert "HP-PREPARE-USAGE" in result.stderr


def test_python_that_does_not_exist_exits_5(tmp_path):
    result = prepare(tmp_path, "--check", PYTHON="/nonexistent")
    assert result.returncode == 5, describe(result)
    assert "HP-PREPARE-PYTHON-NOT-FOUND" in result.stderr, describe(result)
    assert "/nonexistent" in result.stderr


def pyenv_interpreter() -> Path | None:
    """The real interpreter behind `python3` on PATH when it is not Debian's."""
    python3 = shutil.which("python3")
    if python3 is None:
        return None
    out = subprocess.run([python3, "-c", "import sys; print(sys.executable)"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return None
    exe = Path(out.stdout.strip())
    if not exe.is_file() or exe.resolve() == Path("/usr/bin/python3").resolve():
        return None
    return exe


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    exe = pyenv_interpreter()
    if exe is None:
        pytest.skip("no non-Debian python3 on PATH (pyenv) to make a bare venv from")
    venv = tmp_path_factory.mktemp("bare") / "venv"
    result = run([exe, "-m", "venv", "--without-pip", venv], timeout=120)
    assert result.returncode == 0, describe(result)
    return venv


@pytest.mark.slow
def test_interpreter_without_the_modules_fails_with_the_locked_pip_command(tmp_path, bare_venv):
    python = bare_venv / "bin" / "python"
    missing = run([python, "-c", "import importlib.util as u\n"
                   f"print(' '.join(m for m in {REQUIRED_MODULES!r} if u.find_spec(m) is None))"])
    missing = missing.stdout.split()
    assert missing, "the bare venv unexpectedly has every required module"

    result = prepare(tmp_path, "--check", PYTHON=str(python))
    assert result.returncode == 5, describe(result)
    assert "HP-PREPARE-PYTHON-MODULES" in result.stderr, describe(result)
    for module in missing:
        assert re.search(rf"\b{module}\b", result.stderr), f"{module} not listed\n{result.stderr}"
    recover = [l for l in result.stderr.splitlines() if "recover:" in l]
    assert recover, describe(result)
    assert str(PYTHON_LOCK) in recover[0] and "--require-hashes" in recover[0], recover[0]
    assert f"{python} -m pip install" in recover[0], recover[0]
    # --check never installs: the venv still lacks the modules.
    again = run([python, "-c", "import importlib.util as u; "
                 f"print(u.find_spec({missing[0]!r}) is None)"])
    assert again.stdout.strip() == "True"


@pytest.mark.slow
def test_missing_modules_are_named_on_the_error_line_itself(tmp_path, bare_venv):
    """Every message line of the build scripts is one '[hp] ...' line; the list of missing
    modules must be on the HP-PREPARE-PYTHON-MODULES line, not spread over bare lines."""
    result = prepare(tmp_path, "--check", PYTHON=str(bare_venv / "bin" / "python"))
    assert result.returncode == 5, describe(result)
    error = [l for l in result.stderr.splitlines() if "HP-PREPARE-PYTHON-MODULES" in l][0]
    for module in ["setuptools", "wheel", "numpy", "pytest", "pytest_timeout", "xdist"]:
        assert re.search(rf"\b{module}\b", error), \
            f"{module} is not on the error line {error!r}\n--- stderr ---\n{result.stderr}"
    stray = [l for l in result.stderr.splitlines() if l and not l.startswith("[hp]")]
    assert not stray, f"stderr lines without the [hp] prefix: {stray}"


def lock_lines(path: Path) -> list[str]:
    return [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]


def test_python_lock_pins_every_package_with_a_sha256_hash():
    lines = lock_lines(PYTHON_LOCK)
    assert lines
    names = []
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)"
                         r"((?:\s+--hash=sha256:[0-9a-f]{64})+)\s*", line)
        assert m, f"not '<name>==<version> --hash=sha256:<64 hex>': {line!r}"
        names.append(m.group(1).lower().replace("_", "-"))
    assert len(names) == len(set(names)), f"duplicate packages: {names}"
    for required in ["numpy", "pytest", "pytest-timeout", "pytest-xdist", "setuptools", "wheel"]:
        assert required in names, f"{required} is not in {PYTHON_LOCK}"


def test_host_lock_lines_have_a_name_and_a_version():
    lines = lock_lines(HOST_LOCK)
    assert lines
    names = []
    for line in lines:
        fields = line.split()
        assert len(fields) >= 2, f"no version: {line!r}"
        name, version = fields[:2]
        assert re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name), f"bad package name {name!r}"
        assert re.fullmatch(r"(\d+:)?[0-9][A-Za-z0-9.+~-]*", version), f"bad version {line!r}"
        names.append(name)
    assert len(names) == len(set(names)), f"duplicate packages: {names}"


def test_python_lock_versions_match_the_debian_packages_of_the_host_lock():
    """The PyPI pins are documented to match Debian 12's packages of the same tools."""
    host = {}
    for line in lock_lines(HOST_LOCK):
        name, version = line.split()[:2]
        upstream = version.split(":", 1)[-1].rsplit("-", 1)[0]
        host[name] = upstream.split("+")[0]
    checked = 0
    for line in lock_lines(PYTHON_LOCK):
        name, version = line.split()[0].split("==")
        debian = f"python3-{name.lower().replace('_', '-')}"
        if debian in host:
            assert host[debian] == version, f"{name}=={version} but {debian} is {host[debian]}"
            checked += 1
    assert checked >= 5, "expected numpy, pytest, pytest-timeout, setuptools, wheel to be checked"

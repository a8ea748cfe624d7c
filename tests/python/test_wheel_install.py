"""The wheel in build/dist installed into a fresh venv: imports and loads the native core from
the installed payload outside the checkout, `hp` works, and uninstalling removes every file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SYSTEM_PYTHON, VERSION, base_env, describe, run

pytestmark = pytest.mark.slow


def venv_env() -> dict[str, str]:
    """No PYTHONPATH, no overrides: only the installed package is importable."""
    return base_env(PYTHONPATH=None, HP_PAYLOAD_DIR=None, HP_BUILD_DIR=None,
                    PYTHONNOUSERSITE="1")


@pytest.fixture(scope="module")
def installed(tmp_path_factory, main_wheel):
    """(venv, site-packages, outside cwd) with the wheel installed."""
    root = tmp_path_factory.mktemp("wheel-install")
    venv = root / "venv"
    result = run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv], cwd=root,
                 env=venv_env(), timeout=300)
    assert result.returncode == 0, describe(result)
    python = venv / "bin" / "python"
    result = run([python, "-m", "pip", "install", "--no-deps", "--no-index",
                  "--disable-pip-version-check", main_wheel], cwd=root, env=venv_env(),
                 timeout=300)
    assert result.returncode == 0, describe(result)
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               cwd=root, env=venv_env())
    outside = root / "elsewhere"
    outside.mkdir()
    return venv, Path(site.stdout.strip()), outside


def test_installed_package_loads_the_native_core_from_the_installed_payload(installed):
    venv, site, outside = installed
    code = ("import json, hyper_parallel, hyper_parallel.native as n\n"
            "print(json.dumps({'file': hyper_parallel.__file__, 'version': hyper_parallel.__version__,"
            " 'core': n.core().version(), 'payload': str(n.locate_payload()[0]),"
            " 'how': n.locate_payload()[1], 'components': n.manifest()['components']}))")
    result = run([venv / "bin" / "python", "-c", code], cwd=outside, env=venv_env())
    assert result.returncode == 0, describe(result)
    info = json.loads(result.stdout)
    assert Path(info["file"]).is_relative_to(site), info
    assert info["how"] == "installed", info
    assert Path(info["payload"]) == site / "hyper_parallel", info
    assert info["core"] == VERSION
    assert info["version"] == VERSION
    assert "core" in info["components"]


def test_installed_hp_doctor_exits_0(installed):
    venv, site, outside = installed
    result = run([venv / "bin" / "hp", "doctor"], cwd=outside, env=venv_env())
    assert result.returncode == 0, describe(result)
    assert f"{site / 'hyper_parallel'} (installed)" in result.stdout, describe(result)
    assert "native core" in result.stdout
    assert "platform       ok" in result.stdout


def test_installed_hp_config_lists_the_settings(installed):
    venv, _, outside = installed
    result = run([venv / "bin" / "hp", "config"], cwd=outside, env=venv_env())
    assert result.returncode == 0, describe(result)
    assert "HP_WAIT_TIMEOUT_S" in result.stdout


def test_installed_hp_moe_runs_the_layer(installed):
    """The main job from the wheel: hp-moe finds the installed hprun and the layer checks out."""
    venv, _, outside = installed
    env = venv_env()
    for name in [n for n in env if n.startswith(("HP_SHMEM_", "HP_JOB_", "HP_RANK", "OMPI_", "PMIX_"))]:
        env.pop(name)
    result = run([venv / "bin" / "hp", "moe", "--ranks", "2", "--tokens", "16", "--hidden", "64",
                  "--intermediate", "32", "--experts", "4", "--topk", "2", "--iterations", "1", "--json"],
                 cwd=outside, env=env, timeout=120)
    assert result.returncode == 0, describe(result)
    assert json.loads(result.stdout.strip().splitlines()[-1])["check"] == "passed", describe(result)


def test_installed_hp_version(installed):
    venv, _, outside = installed
    result = run([venv / "bin" / "hp", "version"], cwd=outside, env=venv_env())
    assert result.returncode == 0, describe(result)
    assert result.stdout.strip() == f"hyper_parallel {VERSION}"


def test_uninstall_removes_every_recorded_file(installed):
    """Runs last in this module: it removes the installation the other tests use."""
    venv, site, outside = installed
    dist_info = site / f"hyper_parallel-{VERSION}.dist-info"
    record = (dist_info / "RECORD").read_text().splitlines()
    files = [(site / line.rsplit(",", 2)[0]).resolve() for line in record if line.strip()]
    assert any(f.name == "__init__.py" for f in files)
    assert all(f.exists() for f in files), [str(f) for f in files if not f.exists()]

    result = run([venv / "bin" / "python", "-m", "pip", "uninstall", "-y", "hyper_parallel"],
                 cwd=outside, env=venv_env(), timeout=300)
    assert result.returncode == 0, describe(result)
    left = [str(f) for f in files if f.exists()]
    assert left == [], f"files of the RECORD left after uninstall: {left}"
    assert not (site / "hyper_parallel").exists(), \
        f"left behind: {sorted(str(p) for p in (site / 'hyper_parallel').rglob('*'))}"
    assert not dist_info.exists()
    assert not (venv / "bin" / "hp").exists()

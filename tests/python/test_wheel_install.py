"""The wheel in build/dist installed into a fresh venv: imports and loads the native core from
the installed payload outside the checkout, `hp` works, and uninstalling removes every file."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, SYSTEM_PYTHON, VERSION, base_env, describe, run

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


LOCATOR = "hyper_parallel_multicore_set_env.bash"


def locator_activated(venv: Path, command: str, *args: str) -> str:
    """A bash command line: the installed locator sourced (found on PATH, as a user finds it),
    then `command`."""
    quoted = " ".join(f"'{a}'" for a in args)
    return f'export PATH="{venv / "bin"}:$PATH"; source "$(command -v {LOCATOR})" {quoted} && {command}'


def test_the_wheel_installs_the_locator_and_it_only_runs_sourced(installed):
    venv, site, outside = installed
    locator = venv / "bin" / LOCATOR
    assert locator.is_file(), sorted(p.name for p in (venv / "bin").iterdir())
    assert locator.read_text().splitlines()[0] == f"#!{venv / 'bin' / 'python'}"
    result = run(["bash", locator], cwd=outside, env=venv_env())
    assert result.returncode == 2, describe(result)
    assert f'source "$(command -v {LOCATOR})"' in result.stderr, describe(result)


def test_sourcing_the_locator_activates_the_installed_payload(installed, tmp_path):
    venv, site, outside = installed
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    env = {k: v for k, v in venv_env().items()
           if k not in ("HP_VENDOR_PATH", "HP_CHIP_CPUS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "HP_ACTIVATED")}
    show = "env | grep -E '^(HP_VENDOR_PATH|HP_CHIP_CPUS|OMP_NUM_THREADS|OPENBLAS_NUM_THREADS|HP_ACTIVATED)=' | sort"
    result = run(["taskset", "-c", "0,1", "bash", "-c", locator_activated(venv, show, "--verbose", str(vendor))],
                 cwd=outside, env=env)
    assert result.returncode == 0, describe(result)
    got = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and " " not in line.split("=")[0])
    assert got["HP_VENDOR_PATH"] == f"{site / 'hyper_parallel' / 'custom_ops'}:{vendor}", got
    assert (got["HP_CHIP_CPUS"], got["OMP_NUM_THREADS"], got["OPENBLAS_NUM_THREADS"]) == ("1", "1", "1"), got
    assert got["HP_ACTIVATED"].startswith(f"{VERSION}:"), got
    assert f"activated from {site / 'hyper_parallel'}" in result.stdout, describe(result)
    # Idempotent: sourced again, nothing changes.
    twice = run(["taskset", "-c", "0,1", "bash", "-c",
                 locator_activated(venv, f'source "$(command -v {LOCATOR})" "{vendor}" && {show}', str(vendor))],
                cwd=outside, env=env)
    assert twice.returncode == 0, describe(twice)
    assert sorted(l for l in twice.stdout.splitlines() if "=" in l) == \
        sorted(f"{k}={v}" for k, v in got.items()), describe(twice)
    bad = run(["bash", "-c", locator_activated(venv, "true", "--chip-cpus", "x")], cwd=outside, env=env)
    assert bad.returncode == 2 and "not a CPU list" in bad.stderr, describe(bad)


def test_activated_installed_wheel_runs_the_layer_and_a_torch_op(installed):
    """Tested == shipped, end to end: only the installed package, activated as a user does."""
    pytest.importorskip("torch")
    venv, _, outside = installed
    env = venv_env()
    for name in [n for n in env if n.startswith(("HP_SHMEM_", "HP_JOB_", "HP_RANK", "OMPI_", "PMIX_"))]:
        env.pop(name)
    moe = ("hp moe --ranks 2 --tokens 16 --hidden 64 --intermediate 32 --experts 4 --topk 2 "
           "--iterations 1 --json | tail -n1")
    result = run(["bash", "-c", locator_activated(venv, moe)], cwd=outside, env=env, timeout=180)
    assert result.returncode == 0, describe(result)
    assert json.loads(result.stdout.strip().splitlines()[-1])["check"] == "passed", describe(result)
    script = outside / "torch_op.py"
    script.write_text(textwrap.dedent(f"""
        import torch, hyper_parallel
        from hyper_parallel import native
        assert hyper_parallel.__file__.startswith("{venv}"), hyper_parallel.__file__
        native.torch_ops("multicore")
        idx = torch.tensor([[0, 3], [1, 2], [2, 3]])
        per_rank, per_expert, _ = torch.ops.hyper_parallel.dispatch_layout(idx, 4, 2)
        print(per_rank.tolist(), per_expert.tolist())
    """))
    result = run(["bash", "-c", locator_activated(venv, f"python '{script}'")], cwd=outside, env=env, timeout=120)
    assert result.returncode == 0, describe(result)
    assert result.stdout.strip() == "[2, 3] [1, 1, 2, 2]", describe(result)


def test_a_checkout_on_pythonpath_that_hides_the_installed_wheel_says_so(installed, tmp_path):
    venv, site, outside = installed
    env = {**venv_env(), "PYTHONPATH": str(REPO / "python"), "HP_BUILD_DIR": str(tmp_path / "no-build")}
    code = ("import json, hyper_parallel.native as n\n"
            "try:\n    n.core(); print(json.dumps({'ok': True}))\n"
            "except n.NativeLoadError as e:\n    print(json.dumps({'reason': e.reason, 'detail': e.detail}))")
    result = run([venv / "bin" / "python", "-c", code], cwd=outside, env=env)
    assert result.returncode == 0, describe(result)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out.get("reason") == "HP-NATIVE-PAYLOAD-MISSING", out
    assert f"hides the installed hyper_parallel at {site / 'hyper_parallel'}" in out["detail"], out
    assert "unset PYTHONPATH" in out["detail"], out
    doctor = run([venv / "bin" / "python", "-m", "hyper_parallel", "doctor"], cwd=outside, env=env)
    assert f"hides the installed hyper_parallel at {site / 'hyper_parallel'}" in doctor.stdout, describe(doctor)


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
    assert not (venv / "bin" / LOCATOR).exists(), "pip uninstall left the locator"

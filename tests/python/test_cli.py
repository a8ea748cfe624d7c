"""`./hp` from the source checkout: version, doctor, config, bad usage, overrides."""
from __future__ import annotations

import json

from conftest import PAYLOAD_DIR, REPO, VERSION, base_env, describe, run

HP = REPO / "hp"


def hp(*args, **env):
    return run([HP, *args], env=base_env(HP_PAYLOAD_DIR=None, **env), timeout=120)


def test_hp_version_prints_the_version_file():
    result = hp("version")
    assert result.returncode == 0, describe(result)
    assert result.stdout == f"hyper_parallel {VERSION}\n"


def test_hp_doctor_reports_the_development_payload_and_a_working_platform(main_payload):
    result = hp("doctor")
    assert result.returncode == 0, describe(result)
    out = result.stdout
    assert f"payload        {PAYLOAD_DIR} (development)" in out, out
    assert f"native core    {VERSION} loaded" in out, out
    assert "platform       ok" in out, out
    info = json.loads((main_payload / "manifest.json").read_text())
    for part in info["parts"]:
        assert part["part"] in out, f"{part['part']} is not in the components table"
    assert "Traceback" not in result.stderr


def test_hp_config_lists_every_setting_with_its_default():
    result = hp("config")
    assert result.returncode == 0, describe(result)
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["variable", "value", "default", "type", "scope"]
    for name, default in [("HP_WAIT_TIMEOUT_S", "60"), ("HP_LOG_LEVEL", "warn"),
                          ("HP_PIN_THREADS", "auto")]:
        rows = [l.split() for l in lines if l.startswith(name + " ")]
        assert rows and rows[0][1:3] == ["(unset)", default], (name, rows)


def test_hp_config_shows_a_set_value():
    result = hp("config", HP_WAIT_TIMEOUT_S="7.5")
    assert result.returncode == 0, describe(result)
    rows = [l.split() for l in result.stdout.splitlines() if l.startswith("HP_WAIT_TIMEOUT_S ")]
    assert rows[0][1] == "7.5", rows


def test_hp_config_piped_into_head_ends_quietly():
    result = run(f"'{HP}' config | head -1; echo \"hp-exit=${{PIPESTATUS[0]}}\"",
                 env=base_env(HP_PAYLOAD_DIR=None))
    assert result.returncode == 0, describe(result)
    first, status = result.stdout.splitlines()
    assert first.startswith("variable"), first
    # 0, or killed by SIGPIPE (141) when head closed the pipe first: both are clean endings.
    assert status in ("hp-exit=0", "hp-exit=141"), describe(result)
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, \
        describe(result)


def test_hp_unknown_command_exits_2():
    result = hp("bogus")
    assert result.returncode == 2, describe(result)
    assert "invalid choice: 'bogus'" in result.stderr
    assert "Traceback" not in result.stderr


def test_hp_without_a_command_exits_2():
    result = hp()
    assert result.returncode == 2, describe(result)
    assert "Traceback" not in result.stderr


def test_hp_doctor_honours_hp_payload_dir(tmp_path):
    """HP_PAYLOAD_DIR is the documented first place the loader looks; `./hp doctor` with it
    pointing at an empty dir must report that dir and HP-NATIVE-PAYLOAD-MISSING, not the
    development payload."""
    empty = tmp_path / "empty-payload"
    empty.mkdir()
    result = run([HP, "doctor"], env=base_env(HP_PAYLOAD_DIR=str(empty)))
    assert f"payload        {empty} (override)" in result.stdout, describe(result)
    assert result.returncode == 2, describe(result)
    assert "HP-NATIVE-PAYLOAD-MISSING" in result.stdout, describe(result)


def test_python_m_hyper_parallel_honours_hp_payload_dir(tmp_path):
    """The control of the test above, without the ./hp wrapper."""
    empty = tmp_path / "empty-payload"
    empty.mkdir()
    result = run(["/usr/bin/python3", "-m", "hyper_parallel", "doctor"],
                 env=base_env(HP_PAYLOAD_DIR=str(empty), PYTHONPATH=str(REPO / "python")))
    assert result.returncode == 2, describe(result)
    assert f"payload        {empty} (override)" in result.stdout
    assert "HP-NATIVE-PAYLOAD-MISSING" in result.stdout

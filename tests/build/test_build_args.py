"""./build.sh argument handling: --help, and every invalid value rejected with exit 2 before
anything is prepared or built (a fresh HP_BUILD_DIR gets no `native` dir)."""
from __future__ import annotations

import re

import pytest

from conftest import REPO, base_env, describe, run
import soc_targets  # scripts/soc_targets.py


OPTION_DEFAULTS = {
    "--multicore": "all",
    "--shmem": "all",
    "--custom-ops": "on",
    "--soc-list": ",".join(soc_targets.names("default")),
    "--strict": "off",
    "--jobs": "nproc",
    "--clean": "(off)",
}
ALL_SOCS = ", ".join(soc_targets.names("all"))


def build_sh(build_dir, *args):
    return run([REPO / "build.sh", *args],
               env=base_env(HP_BUILD_DIR=str(build_dir), HP_PAYLOAD_DIR=None), timeout=60)


def assert_built_nothing(build_dir, result):
    assert not (build_dir / "native").exists(), \
        f"build.sh created {build_dir / 'native'}\n" + describe(result)
    assert not (build_dir / "dist").exists(), describe(result)
    assert "host packages:" not in result.stdout + result.stderr, \
        "build.sh ran prepare_host.sh\n" + describe(result)
    assert "[hp] selection:" not in result.stdout, describe(result)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_exits_0_and_lists_every_option_with_its_default(tmp_path, flag):
    build_dir = tmp_path / "b"
    result = build_sh(build_dir, flag)
    assert result.returncode == 0, describe(result)
    out = result.stdout
    for option, default in OPTION_DEFAULTS.items():
        rows = [l for l in out.splitlines() if l.startswith(option + " ")]
        assert rows, f"{option} is not in the options table:\n{out}"
        assert rows[0].split()[1] == default, f"{option}: expected default {default!r}: {rows[0]!r}"
    assert re.search(r"^-h, --help\b", out, re.M), out
    assert_built_nothing(build_dir, result)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_shows_example_invocations_covering_every_option(tmp_path, flag):
    result = build_sh(tmp_path / "b", flag)
    assert result.returncode == 0, describe(result)
    _, _, after = result.stdout.partition("\nexamples:\n")
    examples = [l.strip() for l in after.splitlines() if l.strip().startswith("./build.sh")]
    assert len(examples) >= 5, f"expected example invocations:\n{result.stdout}"
    assert "./build.sh" in examples, "the plain default invocation is not an example"
    used = " ".join(examples)
    for option in OPTION_DEFAULTS:
        assert option in used, f"no example uses {option}: {examples}"


def test_help_is_printed_even_after_other_options(tmp_path):
    result = build_sh(tmp_path / "b", "--multicore", "torch", "--help")
    assert result.returncode == 0, describe(result)
    assert "usage: ./build.sh" in result.stdout
    assert_built_nothing(tmp_path / "b", result)


ALLOWED_FRAMEWORKS = "off, mindspore|ms, torch|pytorch, all|both"


@pytest.mark.parametrize("args, bad, allowed", [
    (["--multicore", "tf"], "tf", ALLOWED_FRAMEWORKS),
    (["--shmem", "yes"], "yes", ALLOWED_FRAMEWORKS),
    (["--custom-ops", "torch"], "torch", "on, off"),
    (["--strict", "maybe"], "maybe", "on, off"),
    (["--jobs", "0"], "0", "a positive integer"),
    (["--jobs", "x"], "x", "a positive integer"),
    (["--jobs", "-3"], "-3", "a positive integer"),
    (["--soc-list", "ascend910b"], "ascend910b", ALL_SOCS),
    (["--soc-list", "x86_64_v3,ascend910b"], "ascend910b", ALL_SOCS),
    (["--soc-list", ""], "", ALL_SOCS),
    (["--soc-list=x86_64_v3,,x86_64_v4"], "", ALL_SOCS),
], ids=lambda v: repr(v) if isinstance(v, list) else None)
def test_invalid_value_exits_2_naming_the_value_and_the_allowed_ones(tmp_path, args, bad, allowed):
    build_dir = tmp_path / "b"
    result = build_sh(build_dir, *args)
    assert result.returncode == 2, describe(result)
    assert "HP-BUILD-USAGE" in result.stderr, describe(result)
    option = args[0].split("=")[0]
    assert f"invalid value '{bad}' for {option}" in result.stderr, describe(result)
    assert allowed in result.stderr, describe(result)
    assert_built_nothing(build_dir, result)


def test_custom_ops_rejects_every_framework_name(tmp_path):
    for name in ["mindspore", "ms", "pytorch", "all", "both"]:
        result = build_sh(tmp_path / "b", "--custom-ops", name)
        assert result.returncode == 2, describe(result)
        assert f"invalid value '{name}' for --custom-ops; allowed: on, off" in result.stderr
    assert not (tmp_path / "b" / "native").exists()


@pytest.mark.parametrize("option, value", [
    ("--strict", "maybe"), ("--multicore", "tf"), ("--jobs", "0"), ("--soc-list", "ascend910b"),
])
def test_equals_and_space_forms_are_rejected_the_same_way(tmp_path, option, value):
    spaced = build_sh(tmp_path / "b1", option, value)
    joined = build_sh(tmp_path / "b2", f"{option}={value}")
    assert spaced.returncode == joined.returncode == 2, describe(spaced) + describe(joined)
    assert spaced.stderr == joined.stderr
    assert spaced.stdout == joined.stdout == ""
    assert_built_nothing(tmp_path / "b1", spaced)
    assert_built_nothing(tmp_path / "b2", joined)


def test_unknown_option_exits_2(tmp_path):
    result = build_sh(tmp_path / "b", "--frobnicate")
    assert result.returncode == 2, describe(result)
    assert "unknown option '--frobnicate'" in result.stderr
    assert "HP-BUILD-USAGE" in result.stderr
    assert_built_nothing(tmp_path / "b", result)


def test_positional_argument_exits_2(tmp_path):
    result = build_sh(tmp_path / "b", "torch")
    assert result.returncode == 2, describe(result)
    assert_built_nothing(tmp_path / "b", result)


def test_clean_takes_no_value(tmp_path):
    result = build_sh(tmp_path / "b", "--clean=yes")
    assert result.returncode == 2, describe(result)
    assert "HP-BUILD-USAGE" in result.stderr
    assert_built_nothing(tmp_path / "b", result)


@pytest.mark.parametrize("args", [
    ["--jobs"],
    ["--multicore"],
    ["--soc-list"],
    ["--strict"],
    ["--multicore", "--shmem", "off"],
    ["--custom-ops", "--clean"],
], ids=" ".join)
def test_option_missing_its_value_exits_2(tmp_path, args):
    result = build_sh(tmp_path / "b", *args)
    assert result.returncode == 2, describe(result)
    assert "HP-BUILD-USAGE" in result.stderr, describe(result)
    assert args[0] in result.stderr, describe(result)
    assert_built_nothing(tmp_path / "b", result)


def test_a_bad_value_after_valid_ones_still_builds_nothing(tmp_path):
    result = build_sh(tmp_path / "b", "--multicore", "torch", "--shmem", "off",
                      "--custom-ops", "off", "--jobs", "0")
    assert result.returncode == 2, describe(result)
    assert_built_nothing(tmp_path / "b", result)

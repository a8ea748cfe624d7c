"""The op packages on the search path, through the payload's hp-ops (hp::ops, one process per
search path: it is read once): the payload's own package, packages on HP_VENDOR_PATH, and
broken ones (no ops.json, one that does not parse, a library that is not the one it describes,
an op its library does not export) as named errors. And `hp doctor`'s op package section."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import PAYLOAD_DIR, REPO, SYSTEM_PYTHON, activated, base_env, describe, run

HP_OPS = PAYLOAD_DIR / "custom_ops" / "bin" / "hp-ops"
PACKAGE = PAYLOAD_DIR / "custom_ops"


def hp_ops(*args: str, vendor: str | None = None, activate: bool = True):
    """hp-ops with HP_VENDOR_PATH = vendor, in an activated shell unless activate is False."""
    env = base_env(HP_VENDOR_PATH=vendor, HP_ACTIVATED=None)
    return run(activated([HP_OPS, *args]) if activate else [HP_OPS, *args], env=env)


def test_the_payloads_package_is_listed_first_with_its_ops():
    result = hp_ops("list", "--json")
    assert result.returncode == 0, describe(result)
    packages = json.loads(result.stdout)
    assert packages[0]["origin"] == "payload" and Path(packages[0]["dir"]) == PACKAGE.resolve()
    assert packages[0]["status"] == "ok"
    ops = json.loads((PACKAGE / "ops.json").read_text())
    assert packages[0]["ops"] == [o["name"] for o in ops["ops"]]
    assert "fused_deep_moe" in packages[0]["ops"] and "fused_deep_moe_w4a8" not in packages[0]["ops"]
    assert packages[0]["targets"] == ops["targets"] and ops["targets"]
    for soc, k in ops["kernels"].items():
        assert (PACKAGE / k["path"]).is_file(), (soc, k)


def test_find_resolves_an_op_and_names_every_package_when_none_has_it(tmp_path):
    found = hp_ops("find", "fused_deep_moe")
    assert found.returncode == 0, describe(found)
    assert "variant base" in found.stdout and str(PACKAGE.resolve()) in found.stdout
    missing = hp_ops("find", "fused_deep_moe_w4a8")
    assert missing.returncode == 1, describe(missing)
    assert "NOT_FOUND (15)" in missing.stderr and "fused_deep_moe_w4a8" in missing.stderr
    assert str(PACKAGE.resolve()) in missing.stderr and "HP_VENDOR_PATH" in missing.stderr


def vendor_copy(tmp_path: Path, edit=None) -> Path:
    """A copy of the payload's package whose ops.json (edited) claims the w4a8 variant too."""
    dest = tmp_path / "vendor"
    shutil.copytree(PACKAGE, dest)
    info = json.loads((dest / "ops.json").read_text())
    base = next(o for o in info["ops"] if o["name"] == "fused_deep_moe")
    info["ops"].append(dict(base, name="fused_deep_moe_w4a8", variant="w4a8",
                            get_workspace_size="hpHyperMegaMoeW4A8GetWorkspaceSize", execute="hpHyperMegaMoeW4A8"))
    if edit:
        edit(info)
    (dest / "ops.json").write_text(json.dumps(info))
    return dest


def test_a_vendor_package_is_searched_after_the_payloads(tmp_path):
    vendor = vendor_copy(tmp_path)
    listed = json.loads(hp_ops("list", "--json", vendor=f"{vendor}:").stdout)
    assert [p["origin"] for p in listed] == ["payload", "HP_VENDOR_PATH"]
    # an op both have comes from the payload's
    found = hp_ops("find", "dispatch_layout", vendor=str(vendor))
    assert found.returncode == 0 and str(PACKAGE.resolve()) in found.stdout, describe(found)
    # the vendor's claim of an op its library does not export is a named error
    lying = hp_ops("find", "fused_deep_moe_w4a8", vendor=str(vendor))
    assert lying.returncode == 1, describe(lying)
    assert "NOT_FOUND (15)" in lying.stderr and "hpHyperMegaMoeW4A8GetWorkspaceSize is not exported" in lying.stderr


def test_a_vendor_op_needs_an_activated_process_and_says_how(tmp_path):
    vendor = vendor_copy(tmp_path)
    # The payload's own ops need no activation, nor does listing the vendors.
    assert hp_ops("find", "dispatch_layout", vendor=str(vendor), activate=False).returncode == 0
    listed = hp_ops("list", "--json", vendor=str(vendor), activate=False)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 2, describe(listed)
    # An op only the vendor has is refused, with the exact command.
    result = hp_ops("find", "fused_deep_moe_w4a8", vendor=str(vendor), activate=False)
    assert result.returncode == 1, describe(result)
    assert "HP-NATIVE-NOT-ACTIVATED" in result.stderr and str(vendor) in result.stderr, describe(result)
    command = f"source {PAYLOAD_DIR / 'multicore' / 'lib' / 'set_env.bash'} {vendor}"
    assert command in result.stderr, describe(result)
    # Activated with that command, the lookup reaches the vendor (whose library lacks the op).
    env = base_env(HP_VENDOR_PATH=None, HP_ACTIVATED=None)
    again = run(["bash", "-c", f'{command} && exec "$0" find fused_deep_moe_w4a8', HP_OPS], env=env)
    assert "HP-NATIVE-NOT-ACTIVATED" not in again.stderr, describe(again)
    assert "hpHyperMegaMoeW4A8GetWorkspaceSize is not exported" in again.stderr, describe(again)


@pytest.mark.parametrize("kind", ["no_ops_json", "bad_json", "wrong_format", "other_library"])
def test_a_broken_vendor_package_is_an_error_of_the_lookups_that_reach_it(tmp_path, kind):
    vendor = vendor_copy(tmp_path)
    if kind == "no_ops_json":
        (vendor / "ops.json").unlink()
        code = "NOT_FOUND (15)"
    elif kind == "bad_json":
        (vendor / "ops.json").write_text('{"format": 1, "ops": [')
        code = "CORRUPT_DATA (10)"
    elif kind == "wrong_format":
        (vendor / "ops.json").write_text(json.dumps({"format": 2}))
        code = "CORRUPT_DATA (10)"
    else:  # another file where the library should be
        shutil.copy(PAYLOAD_DIR / "custom_ops" / "lib" / "libhyper_parallel_ops.so",
                    vendor / "lib" / "libhyper_parallel_op_api.so")
        code = "CORRUPT_DATA (10)"
    # the payload's ops are found before the broken package is reached
    assert hp_ops("find", "dispatch_layout", vendor=str(vendor)).returncode == 0
    result = hp_ops("find", "fused_deep_moe_w4a8", vendor=str(vendor))
    assert result.returncode == 1, describe(result)
    assert code in result.stderr and str(vendor) in result.stderr, describe(result)
    listed = json.loads(hp_ops("list", "--json", vendor=str(vendor)).stdout)
    if kind == "other_library":  # readable: only loading it finds the mismatch
        assert listed[1]["status"] == "ok"
    else:
        assert listed[1]["status"].startswith(code.split(" (")[0]), listed[1]


def test_an_invalid_vendor_path_entry_is_reported_not_skipped(tmp_path):
    result = hp_ops("find", "fused_deep_moe_w4a8", vendor=str(tmp_path / "nowhere"))
    assert result.returncode == 1
    assert "is not an op package" in result.stderr and str(tmp_path / "nowhere") in result.stderr, describe(result)


def test_doctor_lists_the_op_packages(tmp_path):
    vendor = vendor_copy(tmp_path)
    env = base_env(PYTHONPATH=str(REPO / "python"), HP_VENDOR_PATH=str(vendor), HP_PAYLOAD_DIR=None)
    result = run([SYSTEM_PYTHON, "-m", "hyper_parallel", "doctor"], env=env)
    assert "op packages" in result.stdout, describe(result)
    assert str(PACKAGE.resolve()) in result.stdout and str(vendor) in result.stdout, describe(result)
    assert "fused_deep_moe_grad" in result.stdout and "(payload)" in result.stdout, describe(result)

"""The SoC target table (native/common/soc_targets.tsv) has one source and several readers: the
C++ view (_hp_core.soc_targets(), the HP_KERNEL_TARGET choices), the bash reader of the build
scripts (./build.sh --help, --soc-list checks), the Python reader of the build scripts
(scripts/soc_targets.py: the vendor merge, the op selection) and the payload the build made.
Each test fails when two of them would disagree."""
from __future__ import annotations


import pytest

from conftest import PAYLOAD_DIR, REPO, base_env, describe, run
import soc_targets  # scripts/soc_targets.py
from hyper_parallel import native



def bash_names(which: str) -> list[str]:
    result = run(f"source {REPO}/scripts/lib/common.sh && hp_soc_names {which}",
                 env=base_env(HP_BUILD_DIR=str(REPO / "build")))
    assert result.returncode == 0, describe(result)
    return result.stdout.strip().split(",")


def test_the_native_table_is_the_cpu_rows_of_the_source():
    cpu_rows = [(r["name"], r["requires"]) for r in soc_targets.rows() if r["kind"] == "cpu"]
    assert [(name, list(features)) for name, features in native.core().soc_targets()] == cpu_rows


@pytest.mark.parametrize("which", ["all", "cpu", "default"])
def test_bash_and_python_readers_agree(which):
    assert bash_names(which) == soc_targets.names(which)


def test_every_required_feature_is_one_the_native_core_detects():
    known = set(native.core().cpu_features())
    for row in soc_targets.rows():
        assert set(row["requires"]) <= known, row


def test_kernel_target_setting_offers_exactly_the_cpu_targets():
    spec = next(s for s in native.core().setting_specs() if s["name"] == "HP_KERNEL_TARGET")
    assert spec["choices"].split("|") == ["auto", "reference", *soc_targets.names("cpu")]


def test_build_help_lists_every_target_and_the_default_list(tmp_path):
    result = run([REPO / "build.sh", "--help"], env=base_env(HP_BUILD_DIR=str(tmp_path / "b")))
    assert result.returncode == 0, describe(result)
    row = next(l for l in result.stdout.splitlines() if l.startswith("--soc-list "))
    assert row.split()[1] == ",".join(soc_targets.names("default"))
    text = " ".join(result.stdout.split())
    for r in soc_targets.rows():
        assert f"{r['name']} ({r['summary']})" in text, r


def test_the_payloads_kernel_libraries_are_table_targets():
    kernels = PAYLOAD_DIR / "multicore" / "lib" / "kernels"
    if not kernels.is_dir():
        pytest.skip("the payload has no multicore component")
    built = sorted(p.name.removeprefix("libhyper_parallel_kernels_").removesuffix(".so")
                   for p in kernels.glob("libhyper_parallel_kernels_*.so"))
    assert built and set(built) <= set(soc_targets.names("cpu")), built
    assert set(native.manifest()["soc_list"]) <= set(soc_targets.names("all"))


def test_a_malformed_row_is_refused_by_the_python_reader(tmp_path, monkeypatch):
    table = tmp_path / "soc_targets.tsv"
    table.write_text(soc_targets.TABLE.read_text() + "x86_64_v5\tcpu\tyes\tavx2\n")
    monkeypatch.setattr(soc_targets, "TABLE", table)
    with pytest.raises(ValueError, match="4 tab-separated fields, expected 6"):
        soc_targets.rows()

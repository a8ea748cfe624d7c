"""The unified kernel vendor (scripts/vendor_merge.py): the payload's vendor.json and its one
host library; merges of the built kernel libraries with one that is not of this vendor (built
with another table version, without hp_kernel_table, of another build, renamed, without a
note); several hosts, the widest target's kept; a host exporting other symbols refused."""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest

from hyper_parallel import native

from conftest import BUILD_DIR, PAYLOAD_DIR, REPO, SYSTEM_PYTHON, describe, ops_builder, run
import vendor_merge  # scripts/vendor_merge.py

MERGE = REPO / "scripts" / "vendor_merge.py"
KERNELS = PAYLOAD_DIR / "multicore" / "lib" / "kernels"
HOST = PAYLOAD_DIR / "custom_ops" / "lib" / "libhyper_parallel_op_api.so"
TEST_LIBS = BUILD_DIR / "native" / "tests" / "multicore" / "lib"
ORDER = [name for name, _ in native.core().soc_targets()]  # the SoC target table, narrowest first


@pytest.fixture
def scratch_ops(tmp_path, compile_guard_dir):
    """scripts/build_custom_ops.sh in a build dir of its own (a test may change its inputs)."""
    return ops_builder(tmp_path / "b", compile_guard_dir)


def lib(soc: str) -> str:
    return f"libhyper_parallel_kernels_{soc}.so"


def built_targets() -> list[str]:
    socs = [s for s in ORDER if (KERNELS / lib(s)).is_file()]
    if len(socs) < 2:
        pytest.fail(f"the payload has fewer than two kernel targets in {KERNELS}: run ./build.sh first")
    return socs


def table_version() -> int:
    """The kernel table version the payload's targets were built with (its vendor.json)."""
    return json.loads((PAYLOAD_DIR / "custom_ops" / "vendor.json").read_text())["kernel_table"]["table_version"]


def merge(kernels: Path, targets: list[str], *args: str):
    return run([SYSTEM_PYTHON, MERGE, "merge", "--kernels", kernels, "--targets", ",".join(targets), *args])


def mismatch(result) -> str:
    assert result.returncode == 1, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    lines = result.stderr.splitlines()
    assert lines[0].startswith("[hp] ERROR HP-BUILD-VENDOR-ABI-MISMATCH: "), describe(result)
    return lines[0]


def vendor_with(tmp_path: Path, soc: str, replacement: Path) -> Path:
    """A copy of the payload's kernel libraries with `soc`'s library replaced."""
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS, kernels)
    shutil.copy(replacement, kernels / lib(soc))
    return kernels


def test_the_payload_vendor_is_one_merge_with_one_host_library():
    vendor = json.loads((PAYLOAD_DIR / "custom_ops" / "vendor.json").read_text())
    targets = built_targets()
    assert vendor["targets"] == targets
    assert vendor["canonical_target"] == targets[-1] == vendor["host"]["target"]
    assert vendor["host"]["dropped"] == {}
    for soc, entry in vendor["kernels"].items():
        assert hashlib.sha256((KERNELS / entry["library"]).read_bytes()).hexdigest() == entry["sha256"], soc
    assert hashlib.sha256(HOST.read_bytes()).hexdigest() == vendor["host"]["sha256"]
    hosts = sorted(p.relative_to(PAYLOAD_DIR) for p in PAYLOAD_DIR.rglob("libhyper_parallel_op_api.so"))
    assert hosts == [HOST.relative_to(PAYLOAD_DIR)]
    # The merge is deterministic: merging the payload again gives the same ABI digest.
    result = merge(KERNELS, targets, *[f"--host={s}={HOST}" for s in targets])
    assert result.returncode == 0, describe(result)
    assert vendor["abi_digest"][:19] in result.stdout, describe(result)


def with_table_version(library: Path, version: int, out: Path) -> Path:
    """A copy of `library` whose vendor note declares kernel table version `version`: what a
    library built from headers of another table version declares (the merge reads the note)."""
    data = bytearray(library.read_bytes())
    assert data.count(vendor_merge.NOTE_MAGIC) == 1, f"{library}: expected one vendor note"
    at = data.index(vendor_merge.NOTE_MAGIC)
    magic, _, *rest = struct.unpack_from(vendor_merge.NOTE_FORMAT, data, at)
    struct.pack_into(vendor_merge.NOTE_FORMAT, data, at, magic, version, *rest)
    out.write_bytes(bytes(data))
    return out


def test_a_target_built_with_another_table_version_fails_the_merge(tmp_path):
    targets = built_targets()
    v99 = with_table_version(KERNELS / lib("x86_64_v3"), 99, tmp_path / "v99.so")
    kernels = vendor_with(tmp_path, "x86_64_v3", v99)
    out = tmp_path / "vendor.json"
    line = mismatch(merge(kernels, targets, "--out", str(out)))
    assert f"targets {targets[-1]} and x86_64_v3 differ in table_version: {table_version()} vs 99" in line, line
    assert not out.exists()


def test_a_target_that_does_not_export_the_table_fails_the_merge(tmp_path):
    targets = built_targets()
    kernels = vendor_with(tmp_path, "x86_64_v3", TEST_LIBS / lib("x86_64_v3_no_table"))
    line = mismatch(merge(kernels, targets))
    assert (f"the kernel libraries of {targets[-1]} and x86_64_v3 differ: {targets[-1]} exports "
            "'FUNC hp_kernel_table', x86_64_v3 does not") in line, line


def test_a_target_of_another_build_fails_on_its_identity(tmp_path):
    targets = built_targets()
    data = bytearray((KERNELS / lib(targets[0])).read_bytes())
    identity = json.loads((PAYLOAD_DIR / "custom_ops" / "vendor.json").read_text())["identity"].encode()
    at = data.index(identity)
    data[at:at + 8] = b"00000000"  # what another checkout's headers or another compiler declare
    other = tmp_path / "other.so"
    other.write_bytes(bytes(data))
    line = mismatch(merge(vendor_with(tmp_path, targets[0], other), targets))
    assert f"targets {targets[-1]} and {targets[0]} differ in identity: {identity.decode()} vs 00000000" in line, line


def test_a_renamed_library_and_one_without_a_note_are_refused(tmp_path):
    targets = built_targets()
    kernels = vendor_with(tmp_path, targets[1], KERNELS / lib(targets[0]))
    line = mismatch(merge(kernels, targets))
    assert f"target {targets[1]}: " in line and f"declares that it is built for {targets[0]}" in line, line
    front_end = PAYLOAD_DIR / "multicore" / "lib" / "libhyper_parallel_kernels.so"
    line = mismatch(merge(vendor_with(tmp_path / "b", targets[0], front_end), targets))
    assert "declares no vendor note (section .hp_vendor)" in line, line


def test_the_widest_targets_host_is_kept_and_the_others_dropped(tmp_path):
    targets = built_targets()
    hosts = {}
    for soc in targets:  # one host per target, as separate per-target builds link them
        hosts[soc] = tmp_path / soc / HOST.name
        hosts[soc].parent.mkdir()
        shutil.copy(HOST, hosts[soc])
    out = tmp_path / "vendor.json"
    result = merge(KERNELS, targets, *[f"--host={s}={p}" for s, p in hosts.items()], "--drop-hosts",
                   "--out", str(out))
    assert result.returncode == 0, describe(result)
    vendor = json.loads(out.read_text())
    assert vendor["host"]["target"] == targets[-1]
    assert sorted(vendor["host"]["dropped"]) == sorted(targets[:-1])
    left = sorted(p.parent.name for p in tmp_path.rglob(HOST.name))
    assert left == [targets[-1]], left


@pytest.mark.slow
def test_a_host_exporting_other_ops_fails_the_merge(scratch_ops, tmp_path):
    """A host linked from another op selection (a real package of the build, one op) against
    the payload's host."""
    result = scratch_ops("--ops", "dispatch_layout")
    assert result.returncode == 0, describe(result)
    small = tmp_path / HOST.name
    shutil.copy(scratch_ops.package / "lib" / HOST.name, small)
    targets = built_targets()
    line = mismatch(merge(KERNELS, targets, f"--host={targets[0]}={small}", f"--host={targets[-1]}={HOST}"))
    assert f"the host op-API libraries of {targets[-1]} and {targets[0]} differ: {targets[-1]} exports 'FUNC hp" in line
    assert f"', {targets[0]} does not" in line, line


@pytest.mark.slow
def test_a_vendor_mismatch_fails_the_custom_ops_component(scratch_ops):
    """A kernel library of the multicore install the op package links replaced by one of
    another table version: the component fails with the named code and ships no vendor.json."""
    kernels = scratch_ops.build / "native" / "multicore" / "install" / "hyper_parallel" / "multicore" / "lib" / "kernels"
    target = kernels / lib("x86_64_v3")
    target.unlink()  # a hard link of the main build's install: never written through
    with_table_version(KERNELS / lib("x86_64_v3"), 99, target)
    result = scratch_ops()
    assert result.returncode != 0, describe(result)
    status = (scratch_ops.build / "native" / "custom_ops" / "status.tsv").read_text().splitlines()
    row = [l.split("\t") for l in status if l.startswith("custom_ops\t")][-1]
    assert row[1:3] == ["failed", "HP-BUILD-VENDOR-ABI-MISMATCH"], row
    assert f"differ in table_version: {table_version()} vs 99" in row[4], row
    assert row[5].startswith("rebuild every target"), row
    assert not (scratch_ops.package / "vendor.json").exists()

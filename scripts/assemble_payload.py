#!/usr/bin/env python3
"""Assemble build/native/payload/hyper_parallel from this run's successful components.

    assemble_payload.py assemble --native-dir D --strict on|off [--soc-list L] [--selection S]
                                 --python PY STATUS.tsv [STATUS.tsv ...]
    assemble_payload.py update-manifest --native-dir D --python PY STATUS.tsv

assemble: reads each component's status.tsv (see scripts/lib/component.sh), stages the slices
and test executables of the components whose native part built, writes manifest.json, checks
every ELF file (scripts/check_elf.py), then swaps the staged payload and tests in. With
--strict on, any failed part stops before the payload is touched (exit 1). With --strict off,
failed optional parts are left out and reported. The core component is never optional.
update-manifest: records one component's fresh status in the existing payload's manifest
(used when a component script refreshes its own slice).
Prints a summary table either way.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import abi_floor  # noqa: E402
import check_elf  # noqa: E402

FIELDS = ("part", "status", "reason", "log", "message", "recovery")
REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIRED = "core"
COMPONENT_ORDER = ["core", "symmetric_memory", "multicore", "custom_ops"]


def read_status(files: list[str]) -> list[dict]:
    """Every part of every status file. A component whose file is missing, or has no line for
    the component itself (its script died early), is a failed part HP-BUILD-NO-STATUS."""
    parts = []
    for f in files:
        path = Path(f)
        component = path.parent.name
        lines = path.read_text().splitlines() if path.is_file() else []
        own = [dict(zip(FIELDS, line.split("\t"))) for line in lines if line.strip()]
        if not any(p["part"] == component for p in own):
            own.insert(0, dict(part=component, status="failed", reason="HP-BUILD-NO-STATUS",
                               log=str(path.parent / "log" / "build.log"),
                               message=f"scripts/build_{component}.sh stopped before it recorded "
                                       f"a status in {path} (see the lines above and its log)",
                               recovery=f"scripts/build_{component}.sh"))
        parts.extend(own)
    return parts


def component_of(part: str) -> str:
    return part.split(".", 1)[0]


def print_summary(parts: list[dict]) -> None:
    width = max([len(p["part"]) for p in parts] + [9])
    print(f"[hp] {'component':<{width}}  {'status':<7}  {'reason':<31}  log")
    for p in parts:
        print(f"[hp] {p['part']:<{width}}  {p['status']:<7}  {p['reason']:<31}  {p['log']}")
        if p["status"] == "failed":
            print(f"[hp] {'':<{width}}    why: {p['message']}")
            if p["recovery"] != "-":
                print(f"[hp] {'':<{width}}    recover: {p['recovery']}")


def python_identity(python: str) -> dict:
    code = ("import json, platform, sys, sysconfig; print(json.dumps({'executable': sys.executable,"
            "'version': platform.python_version(), 'soabi': sysconfig.get_config_var('SOABI')}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


def shipped_text(text: str, build_dir: Path) -> str:
    """`text` with the paths it names made relative: to the build directory, else to the
    checkout (a shipped manifest carries no build machine path: build/native/core/log/... in
    the default layout, native/core/log/... for a build directory outside the checkout)."""
    if not build_dir.is_relative_to(REPO_ROOT):
        text = text.replace(f"{build_dir}/", "")
    return text.replace(f"{REPO_ROOT}/", "")


def write_manifest(payload: Path, parts: list[dict], python: str, soc_list: str,
                   selection: str, build_dir: Path) -> None:
    parts = [{k: shipped_text(v, build_dir) for k, v in p.items()} for p in parts]
    manifest = {
        "format": 1,
        "version": (REPO_ROOT / "VERSION").read_text().strip(),
        "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "selection": selection,
        "soc_list": [s for s in soc_list.split(",") if s],
        "sanitize": os.environ.get("HP_SANITIZE", ""),
        "python": python_identity(python),
        "components": sorted({component_of(p["part"]) for p in parts
                              if p["status"] == "ok" and (payload / component_of(p["part"])).is_dir()}),
        "abi": abi_floor.floor(payload),
        "parts": parts,
    }
    abi = manifest["abi"]
    why = f" (not manylinux: it needs {', '.join(abi['manylinux_blockers'])} from the system)" \
        if abi["manylinux_blockers"] else ""
    print(f"[hp] payload needs glibc >= {abi.get('glibc', '-')}, GLIBCXX {abi.get('glibcxx', '-')}, "
          f"CXXABI {abi.get('cxxabi', '-')}; wheel platform tag {abi['platform_tag']}{why}")
    tmp = payload / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(payload / "manifest.json")  # readers see the old or the new manifest, whole


def swap_in(staged: Path, final: Path) -> None:
    """Replace `final` by `staged` (two renames; the old tree is removed afterwards)."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staged.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def write_ctest_root(tests: Path) -> None:
    subdirs = sorted(d.name for d in tests.iterdir() if (d / "CTestTestfile.cmake").is_file())
    (tests / "CTestTestfile.cmake").write_text(
        "# Generated by scripts/assemble_payload.py: the tests of the payload's components.\n"
        + "".join(f'subdirs("{d}")\n' for d in subdirs))


def assemble(args: argparse.Namespace) -> int:
    native = Path(args.native_dir)
    parts = read_status(args.status)
    failed = [p for p in parts if p["status"] == "failed"]
    core_ok = any(p["part"] == REQUIRED and p["status"] == "ok" for p in parts)
    if not core_ok or (args.strict == "on" and failed):
        print_summary(parts)
        why = "the core component failed" if not core_ok else \
            f"--strict on and {len(failed)} selected part(s) failed"
        print(f"[hp] ERROR HP-BUILD-STRICT-FAILED: {why}; the payload was not changed and no wheel "
              "was built", file=sys.stderr)
        return 1

    staging = native / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    payload, tests = staging / "payload" / "hyper_parallel", staging / "tests"
    payload.mkdir(parents=True)
    tests.mkdir(parents=True)
    built = sorted({component_of(p["part"]) for p in parts
                    if p["status"] == "ok" and p["part"] == component_of(p["part"])})
    for component in built:
        install = native / component / "install"
        shutil.copytree(install / "hyper_parallel" / component, payload / component, symlinks=True)
        if (install / "tests" / component).is_dir():
            shutil.copytree(install / "tests" / component, tests / component, symlinks=True)

    problems = check_elf.check_trees([staging / "payload", tests])
    # Shipped files only (tests stay in the build tree): none names where it was built.
    problems += check_elf.embedded_build_paths([staging / "payload"], [str(REPO_ROOT), str(native.resolve())])
    for problem in problems:
        print(f"[hp] {problem}", file=sys.stderr)
    bad = {problem.path.relative_to(payload).parts[0] for problem in problems
           if problem.path.is_relative_to(payload)}
    bad |= {problem.path.relative_to(tests).parts[0] for problem in problems
            if problem.path.is_relative_to(tests)}
    if bad and (REQUIRED in bad or args.strict == "on"):
        print(f"[hp] ERROR HP-BUILD-ELF-CHECK-FAILED in {', '.join(sorted(bad))}; the payload was "
              "not changed and no wheel was built", file=sys.stderr)
        shutil.rmtree(staging, ignore_errors=True)
        return 1
    for component in bad:
        shutil.rmtree(payload / component, ignore_errors=True)
        shutil.rmtree(tests / component, ignore_errors=True)
        for p in parts:
            if component_of(p["part"]) == component and p["status"] == "ok":
                p.update(status="failed", reason="HP-BUILD-ELF-CHECK-FAILED",
                         message="a shipped file breaks the payload rules (see the lines above)",
                         recovery=f"scripts/build_{component}.sh --clean")

    write_manifest(payload, parts, args.python, args.soc_list, args.selection, native.resolve().parent)
    write_ctest_root(tests)
    (native / "payload").mkdir(parents=True, exist_ok=True)
    swap_in(payload, native / "payload" / "hyper_parallel")
    swap_in(tests, native / "tests")
    shutil.rmtree(staging, ignore_errors=True)
    print_summary(parts)
    return 0


def update_manifest(args: argparse.Namespace) -> int:
    native = Path(args.native_dir)
    payload = native / "payload" / "hyper_parallel"
    fresh = read_status(args.status)
    components = {component_of(p["part"]) for p in fresh}
    manifest_path = payload / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    parts = [p for p in old.get("parts", []) if component_of(p["part"]) not in components] + fresh
    parts.sort(key=lambda p: COMPONENT_ORDER.index(component_of(p["part"]))
               if component_of(p["part"]) in COMPONENT_ORDER else len(COMPONENT_ORDER))
    # Only a component with kernels passes --soc-list; the others keep the payload's list.
    soc_list = args.soc_list or ",".join(old.get("soc_list", []))
    write_manifest(payload, parts, args.python, soc_list, old.get("selection", "component scripts"),
                   native.resolve().parent)
    tests = native / "tests"
    if tests.is_dir():
        write_ctest_root(tests)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["assemble", "update-manifest"])
    parser.add_argument("--native-dir", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--strict", choices=["on", "off"], default="off")
    parser.add_argument("--soc-list", default="")
    parser.add_argument("--selection", default="")
    parser.add_argument("status", nargs="+")
    args = parser.parse_args()
    return assemble(args) if args.mode == "assemble" else update_manifest(args)


if __name__ == "__main__":
    sys.exit(main())

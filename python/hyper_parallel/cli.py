"""`hp`: the command line of HyperParallel.

    hp doctor    where everything is, what the payload holds (and the op packages it finds), whether
                 this host can run it, its CPU topology and where `hprun --bind` puts N ranks
                 (--ranks N, default 2)
    hp config    every HP_* environment variable: value, default, type, scope, meaning
    hp version
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap

from . import __version__, native
from .errors import HpError, NativeLoadError


def _print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def cmd_version(_args) -> int:
    print(f"hyper_parallel {__version__}")
    return 0


def cmd_config(_args) -> int:
    core = native.core()
    rows = []
    for spec in core.setting_specs():
        value = os.environ.get(spec["name"])
        rows.append((spec["name"], value if value is not None else "(unset)", spec["default"] or "-",
                     spec["type"], spec["scope"]))
    _print_table(rows, ("variable", "value", "default", "type", "scope"))
    print()
    for spec in core.setting_specs():
        choices = f" [{spec['choices']}]" if spec["choices"] else ""
        print(textwrap.fill(f"{spec['name']}{choices}: {spec['description']}", width=100,
                            subsequent_indent="    "))
    error = core.settings_error()
    if error:
        print(f"\nERROR: {error}")
        return 1
    return 0


def cmd_doctor(args) -> int:
    ok = True
    print(f"hyper_parallel {__version__} at {native.PACKAGE_DIR}")
    print(f"python         {sys.executable} ({sys.version.split()[0]})")
    payload, how = native.locate_payload()
    print(f"payload        {payload} ({how})")
    shadowed = native.shadowed_install()
    if shadowed:
        print(f"  note: this checkout's package hides the installed hyper_parallel at {shadowed} "
              "(PYTHONPATH): unset PYTHONPATH to use that one")
    try:
        info = native.manifest()
    except NativeLoadError as e:
        print(f"\n{e}")
        return 2
    print(f"built          {info.get('built')} for {info.get('python', {}).get('soabi')}, "
          f"selection: {info.get('selection')}")
    print(f"soc targets    {', '.join(info.get('soc_list', [])) or 'none'}")
    abi = info.get("abi", {})
    if abi:
        shortfall = native.glibc_shortfall(info)
        print(f"system floor   glibc >= {abi.get('glibc')}, GLIBCXX {abi.get('glibcxx')}, CXXABI "
              f"{abi.get('cxxabi')} (this system: glibc {os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}); "
              f"wheel tag {abi.get('platform_tag')}")
        if shortfall:
            print(f"  ERROR HP-NATIVE-SYSTEM-TOO-OLD: {shortfall}\n    recover: build on this system "
                  "(./build.sh), or run on a distribution with that glibc or newer")
            ok = False
    print("\ncomponents")
    rows = [(p["part"], p["status"], p["reason"]) for p in info.get("parts", [])]
    _print_table(rows, ("part", "status", "reason"))
    for p in info.get("parts", []):
        if p["status"] == "failed" and p.get("recovery", "-") != "-":
            print(f"  {p['part']}: {p['message']}\n    recover: {p['recovery']}")
    print()
    ok = _doctor_topology(args.ranks) and ok
    ok = _doctor_op_packages() and ok
    try:
        core = native.core()
        print(f"native core    {core.version()} loaded")
        features = core.cpu_features()
        print(f"cpu features   {','.join(k for k, v in features.items() if v) or 'none'}")
        runnable = native.runnable_socs(features)
        print(f"runnable socs  {', '.join(runnable) or 'none of the payload targets'}")
        error = core.settings_error()
        if error:
            print(f"settings       ERROR {error}")
            ok = False
        else:
            chip = core.platform_selftest(1, 2)
            print(f"platform       ok: {chip['num_cube']} cube + {chip['num_vector']} vector cores "
                  f"on CPUs {chip['cpus']}, {'pinned' if chip['pinned'] else 'not pinned'}"
                  f"{', oversubscribed' if chip['oversubscribed'] else ''}; "
                  f"mix launch {chip['launch_us']:.0f} us")
    except (NativeLoadError, HpError) as e:
        print(f"ERROR {e}")
        ok = False
    return 0 if ok else 1


def _rank_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of ranks in 1..4096")
    return int(text)


def _doctor_topology(ranks: int) -> bool:
    """Prints the CPU topology, the activation's partition and the placement of `ranks` ranks
    (`hprun --bind`), all from the payload's hp-topology; False on an error."""
    tool = native.component_dir("core") / "bin" / "hp-topology"
    result = subprocess.run([str(tool), "--ranks", str(ranks)], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"topology       ERROR {tool} failed: {result.stderr.strip()}\n")
        return False
    t = json.loads(result.stdout)
    print(f"topology       {t['source']}: {t['packages']} package(s), {t['numa_nodes']} NUMA node(s), "
          f"{t['cores']} cores, {t['cpus']} CPUs (this process's)")
    for node in t["nodes"]:
        cores = " ".join(",".join(map(str, c)) for c in node["cores"])
        print(textwrap.fill(f"node {node['os_index']}: cores {cores}", width=100, initial_indent="  ",
                            subsequent_indent="    "))
    part = t["partition"]
    print(f"partition      framework CPUs {part['framework']}, chip CPUs {part['chip']} (the activation's default)")
    print(f"hprun --bind   -n {ranks}:")
    for r in t["ranks"]:
        memory = f"memory on node(s) {','.join(map(str, r['mem_nodes']))}" if r["mem_nodes"] else \
            "memory unbound (one NUMA node)"
        print(f"  rank {r['rank']}: CPUs {r['cpus']}; {memory}")
    print()
    return True


def _doctor_op_packages() -> bool:
    """Prints the op packages on the search path (the payload's hp-ops); False on an error."""
    try:
        tool = native.component_dir("custom_ops") / "bin" / "hp-ops"
    except NativeLoadError as e:
        print(f"op packages    none: {e.detail}\n")
        return True
    result = subprocess.run([str(tool), "list", "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"op packages    ERROR {tool} failed: {result.stderr.strip()}\n")
        return False
    ok = True
    print("op packages    (search order: the payload's, then HP_VENDOR_PATH)")
    for p in json.loads(result.stdout):
        print(f"  {p['dir']} ({p['origin']}): {p['status']}")
        if p["status"] == "ok":
            print(textwrap.fill(f"targets {', '.join(p['targets']) or 'none'}; ops {', '.join(p['ops'])}",
                                width=100, initial_indent="    ", subsequent_indent="    "))
        else:
            ok = False
    print()
    return ok


def cmd_moe(args) -> int:
    """Runs the payload's hp-moe (the multicore slice), which starts the ranks itself."""
    binary = native.component_dir("multicore") / "bin" / "hp-moe"
    if not binary.is_file():
        raise NativeLoadError("HP-NATIVE-PAYLOAD-MISSING", f"{binary} does not exist",
                              "./build.sh --multicore torch")
    sys.stdout.flush()
    os.execv(binary, [str(binary), *args.rest])
    return 127  # not reached


def main(argv: list[str] | None = None) -> int:
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `hp config | head` ends quietly
    except ValueError:
        pass  # not the main thread (main() called from a program): leave signals alone
    parser = argparse.ArgumentParser(prog="hp", description="HyperParallel command line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    doctor = sub.add_parser("doctor", help="check the installation, the payload and this host")
    doctor.add_argument("--ranks", type=_rank_count, default=2, metavar="N",
                        help="show the placement of N ranks (hprun --bind -n N; default 2)")
    doctor.set_defaults(func=cmd_doctor)
    sub.add_parser("config", help="list every HP_* environment variable").set_defaults(func=cmd_config)
    sub.add_parser("version", help="print the version").set_defaults(func=cmd_version)
    sub.add_parser("moe", add_help=False,
                   help="run the MoE layer on N ranks, check it, time it (hp moe --help)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["moe"]:  # every further argument is hp-moe's own
        args = argparse.Namespace(func=cmd_moe, rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return args.func(args)
    except NativeLoadError as e:
        print(f"hp: {e}", file=sys.stderr)
        return 2
    except HpError as e:
        print(f"hp: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The unified kernel vendor: checks that the SoC targets' kernel libraries are one vendor and
picks the one host op-API library that ships with them (docs/build.md, "The vendor merge").

    vendor_merge.py merge --kernels DIR --targets a,b [--host SOC=LIB]... [--out vendor.json]
                          [--drop-hosts]

Every target library declares its build in its vendor note (the ELF section ".hp_vendor",
native/kernels/vendor_note.h): the kernel table's version, size and layout digest, the target it
was built for and the build-input identity. The merge compares what the libraries declare and
export, never the machine code of separately linked ELF files:
  - each library's note is present, its magic known and its target the one its file name says;
  - every target's identity, table version, table size and table layout equal the canonical
    target's, and so does the set of dynamic symbols each library exports (name, version, type);
  - the canonical host is the widest target's host (the targets' order of
    native/common/soc_targets.tsv, narrowest first: the one statement of that rule); every
    other host must export the same symbols and need the same libraries, and is dropped (with
    --drop-hosts its file is removed).
vendor.json records the targets, the canonical target and host, the identity, each library's
digest and the ABI digest (a SHA-256 over the table's declaration and every export).

The first difference is one line "[hp] ERROR HP-BUILD-VENDOR-ABI-MISMATCH: ..." naming the two
targets and the field or symbol, then "[hp]   recover: <command>", and exit 1 (2 for bad
usage). Nothing is written then.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import soc_targets

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTE_SECTION = b".hp_vendor"
NOTE_FORMAT = "<8sIIQ32s72s"  # vendor_note.h's VendorNote
NOTE_MAGIC = b"HPVNDR1\0"
MISMATCH = "HP-BUILD-VENDOR-ABI-MISMATCH"
RECOVERY = "rebuild every target from one checkout in one build dir: ./build.sh --clean --soc-list {socs}"


class MergeError(Exception):
    def __init__(self, message: str, recovery: str = ""):
        super().__init__(message)
        self.recovery = recovery


def soc_order() -> list[str]:
    """The SoC targets, narrowest first."""
    return soc_targets.names("cpu")


def read_section(path: Path, name: bytes) -> bytes | None:
    """The contents of ELF64 little-endian section `name` of `path`, None when it has none."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise MergeError(f"{path} is not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        name_off, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name_off, offset, size

    _, strtab_off, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.index(b"\0", strtab_off + name_off)
        if data[strtab_off + name_off:end] == name:
            return data[offset:offset + size]
    return None


def exported_symbols(path: Path) -> list[str]:
    """The dynamic symbols `path` defines, as "<type> <name>[@<version>]", sorted."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True, text=True,
                         check=True).stdout
    symbols = set()
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) >= 8 and f[0].endswith(":") and f[6] != "UND" and f[4] in ("GLOBAL", "WEAK"):
            symbols.add(f"{f[3]} {f[7]}")
    return sorted(symbols)


def needed_libraries(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    return sorted(line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Target:
    soc: str
    library: Path
    fields: dict  # the note's fields the merge compares, in the order it reports them
    symbols: list[str]


def read_target(soc: str, library: Path) -> Target:
    if not library.is_file():
        raise MergeError(f"target {soc}: its kernel library {library} does not exist")
    note = read_section(library, NOTE_SECTION)
    if note is None or len(note) < struct.calcsize(NOTE_FORMAT):
        raise MergeError(f"target {soc}: {library} declares no vendor note (section .hp_vendor): "
                         "it was not built by this project's kernels build")
    magic, version, size, layout, target, identity = struct.unpack_from(NOTE_FORMAT, note)
    if magic != NOTE_MAGIC:
        raise MergeError(f"target {soc}: {library}'s vendor note has magic {magic!r}, not {NOTE_MAGIC!r}")
    declared = target.split(b"\0", 1)[0].decode()
    if declared != soc:
        raise MergeError(f"target {soc}: {library} declares that it is built for {declared}")
    fields = {"identity": identity.split(b"\0", 1)[0].decode(), "table_version": version,
              "table_size": size, "table_layout": f"{layout:016x}"}
    return Target(soc, library, fields, exported_symbols(library))


def first_difference(a: list[str], b: list[str]) -> tuple[str, bool]:
    """The first symbol (in sort order) one list has and the other lacks, and whether a has it."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    first = min(only_a[:1] + only_b[:1])
    return first, first in only_a


def compare_exports(kind: str, a_name: str, a: list[str], b_name: str, b: list[str], recovery: str) -> None:
    if a == b:
        return
    symbol, in_a = first_difference(a, b)
    has, lacks = (a_name, b_name) if in_a else (b_name, a_name)
    raise MergeError(f"{kind} of {a_name} and {b_name} differ: {has} exports '{symbol}', {lacks} does not",
                     recovery)


def merge(kernels: Path, socs: list[str], hosts: dict[str, Path]) -> tuple[dict, list[Path]]:
    order = soc_order()
    unknown = [s for s in socs + list(hosts) if s not in order]
    if unknown:
        raise MergeError(f"{', '.join(unknown)} is not a SoC target of {soc_targets.TABLE.name} ({', '.join(order)})")
    if not socs:
        raise MergeError("no target to merge")
    missing_host_target = [s for s in hosts if s not in socs]
    if missing_host_target:
        raise MergeError(f"a host is given for {', '.join(missing_host_target)}, which is not a merged target")
    socs = sorted(set(socs), key=order.index)
    recovery = RECOVERY.format(socs=",".join(socs))
    targets = [read_target(s, kernels / f"libhyper_parallel_kernels_{s}.so") for s in socs]
    canonical = targets[-1]  # the widest target
    for t in targets[:-1]:
        for key, value in canonical.fields.items():
            if t.fields[key] != value:
                raise MergeError(f"targets {canonical.soc} and {t.soc} differ in {key}: {value} vs {t.fields[key]}",
                                 recovery)
        compare_exports("the kernel libraries", canonical.soc, canonical.symbols, t.soc, t.symbols, recovery)

    vendor = {"format": 1, "targets": socs, "canonical_target": canonical.soc,
              "identity": canonical.fields["identity"],
              "kernel_table": {k: canonical.fields[k] for k in ("table_version", "table_size", "table_layout")},
              "kernels": {t.soc: {"library": t.library.name, "sha256": sha256_file(t.library)} for t in targets}}
    abi = [f"{k}={v}" for k, v in vendor["kernel_table"].items()] + canonical.symbols
    dropped: list[Path] = []
    if hosts:
        host_soc = max(hosts, key=order.index)  # the widest target's host
        host = hosts[host_soc]
        for soc, path in hosts.items():
            if not path.is_file():
                raise MergeError(f"the host op-API library of {soc} ({path}) does not exist")
        host_symbols, host_needed = exported_symbols(host), needed_libraries(host)
        for soc, path in sorted(hosts.items(), key=lambda kv: order.index(kv[0])):
            if path.resolve() == host.resolve():
                continue
            compare_exports("the host op-API libraries", host_soc, host_symbols, soc, exported_symbols(path), recovery)
            if needed_libraries(path) != host_needed:
                raise MergeError(f"the host op-API libraries of {host_soc} and {soc} need different libraries: "
                                 f"{host_needed} vs {needed_libraries(path)}", recovery)
            dropped.append(path)
        vendor["host"] = {"target": host_soc, "library": host.name, "sha256": sha256_file(host),
                          "dropped": {soc: sha256_file(p) for soc, p in hosts.items() if p in dropped}}
        abi += [f"host {s}" for s in host_symbols]
    vendor["abi_digest"] = "sha256:" + hashlib.sha256("\n".join(abi).encode()).hexdigest()
    return vendor, dropped


def _host(value: str) -> tuple[str, Path]:
    soc, sep, path = value.partition("=")
    if not sep or not soc or not path:
        raise argparse.ArgumentTypeError(f"--host takes SOC=LIBRARY, not '{value}'")
    return soc, Path(path)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="vendor_merge.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="check the targets' libraries and pick the canonical host")
    m.add_argument("--kernels", required=True, help="the directory of libhyper_parallel_kernels_<soc>.so")
    m.add_argument("--targets", required=True, help="comma list of the SoC targets built")
    m.add_argument("--host", action="append", type=_host, default=[], metavar="SOC=LIBRARY",
                   help="a host op-API library and the target whose build linked it (repeatable)")
    m.add_argument("--out", help="write vendor.json here")
    m.add_argument("--drop-hosts", action="store_true", help="remove the files of the dropped hosts")
    args = p.parse_args(argv)
    hosts: dict[str, Path] = {}
    for soc, path in args.host:
        if soc in hosts:
            p.error(f"--host {soc} is given twice")
        hosts[soc] = path
    try:
        vendor, dropped = merge(Path(args.kernels), [s for s in args.targets.split(",") if s], hosts)
    except (MergeError, OSError, subprocess.CalledProcessError) as e:
        print(f"[hp] ERROR {MISMATCH}: {e}", file=sys.stderr)
        recovery = getattr(e, "recovery", "")
        if recovery:
            print(f"[hp]   recover: {recovery}", file=sys.stderr)
        return 1
    if args.drop_hosts:
        for path in dropped:
            path.unlink()
    if args.out:
        Path(args.out).write_text(json.dumps(vendor, indent=2) + "\n")
    host = vendor.get("host", {})
    print(f"vendor: targets {','.join(vendor['targets'])}, canonical {vendor['canonical_target']}"
          + (f", host of {host['target']} ({len(host['dropped'])} dropped)" if host else "")
          + f", abi {vendor['abi_digest'][:19]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""The oldest system a payload runs on, read from its binaries.

    abi_floor.py PAYLOAD      prints the JSON below

For every ELF file of the payload: the symbol versions it needs (`readelf -V`: GLIBC_x.y,
GLIBCXX_x.y.z, CXXABI_x.y) and the libraries it needs that are not in the payload. The result
(recorded as manifest.json's "abi" by assemble_payload.py, checked by `hp doctor`):

    {"glibc": "2.34", "glibcxx": "3.4.30", "cxxabi": "1.3.13",
     "needed_by": {"glibc": "<the first file needing that version>", ...},
     "system_libraries": ["libc.so.6", "libfmt.so.9", ...],
     "platform_tag": "linux_x86_64", "manylinux_blockers": ["libfmt.so.9", ...]}

The wheel's platform tag is manylinux_<x>_<y>_<arch> (PEP 600: the glibc floor) only when every
system library the payload needs is one that PEP 600 lets a manylinux wheel take from the
system (MANYLINUX_LIBRARIES); otherwise it is linux_<arch>, and manylinux_blockers names the
libraries in the way: a manylinux wheel must run on every distribution with that glibc, and
those libraries (Debian's) are not on every one.
"""
from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_elf import dynamic_entries, files_of, is_elf  # noqa: E402

# The libraries PEP 600 (through PEP 599's list) assumes every manylinux system provides.
MANYLINUX_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1",
    "libstdc++.so.6", "libnsl.so.1", "libutil.so.1", "libresolv.so.2", "libcrypt.so.1",
    "ld-linux-x86-64.so.2", "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6",
    "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
}
VERSION_RE = re.compile(r"Name: (GLIBC|GLIBCXX|CXXABI)_([0-9.]+)")


def needed_versions(path: Path) -> list[tuple[str, tuple[int, ...]]]:
    out = subprocess.run(["readelf", "-V", "-W", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [(m.group(1).lower(), tuple(int(x) for x in m.group(2).split("."))) for m in VERSION_RE.finditer(out)]


def floor(payload: Path) -> dict:
    payload = payload.resolve()
    highest: dict[str, tuple[int, ...]] = {}
    needed_by: dict[str, str] = {}
    names_inside: set[str] = set()
    needed: set[str] = set()
    for path in files_of(payload):
        names_inside.add(path.name)
        if not is_elf(path):
            continue
        for lib, version in needed_versions(path):
            if version > highest.get(lib, ()):
                highest[lib] = version
                needed_by[lib] = str(path.relative_to(payload))
        needed.update(dynamic_entries(path).get("NEEDED", []))
    system = sorted(needed - names_inside)
    blockers = [lib for lib in system if lib not in MANYLINUX_LIBRARIES]
    arch = platform.machine()
    glibc = highest.get("glibc")
    if glibc and not blockers:
        tag = f"manylinux_{glibc[0]}_{glibc[1]}_{arch}"
    else:
        tag = f"linux_{arch}"
    result = {lib: ".".join(map(str, v)) for lib, v in sorted(highest.items())}
    result.update(needed_by=needed_by, system_libraries=system, platform_tag=tag, manylinux_blockers=blockers)
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    print(json.dumps(floor(Path(argv[0])), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""ELF hygiene of a payload: every shared library has a private SONAME (libhyper_parallel_*),
every ELF file's RUNPATH is relative ($ORIGIN-based, no DT_RPATH), and every NEEDED resolves
either inside the checked tree (through that RUNPATH) or on the system, never elsewhere.
Our own libraries (libhyper_parallel_*) must resolve inside the tree. With --build-path P, no
file of the trees (ELF or not) may contain the absolute path P (the checkout or the build
directory): a shipped file must not depend on, or reveal, where it was built.

    check_elf.py [--build-path P]... ROOT [ROOT ...]   exit 0 clean, 1 with one line per problem
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PRIVATE_PREFIX = "libhyper_parallel_"
SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
               "/lib", "/usr/lib", "/usr/local/lib")
DYNAMIC_RE = re.compile(r"\((NEEDED|SONAME|RUNPATH|RPATH)\)\s+.*?\[(.*)\]")


@dataclass
class Problem:
    path: Path
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"HP-BUILD-ELF-CHECK-FAILED: {self.path}: {self.rule}: {self.detail}"


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def dynamic_entries(path: Path) -> dict[str, list[str]]:
    out = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True,
                         check=False).stdout
    entries: dict[str, list[str]] = {}
    for m in DYNAMIC_RE.finditer(out):
        entries.setdefault(m.group(1), []).append(m.group(2))
    return entries


def system_library_names() -> set[str]:
    names: set[str] = set()
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines()[1:]:
        names.add(line.strip().split(" ", 1)[0])
    return names


def check_file(path: Path, roots: list[Path], system_names: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    entries = dynamic_entries(path)
    is_shared_lib = ".so" in path.name
    sonames = entries.get("SONAME", [])
    if is_shared_lib and not (sonames and sonames[0].startswith(PRIVATE_PREFIX)):
        problems.append(Problem(path, "SONAME",
                                f"{sonames[0] if sonames else 'none'}; expected {PRIVATE_PREFIX}*"))
    if entries.get("RPATH"):
        problems.append(Problem(path, "RPATH", f"DT_RPATH {entries['RPATH'][0]}; use RUNPATH"))
    search_dirs: list[Path] = []
    for runpath in entries.get("RUNPATH", []):
        for entry in runpath.split(":"):
            if not entry.startswith("$ORIGIN"):
                problems.append(Problem(path, "RUNPATH", f"'{entry}' is not relative to $ORIGIN"))
                continue
            search_dirs.append(Path(os.path.normpath(entry.replace("$ORIGIN", str(path.parent)))))
    for needed in entries.get("NEEDED", []):
        inside = [d for d in search_dirs if (d / needed).is_file()]
        if inside:
            escaped = [d for d in inside if not any(d.is_relative_to(r) for r in roots)]
            if escaped:
                problems.append(Problem(path, "NEEDED", f"{needed} resolves outside the payload "
                                        f"({escaped[0]})"))
            continue
        if needed.startswith(PRIVATE_PREFIX):
            problems.append(Problem(path, "NEEDED", f"{needed} is ours but is not found through "
                                    f"RUNPATH {[str(d) for d in search_dirs]}"))
        elif needed not in system_names and not any(Path(d, needed).exists() for d in SYSTEM_DIRS):
            problems.append(Problem(path, "NEEDED", f"{needed} resolves neither in the payload nor "
                                    "on the system"))
    return problems


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def check_trees(roots: list[Path]) -> list[Problem]:
    roots = [r.resolve() for r in roots]
    system_names = system_library_names()
    problems: list[Problem] = []
    for root in roots:
        for path in files_of(root):
            if is_elf(path):
                problems.extend(check_file(path, roots, system_names))
    return problems


def embedded_build_paths(roots: list[Path], build_paths: list[str]) -> list[Problem]:
    """Every file of `roots` that contains one of `build_paths` (absolute directories)."""
    needles = [p.rstrip("/").encode() + b"/" for p in build_paths]
    problems: list[Problem] = []
    for root in roots:
        for path in files_of(root.resolve()):
            data = path.read_bytes()
            for needle in needles:
                at = data.find(needle)
                if at < 0:
                    continue
                end = at + len(needle)
                while end < len(data) and end - at < 200 and 0x20 < data[end] < 0x7f:
                    end += 1
                problems.append(Problem(path, "BUILD-PATH", f"contains the build path "
                                        f"'{data[at:end].decode(errors='replace')}' (debug info "
                                        "not split out, __FILE__ without -fmacro-prefix-map, or "
                                        "an absolute path written into a data file)"))
                break
    return problems


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    build_paths = []
    while len(argv) >= 2 and argv[0] == "--build-path":
        build_paths.append(argv[1])
        argv = argv[2:]
    roots = [Path(a) for a in argv]
    problems = check_trees(roots) + (embedded_build_paths(roots, build_paths) if build_paths else [])
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Ship ELF files without their debug info, and keep it beside the build.

    split_debug.py TREE DEBUG_DIR

For every ELF file under TREE that carries debug sections: its debug info (and symbol table)
goes to DEBUG_DIR/.build-id/<first two hex digits>/<the rest>.debug (objcopy
--only-keep-debug; the layout gdb and perf look files up by, through the build ID every one
of our links records), and the file itself is stripped of its debug sections (objcopy
--strip-debug: the symbol table stays, so profiles keep function names) with a GNU debuglink
naming that file. Files without debug sections are left alone, so a second run changes
nothing. An ELF file with debug sections but no build ID is an error
(HP-BUILD-NO-BUILD-ID): its debug info could not be found again.

    gdb -iex 'set debug-file-directory DEBUG_DIR' ...   finds the debug info of a payload
                                                          binary wherever it is installed
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_elf import is_elf  # noqa: E402

BUILD_ID_RE = re.compile(r"Build ID:\s*([0-9a-f]+)")


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


def has_debug_info(path: Path) -> bool:
    return " .debug_" in readelf("-S", "-W", str(path))


def build_id(path: Path) -> str | None:
    m = BUILD_ID_RE.search(readelf("-n", str(path)))
    return m.group(1) if m else None


def split(path: Path, debug_dir: Path) -> Path:
    """Moves `path`'s debug info out; returns the debug file."""
    bid = build_id(path)
    if bid is None or len(bid) < 3:
        raise SystemExit(f"[hp] ERROR HP-BUILD-NO-BUILD-ID: {path} has debug info but no build ID; "
                         "link it with -Wl,--build-id")
    debug = debug_dir / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    debug.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(path), str(debug)], check=True)
    subprocess.run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={debug}", str(path)], check=True)
    return debug


def split_tree(tree: Path, debug_dir: Path) -> list[Path]:
    return [split(p, debug_dir) for p in sorted(tree.rglob("*"))
            if p.is_file() and not p.is_symlink() and is_elf(p) and has_debug_info(p)]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    tree, debug_dir = Path(argv[0]), Path(argv[1])
    if not tree.is_dir():
        print(f"[hp] ERROR: {tree} is not a directory", file=sys.stderr)
        return 2
    split_tree(tree, debug_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The SoC target table (native/common/soc_targets.tsv) read from Python build scripts.

Its header comment says the columns; rows are narrowest first.
"""
from __future__ import annotations

from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "native" / "common" / "soc_targets.tsv"
COLUMNS = ("name", "kind", "default", "requires", "flags", "summary")


def rows() -> list[dict]:
    """Every row: name, kind, default (bool), requires (list), flags (list), summary."""
    out = []
    for number, line in enumerate(TABLE.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != len(COLUMNS):
            raise ValueError(f"{TABLE}:{number}: {len(fields)} tab-separated fields, expected {len(COLUMNS)}")
        row = dict(zip(COLUMNS, fields))
        row["default"] = row["default"] == "yes"
        row["requires"] = [] if row["requires"] == "-" else row["requires"].split(",")
        row["flags"] = [] if row["flags"] == "-" else row["flags"].split()
        out.append(row)
    return out


def names(which: str = "all") -> list[str]:
    """all: every target; cpu: those with kernels; default: those built without --soc-list."""
    return [r["name"] for r in rows()
            if which == "all" or (which == "cpu" and r["kind"] == "cpu") or (which == "default" and r["default"])]

#!/usr/bin/env python3
"""The operator registry (native/ops/operator_registry.json) and the op selection of the
custom_ops component (docs/ops.md).

    select_ops.py check    [--registry R] [--known-socs L]
    select_ops.py select   [--registry R] [--known-socs L] [--soc-list L] [--ops a,b] [--w4a8]
                           [--shmem-variant] [--shmem-sdk DIR|none] [--out selection.json]
                           [--version-script ops.map]
    select_ops.py verify   --selection S --objects ARCHIVE [--library LIB] [--ops-json OUT]
                           [--kernels DIR] [--version V] [--build-dir DIR]
    select_ops.py torch-schemas [--registry R] --out HEADER

check: the registry against its JSON schema (operator_registry.schema.json beside it), then the
rules a schema cannot state. select: check, then the selection pipeline (candidates -> family
rule -> SHMEM filter -> registry order); prints the selected ops one a line on stdout (and
writes selection.json with --out: the ops, their symbols and the SHMEM SDK's include
directories; the linker version script exporting exactly those symbols with --version-script). verify: after the op objects are built, every symbol the
registry names is defined by them, the package library exports exactly the selection's
symbols, and ops.json is written. torch-schemas: the torch adapter's schemas, as a C++ header.

Every failure is one line "[hp] ERROR <reason code>: <file>: op '<op>' field '<field>': ..."
and exit 1 (2 for bad usage); never a traceback.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import soc_targets

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REGISTRY = REPO_ROOT / "native" / "ops" / "operator_registry.json"
SCHEMA_NAME = "operator_registry.schema.json"
SDK_ENV = "HP_SHMEM_HOME"


class SelectError(Exception):
    """A failure with a reason code, the file and the op and field it concerns."""

    def __init__(self, reason: str, where: str, message: str, op: str = "-", field_name: str = "-",
                 recovery: str = ""):
        super().__init__(message)
        self.reason, self.where, self.op, self.field = reason, where, op, field_name
        self.message, self.recovery = message, recovery

    def __str__(self) -> str:
        return f"{self.reason}: {self.where}: op '{self.op}' field '{self.field}': {self.message}"


def registry_error(path: Path, message: str, op: str = "-", field_name: str = "-") -> SelectError:
    return SelectError("HP-BUILD-REGISTRY-INVALID", str(path), message, op, field_name,
                       f"fix {path} (its schema: {path.parent / SCHEMA_NAME}; docs/ops.md)")


@dataclass
class Op:
    name: str
    meta: dict

    @property
    def family(self) -> str | None:
        return self.meta.get("family")

    @property
    def variant(self) -> str | None:
        return self.meta.get("variant")

    @property
    def requires_shmem(self) -> bool:
        return bool(self.meta["requires_shmem"])

    def own_symbols(self) -> list[tuple[str, str]]:
        """(field, symbol) of the op's own entry points."""
        s = self.meta["symbols"]
        out = [("symbols.get_workspace_size", s["get_workspace_size"]), ("symbols.execute", s["execute"])]
        out += [(f"symbols.create[{i}]", c) for i, c in enumerate(s.get("create", []))]
        return out


@dataclass
class Registry:
    path: Path
    data: dict
    ops: list[Op]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def op(self, name: str) -> Op:
        return next(o for o in self.ops if o.name == name)

    def symbols_of(self, ops: list[Op]) -> list[str]:
        """Every symbol a package of these ops exports, in a stable order."""
        out = list(self.data["runtime_symbols"])
        for o in ops:
            out += [s for _, s in o.own_symbols()]
            for obj in o.meta["objects"]:
                out += self.data["objects"][obj]["symbols"]
        return list(dict.fromkeys(out))


# ---- loading and checking ---------------------------------------------------------------

def _schema_error(path: Path, error) -> SelectError:
    """A jsonschema error as the op and field it is about."""
    where = list(error.absolute_path)
    op, field_name = "-", ".".join(str(p) for p in where) or "-"
    if len(where) >= 2 and where[0] == "operator_meta":
        op, field_name = str(where[1]), ".".join(str(p) for p in where[2:]) or "-"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(k for k in error.instance if k not in allowed)
        prefix = field_name + "." if field_name != "-" else ""
        return registry_error(path, f"unknown field '{unknown[0]}' (allowed: {', '.join(sorted(allowed))})",
                              op, prefix + unknown[0])
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        prefix = field_name + "." if field_name != "-" else ""
        return registry_error(path, f"required field '{missing}' is missing", op, prefix + missing)
    if error.validator == "dependentRequired":
        needed = error.message.split("'")[1] if "'" in error.message else "?"
        return registry_error(path, error.message + f": an op with a {'variant' if needed == 'family' else 'family'} "
                              f"needs its '{needed}' too", op, needed)
    return registry_error(path, error.message, op, field_name)


def load_registry(path: Path, known_socs: list[str] | None = None) -> Registry:
    """The registry at `path`, checked against its schema and the cross-field rules."""
    try:
        text = path.read_text()
    except OSError as e:
        raise registry_error(path, f"cannot be read: {e.strerror}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise registry_error(path, f"is not JSON: {e.msg} at line {e.lineno} column {e.colno}",
                             field_name=f"line {e.lineno}")
    schema_path = REPO_ROOT / "native" / "ops" / SCHEMA_NAME
    try:
        import jsonschema
    except ImportError:
        raise SelectError("HP-BUILD-DEPENDENCY-MISSING", str(schema_path),
                          f"the interpreter {sys.executable} has no jsonschema module to check the registry with",
                          recovery="apt-get install -y python3-jsonschema (or scripts/prepare_host.sh)")
    schema = json.loads(schema_path.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    if errors:
        raise _schema_error(path, errors[0])
    registry = Registry(path, data, [Op(name, meta) for name, meta in data["operator_meta"].items()])
    _check_rules(registry, known_socs)
    return registry


def _check_rules(reg: Registry, known_socs: list[str] | None) -> None:
    path, data = reg.path, reg.data
    for name, fam in data["families"].items():
        if fam["default"] not in fam["variants"]:
            raise registry_error(path, f"family '{name}': default '{fam['default']}' is not one of its variants "
                                 f"{fam['variants']}", field_name=f"families.{name}.default")
    owner: dict[str, tuple[str, str]] = {}
    for s in data["runtime_symbols"]:
        owner[s] = ("-", "runtime_symbols")
    for obj_name, obj in data["objects"].items():
        for s in obj["symbols"]:
            if s in owner and owner[s][0] == "-" and owner[s][1] == "runtime_symbols":
                raise registry_error(path, f"symbol {s} is a runtime symbol and a symbol of object '{obj_name}'",
                                     field_name=f"objects.{obj_name}.symbols")
            owner.setdefault(s, ("-", f"objects.{obj_name}.symbols"))
    torch_names: dict[str, str] = {}
    variants_seen: dict[tuple[str, str], str] = {}
    for op in reg.ops:
        if op.family is not None:
            fam = data["families"].get(op.family)
            if fam is None:
                raise registry_error(path, f"family '{op.family}' is not in 'families' (known: "
                                     f"{', '.join(data['families']) or 'none'})", op.name, "family")
            if op.variant not in fam["variants"]:
                raise registry_error(path, f"variant '{op.variant}' is not in family '{op.family}''s order "
                                     f"{fam['variants']}", op.name, "variant")
            other = variants_seen.setdefault((op.family, op.variant), op.name)
            if other != op.name:
                raise registry_error(path, f"ops '{other}' and '{op.name}' are both variant '{op.variant}' of "
                                     f"family '{op.family}'", op.name, "variant")
        for field_name, symbol in op.own_symbols():
            if symbol in owner:
                other_op, other_field = owner[symbol]
                raise registry_error(path, f"symbol {symbol} is also {other_field} of "
                                     f"{'op ' + repr(other_op) if other_op != '-' else 'the registry'}: "
                                     "every op has symbols of its own", op.name, field_name)
            owner[symbol] = (op.name, field_name)
        for obj in op.meta["objects"]:
            if obj not in data["objects"]:
                raise registry_error(path, f"object '{obj}' is not in 'objects' (known: "
                                     f"{', '.join(data['objects']) or 'none'})", op.name, "objects")
        if known_socs is not None:
            for soc in op.meta["socs"]:
                if soc not in known_socs:
                    raise registry_error(path, f"SoC target '{soc}' is not one of {', '.join(known_socs)}",
                                         op.name, "socs")
        if "torch" in op.meta:
            torch_name = op.meta["torch"].split("(", 1)[0]
            if torch_name in torch_names:
                raise registry_error(path, f"torch op '{torch_name}' is also op '{torch_names[torch_name]}''s",
                                     op.name, "torch")
            torch_names[torch_name] = op.name
    for name, fam in data["families"].items():
        for variant in fam["variants"]:
            if (name, variant) not in variants_seen:
                raise registry_error(path, f"family '{name}' lists variant '{variant}', which no op is",
                                     field_name=f"families.{name}.variants")


# ---- selection ----------------------------------------------------------------------------

@dataclass
class Selection:
    ops: list[Op]
    dropped: list[dict] = field(default_factory=list)   # {"op", "stage", "reason"}
    notes: list[str] = field(default_factory=list)       # the lines printed on stderr


def select(reg: Registry, socs: list[str], user_ops: list[str] | None = None, w4a8: bool = False,
           shmem_variant: bool = False, shmem_available: bool = True) -> Selection:
    """The selection pipeline: candidates -> family rule -> SHMEM filter -> registry order."""
    where = str(reg.path)
    if w4a8 and shmem_variant:
        raise SelectError("HP-BUILD-USAGE", where, "--w4a8 and --shmem-variant pick two variants of one family "
                          "(fused_deep_moe): choose one", field_name="variant")
    sel = Selection([])
    names = [o.name for o in reg.ops]
    # 1. candidates: the user's list, or every op for the selected SoC targets.
    if user_ops is not None:
        if not user_ops:
            raise SelectError("HP-BUILD-USAGE", where, "--ops names no op (give a comma list, e.g. "
                              f"--ops {names[0]})", field_name="--ops")
        for name in user_ops:
            if name not in names:
                raise SelectError("HP-BUILD-OPS-UNKNOWN", where, f"--ops: unknown op '{name}'; the registry has: "
                                  f"{', '.join(names)}", op=name, field_name="--ops")
        candidates = [o for o in reg.ops if o.name in user_ops]
        for o in candidates:
            if not set(o.meta["socs"]) & set(socs):
                raise SelectError("HP-BUILD-OPS-UNSUPPORTED", where, f"op '{o.name}' supports {o.meta['socs']}, none "
                                  f"of the selected SoC targets {socs}", op=o.name, field_name="socs")
    else:
        candidates = []
        for o in reg.ops:
            if set(o.meta["socs"]) & set(socs):
                candidates.append(o)
            else:
                sel.dropped.append({"op": o.name, "stage": "candidates",
                                    "reason": f"supports none of the SoC targets {socs}"})
    # 2. family rule: one variant per family.
    asked = "w4a8" if w4a8 else "shmem" if shmem_variant else None
    kept = []
    for o in candidates:
        if o.family is None:
            kept.append(o)
            continue
        fam = reg.data["families"][o.family]
        named = [c for c in candidates if c.family == o.family]
        if user_ops is not None:
            if len(named) > 1:
                raise SelectError("HP-BUILD-OPS-CONFLICT", where,
                                  f"--ops names {', '.join(c.name for c in named)}: variants "
                                  f"{', '.join(c.variant for c in named)} of family '{o.family}' are mutually "
                                  "exclusive; name one", op=o.name, field_name="variant")
            if asked is not None and o.variant != asked:
                raise SelectError("HP-BUILD-OPS-CONFLICT", where,
                                  f"--ops names '{o.name}' (variant {o.variant}) but --{'w4a8' if w4a8 else 'shmem-variant'} "
                                  f"asks for variant {asked} of family '{o.family}'", op=o.name, field_name="variant")
            kept.append(o)
            continue
        want = asked or fam["default"]
        if o.variant == want:
            kept.append(o)
        else:
            sel.dropped.append({"op": o.name, "stage": "family",
                                "reason": f"family '{o.family}' takes variant {want}"})
    # 3. SHMEM filter.
    if not shmem_available:
        for o in [o for o in kept if o.requires_shmem]:
            sel.notes.append(f"NOTE: dropping {o.name} (requires SHMEM, which is not installed)")
            sel.dropped.append({"op": o.name, "stage": "shmem", "reason": "requires SHMEM, which is not installed"})
        kept = [o for o in kept if not o.requires_shmem]
    # 4. registry order.
    sel.ops = [o for o in reg.ops if o in kept]
    if not sel.ops:
        raise SelectError("HP-BUILD-OPS-EMPTY", where, "the selection is empty: "
                          + ("; ".join(f"{d['op']}: {d['reason']}" for d in sel.dropped) or "no candidates"),
                          field_name="--ops")
    return sel


def version_script(reg: Registry, sel: Selection) -> str:
    """The linker version script exporting exactly the selection's symbols."""
    lines = ["/* Generated by scripts/select_ops.py from " + reg.path.name + ": the selected ops. */",
             "{", "  global:"]
    lines += [f"    {s};" for s in reg.symbols_of(sel.ops)]
    lines += ["  local:", "    *;", "};", ""]
    return "\n".join(lines)


# ---- the symmetric-memory SDK -------------------------------------------------------------

def shmem_sdk_root(arg: str | None) -> Path | None:
    """The SDK root: $HP_SHMEM_HOME when set (non-empty), else --shmem-sdk (none: absent)."""
    env = os.environ.get(SDK_ENV, "")
    if env:
        return Path(env)
    if arg in (None, "", "none"):
        return None
    return Path(arg)


def shmem_include_dirs(root: Path) -> list[Path]:
    """The include directories of the SDK at `root` (laid out as the payload's symmetric_memory
    slice: include/hyper_parallel/shmem/*.h), each checked to exist."""
    origin = f"${SDK_ENV}" if os.environ.get(SDK_ENV) else "the SDK root"
    root = Path(os.path.normpath(root))
    dirs = [root / "include", root / "include" / "hyper_parallel"]
    for d in dirs + [root / "include" / "hyper_parallel" / "shmem"]:
        if not d.is_dir():
            raise SelectError("HP-BUILD-SHMEM-SDK-INVALID", str(root),
                              f"{origin} = {root}: the SDK include directory {d} does not exist (an SDK root is laid "
                              "out as the payload's symmetric_memory slice: include/hyper_parallel/shmem/shmem.h)",
                              field_name=SDK_ENV,
                              recovery=f"unset {SDK_ENV}, or point it at a symmetric_memory slice "
                                       "(e.g. build/native/payload/hyper_parallel/symmetric_memory)")
    return dirs


# ---- verification after the build ----------------------------------------------------------

def defined_symbols(path: Path, dynamic: bool) -> set[str]:
    """The global symbols `path` defines (nm; --dynamic for a shared library's exports)."""
    cmd = ["nm", "--defined-only", "--extern-only"] + (["--dynamic"] if dynamic else []) + [str(path)]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SelectError("HP-BUILD-COMPILE-FAILED", str(path), f"nm cannot read it: {e}")
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 3}


def check_symbols(reg: Registry, objects: set[str], skip: set[str], where: str) -> None:
    """Every symbol the registry names is defined by the op objects (ops in `skip` were not
    built: the SHMEM filter dropped them)."""
    for s in reg.data["runtime_symbols"]:
        if s not in objects:
            raise registry_error(reg.path, f"runtime symbol {s} is not defined by the op library ({where})",
                                 field_name="runtime_symbols")
    for name, obj in reg.data["objects"].items():
        for s in obj["symbols"]:
            if s not in objects:
                raise registry_error(reg.path, f"symbol {s} of object '{name}' is not defined by the op library "
                                     f"({where})", field_name=f"objects.{name}.symbols")
    for op in reg.ops:
        if op.name in skip:
            continue
        for field_name, s in op.own_symbols():
            if s not in objects:
                raise registry_error(reg.path, f"symbol {s} is not defined by the op library ({where}): "
                                     "a misspelt name, or the op's source is not built", op.name, field_name)


def shipped_path(path: str | None, build_dir: str | None) -> str | None:
    """A path as the shipped ops.json names it: relative to the build directory when inside it,
    else relative to the checkout when inside that (a shipped file carries no build machine
    path, scripts/check_elf.py --build-path), else as it is (an SDK installed elsewhere)."""
    if path is None:
        return None
    for root in ([Path(build_dir).resolve()] if build_dir else []) + [Path(__file__).resolve().parents[1]]:
        if Path(path).resolve().is_relative_to(root):
            return os.path.relpath(Path(path).resolve(), root)
    return path


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- commands -----------------------------------------------------------------------------

def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v for v in value.split(",") if v]


def cmd_check(args) -> int:
    reg = load_registry(Path(args.registry), _csv(args.known_socs))
    print(f"{reg.path}: {len(reg.ops)} ops, ok")
    return 0


def cmd_select(args) -> int:
    reg = load_registry(Path(args.registry), _csv(args.known_socs))
    root = shmem_sdk_root(args.shmem_sdk)
    include_dirs = shmem_include_dirs(root) if root is not None else []
    sel = select(reg, _csv(args.soc_list) or [], _csv(args.ops), args.w4a8, args.shmem_variant,
                 shmem_available=root is not None)
    for note in sel.notes:
        print(note, file=sys.stderr)
    for o in sel.ops:
        print(o.name)
    if args.version_script:
        Path(args.version_script).write_text(version_script(reg, sel))
    if args.out:
        out = {
            "registry": str(reg.path),
            "registry_sha256": reg.sha256,
            "soc_list": _csv(args.soc_list) or [],
            "request": {"ops": _csv(args.ops), "w4a8": args.w4a8, "shmem_variant": args.shmem_variant},
            "shmem_sdk": str(Path(os.path.normpath(root))) if root is not None else None,
            "shmem_include_dirs": [str(d) for d in include_dirs],
            "ops": [o.name for o in sel.ops],
            "dropped": sel.dropped,
            "symbols": reg.symbols_of(sel.ops),
        }
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


def cmd_verify(args) -> int:
    selection = json.loads(Path(args.selection).read_text())
    reg = load_registry(Path(selection["registry"]))
    if reg.sha256 != selection["registry_sha256"]:
        raise registry_error(reg.path, "changed since the selection was made: run the selection again")
    built = [o.name for o in reg.ops if selection["shmem_sdk"] is not None or not o.requires_shmem]
    check_symbols(reg, defined_symbols(Path(args.objects), dynamic=False), set(o.name for o in reg.ops) - set(built),
                  args.objects)
    if args.library is None:
        return 0
    library = Path(args.library)
    exported = defined_symbols(library, dynamic=True)
    expected = set(selection["symbols"])
    ours = {s for s in exported if s.startswith("hp")}
    if ours != expected:
        extra, missing = sorted(ours - expected), sorted(expected - ours)
        raise SelectError("HP-BUILD-OPS-EXPORTS", str(library),
                          f"exports {len(ours)} op symbols, the selection has {len(expected)}: "
                          f"unexpected {extra or 'none'}, missing {missing or 'none'}", field_name="symbols")
    package = library.parent.parent
    kernels = {}
    if args.kernels:
        # The kernel vendor of a slice (<slice>/lib/kernels), named as the payload places it:
        # beside this package's slice.
        kdir = Path(args.kernels)
        for soc in selection["soc_list"]:
            lib = kdir / f"libhyper_parallel_kernels_{soc}.so"
            if lib.is_file():
                kernels[soc] = {"path": "../" + os.path.relpath(lib, kdir.parents[2]), "sha256": sha256_file(lib)}
    ops = []
    for name in selection["ops"]:
        o = reg.op(name)
        entry = {"name": o.name, "summary": o.meta["summary"], "family": o.family, "variant": o.variant,
                 "requires_shmem": o.requires_shmem,
                 "socs": [s for s in o.meta["socs"] if s in kernels or not args.kernels],
                 "header": o.meta["header"], "get_workspace_size": o.meta["symbols"]["get_workspace_size"],
                 "execute": o.meta["symbols"]["execute"], "create": o.meta["symbols"].get("create", []),
                 "objects": o.meta["objects"], "torch": o.meta.get("torch")}
        ops.append(entry)
    manifest = {
        "format": 1,
        "name": "hyper_parallel",
        "version": args.version,
        "library": os.path.relpath(library, package),
        "header": f"include/{reg.data['header']}",
        "registry_sha256": selection["registry_sha256"],
        "targets": [s for s in selection["soc_list"] if s in kernels] if args.kernels else selection["soc_list"],
        "kernels": kernels,
        "selection": {"request": selection["request"], "dropped": selection["dropped"],
                      "shmem_sdk": shipped_path(selection["shmem_sdk"], args.build_dir)},
        "ops": ops,
        "exported_symbols": selection["symbols"],
        "library_sha256": sha256_file(library),
    }
    Path(args.ops_json).write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


def cmd_torch_schemas(args) -> int:
    reg = load_registry(Path(args.registry))
    lines = ["// Generated by scripts/select_ops.py from " + reg.path.name + ": the torch.ops.hyper_parallel",
             "// schemas of the registry's ops (their one source). Do not edit.",
             "#pragma once", "", "namespace hp::torch_ops::schemas {", ""]
    for o in reg.ops:
        if "torch" in o.meta:
            lines.append(f"inline constexpr const char {o.meta['torch'].split('(', 1)[0]}[] =")
            lines.append(f"    {json.dumps(o.meta['torch'])};  // op {o.name}")
    lines += ["", "}  // namespace hp::torch_ops::schemas", ""]
    out = Path(args.out)
    text = "\n".join(lines)
    if not out.is_file() or out.read_text() != text:
        out.write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="select_ops.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def registry_args(p):
        p.add_argument("--registry", default=str(DEFAULT_REGISTRY))
        p.add_argument("--known-socs", help="comma list of the SoC target names the registry may use")

    p = sub.add_parser("check", help="check the registry")
    registry_args(p)
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("select", help="check the registry and select the ops")
    registry_args(p)
    p.add_argument("--soc-list", default=",".join(soc_targets.names("default")))
    p.add_argument("--ops", help="comma list of ops (default: every op for the SoC targets)")
    p.add_argument("--w4a8", action="store_true", help="the w4a8 variant of each family instead of base")
    p.add_argument("--shmem-variant", action="store_true", help="the shmem variant of each family instead of base")
    p.add_argument("--shmem-sdk", help=f"the symmetric-memory SDK root, or none (${SDK_ENV} overrides)")
    p.add_argument("--out", help="write selection.json here")
    p.add_argument("--version-script", help="write the linker version script of the selection here")
    p.set_defaults(func=cmd_select)
    p = sub.add_parser("verify", help="check the built objects and library, write ops.json")
    p.add_argument("--selection", required=True)
    p.add_argument("--objects", required=True, help="the archive of every built op's objects")
    p.add_argument("--library", help="the package's op library")
    p.add_argument("--ops-json", help="where to write ops.json")
    p.add_argument("--kernels", help="the directory of the kernel libraries per SoC target")
    p.add_argument("--version", default="")
    p.add_argument("--build-dir", help="the build directory: ops.json names paths inside it relative to it")
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("torch-schemas", help="write the torch adapter's schema header")
    p.add_argument("--registry", default=str(DEFAULT_REGISTRY))
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_torch_schemas)
    args = parser.parse_args(argv)
    if args.command == "verify" and args.library and not args.ops_json:
        parser.error("verify --library needs --ops-json")
    try:
        return args.func(args)
    except SelectError as e:
        print(f"[hp] ERROR {e}", file=sys.stderr)
        if e.recovery:
            print(f"[hp]   recover: {e.recovery}", file=sys.stderr)
        return 2 if e.reason == "HP-BUILD-USAGE" else 1


if __name__ == "__main__":
    sys.exit(main())

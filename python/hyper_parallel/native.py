"""The native loader: where the payload is, what it holds, and loading from it.

The payload (build/native/payload/hyper_parallel, assembled by ./build.sh) is found in this
order:
  1. $HP_PAYLOAD_DIR, when set;
  2. the installed package itself (a wheel puts the payload beside these modules);
  3. in a source checkout on PYTHONPATH, <repo>/build/native/payload/hyper_parallel
     (or $HP_BUILD_DIR/native/payload/hyper_parallel).
Every failure raises NativeLoadError with an HP-NATIVE-* reason code and the exact command
that recovers.
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import json
import os
import struct
import sys
import sysconfig
from pathlib import Path

from .errors import NativeLoadError

PACKAGE_DIR = Path(__file__).resolve().parent
_SOURCE_CHECKOUT = PACKAGE_DIR.parent.name == "python" and (PACKAGE_DIR.parents[1] / "build.sh").is_file()
REPO_ROOT = PACKAGE_DIR.parents[1] if _SOURCE_CHECKOUT else None

def _rebuild_command() -> str:
    if REPO_ROOT is not None:
        return f"cd {REPO_ROOT} && ./build.sh"
    return ("reinstall a wheel built by ./build.sh: "
            "pip install --force-reinstall <repo>/build/dist/hyper_parallel-*.whl")


def locate_payload() -> tuple[Path | None, str]:
    """(payload dir or None, how it was found: override|installed|development)."""
    override = os.environ.get("HP_PAYLOAD_DIR")
    if override:
        return Path(override), "override"
    if (PACKAGE_DIR / "manifest.json").is_file():
        return PACKAGE_DIR, "installed"
    if REPO_ROOT is not None:
        build = Path(os.environ.get("HP_BUILD_DIR") or REPO_ROOT / "build")
        return build / "native" / "payload" / "hyper_parallel", "development"
    return None, "installed"


def shadowed_install() -> Path | None:
    """The installed hyper_parallel that this checkout's package, first on sys.path (PYTHONPATH),
    hides, or None."""
    if REPO_ROOT is None:
        return None
    try:
        from importlib.metadata import PackageNotFoundError, distribution
        where = Path(distribution("hyper_parallel").locate_file("hyper_parallel")).resolve()
    except (PackageNotFoundError, OSError, TypeError):
        return None
    return where if where != PACKAGE_DIR and (where / "__init__.py").is_file() else None


def _shadow_note() -> str:
    where = shadowed_install()
    return (f"; this checkout's package ({PACKAGE_DIR}, on PYTHONPATH) hides the installed hyper_parallel at "
            f"{where}: unset PYTHONPATH to use that one" if where else "")


@functools.lru_cache(maxsize=None)
def manifest() -> dict:
    payload, how = locate_payload()
    if payload is None or not (payload / "manifest.json").is_file():
        where = payload if payload is not None else PACKAGE_DIR
        raise NativeLoadError("HP-NATIVE-PAYLOAD-MISSING",
                              f"no native payload at {where} (found by: {how}){_shadow_note()}",
                              _rebuild_command())
    try:
        return json.loads((payload / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise NativeLoadError("HP-NATIVE-PAYLOAD-MISSING",
                              f"the payload manifest {payload / 'manifest.json'} is unreadable: {e}",
                              _rebuild_command()) from e


def payload_dir() -> Path:
    manifest()  # raises when there is none
    return locate_payload()[0]


def component_dir(component: str) -> Path:
    """The payload slice of `component`; explains from the manifest why it is missing."""
    info = manifest()
    path = payload_dir() / component
    if component in info.get("components", []) and path.is_dir():
        return path
    parts = [p for p in info.get("parts", []) if p["part"] == component]
    if parts and parts[0]["status"] == "failed":
        p = parts[0]
        raise NativeLoadError("HP-NATIVE-PAYLOAD-MISSING",
                              f"the payload has no {component}: its build failed with {p['reason']}: "
                              f"{p['message']} (log: {p['log']})", p["recovery"])
    raise NativeLoadError("HP-NATIVE-PAYLOAD-MISSING",
                          f"the payload at {payload_dir()} has no {component} (built: "
                          f"{', '.join(info.get('components', [])) or 'nothing'}; selection: "
                          f"{info.get('selection', '?')})", _rebuild_command())


def _check_python_abi() -> None:
    built = manifest().get("python", {}).get("soabi")
    running = sysconfig.get_config_var("SOABI")
    if built and built != running:
        raise NativeLoadError("HP-NATIVE-PYTHON-ABI-MISMATCH",
                              f"the payload was built for {built} ({manifest()['python'].get('executable')}), "
                              f"this interpreter is {running} ({sys.executable})",
                              f"PYTHON={sys.executable} ./build.sh")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def glibc_shortfall(info: dict, running: str | None = None) -> str | None:
    """Why this system's glibc cannot run the payload (manifest "abi", read from its binaries
    at build time), or None. `running`: the system's version ("2.36"; default: this one's)."""
    needed = info.get("abi", {}).get("glibc")
    if running is None:
        running = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    if not needed or _version(running) >= _version(needed):
        return None
    return (f"the payload needs glibc >= {needed} ({info['abi'].get('needed_by', {}).get('glibc', '?')} "
            f"asks for GLIBC_{needed}); this system has {running}")


# What the activation sets (multicore/lib/set_env.bash): the native libraries read them when they
# load and the framework's thread pools when they start, so they count only from the process's
# start (its initial environment, /proc/self/environ).
ACTIVATION_VARIABLES = ("HP_ACTIVATED", "HP_VENDOR_PATH", "HP_CHIP_CPUS")


@functools.lru_cache(maxsize=None)
def _initial_environ() -> dict[str, str]:
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:  # no procfs: nothing to compare with
        return {k: os.environ[k] for k in ACTIVATION_VARIABLES if k in os.environ}
    pairs = (os.fsdecode(entry).partition("=") for entry in raw.split(b"\0") if entry)
    return {key: value for key, _, value in pairs}


def activation_command() -> str:
    """The line that activates a shell for this payload (before Python starts)."""
    payload, how = locate_payload()
    if how == "installed":
        return 'source "$(command -v hyper_parallel_multicore_set_env.bash)"'
    return f"source {payload / 'multicore' / 'lib' / 'set_env.bash'}"


def _check_activation_timing() -> None:
    initial = _initial_environ()
    late = [v for v in ACTIVATION_VARIABLES if os.environ.get(v) != initial.get(v)]
    if late:
        what = "; ".join(f"{v}: {initial.get(v, 'unset')!r} at start, {os.environ.get(v, 'unset')!r} now"
                         for v in late)
        raise NativeLoadError("HP-NATIVE-ACTIVATION-TOO-LATE",
                              f"{', '.join(late)} changed after this process started ({what}): the native "
                              "libraries and the framework read them when they start",
                              f"{activation_command()} in the shell, then start Python")


def _elf_shortfall(path: Path) -> str | None:
    """Why the ELF file at `path` is cut short (its headers name bytes past its end), or None.
    dlopen maps such a file and the process dies of SIGBUS when it touches the missing pages,
    so the loader looks first."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
            if len(head) < 64 or head[:4] != b"\x7fELF":
                return f"{size} bytes, not an ELF file"
            if head[4] != 2:  # the payload is ELF64; anything else is dlopen's to refuse
                return None
            phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
            need = shoff + shentsize * shnum
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(len(table) // max(phentsize, 1)):
                p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
                if p_type == 1:  # PT_LOAD
                    need = max(need, p_offset + p_filesz)
    except OSError as e:
        return str(e)
    return f"{size} bytes, its headers need {need}" if size < need else None


@functools.lru_cache(maxsize=None)
def _check_payload_files(payload: Path) -> None:
    for path in sorted(payload.rglob("*.so*")):
        if path.is_file():
            why = _elf_shortfall(path)
            if why:
                raise NativeLoadError("HP-NATIVE-VENDOR-LOAD-FAILED", f"{path} is damaged ({why})",
                                      _rebuild_command())


def _check_payload_version() -> None:
    from . import __version__
    built = manifest().get("version")
    if built and built != __version__:
        payload, how = locate_payload()
        raise NativeLoadError("HP-NATIVE-PAYLOAD-STALE",
                              f"the payload at {payload} (found by: {how}) is version {built} and the Python "
                              f"package at {PACKAGE_DIR} is {__version__}: they come from different builds"
                              f"{_shadow_note()}", _rebuild_command())


def _check_system() -> None:
    why = glibc_shortfall(manifest())
    if why:
        raise NativeLoadError("HP-NATIVE-SYSTEM-TOO-OLD", why,
                              "build on this system (./build.sh), or run on a distribution with that glibc or newer")


def load_extension(component: str, name: str):
    """Imports the CPython extension hyper_parallel.<name> from the component's python/ dir."""
    full_name = f"hyper_parallel.{name}"
    if full_name in sys.modules:
        return sys.modules[full_name]
    directory = component_dir(component) / "python"
    _check_payload_version()
    _check_system()
    _check_activation_timing()
    _check_payload_files(payload_dir())
    _check_python_abi()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    path = directory / f"{name}{suffix}"
    if not path.is_file():
        raise NativeLoadError("HP-NATIVE-ADAPTER-LOAD-FAILED", f"{path} does not exist",
                              _rebuild_command())
    spec = importlib.util.spec_from_file_location(full_name, path)
    try:
        # dlopen() and PyInit run in module_from_spec: a missing dependency fails there.
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as e:
        raise NativeLoadError("HP-NATIVE-ADAPTER-LOAD-FAILED", f"importing {path} failed: {e}",
                              _rebuild_command()) from e
    sys.modules[full_name] = module
    return module


def framework_adapter(component: str, framework: str) -> Path:
    """The payload's `framework` adapter library of `component`, or
    HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE with why (from the manifest) and how to recover."""
    directory = component_dir(component)
    part = f"{component}.{framework}"
    parts = [p for p in manifest().get("parts", []) if p["part"] == part]
    library = directory / "lib" / f"libhyper_parallel_{_SHORT.get(component, component)}_{framework}.so"
    if parts and parts[0]["status"] == "ok" and library.is_file():
        return library
    if parts and parts[0]["status"] == "failed":
        p = parts[0]
        raise NativeLoadError("HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE",
                              f"the payload has no {framework} adapter of {component}: its build "
                              f"failed with {p['reason']}: {p['message']}", p["recovery"])
    raise NativeLoadError("HP-NATIVE-FRAMEWORK-TARGET-UNAVAILABLE",
                          f"the payload has no {framework} adapter of {component} (it was not "
                          f"selected: {manifest().get('selection', '?')})",
                          f"./build.sh --shmem {framework}" if component == "symmetric_memory"
                          else f"./build.sh --multicore {framework}")


_SHORT = {"symmetric_memory": "shmem"}
_torch_adapters_loaded: set[str] = set()


def torch_ops(component: str):
    """torch.ops.hyper_parallel with `component`'s torch adapter loaded (once per process)."""
    import torch
    if component not in _torch_adapters_loaded:
        _check_activation_timing()
        _check_payload_files(payload_dir())
        library = framework_adapter(component, "torch")
        try:
            torch.ops.load_library(str(library))
        except (OSError, RuntimeError) as e:  # dlopen's error, or torch's on a bad registration
            raise NativeLoadError("HP-NATIVE-VENDOR-LOAD-FAILED", f"loading {library} failed: {e}",
                                  _rebuild_command()) from e
        _torch_adapters_loaded.add(component)
    return torch.ops.hyper_parallel


def load_library(component: str, filename: str):
    """dlopen()s a native library of a component's lib/ dir (ctypes.CDLL)."""
    import ctypes
    path = component_dir(component) / "lib" / filename
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise NativeLoadError("HP-NATIVE-VENDOR-LOAD-FAILED", f"loading {path} failed: {e}",
                              _rebuild_command()) from e


def core():
    """The native core module (hyper_parallel._hp_core)."""
    return load_extension("core", "_hp_core")


def runnable_socs(features: dict[str, bool]) -> list[str]:
    """The payload's kernel targets that this CPU can run, best first."""
    best_first = list(reversed(core().soc_targets()))  # the SoC target table, narrowest first
    socs = set(manifest().get("soc_list", []))
    return [name for name, needs in best_first if name in socs and all(features.get(f, False) for f in needs)]


def require_runnable_soc() -> str:
    """The best payload kernel target for this CPU, or HP-NATIVE-ISA-UNSUPPORTED."""
    features = core().cpu_features()
    ok = runnable_socs(features)
    if not ok:
        have = ",".join(k for k, v in features.items() if v) or "none"
        raise NativeLoadError("HP-NATIVE-ISA-UNSUPPORTED",
                              f"the payload's kernel targets {manifest().get('soc_list')} all need "
                              f"features this CPU lacks (it has: {have})",
                              "./build.sh --soc-list " + ",".join(n for n, _ in core().soc_targets()))
    return ok[0]

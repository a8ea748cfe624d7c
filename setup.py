"""Packages HyperParallel: the Python sources (python/hyper_parallel) plus the native payload
that ./build.sh assembled (build/native/payload/hyper_parallel, or $HP_PAYLOAD_DIR).

It only packages. It never compiles and never downloads: `build_ext` refuses, and without a
payload the wheel is core-only (the Python package alone). The wheel is tagged for the
running CPython ABI, because the payload holds a CPython extension module, and with the
payload's platform tag (manifest.json "abi": manylinux_<x>_<y> when its binaries allow it,
else linux_<arch>).
"""
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.install import install
from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
PAYLOAD = Path(os.environ.get("HP_PAYLOAD_DIR") or ROOT / "build" / "native" / "payload" / "hyper_parallel")
VERSION = (ROOT / "VERSION").read_text().strip()


class RefuseToCompile(build_ext):
    def run(self):
        raise SystemExit("HP-SETUP-NO-COMPILE: setup.py only packages the payload that ./build.sh "
                         "assembled; it never compiles. Run ./build.sh instead.")


class BuildPyWithPayload(build_py):
    """Copies the payload beside the Python modules: hyper_parallel/<component>/..."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "hyper_parallel"
        if (PAYLOAD / "manifest.json").is_file():
            print(f"packaging the native payload {PAYLOAD}")
            for entry in PAYLOAD.iterdir():
                if entry.name.startswith("."):
                    continue  # a temporary of an interrupted refresh, never part of a payload
                dest = target / entry.name
                if entry.is_dir():
                    shutil.copytree(entry, dest, dirs_exist_ok=True)
                else:
                    shutil.copy2(entry, dest)
        else:
            print(f"no native payload at {PAYLOAD}: building a core-only wheel "
                  "(run ./build.sh for the native components)")


class InstallPlatlib(install):
    """Installs into platlib (the wheel's root), as a package with native code must be; without
    ext_modules setuptools would pick purelib and the wheel would carry everything under
    .data/purelib, which breaks where purelib and platlib differ (lib vs lib64)."""

    def finalize_options(self):
        super().finalize_options()
        self.install_lib = self.install_platlib


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        abi = f"cp{sys.version_info.major}{sys.version_info.minor}"
        return abi, abi, platform_tag()


def platform_tag() -> str:
    """The payload's own (manifest.json "abi", read from its binaries by scripts/abi_floor.py),
    else, for a core-only wheel, the host's."""
    manifest = PAYLOAD / "manifest.json"
    if manifest.is_file():
        tag = json.loads(manifest.read_text()).get("abi", {}).get("platform_tag")
        if tag:
            return tag
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


setup(
    name="hyper_parallel",
    version=VERSION,
    description="Expert-parallel Mixture-of-Experts on CPUs: symmetric memory, MoE "
                "dispatch/combine, a fused MoE layer and a task runtime",
    package_dir={"": "python"},
    packages=find_packages("python", include=["hyper_parallel", "hyper_parallel.*"]),
    python_requires=">=3.10",
    install_requires=["numpy>=1.24"],
    entry_points={"console_scripts": ["hp = hyper_parallel.cli:main"]},
    # The activation's locator, sourced (never run) from the environment's bin/.
    scripts=["native/moe/activation/hyper_parallel_multicore_set_env.bash"],
    cmdclass={"build_ext": RefuseToCompile, "build_py": BuildPyWithPayload,
              "install": InstallPlatlib, "bdist_wheel": PlatformWheel},
    zip_safe=False,
)

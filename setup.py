"""The build step of the Python package (pyproject.toml holds the rest):
`make lib cli` in the repository, then libflowgen.so and the flowgen binary
copied into the package, and flowgen/_version.py written from
include/flowgen.h; and the optional extension flowgen._fast (the launch
calls without ctypes; Python 3.10 on, its stable ABI; where it cannot be
built, the package calls through ctypes).  The wheel is platform-specific
(it carries ELF files)."""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, Extension, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "include", "flowgen.h")) as f:
        return re.search(r'#define FLOWGEN_VERSION "([^"]+)"', f.read()).group(1)


class BuildWithMake(build_py):
    def run(self):
        super().run()
        build = os.environ.get("FLOWGEN_BUILD_DIR", "build")
        jobs = os.environ.get("FLOWGEN_MAKE_JOBS", str(min(os.cpu_count() or 1, 8)))
        subprocess.check_call(["make", f"-j{jobs}", f"BUILD={build}", "lib", "cli"], cwd=ROOT)
        out = os.path.join(self.build_lib, "flowgen")
        os.makedirs(out, exist_ok=True)
        # The real file, not the soname links: ctypes opens it by path.
        shutil.copyfile(os.path.join(ROOT, build, f"libflowgen.so.{version()}"),
                        os.path.join(out, "libflowgen.so"))
        binary = os.path.join(out, "flowgen")
        shutil.copyfile(os.path.join(ROOT, build, "flowgen"), binary)
        os.chmod(binary, 0o755)
        with open(os.path.join(out, "_version.py"), "w") as f:
            f.write(f'__version__ = "{version()}"\n')


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


FAST = [Extension("flowgen._fast", ["python/flowgen/_fast.c"], py_limited_api=True, optional=True,
                  define_macros=[("Py_LIMITED_API", "0x030A0000")])] if sys.version_info >= (3, 10) else []

setup(version=version(), cmdclass={"build_py": BuildWithMake}, distclass=BinaryDistribution,
      ext_modules=FAST)

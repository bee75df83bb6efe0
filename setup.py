"""Builds the Python package idem's extension (idem._idem) with the
project's CMake, for `pip install --no-build-isolation .` (pyproject.toml).

By default it configures build-pip/ with only the core, the C API, the
Kafka library when librdkafka is found (idem.kafka.NativeConsumer) and the
extension (-DIDEM_BUILD_PYTHON=ON, no tests, tools or benchmarks) for the
interpreter running pip, builds the extension there and installs it. With
IDEM_BUILD_DIR set to a build directory already configured with
-DIDEM_BUILD_PYTHON=ON for the same interpreter (as scripts/test.sh
configures build/), it builds the extension in that one instead, which
compiles nothing again.
"""

import glob
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE_DIR = pathlib.Path(__file__).resolve().parent


def project_version():
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    return re.search(r"project\(idem VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    """Runs CMake instead of compiling the extension's sources itself."""

    def build_extension(self, ext):
        build_dir = os.environ.get("IDEM_BUILD_DIR")
        if build_dir:
            build_dir = pathlib.Path(build_dir).resolve()
        else:
            # Beside build/, at the same depth, so that the compiler cache
            # finds what build/ compiled (scripts/compiler-cache.sh).
            build_dir = SOURCE_DIR / "build-pip"
            self.configure(build_dir)
        subprocess.run(["cmake", "--build", str(build_dir), "--target",
                        "idem_python", "idem_python_files", "-j",
                        str(os.cpu_count() or 1)], check=True)
        built = glob.glob(str(build_dir / "python" / "idem" / "_idem*.so"))
        if len(built) != 1:
            raise RuntimeError(f"idem: expected one extension in "
                               f"{build_dir}/python/idem, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)

    def configure(self, build_dir):
        build_dir.mkdir(parents=True, exist_ok=True)
        args = ["cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir),
                "-DCMAKE_BUILD_TYPE=Release",
                "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG",
                "-DIDEM_BUILD_PYTHON=ON", "-DIDEM_BUILD_TESTS=OFF",
                "-DIDEM_BUILD_TOOLS=OFF", "-DIDEM_BUILD_BENCH=OFF",
                "-DIDEM_INSTALL=OFF", "-DIDEM_UNITY_BUILD=ON",
                f"-DIDEM_PYTHON_EXECUTABLE={sys.executable}"]
        if shutil.which("ccache"):
            launcher = (f"env;CCACHE_BASEDIR={SOURCE_DIR};CCACHE_NOHASHDIR=1;"
                        "ccache")
            args += [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
                     f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}"]
        subprocess.run(args, check=True)


setup(
    version=project_version(),
    ext_modules=[Extension("idem._idem", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)

"""Build systems find the installed package: ``python -m dlpackarray --include`` /
``--cmake-dir`` / ``--pkgconfig-dir``, ``find_package(dlpackarray CONFIG REQUIRED)`` with
its version file and the ``dlpackarray::headers`` target, and ``dlpackarray.pc``.

tests/helpers/build_systems/ is a downstream CMake project with a C99 and a C++17 extension module
calling the C API; it is configured and built against the installed package, and both
modules are imported and called.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from toolchain import tool

import dlpackarray
from dlpackarray import DLPackArray

PROJECT = pathlib.Path(__file__).resolve().parents[1] / "helpers" / "build_systems"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _cli(option: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "dlpackarray", option], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_cli_prints_the_build_folders():
    assert _cli("--include") == dlpackarray.get_include()
    cmake_dir = pathlib.Path(_cli("--cmake-dir"))
    assert (cmake_dir / "dlpackarrayConfig.cmake").is_file()
    assert (cmake_dir / "dlpackarrayConfigVersion.cmake").is_file()
    assert (pathlib.Path(_cli("--pkgconfig-dir")) / "dlpackarray.pc").is_file()


@pytest.fixture(scope="module")
def cmake_build(tmp_path_factory):
    cmake = tool("cmake")
    build = tmp_path_factory.mktemp("cmake_consumer")
    cmd = [cmake, "-S", str(PROJECT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    cmd += [f"-Ddlpackarray_DIR={_cli('--cmake-dir')}", f"-DPython_EXECUTABLE={sys.executable}"]
    ninja = shutil.which("ninja", path=os.path.dirname(sys.executable)) or shutil.which("ninja")
    if ninja:
        cmd += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    configure = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = subprocess.run(
        [cmake, "--build", str(build)], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return build, configure.stdout


def _load(build: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, build / f"{name}{SUFFIX}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_find_package_reports_version_and_c_api(cmake_build):
    _, log = cmake_build
    major, minor = dlpackarray.C_API_VERSION
    assert f"C API {major}.{minor}" in log
    assert f"dlpackarray {dlpackarray.__version__}" in log
    assert "dlpackarray 99 found: 0" in log  # the version file refuses another major


@pytest.mark.parametrize("name", ["consumer_c", "consumer_cxx"])
def test_cmake_built_modules_run(cmake_build, name):
    mod = _load(cmake_build[0], name)
    assert mod.api_version() == dlpackarray.C_API_VERSION
    a = mod.empty_zeros(5)
    assert isinstance(a, DLPackArray) and np.from_dlpack(a).tolist() == [0.0] * 5
    assert mod.nbytes(np.zeros((2, 3))) == 48 and mod.nbytes(a) == 40
    with pytest.raises(TypeError):
        mod.nbytes(object())


def test_pkg_config_gives_the_include_folder(tmp_path):
    pkg_config = tool("pkg-config")
    env = {**os.environ, "PKG_CONFIG_PATH": _cli("--pkgconfig-dir")}

    def query(option):
        proc = subprocess.run(
            [pkg_config, option, "dlpackarray"], capture_output=True, text=True, env=env, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert query("--modversion") == [dlpackarray.__version__]
    lines = query("--cflags")
    flag = next(x for x in lines if x.startswith("-I"))
    assert os.path.realpath(flag[2:]) == os.path.realpath(dlpackarray.get_include())
    src = tmp_path / "uses.c"
    src.write_text(
        '#include "dlpackarray/dlpackarray.h"\nint f(void) { return import_dlpackarray(); }\n'
    )
    cc = shutil.which("cc")
    assert cc is not None
    py_include = sysconfig.get_paths()["include"]
    compiled = subprocess.run(
        [cc, "-std=c99", "-fsyntax-only", "-Wall", "-Werror", flag, f"-I{py_include}", str(src)],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr

"""CMakeLists.txt stops unsupported targets at configure time, with a message saying why."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE = "dlpackarray supports 64-bit Linux (POSIX) only"
TESTED = "wheels are built and tested for Linux x86_64 and Linux aarch64"
UNTESTED = "which no test has run on"
TOOLCHAIN = ROOT / "cmake" / "toolchain-aarch64-linux-gnu.cmake"


def configure(tmp_path, *defines: str) -> subprocess.CompletedProcess:
    if shutil.which("cmake") is None or not (ROOT / "CMakeLists.txt").is_file():
        pytest.skip("needs cmake and the source tree")
    return subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(tmp_path / "build"), *defines],
        capture_output=True,
        text=True,
        timeout=300,
    )


# APPLE / WIN32 are what CMake's platform files set for those targets; defining them here
# makes this Linux configure take the same branch without a cross toolchain.
@pytest.mark.parametrize("platform", ["APPLE", "WIN32"])
def test_unsupported_platform_fails_with_a_clear_message(tmp_path, platform):
    proc = configure(tmp_path, f"-D{platform}=ON")
    assert proc.returncode != 0
    out = " ".join((proc.stdout + proc.stderr).split())
    assert GATE in out and "not supported yet" in out
    assert TESTED in out


def test_a_processor_without_wheels_or_tests_is_warned_about(tmp_path):
    """Only x86-64 and aarch64 are built and tested: another 64-bit Linux processor
    configures, with a warning that names the tested platforms."""
    proc = configure(tmp_path, "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=riscv64")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert GATE not in out
    assert "building for Linux riscv64, " + UNTESTED in out and TESTED in out


def test_the_aarch64_cross_toolchain_passes_the_gate_without_a_warning(tmp_path):
    """The cross toolchain of the aarch64 wheels (cmake/toolchain-aarch64-linux-gnu.cmake)
    targets a tested platform: no gate, no warning, and the compiler makes aarch64 code."""
    if shutil.which("aarch64-linux-gnu-g++") is None:
        pytest.skip(
            "needs the aarch64 cross C compiler and C++ compiler (aarch64-linux-gnu-gcc, "
            "aarch64-linux-gnu-g++: Debian's g++-aarch64-linux-gnu)"
        )
    proc = configure(tmp_path, f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert GATE not in out and UNTESTED not in out
    system = next((tmp_path / "build" / "CMakeFiles").glob("*/CMakeSystem.cmake")).read_text()
    assert 'set(CMAKE_SYSTEM_PROCESSOR "aarch64")' in system
    # The compiler-identification program CMake built is an ELF file for EM_AARCH64 (183).
    (probe,) = (tmp_path / "build" / "CMakeFiles").glob("*/CompilerIdCXX/a.out")
    header = probe.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183


def test_supported_platform_passes_the_gate(tmp_path):
    proc = configure(tmp_path)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert GATE not in out and UNTESTED not in out


def _cross_configure(tmp_path, *defines: str) -> subprocess.CompletedProcess:
    if shutil.which("aarch64-linux-gnu-g++") is None:
        pytest.skip(
            "needs the aarch64 cross C compiler and C++ compiler (aarch64-linux-gnu-gcc, "
            "aarch64-linux-gnu-g++: Debian's g++-aarch64-linux-gnu)"
        )
    # Configure only: the build machine's headers stand in for the target's (.ci/aarch64
    # passes the target's own, from an arm64 Debian).
    return configure(
        tmp_path,
        f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DPython_INCLUDE_DIR={sysconfig.get_paths()['include']}",
        *defines,
    )


def test_a_cross_build_names_the_modules_for_the_target(tmp_path):
    """FindPython takes no SOABI from the build machine's interpreter in a cross build; the
    modules get the target's (scikit-build-core's SKBUILD_SOABI), so the aarch64 wheel
    holds _array.cpython-3XY-aarch64-linux-gnu.so, not a bare _array.so."""
    soabi = "cpython-311-aarch64-linux-gnu"
    proc = _cross_configure(tmp_path, f"-DSKBUILD_SOABI={soabi}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = tmp_path / "build"
    rules = "\n".join(p.read_text() for p in [*build.glob("*.ninja"), *build.rglob("build.make")])
    assert f"_array.{soabi}.so" in rules


def test_a_cross_build_without_the_target_suffix_stops(tmp_path):
    """Without the target's extension suffix a cross build would name the modules _x.so;
    the configure step stops and says what to set."""
    proc = _cross_configure(tmp_path)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert "a cross build needs the target's extension suffix: set SETUPTOOLS_EXT_SUFFIX" in out

"""Every register transpose the core carries gives the item-by-item transpose.

The copy uses only the widest kernel the CPU runs (AVX-512, AVX2 or SSE2), so
the Python-level copy tests reach one of them per machine.  This compiles
tests/helpers/kernels/transpose_tile_check.cpp, which includes the kernels'
source and checks each one this CPU can run, for 1-, 2-, 4- and 8-byte items,
unaligned sources and several row strides.
"""

from __future__ import annotations

import pathlib
import platform
import shutil
import subprocess

import pytest

TESTS = pathlib.Path(__file__).resolve().parent.parent
REPO = TESTS.parent
CHECK = TESTS / "helpers" / "kernels" / "transpose_tile_check.cpp"


def test_every_register_transpose_matches_the_definition(tmp_path):
    """Each SIMD tile kernel the CPU supports writes exactly the transposed items."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the register transposes are x86-64 only; other CPUs copy item by item")
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("NO C++ COMPILER FOUND: cannot build the register transpose check")
    exe = tmp_path / "transpose_tile_check"
    build = subprocess.run(
        [cxx, "-std=c++17", "-O1", f"-I{REPO / 'cpp' / 'include'}", str(CHECK), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok sse2 N=1" in run.stdout and "ok sse2 N=8" in run.stdout

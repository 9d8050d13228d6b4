"""Our CUDA driver declarations match the CUDA Toolkit's cuda.h.

dlpackarray declares the driver types it needs itself (wheels are built where
no Toolkit is installed); tests/helpers/abi/cuda_abi_check.cpp static_asserts them
against cuda.h: enum values, CUDA_MEMCPY2D's layout, every entry point's
signature and the _v2 symbol names.  Skipped only where cuda.h is absent.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "helpers" / "abi" / "cuda_abi_check.cpp"
OUR_INCLUDE = ROOT / "cpp" / "include"


def find_cuda_h():
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    roots += ["/usr/local/cuda", "/opt/cuda", "/usr"]
    for root in roots:
        if root and (pathlib.Path(root) / "include" / "cuda.h").is_file():
            return pathlib.Path(root) / "include" / "cuda.h"
    return None


def test_cuda_driver_declarations_match_cuda_h(tmp_path):
    header = find_cuda_h()
    if header is None:
        pytest.skip("NO cuda.h FOUND (set CUDA_HOME): cannot check the CUDA driver declarations")
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("NO C++ COMPILER FOUND: cannot check the CUDA driver declarations")
    proc = subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", f"-I{OUR_INCLUDE}", f"-I{header.parent}", str(CHECK)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr

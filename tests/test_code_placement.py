"""How the build places and reaches code (CMakeLists.txt; issue 23, round 10).

Every call from a module into libpython or the core, and from the core into
libpython, goes through the GOT (``-fno-plt``): a PLT stub costs an indirect jump
and a line of the instruction cache per target, which callgrind does not show,
and removing them took the imports 1-13 % nearer their floors in wall time at
each of four code placements (benchmarks/README.md, "Placement sweeps").
``DLPACKARRAY_CODE_SHIFT`` (measurement only) pads the hot section so that such
sweeps can be made.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from test_pgo_build import _configure

import dlpackarray

PACKAGE = pathlib.Path(dlpackarray.__file__).parent
OBJDUMP = shutil.which("objdump")

# Calls from objects the toolchain links in precompiled, not compiled by us:
# crtbegin's __do_global_dtors_aux (every shared object) and libc_nonshared.a's
# pthread_atfork (the core's fork handlers: cuda_driver.cpp, python_shim.cpp).
_RUNTIME = {"__cxa_finalize", "__register_atfork"}
_PLT_CALL = re.compile(r"\s(?:call|jmp)\s+[0-9a-f]+ <([^>@]+)@plt>")


def plt_calls(disassembly: str) -> list[str]:
    """Targets of the direct calls and jumps into PLT stubs in ``objdump -d``
    output, less the C runtime's own."""
    return [t for t in _PLT_CALL.findall(disassembly) if t not in _RUNTIME]


def test_plt_calls_reads_objdump_lines():
    text = "\n".join(
        [
            "    b5d4:\tcall   5620 <PyCapsule_GetPointer@plt>",
            "    b6f8:\tcall   *0x15a0a(%rip)        # 21108 <PyCapsule_New@Base>",
            "    c1a2:\tcall   5030 <__cxa_finalize@plt>",
            "    c1b0:\tjmp    5040 <_Py_Dealloc@plt>",
        ]
    )
    assert plt_calls(text) == ["PyCapsule_GetPointer", "_Py_Dealloc"]


@pytest.mark.skipif(OBJDUMP is None, reason="objdump (binutils) is not installed")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF shared objects only")
def test_no_call_goes_through_a_plt_stub():
    objects = sorted(PACKAGE.glob("*.so"))
    assert any(p.name == "libdlpackarray_core.so" for p in objects)
    found = {}
    for so in objects:
        text = subprocess.run(
            [OBJDUMP, "-d", "--no-show-raw-insn", str(so)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        calls = plt_calls(text)
        if calls:
            found[so.name] = sorted(set(calls))[:5]
    assert found == {}, "built without -fno-plt (DLPACKARRAY_NO_PLT)?"


def test_cmake_refuses_a_code_shift_that_is_not_a_byte_count(tmp_path):
    proc = _configure(tmp_path, "-DDLPACKARRAY_CODE_SHIFT=1k")
    assert proc.returncode != 0
    assert "DLPACKARRAY_CODE_SHIFT must be a byte count (got '1k')" in proc.stderr


@pytest.mark.skipif(OBJDUMP is None, reason="objdump (binutils) is not installed")
def test_code_shift_pads_the_hot_section_by_its_byte_count(tmp_path):
    proc = _configure(tmp_path, "-DDLPACKARRAY_CODE_SHIFT=1088")
    assert proc.returncode == 0, proc.stderr
    source = tmp_path / "build" / "code_shift.cpp"
    cxx = re.search(
        r"CMAKE_CXX_COMPILER:\w+=(.+)", (tmp_path / "build" / "CMakeCache.txt").read_text()
    )
    assert cxx, "no C++ compiler in the CMake cache"
    obj = tmp_path / "code_shift.o"
    subprocess.run(
        [cxx.group(1).strip(), "-c", str(source), "-o", str(obj)], check=True, timeout=120
    )
    headers = subprocess.run(
        [OBJDUMP, "-h", str(obj)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    m = re.search(r"\.text\.hot\.dla_code_shift\s+([0-9a-f]+)", headers)
    assert m, headers
    assert int(m.group(1), 16) == 1088

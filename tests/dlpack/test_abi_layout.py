"""Our DLPack struct declarations match an official dlpack.h byte for byte.

Compiles tests/helpers/abi/abi_layout_check.cpp (static_asserts on every sizeof,
offsetof, enum value, flag, version constant and capsule name) against the
official DLPack 1.3 header shipped by an installed package (apache-tvm-ffi).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sysconfig

import pytest
from dlpack_header import find_official_header, header_version

TESTS = pathlib.Path(__file__).resolve().parent.parent
REPO = TESTS.parent
CHECK = TESTS / "helpers" / "abi" / "abi_layout_check.cpp"
OUR_INCLUDE = REPO / "cpp" / "include"


def compile_check(header: pathlib.Path, *extra):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("NO C++ COMPILER FOUND: cannot check the DLPack ABI layout")
    include_root = header.parent.parent  # .../include, holding dlpack/dlpack.h
    cmd = [
        cxx,
        "-std=c++17",
        "-fsyntax-only",
        "-Wall",
        "-Werror",
        f"-I{include_root}",
        f"-I{OUR_INCLUDE}",
        *extra,
        str(CHECK),
    ]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def official_header():
    header, seen = find_official_header()
    if header is None:
        found = ", ".join(f"{h} ({v})" for h, v in seen.items()) or "none"
        pytest.skip(
            "NO OFFICIAL DLPack 1.3 dlpack.h FOUND (apache-tvm-ffi ships it: "
            'pip install ".[interop]"); the ABI '
            f"layout check did not run. Headers seen: {found}"
        )
    return header


def test_layout_matches_official_header(official_header):
    r = compile_check(official_header)
    assert r.returncode == 0, f"ABI mismatch against {official_header}:\n{r.stderr}"


def test_check_detects_a_mismatch(official_header):
    """Negative control: a deliberately wrong assertion must fail to compile."""
    r = compile_check(official_header, "-DDLA_ABI_CHECK_MUST_FAIL")
    assert r.returncode != 0
    assert "kDLPackMinorVersion + 1" in r.stderr


def test_python_constants_match_header(official_header):
    import dlpackarray
    from dlpackarray import DLDeviceType

    assert dlpackarray.DLPACK_VERSION == header_version(official_header)
    text = official_header.read_text()
    enum_values = dict(re.findall(r"\b(kDL\w+)\s*=\s*(\d+)U?\s*,", text))
    python_names = {
        "CPU": "kDLCPU",
        "CUDA": "kDLCUDA",
        "CPU_PINNED": "kDLCUDAHost",
        "OPENCL": "kDLOpenCL",
        "VULKAN": "kDLVulkan",
        "METAL": "kDLMetal",
        "VPI": "kDLVPI",
        "ROCM": "kDLROCM",
        "ROCM_HOST": "kDLROCMHost",
        "EXT_DEV": "kDLExtDev",
        "CUDA_MANAGED": "kDLCUDAManaged",
        "ONE_API": "kDLOneAPI",
        "WEBGPU": "kDLWebGPU",
        "HEXAGON": "kDLHexagon",
        "MAIA": "kDLMAIA",
        "TRN": "kDLTrn",
    }
    assert {m.name for m in DLDeviceType} == set(python_names)
    for member in DLDeviceType:
        assert int(enum_values[python_names[member.name]]) == member.value, member


# -- the C header, dlpackarray/dlpackarray.h ---------------------------------------------------

C_DUMP = TESTS / "helpers" / "abi" / "c_layout_dump.c"
C_ORDERS = TESTS / "helpers" / "abi" / "c_header_orders.c"
PY_INCLUDE = sysconfig.get_paths()["include"]


def _compiler(lang):
    names = ("gcc", "cc", "clang") if lang == "c" else ("g++", "c++", "clang++")
    found = next((shutil.which(n) for n in names if shutil.which(n)), None)
    if found is None:
        pytest.skip(f"NO {lang.upper()} COMPILER FOUND: cannot check dlpackarray.h")
    return found


def _lang_flags(lang):
    # The source is C; as C++ it is compiled with -x c++ (C++17, like the core).
    return ["-std=gnu11"] if lang == "c" else ["-x", "c++", "-std=c++17"]


def _dump(tmp_path, lang, official_header=None):
    exe = tmp_path / f"dump_{lang}_{'official' if official_header else 'ours'}"
    cmd = [_compiler(lang), *_lang_flags(lang), "-Wall", "-Werror", f"-I{OUR_INCLUDE}"]
    if official_header is not None:
        cmd += ["-DDLA_USE_OFFICIAL", f"-I{official_header.parent.parent}"]
    else:
        cmd += [f"-I{PY_INCLUDE}"]
    r = subprocess.run(
        [*cmd, str(C_DUMP), "-o", str(exe)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_c_header_layout_matches_official_header(official_header, tmp_path, lang):
    """Every size, alignment, offset and constant of the DLPack declarations in
    dlpackarray.h equals the official header's, compiled as C and as C++."""
    ours = _dump(tmp_path, lang)
    theirs = _dump(tmp_path, lang, official_header)
    assert "DLTensor.byte_offset offset=40 size=8" in ours and "current_work_stream" in ours
    assert ours == theirs


@pytest.mark.parametrize("lang", ["c", "c99", "c++"])
@pytest.mark.parametrize("official_first", [True, False])
def test_c_header_coexists_with_official_header(official_header, lang, official_first):
    # c99: strict ISO C99, where an official dlpack.h included before Python.h would break
    # Python.h (docs/abi.md, include order).
    flags = ["-std=c99"] if lang == "c99" else _lang_flags(lang)
    cmd = [_compiler(lang[:1] if lang == "c99" else lang), *flags]
    cmd += ["-fsyntax-only", "-Wall", "-Wextra", "-Werror"]
    cmd += [f"-I{OUR_INCLUDE}", f"-I{official_header.parent.parent}", f"-I{PY_INCLUDE}"]
    if official_first:
        cmd.append("-DDLA_OFFICIAL_FIRST")
    r = subprocess.run([*cmd, str(C_ORDERS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"


def test_c_header_refuses_an_older_official_header(tmp_path):
    old = tmp_path / "dlpack"
    old.mkdir()
    (old / "dlpack.h").write_text(
        "#ifndef DLPACK_DLPACK_H_\n#define DLPACK_DLPACK_H_\n"
        "#define DLPACK_MAJOR_VERSION 1\n#define DLPACK_MINOR_VERSION 1\n#endif\n"
    )
    src = tmp_path / "old.c"
    src.write_text('#include <dlpack/dlpack.h>\n#include "dlpackarray/dlpackarray.h"\n')
    cmd = [_compiler("c"), "-std=gnu11", "-fsyntax-only", f"-I{tmp_path}", f"-I{OUR_INCLUDE}"]
    r = subprocess.run([*cmd, f"-I{PY_INCLUDE}", str(src)], capture_output=True, text=True)
    assert r.returncode != 0 and "needs DLPack 1.x with x >= 3" in r.stderr


# -- one declaration per language --------------------------------------------------------------

ABI_TYPES = [
    "DLPackVersion",
    "DLDeviceType",
    "DLDevice",
    "DLDataTypeCode",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackManagedTensorAllocator",
    "DLPackManagedTensorFromPyObjectNoSync",
    "DLPackManagedTensorToPyObjectNoSync",
    "DLPackDLTensorFromPyObjectNoSync",
    "DLPackCurrentWorkStream",
    "DLPackExchangeAPIHeader",
    "DLPackExchangeAPI",
]


def _c_declarations(text: str, name: str) -> int:
    """Definitions of `name` in C or C++ source: a typedef'd struct/enum body, a
    `struct/enum name {`, a function-pointer typedef or a `using name =` alias."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    patterns = [
        rf"\}}\s*{name}\s*;",
        rf"\b(?:struct|enum)\s+{name}\s*(?::\s*\w+\s*)?\{{",
        rf"\btypedef\b[^;]*\(\s*\*\s*{name}\s*\)",
        rf"\busing\s+{name}\s*=",
    ]
    return sum(len(re.findall(p, text)) for p in patterns)


def _cython_declarations(text: str, name: str) -> int:
    text = re.sub(r"#[^\n]*", "", text)
    patterns = [
        rf"^\s*(?:ctypedef|cdef)\s+(?:struct|enum|union|class)\s+{name}\b",
        rf"^\s*ctypedef\b[^\n]*\(\s*\*\s*{name}\s*\)",
    ]
    return sum(len(re.findall(p, text, re.M)) for p in patterns)


def test_the_abi_is_declared_once_per_language():
    """C and C++ share dlpack_abi.h (the core's dlpack_abi.hpp only wraps it), Cython has
    abi.pxd (c_api.pxd and the modules cimport it): no second copy to drift."""
    c_sources = [p for p in (REPO / "cpp").rglob("*") if p.suffix in {".h", ".hpp", ".cpp"}]
    pxd_sources = sorted((REPO / "src" / "dlpackarray").rglob("*.p[yx][xd]"))
    for name in ABI_TYPES:
        c_found = {p.name for p in c_sources if _c_declarations(p.read_text(), name)}
        assert c_found == {"dlpack_abi.h"}, name
        cy_found = {p.name for p in pxd_sources if _cython_declarations(p.read_text(), name)}
        assert cy_found == {"abi.pxd"}, name

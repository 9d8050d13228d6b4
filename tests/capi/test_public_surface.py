"""Only the public surface ships, and all of it works downstream.

The installed package (a wheel's contents) holds, for building against it, exactly the header
``dlpackarray/dlpackarray.h`` and the DLPack ABI it includes, ``dlpackarray/dlpack_abi.h``,
the Cython declarations ``__init__.pxd``, ``c_api.pxd`` and ``abi.pxd`` (the one declaration
of the DLPack ABI, which ``c_api.pxd`` cimports), the stubs and ``py.typed``: no C++ core header, no
internal ``.pxd`` (a downstream ``cimport dlpackarray.core`` compiled, then failed at import
with an undefined symbol) and no ``.pyx``.

A downstream Cython module cimports every shipped ``.pxd``, reads every constant they declare
and calls every function (the C API through docs/examples/c_api/consumer_body.pxi, the DLPack
exchange table directly).  It is built twice: against ``dlpackarray.h`` alone and with the
official DLPack 1.3 ``dlpack.h`` included first (as tests/helpers/dlpack_header.py finds it), so the
declared type codes, device types, flags and versions are checked against the official values
by the compiler, and the name lists against the official enums.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from dlpack_header import find_official_header

import dlpackarray
from dlpackarray import DLPackArray

PACKAGE = pathlib.Path(dlpackarray.__file__).parent
INCLUDE = pathlib.Path(dlpackarray.get_include())
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "c_api"
PY_INCLUDE = sysconfig.get_paths()["include"]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

PUBLIC_PXD = {"__init__.pxd", "c_api.pxd", "abi.pxd"}
PUBLIC_HEADERS = {"dlpackarray/dlpackarray.h", "dlpackarray/dlpack_abi.h"}


def test_the_package_ships_only_the_public_build_surface():
    shipped_pxd = {p.name for p in PACKAGE.glob("*.pxd")}
    assert shipped_pxd == PUBLIC_PXD
    assert not list(PACKAGE.glob("*.pyx"))
    headers = {str(p.relative_to(INCLUDE)) for p in INCLUDE.rglob("*") if p.is_file()}
    assert headers == PUBLIC_HEADERS
    assert (PACKAGE / "py.typed").is_file()
    for stub in ("__init__.pyi", "_array.pyi", "_capi.pyi", "_dlpack.pyi"):
        assert (PACKAGE / stub).is_file(), stub


def _includes(header: str) -> set[str]:
    text = (INCLUDE / header).read_text()
    return set(re.findall(r'^\s*#\s*include\s+([<"][^>"]+[>"])', text, re.M))


def test_the_public_headers_include_only_python_the_c_library_and_each_other():
    assert _includes("dlpackarray/dlpackarray.h") == {
        "<Python.h>",
        "<stddef.h>",
        "<stdint.h>",
        '"dlpack_abi.h"',
    }
    # The DLPack ABI needs no Python: the C++ core includes it too.
    assert _includes("dlpackarray/dlpack_abi.h") == {"<stdint.h>"}


def test_public_pxd_cimport_only_public_pxd():
    for name in PUBLIC_PXD:
        text = (PACKAGE / name).read_text()
        for module in re.findall(r"^\s*(?:from|cimport)\s+([\w.]+)", text, re.M):
            if module.startswith("dlpackarray"):
                assert f"{module.split('.', 1)[1]}.pxd" in PUBLIC_PXD, (name, module)


# -- the downstream module ----------------------------------------------------------------------


def _official_enum(text: str, name: str) -> dict[str, int]:
    body = re.search(r"typedef enum[^{]*\{(.*?)\}\s*" + name + r"\s*;", text, re.S)
    assert body is not None, name
    out = {}
    for m in re.finditer(r"(kDL\w+)\s*=\s*(\d+)U?", re.sub(r"/\*.*?\*/|//[^\n]*", "", body[1])):
        out[m[1]] = int(m[2])
    return out


@pytest.fixture(scope="module")
def official():
    header, seen = find_official_header()
    if header is None:
        pytest.skip(
            f"no official DLPack 1.3 dlpack.h installed (found: {seen or 'none'}); "
            'apache-tvm-ffi ships it: pip install ".[interop]"'
        )
    return header


def _names(official_header) -> list[str]:
    text = official_header.read_text()
    codes = _official_enum(text, "DLDataTypeCode")
    devices = _official_enum(text, "DLDeviceType")
    assert "kDLFloat4_e2m1fn" in codes and "kDLTrn" in devices  # DLPack 1.3
    return sorted(codes) + sorted(devices)


CONSTANTS = [
    "DLPACK_MAJOR_VERSION",
    "DLPACK_MINOR_VERSION",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
    "DLPACKARRAY_C_API_MAJOR",
    "DLPACKARRAY_C_API_MINOR",
    "DLPACKARRAY_COPY_IF_NEEDED",
    "DLPACKARRAY_COPY_NEVER",
    "DLPACKARRAY_COPY_ALWAYS",
]

MODULE = """
# cython: language_level=3
# Every shipped .pxd, cimported as a downstream project would.
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport Py_DECREF
from libc.string cimport strncpy
cimport dlpackarray
cimport dlpackarray.c_api as c_api
cimport dlpackarray.abi as abi
from dlpackarray.c_api cimport (
    DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader, DLTensor, kDLCPU,
)

include "consumer_body.pxi"


def constants():
    return {{
{constants}
    }}


cdef int ok(int r) except -1:
    return r  # -1 comes with the exchange function's exception set


cdef char error_kind[64]


cdef void set_error(void* ctx, const char* kind, const char* message) noexcept:
    strncpy(error_kind, kind, 63)


def exchange(DLPackArray a):
    cap = type(a).__dlpack_c_exchange_api__
    cdef const DLPackExchangeAPI* api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(
        cap, b"dlpack_exchange_api")
    cdef const DLPackExchangeAPIHeader* header = &api.header
    cdef DLManagedTensorVersioned* m = NULL
    cdef DLTensor t
    cdef void* out = NULL
    cdef void* stream = <void*>1
    ok(api.managed_tensor_from_py_object_no_sync(<void*>a, &m))
    flags = m.flags
    ok(api.dltensor_from_py_object_no_sync(<void*>a, &t))
    ok(api.managed_tensor_to_py_object_no_sync(m, &out))
    back = <object>out
    Py_DECREF(back)
    ok(api.current_work_stream(kDLCPU, 0, &stream))
    m = NULL
    t.device.device_type = <c_api.DLDeviceType>4  # OpenCL: refused through SetError
    error_kind[0] = 0
    refused = api.managed_tensor_allocator(&t, &m, NULL, set_error)
    t.device.device_type = kDLCPU
    ok(api.managed_tensor_allocator(&t, &m, NULL, set_error))
    allocated = [m.dl_tensor.shape[i] for i in range(m.dl_tensor.ndim)]
    m.deleter(m)
    return ((header.version.major, header.version.minor), header.prev_api == NULL, flags,
            t.ndim, back.data_ptr, stream == NULL, refused, error_kind.decode(), allocated)
"""


def _build(root: pathlib.Path, name: str, names: list[str], official_header=None):
    root.mkdir()
    shutil.copy(EXAMPLES / "consumer_body.pxi", root)
    lines = [f'        "{n}": dlpackarray.{n},' for n in CONSTANTS]
    lines += [f'        "{n}": c_api.{n},' for n in names]
    lines += [f'        "abi.{n}": abi.{n},' for n in names]
    (root / f"{name}.pyx").write_text(MODULE.format(constants="\n".join(lines)))
    c_file = root / f"{name}.c"
    cython = [sys.executable, "-m", "cython", "-3", "-I", str(PACKAGE.parent)]
    proc = subprocess.run([*cython, "-o", str(c_file), f"{name}.pyx"], cwd=root, text=True,
                          capture_output=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cc = shutil.which("cc")
    assert cc is not None, "no C compiler to build the downstream module"
    cmd = [cc, "-std=gnu11", "-shared", "-fPIC", "-O0", f"-I{PY_INCLUDE}", f"-I{INCLUDE}"]
    if official_header is not None:
        # Python.h first (CPython's rule), then the official dlpack.h: dlpackarray.h then
        # uses its declarations.
        cmd += [f"-I{official_header.parent.parent}", "-include", "Python.h"]
        cmd += ["-include", "dlpack/dlpack.h", "-DDLA_EXPECT_OFFICIAL"]
    out = root / f"{name}{SUFFIX}"
    proc = subprocess.run([*cmd, str(c_file), "-o", str(out)], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    spec = importlib.util.spec_from_file_location(name, out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def modules(tmp_path_factory, official):
    root = tmp_path_factory.mktemp("public_surface")
    names = _names(official)
    return (
        _build(root / "ours", "surface_ours", names),
        _build(root / "official", "surface_official", names, official),
    )


def test_every_declared_constant_equals_the_official_value(modules, official):
    ours, theirs = modules
    values = ours.constants()
    assert values == theirs.constants()
    text = official.read_text()
    assert {k: values[k] for k in _official_enum(text, "DLDataTypeCode")} == _official_enum(
        text, "DLDataTypeCode"
    )
    assert values["kDLFloat8_e3m4"] == 7 and values["kDLFloat4_e2m1fn"] == 17
    assert (values["DLPACKARRAY_C_API_MAJOR"], values["DLPACKARRAY_C_API_MINOR"]) == (
        dlpackarray.C_API_VERSION
    )


def test_every_declared_function_is_called_downstream():
    declared = set(
        re.findall(r"\b(DLPackArray_[A-Z]\w+)\s*\(", (PACKAGE / "c_api.pxd").read_text())
    )
    body = (EXAMPLES / "consumer_body.pxi").read_text()
    assert len(declared) == 14 and "dlpackarray.import_dlpackarray()" in body
    assert {f for f in declared if f"dlpackarray.{f}(" not in body} == set()


@pytest.mark.parametrize("which", [0, 1], ids=["ours", "official-first"])
def test_the_downstream_module_runs(modules, which):
    mod = modules[which]
    x = np.arange(6.0).reshape(2, 3)
    a = DLPackArray(x)
    assert mod.api_version() == dlpackarray.C_API_VERSION
    assert mod.describe(a)[:2] == (2, (2, 3))
    assert mod.contiguity(a) == (True, False)
    assert mod.empty_float32(2, 2).shape == (2, 2)
    assert mod.convert(x)[1].data_ptr == x.ctypes.data
    version, no_prev, flags, ndim, ptr, null_stream, refused, kind, allocated = mod.exchange(a)
    assert version == (1, 3) and no_prev and flags == 0 and ndim == 2
    assert ptr == x.ctypes.data and null_stream
    assert refused == -1 and kind == "BufferError" and allocated == [2, 3]

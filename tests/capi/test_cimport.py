"""Another Cython project can ``cimport dlpackarray``: the shipped .pxd files
and the headers under get_include() compile into a working extension."""

import importlib.util
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import dlpackarray

cython = pytest.importorskip("Cython", reason="Cython compiles the consumer module")

CONSUMER = """
# cython: language_level=3
# distutils: language = c++
cimport dlpackarray
from dlpackarray cimport DLPACK_MAJOR_VERSION, DLPackArray, DLTensor

dlpackarray.import_dlpackarray()


def describe(DLPackArray a):
    # Public accessor: DLPackArray's C++ layout is not part of the API.
    cdef DLTensor t
    dlpackarray.DLPackArray_GetDLTensor(a, &t, NULL)
    return (DLPACK_MAJOR_VERSION, t.ndim, t.shape[0], t.dtype.bits)


def is_array(obj):
    return isinstance(obj, dlpackarray.DLPackArray)
"""


def test_cython_consumer_compiles_and_runs(tmp_path):
    pyx = tmp_path / "consumer.pyx"
    pyx.write_text(CONSUMER)
    package_root = os.path.dirname(os.path.dirname(dlpackarray.__file__))
    cpp = tmp_path / "consumer.cpp"
    subprocess.run(
        [sys.executable, "-m", "cython", "--cplus", "-I", package_root, "-o", str(cpp), str(pyx)],
        check=True,
    )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    so = tmp_path / f"consumer{suffix}"
    cxx = os.environ.get("CXX", "c++")
    subprocess.run(
        [
            cxx,
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-O0",
            f"-I{sysconfig.get_paths()['include']}",
            f"-I{dlpackarray.get_include()}",
            str(cpp),
            "-o",
            str(so),
        ],
        check=True,
    )
    spec = importlib.util.spec_from_file_location("consumer", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = dlpackarray.DLPackArray(np.arange(5, dtype=np.float32))
    assert mod.describe(a) == (1, 1, 5, 32)
    assert mod.is_array(a) and not mod.is_array(object())
    with pytest.raises(TypeError):
        mod.describe(object())


def test_get_include_holds_the_public_header_only():
    # The core's C++ headers are internal (tests/capi/test_public_surface.py checks the whole list).
    inc = dlpackarray.get_include()
    assert os.path.isfile(os.path.join(inc, "dlpackarray", "dlpackarray.h"))
    for name in ("dlpack_abi.hpp", "tensor_view.hpp", "dtype.hpp", "errors.hpp"):
        assert not os.path.exists(os.path.join(inc, "dlpackarray", name)), name

"""Downstream projects build against the installed package and use its C API.

The examples of docs/c_api.md (docs/examples/c_api/) are compiled in a temporary folder the
way another project would: a Cython module in C mode, the same module in C++ mode, and a
C++ extension written against ``dlpackarray/dlpackarray.h`` alone.  They see only that
header (copied into an include folder of its own) and the shipped ``.pxd`` files, so none of
them depends on DLPackArray's C++ layout.  A failed build fails the test.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import dlpackarray
from dlpackarray import DLPackArray

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "c_api"
PY_INCLUDE = sysconfig.get_paths()["include"]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"build failed: {' '.join(map(str, cmd))}\n{proc.stderr}"


def _compiler(kind):
    name = os.environ.get("CC" if kind == "c" else "CXX") or ("cc" if kind == "c" else "c++")
    path = shutil.which(name)
    assert path is not None, f"no {kind} compiler ({name}) to build the downstream examples"
    return path


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("downstream")
    for f in EXAMPLES.iterdir():
        shutil.copy(f, root)
    # Only the public C headers: builds cannot reach the C++ core's headers.
    include = root / "include" / "dlpackarray"
    include.mkdir(parents=True)
    for header in ("dlpackarray.h", "dlpack_abi.h"):
        shutil.copy(pathlib.Path(dlpackarray.get_include()) / "dlpackarray" / header, include)
    return root


def _build_cython(build_dir, name, cplus):
    package_root = pathlib.Path(dlpackarray.__file__).parent.parent
    src = build_dir / f"{name}.{'cpp' if cplus else 'c'}"
    cython = [sys.executable, "-m", "cython", "-3", "-I", str(package_root)]
    _run([*cython, *(["--cplus"] if cplus else []), "-o", src, f"{name}.pyx"], build_dir)
    out = build_dir / f"{name}{SUFFIX}"
    cc = _compiler("c++" if cplus else "c")
    std = ["-std=c++17"] if cplus else ["-std=gnu11"]
    _run(
        [cc, *std, "-shared", "-fPIC", "-O1", f"-I{PY_INCLUDE}", f"-I{build_dir / 'include'}"]
        + [str(src), "-o", str(out)],
        build_dir,
    )
    return _load(name, out)


@pytest.fixture(scope="module")
def consumer_c(build_dir):
    return _build_cython(build_dir, "consumer_c", cplus=False)


@pytest.fixture(scope="module")
def consumer_cpp(build_dir):
    return _build_cython(build_dir, "consumer_cpp", cplus=True)


@pytest.fixture(scope="module")
def extension(build_dir):
    out = build_dir / f"extension{SUFFIX}"
    _run(
        [_compiler("c++"), "-std=c++17", "-shared", "-fPIC", "-O1", "-Wall", "-Werror"]
        + [f"-I{PY_INCLUDE}", f"-I{build_dir / 'include'}", "extension.cpp", "-o", str(out)],
        build_dir,
    )
    return _load("extension", out)


@pytest.fixture(params=["c", "cpp"])
def consumer(request, consumer_c, consumer_cpp):
    return consumer_c if request.param == "c" else consumer_cpp


# -- the Cython examples (C and C++ mode) ----------------------------------------------------


def test_versions_and_type_checks(consumer):
    assert consumer.api_version() == dlpackarray.C_API_VERSION == (1, 1)
    a = DLPackArray(bytearray(4))
    assert consumer.is_array(a) and consumer.is_array_type(a)
    assert not consumer.is_array(bytearray(4)) and not consumer.is_array_type(object())
    assert consumer.type_object() is DLPackArray


def test_wrap_follows_the_python_constructor(consumer):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    a = consumer.wrap(x)
    assert isinstance(a, DLPackArray) and a.data_ptr == x.ctypes.data
    assert consumer.describe(a) == (2, (3, 2), (4, 2), (0, 32), False, x.ctypes.data)
    c = consumer.wrap(x, copy=True)
    assert c.data_ptr != x.ctypes.data and np.array_equal(np.from_dlpack(c), x)
    assert consumer.describe(consumer.wrap(b"abc"))[4] is True  # read-only source
    with pytest.raises(TypeError, match="cannot wrap a 'object'"):
        consumer.wrap(object())
    assert consumer.wrap(x, copy=False).data_ptr == x.ctypes.data


def test_describe_refuses_other_objects_with_an_exception(consumer):
    with pytest.raises(TypeError, match="expected a dlpackarray.DLPackArray"):
        consumer.describe(np.zeros(3))


def test_from_data_with_a_deleter_runs_it_exactly_once(consumer):
    before = consumer.freed_count()
    a = consumer.arange_float64(5)
    view = a[1:]
    t = np.from_dlpack(view)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    del a, view
    gc.collect()
    assert consumer.freed_count() == before  # the NumPy array still uses the memory
    del t
    gc.collect()
    assert consumer.freed_count() == before + 1


def test_from_data_failure_still_runs_the_deleter(consumer):
    before = consumer.freed_count()
    with pytest.raises(ValueError):
        consumer.bad_shape_with_deleter()
    assert consumer.freed_count() == before + 1


def test_from_data_with_an_owner_and_element_strides(consumer):
    buf = bytearray(np.arange(12, dtype=np.int32).tobytes())
    rc = sys.getrefcount(buf)
    a = consumer.columns_of(buf, 3, 4)
    assert sys.getrefcount(buf) == rc + 1  # the owner reference
    assert a.readonly and a.shape == (3, 2) and a.strides == (4, 2)
    assert np.from_dlpack(a).tolist() == [[0, 2], [4, 6], [8, 10]]
    del a
    gc.collect()
    assert sys.getrefcount(buf) == rc


def test_managed_tensor_round_trip_moves_ownership(consumer):
    x = np.arange(6.0)
    rc = sys.getrefcount(x)
    a = DLPackArray(x)
    flags, b = consumer.through_managed(a)
    assert flags == 0 and b.data_ptr == x.ctypes.data
    del a
    gc.collect()
    assert sys.getrefcount(x) > rc  # b keeps the memory alive
    del b
    gc.collect()
    assert sys.getrefcount(x) == rc
    ro = DLPackArray(b"12345678")
    flags, again = consumer.through_managed(ro)
    assert flags & 1 and again.readonly


def test_legacy_managed_tensor_is_adopted_and_deleted_once(consumer):
    before = consumer.freed_count()
    a = consumer.legacy_int16(4)
    assert np.from_dlpack(a).tolist() == [0, -1, -2, -3] and a.strides == (1,)
    del a
    gc.collect()
    assert consumer.freed_count() == before + 1
    with pytest.raises(ValueError):
        consumer.legacy_int16(4, valid=False)
    assert consumer.freed_count() == before + 2  # refused, and deleted at once


def test_capsules(consumer):
    a = DLPackArray(np.arange(3, dtype=np.uint8))
    cap = consumer.capsule(a, True)
    assert "dltensor_versioned" in repr(cap)
    assert np.from_dlpack(DLPackArray(cap)).tolist() == [0, 1, 2]
    assert "dltensor" in repr(consumer.capsule(a, False))
    with pytest.raises(BufferError, match="legacy"):
        consumer.capsule(DLPackArray(b"ro"), False)
    with pytest.raises(TypeError):
        consumer.capsule(b"not an array", True)


# -- the C++ extension against the header only ------------------------------------------------


def test_extension_produces_arrays_that_own_their_tensor(extension):
    assert extension.versions() == ((1, 1), (1, 1))
    before = extension.deleted()
    a = extension.produce(4)
    assert type(a) is extension.type() is DLPackArray and extension.check(a)
    assert np.from_dlpack(a).tolist() == [0.0, 0.5, 1.0, 1.5]
    assert extension.total(a[::2]) == 1.0  # a strided view, read through the DLTensor
    del a
    gc.collect()
    assert extension.deleted() == before + 1
    ro = extension.produce(2, True)
    assert ro.readonly
    flags, again = extension.hand_over(ro)
    assert flags & 1 and again.readonly
    del ro, again
    gc.collect()
    assert extension.deleted() == before + 2


def test_extension_major_mismatch_deletes_the_tensor(extension):
    before = extension.deleted()
    with pytest.raises(BufferError, match="version 2"):
        extension.produce(3, False, 2)
    assert extension.deleted() == before + 1


def test_extension_wraps_and_borrows(extension):
    data = b"\x01\x02\x03\x04"
    a = extension.borrow_data(data)
    assert a.shape == (2, 2) and a.readonly and np.from_dlpack(a).tolist() == [[1, 2], [3, 4]]
    x = np.ones(3, dtype=np.float32)
    assert extension.total(extension.wrap(x)) == 3.0
    assert extension.wrap(x, 1).data_ptr != x.ctypes.data  # COPY_ALWAYS
    assert extension.wrap(x, -1, "cpu").data_ptr == x.ctypes.data
    with pytest.raises(ValueError, match="copy must be"):
        extension.wrap(x, 7)
    with pytest.raises(TypeError, match="1-D float32"):
        extension.total(DLPackArray(bytearray(2)))
    with pytest.raises(TypeError, match="expected a dlpackarray.DLPackArray"):
        extension.total(x)
    assert not extension.check(x)
    assert "dltensor_versioned" in repr(extension.to_capsule(extension.wrap(x), True))


# -- C API 1.1: the Cython examples and the C++ extension ---------------------------------------


@pytest.fixture(params=["cython-c", "cython-cpp", "c++"])
def caller(request, consumer_c, consumer_cpp, extension):
    """The 1.1 functions as each downstream example calls them, with one Python signature."""
    if request.param == "c++":
        ext = extension
        return {
            "empty": lambda r, c, dev=1: ext.empty((r, c), 2, 32, dev),
            "contiguity": lambda a: (ext.is_contiguous(a, "C"), ext.is_contiguous(a, "F")),
            "bad_order": lambda a: ext.is_contiguous(a, "X"),
            "as_contiguous": ext.as_contiguous,
            "convert": lambda obj: ext.pair(obj, obj)[0],
            "on_stream": ext.on_stream,
        }
    mod = consumer_c if request.param == "cython-c" else consumer_cpp
    return {
        "empty": mod.empty_float32,
        "contiguity": mod.contiguity,
        "bad_order": mod.bad_order,
        "as_contiguous": mod.c_contiguous,
        "convert": lambda obj: mod.convert(obj)[1],
        "on_stream": mod.wrap_on_stream,
    }


def test_1_1_empty_is_a_new_c_contiguous_float32_array(caller):
    a = caller["empty"](3, 4)
    assert isinstance(a, DLPackArray) and a.shape == (3, 4) and a.strides == (4, 1)
    assert a.dtype == "float32" and not a.readonly and a.device == (1, 0)
    x = np.asarray(a)  # the array interface: NumPy before 2.2 imports DLPack read-only
    x[...] = 7
    assert np.from_dlpack(a).sum() == 84
    assert caller["empty"](3, 4).data_ptr != a.data_ptr
    with pytest.raises(ValueError, match="negative"):
        caller["empty"](-1, 4)
    with pytest.raises(BufferError, match="device type 4"):
        caller["empty"](1, 1, 4)


def test_1_1_contiguity_follows_the_python_properties(caller):
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    for view in (x, x.T, x[:, ::2], x[:, :1, :1], x[:0], np.asfortranarray(x)[:, 1:]):
        a = DLPackArray(view)
        assert caller["contiguity"](a) == (a.c_contiguous, a.f_contiguous), view.strides
    with pytest.raises(ValueError, match="order must be 'C' or 'F', got 'X'"):
        caller["bad_order"](DLPackArray(x))
    with pytest.raises(TypeError, match="expected a dlpackarray.DLPackArray"):
        caller["contiguity"](x)


def test_1_1_as_contiguous_returns_the_array_itself_or_a_c_copy(caller):
    x = np.arange(12.0).reshape(3, 4)
    a = DLPackArray(x)
    assert caller["as_contiguous"](a) is a
    t = DLPackArray(x.T)
    c = caller["as_contiguous"](t)
    assert c is not t and c.c_contiguous and c.data_ptr != x.ctypes.data
    assert np.from_dlpack(c).tolist() == x.T.tolist()
    ro = DLPackArray(np.frombuffer(b"abcdef", dtype=np.uint8)[::2])
    assert np.from_dlpack(caller["as_contiguous"](ro)).tobytes() == b"ace"
    with pytest.raises(TypeError, match="expected a dlpackarray.DLPackArray"):
        caller["as_contiguous"](x)


def test_1_1_converter_wraps_or_passes_through(caller):
    a = DLPackArray(np.arange(3))
    assert caller["convert"](a) is a
    x = np.arange(5, dtype=np.uint8)
    b = caller["convert"](x)
    assert isinstance(b, DLPackArray) and b.data_ptr == x.ctypes.data
    with pytest.raises(TypeError, match="cannot wrap a 'object'"):
        caller["convert"](object())


def test_1_1_converter_cleanup_releases_what_it_stored(extension):
    # "O&O&|i": the first conversion succeeds, a later argument fails; PyArg_ParseTuple calls
    # the converter again with NULL, which must drop the new array (and so its source).
    x = np.arange(4.0)
    for extra in [(object(),), (x, "not an int")]:
        rc = sys.getrefcount(x)
        failed = False
        try:
            extension.pair(x, *extra)
        except TypeError:
            failed = True  # the handler ends here, with the traceback and its frames
        gc.collect()
        assert failed and sys.getrefcount(x) == rc, extra
    rc = sys.getrefcount(x)
    a, b, n = extension.pair(x, DLPackArray(x), 3)
    assert n == 3 and a.data_ptr == b.data_ptr == x.ctypes.data
    del a, b
    gc.collect()
    assert sys.getrefcount(x) == rc


def test_1_1_converter_cleanup_from_cython(consumer):
    x = np.arange(2.0)
    r, out, cleared = consumer.convert(x)
    assert r == 0x20000 and cleared  # Py_CLEANUP_SUPPORTED; the cleanup call cleared the slot
    assert isinstance(out, DLPackArray) and out.data_ptr == x.ctypes.data


def test_1_1_from_object_on_stream_follows_the_constructor(caller):
    x = np.arange(6.0)
    assert caller["on_stream"](x, -1).data_ptr == x.ctypes.data
    with pytest.raises(ValueError, match="stream=1 is not valid for CPU data"):
        caller["on_stream"](x, 1)

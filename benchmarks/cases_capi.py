"""B10: wrap a raw pointer, export a managed tensor, consume it -- from C and Cython.

The timed statements call loops compiled at setup (``benchmarks/capi/``):
each call runs ``LOOP`` operations in C, and the harness divides by
``Contender.ops``, so the table shows ns per operation with the Python call
spread over ``LOOP`` of them.  One operation is always: wrap a static
float64[1024] buffer, export an owning ``DLManagedTensorVersioned`` from the
wrapper, consume it (check its data pointer and shape, call its deleter),
drop the wrapper.  The contenders differ in how they wrap and export:

- dlpackarray's C API, from C and from Cython: ``DLPackArray_FromData`` on
  the raw pointer, ``DLPackArray_ToManagedVersioned``;
- a producer's DLPack C exchange table (dlpackarray's, torch's, tvm-ffi's):
  ``managed_tensor_to_py_object_no_sync`` on a static managed tensor (the
  tables' only way to wrap memory) makes the producer's Python tensor, then
  ``managed_tensor_from_py_object_no_sync`` exports it;
- tvm-ffi's own C API: ``TVMFFITensorFromDLPackVersioned`` and
  ``TVMFFITensorToDLPackVersioned``, which create no Python object at all.

dlpackarray's modules must build (a failure ends the run: the case exists to
measure them); another project's contender that cannot be built or loaded
here is recorded as unsupported with the reason.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence

from benchmarks.harness import Case, Contender, Target

LOOP = 1000  # operations per timed call
SOURCES = pathlib.Path(__file__).parent / "capi"
_built: dict = {}  # module name -> module or the build error (one build per process)
_tmp: list[str] = []


def _build_dir() -> str:
    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="dlpackarray-b10-"))
        atexit.register(shutil.rmtree, _tmp[0], True)
    return _tmp[0]


def _compiler() -> str:
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"no C compiler ({name}) to build the B10 loops")
    return path


def _compile(
    name: str,
    sources: pathlib.Path | Sequence[pathlib.Path],
    include: list[str],
    link: list[str],
):
    """Builds ``sources`` (one C file or several) into the extension module ``name``
    and imports it."""
    import importlib.util

    if isinstance(sources, os.PathLike):
        sources = [sources]

    out = os.path.join(_build_dir(), name + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [_compiler(), "-std=gnu11", "-O2", "-shared", "-fPIC"]
    cmd += [f"-I{d}" for d in [sysconfig.get_paths()["include"], *include]]
    cmd += [*map(str, sources), "-o", out, *link]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"build of {name} failed: {proc.stderr.strip()[-2000:]}")
    spec = importlib.util.spec_from_file_location(name, out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cython(name: str, pyx: pathlib.Path, include: list[str]):
    import dlpackarray

    package_root = os.path.dirname(os.path.dirname(dlpackarray.__file__))
    c_file = os.path.join(_build_dir(), name + ".c")
    cmd = [sys.executable, "-m", "cython", "-3", "-I", package_root, "-o", c_file, str(pyx)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"cython of {name} failed: {proc.stderr.strip()[-2000:]}")
    return _compile(name, pathlib.Path(c_file), include, [])


def _module(name: str):
    """The built module, or the exception that stopped its build (cached)."""
    if name not in _built:
        try:
            _built[name] = _build(name)
        except Exception as exc:  # noqa: BLE001 -- reported per contender
            _built[name] = exc
    return _built[name]


def _build(name: str):
    import dlpackarray

    ours = [dlpackarray.get_include()]
    if name == "b10_c":
        return _compile(name, SOURCES / "b10_loops.c", ours, [])
    if name == "b10_cython":
        return _cython(name, SOURCES / "b10_cython.pyx", ours)
    if name == "b10_numpy":
        import numpy

        return _compile(name, SOURCES / "b10_numpy.c", [numpy.get_include()], [])
    if name == "b10_tvm":
        from tvm_ffi import libinfo

        lib = libinfo.find_libtvm_ffi()
        libdir = os.path.dirname(lib)
        return _compile(
            name,
            SOURCES / "b10_tvm.c",
            [libinfo.find_include_path(), libinfo.find_dlpack_include_path()],
            [f"-L{libdir}", "-ltvm_ffi", f"-Wl,-rpath,{libdir}"],
        )
    raise KeyError(name)


class _Unavailable:
    """Stands in for a contender's loop that could not be set up: calling it
    raises, so the harness records the contender as unsupported with why."""

    def __init__(self, why: str):
        self.why = why

    def __call__(self, *args):
        raise RuntimeError(self.why)


def _checked(loop, released_count, what: str):
    """``loop`` if a few operations release every wrapped tensor they made.

    The exchange-table and tvm-ffi loops reuse one static managed tensor: that
    is only sound if the producer released the previous wrap before the next
    one, which its deleter count shows.
    """
    before = released_count()
    loop(10)
    if released_count() - before != 10:
        return _Unavailable(f"{what}: the producer kept wrapped tensors alive; loop not sound")
    return loop


def _setup() -> dict:
    import dlpackarray

    ns = {}
    # Ours: must build.
    for name in ("b10_c", "b10_cython"):
        mod = _module(name)
        if isinstance(mod, Exception):
            raise mod
    c, cy = _built["b10_c"], _built["b10_cython"]
    ns["capi_c"] = c.loop_capi
    ns["capi_cython"] = cy.loop_capi

    def table_loop(tensor_type, what):
        try:
            capsule = tensor_type.__dlpack_c_exchange_api__
        except AttributeError:
            return _Unavailable(
                f"{tensor_type.__module__}.{tensor_type.__qualname__} publishes no "
                "__dlpack_c_exchange_api__ (this version only consumes other tables)"
            )
        return _checked(lambda n: c.loop_exchange(capsule, n), c.released_count, what)

    ns["table_dlpackarray"] = table_loop(dlpackarray.DLPackArray, "dlpackarray's table")
    try:
        import torch

        ns["table_torch"] = table_loop(torch.Tensor, "torch's table")
    except Exception as exc:  # noqa: BLE001 -- a missing contender library is reported
        ns["table_torch"] = _Unavailable(f"torch: {type(exc).__name__}: {exc}")
    try:
        import tvm_ffi

        ns["table_tvm"] = table_loop(tvm_ffi.Tensor, "tvm-ffi's table")
    except Exception as exc:  # noqa: BLE001
        ns["table_tvm"] = _Unavailable(f"tvm_ffi: {type(exc).__name__}: {exc}")
    tvm = _module("b10_tvm")
    if isinstance(tvm, Exception):
        ns["tvm_capi"] = _Unavailable(f"{type(tvm).__name__}: {tvm}")
    else:
        ns["tvm_capi"] = _checked(tvm.loop_tvm_capi, tvm.released_count, "tvm-ffi's C API")

    # B5's floor, for scale: one Python-level no-op method call plus one new
    # object (ops=1).
    import numpy as np

    ns["d"] = dlpackarray.DLPackArray(np.zeros(4))
    ns["LOOP"] = LOOP
    return ns


OURS = "dlpackarray C API (C)"


def _setup_from_object() -> dict:
    import numpy as np

    ns = {"x": np.zeros(1024), "LOOP": LOOP}
    c = _module("b10_c")
    if isinstance(c, Exception):
        raise c
    ns["from_object"] = c.loop_from_object
    npy = _module("b10_numpy")
    ns["from_any"] = (
        _Unavailable(f"{type(npy).__name__}: {npy}")
        if isinstance(npy, Exception)
        else npy.loop_from_any
    )
    try:
        import tvm_ffi

        ns["tvm_from_dlpack"] = tvm_ffi.from_dlpack
    except Exception as exc:  # noqa: BLE001
        ns["tvm_from_dlpack"] = _Unavailable(f"tvm_ffi: {type(exc).__name__}: {exc}")
    import dlpackarray

    ns["DLPackArray"] = dlpackarray.DLPackArray
    return ns


FROM_OBJECT = "dlpackarray DLPackArray_FromObject (C)"


def cases() -> list[Case]:
    def loop(label, fn, note):
        return Contender(label, f"{fn}(LOOP)", note, ops=LOOP)

    return [
        Case(
            family="B10",
            name="B10/wrap-export-consume",
            title=(
                "from C: wrap a raw float64[1024] pointer, export an owning "
                f"DLManagedTensorVersioned, consume it (ns per operation, {LOOP} per call)"
            ),
            setup=_setup,
            contenders=[
                loop(
                    OURS,
                    "capi_c",
                    "DLPackArray_FromData(ptr) + DLPackArray_ToManagedVersioned + deleter "
                    "+ Py_DECREF, loop in C",
                ),
                loop(
                    "dlpackarray C API (Cython)",
                    "capi_cython",
                    "the same calls through `cimport dlpackarray`, loop in Cython (C mode)",
                ),
                loop(
                    "dlpackarray exchange table",
                    "table_dlpackarray",
                    "DLPackArray.__dlpack_c_exchange_api__: managed_tensor_to_py_object_no_sync "
                    "(static managed tensor) + managed_tensor_from_py_object_no_sync + deleter "
                    "+ Py_DECREF",
                ),
                loop(
                    "torch exchange table",
                    "table_torch",
                    "the same through torch.Tensor.__dlpack_c_exchange_api__ (a torch.Tensor "
                    "is created and dropped per operation)",
                ),
                loop(
                    "tvm-ffi exchange table",
                    "table_tvm",
                    "the same through tvm_ffi.Tensor.__dlpack_c_exchange_api__",
                ),
                loop(
                    "tvm-ffi C API",
                    "tvm_capi",
                    "TVMFFITensorFromDLPackVersioned(static managed tensor) + "
                    "TVMFFITensorToDLPackVersioned + deleter + TVMFFIObjectDecRef; no Python "
                    "object is made",
                ),
                Contender(
                    "B5 floor (Python)",
                    "d.__dlpack_info__(); object()",
                    "B5's floor, one Python-level call and one new object per operation "
                    "(not a contender: a C caller does not pay the method call)",
                ),
            ],
            anchor=OURS,
            targets=[Target(OURS, "", "<=", 100.0, absolute=True)],
            required=True,
        ),
        Case(
            family="B10",
            name="B10/from-object",
            title=(
                "from C: accept a NumPy float64[1024] array as an array object and drop it "
                f"(ns per operation, {LOOP} per call)"
            ),
            setup=_setup_from_object,
            contenders=[
                Contender(
                    FROM_OBJECT,
                    "from_object(x, LOOP)",
                    "DLPackArray_FromObject(ndarray, COPY_IF_NEEDED, NULL) + Py_DECREF, loop in C "
                    "(a new DLPackArray per call)",
                    ops=LOOP,
                ),
                Contender(
                    "NumPy PyArray_FromAny (C)",
                    "from_any(x, LOOP)",
                    "PyArray_FromAny(ndarray, NULL, 0, 0, 0, NULL) + Py_DECREF: NumPy returns "
                    "its own array, no new object",
                    ops=LOOP,
                ),
                Contender(
                    "tvm-ffi from_dlpack (Python)",
                    "tvm_from_dlpack(x)",
                    "tvm_ffi.from_dlpack(ndarray): tvm-ffi has no C-level from-object call, so "
                    "this is its Python entry point (one Python call included)",
                ),
                Contender(
                    "dlpackarray DLPackArray(x) (Python)",
                    "DLPackArray(x)",
                    "the same from Python, for scale beside tvm-ffi's Python call",
                ),
            ],
            anchor=FROM_OBJECT,
            targets=[Target(FROM_OBJECT, "", "<=", 100.0, absolute=True)],
            required=True,
        ),
    ]

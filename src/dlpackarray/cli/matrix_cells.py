"""Producers, consumers and cases of the interop matrix (``python -m dlpackarray matrix``).

This module runs inside the matrix's worker processes: every optional library is imported
lazily, in the producer or consumer that needs it, so a missing library only makes its own
cells ``n/a`` and an abort costs one cell (see :mod:`dlpackarray.cli.matrix`).

A *case* is a NumPy reference array (a dtype or a layout).  A *producer* rebuilds it as its
own kind of object, or raises :class:`NotApplicable` when it cannot express it.  The cell
wraps that object in ``DLPackArray`` and hands it to a *consumer*, which returns its result
and the address of the result's first element (``None`` when it cannot tell).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class NotApplicable(Exception):
    """The producer cannot express the case (not a cell of the matrix)."""


# -- cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A reference array: ``dtype`` and ``layout`` say how to build it from NumPy."""

    name: str
    group: str  # "dtype" or "layout"
    dtype: str
    layout: str  # "contiguous", "0-d", "empty", "F-order", ...

    def build(self):
        """The NumPy reference array (values ``0, 1, 2, ...`` in the case's dtype)."""
        np = importlib.import_module("numpy")
        dt = _numpy_dtype(self.dtype)
        if self.layout == "contiguous":
            return _values(np, 12, dt)
        if self.layout == "0-d":
            return _values(np, 1, dt).reshape(())
        if self.layout == "empty":
            return np.zeros((0, 3), dtype=dt)
        if self.layout == "F-order":
            return _values(np, 12, dt).reshape(4, 3).T
        if self.layout == "strided":
            return _values(np, 24, dt)[::2]
        if self.layout == "negative strides":
            return _values(np, 12, dt)[::-1]
        if self.layout == "broadcast":
            return np.broadcast_to(_values(np, 4, dt), (3, 4))
        if self.layout == "read-only":
            x = _values(np, 12, dt).reshape(3, 4)
            x.flags.writeable = False
            return x
        if self.layout == "unaligned":
            x = _aligned(np, 12 * dt.itemsize + 1)[1:].view(dt).reshape(3, 4)
            x[...] = _values(np, 12, dt).reshape(3, 4)
            return x
        raise ValueError(f"unknown layout {self.layout!r}")


def _numpy_dtype(name: str):
    np = importlib.import_module("numpy")
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"):
        return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))
    return np.dtype(name)


def _values(np, n: int, dt):
    """``n`` values in a 64-byte aligned block.

    Some consumers copy data that is not 64-byte aligned (JAX), so a run-dependent
    allocation address would make the matrix change from run to run.
    """
    out = _aligned(np, n * dt.itemsize).view(dt)
    if dt == np.bool_:
        out[...] = np.arange(n) % 3 == 0
    else:
        out[...] = np.arange(n).astype(dt)
    return out


def _aligned(np, nbytes: int):
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes]


DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int4",
)
LAYOUTS = (
    "0-d",
    "empty",
    "F-order",
    "strided",
    "negative strides",
    "broadcast",
    "read-only",
    "unaligned",
)

CASES: tuple[Case, ...] = tuple(
    Case(f"{d} 1-D" if d != "float32" else "float32 1-D (contiguous)", "dtype", d, "contiguous")
    for d in DTYPES
) + tuple(Case(f"float32 {lay}", "layout", "float32", lay) for lay in LAYOUTS)

#: The ``--quick`` subset: the baseline, a few dtypes and the layouts consumers disagree on.
QUICK_PRODUCERS = (
    "memoryview",
    "numpy",
    "torch",
    "jax",
    "pyarrow",
    "__array_interface__ only",
    "legacy capsule",
)
QUICK_CASES = (
    "float32 1-D (contiguous)",
    "int64 1-D",
    "bool 1-D",
    "bfloat16 1-D",
    "float32 negative strides",
    "float32 read-only",
    "float32 F-order",
)


# -- producers -------------------------------------------------------------------------------

_STRUCT = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
}


def _stdlib_buffer(case: Case, ref):
    fmt: Any = _STRUCT.get(case.dtype)  # typeshed types cast() by literal formats only
    if fmt is None:
        raise NotApplicable(f"memoryview.cast has no format for {case.dtype}")
    if case.layout in ("F-order", "broadcast"):
        raise NotApplicable("a memoryview cannot be made N-D and non-contiguous by slicing")
    np = importlib.import_module("numpy")
    if case.layout in ("strided", "negative strides"):
        base = _values(np, 24 if case.layout == "strided" else 12, ref.dtype)
        m = _aligned_bytearray(base.tobytes()).cast(fmt)
        return m[::2] if case.layout == "strided" else m[::-1]
    data = ref.tobytes()
    if case.layout == "read-only":
        return memoryview(data).cast(fmt, list(ref.shape))
    if case.layout == "unaligned":
        return _aligned_bytearray(b"\0" + data)[1:].cast(fmt, list(ref.shape))
    return _aligned_bytearray(data).cast(fmt, list(ref.shape))


def _aligned_bytearray(data: bytes) -> memoryview:
    """A writable memoryview of ``data`` copied into a 64-byte aligned bytearray region."""
    import ctypes

    raw = bytearray(len(data) + 64)
    start = -ctypes.addressof(ctypes.c_char.from_buffer(raw)) % 64
    m = memoryview(raw)[start : start + len(data)]
    m[:] = data
    return m


def _array_array(case: Case, ref):
    import array

    codes = {
        "int8": "b",
        "uint8": "B",
        "int16": "h",
        "uint16": "H",
        "int32": "i",
        "uint32": "I",
        "int64": "q",
        "uint64": "Q",
        "float32": "f",
        "float64": "d",
    }
    if case.dtype not in codes or case.layout != "contiguous":
        raise NotApplicable("array.array holds 1-D contiguous machine numbers only")
    # array.array cannot be asked for alignment; allocate until one block is 64-byte aligned
    # (the others stay alive meanwhile) so the cell's result does not depend on the heap.
    tries = []
    for _ in range(256):
        out = array.array(codes[case.dtype], ref.tolist())
        if out.buffer_info()[0] % 64 == 0:
            return out
        tries.append(out)
    raise NotApplicable("no 64-byte aligned array.array after 256 tries")


def _numpy(case: Case, ref):
    return ref


def _torch(case: Case, ref):
    torch = importlib.import_module("torch")
    np = importlib.import_module("numpy")
    if case.layout == "read-only":
        raise NotApplicable("torch tensors have no read-only flag")
    if case.layout == "negative strides":
        raise NotApplicable("torch tensors cannot have negative strides")
    special = {
        "bfloat16": torch.bfloat16,
        "float8_e4m3fn": torch.float8_e4m3fn,
        "float8_e5m2": torch.float8_e5m2,
    }
    if case.dtype == "int4":
        raise NotApplicable("torch has no int4 tensors")
    if case.layout in ("F-order", "strided", "broadcast"):
        n = {"F-order": 12, "strided": 24, "broadcast": 4}[case.layout]
        t = _torch_from(torch, np, _values(np, n, ref.dtype), special.get(case.dtype))
        if case.layout == "F-order":
            return t.reshape(4, 3).T
        if case.layout == "strided":
            return t[::2]
        return t.expand(3, 4)
    return _torch_from(torch, np, ref, special.get(case.dtype))


def _torch_from(torch, np, x, special):
    if special is None:
        return torch.from_numpy(x)
    return torch.from_numpy(x.view(np.dtype(f"u{x.dtype.itemsize}"))).view(special)


def _jax(case: Case, ref):
    if case.layout not in ("contiguous", "0-d", "empty"):
        raise NotApplicable("JAX arrays are always dense and row-major")
    jnp = importlib.import_module("jax.numpy")
    return jnp.asarray(ref)


def _pyarrow(case: Case, ref):
    pa = importlib.import_module("pyarrow")
    if case.layout == "contiguous":
        return pa.array(ref)
    if case.layout == "empty":
        return pa.FixedShapeTensorArray.from_numpy_ndarray(ref)
    raise NotApplicable("Arrow arrays are contiguous columns (immutable: always read-only)")


def _polars(case: Case, ref):
    if case.layout != "contiguous":
        raise NotApplicable("a polars Series is a 1-D contiguous column")
    pl = importlib.import_module("polars")
    return pl.Series("x", ref)


def _nanoarrow(case: Case, ref):
    if case.layout != "contiguous":
        raise NotApplicable("a nanoarrow array is a 1-D contiguous column")
    na = importlib.import_module("nanoarrow")
    return na.c_array(ref)


def _tvm_ffi(case: Case, ref):
    tvm_ffi = importlib.import_module("tvm_ffi")
    return tvm_ffi.from_dlpack(ref)


def _pydlpack(case: Case, ref):
    return importlib.import_module("dlpack").asdlpack(ref)


def _pillow(case: Case, ref):
    if ref.ndim != 2 or case.dtype not in ("uint8", "int32", "float32") or ref.size == 0:
        raise NotApplicable("Pillow images are non-empty 2-D uint8, int32 or float32")
    image = importlib.import_module("PIL.Image")
    return image.fromarray(ref)


class _InterfaceOnly:
    def __init__(self, ref):
        self._ref = ref
        self.__array_interface__ = ref.__array_interface__


class _StructOnly:
    def __init__(self, ref):
        self._ref = ref
        self.__array_struct__ = ref.__array_struct__


class _ArrayMethodOnly:
    def __init__(self, ref):
        self._ref = ref

    def __array__(self, dtype=None, copy=None):
        return self._ref


def _versioned_capsule(case: Case, ref):
    return ref.__dlpack__(max_version=(1, 0))


def _legacy_capsule(case: Case, ref):
    return ref.__dlpack__()


@dataclass(frozen=True)
class Producer:
    name: str
    library: str  # import name whose presence the producer needs ("" = stdlib)
    make: Callable


PRODUCERS: tuple[Producer, ...] = (
    Producer("memoryview", "", _stdlib_buffer),
    Producer("array.array", "", _array_array),
    Producer("numpy", "numpy", _numpy),
    Producer("torch", "torch", _torch),
    Producer("jax", "jax", _jax),
    Producer("pyarrow", "pyarrow", _pyarrow),
    Producer("polars", "polars", _polars),
    Producer("nanoarrow", "nanoarrow", _nanoarrow),
    Producer("tvm-ffi", "tvm_ffi", _tvm_ffi),
    Producer("pydlpack", "dlpack", _pydlpack),
    Producer("Pillow", "PIL", _pillow),
    Producer("__array_interface__ only", "numpy", lambda c, r: _InterfaceOnly(r)),
    Producer("__array_struct__ only", "numpy", lambda c, r: _StructOnly(r)),
    Producer("__array__ only", "numpy", lambda c, r: _ArrayMethodOnly(r)),
    Producer("versioned capsule", "numpy", _versioned_capsule),
    Producer("legacy capsule", "numpy", _legacy_capsule),
)


# -- consumers -------------------------------------------------------------------------------


def _np_addr(x) -> int:
    return x.__array_interface__["data"][0]


def _arrow_leaf_addr(arr) -> int | None:
    """Address of the first value of a (possibly nested, extension) pyarrow array."""
    pa = importlib.import_module("pyarrow")
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return None
        arr = arr.chunk(0)
    while True:
        if isinstance(arr.type, pa.ExtensionType):
            arr = arr.storage
        elif pa.types.is_fixed_size_list(arr.type):
            arr = arr.flatten()
        else:
            break
    if pa.types.is_boolean(arr.type):
        return None  # bit-packed: never the same bytes as a bool tensor
    buffers = arr.buffers()
    if len(buffers) < 2 or buffers[1] is None:
        return None
    return buffers[1].address + arr.offset * arr.type.bit_width // 8


def _consume_numpy(a):
    np = importlib.import_module("numpy")
    r = np.from_dlpack(a)
    return r, _np_addr(r), r


def _consume_torch(a):
    torch = importlib.import_module("torch")
    r = torch.from_dlpack(a)
    return r, r.data_ptr(), None


def _consume_jax(a):
    jnp = importlib.import_module("jax.numpy")
    r = jnp.from_dlpack(a)
    return r, r.unsafe_buffer_pointer(), None


def _consume_tvm_ffi(a):
    tvm_ffi = importlib.import_module("tvm_ffi")
    r = tvm_ffi.from_dlpack(a)
    ptr = r.data_ptr() if callable(r.data_ptr) else r.data_ptr
    return r, ptr, None


def _consume_pyarrow(a):
    pa = importlib.import_module("pyarrow")
    r = pa.array(a)
    return r, _arrow_leaf_addr(r), None


def _consume_polars(a):
    pl = importlib.import_module("polars")
    r = pl.Series(a)
    # polars shares Arrow buffers; its own export shows which memory the Series holds.
    return r, _arrow_leaf_addr(r.to_arrow()), None


def _consume_duckdb(a):
    duckdb = importlib.import_module("duckdb")
    table = duckdb.from_arrow(a).to_arrow_table()
    return table, _arrow_leaf_addr(table.column(0)), None


def _consume_memoryview(a):
    r = memoryview(a)
    np = importlib.import_module("numpy")
    return r, _np_addr(np.asarray(r)), None


@dataclass(frozen=True)
class Consumer:
    name: str
    library: str
    call: str  # how the consumer is called, for the page
    consume: Callable


CONSUMERS: tuple[Consumer, ...] = (
    Consumer("numpy", "numpy", "numpy.from_dlpack(a)", _consume_numpy),
    Consumer("torch", "torch", "torch.from_dlpack(a)", _consume_torch),
    Consumer("jax", "jax", "jax.numpy.from_dlpack(a)", _consume_jax),
    Consumer("tvm-ffi", "tvm_ffi", "tvm_ffi.from_dlpack(a)", _consume_tvm_ffi),
    Consumer("pyarrow", "pyarrow", "pyarrow.array(a)", _consume_pyarrow),
    Consumer("polars", "polars", "polars.Series(a)", _consume_polars),
    Consumer("duckdb", "duckdb", "duckdb.from_arrow(a).to_arrow_table()", _consume_duckdb),
    Consumer("memoryview", "", "memoryview(a)", _consume_memoryview),
)


def source_addr(producer: str, obj, ref) -> int | None:
    """Address of the first element of the producer's own memory (``None``: cannot tell)."""
    if ref.size == 0:
        return None
    if producer == "torch":
        return obj.data_ptr()
    if producer == "jax":
        return obj.unsafe_buffer_pointer()
    if producer in ("pyarrow", "polars"):
        return _arrow_leaf_addr(obj if producer == "pyarrow" else obj.to_arrow())
    if producer == "nanoarrow":
        return obj.view().buffer(1).address if obj.length else None
    if producer == "memoryview":
        np = importlib.import_module("numpy")
        return _np_addr(np.asarray(obj))
    if producer == "array.array":
        return obj.buffer_info()[0]
    if producer == "Pillow":
        return None  # its array interface hands out a fresh bytes copy each time
    return _np_addr(ref)  # the NumPy-backed producers share the reference's memory


PRODUCER_BY_NAME = {p.name: p for p in PRODUCERS}
CONSUMER_BY_NAME = {c.name: c for c in CONSUMERS}
CASE_BY_NAME = {c.name: c for c in CASES}

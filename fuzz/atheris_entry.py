"""atheris harness over dlpackarray's Python entry points.

Each input is decoded into one of: an ``__array_interface__`` dict over a
real bytearray (known length), forged DLTensor fields in a ctypes capsule
(see tests/helpers/dlpack_ctypes.py), a capsule with an arbitrary name, or a buffer
typed by ``from_buffer``; every accepted array is then cut with fuzzed
index/reshape/transpose/view operations and copied.

Oracle: only the documented error kinds may escape (``ALLOWED``), a derived
view must stay inside its parent's bytes, and a copy of an array whose bytes
lie inside the backing buffer must equal NumPy's reading of them.  A crash
(segfault, abort) is a finding by itself.

Usage (docs/reliability.md):
    PYTHONPATH=<build>:tests/helpers python fuzz/atheris_entry.py -max_total_time=60 \
        -atheris_runs=0 fuzz/corpus/atheris
"""

from __future__ import annotations

import ctypes
import os
import sys

import atheris

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers")
)

import numpy as np

with atheris.instrument_imports(include=["dlpackarray"]):
    import dlpackarray
    from dlpackarray import DLPackArray

import dlpack_ctypes as dc  # noqa: E402

ALLOWED = (
    TypeError,
    ValueError,
    BufferError,
    OverflowError,
    IndexError,
    MemoryError,
    NotImplementedError,
)

BACKING = bytearray(256)
BACKING_ADDRESS = ctypes.addressof((ctypes.c_char * len(BACKING)).from_buffer(BACKING))
TYPESTRS = ["<f4", "<f8", "|u1", "|i1", "<i2", "<u4", "<i8", "|b1", "<c8", "<c16", "<f2", ">f4"]
DTYPES = ["float32", "float64", "uint8", "int16", "int64", "bool", "complex64", "bfloat16"]
# Wrong names only: a name of the other struct kind (a versioned struct in a
# "dltensor" capsule) is a producer lie no consumer can detect.
NAMES = [ctypes.create_string_buffer(n) for n in (b"x", b"used_dltensor", b"dltensor_")]


class _Iface:
    def __init__(self, iface):
        self.__array_interface__ = iface


def _extent(a):
    """[lo, hi) bytes touched, absolute; None for an empty array."""
    if a.size == 0:
        return None
    start = a.data_ptr + a.byte_offset
    lo = hi = start
    for n, s in zip(a.shape, a.strides, strict=True):
        step = s * a.itemsize * (n - 1)
        if step < 0:
            lo += step
        else:
            hi += step
    return lo, hi + a.itemsize


def _inside(ext, lo, hi):
    return ext is None or (lo <= ext[0] and ext[1] <= hi)


def _ints(fdp, n, lo=-3, hi=8):
    out = []
    for _ in range(n):
        if fdp.ConsumeIntInRange(0, 15) == 0:
            out.append(fdp.ConsumeInt(8))
        else:
            out.append(fdp.ConsumeIntInRange(lo, hi))
    return out


def _from_interface(fdp):
    ndim = fdp.ConsumeIntInRange(0, 4)
    iface = {
        "version": 3,
        "shape": tuple(_ints(fdp, ndim, 0, 8)),
        "typestr": fdp.PickValueInList(TYPESTRS),
        "data": BACKING,
    }
    if fdp.ConsumeBool():
        iface["strides"] = tuple(_ints(fdp, ndim, -32, 32))
    if fdp.ConsumeBool():
        iface["offset"] = fdp.ConsumeIntInRange(0, 300)
    return DLPackArray(_Iface(iface))


def _from_dltensor(fdp):
    ndim = fdp.ConsumeIntInRange(0, 4)
    if fdp.ConsumeIntInRange(0, 31) == 0:
        ndim = fdp.ConsumeIntInRange(-(2**31), 2**31 - 1)
    stored = ndim if 0 <= ndim <= 64 else 1
    shape = _ints(fdp, stored, -1, 8)
    strides = _ints(fdp, stored, -8, 8)
    code = fdp.ConsumeIntInRange(0, 20)
    bits = fdp.PickValueInList([8, 16, 32, 64, 128, 4, 0, 255])
    producer = dc.Producer(
        None,
        shape=shape,
        strides=strides,
        dtype=(code, bits, fdp.PickValueInList([1, 1, 1, 0, 2])),
        data=BACKING_ADDRESS + fdp.ConsumeIntInRange(0, 128),
        ndim=ndim,
        null_strides=fdp.ConsumeIntInRange(0, 7) == 0,
        byte_offset=fdp.ConsumeIntInRange(0, 64),
        versioned=fdp.ConsumeBool(),
        version=(fdp.ConsumeIntInRange(0, 2), fdp.ConsumeIntInRange(0, 5)),
        flags=fdp.ConsumeIntInRange(0, 7),
        null_shape=fdp.ConsumeIntInRange(0, 15) == 0,
    )
    name = NAMES[fdp.ConsumeIntInRange(0, len(NAMES) - 1)] if fdp.ConsumeBool() else None
    try:
        return DLPackArray(producer.capsule(name))
    except ALLOWED:
        if name is not None:
            # Never consumed and the capsule is gone: nothing can call the
            # deleter, so the producer's memory may go.
            dc._ALL_PRODUCERS.remove(producer)
        raise


def _prune_producers():
    # dlpack_ctypes keeps every producer forever (a late deleter must find
    # its struct); those whose deleter already ran are done.
    dc._ALL_PRODUCERS[:] = [p for p in dc._ALL_PRODUCERS if p.deleter_calls == 0]


def _from_buffer(fdp):
    n = fdp.ConsumeIntInRange(0, 4)
    shape = tuple(_ints(fdp, n, -1, 8)) if fdp.ConsumeBool() else None
    return DLPackArray.from_buffer(
        BACKING,
        fdp.PickValueInList(DTYPES),
        shape=shape,
        offset=fdp.ConsumeIntInRange(-2, 300),
    )


def _derive(fdp, a):
    op = fdp.ConsumeIntInRange(0, 4)
    if op == 0:
        key = []
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            kind = fdp.ConsumeIntInRange(0, 3)
            if kind == 0:
                key.append(fdp.ConsumeIntInRange(-10, 10))
            elif kind == 1:
                step = fdp.ConsumeIntInRange(-4, 4) or None
                key.append(slice(*_ints(fdp, 2, -10, 10), step))
            elif kind == 2:
                key.append(Ellipsis)
            else:
                key.append(None)
        return a[tuple(key)]
    if op == 1:
        return a.reshape(tuple(_ints(fdp, fdp.ConsumeIntInRange(0, 4), -1, 16)))
    if op == 2:
        return a.transpose(*_ints(fdp, a.ndim, -a.ndim - 1, a.ndim))
    if op == 3:
        return a.view(fdp.PickValueInList(DTYPES))
    return a.T


def TestOneInput(data: bytes) -> None:
    _prune_producers()
    fdp = atheris.FuzzedDataProvider(data)
    source = fdp.ConsumeIntInRange(0, 2)
    try:
        a = (_from_interface, _from_dltensor, _from_buffer)[source](fdp)
    except ALLOWED:
        return
    lo, hi = BACKING_ADDRESS, BACKING_ADDRESS + len(BACKING)
    # Only the interface and from_buffer paths know the length; a DLPack
    # producer may describe any bytes, so only those inside are read.
    if source != 1 and not _inside(_extent(a), lo, hi):
        raise AssertionError(f"accepted an array outside its buffer: {a!r}")
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        parent_ext = _extent(a)
        try:
            b = _derive(fdp, a)
        except ALLOWED:
            continue
        ext = _extent(b)
        if parent_ext is not None and not _inside(ext, *parent_ext):
            raise AssertionError(f"view {b!r} leaves its parent {a!r}")
        if parent_ext is None and ext is not None:
            raise AssertionError(f"view {b!r} of an empty array has elements")
        a = b
    if (
        _inside(_extent(a), lo, hi)
        and a.device == (dlpackarray.DLDeviceType.CPU, 0)
        and a.size * a.itemsize <= 1 << 20  # broadcast views can be huge when dense
    ):
        try:
            c = a.copy()
        except ALLOWED:
            return
        if a.dtype.name == "bfloat16":
            return
        try:
            expected = np.asarray(a)
        except ValueError:
            # NumPy caps size * itemsize of the non-zero extents at int64,
            # DLPack only the element count: (2**61, 0) float32 is ours only.
            return
        np.testing.assert_array_equal(np.asarray(c), expected)


def main():
    # The harness's own branches are the coverage signal on the Python side
    # (the Cython modules are not instrumented; the C++ core has its own
    # libFuzzer harness, fuzz/core_fuzz.cpp).
    atheris.instrument_all()
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

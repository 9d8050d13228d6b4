# cython: language_level=3, boundscheck=False, wraparound=False
"""Sums of any array-like object (NumPy, torch, CuPy on the host, buffers, ...).

The module cimports dlpackarray's public declarations and calls its C API: any object
dlpackarray accepts becomes a ``DLPackArray`` without a copy, and its ``DLTensor`` is read
in place, whatever the strides.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF

from dlpackarray.c_api cimport (
    DLPACKARRAY_COPY_IF_NEEDED, DLPackArray, DLPackArray_Converter, DLPackArray_FromObject,
    DLPackArray_GetDLTensor, DLPackArray_IsContiguous, DLTensor, import_dlpackarray,
    kDLBool, kDLCPU, kDLCUDAHost, kDLFloat, kDLInt, kDLUInt,
)

# Loads the C API table once; an ImportError here names the versions that do not fit.
import_dlpackarray()


cdef struct Acc:
    double f
    int64_t i
    uint64_t u


cdef void add(Acc* acc, const char* p, uint8_t code, uint8_t bits) noexcept nogil:
    if code == kDLFloat:
        acc.f += (<const double*>p)[0] if bits == 64 else (<const float*>p)[0]
    elif code == kDLInt:
        if bits == 8:
            acc.i += (<const int8_t*>p)[0]
        elif bits == 16:
            acc.i += (<const int16_t*>p)[0]
        elif bits == 32:
            acc.i += (<const int32_t*>p)[0]
        else:
            acc.i += (<const int64_t*>p)[0]
    elif code == kDLUInt:
        if bits == 8:
            acc.u += (<const uint8_t*>p)[0]
        elif bits == 16:
            acc.u += (<const uint16_t*>p)[0]
        elif bits == 32:
            acc.u += (<const uint32_t*>p)[0]
        else:
            acc.u += (<const uint64_t*>p)[0]
    else:  # kDLBool: one byte, 0 or 1
        acc.i += (<const uint8_t*>p)[0] != 0


cdef void walk(const DLTensor* t, const int64_t* strides, int32_t dim, const char* p,
               Acc* acc) noexcept nogil:
    # Strides count elements (DLPack); an extent of 0 anywhere means no element.
    cdef int64_t _k, step = strides[dim] * (t.dtype.bits // 8)
    for _k in range(t.shape[dim]):
        if dim + 1 == t.ndim:
            add(acc, p, t.dtype.code, t.dtype.bits)
        else:
            walk(t, strides, dim + 1, p, acc)
        p += step


cdef object sum_tensor(const DLTensor* t):
    cdef uint8_t code = t.dtype.code, bits = t.dtype.bits
    if t.device.device_type != kDLCPU and t.device.device_type != kDLCUDAHost:
        raise BufferError(f"total() reads host memory; this array is on device type "
                          f"{t.device.device_type}")
    if t.dtype.lanes != 1 or not (
        (code == kDLFloat and bits in (32, 64))
        or (code in (kDLInt, kDLUInt) and bits in (8, 16, 32, 64))
        or (code == kDLBool and bits == 8)
    ):
        raise TypeError(f"total() does not sum dtype code {code}, {bits} bits, "
                        f"{t.dtype.lanes} lanes")
    cdef int64_t contiguous[64]
    cdef const int64_t* strides = t.strides
    cdef int32_t d
    cdef Acc acc
    acc.f = 0.0
    acc.i = 0
    acc.u = 0
    if strides == NULL:  # a legacy producer's compact row-major layout
        if t.ndim > 64:
            raise ValueError("too many dimensions")
        if t.ndim:
            contiguous[t.ndim - 1] = 1
        for d in range(t.ndim - 2, -1, -1):
            contiguous[d] = contiguous[d + 1] * t.shape[d + 1]
        strides = contiguous
    with nogil:
        if t.ndim == 0:
            add(&acc, <const char*>t.data + t.byte_offset, code, bits)
        else:
            walk(t, strides, 0, <const char*>t.data + t.byte_offset, &acc)
    if code == kDLFloat:
        return acc.f
    if code == kDLUInt:
        return acc.u
    return acc.i


def total(obj):
    """Sum of every element of ``obj``, any array-like object on the host.

    Floats sum as ``float``; integers and booleans as ``int`` (64-bit wrap-around, as
    NumPy's ``sum`` of its 64-bit integers).
    """
    # A new reference to a DLPackArray viewing obj's memory (obj itself if it is one).
    cdef DLPackArray a = DLPackArray_FromObject(obj, DLPACKARRAY_COPY_IF_NEEDED, NULL)
    cdef DLTensor t
    # t borrows a's shape and strides: a stays alive until the sum is done.
    DLPackArray_GetDLTensor(a, &t, NULL)
    return sum_tensor(&t)


def describe(obj):
    """``(shape, (code, bits, lanes), readonly, c_contiguous)`` of ``obj``.

    Converts through ``DLPackArray_Converter``, the ``PyArg_ParseTuple("O&")`` converter,
    called directly here: it stores a new reference in ``slot``.
    """
    cdef PyObject* slot = NULL
    cdef DLTensor t
    cdef int readonly = 0
    DLPackArray_Converter(<PyObject*>obj, &slot)
    try:
        array = <object>slot
        DLPackArray_GetDLTensor(array, &t, &readonly)
        shape = tuple([t.shape[d] for d in range(t.ndim)])
        dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        return shape, dtype, bool(readonly), bool(DLPackArray_IsContiguous(array, b"C"))
    finally:
        Py_XDECREF(slot)

# cython: language_level=3, boundscheck=False, wraparound=False
"""Elements as Python scalars: item(), tolist() and the 0-d conversions.

Values are decoded from the memory by the C++ core (scalar.hpp), so no
third-party package is needed for any dtype, bfloat16 and float8 included.
"""
from cpython.object cimport PyObject
from libc.stdint cimport int64_t

from dlpackarray.abi cimport kDLBool, kDLComplex, kDLCPU, kDLInt, kDLUInt
from dlpackarray._internal cimport synchronize_for_host_read
from dlpackarray.core cimport TensorView, device_is_host_accessible, dtype_itemsize, view_size
from dlpackarray._internal cimport device_tuple
from dlpackarray._internal cimport as_int64
from dlpackarray._internal cimport require_memory

import sys

# Index arrays live on the stack; Cython needs a literal size, which must equal
# kMaxNdim (64) from tensor_view.hpp.
cdef enum:
    _MAX_NDIM = 64

# Every element and every nested list costs a list slot of one pointer, so a
# result with more objects than this cannot be built at all.
cdef Py_ssize_t _MAX_OBJECTS = (<Py_ssize_t>((<size_t>-1) >> 1)) // <Py_ssize_t>sizeof(PyObject*)

# What tolist() needs at least besides the list slots: each list's own object,
# and a new object per float or complex element (bools and small ints are
# shared objects: a slot each, nothing more).
cdef Py_ssize_t _LIST_BYTES = sys.getsizeof([])
cdef Py_ssize_t _FLOAT_BYTES = sys.getsizeof(0.5)
cdef Py_ssize_t _COMPLEX_BYTES = sys.getsizeof(0.5j)


cdef object _python_value(const Scalar& s):
    if s.kind == kScalarBool:
        return s.i != 0
    if s.kind == kScalarInt:
        return s.i
    if s.kind == kScalarUInt:
        return s.u
    if s.kind == kScalarFloat:
        return s.real
    return complex(s.real, s.imag)


cdef int _check_host(const TensorView* v) except -1:
    if not device_is_host_accessible(v.device):
        raise BufferError(
            f"cannot read the elements of data on device {device_tuple(v.device)}: only "
            "host-accessible memory can be read; copy it to the host first with "
            "DLPackArray(x, device='cpu')")
    if v.device.device_type != kDLCPU:
        synchronize_for_host_read(v)  # CUDA hook: pinned/managed memory
    return 0


cdef object _element(const TensorView* v, const int64_t* index):
    return _python_value(load_scalar(v.dtype, element_address(v[0], index)))


cdef object _first(const TensorView* v):
    """The element at index (0, ..., 0) of a non-empty view."""
    cdef int64_t index[_MAX_NDIM]
    cdef int d
    for d in range(v.ndim):
        index[d] = 0
    _check_host(v)
    return _element(v, index)


cdef object item_of(const TensorView* v, tuple args):
    cdef int64_t index[_MAX_NDIM]
    cdef Py_ssize_t n, d
    _check_host(v)
    if len(args) == 1 and type(args[0]) is tuple:
        args = <tuple>args[0]
    n = len(args)
    if n == 0:
        if view_size(v[0]) != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return _first(v)
    if n == 1:
        # One integer is a flat index in C order, whatever the dimensions.
        unravel_flat_index(v[0], as_int64(args[0], "index"), index)
        return _element(v, index)
    if n != v.ndim:
        raise ValueError(
            f"incorrect number of indices for array: {n} given, the array has {v.ndim} "
            "dimensions")
    for d in range(n):
        index[d] = normalize_index(v[0], <int>d, as_int64(args[d], "index"))
    return _element(v, index)


cdef object _nested(const TensorView* v, int d, const char* p, int64_t itemsize):
    cdef int64_t i
    cdef int64_t n = v.shape[d]
    cdef int64_t stride = v.strides[d]
    cdef list out = []
    # i * stride is an element offset inside the validated extent; only then
    # is it scaled to bytes (a length-1 dimension may carry any stride).
    if d == v.ndim - 1:
        for i in range(n):
            out.append(_python_value(load_scalar(v.dtype, p + i * stride * itemsize)))
    else:
        for i in range(n):
            out.append(_nested(v, d + 1, p + i * stride * itemsize, itemsize))
    return out


cdef object tolist_of(const TensorView* v):
    cdef int d
    cdef object objects = 0
    cdef object level = 1
    _check_host(v)
    if v.ndim == 0:
        return _first(v)
    # Counted in Python ints: shapes such as (2**62, 0) have size 0 but would
    # still need 2**62 lists.
    for d in range(v.ndim):
        level *= v.shape[d]
        objects += level
    if objects > _MAX_OBJECTS:
        raise MemoryError(
            f"tolist() of an array of shape {tuple([v.shape[d] for d in range(v.ndim)])} "
            "needs more list entries than a Python list can hold")
    # A broadcast view's elements need not exist in memory; their Python
    # objects must, so a result larger than the process can hold is refused
    # before the first element is built.
    nested = objects - level  # lists inside the outermost one
    per_element = (0 if v.dtype.code == kDLBool or v.dtype.code == kDLInt
                   or v.dtype.code == kDLUInt
                   else _COMPLEX_BYTES if v.dtype.code == kDLComplex else _FLOAT_BYTES)
    require_memory(objects * sizeof(PyObject*) + (nested + 1) * _LIST_BYTES
                   + level * per_element, level, "tolist()")
    return _nested(v, 0, <const char*>v.data + v.byte_offset, dtype_itemsize(v.dtype))


cdef object scalar_of(const TensorView* v):
    if v.ndim != 0:
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return _first(v)


cdef object index_of(const TensorView* v):
    if v.ndim != 0 or (v.dtype.code != kDLInt and v.dtype.code != kDLUInt):
        raise TypeError("only integer scalar arrays can be converted to a scalar index")
    return _first(v)


cdef bint truth_of(const TensorView* v) except -1:
    cdef int64_t size = view_size(v[0])
    if size == 0:
        raise ValueError(
            "The truth value of an empty array is ambiguous. Use `array.size > 0` to check "
            "that an array is not empty.")
    if size != 1:
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous.")
    return bool(_first(v))


cdef bint _contains(const TensorView* v, int d, const char* p, int64_t itemsize,
                    object value) except -1:
    cdef int64_t i
    cdef int64_t stride = v.strides[d]
    # A stride-0 dimension repeats one element: reading it once is enough.
    cdef int64_t n = 1 if stride == 0 else v.shape[d]
    for i in range(n):
        if d == v.ndim - 1:
            if _python_value(load_scalar(v.dtype, p + i * stride * itemsize)) == value:
                return True
        elif _contains(v, d + 1, p + i * stride * itemsize, itemsize, value):
            return True
    return False


cdef bint contains_of(const TensorView* v, object value) except -1:
    """``value in a``: whether some element equals ``value`` (NumPy's
    ``(a == value).any()`` for a scalar).  Each distinct element is compared
    once: a broadcast view of 2**40 copies of one byte reads one byte."""
    _check_host(v)
    if view_size(v[0]) == 0:
        return False
    if v.ndim == 0:
        return bool(_first(v) == value)
    return _contains(v, 0, <const char*>v.data + v.byte_offset, dtype_itemsize(v.dtype), value)

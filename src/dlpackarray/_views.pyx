# cython: language_level=3, boundscheck=False, wraparound=False
"""Zero-copy views: parse Python keys/shapes/axes and hand them to view_ops.hpp."""
from operator import index as _operator_index

from cpython.slice cimport PySlice_Unpack
from libc.stdint cimport int32_t, int64_t

from dlpackarray.abi cimport DLDataType
from dlpackarray.core cimport TensorView, kMaxNdim
from dlpackarray._internal cimport parse_dtype

# IndexItem arrays live on the stack; Cython needs a literal size, which must
# equal kMaxIndexItems (2 * 64 + 1) from view_ops.hpp.
cdef enum:
    _MAX_ITEMS = 129


cdef int64_t as_int64(object x, str what) except? -1:
    """An integer argument (int or any ``__index__`` object, not bool) as int64."""
    if type(x) is not int:
        if isinstance(x, bool):
            raise TypeError(f"{what} must be an integer, got a bool")
        try:
            x = _operator_index(x)
        except TypeError:
            raise TypeError(f"{what} must be an integer, got {type(x).__name__}") from None
    try:
        return <int64_t>x
    except OverflowError:
        raise OverflowError(f"{what} = {x} does not fit in int64") from None


cdef int _bad_index(type t) except -1:
    raise IndexError(
        "only integers, slices (`:`), Ellipsis (`...`) and None are valid DLPackArray "
        f"indices, got {t.__name__}; advanced (integer-array or boolean) indexing "
        "would copy and is not supported")


cdef int index_into(const TensorView* v, object key, TensorView* out) except -1:
    cdef IndexItem items[_MAX_ITEMS]
    cdef tuple keys = <tuple>key if type(key) is tuple else (key,)
    cdef Py_ssize_t n = len(keys), i
    cdef Py_ssize_t start, stop, step
    if n > _MAX_ITEMS or n > kMaxIndexItems:
        raise IndexError(f"an index of {n} items cannot be valid for a DLPackArray")
    for i in range(n):
        k = keys[i]
        t = type(k)
        if t is slice:
            PySlice_Unpack(k, &start, &stop, &step)
            items[i].kind = kIndexSlice
            items[i].start = start
            items[i].stop = stop
            items[i].step = step
        elif k is Ellipsis:
            items[i].kind = kIndexEllipsis
        elif k is None:
            items[i].kind = kIndexNewAxis
        elif t is int or (not isinstance(k, bool) and hasattr(t, "__index__")):
            items[i].kind = kIndexInteger
            try:
                items[i].start = as_int64(k, "index")
            except OverflowError:
                raise IndexError(f"index {k} is out of bounds") from None
            except TypeError:
                # Arrays define __index__ but refuse it unless 0-d integer.
                _bad_index(t)
        else:
            _bad_index(t)
    index_view(v[0], items, <int32_t>n, out)
    return 0


cdef tuple _int_args(tuple args, str what):
    """``f(2, 3)`` and ``f((2, 3))`` / ``f([2, 3])`` spellings -> a tuple."""
    if len(args) == 1 and not isinstance(args[0], int) and not hasattr(type(args[0]), "__index__"):
        seq = args[0]
        if not isinstance(seq, (tuple, list)):
            raise TypeError(f"{what} must be integers or one tuple/list of integers, "
                            f"got {type(seq).__name__}")
        return tuple(seq)
    return args


cdef int reshape_into(const TensorView* v, tuple args, object order, TensorView* out) except -1:
    cdef int64_t shape[64]
    cdef int64_t axes[64]
    cdef TensorView flipped, reshaped
    cdef tuple dims = _int_args(args, "reshape dimensions")
    cdef Py_ssize_t n = len(dims), i
    if n > kMaxNdim:
        raise ValueError(f"cannot reshape into {n} dimensions; at most {kMaxNdim} are supported")
    for i in range(n):
        shape[i] = as_int64(dims[i], f"reshape dimension {i}")
    if order == "C":
        reshape_view(v[0], shape, <int32_t>n, out)
    elif order == "F":
        # Fortran order is C order on the reversed axes: flip, reshape to the
        # reversed shape, flip back.
        for i in range(v.ndim):
            axes[i] = v.ndim - 1 - i
        permute_view(v[0], axes, v.ndim, &flipped)
        for i in range(n // 2):
            shape[i], shape[n - 1 - i] = shape[n - 1 - i], shape[i]
        reshape_view(flipped, shape, <int32_t>n, &reshaped)
        for i in range(n):
            axes[i] = n - 1 - i
        permute_view(reshaped, axes, <int32_t>n, out)
    else:
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    return 0


cdef int permute_into(const TensorView* v, tuple args, bint reverse_if_empty,
                      TensorView* out) except -1:
    cdef int64_t axes[64]
    cdef Py_ssize_t n, i
    cdef tuple given = _int_args(args, "axes")
    if len(given) == 0 and reverse_if_empty:
        for i in range(v.ndim):
            axes[i] = v.ndim - 1 - i
        n = v.ndim
    else:
        n = len(given)
        if n > kMaxNdim:
            raise ValueError(f"{n} axes given; at most {kMaxNdim} dimensions are supported")
        for i in range(n):
            axes[i] = as_int64(given[i], f"axis {i}")
    permute_view(v[0], axes, <int32_t>n, out)
    return 0


cdef int reinterpret_into(const TensorView* v, object dtype, TensorView* out) except -1:
    cdef DLDataType dt = parse_dtype(dtype)
    dtype_view(v[0], dt, out)
    return 0

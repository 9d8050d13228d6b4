# cython: language_level=3
from libc.stdint cimport int32_t, int64_t

from dlpackarray.abi cimport DLDataType
from dlpackarray.core cimport TensorView, raise_py_error


cdef extern from "dlpackarray/view_ops.hpp" namespace "dla" nogil:
    cdef cppclass IndexItem:
        int32_t kind
        int64_t start
        int64_t stop
        int64_t step

    const int32_t kIndexInteger "dla::IndexItem::kInteger"
    const int32_t kIndexSlice "dla::IndexItem::kSlice"
    const int32_t kIndexEllipsis "dla::IndexItem::kEllipsis"
    const int32_t kIndexNewAxis "dla::IndexItem::kNewAxis"
    const int32_t kMaxIndexItems

    void index_view(const TensorView& v, const IndexItem* items, int32_t nitems,
                    TensorView* out) except +raise_py_error
    void reshape_view(const TensorView& v, const int64_t* shape, int32_t ndim,
                      TensorView* out) except +raise_py_error
    void permute_view(const TensorView& v, const int64_t* axes, int32_t naxes,
                      TensorView* out) except +raise_py_error
    void dtype_view(const TensorView& v, DLDataType dtype, TensorView* out) except +raise_py_error


cdef int64_t as_int64(object x, str what) except? -1

# Python-level argument parsing around the C++ view arithmetic; each fills
# `out` with a descriptor over the same memory as `v`.
cdef int index_into(const TensorView* v, object key, TensorView* out) except -1
cdef int reshape_into(const TensorView* v, tuple args, object order, TensorView* out) except -1
cdef int permute_into(const TensorView* v, tuple args, bint reverse_if_empty,
                      TensorView* out) except -1
cdef int reinterpret_into(const TensorView* v, object dtype, TensorView* out) except -1

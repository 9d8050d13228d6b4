# cython: language_level=3
from libc.stdint cimport int64_t, intptr_t

from dlpackarray.core cimport TensorView, raise_py_error


cdef extern from "dlpackarray/array_interface.hpp" namespace "dla" nogil:
    # NumPy's PyArrayInterface, the payload of __array_struct__ capsules.
    cdef struct ArrayInterfaceStruct:
        int two
        int nd
        char typekind
        int itemsize
        int flags
        intptr_t* shape
        intptr_t* strides
        void* data
        void* descr

    const int kArrayCContiguous
    const int kArrayFContiguous
    const int kArrayAligned
    const int kArrayNotSwapped
    const int kArrayWriteable
    const int kArrHasDescr

    void view_from_array_struct(const ArrayInterfaceStruct& s,
                                TensorView* out) except +raise_py_error
    int array_struct_flags(const TensorView& v) except +raise_py_error
    ArrayInterfaceStruct* new_array_struct(const TensorView& v) except +raise_py_error
    void free_array_struct(ArrayInterfaceStruct* s)


# Import: each fills `out` and returns the object that keeps the memory alive.
cdef object view_from_array_interface(object obj, object iface, TensorView* out)
cdef object view_from_array_struct_capsule(object obj, object capsule, TensorView* out)
cdef object view_from_typed_buffer(object obj, object dtype, object shape, object strides,
                                   object offset, TensorView* out)
# An extension dtype's data after its producer refused it (the owner, or None when the
# refusal stands): from the refused array struct or interface, or from a refused __dlpack__.
cdef object view_from_extension_interface(object obj, TensorView* out)
cdef object view_from_extension_dtype(object obj, object named, TensorView* out)
# ``obj.__array__`` called NumPy-2 style; returns (array, freshly_copied).
cdef tuple call_array_method(object obj, object copy)

# Export of a view whose memory `keepalive` keeps alive; for export_numpy,
# `keepalive` must be the DLPackArray holding `v` (its buffer is used).
cdef dict export_array_interface(const TensorView* v, tuple shape)
cdef object export_array_struct(const TensorView* v, object keepalive)
cdef object export_numpy(const TensorView* v, tuple shape, object keepalive, object dtype,
                         object copy)

# cython: language_level=3
from dlpackarray.core cimport TensorView


cdef bint is_dlpack_capsule(object obj)
cdef object view_from_capsule(object capsule, TensorView* out, bint* copied)
cdef void release_adopted(object capsule) noexcept
cdef object request_capsule(object obj, object dl_device, object copy, object stream=*)
cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy)

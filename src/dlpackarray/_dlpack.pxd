# cython: language_level=3
from cpython.object cimport PyObject

from dlpackarray.core cimport TensorView


cdef bint is_dlpack_capsule(object obj)
cdef object view_from_capsule(object capsule, TensorView* out, bint* copied)
cdef void release_adopted(object capsule) noexcept
cdef PyObject* request_common(object obj) noexcept
cdef object request_capsule(object obj, object dl_device, object copy, object stream=*,
                            bint pending=*)
# Whether type(obj).__dlpack__'s signature names max_version (False where it does not say).
cdef bint takes_max_version(type t) except -1
# Whether a __dlpack__ max_version asks for the versioned struct; TypeError
# for a malformed one (export_capsule's first check, shared with _fastcall).
cdef bint is_versioned_request(object max_version) except -1
cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy)

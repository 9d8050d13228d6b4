# cython: language_level=3
from cpython.object cimport PyObject
from libcpp cimport bool as cbool

from dlpackarray.core cimport TensorView, consume_dlpack_capsule


cdef bint is_dlpack_capsule(object obj)
# Names what a capsule that consume_dlpack_capsule refused is (cold path).
cdef int raise_not_dlpack(object capsule) except -1


cdef inline object view_from_capsule(object capsule, TensorView* out, bint* copied):
    """Consumes a "dltensor"/"dltensor_versioned" capsule exactly once.

    Returns the capsule itself as the owner: once renamed to ``used_*`` it is
    adopted (its destructor now calls the tensor's deleter), so no separate
    owner object is allocated on this hot path.  ``copied`` receives the
    producer's IS_COPIED flag.  The core does the whole consumption; only a
    capsule it does not recognise comes back, to be named.  (Inline: every
    DLPack import calls it from another module.)
    """
    cdef cbool c
    if not consume_dlpack_capsule(capsule, out, &c):
        raise_not_dlpack(capsule)
    copied[0] = c
    return capsule
cdef void release_adopted(object capsule) noexcept
cdef PyObject* request_common(object obj) noexcept
cdef object request_capsule(object obj, object dl_device, object copy, object stream=*,
                            bint pending=*)
# Whether type(obj).__dlpack__'s signature names max_version (False where it does not say).
cdef bint takes_max_version(type t) except -1
# Whether a __dlpack__ max_version asks for the versioned struct; TypeError
# for a malformed one (export_capsule's first check, shared with _fast_entries).
cdef bint is_versioned_request(object max_version) except -1
cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy)

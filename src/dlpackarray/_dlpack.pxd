# cython: language_level=3
from dlpackarray.abi cimport DLManagedTensor, DLManagedTensorVersioned
from dlpackarray.core cimport TensorView


cdef class ManagedOwner:
    """Owns a consumed DLPack managed tensor; its deleter runs on dealloc."""
    cdef DLManagedTensorVersioned* versioned
    cdef DLManagedTensor* legacy
    cdef readonly bint copied


cdef bint is_dlpack_capsule(object obj)
cdef ManagedOwner view_from_capsule(object capsule, TensorView* out)
cdef object request_capsule(object obj, object dl_device, object copy)
cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy)

# cython: language_level=3, boundscheck=False, wraparound=False
"""The DLPack C exchange API, consumer side, and adoption of managed tensors
handed over in C (shared by the exchange API and the public C API)."""
from cpython.long cimport PyLong_AsVoidPtr
from cpython.object cimport PyObject, PyTypeObject
from cpython.type cimport PyType_IsSubtype
from cpython.pycapsule cimport PyCapsule_CheckExact, PyCapsule_GetPointer, PyCapsule_IsValid

from dlpackarray._internal cimport _PyType_Lookup
from dlpackarray.abi cimport DLManagedTensor, DLManagedTensorVersioned, DLPackExchangeAPI, kDLCPU
from libcpp cimport bool as cbool

from dlpackarray.core cimport kCapsuleExchangeApi, kDLPackMajorVersion
from dlpackarray.core cimport (
    TensorView, adopt_managed_legacy, adopt_managed_versioned, call_versioned_deleter,
    release_adopted_capsule, view_from_managed,
)

import sys

cdef DLPackExchangeAPI _own_api


cdef DLPackExchangeAPI* own_exchange_api() noexcept:
    return &_own_api


cdef object view_from_managed_versioned(DLManagedTensorVersioned* m, TensorView* out,
                                        bint* copied):
    cdef cbool c = False
    # Adopt first: from here on every exit, error or not, leaves the deleter
    # to the owner capsule (run at once by release_adopted_capsule on refusal).
    owner = adopt_managed_versioned(m)
    try:
        view_from_managed(m[0], out, &c)
    except BaseException:
        release_adopted_capsule(owner)
        raise
    copied[0] = c
    return owner


cdef object view_from_managed_legacy(DLManagedTensor* m, TensorView* out):
    owner = adopt_managed_legacy(m)
    try:
        view_from_managed(m[0], out)
    except BaseException:
        release_adopted_capsule(owner)
        raise
    return owner


# -- consumer: the exchange table of a type (cached by _import.pyx) ---------------
cdef str _ATTR_CAPSULE = "__dlpack_c_exchange_api__"  # DLPack 1.3
cdef str _ATTR_INT = "__c_dlpack_exchange_api__"      # DLPack 1.2 era: address as int


cdef const DLPackExchangeAPI* _lookup(PyTypeObject* t) except? NULL:
    cdef const DLPackExchangeAPI* api = NULL
    cdef PyObject* found = _PyType_Lookup(t, <PyObject*>_ATTR_CAPSULE)
    if found != NULL:
        attr = <object>found
        if PyCapsule_CheckExact(attr) and PyCapsule_IsValid(attr, kCapsuleExchangeApi):
            api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(attr, kCapsuleExchangeApi)
    else:
        found = _PyType_Lookup(t, <PyObject*>_ATTR_INT)
        if found != NULL and isinstance(<object>found, int):
            try:
                api = <const DLPackExchangeAPI*>PyLong_AsVoidPtr(<object>found)
            except (OverflowError, ValueError):
                api = NULL
    if api == NULL:
        return NULL
    # Only tables this consumer can read: same major, the function it calls.
    if (api.header.version.major != kDLPackMajorVersion
            or api.managed_tensor_from_py_object_no_sync == NULL):
        return NULL
    if api == &_own_api:
        # A foreign type carrying our table: our provider would just run the
        # ordinary import on the object (and land here again).
        return NULL
    return api


cdef const DLPackExchangeAPI* exchange_api_of(type t) except? NULL:
    return _lookup(<PyTypeObject*>t)


cdef object view_from_exchange(const DLPackExchangeAPI* api, object obj, TensorView* out,
                               bint* copied):
    cdef DLManagedTensorVersioned* m = NULL
    if _torch_state_not_in_table(obj, type(obj)):
        return None
    if api.managed_tensor_from_py_object_no_sync(<void*><PyObject*>obj, &m) != 0 or m == NULL:
        # The Python path gives the producer's own answer to the same
        # request (torch's table raises RuntimeError where __dlpack__ raises
        # BufferError), so a refusal is never reported from here.
        _drop_refusal()
        return None
    if m.dl_tensor.device.device_type != kDLCPU:
        # The exchange functions do not synchronise and the consumer must;
        # until dlpackarray can wait on device streams, device data takes the
        # __dlpack__ path, whose stream handshake makes the producer do it.
        call_versioned_deleter(m)
        return None
    return view_from_managed_versioned(m, out, copied)


# torch 2.13's table exports what its __dlpack__ refuses: tensors that require
# gradients, and tensors whose conjugate or negative bit is set -- as their
# *stored* values, without the pending conjugation or negation, i.e. silently
# wrong numbers.  Those bits are invisible through the C table, so torch
# tensors that require gradients or are conjugated take the __dlpack__ path,
# which refuses them with torch's own message; negated ones are refused here.
# Three attribute reads (~0.1 us) against the several microseconds the table
# saves; pinned tensors (below) add an is_pinned() query where CUDA is in use.
cdef object _torch_tensor_type = None


cdef bint _torch_state_not_in_table(object obj, type t) except -1:
    global _torch_tensor_type
    if _torch_tensor_type is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False  # a torch tensor cannot exist before torch is imported
        _torch_tensor_type = torch.Tensor
    if not PyType_IsSubtype(t, <type>_torch_tensor_type):
        return False
    if obj.is_neg():
        # torch's __dlpack__ exports these unresolved too (NumPy then reads
        # the negated numbers): refuse rather than hand out wrong values.
        raise BufferError(
            "this torch tensor has its negative bit set (a lazily negated view, e.g. the "
            "imaginary part of a conjugated tensor): neither torch's DLPack export nor its C "
            "exchange table applies the negation; call resolve_neg() first")
    if obj.requires_grad or obj.is_conj():
        return True
    # A pinned tensor leaves the table labelled CPU, and the table never
    # synchronises: a non-blocking copy into it may still be running (seen on
    # an H100).  Its __dlpack_device__ says CUDA_HOST, which the __dlpack__
    # path waits for (ready_after_request).  pin_memory() alone leaves
    # torch.cuda._initialized False (H100, torch 2.11), but no torch work can
    # be pending into it before a CUDA tensor exists, whose creation (also by
    # from_dlpack) initialises it: other processes skip the is_pinned() query.
    return _torch_cuda_initialised() and bool(obj.is_pinned())


cdef object _torch_cuda = None


cdef bint _torch_cuda_initialised() except -1:
    global _torch_cuda
    if _torch_cuda is None:
        _torch_cuda = sys.modules.get("torch.cuda")
        if _torch_cuda is None:
            return False
    # A torch without the flag: ask every time rather than miss pinned memory.
    return bool(getattr(_torch_cuda, "_initialized", True))


cdef extern from "Python.h":
    PyObject* PyErr_Occurred()
    void PyErr_Clear()
    int PyErr_ExceptionMatches(PyObject* exc)


cdef int _drop_refusal() except -1:
    """Clears a producer's error, but lets KeyboardInterrupt & co. through."""
    if PyErr_Occurred() != NULL and not PyErr_ExceptionMatches(<PyObject*>Exception):
        return -1  # propagates the exception that is set
    PyErr_Clear()
    return 0

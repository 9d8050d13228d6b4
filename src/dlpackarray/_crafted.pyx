# cython: language_level=3
"""C callbacks behind the consumer checker's crafted producers (dlpackarray.testing.consumer).

The checker builds DLPack managed tensors and Arrow C structs in memory it owns (ctypes)
and hands them to a consumer.  The functions a consumer calls back -- a DLPack deleter,
an Arrow release callback, the stream callbacks, and the capsule destructors the
specifications prescribe -- are written here in C so that they need neither the GIL nor
a Python frame: the DLPack spec allows a deleter to run on any thread without the GIL,
and a capsule destructor may run while the consumer has an exception in flight.

Each struct points (``manager_ctx`` / ``private_data``) at a *tally*, a block of int64
slots the checker reads back:

``[0]``  calls of the deleter / release callback,
``[1]``  address of the bytes to poison on the first call (0: none),
``[2]``  how many bytes,
``[3]``  calls made by the capsule destructor (not by the consumer),
``[4]``  (streams) address of the ArrowSchema template handed out by ``get_schema``,
``[5]``  (streams) address of the ArrowArray template handed out once by ``get_next``,
``[6]``  (streams) ``get_next`` calls, ``[7]`` ``get_schema`` calls.

Poisoning (0xDD) on release stands in for freeing: the memory stays the checker's, so a
consumer that reads after release reads wrong values instead of crashing the checker.
"""

from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.string cimport memcpy, memset

from dlpackarray.abi cimport (
    DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackCurrentWorkStream,
    DLPackDLTensorFromPyObjectNoSync, DLPackExchangeAPI, DLPackManagedTensorAllocator,
    DLPackManagedTensorFromPyObjectNoSync, DLPackManagedTensorToPyObjectNoSync, DLPackSetError,
    DLTensor,
)
from dlpackarray.core cimport kDLPackMajorVersion, kDLPackMinorVersion
# The Arrow C data and stream interfaces' structs, declared once for the package.
from dlpackarray._internal cimport ArrowArray, ArrowArrayStream, ArrowSchema

cdef enum:
    _POISON = 0xDD

POISON = _POISON


cdef extern from "Python.h":
    ctypedef struct PyObject
    ctypedef void (*PyCapsule_Destructor)(object) noexcept
    int PyCapsule_IsValid(object capsule, const char* name) noexcept
    void* PyCapsule_GetPointer(object capsule, const char* name) noexcept
    object PyCapsule_New(void* pointer, const char* name, PyCapsule_Destructor destructor)
    void PyErr_Fetch(PyObject** t, PyObject** v, PyObject** tb) noexcept
    void PyErr_Restore(PyObject* t, PyObject* v, PyObject* tb) noexcept
    void PyErr_SetObject(object kind, object value)


cdef inline void _tally(void* block) noexcept nogil:
    cdef int64_t* t = <int64_t*>block
    if t == NULL:
        return
    t[0] += 1
    if t[0] == 1 and t[1] != 0 and t[2] > 0:
        memset(<void*><uintptr_t>t[1], _POISON, <size_t>t[2])


cdef inline void _count_late(void* block) noexcept nogil:
    if block != NULL:
        (<int64_t*>block)[0] += 1


cdef void _deleter_versioned(DLManagedTensorVersioned* self) noexcept nogil:
    if self != NULL:
        _tally(self.manager_ctx)


cdef void _deleter_legacy(DLManagedTensor* self) noexcept nogil:
    if self != NULL:
        _tally(self.manager_ctx)


cdef void _schema_release(ArrowSchema* s) noexcept nogil:
    # Arrow C data interface, release callback: release the children, then mark released.
    cdef int64_t i
    if s == NULL:
        return
    if s.release == NULL:
        _count_late(s.private_data)  # a release of a released struct: counted, nothing done
        return
    for i in range(s.n_children):
        if s.children[i] != NULL and s.children[i].release != NULL:
            s.children[i].release(s.children[i])
    _tally(s.private_data)
    s.release = NULL


cdef void _array_release(ArrowArray* a) noexcept nogil:
    cdef int64_t i
    if a == NULL:
        return
    if a.release == NULL:
        _count_late(a.private_data)
        return
    for i in range(a.n_children):
        if a.children[i] != NULL and a.children[i].release != NULL:
            a.children[i].release(a.children[i])
    _tally(a.private_data)
    a.release = NULL


cdef int _stream_get_schema(ArrowArrayStream* s, ArrowSchema* out) noexcept nogil:
    cdef int64_t* t = <int64_t*>s.private_data
    t[7] += 1
    if t[4] == 0:
        return 5  # EIO
    memcpy(out, <void*><uintptr_t>t[4], sizeof(ArrowSchema))
    return 0


cdef int _stream_get_next(ArrowArrayStream* s, ArrowArray* out) noexcept nogil:
    cdef int64_t* t = <int64_t*>s.private_data
    t[6] += 1
    if t[5] != 0 and t[6] == 1:
        # The one batch moves to the consumer; the stream keeps nothing of it.
        memcpy(out, <void*><uintptr_t>t[5], sizeof(ArrowArray))
        (<ArrowArray*><uintptr_t>t[5]).release = NULL
    else:
        memset(out, 0, sizeof(ArrowArray))  # release NULL: end of stream
    return 0


cdef const char* _stream_last_error(ArrowArrayStream* s) noexcept nogil:
    return NULL


cdef void _stream_release(ArrowArrayStream* s) noexcept nogil:
    if s == NULL:
        return
    if s.release == NULL:
        _count_late(s.private_data)
        return
    _tally(s.private_data)
    s.release = NULL


cdef void _dlpack_capsule_destructor(object capsule) noexcept:
    # DLPack Python specification, Implementation: call the deleter only while the capsule
    # still has its unconsumed name, keeping any exception in flight.
    cdef PyObject* t
    cdef PyObject* v
    cdef PyObject* tb
    cdef void* p
    cdef int64_t* tally
    PyErr_Fetch(&t, &v, &tb)
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        p = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        tally = <int64_t*>(<DLManagedTensorVersioned*>p).manager_ctx
        if tally != NULL:
            tally[3] += 1
        if (<DLManagedTensorVersioned*>p).deleter != NULL:
            (<DLManagedTensorVersioned*>p).deleter(<DLManagedTensorVersioned*>p)
    elif PyCapsule_IsValid(capsule, b"dltensor"):
        p = PyCapsule_GetPointer(capsule, b"dltensor")
        tally = <int64_t*>(<DLManagedTensor*>p).manager_ctx
        if tally != NULL:
            tally[3] += 1
        if (<DLManagedTensor*>p).deleter != NULL:
            (<DLManagedTensor*>p).deleter(<DLManagedTensor*>p)
    PyErr_Restore(t, v, tb)


cdef void _arrow_capsule_destructor(object capsule) noexcept:
    # Arrow PyCapsule interface, Lifetime of capsules: release a struct that was not moved.
    cdef PyObject* t
    cdef PyObject* v
    cdef PyObject* tb
    cdef ArrowSchema* s
    cdef ArrowArray* a
    cdef ArrowArrayStream* st
    PyErr_Fetch(&t, &v, &tb)
    if PyCapsule_IsValid(capsule, b"arrow_schema"):
        s = <ArrowSchema*>PyCapsule_GetPointer(capsule, b"arrow_schema")
        if s.release != NULL:
            if s.private_data != NULL:
                (<int64_t*>s.private_data)[3] += 1
            s.release(s)
    elif PyCapsule_IsValid(capsule, b"arrow_array"):
        a = <ArrowArray*>PyCapsule_GetPointer(capsule, b"arrow_array")
        if a.release != NULL:
            if a.private_data != NULL:
                (<int64_t*>a.private_data)[3] += 1
            a.release(a)
    elif PyCapsule_IsValid(capsule, b"arrow_array_stream"):
        st = <ArrowArrayStream*>PyCapsule_GetPointer(capsule, b"arrow_array_stream")
        if st.release != NULL:
            if st.private_data != NULL:
                (<int64_t*>st.private_data)[3] += 1
            st.release(st)
    PyErr_Restore(t, v, tb)


# --- The DLPack C exchange API (DLPack 1.3) of the crafted producers ----------------------
# The object's ``_crafted_exchange_export()`` builds the managed tensor (Python side) and
# returns its address; errors go back as the Python exception the API prescribes.

cdef int _ex_from_py(void* obj, DLManagedTensorVersioned** out) noexcept with gil:
    try:
        address = (<object>obj)._crafted_exchange_export()
    except BaseException as exc:
        PyErr_SetObject(type(exc), exc)
        return -1
    out[0] = <DLManagedTensorVersioned*><uintptr_t>address
    return 0


cdef int _ex_dltensor(void* obj, DLTensor* out) noexcept with gil:
    try:
        address = (<object>obj)._crafted_exchange_view()
    except BaseException as exc:
        PyErr_SetObject(type(exc), exc)
        return -1
    memcpy(out, &(<DLManagedTensorVersioned*><uintptr_t>address).dl_tensor, sizeof(DLTensor))
    return 0


cdef int _ex_to_py(DLManagedTensorVersioned* tensor, void** out) noexcept with gil:
    PyErr_SetObject(NotImplementedError, NotImplementedError(
        "the consumer checker's crafted producer makes no objects from tensors"))
    return -1


cdef int _ex_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* ctx,
                       DLPackSetError set_error) noexcept with gil:
    if set_error != NULL:
        set_error(ctx, b"NotImplementedError", b"the crafted producer allocates nothing")
    return -1


cdef int _ex_stream(DLDeviceType device_type, int32_t device_id, void** out) noexcept nogil:
    out[0] = NULL
    return 0


cdef DLPackExchangeAPI _exchange
_exchange.header.version.major = kDLPackMajorVersion
_exchange.header.version.minor = kDLPackMinorVersion
_exchange.header.prev_api = NULL
_exchange.managed_tensor_allocator = <DLPackManagedTensorAllocator><void*>_ex_allocator
_exchange.managed_tensor_from_py_object_no_sync = \
    <DLPackManagedTensorFromPyObjectNoSync><void*>_ex_from_py
_exchange.managed_tensor_to_py_object_no_sync = \
    <DLPackManagedTensorToPyObjectNoSync><void*>_ex_to_py
_exchange.dltensor_from_py_object_no_sync = <DLPackDLTensorFromPyObjectNoSync><void*>_ex_dltensor
_exchange.current_work_stream = <DLPackCurrentWorkStream><void*>_ex_stream

#: The ``__dlpack_c_exchange_api__`` capsule of the crafted producer types (one static
#: table for the life of the process, as the DLPack Python specification asks).
EXCHANGE_API = PyCapsule_New(<void*>&_exchange, b"dlpack_exchange_api", NULL)


def addresses():
    """The C callbacks' addresses, by the struct field they go into."""
    return {
        "dlpack_deleter_versioned": <uintptr_t>&_deleter_versioned,
        "dlpack_deleter_legacy": <uintptr_t>&_deleter_legacy,
        "arrow_schema_release": <uintptr_t>&_schema_release,
        "arrow_array_release": <uintptr_t>&_array_release,
        "arrow_stream_get_schema": <uintptr_t>&_stream_get_schema,
        "arrow_stream_get_next": <uintptr_t>&_stream_get_next,
        "arrow_stream_get_last_error": <uintptr_t>&_stream_last_error,
        "arrow_stream_release": <uintptr_t>&_stream_release,
    }


def dlpack_capsule(uintptr_t pointer, bint versioned):
    """A ``dltensor`` / ``dltensor_versioned`` capsule over a managed tensor at ``pointer``
    whose destructor follows the DLPack Python specification."""
    if versioned:
        return PyCapsule_New(<void*>pointer, b"dltensor_versioned", _dlpack_capsule_destructor)
    return PyCapsule_New(<void*>pointer, b"dltensor", _dlpack_capsule_destructor)


def arrow_capsule(uintptr_t pointer, str kind):
    """An ``arrow_schema`` / ``arrow_array`` / ``arrow_array_stream`` capsule over the
    struct at ``pointer`` that releases it when it was not moved."""
    if kind == "arrow_schema":
        return PyCapsule_New(<void*>pointer, b"arrow_schema", _arrow_capsule_destructor)
    if kind == "arrow_array":
        return PyCapsule_New(<void*>pointer, b"arrow_array", _arrow_capsule_destructor)
    if kind == "arrow_array_stream":
        return PyCapsule_New(<void*>pointer, b"arrow_array_stream", _arrow_capsule_destructor)
    raise ValueError(f"unknown Arrow capsule kind {kind!r}")

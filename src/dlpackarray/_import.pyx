# cython: language_level=3, boundscheck=False, wraparound=False
"""The import side of DLPackArray: what a source offers, in which order it is
read, and the one per-type route cache in front of that order.

The precedence (docs/protocols.rst): another DLPackArray, a DLPack capsule,
the buffer-only built-in types, an exact numpy.ndarray read in place, the
DLPack C exchange API, ``__dlpack__``
(https://dmlc.github.io/dlpack/latest/python_spec.html), the CUDA array
interface, ``__array_struct__``, ``__array_interface__``, the Arrow PyCapsule
interface
(https://arrow.apache.org/docs/format/CDataInterface/PyCapsuleInterface.html),
the buffer protocol, and ``__array__`` last.  ``fill`` is the one entry.
"""
cimport cython
import array as _array_module
import sys
import mmap as _mmap_module

from cpython.buffer cimport PyObject_CheckBuffer
from cpython.pycapsule cimport PyCapsule_CheckExact
from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from libc.stdint cimport uint8_t, uintptr_t

from dlpackarray.abi cimport (
    DLDataType, DLDevice, DLPackExchangeAPI, kDLBool, kDLComplex, kDLCPU, kDLFloat, kDLInt,
    kDLUInt,
)
from dlpackarray.core cimport (
    CopyMode, TensorView, device_text, kInlineNdim, validate,
    DeviceRoute, kConsumer, kRouteCopyToHost, kRouteRelabelHost, route_device_request,
)
from dlpackarray._internal cimport DLPackArray, check_ready, mark_ready
from dlpackarray._internal cimport (
    copy_to_heap, device_tuple, parse_copy, parse_device, type_has,
)
from dlpackarray._internal cimport view_from_buffer
from dlpackarray._internal cimport (
    release_adopted, request_capsule, request_common, view_from_capsule,
)
from dlpackarray._raw_call cimport steal
from dlpackarray._internal cimport (
    call_array_method, view_from_array_interface, view_from_array_struct_capsule,
    view_from_extension_dtype, view_from_extension_interface,
)
from dlpackarray._internal cimport (
    arrow_methods, arrow_path_first, raise_arrow_data_error, view_from_arrow,
)
from dlpackarray._internal cimport exchange_api_of, view_from_exchange
from dlpackarray._internal cimport (
    adopt_consumer_stream, producer_stream_argument, ready_after_bare_capsule,
    ready_after_request, synchronize_for_host_read, view_from_cuda_array_interface,
)
from dlpackarray._internal cimport kFailed, kInitialising


cdef type _ARRAY_TYPE = _array_module.array
cdef type _MMAP_TYPE = _mmap_module.mmap

# numpy.ndarray once numpy is imported (looked up lazily, so the package never
# imports numpy itself).
cdef object _NDARRAY_TYPE = None


cdef inline object _ndarray_type():
    global _NDARRAY_TYPE
    if _NDARRAY_TYPE is None:
        _NDARRAY_TYPE = getattr(sys.modules.get("numpy"), "ndarray", None)
    return _NDARRAY_TYPE


# -- exact numpy.ndarray fast path ----------------------------------------------------------
# NumPy has no C exchange table, so an ndarray's __dlpack__ (a Python call, a
# capsule and a managed tensor) is most of the work of importing one.
# An *exact* ndarray is read in place instead, through the head of NumPy's
# object and descriptor structs, whose fields up to ``flags`` / ``type_num``
# are the same in NumPy 1.x and 2.x (numpy/ndarraytypes.h).  Only what
# ndarray.__dlpack__ exports as is takes this path -- a built-in numeric dtype
# in native byte order, aligned, every stride a multiple of the item size --
# and the result is the view the __dlpack__ route gives (the differential test
# tests/imports/test_ndarray_fast_path.py checks every field); anything else, and any
# copy/device request, takes the documented route.
cdef extern from *:
    """
    typedef struct {
        PyObject_HEAD
        char* data;
        int nd;
        Py_ssize_t* dimensions;
        Py_ssize_t* strides;
        PyObject* base;
        PyObject* descr;
        int flags;
    } dla_npy_array_head;
    typedef struct {
        PyObject_HEAD
        PyTypeObject* typeobj;
        char kind;
        char type;
        char byteorder;
        char former_flags;
        int type_num;
    } dla_npy_descr_head;
    /* NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE */
    #define DLA_NPY_ALIGNED 0x0100
    #define DLA_NPY_WRITEABLE 0x0400
    """
    ctypedef struct dla_npy_array_head:
        char* data
        int nd
        Py_ssize_t* dimensions
        Py_ssize_t* strides
        PyObject* descr
        int flags
    ctypedef struct dla_npy_descr_head:
        char kind
        char byteorder
        int type_num
    const int DLA_NPY_ALIGNED
    const int DLA_NPY_WRITEABLE


# Item sizes of the built-in type numbers ndarray.__dlpack__ exports (NPY_BOOL
# .. NPY_CDOUBLE, NPY_HALF = 23); 0: not exported (long double, object, ...).
cdef int _NPY_ITEMSIZE[24]
_NPY_ITEMSIZE[:] = [
    1, 1, 1, sizeof(short), sizeof(short), sizeof(int), sizeof(int), sizeof(long),
    sizeof(long), sizeof(long long), sizeof(long long), 4, 8, 0, 8, 16,
    0, 0, 0, 0, 0, 0, 0, 2]


cdef int _NDARRAY_FAST = -1  # unknown until the first exact ndarray


cdef inline DLDataType _dtype_of_kind(char kind, int itemsize) noexcept:
    cdef DLDataType dt
    dt.code = (kDLBool if kind == b'b' else kDLInt if kind == b'i' else
               kDLUInt if kind == b'u' else kDLFloat if kind == b'f' else kDLComplex)
    dt.bits = <uint8_t>(8 * itemsize)
    dt.lanes = 1
    return dt


@cython.cdivision(True)  # itemsize > 0; C's % and / are exact for multiples
cdef bint _import_exact_ndarray(DLPackArray self, object obj) except -1:
    """Fills ``self`` from the exact ndarray ``obj``; False (nothing done) when
    the array is one __dlpack__ may treat otherwise."""
    cdef const dla_npy_array_head* arr = <const dla_npy_array_head*><PyObject*>obj
    cdef const dla_npy_descr_head* descr = <const dla_npy_descr_head*>arr.descr
    cdef int i, itemsize
    global _NDARRAY_FAST
    if _NDARRAY_FAST < 0:
        # NumPy 1.x exports only legacy capsules, refusing read-only arrays.
        version = str(getattr(sys.modules.get("numpy"), "__version__", "0"))
        _NDARRAY_FAST = version.split(".")[0].isdigit() and int(version.split(".")[0]) >= 2
    if not _NDARRAY_FAST or arr.nd > kInlineNdim or not (arr.flags & DLA_NPY_ALIGNED):
        return False
    if descr.type_num < 0 or descr.type_num >= 24 or _NPY_ITEMSIZE[descr.type_num] == 0:
        return False
    if descr.byteorder != b'=' and descr.byteorder != b'|':
        return False
    itemsize = _NPY_ITEMSIZE[descr.type_num]
    for i in range(arr.nd):
        if arr.strides[i] % itemsize != 0:
            return False
    self._view.set_ndim(arr.nd)
    for i in range(arr.nd):
        self._view.shape[i] = arr.dimensions[i]
        self._view.strides[i] = arr.strides[i] // itemsize
    self._view.data = arr.data
    self._view.byte_offset = 0
    self._view.dtype = _dtype_of_kind(descr.kind, itemsize)
    self._view.device.device_type = kDLCPU
    self._view.device.device_id = 0
    self._view.readonly = not (arr.flags & DLA_NPY_WRITEABLE)
    self._view.ready_stream = NULL
    validate(self._view)
    # The ndarray owns (or keeps alive) its memory, as its __dlpack__ tensor would.
    self.owner = obj
    return True


cdef int _check_copy_arg(object copy) except -1:
    parse_copy(copy)
    return 0


cdef inline bint _requests_nothing(object copy, object device) noexcept:
    """Whether an import's ``copy``/``device`` leave its view as it came (most
    imports: no TensorView built and destroyed, no handler entered)."""
    return device is None and copy is not True


cdef int _finish_import(DLPackArray self, object copy, object device, bint copied) except -1:
    """Applies the ``device`` and ``copy`` requests to a freshly imported view."""
    if _requests_nothing(copy, device):
        return 0
    return _apply_requests(self, copy, device, copied)


cdef int _apply_requests(DLPackArray self, object copy, object device, bint copied) except -1:
    cdef TensorView result
    cdef DLDevice target
    cdef DeviceRoute route
    if device is not None:
        # The device rule (rules.hpp), shared with the producer side.
        target = parse_device(device)
        route = route_device_request(
            self._view.device, target, <CopyMode>parse_copy(copy), kConsumer)
        if route == kRouteRelabelHost:
            # Pinned/managed memory: readable by the host once the work on
            # its ready stream is done (docs/cuda.md).
            synchronize_for_host_read(&self._view)
            self._view.device = target
            self._view.ready_stream = NULL
        elif route == kRouteCopyToHost:
            # A device -> host copy through the CUDA driver (copy_to_heap).
            self.owner = copy_to_heap(&self._view, &result)
            self._view = result
            copied = True
    if copy is True and not copied:
        self.owner = copy_to_heap(&self._view, &result)
        self._view = result
    return 0


cdef void _reset_placeholder(DLPackArray self) noexcept:
    """The state of a DLPackArray that holds nothing: an empty uint8 vector,
    so no method can expose uninitialised or released memory."""
    self.owner = None
    self._view.data = NULL
    self._view.byte_offset = 0
    self._view.ndim = 1  # always within the inline room, so no set_ndim()
    self._view.shape[0] = 0
    self._view.strides[0] = 1
    self._view.dtype.code = kDLUInt
    self._view.dtype.bits = 8
    self._view.dtype.lanes = 1
    self._view.device.device_type = kDLCPU
    self._view.device.device_id = 0
    self._view.readonly = False
    self._view.ready_stream = NULL


cdef int fill(object array, object obj, object copy, object device, bint dlpack_only,
              object stream) except -1:
    """Imports ``obj`` into ``self``, an array never initialised: it ends
    ready, or failed for good (every constructor: __init__, its fast entry,
    from_dlpack, new_from_object).  ``array`` is a DLPackArray never
    initialised (the caller's guarantee: no check made here)."""
    cdef DLPackArray self = <DLPackArray>array
    cdef int checked
    cdef bint done = False
    # Every method refuses from here until kReady, so code of the source's
    # that runs during the import (properties, __index__, __array__,
    # __dlpack__, __del__) can neither read, export nor re-initialise the
    # half-written descriptor: the import may fill self directly.
    self._state = kInitialising
    try:  # finally, not except: no exception state saved on success
        # An exact ndarray with nothing requested is none of the types the
        # precedence reads before it (DLPackArray, capsule, buffer-only): it
        # is read in place first, without the route lookup.
        if (copy is None and device is None and stream is None
                and <object>Py_TYPE(obj) is _NDARRAY_TYPE and _import_exact_ndarray(self, obj)):
            checked = 0
        else:
            checked = _import_into(self, obj, copy, device, dlpack_only, stream)
        if stream is not None:
            adopt_consumer_stream(&self._view, stream, device is not None or checked)
        done = True
    finally:
        if not done:
            _fail_import(self)
    mark_ready(self)
    return 0


cdef void _fail_import(DLPackArray self) noexcept:
    """Marks ``self`` failed for good after a failed import and drops the
    source's memory: the object never exposes a half-written descriptor."""
    cdef PyObject* kind
    cdef PyObject* value
    cdef PyObject* tb
    self._state = kFailed
    # Dropping the owner may run Python code (a destructor, __del__), which
    # must not start with an exception pending.
    PyErr_Fetch(&kind, &value, &tb)
    _reset_placeholder(self)
    PyErr_Restore(kind, value, tb)


cdef inline bint _is_buffer_only_type(type t) noexcept:
    """Whether ``t`` is an exact type known to speak the buffer protocol and
    nothing richer (no __dlpack__, __array_struct__ or __array_interface__):
    those skip the attribute probes of the precedence chain without changing
    its outcome."""
    return (t is memoryview or t is bytearray or t is bytes or t is _ARRAY_TYPE
            or t is _MMAP_TYPE)


cdef inline int _finish_capsule_import(DLPackArray self, object capsule, object copy,
                                       object device, bint copied) except -1:
    """_finish_import for a view whose owner is an adopted capsule."""
    if _requests_nothing(copy, device):
        return 0  # nothing can fail: no handler entered, no call made
    return _apply_capsule_requests(self, capsule, copy, device, copied)


cdef int _apply_capsule_requests(DLPackArray self, object capsule, object copy, object device,
                                 bint copied) except -1:
    cdef int done = -1
    try:  # finally, not except: no exception state saved on success
        done = _apply_requests(self, copy, device, copied)
    finally:
        if done == -1:
            # The caller may still hold the capsule; a refused import must not
            # keep the producer's memory alive for as long as it does.
            self.owner = None
            release_adopted(capsule)
    return done


cdef extern from "Python.h":
    ctypedef struct _GetattroType "PyTypeObject":
        void* tp_getattro
    PyObject* PyObject_GenericGetAttr(PyObject* o, PyObject* name)


cdef bint _lacks_interfaces(type t) noexcept:
    """Whether no instance of ``t`` can have an array interface attribute: the
    type's lookup is the generic one, its MRO defines none of the names and
    its instances have no ``__dict__`` (tp_dictoffset 0, no managed dict) to
    hold one.  A function of the type's state, cached with its import route."""
    cdef PyTypeObject* tp = <PyTypeObject*>t
    return ((<_GetattroType*>tp).tp_getattro == <void*>PyObject_GenericGetAttr
            and tp.tp_dictoffset == 0
            and not (type_has(t, "__cuda_array_interface__") or type_has(t, "__array_struct__")
                     or type_has(t, "__array_interface__")))


cdef inline bint _may_subclass(type t) noexcept:
    """False only for types that cannot subclass DLPackArray: a subclass's
    instances extend DLPackArray's, so its basic size is at least ours.  Every
    foreign type of a DLPack import is smaller (pyarrow's arrays: 80 bytes of
    our 384) and skips isinstance's walk of its MRO."""
    return (<PyTypeObject*>t).tp_basicsize >= (<PyTypeObject*>DLPackArray).tp_basicsize


cdef int _import_by_dlpack_call(DLPackArray self, object obj, type t, object copy,
                                object device, bint dlpack_only, object stream,
                                bint host_only) except -1:
    """The ``obj.__dlpack__(...)`` branch of _import_into (same return value).
    ``host_only``: ``t`` is numpy.ndarray, whose data is host memory."""
    cdef int pinned_device = -1
    dl_device = None
    if device is not None:
        dl_device = device_tuple(parse_device(device))
    # CUDA hook: a CUDA producer is asked with a stream even when none
    # was given, so its pending work is ordered (docs/cuda.md).  An exact
    # ndarray is host memory: no __dlpack_device__ round trip for it.
    stream_arg = producer_stream_argument(obj, stream, dl_device, host_only, &pinned_device)
    return _request_dlpack(self, obj, t, copy, device, dlpack_only, dl_device, stream_arg,
                           pinned_device, False)


cdef int _import_plain_dlpack(DLPackArray self, object obj, type t) except -1:
    """_import_by_dlpack_call with nothing requested (no copy, device or
    stream): ``DLPackArray(x)`` of a type that last took the plain
    ``__dlpack__`` call.  Host data that asks for no stream is consumed here
    directly; everything else goes on through _request_dlpack, with the
    device query and (if made) the failed request's error already done."""
    cdef int pinned_device = -1
    cdef bint copied = False
    cdef PyObject* raw
    stream_arg = producer_stream_argument(obj, None, None, False, &pinned_device)
    if stream_arg is not None or pinned_device >= 0:
        return _request_dlpack(self, obj, t, None, None, False, None, stream_arg,
                               pinned_device, False)
    raw = request_common(obj)
    if raw == NULL:
        # The producer's error is still set: _request_dlpack takes it as its
        # own request's (a refusal may still be read through Arrow).
        return _request_dlpack(self, obj, t, None, None, False, None, None, -1, True)
    capsule = steal(raw)
    self.owner = view_from_capsule(capsule, &self._view, &copied)
    if self._view.device.device_type == kDLCPU:
        # Host data that no pinned-memory query flagged: ready_after_request
        # has nothing to wait for (its first two tests).  Nothing requested:
        # _finish_capsule_import has nothing to apply.
        return 0
    return _ready_after_capsule(self, capsule, None, -1)


cdef int _ready_after_capsule(DLPackArray self, object capsule, object stream_arg,
                              int pinned_device) except -1:
    """ready_after_request for an adopted capsule's view (same return value);
    a failure releases the capsule's memory at once."""
    cdef int stream_checked = -1
    try:  # finally, not except: no exception state saved on success
        stream_checked = ready_after_request(&self._view, stream_arg, pinned_device)
    finally:
        if stream_checked == -1:
            self.owner = None
            release_adopted(capsule)
    return stream_checked


cdef int _request_dlpack(DLPackArray self, object obj, type t, object copy, object device,
                         bint dlpack_only, object dl_device, object stream_arg,
                         int pinned_device, bint requested) except -1:
    """The rest of _import_by_dlpack_call once the stream argument is known.
    ``requested``: the common request was made and failed, its error still
    set (request_capsule then takes it as its first call's)."""
    cdef bint copied = False
    cdef int stream_checked
    cdef bint common
    cdef PyObject* raw
    refusal = None
    common = dl_device is None and copy is None and stream_arg is None
    raw = request_common(obj) if common and not requested else NULL
    if raw != NULL:
        capsule = steal(raw)
    else:
        # Only a failed or uncommon request enters a handler (_raw_call.pxd).
        try:
            capsule = request_capsule(obj, dl_device, copy, stream_arg, common)
        except (BufferError, TypeError) as e:
            refusal = e
        except ValueError as e:
            # A device the producer cannot export to is a BufferError in the
            # DLPack spec (python_spec.html, "dl_device"); NumPy before 2.4
            # raises ValueError for it.  Our type must not depend on which
            # NumPy is installed, so that refusal is reworded below as every
            # producer's BufferError for dl_device is.
            if dl_device is None:
                raise
            refusal = e
    if refusal is not None:
        # Outside the handler, so that an error of our own is not chained
        # to the producer's refusal.
        if isinstance(refusal, BufferError):
            ext_owner = view_from_extension_dtype(obj, None, &self._view)
            if ext_owner is not None:
                self.owner = ext_owner
                return _finish_import(self, copy, device, False)
        # pyarrow refuses nulls and bit-packed booleans; its Arrow capsules
        # say why in our words (or unpack the booleans).
        if not _import_arrow_instead(self, obj, t, copy, device, dlpack_only):
            if dl_device is not None and isinstance(refusal, (BufferError, ValueError)):
                raise _device_refused(obj, dl_device, copy, refusal) from refusal
            raise refusal
        return 0
    self.owner = view_from_capsule(capsule, &self._view, &copied)
    if pinned_device < 0 and self._view.device.device_type == kDLCPU:
        # Host data that no pinned-memory query flagged: ready_after_request
        # has nothing to wait for (its first two tests) and returns 0.
        stream_checked = 0
    else:
        stream_checked = _ready_after_capsule(self, capsule, stream_arg, pinned_device)
    _finish_capsule_import(self, capsule, copy, device, copied)
    return stream_checked


cdef int _import_copy_of(DLPackArray self, DLPackArray other, object copy,
                         object device) except -1:
    """Another DLPackArray: its view and owner, then the requests.  Apart
    from _import_by_precedence, whose every call would otherwise construct
    and destroy the TensorView temporary of the assignment."""
    check_ready(other)
    self._view = other._view
    self.owner = other.owner
    return _finish_import(self, copy, device, False)


# -- The per-type cache -------------------------------------------------------------
# Everything the import decides from an object's type alone, for one state of
# the type: CPython gives a type a new version tag (or 0, "not cacheable")
# whenever it or one of its bases is modified, so (type, tag) names one state
# and an entry is valid exactly while both match.  Direct-mapped, negative
# answers included; a collision only costs the lookups again.  Without a GIL
# nothing orders an entry's writes and reads: such a build decides afresh on
# every import.
cdef extern from *:
    """
    static inline unsigned int dla_type_version(PyTypeObject* t) { return t->tp_version_tag; }
    #ifdef Py_GIL_DISABLED
    #define DLA_CACHE_TYPES 0
    #else
    #define DLA_CACHE_TYPES 1
    #endif
    """
    const bint DLA_CACHE_TYPES
    unsigned int dla_type_version(PyTypeObject* t)

# The route a type's objects take through _import_into, where it follows from
# the type alone: no C exchange table, not an exact ndarray, not able to be a
# DLPackArray (so none of the earliest branches applies), and then one of
#   _ROUTE_PLAIN_DLPACK: the plain __dlpack__ call;
#   _ROUTE_ARROW_FIRST: Arrow data read through its Arrow capsules although it
#     has __dlpack__ (arrow_path_first: pyarrow's tensor and boolean arrays);
#   _ROUTE_INSTANCE_PROBES: no __dlpack__ at all, so the instance probes for
#     the array interfaces come next (skipped where no_interfaces); the probes
#     and everything after them still run for every object.
# _ROUTE_CHAIN: none of these (yet): the chain from the top.
cdef enum:
    _ROUTE_CHAIN = 0
    _ROUTE_PLAIN_DLPACK = 1
    _ROUTE_ARROW_FIRST = 2
    _ROUTE_INSTANCE_PROBES = 3
    _CACHE_SIZE = 64

cdef struct _TypeFacts:
    PyTypeObject* type
    unsigned int version
    const DLPackExchangeAPI* api  # exchange_api_of
    int methods                   # arrow_methods
    int route                     # a _ROUTE_*
    bint no_interfaces            # _lacks_interfaces

cdef _TypeFacts _facts[_CACHE_SIZE]


cdef inline _TypeFacts* _cached(PyTypeObject* tp) noexcept:
    """``tp``'s entry if it holds ``tp``'s current state, else NULL."""
    cdef _TypeFacts* e = &_facts[(<uintptr_t>tp >> 4) % _CACHE_SIZE]
    cdef unsigned int version = dla_type_version(tp)
    if DLA_CACHE_TYPES and version != 0 and e.type == tp and e.version == version:
        return e
    return NULL


cdef _TypeFacts* _facts_of(type t, _TypeFacts* scratch) except NULL:
    """``t``'s entry, made on a miss (into ``scratch`` where ``t`` cannot be
    cached); its route starts as _ROUTE_CHAIN, for _import_by_precedence to set."""
    cdef PyTypeObject* tp = <PyTypeObject*>t
    cdef _TypeFacts* e = _cached(tp)
    if e != NULL:
        return e
    scratch.api = exchange_api_of(t)
    scratch.methods = arrow_methods(t)
    scratch.no_interfaces = _lacks_interfaces(t)
    scratch.route = _ROUTE_CHAIN
    # Read after the lookups, which may give the type its tag.
    cdef unsigned int version = dla_type_version(tp)
    if not DLA_CACHE_TYPES or version == 0:
        scratch.type = NULL
        return scratch
    e = &_facts[(<uintptr_t>tp >> 4) % _CACHE_SIZE]
    e[0] = scratch[0]
    e.type = tp
    e.version = version
    return e


cdef inline void _set_route(PyTypeObject* tp, int route) noexcept:
    """Records ``route`` for ``tp``'s current state.  Looked up again, not
    kept from before: code the source ran since (a property, an import of
    another object) may have changed the type or reused its entry."""
    cdef _TypeFacts* e = _cached(tp)
    if e != NULL:
        e.route = route


cdef int _import_into(DLPackArray self, object obj, object copy, object device,
                      bint dlpack_only, object stream) except -1:
    """Fills ``self`` from ``obj`` following the documented protocol precedence.

    Returns 1 when ``stream`` was already checked against the producer's own
    device and must not be checked against the view's again (a pinned torch
    tensor: see ready_after_request); else 0.
    """
    cdef PyTypeObject* tp = Py_TYPE(obj)
    cdef _TypeFacts* f = _cached(tp)
    if copy is not None:  # (None, every plain import's, needs no call to be valid)
        _check_copy_arg(copy)
    if f != NULL:
        if f.route == _ROUTE_PLAIN_DLPACK:
            # Never numpy.ndarray (not cached): host_only is False.
            if copy is None and device is None and stream is None:
                return _import_plain_dlpack(self, obj, <type>tp)
            return _import_by_dlpack_call(self, obj, <type>tp, copy, device, dlpack_only,
                                          stream, False)
        if f.route == _ROUTE_ARROW_FIRST:
            return _import_arrow_first(self, obj, copy, device, f.methods)
        if f.route == _ROUTE_INSTANCE_PROBES and not dlpack_only:
            # (from_dlpack refuses those types: the chain says so.)
            return _import_by_instance_probes(self, obj, copy, device, stream, f.methods,
                                              f.no_interfaces)
    return _import_by_precedence(self, obj, <type>tp, copy, device, dlpack_only, stream)


cdef int _import_arrow_first(DLPackArray self, object obj, object copy,
                             object device, int methods) except -1:
    """Reads ``obj`` through its Arrow PyCapsule interface (``methods``:
    arrow_methods of its type): Arrow data that also has __dlpack__ (read as
    Arrow defines it, not as its __dlpack__ does), or an object with nothing
    before Arrow in the precedence."""
    cdef bint copied = False
    self.owner = view_from_arrow(obj, methods, &self._view, &copied, copy)
    return _finish_import(self, copy, device, copied)


cdef int _import_by_precedence(DLPackArray self, object obj, type t, object copy, object device,
                               bint dlpack_only, object stream) except -1:
    """_import_into's protocol chain, from the top (same return value)."""
    cdef const DLPackExchangeAPI* api
    cdef bint copied = False
    cdef PyTypeObject* tp = <PyTypeObject*>t
    cdef bint host_only, cacheable
    cdef _TypeFacts scratch
    cdef _TypeFacts* f
    cdef int methods
    cdef bint no_interfaces
    if t is DLPackArray or (_may_subclass(t) and isinstance(obj, DLPackArray)):
        return _import_copy_of(self, <DLPackArray>obj, copy, device)
    if PyCapsule_CheckExact(obj):
        self.owner = view_from_capsule(obj, &self._view, &copied)
        ready_after_bare_capsule(&self._view)  # CUDA hook: no stream known
        return _finish_capsule_import(self, obj, copy, device, False)
    if not dlpack_only and _is_buffer_only_type(t):
        self.owner = view_from_buffer(obj, &self._view)
        return _finish_import(self, copy, device, False)
    if (copy is None or copy is False) and device is None and stream is None \
            and <object>t is _NDARRAY_TYPE and _import_exact_ndarray(self, obj):
        return 0
    # DLPack C exchange API (type.__dlpack_c_exchange_api__): the producer's
    # table exports without a Python-level __dlpack__ call.  It takes no
    # copy/device arguments, so the consumer-side rules apply afterwards;
    # None means "use __dlpack__" (device data, producer refusal).
    # Read at once: code the source runs below may reuse the entry.
    f = _facts_of(t, &scratch)
    api = f.api
    methods = f.methods
    no_interfaces = f.no_interfaces
    if api != NULL:
        owner = view_from_exchange(api, obj, &self._view, &copied)
        if owner is not None:
            self.owner = owner
            return _finish_capsule_import(self, owner, copy, device, copied)
    if type_has(t, "__dlpack__"):
        host_only = <object>t is _ndarray_type()
        cacheable = api == NULL and not _may_subclass(t) and not host_only
        if arrow_path_first(t):
            if cacheable:
                _set_route(tp, _ROUTE_ARROW_FIRST)
            return _import_arrow_first(self, obj, copy, device, methods)
        if cacheable:
            _set_route(tp, _ROUTE_PLAIN_DLPACK)
        return _import_by_dlpack_call(self, obj, t, copy, device, dlpack_only, stream,
                                      host_only)
    if dlpack_only:
        raise AttributeError(
            f"'{t.__name__}' object has no attribute '__dlpack__': from_dlpack consumes DLPack "
            "producers and capsules only; wrap buffer-protocol or array-interface objects with "
            "dlpackarray.DLPackArray(obj)")
    # Every check above is a function of the type alone (its state, which the
    # version tag follows): the type's next object may start from here.
    # (Exact ndarray, capsule, buffer-only and DLPackArray types returned
    # above; a type that may subclass DLPackArray could be one.)
    if api == NULL and not _may_subclass(t):
        _set_route(tp, _ROUTE_INSTANCE_PROBES)
    return _import_by_instance_probes(self, obj, copy, device, stream, methods, no_interfaces)


cdef int _import_by_instance_probes(DLPackArray self, object obj, object copy, object device,
                                    object stream, int methods,
                                    bint no_interfaces) except -1:
    """The rest of _import_by_precedence once the type-level checks found no
    DLPackArray, capsule, buffer-only type, exchange table or ``__dlpack__``
    (same return value); ``methods`` is arrow_methods(type(obj)),
    ``no_interfaces`` _lacks_interfaces(type(obj))."""
    if not no_interfaces:
        # Instance lookups, as NumPy does: exporters may set these per object.
        # CUDA array interface: after __dlpack__ (which carries the device
        # and stream protocol of its own), before the host-only interfaces.
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is not None:
            self.owner = view_from_cuda_array_interface(obj, cai, &self._view)
            return _finish_import(self, copy, device, False)
        struct = getattr(obj, "__array_struct__", None)
        if struct is not None:
            try:
                self.owner = view_from_array_struct_capsule(obj, struct, &self._view)
            except (BufferError, TypeError):  # TypeError: a typekind no NumPy type has
                ext_owner = view_from_extension_interface(obj, &self._view)
                if ext_owner is None:
                    raise
                self.owner = ext_owner
            return _finish_import(self, copy, device, False)
        iface = getattr(obj, "__array_interface__", None)
        if iface is not None:
            try:
                self.owner = view_from_array_interface(obj, iface, &self._view)
            except (BufferError, TypeError):  # TypeError: a typestr kind no NumPy type has
                ext_owner = view_from_extension_interface(obj, &self._view)
                if ext_owner is None:
                    raise
                self.owner = ext_owner
            return _finish_import(self, copy, device, False)
    # Arrow PyCapsule interface: after the array interfaces, which describe
    # the N-D object itself (Arrow sees a column of rows), and before the
    # buffer protocol, whose bytes lose Arrow's type, offset and shape.
    if methods:
        return _import_arrow_first(self, obj, copy, device, methods)
    if PyObject_CheckBuffer(obj):
        self.owner = view_from_buffer(obj, &self._view)
        return _finish_import(self, copy, device, False)
    cdef type t = <type>Py_TYPE(obj)
    if type_has(t, "__array__"):
        # Last resort: the object converts itself (usually to an ndarray),
        # which is then imported through its own richer protocol.
        result, fresh = call_array_method(obj, copy)
        if not _has_direct_protocol(result):
            raise TypeError(
                f"{t.__name__}.__array__() returned a '{type(result).__name__}' object, which "
                "exposes none of __dlpack__, __array_struct__, __array_interface__ or the "
                "buffer protocol")
        return _import_into(self, result, None if fresh else copy, device, False, stream)
    raise TypeError(
        f"cannot wrap a '{t.__name__}' object: it implements none of __dlpack__, "
        "__array_struct__, __array_interface__, the buffer protocol or __array__")


cdef object _device_refused(object obj, tuple want, object copy, BaseException refusal):
    """A producer's refusal of ``device=`` (BufferError, or ValueError from
    NumPy before 2.4), as the device rule's error (docs/protocols.rst):
    BufferError, or ValueError when ``copy=False`` was given -- what the rule
    gives when dlpackarray refuses the device itself, as it does for a
    producer without ``dl_device`` (NumPy 2.0).  It names the device asked for
    and what the producer offers (its own device) instead of the producer's
    bare "unsupported device requested"."""
    offer = "None (the producer's own device)"
    try:
        have = tuple(int(x) for x in obj.__dlpack_device__())
        offer = (f"None or {have!r} for "
                 f"{device_text(parse_device(have)).decode()}")
    except Exception:
        pass
    want = tuple(int(x) for x in want)
    error = ValueError if copy is False else BufferError
    return error(
        f"{type(obj).__name__} refused device={want!r} "
        f"({device_text(parse_device(want)).decode()}): {refusal}; accepted: {offer}")


cdef bint _import_arrow_instead(DLPackArray self, object obj, type t, object copy,
                                object device, bint dlpack_only) except -1:
    """Imports ``obj`` through Arrow after its ``__dlpack__`` refused; False
    when it speaks no Arrow either, so the DLPack error stands.  A DLPack-only
    consumer imports nothing, but Arrow's reason (nulls) replaces the refusal."""
    cdef bint copied = False
    cdef int methods = arrow_methods(t)
    if not methods:
        return False
    if dlpack_only:
        raise_arrow_data_error(obj)
        return False
    self.owner = view_from_arrow(obj, methods, &self._view, &copied, copy)
    _finish_import(self, copy, device, copied)
    return True


cdef bint _has_direct_protocol(object obj) except -1:
    """Whether ``obj`` is importable without calling ``__array__`` again."""
    return (isinstance(obj, DLPackArray) or PyCapsule_CheckExact(obj)
            or type_has(type(obj), "__dlpack__") or PyObject_CheckBuffer(obj)
            or getattr(obj, "__array_struct__", None) is not None
            or getattr(obj, "__array_interface__", None) is not None)

# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPackArray: one zero-copy view that speaks every array protocol."""
cimport cython
import array as _array_module
import sys
import mmap as _mmap_module

from cpython.buffer cimport PyObject_CheckBuffer, Py_buffer
from cpython.pycapsule cimport PyCapsule_CheckExact
from cpython.ref cimport Py_INCREF
from cpython.dict cimport PyDict_Check
from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from libc.stdint cimport int64_t, intptr_t, uint8_t, uintptr_t

from dlpackarray.abi cimport (
    DLDataType, DLDevice, kDLBool, kDLComplex, kDLCPU, kDLFloat, kDLInt, kDLUInt,
)
from dlpackarray.core cimport kDLPackMajorVersion, kDLPackMinorVersion
from dlpackarray.core cimport (
    CopyMode, TensorView, device_text, dtype_itemsize, is_c_contiguous,
    is_f_contiguous, kInlineNdim, validate,
    DeviceRoute, kConsumer, kRouteCopyToHost, kRouteRelabelHost, route_device_request,
    supported_dtypes_text, view_nbytes, view_size,
)
from dlpackarray._internal cimport (
    copy_to_heap, device_tuple, dtype_object, parse_copy, parse_device, parse_dtype, type_has,
)
from dlpackarray._internal cimport fill_buffer, view_from_buffer
from dlpackarray._internal cimport (
    export_capsule, release_adopted, request_capsule, request_common, view_from_capsule,
)
from dlpackarray._raw_call cimport steal
from dlpackarray._internal cimport (
    call_array_method, export_array_interface, export_array_struct, export_numpy,
    view_from_array_interface, view_from_array_struct_capsule, view_from_typed_buffer,
)
from dlpackarray._internal cimport index_into, permute_into, reinterpret_into, reshape_into
from dlpackarray._internal cimport (
    arrow_methods, arrow_path_first, export_arrow, export_arrow_schema,
    raise_arrow_data_error, view_from_arrow,
)
from dlpackarray._internal cimport index_of, item_of, scalar_of, tolist_of, truth_of
from dlpackarray.abi cimport DLPackExchangeAPI
from dlpackarray._internal cimport exchange_api_of, view_from_exchange
from dlpackarray._internal cimport (
    adopt_consumer_stream, export_cuda_array_interface, producer_stream_argument,
    ready_after_bare_capsule, ready_after_request, synchronize_for_host_read,
    view_from_cuda_array_interface,
)
from dlpackarray._type_cache cimport (
    DLA_CACHE_TYPES, TYPE_CACHE_SIZE, TypeSlot, type_slot, type_slot_hit, type_slot_store,
)
from dlpackarray._type_slots cimport Vectorcall, VectorcallType
from dlpackarray._recycler cimport (
    Recycler, recycler_alloc, recycler_free, recycler_install,
)
from dlpackarray._instance_dict cimport (
    DLA_ATTRS_GETATTR, DLA_ATTRS_NONE, dla_attr_storage, dla_dict_attr, dla_instance_dict,
    dla_shared_key_count, dla_shared_keys_lack,
)

from dlpackarray._devices import DLDeviceType

# NumPy's own dtypes, which NumPy exports through DLPack when it can at all.
cdef frozenset _NUMPY_NATIVE_NAMES = frozenset([
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"])

cdef type _ARRAY_TYPE = _array_module.array
cdef type _MMAP_TYPE = _mmap_module.mmap

cdef tuple _DLPACK_INFO = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))

# dlpackarray._pickle, imported on first use: it cimports this module.
cdef object _pickle_module = None


cdef object _pickling():
    global _pickle_module
    if _pickle_module is None:
        from dlpackarray import _pickle
        _pickle_module = _pickle
    return _pickle_module


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
# capsule and a managed tensor) was ~1800 of the ~2540 instructions of
# DLPackArray_FromObject on an ndarray (benchmark B10/from-object).
# An *exact* ndarray is read in place instead, through the head of NumPy's
# object and descriptor structs, whose fields up to ``flags`` / ``type_num``
# are the same in NumPy 1.x and 2.x (numpy/ndarraytypes.h).  Only what
# ndarray.__dlpack__ exports as is takes this path -- a built-in numeric dtype
# in native byte order, aligned, every stride a multiple of the item size --
# and the result is the view the __dlpack__ route gives (the differential test
# tests/test_ndarray_fast_path.py checks every field); anything else, and any
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


cdef DLPackArray wrap_view(const TensorView* v, object owner):
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    a._view = v[0]
    a.owner = owner
    mark_ready(a)
    return a


cdef int raise_not_ready(DLPackArray self) except -1:
    # ValueError, as CPython's io does for an uninitialised object, and not
    # TypeError: consumers retry __dlpack__ with fewer keywords on TypeError.
    if self._state == kInitialising:
        raise ValueError(
            "this DLPackArray is not initialised yet: its __init__ is still running (code the "
            "source runs during the import cannot use the array being imported into)")
    if self._state == kFailed:
        raise ValueError(
            "this DLPackArray is not initialised: its __init__ failed; create a new DLPackArray")
    raise ValueError(
        f"this {type(self).__name__} is not initialised: it was made by __new__ without a "
        "successful DLPackArray.__init__; create arrays with DLPackArray(obj)")


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


cdef inline int _initialise(DLPackArray self, object obj, object copy, object device,
                            object stream) except -1:
    """The body of ``DLPackArray.__init__`` (and of the constructor's fast path;
    inline into both)."""
    if self._state != kUninitialised:
        # Exports of a ready array point into its descriptor; a failed or
        # running initialisation is not restartable either (a source's
        # code re-entering __init__ must not replace what the outer call
        # is writing).
        raise TypeError("DLPackArray is immutable: it cannot be initialised twice"
                        if self._state == kReady else
                        "DLPackArray is immutable: it cannot be initialised twice (its "
                        "first initialisation " + ("is still running)"
                                                   if self._state == kInitialising
                                                   else "failed)"))
    return _fill(self, obj, copy, device, False, stream)


ctypedef int (*_AdoptStream)(TensorView*, object, bint) noexcept


cdef inline int _fill(DLPackArray self, object obj, object copy, object device,
                      bint dlpack_only, object stream) except -1:
    """Imports ``obj`` into ``self``, an array never initialised: it ends
    ready, or failed for good (every constructor: __init__, its fast path,
    from_dlpack, new_from_object)."""
    cdef int checked
    # Every method refuses from here until kReady, so code of the source's
    # that runs during the import (properties, __index__, __array__,
    # __dlpack__, __del__) can neither read, export nor re-initialise the
    # half-written descriptor: the import may fill self directly.
    self._state = kInitialising
    # No try/finally (Cython saves and clears the thread's exception state
    # for one): _import_into and the stream hook, called through a noexcept
    # type, return -1 with their error set, which this returns in turn.
    checked = _import_into(self, obj, copy, device, dlpack_only, stream)
    if checked != -1 and stream is not None:
        checked = (<_AdoptStream><void*>adopt_consumer_stream)(
            &self._view, stream, device is not None or checked)
    if checked == -1:
        return _fail_import(self)
    mark_ready(self)
    return 0


cdef int _fail_import(DLPackArray self) noexcept:
    """Returns -1 for _fill's failed import, its error still set, after
    dropping the source's memory: the object never exposes a half-written
    descriptor and stays unusable for good."""
    cdef PyObject* kind
    cdef PyObject* value
    cdef PyObject* tb
    self._state = kFailed
    # Dropping the owner may run Python code (a destructor, __del__), which
    # must not start with an exception pending.
    PyErr_Fetch(&kind, &value, &tb)
    _reset_placeholder(self)
    PyErr_Restore(kind, value, tb)
    return -1


cdef inline bint _is_buffer_only_type(type t) noexcept:
    """Whether ``t`` is an exact type known to speak the buffer protocol and
    nothing richer (no __dlpack__, __array_struct__ or __array_interface__):
    those skip the attribute probes of the precedence chain without changing
    its outcome.  Pointer comparisons (a frozenset lookup was 130 instructions
    of every memoryview wrap)."""
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


# The interface probes of _import_into.  getattr(obj, name, None) costs ~200
# instructions even where the answer is None, and an Arrow-only object pays
# it three times.  Where a type's attribute lookup is the generic one and its
# MRO defines none of the three names, only the instance's own storage can
# supply them: its dict is read directly, and no dict (or inline values whose
# shared keys hold none of the names) means "none".
#
# Per type (_type_cache.pxd: a changed class or base gets a new version tag):
# bits 0-1 the storage (dla_attr_storage; DLA_ATTRS_GETATTR unless the MRO
# lacks all three names).  For inline values, which the type's version tag
# does not follow, also bits 3 up: one plus the count of shared keys last
# checked (they are only ever appended), and bit 2: they lacked the names.
cdef TypeSlot _interface_sources[TYPE_CACHE_SIZE]
cdef object _GETATTR = object()  # "no faster answer": the full getattr
cdef str _CAI = "__cuda_array_interface__"
cdef str _STRUCT = "__array_struct__"
cdef str _IFACE = "__array_interface__"


cdef object _interface_source(object obj, type t):
    """Where ``obj``'s interface attributes can come from: None (nowhere),
    its instance dict, or _GETATTR."""
    cdef PyTypeObject* tp = <PyTypeObject*>t
    cdef TypeSlot* slot = type_slot(_interface_sources, tp)
    cdef intptr_t value
    cdef int storage, inline_values
    cdef Py_ssize_t keys
    cdef PyObject* d
    if not DLA_CACHE_TYPES:
        return _GETATTR
    if type_slot_hit(slot, tp):
        value = slot.value
    else:
        value = DLA_ATTRS_GETATTR
        if not (type_has(t, _CAI) or type_has(t, _STRUCT) or type_has(t, _IFACE)):
            value = dla_attr_storage(tp)
        type_slot_store(slot, tp, value)
    storage = value & 3
    if storage == DLA_ATTRS_GETATTR:
        return _GETATTR
    if storage == DLA_ATTRS_NONE:
        return None
    d = dla_instance_dict(<PyObject*>obj, storage, &inline_values)
    if not inline_values:
        if d == NULL:
            return None
        return <object>d if PyDict_Check(<object>d) else _GETATTR
    keys = dla_shared_key_count(tp)
    if keys < 0:
        return _GETATTR
    if (value >> 3) != keys + 1:
        value = ((keys + 1) << 3) | storage
        if dla_shared_keys_lack(tp, <PyObject*>_CAI, <PyObject*>_STRUCT, <PyObject*>_IFACE):
            value |= 4
        type_slot_store(slot, tp, value)
    return None if value & 4 else _GETATTR


cdef inline object _interface_attr(object obj, object source, str name):
    """``getattr(obj, name, None)``, read where ``source`` (_interface_source) says."""
    if source is None:
        return None
    if source is _GETATTR:
        return getattr(obj, name, None)
    return dla_dict_attr(source, name)


cdef inline bint _may_subclass(type t) noexcept:
    """False only for types that cannot subclass DLPackArray: a subclass's
    instances extend DLPackArray's, so its basic size is at least ours.  Every
    foreign type of a DLPack import is smaller (pyarrow's arrays: 80 bytes of
    our 384) and skips isinstance's walk of its MRO (~40 instructions)."""
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
        if isinstance(refusal, BufferError) and _import_extension_dtype(self, obj):
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


# The route each type's objects last took through _import_into, where that
# route follows from the type alone: no C exchange table, not an exact
# ndarray, not able to be a DLPackArray (so none of the earliest branches
# applies), and then one of
#   _ROUTE_PLAIN_DLPACK: the plain __dlpack__ call (~130 instructions of every
#     DLPackArray(pa_array) skipped);
#   _ROUTE_ARROW_FIRST: Arrow data read through its Arrow capsules although it
#     has __dlpack__ (arrow_path_first: pyarrow's tensor and boolean arrays);
#   _ROUTE_INSTANCE_PROBES: no __dlpack__ at all, so the instance probes for
#     the array interfaces come next (an Arrow-only object: ~200 instructions);
#     the probes and everything after them still run for every object.
# The two Arrow routes' values hold the type's Arrow method mask too
# (arrow_methods, above the route's _ROUTE_BITS), read with the route from the
# same state of the type.
# A hit skips the type checks in front of that route; each is a function of
# the type's state, which the version tag follows (_type_cache.pxd).
cdef enum:
    _ROUTE_PLAIN_DLPACK = 1
    _ROUTE_ARROW_FIRST = 2
    _ROUTE_INSTANCE_PROBES = 3
    _ROUTE_BITS = 2
    _ROUTE_MASK = 3

cdef TypeSlot _import_routes[TYPE_CACHE_SIZE]

# _import_into hands every import on in tail position, through these
# pointers: their noexcept types make Cython add no error check after the
# call (the route's -1, its error set, is _import_into's own return value,
# which its caller checks), being variables they keep the C compiler from
# inlining the routes, and with at most six arguments each they pass none
# on the stack, so _import_into needs no stack frame and jumps to the route
# instead of calling it (issue 23: each line of code an import touches is a
# line of the instruction cache).
ctypedef int (*_PlainRoute)(DLPackArray, object, type) noexcept
ctypedef int (*_Route)(DLPackArray, object, object, object, bint, object) noexcept
ctypedef int (*_ArrowRoute)(DLPackArray, object, object, object, int) noexcept
ctypedef int (*_ProbeRoute)(DLPackArray, object, object, object, object, int) noexcept
cdef _PlainRoute _plain_route = <_PlainRoute><void*>_import_plain_dlpack
cdef _Route _dlpack_route = <_Route><void*>_import_dlpack_route
cdef _ArrowRoute _arrow_route = <_ArrowRoute><void*>_import_arrow_route
cdef _ProbeRoute _probe_route = <_ProbeRoute><void*>_import_by_instance_probes
cdef _Route _chain_route = <_Route><void*>_import_chain_route
cdef _Route _copy_route = <_Route><void*>_import_checking_copy


cdef int _import_into(DLPackArray self, object obj, object copy, object device,
                      bint dlpack_only, object stream) noexcept:
    """Fills ``self`` from ``obj`` following the documented protocol precedence.

    Returns -1 with an error set when the import fails (noexcept: every path
    is a route's return value, see above); 1 when ``stream`` was already
    checked against the producer's own device and must not be checked
    against the view's again (a pinned torch tensor: see
    ready_after_request); else 0.
    """
    if copy is not None:  # (None, every plain import's, needs no call to be valid)
        return _copy_route(self, obj, copy, device, dlpack_only, stream)
    return _dispatch_import(self, obj, copy, device, dlpack_only, stream)


cdef int _import_checking_copy(DLPackArray self, object obj, object copy, object device,
                               bint dlpack_only, object stream) except -1:
    """_import_into of a ``copy`` other than None: checked before anything."""
    _check_copy_arg(copy)
    return _dispatch_import(self, obj, copy, device, dlpack_only, stream)


cdef inline int _dispatch_import(DLPackArray self, object obj, object copy, object device,
                                 bint dlpack_only, object stream) noexcept:
    """_import_into once ``copy`` is valid: the cached route of ``obj``'s type,
    else the full chain (same return value; -1 with an error set)."""
    cdef PyTypeObject* tp = Py_TYPE(obj)
    cdef TypeSlot* slot = type_slot(_import_routes, tp)
    cdef intptr_t route
    if type_slot_hit(slot, tp):
        route = slot.value & _ROUTE_MASK
        if route == _ROUTE_PLAIN_DLPACK:
            # Never numpy.ndarray (not cached): host_only is False.
            if copy is None and device is None and stream is None:
                return _plain_route(self, obj, <type>tp)
            return _dlpack_route(self, obj, copy, device, dlpack_only, stream)
        if route == _ROUTE_ARROW_FIRST:
            return _arrow_route(self, obj, copy, device, <int>(slot.value >> _ROUTE_BITS))
        if not dlpack_only:  # _ROUTE_INSTANCE_PROBES (from_dlpack refuses those types)
            return _probe_route(self, obj, copy, device, stream,
                                <int>(slot.value >> _ROUTE_BITS))
    return _chain_route(self, obj, copy, device, dlpack_only, stream)


cdef int _import_dlpack_route(DLPackArray self, object obj, object copy, object device,
                              bint dlpack_only, object stream) except -1:
    """The cached plain-``__dlpack__`` route with something requested."""
    return _import_by_dlpack_call(self, obj, type(obj), copy, device, dlpack_only, stream,
                                  False)


cdef int _import_chain_route(DLPackArray self, object obj, object copy, object device,
                             bint dlpack_only, object stream) except -1:
    """A type with no cached route: the full chain."""
    return _import_by_precedence(self, obj, type(obj), copy, device, dlpack_only, stream)


cdef inline int _import_arrow_first(DLPackArray self, object obj, object copy,
                                    object device, int methods) except -1:
    """Reads ``obj`` through its Arrow PyCapsule interface (``methods``:
    arrow_methods of its type): Arrow data that also has __dlpack__ (read as
    Arrow defines it, not as its __dlpack__ does), or an object with nothing
    before Arrow in the precedence."""
    cdef bint copied = False
    self.owner = view_from_arrow(obj, methods, &self._view, &copied, copy)
    return _finish_import(self, copy, device, copied)


cdef int _import_arrow_route(DLPackArray self, object obj, object copy, object device,
                             int methods) except -1:
    """_import_arrow_first out of line: _import_into's cached Arrow route."""
    return _import_arrow_first(self, obj, copy, device, methods)


cdef int _import_by_precedence(DLPackArray self, object obj, type t, object copy, object device,
                               bint dlpack_only, object stream) except -1:
    """_import_into's protocol chain, from the top (same return value)."""
    cdef const DLPackExchangeAPI* api
    cdef bint copied = False
    cdef PyTypeObject* tp = <PyTypeObject*>t
    cdef bint host_only, cacheable
    cdef int methods
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
    api = exchange_api_of(t)
    if api != NULL:
        owner = view_from_exchange(api, obj, &self._view, &copied)
        if owner is not None:
            self.owner = owner
            return _finish_capsule_import(self, owner, copy, device, copied)
    if type_has(t, "__dlpack__"):
        host_only = <object>t is _ndarray_type()
        cacheable = api == NULL and not _may_subclass(t) and not host_only
        if arrow_path_first(t):
            methods = arrow_methods(t)
            if cacheable:
                type_slot_store(type_slot(_import_routes, tp), tp,
                                _ROUTE_ARROW_FIRST | (<intptr_t>methods << _ROUTE_BITS))
            return _import_arrow_first(self, obj, copy, device, methods)
        if cacheable:
            type_slot_store(type_slot(_import_routes, tp), tp, _ROUTE_PLAIN_DLPACK)
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
    methods = arrow_methods(t)
    if api == NULL and not _may_subclass(t):
        type_slot_store(type_slot(_import_routes, tp), tp,
                        _ROUTE_INSTANCE_PROBES | (<intptr_t>methods << _ROUTE_BITS))
    return _import_by_instance_probes(self, obj, copy, device, stream, methods)


cdef int _import_by_instance_probes(DLPackArray self, object obj, object copy, object device,
                                    object stream, int methods) except -1:
    """The rest of _import_by_precedence once the type-level checks found no
    DLPackArray, capsule, buffer-only type, exchange table or ``__dlpack__``
    (same return value); ``methods`` is arrow_methods(type(obj))."""
    cdef type t = <type>Py_TYPE(obj)
    # Instance lookups, as NumPy does: exporters may set these per object.
    source = _interface_source(obj, t)
    # Where neither the object nor its type can hold an array interface,
    # every probe below answers None and the Arrow protocol comes next: an
    # Arrow-only producer goes there without the probes' locals (~30
    # instructions of references taken and dropped).
    if source is None and methods:
        return _import_arrow_first(self, obj, copy, device, methods)
    return _import_by_interfaces(self, obj, t, source, copy, device, stream)


cdef int _import_by_interfaces(DLPackArray self, object obj, type t, object source,
                               object copy, object device, object stream) except -1:
    """_import_by_instance_probes's chain, from the array interfaces that
    ``source`` (_interface_source) may hold (same return value)."""
    cdef bint copied = False
    # CUDA array interface: after __dlpack__ (which carries the device and
    # stream protocol of its own), before the host-only interfaces.
    cai = _interface_attr(obj, source, _CAI)
    if cai is not None:
        self.owner = view_from_cuda_array_interface(obj, cai, &self._view)
        return _finish_import(self, copy, device, False)
    struct = _interface_attr(obj, source, _STRUCT)
    if struct is not None:
        self.owner = view_from_array_struct_capsule(obj, struct, &self._view)
        return _finish_import(self, copy, device, False)
    iface = _interface_attr(obj, source, _IFACE)
    if iface is not None:
        self.owner = view_from_array_interface(obj, iface, &self._view)
        return _finish_import(self, copy, device, False)
    # Arrow PyCapsule interface: after the array interfaces, which describe
    # the N-D object itself (Arrow sees a column of rows), and before the
    # buffer protocol, whose bytes lose Arrow's type, offset and shape.
    cdef int methods = arrow_methods(t)
    if methods:
        self.owner = view_from_arrow(obj, methods, &self._view, &copied, copy)
        return _finish_import(self, copy, device, copied)
    if PyObject_CheckBuffer(obj):
        self.owner = view_from_buffer(obj, &self._view)
        return _finish_import(self, copy, device, False)
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


cdef bint _import_extension_dtype(DLPackArray self, object obj) except -1:
    """Called when a producer with a NumPy dtype refused DLPack export.

    NumPy refuses extension dtypes (ml_dtypes bfloat16 and float8) that
    DLPack itself carries; their array interface calls the bytes opaque void,
    and the dtype's name says what they are, so they are imported from there.
    A dtype dlpackarray cannot hold at all (datetime64, str, object,
    structured, ml_dtypes' sub-byte int4/float4_e2m1fn) raises BufferError
    naming it, instead of NumPy's generic refusal.  Returns False when the
    producer's BufferError should stand (no NumPy dtype, or one dlpackarray
    supports that the producer refused for another reason, such as byte
    order)."""
    cdef DLDataType dt
    np_dtype = getattr(obj, "dtype", None)
    name = getattr(np_dtype, "name", None)
    if (not isinstance(name, str) or not isinstance(getattr(np_dtype, "kind", None), str)
            or name in _NUMPY_NATIVE_NAMES):
        return False
    supported = getattr(np_dtype, "fields", None) is None
    if supported:
        try:
            dt = parse_dtype(name)
        except (TypeError, ValueError, BufferError):
            supported = False
    if not supported:
        raise BufferError(
            f"cannot import a '{type(obj).__name__}' of dtype {name!r}: dlpackarray exchanges "
            f"whole-byte numeric types only; {supported_dtypes_text().decode()}")
    if getattr(np_dtype, "isnative", False) is not True:
        return False  # byte-swapped: the producer's refusal names the byte order
    iface = getattr(obj, "__array_interface__", None)
    if type(iface) is not dict or dtype_itemsize(dt) != getattr(np_dtype, "itemsize", -1):
        return False
    opaque = dict(<dict>iface)
    opaque["typestr"] = f"|u{np_dtype.itemsize}" if np_dtype.itemsize == 1 else \
        f"{'<' if sys.byteorder == 'little' else '>'}u{np_dtype.itemsize}"
    opaque.pop("descr", None)
    self.owner = view_from_array_interface(obj, opaque, &self._view)
    self._view.dtype = dt
    return True


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


# Instances are recycled by the allocator at the end of this module (not
# Cython's freelist, which zeroes all 384 bytes of every reused instance).
cdef class DLPackArray:
    # The first line is the signature inspect.signature() reads (Cython embeds
    # none in clinic format for classes, and misplaces "/" in the others).
    """DLPackArray(obj, /, *, copy=None, device=None, stream=None)\n--\n\n\
    A zero-copy view of any array-like object, re-exported through every protocol.

    Parameters
    ----------
    obj : object
        A DLPack producer (``__dlpack__``), a ``"dltensor"`` or
        ``"dltensor_versioned"`` capsule (consumed), another
        :class:`DLPackArray`, an object with ``__array_struct__`` or
        ``__array_interface__`` (NumPy array interface, version 3), an
        object with ``__cuda_array_interface__`` (versions 2 and 3), any
        PEP 3118 buffer exporter (bytes, bytearray, memoryview, array.array,
        mmap, ctypes arrays, ...) or, as a last resort, an object with
        ``__array__``.  The first protocol in this order wins: ``__dlpack__``,
        ``__cuda_array_interface__``, ``__array_struct__``,
        ``__array_interface__``, buffer protocol, ``__array__``.
    copy : bool or None, optional
        ``True`` always copies into a new C-contiguous host array, ``False``
        never copies (errors if a copy would be needed), ``None`` copies only
        when needed.
    device : None, "cpu" or (int, int), optional
        Requested device: the source's own, or the CPU (pinned/managed CUDA
        memory is synchronised and relabelled, CUDA device memory copied to
        the host); anything else raises :class:`BufferError`.
    stream : int or None, optional
        The consumer's CUDA stream (1: legacy default stream, 2: per-thread,
        larger: a ``CUstream`` handle, -1: no synchronisation; 0 is refused
        for CUDA, anything but -1 for CPU data).  A DLPack producer gets it
        in ``__dlpack__`` after its ``__dlpack_device__`` was asked; for other
        sources (CUDA array interface, capsules, DLPackArrays) dlpackarray
        orders it after the data's ready stream itself.  Either way the data
        is then ready on that stream.  ``None``: a CUDA producer is asked
        with the legacy stream (1).  Every value, per device type:
        docs/cuda.md, "Stream rules".

    Notes
    -----
    The source object (and any ``Py_buffer`` taken from it) stays alive until
    the last DLPackArray, capsule or consumer array using its memory is gone.

    An array is initialised once: ``__init__`` again raises
    :class:`TypeError`, and an object that is not initialised (made by
    ``DLPackArray.__new__`` alone, or whose ``__init__`` is still running or
    failed) raises :class:`ValueError` from every method, property and
    protocol slot; its ``repr()`` names the state instead.
    """

    # No __cinit__: an object that is not ready is refused by every method,
    # property, protocol slot and C API entry point (check_ready), and a new
    # one holds the TensorView's default state (no data, owner None).  Only a
    # failed initialisation resets to the placeholder, to drop the source's
    # memory at once (_initialise).

    def __init__(self, obj, /, *, copy=None, device=None, stream=None):
        _initialise(self, obj, copy, device, stream)

    # -- DLPack ---------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule (see the DLPack Python specification).

        Parameters
        ----------
        stream : int or None
            Consumer stream.  For CUDA data (docs/cuda.md) the consumer's
            stream is made to wait for the data's ready stream with an event
            (no host blocking): ``None`` and 1 name the legacy default
            stream, 2 per-thread, larger values a ``CUstream``; -1 asks for
            no synchronisation and 0 raises :class:`ValueError`.  CPU data
            accepts only ``None`` and -1 (:class:`ValueError` otherwise);
            other devices raise :class:`BufferError` for a stream.
        max_version : tuple of (int, int) or None
            ``None`` gives a legacy ``"dltensor"`` capsule; major >= 1 a
            versioned ``"dltensor_versioned"`` capsule at version 1.3.
        dl_device : tuple of (int, int) or None
            Target device: the array's own device, or the CPU
            (host-accessible memory is synchronised and shared, CUDA device
            memory copied to the host with IS_COPIED set, refused with
            ``copy=False``); anything else raises :class:`BufferError`.
        copy : bool or None
            ``True`` exports a fresh C-contiguous copy flagged IS_COPIED (on
            the device for CUDA data).

        Returns
        -------
        PyCapsule
        """
        check_ready(self)
        return export_capsule(&self._view, self.owner, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        """Return ``(device_type, device_id)`` with ``device_type`` a :class:`DLDeviceType`."""
        check_ready(self)
        return device_tuple(self._view.device)

    def __dlpack_info__(self):
        """Return the newest DLPack version this producer supports, ``(1, 3)``."""
        check_ready(self)
        return _DLPACK_INFO

    # -- Arrow PyCapsule interface (docs/arrow.md) -----------------------------
    def __arrow_c_schema__(self):
        """Export the Arrow type this array exports as, as an ``"arrow_schema"`` capsule.

        1-D data is a primitive array, N-D data the ``arrow.fixed_shape_tensor``
        extension (one row per leading index), bool ``arrow.bool8``.  Raises
        :class:`TypeError` for dtypes Arrow cannot carry (bfloat16, complex,
        float8).
        """
        check_ready(self)
        return export_arrow_schema(&self._view)

    def __arrow_c_array__(self, requested_schema=None, *, copy=None):
        """Export as ``("arrow_schema", "arrow_array")`` capsules (host memory).

        Raises :class:`BufferError` for memory the host cannot read (CUDA
        device memory: use :meth:`__arrow_c_device_array__`); pinned and
        managed memory is synchronised with its ready stream first.

        Parameters
        ----------
        requested_schema : PyCapsule or None
            An ``"arrow_schema"`` capsule; honoured best effort: bit-packed
            ``"b"`` booleans, or nested fixed-size lists instead of
            ``arrow.fixed_shape_tensor``.
        copy : bool or None
            dlpackarray extension: ``None`` copies only data Arrow cannot
            describe (gaps, negative or zero strides), ``False`` raises
            :class:`BufferError` instead, ``True`` always copies.

        Returns
        -------
        tuple of (PyCapsule, PyCapsule)
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, False, False, None)

    def __arrow_c_stream__(self, requested_schema=None, *, copy=None):
        """Export as an ``"arrow_array_stream"`` capsule holding one chunk.

        Parameters as :meth:`__arrow_c_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, False, True, None)

    def __arrow_c_device_array__(self, requested_schema=None, *, copy=None, **kwargs):
        """Export as ``("arrow_schema", "arrow_device_array")`` capsules.

        Host data has device type 1 (CPU), device id -1 and no sync event.
        CUDA data (device types 2, 3, 13) keeps its device type and id and
        carries a sync event recorded on its ready stream; a copy it needs
        is made on its device.  Other keywords are accepted when ``None``
        (for future additions) and raise :class:`NotImplementedError`
        otherwise.  Parameters as :meth:`__arrow_c_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, True, False, kwargs)

    def __arrow_c_device_stream__(self, requested_schema=None, *, copy=None, **kwargs):
        """Export as an ``"arrow_device_array_stream"`` capsule holding one chunk.

        Parameters as :meth:`__arrow_c_device_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, True, True, kwargs)

    # -- buffer protocol ------------------------------------------------------
    def __getbuffer__(self, Py_buffer* buffer, int flags):
        check_ready(self)
        cdef int64_t* strides = NULL
        # The byte strides are made with the layout, on the first export
        # (fill_buffer), and read by every later one.
        if self._view.ndim <= 8:
            strides = self._byte_strides_inline
        else:
            if not self._buffer_layout.known:
                self._byte_strides.resize(self._view.ndim)
            strides = self._byte_strides.data()
        fill_buffer(buffer, self, &self._view, strides, flags, &self._buffer_layout)

    # -- properties -----------------------------------------------------------
    @property
    def shape(self):
        """tuple of int: extent of each dimension."""
        check_ready(self)
        cdef int i
        if self._shape is None:
            self._shape = tuple([self._view.shape[i] for i in range(self._view.ndim)])
        return self._shape

    @property
    def strides(self):
        """tuple of int: strides in elements (DLPack convention, not bytes)."""
        check_ready(self)
        cdef int i
        if self._strides is None:
            self._strides = tuple([self._view.strides[i] for i in range(self._view.ndim)])
        return self._strides

    @property
    def dtype(self):
        """DType: data type (``code``, ``bits``, ``lanes``, ``name``)."""
        check_ready(self)
        return dtype_object(self._view.dtype)

    @property
    def device(self):
        """tuple: ``(DLDeviceType, device_id)``, as ``__dlpack_device__``."""
        check_ready(self)
        return device_tuple(self._view.device)

    @property
    def ndim(self):
        """int: number of dimensions."""
        check_ready(self)
        return self._view.ndim

    @property
    def size(self):
        """int: number of elements."""
        check_ready(self)
        return view_size(self._view)

    @property
    def itemsize(self):
        """int: bytes per element."""
        check_ready(self)
        return dtype_itemsize(self._view.dtype)

    @property
    def nbytes(self):
        """int: ``size * itemsize``.

        Raises
        ------
        OverflowError
            If it does not fit in int64 (a broadcast view of more elements
            than that, which can be neither copied nor exported as a buffer).
        """
        check_ready(self)
        return view_nbytes(self._view)

    @property
    def readonly(self):
        """bool: whether consumers must not write to the data."""
        check_ready(self)
        return self._view.readonly

    @property
    def data_ptr(self):
        """int: ``DLTensor.data``.

        For host and CUDA-family memory (every device whose data is a plain
        address) this is the address of the first element and
        :attr:`byte_offset` is always 0: every import folds the offset into
        it, as NumPy and PyTorch export.  For OpenCL, Vulkan and Metal it is an
        opaque buffer handle and the first element is :attr:`byte_offset`
        bytes into that buffer.
        """
        check_ready(self)
        return <uintptr_t>self._view.data

    @property
    def byte_offset(self):
        """int: bytes from ``data_ptr`` to the first element (0 unless ``data_ptr`` is opaque)."""
        check_ready(self)
        return self._view.byte_offset

    @property
    def c_contiguous(self):
        """bool: whether the elements are dense in C (row-major) order."""
        check_ready(self)
        return is_c_contiguous(self._view)

    @property
    def f_contiguous(self):
        """bool: whether the elements are dense in Fortran (column-major) order."""
        check_ready(self)
        return is_f_contiguous(self._view)

    def copy(self):
        """Return a C-contiguous, writable host copy as a new :class:`DLPackArray`."""
        check_ready(self)
        cdef TensorView result
        owner = copy_to_heap(&self._view, &result)
        return wrap_view(&result, owner)

    # -- pickle and copy (docs/processes.md; the machinery is in _pickle.pyx) ------
    def __reduce_ex__(self, protocol, /):
        """Pickle support: protocol 5 ships the data out-of-band (no copy) when
        pickle has a ``buffer_callback``; only the bytes the elements span."""
        check_ready(self)
        return _pickling().reduce_array(self, protocol)

    def __copy__(self):
        """``copy.copy``: a writable C-contiguous copy with memory of its own."""
        check_ready(self)
        return _pickling().copy_array(self)

    def __deepcopy__(self, memo, /):
        """``copy.deepcopy``: as :meth:`__copy__` (the elements hold no objects)."""
        check_ready(self)
        return _pickling().copy_array(self)

    # -- zero-copy views -------------------------------------------------------
    def __getitem__(self, key):
        """Basic indexing (ints, slices with any step, ``...``, ``None``) as a view.

        Integers remove a dimension, so indexing every dimension gives a 0-d
        :class:`DLPackArray` (not a Python scalar).  Integer-array and boolean
        indices would copy and raise :class:`IndexError`.
        """
        check_ready(self)
        cdef TensorView result
        index_into(&self._view, key, &result)
        return wrap_view(&result, self.owner)

    def reshape(self, *shape, order="C"):
        """Return a view with a new shape; never copies.

        Parameters
        ----------
        *shape : int or tuple of int
            The new shape, as separate ints or one tuple/list; one entry may
            be ``-1`` (inferred).
        order : {"C", "F"}, optional
            Read and place elements in C (row-major) or Fortran order.

        Returns
        -------
        DLPackArray
            A view sharing this array's memory.

        Raises
        ------
        ValueError
            If the sizes differ, or if the strides cannot express the new
            shape (reshape never copies silently; copy first with
            :meth:`copy`).
        """
        check_ready(self)
        cdef TensorView result
        reshape_into(&self._view, shape, order, &result)
        return wrap_view(&result, self.owner)

    def transpose(self, *axes):
        """Return a view with permuted axes (reversed when none are given).

        Parameters
        ----------
        *axes : int or tuple of int
            Output dimension ``i`` is input dimension ``axes[i]``; negative
            axes count from the end.
        """
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, axes, True, &result)
        return wrap_view(&result, self.owner)

    def permute(self, *dims):
        """Return a view with permuted dimensions (``torch.Tensor.permute``).

        Parameters
        ----------
        *dims : int or tuple of int
            A permutation of all dimensions; negative values count from the end.
        """
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, dims, False, &result)
        return wrap_view(&result, self.owner)

    @property
    def T(self):
        """DLPackArray: the view with all axes reversed (``transpose()``)."""
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, (), True, &result)
        return wrap_view(&result, self.owner)

    def view(self, dtype):
        """Reinterpret the same bytes as another dtype (a view, never a copy).

        Parameters
        ----------
        dtype : DType, str or dtype-like
            The new element type.  With a different item size the last
            dimension must be contiguous and hold a whole number of new
            items, and every other stride must be a whole number of new items.

        Raises
        ------
        ValueError
            If the layout does not allow the reinterpretation.
        """
        check_ready(self)
        cdef TensorView result
        reinterpret_into(&self._view, dtype, &result)
        return wrap_view(&result, self.owner)

    @staticmethod
    def from_buffer(obj, dtype, shape=None, strides=None, offset=0):
        """Typed zero-copy view of a contiguous buffer's raw bytes.

        Like ``numpy.frombuffer`` but N-dimensional and strided; the buffer's
        own format is ignored.

        Parameters
        ----------
        obj : buffer-protocol object
            Exporter of a contiguous buffer (bytes, bytearray, mmap, ...).
        dtype : DType, str or dtype-like
            Element type.
        shape : int or tuple of int, optional
            Default: a 1-D array of every whole item after ``offset``.
        strides : tuple of int, optional
            Strides in **bytes** (like NumPy and the array interface);
            default C-contiguous.  Requires ``shape``.
        offset : int, optional
            Bytes from the start of the buffer to the first element.

        Returns
        -------
        DLPackArray
            Read-only when the buffer is.

        Raises
        ------
        ValueError
            If shape, strides and offset reach outside the buffer.
        """
        cdef TensorView v
        owner = view_from_typed_buffer(obj, dtype, shape, strides, offset, &v)
        return wrap_view(&v, owner)

    # -- CUDA array interface (docs/cuda.md) -------------------------------------
    @property
    def __cuda_array_interface__(self):
        """dict: Numba's CUDA array interface, version 3 (CUDA memory only).

        ``stream`` is the stream the data is ready on (1 for the legacy
        default stream), or None when nothing is pending.  Raises
        :class:`AttributeError` for other devices.
        """
        check_ready(self)
        return export_cuda_array_interface(&self._view, self.shape)

    # -- NumPy array interface --------------------------------------------------
    @property
    def __array_interface__(self):
        """dict: NumPy array interface, version 3 (host memory only).

        ``data`` is ``(address of the first element, readonly)``, ``strides``
        is ``None`` when C-contiguous.  Raises :class:`AttributeError` (so
        that consumers move on to another protocol) for device memory and for
        dtypes without a typestr (bfloat16, float8).
        """
        check_ready(self)
        return export_array_interface(&self._view, self.shape)

    @property
    def __array_struct__(self):
        """PyCapsule: NumPy's C-level array interface (``PyArrayInterface``).

        The capsule holds a reference to this array until it is destroyed.
        Same availability as :attr:`__array_interface__`.
        """
        check_ready(self)
        return export_array_struct(&self._view, self)

    def __array__(self, dtype=None, copy=None):
        """Return a ``numpy.ndarray`` (NumPy 2 semantics; NumPy imported lazily).

        Parameters
        ----------
        dtype : dtype-like, optional
            Convert to this dtype (a copy unless it already matches).
        copy : bool or None, optional
            ``True`` always copies; ``False`` never does (``ValueError`` if a
            dtype conversion would be needed); ``None`` copies only if needed.

        Returns
        -------
        numpy.ndarray
            A view of this array's memory unless a copy was needed or asked
            for; read-only when this array is.  bfloat16/float8 data becomes an
            ``ml_dtypes`` array (``TypeError`` without ml_dtypes).
        """
        check_ready(self)
        return export_numpy(&self._view, self.shape, self, dtype, copy)

    # -- Python scalars ----------------------------------------------------------
    def item(self, *args):
        """Return one element as a Python scalar (``bool``, ``int``, ``float`` or ``complex``).

        Like ``numpy.ndarray.item``.  The value is read from the memory, so
        every dtype works without NumPy; bfloat16 and float8 give ``float``.

        Parameters
        ----------
        *args : int or tuple of int
            Nothing for an array of size 1; one int for a flat index in C
            order; one int per dimension (or one tuple of them) for a
            multi-index.  Negative indices count from the end.

        Raises
        ------
        ValueError
            Without arguments if the size is not 1, or for a wrong number of
            indices.
        IndexError
            If an index is out of bounds.
        BufferError
            If the data is not in host-accessible memory.
        """
        check_ready(self)
        return item_of(&self._view, args)

    def tolist(self):
        """Return the elements as nested lists of Python scalars (a scalar for 0-d arrays).

        Like ``numpy.ndarray.tolist``; the scalars are those of :meth:`item`.

        Raises
        ------
        BufferError
            If the data is not in host-accessible memory.
        MemoryError
            If the result has more entries than Python lists can hold.
        """
        check_ready(self)
        return tolist_of(&self._view)

    def __float__(self):
        check_ready(self)
        return float(scalar_of(&self._view))

    def __int__(self):
        check_ready(self)
        return int(scalar_of(&self._view))

    def __complex__(self):
        check_ready(self)
        return complex(scalar_of(&self._view))

    def __index__(self):
        check_ready(self)
        return index_of(&self._view)

    def __bool__(self):
        check_ready(self)
        return truth_of(&self._view)

    def __len__(self):
        check_ready(self)
        if self._view.ndim == 0:
            raise TypeError("len() of a 0-d DLPackArray")
        return self._view.shape[0]

    def __repr__(self):
        # Never raises (debuggers and tracebacks call it): names the state.
        if self._state != kReady:
            return (f"<{type(self).__name__} (uninitialised)>" if self._state == kUninitialised
                    else f"<{type(self).__name__} (initialising)>"
                    if self._state == kInitialising
                    else f"<{type(self).__name__} (initialisation failed)>")
        dev_type, dev_id = device_tuple(self._view.device)
        dev_name = dev_type.name.lower() if isinstance(dev_type, DLDeviceType) else str(dev_type)
        return (f"DLPackArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"strides={self.strides}, device='{dev_name}:{dev_id}', "
                f"readonly={bool(self._view.readonly)})")


def from_dlpack(x, /, *, device=None, copy=None, stream=None):
    """Consume a DLPack producer (or capsule) as a :class:`DLPackArray`.

    Follows the array API ``from_dlpack``: asks ``x.__dlpack__`` for a
    versioned capsule (``max_version=(1, 3)``) and passes ``dl_device``/``copy``
    on; a producer that refuses those keywords is asked again with
    ``max_version`` only, then with none, and whatever it could not take is
    applied here.  NumPy arrays of ``ml_dtypes`` bfloat16/float8, which
    NumPy refuses to export, are imported as :class:`DLPackArray` does.
    pyarrow arrays other than plain integer and floating-point ones are read
    through their Arrow capsules, which define them (docs/arrow.md,
    "Precedence").

    Parameters
    ----------
    x : object
        An object with ``__dlpack__``, or a DLPack capsule (consumed).
    device : None, "cpu" or (int, int), optional
        Target device; None keeps the producer's device.
    copy : bool or None, optional
        ``True`` always copies, ``False`` never copies, ``None`` copies only if needed.
    stream : int or None, optional
        The consumer's CUDA stream, as for :class:`DLPackArray`.

    Returns
    -------
    DLPackArray

    Raises
    ------
    AttributeError
        If ``x`` has no ``__dlpack__`` method and is not a capsule.
    BufferError
        If the producer cannot export the data as requested, or its dtype is
        one dlpackarray cannot hold (the message names it).
    ValueError
        If ``x`` is Arrow data with nulls (the message counts them).
    """
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    _fill(a, x, copy, device, True, stream)
    return a


cdef DLPackArray new_from_object(object obj, object copy, object device):
    """``DLPackArray(obj, copy=copy, device=device)`` without the Python call."""
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    _fill(a, obj, copy, device, False, None)
    return a


# -- The constructor's fast path ----------------------------------------------
# DLPackArray(x) with one positional argument is the commonest call there is.
# Cython's generated vectorcall constructor runs the generic keyword parser of
# __init__ (a name table, a new reference per default, a cleanup loop: ~70
# instructions); this one goes straight to _initialise.  Everything else
# (keywords, other argument counts, subclasses, which get type.__call__
# anyway) takes the generated one, with its errors.
cdef extern from "Python.h":
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf)
    void PyType_Modified(PyTypeObject* t)


cdef Vectorcall _generated_constructor = (<VectorcallType*>DLPackArray).tp_vectorcall


cdef PyObject* _construct(PyObject* t, PyObject* const* args, size_t nargsf,
                          PyObject* kwnames) except NULL:
    if kwnames != NULL or PyVectorcall_NARGS(nargsf) != 1 or t != <PyObject*>DLPackArray:
        return _generated_constructor(t, args, nargsf, kwnames)
    return _construct_from(<object>args[0])


cdef PyObject* _construct_from(object obj) except NULL:
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    # Never initialised (just made): _initialise's check has nothing to refuse.
    _fill(a, obj, None, None, False, None)
    Py_INCREF(a)
    return <PyObject*>a


if _generated_constructor != NULL:
    # (Through void*: the slot's type cannot say "NULL means an exception".)
    (<VectorcallType*>DLPackArray).tp_vectorcall = <Vectorcall><void*>_construct
    PyType_Modified(<PyTypeObject*>DLPackArray)


# -- Allocation ---------------------------------------------------------------
# Exchanges create and drop one DLPackArray per call, so instances are
# recycled (_recycler.pxd) instead of going back to the allocator.  Nearly
# all of a reused instance is written again by tp_new: the TensorView, the
# stride vector and the buffer layout are constructed (the layout's
# value-initialisation zeroes it), the object fields set to None, and the
# inline shape/stride arrays are never read before they are written.  Only
# the fields a fresh allocation leaves zero and nothing writes again are
# cleared: the weak-reference list (by the recycler) and the state (here).
cdef Recycler _recycled


cdef PyObject* _allocate(PyTypeObject* t, Py_ssize_t n) noexcept:
    cdef PyObject* o = recycler_alloc(&_recycled, t, n)
    if o != NULL:
        # A kept instance still holds its last state; a fresh one is zeroed
        # (kUninitialised) already.
        (<DLPackArray>o)._state = kUninitialised
    return o


cdef void _release(void* o) noexcept:
    # Called by tp_dealloc, the instance already untracked and cleared.
    recycler_free(&_recycled, <PyObject*>o)


recycler_install(&_recycled, <PyTypeObject*>DLPackArray, _allocate, _release)

# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPack capsules: consume (import) and produce (export) per the Python spec."""
from cpython.long cimport PyLong_AsLongAndOverflow
from cpython.object cimport PyObject
from cpython.pycapsule cimport (
    PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_GetPointer, PyCapsule_IsValid,
    PyCapsule_SetName,
)
from libc.stdint cimport uint64_t

from dlpackarray.abi cimport (
    DLDevice, DLManagedTensor, DLManagedTensorVersioned, kCapsuleLegacy, kCapsuleLegacyUsed,
    kCapsuleVersioned, kCapsuleVersionedUsed, kDLCPU, kDLCUDA, kDLPackMajorVersion,
    kDLPackMinorVersion, kDLROCM, kFlagIsCopied, kFlagReadOnly,
)
from dlpackarray.core cimport (
    CopyMode, TensorView, adopt_consumed_capsule, call_legacy_deleter, call_versioned_deleter,
    device_is_host_accessible, kProducer, new_legacy_capsule, new_versioned_capsule,
    release_adopted_capsule, resolve_device_request, validate, view_from_dltensor,
)
from dlpackarray._common cimport copy_to_heap, parse_copy, parse_device

# What a consumer asks producers for: the newest version we understand.
cdef tuple _MAX_VERSION = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))
cdef str _DLPACK_NAME = "__dlpack__"
cdef tuple _KWNAMES_MAX_VERSION = ("max_version",)


cdef extern from "Python.h":
    object PyObject_VectorcallMethod(object name, PyObject** args, size_t nargsf,
                                     object kwnames)


cdef bint is_dlpack_capsule(object obj):
    return PyCapsule_CheckExact(obj)


cdef object view_from_capsule(object capsule, TensorView* out, bint* copied):
    """Consumes a "dltensor"/"dltensor_versioned" capsule exactly once.

    Returns the capsule itself as the owner: once renamed to ``used_*`` it is
    adopted (its destructor now calls the tensor's deleter), so no separate
    owner object is allocated on this hot path.  ``copied`` receives the
    producer's IS_COPIED flag.
    """
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* ml
    cdef const char* name
    if not PyCapsule_CheckExact(capsule):
        # e.g. a producer whose __dlpack__ returned something else.
        raise TypeError(
            f"expected a DLPack PyCapsule, got a '{type(capsule).__name__}' object")
    copied[0] = False
    if PyCapsule_IsValid(capsule, kCapsuleVersioned):
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, kCapsuleVersioned)
        # Renaming first transfers ownership: from here on the producer's
        # capsule destructor no longer calls the deleter; ours does.
        PyCapsule_SetName(capsule, kCapsuleVersionedUsed)
        if mv.version.major != kDLPackMajorVersion:
            # Spec: on a major mismatch the consumer may only call the deleter.
            major, minor = mv.version.major, mv.version.minor
            call_versioned_deleter(mv)
            raise BufferError(
                f"DLPack capsule has version {major}.{minor}; this consumer understands "
                f"major version {kDLPackMajorVersion} only")
        try:
            view_from_dltensor(mv.dl_tensor, out)
            out.readonly = (mv.flags & kFlagReadOnly) != 0
            copied[0] = (mv.flags & kFlagIsCopied) != 0
            validate(out[0])
        except BaseException:
            # Refused: release the tensor now rather than when the (already
            # renamed, so inert) capsule happens to die.
            call_versioned_deleter(mv)
            raise
        adopt_consumed_capsule(capsule, True)
    elif PyCapsule_IsValid(capsule, kCapsuleLegacy):
        ml = <DLManagedTensor*>PyCapsule_GetPointer(capsule, kCapsuleLegacy)
        PyCapsule_SetName(capsule, kCapsuleLegacyUsed)
        try:
            view_from_dltensor(ml.dl_tensor, out)
            out.readonly = False
            validate(out[0])
        except BaseException:
            call_legacy_deleter(ml)
            raise
        adopt_consumed_capsule(capsule, False)
    else:
        name = PyCapsule_GetName(capsule)
        pyname = None if name == NULL else name.decode(errors="replace")
        if pyname in ("used_dltensor", "used_dltensor_versioned"):
            raise ValueError(
                f"this DLPack capsule ('{pyname}') has already been consumed; a capsule can "
                "be consumed only once")
        raise TypeError(
            f"a PyCapsule named {pyname!r} is not a DLPack tensor capsule "
            "(expected 'dltensor' or 'dltensor_versioned')")
    return capsule


cdef void release_adopted(object capsule) noexcept:
    """Undoes view_from_capsule's adoption when the import fails later.

    Any module may call release_adopted_capsule directly: the shim is linked
    once (libdlpackarray_core), so every module recognises the destructor.
    """
    release_adopted_capsule(capsule)


cdef object request_capsule(object obj, object dl_device, object copy):
    """Calls ``obj.__dlpack__`` as a spec consumer: newest version first, then
    the legacy signature if the producer rejects the new keywords."""
    cdef PyObject* args[2]
    try:
        if dl_device is None and copy is None:
            # The common request as one vectorcall with a constant kwnames
            # tuple: a Python-level keyword call would build a dict per call.
            args[0] = <PyObject*>obj
            args[1] = <PyObject*>_MAX_VERSION
            return PyObject_VectorcallMethod(_DLPACK_NAME, args, 1, _KWNAMES_MAX_VERSION)
        return obj.__dlpack__(max_version=_MAX_VERSION, dl_device=dl_device, copy=copy)
    except TypeError:
        # A producer older than DLPack 1.0 knows none of these keywords.
        return obj.__dlpack__()


cdef inline bint _is_versioned_request(object max_version) except -1:
    if max_version is None:
        return False
    if type(max_version) is not tuple or len(<tuple>max_version) != 2:
        raise TypeError(f"max_version must be None or a (major, minor) tuple, got {max_version!r}")
    major = (<tuple>max_version)[0]
    if not isinstance(major, int) or not isinstance((<tuple>max_version)[1], int):
        raise TypeError(f"max_version must hold two ints, got {max_version!r}")
    # Spec: major >= ours -> our versioned struct; an older major gets the
    # legacy struct, which this producer still supports.  Compared as C ints
    # (no temporary int object on every export); a huge major is just "newer".
    cdef int overflow = 0
    cdef long major_c = PyLong_AsLongAndOverflow(major, &overflow)
    if overflow != 0:
        return overflow > 0
    return major_c >= kDLPackMajorVersion


cdef int _check_stream(const TensorView* v, object stream) except -1:
    if stream is None:
        return 0
    if type(stream) is not int and not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
    if stream == -1:
        return 0
    if v.device.device_type == kDLCPU or device_is_host_accessible(v.device):
        raise BufferError(
            f"stream={stream!r} is not valid for CPU data: only None or -1 may be passed")
    if v.device.device_type == kDLCUDA and stream == 0:
        raise ValueError("stream=0 is ambiguous for CUDA and disallowed by the DLPack spec; "
                         "use 1 for the legacy default stream or 2 for per-thread")
    if v.device.device_type == kDLROCM and stream in (1, 2):
        raise ValueError(f"stream={stream} is not supported for ROCm data")
    if stream < -1:
        raise ValueError(f"stream must be >= -1, got {stream}")
    return 0


cdef object export_capsule(const TensorView* v, object owner, object stream,
                           object max_version, object dl_device, object copy):
    """``__dlpack__`` for a view whose memory ``owner`` keeps alive."""
    cdef bint versioned = _is_versioned_request(max_version)
    if stream is not None or dl_device is not None or copy is not None:
        return _export_requested(v, owner, stream, versioned, dl_device, copy)
    return _new_capsule(v, owner, versioned, 0)


cdef inline object _new_capsule(const TensorView* v, object owner, bint versioned,
                                uint64_t flags):
    if v.readonly:
        if not versioned:
            # Like NumPy: the legacy struct has no read-only flag, so handing
            # out read-only memory through it would invite writes.
            raise BufferError(
                "cannot export read-only data as a legacy DLPack capsule; call "
                "__dlpack__(max_version=(1, 0)) or newer to receive it with the READ_ONLY flag")
        flags |= kFlagReadOnly
    if versioned:
        return new_versioned_capsule(v[0], flags, <PyObject*>owner)
    return new_legacy_capsule(v[0], <PyObject*>owner)


cdef object _export_requested(const TensorView* v, object owner, object stream, bint versioned,
                              object dl_device, object copy):
    """The export path when the consumer passed stream, dl_device or copy."""
    cdef uint64_t flags = 0
    cdef TensorView copied
    cdef TensorView on_host
    cdef DLDevice target
    cdef CopyMode mode = <CopyMode>parse_copy(copy)
    _check_stream(v, stream)
    if dl_device is not None:
        # The device rule (rules.hpp), shared with the consumer side.
        target = resolve_device_request(v.device, parse_device(dl_device), mode, kProducer)
        if target.device_type != v.device.device_type or target.device_id != v.device.device_id:
            # Host-accessible memory (pinned/managed) is readable as CPU data
            # without a copy; the consumer asked to see it as CPU memory.
            on_host = v[0]
            on_host.device = target
            v = &on_host
    if copy is True:
        owner = copy_to_heap(v, &copied)
        flags |= kFlagIsCopied
        v = &copied
    return _new_capsule(v, owner, versioned, flags)

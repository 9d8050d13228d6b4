"""The checker's own ctypes view of the structs behind the exchange capsules.

Only what the rules read: the DLPack managed tensors and exchange table
(https://dmlc.github.io/dlpack/latest/c_api.html), the Arrow C data / device structs
(https://arrow.apache.org/docs/format/CDataInterface.html,
https://arrow.apache.org/docs/format/CDeviceDataInterface.html),
NumPy's ``PyArrayInterface`` and the CPython capsule calls.  A private ``PyDLL`` handle is
used because ``ctypes.pythonapi``'s function objects are shared process-wide and other
libraries reassign their ``argtypes``.
"""

from __future__ import annotations

import ctypes
import weakref

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_ROCM = 10
KDL_CUDA_MANAGED = 13
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2
KNOWN_FLAGS = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_IS_SUBBYTE_TYPE_PADDED

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", c_int64_p),
        ("strides", c_int64_p),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


class ArrowSchema(ctypes.Structure):
    pass


ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]


class ArrowArray(ctypes.Structure):
    pass


ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]


class ArrowDeviceArray(ctypes.Structure):
    _fields_ = [
        ("array", ArrowArray),
        ("device_id", ctypes.c_int64),
        ("device_type", ctypes.c_int32),
        ("sync_event", ctypes.c_void_p),
        ("reserved", ctypes.c_int64 * 3),
    ]


class ArrowArrayStream(ctypes.Structure):
    _fields_ = [
        ("get_schema", ctypes.c_void_p),
        ("get_next", ctypes.c_void_p),
        ("get_last_error", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


class ArrowDeviceArrayStream(ctypes.Structure):
    _fields_ = [
        ("device_type", ctypes.c_int32),
        ("get_schema", ctypes.c_void_p),
        ("get_next", ctypes.c_void_p),
        ("get_last_error", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


class PyArrayInterface(ctypes.Structure):
    """NumPy's ``__array_struct__`` payload (``two`` must be 2)."""

    _fields_ = [
        ("two", ctypes.c_int),
        ("nd", ctypes.c_int),
        ("typekind", ctypes.c_char),
        ("itemsize", ctypes.c_int),
        ("flags", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("data", ctypes.c_void_p),
        ("descr", ctypes.c_void_p),
    ]


#: One-pointer callback: a DLPack deleter or an Arrow release callback.
VOID_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
#: The same, called with the GIL held: calling through ``VOID_FN`` releases the GIL, and a
#: deleter that needs it without taking it would crash the checker in-process (that case is
#: probed on purpose, in a forked child, by ``dlpack.deleter.without-gil``).
PY_VOID_FN = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)

api = ctypes.PyDLL(None)
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_GetDestructor.restype = ctypes.c_void_p
api.PyCapsule_GetDestructor.argtypes = [ctypes.py_object]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Renamed capsules keep pointing at their name: these buffers live as long as the process.
USED_NAMES = {
    "dltensor": ctypes.create_string_buffer(b"used_dltensor"),
    "dltensor_versioned": ctypes.create_string_buffer(b"used_dltensor_versioned"),
}


def is_capsule(obj) -> bool:
    return type(obj).__name__ == "PyCapsule"


def capsule_name(capsule) -> str | None:
    """The capsule's name (``None`` for a NULL name)."""
    raw = api.PyCapsule_GetName(capsule)
    return None if raw is None else raw.decode("utf-8", "replace")


def capsule_pointer(capsule) -> int:
    name = api.PyCapsule_GetName(capsule)
    return api.PyCapsule_GetPointer(capsule, name) or 0


def has_destructor(capsule) -> bool:
    return bool(api.PyCapsule_GetDestructor(capsule))


def rename_used(capsule, name: str) -> None:
    """Rename a DLPack capsule to its ``used_`` name, as a consumer taking ownership does."""
    api.PyCapsule_SetName(capsule, ctypes.cast(USED_NAMES[name], ctypes.c_char_p))


class CallCounter:
    """Counts the calls a struct makes to its deleter / release pointer.

    The struct's pointer is set to :data:`address`, one C callback shared by every counter
    that finds its counter by the struct address it is called with (``struct``).
    ``forward`` calls at most once the original function (the real cleanup); every call is
    counted, so a second call is observed instead of freeing twice.

    A counter lives as long as the probe holding it; after that a late call through the
    shared callback finds no counter and does nothing (the cleanup it forwarded already
    ran, or is the probe's to run).  A callback per counter would have to live as long as
    the process, since a producer may call it at any time: one shared callback keeps the
    checker's memory constant over any number of checks.
    """

    def __init__(
        self,
        original: int,
        forward: bool,
        struct: int,
        clear_release_field: int | None = None,
    ):
        self.calls = 0
        #: The struct's release field right after the forwarded call (Arrow: NULL when the
        #: callback marked the struct released); None until then.
        self.left = None
        self.original = original
        self.forward = forward
        self._clear = clear_release_field
        self.address = _DISPATCH_ADDRESS
        _LIVE[struct] = self

    def _called(self, ptr):
        self.calls += 1
        if self.calls == 1 and self.forward and self.original:
            if self._clear is not None:
                # An Arrow release callback marks its struct released (release = NULL)
                # itself; hand it the real pointer back so it sees its own callback.
                ctypes.c_void_p.from_address(self._clear).value = self.original
            PY_VOID_FN(self.original)(ptr)
            if self._clear is not None:
                self.left = ctypes.c_void_p.from_address(self._clear).value or 0


#: Struct address -> the counter standing in for its deleter / release (weak: a counter
#: goes with the probe that made it).
_LIVE: weakref.WeakValueDictionary[int, CallCounter] = weakref.WeakValueDictionary()


def _dispatch(ptr):
    counter = _LIVE.get(ptr or 0)
    if counter is not None:
        counter._called(ptr)


#: The one C callback every counter's struct points to; it lives as long as the process.
_DISPATCH = VOID_FN(_dispatch)
_DISPATCH_ADDRESS = ctypes.cast(_DISPATCH, ctypes.c_void_p).value

_libc = ctypes.CDLL(None)


def poison_heap(size: int, count: int = 8) -> None:
    """Leave ``count`` freed, 0xA5-filled ``size``-byte blocks on top of the C heap.

    A producer that ``malloc``s a struct of that size next gets one of them, so fields it
    forgets to initialise read as 0xA5.. instead of whatever happened to be there: an
    uninitialised-field rule then fails every time, not by chance.
    """
    _libc.malloc.restype = ctypes.c_void_p
    _libc.malloc.argtypes = [ctypes.c_size_t]
    _libc.free.argtypes = [ctypes.c_void_p]
    blocks = [_libc.malloc(size) for _ in range(count)]
    for b in blocks:
        if b:
            ctypes.memset(b, 0xA5, size)
    for b in reversed(blocks):
        if b:
            _libc.free(b)


def call_on_native_thread(fn: int, arg: int) -> None:
    """Run the C function ``void fn(void *arg)`` on a new pthread and wait for it.

    The thread is created by the C library, so it has no Python thread state and does not
    hold the GIL -- the situation of a consumer that drops its last reference on a worker
    thread.  (A deleter's signature fits a pthread start routine on the supported ABIs;
    its return value is ignored.)  ``pthread_join`` is called through ``CDLL``, which
    releases the GIL, so a deleter that takes the GIL itself can get it.
    """
    create = _libc.pthread_create
    create.restype = ctypes.c_int
    create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]
    create.argtypes += [ctypes.c_void_p]
    join = _libc.pthread_join
    join.restype = ctypes.c_int
    join.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    tid = ctypes.c_void_p()
    rc = create(ctypes.byref(tid), None, fn, arg)
    if rc:
        raise OSError(rc, "pthread_create failed")
    join(tid, None)


class PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer`` (stable layout since 3.3)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


PYBUF_WRITABLE = 0x0001
PYBUF_RECORDS_RO = 0x0004 | 0x0010 | 0x0008  # FORMAT | STRIDES (includes ND)

api.PyObject_GetBuffer.restype = ctypes.c_int
api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(PyBuffer), ctypes.c_int]
api.PyBuffer_Release.restype = None
api.PyBuffer_Release.argtypes = [ctypes.POINTER(PyBuffer)]


def buffer_info(obj, flags: int = PYBUF_RECORDS_RO) -> dict | None:
    """What ``PyObject_GetBuffer(obj, flags)`` fills in, or ``None`` without the protocol.

    Raises the exporter's exception when it refuses ``flags``.
    """
    try:
        memoryview(obj).release()
    except TypeError:
        return None
    view = PyBuffer()
    api.PyObject_GetBuffer(obj, ctypes.byref(view), flags)  # PyDLL raises the error set
    try:
        nd = view.ndim
        return {
            "ptr": view.buf or 0,
            "len": view.len,
            "itemsize": view.itemsize,
            "readonly": bool(view.readonly),
            "ndim": nd,
            "format": None if view.format is None else view.format.decode(),
            "shape": tuple(view.shape[i] for i in range(nd)) if view.shape else None,
            "strides": tuple(view.strides[i] for i in range(nd)) if view.strides else None,
        }
    finally:
        api.PyBuffer_Release(ctypes.byref(view))

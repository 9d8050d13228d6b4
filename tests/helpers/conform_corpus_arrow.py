"""Deliberately broken Arrow PyCapsule producers for the entries of
``conform_corpus.CORPUS`` that pin the Arrow rules of ``dlpackarray.testing``: arrays,
device arrays, schemas and streams (host and device) made from pyarrow and DLPackArray
exports, each changing one thing: a capsule name, a reserved field, a release callback
that is cached, called twice or puts itself back, a stream callback, a device claimed, a
method without the ``requested_schema`` or device keywords."""

from __future__ import annotations

import ctypes
import os

import numpy as np
from conform_capsules import CAPSULE_NAMES, DESTRUCTOR, KEEP_ALIVE, capi

from dlpackarray.testing import _abi


def _rename(capsule, name):
    """A new capsule on the same struct (no destructor); ``capsule`` must be kept alive."""
    return capi.PyCapsule_New(
        _abi.capsule_pointer(capsule), ctypes.addressof(CAPSULE_NAMES[name]), None
    )


class ArrowArray:
    """``__arrow_c_array__`` (and the device variant) of a pyarrow int64 array, edited."""

    def __init__(self, bug=None):
        import pyarrow as pa

        self.pa = pa.array([1, 2, 3], type=pa.int64())
        self.bug = bug
        self.kept = []

    def __arrow_c_array__(self, requested_schema=None):
        if requested_schema is not None and self.bug == "requested-raises":
            raise NotImplementedError("requested_schema is not supported")
        if requested_schema is not None and self.bug == "requested-other":
            import pyarrow as pa

            return self.pa.cast(pa.int32()).__arrow_c_array__()
        s, a = self.pa.__arrow_c_array__(requested_schema)
        arr = _abi.ArrowArray.from_address(_abi.capsule_pointer(a))
        if self.bug == "release-keeps":
            arr.release = _keeps_release(arr.release)
        if self.bug == "release-cached":
            return s, _cached_release(a, self.kept)
        if self.bug == "swap":
            return a, s
        if self.bug == "release-null":
            arr.release = None  # leaks the array: the test process does not mind
        if self.bug == "n_buffers":
            arr.n_buffers = 1
        if self.bug == "length":
            arr.length = -1
        if self.bug == "no-destructor":
            return s, _same_name(a, self.kept)
        if self.bug == "release-twice":
            return s, _twice(a, self.kept)
        return s, a

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        s, a = self.pa.__arrow_c_device_array__(requested_schema, **kwargs)
        d = _zero_reserved(a)
        if self.bug == "sync-event":
            d.sync_event = 0x1000
        if self.bug == "device-type":
            d.device_type = _abi.KDL_CUDA  # the buffers are pyarrow's host memory
        if self.bug == "reserved":
            d.reserved[1] = 7
        if self.bug == "device-names":
            self.kept.append(a)
            return s, _rename(a, "arrow_stream")
        return s, a


_ARROW_NAME = ctypes.create_string_buffer(b"arrow_array")


def _zero_reserved(capsule):
    """pyarrow 26 leaves ArrowDeviceArray.reserved uninitialised (rule
    arrow.device-array.reserved-zero); the corpus's other device arrays must not."""
    d = _abi.ArrowDeviceArray.from_address(_abi.capsule_pointer(capsule))
    for i in range(3):
        d.reserved[i] = 0
    return d


def _keeps_release(real):
    """A release callback that releases, then puts itself back (never marks released)."""

    def release(address):
        s = _abi.ArrowArray.from_address(address)
        s.release = real
        _abi.PY_VOID_FN(real)(address)
        s.release = own

    cb = _abi.VOID_FN(release)
    KEEP_ALIVE.append(cb)
    own = ctypes.cast(cb, ctypes.c_void_p).value
    return own


def _cached_release(capsule, kept):
    """A capsule whose destructor, finding the struct moved out (release NULL), releases it
    anyway through the callback it cached at export: the moved copy's owner then frees the
    same private data a second time."""
    kept.append(capsule)
    address = _abi.capsule_pointer(capsule)
    real = _abi.ArrowArray.from_address(address).release
    released = []  # this export's private data was freed: a second release is a double free

    def release(ptr):
        s = _abi.ArrowArray.from_address(ptr)
        if released:
            os.abort()  # what a C allocator does with a double free, when lucky
        released.append(True)
        s.release = real
        _abi.PY_VOID_FN(real)(ptr)

    cb = _abi.VOID_FN(release)
    cached = ctypes.cast(cb, ctypes.c_void_p).value
    _abi.ArrowArray.from_address(address).release = cached

    def destroy(_cap):
        s = _abi.ArrowArray.from_address(address)
        _abi.PY_VOID_FN(s.release or cached)(address)

    dcb = DESTRUCTOR(destroy)
    KEEP_ALIVE.extend([cb, dcb])
    return capi.PyCapsule_New(
        address, ctypes.addressof(_ARROW_NAME), ctypes.cast(dcb, ctypes.c_void_p).value
    )


def _same_name(capsule, kept):
    """An "arrow_array" capsule on ``capsule``'s struct, without a destructor."""
    kept.append(capsule)
    return capi.PyCapsule_New(_abi.capsule_pointer(capsule), ctypes.addressof(_ARROW_NAME), None)


def _twice(capsule, kept):
    """A capsule whose destructor calls the array's release twice (captured before use)."""
    kept.append(capsule)
    address = _abi.capsule_pointer(capsule)

    def destroy(_cap):
        s = _abi.ArrowArray.from_address(address)
        if s.release:
            fn = _abi.VOID_FN(s.release)
            fn(address)
            fn(address)

    cb = DESTRUCTOR(destroy)
    KEEP_ALIVE.append(cb)
    return capi.PyCapsule_New(
        address, ctypes.addressof(_ARROW_NAME), ctypes.cast(cb, ctypes.c_void_p).value
    )


class ArrowCudaArray(ArrowArray):
    """A pretend CUDA device array over pyarrow's host buffers (never read as device
    memory) whose sync_event points to an event handle: a made-up value, never used.
    Its CPU method refuses the "device" data, unless bug "host-method": then it exports
    the very buffers its ``__cuda_array_interface__`` calls device memory."""

    def __init__(self, bug=None):
        super().__init__(bug)
        self.event = ctypes.c_void_p(0 if bug == "null-event" else 0xE7E7)
        values = self.pa.buffers()[1].address
        self.__cuda_array_interface__ = {
            "shape": (3,),
            "typestr": "<i8",
            "data": (values, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }

    def __dlpack_device__(self):
        return (_abi.KDL_CUDA, 0)

    def __arrow_c_array__(self, requested_schema=None):
        if self.bug != "host-method":
            raise BufferError("the data is on device CUDA:0")
        return super().__arrow_c_array__(requested_schema)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        s, a = super().__arrow_c_device_array__(requested_schema, **kwargs)
        d = _abi.ArrowDeviceArray.from_address(_abi.capsule_pointer(a))
        d.device_type, d.device_id = _abi.KDL_CUDA, 0
        d.sync_event = ctypes.addressof(self.event)
        return s, a


_GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _dirty_chunks(stream_capsule):
    """Wrap a device stream's get_next so that each chunk's reserved bytes are not zero."""
    s = _abi.ArrowDeviceArrayStream.from_address(_abi.capsule_pointer(stream_capsule))
    real = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(s.get_next)

    def get_next(stream, out):
        rc = real(stream, out)
        if rc == 0:
            _abi.ArrowDeviceArray.from_address(out).reserved[2] = 5
        return rc

    cb = _GET_NEXT(get_next)
    KEEP_ALIVE.append(cb)
    s.get_next = ctypes.cast(cb, ctypes.c_void_p).value


class ArrowNoRequested:
    def __init__(self):
        import pyarrow as pa

        self.pa = pa.array([1, 2, 3], type=pa.int64())

    def __arrow_c_array__(self):
        return self.pa.__arrow_c_array__()


class ArrowDeviceNoKwargs(ArrowArray):
    def __arrow_c_device_array__(self, requested_schema=None):
        s, a = self.pa.__arrow_c_device_array__(requested_schema)
        _zero_reserved(a)
        return s, a


class ArrowSchema:
    def __init__(self):
        import pyarrow as pa

        self.t = pa.int64()
        self.kept = []

    def __arrow_c_schema__(self):
        c = self.t.__arrow_c_schema__()
        self.kept.append(c)
        return _rename(c, "arrow_schemaX")


class ArrowStream:
    """``__arrow_c_stream__`` of a pyarrow table, renamed or with a NULL callback."""

    def __init__(self, bug):
        import pyarrow as pa

        self.t = pa.table({"a": [1, 2, 3]})
        self.bug = bug
        self.kept = []

    def __arrow_c_stream__(self, requested_schema=None):
        c = self.t.__arrow_c_stream__(requested_schema)
        if self.bug == "name":
            self.kept.append(c)
            return _rename(c, "arrow_stream")
        _abi.ArrowArrayStream.from_address(_abi.capsule_pointer(c)).get_next = None
        return c


class ArrowDeviceStream:
    """``__arrow_c_device_stream__`` of a DLPackArray, renamed or claiming CUDA."""

    def __init__(self, bug="name"):
        import dlpackarray

        self.d = dlpackarray.DLPackArray(np.arange(3, dtype=np.int64))
        self.bug = bug
        self.kept = []

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        c = self.d.__arrow_c_device_stream__(requested_schema, **kwargs)
        if self.bug == "device-type":  # its chunks stay on the CPU
            s = _abi.ArrowDeviceArrayStream.from_address(_abi.capsule_pointer(c))
            s.device_type = _abi.KDL_CUDA
            return c
        if self.bug == "chunk-reserved":
            _dirty_chunks(c)
            return c
        self.kept.append(c)
        return _rename(c, "arrow_device_stream")

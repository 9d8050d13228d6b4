"""Deliberately broken producers for tests/testing/test_conformance.py (the Arrow ones are
in conform_corpus_arrow.py and conform_corpus_arrow_format.py).

Each entry of ``CORPUS`` is ``(rule id, factory)``: the factory builds an object that
breaks exactly that rule of ``dlpackarray.testing`` and keeps every other one.  DLPack
producers are built with ctypes (``Made``), so every field, flag, deleter and capsule
destructor is under the test's control; the other protocols wrap NumPy, pyarrow or
DLPackArray exports and change one thing.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from conform_capsules import CAPSULE_NAMES, DESTRUCTOR, KEEP_ALIVE, capi
from conform_corpus_arrow import (
    ArrowArray,
    ArrowCudaArray,
    ArrowDeviceNoKwargs,
    ArrowDeviceStream,
    ArrowNoRequested,
    ArrowSchema,
    ArrowStream,
)
from conform_corpus_arrow_format import ArrowBadSchema, ArrowEdited, ArrowStreamEdited

from dlpackarray.testing import _abi

#: Live managed tensors by address (the deleter removes them): struct, shape and strides.
_LIVE: dict[int, tuple] = {}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _deleter(address):
    _LIVE.pop(address, None)


_DELETER_ADDRESS = ctypes.cast(_deleter, ctypes.c_void_p).value
#: A deleter that uses the C API without taking the GIL: PyErr_Clear reads the calling
#: thread's state, which a thread that never held the GIL lacks.  Harmless with the GIL.
_GIL_DELETER = ctypes.cast(capi.PyErr_Clear, ctypes.c_void_p).value


def _make_destructor(mode):
    """A capsule destructor: "ok" (spec), "twice", "ignore-used" or "never"."""

    def destroy(capsule_address):
        name = capi.PyCapsule_GetName(capsule_address)
        if mode == "never":
            return
        if mode != "ignore-used" and name.startswith(b"used_"):
            return
        address = capi.PyCapsule_GetPointer(capsule_address, name)
        entry = _LIVE.get(address)
        if entry is None or not entry[0].deleter:
            return
        fn = _abi.PY_VOID_FN(entry[0].deleter)  # a capsule destructor holds the GIL
        fn(address)
        if mode == "twice":
            fn(address)

    cb = DESTRUCTOR(destroy)
    KEEP_ALIVE.append(cb)
    return ctypes.cast(cb, ctypes.c_void_p).value


_DESTRUCTORS = {m: _make_destructor(m) for m in ("ok", "twice", "ignore-used", "never")}


class Made:
    """A conformant DLPack producer over a NumPy array, built field by field with ctypes.

    Keyword arguments switch one behaviour off the spec (see ``CORPUS``).
    """

    def __init__(self, readonly=False, **bugs):
        a = np.arange(12, dtype=np.float64).reshape(3, 4)
        if readonly:
            a.flags.writeable = False
        self.a = a
        self.bugs = bugs
        if self._home()[0] == _abi.KDL_CPU or bugs.get("host_interface"):
            # host_interface: a "device" tensor describing its device pointer as host memory
            self.__array_interface__ = a.__array_interface__
        if "cai_stream" in bugs:  # the producer's own stream, named by its CUDA interface
            self.__cuda_array_interface__ = {
                "shape": a.shape,
                "typestr": "<f8",
                "data": (a.ctypes.data, False),
                "version": 3,
                "strides": None,
                "stream": bugs["cai_stream"],
            }

    def _home(self):
        # "cuda" / "home": a pretend device tensor (host memory, never read as device memory).
        if "home" in self.bugs:
            return self.bugs["home"]
        return (2, 0) if self.bugs.get("cuda") else (1, 0)

    def _check_stream(self, stream):
        """The spec's stream table (array API ``__dlpack__``, Parameters: stream), with the
        bugs switched on."""
        b = self.bugs
        if stream is not None and stream == b.get("segfault_stream"):
            # A producer that takes any int as a stream handle and crashes on a bad one.
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if stream is not None and stream == b.get("hang_stream"):
            import threading

            threading.Event().wait()  # a producer that deadlocks on a stream it cannot use
        kind = self._home()[0]
        if stream in b.get("refuse_streams", ()):
            raise BufferError(f"stream={stream} not supported")
        below = stream is not None and stream < -1 and not b.get("accept_below")
        if kind in (_abi.KDL_CUDA, _abi.KDL_CUDA_MANAGED):
            bad = below or (stream == 0 and not b.get("accept_stream"))
        elif kind == _abi.KDL_ROCM:
            bad = below or (stream in (1, 2) and not b.get("accept_stream"))
        else:
            bad = stream not in (None, -1) and not b.get("accept_stream")
        if bad:
            raise b.get("stream_error", ValueError)(f"stream={stream} on device type {kind}")

    def __dlpack_device__(self):
        return self.bugs.get("device_report", self._home())

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        b = self.bugs
        home = self._home()
        self._check_stream(stream)
        if dl_device is not None and tuple(dl_device) != tuple(home):
            if b.get("unsupported_device") == "ignore":
                pass
            elif b.get("unsupported_device") == "value_error":
                raise ValueError("device not supported")
            else:
                raise BufferError("device not supported")
        elif dl_device is not None and b.get("refuse_cpu"):
            raise BufferError("no dl_device support")
        if max_version is None:
            if b.get("legacy_raises"):
                raise RuntimeError("no legacy export")
            versioned = b.get("always_versioned", False)
        elif tuple(max_version)[0] < 1:
            versioned = b.get("old_major_versioned", False)
        else:
            versioned = not b.get("ignore_max_version")
        data = self.a
        copied = False
        if copy is True and not b.get("copy_true_aliases"):
            data, copied = self.a.copy(), True
        if copy is False and b.get("copy_false_raises"):
            raise BufferError("copy=False not possible")
        if copy is False and b.get("copy_false_copies"):
            data, copied = self.a.copy(), True
        flags = 0
        if (
            copied
            or b.get("copy_true_aliases")
            and copy is True
            or b.get("always_is_copied")
            and copy is None
        ):
            flags |= _abi.FLAG_IS_COPIED
        if copy is True and b.get("copy_true_no_flag"):
            flags &= ~_abi.FLAG_IS_COPIED
        if not data.flags.writeable and not b.get("drop_read_only"):
            flags |= _abi.FLAG_READ_ONLY
        flags |= b.get("extra_flags", 0)
        return self._capsule(data, versioned, flags)

    def _capsule(self, data, versioned, flags):
        b = self.bugs
        shape = (ctypes.c_int64 * 2)(*b.get("shape", data.shape))
        byte_strides = b.get("byte_strides", False)
        strides = (ctypes.c_int64 * 2)(
            *(s if byte_strides else s // data.itemsize for s in data.strides)
        )
        m = _abi.DLManagedTensorVersioned() if versioned else _abi.DLManagedTensor()
        if versioned:
            m.version = _abi.DLPackVersion(*b.get("version", (1, 3)))
            m.flags = flags
        t = m.dl_tensor
        t.data = data.ctypes.data
        t.byte_offset = b.get("byte_offset", 0)
        t.device = _abi.DLDevice(*b.get("capsule_device", self._home()))
        t.ndim = b.get("ndim", 2)
        t.dtype = _abi.DLDataType(2, b.get("bits", 64), b.get("lanes", 1))
        t.shape = None if b.get("null_shape") else ctypes.cast(shape, _abi.c_int64_p)
        t.strides = None if b.get("null_strides") else ctypes.cast(strides, _abi.c_int64_p)
        m.deleter = None if b.get("null_deleter") else _DELETER_ADDRESS
        if b.get("gil_deleter"):
            m.deleter = _GIL_DELETER
        address = ctypes.addressof(m)
        _LIVE[address] = (m, shape, strides, data)
        name = "dltensor_versioned" if versioned else "dltensor"
        if versioned and b.get("name"):
            name = b["name"]
        destructor = None if b.get("no_destructor") else _DESTRUCTORS[b.get("destructor", "ok")]
        return capi.PyCapsule_New(address, ctypes.addressof(CAPSULE_NAMES[name]), destructor)


class ForkingMade(Made):
    """A conformant producer whose first ``__dlpack__`` forks: two processes go on."""

    forked = False

    def __dlpack__(self, **kw):
        if not ForkingMade.forked:
            ForkingMade.forked = True
            os.fork()
        return super().__dlpack__(**kw)


class _NoCopyKeyword(Made):
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None):
        return super().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device)


class _NoDeviceKeyword(Made):
    def __dlpack__(self, *, stream=None, max_version=None, copy=None):
        return super().__dlpack__(stream=stream, max_version=max_version, copy=copy)


class _Positional(Made):
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return super().__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )


class _SingleUse(Made):
    used = False

    def __dlpack__(self, **kw):
        if self.used:
            raise RuntimeError("exported already")
        self.used = True
        return super().__dlpack__(**kw)


class _NoDeviceMethod(Made):
    def __getattribute__(self, name):
        if name == "__dlpack_device__":
            raise AttributeError(name)
        return super().__getattribute__(name)


# -- __array_interface__ / __array_struct__ -------------------------------------------------


class Interface:
    """Only ``__array_interface__``: NumPy's, with ``changes`` applied (None deletes)."""

    def __init__(self, **changes):
        self.a = np.arange(12, dtype=np.float32).reshape(3, 4)
        ai = dict(self.a.__array_interface__)
        for k, v in changes.items():
            if v is None:
                ai.pop(k, None)
            else:
                ai[k] = v
        self.__array_interface__ = ai


class Struct:
    """Only ``__array_struct__``: NumPy's interface struct, renamed or edited."""

    def __init__(self, name=None, two=2):
        self.a = np.arange(12, dtype=np.float32)
        self._src = self.a.__array_struct__
        s = _abi.PyArrayInterface.from_address(_abi.capsule_pointer(self._src))
        self._copy = _abi.PyArrayInterface.from_buffer_copy(s)
        self._copy.two = two
        self._name = None if name is None else CAPSULE_NAMES[name]

    @property
    def __array_struct__(self):
        name = None if self._name is None else ctypes.addressof(self._name)
        return capi.PyCapsule_New(ctypes.addressof(self._copy), name, None)


class DeviceStruct(Struct):
    """NumPy's interface struct on an object that calls its data CUDA memory: the device
    pointer leaks through a host-only protocol (never read as device memory)."""

    def __init__(self):
        super().__init__()
        self.__cuda_array_interface__ = {
            "shape": (12,),
            "typestr": "<f4",
            "data": (self.a.ctypes.data, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }

    def __dlpack_device__(self):
        return (_abi.KDL_CUDA, 0)


# -- __cuda_array_interface__ (a dict; never dereferenced) ----------------------------------


class CudaInterface:
    def __init__(self, **changes):
        cai = {
            "shape": (3, 4),
            "typestr": "<f4",
            "data": (0x7F0000, False),
            "version": 3,
            "strides": None,
            "stream": 1,
        }
        for k, v in changes.items():
            if v is None:
                cai.pop(k)
            else:
                cai[k] = v
        self.__cuda_array_interface__ = cai


class DeviceBytes(bytearray):
    """Host bytes that call themselves CUDA memory (``__dlpack_device__`` and
    ``__cuda_array_interface__`` name them) yet export the buffer protocol over them:
    the device-pointer leak of a host-only protocol (never read as device memory)."""

    def __init__(self):
        super().__init__(range(16))
        self.keep = (ctypes.c_char * 16).from_buffer(self)
        self.__cuda_array_interface__ = {
            "shape": (16,),
            "typestr": "|u1",
            "data": (ctypes.addressof(self.keep), False),
            "version": 3,
            "strides": None,
            "stream": None,
        }

    def __dlpack_device__(self):
        return (_abi.KDL_CUDA, 0)


# -- DLPack C exchange API ----------------------------------------------------------------


def _exchange_type(bug):
    import dlpackarray

    src = type(dlpackarray.DLPackArray(np.zeros(1))).__dlpack_c_exchange_api__
    table = _abi.DLPackExchangeAPI.from_buffer_copy(
        _abi.DLPackExchangeAPI.from_address(_abi.capsule_pointer(src))
    )
    name = "dlpack_exchange_api"
    if bug == "name":
        name = "dlpack_exchange"
    if bug == "version":
        table.version.major = 2
    if bug == "members":
        table.managed_tensor_to_py_object_no_sync = None
    KEEP_ALIVE.append(table)
    capsule = capi.PyCapsule_New(
        ctypes.addressof(table), ctypes.addressof(CAPSULE_NAMES[name]), None
    )
    if bug == "instance":

        class OnInstance:
            def __init__(self):
                self.__dlpack_c_exchange_api__ = capsule

        return OnInstance
    return type("Exchange", (), {"__dlpack_c_exchange_api__": capsule})


_FROM_PY_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_FROM_PY_CALL = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
_STREAM_CB = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


def _exchange_subclass(bug):
    """A DLPackArray subclass (conformant everywhere else) whose exchange table has one
    function replaced: "refuse" (from_py returns -1), "other" (from_py exports another
    array) or "stream" (current_work_stream returns -1)."""
    import dlpackarray

    src = dlpackarray.DLPackArray.__dlpack_c_exchange_api__
    table = _abi.DLPackExchangeAPI.from_buffer_copy(
        _abi.DLPackExchangeAPI.from_address(_abi.capsule_pointer(src))
    )
    original = _FROM_PY_CALL(table.managed_tensor_from_py_object_no_sync)
    other = dlpackarray.DLPackArray(np.arange(5, dtype=np.float32))

    def from_py(_obj, out):
        return -1 if bug == "refuse" else original(other, out)

    if bug == "stream":
        cb = _STREAM_CB(lambda _t, _i, _out: -1)
        table.current_work_stream = ctypes.cast(cb, ctypes.c_void_p).value
    else:
        cb = _FROM_PY_CB(from_py)
        table.managed_tensor_from_py_object_no_sync = ctypes.cast(cb, ctypes.c_void_p).value
    KEEP_ALIVE.extend([table, cb, other])
    capsule = capi.PyCapsule_New(
        ctypes.addressof(table), ctypes.addressof(CAPSULE_NAMES["dlpack_exchange_api"]), None
    )
    cls = type("BrokenExchange", (dlpackarray.DLPackArray,), {})
    cls.__dlpack_c_exchange_api__ = capsule
    return cls(np.arange(12, dtype=np.float32).reshape(3, 4))


CORPUS = [
    # DLPack
    ("dlpack.device.pair", lambda: Made(device_report=[1, 0])),
    ("dlpack.device.pair", lambda: _NoDeviceMethod()),
    ("dlpack.keywords.accepted", lambda: _NoCopyKeyword()),
    ("dlpack.keywords.accepted", lambda: _NoDeviceKeyword()),
    ("dlpack.keywords.keyword-only", lambda: _Positional()),
    ("dlpack.export.repeatable", lambda: _SingleUse()),
    ("dlpack.capsule-name.versioned", lambda: Made(ignore_max_version=True)),
    ("dlpack.capsule-name.versioned", lambda: Made(name="dltensor_v")),
    ("dlpack.capsule-name.legacy", lambda: Made(always_versioned=True)),
    ("dlpack.capsule-name.legacy", lambda: Made(legacy_raises=True)),
    ("dlpack.max-version.older-major", lambda: Made(old_major_versioned=True)),
    ("dlpack.version.major", lambda: Made(version=(2, 0))),
    ("dlpack.version.major", lambda: Made(version=(0, 8))),
    ("dlpack.flags.known-bits", lambda: Made(extra_flags=1 << 10)),
    ("dlpack.capsule.destructor", lambda: Made(no_destructor=True)),
    ("dlpack.deleter.non-null", lambda: Made(null_deleter=True)),
    ("dlpack.deleter.once-unconsumed", lambda: Made(destructor="twice")),
    ("dlpack.deleter.not-after-used-rename", lambda: Made(destructor="ignore-used")),
    ("dlpack.deleter.via-struct", lambda: Made(destructor="never")),
    ("dlpack.device.agrees", lambda: Made(device_report=(1, 1))),
    ("dlpack.device.agrees", lambda: Made(capsule_device=(1, 5))),
    ("dlpack.dl-device.cpu", lambda: Made(refuse_cpu=True)),
    ("dlpack.dl-device.unsupported-buffererror", lambda: Made(unsupported_device="value_error")),
    ("dlpack.dl-device.unsupported-buffererror", lambda: Made(unsupported_device="ignore")),
    ("dlpack.flags.read-only", lambda: Made(readonly=True, drop_read_only=True)),
    ("dlpack.copy.true-new-memory", lambda: Made(copy_true_aliases=True)),
    ("dlpack.copy.true-is-copied", lambda: Made(copy_true_no_flag=True)),
    ("dlpack.copy.false-no-copy", lambda: Made(copy_false_copies=True)),
    ("dlpack.copy.false-no-copy", lambda: Made(copy_false_raises=True)),
    ("dlpack.flags.is-copied-accurate", lambda: Made(always_is_copied=True)),
    ("dlpack.tensor.shape", lambda: Made(null_shape=True)),
    ("dlpack.tensor.shape", lambda: Made(shape=(3, -4))),
    ("dlpack.tensor.dtype", lambda: Made(bits=0)),
    ("dlpack.tensor.dtype", lambda: Made(lanes=0)),
    ("dlpack.tensor.strides-non-null", lambda: Made(null_strides=True)),
    ("dlpack.tensor.first-element", lambda: Made(byte_offset=8)),
    ("dlpack.tensor.layout-agrees", lambda: Made(shape=(4, 3))),
    ("dlpack.tensor.layout-agrees", lambda: Made(byte_strides=True)),
    ("dlpack.tensor.layout-agrees", lambda: Made(bits=32)),
    ("dlpack.stream.cpu-none-only", lambda: Made(accept_stream=True)),
    ("dlpack.stream.cuda-zero-rejected", lambda: Made(cuda=True, accept_stream=True)),
    ("dlpack.stream.cuda-zero-rejected", lambda: Made(home=(13, 0), accept_stream=True)),
    ("dlpack.stream.cuda-legal-accepted", lambda: Made(cuda=True, refuse_streams=(2,))),
    ("dlpack.stream.cuda-legal-accepted", lambda: Made(home=(13, 0), refuse_streams=(-1,))),
    (
        "dlpack.stream.cuda-legal-accepted",
        lambda: Made(cuda=True, cai_stream=0x5000, refuse_streams=(0x5000,)),
    ),
    ("dlpack.stream.rocm-legal-accepted", lambda: Made(home=(10, 0), refuse_streams=(0,))),
    ("dlpack.stream.rocm-reserved-rejected", lambda: Made(home=(10, 0), accept_stream=True)),
    ("dlpack.stream.below-minus-one-rejected", lambda: Made(cuda=True, accept_below=True)),
    ("dlpack.stream.below-minus-one-rejected", lambda: Made(home=(10, 0), accept_below=True)),
    ("dlpack.stream.refusal-error-type", lambda: Made(stream_error=BufferError)),
    ("dlpack.stream.refusal-error-type", lambda: Made(cuda=True, stream_error=TypeError)),
    ("dlpack.deleter.without-gil", lambda: Made(gil_deleter=True)),
    # host-only protocols on device data
    ("buffer.device-data", lambda: DeviceBytes()),
    ("array-interface.device-data", lambda: Made(cuda=True, host_interface=True)),
    ("array-struct.device-data", lambda: DeviceStruct()),
    ("arrow.host-methods.device-data", lambda: ArrowCudaArray("host-method")),
    # __array_interface__ / __array_struct__
    ("array-interface.dict", lambda: Interface(typestr=None)),
    ("array-interface.version", lambda: Interface(version=2)),
    ("array-interface.shape", lambda: Interface(shape=[3, 4])),
    ("array-interface.typestr", lambda: Interface(typestr="float32")),
    ("array-interface.data", lambda: Interface(data=(0, "no"))),
    ("array-interface.strides", lambda: Interface(strides=(16,))),
    ("array-interface.descr", lambda: Interface(descr="<f4")),
    ("array-interface.mask", lambda: Interface(mask=np.zeros(3, dtype=bool))),
    ("array-struct.capsule", lambda: Struct(name="array_struct")),
    ("array-struct.fields", lambda: Struct(two=3)),
    # __cuda_array_interface__
    ("cuda-array-interface.keys", lambda: CudaInterface(shape=None)),
    ("cuda-array-interface.version", lambda: CudaInterface(version=2, stream=None)),
    ("cuda-array-interface.shape", lambda: CudaInterface(shape=(3, -1))),
    ("cuda-array-interface.typestr", lambda: CudaInterface(typestr="f4")),
    ("cuda-array-interface.data", lambda: CudaInterface(data=0x7F0000)),
    ("cuda-array-interface.strides", lambda: CudaInterface(strides=(4,))),
    ("cuda-array-interface.stream", lambda: CudaInterface(stream=0)),
    # Arrow PyCapsule interface
    ("arrow.schema.capsule-name", lambda: ArrowSchema()),
    ("arrow.array.capsule-names", lambda: ArrowArray("swap")),
    ("arrow.stream.capsule-name", lambda: ArrowStream("name")),
    ("arrow.device-array.capsule-names", lambda: ArrowArray("device-names")),
    ("arrow.device-stream.capsule-name", lambda: ArrowDeviceStream()),
    ("arrow.requested-schema.none", lambda: ArrowNoRequested()),
    ("arrow.device.kwargs", lambda: ArrowDeviceNoKwargs()),
    ("arrow.release.non-null", lambda: ArrowArray("release-null")),
    ("arrow.capsule.destructor", lambda: ArrowArray("no-destructor")),
    ("arrow.release.once-unconsumed", lambda: ArrowArray("release-twice")),
    ("arrow.array.fields", lambda: ArrowArray("length")),
    ("arrow.array.schema-agrees", lambda: ArrowArray("n_buffers")),
    ("arrow.stream.callbacks", lambda: ArrowStream("callback")),
    ("arrow.device-array.sync-event", lambda: ArrowArray("sync-event")),
    ("arrow.requested-schema.own", lambda: ArrowArray("requested-raises")),
    ("arrow.requested-schema.own", lambda: ArrowArray("requested-other")),
    ("arrow.release.marks-released", lambda: ArrowArray("release-keeps")),
    ("arrow.release.once-consumed", lambda: ArrowArray("release-cached")),
    ("arrow.device-array.device-agrees", lambda: ArrowArray("device-type")),
    ("arrow.device-array.reserved-zero", lambda: ArrowArray("reserved")),
    ("arrow.device-array.reserved-zero", lambda: ArrowDeviceStream("chunk-reserved")),
    ("arrow.device-array.sync-event-handle", lambda: ArrowCudaArray("null-event")),
    ("arrow.device-stream.device-type", lambda: ArrowDeviceStream("device-type")),
    ("arrow.schema.format-grammar", lambda: ArrowBadSchema("grammar")),
    ("arrow.schema.children", lambda: ArrowBadSchema("children")),
    ("arrow.array.validity-null", lambda: ArrowEdited("validity")),
    ("arrow.array.buffers-non-null", lambda: ArrowEdited("values")),
    ("arrow.array.buffers-non-null", lambda: ArrowEdited("offsets")),
    ("arrow.array.validity-null", lambda: ArrowStreamEdited("validity")),
    ("arrow.schema.format-grammar", lambda: ArrowStreamEdited("format")),
    # DLPack C exchange API
    ("exchange.capsule-name", lambda: _exchange_type("name")()),
    ("exchange.version", lambda: _exchange_type("version")()),
    ("exchange.members", lambda: _exchange_type("members")()),
    ("exchange.on-type", lambda: _exchange_type("instance")()),
    ("exchange.from-py-agrees", lambda: _exchange_subclass("refuse")),
    ("exchange.from-py-agrees", lambda: _exchange_subclass("other")),
    ("exchange.current-work-stream", lambda: _exchange_subclass("stream")),
]

#: Libraries each family of the corpus needs, by rule prefix.
NEEDS = {"arrow.": "pyarrow"}


#: Hostile DLPack capsules: ``(Made's bugs, rules at least one of which must fail)``.  Each
#: field the checker reads from a raw capsule takes values a struct can hold but a tensor
#: cannot mean; the in-process checker must report them, never read out of bounds or hang.
#: (Garbage pointers cannot be told from good ones without reading them: that is what
#: ``isolate=True`` is for.)
HOSTILE = [
    ({"ndim": 2**31 - 1}, {"dlpack.tensor.shape"}),
    ({"ndim": 65}, {"dlpack.tensor.shape"}),
    ({"ndim": -1}, {"dlpack.tensor.shape"}),
    ({"ndim": -(2**31)}, {"dlpack.tensor.shape"}),
    ({"ndim": 2**31 - 1, "null_shape": True}, {"dlpack.tensor.shape"}),
    ({"ndim": 2**31 - 1, "null_strides": True}, {"dlpack.tensor.shape"}),
    ({"shape": (2**63 - 1, 2**63 - 1)}, {"dlpack.tensor.layout-agrees"}),
    ({"shape": (-(2**63), 4)}, {"dlpack.tensor.shape"}),
    ({"bits": 0}, {"dlpack.tensor.dtype"}),
    ({"lanes": 0}, {"dlpack.tensor.dtype"}),
    ({"bits": 255, "lanes": 65535}, {"dlpack.tensor.layout-agrees"}),
    ({"byte_offset": 2**64 - 1}, {"dlpack.tensor.first-element"}),
    ({"capsule_device": (-(2**31), 2**31 - 1)}, {"dlpack.device.agrees"}),
    ({"version": (2**32 - 1, 2**32 - 1)}, {"dlpack.version.major"}),
    ({"version": (0, 0)}, {"dlpack.version.major"}),
    ({"extra_flags": 2**64 - 1 - 7}, {"dlpack.flags.known-bits"}),
    ({"null_deleter": True}, {"dlpack.deleter.non-null"}),
]

"""Reference consumers for the consumer checker, and the broken corpus made from them.

``DLPackConsumer()`` and ``ArrowConsumer()`` follow the consumer side of the DLPack Python
specification and the Arrow C data interface; each keyword fault breaks exactly one
behaviour, and ``DLPACK_CORPUS`` / ``ARROW_CORPUS`` map every fault to the one rule of
``dlpackarray.testing.consumer`` that must catch it.  Written with ctypes only (the
checker's own struct mirrors), so the small ``test`` extra runs them.
"""

from __future__ import annotations

import ctypes
import weakref

from dlpackarray.testing import _abi

_FORMATS = {(0, 64): "<i8", (0, 32): "<i4", (1, 8): "|u1", (2, 32): "<f4", (2, 64): "<f8"}


class View:
    """A consumer's array: ``__array_interface__`` over memory it owns or borrows; the
    deleter runs when the view goes (``deleter_calls`` times: 1 when correct)."""

    def __init__(self, address, shape, strides, typestr, readonly, release, keep=None):
        self.__array_interface__ = {
            "data": (address, readonly),
            "shape": tuple(shape),
            "strides": None if strides is None else tuple(strides),
            "typestr": typestr,
            "version": 3,
        }
        self._release = release
        self._keep = keep

    def __del__(self):
        if self._release is not None:
            self._release()


class DLPackConsumer:
    """``from_dlpack`` done by the book; ``faults`` switch single behaviours off."""

    def __init__(self, **faults):
        self.faults = faults

    def __call__(self, x, *, copy=None, device=None):
        f = self.faults
        if device is not None and device != "cpu":
            raise ValueError(f"unsupported device {device!r}: this consumer knows only 'cpu'")
        if not f.get("no_device"):
            here = tuple(x.__dlpack_device__())
            if here[0] != _abi.KDL_CPU and not f.get("any_device"):
                raise BufferError(f"cannot import data on device {here}")
        kw = {} if copy is None or f.get("drop_copy") else {"copy": copy}
        if device is not None and not f.get("drop_dl_device"):
            kw["dl_device"] = (_abi.KDL_CPU, 0)
        if f.get("stream"):
            kw["stream"] = 1
        if f.get("legacy_only"):
            cap = x.__dlpack__(**kw)
        elif f.get("no_fallback"):
            cap = x.__dlpack__(max_version=(1, 0), **kw)
        else:
            try:
                cap = x.__dlpack__(max_version=(1, 0), **kw)
            except TypeError:
                cap = x.__dlpack__()
        return self._import(cap, x)

    def _import(self, cap, producer):
        f = self.faults
        name = _abi.capsule_name(cap)
        versioned = name == "dltensor_versioned"
        ptr = _abi.capsule_pointer(cap)
        kind = _abi.DLManagedTensorVersioned if versioned else _abi.DLManagedTensor
        managed = kind.from_address(ptr)
        deleter = _abi.VOID_FN(managed.deleter) if managed.deleter else None

        def refuse(message):
            if f.get("delete_on_refusal") and deleter is not None:
                deleter(ptr)
            raise BufferError(message)

        t = managed.dl_tensor
        if versioned and managed.version.major > 1 and not f.get("any_version"):
            refuse(f"DLPack {managed.version.major}.x is newer than 1.x")
        if t.device.device_type != _abi.KDL_CPU and not f.get("any_device"):
            refuse(f"device type {t.device.device_type} is not the CPU")
        code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
        if f.get("any_code") and bits == 32:
            code = 2
        if f.get("any_bits") and code == 2 and bits < 32:
            bits = 32
        typestr = _FORMATS.get((code, bits))
        if typestr is None:
            refuse(f"unsupported dtype code {code} bits {bits}")
        if lanes != 1 and not f.get("any_lanes"):
            refuse(f"unsupported lanes {lanes}")
        if t.ndim == 0 and f.get("no_zero_d"):
            refuse("0-d tensors are not supported")
        if not t.data and f.get("no_null_data"):
            refuse("NULL data pointer")
        itemsize = bits // 8
        shape = [t.shape[i] for i in range(t.ndim)]
        if t.strides and not f.get("ignore_strides"):
            strides = [t.strides[i] * itemsize for i in range(t.ndim)]
        else:
            strides, step = [], itemsize
            order = range(t.ndim) if f.get("fortran_null_strides") else reversed(range(t.ndim))
            for i in order:
                strides.append(step)
                step *= max(shape[i], 1)
            if not f.get("fortran_null_strides"):
                strides.reverse()
        address = (t.data or 0) + (0 if f.get("ignore_offset") else t.byte_offset)
        readonly = bool(versioned and managed.flags & _abi.FLAG_READ_ONLY)
        if f.get("ignore_read_only"):
            readonly = False
        if f.get("wrong_values") and versioned and t.byte_offset == 0 and t.ndim == 1:
            shape = [shape[0] - 1]
        if f.get("no_rename"):
            # Copies the elements and leaves the capsule to free the tensor.
            span = sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + itemsize
            if any(n == 0 for n in shape):
                span = 0
            copy = ctypes.create_string_buffer(ctypes.string_at(address, span), max(span, 1))
            return View(ctypes.addressof(copy), shape, strides, typestr, readonly, None, copy)
        _abi.rename_used(cap, "dltensor_versioned" if versioned else "dltensor")
        calls = 2 if f.get("delete_twice") else 1
        done = []

        def release():
            if not done and deleter is not None:
                done.append(True)
                for _ in range(calls):
                    deleter(ptr)

        view = View(address, shape, strides, typestr, readonly, release)
        if f.get("free_with_producer"):
            # Gives the tensor back when the producer goes, not when the view does.
            weakref.finalize(producer, release)
        return view


#: fault -> the one rule that must catch it.
DLPACK_CORPUS = {
    "wrong_values": "consumer.dlpack.values",
    "no_device": "consumer.dlpack.device-asked",
    "legacy_only": "consumer.dlpack.max-version",
    "no_fallback": "consumer.dlpack.max-version-fallback",
    "stream": "consumer.dlpack.stream-cpu",
    "drop_copy": "consumer.dlpack.copy-passed",
    "drop_dl_device": "consumer.dlpack.device-passed",
    "no_rename": "consumer.dlpack.capsule-renamed",
    "delete_twice": "consumer.dlpack.deleter-once",
    "free_with_producer": "consumer.dlpack.keeps-alive",
    "ignore_read_only": "consumer.dlpack.read-only",
    "ignore_offset": "consumer.dlpack.byte-offset",
    "fortran_null_strides": "consumer.dlpack.null-strides",
    "ignore_strides": "consumer.dlpack.strides",
    "no_zero_d": "consumer.dlpack.zero-d",
    "no_null_data": "consumer.dlpack.zero-size",
    "any_code": "consumer.dlpack.unknown-dtype",
    "any_bits": "consumer.dlpack.unknown-bits",
    "any_lanes": "consumer.dlpack.lanes",
    "any_version": "consumer.dlpack.newer-major",
    "any_device": "consumer.dlpack.impossible-device",
    "delete_on_refusal": "consumer.dlpack.refusal-cleanup",
}


_NO_DESTRUCTOR = {
    name: ctypes.create_string_buffer(name.encode()) for name in ("arrow_schema", "arrow_array")
}


def _borrowed_capsule(address: int, name: str):
    """A capsule over a struct the consumer still owns (no destructor)."""
    return _abi.api.PyCapsule_New(address, ctypes.cast(_NO_DESTRUCTOR[name], ctypes.c_char_p), None)


class ArrowView:
    """A consumer's Arrow array: the schema and array structs it moved out of the capsules,
    re-offered through ``__arrow_c_array__`` (borrowed capsules) and released when it goes
    (``release_calls`` times: 1 when correct)."""

    def __init__(self, schema, array, release_calls=1, keep=None):
        self.schema, self.array = schema, array
        self._calls = release_calls
        self._keep = keep

    def __arrow_c_array__(self, requested_schema=None):
        return (
            _borrowed_capsule(ctypes.addressof(self.schema), "arrow_schema"),
            _borrowed_capsule(ctypes.addressof(self.array), "arrow_array"),
        )

    def __del__(self):
        for struct in (self.array, self.schema):
            release = struct.release
            for _ in range(self._calls if struct is self.array else 1):
                if release:
                    _abi.PY_VOID_FN(release)(ctypes.addressof(struct))


class ArrowConsumer:
    """``__arrow_c_array__`` read by the book (move, validate, release once); ``faults``
    switch single behaviours off."""

    def __init__(self, **faults):
        self.faults = faults

    def __call__(self, x):
        f = self.faults
        schema_cap, array_cap = x.__arrow_c_array__()
        src_schema = _abi.ArrowSchema.from_address(_abi.capsule_pointer(schema_cap))
        src_array = _abi.ArrowArray.from_address(_abi.capsule_pointer(array_cap))
        if not src_array.release and not f.get("read_released"):
            raise ValueError("the ArrowArray is released (release is NULL)")
        schema, array = _abi.ArrowSchema(), _abi.ArrowArray()
        if f.get("in_place"):
            # Reads the capsule's structs where they are, without taking them over.
            if src_schema.format != b"l" or src_array.n_buffers != 2:
                raise ValueError("not an int64 array with its 2 buffers")
            return ArrowView(src_schema, src_array, 0)
        ctypes.memmove(
            ctypes.addressof(schema), ctypes.addressof(src_schema), ctypes.sizeof(schema)
        )
        src_schema.release = None
        ctypes.memmove(ctypes.addressof(array), ctypes.addressof(src_array), ctypes.sizeof(array))
        if src_array.release:
            src_array.release = None
        view = ArrowView(schema, array)
        if f.get("any_format"):
            schema.format = b"l"  # whatever the format says, read as int64
        if schema.format != b"l":
            if f.get("leak_on_refusal"):
                view._calls = 0
                view.schema = _abi.ArrowSchema()
            raise ValueError(f"unsupported format {schema.format!r}")
        if array.n_buffers != 2 and not f.get("any_buffers"):
            raise ValueError(f"an int64 array has 2 buffers, not {array.n_buffers}")
        if f.get("ignore_offset"):
            array.offset = 0
        if f.get("ignore_validity"):
            array.null_count = 0
            keep = (ctypes.c_void_p * 2)(None, array.buffers[1])
            view._keep = keep
            array.buffers = ctypes.cast(keep, ctypes.POINTER(ctypes.c_void_p))
        if f.get("wrong_values") and array.offset == 0 and array.null_count == 0:
            array.length -= 1
        if f.get("release_twice"):
            view._calls = 2
        return view


#: fault -> the one rule that must catch it.
ARROW_CORPUS = {
    "wrong_values": "consumer.arrow.values",
    "release_twice": "consumer.arrow.release-once",
    "in_place": "consumer.arrow.keeps-alive",
    "ignore_offset": "consumer.arrow.offset",
    "ignore_validity": "consumer.arrow.validity",
    "read_released": "consumer.arrow.released-refused",
    "any_format": "consumer.arrow.unknown-format",
    "any_buffers": "consumer.arrow.bad-buffers",
    "leak_on_refusal": "consumer.arrow.refusal-release",
}

"""Crafted DLPack producers for the consumer checker: objects that record every call.

A :class:`Producer` offers ``__dlpack_device__`` and ``__dlpack__`` over a tensor the
checker lays out itself (ctypes memory): any dtype code, bits, lanes, version, device,
flags, byte offset or strides, including the ones a consumer must refuse.  Its capsules
come from ``dlpackarray._crafted``, whose deleter and capsule destructor are C functions
that count their calls in a *tally* and poison the data on the first deleter call, so
that a consumer reading after it gave the memory back reads wrong values, not freed
memory (the memory stays the checker's).
"""

from __future__ import annotations

import collections
import ctypes
import struct
from typing import Any

from dlpackarray import _crafted
from dlpackarray.testing import _abi

KDL_INT, KDL_UINT, KDL_FLOAT = 0, 1, 2
#: (code, bits) -> struct format of one element.
FORMATS = {
    (KDL_INT, 8): "b",
    (KDL_INT, 16): "h",
    (KDL_INT, 32): "i",
    (KDL_INT, 64): "q",
    (KDL_UINT, 8): "B",
    (KDL_UINT, 16): "H",
    (KDL_UINT, 32): "I",
    (KDL_UINT, 64): "Q",
    (KDL_FLOAT, 32): "f",
    (KDL_FLOAT, 64): "d",
    (6, 8): "?",
}
_CALLBACKS = _crafted.addresses()
#: Exports whose memory a consumer may still use.  Bounded: a consumer that never calls
#: the deleter (a leak, reported by its rule) must not grow the checker without limit.
_KEEP: collections.deque = collections.deque(maxlen=4096)


class Tally:
    """The int64 slots a crafted struct's C callbacks count in (``dlpackarray._crafted``)."""

    def __init__(self, poison_address: int = 0, poison_size: int = 0):
        self.slots = (ctypes.c_int64 * 8)()
        self.slots[1] = poison_address
        self.slots[2] = poison_size

    @property
    def address(self) -> int:
        return ctypes.addressof(self.slots)

    @property
    def calls(self) -> int:
        """Calls of the deleter / release callback, by anyone."""
        return self.slots[0]

    @property
    def by_destructor(self) -> int:
        """Calls the capsule destructor made (the capsule was dropped unconsumed)."""
        return self.slots[3]

    @property
    def by_consumer(self) -> int:
        return self.slots[0] - self.slots[3]


class Tensor:
    """The layout of one crafted tensor.

    ``memory``: the element values in memory order; ``shape`` and ``strides`` (in
    elements; None: NULL strides) place them.  ``lead`` junk bytes come first and are
    skipped by ``byte_offset``; ``null_data``: a NULL data pointer (a zero-size tensor).
    """

    def __init__(
        self,
        memory,
        shape,
        strides=None,
        *,
        dtype=(KDL_FLOAT, 32, 1),
        lead: int = 0,
        device=(_abi.KDL_CPU, 0),
        flags: int = 0,
        version=(1, 1),
        null_data: bool = False,
    ):
        self.memory = list(memory)
        self.shape = tuple(shape)
        self.strides = None if strides is None else tuple(strides)
        self.dtype = dtype
        self.lead = lead
        self.device = device
        self.flags = flags
        self.version = version
        self.null_data = null_data

    @property
    def format(self) -> str:
        return FORMATS.get(self.dtype[:2], "f")

    def logical(self) -> list:
        """The elements in C order, as a consumer must see them."""
        if any(n == 0 for n in self.shape):
            return []
        strides: Any = self.strides
        if strides is None:
            c_strides: list[int] = []
            step = 1
            for n in reversed(self.shape):
                c_strides.insert(0, step)
                step *= n
            strides = c_strides
        out = []

        def walk(dim, base):
            if dim == len(self.shape):
                out.append(self.memory[base])
                return
            for i in range(self.shape[dim]):
                walk(dim + 1, base + i * strides[dim])

        walk(0, 0)
        return out


class Export:
    """One managed tensor handed out by ``__dlpack__`` and the memory it points to."""

    def __init__(self, tensor: Tensor, versioned: bool, capsule: bool = True):
        self.tensor = tensor
        self.versioned = versioned
        #: Handed out through the C exchange API: no capsule, the consumer owns it outright.
        self.via_exchange = not capsule
        code, bits, lanes = tensor.dtype
        itemsize = max(1, bits * lanes // 8)
        fmt = tensor.format
        payload = b"".join(struct.pack(fmt, v) for v in tensor.memory)
        if struct.calcsize(fmt) != itemsize:  # an unknown dtype: raw bytes of its size
            payload = bytes(range(len(tensor.memory) * itemsize))
        self.data = ctypes.create_string_buffer(tensor.lead + len(payload) + 8)
        ctypes.memmove(ctypes.addressof(self.data), b"\xee" * tensor.lead, tensor.lead)
        ctypes.memmove(ctypes.addressof(self.data) + tensor.lead, payload, len(payload))
        self.tally = Tally(ctypes.addressof(self.data), ctypes.sizeof(self.data))
        ndim = len(tensor.shape)
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*tensor.shape)
        self.strides = None
        if tensor.strides is not None:
            self.strides = (ctypes.c_int64 * max(ndim, 1))(*tensor.strides)
        self.struct: Any
        if versioned:
            self.struct = _abi.DLManagedTensorVersioned()
            self.struct.version.major, self.struct.version.minor = tensor.version
            self.struct.flags = tensor.flags
            self.struct.deleter = _CALLBACKS["dlpack_deleter_versioned"]
        else:
            self.struct = _abi.DLManagedTensor()
            self.struct.deleter = _CALLBACKS["dlpack_deleter_legacy"]
        self.struct.manager_ctx = self.tally.address
        t = self.struct.dl_tensor
        t.data = None if tensor.null_data else ctypes.addressof(self.data)
        t.byte_offset = 0 if tensor.null_data else tensor.lead
        t.device.device_type, t.device.device_id = tensor.device
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = ctypes.cast(self.shape, _abi.c_int64_p)
        t.strides = None if self.strides is None else ctypes.cast(self.strides, _abi.c_int64_p)
        #: The capsule, held so the checker can read its name after the consumer returns.
        self.capsule = None
        #: The capsule's name when the checker let go of it.
        self.last_name: str | None = None
        if capsule:
            self.capsule = _crafted.dlpack_capsule(ctypes.addressof(self.struct), versioned)
        _KEEP.append(self)

    @property
    def span(self) -> tuple[int, int]:
        """The address range of the tensor's memory."""
        base = ctypes.addressof(self.data)
        return base, base + ctypes.sizeof(self.data)

    def capsule_name(self) -> str | None:
        return None if self.capsule is None else _abi.capsule_name(self.capsule)


class Producer:
    """A DLPack producer over a crafted :class:`Tensor` that records every call.

    ``__dlpack__`` follows the array API: a versioned capsule when ``max_version`` asks
    for one (major >= 1), a legacy capsule otherwise (a read-only tensor then raises
    BufferError: a legacy capsule cannot carry the flag); ``copy=True`` exports a copy
    flagged IS_COPIED.
    """

    def __init__(self, tensor: Tensor):
        self.tensor = tensor
        #: ``(method, keyword arguments)`` of every call, in order.
        self.calls: list[tuple[str, dict]] = []
        self.exports: list[Export] = []

    def __dlpack_device__(self):
        self.calls.append(("__dlpack_device__", {}))
        return self.tensor.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = {"stream": stream, "max_version": max_version, "dl_device": dl_device}
        self.calls.append(("__dlpack__", {**kw, "copy": copy}))
        return self._export(max_version, copy)

    def _export(self, max_version, copy, capsule: bool = True):
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        tensor = self.tensor
        if not versioned and tensor.flags & _abi.FLAG_READ_ONLY:
            raise BufferError("a read-only tensor cannot be exported as a legacy DLPack capsule")
        if copy:
            tensor = Tensor(
                tensor.memory,
                tensor.shape,
                tensor.strides,
                dtype=tensor.dtype,
                lead=tensor.lead,
                device=tensor.device,
                flags=(tensor.flags & ~_abi.FLAG_READ_ONLY) | _abi.FLAG_IS_COPIED,
                version=tensor.version,
                null_data=tensor.null_data,
            )
        export = Export(tensor, versioned, capsule)
        self.exports.append(export)
        return export.capsule if capsule else export

    def dlpack_calls(self) -> list[dict]:
        return [kw for name, kw in self.calls if name == "__dlpack__"]


class LegacyProducer(Producer):
    """A producer that predates ``max_version``: ``__dlpack__`` takes only ``stream``, so
    a consumer passing the 2023.12 keywords gets Python's TypeError."""

    def __dlpack__(self, stream=None):  # type: ignore[override]
        self.calls.append(("__dlpack__", {"stream": stream}))
        return self._export(None, None)


class ExchangeProducer(Producer):
    """A producer that also offers the DLPack C exchange API (DLPack 1.3): its type's
    ``__dlpack_c_exchange_api__`` table hands out the same tensors as ``__dlpack__``,
    without a capsule (the consumer calls the deleter directly)."""

    __dlpack_c_exchange_api__ = _crafted.EXCHANGE_API

    def _crafted_exchange_export(self) -> int:
        self.calls.append(("managed_tensor_from_py_object_no_sync", {}))
        export = self._export((1, 3), None, capsule=False)
        return ctypes.addressof(export.struct)

    def _crafted_exchange_view(self) -> int:
        # A DLTensor carries no flags: a read-only tensor is only given with its flag.
        self.calls.append(("dltensor_from_py_object_no_sync", {}))
        if self.tensor.flags & _abi.FLAG_READ_ONLY:
            raise BufferError(
                "a read-only tensor is exported only as a managed tensor (its flags say so)"
            )
        export = Export(self.tensor, True, capsule=False)
        return ctypes.addressof(export.struct)

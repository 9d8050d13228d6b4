"""What a consumer returned: its shape, elements, address and writability.

The result is read through the protocols it offers itself, in this order: a DLPack
re-export (versioned first: its READ_ONLY flag says whether the result is writable), the
buffer protocol, ``__array_interface__``.  Elements are read from the address the result
reports, so a result that still points at memory the checker poisoned (after the
deleter ran) reads the poison, not the values it should hold.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Any

from dlpackarray.testing import _abi
from dlpackarray.testing.consumer_craft import FORMATS


@dataclass
class View:
    shape: tuple
    values: list
    #: The first element's address (None when the result did not say).
    address: int | None
    #: True / False as the result says; None when nothing says.
    readonly: bool | None
    how: str


class Unreadable(Exception):
    """The result offers no protocol the checker can read it through."""


def read(obj) -> View:
    for reader in (_via_dlpack, _via_buffer, _via_interface):
        view = reader(obj)
        if view is not None:
            return view
    raise Unreadable(f"the consumer returned {type(obj).__name__}, which exports no data")


def _elements(base: int, shape, strides, itemsize: int, fmt: str) -> list:
    out: list = []
    if any(n == 0 for n in shape):
        return out

    def walk(dim, at):
        if dim == len(shape):
            out.append(struct.unpack(fmt, ctypes.string_at(at, itemsize))[0])
            return
        for i in range(shape[dim]):
            walk(dim + 1, at + i * strides[dim])

    walk(0, base)
    return out


def _c_strides(shape, itemsize: int) -> list[int]:
    strides: list[int] = []
    step = itemsize
    for n in reversed(shape):
        strides.insert(0, step)
        step *= max(n, 1)
    return strides


def _via_dlpack(obj) -> View | None:
    if not hasattr(obj, "__dlpack__"):
        return None
    try:
        cap = obj.__dlpack__(max_version=(1, 0))
    except Exception:  # noqa: BLE001 - an older producer: the legacy export
        try:
            cap = obj.__dlpack__()
        except Exception:  # noqa: BLE001 - another protocol may say
            return None
    name = _abi.capsule_name(cap)
    managed: Any
    if name == "dltensor_versioned":
        managed = _abi.DLManagedTensorVersioned.from_address(_abi.capsule_pointer(cap))
        readonly = bool(managed.flags & _abi.FLAG_READ_ONLY)
    elif name == "dltensor":
        managed = _abi.DLManagedTensor.from_address(_abi.capsule_pointer(cap))
        readonly = None
    else:
        return None
    t = managed.dl_tensor
    fmt = FORMATS.get((t.dtype.code, t.dtype.bits))
    if t.device.device_type not in (_abi.KDL_CPU, _abi.KDL_CUDA_HOST) or fmt is None:
        return None
    if t.dtype.lanes != 1:
        return None
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = t.dtype.bits // 8
    if t.strides:
        strides = [t.strides[i] * itemsize for i in range(t.ndim)]
    else:
        strides = _c_strides(shape, itemsize)
    address = (t.data or 0) + t.byte_offset
    values = _elements(address, shape, strides, itemsize, fmt)
    # The capsule stays unconsumed: its destructor gives the export back.
    del cap
    return View(shape, values, address if t.data else None, readonly, "__dlpack__")


def dlpack_header(obj) -> tuple | None:
    """``((code, bits, lanes), (device type, id), shape)`` of ``obj``'s own DLPack export,
    or None when it exports none."""
    try:
        try:
            cap = obj.__dlpack__(max_version=(1, 0))
        except TypeError:
            cap = obj.__dlpack__()
    except Exception:  # noqa: BLE001 - no DLPack export
        return None
    name = _abi.capsule_name(cap)
    if name == "dltensor_versioned":
        t = _abi.DLManagedTensorVersioned.from_address(_abi.capsule_pointer(cap)).dl_tensor
    elif name == "dltensor":
        t = _abi.DLManagedTensor.from_address(_abi.capsule_pointer(cap)).dl_tensor
    else:
        return None
    return (
        (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        (t.device.device_type, t.device.device_id),
        tuple(t.shape[i] for i in range(t.ndim)),
    )


def _via_buffer(obj) -> View | None:
    try:
        info = _abi.buffer_info(obj)
    except Exception:  # noqa: BLE001 - a refusing exporter: another protocol may say
        return None
    if info is None or info["format"] is None:
        return None
    fmt = info["format"].lstrip("@=<")
    if fmt not in FORMATS.values():
        return None
    shape = info["shape"] or ()
    strides = info["strides"] or _c_strides(shape, info["itemsize"])
    values = _elements(info["ptr"], shape, strides, info["itemsize"], fmt)
    return View(tuple(shape), values, info["ptr"], info["readonly"], "buffer protocol")


_TYPESTR = {"f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q"}
_TYPESTR.update({"u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?"})


def _via_interface(obj) -> View | None:
    try:
        ai = obj.__array_interface__
        fmt = _TYPESTR[ai["typestr"][1:]]
        shape = tuple(ai["shape"])
        address, readonly = ai["data"]
        itemsize = struct.calcsize(fmt)
        strides = ai.get("strides") or _c_strides(shape, itemsize)
    except Exception:  # noqa: BLE001 - not an array interface the checker reads
        return None
    values = _elements(address or 0, shape, strides, itemsize, fmt)
    return View(shape, values, address, bool(readonly), "__array_interface__")

"""Where an object's memory is, from the protocols that say so without copying."""

from __future__ import annotations

import math

from dlpackarray.testing import _abi

#: Device types whose memory the host can address (DLPack C API, DLDeviceType:
#: https://dmlc.github.io/dlpack/latest/c_api.html#c.DLDeviceType):
#: CPU, CUDA pinned, ROCm pinned and CUDA managed memory.
HOST_DEVICE_TYPES = frozenset({_abi.KDL_CPU, _abi.KDL_CUDA_HOST, 11, _abi.KDL_CUDA_MANAGED})


def device_location(obj) -> tuple[int, int] | None:
    """The device of ``obj``'s data when the host cannot address it, else ``None``.

    ``__dlpack_device__()`` decides when it answers; without it, an object offering
    ``__cuda_array_interface__`` holds device memory (the interface's pointers are device
    pointers).  Nothing is read from the data: for device data the host-only protocols
    (buffer, array interface, CPU Arrow methods) are judged on refusing it instead.
    """
    try:
        dev = obj.__dlpack_device__()
        kind, index = int(dev[0]), int(dev[1])
    except Exception:  # noqa: BLE001 - absent or malformed: dlpack.device.pair reports it
        pass
    else:
        return None if kind in HOST_DEVICE_TYPES else (kind, index)
    try:
        cai = obj.__cuda_array_interface__
    except Exception:  # noqa: BLE001 - no (readable) CUDA interface: host data
        return None
    return (_abi.KDL_CUDA, -1) if isinstance(cai, dict) else None


def device_pointer(obj) -> int | None:
    """The address of ``obj``'s device data (``__cuda_array_interface__`` or the first
    element of a DLPack export), never dereferenced."""
    try:
        data = obj.__cuda_array_interface__["data"]
        return int(data[0])
    except Exception:  # noqa: BLE001 - fall back to a DLPack export
        pass
    from dlpackarray.testing.dlpack import MAX_VERSION, _export

    cap, _ = _export(obj, max_version=MAX_VERSION)
    if cap is None:
        cap, _ = _export(obj)
    return None if cap is None else cap.first


def object_memory(obj) -> dict | None:
    """``ptr``, ``nbytes``, ``shape``, byte ``strides``, ``itemsize`` and ``readonly`` of
    ``obj``'s own memory, from the buffer protocol, ``__array_interface__`` or, for device
    data, ``__cuda_array_interface__`` (``None`` when none is offered).  Only descriptions
    are read, never the data."""
    try:
        info = _abi.buffer_info(obj)
    except Exception:  # noqa: BLE001 - a refusing exporter just says nothing here
        info = None
    if info is not None and info["shape"] is not None:
        return {
            "ptr": info["ptr"],
            "nbytes": info["len"],
            "shape": info["shape"],
            "strides": info["strides"],
            "itemsize": info["itemsize"],
            "readonly": info["readonly"],
        }
    for name in ("__array_interface__", "__cuda_array_interface__"):
        memory = _interface_memory(obj, name)
        if memory is not None:
            return memory
    return None


def _interface_memory(obj, name: str) -> dict | None:
    try:
        ai = getattr(obj, name)
        data = ai["data"]
        shape = tuple(ai["shape"])
        itemsize = int(ai["typestr"][2:])
        strides = ai.get("strides")
        if not (isinstance(data, tuple) and len(data) == 2):
            return None
    except Exception:  # noqa: BLE001
        return None
    if strides is None:
        strides, step = [], itemsize
        for extent in reversed(shape):
            strides.append(step)
            step *= max(extent, 1)
        strides = tuple(reversed(strides))
    return {
        "ptr": int(data[0] or 0),
        "nbytes": math.prod(shape) * itemsize,
        "shape": shape,
        "strides": tuple(strides),
        "itemsize": itemsize,
        "readonly": bool(data[1]),
    }

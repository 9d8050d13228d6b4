"""Where an object's memory is, from the protocols that say so without copying."""

from __future__ import annotations

import math

from dlpackarray.testing import _abi


def object_memory(obj) -> dict | None:
    """``ptr``, ``nbytes``, ``shape``, byte ``strides``, ``itemsize`` and ``readonly`` of
    ``obj``'s own memory, from the buffer protocol or ``__array_interface__`` (``None``
    when neither is offered)."""
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
    try:
        ai = obj.__array_interface__
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

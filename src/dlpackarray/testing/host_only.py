"""The host-only protocols (buffer protocol, ``__array_interface__``, ``__array_struct__``)
on data the host cannot address.

Their consumers read the memory from the host, so for device data a producer must refuse
them -- or export a host copy -- and never hand out the device pointer.  The checker
judges that refusal and reads no data: for device data the family's other rules run only
on a host copy.
"""

from __future__ import annotations

from dlpackarray.testing import _abi


def _buffer_pointer(obj):
    info = _abi.buffer_info(obj)
    return None if info is None else info["ptr"]


def _interface_pointer(obj):
    data = obj.__array_interface__.get("data")
    return int(data[0] or 0) if isinstance(data, tuple) and data else None


def _struct_pointer(obj):
    cap = obj.__array_struct__
    if not (_abi.is_capsule(cap) and _abi.capsule_pointer(cap)):
        return None
    return _abi.PyArrayInterface.from_address(_abi.capsule_pointer(cap)).data or 0


def _on_type_or_instance(name):
    def present(obj) -> bool:
        if hasattr(type(obj), name):
            return True  # a property that refuses device data is still the protocol
        try:
            getattr(obj, name)
        except AttributeError:
            return False
        except Exception:  # noqa: BLE001 - a refusal: the protocol is there
            return True
        return True

    return present


def _has_buffer_slot(obj) -> bool:
    try:
        memoryview(obj).release()
    except TypeError:
        return False
    except Exception:  # noqa: BLE001 - a refusal (BufferError): the protocol is there
        return True
    return True


#: family -> (rule, present(obj), attempt(obj) -> exported pointer, refusals)
#: PEP 3118 refuses with BufferError; an attribute protocol refuses with AttributeError
#: (NumPy then moves on to the next protocol) or BufferError.
FAMILIES = {
    "buffer": ("buffer.device-data", _has_buffer_slot, _buffer_pointer, (BufferError,)),
    "array_interface": (
        "array-interface.device-data",
        _on_type_or_instance("__array_interface__"),
        _interface_pointer,
        (AttributeError, BufferError),
    ),
    "array_struct": (
        "array-struct.device-data",
        _on_type_or_instance("__array_struct__"),
        _struct_pointer,
        (AttributeError, BufferError),
    ),
}


def judge(family: str, obj, rec, where: tuple, device_ptr: int | None) -> bool:
    """Record ``family``'s device-data rule for ``obj`` (data on device ``where``).

    Returns True when the protocol exported a host copy, so that the family's other rules
    run on it (they read descriptions only).
    """
    rule, _present, attempt, refusals = FAMILIES[family]
    try:
        ptr = attempt(obj)
    except refusals:
        rec.ok(rule)
        return False
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        expected = " or ".join(e.__name__ for e in refusals)
        rec.fail(rule, f"data on device {where} refused with {type(exc).__name__}: {exc} "
                 f"(expected {expected})")  # fmt: skip
        return False
    if ptr is None:
        rec.na(rule, "the export names no data pointer")
        return True
    if device_ptr is None:
        rec.na(rule, f"exported pointer 0x{ptr:x}; the device data's address is unknown")
        return True
    if ptr and ptr == device_ptr:
        rec.fail(rule, f"exports the device pointer 0x{ptr:x} (data on device {where}) "
                 "as host memory")  # fmt: skip
        return False
    rec.ok(rule)  # a host copy
    return True

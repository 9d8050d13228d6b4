"""ctypes view of DLPack C exchange API tables, and a provider built from Python callbacks.

Used by tests/dlpack/test_exchange_api.py and tests/capi/test_one_core.py to call the functions of
``DLPackArray.__dlpack_c_exchange_api__`` directly and to stand in for a third-party
producer type whose table is not ours.
"""

from __future__ import annotations

import ctypes

from dlpack_ctypes import DLPackVersion, DLTensor, _api

from dlpackarray.testing._abi import DLPackExchangeAPI

_api.Py_DecRef.argtypes = [ctypes.c_void_p]
_api.Py_DecRef.restype = None

NAME_EXCHANGE = ctypes.create_string_buffer(b"dlpack_exchange_api")


# The table layout is dlpackarray.testing's own ABI mirror (one definition).
ExchangeAPI = DLPackExchangeAPI

SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
# Functions that take Python objects are called holding the GIL (PYFUNCTYPE),
# and ctypes raises the Python exception they set; the others release it.
ALLOCATOR = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(DLTensor),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
    SET_ERROR,
)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)
# Signature of a Python-implemented managed_tensor_from_py_object_no_sync.
FROM_PY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


def table(capsule) -> ExchangeAPI:
    return ExchangeAPI.from_address(_api.PyCapsule_GetPointer(capsule, b"dlpack_exchange_api"))


class Functions:
    """The callable functions of an exchange table."""

    def __init__(self, capsule):
        self.table = table(capsule)
        t = self.table
        self.allocator = ALLOCATOR(t.managed_tensor_allocator)
        self.from_py = FROM_PY(t.managed_tensor_from_py_object_no_sync)
        self.to_py_raw = TO_PY(t.managed_tensor_to_py_object_no_sync)
        self.dltensor_from_py = DLTENSOR_FROM_PY(t.dltensor_from_py_object_no_sync)
        self.current_work_stream = CURRENT_STREAM(t.current_work_stream)

    def managed(self, obj) -> int:
        """Address of a new owning DLManagedTensorVersioned for ``obj``."""
        out = ctypes.c_void_p()
        assert self.from_py(obj, ctypes.byref(out)) == 0
        return out.value

    def to_py(self, address):
        out = ctypes.c_void_p()
        assert self.to_py_raw(address, ctypes.byref(out)) == 0
        obj = ctypes.cast(out, ctypes.py_object).value  # takes its own reference
        _api.Py_DecRef(out)  # the function's new reference
        return obj


def call_deleter(address: int) -> None:
    from dlpack_ctypes import DELETER, DLManagedTensorVersioned

    m = DLManagedTensorVersioned.from_address(address)
    DELETER(m.deleter)(address)


class CallbackProvider:
    """A foreign exchange table whose managed_tensor_from_py_object_no_sync is
    ``impl(obj) -> address or None`` (None: refuse, returning -1).  ``capsule``
    goes on a class as ``__dlpack_c_exchange_api__``; ``address`` as the
    DLPack 1.2-era ``__c_dlpack_exchange_api__`` int."""

    def __init__(self, impl, version=(1, 3)):
        self.calls = 0

        def from_py(obj_address, out):
            self.calls += 1
            address = impl(ctypes.cast(obj_address, ctypes.py_object).value)
            if address is None:
                return -1
            out[0] = address
            return 0

        self._callback = FROM_PY_CALLBACK(from_py)
        self.table = ExchangeAPI()
        self.table.version = DLPackVersion(*version)
        self.table.managed_tensor_from_py_object_no_sync = ctypes.cast(
            self._callback, ctypes.c_void_p
        ).value
        self.address = ctypes.addressof(self.table)
        self.capsule = _api.PyCapsule_New(self.address, ctypes.addressof(NAME_EXCHANGE), None)


# All-pointer prototypes of the same functions: a test can pass NULL (None) for any argument.
# Called holding the GIL; ctypes raises the exception a function leaves set.
RAW_ALLOCATOR = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
RAW_TWO_POINTERS = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
RAW_CURRENT_STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p
)


class RawFunctions:
    """The functions of an exchange table, taking raw addresses (None for NULL)."""

    def __init__(self, capsule):
        t = table(capsule)
        self.allocator = RAW_ALLOCATOR(t.managed_tensor_allocator)
        self.from_py = RAW_TWO_POINTERS(t.managed_tensor_from_py_object_no_sync)
        self.to_py = RAW_TWO_POINTERS(t.managed_tensor_to_py_object_no_sync)
        self.dltensor_from_py = RAW_TWO_POINTERS(t.dltensor_from_py_object_no_sync)
        self.current_work_stream = RAW_CURRENT_STREAM(t.current_work_stream)

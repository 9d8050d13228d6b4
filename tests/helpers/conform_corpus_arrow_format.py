"""Broken Arrow producers for the format-string and buffer rules of
``dlpackarray.testing`` (entries of ``conform_corpus.CORPUS``): each edits one field of a
pyarrow or DLPackArray export so that exactly one rule fails."""

from __future__ import annotations

import ctypes

import numpy as np

from dlpackarray.testing import _abi

#: Callbacks the edited streams call; they live as long as the process.
_KEEP: list = []
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


#: Format strings written into producers' schemas; they live as long as the process.
_FORMATS = {f: ctypes.create_string_buffer(f.encode()) for f in ("int32", "+l")}


def _set_format(schema_capsule, fmt: str) -> None:
    """Point an exported schema's format at ``fmt`` (its release frees only what its
    private data owns, never the format pointer itself)."""
    field = _abi.capsule_pointer(schema_capsule) + _abi.ArrowSchema.format.offset
    ctypes.c_void_p.from_address(field).value = ctypes.addressof(_FORMATS[fmt])


class ArrowBadSchema:
    """``__arrow_c_schema__`` whose format breaks the format-string rules: ``grammar``, a
    type name instead of a format string; ``children``, a two-field struct called a list
    (one child)."""

    def __init__(self, bug):
        import pyarrow as pa

        self.bug = bug
        self.t = pa.int32() if bug == "grammar" else pa.struct([("a", pa.int8()), ("b", pa.int8())])

    def __arrow_c_schema__(self):
        c = self.t.__arrow_c_schema__()
        _set_format(c, "int32" if self.bug == "grammar" else "+l")
        return c


class ArrowEdited:
    """``__arrow_c_array__`` of a pyarrow array with one buffer pointer set to NULL:
    ``validity`` (the array has a null), ``values`` or ``offsets`` (of a string array)."""

    def __init__(self, bug):
        import pyarrow as pa

        self.bug = bug
        if bug == "offsets":
            self.pa = pa.array(["a", "bc"])
        else:
            self.pa = pa.array([1, None, 3], type=pa.int64())

    def __arrow_c_array__(self, requested_schema=None):
        s, a = self.pa.__arrow_c_array__(requested_schema)
        arr = _abi.ArrowArray.from_address(_abi.capsule_pointer(a))
        arr.buffers[0 if self.bug == "validity" else 1] = None
        return s, a


def _wrap_stream_callback(stream_capsule, struct, field, edit):
    """Wrap a stream's ``get_schema`` / ``get_next`` so that ``edit(out)`` changes what
    each successful call hands out."""
    s = struct.from_address(_abi.capsule_pointer(stream_capsule))
    real = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(getattr(s, field))

    def call(stream, out):
        rc = real(stream, out)
        if rc == 0:
            edit(out)
        return rc

    cb = _CALLBACK(call)
    _KEEP.append(cb)
    setattr(s, field, ctypes.cast(cb, ctypes.c_void_p).value)


def _null_validity(array_address):
    arr = _abi.ArrowArray.from_address(array_address)
    if arr.release and arr.n_children:  # a record batch: its column's validity
        arr = arr.children[0].contents
    if arr.release and arr.n_buffers:
        arr.buffers[0] = None


def _int32_format(schema_address):
    field = schema_address + _abi.ArrowSchema.format.offset
    ctypes.c_void_p.from_address(field).value = ctypes.addressof(_FORMATS["int32"])


class ArrowStreamEdited:
    """``__arrow_c_stream__`` of a table with a null whose chunks have a NULL validity
    buffer (``validity``), or ``__arrow_c_device_stream__`` of a DLPackArray whose schema
    has a format outside the grammar (``format``)."""

    def __init__(self, bug):
        import pyarrow as pa

        import dlpackarray

        self.bug = bug
        self.t = pa.table({"a": pa.array([1, None, 3], type=pa.int64())})
        self.d = dlpackarray.DLPackArray(np.arange(3, dtype=np.int64))
        if bug == "validity":
            self.__arrow_c_stream__ = self._stream
        else:
            self.__arrow_c_device_stream__ = self._device_stream

    def _stream(self, requested_schema=None):
        c = self.t.__arrow_c_stream__(requested_schema)
        _wrap_stream_callback(c, _abi.ArrowArrayStream, "get_next", _null_validity)
        return c

    def _device_stream(self, requested_schema=None, **kwargs):
        c = self.d.__arrow_c_device_stream__(requested_schema, **kwargs)
        _wrap_stream_callback(c, _abi.ArrowDeviceArrayStream, "get_schema", _int32_format)
        return c

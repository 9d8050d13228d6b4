"""The elements of an Arrow consumer's result, read through the result's own exports.

``__arrow_c_stream__`` first (arrays, chunked arrays, tables, data frames and relations
offer it), else ``__arrow_c_array__``.  An int64 column is read with its offset and
validity bitmap; a struct (a table's record batch) by its first child.  Everything the
result exported is released again.
"""

from __future__ import annotations

import ctypes

from dlpackarray.testing import _abi

_GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class Unreadable(Exception):
    """The result exports nothing the checker reads."""


def _release(struct) -> None:
    if struct.release:
        _abi.PY_VOID_FN(struct.release)(ctypes.addressof(struct))


def _column(schema: _abi.ArrowSchema, array: _abi.ArrowArray) -> list:
    fmt = schema.format
    if fmt == b"+s":
        if schema.n_children < 1 or array.n_children < 1:
            raise Unreadable("a struct without children")
        return _column(schema.children[0].contents, array.children[0].contents)
    if fmt != b"l":
        raise Unreadable(f"format {fmt!r}, not int64")
    n, off = array.length, array.offset
    validity = array.buffers[0]
    data = array.buffers[1]
    out: list = []
    for i in range(n):
        j = off + i
        if validity and not (ctypes.c_uint8.from_address(validity + j // 8).value >> (j % 8)) & 1:
            out.append(None)
        else:
            out.append(ctypes.c_int64.from_address(data + 8 * j).value)
    return out


def values(obj) -> list:
    """Every element of ``obj`` (chunks and batches concatenated); None for nulls."""
    if hasattr(obj, "__arrow_c_stream__"):
        return _from_stream(obj.__arrow_c_stream__())
    if hasattr(obj, "__arrow_c_array__"):
        schema_cap, array_cap = obj.__arrow_c_array__()
        schema = _abi.ArrowSchema.from_address(_abi.capsule_pointer(schema_cap))
        array = _abi.ArrowArray.from_address(_abi.capsule_pointer(array_cap))
        return _column(schema, array)  # the capsules release them
    raise Unreadable(f"the consumer returned {type(obj).__name__}, which exports no Arrow data")


def _from_stream(cap) -> list:
    stream = _abi.ArrowArrayStream.from_address(_abi.capsule_pointer(cap))
    schema = _abi.ArrowSchema()
    if _GET_SCHEMA(stream.get_schema)(ctypes.addressof(stream), ctypes.addressof(schema)):
        raise Unreadable("the result's stream get_schema failed")
    out: list = []
    try:
        while True:
            array = _abi.ArrowArray()
            if _GET_NEXT(stream.get_next)(ctypes.addressof(stream), ctypes.addressof(array)):
                raise Unreadable("the result's stream get_next failed")
            if not array.release:
                break
            try:
                out.extend(_column(schema, array))
            finally:
                _release(array)
    finally:
        _release(schema)
    return out  # the capsule releases the stream

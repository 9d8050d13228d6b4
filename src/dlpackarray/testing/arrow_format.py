"""The MUST rules of the Arrow C data interface on format strings and buffers.

A format string is checked against the grammar of
https://arrow.apache.org/docs/format/CDataInterface.html#data-type-description-format-strings
and decides how many children a schema has and which buffers an array has
(https://arrow.apache.org/docs/format/Columnar.html#buffer-listing-for-each-layout).  A
buffer pointer may be NULL only for the validity bitmap when ``null_count`` is 0, or for a
buffer whose size would be 0 (https://arrow.apache.org/docs/format/CDataInterface.html#c.ArrowArray.buffers).

Only the structs are read, never a buffer's contents; nested schemas and arrays are walked
to a bounded depth and width so that a cyclic or huge tree cannot hang the checker.
"""

from __future__ import annotations

import ctypes
import re

from dlpackarray.testing import _abi

#: Deepest nesting and most children per level walked.
MAX_DEPTH = 16
MAX_CHILDREN = 64

_PRIMITIVE = set("nbcCsSiIlLefgzZuU")
_TEMPORAL = re.compile(r"t(d[Dm]|t[smun]|s[smun]:.*|D[smun]|i[MDn])\Z", re.S)
_DECIMAL = re.compile(r"d:\d+,-?\d+(,(32|64|128|256))?\Z")
_FIXED = re.compile(r"w:\d+\Z")
_FIXED_LIST = re.compile(r"\+w:\d+\Z")
_UNION = re.compile(r"\+u[ds]:(\d+(,\d+)*)?\Z")


def valid_format(fmt: str) -> bool:
    """Whether ``fmt`` is a format string of the C data interface's grammar."""
    return bool(
        fmt in _PRIMITIVE
        or fmt in ("vz", "vu", "+l", "+L", "+vl", "+vL", "+s", "+m", "+r")
        or _TEMPORAL.match(fmt)
        or _DECIMAL.match(fmt)
        or _FIXED.match(fmt)
        or _FIXED_LIST.match(fmt)
        or _UNION.match(fmt)
    )


def expected_children(fmt: str) -> int | None:
    """How many children a schema of ``fmt`` has (None: any number, a struct)."""
    if fmt in ("+l", "+L", "+vl", "+vL", "+m") or _FIXED_LIST.match(fmt):
        return 1
    if fmt == "+s":
        return None
    if fmt == "+r":
        return 2
    if _UNION.match(fmt):
        ids = fmt.split(":", 1)[1]
        return len(ids.split(",")) if ids else 0
    return 0


def has_validity(fmt: str) -> bool:
    """Whether buffer 0 of an array of ``fmt`` is a validity bitmap."""
    return fmt not in ("n", "+r") and not _UNION.match(fmt)


def mandatory_buffers(fmt: str) -> tuple[int, ...]:
    """Buffers (by index) of an array of ``fmt`` whose size is not 0 when length > 0: the
    values, offsets, views or type ids (not a binary type's data, empty when every value
    is, nor a zero-width fixed binary's)."""
    if fmt in ("n", "+s", "+r") or _FIXED_LIST.match(fmt):
        return ()
    if fmt in ("+vl", "+vL"):
        return (1, 2)
    if fmt.startswith("+ud:"):
        return (0, 1)
    if fmt.startswith("+us:"):
        return (0,)
    if _FIXED.match(fmt):
        return (1,) if int(fmt[2:]) > 0 else ()
    return (1,)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def schema_problems(schema: _abi.ArrowSchema) -> tuple[list[str], list[str]]:
    """(format grammar problems, children-count problems) of a schema tree."""
    grammar: list[str] = []
    children: list[str] = []
    _walk_schema(schema, "", 0, grammar, children)
    return grammar, children


def _walk_schema(schema, path, depth, grammar, children) -> None:
    fmt = _text(schema.format)
    where = path or "the schema"
    if fmt is None:
        grammar.append(f"{where}: format is NULL")
        return
    if not valid_format(fmt):
        grammar.append(f"{where}: format {fmt!r} is not in the format-string grammar")
        return
    want = expected_children(fmt)
    n = schema.n_children
    if n < 0 or (want is not None and n != want):
        children.append(f"{where}: format {fmt!r} has {want} children, n_children = {n}")
        return
    if n and not schema.children:
        children.append(f"{where}: n_children = {n} but children is NULL")
        return
    if depth >= MAX_DEPTH:
        return
    for i in range(min(n, MAX_CHILDREN)):
        child = schema.children[i]
        if not child:
            children.append(f"{where}: child {i} is NULL")
            continue
        _walk_schema(child.contents, f"{path}child {i} ", depth + 1, grammar, children)
    if schema.dictionary:
        _walk_schema(schema.dictionary.contents, f"{path}dictionary ", depth + 1, grammar, [])


def array_problems(schema: _abi.ArrowSchema, array: _abi.ArrowArray) -> tuple[list[str], list[str]]:
    """(validity problems, NULL mandatory buffer problems) of an array tree, read with its
    schema's formats; parts whose schema is malformed are skipped (the schema rules say)."""
    validity: list[str] = []
    buffers: list[str] = []
    _walk_array(schema, array, "", 0, validity, buffers)
    return validity, buffers


def _walk_array(schema, array, path, depth, validity, buffers) -> None:
    fmt = _text(schema.format)
    if fmt is None or not valid_format(fmt):
        return
    where = path or "the array"
    n = array.n_buffers
    if not (0 <= n <= MAX_CHILDREN) or (n and not array.buffers):
        return  # arrow.array.fields reports it
    pointers = [array.buffers[i] or 0 for i in range(n)]
    if has_validity(fmt) and n >= 1 and not pointers[0] and array.null_count != 0:
        validity.append(
            f"{where} ({fmt!r}): null_count = {array.null_count} with a NULL validity buffer"
        )
    if array.length > 0:
        for i in mandatory_buffers(fmt):
            if i < n and not pointers[i]:
                buffers.append(f"{where} ({fmt!r}): buffer {i} is NULL with length {array.length}")
    if depth >= MAX_DEPTH or array.n_children != schema.n_children:
        return
    if not (array.children and schema.children):
        return
    for i in range(min(array.n_children, MAX_CHILDREN)):
        child, child_schema = array.children[i], schema.children[i]
        if child and child_schema:
            _walk_array(
                child_schema.contents,
                child.contents,
                f"{path}child {i} ",
                depth + 1,
                validity,
                buffers,
            )


def read_schema(address: int) -> _abi.ArrowSchema:
    return _abi.ArrowSchema.from_address(address)


def stream_schema_and_chunk(address: int, device: bool):
    """``(schema, chunk, release)`` from a fresh stream at ``address``: its schema and
    first chunk (an ArrowDeviceArray for a device stream), either None when the stream
    does not give one; ``release()`` releases both."""
    kind = _abi.ArrowDeviceArrayStream if device else _abi.ArrowArrayStream
    s = kind.from_address(address)
    if not (s.release and s.get_schema and s.get_next):
        return None, None, lambda: None
    call = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    got_schema = _abi.ArrowSchema()
    schema_ok = call(s.get_schema)(address, ctypes.addressof(got_schema)) == 0
    schema = got_schema if schema_ok and got_schema.release else None
    got_chunk = _abi.ArrowDeviceArray() if device else _abi.ArrowArray()
    chunk_ok = call(s.get_next)(address, ctypes.addressof(got_chunk)) == 0
    inner = got_chunk.array if isinstance(got_chunk, _abi.ArrowDeviceArray) else got_chunk
    chunk = got_chunk if chunk_ok and inner.release else None

    def release():
        if schema is not None and schema.release:
            _abi.PY_VOID_FN(schema.release)(ctypes.addressof(schema))
        if chunk is not None:
            inner = chunk.array if device else chunk
            if inner.release:
                _abi.PY_VOID_FN(inner.release)(ctypes.addressof(inner))

    return schema, chunk, release

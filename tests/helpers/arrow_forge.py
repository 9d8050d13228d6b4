"""Hostile Arrow C structs, built field by field with ctypes (arrow_ctypes.py),
wrapped in the PyCapsule interface's capsules and offered by a producer
object, so that every field the importer reads can be forged: formats and
names (any bytes or NULL), metadata, counts, NULL pointers, lengths, offsets,
null counts, dictionaries, released structs and stream callbacks.

A struct tree is described by a chain of levels, outermost first; each level
is a dict of the fields to forge (anything absent gets a consistent value).
Every top-level struct and stream counts its release calls, so tests can pin
"released exactly once" as well as the outcome.  A Forge keeps everything it
made alive; make one per test or case.
"""

from __future__ import annotations

import ctypes
import struct as _struct

import numpy as np
from arrow_ctypes import (
    ArrowArray,
    ArrowArrayStream,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
)

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# Capsule names must outlive every capsule.
_NAMES = {
    n: ctypes.create_string_buffer(n)
    for n in (
        b"arrow_schema",
        b"arrow_array",
        b"arrow_device_array",
        b"arrow_array_stream",
        b"arrow_device_array_stream",
    )
}

_SCHEMA_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
_ARRAY_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
_STREAM_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ArrowSchema))
_GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GET_LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

CPU = 1

# dtype of each leaf format the forge fills with data.
LEAF_DTYPES = {
    b"c": np.int8,
    b"C": np.uint8,
    b"s": np.int16,
    b"S": np.uint16,
    b"i": np.int32,
    b"I": np.uint32,
    b"l": np.int64,
    b"L": np.uint64,
    b"e": np.float16,
    b"f": np.float32,
    b"g": np.float64,
}


def metadata_blob(pairs) -> bytes:
    """The binary key/value layout of ArrowSchema.metadata."""
    out = _struct.pack("=i", len(pairs))
    for k, v in pairs:
        out += _struct.pack("=i", len(k)) + k + _struct.pack("=i", len(v)) + v
    return out


def extension(name: bytes, params: bytes = b"") -> bytes:
    return metadata_blob([(b"ARROW:extension:name", name), (b"ARROW:extension:metadata", params)])


def list_size(fmt) -> int | None:
    if isinstance(fmt, bytes) and fmt.startswith(b"+w:") and fmt[3:].isdigit():
        return int(fmt[3:])
    return None


class Forge:
    def __init__(self):
        self.keep: list = []
        self.releases: dict[str, int] = {}

    # -- helpers -------------------------------------------------------------------------
    def _hold(self, obj):
        self.keep.append(obj)
        return obj

    def _counter(self, label: str, proto, clear):
        self.releases.setdefault(label, 0)

        def release(ptr):
            self.releases[label] += 1
            clear(ptr)

        return self._hold(proto(release))

    def _release(self, proto, label):
        """A release callback; a top-level one with a label counts its calls.  A
        consumer calls only the top-level release (the producer's releases
        its children), so children's are never counted."""

        def clear(p):
            p.contents.release = None

        cb = self._counter(label, proto, clear) if label else self._hold(proto(clear))
        return ctypes.cast(cb, ctypes.c_void_p).value

    def _pointer_array(self, item_type, items, declared):
        # Room for the declared count too (small lies only), so that a reader
        # trusting the count reads NULLs, not past the allocation.
        n = max(len(items), declared if isinstance(declared, int) and 0 <= declared <= 64 else 0)
        arr = (item_type * max(n, 1))()
        for i, item in enumerate(items):
            if item is not None:
                arr[i] = item
        return self._hold(arr)

    # -- schemas --------------------------------------------------------------------------
    def schema(self, levels, label="schema", i=0, out=None) -> ArrowSchema:
        """The schema chain of ``levels`` (each: format, name, metadata, flags,
        n_children, children="null" | "null_child", dictionary, release)."""
        spec = levels[i]
        s = out if out is not None else self._hold(ArrowSchema())
        s.format = spec.get("format", b"f")
        s.name = spec.get("name", b"x" if i == 0 else b"item")
        meta = spec.get("metadata")
        if meta is not None:
            s.metadata = ctypes.addressof(self._hold(ctypes.create_string_buffer(meta, len(meta))))
        s.flags = spec.get("flags", 2)
        kids = []
        if i + 1 < len(levels):
            kids.append(ctypes.pointer(self.schema(levels, label, i + 1)))
        if spec.get("child") == "null":
            kids = [None]
        declared = spec.get("n_children", len(kids))
        s.n_children = declared
        if spec.get("children") != "null" and (kids or declared):
            s.children = self._pointer_array(ctypes.POINTER(ArrowSchema), kids, declared)
        if spec.get("dictionary"):
            s.dictionary = ctypes.pointer(self.schema([{"format": b"i"}], None))
        if spec.get("release", True):
            s.release = self._release(_SCHEMA_RELEASE, label if i == 0 else None)
        return s

    # -- arrays ---------------------------------------------------------------------------
    def array(self, levels, rows=3, label="array", i=0, out=None, values=None) -> ArrowArray:
        """The array chain of ``levels`` (each: length, null_count, offset,
        n_buffers, buffers, validity, n_children, children="null",
        child="null", dictionary, release) holding ``rows`` rows of the leaf
        format's dtype, values 0, 1, 2, ... (or ``values``)."""
        spec = levels[i]
        a = out if out is not None else self._hold(ArrowArray())
        fmt = spec.get("format", b"f")
        n_rows = spec.get("rows", rows)
        a.length = spec.get("length", n_rows)
        a.offset = spec.get("offset", 0)
        a.null_count = spec.get("null_count", 0)
        kids = []
        size = list_size(fmt)
        # Room for a small offset in the data; a huge one is a lie the
        # importer must refuse (or never read through).
        room = a.offset if 0 < a.offset <= 4096 else 0
        if i + 1 < len(levels):
            child_rows = (n_rows + room) * (size if size is not None else 1)
            kids.append(ctypes.pointer(self.array(levels, child_rows, label, i + 1, values=values)))
            bufs = [spec.get("validity")]
        else:
            dtype = LEAF_DTYPES.get(fmt, np.int8)
            if fmt == b"b":
                data = self._hold(np.full((n_rows + room + 7) // 8 + 1, 0xFF, dtype=np.uint8))
            elif values is not None:
                data = self._hold(np.asarray(values, dtype=dtype))
            else:
                data = self._hold(np.arange(n_rows + room + 1, dtype=dtype))
            bufs = [spec.get("validity"), data.ctypes.data]
        if spec.get("child") == "null":
            kids = [None]
        if "buffers" in spec and spec["buffers"] != "null":
            bufs = spec["buffers"]
        n_buffers = spec.get("n_buffers", len(bufs))
        a.n_buffers = n_buffers
        if spec.get("buffers") != "null":
            a.buffers = self._pointer_array(ctypes.c_void_p, bufs, n_buffers)
        declared = spec.get("n_children", len(kids))
        a.n_children = declared
        if spec.get("children") != "null" and (kids or declared):
            a.children = self._pointer_array(ctypes.POINTER(ArrowArray), kids, declared)
        if spec.get("dictionary"):
            a.dictionary = ctypes.pointer(self.array([{"format": b"i"}], 2, None))
        if spec.get("release", True):
            a.release = self._release(_ARRAY_RELEASE, label if i == 0 else None)
        return a

    def device_array(self, levels, rows=3, label="array", device_type=CPU, device_id=-1):
        d = self._hold(ArrowDeviceArray())
        self.array(levels, rows, label, out=d.array)
        d.device_type = device_type
        d.device_id = device_id
        return d

    # -- capsules -------------------------------------------------------------------------
    def capsule(self, struct, name: bytes):
        """A capsule over ``struct``, without a destructor: a Python-level one
        (ctypes) would run while the import's exception is pending, which
        ctypes refuses.  What the consumer does not take stays unreleased
        (``releases`` counts the consumer's calls only)."""
        return _new_capsule(ctypes.addressof(struct), _NAMES[name], None)

    def pair(self, schema_levels, array_levels, rows=3, device=False):
        schema = self.capsule(self.schema(schema_levels), b"arrow_schema")
        if device:
            return schema, self.capsule(
                self.device_array(array_levels, rows), b"arrow_device_array"
            )
        return schema, self.capsule(self.array(array_levels, rows), b"arrow_array")

    # -- streams --------------------------------------------------------------------------
    def stream(
        self,
        schema_levels,
        chunks,
        *,
        device=False,
        device_type=CPU,
        missing=(),
        schema_rc=0,
        next_rc=(),
        error=b"producer failure",
        label="stream",
    ):
        """A stream capsule yielding ``chunks`` (ArrowArray or ArrowDeviceArray
        structs, moved out in turn) after the schema of ``schema_levels`` (None:
        get_schema succeeds without filling its output).  ``missing`` names
        callbacks to leave NULL; ``next_rc`` lists the return code of each
        get_next call (0 once exhausted); ``error`` is get_last_error's text
        (None: NULL)."""
        st = self._hold(ArrowDeviceArrayStream() if device else ArrowArrayStream())
        if device:
            st.device_type = device_type
        pending = list(chunks)
        codes = list(next_rc)
        err = None if error is None else self._hold(ctypes.create_string_buffer(error))

        def get_schema(_stream, out):
            if schema_rc:
                return schema_rc
            if schema_levels is not None:
                self.schema(schema_levels, label + ".schema", out=out.contents)
            return 0

        def get_next(_stream, out):
            rc = codes.pop(0) if codes else 0
            if rc:
                return rc
            size = ctypes.sizeof(ArrowDeviceArray if device else ArrowArray)
            if not pending:
                ctypes.memset(out, 0, size)
                return 0
            chunk = pending.pop(0)
            ctypes.memmove(out, ctypes.addressof(chunk), size)
            (chunk.array if device else chunk).release = None
            return 0

        def get_last_error(_stream):
            return None if err is None else ctypes.addressof(err)

        callbacks = {
            "get_schema": _GET_SCHEMA(get_schema),
            "get_next": _GET_NEXT(get_next),
            "get_last_error": _GET_LAST_ERROR(get_last_error),
            "release": self._counter(
                label,
                _STREAM_RELEASE,
                lambda p: setattr(
                    (ArrowDeviceArrayStream if device else ArrowArrayStream).from_address(p),
                    "release",
                    None,
                ),
            ),
        }
        for name, cb in callbacks.items():
            self._hold(cb)
            if name not in missing:
                setattr(st, name, ctypes.cast(cb, ctypes.c_void_p).value)
        return self.capsule(st, b"arrow_device_array_stream" if device else b"arrow_array_stream")


def producer(method: str, result):
    """A fresh class per method: the importer looks the method up on the type."""
    cls = type("Forged", (), {method: lambda self, requested_schema=None, **kw: self.result})
    obj = cls.__new__(cls)
    obj.result = result
    return obj

"""Crafted Arrow producers for the consumer checker: PyCapsule interface objects that
record every call and count every release.

An :class:`ArrowProducer` offers ``__arrow_c_schema__``, ``__arrow_c_array__`` and
``__arrow_c_stream__`` over an int64 column (or a one-column struct, the shape table
readers take) laid out by the checker in ctypes memory, with any offset, validity bitmap
or deliberate fault.  Release callbacks and capsule destructors are C functions
(``dlpackarray._crafted``) counting into a tally per struct; an array's release poisons
its buffers, so a consumer still reading them afterwards reads wrong values.
"""

from __future__ import annotations

import ctypes

from dlpackarray import _crafted
from dlpackarray.testing import _abi
from dlpackarray.testing.consumer_craft import _KEEP, Tally

_CALLBACKS = _crafted.addresses()
#: The junk an offset skips: a consumer ignoring ``offset`` reads it.
JUNK = -777
#: ArrowSchema flag: the field is nullable.
NULLABLE = 2


class Column:
    """One int64 column: ``values`` (None: null), ``offset`` junk elements before them.

    ``table``: wrap it as the single child ``a`` of a struct (a record batch), the shape
    table consumers read.  Faults: ``fmt`` (the format string), ``n_buffers`` (the count
    the struct claims), ``released`` (hand out a struct already released).
    """

    def __init__(
        self,
        values,
        *,
        offset: int = 0,
        table: bool = False,
        fmt: bytes = b"l",
        n_buffers: int = 2,
        released: bool = False,
    ):
        self.values = list(values)
        self.offset = offset
        self.table = table
        self.fmt = fmt
        self.n_buffers = n_buffers
        self.released = released

    def with_(self, **kw) -> Column:
        values = kw.pop("values", self.values)
        args = {k: getattr(self, k) for k in ("offset", "table", "fmt", "n_buffers", "released")}
        args.update(kw)
        return Column(values, **args)


class _Schema:
    def __init__(self, column: Column):
        self.tally = Tally()
        self.child = _abi.ArrowSchema()
        self.child.format = column.fmt
        self.child.name = b"a"
        self.child.flags = NULLABLE
        if column.table:
            self.children = (ctypes.POINTER(_abi.ArrowSchema) * 1)(ctypes.pointer(self.child))
            self.child.release = _CALLBACKS["arrow_schema_release"]
            self.struct = _abi.ArrowSchema()
            self.struct.format = b"+s"
            self.struct.name = b""
            self.struct.n_children = 1
            self.struct.children = self.children
        else:
            self.struct = self.child
        self.struct.release = _CALLBACKS["arrow_schema_release"]
        self.struct.private_data = self.tally.address
        _KEEP.append(self)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.struct)


class _Array:
    def __init__(self, column: Column):
        n, off = len(column.values), column.offset
        raw = [JUNK] * off + [0 if v is None else v for v in column.values]
        nulls = sum(v is None for v in column.values)
        width = (off + n + 7) // 8
        self.data = (ctypes.c_int64 * max(off + n, 1))(*raw)
        self.validity = (ctypes.c_uint8 * max(width, 1))()
        for i, v in enumerate(column.values):
            if v is not None:
                self.validity[(off + i) // 8] |= 1 << ((off + i) % 8)
        for i in range(off):  # the skipped slots read as valid junk
            self.validity[i // 8] |= 1 << (i % 8)
        self.tally = Tally(ctypes.addressof(self.data), ctypes.sizeof(self.data))
        validity = ctypes.addressof(self.validity) if nulls else None
        self.buffers = (ctypes.c_void_p * 2)(validity, ctypes.addressof(self.data))
        self.child = _abi.ArrowArray()
        c = self.child
        c.length, c.null_count, c.offset = n, nulls, off
        c.n_buffers = column.n_buffers
        c.buffers = ctypes.cast(self.buffers, ctypes.POINTER(ctypes.c_void_p))
        if column.table:
            self.parent_buffers = (ctypes.c_void_p * 1)(None)
            self.children = (ctypes.POINTER(_abi.ArrowArray) * 1)(ctypes.pointer(self.child))
            self.child.release = _CALLBACKS["arrow_array_release"]
            self.struct = _abi.ArrowArray()
            s = self.struct
            s.length, s.null_count, s.offset, s.n_buffers, s.n_children = n, 0, 0, 1, 1
            s.buffers = ctypes.cast(self.parent_buffers, ctypes.POINTER(ctypes.c_void_p))
            s.children = self.children
        else:
            self.struct = self.child
        self.struct.release = None if column.released else _CALLBACKS["arrow_array_release"]
        self.struct.private_data = self.tally.address
        _KEEP.append(self)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.struct)


class _Stream:
    def __init__(self, column: Column):
        self.schema = _Schema(column)
        self.array = _Array(column)
        self.tally = Tally()
        self.tally.slots[4] = self.schema.address
        self.tally.slots[5] = self.array.address
        self.struct = _abi.ArrowArrayStream()
        self.struct.get_schema = _CALLBACKS["arrow_stream_get_schema"]
        self.struct.get_next = _CALLBACKS["arrow_stream_get_next"]
        self.struct.get_last_error = _CALLBACKS["arrow_stream_get_last_error"]
        released = column.released
        self.struct.release = None if released else _CALLBACKS["arrow_stream_release"]
        self.struct.private_data = self.tally.address
        _KEEP.append(self)

    @property
    def schemas_handed(self) -> int:
        return self.tally.slots[7]

    @property
    def batches_handed(self) -> int:
        return 1 if self.tally.slots[6] >= 1 else 0


class ArrowProducer:
    """An Arrow PyCapsule producer over a crafted :class:`Column` that records every call."""

    def __init__(self, column: Column):
        self.column = column
        self.calls: list[str] = []
        #: (kind, struct record, capsule or None) of every struct handed out.
        self.handed: list[list] = []

    def _hand(self, kind, record):
        names = {"schema": "arrow_schema", "array": "arrow_array", "stream": "arrow_array_stream"}
        cap = _crafted.arrow_capsule(ctypes.addressof(record.struct), names[kind])
        self.handed.append([kind, record, cap])
        return cap

    def __arrow_c_schema__(self):
        self.calls.append("__arrow_c_schema__")
        return self._hand("schema", _Schema(self.column))

    def __arrow_c_array__(self, requested_schema=None):
        self.calls.append("__arrow_c_array__")
        schema = self._hand("schema", _Schema(self.column))
        return schema, self._hand("array", _Array(self.column))

    def __arrow_c_stream__(self, requested_schema=None):
        self.calls.append("__arrow_c_stream__")
        return self._hand("stream", _Stream(self.column))

    def drop_capsules(self) -> None:
        for entry in self.handed:
            entry[2] = None

    def unreleased(self) -> list[str]:
        """What was handed out and not released exactly once (capsules dropped first)."""
        out = []
        for kind, record, _ in self.handed:
            counts = [(kind, record.tally.calls, 1)]
            if kind == "stream":
                counts = [
                    ("stream", record.tally.calls, 1),
                    ("schema from get_schema", record.schema.tally.calls, record.schemas_handed),
                    ("array from get_next", record.array.tally.calls, record.batches_handed),
                ]
            if self.column.released and kind in ("array", "stream"):
                continue  # handed out released: nothing to release
            for what, calls, want in counts:
                if calls != want:
                    out.append(f"{what}: released {calls} times, expected {want}")
        return out

"""Lying and malformed ``__array_struct__`` capsules (PyArrayInterface)."""

from __future__ import annotations

import numpy as np
from array_struct_ctypes import ARR_HAS_DESCR, NOTSWAPPED, WRITEABLE
from cases import Case

_BUF = np.arange(16, dtype=np.float32)
_PTR = _BUF.ctypes.data


def forge(**fields):
    fields.setdefault("data", _PTR)
    fields.setdefault("typekind", b"f")
    fields.setdefault("shape", (16,))

    def body():
        from array_struct_ctypes import StructExporter

        from dlpackarray import DLPackArray

        exporter = StructExporter(**fields)
        exporter.keep = _BUF
        return DLPackArray(exporter)

    return body


class _Junk:
    def __init__(self, value):
        self.__array_struct__ = value


def junk(value):
    def body():
        from dlpackarray import DLPackArray

        return DLPackArray(_Junk(value))

    return body


def ok(shape, strides, dtype="float32", readonly=False):
    return {
        "shape": list(shape),
        "strides": list(strides),
        "dtype": dtype,
        "device": [1, 0],
        "readonly": readonly,
    }


def cases():
    out = []

    def add(cid, body, exc=None, match=None, value=None):
        out.append(Case(f"struct/{cid}", body, exc, match, value=value))

    for two in (0, 1, 3, -1, 2**31 - 1, -(2**31)):
        add(f"two/{two}", forge(two=two), ValueError, rf"its 'two' field is {two}, not 2")
    for nd in (-1, -(2**31), 65, 2**31 - 1):
        add(f"nd/{nd}", forge(nd=nd), ValueError, rf"has nd = {nd}; the supported range is 0\.\.64")
    for nd in (1, 2, 64):
        add(f"null_shape/{nd}", forge(nd=nd, shape=None), ValueError, "but a NULL shape pointer")
    for itemsize in (0, -1, -(2**31)):
        add(
            f"itemsize/{itemsize}",
            forge(itemsize=itemsize),
            ValueError,
            rf"itemsize {itemsize}; it must be positive",
        )
    # NumPy kinds DLPack has no type for: BufferError naming the kind.
    for kind, what in zip(
        b"OSUVMma",
        ("Python object", "bytes", "str", "void/structured", "datetime64", "timedelta64", "bytes"),
        strict=True,
    ):
        add(
            f"typekind/{kind}",
            forge(typekind=bytes([kind])),
            BufferError,
            rf"holds {what} data \(kind '{chr(kind)}'\), which DLPack cannot describe; supported",
        )
    # Bytes that are no NumPy kind at all: a malformed struct, TypeError.
    for kind in b"?Bxz\x00\x7f\x80\xff ":
        add(
            f"typekind/{kind}",
            forge(typekind=bytes([kind])),
            TypeError,
            "typekind .* has no DLPack equivalent",
        )
    # Widths no DLPack type has: BufferError, the same rule as __array_interface__'s.
    for kind, size in ((b"i", 3), (b"f", 3), (b"u", 16), (b"f", 16), (b"i", 5)):
        add(
            f"width/{kind.decode()}{size}",
            forge(typekind=kind, itemsize=size, shape=(1,)),
            BufferError,
            rf"names a {size * 8}-bit [a-z -]+ type, a width dlpackarray does not exchange; "
            "supported dtypes are ",
        )
    # One byte of float: DLPack has several 8-bit floats, and a typekind cannot say which.
    add(
        "width/f1",
        forge(typekind=b"f", itemsize=1, shape=(1,)),
        BufferError,
        "names a 1-byte float without saying which",
    )
    for kind, size in ((b"i", 4), (b"u", 2), (b"f", 8), (b"c", 8)):
        add(
            f"swapped/{kind.decode()}{size}",
            forge(typekind=kind, itemsize=size, shape=(1,), flags=WRITEABLE),
            BufferError,
            "byte-swapped",
        )
    # One-byte items have no byte order: NOTSWAPPED is not needed.
    add(
        "one_byte_unswapped",
        forge(typekind=b"u", itemsize=1, shape=(4,), flags=WRITEABLE),
        value=ok((4,), (1,), "uint8"),
    )
    add(
        "readonly_flag",
        forge(itemsize=4, flags=NOTSWAPPED),
        value=ok((16,), (1,), readonly=True),
    )
    for shape, i, v in (((-1,), 0, -1), ((4, -4), 1, -4)):
        add(
            f"negative_shape/{shape}",
            forge(shape=shape, nd=len(shape)),
            ValueError,
            rf"shape\[{i}\] = {v} is negative",
        )
    for shape in ((2**32, 2**32), (2**62, 4)):
        add(
            f"count/{shape}",
            forge(shape=shape, nd=2, strides=(0, 0)),
            OverflowError,
            "number of elements overflows",
        )
    for strides in ((3,), (6,), (-2,)):
        add(
            f"stride_items/{strides}",
            forge(strides=strides),
            BufferError,
            "not a multiple of the item size",
        )
    for strides in ((2**62,), (-(2**62),)):
        add(f"stride_overflow/{strides}", forge(strides=strides), OverflowError, "overflows")
    add("null_data", forge(data=0), ValueError, "data pointer is NULL")
    add("null_data_empty", forge(data=0, shape=(0,)), value=ok((0,), (1,)))
    add(
        "descr_disagrees",
        forge(descr=[("", "<i4")], flags=NOTSWAPPED | WRITEABLE | ARR_HAS_DESCR),
        TypeError,
        r"typestr .<f4. and descr format .<i4. disagree",
    )
    # A descr pointer without ARR_HAS_DESCR is ignored (the flag says whether it is set).
    add(
        "descr_without_flag",
        forge(descr=[("", "<i4")], flags=NOTSWAPPED | WRITEABLE),
        value=ok((16,), (1,)),
    )
    for name in (b"", b"PyArrayInterface", b"dltensor"):
        add(f"named/{name!r}", forge(name=name), TypeError, "is a capsule named")
    for value in (3, "capsule", b"\x02", (2, 1), None):
        add(
            f"not_capsule/{type(value).__name__}",
            junk(value),
            TypeError,
            "must be a PyCapsule" if value is not None else "implements none of",
        )
    return out

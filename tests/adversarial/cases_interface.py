"""Lying and malformed ``__array_interface__`` dictionaries."""

from __future__ import annotations

import numpy as np
from cases import Case

_BUF = np.arange(16, dtype=np.float32)  # 64 bytes that stay valid
_PTR = _BUF.ctypes.data
_DROP = object()


class _Iface:
    def __init__(self, iface, keep):
        self.__array_interface__ = iface
        self.keep = keep


def base(**changes):
    iface = {"version": 3, "shape": (4, 4), "typestr": "<f4", "data": (_PTR, False)}
    for key, value in changes.items():
        if value is _DROP:
            iface.pop(key, None)
        else:
            iface[key] = value
    return iface


def wrap(iface):
    def body():
        from dlpackarray import DLPackArray

        return DLPackArray(_Iface(iface, _BUF))

    return body


def ok(shape, strides, dtype="float32", readonly=False):
    return {
        "shape": list(shape),
        "strides": list(strides),
        "dtype": dtype,
        "device": [1, 0],
        "readonly": readonly,
    }


_BAD_FORM = r"invalid array-interface typestr '{}': expected <byteorder><kind><bytes>"


def cases():
    out = []

    def add(cid, iface, exc=None, match=None, value=None):
        out.append(Case(f"iface/{cid}", wrap(iface), exc, match, value=value))

    # The container and its required keys.
    for junk in ([("shape", (1,))], 3, "dict", (1, 2)):
        add(f"container/{type(junk).__name__}", junk, TypeError, "must be a dict")
    # None is "no array interface", as NumPy reads it.
    add("container/None", None, TypeError, "implements none of __dlpack__, __array_struct__")
    for key in ("version", "shape", "typestr"):
        add(f"missing/{key}", base(**{key: _DROP}), ValueError, f"required key '{key}'")
        add(f"none/{key}", base(**{key: None}), ValueError, f"lacks the required key '{key}'")

    # version
    for v in ("3", 3.0, True, b"3"):
        add(f"version_type/{v!r}", base(version=v), TypeError, "'version' must be an int")
    for v in (0, 1, 2, 4, -3, 2**70):
        add(f"version/{v}", base(version=v), ValueError, f"version {v}")

    # shape
    for s in ([4, 4], 16, "4,4", {4: 4}):
        add(f"shape_type/{s!r}", base(shape=s), TypeError, "'shape' must be a tuple")
    for s, i in (((4.0, 4), 0), ((4, "4"), 1), ((4, None), 1), ((4, 4j), 1), ((b"4", 4), 0)):
        add(f"shape_item/{s!r}", base(shape=s), TypeError, rf"shape\[{i}\] must be an integer")
    for s in ((True, 4), (4, False)):
        add(f"shape_bool/{s!r}", base(shape=s), TypeError, "got a bool")
    for s, i, v in (((-1, 4), 0, -1), ((4, -16), 1, -16), ((-(2**63), 1), 0, -(2**63))):
        add(f"shape_negative/{s!r}", base(shape=s), ValueError, rf"shape\[{i}\] = {v} is negative")
    for n in (65, 100):
        add(f"shape_ndim/{n}", base(shape=(1,) * n), ValueError, "at most 64")
    for s in ((2**63,), (2**64, 1), (-(2**63) - 1,)):
        add(f"shape_int64/{s!r}", base(shape=s), OverflowError, "does not fit in int64")
    for s in ((2**40, 2**40), (2**32, 2**32, 2), (3,) * 41):
        add(
            f"shape_count/{len(s)}d/{s[0]}",
            base(shape=s, strides=(0,) * len(s)),
            OverflowError,
            "number of elements overflows",
        )

    # typestr: malformed forms, unrepresentable widths, kinds without a DLPack type.
    for t in ("xyz", "", "f4", "<F4", "<f0", "<i-4", "<<f4", "<f4 ", " <f4", "<f+4", "<4"):
        add(f"typestr_form/{t!r}", base(typestr=t), TypeError, "invalid array-interface typestr")
    # Well-formed typestrs of widths no DLPack type has: BufferError, whatever the width.
    for t, bits in (
        ("<i3", 24),
        ("<c4", 32),
        ("<f16", 128),
        ("<u16", 128),
        ("<f3", 24),
        ("<c32", 256),
    ):
        add(
            f"typestr_width/{t}",
            base(typestr=t),
            BufferError,
            rf"names a {bits}-bit [a-z -]+ type, a width dlpackarray does not exchange; "
            "supported dtypes are ",
        )
    # Well-formed kinds DLPack has no type for: BufferError naming the kind.
    for t, what in (
        ("<m8", "timedelta64"),
        ("<M8", "datetime64"),
        ("|S4", "bytes"),
        ("<U1", "str"),
        ("|O8", "Python object"),
        ("|V16", "void/structured"),
    ):
        add(
            f"typestr_kind/{t}",
            base(typestr=t),
            BufferError,
            rf"holds {what} data \(kind .{t[1]}.\), which DLPack cannot describe; supported",
        )
    for t in (b"<f4", 4, ("<f4",)):
        add(f"typestr_type/{t!r}", base(typestr=t), TypeError, "'typestr' must be a str")
    for t in (">f4", ">i8", ">c16", ">u2"):
        add(f"typestr_order/{t}", base(typestr=t), BufferError, "big-endian")
    for t, name in (("|b1", "bool"), ("|u1", "uint8"), ("|i1", "int8"), ("=f4", "float32")):
        size = 1 if name != "float32" else 4
        add(
            f"typestr_ok/{t}",
            base(typestr=t, shape=(64 // size,)),
            value=ok((64 // size,), (1,), dtype=name),
        )

    # descr: structured dtypes are well-formed but unsupported (BufferError); a malformed
    # descr is a TypeError.
    for d, text in (
        ([("a", "<f4"), ("b", "<f4")], "structured dtype with 2"),
        ([("x", "<f4")], "named field 'x'"),
        ([("", "<f4", (2,))], "sub-array"),
        ([("", [("a", "<f4")])], "nested"),
    ):
        add(f"descr/{d!r}", base(descr=d), BufferError, text)
    for d, text in (
        ([], "0 fields"),
        ("<f4", "'descr' must be a list"),
        (["<f4"], "entries must be"),
        ([("", "<i4")], "disagree"),
    ):
        add(f"descr/{d!r}", base(descr=d), TypeError, text)

    # strides
    for s in ("16,4", [16, 4], 16):
        add(f"strides_type/{s!r}", base(strides=s), TypeError, "'strides' must be None or a tuple")
    for s in ((16,), (16, 4, 4), ()):
        add(f"strides_len/{len(s)}", base(strides=s), ValueError, f"'strides' has {len(s)} entries")
    for s in ((16, 2), (6, 4), (16, 5), (16, -3)):
        add(f"strides_items/{s!r}", base(strides=s), BufferError, "not a multiple of the item size")
    for s, i in (((16, 4.0), 1), ((None, 4), 0), (("16", 4), 0)):
        add(
            f"strides_item/{s!r}", base(strides=s), TypeError, rf"strides\[{i}\] must be an integer"
        )
    for s in ((2**62, 4), (4, 2**62), (-(2**62), 4), (2**63 - 4, 4)):
        add(f"strides_overflow/{s!r}", base(strides=s), OverflowError, "overflows")
    for s in ((2**64, 4), (4, -(2**63) - 4)):
        add(f"strides_int64/{s!r}", base(strides=s), OverflowError, "does not fit in int64")

    # mask is refused
    for m in (np.ones((4, 4), bool), True, [[1]]):
        add(f"mask/{type(m).__name__}", base(mask=m), ValueError, "mask")

    # data
    for label, (d, exc, text) in enumerate(
        (
            ((0, False), ValueError, "NULL"),
            ((_PTR,), TypeError, r"\(pointer, readonly\) pair"),
            ((_PTR, False, 1), TypeError, r"\(pointer, readonly\) pair"),
            ((float(_PTR), False), TypeError, "pointer must be an int"),
            ((True, False), TypeError, "pointer must be an int"),
            ((str(_PTR), False), TypeError, "pointer must be an int"),
            ((_PTR, "no"), TypeError, "read-only flag"),
            ((_PTR, None), TypeError, "read-only flag"),
            ((-8, False), ValueError, "not a valid address"),
            ((2**64, False), ValueError, "not a valid address"),
            ((2**80, False), ValueError, "not a valid address"),
            ("abc", TypeError, "'data' must be None"),
            (3.5, TypeError, "'data' must be None"),
            (None, TypeError, "exposes no buffer"),
            (np.zeros((8, 8))[:, ::2], BufferError, "contiguous"),
        )
    ):
        add(f"data/{label}/{type(d).__name__}", base(data=d), exc, text)

    # extents against a data buffer of known length
    for n in (0, 1, 32, 63):
        add(
            f"extent_short/{n}",
            base(data=bytearray(n)),
            ValueError,
            rf"reach bytes \[0, 64\) outside the source buffer of {n}",
        )
    for extra in (
        {"offset": 4},
        {"offset": 64},
        {"strides": (20, 4)},
        {"strides": (-16, 4)},
        {"strides": (16, -4)},
        {"offset": 2, "typestr": "<i2", "shape": (32,)},
    ):
        add(
            f"extent_outside/{extra!r}",
            base(data=bytearray(64), **extra),
            ValueError,
            "outside the source buffer",
        )
    for off in (-4, -1, -(2**63)):
        add(
            f"offset_negative/{off}",
            base(data=bytearray(64), offset=off),
            ValueError,
            "'offset' is",
        )
    add("offset_none", base(data=bytearray(64), offset=None), value=ok((4, 4), (4, 1)))
    for off in ("0", 0.0, b"0", 1j):
        add(
            f"offset_type/{off!r}",
            base(data=bytearray(64), offset=off),
            TypeError,
            "'offset' must be an integer",
        )

    # size-0 arrays: any pointer, any stride, no bytes touched.
    for shape, strides, text in (
        ((0,), None, "c"),
        ((0, 2**62), (2**62, 4), "huge"),
        ((5, 0), (-(2**62), 4), "neg"),
    ):
        add(
            f"size0/{text}",
            base(shape=shape, strides=strides, data=(0, False)),
            value=ok(shape, _element_strides(shape, strides)),
        )
    return out


def _element_strides(shape, strides):
    if strides is None:
        out, step = [], 1
        for n in reversed(shape):
            out.append(step)
            step *= max(n, 1)
        return list(reversed(out))
    return [s // 4 for s in strides]

"""PEP 3118 exporters that lie about len, itemsize, format, ndim, shape,
strides or suboffsets (lying_buffer.c), on the constructor and on
``from_buffer``.  Every outcome also reports the exporter's getbuffer and
releasebuffer counts once the array is gone: a refused buffer is released
at once, an accepted one when the array dies (``exports``/``releases``).
"""

from __future__ import annotations

import gc

from cases import Case


def liar(path="init", **fields):
    def body():
        import lying_buffer

        from dlpackarray import DLPackArray

        x = lying_buffer.Liar(**fields)
        try:
            if path == "init":
                a = DLPackArray(x)
            else:
                a = DLPackArray.from_buffer(x, "uint8")
        except Exception as exc:
            gc.collect()
            raise type(exc)(f"{exc} [exports={x.exports} releases={x.releases}]") from None
        shape, strides, readonly = list(a.shape), list(a.strides), a.readonly
        del a
        gc.collect()
        return {
            "shape": shape,
            "strides": strides,
            "readonly": readonly,
            "exports": x.exports,
            "releases": x.releases,
        }

    return body


def released(shape, strides, readonly=False):
    return {"shape": shape, "strides": strides, "readonly": readonly, "exports": 1, "releases": 1}


def cases():
    out = []

    def add(cid, body, exc=None, match=None, value=None, defect=None):
        out.append(Case(f"buffer/{cid}", body, exc, match, value=value, defect=defect))

    once = r" \[exports=1 releases=1\]$"
    # from_buffer reads the exporter as plain bytes (like numpy.frombuffer):
    # lies about format, itemsize, ndim, shape, strides and suboffsets do not
    # matter there, only buf and len.
    for label, fields in enumerate(
        (
            {"itemsize": 0},
            {"itemsize": -1},
            {"format": b"zz", "itemsize": 4},
            {"format": b">i", "itemsize": 4},
            {"format": None},
            {"ndim": -1},
            {"ndim": 65},
            {"ndim": 2, "shape": None},
            {"ndim": 1, "shape": (-5,)},
            {"ndim": 1, "shape": (1000,)},
            {"ndim": 1, "shape": (8,), "strides": (2**62,)},
            {"ndim": 1, "shape": (64,), "suboffsets": (0,)},
        )
    ):
        add(
            f"from_buffer/ignored/{label}", liar("from_buffer", **fields), value=released([64], [1])
        )
    add(
        "from_buffer/null_buf",
        liar("from_buffer", null_buf=True),
        ValueError,
        r"data pointer is NULL but the array has 64 element\(s\)" + once,
    )
    add(
        "from_buffer/getbuffer_raises",
        liar("from_buffer", fail=True),
        BufferError,
        r"Liar refuses to export \[exports=0 releases=0\]$",
    )
    for path in ("init",):
        # item size against the format
        for itemsize in (0, -1, 2, 4, 2**40):
            add(
                f"{path}/itemsize/{itemsize}",
                liar(path, itemsize=itemsize),
                BufferError,
                rf"buffer format 'B' implies an item size of 1 bytes but the exporter reports "
                rf"{itemsize}" + once,
            )
        # formats with no DLPack scalar
        for fmt in (b"zz", b"", b"T{i:a:}", b"P", b"O", b"2i", b"x", b"i:name:", b"&i", b"(2)i"):
            add(
                f"{path}/format/{fmt!r}",
                liar(path, format=fmt, itemsize=4, len=64),
                BufferError,
                rf"buffer format '{_re(fmt)}' is not a single native scalar type representable "
                r"in DLPack \(structured, padded, pointer, long double and multi-item"
                + ".*"
                + once,
            )
        for fmt in (b">i", b"!i", b">f"):
            add(
                f"{path}/format_order/{fmt!r}",
                liar(path, format=fmt, itemsize=4, len=64),
                BufferError,
                "has big-endian byte order; DLPack data must be in native byte order" + once,
            )
        # ndim outside 0..64
        for ndim in (-1, -(2**31), 65, 2**31 - 1):
            add(
                f"{path}/ndim/{ndim}",
                liar(path, ndim=ndim, shape=(64,)),
                BufferError,
                rf"exports a buffer with ndim {ndim}; at most 64 dimensions are supported" + once,
            )
        # negative shapes and overflowing strides
        for shape, i, v in (((-5,), 0, -5), ((4, -1), 1, -1), ((-(2**63),), 0, -(2**63))):
            add(
                f"{path}/negative_shape/{shape}",
                liar(path, ndim=len(shape), shape=shape, strides=(1,) * len(shape)),
                ValueError,
                rf"shape\[{i}\] = {v} is negative" + once,
            )
        for strides in ((2**62,), (-(2**62),), (2**63 - 1,)):
            add(
                f"{path}/stride_overflow/{strides}",
                liar(path, ndim=1, shape=(8,), strides=strides),
                OverflowError,
                "overflows int64" + once,
            )
        add(
            f"{path}/count_overflow",
            liar(path, ndim=2, shape=(2**40, 2**40), strides=(0, 0)),
            OverflowError,
            "number of elements overflows int64" + once,
        )
        # suboffsets: indirect buffers are refused
        for sub in ((0,), (8,), (-1, 0), (0, -1)):
            add(
                f"{path}/suboffsets/{sub}",
                liar(path, ndim=len(sub), shape=(8,) * len(sub), suboffsets=sub),
                BufferError,
                r"indirect \(PIL-style\) buffer with suboffsets; DLPack can only describe "
                r"strided memory" + once,
            )
        # Negative suboffsets mean "no indirection" (PEP 3118): a plain buffer.
        add(
            f"{path}/suboffsets_negative",
            liar(path, ndim=2, shape=(8, 8), suboffsets=(-1, -1)),
            value=released([8, 8], [8, 1]),
        )
        # NULL buf with elements; fine when empty
        add(
            f"{path}/null_buf",
            liar(path, null_buf=True),
            ValueError,
            r"data pointer is NULL but the array has 64 element\(s\)" + once,
        )
        # getbuffer raising: nothing to release
        add(
            f"{path}/getbuffer_raises",
            liar(path, fail=True),
            BufferError,
            r"Liar refuses to export \[exports=0 releases=0\]$",
        )
        # shape reaching past len
        for shape in ((65,), (1000,), (8, 9)):
            add(
                f"{path}/past_len/{shape}",
                liar(path, ndim=len(shape), shape=shape),
                ValueError,
                "outside the source buffer of 64 bytes" + once,
            )
        # ndim > 1 with a NULL shape: must be refused, not dereferenced
        for ndim in (2, 3, 64):
            add(
                f"{path}/null_shape/{ndim}",
                liar(path, ndim=ndim, shape=None),
                BufferError,
                f"exports a {ndim}-dimensional buffer with a NULL shape" + once,
            )

    # ndim is range-checked before the suboffsets loop walks b.suboffsets[0..ndim):
    # with ndim 2**31-1 that loop would read past the exporter's 64 entries.
    add(
        "init/ndim_checked_before_suboffsets",
        liar(ndim=2**31 - 1, shape=(64,), suboffsets=(-1,) * 64),
        BufferError,
        "exports a buffer with ndim 2147483647; at most 64 dimensions are supported" + once,
    )

    # Accepted lies that cannot be detected or are tolerated on purpose:
    # a NULL format means unsigned bytes (PEP 3118), a NULL shape with ndim 1
    # means len bytes, a NULL strides pointer means C-contiguous.
    add("init/null_format", liar(format=None), value=released([64], [1]))
    add("init/null_shape_1d", liar(ndim=1, shape=None), value=released([64], [1]))
    add("init/null_strides", liar(ndim=2, shape=(8, 8)), value=released([8, 8], [8, 1]))
    add("init/ndim0", liar(ndim=0, shape=None, len=1), value=released([], []))
    add("init/readonly", liar(readonly=True), value=released([64], [1], readonly=True))
    add(
        "init/null_buf_empty",
        liar(null_buf=True, len=0, shape=(0,)),
        value=released([0], [1]),
    )
    return out


def _re(fmt: bytes) -> str:
    import re

    return re.escape(fmt.decode())

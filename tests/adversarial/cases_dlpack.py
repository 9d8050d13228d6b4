"""DLPack capsules with malformed fields, on three import paths: the raw
capsule, an object whose ``__dlpack__`` returns it, and ``from_dlpack``.

Every outcome also pins the deleter: a refused import after consumption
releases the tensor exactly once, a wrong capsule name is never consumed,
and an accepted tensor is released once when the array is dropped.  The
count is appended to the message or the result (``deleter_calls``).
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
from cases import Case, layout

_SRC = np.arange(24, dtype=np.float32)

# Capsule names outlive every capsule: module-level buffers.
_NAMES = {
    n: ctypes.create_string_buffer(n)
    for n in (
        b"dltensor_versioned_",
        b"DLTENSOR",
        b"used_dltensor",
        b"used_dltensor_versioned",
        b"",
        b"dltensor\xff",
        b"tensor",
        b"dltensor ",
    )
}

PATHS = ("capsule", "producer", "from_dlpack")


class _Exporter:
    def __init__(self, capsule, device):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self):
        return self._device


def consume(path: str, versioned: bool = True, name: bytes | None = None, **fields):
    """A body that imports a forged tensor on ``path`` and reports the deleter."""

    def body():
        import dlpack_ctypes as dc

        import dlpackarray

        producer = dc.Producer(_SRC, versioned=versioned, **fields)
        capsule = producer.capsule(_NAMES[name] if name is not None else None)
        device = fields.get("device", (dc.KDL_CPU, 0))
        try:
            if path == "capsule":
                a = dlpackarray.DLPackArray(capsule)
            elif path == "producer":
                a = dlpackarray.DLPackArray(_Exporter(capsule, device))
            else:
                a = dlpackarray.from_dlpack(_Exporter(capsule, device))
        except Exception as exc:  # the type stays, the message gains the count
            del capsule
            gc.collect()
            raise type(exc)(f"{exc} [deleter_calls={producer.deleter_calls}]") from None
        result = layout(a)
        del a, capsule
        gc.collect()
        return {"layout": result, "deleter_calls": producer.deleter_calls}

    return body


def ok(shape, strides, dtype="float32", device=(1, 0), readonly=False, deleter_calls=1):
    return {
        "layout": {
            "shape": list(shape),
            "strides": list(strides),
            "dtype": dtype,
            "device": list(device),
            "readonly": readonly,
        },
        "deleter_calls": deleter_calls,
    }


def _both(versions=(True, False)):
    for path in PATHS:
        for versioned in versions:
            yield path, versioned, ("v" if versioned else "legacy")


def _c_strides(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return list(reversed(out))


def cases():
    out = []
    add = out.append

    # Wrong capsule names: never consumed (TypeError, no deleter call).
    for path in PATHS:
        for name in _NAMES:
            if name.startswith(b"used_"):
                exc, text = (
                    ValueError,
                    r"has already been consumed; a capsule can be consumed only once",
                )
            else:
                exc, text = TypeError, r"is not a DLPack tensor capsule \(expected 'dltensor'"
            add(
                Case(
                    f"dlpack/name/{path}/{name!r}",
                    consume(path, name=name),
                    exc,
                    text + r".*\[deleter_calls=0\]$",
                )
            )

    # ndim outside 0..64.
    for path, versioned, tag in _both():
        for ndim in (-(2**31), -65, -1, 65, 128, 2**31 - 1):
            add(
                Case(
                    f"dlpack/ndim/{path}/{tag}/{ndim}",
                    consume(path, versioned, shape=(24,), ndim=ndim),
                    BufferError,
                    rf"has ndim {ndim}, outside the supported range 0\.\.64 \[deleter_calls=1\]$",
                )
            )

    # NULL shape with ndim > 0.
    for path, versioned, tag in _both():
        for ndim in (1, 2, 3, 64):
            add(
                Case(
                    f"dlpack/null_shape/{path}/{tag}/{ndim}",
                    consume(path, versioned, shape=(1,) * ndim, null_shape=True),
                    BufferError,
                    rf"ndim {ndim} but a NULL shape pointer \[deleter_calls=1\]$",
                )
            )

    # NULL strides: row-major at every version (tolerated on purpose, as NumPy).
    for path in PATHS:
        for version in ((1, 0), (1, 1), (1, 2), (1, 3), None):
            for shape in ((24,), (4, 6), (2, 3, 4), (0,)):
                versioned = version is not None
                kw = {"version": version} if versioned else {}
                add(
                    Case(
                        f"dlpack/null_strides/{path}/{version}/{shape}",
                        consume(path, versioned, shape=shape, null_strides=True, **kw),
                        value=ok(shape, _c_strides(shape)),
                    )
                )

    # Negative extents.
    for path, versioned, tag in _both():
        for shape, index, bad in (
            ((-1,), 0, -1),
            ((2, -1), 1, -1),
            ((-(2**63),), 0, -(2**63)),
            ((3, -3, 2), 1, -3),
            ((0, -1), 1, -1),
        ):
            add(
                Case(
                    f"dlpack/negative_shape/{path}/{tag}/{shape}",
                    consume(path, versioned, shape=shape, strides=(0,) * len(shape)),
                    ValueError,
                    rf"shape\[{index}\] = {bad} is negative \[deleter_calls=1\]$",
                )
            )

    # Element counts beyond int64 (broadcast strides, so only the count is wrong).
    for path, versioned, tag in _both():
        for shape in ((2**32, 2**32), (2**62, 2, 2), (2**63 - 1, 2), (3,) * 40):
            add(
                Case(
                    f"dlpack/count_overflow/{path}/{tag}/{len(shape)}d/{shape[0]}",
                    consume(path, versioned, shape=shape, strides=(0,) * len(shape)),
                    OverflowError,
                    r"number of elements overflows int64 \[deleter_calls=1\]$",
                )
            )
        # A legal broadcast tensor of 2**61 float32 (its dense size is 2**63 bytes).
        add(
            Case(
                f"dlpack/broadcast_legal/{path}/{tag}",
                consume(path, versioned, shape=(2**61,), strides=(0,)),
                value=ok((2**61,), (0,)),
            )
        )

    # Strides whose byte value or extent overflows int64.
    for path, versioned, tag in _both():
        for shape, strides, text in (
            ((2, 3), (2**62, 2**62), "stride in bytes overflows int64"),
            ((2,), (2**61,), "stride in bytes overflows int64"),
            ((2,), (-(2**62),), "stride in bytes overflows int64"),
            ((2,), (2**63 - 1,), "stride in bytes overflows int64"),
            ((2,), (-(2**63),), "stride in bytes overflows int64"),
            ((2**31, 2**31), (2**31, 1), "extent overflows int64"),
            ((3, 2**60), (2**60, 1), "extent overflows int64"),
        ):
            add(
                Case(
                    f"dlpack/stride_overflow/{path}/{tag}/{shape}/{strides}",
                    consume(path, versioned, shape=shape, strides=strides),
                    OverflowError,
                    rf"{text} \[deleter_calls=1\]$",
                )
            )

    # byte_offset beyond int64; small unaligned offsets are tolerated (as NumPy).
    for path, versioned, tag in _both():
        for offset in (2**63, 2**64 - 1, 2**63 + 4):
            add(
                Case(
                    f"dlpack/byte_offset/{path}/{tag}/{offset}",
                    consume(path, versioned, shape=(4,), strides=(1,), byte_offset=offset),
                    OverflowError,
                    rf"byte_offset {offset} overflows int64 \[deleter_calls=1\]$",
                )
            )
        for offset in (1, 2, 3):
            add(
                Case(
                    f"dlpack/byte_offset_unaligned/{path}/{tag}/{offset}",
                    consume(path, versioned, shape=(4,), strides=(1,), byte_offset=offset),
                    value=ok((4,), (1,)),
                )
            )

    # Versions: only major 1 is understood; any minor is.
    for path in PATHS:
        for version in ((0, 0), (0, 9), (2, 0), (2, 3), (255, 1), (2**32 - 1, 0)):
            add(
                Case(
                    f"dlpack/version/{path}/{version}",
                    consume(path, True, shape=(4,), strides=(1,), version=version),
                    BufferError,
                    rf"has version {version[0]}\.{version[1]}; this consumer understands "
                    r"major version 1 only \[deleter_calls=1\]$",
                )
            )
        for version in ((1, 4), (1, 99), (1, 2**32 - 1)):
            add(
                Case(
                    f"dlpack/minor_version/{path}/{version}",
                    consume(path, True, shape=(4,), strides=(1,), version=version),
                    value=ok((4,), (1,)),
                )
            )

    # Vector dtypes (lanes != 1).
    for path, versioned, tag in _both():
        for lanes in (0, 2, 4, 65535):
            add(
                Case(
                    f"dlpack/lanes/{path}/{tag}/{lanes}",
                    consume(path, versioned, shape=(4,), strides=(1,), dtype=(2, 32, lanes)),
                    BufferError,
                    rf"lanes={lanes}\) has lanes != 1; vector dtypes cannot be represented "
                    r"element-wise" + SUPPORTED_LIST + r" \[deleter_calls=1\]$",
                )
            )

    # Every code x bits combination (lanes 1) on the raw capsule path.
    for code in list(range(18)) + [18, 31, 100, 255]:
        for bits in (0, 1, 4, 6, 8, 16, 32, 64, 128, 255):
            exc, match, value = dtype_expectation(code, bits)
            add(
                Case(
                    f"dlpack/dtype/{code}/{bits}",
                    consume("capsule", True, shape=(2,), strides=(1,), dtype=(code, bits, 1)),
                    exc,
                    match,
                    value=value,
                )
            )

    # NULL data: refused with elements, fine without.
    for path, versioned, tag in _both():
        add(
            Case(
                f"dlpack/null_data/{path}/{tag}",
                consume(path, versioned, shape=(6,), strides=(1,), data=0),
                ValueError,
                r"data pointer is NULL but the array has 6 element\(s\) \[deleter_calls=1\]$",
            )
        )
        add(
            Case(
                f"dlpack/null_data_empty/{path}/{tag}",
                consume(path, versioned, shape=(0, 3), strides=(3, 1), data=0),
                value=ok((0, 3), (3, 1)),
            )
        )

    # Devices: unknown types and ids are carried, not interpreted (copies and
    # host exports refuse them later).
    for path in ("capsule",):
        for versioned in (True, False):
            tag = "v" if versioned else "legacy"
            for device in (
                (2, 0),
                (19, 0),
                (99, 3),
                (2**31 - 1, 0),
                (1, 7),
                (1, 2**31 - 1),
                # Negative values: device_tuple once shifted them (UBSan).
                (-1, 0),
                (-5, 2),
                (-(2**31), 0),
                (1, -1),
                (2, -(2**31)),
            ):
                add(
                    Case(
                        f"dlpack/device/{path}/{tag}/{device}",
                        consume(path, versioned, shape=(4,), strides=(1,), device=device),
                        value=ok((4,), (1,), device=device),
                    )
                )

    # Flags: READ_ONLY is honoured; IS_COPIED and unknown bits are ignored.
    for path in PATHS:
        for flags, readonly in ((1, True), (2, False), (1 << 5, False), (2**63, False), (3, True)):
            add(
                Case(
                    f"dlpack/flags/{path}/{flags}",
                    consume(path, True, shape=(4,), strides=(1,), flags=flags),
                    value=ok((4,), (1,), readonly=readonly),
                )
            )

    # NULL deleter: allowed by the spec; nothing to call.
    for path, versioned, tag in _both():
        add(
            Case(
                f"dlpack/null_deleter/{path}/{tag}",
                null_deleter(path, versioned),
                value=ok((24,), (1,), deleter_calls=0),
            )
        )
    return out


def null_deleter(path, versioned):
    def body():
        import dlpack_ctypes as dc

        import dlpackarray

        producer = dc.Producer(_SRC, versioned=versioned)
        producer.struct.deleter = None
        capsule = producer.capsule()
        if path == "capsule":
            a = dlpackarray.DLPackArray(capsule)
        elif path == "producer":
            a = dlpackarray.DLPackArray(_Exporter(capsule, (1, 0)))
        else:
            a = dlpackarray.from_dlpack(_Exporter(capsule, (1, 0)))
        result = layout(a)
        del a, capsule
        gc.collect()
        return {"layout": result, "deleter_calls": producer.deleter_calls}

    return body


# DLPack 1.3 data types this package stores: (code, bits) -> name.
_SUPPORTED = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (1, 64): "uint64",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (5, 64): "complex64",
    (5, 128): "complex128",
    (6, 8): "bool",
    (7, 8): "float8_e3m4",
    (8, 8): "float8_e4m3",
    (9, 8): "float8_e4m3b11fnuz",
    (10, 8): "float8_e4m3fn",
    (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2",
    (13, 8): "float8_e5m2fnuz",
    (14, 8): "float8_e8m0fnu",
}


# Every unsupported-dtype message ends by listing what is supported.
SUPPORTED_LIST = (
    r"; supported dtypes are bool, int8, .*float64, bfloat16, complex64, complex128, "
    r"float8_\w+.*\(one lane, whole bytes, native byte order\)"
)


def dtype_expectation(code, bits):
    name = _SUPPORTED.get((code, bits))
    if name is not None:
        return None, None, ok((2,), (1,), dtype=name)
    spelled = rf"DLDataType\(code={code}, bits={bits}, lanes=1\)"
    # Float6/float4 codes and widths that are not whole bytes count as sub-byte.
    if code in (15, 16, 17) or bits % 8:
        text = rf"dtype {spelled} is a sub-byte type; packed sub-byte data is not supported"
    else:
        text = rf"unsupported dtype {spelled}"
    return BufferError, text + SUPPORTED_LIST + r" \[deleter_calls=1\]$", None

"""Rules of NumPy's ``__array_interface__`` (version 3) and ``__array_struct__``."""

from __future__ import annotations

import re

from dlpackarray.testing import _abi, _spec
from dlpackarray.testing.report import Recorder, rule_table

CPU = _spec.numpy_interface("Python side", "python-side")

#: typestr: byte order, kind, item size (datetime units allowed in brackets).
TYPESTR = re.compile(r"^[<>|=][bitufcmMOSUV]\d+(\[\w+\])?$")
TYPEKINDS = b"bitufcmMOSUV"

RULES = rule_table(
    "array_interface",
    [
        (
            "array-interface.dict",
            "must",
            "__array_interface__ is a dict with the keys shape, typestr and version",
            CPU,
        ),
        ("array-interface.version", "must", "version is 3", CPU),
        ("array-interface.shape", "must", "shape is a tuple of non-negative ints", CPU),
        (
            "array-interface.typestr",
            "must",
            "typestr is byte order + type kind + item size (e.g. '<f8')",
            CPU,
        ),
        (
            "array-interface.data",
            "must",
            "data is None, a buffer-exporting object or a (pointer: int, read_only: bool) tuple",
            CPU,
        ),
        (
            "array-interface.strides",
            "must",
            "strides is None or a tuple of ints, one per dimension",
            CPU,
        ),
        (
            "array-interface.descr",
            "should",
            "descr, when present, is a list of (name, typestr[, shape]) tuples",
            CPU,
        ),
        (
            "array-interface.mask",
            "should",
            "mask, when present, is None or a boolean array of the same shape",
            CPU,
        ),
        (
            "array-interface.device-data",
            "must",
            "data the host cannot address is refused (AttributeError or BufferError) or "
            "described as a host copy, never by the device pointer",
            CPU,
        ),
        (
            "array-struct.capsule",
            "must",
            "__array_struct__ is a PyCapsule (NULL name) holding a PyArrayInterface",
            CPU,
        ),
        (
            "array-struct.fields",
            "must",
            "PyArrayInterface has two == 2, nd >= 0, itemsize > 0 and a valid typekind",
            CPU,
        ),
        (
            "array-struct.device-data",
            "must",
            "data the host cannot address is refused (AttributeError or BufferError) or "
            "described as a host copy, never by the device pointer",
            CPU,
        ),
    ],
)


def check(obj, rec: Recorder) -> None:
    """Run the ``__array_interface__`` rules on ``obj``."""
    try:
        ai = obj.__array_interface__
    except Exception as exc:  # noqa: BLE001
        rec.fail("array-interface.dict", f"reading it raised {type(exc).__name__}: {exc}")
        return
    if not rec.check(
        "array-interface.dict",
        isinstance(ai, dict) and {"shape", "typestr", "version"} <= set(ai),
        f"got {type(ai).__name__} {sorted(ai) if isinstance(ai, dict) else ''}",
    ):
        return
    rec.check("array-interface.version", ai["version"] == 3, f"version {ai['version']!r}")
    shape = ai["shape"]
    good_shape = isinstance(shape, tuple) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )
    rec.check("array-interface.shape", good_shape, f"shape {shape!r}")
    typestr = ai["typestr"]
    rec.check(
        "array-interface.typestr",
        isinstance(typestr, str) and bool(TYPESTR.match(typestr)),
        f"typestr {typestr!r}",
    )
    data = ai.get("data")
    if isinstance(data, tuple):
        rec.check(
            "array-interface.data",
            len(data) == 2 and isinstance(data[0], int) and isinstance(data[1], bool),
            f"data {data!r}",
        )
    elif data is not None:
        try:
            memoryview(data).release()
            rec.ok("array-interface.data")
        except TypeError:
            rec.fail("array-interface.data", f"data is a {type(data).__name__} without a buffer")
    else:
        rec.ok("array-interface.data")
    strides = ai.get("strides")
    if strides is not None:
        rec.check(
            "array-interface.strides",
            isinstance(strides, tuple)
            and all(isinstance(s, int) for s in strides)
            and (not good_shape or len(strides) == len(shape)),
            f"strides {strides!r} for shape {shape!r}",
        )
    else:
        rec.ok("array-interface.strides")
    if "descr" in ai:
        descr = ai["descr"]
        rec.check(
            "array-interface.descr",
            isinstance(descr, list)
            and all(isinstance(d, tuple) and len(d) in (2, 3) for d in descr),
            f"descr {descr!r}",
        )
    mask = ai.get("mask")
    if mask is not None:
        try:
            mi = mask.__array_interface__
            good = tuple(mi["shape"]) == tuple(shape) and mi["typestr"][1:] == "b1"
            why = f"mask shape {mi['shape']} typestr {mi['typestr']!r}"
        except Exception as exc:  # noqa: BLE001
            good, why = False, f"mask has no usable __array_interface__ ({exc})"
        rec.check("array-interface.mask", good, why)


def check_struct(obj, rec: Recorder) -> None:
    """Run the ``__array_struct__`` rules on ``obj``."""
    try:
        cap = obj.__array_struct__
    except Exception as exc:  # noqa: BLE001
        rec.fail("array-struct.capsule", f"reading it raised {type(exc).__name__}: {exc}")
        return
    if not rec.check(
        "array-struct.capsule",
        _abi.is_capsule(cap) and _abi.capsule_name(cap) is None,
        f"got {type(cap).__name__}"
        + (f" named {_abi.capsule_name(cap)!r}" if _abi.is_capsule(cap) else ""),
    ):
        return
    s = _abi.PyArrayInterface.from_address(_abi.capsule_pointer(cap))
    rec.check(
        "array-struct.fields",
        s.two == 2 and s.nd >= 0 and s.itemsize > 0 and s.typekind in TYPEKINDS,
        f"two={s.two} nd={s.nd} itemsize={s.itemsize} typekind={s.typekind!r}",
    )

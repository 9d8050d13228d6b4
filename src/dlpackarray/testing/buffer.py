"""Rules of the buffer protocol (PEP 3118) as seen through ``PyObject_GetBuffer``."""

from __future__ import annotations

import math
import struct

from dlpackarray.testing import _abi, _spec
from dlpackarray.testing.report import Recorder, rule_table

OVERVIEW = _spec.buffer_protocol("Buffer structure", "buffer-structure")
FORMATS = _spec.pep3118(
    "Additions to the struct string-syntax", "additions-to-the-struct-string-syntax"
)
REQUESTS = _spec.buffer_protocol("Buffer request types", "buffer-request-types")

RULES = rule_table(
    "buffer",
    [
        (
            "buffer.itemsize-matches-format",
            "must",
            "itemsize equals struct.calcsize(format) for a struct-module format",
            FORMATS,
        ),
        (
            "buffer.shape-matches-len",
            "must",
            "len == product(shape) * itemsize and len(shape) == ndim",
            OVERVIEW,
        ),
        (
            "buffer.strides-length",
            "must",
            "strides has one entry per dimension",
            OVERVIEW,
        ),
        (
            "buffer.readonly-refuses-writable",
            "must",
            "a read-only exporter refuses a PyBUF_WRITABLE request",
            f"{OVERVIEW}; {REQUESTS}",
        ),
        (
            "buffer.agrees-array-interface",
            "must",
            "pointer, shape, strides and read-only state agree with __array_interface__",
            _spec.numpy_interface("Python side", "python-side"),
        ),
        (
            "buffer.device-data",
            "must",
            "data the host cannot address (a device tensor) is refused with BufferError or "
            "exported as a host copy, never as the device pointer",
            f"{OVERVIEW}; {REQUESTS}",
        ),
    ],
)


def check(obj, rec: Recorder) -> None:
    """Run the buffer-protocol rules on ``obj`` (which supports ``memoryview``)."""
    info = _abi.buffer_info(obj)
    if info is None:
        return
    fmt = info["format"]
    try:
        size = struct.calcsize(fmt) if fmt else None
    except struct.error:
        size = None
    if size is not None:
        rec.check(
            "buffer.itemsize-matches-format",
            size == info["itemsize"],
            f"format {fmt!r} is {size} bytes but itemsize = {info['itemsize']}",
        )
    shape = info["shape"]
    if shape is not None:
        rec.check(
            "buffer.shape-matches-len",
            len(shape) == info["ndim"] and math.prod(shape) * info["itemsize"] == info["len"],
            f"shape {shape} x itemsize {info['itemsize']} vs len {info['len']}",
        )
    if info["strides"] is not None:
        rec.check(
            "buffer.strides-length",
            len(info["strides"]) == info["ndim"],
            f"{len(info['strides'])} strides for ndim {info['ndim']}",
        )
    if info["readonly"]:
        try:
            _abi.buffer_info(obj, _abi.PYBUF_RECORDS_RO | _abi.PYBUF_WRITABLE)
        except Exception:  # noqa: BLE001 - refusing is the rule; the type is the exporter's
            rec.ok("buffer.readonly-refuses-writable")
        else:
            rec.fail("buffer.readonly-refuses-writable", "a writable view of read-only data")
    try:
        ai = obj.__array_interface__
    except Exception:  # noqa: BLE001
        return
    data = ai.get("data") if isinstance(ai, dict) else None
    if not (isinstance(data, tuple) and len(data) == 2) or shape is None:
        return
    problems = []
    if tuple(ai.get("shape", ())) != shape:
        problems.append(f"shape {shape} vs {ai.get('shape')}")
    if info["len"] and int(data[0] or 0) != info["ptr"]:
        problems.append(f"pointer 0x{info['ptr']:x} vs 0x{int(data[0] or 0):x}")
    if bool(data[1]) != info["readonly"]:
        problems.append(f"readonly {info['readonly']} vs {bool(data[1])}")
    strides = ai.get("strides")
    if strides is not None and info["strides"] is not None and 0 not in shape:
        for axis, extent in enumerate(shape):
            if extent > 1 and strides[axis] != info["strides"][axis]:
                problems.append(f"axis {axis} stride {info['strides'][axis]} vs {strides[axis]}")
    rec.check("buffer.agrees-array-interface", not problems, "; ".join(problems))

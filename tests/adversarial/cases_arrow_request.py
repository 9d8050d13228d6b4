"""Hostile requested schemas on the four Arrow export methods
(``__arrow_c_array__``, ``__arrow_c_stream__``, ``__arrow_c_device_array__``,
``__arrow_c_device_stream__``): the import corpus's schema mutations
(cases_arrow._schema_cases: released nodes, NULL formats and children,
children counts that disagree with the type, formats that are not UTF-8 or
not a list size, dictionaries, extensions on storage they do not fit) drive
the export's ``requested_schema`` too, plus nesting deeper than any tensor
and a schema that is its own child.

A requested schema is validated exactly as an imported one (one parse):

* what the import refuses as malformed (ValueError, OverflowError) the export
  refuses with the same exception and message, after "requested_schema is not
  a valid ArrowSchema (<Arrow C data interface URL>): ";
* what the import refuses as a type it does not read (TypeError) is answered
  with the export's own type, as if no schema had been requested (the
  PyCapsule interface makes requests best effort), except a struct, which is
  another number of columns (ValueError);
* what the import reads is honoured: nested fixed-size lists without the
  tensor extension, a bit-packed boolean leaf, the tensor extension (which
  lets permuted cells go out zero-copy, with their permutation).

The requested schema belongs to the consumer: the export never releases it.
"""

from __future__ import annotations

import ctypes
import re

from cases import Case
from cases_arrow import BASES, _schema_cases

METHODS = (
    "__arrow_c_array__",
    "__arrow_c_stream__",
    "__arrow_c_device_array__",
    "__arrow_c_device_stream__",
)
_SPEC = "https://arrow.apache.org/docs/format/CDataInterface.html#the-arrowschema-structure"
_PREFIX = f"requested_schema is not a valid ArrowSchema ({_SPEC}): "
_STRUCT = (
    "the requested schema is a struct (a record batch or table); a DLPackArray exports one column"
)

_TENSOR_EXT = "arrow.fixed_shape_tensor"
_BOOL8_EXT = "arrow.bool8"

# What each base's tensor exports as (levels outermost first: format,
# extension name, extension metadata), with no request and with its own
# (unmutated) schema requested.  The bases mirror the import's: the tensor
# base is a dense array whose cell dimensions are permuted.
_DEFAULT = {
    "f32": [["f", None, None]],
    "i8": [["c", None, None]],
    "u64": [["L", None, None]],
    "f16": [["e", None, None]],
    "bits": [["c", _BOOL8_EXT, ""]],
    "fsl": [["+w:3", _TENSOR_EXT, '{"shape":[3]}'], ["i", None, None]],
    "nested": [["+w:6", _TENSOR_EXT, '{"shape":[2,3]}'], ["g", None, None]],
    # Logical order, copied: consumers that ignore the permutation agree.
    "tensor": [["+w:6", _TENSOR_EXT, '{"shape":[3,2]}'], ["f", None, None]],
    "bool8": [["c", _BOOL8_EXT, ""]],
    "bool8_fsl": [["+w:2", _TENSOR_EXT, '{"shape":[2]}'], ["c", _BOOL8_EXT, ""]],
}
_HONOURED = {
    **_DEFAULT,
    "bits": [["b", None, None]],
    "fsl": [["+w:3", None, None], ["i", None, None]],
    "nested": [["+w:2", None, None], ["+w:3", None, None], ["g", None, None]],
    # The extension was asked for: zero-copy, the permutation says the order.
    "tensor": [
        ["+w:6", _TENSOR_EXT, '{"shape":[2,3],"permutation":[1,0]}'],
        ["f", None, None],
    ],
    "bool8_fsl": [["+w:2", None, None], ["c", _BOOL8_EXT, ""]],
}


def source(base):
    """The tensor an import of ``base`` gives: its shape, element strides and dtype."""
    import numpy as np

    dtype = np.dtype(base.dtype)
    n = int(np.prod(base.shape))
    flat = (np.arange(n) % 2).astype(dtype) if dtype == np.bool_ else np.arange(n).astype(dtype)
    order = sorted(range(len(base.shape)), key=lambda i: -base.strides[i])
    physical = flat.reshape([base.shape[i] for i in order])
    out = physical.transpose(np.argsort(order))
    assert [s // dtype.itemsize for s in out.strides] == list(base.strides)
    return out


def _levels(schema) -> list:
    from arrow_ctypes import metadata_dict

    out = []
    node = schema
    while True:
        meta = metadata_dict(node)
        ext = meta.get(b"ARROW:extension:name")
        params = meta.get(b"ARROW:extension:metadata")
        out.append(
            [
                node.format.decode(),
                None if ext is None else ext.decode(),
                None if params is None else params.decode(),
            ]
        )
        if node.n_children != 1:
            return out
        node = node.children[0].contents


def exported_type(method: str, result) -> list:
    """The levels of the schema an export result carries (a pair's schema
    capsule, or what a stream's get_schema gives, released after reading)."""
    from arrow_ctypes import (
        DEVICE_STREAM_GET_SCHEMA,
        STREAM_GET_SCHEMA,
        ArrowArrayStream,
        ArrowDeviceArrayStream,
        ArrowSchema,
        struct_of,
    )

    if "stream" not in method:
        return _levels(struct_of(result[0], ArrowSchema))
    device = "device" in method
    stream = struct_of(result, ArrowDeviceArrayStream if device else ArrowArrayStream)
    schema = ArrowSchema()
    get = (DEVICE_STREAM_GET_SCHEMA if device else STREAM_GET_SCHEMA)(stream.get_schema)
    assert get(ctypes.byref(stream), ctypes.byref(schema)) == 0
    try:
        return _levels(schema)
    finally:
        ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))(schema.release)(ctypes.byref(schema))


def requesting(base, method: str, build):
    """A body: exports ``base``'s tensor with the schema ``build(forge)``
    gives (an ArrowSchema the forge keeps alive) as requested_schema."""

    def body():
        from arrow_forge import Forge

        from dlpackarray import DLPackArray

        forge = Forge()
        requested = forge.capsule(build(forge), b"arrow_schema")
        d = DLPackArray(source(base))
        try:
            result = getattr(d, method)(requested_schema=requested)
        except Exception as exc:  # the type stays, the message gains the counts
            raise type(exc)(f"{exc} [releases={forge.releases.get('schema', 0)}]") from None
        return {"type": exported_type(method, result), "releases": forge.releases.get("schema", 0)}

    return body


def _expect(base, levels, outcome, stage):
    """The export's outcome for a request the import parses as ``outcome``
    (``stage`` "array": the schema was read, the array refused)."""
    exc, text = outcome
    if exc == "ok" or stage == "array":
        return "ok", _HONOURED[base.name]
    if exc is TypeError:
        if levels[0].get("format") == b"+s":
            return ValueError, _STRUCT
        return "ok", _DEFAULT[base.name]
    return exc, _PREFIX + text


def _case(cid, base, method, build, expected):
    exc, what = expected
    body = requesting(base, method, build)
    if exc == "ok":
        return Case(cid, body, value={"type": what, "releases": 0})
    return Case(cid, body, exc, "^" + re.escape(what) + r".* \[releases=0\]$")


def _cyclic(forge):
    """A fixed-size list whose only child is itself."""
    from arrow_ctypes import ArrowSchema

    s = forge.schema([{"format": b"+w:1"}])
    kids = (ctypes.POINTER(ArrowSchema) * 1)(ctypes.pointer(s))
    forge.keep.append(kids)
    s.n_children = 1
    s.children = kids
    return s


def _extra(base):
    """Shapes no single-field mutation makes: deep and cyclic chains.  63
    list levels are the most a tensor (64 dimensions) has; more are refused
    before the leaf is read, and a cycle is an endless chain."""
    deep = (
        ValueError,
        _PREFIX + "Arrow fixed-size lists nest deeper than the 64 dimensions supported",
    )
    ndim = len(base.shape)
    if ndim >= 2:
        deepest = (
            ValueError,
            f"the requested schema nests 63 fixed-size list level(s) but the tensor has {ndim} "
            f"dimensions ({ndim - 1} level(s) needed)",
        )
    else:
        deepest = ("ok", _DEFAULT[base.name])
    chain = [{"format": b"+w:1"}]
    yield "deep/63", (lambda f: f.schema(chain * 63 + [{"format": b"f"}])), deepest
    yield "deep/64", (lambda f: f.schema(chain * 64 + [{"format": b"f"}])), deep
    yield "deep/200", (lambda f: f.schema(chain * 200 + [{"format": b"f"}])), deep
    yield "cycle", _cyclic, deep


def cases():
    out = []
    for base in BASES:
        mutations = []
        for cid, levels, outcome, stage in _schema_cases(base, "array"):
            mutations.append(
                (
                    f"schema/{cid}",
                    (lambda f, levels=levels: f.schema(levels)),
                    _expect(base, levels, outcome, stage),
                )
            )
        mutations += [(f"shape/{cid}", build, exp) for cid, build, exp in _extra(base)]
        for method in METHODS:
            short = method.strip("_").replace("arrow_c_", "")
            for cid, build, expected in mutations:
                out.append(
                    _case(f"arrow_request/{short}/{base.name}/{cid}", base, method, build, expected)
                )
    return out

"""Malformed Arrow C structs, built field by field with ctypes
(tests/helpers/arrow_forge.py), on the four Arrow import paths:
``__arrow_c_array__``, ``__arrow_c_device_array__`` (CPU),
``__arrow_c_stream__`` and ``__arrow_c_device_stream__``; the misused stream
protocols on the same bases are cases_arrow_protocol.py.

Every field of every level of ten valid base types is forged in turn (NULL,
negative, too large, beyond int64, not UTF-8, inconsistent with the type or
with its parent), in the schema (``_schema_cases``, which
cases_arrow_request.py also drives through the exports' requested schemas)
and in the array (``_array_cases``).  Each outcome is exact: the exception
type and message, or the layout of the valid result, and in both cases the
release calls the importer made (``releases``): a struct it took is released
exactly once, one it refused before taking is never released.  The bases and
the forging helpers here are shared by the other Arrow case modules.
"""

from __future__ import annotations

import ctypes
import json
import re

from cases import Case, layout

_TENSOR = b'{"shape":[2,3],"permutation":[1,0]}'

# A validity bitmap with slots 0 and 2 null, room for 512 slots.
_HOLES = ctypes.create_string_buffer(b"\xfa" + b"\xff" * 63, 64)
_FULL = ctypes.create_string_buffer(b"\xff" * 64, 64)

_LIST = "a fixed-size list array has 1 buffer (validity) and 1 child"
_LEAF = "a primitive or boolean array has 2 buffers (validity, values) and no children"

_KNOWN = (
    (b"+w:", "fixed-size list"),
    (b"+s", "struct"),
    (b"+l", "list"),
    (b"u", "string"),
    (b"z", "binary"),
    (b"w:", "fixed-size binary"),
    (b"d:", "decimal"),
    (b"td", "date"),
    (b"n", "null"),
    (b"b", "boolean"),
)

PATHS = {
    "array": "__arrow_c_array__",
    "device_array": "__arrow_c_device_array__",
    "stream": "__arrow_c_stream__",
    "device_stream": "__arrow_c_device_stream__",
}


def printable(b: bytes, limit: int = 80) -> str:
    """How the importer quotes producer bytes (arrow_meta::printable)."""
    out, i = [], 0
    while i < len(b) and i < limit:
        ch, n = None, 1
        for n in (1, 2, 3, 4):
            try:
                ch = b[i : i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        if ch is not None and len(ch) == 1 and (n > 1 or (b[i] >= 0x20 and b[i] != 0x7F)):
            out.append(ch)
            i += n
        else:
            out.append(f"\\x{b[i]:02x}")
            i += 1
    if i < len(b):
        out.append("...")
    return "".join(out)


def describe(fmt: bytes) -> str:
    for prefix, what in _KNOWN:
        if fmt.startswith(prefix):
            return f"'{printable(fmt)}' ({what})"
    return f"'{printable(fmt)}'"


def field(level: int, name: bytes | None) -> str:
    label = "the top-level Arrow field" if level == 0 else "the Arrow child field"
    if name:
        label += f" '{printable(name)}'"
    if level:
        label += f" at nesting level {level}"
    return label


def alabel(level: int) -> str:
    return "the Arrow array" if level == 0 else f"the Arrow child array at nesting level {level}"


def _ext(name: bytes, params: bytes = b"") -> bytes:
    from arrow_forge import extension

    return extension(name, params)


class Base:
    """A valid type: its schema chain, rows, and the layout it imports as."""

    def __init__(self, name, formats, shape, strides, dtype, readonly=True, meta=None):
        self.name = name
        self.formats = formats
        self.meta = meta or {}
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.readonly = readonly
        self.rows = 3
        self.sizes = [int(f[3:]) for f in formats[:-1]]
        self.tensor = 0 in self.meta and b"fixed_shape_tensor" in self.meta[0]

    def levels(self):
        names = [b"x"] + [b"item"] * (len(self.formats) - 1)
        return [
            {"format": f, "name": n, **({"metadata": self.meta[i]} if i in self.meta else {})}
            for i, (f, n) in enumerate(zip(self.formats, names, strict=True))
        ]

    def window(self, level: int) -> int:
        """Slots the import reads at ``level`` (rows times the list sizes above)."""
        n = self.rows
        for s in self.sizes[:level]:
            n *= s
        return n

    def where(self, level: int) -> str:
        if level == 0:
            return ""
        return " inside arrow.fixed_shape_tensor" if self.tensor else " inside fixed-size lists"

    def ok(self, **changes):
        d = {
            "shape": self.shape,
            "strides": self.strides,
            "dtype": self.dtype,
            "device": [1, 0],
            "readonly": self.readonly,
        }
        d.update(changes)
        return d

    def copied(self, rows: int, readonly: bool = False):
        """The layout of a fresh C-ordered copy of ``rows`` rows."""
        shape = [rows] + self.shape[1:]
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= max(n, 1)
        return self.ok(shape=shape, strides=strides[::-1], readonly=readonly)

    def empty(self):
        return self.copied(0, readonly=True)


BASES = [
    Base("f32", [b"f"], [3], [1], "float32"),
    Base("i8", [b"c"], [3], [1], "int8"),
    Base("u64", [b"L"], [3], [1], "uint64"),
    Base("f16", [b"e"], [3], [1], "float16"),
    Base("bits", [b"b"], [3], [1], "bool", readonly=False),
    Base("fsl", [b"+w:3", b"i"], [3, 3], [3, 1], "int32"),
    Base("nested", [b"+w:2", b"+w:3", b"g"], [3, 2, 3], [6, 3, 1], "float64"),
    Base(
        "tensor",
        [b"+w:6", b"f"],
        [3, 3, 2],
        [6, 1, 3],
        "float32",
        meta={0: _ext(b"arrow.fixed_shape_tensor", _TENSOR)},
    ),
    Base("bool8", [b"c"], [3], [1], "bool", meta={0: _ext(b"arrow.bool8")}),
    Base("bool8_fsl", [b"+w:2", b"c"], [3, 2], [2, 1], "bool", meta={1: _ext(b"arrow.bool8")}),
]
_BY_NAME = {b.name: b for b in BASES}
# The device paths run every mutation of these bases.
DEVICE_BASES = ("f32", "nested", "tensor", "bool8_fsl")


def _counts(forge) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(forge.releases.items()))


def importing(path, build, copy=None):
    """A body: ``build(forge)`` gives the object; the outcome carries the releases."""

    def body():
        from arrow_forge import Forge

        from dlpackarray import DLPackArray

        forge = Forge()
        obj = build(forge)
        try:
            a = DLPackArray(obj, copy=copy)
        except Exception as exc:  # the type stays, the message gains the counts
            # No gc.collect(): what the importer took is released by reference
            # counting alone, as soon as the import fails or the array dies.
            del obj
            raise type(exc)(f"{exc} [releases={_counts(forge)}]") from None
        result = layout(a)
        del a, obj
        return {"layout": result, "releases": _counts(forge)}

    return body


def forged(path, schema_levels, array_levels, rows=3):
    """Builds the pair or the one-chunk stream of ``path``."""
    method = PATHS[path]

    def build(forge):
        from arrow_forge import producer

        if path in ("array", "device_array"):
            result = forge.pair(schema_levels, array_levels, rows, device=path == "device_array")
        elif path == "stream":
            result = forge.stream(schema_levels, [forge.array(array_levels, rows)])
        else:
            chunk = forge.device_array(array_levels, rows)
            result = forge.stream(schema_levels, [chunk], device=True)
        return producer(method, result)

    return build


def releases(path, took_schema=True, took_array=True, array_live=True):
    """The release calls an importer makes: the array (or chunk) once if it
    took it; on streams the stream once and the schema once if get_schema
    gave one; a schema capsule stays with its capsule."""
    out = {}
    if path in ("array", "device_array"):
        out["schema"] = 0
        if array_live:
            out["array"] = 1 if took_array else 0
    else:
        if array_live:
            out["array"] = 1 if took_array else 0
        out["stream"] = 1
        if took_schema:
            out["stream.schema"] = 1
    return ",".join(f"{k}={v}" for k, v in sorted(out.items()))


def _add_ok(out, cid, path, s, a, value, rel=None):
    rel = rel if rel is not None else releases(path)
    out.append(
        Case(cid, importing(path, forged(path, s, a)), value={"layout": value, "releases": rel})
    )


def _add_err(out, cid, path, s, a, exc, text, rel):
    pattern = re.escape(text) + r".* \[releases=" + re.escape(rel) + r"\]$"
    out.append(Case(cid, importing(path, forged(path, s, a)), exc, pattern))


# -- schema mutations -------------------------------------------------------------------------


def _schema_cases(base: Base, path: str):
    """(id, schema levels, outcome) with outcome ("ok", layout) or (exc, text)."""
    method = PATHS[path]
    stream = path in ("stream", "device_stream")
    last = len(base.formats) - 1
    for lv in range(last + 1):
        fmt = base.formats[lv]
        name = b"x" if lv == 0 else b"item"
        label = field(lv, name)
        is_list = lv < last
        bool8_here = lv in base.meta and b"arrow.bool8" in base.meta[lv]

        def mutate(lv=lv, **changes):
            levels = base.levels()
            levels[lv].update(changes)
            return levels

        if lv == 0 and stream:
            yield (
                f"{lv}/release_null",
                mutate(release=False),
                (
                    ValueError,
                    f"get_schema of the Arrow stream from {method} returned 0 (success) but "
                    "no schema: its release callback is NULL",
                ),
                "no_schema",
            )
        else:
            yield (
                f"{lv}/release_null",
                mutate(release=False),
                (
                    ValueError,
                    f"the Arrow schema of {label} has already been released (its release "
                    "callback is NULL)",
                ),
                "schema_not_live" if lv == 0 else None,
            )
        yield (
            f"{lv}/format_null",
            mutate(format=None),
            (ValueError, f"the Arrow schema of {label} has no format string (NULL)"),
            None,
        )
        for bad in (
            b"\xff",
            fmt + b"\xff",
            b"\xc3\x28",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"\xc0\xaf",
            b"\x80",
            b"\xe2\x82",
            b"\xfe" * 100,
        ):
            yield (
                f"{lv}/format_utf8/{bad[:8].hex()}",
                mutate(format=bad),
                (
                    ValueError,
                    f"the Arrow format string of {label} is not valid UTF-8: '{printable(bad)}'",
                ),
                None,
            )
        for bad in (b"\xff", b"ab\xfe", b"\xed\xa0\x80", b"\xc3"):
            yield (
                f"{lv}/name_utf8/{bad.hex()}",
                mutate(name=bad),
                (
                    ValueError,
                    f"the name of {field(lv, bad)} (format {describe(fmt)}) is not valid UTF-8",
                ),
                None,
            )
        for good in (b"", None, "é".encode(), "\U0001f4e6".encode(), b"a b"):
            yield (
                f"{lv}/name_ok/{good.hex() if good is not None else 'null'}",
                mutate(name=good),
                ("ok", base.ok()),
                None,
            )
        # Children counts and pointers.
        want = 1 if is_list else 0
        for n in (-1, -(2**63)):
            yield (
                f"{lv}/n_children/{n}",
                mutate(n_children=n),
                (ValueError, f"{label} has a negative number of children ({n})"),
                None,
            )
        for n in (0, 2, 2**62) if is_list else (1, 2, 2**62):
            yield (
                f"{lv}/n_children/{n}",
                mutate(n_children=n),
                (
                    ValueError,
                    f"{label} (format {describe(fmt)}) has {n} children; its type has {want}",
                ),
                None,
            )
        yield (
            f"{lv}/children_null",
            mutate(children="null", n_children=1),
            (ValueError, f"{label} has 1 children but a NULL children array"),
            None,
        )
        if is_list:
            yield (
                f"{lv}/child_null",
                mutate(child="null"),
                (ValueError, f"child 0 of {label} is NULL"),
                None,
            )
        yield (
            f"{lv}/dictionary",
            mutate(dictionary=True),
            (
                TypeError,
                f"dictionary-encoded Arrow arrays ({label}, format {describe(fmt)} with a "
                "dictionary) cannot be imported",
            ),
            None,
        )
        yield (
            f"{lv}/metadata_negative_count",
            mutate(metadata=b"\xff\xff\xff\xff"),
            (ValueError, "Arrow schema metadata has a negative entry count"),
            None,
        )
        for ext in (b"my.ext", b"my\xffext", b""):
            if lv == 0:
                text = (
                    f"Arrow extension type '{printable(ext)}' (storage {describe(fmt)}) is not "
                    "supported"
                )
            else:
                text = f"Arrow extension type '{printable(ext)}'{base.where(lv)}"
                if not base.tensor:
                    text = f"Arrow extension type '{printable(ext)}' inside a fixed-size list"
                text += " is not supported"
            yield (
                f"{lv}/extension/{ext.hex() or 'empty'}",
                mutate(metadata=_ext(ext)),
                (TypeError, text),
                None,
            )
        # arrow.bool8 on this level: only int8 storage fits (item 4).
        if fmt == b"c" and not is_list:
            outcome = ("ok", base.ok(dtype="bool"))
        else:
            outcome = (
                ValueError,
                f"arrow.bool8 on {label} has storage {describe(fmt)}; the arrow.bool8 "
                "extension type is stored as int8 ('c')",
            )
        yield (f"{lv}/bool8", mutate(metadata=_ext(b"arrow.bool8")), outcome, None)
        # Formats with no DLPack equivalent, at the leaf.
        if not is_list and not bool8_here:
            for bad in (b"u", b"+s", b"z", b"tdD", b"w:4", b"n", b"d:10,2", b"", b"x", b"+l"):
                yield (
                    f"{lv}/format_unsupported/{bad.hex() or 'empty'}",
                    mutate(format=bad),
                    (TypeError, f"Arrow type {describe(bad)}{base.where(lv)} has no DLPack"),
                    None,
                )
        if is_list:
            for bad in (b"+w:", b"+w:-1", b"+w:a", b"+w:2147483648", b"+w:99999999999999999999"):
                yield (
                    f"{lv}/list_size/{bad[3:].decode() or 'empty'}",
                    mutate(format=bad),
                    (ValueError, f"malformed Arrow format '{printable(bad)}'"),
                    None,
                )
            bigger = base.sizes[lv] + 1
            if base.tensor:
                outcome = (
                    ValueError,
                    f"arrow.fixed_shape_tensor shape [2,3] holds 6 elements but its storage "
                    f"lists hold {bigger}",
                )
                rel_stage = None
            else:
                needed = base.window(lv) * bigger
                have = base.window(lv + 1)
                outcome = (
                    ValueError,
                    f"{alabel(lv + 1)} has {have} slots but its parent needs {needed}",
                )
                rel_stage = "array"
            yield (f"{lv}/list_size_bigger", mutate(format=b"+w:%d" % bigger), outcome, rel_stage)


# -- array mutations --------------------------------------------------------------------------


def _array_cases(base: Base, path: str):
    """(id, array levels, outcome, stage) for each field of each array level."""
    method = PATHS[path]
    stream = path in ("stream", "device_stream")
    last = len(base.formats) - 1
    itemsize = {"float32": 4, "int8": 1, "uint64": 8, "float16": 2, "bool": 1}
    for lv in range(last + 1):
        label = alabel(lv)
        is_list = lv < last
        length = base.window(lv)

        def mutate(lv=lv, **changes):
            levels = [{"format": f} for f in base.formats]
            levels[lv].update(changes)
            return levels

        if lv == 0:
            if stream:
                yield (
                    "0/release_null",
                    mutate(release=False),
                    ("ok", base.empty()),
                    "end_of_stream",
                )
            else:
                yield (
                    "0/release_null",
                    mutate(release=False),
                    (ValueError, f"the capsule from {method} has already been consumed"),
                    "not_taken",
                )
        else:
            yield (
                f"{lv}/release_null",
                mutate(release=False),
                (
                    ValueError,
                    f"{label} has already been released (its release callback is NULL)",
                ),
                None,
            )
        for n in (-1, -(2**63)):
            yield (
                f"{lv}/length/{n}",
                mutate(length=n),
                (ValueError, f"{label} has a negative length or offset (length {n}, offset 0)"),
                None,
            )
            yield (
                f"{lv}/offset/{n}",
                mutate(offset=n),
                (
                    ValueError,
                    f"{label} has a negative length or offset (length {length}, offset {n})",
                ),
                None,
            )
        for off in (2**63 - 1, 2**63 - length):
            yield (
                f"{lv}/offset_length_overflow/{off}",
                mutate(offset=off),
                (ValueError, f"{label} has offset {off} + length {length} beyond int64"),
                None,
            )
        leaf_item = itemsize.get(base.dtype, 8) if base.dtype != "int32" else 4
        if base.formats[-1] == b"g":
            leaf_item = 8
        if (is_list or leaf_item > 1) and base.formats[-1] != b"b":
            yield (
                f"{lv}/offset_size_overflow",
                mutate(offset=2**62),
                (OverflowError, "Arrow array size overflows int64"),
                None,
            )
        for nc in (-2, -(2**63), length + 1, 2**63 - 1):
            yield (
                f"{lv}/null_count/{nc}",
                mutate(null_count=nc),
                (
                    ValueError,
                    f"{label} has null_count {nc}; it must be -1 (unknown) or 0 to its length "
                    f"{length}",
                ),
                None,
            )
        what = "the array" if lv == 0 else ("a nested list level" if is_list else "the values")
        yield (
            f"{lv}/null_count_unknown_no_bitmap",
            mutate(null_count=-1),
            ("ok", base.ok()),
            None,
        )
        yield (
            f"{lv}/null_count_without_bitmap",
            mutate(null_count=1),
            (
                ValueError,
                f"cannot import an Arrow array with nulls: {what} has 1 null(s) among "
                f"{length} slot(s)",
            ),
            None,
        )
        for nc in (-1, 2):
            yield (
                f"{lv}/bitmap_nulls/{nc}",
                mutate(null_count=nc, validity=ctypes.addressof(_HOLES)),
                (
                    ValueError,
                    f"cannot import an Arrow array with nulls: {what} has 2 null(s) among "
                    f"{length} slot(s)",
                ),
                None,
            )
        yield (
            f"{lv}/bitmap_full",
            mutate(null_count=-1, validity=ctypes.addressof(_FULL)),
            ("ok", base.ok()),
            None,
        )
        nb, nk, lay = (1, 1, _LIST) if is_list else (2, 0, _LEAF)
        for n in dict.fromkeys((0, -1, nb + 1, 2**62, 2 if is_list else 1)):
            yield (
                f"{lv}/n_buffers/{n}",
                mutate(n_buffers=n),
                (ValueError, f"{label} has {n} buffer(s) and {nk} child(ren); {lay}"),
                None,
            )
        for n in (0, 2, -1, 2**62) if is_list else (1, -1, 2**62):
            yield (
                f"{lv}/n_children/{n}",
                mutate(n_children=n),
                (ValueError, f"{label} has {nb} buffer(s) and {n} child(ren); {lay}"),
                None,
            )
        yield (
            f"{lv}/buffers_null",
            mutate(buffers="null"),
            (ValueError, f"{label} has a NULL buffers array"),
            None,
        )
        if is_list:
            yield (
                f"{lv}/children_null",
                mutate(children="null"),
                (ValueError, f"{label} has a NULL children array"),
                None,
            )
            yield (
                f"{lv}/child_null",
                mutate(child="null"),
                (ValueError, f"child 0 of {label} is NULL"),
                None,
            )
            need = base.window(lv + 1)
            yield (
                f"{lv}/child_short",
                mutate(lv=lv + 1, length=need - 1),
                (ValueError, f"{alabel(lv + 1)} has {need - 1} slots but its parent needs {need}"),
                None,
            )
        else:
            yield (
                f"{lv}/values_null",
                mutate(buffers=[None, None]),
                (
                    ValueError,
                    f"the Arrow array has {length} values but a NULL data buffer",
                ),
                None,
            )
        yield (
            f"{lv}/dictionary",
            mutate(dictionary=True),
            (ValueError, f"{label} has a dictionary, but its schema is not dictionary-encoded"),
            None,
        )
        for off in (1, 5):
            yield (f"{lv}/offset_ok/{off}", mutate(offset=off), ("ok", base.ok()), None)


def _struct_cases():
    out = []
    for base in BASES:
        paths = ["array", "stream"]
        if base.name in DEVICE_BASES:
            paths += ["device_array", "device_stream"]
        for path in paths:
            stream = path in ("stream", "device_stream")
            for cid, levels, outcome, stage in _schema_cases(base, path):
                array_levels = [{"format": f} for f in base.formats]
                full = f"arrow/{path}/{base.name}/schema/{cid}"
                if stage == "no_schema":
                    rel = releases(path, took_schema=False, took_array=False)
                elif stage == "schema_not_live":
                    rel = releases(path).replace(",schema=0", "")
                elif stage == "array" or outcome[0] == "ok":
                    rel = releases(path)
                else:
                    # Refused at the schema: a pair's array was moved out
                    # first (and released); a stream's chunk never fetched.
                    rel = releases(path, took_array=not stream)
                if outcome[0] == "ok":
                    _add_ok(out, full, path, levels, array_levels, outcome[1], rel)
                else:
                    _add_err(out, full, path, levels, array_levels, outcome[0], outcome[1], rel)
            for cid, levels, outcome, stage in _array_cases(base, path):
                full = f"arrow/{path}/{base.name}/array/{cid}"
                if stage == "not_taken":
                    rel = releases(path, took_array=False, array_live=False)
                elif stage == "end_of_stream":
                    rel = releases(path, array_live=False)
                else:
                    rel = releases(path)
                if outcome[0] == "ok":
                    _add_ok(out, full, path, base.levels(), levels, outcome[1], rel)
                else:
                    _add_err(out, full, path, base.levels(), levels, outcome[0], outcome[1], rel)
    return out


def cases():
    out = _struct_cases()
    # Every expected value must be JSON (what the worker sends back).
    for case in out:
        json.dumps(case.value)
    return out

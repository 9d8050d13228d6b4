"""Malformed Arrow C structs and misused stream protocols: each is refused with a
clear exception naming the problem, nothing is read through a NULL pointer or
past a range, and what the importer took is released exactly once.  Structs are
forged with ctypes (tests/helpers/arrow_forge.py);
inputs that could crash the interpreter run in a subprocess.  The adversarial
corpus (tests/adversarial/cases_arrow.py) and the libFuzzer harness
(fuzz/arrow_fuzz.cpp) cover the same ground field by field.
"""

from __future__ import annotations

import json
import os
import re
import textwrap

import numpy as np
import pytest
from arrow_forge import Forge, extension, producer
from conftest import require, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray

HELPERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers")
BOOL8 = extension(b"arrow.bool8")


# Forges whose structs an imported array may still hold: their buffers and
# release callbacks must outlive it, as a producer's memory does.
_KEEP: list = []


def _import(schema_levels, array_levels, rows=3, method="__arrow_c_array__"):
    f = Forge()
    _KEEP.append(f)
    pair = f.pair(schema_levels, array_levels, rows, device="device" in method)
    return DLPackArray(producer(method, pair))


# -- item 4: extension types on storage they do not fit ----------------------------------------


BOOL8_MISFITS = [
    ("fixed_size_list_of_int8", [b"+w:2", b"c"], 0),
    ("uint8", [b"C"], 0),
    ("int16", [b"s"], 0),
    ("int32", [b"i"], 0),
    ("int64", [b"l"], 0),
    ("float32", [b"f"], 0),
    ("bit_packed_bool", [b"b"], 0),
    ("inside_a_list_on_int32", [b"+w:2", b"i"], 1),
]


@pytest.mark.parametrize(
    ("formats", "level"), [m[1:] for m in BOOL8_MISFITS], ids=[m[0] for m in BOOL8_MISFITS]
)
@pytest.mark.parametrize("method", ["__arrow_c_array__", "__arrow_c_device_array__"])
def test_bool8_on_storage_it_does_not_fit_is_refused(formats, level, method):
    schema = [{"format": f} for f in formats]
    schema[level]["metadata"] = BOOL8
    with pytest.raises(
        ValueError,
        match=r"arrow\.bool8 on the .* has storage '.*?'.*; the arrow\.bool8 "
        r"extension type is stored as int8 \('c'\)",
    ):
        _import(schema, [{"format": f} for f in formats], method=method)


@pytest.mark.parametrize(("formats", "shape"), [([b"c"], (3,)), ([b"+w:2", b"c"], (3, 2))])
def test_bool8_on_int8_is_still_zero_copy_bool(formats, shape):
    schema = [{"format": f} for f in formats]
    schema[-1]["metadata"] = BOOL8
    d = _import(schema, [{"format": f} for f in formats])
    assert d.shape == shape and d.dtype.name == "bool" and d.readonly


def test_pyarrow_refuses_the_same_misfit_bool8():
    """The rule is pyarrow's: it refuses arrow.bool8 on any storage but int8."""
    pa = require("pyarrow", "these tests exchange data with it")
    for _, formats, level in BOOL8_MISFITS:
        schema = [{"format": f} for f in formats]
        schema[level]["metadata"] = BOOL8
        f = Forge()
        capsule = f.capsule(f.schema(schema), b"arrow_schema")
        with pytest.raises(pa.ArrowInvalid):  # a ValueError subclass
            pa.Field._import_from_c_capsule(capsule)
    f = Forge()
    ok = pa.Field._import_from_c_capsule(
        f.capsule(f.schema([{"format": b"c", "metadata": BOOL8}]), b"arrow_schema")
    )
    assert ok.type == pa.bool8()


# -- item 6: strings that are not UTF-8 --------------------------------------------------------


@pytest.mark.parametrize("bad", [b"\xff", b"f\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf"])
@pytest.mark.parametrize("level", [0, 1])
def test_non_utf8_format_is_a_value_error_naming_field_and_format(bad, level):
    schema = [{"format": b"+w:2", "name": b"col"}, {"format": b"i", "name": b"item"}]
    schema[level]["format"] = bad
    with pytest.raises(ValueError) as info:
        _import(schema, [{"format": b"+w:2"}, {"format": b"i"}])
    message = str(info.value)
    assert "is not valid UTF-8" in message
    assert ("'col'" if level == 0 else "'item' at nesting level 1") in message
    escaped = "".join(f"\\x{c:02x}" if c >= 0x80 else chr(c) for c in bad)
    assert f"'{escaped}'" in message, message


@pytest.mark.parametrize("method", ["__arrow_c_array__", "__arrow_c_stream__"])
def test_non_utf8_name_is_a_value_error(method):
    f = Forge()
    schema = [{"format": b"f", "name": b"bad\xffname"}]
    if method == "__arrow_c_stream__":
        obj = producer(method, f.stream(schema, [f.array([{"format": b"f"}])]))
    else:
        obj = producer(method, f.pair(schema, [{"format": b"f"}]))
    with pytest.raises(
        ValueError,
        match=r"the name of the top-level Arrow field 'bad\\xffname' "
        r"\(format 'f'\) is not valid UTF-8",
    ):
        DLPackArray(obj)


def test_non_utf8_extension_name_is_quoted_in_the_type_error():
    with pytest.raises(TypeError, match=r"Arrow extension type 'my\\xfeext' \(storage 'f'\)"):
        _import([{"format": b"f", "metadata": extension(b"my\xfeext")}], [{"format": b"f"}])


def test_non_utf8_tensor_metadata_is_quoted_in_the_value_error():
    meta = extension(b"arrow.fixed_shape_tensor", b'{"shape":[2,\xff]}')
    with pytest.raises(
        ValueError,
        match=r"malformed arrow\.fixed_shape_tensor metadata "
        r"'\{\"shape\":\[2,\\xff\]\}'",
    ):
        _import(
            [{"format": b"+w:2", "metadata": meta}, {"format": b"f"}],
            [{"format": b"+w:2"}, {"format": b"f"}],
        )


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.binary(min_size=0, max_size=12).filter(lambda b: b"\x00" not in b),
    name=st.one_of(st.none(), st.binary(max_size=12).filter(lambda b: b"\x00" not in b)),
    level=st.integers(0, 1),
)
def test_any_format_and_name_bytes_give_a_clear_error_or_an_array(fmt, name, level):
    """Whatever bytes a producer puts in format and name: a ValueError or
    TypeError whose message is text, or an import, never a decoding error."""
    schema = [{"format": b"+w:2"}, {"format": b"i"}]
    schema[level]["format"] = fmt
    schema[level]["name"] = name
    try:
        d = _import(schema, [{"format": b"+w:2"}, {"format": b"i"}])
    except (ValueError, TypeError) as exc:
        message = str(exc)
        message.encode("utf-8")  # a str Python could build, no surrogates
        try:
            fmt.decode("utf-8")
        except UnicodeDecodeError:
            assert "format string" in message and "not valid UTF-8" in message
    else:
        assert d.shape[0] == 3


# -- item 12: malformed structs that crashed the import ----------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {here!r})
    from arrow_forge import Forge, producer, extension
    from dlpackarray import DLPackArray
    f = Forge()
    obj = {build}
    try:
        DLPackArray(obj)
        out = ["ok", ""]
    except Exception as exc:
        out = [type(exc).__name__, str(exc)]
    del obj
    print(json.dumps(out + [f.releases]))
    """
)

_FSL = '[{"format": b"+w:2"}, {"format": b"i"}]'
_TENSOR_NULL_CHILD = (
    '[{"format": b"+w:2", "child": "null", '
    '"metadata": extension(b"arrow.fixed_shape_tensor", b\'{"shape":[2]}\')}, {"format": b"f"}]'
)


def _pair(schema, array, method="__arrow_c_array__"):
    device = "device" in method
    return f"producer({method!r}, f.pair({schema}, {array}, device={device}))"


def _fsl_array(**top):
    return f'[{{"format": b"+w:2", **{top!r}}}, {{"format": b"i"}}]'


def _stream(device, missing):
    method = "__arrow_c_device_stream__" if device else "__arrow_c_stream__"
    chunk = "f.device_array" if device else "f.array"
    return (
        f"producer({method!r}, f.stream([{{'format': b'f'}}], [{chunk}([{{'format': b'f'}}])], "
        f"device={device}, missing={missing!r}))"
    )


CRASHERS = {
    "null_child_schema_in_list": (
        _pair('[{"format": b"+w:2", "child": "null"}, {"format": b"i"}]', _FSL),
        "ValueError",
        r"child 0 of the top-level Arrow field 'x' is NULL",
        {"array": 1, "schema": 0},
    ),
    "null_child_schema_in_tensor": (
        _pair(_TENSOR_NULL_CHILD, _FSL),
        "ValueError",
        r"child 0 of the top-level Arrow field 'x' is NULL",
        {"array": 1, "schema": 0},
    ),
    "null_children_schema_array": (
        _pair('[{"format": b"+w:2", "children": "null"}, {"format": b"i"}]', _FSL),
        "ValueError",
        r"has 1 children but a NULL children array",
        {"array": 1, "schema": 0},
    ),
    "null_child_array": (
        _pair(_FSL, _fsl_array(child="null")),
        "ValueError",
        r"child 0 of the Arrow array is NULL",
        {"array": 1, "schema": 0},
    ),
    "null_children_array": (
        _pair(_FSL, _fsl_array(children="null")),
        "ValueError",
        r"the Arrow array has a NULL children array",
        {"array": 1, "schema": 0},
    ),
    "list_null_buffers_unknown_null_count": (
        _pair(_FSL, _fsl_array(buffers="null", null_count=-1)),
        "ValueError",
        r"the Arrow array has a NULL buffers array",
        {"array": 1, "schema": 0},
    ),
    "list_null_buffers_with_nulls": (
        _pair(_FSL, _fsl_array(buffers="null", null_count=1)),
        "ValueError",
        r"the Arrow array has a NULL buffers array",
        {"array": 1, "schema": 0},
    ),
    "device_list_null_buffers": (
        _pair(_FSL, _fsl_array(buffers="null", null_count=-1), "__arrow_c_device_array__"),
        "ValueError",
        r"the Arrow array has a NULL buffers array",
        {"array": 1, "schema": 0},
    ),
    "offset_plus_length_overflows": (
        _pair('[{"format": b"f"}]', f'[{{"format": b"f", "offset": {2**63 - 1}}}]'),
        "ValueError",
        r"the Arrow array has offset 9223372036854775807 \+ length 3 beyond int64",
        {"array": 1, "schema": 0},
    ),
    "child_offset_plus_length_overflows": (
        _pair(_FSL, f'[{{"format": b"+w:2"}}, {{"format": b"i", "offset": {2**63 - 2}}}]'),
        "ValueError",
        r"the Arrow child array at nesting level 1 has offset 9223372036854775806 \+ length 6 "
        r"beyond int64",
        {"array": 1, "schema": 0},
    ),
    "offset_beyond_the_child": (
        _pair(_FSL, f'[{{"format": b"+w:2", "offset": {2**40}}}, {{"format": b"i"}}]'),
        "ValueError",
        r"the Arrow child array at nesting level 1 has 6 slots but its parent needs "
        + str((2**40 + 3) * 2),
        {"array": 1, "schema": 0},
    ),
    "list_offset_times_size_overflows": (
        _pair(_FSL, f'[{{"format": b"+w:2", "offset": {2**62}}}, {{"format": b"i"}}]'),
        "OverflowError",
        r"Arrow array size overflows int64",
        {"array": 1, "schema": 0},
    ),
    "tensor_zero_extent_with_huge_extents": (
        _pair(
            '[{"format": b"+w:0", "metadata": extension(b"arrow.fixed_shape_tensor", '
            'b\'{"shape":[0,4294967296,4294967296,4294967296]}\')}, {"format": b"f"}]',
            '[{"format": b"+w:0"}, {"format": b"f"}]',
        ),
        "OverflowError",
        r"Arrow array size overflows int64",
        {"array": 1, "schema": 0},
    ),
}
for _device in (False, True):
    for _missing in (("get_schema",), ("get_next",), ("get_last_error",)):
        CRASHERS[f"{'device_' if _device else ''}stream_null_{_missing[0]}"] = (
            _stream(_device, _missing),
            "ValueError",
            rf"has a NULL {_missing[0]} callback; the C stream interface requires",
            {"array": 0, "stream": 1},
        )


@pytest.mark.parametrize("name", sorted(CRASHERS))
def test_malformed_struct_is_refused_not_crashed(name):
    build, exc, pattern, released = CRASHERS[name]
    proc = run_python(_CHILD.format(here=HELPERS, build=build))
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stderr[-3000:]}"
    got_exc, message, releases = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got_exc == exc, (got_exc, message)
    assert re.search(pattern, message), message
    # What the importer took (the array, the stream) it released exactly once.
    assert releases == released


def test_released_child_array_is_refused():
    with pytest.raises(
        ValueError, match="child array at nesting level 1 has already been released"
    ):
        _import(
            [{"format": b"+w:2"}, {"format": b"i"}],
            [{"format": b"+w:2"}, {"format": b"i", "release": False}],
        )


def test_valid_forged_structs_import_with_their_values():
    """The forge itself builds valid structs: offsets at every level are honoured."""
    d = _import(
        [{"format": b"+w:2"}, {"format": b"i"}],
        [{"format": b"+w:2", "offset": 1}, {"format": b"i", "offset": 1}],
    )
    # Row r covers child slots (1 + r) * 2 .. + 2, shifted by the child's offset 1.
    np.testing.assert_array_equal(np.asarray(d), np.arange(3, 9, dtype=np.int32).reshape(3, 2))

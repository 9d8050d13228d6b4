"""Interfaces that lie or are malformed must raise a clear Python exception,
never crash: targeted cases for every field, then hypothesis-generated
dictionaries and PyArrayInterface capsules."""

import ctypes

import numpy as np
import pytest
from array_struct_ctypes import ARR_HAS_DESCR, NOTSWAPPED, WRITEABLE, StructExporter
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray

CLEAR_ERRORS = (TypeError, ValueError, BufferError, OverflowError)


class Iface:
    def __init__(self, iface, keep=None):
        self.__array_interface__ = iface
        self.keep = keep


BUF = np.arange(16, dtype=np.float32)  # 64 bytes of valid memory
PTR = BUF.ctypes.data


def good(**changes):
    iface = {"version": 3, "shape": (4, 4), "typestr": "<f4", "data": (PTR, False)}
    for key, value in changes.items():
        if value is _DROP:
            iface.pop(key, None)
        else:
            iface[key] = value
    return iface


_DROP = object()


def test_good_baseline():
    np.testing.assert_array_equal(np.asarray(DLPackArray(Iface(good(), BUF))), BUF.reshape(4, 4))


@pytest.mark.parametrize(
    "iface, exc, text",
    [
        # the container and required keys
        ([("shape", (1,))], TypeError, "must be a dict"),
        (good(version=_DROP), ValueError, "required key 'version'"),
        (good(shape=_DROP), ValueError, "required key 'shape'"),
        (good(typestr=_DROP), ValueError, "required key 'typestr'"),
        # version
        (good(version="3"), TypeError, "'version' must be an int"),
        (good(version=2), ValueError, "version 2"),
        (good(version=True), TypeError, "'version' must be an int"),
        # shape
        (good(shape=[4, 4]), TypeError, "'shape' must be a tuple"),
        (good(shape=16), TypeError, "'shape' must be a tuple"),
        (good(shape=(4.0, 4)), TypeError, r"shape\[0\] must be an integer"),
        (good(shape=(4, "4")), TypeError, r"shape\[1\] must be an integer"),
        (good(shape=(True, 4)), TypeError, "got a bool"),
        (good(shape=(-1, 4)), ValueError, "negative"),
        (good(shape=(1,) * 65), ValueError, "at most 64"),
        (good(shape=(2**63,)), OverflowError, "does not fit in int64"),
        (good(shape=(2**40, 2**40)), OverflowError, "number of elements overflows"),
        # typestr / descr
        (good(typestr="xyz"), TypeError, "invalid array-interface typestr"),
        (good(typestr=""), TypeError, "invalid array-interface typestr"),
        (good(typestr=b"<f4"), TypeError, "'typestr' must be a str"),
        (good(typestr="<f٤"), TypeError, "invalid typestr"),
        (good(typestr="<f3"), BufferError, "24-bit floating-point type, a width"),
        (good(typestr="<f99999999"), BufferError, "wider floating-point type, a width"),
        (good(typestr="|O8"), BufferError, "DLPack cannot describe"),
        (good(typestr="|V16"), BufferError, "DLPack cannot describe"),
        (good(typestr="<U1"), BufferError, "DLPack cannot describe"),
        (good(typestr=">f4"), BufferError, "big-endian"),
        (
            good(typestr="|V8", descr=[("a", "<f4"), ("b", "<f4")]),
            BufferError,
            "structured dtype with 2",
        ),
        (good(descr=[("x", "<f4")]), BufferError, "named field 'x'"),
        (good(descr=[("", "<f4", (2,))]), BufferError, "sub-array"),
        (good(descr=[("", [("a", "<f4")])]), BufferError, "nested"),
        (good(descr=[]), TypeError, "0 fields"),
        (good(descr="<f4"), TypeError, "'descr' must be a list"),
        (good(descr=["<f4"]), TypeError, "entries must be"),
        (good(descr=[("", "<i4")]), TypeError, "disagree"),
        # strides
        (good(strides="16,4"), TypeError, "'strides' must be None or a tuple"),
        (good(strides=(16,)), ValueError, "'strides' has 1 entries"),
        (good(strides=(16, 2)), BufferError, "not a multiple of the item size"),
        (good(strides=(16, 4.0)), TypeError, r"strides\[1\] must be an integer"),
        (good(strides=(2**62, 4)), OverflowError, "overflows"),
        # mask
        (good(mask=np.ones((4, 4), bool)), ValueError, "mask"),
        # data
        (good(data=(0, False)), ValueError, "NULL"),
        (good(data=(PTR,)), TypeError, r"\(pointer, readonly\) pair"),
        (good(data=(float(PTR), False)), TypeError, "pointer must be an int"),
        (good(data=(True, False)), TypeError, "pointer must be an int"),
        (good(data=(PTR, "no")), TypeError, "read-only flag"),
        (good(data=(-8, False)), ValueError, "not a valid address"),
        (good(data=(2**64, False)), ValueError, "not a valid address"),
        (good(data="abc"), TypeError, "'data' must be None"),
        (good(data=None), TypeError, "exposes no buffer"),
        (good(data=np.zeros((8, 8))[:, ::2]), BufferError, "contiguous"),
        # extents against a buffer of known length
        (
            good(data=bytearray(63)),
            ValueError,
            r"reach bytes \[0, 64\) outside the source buffer of 63",
        ),
        (good(data=bytearray(64), offset=4), ValueError, "outside the source buffer"),
        (good(data=bytearray(64), strides=(20, 4)), ValueError, "outside the source buffer"),
        (good(data=bytearray(64), strides=(-16, 4)), ValueError, "outside the source buffer"),
        (good(data=bytearray(64), offset=-4), ValueError, "'offset' is -4"),
        (good(data=bytearray(64), offset="0"), TypeError, "'offset' must be an integer"),
    ],
)
def test_malformed_interface(iface, exc, text):
    with pytest.raises(exc, match=text):
        DLPackArray(Iface(iface, BUF))


def test_interface_property_errors_propagate():
    class Raises:
        @property
        def __array_interface__(self):
            raise RuntimeError("exporter broke")

    with pytest.raises(RuntimeError, match="exporter broke"):
        DLPackArray(Raises())


@pytest.mark.parametrize(
    "fields, exc, text",
    [
        ({"two": 3}, ValueError, "'two' field is 3"),
        ({"nd": -1}, ValueError, "nd = -1"),
        ({"nd": 65, "shape": (1,) * 65}, ValueError, "nd = 65"),
        ({"nd": 2, "shape": None}, ValueError, "NULL shape pointer"),
        ({"itemsize": 0}, ValueError, "itemsize 0"),
        ({"itemsize": 3}, BufferError, "24-bit"),
        ({"typekind": b"V"}, BufferError, r"void/structured data \(kind 'V'\)"),
        ({"typekind": b"O", "itemsize": 8}, BufferError, r"Python object data \(kind 'O'\)"),
        ({"typekind": b"\x00"}, TypeError, r"\(byte 0\)"),
        ({"flags": WRITEABLE}, BufferError, "byte-swapped"),
        ({"data": 0}, ValueError, "NULL"),
        ({"shape": (-2,)}, ValueError, "negative"),
        ({"strides": (6,)}, BufferError, "not a multiple of the item size"),
        ({"flags": NOTSWAPPED | ARR_HAS_DESCR, "descr": 5}, TypeError, "'descr' must be a list"),
        (
            {"flags": NOTSWAPPED | ARR_HAS_DESCR, "descr": [("a", "<i4"), ("b", "<i4")]},
            BufferError,
            "structured",
        ),
        ({"flags": NOTSWAPPED | ARR_HAS_DESCR, "descr": [("", "<f4")]}, TypeError, "disagree"),
        ({"name": b"dltensor"}, TypeError, "capsule named 'dltensor'"),
    ],
)
def test_malformed_struct(fields, exc, text):
    fields.setdefault("data", PTR)
    exporter = StructExporter(**fields)
    with pytest.raises(exc, match=text):
        DLPackArray(exporter)


@pytest.mark.parametrize("value", [5, "capsule", b"", object()])
def test_struct_must_be_a_capsule(value):
    class Odd:
        __array_struct__ = value

    with pytest.raises(TypeError, match="must be a PyCapsule"):
        DLPackArray(Odd())


def test_struct_flag_without_descr_pointer_is_ignored():
    exporter = StructExporter(data=PTR, flags=NOTSWAPPED | ARR_HAS_DESCR)
    assert DLPackArray(exporter).shape == (4,)


# -- hypothesis: generated dictionaries ------------------------------------------------

garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(-3, 3), max_size=3),
    st.just(object()),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
any_int = st.one_of(st.integers(-3, 40), st.integers(-(2**70), 2**70))
int_tuples = st.lists(st.one_of(any_int, any_int, garbage), max_size=5).map(tuple)

TYPESTRS = [
    "<f4",
    "|u1",
    "<i8",
    "|b1",
    "<c8",
    "<f2",
    ">i4",
    "<u2",
    "|i1",
    "<c16",
    "<V4",
    "|O8",
    "<M8",
    "<U2",
    "|S3",
    "<f3",
    "<i16",
    "xyz",
    "",
    "<f",
    "<f-4",
    "|u1 ",
    "=f8",
]


VALID_TYPESTRS = ["<f4", "|u1", "<i8", "|b1", "<c8", "<f2", "<u2", "|i1"]
small_tuples = st.lists(st.integers(0, 4), max_size=3).map(tuple)
byte_strides = st.lists(st.integers(-16, 32), max_size=3).map(tuple)


def mostly(valid, *invalid, weight=3):
    """`valid` about `weight` times as often as each invalid alternative, so
    that a fair share of examples gets past validation and is read."""
    return st.one_of(*([valid] * weight), *invalid)


@st.composite
def interfaces(draw):
    """A valid interface over a buffer of known length, then 0-3 corruptions
    (a field replaced by a wrong value or type, or deleted); sometimes the
    data is a raw pointer, or the whole dict is garbage."""
    typestr = draw(st.sampled_from(VALID_TYPESTRS))
    itemsize = int(typestr[2:])
    shape = draw(small_tuples)
    strides = None
    if draw(st.booleans()):
        strides, step = [], itemsize * draw(st.integers(1, 3))
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
        strides = tuple(strides) if not draw(st.booleans()) else tuple(strides[::-1])
    offset = draw(st.integers(0, 16))
    spans = ((n - 1) * s for n, s in zip(shape, strides, strict=True)) if strides else ()
    extent = offset + (
        max(spans, default=0) + itemsize if strides else int(np.prod(shape)) * itemsize
    )
    size = max(extent + draw(st.integers(-8, 8)), 0)  # sometimes a lie about the length
    buf = bytes(size) if draw(st.booleans()) else bytearray(size)
    iface = {
        "version": 3,
        "shape": shape,
        "typestr": typestr,
        "strides": strides,
        "data": buf,
        "offset": offset,
    }
    if draw(st.booleans()):
        iface["descr"] = [("", typestr)]
    keep = [buf]
    if draw(st.integers(0, 4)) == 0:
        arr = (ctypes.c_char * max(size, 1))()
        keep.append(arr)
        iface["data"] = (
            draw(st.sampled_from([ctypes.addressof(arr), 0, 8, 2**64 - 8])),
            draw(mostly(st.booleans(), garbage)),
        )
    wrong = {
        "version": st.one_of(any_int, garbage),
        "shape": st.one_of(int_tuples, garbage, st.lists(st.integers(0, 4))),
        "typestr": st.one_of(st.sampled_from(TYPESTRS), st.text(max_size=5), garbage),
        "strides": st.one_of(byte_strides, int_tuples, garbage),
        "data": st.one_of(garbage, st.tuples(any_int, garbage), st.just(None)),
        "offset": st.one_of(st.integers(-4, 100), garbage),
        "descr": st.one_of(
            st.lists(st.tuples(st.text(max_size=2), st.sampled_from(TYPESTRS)), max_size=3), garbage
        ),
        "mask": garbage,
    }
    for key in draw(st.lists(st.sampled_from(sorted(wrong)), max_size=3, unique=True)):
        if draw(st.integers(0, 3)) == 0:
            iface.pop(key, None)
        else:
            iface[key] = draw(wrong[key])
    known_length = type(iface.get("data")) in (bytes, bytearray)
    if draw(st.integers(0, 30)) == 0:
        iface = draw(garbage)
    return iface, keep, known_length


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=interfaces())
def test_generated_interfaces_never_crash(generated):
    iface, keep, known_length = generated
    try:
        d = DLPackArray(Iface(iface, keep))
    except CLEAR_ERRORS as e:
        event(type(e).__name__)
        assert str(e)
        return
    event("accepted")
    # Accepted: with a buffer of known length every described byte exists,
    # so reading all elements must be safe.
    if known_length:
        copied = d.copy()
        assert copied.shape == d.shape
        np.asarray(d).tobytes()


# -- hypothesis: generated capsules -----------------------------------------------------


@st.composite
def capsules(draw):
    """A valid PyArrayInterface, then 0-3 corrupted fields.  shape/strides
    arrays always hold `nd` entries (or are NULL): a consumer must trust that
    much of the C ABI."""
    buf = (ctypes.c_char * 64)()
    kind, itemsize = draw(
        st.sampled_from([(b"i", 4), (b"u", 1), (b"f", 8), (b"c", 16), (b"b", 1), (b"f", 2)])
    )
    nd = draw(st.integers(0, 3))
    fields = {
        "two": 2,
        "nd": nd,
        "typekind": kind,
        "itemsize": itemsize,
        "flags": NOTSWAPPED | WRITEABLE,
        "shape": draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd)),
        "strides": None,
        "data": ctypes.addressof(buf),
        "descr": None,
        "name": None,
    }
    if draw(st.booleans()):
        fields["strides"] = [itemsize * draw(st.integers(-4, 4)) for _ in range(nd)]
    wrong = {
        "two": st.integers(-(2**31), 2**31 - 1),
        "nd": st.one_of(st.integers(-3, 6), st.sampled_from([64, 65, 200, -(2**31)])),
        "typekind": st.one_of(
            st.sampled_from([b"V", b"O", b"S", b"i", b"c"]), st.binary(min_size=1, max_size=1)
        ),
        "itemsize": st.one_of(st.sampled_from([0, 3, 16, 32]), st.integers(-(2**31), 2**31 - 1)),
        "flags": st.integers(0, 0xFFF),
        "shape": st.one_of(st.none(), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3)),
        "strides": st.lists(
            st.one_of(st.integers(-9, 9), st.integers(-(2**63), 2**63 - 1)), max_size=3
        ),
        "data": st.sampled_from([0, 1]),
        "descr": st.one_of(
            garbage,
            st.just([("", "<i4")]),
            st.lists(st.tuples(st.text(max_size=2), st.sampled_from(TYPESTRS)), max_size=2),
        ),
        "name": st.sampled_from([b"dltensor", b"x"]),
    }
    for key in draw(st.lists(st.sampled_from(sorted(wrong)), max_size=3, unique=True)):
        fields[key] = draw(wrong[key])
        if key == "descr":
            fields["flags"] |= ARR_HAS_DESCR
    # Keep the arrays at least nd long: reading past them is an ABI breach
    # no consumer can detect.
    n = max(min(fields["nd"], 300), 0)
    for key in ("shape", "strides"):
        if fields[key] is not None and len(fields[key]) < n:
            fields[key] = list(fields[key]) + [1] * (n - len(fields[key]))
    fields["has_descr_pointer"] = draw(st.booleans())
    exporter = StructExporter(**fields)
    exporter.buf = buf
    return exporter


@settings(max_examples=300, deadline=None)
@given(exporter=capsules())
def test_generated_capsules_never_crash(exporter):
    try:
        d = DLPackArray(exporter)
    except CLEAR_ERRORS as e:
        event(type(e).__name__)
        assert str(e)
        return
    event("accepted")
    # Accepted: the description is internally consistent (the memory length
    # is unknowable through this protocol, so nothing is read).
    assert d.ndim == exporter.struct.nd

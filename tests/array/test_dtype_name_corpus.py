"""Every entry point that takes a dtype name or typestr raises only its documented classes.

A dtype name names a type of the one dtype table, or it is refused: ``TypeError`` when it
names nothing (unknown, non-ASCII, an embedded NUL, empty), ``BufferError`` when it names
a type DLPack cannot carry element by element (a sub-byte type, a width no DLPack code
has).  Encoding errors (``UnicodeEncodeError``, a ``ValueError`` subclass whose
constructor takes five arguments) never escape, and a wrapper that rewords an error
(pickle's ``rebuild``) keeps the documented class.  Typestrs follow one rule wherever
they come from (``__array_interface__``, ``__array_struct__``, ``__cuda_array_interface__``):
malformed is ``TypeError``, a well-formed NumPy kind or width DLPack lacks is ``BufferError``
(docs/legacy_protocols.md).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from array_struct_ctypes import StructExporter
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray, DType
from dlpackarray._dask import dask_deserialize
from dlpackarray._pickle import FORMAT_VERSION, rebuild

# Names that name no dtype: TypeError on every entry point.
NO_TYPE = [
    "\ud800",  # a lone surrogate: not encodable at all
    "float\udc80",
    "\udfff<f4",
    "é",
    "float３２",  # non-ASCII digits
    "\u00e9float32",
    "float32\0",  # C would read "float32"
    "<f4\0garbage",
    "\0",
    "",
    " ",
    "float32 ",
    "float" + "3" * 400,
    "x" * 10_000,
    "bfloat17",
    "<",
    "<f",
    "<fx",
    "<f-4",
    "<f0",
    "<q8",
]

# Names of types that exist but that DLPack cannot carry element by element.
NOT_CARRIED = [
    "int4",
    "uint4",
    "int2",
    "uint2",
    "int1",
    "uint1",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "<c32",  # wider than complex128
    "<f16",
    "<i3",
    "<f99999999999999999999",
    "|T16",  # NumPy's StringDType
    "<U4",
    "|S3",
    "|O",
    "<M8[D]",
    "|V4",
]

DOCUMENTED = {TypeError, BufferError}


def _from_buffer(name):
    return DLPackArray.from_buffer(bytearray(64), name, shape=(1,))


def _view(name):
    return DLPackArray(bytearray(64)).view(name)


def _rebuild(name):
    return rebuild(FORMAT_VERSION, bytearray(64), name, (1,), (1,), 0, False, (1, 0))


def _unpickle(name):
    # What pickle.loads calls with a pickle's arguments.
    fn, args = pickle.loads(pickle.dumps((rebuild, (FORMAT_VERSION, b"\0" * 64, name))))
    return fn(*args, (1,), (1,), 0, True, (1, 0))


def _dask_deserialize(name):
    header = {
        "version": FORMAT_VERSION,
        "dtype": name,
        "shape": [1],
        "strides": [1],
        "offset": 0,
        "readonly": False,
        "device": [1, 0],
    }
    return dask_deserialize(header, [bytearray(64)])


class _Interface:
    def __init__(self, typestr):
        self._keep = bytearray(64)
        self.__array_interface__ = {
            "version": 3,
            "shape": (1,),
            "typestr": typestr,
            "data": self._keep,
        }


class _CudaInterface:
    """Never read: every typestr of the corpus is refused before the device is."""

    def __init__(self, typestr):
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": (1,),
            "typestr": typestr,
            "data": (4096, False),
        }


# Entry points that take a typestr only (no dtype names).
TYPESTR_ONLY = {"__array_interface__", "__cuda_array_interface__"}

ENTRY_POINTS = {
    "DType": DType,
    "from_buffer": _from_buffer,
    "view": _view,
    "pickle.rebuild": _rebuild,
    "pickle.loads": _unpickle,
    "dask_deserialize": _dask_deserialize,
    "__array_interface__": lambda name: DLPackArray(_Interface(name)),
    "__cuda_array_interface__": lambda name: DLPackArray(_CudaInterface(name)),
}


def _outcome(fn, name):
    """``None`` when accepted, else the exact class raised."""
    try:
        fn(name)
    except Exception as exc:
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("name", NO_TYPE, ids=ascii)
def test_a_name_of_no_type_is_a_type_error(entry, name):
    """A name of no dtype is refused with TypeError (the class itself, not a
    subclass), and the message quotes the name."""
    outcome = _outcome(ENTRY_POINTS[entry], name)
    assert outcome is not None, f"{entry} accepted {name!r}"
    cls, message = outcome
    assert cls is TypeError, (entry, name, cls, message)
    if entry not in TYPESTR_ONLY and len(name) < 100 and name.isprintable():
        assert repr(name)[1:-1] in message or name in message, message


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("name", NOT_CARRIED, ids=ascii)
def test_a_type_dlpack_cannot_carry_is_a_buffer_error(entry, name):
    """A name of a real type that DLPack cannot carry element by element is a
    BufferError that names it; names without a typestr's byte order are dtype
    names only, so the array interface sees them as malformed (TypeError)."""
    outcome = _outcome(ENTRY_POINTS[entry], name)
    assert outcome is not None, f"{entry} accepted {name!r}"
    cls, message = outcome
    is_typestr = name[0] in "<>|="
    if entry in TYPESTR_ONLY and not is_typestr:
        assert cls is TypeError, (name, cls, message)
        return
    assert cls is BufferError, (entry, name, cls, message)
    assert name in message, message


@pytest.mark.parametrize("name", ["int4", "float4_e2m1fn", "float6_e3m2fn", "uint2"])
def test_sub_byte_refusal_says_why(name):
    """The refusal of a sub-byte type gives the DLPack code that describes it and
    why its one-value-per-byte layout is not exchanged."""
    with pytest.raises(BufferError) as info:
        DType(name)
    message = str(info.value)
    assert "DLPack describes it as kDL" in message
    assert "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED" in message
    assert "https://dmlc.github.io/dlpack/latest/" in message


# Any text, lone surrogates and NULs included (st.characters leaves surrogates
# out), mixed with the characters dtype names and typestrs are made of.
NAME_CHARS = st.one_of(
    st.characters(),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.sampled_from("\0<>|=fiucbVTO0123456789_e"),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(NAME_CHARS, max_size=12), st.sampled_from(NO_TYPE + NOT_CARRIED)))
def test_any_text_is_a_dtype_or_a_documented_refusal(name):
    """Property: any string is accepted or refused with exactly TypeError or
    BufferError, by every entry point, and all agree with DType."""
    expected = _outcome(DType, name)
    for entry, fn in ENTRY_POINTS.items():
        if entry in TYPESTR_ONLY:
            continue  # typestrs only; see the typestr property below
        got = _outcome(fn, name)
        if expected is None:
            # Accepted names may still not fit 64 bytes of one element.
            assert got is None or got[0] is ValueError, (entry, name, got)
        else:
            assert got is not None and got[0] is expected[0], (entry, name, got, expected)
            assert got[0] in DOCUMENTED, (entry, name, got)


TYPESTR_BODIES = st.text(alphabet="biufcVOSaUMmtTx0123456789[]?\0\ud800é", max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from("<>|=!x"), TYPESTR_BODIES)
def test_any_typestr_is_a_dtype_or_a_documented_refusal(order, body):
    """Property: an array-interface typestr is accepted or refused with exactly
    TypeError (malformed) or BufferError (a type DLPack cannot carry)."""
    got = _outcome(ENTRY_POINTS["__array_interface__"], order + body)
    assert got is None or got[0] in DOCUMENTED or got[0] is ValueError, (order + body, got)
    if got is not None and got[0] is ValueError:
        assert "outside" in got[1] or "reach" in got[1], got  # an element wider than 64 bytes


def _struct_outcome(kind, itemsize):
    keep = np.zeros(64, np.uint8)
    exporter = StructExporter(typekind=kind, itemsize=itemsize, shape=(1,), data=keep.ctypes.data)
    exporter.keep = keep
    return _outcome(DLPackArray, exporter)


# NumPy kinds, a kind no NumPy type has, and widths around every boundary.
KINDS = list(b"biufcVOSaUMmtT") + [ord("x"), ord("F"), 0, 0xFF]
WIDTHS = [1, 2, 3, 4, 5, 8, 12, 16, 17, 32, 64]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"kind{k}")
def test_array_struct_and_interface_typestr_agree(kind, width):
    """One rule for a type description: ``__array_struct__``'s typekind and
    itemsize are refused with the same class as the typestr that spells them in
    ``__array_interface__`` (BufferError for a NumPy kind or width DLPack
    lacks, TypeError for a byte that is no kind)."""
    struct = _struct_outcome(bytes([kind]), width)
    order = "|" if width == 1 else "="
    text = bytes([kind]).decode("latin-1")
    iface = _outcome(ENTRY_POINTS["__array_interface__"], f"{order}{text}{width}")
    if struct is None or iface is None:
        assert struct is None and iface is None, (struct, iface)
        return
    assert struct[0] is iface[0], (struct, iface)
    assert struct[0] in DOCUMENTED, struct
    if chr(kind) in "biufcVOSaUMmtT" and kind != 0:
        assert struct[0] is BufferError, struct


def test_string_dtype_is_refused_as_data_dlpack_cannot_carry():
    """NumPy's StringDType (kind 'T') is data DLPack cannot describe: BufferError,
    from the array and from its ``__array_struct__``."""
    dtypes = pytest.importorskip("numpy.dtypes")
    if not hasattr(dtypes, "StringDType"):
        pytest.skip("NumPy before 2.0 has no StringDType")
    a = np.array(["a", "bc"], dtype=dtypes.StringDType())

    class StructOnly:
        __array_struct__ = a.__array_struct__

    for source in (a, StructOnly()):
        with pytest.raises(BufferError, match="StringDType"):
            DLPackArray(source)
    # NumPy 2.1 spells the typestr '|T16', a well-formed typestr of kind 'T' (data DLPack
    # cannot describe); later NumPy spells it 'StringDType()', no typestr at all.
    typestr = a.__array_interface__["typestr"]
    error, text = (BufferError, "StringDType") if typestr[1:2] == "T" else (TypeError, "invalid")
    with pytest.raises(error, match=text):
        DLPackArray(_Interface(typestr))

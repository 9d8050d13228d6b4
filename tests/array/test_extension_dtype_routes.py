"""Every ml_dtypes type gets one verdict on every route into a DLPackArray.

A type is accepted when DLPack carries it element by element (bfloat16 and the
float8 family, one or more whole bytes per element) and refused with BufferError
otherwise (ml_dtypes' sub-byte int4, float4_e2m1fn, float6_*, ... store a few bits per
byte).  The verdict may not depend on how the data arrives: a scalar, a 0-d array or an
n-d array, through ``DLPackArray(x)``, ``from_dlpack(x)``, or a library object that
offers only ``__array_interface__`` or ``__array_struct__`` with its NumPy dtype.  Where
a route is not open to a form at all (``from_dlpack`` of a NumPy scalar, which has no
``__dlpack__``), the extension type is refused exactly like NumPy's own float16 there:
the differential control.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_ml_dtypes

from dlpackarray import DLPackArray, from_dlpack

ml_dtypes = require_ml_dtypes()


def _ml_types():
    """Every scalar type ml_dtypes exports (a new one is covered by itself)."""
    found = {}
    for name in dir(ml_dtypes):
        t = getattr(ml_dtypes, name)
        if isinstance(t, type) and issubclass(t, np.generic):
            found[name] = t
    return found


TYPES = _ml_types()


# Whole-byte types that are still not exchanged, and why (the refusal says so).
NOT_CARRIED = {
    "complex32": "kDLComplex (code 5) with bits=32",  # a DLPack width dlpackarray lacks
    "bcomplex32": "has no DLPack type code",  # complex of bfloat16 parts
}


def _bits(t) -> int:
    """Bits of one value (of one part, for a complex type)."""
    try:
        return ml_dtypes.finfo(t).bits
    except (TypeError, ValueError):
        return ml_dtypes.iinfo(t).bits


def _carried(name) -> bool:
    """The independent oracle: DLPack carries a type element by element when
    its bits fill the bytes NumPy gives each element (both parts, for a
    complex type), unless it is one of NOT_CARRIED."""
    t = TYPES[name]
    parts = 2 if np.issubdtype(np.dtype(t), np.complexfloating) or "complex" in name else 1
    return parts * _bits(t) == 8 * np.dtype(t).itemsize and name not in NOT_CARRIED


class _InterfaceOnly:
    """A library array that offers its NumPy dtype and ``__array_interface__`` only."""

    def __init__(self, a):
        self._a = np.asarray(a)
        self.dtype = self._a.dtype
        self.shape = self._a.shape

    @property
    def __array_interface__(self):
        return self._a.__array_interface__


class _StructOnly:
    """A library array that offers its NumPy dtype and ``__array_struct__`` only."""

    def __init__(self, a):
        self._a = np.asarray(a)
        self.dtype = self._a.dtype
        self.shape = self._a.shape

    @property
    def __array_struct__(self):
        return self._a.__array_struct__


FORMS = {
    "scalar": lambda t: t(1),
    "0-d": lambda t: np.ones((), dtype=t),
    "n-d": lambda t: np.ones((2, 3), dtype=t)[:, ::2],
}

ROUTES = {
    "DLPackArray": DLPackArray,
    "from_dlpack": from_dlpack,
    "__array_interface__": lambda x: DLPackArray(_InterfaceOnly(x)),
    "__array_struct__": lambda x: DLPackArray(_StructOnly(x)),
}


def _verdict(route, x):
    try:
        return route(x), None
    except Exception as exc:
        return None, exc


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_route_gives_the_same_verdict(name, form, route):
    """Accepted iff DLPack carries the type element by element, with its dtype
    and bytes; else BufferError naming the type: unless the route is closed to
    the form, where NumPy's own float16 (the control) is refused with the same
    class."""
    t = TYPES[name]
    x = FORMS[form](t)
    _, control_error = _verdict(ROUTES[route], FORMS[form](np.float16))
    got, error = _verdict(ROUTES[route], x)
    if control_error is not None:
        assert error is not None and type(error) is type(control_error), (error, control_error)
        return
    if not _carried(name):
        assert type(error) is BufferError, error
        assert name in str(error), error
        assert NOT_CARRIED.get(name, "") in str(error), error
        return
    assert error is None, error
    expected = np.asarray(x)
    assert got.dtype.name == name
    assert got.shape == expected.shape
    assert got.tolist() == expected.astype(np.float64).tolist()
    if form != "scalar":
        # The array's own memory: zero-copy.
        assert got.data_ptr + got.byte_offset == expected.__array_interface__["data"][0]


@pytest.mark.parametrize("name", sorted(TYPES))
def test_scalar_is_accepted_like_its_0d_array(name):
    """An ml_dtypes scalar becomes the 0-d array of its type, or is refused with
    the same class and message as that 0-d array."""
    t = TYPES[name]
    scalar, scalar_error = _verdict(DLPackArray, t(1))
    array, array_error = _verdict(DLPackArray, np.ones((), dtype=t))
    assert (scalar_error is None) == (array_error is None), (scalar_error, array_error)
    if array_error is not None:
        assert type(scalar_error) is type(array_error) is BufferError
        # The same reason; only the object's type name differs.
        assert str(scalar_error).split(": ", 1)[1] == str(array_error).split(": ", 1)[1]
        return
    assert scalar.dtype == array.dtype and scalar.shape == () and scalar.item() == array.item()


def test_oracle_sees_both_verdicts():
    """The matrix above holds accepted and refused types (else it would prove
    nothing about one of the verdicts)."""
    verdicts = {_carried(name) for name in TYPES}
    assert verdicts == {True, False}
    for name in ("bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu"):
        assert _carried(name), name
    for name in ("int4", "float4_e2m1fn", "float6_e2m3fn"):
        if name in TYPES:
            assert not _carried(name), name


@pytest.mark.parametrize("typestr", ["<f1", "|f1"])
def test_a_one_byte_float_typestr_says_which_types_dlpack_has(typestr):
    """ml_dtypes' float8_e5m2 spells itself '<f1' in the array interface; without
    its dtype the typestr does not say which 8-bit float it is, and the refusal
    says that DLPack does have the 8-bit floats, each under its own code."""

    class Bare:
        def __init__(self):
            self._keep = bytearray(4)
            self.__array_interface__ = {
                "version": 3,
                "shape": (4,),
                "typestr": typestr,
                "data": self._keep,
            }

    with pytest.raises(BufferError, match="each have a type code of their own") as info:
        DLPackArray(Bare())
    assert "cannot represent" not in str(info.value)

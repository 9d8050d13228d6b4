"""from_buffer and pickle's rebuild keep every view's data pointer inside its buffer.

The offset is checked against the buffer's length for every array, empty ones
included: ``0 <= offset <= len(buffer)``, the rule of ``numpy.frombuffer`` and
``numpy.ndarray(buffer=...)`` (an empty array may start one past the last byte,
never further).  A non-empty view must also keep every element inside.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlpackarray import DLPackArray
from dlpackarray._pickle import FORMAT_VERSION, rebuild

DTYPES = ["uint8", "int16", "float32", "complex128"]


def numpy_accepts(length, dtype, shape, byte_strides, offset) -> bool:
    try:
        np.ndarray(shape, dtype, buffer=bytearray(length), offset=offset, strides=byte_strides)
    except (TypeError, ValueError):
        return False
    return True


def fits(length, itemsize, shape, byte_strides, offset) -> bool:
    """The rule, computed independently: the offset within [0, length], and the
    bytes the elements touch within [0, length)."""
    if not 0 <= offset <= length:
        return False
    if math.prod(shape) == 0:
        return True
    if byte_strides is None:
        byte_strides = [itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape))]
    lo = sum((n - 1) * s for n, s in zip(shape, byte_strides, strict=True) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, byte_strides, strict=True) if s > 0)
    return offset + lo >= 0 and offset + hi + itemsize <= length


@st.composite
def layouts(draw):
    dtype = draw(st.sampled_from(DTYPES))
    itemsize = np.dtype(dtype).itemsize
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    strides = None
    if draw(st.booleans()):
        strides = tuple(
            itemsize * s for s in draw(st.lists(st.integers(-5, 5), min_size=ndim, max_size=ndim))
        )
    length = draw(st.integers(0, 96))
    # Offsets around both ends of the buffer, where the rule bites.
    offset = draw(st.one_of(st.integers(-2, length + 3), st.integers(0, 200)))
    return dtype, itemsize, shape, strides, length, offset


@given(layouts())
def test_from_buffer_accepts_exactly_what_numpy_accepts(layout):
    """from_buffer accepts a (buffer length, offset, shape, strides) iff NumPy's
    ndarray(buffer=, offset=, strides=) does and the independent rule holds; an
    accepted view's first element lies at the offset, inside the buffer."""
    dtype, itemsize, shape, strides, length, offset = layout
    buffer = bytearray(length)
    expected = fits(length, itemsize, shape, strides, offset)
    # NumPy is the reference for offsets within the buffer's range: it sizes an empty
    # buffer from the shape when strides are given, and takes a negative offset as it is
    # (its view then starts before the buffer), which the rule refuses.
    if length and offset >= 0:
        assert numpy_accepts(length, dtype, shape, strides, offset) == expected
    try:
        x = DLPackArray.from_buffer(buffer, dtype, shape=shape, strides=strides, offset=offset)
    except ValueError as e:
        assert not expected, e
        assert "offset" in str(e) or "outside the source buffer" in str(e)
        return
    assert expected
    base = np.frombuffer(buffer, np.uint8).ctypes.data if length else None
    if base is not None:
        assert x.data_ptr - base == offset
        assert 0 <= x.data_ptr - base <= length


@given(layouts())
def test_rebuild_applies_the_same_offset_rule(layout):
    """A pickle's rebuild is refused iff from_buffer refuses the same layout."""
    dtype, itemsize, shape, strides, length, offset = layout
    if strides is None:
        strides = tuple(itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape)))
    expected = fits(length, itemsize, shape, strides, offset)
    try:
        rebuild(FORMAT_VERSION, bytearray(length), dtype, shape, strides, offset, False, (1, 0))
    except ValueError as e:
        assert not expected and "cannot unpickle a DLPackArray" in str(e)
        return
    assert expected


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5, 2)])
def test_empty_arrays_offset_at_most_the_length(shape):
    """An empty array may start at the end of its buffer but not beyond it."""
    assert DLPackArray.from_buffer(b"abc", "uint8", shape=shape, offset=3).size == 0
    with pytest.raises(ValueError, match="offset 4 is beyond the end of the source buffer of 3"):
        DLPackArray.from_buffer(b"abc", "uint8", shape=shape, offset=4)
    with pytest.raises(ValueError, match="offset 100 is beyond"):
        rebuild(FORMAT_VERSION, b"", "uint8", shape, (1,) * len(shape), 100, True, (1, 0))
    assert np.frombuffer(b"abc", np.uint8, offset=3).size == 0  # NumPy's rule too

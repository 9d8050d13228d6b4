"""Pickles and copies of subclasses keep their type and state; pickles stay small.

* A DLPackArray subclass survives pickle (protocols 2-5, protocol 5 out-of-band
  too), ``copy.copy`` and ``copy.deepcopy`` as its own type with its instance
  state restored as pickle and copy restore any object's: ``__dict__``,
  ``__slots__``, or the class's ``__getstate__``/``__setstate__``.  ``copy.copy``
  shares the attribute values, ``copy.deepcopy`` copies them (cycles included).
* A pickle carries the span the elements cover only while that span is at most
  twice the elements' bytes; a view with wider gaps ships a C-contiguous copy
  of its elements, so no pickle is more than twice its data (docs/processes.md).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from strategies import strided_views, wrap

from dlpackarray import DLPackArray
from dlpackarray._pickle import byte_extent, rebuild_as

PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)
NATIVE = ["bool", "int8", "uint16", "int32", "float32", "float64", "complex128"]


class Tagged(DLPackArray):
    """A subclass with instance attributes in its __dict__."""


class Slotted(DLPackArray):
    __slots__ = ("unit", "__dict__")


class Custom(DLPackArray):
    """A subclass with its own state protocol."""

    def __getstate__(self):
        return {"scale": self.scale * 10}

    def __setstate__(self, state):
        self.scale = state["scale"] // 10
        self.restored = True


def tagged(cls=Tagged):
    x = cls(np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2])
    x.name = "metres"
    x.history = [1, 2]
    return x


def round_trips(x):
    """(how, result) for every pickle protocol, out-of-band, copy and deepcopy."""
    for protocol in PROTOCOLS:
        yield f"protocol {protocol}", pickle.loads(pickle.dumps(x, protocol=protocol))
    buffers = []
    data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    yield "out-of-band", pickle.loads(data, buffers=buffers)
    yield "copy", copy.copy(x)
    yield "deepcopy", copy.deepcopy(x)


def test_subclass_keeps_type_and_attributes():
    """Every pickle protocol, out-of-band buffers, copy and deepcopy give the
    subclass back with its attributes and the same elements."""
    x = tagged()
    for how, y in round_trips(x):
        assert type(y) is Tagged, how
        assert (y.name, y.history) == ("metres", [1, 2]), how
        assert y.tolist() == x.tolist() and y.shape == x.shape, how
        assert y.__dict__ is not x.__dict__, how


def test_copy_shares_attributes_and_deepcopy_copies_them():
    """copy.copy shares attribute values, deepcopy copies them and keeps cycles."""
    x = tagged()
    x.me = x
    shallow, deep = copy.copy(x), copy.deepcopy(x)
    assert shallow.history is x.history and shallow.me is x
    assert deep.history == x.history and deep.history is not x.history
    assert deep.me is deep
    pair = copy.deepcopy([x, x])
    assert pair[0] is pair[1] and type(pair[0]) is Tagged


def test_slots_and_custom_state_protocols():
    """__slots__ and a class's own __getstate__/__setstate__ are honoured."""
    x = tagged(Slotted)
    x.unit = "kg"
    for how, y in round_trips(x):
        assert type(y) is Slotted and y.unit == "kg" and y.name == "metres", how
    c = Custom(np.arange(3))
    c.scale = 7
    for how, y in round_trips(c):
        assert type(y) is Custom and y.scale == 7 and y.restored, how


def test_plain_arrays_keep_the_plain_format():
    """The exact type still reduces to rebuild(...) alone: its pickles stay
    readable by older releases."""
    fn, args = DLPackArray(np.arange(3)).__reduce_ex__(4)
    assert fn.__name__ == "rebuild"
    fn, args, state = tagged().__reduce_ex__(4)
    assert fn is rebuild_as and args[0] is Tagged and state["name"] == "metres"


@pytest.mark.parametrize("cls", [int, DLPackArray.__mro__[-1], "Tagged"])
def test_rebuild_as_refuses_other_classes(cls):
    """rebuild_as builds DLPackArray subclasses only."""
    args = tagged().__reduce_ex__(4)[1][1:]
    with pytest.raises(TypeError, match="not a subclass of DLPackArray"):
        rebuild_as(cls, *args)


def test_wide_gap_views_ship_their_elements():
    """A 2-element view of a 1000-element array pickles its two elements, not
    the 998 between them, and still round-trips."""
    x = DLPackArray(np.arange(1000))[::999]
    for protocol in PROTOCOLS:
        data = pickle.dumps(x, protocol=protocol)
        assert len(data) < 250, (protocol, len(data))
        assert pickle.loads(data).tolist() == [0, 999]
    buffers = []
    pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    assert [b.raw().nbytes for b in buffers] == [16]


def test_dense_and_modest_gap_layouts_stay_zero_copy():
    """Transposed, reversed and every-other-element views (span at most twice the
    data) go out-of-band as the original memory."""
    base = np.arange(24.0).reshape(4, 6)
    for view in (base.T, base[::-1], base[:, ::2], base[::-1, ::-2]):
        x = DLPackArray(view)
        buffers = []
        data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
        y = pickle.loads(data, buffers=buffers)
        assert y.data_ptr == x.data_ptr and y.strides == x.strides
        np.testing.assert_array_equal(np.asarray(y), view)


@given(strided_views(NATIVE))
def test_pickle_payload_is_bounded_by_the_data(case):
    """For any strided or broadcast view and every protocol, the pickle is at most
    min(span, twice the elements' bytes) plus a constant, and unpickles to
    NumPy's values."""
    name, _base, view = case
    x = wrap(name, view)
    data_bytes = x.size * x.itemsize
    bound = min(byte_extent(x), 2 * data_bytes)
    for protocol in PROTOCOLS:
        data = pickle.dumps(x, protocol=protocol)
        # (Protocol 2 spells a bytearray as a latin-1 str: up to 2 bytes per byte.)
        assert len(data) <= (2 if protocol < 3 else 1) * bound + 400
        y = pickle.loads(data)
        np.testing.assert_array_equal(np.asarray(y), view)
    buffers = []
    pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    assert sum(b.raw().nbytes for b in buffers) <= bound

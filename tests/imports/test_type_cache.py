"""The import's per-type cache keeps each type's answers to that type.

The cache is direct-mapped by the type's address: two types may share an
entry, and the import of one object may run the source's own code (here a
metaclass property read while the route is decided) that imports an object
of the other type into the same entry.  Whatever runs in between, a route
decided for one type must never be read for another.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlpackarray import DLPackArray

ENTRIES = 64  # the cache's size; an entry is chosen by (address >> 4) % ENTRIES


def _entry(t: type) -> int:
    return (id(t) >> 4) % ENTRIES


def _colliding_interface_type(target: type) -> type:
    """A class whose instances export ``__array_interface__`` (the instance
    probes' route) and whose cache entry is ``target``'s."""
    kept = []  # alive until one collides, so each try gets a new address
    for i in range(20 * ENTRIES):
        cls = type(f"Interface{i}", (), {"__array_interface__": property(_interface)})
        if _entry(cls) == _entry(target):
            return cls
        kept.append(cls)
    pytest.skip("no colliding class address found")


def _interface(self):
    return np.arange(4, dtype=np.int16).__array_interface__


def _producer_with_reentrant_metaclass():
    """A DLPack producer whose class's ``__module__`` (read while the import
    decides between its Arrow and DLPack routes) imports another object."""
    state = {"other": None}

    class Meta(type):
        @property
        def __module__(cls):
            if state["other"] is not None:
                DLPackArray(state["other"]())  # fills the shared entry for the other type
            return "elsewhere"

    class Producer(metaclass=Meta):
        def __dlpack__(self, **kwargs):
            return np.arange(3.0).__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

        def __arrow_c_array__(self, requested_schema=None):
            raise AssertionError("not pyarrow data: read through __dlpack__")

    return Producer, state


def test_a_route_decided_while_the_entry_was_reused_stays_with_its_type():
    """The plain-__dlpack__ route of a producer, decided after its metaclass
    imported an object of a colliding type, is not read for that type."""
    producer, state = _producer_with_reentrant_metaclass()
    other = _colliding_interface_type(producer)
    state["other"] = other
    for _ in range(3):
        a = DLPackArray(producer())
        assert (a.shape, a.dtype.name) == ((3,), "float64")
        b = DLPackArray(other())
        assert (b.shape, b.dtype.name) == ((4,), "int16")


def test_colliding_types_alternate_without_sharing_answers():
    """Two types of one entry, imported in turn, each keep their own route."""
    producer, _ = _producer_with_reentrant_metaclass()
    other = _colliding_interface_type(producer)
    for _ in range(5):
        assert DLPackArray(other()).shape == (4,)
        assert DLPackArray(producer()).shape == (3,)

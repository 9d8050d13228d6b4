"""The per-type route cache in front of ``DLPackArray(obj)``'s ``__dlpack__`` call.

A type whose objects took the plain ``__dlpack__`` route is remembered (with
its version tag) and skips the probes before that call next time.  Every
change to the class or a base must send the next import where an uncached
import goes: each step below mutates one class in place (cached) and compares
the outcome with that of a class built afresh from the same namespace (never
seen before, so never cached).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import require
from dlpack_ctypes import Producer
from exchange_ctypes import CallbackProvider

from dlpackarray import DLPackArray

A = np.arange(1.0)
B = np.arange(2.0)
D = np.arange(4.0)
E = np.arange(6.0)


def dlpack_of(arr):
    def __dlpack__(self, **kwargs):
        return arr.__dlpack__(**kwargs)

    return __dlpack__


def outcome(obj):
    """What an import of ``obj`` gives: the data's address and shape, or the
    error's type and text."""
    try:
        a = DLPackArray(obj)
    except Exception as e:  # the differential compares refusals too
        return type(e), str(e)
    return a.data_ptr, a.shape


def _set(name, value):
    def step(cls, ns):
        setattr(cls, name, value)
        ns[name] = value

    return step


def _del(name):
    def step(cls, ns):
        delattr(cls, name)
        del ns[name]

    return step


def fresh(ns, base_ns):
    """An object of a class built afresh from ``ns`` on a base from ``base_ns``:
    never seen before, so never cached."""
    return type("Src", (type("Base", (), dict(base_ns)),), dict(ns))()


def walk(cls, ns, base_ns, steps):
    """Applies each step to ``cls`` (cached) and ``ns``, and checks that each
    import of ``cls()`` gives what an uncached class's does; returns the
    outcomes, one per step."""
    seen = []
    for label, step in steps:
        step(cls, ns)
        for _ in range(3):  # the first fills the cache, the others hit it
            got = outcome(cls())
            assert got == outcome(fresh(ns, base_ns)), label
        seen.append(got)
    return seen


def test_every_class_change_reroutes_the_next_import():
    p = Producer(np.arange(3.0))
    provider = CallbackProvider(lambda obj: p.address)
    ns = {
        "__dlpack__": dlpack_of(A),
        "__array_interface__": property(lambda self: D.__array_interface__),
    }
    base_ns: dict = {}
    Base = type("Base", (), {})
    Src = type("Src", (Base,), dict(ns))
    steps = [
        ("cached", lambda cls, ns: None),
        ("__dlpack__ replaced", _set("__dlpack__", dlpack_of(B))),
        ("exchange table added", _set("__dlpack_c_exchange_api__", provider.capsule)),
        ("exchange table removed", _del("__dlpack_c_exchange_api__")),
        ("__dlpack__ set to None", _set("__dlpack__", None)),
        ("__dlpack__ restored", _set("__dlpack__", dlpack_of(A))),
        ("__dlpack__ removed", _del("__dlpack__")),
        ("__dlpack__ added back", _set("__dlpack__", dlpack_of(B))),
    ]
    seen = walk(Src, ns, base_ns, steps)
    # The steps lead through different routes (else the test proves nothing).
    assert seen[0] == (A.ctypes.data, (1,))
    assert seen[1] == (B.ctypes.data, (2,))
    assert seen[2][1] == (3,)
    assert seen[4][0] is TypeError
    assert seen[6] == (D.ctypes.data, (4,))
    # A change to a base class changes its subclasses' version tags too.
    Base.__dlpack_c_exchange_api__ = provider.capsule
    base_ns["__dlpack_c_exchange_api__"] = provider.capsule
    got = outcome(Src())
    assert got == outcome(fresh(ns, base_ns))
    assert got[1] == (3,)
    gc.collect()
    assert p.deleter_calls == provider.calls


@pytest.mark.parametrize("count", [7, 200])
def test_colliding_types_each_keep_their_own_route(count):
    # 64 slots: 200 types share them; half take __dlpack__, half their array
    # interface, called in an order that evicts entries between calls.
    arrays = [np.full(i % 5 + 1, float(i)) for i in range(count)]
    types = []
    for i, arr in enumerate(arrays):
        if i % 2:
            ns = {"__array_interface__": property(lambda self, arr=arr: arr.__array_interface__)}
        else:
            ns = {"__dlpack__": dlpack_of(arr)}
        types.append(type(f"T{i}", (), ns))
    for _ in range(3):
        for i in list(range(0, count, 3)) + list(range(1, count, 3)) + list(range(2, count, 3)):
            a = DLPackArray(types[i]())
            assert (a.data_ptr, a.shape) == (arrays[i].ctypes.data, arrays[i].shape)


def test_instance_attributes_are_honoured_alike_cached_or_not():
    # The type decides the route; the call itself is an attribute lookup,
    # which finds an instance's own __dlpack__ (as getattr does).
    def make():
        cls = type("Plain", (), {"__dlpack__": dlpack_of(A)})
        obj = cls()
        obj.__dlpack__ = dlpack_of(B).__get__(obj)
        return cls, obj

    cached, obj = make()
    DLPackArray(cached())  # fills the cache
    want = outcome(make()[1])
    assert outcome(obj) == want == (B.ctypes.data, (2,))


_FIVE: list = []  # one pa.array: every default object reports the same address


class _ArrowCapsules:
    """Arrow PyCapsule methods only (no __dlpack__, no array interface)."""

    def __init__(self, arr=None):
        import pyarrow as pa

        if arr is None and not _FIVE:
            _FIVE.append(pa.array(np.arange(5.0)))
        self._arr = _FIVE[0] if arr is None else pa.array(arr)

    def __arrow_c_schema__(self):
        return self._arr.__arrow_c_schema__()

    def __arrow_c_array__(self, requested_schema=None):
        return self._arr.__arrow_c_array__(requested_schema)


def arrow_device_array_of(values):
    import pyarrow as pa

    column = pa.array(values)  # one column: each import reads the same address

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return column.__arrow_c_device_array__(requested_schema, **kwargs)

    return __arrow_c_device_array__


def test_instance_probe_route_is_rerouted_by_every_class_change():
    # Types whose objects reach the instance probes (an Arrow-only class) skip
    # the type checks in front of them next time; every change to the class
    # or a base must send the next import where an uncached import goes.
    require("pyarrow", "an Arrow-only class reaches the instance probes")
    p = Producer(np.arange(3.0))
    provider = CallbackProvider(lambda obj: p.address)
    ns = {
        "__init__": _ArrowCapsules.__init__,
        "__arrow_c_schema__": _ArrowCapsules.__arrow_c_schema__,
        "__arrow_c_array__": _ArrowCapsules.__arrow_c_array__,
    }
    base_ns: dict = {}
    Base = type("Base", (), {})
    Src = type("Src", (Base,), dict(ns))
    steps = [
        ("cached", lambda cls, ns: None),
        ("__dlpack__ added", _set("__dlpack__", dlpack_of(B))),
        ("__dlpack__ removed", _del("__dlpack__")),
        ("exchange table added", _set("__dlpack_c_exchange_api__", provider.capsule)),
        ("exchange table removed", _del("__dlpack_c_exchange_api__")),
        (
            "array interface added",
            _set("__array_interface__", property(lambda s: D.__array_interface__)),
        ),
        ("array interface removed", _del("__array_interface__")),
        # The cached route holds the class's Arrow method mask too.
        ("Arrow device array added", _set("__arrow_c_device_array__", arrow_device_array_of(E))),
        ("Arrow device array removed", _del("__arrow_c_device_array__")),
        ("Arrow methods removed", _del("__arrow_c_array__")),
    ]
    seen = walk(Src, ns, base_ns, steps)
    assert seen[0][1] == (5,)
    assert seen[1] == (B.ctypes.data, (2,))
    assert seen[3][1] == (3,)
    assert seen[5] == (D.ctypes.data, (4,))
    assert seen[7][1] == (6,) and seen[8][1] == (5,) and seen[7][0] != seen[8][0]
    assert seen[9][0] is TypeError
    # A change to a base class changes its subclasses' version tags too.
    Src.__arrow_c_array__ = ns["__arrow_c_array__"] = _ArrowCapsules.__arrow_c_array__
    outcome(Src())
    Base.__dlpack__ = base_ns["__dlpack__"] = dlpack_of(A)
    got = outcome(Src())
    assert got == outcome(fresh(ns, base_ns))
    assert got == (A.ctypes.data, (1,))
    gc.collect()
    assert p.deleter_calls == provider.calls


def test_instance_probes_still_run_for_every_object_of_a_cached_type():
    require("pyarrow", "an Arrow-only class reaches the instance probes")
    cls = type("Arrowish", (_ArrowCapsules,), {})
    for _ in range(3):
        assert DLPackArray(cls()).shape == (5,)  # cached after the first
    obj = cls()
    obj.__array_interface__ = D.__array_interface__  # the instance's own, as NumPy reads
    assert outcome(obj) == (D.ctypes.data, (4,))
    assert DLPackArray(cls(np.arange(7.0))).shape == (7,)


def test_from_dlpack_of_a_cached_type_still_refuses():
    require("pyarrow", "an Arrow-only class reaches the instance probes")
    from dlpackarray import from_dlpack

    cls = type("ArrowOnlyAgain", (_ArrowCapsules,), {})
    DLPackArray(cls())
    DLPackArray(cls())
    with pytest.raises(AttributeError, match="has no attribute '__dlpack__'"):
        from_dlpack(cls())

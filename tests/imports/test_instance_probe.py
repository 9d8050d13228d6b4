"""The interface probes of ``DLPackArray(obj)``: a type whose attribute lookup
is the generic one, whose MRO defines none of ``__cuda_array_interface__``,
``__array_struct__``, ``__array_interface__`` and whose instances have no
``__dict__`` skips them, and the import caches per type what it may skip.
Whatever the object, the route and the data must be those of the plain
``getattr(obj, name, None)`` precedence, however the instance, its class or
its bases change between imports."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray

CAI, STRUCT, IFACE = "__cuda_array_interface__", "__array_struct__", "__array_interface__"
NAMES = (CAI, STRUCT, IFACE)

# One source per route, each recognisable by its shape, dtype and device.
STRUCT_SRC = np.arange(3, dtype=np.float32)
IFACE_SRC = np.arange(4, dtype=np.int16).reshape(2, 2)
ARROW_SRC = np.arange(5, dtype=np.float64)
# Zero elements: imports (as CUDA memory) without a driver, nothing is read.
GOOD = {
    CAI: {"shape": (0, 7), "typestr": "<f4", "data": (0, False), "version": 3},
    STRUCT: STRUCT_SRC.__array_struct__,
    IFACE: IFACE_SRC.__array_interface__,
}
ROUTE_OF = {CAI: "cuda", STRUCT: "struct", IFACE: "iface"}


def fingerprint(d: DLPackArray) -> tuple:
    """Which source ``d`` views: shape, dtype, device and data address."""
    device = d.__dlpack_device__()
    address = np.asarray(d).__array_interface__["data"][0] if d.size else None
    return (d.shape, str(d.dtype), device[0], address)


EXPECTED = {
    "cuda": ((0, 7), "float32", 2, None),
    "struct": ((3,), "float32", 1, STRUCT_SRC.__array_interface__["data"][0]),
    "iface": ((2, 2), "int16", 1, IFACE_SRC.__array_interface__["data"][0]),
    "arrow": ((5,), "float64", 1, ARROW_SRC.__array_interface__["data"][0]),
}


def reference(obj) -> tuple:
    """The documented precedence in plain Python: the first of the three
    instance lookups that is not None, else the class's Arrow capsules."""
    for name in NAMES:
        try:
            value = getattr(obj, name, None)
        except Exception as e:
            return ("raises", type(e))
        if value is not None:
            assert value is GOOD[name], "the tests set only the good values"
            return EXPECTED[ROUTE_OF[name]]
    if hasattr(type(obj), "__arrow_c_array__"):
        return EXPECTED["arrow"]
    return ("raises", TypeError)


def ours(obj) -> tuple:
    try:
        return fingerprint(DLPackArray(obj))
    except Exception as e:
        return ("raises", type(e))


def arrow_c_array(self, requested_schema=None):
    return DLPackArray(ARROW_SRC).__arrow_c_array__(requested_schema)


class Odd(dict):
    """An instance dict that is a dict subclass: the generic lookup ignores
    its overrides, and so must the import."""

    def __getitem__(self, key):
        return GOOD[IFACE]

    def __missing__(self, key):
        return GOOD[STRUCT]


def _raise_attribute_error(self):
    raise AttributeError("computed: absent")


def _raise_value_error(self):
    raise ValueError("computed: broken")


def _getattr_hook(self, name):
    if name == IFACE and self.__class__.__dict__.get("serve", True):
        return GOOD[IFACE]
    raise AttributeError(name)


# Class bodies: (name, bases, namespace), made afresh for every example so
# that each starts with types the per-type cache has never seen.
def _kinds():
    arrow = {"__arrow_c_array__": arrow_c_array}
    return {
        "arrow_only": ((), dict(arrow)),
        "arrow_only_init": ((), {**arrow, "__init__": lambda self: setattr(self, "src", 1)}),
        "no_protocol": ((), {}),
        "slots": ((), {**arrow, "__slots__": ("src", "other")}),
        "slots_named": ((), {**arrow, "__slots__": ("src", STRUCT)}),
        "slots_dict": ((), {**arrow, "__slots__": ("src", "__dict__")}),
        "getattr_hook": ((), {**arrow, "__getattr__": _getattr_hook}),
        "property_absent": ((), {**arrow, STRUCT: property(_raise_attribute_error)}),
        "property_raises": ((), {**arrow, IFACE: property(_raise_value_error)}),
        "class_attr": ((), {**arrow, CAI: None}),
        "int_subclass": ((int,), dict(arrow)),
        "list_subclass": ((list,), dict(arrow)),
    }


NAME = st.sampled_from(NAMES + ("src", "other", "x"))
VALUE = st.sampled_from(["good", None])
OPS = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 3), NAME, VALUE),
    st.tuples(st.just("del"), st.integers(0, 3), NAME),
    st.tuples(st.just("many"), st.integers(0, 3), st.integers(1, 40)),
    st.tuples(st.just("vars"), st.integers(0, 3)),
    st.tuples(st.just("dict_item"), st.integers(0, 3), NAME, VALUE),
    st.tuples(st.just("new_dict"), st.integers(0, 3), st.sampled_from(["plain", "odd", "iface"])),
    st.tuples(st.just("del_dict"), st.integers(0, 3)),
    st.tuples(st.just("class_set"), st.booleans(), NAME, VALUE),
    st.tuples(st.just("class_del"), st.booleans(), NAME),
    st.tuples(st.just("serve"), st.booleans()),
    st.tuples(st.just("reclass"), st.integers(0, 3)),
)


def _value(name, choice):
    return GOOD.get(name, 1) if choice == "good" else None


def _apply(op, objs, cls, base, sub):
    kind, *args = op
    if kind == "set":
        i, name, choice = args
        setattr(objs[i], name, _value(name, choice))
    elif kind == "del":
        delattr(objs[args[0]], args[1])
    elif kind == "many":  # fills the shared keys: past their size, a dict
        for k in range(args[1]):
            setattr(objs[args[0]], f"attr{k}", k)
    elif kind == "vars":
        vars(objs[args[0]])  # materialises a dict from inline values
    elif kind == "dict_item":  # a key the generic setattr did not intern
        i, name, choice = args
        vars(objs[i])["".join(list(name))] = _value(name, choice)
    elif kind == "new_dict":
        i, which = args
        objs[i].__dict__ = {"plain": {}, "odd": Odd(), "iface": {IFACE: GOOD[IFACE]}}[which]
    elif kind == "del_dict":
        del objs[args[0]].__dict__
    elif kind == "class_set":  # on the class, or on its base (subclasses' tags change)
        on_base, name, choice = args
        setattr(base if on_base else cls, name, _value(name, choice))
    elif kind == "class_del":
        on_base, name = args
        delattr(base if on_base else cls, name)
    elif kind == "serve":
        cls.serve = args[0]
    elif kind == "reclass":  # between the class and its subclass (same layout)
        obj = objs[args[0]]
        obj.__class__ = cls if type(obj) is sub else sub


def _new(cls):
    if issubclass(cls, int):
        return cls(7)
    return cls()


@pytest.mark.parametrize("kind", sorted(_kinds()))
@settings(max_examples=min(settings.default.max_examples, 300))  # per kind: 12 kinds
@given(ops=st.lists(OPS, max_size=25))
def test_route_matches_plain_getattr_precedence(kind, ops):
    bases, namespace = _kinds()[kind]
    # A slotted class's base has no dict either (else the slots add nothing).
    base = type("Base", bases, {"__slots__": ()} if "__slots__" in namespace else {})
    cls = type(kind, (base,), namespace)
    sub = type(kind + "2", (cls,), {"__slots__": ()} if "__slots__" in namespace else {})
    objs = [_new(cls) for _ in range(3)] + [_new(sub)]
    for op in ops:
        try:
            _apply(op, objs, cls, base, sub)
        except (AttributeError, TypeError):
            pass  # not allowed on this kind (slots, no dict, ...): nothing changed
        # Every object after every change: the per-type answer of one import
        # must not stand for another instance or a later state.
        for obj in objs:
            assert ours(obj) == reference(obj), (op, obj.__class__.__name__)


def test_arrow_only_instance_attributes_win_after_cached_imports():
    """An Arrow-only class whose answers are cached: an instance attribute set
    later, on this or another instance, takes precedence where set, and
    only there."""

    class ArrowOnly:
        __arrow_c_array__ = arrow_c_array

        def __init__(self):
            self.src = 1

    a, b = ArrowOnly(), ArrowOnly()
    for _ in range(3):  # cached after the first
        assert ours(a) == ours(b) == EXPECTED["arrow"]
    for name, route in ((IFACE, "iface"), (STRUCT, "struct"), (CAI, "cuda")):
        setattr(a, name, GOOD[name])
        assert ours(a) == EXPECTED[route]
        assert ours(b) == EXPECTED["arrow"]
    for name in NAMES:
        delattr(a, name)
    assert ours(a) == ours(b) == EXPECTED["arrow"]
    c = ArrowOnly()
    c.__array_interface__ = None  # present but None: as absent
    assert ours(c) == EXPECTED["arrow"]


def test_class_attribute_added_after_cached_imports():
    class ArrowOnly:
        __arrow_c_array__ = arrow_c_array

    class Child(ArrowOnly):
        pass

    a, c = ArrowOnly(), Child()
    assert ours(a) == ours(c) == EXPECTED["arrow"]
    ArrowOnly.__array_struct__ = GOOD[STRUCT]
    assert ours(a) == ours(c) == EXPECTED["struct"]
    del ArrowOnly.__array_struct__
    assert ours(a) == ours(c) == EXPECTED["arrow"]
    ArrowOnly.__array_interface__ = property(lambda self: GOOD[IFACE])
    assert ours(a) == ours(c) == EXPECTED["iface"]


def test_getattr_and_getattribute_classes_keep_the_full_lookup():
    class Hook:
        __arrow_c_array__ = arrow_c_array

        def __getattr__(self, name):
            if name == STRUCT:
                return GOOD[STRUCT]
            raise AttributeError(name)

    class Every:
        __arrow_c_array__ = arrow_c_array

        def __getattribute__(self, name):
            if name == CAI:
                return GOOD[CAI]
            return object.__getattribute__(self, name)

    assert ours(Hook()) == EXPECTED["struct"]
    assert ours(Every()) == EXPECTED["cuda"]
    Hook.__getattr__ = lambda self, name: (_ for _ in ()).throw(AttributeError(name))
    assert ours(Hook()) == EXPECTED["arrow"]

    class Base:
        pass

    class Arrow(Base):
        __arrow_c_array__ = arrow_c_array

    a = Arrow()
    assert ours(a) == EXPECTED["arrow"]
    Base.__getattr__ = lambda self, name: GOOD[IFACE] if name == IFACE else None
    assert ours(a) == EXPECTED["iface"]  # a hook added to a base after cached imports

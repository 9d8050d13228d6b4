"""Protocol methods that raise, return junk, recurse or mutate what is being
read: ``__dlpack__``, ``__array__``, ``__array_interface__`` and
``__array_struct__`` implemented in Python."""

from __future__ import annotations

import numpy as np
from cases import Case

_BUF = np.arange(4.0)

_ERRORS = (
    ValueError,
    TypeError,
    BufferError,
    RuntimeError,
    KeyError,
    MemoryError,
    ZeroDivisionError,
    OverflowError,
)


def _wrap(make, path="init"):
    def body():
        import dlpackarray

        obj = make()
        if path == "init":
            return dlpackarray.DLPackArray(obj)
        return dlpackarray.from_dlpack(obj)

    return body


class _Dlpack:
    def __init__(self, result=None, error=None):
        self.result = result
        self.error = error

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.error is not None:
            raise self.error
        return self.result() if callable(self.result) else self.result

    def __dlpack_device__(self):
        return (1, 0)


class _Recursive:
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        import dlpackarray

        return dlpackarray.DLPackArray(self).__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)


class _Array:
    def __init__(self, result):
        self.result = result

    def __array__(self, dtype=None, copy=None):
        if isinstance(self.result, BaseException):
            raise self.result
        return self if self.result == "self" else self.result


class _RaisingInterface:
    def __init__(self, error):
        self.error = error

    @property
    def __array_interface__(self):
        raise self.error


class _RaisingStruct:
    def __init__(self, error):
        self.error = error

    @property
    def __array_struct__(self):
        raise self.error


class _Iface:
    def __init__(self, iface):
        self.__array_interface__ = iface
        self.keep = _BUF


class _ShiftyInterface:
    """Valid the first time it is read, raises afterwards."""

    def __init__(self):
        self.reads = 0

    @property
    def __array_interface__(self):
        self.reads += 1
        if self.reads > 1:
            raise RuntimeError("read twice")
        return dict(_BUF.__array_interface__)


class _SelfData:
    @property
    def __array_interface__(self):
        return {"version": 3, "shape": (4,), "typestr": "<f8", "data": self}


class _ClearingIndex:
    """An index that empties the dictionary being read."""

    def __init__(self, target, value):
        self.target = target
        self.value = value

    def __index__(self):
        self.target.clear()
        return self.value


class _RaisingIndex:
    def __index__(self):
        raise ZeroDivisionError("index boom")


class _AccessorDict(dict):
    """A dict subclass whose Python-level accessors lie: the C-level
    contents are what a consumer reads."""

    def __getitem__(self, key):
        raise KeyError("getitem boom")

    def get(self, key, default=None):
        raise RuntimeError("get boom")

    def __len__(self):
        return 0


def _f64(shape=(4,), strides=(1,)):
    return {
        "shape": list(shape),
        "strides": list(strides),
        "dtype": "float64",
        "device": [1, 0],
        "readonly": False,
    }


def _clearing_shape():
    iface = dict(_BUF.__array_interface__)
    iface["shape"] = (_ClearingIndex(iface, 4),)
    return _Iface(iface)


def _clearing_strides():
    iface = dict(_BUF.__array_interface__)
    iface["strides"] = (_ClearingIndex(iface, 8),)
    return _Iface(iface)


def _raising_index(key):
    iface = dict(_BUF.__array_interface__)
    iface[key] = (_RaisingIndex(),)
    return _Iface(iface)


def _rewriting_typestr():
    iface = dict(_BUF.__array_interface__)
    iface["shape"] = (_TypestrSwap(iface),)
    return _Iface(iface)


class _TypestrSwap:
    """An index that rewrites the typestr after the shape entry is read."""

    def __init__(self, target):
        self.target = target

    def __index__(self):
        self.target["typestr"] = "|O8"
        return 4


def cases():
    out = []

    def add(cid, body, exc=None, match=None, value=None):
        out.append(Case(f"protocol/{cid}", body, exc, match, value=value))

    for path in ("init", "from_dlpack"):
        for err in _ERRORS:
            add(
                f"{path}/dlpack_raises/{err.__name__}",
                _wrap(lambda err=err: _Dlpack(error=err("producer boom")), path),
                err,
                "producer boom",
            )
        for label, junk in (
            ("None", None),
            ("int", 3),
            ("str", "capsule"),
            ("bytes", b""),
            ("object", object),
            ("list", list),
        ):
            add(
                f"{path}/dlpack_returns/{label}",
                _wrap(lambda junk=junk: _Dlpack(result=junk), path),
                TypeError,
                "expected a DLPack PyCapsule, got a",
            )
        add(
            f"{path}/dlpack_returns/struct_capsule",
            _wrap(lambda: _Dlpack(result=lambda: np.arange(3).__array_struct__), path),
            TypeError,
            r"a PyCapsule named None is not a DLPack tensor capsule",
        )
        add(
            f"{path}/dlpack_recurses",
            _wrap(_Recursive, path),
            RecursionError,
            "maximum recursion depth exceeded",
        )

    for label, result in (
        ("self", "self"),
        ("None", None),
        ("list", [1.0, 2.0]),
        ("int", 3),
        ("str", "x"),
        ("dict", {"shape": (1,)}),
    ):
        add(
            f"array_returns/{label}",
            _wrap(lambda result=result: _Array(result)),
            TypeError,
            r"_Array.__array__\(\) returned a '\w+' object, which exposes none of __dlpack__",
        )
    for err in (ValueError, TypeError, RuntimeError):
        add(
            f"array_raises/{err.__name__}",
            _wrap(lambda err=err: _Array(err("array boom"))),
            err,
            "array boom",
        )

    for err in _ERRORS:
        add(
            f"interface_raises/{err.__name__}",
            _wrap(lambda err=err: _RaisingInterface(err("interface boom"))),
            err,
            "interface boom",
        )
        add(
            f"struct_raises/{err.__name__}",
            _wrap(lambda err=err: _RaisingStruct(err("struct boom"))),
            err,
            "struct boom",
        )
    # AttributeError from a property is "no such protocol" (getattr semantics).
    for make, label in ((_RaisingInterface, "interface"), (_RaisingStruct, "struct")):
        add(
            f"{label}_raises/AttributeError",
            _wrap(lambda make=make: make(AttributeError("gone"))),
            TypeError,
            "implements none of __dlpack__, __array_struct__, __array_interface__",
        )

    add(
        "interface_read_once",
        _wrap(_ShiftyInterface),
        value=_f64(),
    )
    add(
        "interface_data_is_self",
        _wrap(_SelfData),
        TypeError,
        r"'data' must be None, a \(pointer, readonly\) tuple or a buffer object, got _SelfData",
    )
    add(
        "interface_accessors_lie",
        _wrap(lambda: _Iface(_AccessorDict(_BUF.__array_interface__))),
        value=_f64(),
    )
    add(
        "interface_index_clears_dict/shape",
        _wrap(_clearing_shape),
        TypeError,
        "has no 'data' and the object exposes no buffer",
    )
    add(
        "interface_index_clears_dict/strides",
        _wrap(_clearing_strides),
        TypeError,
        "has no 'data' and the object exposes no buffer",
    )
    for key in ("shape", "strides"):
        add(
            f"interface_index_raises/{key}",
            _wrap(lambda key=key: _raising_index(key)),
            ZeroDivisionError,
            "index boom",
        )
    # The typestr is read before the shape: the rewrite comes too late to matter.
    add(
        "interface_index_rewrites_typestr",
        _wrap(_rewriting_typestr),
        value=_f64(),
    )
    return out
